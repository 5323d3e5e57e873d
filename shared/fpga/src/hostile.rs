//! Netlists built to be slow: the shapes a hostile tenant would try against a validator with a
//! superlinear path, each sized to a byte target. Used by `tests/hostile_netlists.rs` and
//! `examples/hostile.rs` (the benchmark); compiled only with the `hostile` feature, which the
//! crate's own tests and examples turn on and no shipped build does.

use std::fmt::Write;

/// One generated design: netlist text and PCF text.
pub struct Design {
    pub netlist: String,
    pub pcf: String,
}

fn module(ports: &str, cells: &str, netnames: &str) -> String {
    format!(
        r#"{{"modules": {{"top": {{"attributes": {{"top": "1"}}, "ports": {{{ports}}}, "cells": {{{cells}}}, "netnames": {{{netnames}}}}}}}}}"#
    )
}

fn bits(from: u32, n: u32) -> String {
    let mut s = String::new();
    for i in 0..n {
        let _ = write!(s, "{}{}", if i == 0 { "" } else { "," }, from + i);
    }
    s
}

/// Core PLLs, each on its own reference net, and one netname with many bits: the product of
/// the two is what the validator once paid (finding 4: 837 KB, 149 s of CPU).
pub fn pll_netnames(bytes: usize) -> Design {
    let (plls, named) = ((bytes / 260) as u32, (bytes / 16) as u32);
    let mut cells = String::new();
    for i in 0..plls {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            cells,
            r#"{sep}"p{i}": {{"type": "SB_PLL40_CORE", "parameters": {{"DIVF": 3}}, "connections": {{"REFERENCECLK": [{}]}}}}"#,
            10 + i
        );
    }
    let netnames = format!(r#""n": {{"bits": [{}]}}"#, bits(10 + plls, named));
    Design { netlist: module("", &cells, &netnames), pcf: String::new() }
}

/// `n` PAD PLLs, each reading one bit of a wide port.
pub fn pll_pads(bytes: usize) -> Design {
    let n = (bytes / 160) as u32;
    let mut cells = String::new();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            cells,
            r#"{sep}"p{i}": {{"type": "SB_PLL40_PAD", "parameters": {{}}, "connections": {{"PACKAGEPIN": [{}]}}}}"#,
            10 + n + i
        );
    }
    let ports = format!(r#""wide": {{"direction": "input", "bits": [{}]}}"#, bits(10, 2 * n));
    Design { netlist: module(&ports, &cells, ""), pcf: String::new() }
}

/// One port with a name as long as its bit list, no constraints: one finding per bit, each
/// naming the port.
pub fn long_named_bus(bytes: usize) -> Design {
    let n = (bytes / 14) as u32;
    let name = "w".repeat(bytes / 2);
    let ports = format!(r#""{name}": {{"direction": "input", "bits": [{}]}}"#, bits(1_000_000, n));
    Design { netlist: module(&ports, "", ""), pcf: String::new() }
}

/// Many PLLs on one reference net and a PCF with as many `set_frequency` lines.
pub fn pll_frequencies(bytes: usize) -> Design {
    let n = (bytes / 250) as u32;
    let mut cells = String::new();
    let mut pcf = String::new();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            cells,
            r#"{sep}"p{i}": {{"type": "SB_PLL40_CORE", "parameters": {{"DIVQ": 1}}, "connections": {{"REFERENCECLK": [7]}}}}"#
        );
        let _ = writeln!(pcf, "set_frequency f{i} 12");
    }
    let _ = writeln!(pcf, "set_frequency osc 12");
    Design { netlist: module("", &cells, r#""osc": {"bits": [7]}"#), pcf }
}

/// One cell with many connections, every one an output.
pub fn many_outputs(bytes: usize) -> Design {
    let n = (bytes / 40) as u32;
    let (mut dirs, mut conns) = (String::new(), String::new());
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(dirs, r#"{sep}"o{i}": "output""#);
        let _ = write!(conns, r#"{sep}"o{i}": [{}]"#, 10 + i);
    }
    let cells = format!(r#""c": {{"type": "SB_LUT4", "port_directions": {{{dirs}}}, "connections": {{{conns}}}}}"#);
    Design { netlist: module("", &cells, ""), pcf: String::new() }
}

/// A long chain of LUTs and flip-flops, every flip-flop on its own clock.
pub fn many_cells(bytes: usize) -> Design {
    let n = (bytes / 230) as u32;
    let mut cells = String::new();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let (a, q) = (10 + 3 * i, 11 + 3 * i);
        let _ = write!(
            cells,
            r#"{sep}"l{i}": {{"type": "SB_LUT4", "connections": {{"I0": [{a}], "O": [{q}]}}}}, "f{i}": {{"type": "SB_DFF", "connections": {{"C": [{}], "D": [{q}], "Q": [{}]}}}}"#,
            12 + 3 * i,
            13 + 3 * i
        );
    }
    Design { netlist: module("", &cells, ""), pcf: String::new() }
}

/// One long carry chain.
pub fn carry_chain(bytes: usize) -> Design {
    let n = (bytes / 110) as u32;
    let mut cells = String::new();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            cells,
            r#"{sep}"c{i:07}": {{"type": "SB_CARRY", "connections": {{"CI": [{}], "CO": [{}], "I0": [3], "I1": [4]}}}}"#,
            10 + i,
            11 + i
        );
    }
    Design { netlist: module("", &cells, ""), pcf: String::new() }
}

/// Many carries on one carry-in and one operand net, the other operand constant.
pub fn shared_carry_nets(bytes: usize) -> Design {
    let n = (bytes / 90) as u32;
    let mut cells = String::new();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            cells,
            r#"{sep}"c{i}": {{"type": "SB_CARRY", "connections": {{"CI": [9], "CO": [{}], "I0": [3], "I1": ["0"]}}}}"#,
            10 + i
        );
    }
    Design { netlist: module("", &cells, ""), pcf: String::new() }
}

/// Many one-bit ports and a PCF constraining each to a pin that is already taken.
pub fn huge_pcf(bytes: usize) -> Design {
    let n = (bytes / 60) as u32;
    let mut ports = String::new();
    let mut pcf = String::new();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(ports, r#"{sep}"p{i}": {{"direction": "input", "bits": [{}]}}"#, 10 + i);
        let _ = writeln!(pcf, "set_io p{i} J3");
    }
    Design { netlist: module(&ports, "", ""), pcf }
}

/// Modules nested in attributes as deep as the scanner allows, many times over.
pub fn deep_nesting(bytes: usize) -> Design {
    let deep = format!("{}{}", "[".repeat(120), "]".repeat(120));
    let n = bytes / (deep.len() + 20);
    let attrs: Vec<String> = (0..n).map(|i| format!(r#""a{i}": {deep}"#)).collect();
    let netlist =
        format!(r#"{{"modules": {{"top": {{"attributes": {{{}}}, "ports": {{}}, "cells": {{}}}}}}}}"#, attrs.join(","));
    Design { netlist, pcf: String::new() }
}

/// A named generator, taking the netlist size to aim for in bytes.
pub type Case = (&'static str, fn(usize) -> Design);

pub const CASES: &[Case] = &[
    ("pll_netnames", pll_netnames),
    ("pll_pads", pll_pads),
    ("long_named_bus", long_named_bus),
    ("pll_frequencies", pll_frequencies),
    ("many_outputs", many_outputs),
    ("many_cells", many_cells),
    ("carry_chain", carry_chain),
    ("shared_carry_nets", shared_carry_nets),
    ("huge_pcf", huge_pcf),
    ("deep_nesting", deep_nesting),
];
