//! The synthesis function: a revision given as HDL source (`source`, with `tests` and a
//! `reference`) is synthesised with Yosys for its target's family, its testbenches run with
//! Icarus Verilog and its reference checked for equivalence ([`checks`]); the netlist goes to the
//! object store and the revision on to validation (`validation.requested`, with `netlist_ref` and
//! what the checks found), which validates the netlist like any other and adds the checks to the
//! report.
//!
//! A design to be written by a model (`generate`) gets its source from the same code in the
//! generation function ([`Generation`], the `generation.requested` lane): the repair loop
//! ([`repair`]) asks the generation backend for Verilog and runs the checks on each attempt,
//! telling the model the latest failure, until they pass or the attempts are spent; its
//! timeline starts with `generation.started` and has `generation.finished` before the checks'
//! entries, and the report's `checks.generation` lists every attempt (tokens, duration, what
//! failed, its HDL by reference).
//!
//! Lanes of their own: the tools take seconds where netlist validation takes milliseconds, and a
//! model call seconds more, so each runs on its own topic and function, never in another's.
//!
//! Its writes are timeline entries that move no status: `synthesis.started` (or
//! `generation.started`) first, then `synthesis.finished`, `simulation.finished` (when
//! testbenches ran) and `equivalence.finished` (when a reference was checked), each with its
//! verdict and time, in the tenant's feed as well. Every
//! write is conditional on revision, so a re-read applies nothing twice; it runs nothing again
//! either once validation took the revision up (see [`Synthesis::already_past`]).

pub mod checks;
pub mod repair;

use async_trait::async_trait;
use openqq_core::design::INLINE_PAYLOAD_MAX_BYTES;
use openqq_core::event::DesignSubmitted;
use openqq_core::generation::GenerationBackend;
use openqq_core::hdl::HdlChecks;
use openqq_core::{Applied, Change, Envelope, EventKind, ObjectStore, Verdict};
use openqq_runtime::{Outbox, RecordError, RecordHandler, Step, Write};
use std::collections::VecDeque;
use std::sync::Arc;

pub use checks::Budget;

pub const NAME: &str = "synthesis";

pub struct Synthesis {
    /// Where the synthesised netlist and each generated source go.
    pub objects: Arc<dyn ObjectStore>,
    /// How long the tools may run for one revision (for each attempt of a generated one).
    pub budget: Budget,
    /// The model that writes designs from prompts (one that answers "not configured" where the
    /// deployment has none; the API refuses such jobs first).
    pub generation: Arc<dyn GenerationBackend>,
    /// The deployment's cap on a job's attempts.
    pub max_attempts: u32,
    /// Where generation tokens are charged (the store), and the limits.
    pub budgets: Arc<dyn openqq_core::DailyBudgets>,
    /// Where a re-read record looks whether its revision is already past the checks.
    pub designs: Arc<dyn openqq_core::DesignReads>,
    pub tokens: repair::TokenLimits,
    /// The most records of one tenant a batch handles ([`SOURCE_SHARE`] or [`GENERATION_SHARE`]);
    /// the rest go back to the end of the topic (`openqq_runtime::share`). `None`: all of them
    /// (`--bulkheads off`).
    pub share: Option<usize>,
}

/// A tenant's share of a synthesis batch: two revisions (seconds each) before the partition
/// moves on to the other tenants hashed to it.
pub const SOURCE_SHARE: usize = 2;

/// A tenant's share of a generation batch: one revision (a model call or several, and the
/// checks of each attempt).
pub const GENERATION_SHARE: usize = 1;

/// Where a record is between its writes.
pub enum Stage {
    /// The first entry (`synthesis.started`, or `generation.started` for a design to be written
    /// by a model) was written: run the checks next.
    Started(Box<Envelope<DesignSubmitted>>),
    /// The checks ran; their entries are written one by one, then validation is requested.
    Checked { request: Box<Envelope<DesignSubmitted>>, entries: VecDeque<Finished> },
}

#[async_trait]
impl RecordHandler for Synthesis {
    type Payload = DesignSubmitted;
    type State = Stage;
    const KIND: EventKind = EventKind::SynthesisRequested;

    fn name(&self) -> &'static str {
        NAME
    }

    fn share(&self) -> Option<usize> {
        self.share
    }

    fn plan(&self, request: Envelope<DesignSubmitted>) -> Result<Step<Stage>, RecordError> {
        self.first(NAME, request)
    }

    async fn after(&self, stage: Stage, applied: Applied, out: &mut Outbox) -> Result<Step<Stage>, RecordError> {
        self.next(NAME, stage, applied, out).await
    }
}

/// The generation function's name.
pub const GENERATION: &str = "generation";

/// The generation function: the synthesis function's work for designs to be written by a model,
/// on their own topic (`generation.requested`), consumer group and (on AWS) function with its own
/// reserved concurrency. A model call takes seconds; in a lane of their own, one tenant's burst of
/// them holds up only generations, never the source jobs in the synthesis lane. (With
/// `--bulkheads off` they share the synthesis lane instead, and [`Synthesis`] runs them there.)
pub struct Generation(pub Synthesis);

#[async_trait]
impl RecordHandler for Generation {
    type Payload = DesignSubmitted;
    type State = Stage;
    const KIND: EventKind = EventKind::GenerationRequested;

    fn name(&self) -> &'static str {
        GENERATION
    }

    fn share(&self) -> Option<usize> {
        self.0.share
    }

    fn plan(&self, request: Envelope<DesignSubmitted>) -> Result<Step<Stage>, RecordError> {
        self.0.first(GENERATION, request)
    }

    async fn after(&self, stage: Stage, applied: Applied, out: &mut Outbox) -> Result<Step<Stage>, RecordError> {
        self.0.next(GENERATION, stage, applied, out).await
    }
}

/// A step that ended: its entry's kind, its verdict and how long it took (milliseconds).
pub type Finished = (EventKind, Verdict, u64);

/// The timeline entry of `kind` for `request`'s revision, with the step's verdict and time when
/// it ended, written by the function `producer`.
fn entry(
    producer: &'static str,
    request: &Envelope<DesignSubmitted>,
    kind: EventKind,
    ended: Option<(Verdict, u64)>,
) -> Write {
    let cause = request.cause();
    let entry = Envelope::new(kind, &cause, producer, serde_json::json!({})).timeline_entry();
    let change = Change::Checked { verdict: ended.map(|(v, _)| v), elapsed_ms: ended.map(|(_, ms)| ms) };
    Write::new(&cause, request.replay_of.is_some(), entry, change)
}

impl Synthesis {
    /// Whether `request`'s revision no longer needs its checks: validation already took it up
    /// (its status moved on from `submitted`), or a newer revision of the design arrived. A
    /// re-read (after a crash, or a retriable failure elsewhere in its partition) then costs no
    /// tool run and, for a design written by a model, no second charge of tokens. A re-read
    /// before validation took the revision up runs everything again: the first run may have
    /// ended before its `validation.requested` was published.
    async fn already_past(&self, request: &Envelope<DesignSubmitted>) -> Result<bool, RecordError> {
        let design = self.designs.get(&request.tenant_id, &request.design_id).await?;
        Ok(design.is_some_and(|d| {
            d.revision > request.revision
                || (d.revision == request.revision && d.status != openqq_core::DesignStatus::Submitted)
        }))
    }

    /// The record's first write: `generation.started` for a design to be written by a model,
    /// else `synthesis.started`.
    fn first(&self, producer: &'static str, request: Envelope<DesignSubmitted>) -> Result<Step<Stage>, RecordError> {
        let first = match request.payload.spec.generate {
            Some(_) => EventKind::GenerationStarted,
            None => EventKind::SynthesisStarted,
        };
        let write = entry(producer, &request, first, None);
        Ok(Step::Write(write, Stage::Started(Box::new(request))))
    }

    async fn next(
        &self,
        producer: &'static str,
        stage: Stage,
        applied: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Stage>, RecordError> {
        match stage {
            Stage::Started(_) if applied == Applied::Stale => {
                tracing::info!("Synthesis of an older revision was skipped; a newer one already started.");
                Ok(Step::Done)
            }
            Stage::Started(request) if applied == Applied::Duplicate && self.already_past(&request).await? => {
                tracing::info!("A re-read of a revision already past its checks was not checked again.");
                Ok(Step::Done)
            }
            Stage::Started(request) => self.checked(producer, *request).await,
            Stage::Checked { request, mut entries } => match entries.pop_front() {
                Some((kind, verdict, elapsed_ms)) => {
                    let write = entry(producer, &request, kind, Some((verdict, elapsed_ms)));
                    Ok(Step::Write(write, Stage::Checked { request, entries }))
                }
                None => {
                    out.publish(&Envelope::new(
                        EventKind::ValidationRequested,
                        &request.cause(),
                        producer,
                        request.payload,
                    ));
                    Ok(Step::Done)
                }
            },
        }
    }

    /// Runs the checks (for a design to be written by a model, the repair loop around them),
    /// keeps the netlist, and turns the request into what validation reads: the netlist by
    /// reference and the checks' report in place of the source.
    async fn checked(
        &self,
        producer: &'static str,
        mut request: Envelope<DesignSubmitted>,
    ) -> Result<Step<Stage>, RecordError> {
        let spec = &mut request.payload.spec;
        let (source, generate) = (spec.source.take(), spec.generate.take());
        let (tests, reference) = (std::mem::take(&mut spec.tests), spec.reference.take());
        let Some(family) = openqq_hdl::Family::of_device(&spec.target.device) else {
            // Validation names the unknown device; there is nothing to synthesise for.
            let report = serde_json::json!({"synthesis": {"verdict": "refused",
                "reason": format!("no FPGA family is known for the device {}", spec.target.device)}});
            request.payload.checks = Some(checks_of(false, &report)?);
            let write = entry(producer, &request, EventKind::SynthesisFinished, Some((Verdict::Fail, 0)));
            return Ok(Step::Write(write, Stage::Checked { request: Box::new(request), entries: VecDeque::new() }));
        };
        let mut ended = VecDeque::new();
        let (mut outcome, generation) = match (source, generate) {
            (Some(source), None) => {
                (Some(checks::run_async(source, family, tests, reference, self.budget).await?), None)
            }
            (None, Some(generate)) => {
                let job = repair::Job {
                    tenant: &request.tenant_id,
                    generate,
                    family,
                    constraints: &spec.constraints.text,
                    tests,
                    reference,
                    budget: self.budget,
                    max_attempts: self.max_attempts,
                    budgets: self.budgets.as_ref(),
                    tokens: self.tokens,
                };
                let looped = repair::run(self.generation.as_ref(), &self.objects, job).await?;
                ended.push_back((EventKind::GenerationFinished, looped.verdict()));
                let report = serde_json::to_value(&looped).unwrap_or_default();
                let outcome = looped.last.map(|(pcf, outcome)| {
                    // The model's pin constraints, where the tenant gave none.
                    if let Some(pcf) = pcf.filter(|p| p.len() <= INLINE_PAYLOAD_MAX_BYTES) {
                        if spec.constraints.text.trim().is_empty() && spec.constraints.text_ref.is_none() {
                            spec.constraints.text = pcf;
                        }
                    }
                    outcome
                });
                (outcome, Some(report))
            }
            _ => return Err(RecordError::Permanent("synthesis.requested without source or generate".into())),
        };
        if let Some(netlist) = outcome.as_ref().and_then(|o| o.netlist()) {
            let stored = self.objects.put(&request.tenant_id, netlist.to_vec()).await?;
            request.payload.spec.netlist_ref = Some(stored);
        }
        if let Some(outcome) = outcome.as_mut() {
            // The files the checks read and each failing testbench's waveform, for the report.
            outcome.keep(self.objects.as_ref(), &request.tenant_id).await?;
        }
        let passed = outcome.as_ref().is_some_and(|o| o.passed());
        // Each step's time is read from the whole report; the bounded one may keep only verdicts.
        let whole = checks::whole(outcome.as_ref(), generation);
        request.payload.checks = Some(checks_of(passed, &checks::bounded(&whole))?);
        if let Some(outcome) = &outcome {
            ended.push_back((EventKind::SynthesisFinished, outcome.synthesis_verdict()));
            ended.extend(outcome.simulation_verdict().map(|v| (EventKind::SimulationFinished, v)));
            ended.extend(outcome.equivalence_verdict().map(|v| (EventKind::EquivalenceFinished, v)));
        }
        let mut entries: VecDeque<Finished> =
            ended.into_iter().map(|(kind, verdict)| (kind, verdict, checks::elapsed_ms(&whole, kind))).collect();
        for (kind, verdict, elapsed_ms) in &entries {
            // A line per check, for `openqq trace`: its verdict and how long it took.
            tracing::info!(kind = %kind, outcome = verdict.as_str(), elapsed_ms, "A check finished.");
        }
        let (kind, verdict, elapsed_ms) =
            entries.pop_front().expect("a source's checks or a generation always have an entry");
        let write = entry(producer, &request, kind, Some((verdict, elapsed_ms)));
        Ok(Step::Write(write, Stage::Checked { request: Box::new(request), entries }))
    }
}

fn checks_of(passed: bool, report: &serde_json::Value) -> Result<HdlChecks, RecordError> {
    let report = serde_json::value::to_raw_value(report)
        .map_err(|e| RecordError::Permanent(format!("bug: the checks' report does not serialise: {e}")))?;
    Ok(HdlChecks { passed, report })
}
