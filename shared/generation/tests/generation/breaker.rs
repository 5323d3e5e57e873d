//! The circuit breaker and the fallback backend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use openqq_core::generation::{GenerationBackend, GenerationError};
use openqq_generation::test_server::{Reply, Step};
use openqq_generation::{BreakerSettings, BreakerState, FallbackBackend, OpenAiSettings};

use crate::helpers::{counter, spawn, COUNTER};

fn quick_breaker(s: &mut OpenAiSettings) {
    s.max_retries = 0;
    s.breaker = BreakerSettings { failure_threshold: 2, cool_down: Duration::from_millis(300) };
}

#[tokio::test]
async fn the_breaker_opens_after_n_failures_refuses_fast_and_closes_after_a_probe() {
    let app = spawn(|o| o.default = Step::new(Reply::ServerError { status: 502 })).await;
    let backend = app.backend(quick_breaker);
    for _ in 0..2 {
        assert_eq!(backend.generate(&counter()).await.unwrap_err().label(), "unavailable");
    }
    assert_eq!(backend.breaker_state(), BreakerState::Open);

    let started = Instant::now();
    let e = backend.generate(&counter()).await.unwrap_err();
    assert!(matches!(e, GenerationError::CircuitOpen { retry_in } if retry_in <= Duration::from_millis(300)));
    assert!(e.is_retriable());
    assert!(started.elapsed() < Duration::from_millis(200), "refused without calling");
    assert_eq!(app.server.requests(), 2);

    app.server.set_design("counter", Reply::Correct);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(backend.generate(&counter()).await.unwrap().verilog, COUNTER);
    assert_eq!(backend.breaker_state(), BreakerState::Closed { failures: 0 });
    assert_eq!(app.server.requests(), 3, "one probe");
}

#[tokio::test]
async fn a_failed_probe_opens_the_circuit_again() {
    let app = spawn(|o| o.default = Step::new(Reply::ServerError { status: 500 })).await;
    let backend = app.backend(quick_breaker);
    for _ in 0..2 {
        backend.generate(&counter()).await.unwrap_err();
    }
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(backend.generate(&counter()).await.unwrap_err().label(), "unavailable");
    assert_eq!(backend.breaker_state(), BreakerState::Open);
    assert_eq!(backend.generate(&counter()).await.unwrap_err().label(), "circuit_open");
    assert_eq!(app.server.requests(), 3);
}

#[tokio::test]
async fn the_fallback_is_used_when_the_primary_is_exhausted_and_then_open() {
    let primary_app = spawn(|o| o.default = Step::new(Reply::ServerError { status: 503 })).await;
    let fallback_app = spawn(|_| {}).await;
    let primary = Arc::new(primary_app.backend(|s| {
        s.max_retries = 1;
        s.breaker = BreakerSettings { failure_threshold: 1, cool_down: Duration::from_secs(60) };
    }));
    let backend = FallbackBackend::new(primary.clone(), Arc::new(fallback_app.backend(|_| {})));

    assert_eq!(backend.generate(&counter()).await.unwrap().verilog, COUNTER);
    assert_eq!(primary_app.server.requests(), 2, "the primary's retries were spent first");
    assert_eq!(primary.breaker_state(), BreakerState::Open);

    assert_eq!(backend.generate(&counter()).await.unwrap().verilog, COUNTER);
    assert_eq!(primary_app.server.requests(), 2, "an open primary is not called");
    assert_eq!(fallback_app.server.requests(), 2);
}

#[tokio::test]
async fn a_permanent_failure_of_the_primary_does_not_use_the_fallback() {
    let primary_app = spawn(|o| o.api_key = Some("the-right-key".into())).await;
    let fallback_app = spawn(|_| {}).await;
    let primary = Arc::new(primary_app.backend(|s| *s = s.clone().with_api_key("a-wrong-key")));
    let backend = FallbackBackend::new(primary, Arc::new(fallback_app.backend(|_| {})));
    assert_eq!(backend.generate(&counter()).await.unwrap_err().label(), "unauthorized");
    assert_eq!(fallback_app.server.requests(), 0);
}
