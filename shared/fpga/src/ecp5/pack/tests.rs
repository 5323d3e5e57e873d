//! The packer against nextpnr-ecp5 on netlists recorded from Yosys `synth_ecp5`: `fixtures/`
//! holds the netlists and `expected.json` what `nextpnr-ecp5 --pack-only --report` said about
//! each (recorded with `fixtures/record.py`, not written by hand).

use crate::{validate, FileNames, Input, Severity};

const EXPECTED: &str = include_str!("fixtures/expected.json");

fn part(flag: &str) -> &'static str {
    match flag {
        "12k" => "LFE5U-12F",
        "25k" => "LFE5U-25F",
        "45k" => "LFE5U-45F",
        "85k" => "LFE5U-85F",
        "um-25k" => "LFE5UM-25F",
        "um5g-25k" => "LFE5UM5G-25F",
        other => panic!("no part for nextpnr flag {other}"),
    }
}

fn netlist(name: &str) -> &'static str {
    match name {
        "adder" => include_str!("fixtures/adder.json"),
        "bidir" => include_str!("fixtures/bidir.json"),
        "counter" => include_str!("fixtures/counter.json"),
        "ddr" => include_str!("fixtures/ddr.json"),
        "longchain" => include_str!("fixtures/longchain.json"),
        "mult" => include_str!("fixtures/mult.json"),
        "muxes" => include_str!("fixtures/muxes.json"),
        "pll" => include_str!("fixtures/pll.json"),
        "rams" => include_str!("fixtures/rams.json"),
        "alu_b" => include_str!("fixtures/alu_b.json"),
        "alu_signed" => include_str!("fixtures/alu_signed.json"),
        "alu_bits" => include_str!("fixtures/alu_bits.json"),
        other => panic!("no fixture {other}"),
    }
}

/// Our utilisation and nextpnr's for one recorded case, as (resource, ours, nextpnr's) rows
/// that differ.
fn differences(name: &str) -> Vec<(String, u32, u32)> {
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let case = &expected["cases"][name];
    assert_eq!(case["exit"], 0, "{name}: nextpnr packed it");
    let lpf = case["lpf"].as_str();
    let report = validate(&Input {
        device: part(case["device"].as_str().unwrap()),
        package: case["package"].as_str().unwrap(),
        netlist: netlist(name),
        constraints: lpf,
        allow_unconstrained: true,
        files: FileNames::default(),
        ..Input::default()
    });
    let errors: Vec<_> = report.findings.iter().filter(|f| f.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
    let want = case["used"].as_object().unwrap();
    let mut diff = Vec::new();
    for u in &report.utilization {
        if u.resource == super::super::PACKAGE_PINS {
            continue;
        }
        let theirs = want.get(&u.resource).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if u.used != theirs {
            diff.push((u.resource.clone(), u.used, theirs));
        }
    }
    for r in want.keys() {
        assert!(report.utilization.iter().any(|u| &u.resource == r), "{name}: nextpnr reports {r}, we do not");
    }
    diff
}

#[test]
fn a_counter_counts_its_carry_chain_feed_in_and_feed_out_and_the_constant_driver() {
    assert_eq!(differences("counter"), []);
}

#[test]
fn an_adder_with_its_carry_out_used_and_constant_outputs_matches_nextpnr() {
    assert_eq!(differences("adder"), []);
}

#[test]
fn wide_multiplexers_fold_pfumx_and_l6mux21_into_their_luts() {
    assert_eq!(differences("muxes"), []);
}

#[test]
fn distributed_ram_takes_six_combs_and_a_ramw_and_block_ram_a_dp16kd() {
    assert_eq!(differences("rams"), []);
}

#[test]
fn a_multiplier_and_two_clocks_match_nextpnr() {
    assert_eq!(differences("mult"), []);
}

#[test]
fn a_pll_is_one_ehxplll_and_clocks_with_few_users_stay_off_the_globals() {
    assert_eq!(differences("pll"), []);
}

#[test]
fn a_carry_chain_too_long_for_the_die_is_split_with_a_feed_out_and_a_feed_in() {
    assert_eq!(differences("longchain"), []);
}

#[test]
fn ddr_primitives_take_iologic_or_siologic_by_the_edge_of_their_pin() {
    assert_eq!(differences("ddr"), []);
}

#[test]
fn an_inout_port_and_the_designs_own_dcca_match_nextpnr() {
    assert_eq!(differences("bidir"), []);
}

#[test]
fn ddr_primitives_on_unplaced_pins_are_errors_naming_the_cell_and_the_port() {
    let report = validate(&Input {
        device: "LFE5U-25F",
        package: "CABGA256",
        netlist: netlist("ddr"),
        constraints: Some("LOCATE COMP \"din\" SITE \"A10\";"),
        allow_unconstrained: true,
        ..Input::default()
    });
    let found: Vec<&str> =
        report.findings.iter().filter(|f| f.code == "IOLOGIC_PIN_UNCONSTRAINED").map(|f| f.message.as_str()).collect();
    assert_eq!(found.len(), 1, "{:?}", report.findings);
    assert!(found[0].contains("'dout'"), "{}", found[0]);
}

/// Our errors for a case nextpnr rejected, and nextpnr's first error.
fn rejected(name: &str) -> (Vec<(String, String)>, String) {
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let case = &expected["cases"][name];
    assert_ne!(case["exit"], 0, "{name}: nextpnr rejected it");
    let report = validate(&Input {
        device: part(case["device"].as_str().unwrap()),
        package: case["package"].as_str().unwrap(),
        netlist: netlist(name),
        allow_unconstrained: true,
        ..Input::default()
    });
    let errors =
        report.findings.into_iter().filter(|f| f.severity == Severity::Error).map(|f| (f.code, f.message)).collect();
    (errors, case["first_error"].as_str().unwrap().to_owned())
}

#[test]
fn an_alu54b_without_a_multiplier_on_port_b_is_rejected_as_nextpnr_rejects_it() {
    let (errors, theirs) = rejected("alu_b");
    assert!(theirs.contains("No MULT18X18D found connected to ALU54B 'alu' port B"), "{theirs}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "DSP_ALU_UNCONNECTED");
    assert!(errors[0].1.contains("'alu'") && errors[0].1.contains("port B"), "{}", errors[0].1);
}

#[test]
fn an_alu54b_whose_signed_input_is_not_the_multipliers_is_rejected_naming_both() {
    let (errors, theirs) = rejected("alu_signed");
    assert!(theirs.contains("input SIGNEDIB must be driven by SIGNEDP of MULT18X18D 'mb'"), "{theirs}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "DSP_SIGNED_INPUT");
    assert!(errors[0].1.contains("input SIGNEDIB must be driven by SIGNEDP of MULT18X18D 'mb'"), "{}", errors[0].1);
}

#[test]
fn an_alu54b_whose_operand_bits_are_not_the_multipliers_is_rejected_at_the_first_bit() {
    let (errors, theirs) = rejected("alu_bits");
    assert!(theirs.contains("input A0 must be driven by ROA0 of MULT18X18D 'ma'"), "{theirs}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "DSP_ALU_INPUT");
    assert!(errors[0].1.contains("input A0 must be driven by ROA0 of MULT18X18D 'ma'"), "{}", errors[0].1);
}

#[test]
fn a_cell_no_ecp5_bel_takes_is_unsupported_and_listed_with_none_available() {
    // yosys knows DPR16X4C; nextpnr-ecp5 packs it as it is and lists it in its report with
    // `available` 0, then stops placing it ("cell type 'DPR16X4C' is unsupported").
    let netlist = r#"{"modules": {"top": {"ports": {}, "cells": {"dpr1": {"type": "DPR16X4C", "port_directions": {}, "connections": {}}}}}}"#;
    let report = validate(&Input { device: "LFE5U-25F", package: "CABGA256", netlist, ..Input::default() });
    let row = report.utilization.iter().find(|u| u.resource == "DPR16X4C").expect("a row for the type");
    assert_eq!((row.used, row.available), (1, 0));
    let errors: Vec<(&str, Option<&str>)> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| (f.code.as_str(), f.location.cell.as_deref()))
        .collect();
    assert_eq!(errors, [("CELL_TYPE_UNSUPPORTED", Some("dpr1"))]);
}

#[test]
fn carries_hanging_off_a_shared_carry_out_stay_unpacked_as_in_nextpnr() {
    // Two chained carries whose last COUT feeds three more. nextpnr-ecp5 0.11 (recorded):
    // TRELLIS_COMB 13 (the chain, a feed-in, feed-outs and the ground LUT), CCU2C 2 with none
    // available, and placement stops: "cell type 'CCU2C' is unsupported (instantiated as
    // 'z000001')".
    let ccu = |name: &str, cin: &str, cout: u32| {
        format!(
            r#""{name}": {{"type": "CCU2C", "port_directions": {{"CIN": "input", "COUT": "output"}}, "connections": {{"CIN": [{cin}], "COUT": [{cout}]}}}}"#
        )
    };
    let cells = [
        ccu("c000000", "\"0\"", 10),
        ccu("c000001", "10", 11),
        ccu("z000000", "11", 12),
        ccu("z000001", "11", 13),
        ccu("z000002", "11", 14),
    ];
    let netlist = format!(r#"{{"modules": {{"top": {{"ports": {{}}, "cells": {{{}}}}}}}}}"#, cells.join(", "));
    let report = validate(&Input { device: "LFE5U-25F", package: "CABGA256", netlist: &netlist, ..Input::default() });
    let used = |r: &str| report.utilization.iter().find(|u| u.resource == r).map(|u| (u.used, u.available));
    assert_eq!((used("TRELLIS_COMB"), used("CCU2C")), (Some((13, 24288)), Some((2, 0))));
    let unpacked: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.code == "CELL_TYPE_UNSUPPORTED")
        .filter_map(|f| f.location.cell.as_deref())
        .collect();
    assert_eq!(unpacked, ["z000001", "z000002"]);
}

#[test]
fn more_io_than_the_package_bonds_out_is_an_error_though_the_die_has_the_pios() {
    // nextpnr-ecp5 places the extra IO on PIOs the TQFP144 does not bond out and exits 0; no
    // design works that way, so we say so (ECP5.md).
    let ports: Vec<String> =
        (0..99).map(|i| format!(r#""p{i}": {{"direction": "input", "bits": [{}]}}"#, i + 2)).collect();
    let netlist = format!(r#"{{"modules": {{"top": {{"ports": {{{}}}, "cells": {{}}}}}}}}"#, ports.join(", "));
    let report = validate(&Input {
        device: "LFE5U-25F",
        package: "TQFP144",
        netlist: &netlist,
        allow_unconstrained: true,
        ..Input::default()
    });
    let pins = report.utilization.iter().find(|u| u.resource == super::super::PACKAGE_PINS).unwrap();
    assert_eq!((pins.used, pins.available), (99, 98));
    let errors: Vec<&str> =
        report.findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.code.as_str()).collect();
    assert_eq!(errors, ["IO_EXCEEDS_PACKAGE"]);
}

/// A netlist of `n` DCCAs, each buffering its own input port.
fn dccas(n: usize) -> String {
    let ports: Vec<String> =
        (0..n).map(|i| format!(r#""c{i}": {{"direction": "input", "bits": [{}]}}"#, 2 + i)).collect();
    let cells: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#""dcc{i:02}": {{"type": "DCCA", "port_directions": {{"CLKI": "input", "CE": "input", "CLKO": "output"}}, "connections": {{"CLKI": [{}], "CE": ["1"], "CLKO": [{}]}}}}"#,
                2 + i,
                1000 + i
            )
        })
        .collect();
    format!(r#"{{"modules": {{"top": {{"ports": {{{}}}, "cells": {{{}}}}}}}}}"#, ports.join(", "), cells.join(", "))
}

#[test]
fn sixteen_global_buffers_fit_and_a_seventeenth_is_an_error_naming_it() {
    let errors = |n: usize| -> Vec<(String, Option<String>)> {
        let netlist = dccas(n);
        let report =
            validate(&Input { device: "LFE5U-45F", package: "CABGA381", netlist: &netlist, ..Input::default() });
        report
            .findings
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| (f.code, f.location.cell))
            .collect()
    };
    assert_eq!(errors(16), []);
    assert_eq!(errors(17), [("GLOBAL_BUFFERS_EXCEEDED".to_owned(), Some("dcc16".to_owned()))]);
}
