//! The rules through the LPF, on the LFE5U-25F's CABGA256: pins B1 and C1 are PIO A of bank 7,
//! G3 is bank 7's VREF (PIO C), L1/L2 the true and complement pins of a bank 6 pair, A11/A12 a
//! pair on the top edge (bank 1), A2 in bank 0, which has no VREF.

use crate::budget::Deadline;
use crate::ecp5::constraints;
use crate::ecp5::device::device;
use crate::netlist;
use crate::Severity;

/// Errors and warnings for an LPF over a design with inputs `i0`–`i3`, outputs `o0`–`o3` and
/// one inout `b`.
fn findings(lpf: &str) -> Vec<(Severity, String, String)> {
    let text = r#"{"modules": {"top": {"ports": {
        "i0": {"direction": "input", "bits": [2]}, "i1": {"direction": "input", "bits": [3]},
        "i2": {"direction": "input", "bits": [4]}, "i3": {"direction": "input", "bits": [5]},
        "o0": {"direction": "output", "bits": [6]}, "o1": {"direction": "output", "bits": [7]},
        "o2": {"direction": "output", "bits": [8]}, "o3": {"direction": "output", "bits": [9]},
        "b": {"direction": "inout", "bits": [10]}}, "cells": {}}}}"#;
    let module = netlist::parse(text, None).unwrap();
    let d = device("LFE5U-25F").unwrap();
    let (found, _) = constraints::check(
        d,
        d.package("CABGA256").unwrap(),
        &module,
        Some(lpf),
        true,
        Some("top.lpf"),
        &Deadline::default(),
    );
    found.into_iter().filter(|f| f.code != "PORT_UNCONSTRAINED").map(|f| (f.severity, f.code, f.message)).collect()
}

/// An LPF placing `(port, pin, IOBUF attributes)`.
fn lpf(ios: &[(&str, &str, &str)]) -> String {
    ios.iter()
        .map(|(port, pin, attrs)| {
            let iobuf = if attrs.is_empty() { String::new() } else { format!("IOBUF PORT \"{port}\" {attrs};\n") };
            format!("LOCATE COMP \"{port}\" SITE \"{pin}\";\n{iobuf}")
        })
        .collect()
}

fn codes(ios: &[(&str, &str, &str)]) -> Vec<String> {
    findings(&lpf(ios)).into_iter().map(|(_, c, _)| c).collect()
}

#[test]
fn outputs_of_two_voltages_in_one_bank_are_an_error_naming_bank_pins_and_voltages() {
    let found = findings(&lpf(&[("o0", "B1", "IO_TYPE=LVCMOS25"), ("o1", "C1", "")]));
    assert_eq!(found.len(), 1, "{found:?}");
    let (severity, code, message) = &found[0];
    assert_eq!((*severity, code.as_str()), (Severity::Error, "BANK_VCCIO_CONFLICT"));
    for part in ["bank 7", "2.5 V", "3.3 V", "'B1'", "'C1'", "LVCMOS25", "LVCMOS33", "init_io_banks", "TN1262"] {
        assert!(message.contains(part), "{part} in {message}");
    }
}

#[test]
fn compatible_voltages_and_unreferenced_inputs_share_a_bank() {
    // One voltage, two standards: LVCMOS25 and LVDS are both 2.5 V; LVTTL33 and LVCMOS33 3.3 V.
    assert!(codes(&[("o0", "B1", "IO_TYPE=LVCMOS25"), ("o1", "L1", "IO_TYPE=LVDS"), ("o2", "C1", "IO_TYPE=LVDS")])
        .iter()
        .all(|c| c != "BANK_VCCIO_CONFLICT"));
    assert_eq!(codes(&[("o0", "B1", "IO_TYPE=LVTTL33"), ("o1", "C1", "")]), Vec::<String>::new());
    // An unreferenced input sets no voltage; the same voltages in different banks are fine.
    assert_eq!(codes(&[("o0", "B1", "IO_TYPE=LVCMOS18"), ("i0", "C1", "IO_TYPE=LVCMOS33")]), Vec::<String>::new());
    assert_eq!(codes(&[("o0", "B1", "IO_TYPE=LVCMOS18"), ("o1", "L1", "")]), Vec::<String>::new());
}

#[test]
fn a_bidirectional_pin_and_a_referenced_input_set_their_banks_voltage() {
    assert_eq!(codes(&[("o0", "B1", "IO_TYPE=LVCMOS18"), ("b", "C1", "")]), ["BANK_VCCIO_CONFLICT"]);
    assert_eq!(codes(&[("o0", "B1", ""), ("i0", "C1", "IO_TYPE=SSTL15_I")]), ["BANK_VCCIO_CONFLICT"]);
}

#[test]
fn a_referenced_input_needs_its_banks_vref_pin_free() {
    let found = findings(&lpf(&[("i0", "B1", "IO_TYPE=SSTL15_I"), ("o0", "G3", "IO_TYPE=LVCMOS15")]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "VREF_PIN_OCCUPIED");
    for part in ["'G3'", "bank 7", "VREF1_7", "'i0'", "'o0'"] {
        assert!(found[0].2.contains(part), "{part} in {}", found[0].2);
    }
    // Free VREF, or an SSTL output (which needs no reference): no error.
    assert_eq!(codes(&[("i0", "B1", "IO_TYPE=SSTL15_I"), ("o0", "C1", "IO_TYPE=LVCMOS15")]), Vec::<String>::new());
    assert_eq!(codes(&[("o1", "B1", "IO_TYPE=SSTL15_I"), ("o0", "G3", "IO_TYPE=LVCMOS15")]), Vec::<String>::new());
}

#[test]
fn a_referenced_input_in_a_bank_without_vref_is_an_error() {
    let found = findings(&lpf(&[("i0", "A2", "IO_TYPE=SSTL18_I")]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "VREF_PIN_MISSING");
    assert!(found[0].2.contains("bank 0") && found[0].2.contains("2, 3, 6, 7"), "{}", found[0].2);
}

#[test]
fn a_differential_standard_on_a_complement_pin_is_an_error_naming_the_true_pin() {
    let found = findings(&lpf(&[("o0", "L2", "IO_TYPE=LVDS")]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "DIFFERENTIAL_ON_COMPLEMENT_PIN");
    assert!(
        found[0].2.contains("'L2'") && found[0].2.contains("'L1'") && found[0].2.contains("bank 6"),
        "{}",
        found[0].2
    );
    assert_eq!(codes(&[("o0", "L1", "IO_TYPE=LVDS")]), Vec::<String>::new());
    assert_eq!(codes(&[("i0", "L1", "IO_TYPE=LVDS")]), Vec::<String>::new());
    assert_eq!(codes(&[("i0", "L2", "IO_TYPE=LVCMOS25D")]), ["DIFFERENTIAL_ON_COMPLEMENT_PIN"]);
}

#[test]
fn the_top_edge_takes_pseudo_differential_outputs_on_the_a_pin_only() {
    assert_eq!(codes(&[("o0", "A11", "IO_TYPE=LVCMOS33D")]), Vec::<String>::new());
    assert_eq!(codes(&[("o0", "A12", "IO_TYPE=LVCMOS33D")]), ["DIFFERENTIAL_ON_COMPLEMENT_PIN"]);
    assert_eq!(codes(&[("i0", "A11", "IO_TYPE=LVCMOS33D")]), ["PSEUDO_DIFFERENTIAL_INPUT"]);
    assert_eq!(codes(&[("b", "A11", "IO_TYPE=LVCMOS33D")]), ["PSEUDO_DIFFERENTIAL_INPUT"]);
}

#[test]
fn termination_needs_a_standard_of_1v8_or_below_but_not_1v2() {
    assert_eq!(codes(&[("i0", "B1", "IO_TYPE=SSTL15_I TERMINATION=50")]), Vec::<String>::new());
    assert_eq!(codes(&[("i0", "B1", "IO_TYPE=LVCMOS33 TERMINATION=OFF")]), ["TERMINATION_UNSUPPORTED"]);
}
