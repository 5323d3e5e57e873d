//! The synthesis function: a revision given as HDL source (`source`, with `tests` and a
//! `reference`) is synthesised with Yosys for its target's family, its testbenches run with
//! Icarus Verilog and its reference checked for equivalence ([`checks`]); the netlist goes to the
//! object store and the revision on to validation (`validation.requested`, with `netlist_ref` and
//! what the checks found), which validates the netlist like any other and adds the checks to the
//! report.
//!
//! A lane of its own: the tools take seconds where netlist validation takes milliseconds, so
//! they run on their own topic (`synthesis.requested`) and function, never in validation's.
//!
//! Its writes are timeline entries that move no status: `synthesis.started` first, then
//! `synthesis.finished`, `simulation.finished` (when testbenches ran) and `equivalence.finished`
//! (when a reference was checked), each with its verdict, in the tenant's feed as well. Every
//! write is conditional on revision, so a re-read runs the (deterministic) tools again and
//! re-publishes, but applies nothing twice.

pub mod checks;

use async_trait::async_trait;
use openqq_core::event::DesignSubmitted;
use openqq_core::hdl::HdlChecks;
use openqq_core::{Applied, Change, Envelope, EventKind, ObjectStore, Verdict};
use openqq_runtime::{Outbox, RecordError, RecordHandler, Step, Write};
use std::collections::VecDeque;
use std::sync::Arc;

pub use checks::Budget;

pub const NAME: &str = "synthesis";

pub struct Synthesis {
    /// Where the synthesised netlist goes.
    pub objects: Arc<dyn ObjectStore>,
    /// How long the tools may run for one revision.
    pub budget: Budget,
}

/// Where a record is between its writes.
pub enum Stage {
    /// `synthesis.started` was written: run the checks next.
    Started(Box<Envelope<DesignSubmitted>>),
    /// The checks ran; their entries are written one by one, then validation is requested.
    Checked { request: Box<Envelope<DesignSubmitted>>, entries: VecDeque<(EventKind, Verdict)> },
}

#[async_trait]
impl RecordHandler for Synthesis {
    type Payload = DesignSubmitted;
    type State = Stage;
    const KIND: EventKind = EventKind::SynthesisRequested;

    fn name(&self) -> &'static str {
        NAME
    }

    fn plan(&self, request: Envelope<DesignSubmitted>) -> Result<Step<Stage>, RecordError> {
        let write = entry(&request, EventKind::SynthesisStarted, None);
        Ok(Step::Write(write, Stage::Started(Box::new(request))))
    }

    async fn after(&self, stage: Stage, applied: Applied, out: &mut Outbox) -> Result<Step<Stage>, RecordError> {
        match stage {
            Stage::Started(_) if applied == Applied::Stale => {
                tracing::info!("Synthesis of an older revision was skipped; a newer one already started.");
                Ok(Step::Done)
            }
            Stage::Started(request) => self.checked(*request).await,
            Stage::Checked { request, mut entries } => match entries.pop_front() {
                Some((kind, verdict)) => {
                    let write = entry(&request, kind, Some(verdict));
                    Ok(Step::Write(write, Stage::Checked { request, entries }))
                }
                None => {
                    out.publish(&Envelope::new(
                        EventKind::ValidationRequested,
                        &request.cause(),
                        NAME,
                        request.payload,
                    ));
                    Ok(Step::Done)
                }
            },
        }
    }
}

/// The timeline entry of `kind` for `request`'s revision, with the step's verdict.
fn entry(request: &Envelope<DesignSubmitted>, kind: EventKind, verdict: Option<Verdict>) -> Write {
    let cause = request.cause();
    let entry = Envelope::new(kind, &cause, NAME, serde_json::json!({})).timeline_entry();
    Write::new(&cause, request.replay_of.is_some(), entry, Change::Checked { verdict })
}

impl Synthesis {
    /// Runs the checks, keeps the netlist, and turns the request into what validation reads: the
    /// netlist by reference and the checks' report in place of the source.
    async fn checked(&self, mut request: Envelope<DesignSubmitted>) -> Result<Step<Stage>, RecordError> {
        let spec = &mut request.payload.spec;
        let Some(source) = spec.source.take() else {
            return Err(RecordError::Permanent("synthesis.requested without source".into()));
        };
        let (tests, reference) = (std::mem::take(&mut spec.tests), spec.reference.take());
        let Some(family) = openqq_hdl::Family::of_device(&spec.target.device) else {
            // Validation names the unknown device; there is nothing to synthesise for.
            let report = serde_json::json!({"synthesis": {"verdict": "refused",
                "reason": format!("no FPGA family is known for the device {}", spec.target.device)}});
            request.payload.checks = Some(checks_of(false, &report)?);
            let write = entry(&request, EventKind::SynthesisFinished, Some(Verdict::Fail));
            return Ok(Step::Write(write, Stage::Checked { request: Box::new(request), entries: VecDeque::new() }));
        };
        let budget = self.budget;
        let t0 = std::time::Instant::now();
        let outcome =
            tokio::task::spawn_blocking(move || checks::run(&source, family, &tests, reference.as_ref(), budget))
                .await
                .map_err(|e| RecordError::Retriable(format!("the checks' task failed: {e}")))?
                .map_err(|e| RecordError::Retriable(format!("the HDL tools could not run: {e}")))?;
        metrics::histogram!("openqq_hdl_checks_duration_seconds").record(t0.elapsed().as_secs_f64());
        if let Some(netlist) = outcome.netlist() {
            let stored = self.objects.put(&request.tenant_id, netlist.to_vec()).await?;
            request.payload.spec.netlist_ref = Some(stored);
        }
        request.payload.checks = Some(checks_of(outcome.passed(), &checks::report(&outcome))?);
        let mut entries = VecDeque::from([(EventKind::SynthesisFinished, outcome.synthesis_verdict())]);
        entries.extend(outcome.simulation_verdict().map(|v| (EventKind::SimulationFinished, v)));
        entries.extend(outcome.equivalence_verdict().map(|v| (EventKind::EquivalenceFinished, v)));
        let (kind, verdict) = entries.pop_front().expect("synthesis always has an entry");
        let write = entry(&request, kind, Some(verdict));
        Ok(Step::Write(write, Stage::Checked { request: Box::new(request), entries }))
    }
}

fn checks_of(passed: bool, report: &serde_json::Value) -> Result<HdlChecks, RecordError> {
    let report = serde_json::value::to_raw_value(report)
        .map_err(|e| RecordError::Permanent(format!("bug: the checks' report does not serialise: {e}")))?;
    Ok(HdlChecks { passed, report })
}
