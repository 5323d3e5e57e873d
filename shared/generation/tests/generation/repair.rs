//! The repair loop's side of the server: broken, not equivalent, fixed after feedback.

use openqq_core::generation::{FailedStage, Feedback, GenerationBackend};
use openqq_generation::test_server::Reply;

use crate::helpers::{counter, spawn, COUNTER, COUNTER_BROKEN, COUNTER_NOT_EQUIVALENT};

#[tokio::test]
async fn broken_code_first_then_the_fix_once_the_request_carries_feedback() {
    let app = spawn(|o| {
        o.per_design.insert("counter".into(), Reply::BrokenThenFixed.into());
    })
    .await;
    let backend = app.backend(|_| {});
    let first = backend.generate(&counter()).await.unwrap();
    assert_eq!(first.verilog, COUNTER_BROKEN);

    let feedback = Feedback::new(FailedStage::Synthesis, ["ERROR: syntax error, unexpected ';' at line 2"]);
    let fixed = backend.generate(&counter().repair(feedback)).await.unwrap();
    assert_eq!(fixed.verilog, COUNTER);

    let stats = app.server.stats();
    assert_eq!(stats.with_feedback, 1);
    let prompt = stats.last_prompt.unwrap();
    assert!(prompt.contains("failed at synthesis") && prompt.contains("unexpected ';'"), "{prompt}");
}

#[tokio::test]
async fn code_that_is_not_equivalent_is_answered_as_scripted() {
    let app = spawn(|o| {
        o.per_design.insert("counter".into(), Reply::NotEquivalent.into());
    })
    .await;
    let generated = app.backend(|_| {}).generate(&counter()).await.unwrap();
    assert_eq!((generated.verilog.as_str(), generated.top.as_str()), (COUNTER_NOT_EQUIVALENT, "counter"));
}
