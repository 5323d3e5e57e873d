//! Unit tests for the constraint checks, on hx8k/ct256 and up5k/sg48.

use super::*;
use crate::device::device;
use crate::report::Severity;

fn blink() -> Design<'static> {
    Design::with_ports(&["clk", "btn", "led[0]", "led[1]"])
}

const GOOD: &str = "set_io clk J3\nset_io btn A2\nset_io led[0] B5\nset_io led[1] B4\n";

fn run_on(device_name: &str, package: &str, design: &Design<'_>, pcf: &str, allow: bool) -> Vec<(Severity, String)> {
    let d = device(device_name).unwrap();
    let p = d.package(package).unwrap();
    check_constraints(d, p, design, Some(pcf), allow, Some("top.pcf"), &Deadline::default())
        .into_iter()
        .map(|f| (f.severity, f.code))
        .collect()
}

fn run(pcf: &str) -> Vec<(Severity, String)> {
    run_on("hx8k", "ct256", &blink(), pcf, false)
}

fn one(severity: Severity, code: &str) -> Vec<(Severity, String)> {
    vec![(severity, code.to_owned())]
}

#[test]
fn a_complete_pcf_has_no_findings() {
    assert!(run(GOOD).is_empty());
}

#[test]
fn a_pin_missing_from_the_package_is_an_error() {
    assert_eq!(run(&GOOD.replace("J3", "Z99")), one(Severity::Error, "PIN_NOT_IN_PACKAGE"));
}

#[test]
fn a_power_pin_is_not_an_io_pin() {
    assert_eq!(run(&GOOD.replace("J3", "A4")), one(Severity::Error, "PIN_NOT_IN_PACKAGE"));
}

#[test]
fn pin_names_are_case_sensitive_like_nextpnr() {
    assert_eq!(run(&GOOD.replace("J3", "j3")), one(Severity::Error, "PIN_NOT_IN_PACKAGE"));
}

#[test]
fn two_ports_on_one_pin_is_an_error_at_the_second_line() {
    let d = device("hx8k").unwrap();
    let findings = check_constraints(
        d,
        d.package("ct256").unwrap(),
        &blink(),
        Some(&GOOD.replace("A2", "J3")),
        false,
        None,
        &Deadline::default(),
    );
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, "PIN_DOUBLE_ASSIGNED");
    assert_eq!((findings[0].location.line, findings[0].location.port.as_deref()), (Some(2), Some("btn")));
}

#[test]
fn a_port_constrained_twice_is_an_error_even_on_the_same_pin() {
    assert_eq!(run(&format!("{GOOD}set_io clk J3\n")), one(Severity::Error, "PORT_CONSTRAINED_TWICE"));
}

#[test]
fn an_unconstrained_port_is_an_error_unless_allowed() {
    let pcf = GOOD.replace("set_io clk J3\n", "");
    assert_eq!(run(&pcf), one(Severity::Error, "PORT_UNCONSTRAINED"));
    assert_eq!(run_on("hx8k", "ct256", &blink(), &pcf, true), one(Severity::Warning, "PORT_UNCONSTRAINED"));
}

#[test]
fn a_constraint_for_an_unknown_port_is_a_warning_and_its_pin_is_not_checked() {
    assert_eq!(run(&format!("{GOOD}set_io ghost Z99\n")), one(Severity::Warning, "CONSTRAINT_UNKNOWN_PORT"));
}

#[test]
fn nowarn_silences_an_unknown_port() {
    assert!(run(&format!("{GOOD}set_io -nowarn ghost C1\n")).is_empty());
}

#[test]
fn an_unknown_port_may_share_a_pin_with_a_real_one() {
    assert_eq!(run(&format!("{GOOD}set_io ghost J3\n")), one(Severity::Warning, "CONSTRAINT_UNKNOWN_PORT"));
}

#[test]
fn pullup_resistor_is_rejected_outside_ultraplus_even_for_unknown_ports() {
    assert_eq!(
        run(&format!("{GOOD}set_io -nowarn -pullup_resistor 10K ghost C1\n")),
        one(Severity::Error, "PULLUP_RESISTOR_NOT_SUPPORTED")
    );
}

#[test]
fn pullup_resistor_is_accepted_on_up5k() {
    let design = Design::with_ports(&["clk", "btn"]);
    let pcf = "set_io clk 35\nset_io -pullup yes -pullup_resistor 3P3K btn 10\n";
    assert!(run_on("up5k", "sg48", &design, pcf, false).is_empty());
}

#[test]
fn syntax_errors_from_the_parser_are_reported() {
    assert_eq!(run(&format!("{GOOD}set_location x y\n")), one(Severity::Error, "PCF_SYNTAX"));
}

#[test]
fn no_pcf_at_all_is_a_warning_like_nextpnr() {
    let d = device("hx8k").unwrap();
    let findings = check_constraints(d, d.package("ct256").unwrap(), &blink(), None, false, None, &Deadline::default());
    assert_eq!(findings.iter().map(|f| f.severity).collect::<Vec<_>>(), vec![Severity::Warning]);
}

#[test]
fn a_pad_pll_on_an_ordinary_pin_is_an_error() {
    let netlist = r#"{"modules": {"top": {"ports": {
        "clk": {"direction": "input", "bits": [2]}, "led": {"direction": "output", "bits": [3]}}, "cells": {
        "pll": {"type": "SB_PLL40_PAD", "parameters": {"DIVF": "0111111", "DIVQ": "100", "FILTER_RANGE": "001"},
                "connections": {"PACKAGEPIN": [2], "PLLOUTCORE": [3]}}}}}}"#;
    let module = crate::netlist::parse(netlist, None).unwrap();
    let design = crate::design_view::design_view(&module);
    assert_eq!(
        run_on("hx8k", "ct256", &design, "set_io clk J3\nset_io led B5\n", false),
        one(Severity::Error, "PLL_PAD_PIN_INVALID")
    );
    assert!(run_on("hx8k", "ct256", &design, "set_io clk R9\nset_io led B5\n", false).is_empty());
}

#[test]
fn bus_bits_are_matched_by_name_as_nextpnr_spells_them() {
    let bus = Design::with_ports(&["a[1]", "a[2]"]);
    assert!(run_on("hx8k", "ct256", &bus, "set_io a[1] J3\nset_io a[2] A2\n", false).is_empty());
    assert_eq!(
        run_on("hx8k", "ct256", &bus, "set_io a[01] J3\nset_io a[2] A2\n", false),
        vec![
            (Severity::Warning, "CONSTRAINT_UNKNOWN_PORT".to_owned()),
            (Severity::Error, "PORT_UNCONSTRAINED".to_owned())
        ],
        "nextpnr spells indices without leading zeros"
    );
}

#[test]
fn findings_quote_a_long_port_name_shortened() {
    let name: &'static str = Box::leak("p".repeat(100_000).into_boxed_str());
    let design = Design::with_ports(&[name]);
    let d = device("hx8k").unwrap();
    let findings =
        check_constraints(d, d.package("ct256").unwrap(), &design, Some(""), false, None, &Deadline::default());
    assert_eq!(findings.len(), 1);
    assert!(findings[0].message.len() < 300, "{}", findings[0].message.len());
    assert!(findings[0].location.port.as_ref().unwrap().ends_with('…'));
}
