//! [`FallbackBackend`]: a primary backend with a second one tried when the primary's circuit is
//! open or its retries are spent.

use std::sync::Arc;

use async_trait::async_trait;
use openqq_core::generation::{Generated, GenerationBackend, GenerationError, GenerationRequest};

/// Calls `primary`; when it fails with a retriable error (its circuit open, its retries spent on
/// timeouts, 429s or 5xx), calls `fallback` with the same request. A permanent failure of the
/// primary (bad credentials, an unusable answer) is returned as it is: another model would not
/// fix the operator's settings, and an unusable answer is the repair loop's to handle. When both
/// fail, the fallback's error is returned and the primary's is logged.
pub struct FallbackBackend {
    primary: Arc<dyn GenerationBackend>,
    fallback: Arc<dyn GenerationBackend>,
}

impl FallbackBackend {
    pub fn new(primary: Arc<dyn GenerationBackend>, fallback: Arc<dyn GenerationBackend>) -> Self {
        Self { primary, fallback }
    }
}

#[async_trait]
impl GenerationBackend for FallbackBackend {
    async fn generate(&self, req: &GenerationRequest) -> Result<Generated, GenerationError> {
        match self.primary.generate(req).await {
            Err(e) if e.is_retriable() => {
                tracing::warn!(error = %e, kind = e.label(), "The primary generation backend failed; trying the fallback.");
                self.fallback.generate(req).await
            }
            other => other,
        }
    }
}
