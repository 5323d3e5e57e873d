//! The waveform of a failing testbench: after the verdict, the same simulation runs again with a
//! dump of every signal under the testbench's top, and the dump is cut to a window around the
//! first failure.
//!
//! Why a second run rather than a dump in the first: the verdict never depends on the dump (its
//! cost in time and file size cannot turn a pass into a fail), and a passing testbench, the
//! usual case, pays nothing. The second run gets what is left of the testbench's time limit and
//! its output is not read for the verdict; when it cannot finish, there is simply no waveform.
//!
//! How it runs: a root module of our own (`_openqq_wave.v`, in the simulation's time precision,
//! read from the first run's compiled image, so it changes nothing about time) opens
//! `_openqq_wave.vcd`, bounds it with `$dumplimit` (well under the sandbox's file-size limit,
//! which would kill the run), starts `$dumpvars(0, TOP)` at a chosen time and ends the run with
//! `$finish` at twice the failure's time. The failure's time is the first `Time:` Icarus prints
//! after an `ERROR:` or `FATAL:` line (in that same precision, whatever `$timeformat` says), else
//! the last change of the dump. A first run dumps from time 0; when its dump reached the limit
//! before the failure, a second one starts the dump closer to it, from the first's rate of bytes
//! per time. A testbench that calls `$dumpfile` itself keeps its own file (Icarus ignores a
//! second `$dumpfile`): that dump is the one read.

use crate::limits::Limits;
use crate::sandbox::{self, Ending};
use crate::source::SourceFile;
use crate::vcd;
use openqq_core::ObjectRef;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// Our module's file and the dump it writes (tenant names cannot start with `_`).
const MODULE_FILE: &str = "_openqq_wave.v";
const DUMP_FILE: &str = "_openqq_wave.vcd";
const IMAGE: &str = "_openqq_wave.vvp";
/// Bytes of the compiled image read for its time precision (it is on the fourth line).
const IMAGE_HEAD_BYTES: u64 = 4096;
/// What a dump may pass its `$dumplimit` by (Icarus stops at the first write past it), and what
/// is kept under the sandbox's file-size limit.
const SLACK: u64 = 64 * 1024;
/// Less time than this left, and the run is not tried.
const MIN_RUN: Duration = Duration::from_millis(200);

/// What a failing testbench's report keeps of its waveform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waveform {
    /// The dump's time unit (`1ps`): every time here is a count of it.
    pub timescale: String,
    /// When the first failure was reported (the time of the first `$error`/`$fatal`), or the
    /// last change of the dump when the run said nothing with a time.
    pub first_failure_time: u64,
    /// The first and last times the kept dump covers.
    pub from: u64,
    pub to: u64,
    /// Bytes of the kept dump.
    pub bytes: u64,
    /// Whether the kept dump leaves something out: cut to its window, or stopped by the dump
    /// limit (then it may end before the failure).
    pub truncated: bool,
    /// How long making it took (its runs, not the verdict's).
    pub elapsed_ms: u64,
    /// Where the kept dump is, once stored (an object of the tenant).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectRef>,
    /// The kept dump (a VCD file), until it is stored.
    #[serde(skip)]
    pub vcd: Vec<u8>,
}

/// What the second run needs of the first.
pub(crate) struct Rerun<'a> {
    /// The design's and the testbench's files, and the end probe's.
    pub files: &'a [SourceFile],
    /// The root modules of the first run (the testbench's top, the probe).
    pub roots: &'a [&'a str],
    /// The testbench's top, whose hierarchy is dumped.
    pub top: &'a str,
    /// The first run's compiled image (for its time precision) and output (for the failure).
    pub image: &'a Path,
    pub output: &'a str,
}

/// The waveform of a failed run, within `deadline`; `None` when it could not be made (no time
/// left, a run that did not dump, a dump whose declarations alone pass the size kept).
pub(crate) fn capture(rerun: &Rerun, deadline: Instant, limits: &Limits) -> Option<Waveform> {
    let started = Instant::now();
    let image = sandbox::read_capped(rerun.image, IMAGE_HEAD_BYTES)?;
    let unit = timescale(precision(&String::from_utf8_lossy(&image))?)?;
    let failure = first_failure_time(rerun.output);
    let dump_limit = limits.max_dump_bytes.min(limits.max_written_file_bytes.saturating_sub(SLACK));
    // Past the failure by as long again: what follows it, and a run that ends soon after.
    let stop = failure.map(|t| t.saturating_mul(2).max(t.saturating_add(1)));
    let mut dump = dump_run(rerun, &unit, 0, stop, dump_limit, deadline, limits)?;
    if let Some(t) = failure {
        let first = vcd::summary(&String::from_utf8_lossy(&dump));
        let reached = first.end;
        if first.limited && reached < t && reached > 0 {
            // The limit came first: dump a span of about half what fitted, ending a quarter
            // past the failure.
            let from = t.saturating_sub(reached / 2);
            let stop = t.saturating_add(reached / 4).max(t + 1);
            if let Some(again) = dump_run(rerun, &unit, from, Some(stop), dump_limit, deadline, limits) {
                dump = again;
            }
        }
    }
    let text = String::from_utf8_lossy(&dump);
    let summary = vcd::summary(&text);
    let focus = failure.unwrap_or(summary.last_change);
    let window = vcd::window(&text, focus, limits.max_waveform_bytes)?;
    let limited = summary.limited || dump.len() as u64 >= dump_limit + SLACK;
    Some(Waveform {
        timescale: summary.timescale.unwrap_or(unit),
        first_failure_time: focus,
        from: window.from,
        to: window.to,
        bytes: window.text.len() as u64,
        truncated: window.cut || limited,
        elapsed_ms: started.elapsed().as_millis() as u64,
        object: None,
        vcd: window.text.into_bytes(),
    })
}

/// One run with our dump module, in a fresh work directory; its dump (ours, or the one the
/// testbench opened itself), read up to the limit.
fn dump_run(
    rerun: &Rerun,
    unit: &str,
    from: u64,
    stop: Option<u64>,
    dump_limit: u64,
    deadline: Instant,
    limits: &Limits,
) -> Option<Vec<u8>> {
    let dir = sandbox::work_dir("iverilog").ok()?;
    let module = format!("openqq_wave_{}", crate::sim::nonce());
    let mut body = format!("    $dumpfile(\"{DUMP_FILE}\");\n    $dumplimit({dump_limit});\n");
    if from > 0 {
        body.push_str(&format!("    #{from};\n"));
    }
    body.push_str(&format!("    $dumpvars(0, {});\n", rerun.top));
    if let Some(stop) = stop {
        body.push_str(&format!("    #{};\n    $dumpflush;\n    $finish;\n", stop.saturating_sub(from)));
    }
    let text = format!("`timescale {unit}/{unit}\nmodule {module};\n  initial begin\n{body}  end\nendmodule\n");
    let files: Vec<SourceFile> =
        rerun.files.iter().cloned().chain(std::iter::once(SourceFile::new(MODULE_FILE, text))).collect();
    sandbox::write_files(dir.path(), &files, "iverilog").ok()?;
    let mut args: Vec<String> = vec!["-g2012".into()];
    for root in rerun.roots.iter().copied().chain(std::iter::once(module.as_str())) {
        args.extend(["-s".into(), root.to_owned()]);
    }
    args.extend(["-o".into(), IMAGE.into()]);
    args.extend(files.iter().filter(|f| f.is_compiled()).map(|f| f.name.clone()));
    let compile = sandbox::run("iverilog", &args, dir.path(), &within(deadline, limits)?).ok()?;
    if compile.ending != Ending::Exited(0) {
        tracing::debug!(output = %compile.output, "The waveform's simulation did not compile.");
        return None;
    }
    let run = sandbox::run("vvp", &["-N", IMAGE], dir.path(), &within(deadline, limits)?).ok()?;
    tracing::debug!(ending = ?run.ending, elapsed_ms = run.elapsed.as_millis() as u64, "The waveform's run ended.");
    let cap = dump_limit + SLACK;
    sandbox::read_capped(&dir.path().join(DUMP_FILE), cap).or_else(|| own_dump(dir.path(), cap))
}

/// The dump a testbench opened itself (`$dumpfile`, or Icarus's default `dump.vcd`): the first
/// `.vcd` file in the directory by name.
fn own_dump(dir: &Path, cap: u64) -> Option<Vec<u8>> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".vcd"))
        .collect();
    names.sort();
    sandbox::read_capped(&dir.join(names.first()?), cap)
}

/// `limits` with the time left before `deadline`, or `None` when too little is.
fn within(deadline: Instant, limits: &Limits) -> Option<Limits> {
    let left = deadline.saturating_duration_since(Instant::now());
    (left >= MIN_RUN).then(|| Limits { timeout: left, cpu_seconds: left.as_secs().max(1), ..limits.clone() })
}

/// The time of the first failure Icarus reported: the first `Time: N` line after the first
/// `ERROR:`/`FATAL:` line (within the next few lines: a message may span several).
pub(crate) fn first_failure_time(output: &str) -> Option<u64> {
    let lines: Vec<&str> = output.lines().collect();
    let first = lines.iter().position(|l| l.starts_with("ERROR:") || l.starts_with("FATAL:"))?;
    lines[first + 1..].iter().take(8).find_map(|l| {
        let rest = l.trim_start().strip_prefix("Time: ")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The simulation's time precision as a power of ten of seconds, from a compiled image's
/// `:vpi_time_precision - 12;` line.
pub(crate) fn precision(image: &str) -> Option<i32> {
    let line = image.lines().find_map(|l| l.strip_prefix(":vpi_time_precision"))?;
    let spec: String = line.trim().trim_end_matches(';').split_whitespace().collect();
    spec.parse().ok()
}

/// A `` `timescale `` literal for 10^`exponent` seconds (`-12` → `1ps`, `-10` → `100ps`).
pub(crate) fn timescale(exponent: i32) -> Option<String> {
    const UNITS: [&str; 6] = ["s", "ms", "us", "ns", "ps", "fs"];
    if (0..=2).contains(&exponent) {
        return Some(format!("{}s", 10u32.pow(exponent as u32)));
    }
    let k = u32::try_from(-exponent).ok().filter(|k| *k <= 15)?;
    let index = k.div_ceil(3);
    Some(format!("{}{}", 10u32.pow(3 * index - k), UNITS[index as usize]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_time_is_the_first_error_or_fatal_line_s_time() {
        let out = "VCD info: dumpfile x opened\nstarting\nERROR: tb.v:18: count is 2, expected 1\n       \
                   Time: 20000 Scope: tb.expect_count\nERROR: tb.v:18: again\n       Time: 30000 Scope: tb\n";
        assert_eq!(first_failure_time(out), Some(20000));
        let fatal = "FATAL: tb.v:5: bye\n  line two\n       Time: 31000 Scope: tb\n";
        assert_eq!(first_failure_time(fatal), Some(31000));
        assert_eq!(first_failure_time("ERROR: printed by the testbench itself\n"), None);
        assert_eq!(first_failure_time("       Time: 5 Scope: tb\n"), None, "a time without a failure before it");
    }

    #[test]
    fn the_precision_is_read_from_the_image_and_written_as_a_timescale() {
        let image = "#! /usr/bin/vvp\n:ivl_version \"11.0 (stable)\";\n:vpi_time_precision - 12;\n";
        assert_eq!(precision(image), Some(-12));
        assert_eq!(precision(":vpi_time_precision + 0;\n"), Some(0));
        assert_eq!(precision("nothing"), None);
        let cases = [(-12, "1ps"), (-10, "100ps"), (-9, "1ns"), (-1, "100ms"), (0, "1s"), (2, "100s"), (-15, "1fs")];
        for (exp, literal) in cases {
            assert_eq!(timescale(exp).as_deref(), Some(literal), "{exp}");
        }
        assert_eq!(timescale(-16), None);
        assert_eq!(timescale(3), None);
    }
}
