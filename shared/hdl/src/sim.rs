//! Testbenches with Icarus Verilog: `iverilog -g2012` compiles design and testbench, `vvp -N`
//! runs them, and the run's output and exit status decide the verdict.
//!
//! A pass needs all three: `vvp` exits 0 (a `$fatal` or `$stop` exits 1 under `-N`), no line
//! of output starts with `ERROR:` or `FATAL:` (how `$error` and `$fatal` print; a testbench that
//! prints such a line itself fails too), and the testbench called `$finish`. The last is proven
//! by an extra root module, compiled after the testbench, that waits 10 000 s of simulation time
//! and then prints a per-run random marker and finishes. Simulation ends only by a `$finish`
//! (with the probe still waiting, so no marker) or by the probe (marker: the testbench never
//! finished), never by running out of events; idle simulated time costs no wall-clock time.
//!
//! A testbench that fails (`Fail`: it ran and reported a failure) gets its waveform: the run
//! again with a value change dump, within what is left of the time limit (see `wave.rs`).

use crate::error::{HdlError, Refusal};
use crate::findings::{bound, clip, parse_iverilog_log, Finding, Severity};
use crate::limits::Limits;
use crate::precheck;
use crate::sandbox::{self, Ending, Outcome};
use crate::source::{check_shape, Source, SourceFile, Testbench};
use crate::wave::{self, Waveform};
use serde::{Deserialize, Serialize};
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;

/// The compiled simulation in the work directory.
const IMAGE: &str = "_openqq_sim.vvp";
/// The probe's file name (tenant names cannot start with `_`).
const PROBE_FILE: &str = "_openqq_end_probe.v";
/// Failure lines kept in a report.
const MAX_FAILURE_MESSAGES: usize = 20;
/// Bytes of the simulation's output kept in a report (its end, where failures are).
const MAX_REPORT_OUTPUT_BYTES: usize = 8 * 1024;

/// The outcome of one testbench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum TestVerdict {
    /// Reached `$finish` with exit status 0 and no `$error`/`$fatal` output.
    Pass,
    /// Ran, and failed: `$error`/`$fatal` messages, a non-zero exit, or no `$finish`.
    Fail {
        /// Why, in a sentence.
        reason: String,
        /// The `ERROR:`/`FATAL:` lines, clipped: the first 19 and the last.
        messages: Vec<String>,
    },
    /// Icarus Verilog could not compile design and testbench; the findings say where.
    CompileError { findings: Vec<Finding>, omitted_findings: usize },
    /// The wall-clock or CPU limit passed (compiling or simulating).
    Timeout { limit_ms: u64 },
    /// The run printed more than the output budget and was stopped.
    OutputLimit { limit_bytes: usize },
    /// The simulator was killed for exceeding a memory or file-size limit (signal number).
    ResourceLimit { signal: i32 },
}

/// The result of [`simulate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    /// The testbench's name.
    pub testbench: String,
    #[serde(flatten)]
    pub verdict: TestVerdict,
    /// The compiler's warnings (bounded).
    pub warnings: Vec<Finding>,
    /// The end of the simulation's output, at most 8 KiB.
    pub output: String,
    /// The compile and run that gave the verdict (not the waveform's run).
    pub elapsed_ms: u64,
    /// For a testbench that failed: its signals around the first failure, when they could be
    /// dumped in the time left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waveform: Option<Waveform>,
}

impl TestReport {
    /// Whether the testbench passed.
    pub fn passed(&self) -> bool {
        self.verdict == TestVerdict::Pass
    }
}

/// A random 64-bit value as hex, unpredictable to the source (std's per-process random keys).
pub(crate) fn nonce() -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    format!("{:016x}", hasher.finish())
}

/// Compiles `design` with `testbench` (`iverilog -g2012 -s TB_TOP`) and runs it (`vvp -N`).
///
/// Refused inputs are an `Err` before any tool runs; everything the tools say about the source
/// is in the report's verdict.
pub fn simulate(design: &Source, testbench: &Testbench, limits: &Limits) -> Result<TestReport, HdlError> {
    check_shape(&[(&design.files, &design.top), (&testbench.files, &testbench.top)], limits)?;
    if let Some(file) = testbench.files.iter().find(|t| design.files.iter().any(|d| d.name == t.name)) {
        return Err(Refusal::DuplicateFileName { name: file.name.clone() }.into());
    }
    let all: Vec<&SourceFile> = design.files.iter().chain(&testbench.files).collect();
    let names: Vec<&str> = all.iter().map(|f| f.name.as_str()).collect();
    precheck::check_files(&design.files, &names)?;
    precheck::check_files(&testbench.files, &names)?;

    let started = Instant::now();
    let dir = sandbox::work_dir("iverilog")?;
    let nonce = nonce();
    let probe_module = format!("openqq_end_probe_{nonce}");
    let marker = format!("openqq-{nonce}: no $finish");
    let probe = SourceFile::new(
        PROBE_FILE,
        format!(
            "`timescale 1s/1s\nmodule {probe_module};\n  initial begin\n    #10000;\n    \
             $display(\"{marker}\");\n    $finish;\n  end\nendmodule\n"
        ),
    );
    let files: Vec<SourceFile> = all.iter().map(|f| (*f).clone()).chain(std::iter::once(probe)).collect();
    sandbox::write_files(dir.path(), &files, "iverilog")?;

    let mut args: Vec<String> = vec![
        "-g2012".into(),
        "-s".into(),
        testbench.top.clone(),
        "-s".into(),
        probe_module.clone(),
        "-o".into(),
        IMAGE.into(),
    ];
    args.extend(files.iter().filter(|f| f.is_compiled()).map(|f| f.name.clone()));
    let compile = sandbox::run("iverilog", &args, dir.path(), limits)?;
    let compile_findings = parse_iverilog_log(&compile.output, &names);
    let report = |verdict, warnings, output: &str| TestReport {
        testbench: testbench.name.clone(),
        verdict,
        warnings,
        output: tail(output, MAX_REPORT_OUTPUT_BYTES),
        elapsed_ms: started.elapsed().as_millis() as u64,
        waveform: None,
    };
    if let Some(verdict) = ran_out(&compile, limits) {
        return Ok(report(verdict, Vec::new(), &compile.output));
    }
    let (warnings, _) = bound(
        compile_findings.iter().filter(|f| f.severity != Severity::Error).cloned().collect(),
        limits.max_findings,
        limits.max_message_bytes,
    );
    if compile.ending != Ending::Exited(0) || !dir.path().join(IMAGE).is_file() {
        let mut findings = compile_findings;
        if !findings.iter().any(|f| f.severity == Severity::Error) {
            findings.push(Finding {
                severity: Severity::Error,
                file: None,
                line: None,
                message: clip(compile.output.trim(), limits.max_message_bytes),
            });
        }
        let (findings, omitted_findings) = bound(findings, limits.max_findings, limits.max_message_bytes);
        return Ok(report(TestVerdict::CompileError { findings, omitted_findings }, warnings, &compile.output));
    }

    let run = sandbox::run("vvp", &["-N", IMAGE], dir.path(), limits)?;
    if let Some(verdict) = ran_out(&run, limits) {
        return Ok(report(verdict, warnings, &run.output));
    }
    let status = match run.ending {
        Ending::Exited(code) => code,
        _ => -1,
    };
    let verdict = judge(&run.output, status, &marker, limits.max_message_bytes);
    let failed = matches!(verdict, TestVerdict::Fail { .. });
    let mut report = report(verdict, warnings, &run.output);
    if failed {
        let rerun = wave::Rerun {
            files: &files,
            roots: &[&testbench.top, &probe_module],
            top: &testbench.top,
            image: &dir.path().join(IMAGE),
            output: &run.output,
        };
        report.waveform = wave::capture(&rerun, started + limits.timeout, limits);
    }
    Ok(report)
}

/// The verdict of a run that ended by itself, from its output and exit status.
pub(crate) fn judge(output: &str, status: i32, marker: &str, max_message_bytes: usize) -> TestVerdict {
    let failures: Vec<&str> = output.lines().filter(|l| l.starts_with("ERROR:") || l.starts_with("FATAL:")).collect();
    // The first ones, and the last (a closing `$fatal` summary, typically).
    let mut messages: Vec<String> =
        failures.iter().take(MAX_FAILURE_MESSAGES - 1).map(|l| clip(l, max_message_bytes)).collect();
    if failures.len() >= MAX_FAILURE_MESSAGES {
        messages.push(clip(failures[failures.len() - 1], max_message_bytes));
    }
    let finished = !output.lines().any(|l| l.trim_end() == marker);
    let reason = if !messages.is_empty() {
        "the testbench reported errors ($error or $fatal)".to_string()
    } else if status != 0 {
        format!("the simulation exited with status {status} ($fatal or $stop)")
    } else if !finished {
        "the testbench never called $finish".to_string()
    } else {
        return TestVerdict::Pass;
    };
    TestVerdict::Fail { reason, messages }
}

/// The verdict of a run stopped by a limit, if it was.
fn ran_out(outcome: &Outcome, limits: &Limits) -> Option<TestVerdict> {
    let limit_ms = limits.timeout.as_millis() as u64;
    match outcome.ending {
        Ending::TimedOut | Ending::Signalled(libc::SIGXCPU) => Some(TestVerdict::Timeout { limit_ms }),
        Ending::OutputExceeded => Some(TestVerdict::OutputLimit { limit_bytes: limits.max_output_bytes }),
        Ending::Signalled(signal) => Some(TestVerdict::ResourceLimit { signal }),
        Ending::Exited(_) => None,
    }
}

/// The last `max` bytes of `text`, on a character boundary.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKER: &str = "openqq-0123: no $finish";

    #[test]
    fn a_clean_finish_passes() {
        assert_eq!(judge("counter: all checks passed\n", 0, MARKER, 512), TestVerdict::Pass);
    }

    #[test]
    fn error_and_fatal_lines_fail_even_with_exit_status_zero() {
        let out = "ERROR: tb.v:23: fifo check failed: not full\n       Time: 40000 Scope: tb.check\n\
                   FATAL: tb.v:67: fifo: 3 check(s) failed\n";
        let TestVerdict::Fail { messages, .. } = judge(out, 0, MARKER, 512) else { panic!() };
        assert_eq!(
            messages,
            ["ERROR: tb.v:23: fifo check failed: not full", "FATAL: tb.v:67: fifo: 3 check(s) failed"]
        );
    }

    #[test]
    fn a_non_zero_exit_or_the_probe_marker_fails() {
        assert!(matches!(judge("", 1, MARKER, 512), TestVerdict::Fail { .. }));
        let TestVerdict::Fail { reason, .. } = judge(&format!("hi\n{MARKER}\n"), 0, MARKER, 512) else { panic!() };
        assert!(reason.contains("$finish"));
        // A line that only contains the marker's text does not count as the probe's.
        assert_eq!(judge(&format!("x {MARKER}\n"), 0, MARKER, 512), TestVerdict::Pass);
    }

    #[test]
    fn failure_messages_are_clipped_and_bounded() {
        let out = format!("ERROR: {}\n", "x".repeat(2000)).repeat(50) + "FATAL: tb.v:9: 50 checks failed\n";
        let TestVerdict::Fail { messages, .. } = judge(&out, 0, MARKER, 100) else { panic!() };
        assert_eq!(messages.len(), MAX_FAILURE_MESSAGES);
        assert!(messages.iter().all(|m| m.len() <= 100));
        assert_eq!(messages.last().unwrap(), "FATAL: tb.v:9: 50 checks failed");
    }

    #[test]
    fn the_tail_keeps_the_end() {
        assert_eq!(tail("abcdef", 3), "…def");
        assert_eq!(tail("abc", 3), "abc");
    }
}
