//! Hostile sources: each is refused before any tool runs, or contained by the sandbox's limits.

use openqq_hdl::{
    check_equivalence, simulate, synthesize, EquivalenceVerdict, Family, HdlError, Limits, Refusal, Source, SourceFile,
    TestVerdict, Testbench,
};
use std::time::{Duration, Instant};

const DESIGN: &str = "module dut(input wire a, output wire y);\n  assign y = ~a;\nendmodule\n";

fn design() -> Source {
    Source { files: vec![SourceFile::new("dut.v", DESIGN)], top: "dut".into() }
}

fn bench(text: &str) -> Testbench {
    Testbench { name: "hostile".into(), files: vec![SourceFile::new("tb.v", text)], top: "tb".into() }
}

fn tb(body: &str) -> String {
    format!("module tb;\n  reg a = 0;\n  wire y;\n  dut d(.a(a), .y(y));\n{body}\nendmodule\n")
}

fn refusal(result: Result<impl std::fmt::Debug, HdlError>) -> Refusal {
    match result {
        Err(HdlError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn quick() -> Limits {
    Limits { timeout: Duration::from_secs(2), ..Limits::default() }
}

#[test]
fn a_testbench_opening_etc_passwd_is_refused_and_names_the_line() {
    let text = tb("  integer fd;\n  initial begin\n    fd = $fopen(\"/etc/passwd\", \"r\");\n    $finish;\n  end");
    let refusal = refusal(simulate(&design(), &bench(&text), &quick()));
    assert!(matches!(&refusal, Refusal::Forbidden { file, line: 7, .. } if file == "tb.v"), "{refusal}");
    assert!(refusal.to_string().contains("/etc/passwd"));
}

#[test]
fn readmemh_of_a_path_is_refused_by_simulation_and_synthesis() {
    let text = "module rom(input wire [1:0] a, output wire [7:0] d);\n  reg [7:0] m [0:3];\n  \
                initial $readmemh(\"/etc/hostname\", m);\n  assign d = m[a];\nendmodule\n";
    let source = Source { files: vec![SourceFile::new("rom.v", text)], top: "rom".into() };
    assert!(matches!(refusal(synthesize(&source, Family::Ice40, &quick())), Refusal::Forbidden { line: 3, .. }));
    let tb = bench("module tb; wire [7:0] d; rom r(.a(2'd0), .d(d)); initial $finish; endmodule");
    assert!(matches!(refusal(simulate(&source, &tb, &quick())), Refusal::Forbidden { line: 3, .. }));
}

#[test]
fn absolute_and_parent_includes_are_refused() {
    for include in ["/etc/passwd", "../dut.v", "sub/x.vh"] {
        let text = format!("`include \"{include}\"\n{DESIGN}");
        let source = Source { files: vec![SourceFile::new("dut.v", text)], top: "dut".into() };
        let refusal = refusal(synthesize(&source, Family::Ice40, &quick()));
        assert!(matches!(refusal, Refusal::Forbidden { line: 1, .. }), "{include}: {refusal}");
    }
}

#[test]
fn system_and_macro_built_system_tasks_are_refused() {
    for body in [
        "  initial $system(\"cat /etc/passwd\");",
        "  `define P(x, y) x``y\n  initial `P($sys, tem)(\"id\");",
        "  initial $dumpfile(\"/tmp/wave.vcd\");",
    ] {
        let refusal = refusal(simulate(&design(), &bench(&tb(body)), &quick()));
        assert!(matches!(refusal, Refusal::Forbidden { .. }), "{body}: {refusal}");
    }
}

#[test]
fn a_huge_file_is_refused_by_name_before_any_tool_runs() {
    let limits = Limits::default();
    let huge = format!("{DESIGN}// {}\n", "x".repeat(limits.max_file_bytes));
    let source = Source { files: vec![SourceFile::new("huge.v", huge)], top: "dut".into() };
    let started = Instant::now();
    let refusal = refusal(synthesize(&source, Family::Ice40, &limits));
    assert!(matches!(&refusal, Refusal::FileTooLarge { name, .. } if name == "huge.v"), "{refusal}");
    assert!(started.elapsed() < Duration::from_millis(200), "refused without running Yosys");
}

#[test]
fn unsafe_names_and_tops_are_refused() {
    let source = Source { files: vec![SourceFile::new("../dut.v", DESIGN)], top: "dut".into() };
    assert!(matches!(refusal(synthesize(&source, Family::Ice40, &quick())), Refusal::BadFileName { .. }));
    let source = Source { files: vec![SourceFile::new("dut.v", DESIGN)], top: "dut; shell rm -rf /".into() };
    assert!(matches!(refusal(synthesize(&source, Family::Ice40, &quick())), Refusal::BadTopName { .. }));
    let tb = Testbench { name: "t".into(), files: vec![SourceFile::new("dut.v", DESIGN)], top: "tb".into() };
    assert!(matches!(refusal(simulate(&design(), &tb, &quick())), Refusal::DuplicateFileName { .. }));
}

#[test]
fn a_testbench_that_loops_forever_times_out() {
    let limits = Limits { timeout: Duration::from_secs(1), ..Limits::default() };
    for text in [
        // Simulated time runs on in 1 ns steps (the end probe waits 10 000 s).
        format!("`timescale 1ns/1ps\n{}", tb("  always #1 a = ~a;")),
        // Time 0 never ends.
        tb("  integer i = 0;\n  initial while (1) i = i + 1;"),
    ] {
        let started = Instant::now();
        let report = simulate(&design(), &bench(&text), &limits).unwrap();
        assert_eq!(report.verdict, TestVerdict::Timeout { limit_ms: 1000 }, "{text}");
        assert!(started.elapsed() < Duration::from_secs(4), "{text}: killed at the limit");
    }
}

#[test]
fn a_testbench_that_prints_forever_hits_the_output_budget() {
    let limits = Limits { max_output_bytes: 64 * 1024, ..quick() };
    let body = "  always #1 $display(\"spam spam spam spam spam spam spam spam spam spam\");";
    let report = simulate(&design(), &bench(&tb(body)), &limits).unwrap();
    assert_eq!(report.verdict, TestVerdict::OutputLimit { limit_bytes: 64 * 1024 });
    assert!(report.output.len() <= 8 * 1024 + 4);
}

#[test]
fn files_a_testbench_writes_stay_in_its_work_directory_and_under_the_size_limit() {
    // A plain name is allowed: it is written (and read back) in the run's own directory.
    let body = "  integer fd, c;\n  initial begin\n    fd = $fopen(\"note.txt\", \"w\");\n    \
                $fwrite(fd, \"ok\");\n    $fclose(fd);\n    fd = $fopen(\"note.txt\", \"r\");\n    \
                c = $fgetc(fd);\n    if (c != \"o\") $fatal(1, \"read back %0d\", c);\n    $finish;\n  end";
    let report = simulate(&design(), &bench(&tb(body)), &quick()).unwrap();
    assert_eq!(report.verdict, TestVerdict::Pass, "{}", report.output);
    assert!(!std::path::Path::new("note.txt").exists());

    // Writing without end is stopped by the file-size limit.
    let limits = Limits { max_written_file_bytes: 64 * 1024, ..quick() };
    let body = "  integer fd;\n  initial fd = $fopen(\"big.txt\", \"w\");\n  \
                always #1 $fwrite(fd, \"0123456789012345678901234567890123456789\\n\");";
    let report = simulate(&design(), &bench(&tb(body)), &limits).unwrap();
    assert!(matches!(report.verdict, TestVerdict::ResourceLimit { .. }), "{:?}", report.verdict);
}

#[test]
fn a_testbench_that_never_calls_finish_or_stops_fails() {
    let report = simulate(&design(), &bench(&tb("  initial a = 1;")), &quick()).unwrap();
    let TestVerdict::Fail { reason, .. } = &report.verdict else { panic!("{:?}", report.verdict) };
    assert!(reason.contains("$finish"), "{reason}");
    let report = simulate(&design(), &bench(&tb("  initial begin #1 $stop; $finish; end")), &quick()).unwrap();
    assert!(matches!(report.verdict, TestVerdict::Fail { .. }), "{:?}", report.verdict);
    let report =
        simulate(&design(), &bench(&tb("  initial begin #1 $error(\"bad\"); $finish; end")), &quick()).unwrap();
    let TestVerdict::Fail { messages, .. } = &report.verdict else { panic!("{:?}", report.verdict) };
    assert!(messages[0].contains("bad"));
}

#[test]
fn designs_with_different_ports_are_not_comparable_and_the_ports_are_named() {
    let other = "module dut(input wire a, input wire b, output wire [1:0] y);\n  assign y = {a, b};\nendmodule\n";
    let reference = Source { files: vec![SourceFile::new("dut.v", other)], top: "dut".into() };
    let report = check_equivalence(&design(), &reference, &quick()).unwrap();
    let EquivalenceVerdict::NotComparable { differences } = &report.verdict else { panic!("{report:?}") };
    let names: Vec<&str> = differences.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["b", "y"]);
}
