//! The HDL checks of one revision, run with the real tools (blocking; call from
//! `spawn_blocking`): synthesis, then, when it gave a netlist, each testbench and the equivalence
//! check. Each tool run gets what is left of the revision's time budget (at most
//! [`Budget::per_run`]), so one revision holds its lane for at most [`Budget::per_job`].
//!
//! [`Outcome::keep`] then stores what the report points at ([`kept`]): the files the checks
//! read and each failing testbench's waveform, as objects of the tenant.

pub mod kept;
mod report;

pub use report::{bounded, report, whole, MAX_CHECKS_BYTES};

use openqq_core::generation::{FailedStage, Feedback};
use openqq_core::hdl::{Source, Testbench};
use openqq_core::{ObjectStore, PortError, TenantId, Verdict};
use openqq_hdl::{
    EquivalenceReport, EquivalenceVerdict, Family, Finding, HdlError, Limits, Severity, SynthVerdict, Synthesis,
    TestReport, TestVerdict,
};
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long the tools may run for one revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// One tool run (synthesis, one testbench, the equivalence check).
    pub per_run: Duration,
    /// All the runs of one revision together.
    pub per_job: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { per_run: Duration::from_secs(30), per_job: Duration::from_secs(120) }
    }
}

/// A step that did not run, or whose input was refused before any tool ran.
#[derive(Debug, Clone, Serialize)]
pub struct NotRun {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbench: Option<String>,
    /// `refused` (the input: the reason says what to change) or `skipped` (an earlier step
    /// failed, or the revision's time budget was spent).
    pub verdict: &'static str,
    pub reason: String,
}

/// The verdict of a step whose input was refused.
const REFUSED: &str = "refused";

impl NotRun {
    fn skipped(testbench: Option<&str>, reason: &str) -> Self {
        NotRun { testbench: testbench.map(str::to_owned), verdict: "skipped", reason: reason.to_owned() }
    }
}

/// One step's outcome: what the tool said, or why it did not run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Ran<T> {
    Done(T),
    NotRun(NotRun),
}

/// Everything the checks found.
#[derive(Debug, Serialize)]
pub struct Outcome {
    /// The files the checks read, once [kept](Outcome::keep).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<kept::Sources>,
    /// What the checks ran on, until it is kept.
    #[serde(skip)]
    pub inputs: Option<kept::Inputs>,
    pub synthesis: Ran<Synthesis>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub simulation: Vec<Ran<TestReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equivalence: Option<Ran<EquivalenceReport>>,
}

impl Outcome {
    /// The netlist synthesis wrote, if it did.
    pub fn netlist(&self) -> Option<&[u8]> {
        match &self.synthesis {
            Ran::Done(s) => s.netlist.as_deref(),
            Ran::NotRun(_) => None,
        }
    }

    pub fn synthesis_verdict(&self) -> Verdict {
        pass_if(matches!(&self.synthesis, Ran::Done(s) if s.verdict == SynthVerdict::Ok))
    }

    /// The testbenches' verdict, when any ran or was refused: fail if one did not pass.
    pub fn simulation_verdict(&self) -> Option<Verdict> {
        let refused = self.simulation.iter().any(is_refused);
        let ran: Vec<&TestReport> = self.simulation.iter().filter_map(done).collect();
        if ran.is_empty() && !refused {
            return None;
        }
        Some(pass_if(!refused && ran.iter().all(|t| t.passed())))
    }

    /// The equivalence check's verdict, when it ran: `unknown` (not proven within the budget)
    /// does not fail the design; the report says so.
    pub fn equivalence_verdict(&self) -> Option<Verdict> {
        match self.equivalence.as_ref()? {
            Ran::Done(e) => Some(pass_if(matches!(
                e.verdict,
                EquivalenceVerdict::Equivalent { .. } | EquivalenceVerdict::Unknown { .. }
            ))),
            refused if is_refused(refused) => Some(Verdict::Fail),
            Ran::NotRun(_) => None,
        }
    }

    /// Whether every check that ran passed (and synthesis gave a netlist).
    pub fn passed(&self) -> bool {
        [Some(self.synthesis_verdict()), self.simulation_verdict(), self.equivalence_verdict()]
            .into_iter()
            .flatten()
            .all(|v| v == Verdict::Pass)
    }
}

impl Outcome {
    /// Stores what the report points at for `tenant`: the files the checks read (`source`) and
    /// each failing testbench's waveform (its `ref`). Kept once; a second call stores nothing.
    pub async fn keep(&mut self, objects: &dyn ObjectStore, tenant: &TenantId) -> Result<(), PortError> {
        if let Some(inputs) = self.inputs.take() {
            self.source = Some(kept::sources(objects, tenant, &inputs).await?);
        }
        for test in &mut self.simulation {
            if let Ran::Done(TestReport { waveform: Some(w), .. }) = test {
                if !w.vcd.is_empty() {
                    w.object = Some(objects.put(tenant, std::mem::take(&mut w.vcd)).await?);
                }
            }
        }
        Ok(())
    }

    /// What a model is told when the checks failed, for a repair: the first failing step (
    /// synthesis, then the testbenches, then equivalence) and its messages. `None` when every
    /// check passed.
    pub fn feedback(&self) -> Option<Feedback> {
        match &self.synthesis {
            Ran::NotRun(n) => return Some(Feedback::new(FailedStage::Synthesis, [n.reason.clone()])),
            Ran::Done(s) if s.verdict != SynthVerdict::Ok => {
                let mut messages: Vec<String> =
                    s.findings.iter().filter(|f| f.severity == Severity::Error).map(located).collect();
                if messages.is_empty() {
                    messages.push(format!("synthesis ended with {:?}", s.verdict));
                }
                return Some(Feedback::new(FailedStage::Synthesis, messages));
            }
            Ran::Done(_) => {}
        }
        if self.simulation_verdict() == Some(Verdict::Fail) {
            let messages = self.simulation.iter().flat_map(test_messages);
            return Some(Feedback::new(FailedStage::Testbench, messages));
        }
        if self.equivalence_verdict() == Some(Verdict::Fail) {
            let messages = match self.equivalence.as_ref()? {
                Ran::Done(e) => equivalence_messages(e),
                Ran::NotRun(n) => vec![n.reason.clone()],
            };
            return Some(Feedback::new(FailedStage::Equivalence, messages));
        }
        None
    }
}

/// A finding as `file:line: message`.
fn located(f: &Finding) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{file}:{line}: {}", f.message),
        (Some(file), None) => format!("{file}: {}", f.message),
        _ => f.message.clone(),
    }
}

/// Why a testbench did not pass, in lines for a model; nothing for one that passed.
fn test_messages(test: &Ran<TestReport>) -> Vec<String> {
    let t = match test {
        Ran::Done(t) => t,
        Ran::NotRun(n) if n.verdict == REFUSED => return vec![n.reason.clone()],
        Ran::NotRun(_) => return Vec::new(),
    };
    let name = &t.testbench;
    match &t.verdict {
        TestVerdict::Pass => Vec::new(),
        TestVerdict::Fail { reason, messages } => {
            std::iter::once(format!("testbench {name}: {reason}")).chain(messages.iter().cloned()).collect()
        }
        TestVerdict::CompileError { findings, .. } => {
            std::iter::once(format!("testbench {name} did not compile")).chain(findings.iter().map(located)).collect()
        }
        TestVerdict::Timeout { limit_ms } => vec![format!("testbench {name} did not finish within {limit_ms} ms")],
        TestVerdict::OutputLimit { limit_bytes } => {
            vec![format!("testbench {name} printed more than {limit_bytes} bytes and was stopped")]
        }
        TestVerdict::ResourceLimit { signal } => {
            vec![format!("testbench {name} was killed for exceeding a resource limit (signal {signal})")]
        }
    }
}

/// Why the design is not equivalent to its reference, in lines for a model.
fn equivalence_messages(e: &EquivalenceReport) -> Vec<String> {
    let head = match &e.verdict {
        EquivalenceVerdict::NotEquivalent { counterexample } => {
            format!("the design is not equivalent to the reference; a counterexample: {}", json(counterexample))
        }
        EquivalenceVerdict::NotComparable { differences } => {
            format!("the design's ports differ from the reference's: {}", json(differences))
        }
        EquivalenceVerdict::Invalid { side } => format!("the {side:?} side did not read or elaborate"),
        EquivalenceVerdict::Equivalent { .. } | EquivalenceVerdict::Unknown { .. } => return Vec::new(),
    };
    std::iter::once(head).chain(e.findings.iter().map(located)).collect()
}

/// A tool's value as JSON, for a message (they all serialise).
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn is_refused<T>(ran: &Ran<T>) -> bool {
    matches!(ran, Ran::NotRun(n) if n.verdict == REFUSED)
}

fn done<T>(ran: &Ran<T>) -> Option<&T> {
    match ran {
        Ran::Done(t) => Some(t),
        Ran::NotRun(_) => None,
    }
}

fn pass_if(ok: bool) -> Verdict {
    if ok {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}

/// Runs the checks of `source` for `family`: synthesis; then, if it gave a netlist, `tests` and
/// the equivalence check against `reference`. Refused input is a step's verdict; a tool that is
/// missing or cannot start is the error (the platform's, retried).
pub fn run(
    source: &Source,
    family: Family,
    tests: &[Testbench],
    reference: Option<&Source>,
    budget: Budget,
) -> Result<Outcome, HdlError> {
    let deadline = Instant::now() + budget.per_job;
    let limits = |deadline: Instant| -> Option<Limits> {
        let left = deadline.saturating_duration_since(Instant::now()).min(budget.per_run);
        (left >= Duration::from_millis(500)).then(|| Limits {
            timeout: left,
            cpu_seconds: left.as_secs().max(1),
            ..Limits::default()
        })
    };
    const SPENT: &str = "the revision's time budget for its checks was spent";
    let synthesis = match limits(deadline) {
        Some(l) => refused_or(openqq_hdl::synthesize(source, family, &l), None)?,
        None => Ran::NotRun(NotRun::skipped(None, SPENT)),
    };
    let inputs = kept::Inputs { source: source.clone(), tests: tests.to_vec(), reference: reference.cloned() };
    let mut outcome =
        Outcome { source: None, inputs: Some(inputs), synthesis, simulation: Vec::new(), equivalence: None };
    let synthesised = outcome.netlist().is_some();
    const NO_NETLIST: &str = "synthesis did not give a netlist";
    for test in tests {
        let ran = match (synthesised, limits(deadline)) {
            (false, _) => Ran::NotRun(NotRun::skipped(Some(&test.name), NO_NETLIST)),
            (true, None) => Ran::NotRun(NotRun::skipped(Some(&test.name), SPENT)),
            (true, Some(l)) => refused_or(openqq_hdl::simulate(source, test, &l), Some(&test.name))?,
        };
        outcome.simulation.push(ran);
    }
    if let Some(reference) = reference {
        outcome.equivalence = Some(match (synthesised, limits(deadline)) {
            (false, _) => Ran::NotRun(NotRun::skipped(None, NO_NETLIST)),
            (true, None) => Ran::NotRun(NotRun::skipped(None, SPENT)),
            (true, Some(l)) => refused_or(openqq_hdl::check_equivalence(source, reference, &l), None)?,
        });
    }
    Ok(outcome)
}

/// [`run`] on the blocking pool, timed (`openqq_hdl_checks_duration_seconds`). A tool that is
/// missing or cannot start is retriable: the deployment's to fix, the record's to try again.
pub async fn run_async(
    source: Source,
    family: Family,
    tests: Vec<Testbench>,
    reference: Option<Source>,
    budget: Budget,
) -> Result<Outcome, openqq_runtime::RecordError> {
    use openqq_runtime::RecordError;
    let t0 = Instant::now();
    let outcome = tokio::task::spawn_blocking(move || run(&source, family, &tests, reference.as_ref(), budget))
        .await
        .map_err(|e| RecordError::Retriable(format!("the checks' task failed: {e}")))?
        .map_err(|e| RecordError::Retriable(format!("the HDL tools could not run: {e}")))?;
    metrics::histogram!("openqq_hdl_checks_duration_seconds").record(t0.elapsed().as_secs_f64());
    Ok(outcome)
}

/// A tool's result, with a refused input as the step's verdict.
fn refused_or<T>(result: Result<T, HdlError>, testbench: Option<&str>) -> Result<Ran<T>, HdlError> {
    match result {
        Ok(t) => Ok(Ran::Done(t)),
        Err(HdlError::Refused(why)) => Ok(Ran::NotRun(NotRun {
            testbench: testbench.map(str::to_owned),
            verdict: REFUSED,
            reason: why.to_string(),
        })),
        Err(e) => Err(e),
    }
}

/// How long the step that `kind` ends took, from the checks' report (milliseconds; the
/// testbenches' and the attempts' summed).
pub fn elapsed_ms(report: &Value, kind: openqq_core::EventKind) -> u64 {
    use openqq_core::EventKind;
    let ms = |v: &Value, field: &str| v.get(field).and_then(Value::as_u64).unwrap_or(0);
    let sum = |list: &Value, field: &str| list.as_array().map_or(0, |l| l.iter().map(|x| ms(x, field)).sum());
    match kind {
        EventKind::SynthesisFinished => ms(&report["synthesis"], "elapsed_ms"),
        EventKind::SimulationFinished => sum(&report["simulation"], "elapsed_ms"),
        EventKind::EquivalenceFinished => ms(&report["equivalence"], "elapsed_ms"),
        EventKind::GenerationFinished => sum(&report["generation"]["attempts"], "duration_ms"),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing_test_with_a_waveform() -> TestReport {
        let waveform = openqq_hdl::Waveform {
            timescale: "1ps".into(),
            first_failure_time: 20_000,
            from: 0,
            to: 40_000,
            bytes: 9,
            truncated: false,
            elapsed_ms: 40,
            object: None,
            vcd: b"#0\n1!\n#5\n".to_vec(),
        };
        TestReport {
            testbench: "counts".into(),
            verdict: TestVerdict::Fail { reason: "errors".into(), messages: vec!["ERROR: x".into()] },
            warnings: Vec::new(),
            output: String::new(),
            elapsed_ms: 3,
            waveform: Some(waveform),
        }
    }

    #[tokio::test]
    async fn keeping_stores_the_files_and_the_waveform_and_the_report_points_at_them() {
        use openqq_core::hdl::SourceFile;
        let dir = tempfile::tempdir().unwrap();
        let objects = openqq_adapters::EmbeddedObjectStore::open(dir.path()).unwrap();
        let tenant = TenantId::parse("acme").unwrap();
        let design =
            Source { files: vec![SourceFile::new("counter.v", "module counter; endmodule\n")], top: "counter".into() };
        let tb = Testbench {
            name: "counts".into(),
            files: vec![SourceFile::new("tb.v", "module tb; endmodule\n")],
            top: "tb".into(),
        };
        let refused = NotRun { testbench: None, verdict: REFUSED, reason: "no".into() };
        let mut outcome = Outcome {
            source: None,
            inputs: Some(kept::Inputs { source: design, tests: vec![tb], reference: None }),
            synthesis: Ran::NotRun(refused),
            simulation: vec![Ran::Done(failing_test_with_a_waveform())],
            equivalence: None,
        };
        outcome.keep(&objects, &tenant).await.unwrap();
        let whole = report(Some(&outcome), None);
        let file = &whole["source"]["files"][0];
        assert_eq!(
            (&whole["source"]["top"], &file["name"], &file["bytes"]),
            (&Value::from("counter"), &Value::from("counter.v"), &Value::from(26))
        );
        let text = objects.get(&tenant, file["digest"].as_str().unwrap()).await.unwrap();
        assert_eq!(text, b"module counter; endmodule\n");
        assert_eq!(whole["source"]["tests"][0]["testbench"], "counts");
        assert_eq!(whole["source"]["tests"][0]["files"][0]["name"], "tb.v");
        let waveform = &whole["simulation"][0]["waveform"];
        assert_eq!(
            (&waveform["first_failure_time"], &waveform["timescale"]),
            (&Value::from(20_000), &Value::from("1ps"))
        );
        let dump = objects.get(&tenant, waveform["ref"]["digest"].as_str().unwrap()).await.unwrap();
        assert_eq!(dump, b"#0\n1!\n#5\n");
        assert!(waveform.get("vcd").is_none(), "the dump travels by reference only: {waveform}");
        // The last resort keeps the verdicts, the waveform and the files.
        let only = report::verdicts_only(&whole);
        assert_eq!(only["simulation"][0]["waveform"], *waveform);
        assert_eq!(only["source"], whole["source"]);
    }
}
