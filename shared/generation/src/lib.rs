//! Generation backends: what turns a tenant's prompt into Verilog, behind the core's
//! [`GenerationBackend`](openqq_core::generation::GenerationBackend) port.
//!
//! - [`OpenAiBackend`] ([`openai`]): an OpenAI-compatible Chat Completions client (OpenAI, vLLM,
//!   Ollama, llama.cpp's server). It asks for structured output (`response_format` with a JSON
//!   schema) and falls back to fenced code blocks for good once a server refuses that; bounds each
//!   call by a timeout and the body it reads; retries 429 and 5xx honouring `Retry-After` with
//!   capped, jittered backoff; and stands behind a circuit breaker ([`breaker`]).
//!   Settings in [`settings`]; the API key is a [`Secret`] that never prints.
//! - [`FallbackBackend`]: a second backend tried when the first is open or exhausted.
//! - [`NotConfiguredBackend`]: answers every call at once with a clear error (no model set).
//! - Pure parts, tested without a server: the prompt ([`prompt`]), reading an answer (`answer`,
//!   `extract`: JSON or fenced blocks), `Retry-After` and backoff (`retry`).
//! - `test_server` (feature `test-server`): a scripted OpenAI-compatible server answering from a
//!   directory of designs, for tests here and in the platform's suites, also run as the
//!   `openqq-model-stub` binary.

mod answer;
pub mod breaker;
mod extract;
mod fallback;
mod not_configured;
pub mod openai;
pub mod prompt;
mod retry;
mod secret;
pub mod settings;
#[cfg(feature = "test-server")]
pub mod test_server;
mod wire;

pub use breaker::BreakerState;
pub use fallback::FallbackBackend;
pub use not_configured::NotConfiguredBackend;
pub use openai::OpenAiBackend;
pub use secret::Secret;
pub use settings::{BreakerSettings, Limits, OpenAiSettings, SettingsError};
