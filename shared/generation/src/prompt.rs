//! The messages sent to the model: a system message saying what to produce and how to shape it,
//! and a user message with the target, the top, the constraints, the tenant's prompt and, for a
//! repair, the latest failure. Pure: tested without a server.

use openqq_core::generation::GenerationRequest;

use crate::wire::Message;

/// The line that opens the feedback section of a repair prompt (the test server looks for it to
/// know a request is a repair).
pub const FEEDBACK_HEADING: &str = "The previous attempt failed at";

/// The system and user messages for `req`; `structured` says whether the answer is asked for as
/// JSON (`response_format`) or as fenced code blocks.
pub(crate) fn messages(req: &GenerationRequest, structured: bool) -> Vec<Message> {
    vec![Message::new("system", system(req, structured)), Message::new("user", user(req))]
}

fn system(req: &GenerationRequest, structured: bool) -> String {
    let mut text = format!(
        "You are an FPGA design engineer. You write synthesizable Verilog-2005 for the {} FPGA family, \
         using only primitives that family provides. Give the complete design: every module it needs, \
         no testbench, no simulation-only constructs.\n",
        req.target_family
    );
    if structured {
        text.push_str(
            "Answer with JSON: `verilog` holds the whole source, `top` the top module's name, `pcf` a \
             pin constraints file if one is needed (otherwise null).",
        );
    } else {
        text.push_str(
            "Put the whole Verilog source in one ```verilog fenced block. If pins must be constrained, \
             put a pin constraints file in one ```pcf fenced block. Write nothing else in fenced blocks.",
        );
    }
    text
}

fn user(req: &GenerationRequest) -> String {
    let mut text = format!("Target FPGA family: {}\n", req.target_family);
    match &req.top {
        Some(top) => text.push_str(&format!("Top module: {top} (use exactly this name)\n")),
        None => text.push_str("Top module: choose a name and say which module is the top\n"),
    }
    if let Some(constraints) = &req.constraints {
        text.push_str(&format!("\nConstraints:\n{}\n", constraints.trim_end()));
    }
    text.push_str(&format!("\nDesign:\n{}\n", req.prompt.trim_end()));
    if let Some(feedback) = &req.feedback {
        text.push_str(&format!("\n{FEEDBACK_HEADING} {}. Fix the design; the tools reported:\n", feedback.stage));
        for message in &feedback.messages {
            text.push_str(&format!("- {message}\n"));
        }
        if feedback.omitted > 0 {
            text.push_str(&format!("(and {} more messages)\n", feedback.omitted));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use openqq_core::generation::{FailedStage, Feedback};

    use super::*;

    fn request() -> GenerationRequest {
        GenerationRequest {
            top: Some("blinky".into()),
            constraints: Some("clk at 12 MHz".into()),
            ..GenerationRequest::new("Blink an LED at 1 Hz.", "ice40")
        }
    }

    #[test]
    fn the_user_message_names_the_family_top_constraints_and_prompt() {
        let user = &messages(&request(), true)[1];
        assert_eq!(user.role, "user");
        for part in ["ice40", "Top module: blinky", "clk at 12 MHz", "Blink an LED at 1 Hz."] {
            assert!(user.content.contains(part), "{part} missing from {}", user.content);
        }
        assert!(!user.content.contains(FEEDBACK_HEADING));
    }

    #[test]
    fn a_plain_prompt_asks_for_fenced_blocks_and_a_structured_one_for_json() {
        assert!(messages(&request(), false)[0].content.contains("```verilog"));
        assert!(messages(&request(), true)[0].content.contains("JSON"));
    }

    #[test]
    fn a_repair_carries_only_the_latest_feedback() {
        let once = request().repair(Feedback::new(FailedStage::Synthesis, ["first failure"]));
        let twice = once.repair(Feedback::new(FailedStage::Testbench, (0..22).map(|i| format!("tb error {i}"))));
        let user = &messages(&twice, true)[1].content;
        assert!(user.contains("The previous attempt failed at testbench"));
        assert!(user.contains("- tb error 0\n"));
        assert!(user.contains("(and 2 more messages)"));
        assert!(!user.contains("first failure"));
    }
}
