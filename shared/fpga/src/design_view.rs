//! Builds the constraint checks' [`Design`] view from a yosys JSON netlist: the top module's IO
//! bits named as nextpnr names them, and its PLL cells.
//!
//! Top selection follows nextpnr's JSON frontend: the requested top, else the module with the
//! `top` attribute, else the only non-blackbox module.

use serde_json::Value;

use crate::constraints::Design;
use crate::pll::{param_u32, Pll};

/// Why no design view could be built; `code` is the finding code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ViewError {
    pub code: &'static str,
    pub message: String,
}

/// Reads the design view from parsed yosys JSON.
pub(crate) fn design_view(json: &Value, top: Option<&str>) -> Result<Design, ViewError> {
    let modules = json.get("modules").and_then(Value::as_object).ok_or_else(|| ViewError {
        code: "NETLIST_INVALID",
        message: "the netlist has no \"modules\" object; is it yosys write_json output?".to_owned(),
    })?;
    let flag = |m: &Value, attr: &str| m.pointer(&format!("/attributes/{attr}")).and_then(param_u32).is_some_and(|v| v != 0);
    let (_, module) = match top {
        Some(t) => modules.get_key_value(t).ok_or_else(|| ViewError {
            code: "TOP_NOT_FOUND",
            message: format!("the netlist has no module '{t}'"),
        })?,
        None => {
            let tops: Vec<_> = modules.iter().filter(|(_, m)| flag(m, "top")).collect();
            let candidates: Vec<_> = modules.iter().filter(|(_, m)| !flag(m, "blackbox")).collect();
            match (tops.as_slice(), candidates.as_slice()) {
                ([only], _) | ([], [only]) => *only,
                _ => {
                    return Err(ViewError {
                        code: "TOP_NOT_FOUND",
                        message: "cannot tell the top module: none has the top attribute; name it explicitly".to_owned(),
                    })
                }
            }
        }
    };
    let mut io_bits = Vec::new();
    let mut bit_names: Vec<(u64, String)> = Vec::new();
    for (port, p) in module.get("ports").and_then(Value::as_object).into_iter().flatten() {
        for (bit, name) in bit_names_of(port, p) {
            if let Some(id) = bit {
                bit_names.push((id, name.clone()));
            }
            io_bits.push(name);
        }
    }
    let net_name = |id: u64| -> Option<String> {
        let nets = module.get("netnames").and_then(Value::as_object)?;
        nets.iter().find_map(|(n, net)| bit_names_of(n, net).into_iter().find(|(b, _)| *b == Some(id)).map(|(_, name)| name))
    };
    let mut plls = Vec::new();
    for (cell, c) in module.get("cells").and_then(Value::as_object).into_iter().flatten() {
        let cell_type = c.get("type").and_then(Value::as_str).unwrap_or_default();
        if !cell_type.starts_with("SB_PLL40_") {
            continue;
        }
        let connected = |pin: &str| c.pointer(&format!("/connections/{pin}/0")).and_then(Value::as_u64);
        let param = |name: &str| c.pointer(&format!("/parameters/{name}")).and_then(param_u32).unwrap_or(0);
        let feedback = c.pointer("/parameters/FEEDBACK_PATH").and_then(Value::as_str).map_or("SIMPLE", str::trim_end);
        plls.push(Pll {
            cell: cell.clone(),
            cell_type: cell_type.to_owned(),
            pad_port: connected("PACKAGEPIN").and_then(|id| bit_names.iter().find(|(b, _)| *b == id).map(|(_, n)| n.clone())),
            reference_net: connected("REFERENCECLK").and_then(net_name),
            divr: param("DIVR"),
            divf: param("DIVF"),
            divq: param("DIVQ"),
            filter_range: param("FILTER_RANGE"),
            feedback_path: feedback.to_owned(),
        });
    }
    Ok(Design { io_bits, plls })
}

/// The bits of a port or net, each named as nextpnr does: the bare name for one bit, else
/// `name[i]` counting from the `offset` attribute, downwards when `upto` is set.
fn bit_names_of(name: &str, item: &Value) -> Vec<(Option<u64>, String)> {
    let bits = item.get("bits").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let offset = item.get("offset").and_then(Value::as_i64).unwrap_or(0);
    let upto = item.get("upto").and_then(Value::as_i64).unwrap_or(0) != 0;
    let n = bits.len() as i64;
    bits.iter()
        .enumerate()
        .map(|(i, bit)| {
            let index = if upto { offset + n - 1 - i as i64 } else { offset + i as i64 };
            let label = if n == 1 { name.to_owned() } else { format!("{name}[{index}]") };
            (bit.as_u64(), label)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bus_ports_become_one_io_bit_each_and_the_top_attribute_wins() {
        let netlist = json!({"modules": {
            "SB_IO": {"attributes": {"blackbox": "1"}, "ports": {}},
            "top": {"attributes": {"top": "00000000000000000000000000000001"}, "ports": {
                "clk": {"direction": "input", "bits": [2]},
                "led": {"direction": "output", "bits": [3, 4], "offset": 1}
            }}
        }});
        let design = design_view(&netlist, None).unwrap();
        assert_eq!(design.io_bits, vec!["clk", "led[1]", "led[2]"]);
    }

    #[test]
    fn a_missing_top_module_is_top_not_found() {
        let err = design_view(&json!({"modules": {"top": {}}}), Some("nottop")).unwrap_err();
        assert_eq!(err.code, "TOP_NOT_FOUND");
    }

    #[test]
    fn json_without_modules_is_an_invalid_netlist() {
        assert_eq!(design_view(&json!([1, 2]), None).unwrap_err().code, "NETLIST_INVALID");
    }

    #[test]
    fn a_pad_pll_knows_its_package_pin_port_and_dividers() {
        let netlist = json!({"modules": {"top": {"ports": {"clk": {"direction": "input", "bits": [2]}}, "cells": {
            "pll": {"type": "SB_PLL40_PAD", "parameters": {"DIVF": "0111111", "DIVQ": "100", "DIVR": "0000", "FEEDBACK_PATH": "SIMPLE", "FILTER_RANGE": "001"},
                    "connections": {"PACKAGEPIN": [2]}}
        }}}});
        let pll = &design_view(&netlist, None).unwrap().plls[0];
        assert_eq!((pll.pad_port.as_deref(), pll.divf, pll.divq, pll.filter_range), (Some("clk"), 63, 4, 1));
    }
}
