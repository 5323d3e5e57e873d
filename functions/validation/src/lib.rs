//! The validation function: announces `validation.started`, runs the FPGA validator on the
//! revision, stores the report with `validation.finished` in the timeline, and publishes
//! `validation.finished` for the results function.
//!
//! Every write is conditional on revision, so a re-read batch re-runs the (deterministic)
//! validator and re-publishes, but applies nothing twice. The function names its two writes
//! rather than making them ([`Stage`]): the consumer applies a batch's `started` writes together,
//! then each lane validates its records in order, and its `finished` writes go together.
//!
//! The report that travels in `validation.finished` and is stored is capped
//! ([`openqq_fpga::Report::capped`]): a netlist asking for tens of thousands of findings cannot
//! make a record over the log's limit. When anything was cut, the full report goes to the object
//! store and the capped one points at it as `"full_report": {"digest", "bytes", "design_id"}`.
//! The full report names its design (`"design_id"`), so its object is that design's alone even
//! when another design has the very same findings: deleting a design can delete it
//! ([`openqq_core::deletion::own_full_report`]).
//!
//! Payloads travel by reference ([`openqq_core::design::INLINE_PAYLOAD_MAX_BYTES`]): a netlist,
//! constraints file or bitstream the API stored is read back from the object store (which checks
//! its digest) before validating. The capped report travels in `validation.finished` up to the
//! threshold; past it the event carries only the verdict (the store keeps the report, and the
//! results function needs only the verdict), so nothing is written that a deletion must find. A
//! referenced object that is missing or does not match its reference can never appear on a
//! re-read: the revision fails at once with the reason, never retried.

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_core::design::{Payload, INLINE_PAYLOAD_MAX_BYTES};
use openqq_core::event::{ValidationFinished, ValidationRequested, ValidationStarted};
use openqq_core::{
    Applied, Change, DesignId, DesignSpec, Envelope, EventKind, ObjectRef, ObjectStore, PortError, TenantId, Verdict,
};
use openqq_fpga::{FileNames, Finding, Input, Location, Report, MAX_REPORT_FINDINGS};
use openqq_runtime::{Outbox, RecordError, RecordHandler, Step, Write};
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const NAME: &str = "validation";

pub struct Validation {
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
/// `examples/hostile.rs`), so the largest inline body the API accepts (4.5 MiB) takes about
/// 0.5 s and typical designs a millisecond: 5 s leaves ample room on a busy machine while
/// bounding how long one record can hold its partition. An uploaded netlist near the 64 MiB
/// upload limit of that worst shape ends in the budget finding.
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

/// A specification's payloads read from the object store, where it holds them by reference.
#[derive(Debug, Default)]
pub struct Fetched {
    pub netlist: Option<Vec<u8>>,
    pub constraints: Option<Vec<u8>>,
    pub bitstream: Option<Vec<u8>>,
}

/// Runs the validator on a specification whose payloads are all inline, for at most `budget`.
/// Pure and CPU-bound.
pub fn validate(spec: &DesignSpec, budget: Duration) -> Report {
    validate_with(spec, &Fetched::default(), budget)
}

/// An error report with one finding (a payload the validator cannot even read).
fn unreadable(code: &str, message: String) -> Report {
    Report::new(Vec::new(), vec![Finding::error(code, message, Location::default())])
}

/// The report of a record whose payloads took the whole budget to read from the object store:
/// the budget's finding, as when the validator itself runs out of time.
fn reading_outlasted(budget: Duration) -> Report {
    let message = format!(
        "reading the design's payloads from the object store did not end within the validation's time budget of \
         {} ms, so the design is not accepted",
        budget.as_millis()
    );
    unreadable(openqq_fpga::BUDGET_EXCEEDED, message)
}

/// A text payload, inline or fetched; a fetched one must be UTF-8. The error is the finding's
/// code and message.
fn text<'a>(
    inline: Option<&'a str>,
    fetched: Option<&'a [u8]>,
    payload: Payload,
) -> Result<&'a str, (&'static str, String)> {
    match (inline, fetched) {
        (_, Some(bytes)) => std::str::from_utf8(bytes).map_err(|e| {
            let what = payload.field().trim_end_matches(".text");
            ("PAYLOAD_MALFORMED", format!("the uploaded {what} is not UTF-8 text: {e}"))
        }),
        (Some(inline), None) => Ok(inline),
        (None, None) => Err((
            "PAYLOAD_MISSING",
            format!("the {} was given by reference and not read from the object store", payload.field()),
        )),
    }
}

/// [`validate`], with the payloads the specification holds by reference in `fetched`.
pub fn validate_with(spec: &DesignSpec, fetched: &Fetched, budget: Duration) -> Report {
    validate_since(spec, fetched, budget, None)
}

/// [`validate_with`], whose budget began at `started` (now when `None`): the time spent reading
/// the payloads before counts against it.
pub fn validate_since(spec: &DesignSpec, fetched: &Fetched, budget: Duration, started: Option<Instant>) -> Report {
    let bitstream = match (&spec.bitstream_base64, &fetched.bitstream) {
        (_, Some(bytes)) => Some(bytes.clone()),
        (Some(b), None) => match B64.decode(b) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                return unreadable("BITSTREAM_MALFORMED", format!("bitstream_base64 is not valid base64: {e}"));
            }
        },
        (None, None) if spec.bitstream_ref.is_some() => {
            return unreadable("PAYLOAD_MISSING", "the bitstream was given by reference and not read".into());
        }
        (None, None) => None,
    };
    let netlist = match text(spec.netlist.as_deref().map(RawValue::get), fetched.netlist.as_deref(), Payload::Netlist) {
        Ok(n) => n,
        Err((code, message)) => return unreadable(code, message),
    };
    // Each family reads one constraints format (iCE40 PCF, ECP5 LPF).
    if let Some(family) = openqq_fpga::Family::of_device(&spec.target.device) {
        let (given, wanted) = (spec.constraints.format.name(), family.constraint_format());
        if given != wanted {
            let message = format!(
                "the {} is an {} part, whose constraints are {}; these are {}",
                spec.target.device,
                family.name(),
                wanted.to_uppercase(),
                given.to_uppercase()
            );
            return unreadable("CONSTRAINTS_FORMAT_MISMATCH", message);
        }
    }
    let inline_pcf = spec.constraints.text_ref.is_none().then_some(spec.constraints.text.as_str());
    let pcf = match text(inline_pcf, fetched.constraints.as_deref(), Payload::Constraints) {
        Ok(p) => p,
        Err((code, message)) => return unreadable(code, message),
    };
    let input = Input {
        device: &spec.target.device,
        package: &spec.target.package,
        netlist,
        constraints: Some(pcf),
        bitstream: bitstream.as_deref(),
        top: spec.options.top.as_deref(),
        allow_unconstrained: spec.options.allow_unconstrained,
        files: FileNames::default(),
        budget: Some(budget),
        started,
    };
    openqq_fpga::validate(&input)
}

/// Where a validation record is between its two writes.
pub enum Stage {
    /// `validation.started` was written: validate next. (The request is boxed: it holds the
    /// specification, far larger than the other stage.)
    Started { request: Box<Envelope<ValidationRequested>>, started: Envelope<ValidationStarted> },
    /// `validation.finished` was written: publish it.
    Finished(Envelope<ValidationFinished>),
}

#[async_trait]
impl RecordHandler for Validation {
    type Payload = ValidationRequested;
    type State = Stage;
    const KIND: EventKind = EventKind::ValidationRequested;

    fn name(&self) -> &'static str {
        NAME
    }

    fn plan(&self, request: Envelope<ValidationRequested>) -> Result<Step<Stage>, RecordError> {
        let cause = request.cause();
        let started = Envelope::new(EventKind::ValidationStarted, &cause, NAME, ValidationStarted {});
        // A replayed request may revive its revision at either write (see `apply_for`).
        let write =
            Write::new(&cause, request.replay_of.is_some(), started.timeline_entry(), Change::ValidationStarted);
        Ok(Step::Write(write, Stage::Started { request: Box::new(request), started }))
    }

    async fn after(&self, stage: Stage, applied: Applied, out: &mut Outbox) -> Result<Step<Stage>, RecordError> {
        match stage {
            Stage::Started { .. } if applied == Applied::Stale => {
                tracing::info!("Validation of an older revision was skipped; a newer one already started.");
                Ok(Step::Done)
            }
            Stage::Started { request, started } => {
                out.publish(&started);
                self.validated(*request).await
            }
            Stage::Finished(finished) => {
                out.publish(&finished);
                Ok(Step::Done)
            }
        }
    }
}

impl Validation {
    /// Runs the validator on `spec`, its payloads read from `tenant`'s objects where they are
    /// held by reference. The budget covers the whole of it: reading the objects (and checking
    /// their digests), parsing and checking; a read that outlasts it ends the record with the
    /// budget's finding, like a validation that does.
    async fn validated_report(&self, tenant: &TenantId, spec: DesignSpec) -> Result<Report, RecordError> {
        let t0 = Instant::now();
        let budget = self.budget;
        let Ok(fetched) = tokio::time::timeout(budget, self.fetch(tenant, &spec)).await else {
            metrics::histogram!("openqq_validation_duration_seconds").record(t0.elapsed().as_secs_f64());
            return Ok(reading_outlasted(budget));
        };
        let fetched = fetched?;
        let report = tokio::task::spawn_blocking(move || validate_since(&spec, &fetched, budget, Some(t0)))
            .await
            .map_err(|e| {
                if e.is_panic() {
                    // The validator is deterministic: the same input panics again.
                    let message = openqq_runtime::dead_letter::panic_message(e.into_panic().as_ref());
                    RecordError::Permanent(format!("bug: the validator panicked: {message}"))
                } else {
                    RecordError::Retriable(format!("validator task failed: {e}"))
                }
            })?;
        metrics::histogram!("openqq_validation_duration_seconds").record(t0.elapsed().as_secs_f64());
        Ok(report)
    }

    /// Validates the request's revision and names the write that stores its report with
    /// `validation.finished`.
    async fn validated(&self, request: Envelope<ValidationRequested>) -> Result<Step<Stage>, RecordError> {
        let cause = request.cause();
        let replayed = request.replay_of.is_some();
        let checks = request.payload.checks;
        let spec = request.payload.spec;
        let synthesised_nothing = checks.is_some() && spec.netlist.is_none() && spec.netlist_ref.is_none();
        let report = if synthesised_nothing {
            unreadable("SYNTHESIS_FAILED", "synthesis gave no netlist to validate; the checks say why".into())
        } else {
            self.validated_report(&cause.tenant_id, spec).await?
        };
        let failed_check = checks.as_ref().is_some_and(|c| !c.passed);
        let verdict = if report.has_errors() || failed_check { Verdict::Fail } else { Verdict::Pass };
        let report = self.keep(&cause.tenant_id, &cause.design_id, report, checks.map(|c| c.report)).await?;
        let payload = finished(verdict, &report);

        let finished = Envelope::new(EventKind::ValidationFinished, &cause, NAME, payload);
        let change = Change::ValidationFinished { verdict, report };
        let write = Write::new(&cause, replayed, finished.timeline_entry(), change);
        Ok(Step::Write(write, Stage::Finished(finished)))
    }
}

/// The `validation.finished` payload: the verdict, and the (capped) report up to
/// [`INLINE_PAYLOAD_MAX_BYTES`]; a larger one is only in the store, so the record stays small.
pub fn finished(verdict: Verdict, report: &RawValue) -> ValidationFinished {
    let inline = report.get().len() <= INLINE_PAYLOAD_MAX_BYTES;
    ValidationFinished { verdict, report: inline.then(|| report.to_owned()) }
}

/// The report as stored and published: the capped report, and where the full one is when
/// something was cut.
#[derive(Serialize)]
struct Kept<'a> {
    #[serde(flatten)]
    report: &'a Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_report: Option<FullReportRef>,
    /// What the HDL checks found, for a revision given as source.
    #[serde(skip_serializing_if = "Option::is_none")]
    checks: Option<Box<RawValue>>,
}

/// Where a full report is, and whose it is: the object holds that design's report alone.
#[derive(Serialize)]
struct FullReportRef {
    #[serde(flatten)]
    object: ObjectRef,
    design_id: DesignId,
}

/// A full report as kept in the object store: the report, naming its design first.
#[derive(Serialize)]
struct FullReport<'a> {
    design_id: &'a DesignId,
    #[serde(flatten)]
    report: &'a Report,
}

impl Validation {
    /// Reads every payload `spec` holds by reference from `tenant`'s objects. A missing object or
    /// one that does not match its reference is permanent (a re-read finds the same); an object
    /// store that is unavailable is retriable.
    async fn fetch(&self, tenant: &TenantId, spec: &DesignSpec) -> Result<Fetched, RecordError> {
        let mut fetched = Fetched::default();
        for (payload, object) in spec.references() {
            let bytes = match self.objects.get(tenant, &object.digest).await {
                Ok(bytes) if bytes.len() as u64 == object.bytes => bytes,
                Ok(bytes) => {
                    return Err(RecordError::Permanent(format!(
                        "the {} object {} has {} bytes, its reference says {}",
                        payload.field(),
                        object.digest,
                        bytes.len(),
                        object.bytes
                    )))
                }
                Err(PortError::NotFound) => {
                    return Err(RecordError::Permanent(format!(
                        "the {} object {} ({} bytes) is not in the object store",
                        payload.field(),
                        object.digest,
                        object.bytes
                    )))
                }
                Err(e) if e.is_retriable() => return Err(e.into()),
                Err(e) => {
                    return Err(RecordError::Permanent(format!(
                        "the {} object {} could not be read: {e}",
                        payload.field(),
                        object.digest
                    )))
                }
            };
            match payload {
                Payload::Netlist => fetched.netlist = Some(bytes),
                Payload::Constraints => fetched.constraints = Some(bytes),
                Payload::Bitstream => fetched.bitstream = Some(bytes),
            }
        }
        Ok(fetched)
    }

    /// Caps `report` to fit any record; when that cut something, stores the full report (naming
    /// `design`) as an object of `tenant` and points at it.
    async fn keep(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        report: Report,
        checks: Option<Box<RawValue>>,
    ) -> Result<Box<RawValue>, RecordError> {
        let full = serde_json::to_vec(&FullReport { design_id: design, report: &report }).expect("reports serialise");
        let (capped, cut) = report.capped(MAX_REPORT_FINDINGS);
        let full_report = if cut {
            match self.objects.put(tenant, full).await {
                Ok(object) => Some(FullReportRef { object, design_id: design.clone() }),
                Err(e) if e.is_retriable() => return Err(e.into()),
                Err(e) => {
                    tracing::warn!(error = %e, "The full report could not be kept; only the capped one is stored.");
                    None
                }
            }
        } else {
            None
        };
        let kept = serde_json::to_string(&Kept { report: &capped, full_report, checks }).expect("reports serialise");
        Ok(RawValue::from_string(kept).expect("valid JSON"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openqq_adapters::{Backends, Durability};
    use serde_json::json;

    fn spec(netlist_ref: Option<&ObjectRef>) -> DesignSpec {
        let mut j = json!({
            "target": {"device": "hx8k", "package": "ct256"},
            "netlist": {"modules": {"top": {"attributes": {"top": "1"}, "ports": {}, "cells": {}}}},
            "constraints": {"format": "pcf", "text": ""},
        });
        if let Some(r) = netlist_ref {
            j.as_object_mut().unwrap().remove("netlist");
            j["netlist_ref"] = serde_json::to_value(r).unwrap();
        }
        serde_json::from_value(j).unwrap()
    }

    #[test]
    fn a_report_travels_inline_up_to_the_threshold_and_not_at_all_past_it() {
        let at = |n: usize| RawValue::from_string(format!(r#"{{"x":"{}"}}"#, "a".repeat(n - 8))).unwrap();
        let limit = at(INLINE_PAYLOAD_MAX_BYTES);
        assert_eq!(limit.get().len(), INLINE_PAYLOAD_MAX_BYTES);
        assert_eq!(finished(Verdict::Pass, &limit).report.as_deref().map(RawValue::get), Some(limit.get()));
        let past = finished(Verdict::Fail, &at(INLINE_PAYLOAD_MAX_BYTES + 1));
        assert_eq!((past.verdict, past.report.is_none()), (Verdict::Fail, true));
    }

    #[test]
    fn a_netlist_given_by_reference_is_validated_from_the_fetched_bytes_and_never_silently_skipped() {
        let object = ObjectRef { digest: "ab".repeat(32), bytes: 2 };
        let by_ref = spec(Some(&object));
        let missing = validate(&by_ref, DEFAULT_BUDGET);
        assert!(missing.findings.iter().any(|f| f.code == "PAYLOAD_MISSING"), "{:?}", missing.findings);
        let inline = validate(&spec(None), DEFAULT_BUDGET);
        let netlist = by_ref_netlist();
        let fetched = Fetched { netlist: Some(netlist.into_bytes()), ..Fetched::default() };
        let from_object = validate_with(&by_ref, &fetched, DEFAULT_BUDGET);
        assert_eq!(serde_json::to_value(&from_object).unwrap(), serde_json::to_value(&inline).unwrap());
        let garbage = Fetched { netlist: Some(vec![0xff, 0xfe]), ..Fetched::default() };
        let report = validate_with(&by_ref, &garbage, DEFAULT_BUDGET);
        assert!(report.findings.iter().any(|f| f.code == "PAYLOAD_MALFORMED"), "{:?}", report.findings);
    }

    #[test]
    fn an_ecp5_target_takes_lpf_constraints_and_refuses_pcf_ones() {
        let ecp5 = |format: &str, text: &str| -> DesignSpec {
            serde_json::from_value(json!({
                "target": {"device": "LFE5U-25F", "package": "CABGA256"},
                "netlist": {"modules": {"top": {"attributes": {"top": "1"}, "ports": {"clk": {"direction": "input", "bits": [2]}}, "cells": {}}}},
                "constraints": {"format": format, "text": text},
            }))
            .unwrap()
        };
        let report = validate(&ecp5("lpf", "LOCATE COMP \"clk\" SITE \"P6\";\n"), DEFAULT_BUDGET);
        assert_eq!(report.verdict, openqq_fpga::Verdict::Pass, "{:?}", report.findings);
        assert!(report.utilization.iter().any(|u| u.resource == "TRELLIS_IO" && u.used == 1));
        let report = validate(&ecp5("pcf", "set_io clk P6\n"), DEFAULT_BUDGET);
        let codes: Vec<&str> = report.findings.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, ["CONSTRAINTS_FORMAT_MISMATCH"]);
        assert!(
            report.findings[0].message.contains("constraints are LPF; these are PCF"),
            "{}",
            report.findings[0].message
        );
    }

    fn by_ref_netlist() -> String {
        spec(None).netlist.unwrap().get().to_owned()
    }

    fn validation(b: &Backends) -> Validation {
        Validation { objects: b.objects.clone(), budget: DEFAULT_BUDGET }
    }

    #[tokio::test]
    async fn a_missing_or_mismatched_object_is_a_permanent_failure_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let b = Backends::embedded(dir.path(), 1, Durability::Process).unwrap();
        let (acme, globex) = (TenantId::parse("acme").unwrap(), TenantId::parse("globex").unwrap());
        let stored = b.objects.put(&acme, by_ref_netlist().into_bytes()).await.unwrap();
        let v = validation(&b);

        let fetched = v.fetch(&acme, &spec(Some(&stored))).await.unwrap();
        assert_eq!(fetched.netlist.as_deref(), Some(by_ref_netlist().as_bytes()));

        let Err(RecordError::Permanent(reason)) = v.fetch(&globex, &spec(Some(&stored))).await else {
            panic!("another tenant's object is missing for this one, permanently");
        };
        assert!(reason.contains("not in the object store") && reason.contains(&stored.digest), "{reason}");

        let longer = ObjectRef { bytes: stored.bytes + 1, ..stored.clone() };
        let Err(RecordError::Permanent(reason)) = v.fetch(&acme, &spec(Some(&longer))).await else {
            panic!("a length that does not match is permanent");
        };
        assert!(reason.contains("its reference says"), "{reason}");
    }

    /// An object store whose reads answer only after `delay`.
    struct SlowReads {
        inner: Arc<dyn ObjectStore>,
        delay: Duration,
    }

    #[async_trait]
    impl ObjectStore for SlowReads {
        async fn put(&self, tenant: &TenantId, bytes: Vec<u8>) -> openqq_core::ports::PortResult<ObjectRef> {
            self.inner.put(tenant, bytes).await
        }
        async fn get(&self, tenant: &TenantId, digest: &str) -> openqq_core::ports::PortResult<Vec<u8>> {
            tokio::time::sleep(self.delay).await;
            self.inner.get(tenant, digest).await
        }
        async fn usage(&self, tenant: &TenantId) -> openqq_core::ports::PortResult<u64> {
            self.inner.usage(tenant).await
        }
        async fn stat(&self, tenant: &TenantId, digest: &str) -> openqq_core::ports::PortResult<Option<u64>> {
            self.inner.stat(tenant, digest).await
        }
        async fn put_upload(&self, tenant: &TenantId, bytes: Vec<u8>) -> openqq_core::ports::PortResult<ObjectRef> {
            self.inner.put_upload(tenant, bytes).await
        }
        async fn adopt_upload(&self, tenant: &TenantId, object: &ObjectRef) -> openqq_core::ports::PortResult<()> {
            self.inner.adopt_upload(tenant, object).await
        }
        async fn read_upload(&self, tenant: &TenantId, object: &ObjectRef) -> openqq_core::ports::PortResult<Vec<u8>> {
            self.inner.read_upload(tenant, object).await
        }
        async fn delete(&self, tenant: &TenantId, digest: &str) -> openqq_core::ports::PortResult<bool> {
            self.inner.delete(tenant, digest).await
        }
    }

    /// `luts` chained LUTs: tens of milliseconds of validation per ten thousand.
    fn lut_chain(luts: usize) -> Vec<u8> {
        let cells: serde_json::Map<String, serde_json::Value> = (0..luts)
            .map(|i| (format!("l{i}"), json!({"type": "SB_LUT4", "connections": {"I0": [10 + i], "O": [11 + i]}})))
            .collect();
        serde_json::to_vec(&json!({"modules": {"top": {"attributes": {"top": "1"}, "ports": {}, "cells": cells}}}))
            .unwrap()
    }

    fn codes(report: &Report) -> Vec<&str> {
        report.findings.iter().map(|f| f.code.as_str()).collect()
    }

    #[tokio::test]
    async fn a_read_from_the_object_store_that_outlasts_the_budget_ends_the_record_with_the_budget_finding() {
        let dir = tempfile::tempdir().unwrap();
        let b = Backends::embedded(dir.path(), 1, Durability::Process).unwrap();
        let acme = TenantId::parse("acme").unwrap();
        let stored = b.objects.put(&acme, by_ref_netlist().into_bytes()).await.unwrap();
        let budget = Duration::from_millis(300);
        let slow = Arc::new(SlowReads { inner: b.objects.clone(), delay: Duration::from_secs(30) });
        let v = Validation { objects: slow, budget };
        let t0 = Instant::now();
        let report = v.validated_report(&acme, spec(Some(&stored))).await.unwrap();
        assert!(t0.elapsed() < budget + Duration::from_millis(500), "took {:?}", t0.elapsed());
        assert_eq!(report.verdict, openqq_fpga::Verdict::Fail);
        assert_eq!(codes(&report), [openqq_fpga::BUDGET_EXCEEDED]);
        assert!(report.findings[0].message.contains("reading the design's payloads"), "{}", report.findings[0].message);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_time_spent_reading_the_object_counts_against_the_validations_budget() {
        let dir = tempfile::tempdir().unwrap();
        let b = Backends::embedded(dir.path(), 1, Durability::Process).unwrap();
        let acme = TenantId::parse("acme").unwrap();
        let stored = b.objects.put(&acme, lut_chain(20_000)).await.unwrap();
        let budget = Duration::from_secs(3);
        // Read at once, the netlist validates well within the budget.
        let report = validation(&b).validated_report(&acme, spec(Some(&stored))).await.unwrap();
        assert!(!codes(&report).contains(&openqq_fpga::BUDGET_EXCEEDED), "{:?}", codes(&report));
        // Read in all but 10 ms of it, the validator has only those 10 ms left.
        let slow = Arc::new(SlowReads { inner: b.objects.clone(), delay: budget - Duration::from_millis(10) });
        let v = Validation { objects: slow, budget };
        let t0 = Instant::now();
        let report = v.validated_report(&acme, spec(Some(&stored))).await.unwrap();
        assert!(codes(&report).contains(&openqq_fpga::BUDGET_EXCEEDED), "{:?}", codes(&report));
        assert!(t0.elapsed() < budget + Duration::from_secs(1), "took {:?}", t0.elapsed());
    }
}
