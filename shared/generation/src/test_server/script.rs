//! What the test server answers: a [`Reply`] per request, taken from the scripted queue first,
//! then the design's own script, then the server's default.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One answer the server can give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// The design's `design.v`: correct code.
    Correct,
    /// The design's `broken_synth.v`: code synthesis refuses.
    BrokenSynth,
    /// The design's `not_equivalent.v`: synthesises, fails the testbench / equivalence.
    NotEquivalent,
    /// `broken_synth.v` to a first attempt, `design.v` once the request carries feedback.
    BrokenThenFixed,
    /// HTTP 429 with this `Retry-After` value (seconds or an HTTP date), verbatim, if any.
    RateLimited { retry_after: Option<String> },
    /// This HTTP status (5xx) with an OpenAI-style error body.
    ServerError { status: u16 },
    /// A completion whose content is prose: not JSON, no code block.
    NotJson,
    /// A completion whose content is JSON without the `top` field.
    MissingFields,
    /// A completion whose content shows the code without a fenced block.
    NoCodeBlock,
    /// No answer at all: the connection stays open and silent.
    Hang,
    /// A valid completion whose body is about `bytes` long.
    Huge { bytes: usize },
}

/// A reply and how long to wait before giving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    #[serde(flatten)]
    pub reply: Reply,
    /// Milliseconds slept before answering.
    #[serde(default)]
    pub latency_ms: u64,
}

impl Step {
    pub fn new(reply: Reply) -> Self {
        Self { reply, latency_ms: 0 }
    }

    /// The same reply given after `latency`.
    pub fn after(self, latency: Duration) -> Self {
        Self { latency_ms: latency.as_millis() as u64, ..self }
    }

    pub fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms)
    }
}

impl From<Reply> for Step {
    fn from(reply: Reply) -> Self {
        Step::new(reply)
    }
}

/// The scripted replies: a queue consumed one per request (whatever the design), a standing
/// step per design, and the default.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub queue: VecDeque<Step>,
    pub per_design: HashMap<String, Step>,
    pub default: Step,
}

impl Script {
    /// The step for the next request, which asks for `design` (when one was recognised).
    pub fn next(&mut self, design: Option<&str>) -> Step {
        if let Some(step) = self.queue.pop_front() {
            return step;
        }
        design.and_then(|d| self.per_design.get(d)).cloned().unwrap_or_else(|| self.default.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_comes_before_the_design_and_the_design_before_the_default() {
        let mut script = Script {
            queue: VecDeque::from([Step::new(Reply::Hang)]),
            per_design: HashMap::from([("counter".to_owned(), Step::new(Reply::BrokenSynth))]),
            default: Step::new(Reply::Correct),
        };
        assert_eq!(script.next(Some("counter")).reply, Reply::Hang);
        assert_eq!(script.next(Some("counter")).reply, Reply::BrokenSynth);
        assert_eq!(script.next(Some("alu")).reply, Reply::Correct);
    }

    #[test]
    fn a_step_reads_from_json_with_its_kind_and_latency() {
        let step: Step = serde_json::from_str(r#"{"kind":"rate_limited","retry_after":"1","latency_ms":5}"#).unwrap();
        assert_eq!(
            step,
            Step::new(Reply::RateLimited { retry_after: Some("1".into()) }).after(Duration::from_millis(5))
        );
        let step: Step = serde_json::from_str(r#"{"kind":"correct"}"#).unwrap();
        assert_eq!(step, Step::new(Reply::Correct));
    }
}
