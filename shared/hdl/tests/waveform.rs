//! Waveforms of failing testbenches, through the real Icarus Verilog: a failing testbench's
//! report carries a dump of its signals around the first failure, a passing one's carries none,
//! and a dump of a long, busy simulation is bounded without changing any verdict. (A testbench
//! naming a path in its own `$dumpfile` is still refused: `hostile.rs`.)

use openqq_hdl::vcd;
use openqq_hdl::{simulate, Limits, Source, SourceFile, TestVerdict, Testbench, Waveform};
use std::path::PathBuf;
use std::time::Instant;

fn corpus(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/counter").join(name);
    std::fs::read_to_string(path).unwrap()
}

/// The corpus's counter, or one that counts by two (its testbench's first check after reset
/// fails at 20 ns: `count is 2, expected 1`).
fn counter(by_two: bool) -> Source {
    let mut text = corpus("design.v");
    if by_two {
        text = text.replace("count + 8'd1", "count + 8'd2");
    }
    Source { files: vec![SourceFile::new("counter.v", text)], top: "counter".into() }
}

fn counter_tb(text: String) -> Testbench {
    Testbench { name: "counts and wraps".into(), files: vec![SourceFile::new("tb.v", text)], top: "tb".into() }
}

fn waveform_of(design: &Source, tb: &Testbench, limits: &Limits) -> (TestVerdict, Option<Waveform>) {
    let report = simulate(design, tb, limits).unwrap();
    (report.verdict, report.waveform)
}

#[test]
fn a_failing_testbench_keeps_its_signals_around_the_first_failure() {
    let (verdict, waveform) = waveform_of(&counter(true), &counter_tb(corpus("tb.v")), &Limits::default());
    assert!(matches!(verdict, TestVerdict::Fail { .. }), "{verdict:?}");
    let w = waveform.expect("a failing testbench has a waveform");
    // `timescale 1ns/1ps: the failure at 20 ns is 20 000 ps.
    assert_eq!((w.timescale.as_str(), w.first_failure_time), ("1ps", 20_000), "{w:?}");
    assert!(w.from <= 20_000 && 20_000 <= w.to, "{w:?}");
    assert_eq!(w.bytes, w.vcd.len() as u64);
    assert!(!w.truncated, "the whole run fits: {w:?}");
    let dump = vcd::parse(std::str::from_utf8(&w.vcd).unwrap());
    let names: Vec<&str> = dump.signals.iter().map(|s| s.name.as_str()).collect();
    for name in ["tb.clk", "tb.rst", "tb.en", "tb.count", "tb.dut.count"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    // At the failure the counter shows 2, as the message says.
    let count = dump.signals.iter().find(|s| s.name == "tb.count").unwrap();
    let at_failure = dump.changes_of(&count.code).filter(|c| c.time <= 20_000).last().unwrap();
    assert_eq!(u64::from_str_radix(&at_failure.value, 2), Ok(2), "{at_failure:?}");
    // It ends soon after: twice the failure's time, not the testbench's whole run.
    assert!(dump.end <= 40_000, "{}", dump.end);
}

#[test]
fn a_passing_testbench_keeps_no_waveform() {
    let (verdict, waveform) = waveform_of(&counter(false), &counter_tb(corpus("tb.v")), &Limits::default());
    assert_eq!(verdict, TestVerdict::Pass);
    assert_eq!(waveform, None);
}

/// A testbench that toggles a clock and a counter every picosecond for `cycles`, then fails.
fn busy_tb(cycles: u64) -> Testbench {
    let text = format!(
        "`timescale 1ns/1ps\nmodule tb;\n  reg clk = 0;\n  reg rst = 1, en = 1;\n  wire [7:0] count;\n  \
         counter dut(.clk(clk), .rst(rst), .en(en), .count(count));\n  always #0.001 clk = ~clk;\n  \
         initial begin\n    #0.003 rst = 0;\n    #{} $error(\"late failure\");\n    $finish;\n  end\nendmodule\n",
        cycles as f64 / 1000.0
    );
    counter_tb(text)
}

#[test]
fn a_huge_dump_is_bounded_and_still_reaches_a_late_failure() {
    // About 30 bytes of dump a picosecond: a million cycles dump ~30 MB, past the 1 MiB limit.
    let limits = Limits { max_dump_bytes: 1 << 20, max_waveform_bytes: 16 << 10, ..Limits::default() };
    let started = Instant::now();
    let (verdict, waveform) = waveform_of(&counter(false), &busy_tb(1_000_000), &limits);
    let TestVerdict::Fail { messages, .. } = &verdict else { panic!("{verdict:?}") };
    assert!(messages[0].contains("late failure"), "{messages:?}");
    let w = waveform.expect("a waveform within the limits");
    assert!(w.bytes <= 16 << 10 && w.truncated, "{w:?}");
    let failure = 1_000_003;
    assert_eq!(w.first_failure_time, failure);
    assert!(w.from < failure && failure <= w.to, "the window holds the failure: {w:?}");
    let dump = vcd::parse(std::str::from_utf8(&w.vcd).unwrap());
    assert!(dump.signals.iter().any(|s| s.name == "tb.dut.count"));
    eprintln!("a million cycles, failing and dumped twice: {:?}", started.elapsed());
}

#[test]
fn the_file_size_limit_turns_no_pass_into_a_fail_and_bounds_the_dump() {
    // A file-size limit far below the dump limit: the dump stops under it, never killed.
    let limits = Limits { max_written_file_bytes: 256 << 10, max_waveform_bytes: 16 << 10, ..Limits::default() };
    let (verdict, waveform) = waveform_of(&counter(false), &busy_tb(300_000), &limits);
    assert!(matches!(verdict, TestVerdict::Fail { .. }), "{verdict:?}");
    assert!(waveform.is_some_and(|w| w.truncated && w.bytes <= 16 << 10));
    // The same busy run without the failure passes: nothing is dumped for a pass.
    let passing = busy_tb(300_000);
    let text = passing.files[0].text.replace("$error(\"late failure\")", "$display(\"done\")");
    let (verdict, waveform) = waveform_of(&counter(false), &counter_tb(text), &limits);
    assert_eq!((verdict, waveform), (TestVerdict::Pass, None));
}

/// Icarus keeps the first `$dumpfile` it runs and ignores the other: which of the testbench's
/// and ours that is depends on the order it starts initial blocks in; either dump is read.
#[test]
fn a_testbench_that_dumps_itself_still_has_a_waveform() {
    let text = corpus("tb.v")
        .replace("initial begin\n", "initial begin\n        $dumpfile(\"mine.vcd\");\n        $dumpvars(1, tb);\n");
    assert!(text.contains("mine.vcd"));
    let (verdict, waveform) = waveform_of(&counter(true), &counter_tb(text), &Limits::default());
    assert!(matches!(verdict, TestVerdict::Fail { .. }), "{verdict:?}");
    let w = waveform.expect("a waveform, from either dump");
    let dump = vcd::parse(std::str::from_utf8(&w.vcd).unwrap());
    assert!(dump.signals.iter().any(|s| s.name == "tb.count"), "{:?}", dump.signals);
    assert_eq!(w.first_failure_time, 20_000);
}
