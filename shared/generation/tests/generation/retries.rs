//! Retries on 429 and 5xx, Retry-After, and the per-call timeout.

use std::time::{Duration, Instant};

use openqq_core::generation::{GenerationBackend, GenerationError};
use openqq_generation::test_server::{Reply, Step};

use crate::helpers::{counter, spawn, COUNTER};

#[tokio::test]
async fn a_429_is_retried_after_the_retry_after_it_gave() {
    let app = spawn(|o| o.script = vec![Step::new(Reply::RateLimited { retry_after: Some("1".into()) })]).await;
    let started = Instant::now();
    let generated = app.backend(|_| {}).generate(&counter()).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(generated.verilog, COUNTER);
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}, before the 1 s Retry-After");
    assert!(generated.duration >= Duration::from_secs(1));
    assert_eq!(app.server.requests(), 2);
}

#[tokio::test]
async fn a_retry_after_longer_than_the_limit_is_returned_at_once() {
    let app = spawn(|o| o.script = vec![Step::new(Reply::RateLimited { retry_after: Some("3600".into()) })]).await;
    let started = Instant::now();
    let e = app.backend(|_| {}).generate(&counter()).await.unwrap_err();
    assert!(matches!(e, GenerationError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(3600)));
    assert!(e.is_retriable());
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(app.server.requests(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_then_given_up() {
    let app = spawn(|o| {
        o.per_design.insert("counter".into(), Step::new(Reply::ServerError { status: 503 }));
    })
    .await;
    let e = app.backend(|s| s.max_retries = 2).generate(&counter()).await.unwrap_err();
    assert_eq!(e.label(), "unavailable");
    assert!(e.is_retriable());
    assert!(e.to_string().contains("HTTP 503"), "{e}");
    assert_eq!(app.server.requests(), 3, "the first try and two retries");
}

#[tokio::test]
async fn a_server_error_then_an_answer_succeeds() {
    let app = spawn(|o| o.script = vec![Step::new(Reply::ServerError { status: 500 })]).await;
    let generated = app.backend(|_| {}).generate(&counter()).await.unwrap();
    assert_eq!(generated.verilog, COUNTER);
    assert_eq!(app.server.requests(), 2);
}

#[tokio::test]
async fn a_hanging_server_times_out() {
    let app = spawn(|o| o.default = Step::new(Reply::Hang)).await;
    let started = Instant::now();
    let backend = app.backend(|s| {
        s.timeout = Duration::from_millis(300);
        s.max_retries = 1;
    });
    let e = backend.generate(&counter()).await.unwrap_err();
    assert!(matches!(e, GenerationError::Timeout { after } if after == Duration::from_millis(300)), "{e:?}");
    assert!(e.is_retriable());
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(600) && took < Duration::from_secs(3), "two tries took {took:?}");
    assert_eq!(app.server.requests(), 2);
}

#[tokio::test]
async fn a_slow_answer_within_the_timeout_is_taken() {
    let app = spawn(|o| o.default = Step::new(Reply::Correct).after(Duration::from_millis(200))).await;
    let generated = app.backend(|s| s.timeout = Duration::from_secs(2)).generate(&counter()).await.unwrap();
    assert!(generated.duration >= Duration::from_millis(200));
}
