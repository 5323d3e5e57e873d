//! Builds the constraint checks' [`Design`] view from the already-parsed top [`Module`]: its IO
//! bits named as nextpnr names them, and its PLL cells. The top module was chosen by
//! [`crate::netlist::parse`]; nothing here reads the JSON again except the few PLL parameters
//! and net names, which the module keeps as raw text.

use crate::constraints::Design;
use crate::netlist::{bit_names, Bit, Module, Param};
use crate::pll::{param_u32, Pll};

/// Reads the design view from the parsed top module.
pub(crate) fn design_view(module: &Module<'_>) -> Design {
    let mut io_bits = Vec::new();
    let mut bit_names_by_net: Vec<(Bit, String)> = Vec::new();
    for p in &module.ports {
        for (bit, name) in bit_names(&p.name, &p.bits, p.offset, p.upto) {
            io_bits.push(name.clone());
            bit_names_by_net.push((bit, name));
        }
    }
    let mut plls = Vec::new();
    for c in module.cells.iter().filter(|c| c.cell_type.starts_with("SB_PLL40_")) {
        let net = |pin: &str| match module.bit(c, pin) {
            Some(Bit::Net(n)) => Some(n),
            _ => None,
        };
        let param = |name: &str| module.parameter(c, name).as_ref().and_then(param_u32).unwrap_or(0);
        let feedback = match module.parameter(c, "FEEDBACK_PATH") {
            Some(Param::Text(t)) => t.trim_end().to_owned(),
            _ => "SIMPLE".to_owned(),
        };
        plls.push(Pll {
            cell: c.name.clone().into_owned(),
            cell_type: c.cell_type.clone().into_owned(),
            pad_port: net("PACKAGEPIN")
                .and_then(|id| bit_names_by_net.iter().find(|(b, _)| *b == Bit::Net(id)).map(|(_, n)| n.clone())),
            reference_net: net("REFERENCECLK").and_then(|id| module.net_name(id)),
            divr: param("DIVR"),
            divf: param("DIVF"),
            divq: param("DIVQ"),
            filter_range: param("FILTER_RANGE"),
            feedback_path: feedback,
        });
    }
    Design { io_bits, plls }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlist::parse;

    #[test]
    fn bus_ports_become_one_io_bit_each_and_the_top_attribute_wins() {
        let netlist = r#"{"modules": {
            "SB_IO": {"attributes": {"blackbox": "1"}, "ports": {}},
            "top": {"attributes": {"top": "00000000000000000000000000000001"}, "ports": {
                "clk": {"direction": "input", "bits": [2]},
                "led": {"direction": "output", "bits": [3, 4], "offset": 1},
                "down": {"direction": "output", "bits": [5, 6], "upto": 1}
            }}
        }}"#;
        let design = design_view(&parse(netlist, None).unwrap());
        assert_eq!(design.io_bits, vec!["clk", "led[1]", "led[2]", "down[1]", "down[0]"]);
    }

    #[test]
    fn a_pad_pll_knows_its_package_pin_port_and_dividers() {
        let netlist = r#"{"modules": {"top": {"ports": {"clk": {"direction": "input", "bits": [2]}}, "cells": {
            "pll": {"type": "SB_PLL40_PAD", "parameters": {"DIVF": "0111111", "DIVQ": "100", "DIVR": "0000", "FEEDBACK_PATH": "DELAY ", "FILTER_RANGE": "001"},
                    "connections": {"PACKAGEPIN": [2]}}
        }}}}"#;
        let pll = &design_view(&parse(netlist, None).unwrap()).plls[0];
        assert_eq!((pll.pad_port.as_deref(), pll.divf, pll.divq, pll.filter_range), (Some("clk"), 63, 4, 1));
        assert_eq!(pll.feedback_path, "DELAY");
    }

    #[test]
    fn a_core_pll_names_its_reference_net_from_netnames() {
        let netlist = r#"{"modules": {"top": {"ports": {}, "cells": {
            "pll": {"type": "SB_PLL40_CORE", "parameters": {"DIVF": 3}, "connections": {"REFERENCECLK": [7]}}},
            "netnames": {"osc": {"bits": [7]}}}}}"#;
        let pll = &design_view(&parse(netlist, None).unwrap()).plls[0];
        assert_eq!((pll.reference_net.as_deref(), pll.divf, pll.feedback_path.as_str()), (Some("osc"), 3, "SIMPLE"));
    }
}
