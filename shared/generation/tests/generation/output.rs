//! Reading answers: structured output, the fenced-block fallback, malformed answers.

use openqq_core::generation::{GenerationBackend, GenerationRequest};
use openqq_generation::test_server::{Reply, Step};

use crate::helpers::{counter, spawn, BLINKY, BLINKY_PCF, COUNTER};

#[tokio::test]
async fn a_structured_answer_is_parsed_into_verilog_top_and_usage() {
    let app = spawn(|_| {}).await;
    let backend = app.backend(|_| {});
    let generated = backend.generate(&counter()).await.unwrap();
    assert_eq!(generated.verilog, COUNTER);
    assert_eq!(generated.top, "counter");
    assert_eq!(generated.pcf, None);
    assert!(generated.usage.prompt_tokens > 0 && generated.usage.completion_tokens > 0);
    let stats = app.server.stats();
    assert_eq!((stats.requests, stats.structured), (1, 1));
    assert!(backend.uses_structured_output());
}

#[tokio::test]
async fn the_model_names_the_top_when_the_request_does_not() {
    let app = spawn(|_| {}).await;
    let req = GenerationRequest::new("Blink an LED: a blinky with a divider.", "ice40");
    let generated = app.backend(|_| {}).generate(&req).await.unwrap();
    assert_eq!((generated.verilog.as_str(), generated.top.as_str()), (BLINKY, "blinky"));
    assert_eq!(generated.pcf.as_deref(), Some(BLINKY_PCF));
    assert_eq!(app.server.stats().by_design.get("blinky"), Some(&1));
}

#[tokio::test]
async fn a_refused_response_format_falls_back_to_fenced_blocks_and_is_remembered() {
    let app = spawn(|o| o.refuse_response_format = true).await;
    let backend = app.backend(|_| {});
    let req = GenerationRequest::new("a blinky", "ice40");
    let generated = backend.generate(&req).await.unwrap();
    assert_eq!((generated.verilog.as_str(), generated.top.as_str()), (BLINKY, "blinky"));
    assert_eq!(generated.pcf.as_deref(), Some(BLINKY_PCF));
    assert!(!backend.uses_structured_output());
    assert_eq!(app.server.requests(), 2, "one refused, one plain");

    backend.generate(&counter()).await.unwrap();
    let stats = app.server.stats();
    assert_eq!((stats.requests, stats.structured), (3, 1), "the second call goes plain at once");
}

#[tokio::test]
async fn not_json_missing_fields_and_no_code_block_are_malformed_and_not_retried() {
    let app = spawn(|o| o.refuse_response_format = false).await;
    let backend = app.backend(|_| {});
    app.server.push([Reply::NotJson, Reply::MissingFields].map(Step::new));
    for expected in ["the answer is not JSON", "does not have the fields"] {
        let e = backend.generate(&counter()).await.unwrap_err();
        assert_eq!(e.label(), "malformed");
        assert!(!e.is_retriable());
        assert!(e.to_string().contains(expected), "{e}");
    }
    app.server.refuse_response_format(true);
    app.server.push([Step::new(Reply::NoCodeBlock)]);
    // The refusal, then the answer without a code block.
    let e = backend.generate(&counter()).await.unwrap_err();
    assert!(e.to_string().contains("no fenced block"), "{e}");
    assert_eq!(app.server.requests(), 4);
    assert_eq!(backend.breaker_state(), openqq_generation::BreakerState::Closed { failures: 0 });
}

#[tokio::test]
async fn a_request_naming_no_known_design_is_rejected() {
    let app = spawn(|_| {}).await;
    let e = app.backend(|_| {}).generate(&GenerationRequest::new("a RISC-V core", "ice40")).await.unwrap_err();
    assert_eq!(e.label(), "rejected");
    assert!(!e.is_retriable());
}
