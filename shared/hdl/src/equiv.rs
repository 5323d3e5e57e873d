//! Equivalence of a design and a reference with Yosys: a miter over the two, then SAT.
//!
//! Three Yosys runs. Each side is prepared in its own work directory, in parallel
//! (`read_verilog -sv`, `hierarchy -check -top TOP`, `proc`, `flatten`, `memory`, `async2sync`,
//! `dffunmap`, `opt`), renamed and written as RTLIL with a list of its ports. If the ports differ
//! the verdict is `not_comparable`, naming them. Otherwise one run builds
//! `miter -equiv -flatten -make_outputs` and proves `trigger` is 0:
//!
//! - combinational designs: one `sat -prove trigger 0` is a full proof;
//! - sequential designs: `sat -seq N -set-init-zero` checks every step of the first N clock
//!   cycles from the all-zero state (registers power up at zero on iCE40 and ECP5), then
//!   `sat -tempinduct-inductonly -maxsteps K` tries to extend that to all time by induction.
//!   A difference within N steps is a counterexample; no difference and a successful induction
//!   step (K ≤ N) is a proof; no difference and no induction is `unknown`, with the depth checked.

use crate::error::HdlError;
use crate::findings::{bound, parse_yosys_log, Finding, Severity};
use crate::limits::Limits;
use crate::precheck;
use crate::sandbox::{self, Ending};
use crate::sat::{self, Counterexample, Port, SatResult};
use crate::source::{check_shape, Source};
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

const PREPARED: &str = "_openqq_prepared.il";
const PORTS: &str = "_openqq_ports.il";
const BOUNDED_LOG: &str = "_openqq_bounded.log";
const INDUCTION_LOG: &str = "_openqq_induction.log";
/// Port differences listed at most.
const MAX_PORT_DIFFERENCES: usize = 32;

/// Which of the two sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Design,
    Reference,
}

impl Side {
    fn dir(self) -> &'static str {
        match self {
            Side::Design => "design",
            Side::Reference => "reference",
        }
    }

    /// The module name the side's top gets in the miter.
    fn module(self) -> &'static str {
        match self {
            Side::Design => "openqq_design",
            Side::Reference => "openqq_reference",
        }
    }
}

/// How equivalence was proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Proof {
    /// No state: one SAT problem covers every input.
    Combinational,
    /// The bounded check from zero plus an induction step of this length.
    Induction { length: u32 },
}

/// Why no verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum UnknownReason {
    /// No difference within the bounded depth, but induction up to this length did not prove
    /// the rest (typical where state is not visible at the outputs, such as a FIFO's memory).
    InductionInconclusive { max_length: u32 },
    /// The SAT solver hit its time limit.
    SolverTimeout,
    /// The run hit the wall-clock or CPU limit.
    Timeout,
    /// Yosys printed more than the output budget.
    OutputLimit,
    /// Yosys was killed for exceeding a memory or file-size limit.
    ResourceLimit,
    /// Yosys failed in a way the check does not recognise; the findings may say more.
    ToolFailure,
}

/// A port that is not the same on both sides (absent on one, or another direction or width).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortDifference {
    pub name: String,
    pub design: Option<Port>,
    pub reference: Option<Port>,
}

/// The outcome of [`check_equivalence`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum EquivalenceVerdict {
    /// Equivalent for every input sequence from the all-zero state.
    Equivalent { proof: Proof },
    /// The counterexample drives both with the same inputs and their outputs differ.
    NotEquivalent { counterexample: Counterexample },
    /// Neither proven nor refuted within the limits.
    Unknown { reason: UnknownReason },
    /// The two tops do not have the same ports, so there is nothing to compare.
    NotComparable { differences: Vec<PortDifference> },
    /// One side did not read or elaborate; the findings say where.
    Invalid { side: Side },
}

/// The result of [`check_equivalence`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EquivalenceReport {
    #[serde(flatten)]
    pub verdict: EquivalenceVerdict,
    /// Whether either design holds state.
    pub sequential: bool,
    /// For sequential designs, the clock cycles from the all-zero state the bounded check
    /// covered (a counterexample is at most this long).
    pub bounded_depth: Option<u32>,
    /// Yosys's errors and warnings on either side (file names are the submitted ones).
    pub findings: Vec<Finding>,
    pub omitted_findings: usize,
    pub elapsed_ms: u64,
}

struct Prepared {
    ports: Vec<Port>,
    sequential: bool,
}

/// Checks whether `design` behaves as `reference` (same ports; outputs equal for all inputs,
/// from the all-zero state for sequential designs). Both tops may have the same name.
///
/// Refused inputs are an `Err` before any tool runs.
pub fn check_equivalence(design: &Source, reference: &Source, limits: &Limits) -> Result<EquivalenceReport, HdlError> {
    check_shape(&[(&design.files, &design.top), (&reference.files, &reference.top)], limits)?;
    for source in [design, reference] {
        let names: Vec<&str> = source.files.iter().map(|f| f.name.as_str()).collect();
        precheck::check_files(&source.files, &names)?;
    }
    let started = Instant::now();
    let dir = sandbox::work_dir("yosys")?;
    let mut findings = Vec::new();
    let report = |verdict, sequential, bounded_depth, findings: Vec<Finding>| {
        let (findings, omitted_findings) = bound(findings, limits.max_findings, limits.max_message_bytes);
        Ok(EquivalenceReport {
            verdict,
            sequential,
            bounded_depth,
            findings,
            omitted_findings,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })
    };

    let (design_run, reference_run) = std::thread::scope(|scope| {
        let d = scope.spawn(|| prepare(dir.path(), Side::Design, design, limits));
        let r = prepare(dir.path(), Side::Reference, reference, limits);
        (d.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), r)
    });
    let mut prepared = Vec::new();
    for (side, run) in [(Side::Design, design_run?), (Side::Reference, reference_run?)] {
        let (result, side_findings) = run;
        findings.extend(side_findings);
        match result {
            Ok(p) => prepared.push(p),
            Err(verdict) => {
                let verdict = verdict.unwrap_or(EquivalenceVerdict::Invalid { side });
                return report(verdict, false, None, findings);
            }
        }
    }
    let sequential = prepared.iter().any(|p| p.sequential);
    let differences = port_differences(&prepared[0].ports, &prepared[1].ports);
    if !differences.is_empty() {
        return report(EquivalenceVerdict::NotComparable { differences }, sequential, None, findings);
    }

    let depth = limits.equivalence_depth.max(1);
    let induction = limits.induction_length.clamp(1, depth);
    let solver_timeout = (limits.timeout.as_secs() / 2).max(1);
    let (d, r) = (Side::Design.module(), Side::Reference.module());
    let mut script = format!(
        "read_rtlil design/{PREPARED}; read_rtlil reference/{PREPARED}; \
         miter -equiv -flatten -make_outputs {d} {r} openqq_miter; hierarchy -top openqq_miter; opt -fast; "
    );
    if sequential {
        script += &format!(
            "tee -q -o {BOUNDED_LOG} sat -verify -seq {depth} -prove trigger 0 -set-init-zero -show-inputs \
             -show-outputs -timeout {solver_timeout} openqq_miter; \
             tee -q -o {INDUCTION_LOG} sat -tempinduct-inductonly -prove trigger 0 -maxsteps {induction} \
             -timeout {solver_timeout} openqq_miter"
        );
    } else {
        script += &format!(
            "tee -q -o {BOUNDED_LOG} sat -verify -prove trigger 0 -show-inputs -show-outputs \
             -timeout {solver_timeout} openqq_miter"
        );
    }
    let outcome = sandbox::run("yosys", &["-q", "-p", &script], dir.path(), limits)?;
    findings.extend(parse_yosys_log(&outcome.output, &[]).into_iter().filter(|f| f.severity == Severity::Error));
    let bounded_depth = sequential.then_some(depth);
    let read_log = |name: &str| {
        sandbox::read_capped(&dir.path().join(name), limits.max_output_bytes as u64)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let bounded_log = read_log(BOUNDED_LOG);
    let unknown = |reason| EquivalenceVerdict::Unknown { reason };
    let limit_reason = match outcome.ending {
        Ending::TimedOut | Ending::Signalled(libc::SIGXCPU) => Some(UnknownReason::Timeout),
        Ending::OutputExceeded => Some(UnknownReason::OutputLimit),
        Ending::Signalled(_) => Some(UnknownReason::ResourceLimit),
        Ending::Exited(_) => None,
    };
    let verdict = match sat::parse_sat_result(&bounded_log) {
        SatResult::Failed => match sat::parse_counterexample(&bounded_log) {
            Some(counterexample) => EquivalenceVerdict::NotEquivalent { counterexample },
            None => unknown(UnknownReason::ToolFailure),
        },
        SatResult::TimedOut => unknown(UnknownReason::SolverTimeout),
        SatResult::Proven { .. } if !sequential => EquivalenceVerdict::Equivalent { proof: Proof::Combinational },
        SatResult::Proven { .. } => match sat::parse_sat_result(&read_log(INDUCTION_LOG)) {
            SatResult::Proven { induction_length } => {
                EquivalenceVerdict::Equivalent { proof: Proof::Induction { length: induction_length.unwrap_or(1) } }
            }
            SatResult::TimedOut => unknown(UnknownReason::SolverTimeout),
            SatResult::InductionInconclusive | SatResult::Failed => {
                unknown(UnknownReason::InductionInconclusive { max_length: induction })
            }
            SatResult::Unfinished => unknown(limit_reason.unwrap_or(UnknownReason::ToolFailure)),
        },
        SatResult::InductionInconclusive | SatResult::Unfinished => {
            unknown(limit_reason.unwrap_or(UnknownReason::ToolFailure))
        }
    };
    report(verdict, sequential, bounded_depth, findings)
}

/// What preparing one side gave: the prepared design, or the verdict to stop with (`None` for
/// `Invalid`); and the side's findings.
type PrepareRun = (Result<Prepared, Option<EquivalenceVerdict>>, Vec<Finding>);

/// Reads, elaborates and flattens one side in `root/<side>/`, and writes its RTLIL and ports.
fn prepare(root: &Path, side: Side, source: &Source, limits: &Limits) -> Result<PrepareRun, HdlError> {
    let dir = root.join(side.dir());
    std::fs::create_dir(&dir).map_err(|source| HdlError::Io { tool: "yosys", source })?;
    sandbox::write_files(&dir, &source.files, "yosys")?;
    let compiled: Vec<&str> = source.files.iter().filter(|f| f.is_compiled()).map(|f| f.name.as_str()).collect();
    let (top, module) = (&source.top, side.module());
    let rename = if top == module { String::new() } else { format!("rename {top} {module}; ") };
    let script = format!(
        "read_verilog -sv {files}; hierarchy -check -top {top}; proc; flatten; hierarchy -top {top}; memory; \
         async2sync; dffunmap; opt; wreduce; opt_clean; {rename}\
         select -module {module} i:* o:*; write_rtlil -selected {PORTS}; select -clear; write_rtlil {PREPARED}",
        files = compiled.join(" "),
    );
    let outcome = sandbox::run("yosys", &["-q", "-p", &script], &dir, limits)?;
    let names: Vec<&str> = source.files.iter().map(|f| f.name.as_str()).collect();
    let findings = parse_yosys_log(&outcome.output, &names);
    let stop = match outcome.ending {
        Ending::Exited(0) => None,
        Ending::Exited(_) => Some(None),
        Ending::TimedOut | Ending::Signalled(libc::SIGXCPU) => {
            Some(Some(EquivalenceVerdict::Unknown { reason: UnknownReason::Timeout }))
        }
        Ending::OutputExceeded => Some(Some(EquivalenceVerdict::Unknown { reason: UnknownReason::OutputLimit })),
        Ending::Signalled(_) => Some(Some(EquivalenceVerdict::Unknown { reason: UnknownReason::ResourceLimit })),
    };
    if let Some(stop) = stop {
        return Ok((Err(stop), findings));
    }
    let ports = sandbox::read_capped(&dir.join(PORTS), limits.max_written_file_bytes)
        .map(|b| sat::parse_ports(&String::from_utf8_lossy(&b)))
        .unwrap_or_default();
    let sequential = std::fs::File::open(dir.join(PREPARED))
        .map(|f| std::io::BufReader::new(f).lines().map_while(Result::ok).any(|l| sat::is_state_cell(&l)))
        .unwrap_or(false);
    Ok((Ok(Prepared { ports, sequential }), findings))
}

/// Ports present on one side only, or with another direction or width, by name.
pub fn port_differences(design: &[Port], reference: &[Port]) -> Vec<PortDifference> {
    let mut names: Vec<&str> = design.iter().chain(reference).map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let d = design.iter().find(|p| p.name == name);
            let r = reference.iter().find(|p| p.name == name);
            (d != r).then(|| PortDifference { name: name.to_string(), design: d.cloned(), reference: r.cloned() })
        })
        .take(MAX_PORT_DIFFERENCES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, direction: &str, width: u32) -> Port {
        Port { name: name.into(), direction: direction.into(), width }
    }

    #[test]
    fn ports_missing_on_a_side_or_of_another_width_are_named() {
        let design = [port("a", "input", 4), port("q", "output", 8), port("clk", "input", 1)];
        let reference = [port("clk", "input", 1), port("a", "input", 3), port("y", "output", 8)];
        let names: Vec<String> = port_differences(&design, &reference).into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["a", "q", "y"]);
        assert!(port_differences(&design, &design).is_empty());
    }
}
