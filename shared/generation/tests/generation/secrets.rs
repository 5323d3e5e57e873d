//! The API key: sent, never printed, never in an error.

use openqq_core::error::with_causes;
use openqq_core::generation::{GenerationBackend, GenerationError};

use crate::helpers::{counter, spawn};

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
