//! Bad-input oracle: for every case recorded by `fixtures/bad/generate.sh`, our finding code must
//! be the expected one and our error/no-error verdict must match the tool's exit status
//! (nextpnr-ice40 for netlists and PCFs, iceunpack for bitstreams).
//!
//! Cases marked `stricter` in the recordings are where we deliberately fail a design the tool
//! accepts, each with its reason: a PLL whose VCO runs outside the datasheet range (nextpnr
//! checks no PLL frequencies), and a bitstream for another die (iceunpack has no target device
//! to compare with). For those the test asserts that the tool really does accept the input, so
//! the note cannot go stale silently.

mod oracle;

use openqq_fpga::{Severity, Verdict};
use oracle::{str_field, Oracle, Run};
use serde_json::Value;

fn run_of(oracle: &mut Oracle, case: &Value) -> Run {
    Run {
        device: str_field(case, "device").to_owned(),
        package: str_field(case, "package").to_owned(),
        netlist: oracle.text(str_field(case, "netlist")),
        pcf: oracle.text(str_field(case, "pcf")),
        bitstream: case["bitstream"].as_str().map(|rel| oracle.bytes(rel)),
        top: case["top"].as_str().map(str::to_owned),
        allow_unconstrained: case["allow_unconstrained"].as_bool().unwrap_or(false),
    }
}

/// Checks one case; returns a sentence per disagreement.
fn disagreements(oracle: &mut Oracle, case: &Value) -> Vec<String> {
    let name = str_field(case, "name");
    let tool = &case["oracle"];
    let tool_failed = tool["exit"].as_i64() != Some(0);
    let report = run_of(oracle, case).validate();
    let we_failed = report.verdict == Verdict::Fail;
    let codes: Vec<String> = report.findings.iter().map(|f| format!("{:?} {}", f.severity, f.code)).collect();
    let mut problems = Vec::new();
    match case["expected_code"].as_str() {
        Some(code) => {
            let found = report.findings.iter().find(|f| f.code == code);
            match found {
                None => problems.push(format!("{name}: expected {code}, got {codes:?}")),
                Some(f) if !tool_failed && case.get("stricter").is_none() && f.severity == Severity::Error => problems
                    .push(format!("{name}: {code} is an error but {} accepts the input", str_field(tool, "tool"))),
                Some(_) => {}
            }
        }
        None if !report.findings.is_empty() => problems.push(format!("{name}: expected no findings, got {codes:?}")),
        None => {}
    }
    if case.get("stricter").is_some() {
        if tool_failed || !we_failed {
            problems.push(format!("{name}: marked stricter, but tool failed={tool_failed} and we failed={we_failed}"));
        }
    } else if tool_failed != we_failed {
        problems.push(format!(
            "{name}: {} exit {} ({}) but our verdict is {:?} with {codes:?}",
            str_field(tool, "tool"),
            tool["exit"],
            str_field(tool, "message"),
            report.verdict
        ));
    }
    if let Some(die) = tool["die"].as_str() {
        let mismatch = report.findings.iter().find(|f| f.code == "BITSTREAM_DEVICE_MISMATCH");
        if mismatch.is_some_and(|f| !f.message.contains(&format!("iCE40 {die} die"))) {
            problems
                .push(format!("{name}: iceunpack detected the {die} die but we said: {}", mismatch.unwrap().message));
        }
    }
    problems
}

#[test]
fn every_recorded_bad_input_gets_the_expected_code_and_the_tools_verdict() {
    let mut oracle = Oracle::load();
    let recordings = oracle.json("cases.json");
    let cases = recordings["cases"].as_array().expect("cases.json has a cases array");
    assert!(cases.len() >= 30, "only {} cases recorded", cases.len());
    let problems: Vec<String> = cases.iter().flat_map(|case| disagreements(&mut oracle, case)).collect();
    assert!(
        problems.is_empty(),
        "{} of {} cases disagree with the tools:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

#[test]
fn the_recordings_cover_every_case_the_issue_lists() {
    let recordings = Oracle::load().json("cases.json");
    let codes: Vec<&str> =
        recordings["cases"].as_array().unwrap().iter().filter_map(|c| c["expected_code"].as_str()).collect();
    for code in [
        "PIN_NOT_IN_PACKAGE",
        "PIN_DOUBLE_ASSIGNED",
        "PORT_CONSTRAINED_TWICE",
        "PORT_UNCONSTRAINED",
        "CONSTRAINT_UNKNOWN_PORT",
        "PCF_SYNTAX",
        "PCF_IGNORED_OPTION",
        "PULLUP_RESISTOR_NOT_SUPPORTED",
        "PLL_PAD_PIN_INVALID",
        "PLL_FREQ_OUT_OF_RANGE",
        "PACKAGE_UNSUPPORTED",
        "TOP_NOT_FOUND",
        "NETLIST_INVALID",
        "BITSTREAM_TRUNCATED",
        "BITSTREAM_MALFORMED",
        "BITSTREAM_CRC_MISMATCH",
        "BITSTREAM_UNKNOWN_COMMAND",
        "BITSTREAM_SIZE_MISMATCH",
        "BITSTREAM_DEVICE_MISMATCH",
    ] {
        assert!(codes.contains(&code), "no recorded case expects {code}");
    }
}
