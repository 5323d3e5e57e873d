//! Bounds on what an answer may cost to read.

use openqq_core::generation::{GenerationBackend, GenerationError};
use openqq_generation::test_server::{Reply, Step};
use openqq_generation::Limits;

use crate::helpers::{counter, spawn};

#[tokio::test]
async fn a_huge_body_is_refused_and_not_retried() {
    let app = spawn(|o| o.default = Step::new(Reply::Huge { bytes: 1 << 20 })).await;
    let backend = app.backend(|s| s.limits = Limits { max_body_bytes: 64 << 10, ..Limits::default() });
    let e = backend.generate(&counter()).await.unwrap_err();
    assert!(matches!(e, GenerationError::TooLarge { what: "the response body", limit } if limit == 64 << 10), "{e:?}");
    assert!(!e.is_retriable());
    assert_eq!(app.server.requests(), 1);
}

#[tokio::test]
async fn verilog_over_the_limit_is_refused() {
    let app = spawn(|_| {}).await;
    let backend = app.backend(|s| s.limits = Limits { max_verilog_bytes: 16, ..Limits::default() });
    let e = backend.generate(&counter()).await.unwrap_err();
    assert!(matches!(e, GenerationError::TooLarge { what: "the generated Verilog", .. }), "{e:?}");
}
