//! The API key: sent, never printed, never in an error.

use openqq_core::error::with_causes;
use openqq_core::generation::{GenerationBackend, GenerationError};
use openqq_generation::test_server::{Reply, Step};

use crate::helpers::{counter, spawn, Logs};

const RIGHT: &str = "sk-right-0123456789abcdef";
const WRONG: &str = "sk-wrong-fedcba9876543210";

#[tokio::test]
async fn the_right_key_is_accepted() {
    let app = spawn(|o| o.api_key = Some(RIGHT.into())).await;
    app.backend(|s| *s = s.clone().with_api_key(RIGHT)).generate(&counter()).await.unwrap();
    assert_eq!(app.server.stats().unauthorized, 0);
}

#[tokio::test]
async fn a_wrong_key_is_a_non_retriable_error_that_does_not_show_the_key() {
    let app = spawn(|o| o.api_key = Some(RIGHT.into())).await;
    let backend = app.backend(|s| *s = s.clone().with_api_key(WRONG));
    let e = backend.generate(&counter()).await.unwrap_err();
    assert!(matches!(e, GenerationError::Unauthorized { status: 401, .. }), "{e:?}");
    assert!(!e.is_retriable());
    assert_eq!(app.server.requests(), 1, "not retried");
    // The server echoed the key it was given; the error keeps its words without the key.
    assert!(e.to_string().contains("Incorrect API key provided: ***"), "{e}");
    for text in [e.to_string(), format!("{e:?}"), with_causes(&e), format!("{backend:?}")] {
        assert!(!text.contains(WRONG), "the key shows in {text}");
    }
}

#[tokio::test]
async fn the_key_never_appears_in_logs() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = spawn(|o| {
        o.api_key = Some(RIGHT.into());
        o.script = vec![Step::new(Reply::ServerError { status: 500 })];
    })
    .await;
    let right = app.backend(|s| *s = s.clone().with_api_key(RIGHT));
    right.generate(&counter()).await.unwrap();
    tracing::debug!(backend = ?right, "the backend, as a log line would show it");
    let wrong = app.backend(|s| *s = s.clone().with_api_key(WRONG));
    wrong.generate(&counter()).await.unwrap_err();

    let text = logs.text();
    assert!(text.contains("Asking the model."), "nothing was logged: {text}");
    assert!(text.contains("trying again"), "the retry was not logged: {text}");
    assert!(text.contains("Generation failed."), "the failure was not logged: {text}");
    assert!(!text.contains(RIGHT) && !text.contains(WRONG), "a key shows in the logs:\n{text}");
}
