use super::*;
use crate::ecp5::device::device;
use crate::netlist;
use crate::Severity;

/// A netlist with the given top-level ports (`"clk": input`, …) and no cells.
fn module_text(ports: &[(&str, &str, usize)]) -> String {
    let mut next = 2;
    let ports: Vec<String> = ports
        .iter()
        .map(|(name, dir, width)| {
            let bits: Vec<String> = (0..*width)
                .map(|_| {
                    next += 1;
                    next.to_string()
                })
                .collect();
            format!(r#""{name}": {{"direction": "{dir}", "bits": [{}]}}"#, bits.join(", "))
        })
        .collect();
    format!(r#"{{"modules": {{"top": {{"ports": {{{}}}, "cells": {{}}}}}}}}"#, ports.join(", "))
}

fn run(lpf: &str, allow: bool) -> Vec<(Severity, String, String)> {
    let text = module_text(&[("clk", "input", 1), ("led", "output", 2), ("io", "inout", 1)]);
    let module = netlist::parse(&text, None).unwrap();
    let d = device("LFE5U-25F").unwrap();
    let p = d.package("CABGA256").unwrap();
    let (findings, _) = check(d, p, &module, Some(lpf), allow, Some("top.lpf"), &Deadline::default());
    findings.into_iter().map(|f| (f.severity, f.code, f.message)).collect()
}

fn codes(lpf: &str) -> Vec<String> {
    run(lpf, false).into_iter().map(|(_, c, _)| c).collect()
}

const PLACED: &str = "LOCATE COMP \"clk\" SITE \"P6\";\nLOCATE COMP \"led[0]\" SITE \"B1\";\nLOCATE COMP \"led[1]\" SITE \"C1\";\nLOCATE COMP \"io\" SITE \"A10\";\n";

#[test]
fn every_port_placed_on_a_package_pin_passes() {
    assert_eq!(codes(PLACED), Vec::<String>::new());
}

#[test]
fn a_pin_the_package_lacks_is_an_error_naming_the_port_and_the_pin() {
    let found = run(&PLACED.replace("\"B1\"", "\"Z99\""), false);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "PIN_NOT_IN_PACKAGE");
    assert!(
        found[0].2.contains("'led[0]'") && found[0].2.contains("'Z99'") && found[0].2.contains("CABGA256"),
        "{}",
        found[0].2
    );
}

#[test]
fn pin_names_are_case_sensitive_as_in_nextpnr() {
    assert_eq!(codes(&PLACED.replace("\"B1\"", "\"b1\"")), ["PIN_NOT_IN_PACKAGE"]);
}

#[test]
fn two_ports_on_one_pin_is_an_error_naming_both() {
    let found = run(&PLACED.replace("\"C1\"", "\"B1\""), false);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "PIN_DOUBLE_ASSIGNED");
    assert!(found[0].2.contains("'led[0]'") && found[0].2.contains("'led[1]'"), "{}", found[0].2);
}

#[test]
fn a_port_without_locate_is_an_error_or_under_allow_unconstrained_a_warning() {
    let lpf = PLACED.replace("LOCATE COMP \"io\" SITE \"A10\";\n", "");
    assert_eq!(
        run(&lpf, false),
        [(
            Severity::Error,
            "PORT_UNCONSTRAINED".into(),
            "port 'io' has no LOCATE COMP in the LPF (allow unconstrained ports to let nextpnr place it)".into()
        )]
    );
    assert_eq!(run(&lpf, true)[0].0, Severity::Warning);
}

#[test]
fn without_an_lpf_nextpnr_places_everything_and_we_only_warn() {
    let text = module_text(&[("clk", "input", 1)]);
    let module = netlist::parse(&text, None).unwrap();
    let d = device("LFE5U-25F").unwrap();
    let (findings, _) = check(d, d.package("").unwrap(), &module, None, false, None, &Deadline::default());
    assert_eq!(findings.len(), 1);
    assert_eq!((findings[0].severity, findings[0].code.as_str()), (Severity::Warning, "PORT_UNCONSTRAINED"));
}

#[test]
fn a_one_bit_port_may_be_located_as_bit_zero() {
    assert_eq!(codes(&PLACED.replace("\"clk\"", "\"clk[0]\"")), Vec::<String>::new());
}

#[test]
fn a_locate_for_a_port_the_design_lacks_is_a_warning_and_a_later_locate_wins() {
    let found = run(&format!("{PLACED}LOCATE COMP \"nope\" SITE \"D1\";\nLOCATE COMP \"clk\" SITE \"E2\";\n"), false);
    let codes: Vec<(Severity, &str)> = found.iter().map(|(s, c, _)| (*s, c.as_str())).collect();
    assert_eq!(codes, [(Severity::Warning, "CONSTRAINT_UNKNOWN_PORT"), (Severity::Warning, "PORT_CONSTRAINED_TWICE")]);
}

#[test]
fn a_malformed_site_of_a_real_port_is_a_syntax_error_at_its_column() {
    let found = run(&PLACED.replace("SITE \"P6\"", "SITE \"P6"), false);
    let syntax: Vec<&String> = found.iter().filter(|f| f.1 == "LPF_SYNTAX").map(|f| &f.2).collect();
    assert_eq!(syntax.len(), 1, "{found:?}");
    assert!(syntax[0].starts_with("line 1, column 24:"), "{}", syntax[0]);
}

#[test]
fn io_types_trellis_knows_pass_and_others_are_errors_listing_the_known_ones() {
    assert_eq!(codes(&format!("{PLACED}IOBUF PORT \"clk\" IO_TYPE=LVCMOS33 PULLMODE=UP;")), Vec::<String>::new());
    let found = run(&format!("{PLACED}IOBUF PORT \"clk\" IO_TYPE=LVCMOS5;"), false);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "IO_TYPE_UNKNOWN");
    assert!(found[0].2.contains("'LVCMOS5'") && found[0].2.contains("LVCMOS33, LVCMOS25"), "{}", found[0].2);
    assert_eq!(codes(&format!("{PLACED}IOBUF PORT \"clk\" IO_TYPE=lvcmos33;")), ["IO_TYPE_UNKNOWN"]);
}

#[test]
fn unknown_iobuf_keys_and_values_are_warnings() {
    let found = run(&format!("{PLACED}IOBUF PORT \"clk\" COLOUR=RED PULLMODE=SIDEWAYS;"), false);
    let codes: Vec<(Severity, &str)> = found.iter().map(|(s, c, _)| (*s, c.as_str())).collect();
    assert_eq!(codes, [(Severity::Warning, "LPF_IGNORED_OPTION"), (Severity::Warning, "IOBUF_VALUE_UNKNOWN")]);
}

#[test]
fn an_iobuf_attribute_without_equals_for_a_real_port_is_a_syntax_error() {
    assert_eq!(codes(&format!("{PLACED}IOBUF PORT \"clk\" FAST;")), ["LPF_SYNTAX"]);
    // nextpnr reads the attributes only of a port it has.
    assert_eq!(codes(&format!("{PLACED}IOBUF PORT \"nope\" FAST;")), ["CONSTRAINT_UNKNOWN_PORT"]);
}

#[test]
fn outputs_of_different_voltages_in_one_bank_conflict() {
    // B1 and C1 are both in bank 7 of the CABGA256.
    let lpf = format!("{PLACED}IOBUF PORT \"led[0]\" IO_TYPE=LVCMOS25;\nIOBUF PORT \"led[1]\" IO_TYPE=LVCMOS33;");
    let found = run(&lpf, false);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].0, found[0].1.as_str()), (Severity::Error, "BANK_VCCIO_CONFLICT"));
    assert!(found[0].2.contains("bank 7"), "{}", found[0].2);
    // An input without a reference voltage does not set the bank's voltage.
    assert_eq!(codes(&format!("{PLACED}IOBUF PORT \"clk\" IO_TYPE=LVCMOS18;")), Vec::<String>::new());
}

#[test]
fn frequencies_of_known_ports_pass_and_unknown_ones_warn() {
    assert_eq!(codes(&format!("{PLACED}FREQUENCY PORT \"clk\" 25 MHZ;")), Vec::<String>::new());
    assert_eq!(codes(&format!("{PLACED}FREQUENCY PORT \"nope\" 25 MHZ;")), ["CONSTRAINT_UNKNOWN_PORT"]);
    assert_eq!(codes(&format!("{PLACED}FREQUENCY PORT \"clk\" -5 MHZ;")), ["FREQUENCY_INVALID"]);
}

#[test]
fn a_long_named_wide_bus_costs_its_bits_not_its_bits_times_its_name() {
    // One finding per unconstrained bit: each names the bit with the port name shortened, so a
    // 10 000-byte name on 2 000 bits is not 20 MB of findings.
    let name = "w".repeat(10_000);
    let text = module_text(&[(name.as_str(), "input", 2000)]);
    let module = netlist::parse(&text, None).unwrap();
    let d = device("LFE5U-25F").unwrap();
    let (findings, _) = check(d, d.package("").unwrap(), &module, Some(""), false, None, &Deadline::default());
    assert_eq!(findings.len(), 2000);
    for f in &findings {
        let port = f.location.port.as_deref().unwrap();
        assert!(port.len() < 200 && f.message.len() < 300, "{} bytes", port.len() + f.message.len());
    }
    assert!(findings[1999].location.port.as_deref().unwrap().ends_with("…[1999]"));
}
