//! [`NotConfiguredBackend`]: what a deployment without a model uses.

use async_trait::async_trait;
use openqq_core::generation::{Generated, GenerationBackend, GenerationError, GenerationRequest};

/// Answers every call at once with [`GenerationError::NotConfigured`] (permanent), naming what to
/// set: a design submitted as a prompt fails with a clear reason instead of waiting on nothing.
#[derive(Debug, Clone)]
pub struct NotConfiguredBackend {
    hint: String,
}

impl NotConfiguredBackend {
    /// The text used when none is given: the settings that configure a model.
    pub const DEFAULT_HINT: &str =
        "set a generation base URL and model (an OpenAI-compatible server) to submit designs as prompts";

    /// A backend whose error says `hint` (what to set, in the words of the deployment's settings).
    pub fn new(hint: impl Into<String>) -> Self {
        Self { hint: hint.into() }
    }
}

impl Default for NotConfiguredBackend {
    fn default() -> Self {
        Self::new(Self::DEFAULT_HINT)
    }
}

#[async_trait]
impl GenerationBackend for NotConfiguredBackend {
    async fn generate(&self, _req: &GenerationRequest) -> Result<Generated, GenerationError> {
        Err(GenerationError::NotConfigured(self.hint.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_fails_at_once_with_a_permanent_error_naming_what_to_set() {
        let backend = NotConfiguredBackend::new("set --generation-model");
        let e = backend.generate(&GenerationRequest::new("a counter", "ice40")).await.unwrap_err();
        assert!(!e.is_retriable());
        assert_eq!(e.to_string(), "no generation model is configured: set --generation-model");
    }
}
