//! The validation function: announces `validation.started`, runs the FPGA validator on the
//! revision, stores the report with `validation.finished` in the timeline, and publishes
//! `validation.finished` for the results function.
//!
//! Every write is conditional on revision, so a re-read batch re-runs the (deterministic)
//! validator and re-publishes, but applies nothing twice.
//!
//! The report that travels in `validation.finished` and is stored is capped
//! ([`openqq_fpga::Report::capped`]): a netlist asking for tens of thousands of findings cannot
//! make a record over the log's limit. When anything was cut, the full report goes to the object
//! store and the capped one points at it as `"full_report": {"digest", "bytes"}`.

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_core::event::{ValidationFinished, ValidationRequested, ValidationStarted};
use openqq_core::{
    Applied, Change, DesignSpec, DesignStore, Envelope, EventKind, ObjectRef, ObjectStore, TenantId, Verdict,
};
use openqq_fpga::{FileNames, Finding, Input, Location, Report, MAX_REPORT_FINDINGS};
use openqq_runtime::{Outbox, RecordError, RecordHandler};
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;

pub const NAME: &str = "validation";

pub struct Validation {
    pub store: Arc<dyn DesignStore>,
    /// How long one design's validation may take ([`DEFAULT_BUDGET`] unless set): a netlist
    /// that is slow to check ends in a `VALIDATION_BUDGET_EXCEEDED` finding and a `fail`
    /// verdict instead of holding its partition.
    pub budget: Duration,
    /// Where a full report goes when the stored one is capped.
    pub objects: Arc<dyn ObjectStore>,
}

/// The setting for [`Validation::budget`]: this environment variable on Lambda, and
/// `--validation-budget` (same variable) on `openqq up`. A humantime duration (`5s`, `750ms`).
pub const BUDGET_ENV: &str = "OPENQQ_VALIDATION_BUDGET";

/// The default validation time budget. The validator's cost is linear in its input and its
/// slowest known netlist shape runs at about 9 MB/s (release build, `openqq-fpga`'s
/// `examples/hostile.rs`), so the largest body the API accepts (900 KiB) takes about 0.1 s and
/// typical designs a millisecond: 5 s leaves ample room on a busy machine while bounding how
/// long one record can hold its partition.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(5);

/// A validation budget setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetSettingError {
    #[error("{BUDGET_ENV} is not a duration such as 5s or 750ms: {value:?}")]
    NotADuration {
        value: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("{BUDGET_ENV} must be more than zero: every validation would fail")]
    Zero,
}

/// Reads a validation budget setting (see [`BUDGET_ENV`]).
pub fn parse_budget(value: &str) -> Result<Duration, BudgetSettingError> {
    let budget = humantime::parse_duration(value.trim())
        .map_err(|source| BudgetSettingError::NotADuration { value: value.to_owned(), source })?;
    if budget.is_zero() {
        return Err(BudgetSettingError::Zero);
    }
    Ok(budget)
}

/// The budget from [`BUDGET_ENV`], or [`DEFAULT_BUDGET`] when it is unset.
pub fn budget_from_env() -> Result<Duration, BudgetSettingError> {
    match std::env::var(BUDGET_ENV) {
        Ok(value) => parse_budget(&value),
        Err(_) => Ok(DEFAULT_BUDGET),
    }
}

/// Runs the validator on a submitted specification, for at most `budget`. Pure and CPU-bound.
pub fn validate(spec: &DesignSpec, budget: Duration) -> Report {
    let bitstream = spec.bitstream_base64.as_deref().map(|b| B64.decode(b));
    if let Some(Err(e)) = &bitstream {
        let finding = Finding::error(
            "BITSTREAM_MALFORMED",
            format!("bitstream_base64 is not valid base64: {e}"),
            Location::default(),
        );
        return Report::new(Vec::new(), vec![finding]);
    }
    let bytes = bitstream.and_then(Result::ok);
    let input = Input {
        device: &spec.target.device,
        package: &spec.target.package,
        netlist: spec.netlist.get(),
        pcf: Some(spec.constraints.text.as_str()),
        bitstream: bytes.as_deref(),
        top: spec.options.top.as_deref(),
        allow_unconstrained: spec.options.allow_unconstrained,
        files: FileNames::default(),
        budget: Some(budget),
    };
    openqq_fpga::validate(&input)
}

#[async_trait]
impl RecordHandler for Validation {
    type Payload = ValidationRequested;
    const KIND: EventKind = EventKind::ValidationRequested;

    fn name(&self) -> &'static str {
        NAME
    }

    async fn handle(&self, env: Envelope<ValidationRequested>, out: &mut Outbox) -> Result<(), RecordError> {
        let cause = env.cause();
        let started = Envelope::new(EventKind::ValidationStarted, &cause, NAME, ValidationStarted {});
        let applied = self
            .store
            .apply(&cause.tenant_id, &cause.design_id, &started.timeline_entry(), &Change::ValidationStarted)
            .await?;
        if applied == Applied::Stale {
            tracing::info!("Validation of an older revision was skipped; a newer one already started.");
            return Ok(());
        }
        out.publish(&started);

        let spec = env.payload.spec;
        let t0 = std::time::Instant::now();
        let budget = self.budget;
        let report = tokio::task::spawn_blocking(move || validate(&spec, budget)).await.map_err(|e| {
            if e.is_panic() {
                // The validator is deterministic: the same input panics again.
                let message = openqq_runtime::dead_letter::panic_message(e.into_panic().as_ref());
                RecordError::Permanent(format!("bug: the validator panicked: {message}"))
            } else {
                RecordError::Retriable(format!("validator task failed: {e}"))
            }
        })?;
        metrics::histogram!("openqq_validation_duration_seconds").record(t0.elapsed().as_secs_f64());
        let verdict = if report.has_errors() { Verdict::Fail } else { Verdict::Pass };
        let report = self.keep(&cause.tenant_id, report).await?;

        let finished = Envelope::new(
            EventKind::ValidationFinished,
            &cause,
            NAME,
            ValidationFinished { verdict, report: report.clone() },
        );
        let change = Change::ValidationFinished { verdict, report };
        self.store.apply(&cause.tenant_id, &cause.design_id, &finished.timeline_entry(), &change).await?;
        out.publish(&finished);
        Ok(())
    }
}

/// The report as stored and published: the capped report, and where the full one is when
/// something was cut.
#[derive(Serialize)]
struct Kept<'a> {
    #[serde(flatten)]
    report: &'a Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_report: Option<ObjectRef>,
}

impl Validation {
    /// Caps `report` to fit any record; when that cut something, stores the full report as an
    /// object of `tenant` and points at it.
    async fn keep(&self, tenant: &TenantId, report: Report) -> Result<Box<RawValue>, RecordError> {
        let full = serde_json::to_vec(&report).expect("reports serialise");
        let (capped, cut) = report.capped(MAX_REPORT_FINDINGS);
        let full_report = if cut {
            match self.objects.put(tenant, full).await {
                Ok(reference) => Some(reference),
                Err(e) if e.is_retriable() => return Err(e.into()),
                Err(e) => {
                    tracing::warn!(error = %e, "The full report could not be kept; only the capped one is stored.");
                    None
                }
            }
        } else {
            None
        };
        let kept = serde_json::to_string(&Kept { report: &capped, full_report }).expect("reports serialise");
        Ok(RawValue::from_string(kept).expect("valid JSON"))
    }
}
