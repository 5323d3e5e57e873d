//! The ECP5 DSP cascade rules nextpnr-ecp5's packer enforces (`check_alu`): an `ALU54B` works
//! only on two `MULT18X18D`s, the one driving its `MA0` ("A") and the one driving `MB0` ("B"),
//! whose outputs feed it bit for bit. nextpnr stops at the first broken rule of an ALU; so do we.
//!
//! Codes: `DSP_ALU_UNCONNECTED` (no multiplier on port A or B), `DSP_OUTPUT_REGISTERED` (a
//! multiplier feeding an ALU with `REG_OUTPUT_CLK` set and `MULT_BYPASS` off), `DSP_SIGNED_INPUT`
//! (`SIGNEDIA`/`SIGNEDIB` not from the multiplier's `SIGNEDP`), `DSP_ALU_INPUT` (an `A`, `B`,
//! `MA` or `MB` bit not from the multiplier's `ROA`/`ROB`/`P` bit of the same index).
//!
//! One routing rule: `DSP_CASCADE_INPUT`, an `ALU54B` cascade input (`CIN0`–`CIN53`) tied to a
//! constant or driven from the fabric. Those pins are reachable only from the neighbouring
//! DSP's cascade outputs, so nextpnr-ecp5's router finds no path to them ("Failed to find a
//! route for arc … of net $PACKER_GND_NET", then "Routing design failed"); tested with the
//! pins tied low and driven by a top-level input. A `CIN` driven by another `ALU54B` (a chain of
//! ALUs) is left alone: not checked either way.

use std::collections::HashMap;

use crate::netlist::{Bit, Module, Param};
use crate::report::{short_name, Finding, Location};

/// Checks every `ALU54B`.
pub(crate) fn check(m: &Module<'_>, file: Option<&str>) -> Vec<Finding> {
    let alus: Vec<usize> = (0..m.cells.len()).filter(|&i| m.cells[i].cell_type == "ALU54B").collect();
    if alus.is_empty() {
        return Vec::new();
    }
    // Every net's driver: (cell, port).
    let mut driver: HashMap<u32, (usize, &str)> = HashMap::new();
    for (i, cell) in m.cells.iter().enumerate() {
        for c in m.connections(cell) {
            if c.output {
                if let [Bit::Net(n)] = m.bits(c) {
                    driver.insert(*n, (i, c.port.as_ref()));
                }
            }
        }
    }
    let driven_by = |cell: usize, port: &str| -> Option<(usize, &str)> {
        match m.bit(&m.cells[cell], port) {
            Some(Bit::Net(n)) => driver.get(&n).copied(),
            _ => None,
        }
    };
    let mult_on = |alu: usize, port: &str| {
        driven_by(alu, port).filter(|(c, p)| m.cells[*c].cell_type == "MULT18X18D" && *p == "P0").map(|(c, _)| c)
    };
    let text = |cell: usize, name: &str, default: &str| match m.parameter(&m.cells[cell], name) {
        Some(Param::Text(t)) => t.into_owned(),
        _ => default.to_owned(),
    };
    let mut findings = Vec::new();
    for &alu in &alus {
        let name = short_name(&m.cells[alu].name).into_owned();
        let cascade = (0..54).find_map(|i| {
            let port = format!("CIN{i}");
            let what = match m.bit(&m.cells[alu], &port)? {
                Bit::Zero | Bit::One => "tied to a constant".to_owned(),
                Bit::Undriven => return None,
                Bit::Net(_) => match driven_by(alu, &port) {
                    Some((c, _)) if m.cells[c].cell_type == "ALU54B" => return None,
                    Some((c, p)) => {
                        format!("driven by {p} of '{}' ({})", short_name(&m.cells[c].name), m.cells[c].cell_type)
                    }
                    None => "driven from outside the design's cells (a port)".to_owned(),
                },
            };
            Some((port, what))
        });
        if let Some((port, what)) = cascade {
            findings.push(Finding::error(
                "DSP_CASCADE_INPUT",
                format!(
                    "ALU54B '{name}' cascade input {port} is {what}; cascade inputs come only from the neighbouring DSP, so nextpnr-ecp5 cannot route it (leave CIN unconnected)"
                ),
                Location {
                    file: file.map(str::to_owned),
                    cell: Some(m.cells[alu].name.clone().into_owned()),
                    port: Some(port),
                    ..Location::default()
                },
            ));
        }
    }
    for alu in alus {
        let name = short_name(&m.cells[alu].name).into_owned();
        let fail = |code: &str, message: String| {
            Finding::error(
                code,
                message,
                Location {
                    file: file.map(str::to_owned),
                    cell: Some(m.cells[alu].name.clone().into_owned()),
                    ..Location::default()
                },
            )
        };
        let (a, b) = match (mult_on(alu, "MA0"), mult_on(alu, "MB0")) {
            (Some(a), Some(b)) => (a, b),
            (a, _) => {
                let side = if a.is_none() { "A (MA0)" } else { "B (MB0)" };
                findings.push(fail(
                    "DSP_ALU_UNCONNECTED",
                    format!("ALU54B '{name}' has no MULT18X18D on port {side}; an ALU54B adds the products of two multipliers"),
                ));
                continue;
            }
        };
        let mult_name = |c: usize| short_name(&m.cells[c].name).into_owned();
        if let Some(&bad) = [a, b]
            .iter()
            .find(|&&c| text(c, "REG_OUTPUT_CLK", "NONE") != "NONE" && text(c, "MULT_BYPASS", "DISABLED") != "ENABLED")
        {
            findings.push(fail(
                "DSP_OUTPUT_REGISTERED",
                format!(
                    "MULT18X18D '{}' drives ALU54B '{name}', so its REG_OUTPUT_CLK must be NONE (or MULT_BYPASS ENABLED)",
                    mult_name(bad)
                ),
            ));
            continue;
        }
        let from = |port: &str, mult: usize, mult_port: &str| driven_by(alu, port) == Some((mult, mult_port));
        if let Some((port, mult)) =
            [("SIGNEDIA", a), ("SIGNEDIB", b)].into_iter().find(|(p, c)| !from(p, *c, "SIGNEDP"))
        {
            findings.push(fail(
                "DSP_SIGNED_INPUT",
                format!("ALU54B '{name}' input {port} must be driven by SIGNEDP of MULT18X18D '{}'", mult_name(mult)),
            ));
            continue;
        }
        'bits: for i in 0..36 {
            let ro = if i < 18 { format!("ROA{i}") } else { format!("ROB{}", i - 18) };
            let p = format!("P{i}");
            for (port, mult, want) in [
                (format!("A{i}"), a, &ro),
                (format!("B{i}"), b, &ro),
                (format!("MA{i}"), a, &p),
                (format!("MB{i}"), b, &p),
            ] {
                if !from(&port, mult, want) {
                    findings.push(fail(
                        "DSP_ALU_INPUT",
                        format!(
                            "ALU54B '{name}' input {port} must be driven by {want} of MULT18X18D '{}'",
                            mult_name(mult)
                        ),
                    ));
                    break 'bits;
                }
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlist;

    /// Codes for a design with one ALU54B whose connections are `cin` (JSON), beside a
    /// top-level input `a` (net 2) and another ALU54B `up` driving net 3 from `R0`.
    fn codes(cin: &str) -> Vec<(String, String)> {
        let text = format!(
            r#"{{"modules": {{"top": {{"ports": {{"a": {{"direction": "input", "bits": [2]}}}}, "cells": {{
                "alu": {{"type": "ALU54B", "port_directions": {{}}, "connections": {{{cin}}}}},
                "up": {{"type": "ALU54B", "port_directions": {{"R0": "output"}}, "connections": {{"R0": [3]}}}}}}}}}}}}"#
        );
        let m = netlist::parse(&text, None).unwrap();
        check(&m, None)
            .into_iter()
            .filter(|f| f.location.cell.as_deref() == Some("alu"))
            .map(|f| (f.code, f.message))
            .collect()
    }

    #[test]
    fn an_alu54b_cascade_input_tied_to_a_constant_or_driven_from_the_fabric_is_an_error() {
        let found = codes(r#""CIN0": ["0"]"#);
        assert_eq!(found[0].0, "DSP_CASCADE_INPUT", "{found:?}");
        assert!(found[0].1.contains("'alu'") && found[0].1.contains("CIN0") && found[0].1.contains("constant"));
        let found = codes(r#""CIN7": [2]"#);
        assert_eq!(found[0].0, "DSP_CASCADE_INPUT", "{found:?}");
        assert!(found[0].1.contains("CIN7") && found[0].1.contains("port"), "{}", found[0].1);
    }

    #[test]
    fn an_unconnected_cascade_input_or_one_from_another_alu54b_is_not_a_cascade_error() {
        for cin in ["", r#""CIN0": [3]"#, r#""CIN0": ["x"]"#] {
            assert!(codes(cin).iter().all(|(c, _)| c != "DSP_CASCADE_INPUT"), "{cin}");
        }
    }
}
