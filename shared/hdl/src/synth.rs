//! Synthesis with Yosys (`synth_ice40` / `synth_ecp5`) to a JSON netlist.

use crate::error::HdlError;
use crate::findings::{bound, parse_yosys_log, Finding, Severity};
use crate::limits::Limits;
use crate::precheck;
use crate::sandbox::{self, Ending};
use crate::source::{check_shape, Family, Source};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The netlist file Yosys writes in the work directory (tenant names cannot start with `_`).
const NETLIST: &str = "_openqq_netlist.json";

/// How a synthesis run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthVerdict {
    /// Yosys wrote a netlist; the findings hold its warnings.
    Ok,
    /// Yosys rejected the source; the findings say where.
    Error,
    /// The wall-clock or CPU limit passed.
    Timeout,
    /// Yosys printed more than the output budget.
    OutputLimit,
    /// Yosys was killed for exceeding a memory or file-size limit.
    ResourceLimit,
}

/// The result of [`synthesize`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Synthesis {
    pub verdict: SynthVerdict,
    pub family: Family,
    pub top: String,
    /// Yosys `write_json` output when the verdict is `ok` (not serialised: large, stored apart).
    #[serde(skip)]
    pub netlist: Option<Vec<u8>>,
    /// Yosys's errors and warnings, errors first, bounded by [`Limits::max_findings`].
    pub findings: Vec<Finding>,
    /// Findings left out by the bound.
    pub omitted_findings: usize,
    pub elapsed_ms: u64,
}

/// Synthesises `source` for `family` with Yosys:
/// `read_verilog -sv FILES; synth_<family> -top TOP -json NETLIST`.
///
/// Refused inputs (names, sizes, forbidden constructs) are an `Err` before Yosys runs; a source
/// Yosys rejects is an `Ok` with verdict [`SynthVerdict::Error`] and located findings.
pub fn synthesize(source: &Source, family: Family, limits: &Limits) -> Result<Synthesis, HdlError> {
    check_shape(&[(&source.files, &source.top)], limits)?;
    let names: Vec<&str> = source.files.iter().map(|f| f.name.as_str()).collect();
    precheck::check_files(&source.files, &names)?;
    let dir = sandbox::work_dir("yosys")?;
    sandbox::write_files(dir.path(), &source.files, "yosys")?;

    let compiled: Vec<&str> = source.files.iter().filter(|f| f.is_compiled()).map(|f| f.name.as_str()).collect();
    let script = format!(
        "read_verilog -sv {}; {} -top {} -json {NETLIST}",
        compiled.join(" "),
        family.synth_command(),
        source.top
    );
    let started = Instant::now();
    let outcome = sandbox::run("yosys", &["-q", "-p", &script], dir.path(), limits)?;
    let mut findings = parse_yosys_log(&outcome.output, &names);
    let netlist = match outcome.ending {
        Ending::Exited(0) => sandbox::read_capped(&dir.path().join(NETLIST), limits.max_written_file_bytes),
        _ => None,
    };
    let verdict = match outcome.ending {
        Ending::Exited(0) if netlist.is_some() => SynthVerdict::Ok,
        Ending::Exited(_) => SynthVerdict::Error,
        Ending::TimedOut | Ending::Signalled(libc::SIGXCPU | libc::SIGKILL) => SynthVerdict::Timeout,
        Ending::OutputExceeded => SynthVerdict::OutputLimit,
        Ending::Signalled(_) => SynthVerdict::ResourceLimit,
    };
    if verdict == SynthVerdict::Error && !findings.iter().any(|f| f.severity == Severity::Error) {
        findings.push(Finding {
            severity: Severity::Error,
            file: None,
            line: None,
            message: format!("yosys ended without a netlist ({:?})", outcome.ending),
        });
    }
    let (findings, omitted_findings) = bound(findings, limits.max_findings, limits.max_message_bytes);
    Ok(Synthesis {
        verdict,
        family,
        top: source.top.clone(),
        netlist: if verdict == SynthVerdict::Ok { netlist } else { None },
        findings,
        omitted_findings,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}
