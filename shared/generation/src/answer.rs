//! Reading a model's answer into HDL: the structured JSON asked for with `response_format`, or,
//! when the server does not do structured output (or the model ignored it), fenced code blocks.
//! Pure, and bounded by [`Limits`].

use openqq_core::generation::GenerationError;

use crate::extract;
use crate::settings::Limits;
use crate::wire::StructuredAnswer;

/// The usable part of an answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub verilog: String,
    pub pcf: Option<String>,
    pub top: String,
}

/// `content` read as the answer to a request for `top` (when the request named one).
/// `structured` says whether JSON was asked for: then JSON is read first, and text that is not
/// JSON falls back to fenced blocks (servers that accept `response_format` but do not enforce
/// it); a JSON object missing a field is unusable.
pub(crate) fn read(
    content: &str,
    structured: bool,
    top: Option<&str>,
    limits: &Limits,
) -> Result<Answer, GenerationError> {
    let answer = if structured {
        match serde_json::from_str::<serde_json::Value>(content.trim()) {
            Ok(value) if value.is_object() => from_json(value, top)?,
            _ => from_fences(content, top, limits).map_err(|e| match e {
                GenerationError::Malformed { message, .. } => {
                    GenerationError::malformed(format!("the answer is not JSON and {message}"))
                }
                other => other,
            })?,
        }
    } else {
        from_fences(content, top, limits)?
    };
    if answer.verilog.len() as u64 > limits.max_verilog_bytes {
        return Err(GenerationError::TooLarge { what: "the generated Verilog", limit: limits.max_verilog_bytes });
    }
    if answer.verilog.trim().is_empty() {
        return Err(GenerationError::malformed("the answer's Verilog is empty"));
    }
    Ok(answer)
}

fn from_json(value: serde_json::Value, top: Option<&str>) -> Result<Answer, GenerationError> {
    let parsed: StructuredAnswer = serde_json::from_value(value).map_err(|e| GenerationError::Malformed {
        message: "the JSON answer does not have the fields asked for".into(),
        source: Some(Box::new(e)),
    })?;
    let pcf = parsed.pcf.filter(|p| !p.trim().is_empty());
    Ok(Answer { verilog: parsed.verilog, pcf, top: top.map_or(parsed.top, str::to_owned) })
}

fn from_fences(content: &str, top: Option<&str>, limits: &Limits) -> Result<Answer, GenerationError> {
    let blocks = extract::fenced_blocks(content, limits.max_fenced_blocks).map_err(|_| {
        GenerationError::malformed(format!("the answer has more than {} fenced blocks", limits.max_fenced_blocks))
    })?;
    let design = extract::design_block(&blocks, top)
        .ok_or_else(|| GenerationError::malformed("has no fenced block of Verilog declaring a module"))?;
    let top = match top {
        Some(top) => top.to_owned(),
        None => extract::top_module(&design.body)
            .ok_or_else(|| GenerationError::malformed("the Verilog declares no module"))?,
    };
    let pcf = extract::pcf_block(&blocks).map(|b| b.body.clone());
    Ok(Answer { verilog: design.body.clone(), pcf, top })
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNTER: &str =
        "module counter(input clk, output reg [3:0] q);\n  always @(posedge clk) q <= q + 1;\nendmodule\n";

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn a_structured_answer_is_read_from_json() {
        let content = serde_json::json!({"verilog": COUNTER, "pcf": null, "top": "counter"}).to_string();
        let answer = read(&content, true, None, &limits()).unwrap();
        assert_eq!(answer, Answer { verilog: COUNTER.into(), pcf: None, top: "counter".into() });
    }

    #[test]
    fn json_missing_a_field_is_malformed_with_the_json_error_as_source() {
        let content = serde_json::json!({"verilog": COUNTER}).to_string();
        let e = read(&content, true, None, &limits()).unwrap_err();
        assert_eq!(e.label(), "malformed");
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn text_that_is_not_json_falls_back_to_fenced_blocks() {
        let content = format!("Sure:\n```verilog\n{COUNTER}```\n");
        assert_eq!(read(&content, true, None, &limits()).unwrap().top, "counter");
    }

    #[test]
    fn an_answer_with_no_code_block_is_malformed() {
        let e = read("I cannot help with that.", true, None, &limits()).unwrap_err();
        assert_eq!(e.to_string(), "the model's answer is unusable: the answer is not JSON and has no fenced block of Verilog declaring a module");
        assert_eq!(read("no code", false, None, &limits()).unwrap_err().label(), "malformed");
    }

    #[test]
    fn the_requested_top_wins_over_the_models() {
        let content = serde_json::json!({"verilog": COUNTER, "pcf": "set_io q[0] 1", "top": "other"}).to_string();
        let answer = read(&content, true, Some("counter"), &limits()).unwrap();
        assert_eq!((answer.top.as_str(), answer.pcf.as_deref()), ("counter", Some("set_io q[0] 1")));
    }

    #[test]
    fn verilog_over_the_limit_is_refused() {
        let limits = Limits { max_verilog_bytes: 10, ..Limits::default() };
        let content = serde_json::json!({"verilog": COUNTER, "pcf": null, "top": "counter"}).to_string();
        assert_eq!(read(&content, true, None, &limits).unwrap_err().label(), "too_large");
    }
}
