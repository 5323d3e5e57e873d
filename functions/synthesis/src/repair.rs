//! The repair loop of a design written by a model: ask for Verilog, run the checks on it, and
//! when they fail ask again with the latest failure (only the latest: the prompt stays bounded),
//! until the checks pass, the job's attempts are spent, or the same failure comes back (the
//! model is not getting anywhere). Each attempt is recorded (tokens, duration, what failed) and
//! its HDL kept by reference in the object store, readable by the tenant.

use crate::checks::{self, Budget, Outcome};
use openqq_core::budget::{self, Charge, DailyBudgets};
use openqq_core::generation::{FailedStage, Feedback, GenerationBackend, GenerationError, GenerationRequest};
use openqq_core::hdl::{Generate, Source, SourceFile, Testbench, DEFAULT_ATTEMPTS};
use openqq_core::{ObjectRef, ObjectStore, TenantId, Verdict};
use openqq_runtime::RecordError;
use serde::Serialize;
use std::sync::Arc;

/// The daily budget model calls are charged against.
const TOKENS: budget::Budget = budget::Budget::GenerationTokens;

/// The file the generated Verilog is checked as.
pub const GENERATED_FILE: &str = "generated.v";

/// One attempt, as the report shows it.
#[derive(Debug, Serialize)]
pub struct Attempt {
    pub attempt: u32,
    /// The generated Verilog, an object of the tenant; absent when the model gave none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hdl: Option<ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top: Option<String>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub duration_ms: u64,
    /// The step that failed (`answer`, `synthesis`, `testbench`, `equivalence`, or `generation`
    /// when the model could not be asked), absent when the checks passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// What the model was told (or why it could not be asked), clipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The last attempt passed every check.
    Passed,
    /// The job's attempts were spent.
    MaxAttempts,
    /// An attempt failed exactly as the one before it.
    RepeatedError,
    /// The model refused the request or cannot be used (credentials, a request it rejects).
    GenerationFailed,
    /// The next attempt would have passed the job's or the tenant's daily token budget.
    BudgetSpent,
}

/// What the loop did: every attempt, why it stopped, and the last attempt's checks.
#[derive(Debug, Serialize)]
pub struct Looped {
    pub attempts: Vec<Attempt>,
    pub stopped: Stop,
    pub max_attempts: u32,
    /// The last attempt's pin constraints (when the model gave some) and checks.
    #[serde(skip)]
    pub last: Option<(Option<String>, Outcome)>,
}

impl Looped {
    /// `generation.finished`'s verdict: whether the loop ended on a design that passed.
    pub fn verdict(&self) -> Verdict {
        if self.stopped == Stop::Passed {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }
}

/// What one revision's loop works with.
pub struct Job<'a> {
    pub tenant: &'a TenantId,
    pub generate: Generate,
    pub family: openqq_hdl::Family,
    /// The tenant's constraints text, passed to the model when not empty.
    pub constraints: &'a str,
    pub tests: Vec<Testbench>,
    pub reference: Option<Source>,
    pub budget: Budget,
    /// The deployment's cap on attempts.
    pub max_attempts: u32,
    /// Where tokens are charged, and the limits.
    pub budgets: &'a dyn DailyBudgets,
    pub tokens: TokenLimits,
}

/// Token limits of generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLimits {
    /// What one tenant may spend in a UTC day, across every job and process.
    pub daily: u64,
    /// What one job's attempts may spend together.
    pub per_job: u64,
}

/// Tokens reserved for a call before it is made: the most the answer may take, and the prompt
/// at a generous two bytes a token plus the instructions around it. What is not used is given
/// back after the call; a call that used more is charged the rest.
fn reservation(request: &GenerationRequest) -> u64 {
    let feedback: usize = request.feedback.as_ref().map_or(0, |f| f.messages.iter().map(String::len).sum());
    let text = request.prompt.len() + request.constraints.as_ref().map_or(0, String::len) + feedback;
    u64::from(request.max_tokens) + (text / 2) as u64 + 1000
}

/// Runs the loop. A backend that is unavailable for now (down, rate limiting, its breaker open)
/// is retriable: the record is tried again later. A model that cannot be used for this request
/// ends the loop with [`Stop::GenerationFailed`].
pub async fn run(
    backend: &dyn GenerationBackend,
    objects: &Arc<dyn ObjectStore>,
    job: Job<'_>,
) -> Result<Looped, RecordError> {
    let max_attempts = job.generate.max_attempts.unwrap_or(DEFAULT_ATTEMPTS).min(job.max_attempts).max(1);
    let family = match job.family {
        openqq_hdl::Family::Ice40 => "ice40",
        openqq_hdl::Family::Ecp5 => "ecp5",
    };
    let mut request = GenerationRequest::new(job.generate.prompt.clone(), family);
    request.top = job.generate.top.clone();
    request.constraints = (!job.constraints.trim().is_empty()).then(|| job.constraints.to_owned());
    let mut looped = Looped { attempts: Vec::new(), stopped: Stop::MaxAttempts, max_attempts, last: None };
    let mut previous: Option<Feedback> = None;
    let mut job_spent = 0u64;
    for attempt in 1..=max_attempts {
        let started = std::time::Instant::now();
        let reserved = reservation(&request);
        let day = budget::day(chrono::Utc::now());
        let refusal = if job_spent + reserved > job.tokens.per_job {
            Some(format!(
                "the job's token budget: {job_spent} of {} spent, the next attempt may take {reserved}",
                job.tokens.per_job
            ))
        } else {
            match job.budgets.charge_budget(job.tenant, TOKENS, &day, reserved, job.tokens.daily).await? {
                Charge::Charged { .. } => None,
                Charge::Refused { spent } => Some(format!(
                    "the tenant's token budget for {day}: {spent} of {} spent, the next attempt may take {reserved}",
                    job.tokens.daily
                )),
            }
        };
        if let Some(why) = refusal {
            looped.attempts.push(failed_attempt(attempt, started, "budget", &[why]));
            looped.stopped = Stop::BudgetSpent;
            return Ok(looped);
        }
        let answer = backend.generate(&request).await;
        let used = answer.as_ref().map_or(0, |g| g.usage.total());
        settle(job.budgets, job.tenant, &day, reserved, used).await?;
        job_spent += used;
        let feedback = match answer {
            Ok(generated) => {
                let hdl = objects.put(job.tenant, generated.verilog.clone().into_bytes()).await?;
                let source =
                    Source { files: vec![SourceFile::new(GENERATED_FILE, generated.verilog)], top: generated.top };
                let outcome = checks_of(&source, &job).await?;
                let feedback = outcome.feedback();
                looped.attempts.push(Attempt {
                    attempt,
                    hdl: Some(hdl),
                    top: Some(source.top.clone()),
                    prompt_tokens: generated.usage.prompt_tokens,
                    completion_tokens: generated.usage.completion_tokens,
                    duration_ms: started.elapsed().as_millis() as u64,
                    failed: feedback.as_ref().map(|f| f.stage.to_string()),
                    messages: feedback.as_ref().map(|f| f.messages.clone()).unwrap_or_default(),
                });
                looped.last = Some((generated.pcf, outcome));
                feedback
            }
            Err(e) if e.is_retriable() => {
                return Err(RecordError::Retriable(format!("generation attempt {attempt}: {e}")));
            }
            Err(e @ GenerationError::Malformed { .. }) => {
                let feedback = Feedback::new(FailedStage::Answer, [e.to_string()]);
                looped.attempts.push(failed_attempt(attempt, started, "answer", &feedback.messages));
                Some(feedback)
            }
            Err(e) => {
                tracing::warn!(error = %e, "The generation backend cannot be used for this request.");
                looped.attempts.push(failed_attempt(attempt, started, "generation", &[e.to_string()]));
                looped.stopped = Stop::GenerationFailed;
                return Ok(looped);
            }
        };
        let Some(feedback) = feedback else {
            looped.stopped = Stop::Passed;
            return Ok(looped);
        };
        if previous.as_ref() == Some(&feedback) {
            looped.stopped = Stop::RepeatedError;
            return Ok(looped);
        }
        request = request.repair(feedback.clone());
        previous = Some(feedback);
    }
    Ok(looped)
}

/// Gives back what a call did not use of its reservation, or charges what it used beyond it.
async fn settle(
    budgets: &dyn DailyBudgets,
    tenant: &TenantId,
    day: &str,
    reserved: u64,
    used: u64,
) -> Result<(), RecordError> {
    if used < reserved {
        budgets.refund_budget(tenant, TOKENS, day, reserved - used).await?;
    } else if used > reserved {
        budgets.charge_budget(tenant, TOKENS, day, used - reserved, u64::MAX).await?;
    }
    Ok(())
}

fn failed_attempt(attempt: u32, started: std::time::Instant, stage: &str, messages: &[String]) -> Attempt {
    Attempt {
        attempt,
        hdl: None,
        top: None,
        prompt_tokens: 0,
        completion_tokens: 0,
        duration_ms: started.elapsed().as_millis() as u64,
        failed: Some(stage.to_owned()),
        messages: messages.to_vec(),
    }
}

/// The checks of one attempt's source.
async fn checks_of(source: &Source, job: &Job<'_>) -> Result<Outcome, RecordError> {
    checks::run_async(source.clone(), job.family, job.tests.clone(), job.reference.clone(), job.budget).await
}
