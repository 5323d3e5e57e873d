//! The generation port: asking a model for Verilog from a tenant's prompt, and for a repair when
//! the last attempt failed. A leaf: it imports nothing from the rest of the core but the
//! [`Cause`] alias.
//!
//! The design-job function builds a [`GenerationRequest`], calls a [`GenerationBackend`] and
//! hands the [`Generated`] HDL to synthesis and the checks; when those fail it calls again with
//! the latest [`Feedback`] (only the latest: the prompt stays bounded however many repairs run).
//! Every [`GenerationError`] is classified retriable or permanent, as port errors are.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Cause;

/// What the design-job function asks a model for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerationRequest {
    /// The tenant's description of the design, as submitted.
    pub prompt: String,
    /// The FPGA family the design must fit (`ice40`, `ecp5`): the model is told, so it avoids
    /// primitives the family lacks.
    pub target_family: String,
    /// The top module's name when the tenant fixed it; otherwise the model names it.
    pub top: Option<String>,
    /// Pin or timing constraints the tenant gave (a PCF, a clock frequency), passed through.
    pub constraints: Option<String>,
    /// Why the previous attempt failed, for a repair; `None` on the first attempt.
    pub feedback: Option<Feedback>,
    /// The most tokens the model may answer with: bounds cost and the answer's size.
    pub max_tokens: u32,
}

impl GenerationRequest {
    /// Tokens asked for when the caller does not say: enough for a few hundred lines of HDL.
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;

    /// A first attempt for `prompt` on `target_family`, with no top, constraints or feedback.
    pub fn new(prompt: impl Into<String>, target_family: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            target_family: target_family.into(),
            top: None,
            constraints: None,
            feedback: None,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
        }
    }

    /// The same request as a repair of an attempt that failed with `feedback` (replacing any
    /// earlier feedback: only the latest failure is sent).
    pub fn repair(&self, feedback: Feedback) -> Self {
        Self { feedback: Some(feedback), ..self.clone() }
    }
}

/// Which check the previous attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedStage {
    /// The model's answer could not be read (no code, unusable structure).
    Answer,
    /// Synthesis (Yosys) refused the HDL.
    Synthesis,
    /// The tenant's testbench failed in simulation.
    Testbench,
    /// The design is not equivalent to the reference.
    Equivalence,
    /// Placement or routing for the target failed.
    PlaceAndRoute,
}

impl FailedStage {
    pub fn as_str(self) -> &'static str {
        match self {
            FailedStage::Answer => "answer",
            FailedStage::Synthesis => "synthesis",
            FailedStage::Testbench => "testbench",
            FailedStage::Equivalence => "equivalence",
            FailedStage::PlaceAndRoute => "place_and_route",
        }
    }
}

impl std::fmt::Display for FailedStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The latest failure, clipped so a repair prompt stays bounded whatever the tools printed.
/// Built with [`Feedback::new`], which does the clipping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    /// What failed.
    pub stage: FailedStage,
    /// The tools' messages, at most [`Feedback::MAX_MESSAGES`], each at most
    /// [`Feedback::MAX_MESSAGE_CHARS`] characters.
    pub messages: Vec<String>,
    /// How many messages were left out by the clipping (so the model is told there were more).
    pub omitted: usize,
}

impl Feedback {
    /// Most messages kept: the first errors are the ones worth fixing first.
    pub const MAX_MESSAGES: usize = 20;
    /// Most characters kept of one message.
    pub const MAX_MESSAGE_CHARS: usize = 1000;

    /// `messages` for `stage`, clipped: the first [`MAX_MESSAGES`](Self::MAX_MESSAGES), each
    /// cut to [`MAX_MESSAGE_CHARS`](Self::MAX_MESSAGE_CHARS) characters (marked with `…`).
    pub fn new<I, S>(stage: FailedStage, messages: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut kept = Vec::new();
        let mut omitted = 0;
        for message in messages {
            if kept.len() == Self::MAX_MESSAGES {
                omitted += 1;
            } else {
                kept.push(clip(message.into(), Self::MAX_MESSAGE_CHARS));
            }
        }
        Self { stage, messages: kept, omitted }
    }
}

/// `text` cut to at most `max` characters, the last being `…` when it was cut.
fn clip(text: String, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((end, _)) if text[end..].chars().count() > 1 => {
            let mut cut = text[..end].to_owned();
            cut.push('…');
            cut
        }
        _ => text,
    }
}

/// The tokens one generation consumed, as the model's server counted them: what per-tenant
/// generation budgets are charged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// What a model answered, checked to be usable: HDL with a named top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The Verilog source, bounded by the backend's size limit.
    pub verilog: String,
    /// A pin constraints file, when the model gave one.
    pub pcf: Option<String>,
    /// The top module's name: the request's when it named one.
    pub top: String,
    /// Tokens charged, over every attempt this call made.
    pub usage: Usage,
    /// Wall time of the call, retries and waits included.
    pub duration: Duration,
}

/// Why a generation failed. Each variant is classified by [`is_retriable`](Self::is_retriable):
/// a retriable error may succeed later with the same request (the job can be retried); a
/// permanent one will not (the job fails, or the repair loop counts the attempt). Where the
/// backend caught an error (a connection error, a JSON error) it is kept as the `source`.
/// Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum GenerationError {
    /// No model is configured for this deployment; the text says what to set. Permanent.
    #[error("no generation model is configured: {0}")]
    NotConfigured(String),
    /// The model's server could not be reached, or answered with a server error. Retriable.
    #[error("the generation backend is unavailable: {message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<Cause>,
    },
    /// The server asked us to slow down (HTTP 429), for `retry_after` when it said. Retriable.
    #[error("the generation backend is rate limiting{}", match retry_after {
        Some(d) => format!(" (retry after {:.1} s)", d.as_secs_f64()),
        None => String::new(),
    })]
    RateLimited { retry_after: Option<Duration> },
    /// No answer within the per-call timeout. Retriable.
    #[error("the generation backend did not answer within {:.1} s", after.as_secs_f64())]
    Timeout { after: Duration },
    /// The backend failed repeatedly and is not called until a probe succeeds; the next probe is
    /// allowed in `retry_in`. Retriable (later).
    #[error("the generation backend is failing and not called for now (next probe in {:.1} s)", retry_in.as_secs_f64())]
    CircuitOpen { retry_in: Duration },
    /// The server refused the credentials (HTTP 401 or 403). Permanent: the operator's to fix.
    #[error("the generation backend refused the credentials (HTTP {status}): {message}")]
    Unauthorized { status: u16, message: String },
    /// The server refused the request itself (another 4xx: unknown model, too many tokens).
    /// Permanent.
    #[error("the generation backend refused the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// The model answered, but not with usable HDL (not JSON, a field missing, no code block, an
    /// answer cut at `max_tokens`). Permanent for this request; the repair loop may count it as
    /// a failed attempt and ask again with [`FailedStage::Answer`] feedback.
    #[error("the model's answer is unusable: {message}")]
    Malformed {
        message: String,
        #[source]
        source: Option<Cause>,
    },
    /// Something the backend bounds was over its limit (the response body, the Verilog, the
    /// number of code blocks). Permanent.
    #[error("{what} is over the limit of {limit} bytes")]
    TooLarge { what: &'static str, limit: u64 },
}

impl GenerationError {
    /// An unavailable backend, because of `cause`.
    pub fn unavailable(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        GenerationError::Unavailable { message: message.into(), source: Some(cause.into()) }
    }

    /// An unusable answer, with no error underneath.
    pub fn malformed(message: impl Into<String>) -> Self {
        GenerationError::Malformed { message: message.into(), source: None }
    }

    /// Whether the same request may succeed later.
    pub fn is_retriable(&self) -> bool {
        match self {
            GenerationError::Unavailable { .. }
            | GenerationError::RateLimited { .. }
            | GenerationError::Timeout { .. }
            | GenerationError::CircuitOpen { .. } => true,
            GenerationError::NotConfigured(_)
            | GenerationError::Unauthorized { .. }
            | GenerationError::Rejected { .. }
            | GenerationError::Malformed { .. }
            | GenerationError::TooLarge { .. } => false,
        }
    }

    /// How long to wait before trying again, when the backend said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GenerationError::RateLimited { retry_after } => *retry_after,
            GenerationError::CircuitOpen { retry_in } => Some(*retry_in),
            _ => None,
        }
    }

    /// A short, bounded name of the variant, for metric labels and tests.
    pub fn label(&self) -> &'static str {
        match self {
            GenerationError::NotConfigured(_) => "not_configured",
            GenerationError::Unavailable { .. } => "unavailable",
            GenerationError::RateLimited { .. } => "rate_limited",
            GenerationError::Timeout { .. } => "timeout",
            GenerationError::CircuitOpen { .. } => "circuit_open",
            GenerationError::Unauthorized { .. } => "unauthorized",
            GenerationError::Rejected { .. } => "rejected",
            GenerationError::Malformed { .. } => "malformed",
            GenerationError::TooLarge { .. } => "too_large",
        }
    }
}

/// A model that turns a [`GenerationRequest`] into Verilog. Held as `Arc<dyn GenerationBackend>`;
/// implementations bound their own time, retries and answer size.
#[async_trait]
pub trait GenerationBackend: Send + Sync {
    async fn generate(&self, req: &GenerationRequest) -> Result<Generated, GenerationError>;
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn feedback_keeps_the_first_messages_and_counts_the_rest() {
        let feedback = Feedback::new(FailedStage::Synthesis, (0..25).map(|i| format!("error {i}")));
        assert_eq!(feedback.messages.len(), Feedback::MAX_MESSAGES);
        assert_eq!(feedback.messages[0], "error 0");
        assert_eq!(feedback.omitted, 5);
    }

    #[test]
    fn feedback_clips_a_long_message_at_a_character_boundary() {
        let long = "é".repeat(Feedback::MAX_MESSAGE_CHARS + 10);
        let feedback = Feedback::new(FailedStage::Testbench, [long]);
        let kept = &feedback.messages[0];
        assert_eq!(kept.chars().count(), Feedback::MAX_MESSAGE_CHARS);
        assert!(kept.ends_with('…'));
    }

    #[test]
    fn feedback_leaves_a_message_of_exactly_the_limit_alone() {
        let exact = "x".repeat(Feedback::MAX_MESSAGE_CHARS);
        let feedback = Feedback::new(FailedStage::Equivalence, [exact.clone()]);
        assert_eq!(feedback.messages[0], exact);
        assert_eq!(feedback.omitted, 0);
    }

    #[test]
    fn a_repair_replaces_earlier_feedback() {
        let first = GenerationRequest::new("a counter", "ice40");
        let once = first.repair(Feedback::new(FailedStage::Synthesis, ["syntax error"]));
        let twice = once.repair(Feedback::new(FailedStage::Testbench, ["mismatch at 10 ns"]));
        let feedback = twice.feedback.expect("feedback");
        assert_eq!(feedback.stage, FailedStage::Testbench);
        assert_eq!(feedback.messages, vec!["mismatch at 10 ns".to_owned()]);
    }

    #[test]
    fn transient_failures_are_retriable_and_answers_the_server_gave_are_not() {
        let retriable = [
            GenerationError::unavailable("connection refused", std::io::Error::other("refused")),
            GenerationError::RateLimited { retry_after: None },
            GenerationError::Timeout { after: Duration::from_secs(1) },
            GenerationError::CircuitOpen { retry_in: Duration::from_secs(1) },
        ];
        let permanent = [
            GenerationError::NotConfigured("set a model".into()),
            GenerationError::Unauthorized { status: 401, message: "bad key".into() },
            GenerationError::Rejected { status: 404, message: "no such model".into() },
            GenerationError::malformed("no code block"),
            GenerationError::TooLarge { what: "the response body", limit: 10 },
        ];
        assert!(retriable.iter().all(GenerationError::is_retriable));
        assert!(!permanent.iter().any(GenerationError::is_retriable));
    }

    #[test]
    fn an_unavailable_backend_keeps_its_cause_as_source() {
        let e = GenerationError::unavailable("cannot connect", std::io::Error::other("refused"));
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("refused"));
    }

    #[test]
    fn rate_limited_says_how_long_to_wait() {
        let e = GenerationError::RateLimited { retry_after: Some(Duration::from_secs(2)) };
        assert_eq!(e.to_string(), "the generation backend is rate limiting (retry after 2.0 s)");
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
    }
}
