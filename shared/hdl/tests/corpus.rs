//! The corpus through the real tools: every design synthesises for iCE40 and ECP5, its testbench
//! passes on the design and fails on the wrong variant, the design is equivalent to its
//! reference and not to the wrong variant, and the broken variant's error is located by Yosys
//! and by Icarus Verilog at the line marked `// error`.

use openqq_hdl::{
    check_equivalence, simulate, synthesize, EquivalenceVerdict, Family, Limits, Proof, Severity, Source, SourceFile,
    SynthVerdict, TestVerdict, Testbench, UnknownReason,
};
use std::path::PathBuf;

fn corpus_dir(design: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus").join(design)
}

fn file(design: &str, name: &str) -> SourceFile {
    let text = std::fs::read_to_string(corpus_dir(design).join(name)).unwrap();
    SourceFile::new(name, text)
}

/// One corpus variant as a source whose top is the design's name.
fn variant(design: &str, name: &str) -> Source {
    Source { files: vec![file(design, name)], top: design.to_string() }
}

fn testbench(design: &str) -> Testbench {
    Testbench { name: format!("{design} tb"), files: vec![file(design, "tb.v")], top: "tb".into() }
}

/// The bounded depth the tests use: enough for every wrong variant's counterexample, and
/// quick on the FIFO (whose memory makes each extra step costly).
fn limits() -> Limits {
    Limits { equivalence_depth: 8, ..Limits::default() }
}

/// The line of `broken_synth.v` marked `// error`.
fn marked_line(design: &str) -> u32 {
    let text = std::fs::read_to_string(corpus_dir(design).join("broken_synth.v")).unwrap();
    text.lines().position(|l| l.contains("// error")).expect("a line marked // error") as u32 + 1
}

fn synthesises_for_both_families(design: &str) {
    let limits = limits();
    for family in [Family::Ice40, Family::Ecp5] {
        let result = synthesize(&variant(design, "design.v"), family, &limits).unwrap();
        assert_eq!(result.verdict, SynthVerdict::Ok, "{design} {family:?}: {:?}", result.findings);
        let netlist: serde_json::Value = serde_json::from_slice(result.netlist.as_deref().unwrap()).unwrap();
        assert!(netlist["modules"][design].is_object(), "{design} {family:?}: no module {design} in the netlist");
    }
    // The wrong variant must synthesise (it is wrong in behaviour, not in form); the reference
    // is elaborated by the equivalence test.
    let result = synthesize(&variant(design, "not_equivalent.v"), Family::Ice40, &limits).unwrap();
    assert_eq!(result.verdict, SynthVerdict::Ok, "{design}/not_equivalent.v: {:?}", result.findings);
}

fn broken_variant_is_located_by_both_tools(design: &str) {
    let line = marked_line(design);
    let result = synthesize(&variant(design, "broken_synth.v"), Family::Ice40, &limits()).unwrap();
    assert_eq!(result.verdict, SynthVerdict::Error);
    assert!(result.netlist.is_none());
    let error = result.findings.iter().find(|f| f.severity == Severity::Error).expect("an error finding");
    assert_eq!((error.file.as_deref(), error.line), (Some("broken_synth.v"), Some(line)), "{design}: {error:?}");

    let report = simulate(&variant(design, "broken_synth.v"), &testbench(design), &limits()).unwrap();
    let TestVerdict::CompileError { findings, .. } = &report.verdict else {
        panic!("{design}: expected a compile error, got {:?}", report.verdict)
    };
    assert!(
        findings.iter().any(|f| f.severity == Severity::Error
            && f.file.as_deref() == Some("broken_synth.v")
            && f.line == Some(line)),
        "{design}: {findings:?}"
    );
}

fn testbench_passes_on_the_design_and_fails_on_the_wrong_variant(design: &str) {
    let limits = limits();
    for good in ["design.v", "reference.v"] {
        let report = simulate(&variant(design, good), &testbench(design), &limits).unwrap();
        assert_eq!(report.verdict, TestVerdict::Pass, "{design}/{good}: {}", report.output);
    }
    let report = simulate(&variant(design, "not_equivalent.v"), &testbench(design), &limits).unwrap();
    let TestVerdict::Fail { messages, .. } = &report.verdict else {
        panic!("{design}: expected a failure, got {:?}", report.verdict)
    };
    assert!(messages.iter().any(|m| m.starts_with("FATAL:")), "{design}: {messages:?}");
}

fn equivalence_matches_the_labels(design: &str, expected: EquivalenceVerdict) {
    let limits = limits();
    let design_source = variant(design, "design.v");
    let report = check_equivalence(&design_source, &variant(design, "reference.v"), &limits).unwrap();
    assert_eq!(report.verdict, expected, "{design} vs reference: {report:?}");
    let sequential = design != "alu";
    assert_eq!(report.sequential, sequential);
    assert_eq!(report.bounded_depth, sequential.then_some(limits.equivalence_depth));

    let report = check_equivalence(&design_source, &variant(design, "not_equivalent.v"), &limits).unwrap();
    let EquivalenceVerdict::NotEquivalent { counterexample } = &report.verdict else {
        panic!("{design} vs not_equivalent: {report:?}")
    };
    let last = counterexample.steps.last().unwrap();
    assert!(!last.inputs.is_empty(), "{design}: {counterexample:?}");
    assert_ne!(last.design_outputs, last.reference_outputs, "{design}: the outputs differ at the last step");
    assert!(last.step <= limits.equivalence_depth);
}

macro_rules! corpus_design {
    ($design:ident, $expected:expr) => {
        mod $design {
            use super::*;

            #[test]
            fn synthesises_for_ice40_and_ecp5() {
                synthesises_for_both_families(stringify!($design));
            }

            #[test]
            fn broken_variant_errors_at_the_marked_line() {
                broken_variant_is_located_by_both_tools(stringify!($design));
            }

            #[test]
            fn testbench_passes_on_design_and_reference_and_fails_on_the_wrong_variant() {
                testbench_passes_on_the_design_and_fails_on_the_wrong_variant(stringify!($design));
            }

            #[test]
            fn is_equivalent_to_the_reference_and_not_to_the_wrong_variant() {
                equivalence_matches_the_labels(stringify!($design), $expected);
            }
        }
    };
}

corpus_design!(counter, EquivalenceVerdict::Equivalent { proof: Proof::Induction { length: 1 } });
corpus_design!(alu, EquivalenceVerdict::Equivalent { proof: Proof::Combinational });
corpus_design!(fsm, EquivalenceVerdict::Equivalent { proof: Proof::Induction { length: 7 } });
// Hidden state (the FIFO's memory, the transmitter's shift register) is not inductive: no
// difference within the bounded depth, and no proof beyond it.
corpus_design!(fifo, EquivalenceVerdict::Unknown { reason: UnknownReason::InductionInconclusive { max_length: 8 } });
corpus_design!(uart_tx, EquivalenceVerdict::Unknown { reason: UnknownReason::InductionInconclusive { max_length: 8 } });
