//! How `openqq design show` prints a design and its report.

use super::*;
use serde_json::json;

const DIGEST: &str = "3f2a9c0e5b7d41a8c6e2f0b9d8a7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9";
const WAVE: &str = "6f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

fn design(status: &str, verdict: Option<&str>) -> Value {
    let mut d = json!({"design_id": "01J0ABCD", "name": "counter", "revision": 2, "status": status,
        "updated_at": "2026-12-02T06:10:11.123456Z"});
    if let Some(v) = verdict {
        d["verdict"] = json!(v);
    }
    d
}

/// A source job whose testbench failed, as validation stores the report.
fn failing_report() -> Value {
    json!({
        "revision": 2, "verdict": "fail", "findings": [{"code": "HDL_CHECK_FAILED"}],
        "checks": {
            "source": {"top": "counter", "files": [{"name": "counter.v", "digest": DIGEST, "bytes": 350}],
                "tests": [{"testbench": "counts and wraps", "top": "tb", "files": [{"name": "tb.v", "digest": DIGEST, "bytes": 15360}]}]},
            "synthesis": {"verdict": "ok", "family": "ice40", "top": "counter", "findings": [], "elapsed_ms": 1312},
            "simulation": [{"testbench": "counts and wraps", "verdict": "fail",
                "reason": "the testbench reported errors ($error or $fatal)",
                "messages": ["ERROR: tb.v:18: count is 2, expected 1"], "elapsed_ms": 37,
                "waveform": {"timescale": "1ps", "first_failure_time": 20000, "from": 0, "to": 40000,
                    "bytes": 1234, "truncated": false, "ref": {"digest": WAVE, "bytes": 1234}}}],
            "equivalence": {"verdict": "not_equivalent", "elapsed_ms": 812, "findings": [{"message": "proof did fail"}],
                "counterexample": {"steps": [{"step": 1, "design_outputs": [{"name": "count", "value": "0"}],
                    "reference_outputs": [{"name": "count", "value": "0"}]}, {"step": 2,
                    "design_outputs": [{"name": "count", "value": "10"}], "reference_outputs": [{"name": "count", "value": "01"}]}]}},
        }
    })
}

#[test]
fn a_failing_source_job_shows_its_files_each_check_and_where_its_testbench_first_failed() {
    let out = show(&design("ready", Some("fail")), Some(&failing_report()));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Design counter (01J0ABCD): revision 2, ready, verdict fail");
    assert_eq!(lines[1], "Updated 2026-12-02 06:10:11");
    assert!(out.contains("  ROLE                                 FILE       SIZE      DIGEST\n"), "{out}");
    assert!(out.contains("  design (top counter)                 counter.v  350 B     3f2a9c0e5b7d\n"), "{out}");
    assert!(out.contains("  testbench counts and wraps (top tb)  tb.v       15.0 KiB  3f2a9c0e5b7d\n"), "{out}");
    assert!(out.contains("  synthesis                   ok              1.3 s   ice40\n"), "{out}");
    assert!(
        out.contains(
            "  testbench counts and wraps  fail            37 ms   the testbench reported errors ($error or $fatal)\n"
        ),
        "{out}"
    );
    let differs = "at step 2: count is 10, the reference's 01";
    assert!(out.contains(&format!("  equivalence                 not_equivalent  812 ms  {differs}\n")), "{out}");
    assert!(out.contains("  validation                  fail            —       1 finding\n"), "{out}");
    assert!(
        out.contains(
            "Testbench counts and wraps first failed at 20 ns (20000 × 1ps): ERROR: tb.v:18: count is 2, expected 1\n"
        ),
        "{out}"
    );
    assert!(out.contains(&format!("  waveform: {WAVE} (a VCD file; --waveform draws it here)\n")), "{out}");
}

#[test]
fn a_generated_design_shows_a_row_per_attempt_with_its_tokens_and_what_failed() {
    let report = json!({"verdict": "pass", "findings": [], "checks": {
        "generation": {"max_attempts": 3, "stopped": "passed", "attempts": [
            {"attempt": 1, "hdl": {"digest": DIGEST, "bytes": 300}, "top": "counter", "prompt_tokens": 812,
             "completion_tokens": 240, "duration_ms": 1234, "failed": "testbench",
             "messages": ["testbench counts and wraps: the testbench reported errors ($error or $fatal)"]},
            {"attempt": 2, "hdl": {"digest": WAVE, "bytes": 310}, "top": "counter", "prompt_tokens": 990,
             "completion_tokens": 251, "duration_ms": 880},
        ]},
        "synthesis": {"verdict": "ok", "family": "ice40", "findings": [], "elapsed_ms": 900},
    }});
    let out = show(&design("ready", Some("pass")), Some(&report));
    assert!(out.contains("Generation: 2 attempts of at most 3, stopped: passed\n"), "{out}");
    assert!(out.contains("  ATTEMPT  TOKENS (PROMPT / COMPLETION)  TOOK    FAILED     HDL           WHY\n"), "{out}");
    assert!(
        out.contains(
            "  1        812 / 240                     1.2 s   testbench  3f2a9c0e5b7d  testbench counts and wraps: the testbench reported errors ($error or $fa…\n"
        ),
        "{out}"
    );
    assert!(out.contains("  2        990 / 251                     880 ms  —          6f1e2d3c4b5a\n"), "{out}");
}

#[test]
fn a_design_without_a_report_or_checks_says_so() {
    let out = show(&design("validating", None), None);
    assert_eq!(out, "Design counter (01J0ABCD): revision 2, validating\nUpdated 2026-12-02 06:10:11\n\nNo report yet: it appears when validation finishes.\n");
    let netlist = show(&design("ready", Some("pass")), Some(&json!({"verdict": "pass", "findings": []})));
    assert!(netlist.contains("Given as a netlist: no HDL checks ran."), "{netlist}");
    assert!(netlist.contains("  validation  pass     —     0 findings\n"), "{netlist}");
}

#[test]
fn a_report_capped_to_its_verdicts_prints_what_it_kept() {
    let report = json!({"verdict": "fail", "findings": [], "checks": {"details_omitted": true,
        "synthesis": {"verdict": "ok"}, "simulation": [{"testbench": "t", "verdict": "fail",
        "waveform": {"timescale": "1ns", "first_failure_time": 7, "ref": {"digest": WAVE}}}]}});
    let out = show(&design("ready", Some("fail")), Some(&report));
    assert!(out.contains("  testbench t  fail     —\n"), "{out}");
    assert!(out.contains("Testbench t first failed at 7 ns (7 × 1ns)\n"), "{out}");
    assert!(out.contains("only their verdicts were kept"), "{out}");
    assert_eq!(waveforms(&report)[0].digest.as_deref(), Some(WAVE));
}

#[test]
fn times_read_in_the_largest_unit_that_keeps_them_whole() {
    assert_eq!(human_time(20_000, "1ps"), "20 ns");
    assert_eq!(human_time(1_500, "1ps"), "1.5 ns");
    assert_eq!(human_time(3, "10us"), "30 us");
    assert_eq!(human_time(2, "100ms"), "200 ms");
    assert_eq!(human_time(0, "1ps"), "0 ps");
    assert_eq!(human_time(5, "1 parsec"), "5 × 1 parsec");
}
