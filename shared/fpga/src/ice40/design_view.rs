//! Builds the constraint checks' [`Design`] view from the already-parsed top [`Module`]: its IO
//! bits named as nextpnr names them, and its PLL cells. The top module was chosen by
//! [`crate::netlist::parse`]; nothing here reads the JSON again except the few PLL parameters
//! and net names, which the module keeps as raw text.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::budget::Deadline;
use crate::constraints::Design;
use crate::netlist::{Bit, Module, Param};
use crate::pll::{param_u32, Pll};
use crate::report::short_name;
use crate::sites::sites_view;
#[cfg(test)]
use crate::sites::Sites;

/// A port or net bit named as nextpnr names it (`name` alone for one bit, else `name[index]`),
/// without building that string: a bus of a long name would otherwise cost its name's length
/// per bit, and comparing names would too. `name` indexes [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BitName {
    pub name: u32,
    /// The bus index; `None` for a one-bit port or net, which nextpnr names bare.
    pub index: Option<i64>,
}

/// The port and net names a design uses, each stored and hashed once.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Names<'a> {
    names: Vec<Cow<'a, str>>,
    ids: HashMap<Cow<'a, str>, u32>,
}

impl<'a> Names<'a> {
    fn intern(&mut self, name: Cow<'a, str>) -> u32 {
        if let Some(id) = self.ids.get(name.as_ref()) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }
}

impl BitName {
    /// Bit `i` of a port or net of `count` bits named `name` (interned), as
    /// [`crate::netlist::bit_names`] spells it.
    pub fn of(name: u32, count: usize, i: usize, offset: i64, upto: bool) -> BitName {
        let n = count as i64;
        let index = if upto { offset + n - 1 - i as i64 } else { offset + i as i64 };
        BitName { name, index: (count != 1).then_some(index) }
    }
}

impl<'a> Names<'a> {
    /// Every bit name that is spelt `text` (a PCF port or net): the name itself, and bit `i` of
    /// a bus when `text` is `bus[i]` with `i` written as nextpnr writes it.
    pub fn lookup(&self, text: &str) -> impl Iterator<Item = BitName> {
        let whole = self.ids.get(text).map(|id| BitName { name: *id, index: None });
        let indexed = text.strip_suffix(']').and_then(|t| t.rsplit_once('[')).and_then(|(base, digits)| {
            let index = digits.parse::<i64>().ok().filter(|i| i.to_string() == digits)?;
            self.ids.get(base).map(|id| BitName { name: *id, index: Some(index) })
        });
        whole.into_iter().chain(indexed)
    }

    /// The bit's name for a finding, with a long name shortened.
    pub fn display(&self, bit: BitName) -> String {
        let name = self.names.get(bit.name as usize).map_or("", |n| n.as_ref());
        let name = short_name(name);
        match bit.index {
            Some(i) => format!("{name}[{i}]"),
            None => name.into_owned(),
        }
    }
}

/// Reads the design view from the parsed top module. Linear in the module's size: port bits
/// are named once, `netnames` is read once and only for the nets PLLs take a reference from.
#[cfg(test)]
pub(crate) fn design_view<'a>(module: &Module<'a>) -> Design<'a> {
    design_view_within(module, &Deadline::default()).expect("no deadline")
}

/// [`design_view`], or `None` once `deadline` has passed: naming millions of port bits takes
/// seconds, which the validation's budget covers like every other stage.
pub(crate) fn design_view_within<'a>(module: &Module<'a>, deadline: &Deadline) -> Option<Design<'a>> {
    let mut names = Names::default();
    let mut io_bits = Vec::new();
    let mut port_bit_of_net: HashMap<Bit, BitName> = HashMap::new();
    let mut port_bits = Vec::new();
    for p in &module.ports {
        // Interned (hashed) once per port, never per bit: names can be as long as the netlist.
        let id = names.intern(p.name.clone());
        for (i, bit) in p.bits.iter().enumerate() {
            if i.is_multiple_of(4096) && deadline.passed() {
                return None;
            }
            let name = BitName::of(id, p.bits.len(), i, p.offset, p.upto);
            io_bits.push(name);
            port_bits.push((*bit, name, p.direction));
            port_bit_of_net.entry(*bit).or_insert(name);
        }
    }
    let plls: Vec<_> = module.cells.iter().filter(|c| c.cell_type.starts_with("SB_PLL40_")).collect();
    let net = |c, pin: &str| match module.bit(c, pin) {
        Some(Bit::Net(n)) => Some(n),
        _ => None,
    };
    let wanted: HashSet<u32> = plls.iter().filter_map(|c| net(c, "REFERENCECLK")).collect();
    let mut net_names: HashMap<u32, BitName> = HashMap::new();
    if !wanted.is_empty() {
        module.each_net_name(|name, bits, offset, upto| {
            let mut id = None;
            for (i, bit) in bits.iter().enumerate() {
                if let Bit::Net(n) = bit {
                    if wanted.contains(n) && !net_names.contains_key(n) {
                        let id = *id.get_or_insert_with(|| names.intern(name.clone()));
                        net_names.insert(*n, BitName::of(id, bits.len(), i, offset, upto));
                    }
                }
            }
        });
    }
    let plls = plls
        .into_iter()
        .map(|c| {
            let param = |name: &str| module.parameter(c, name).as_ref().and_then(param_u32).unwrap_or(0);
            let feedback = match module.parameter(c, "FEEDBACK_PATH") {
                Some(Param::Text(t)) => t.trim_end().to_owned(),
                _ => "SIMPLE".to_owned(),
            };
            Pll {
                cell: c.name.clone().into_owned(),
                cell_type: c.cell_type.clone().into_owned(),
                pad_port: net(c, "PACKAGEPIN").and_then(|id| port_bit_of_net.get(&Bit::Net(id)).copied()),
                reference_net: net(c, "REFERENCECLK").and_then(|id| net_names.get(&id).copied()),
                divr: param("DIVR"),
                divf: param("DIVF"),
                divq: param("DIVQ"),
                filter_range: param("FILTER_RANGE"),
                feedback_path: feedback,
            }
        })
        .collect();
    let sites = sites_view(module, &names, &port_bits, &port_bit_of_net, deadline)?;
    Some(Design { names, io_bits, plls, sites })
}

#[cfg(test)]
impl Design<'static> {
    /// A design whose port bits are spelt as in a PCF: `led[0]` is bit 0 of bus `led`.
    pub fn with_ports(bits: &[&'static str]) -> Self {
        let mut names = Names::default();
        let io_bits = bits
            .iter()
            .map(|b| match b.strip_suffix(']').and_then(|t| t.rsplit_once('[')) {
                Some((base, i)) => BitName { name: names.intern(Cow::Borrowed(base)), index: i.parse().ok() },
                None => BitName { name: names.intern(Cow::Borrowed(*b)), index: None },
            })
            .collect();
        Design { names, io_bits, plls: Vec::new(), sites: Sites::default() }
    }
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
        let names: Vec<_> = design.io_bits.iter().map(|b| design.names.display(*b)).collect();
        assert_eq!(names, vec!["clk", "led[1]", "led[2]", "down[1]", "down[0]"]);
    }

    #[test]
    fn a_pad_pll_knows_its_package_pin_port_and_dividers() {
        let netlist = r#"{"modules": {"top": {"ports": {"clk": {"direction": "input", "bits": [2]}}, "cells": {
            "pll": {"type": "SB_PLL40_PAD", "parameters": {"DIVF": "0111111", "DIVQ": "100", "DIVR": "0000", "FEEDBACK_PATH": "DELAY ", "FILTER_RANGE": "001"},
                    "connections": {"PACKAGEPIN": [2]}}
        }}}}"#;
        let design = design_view(&parse(netlist, None).unwrap());
        let pll = &design.plls[0];
        let pad = pll.pad_port.map(|b| design.names.display(b));
        assert_eq!((pad.as_deref(), pll.divf, pll.divq, pll.filter_range), (Some("clk"), 63, 4, 1));
        assert_eq!(pll.feedback_path, "DELAY");
    }

    #[test]
    fn a_core_pll_names_its_reference_net_from_netnames() {
        let netlist = r#"{"modules": {"top": {"ports": {}, "cells": {
            "pll": {"type": "SB_PLL40_CORE", "parameters": {"DIVF": 3}, "connections": {"REFERENCECLK": [7]}}},
            "netnames": {"bus": {"bits": [5, 6], "offset": 3}, "osc": {"bits": [7]}, "again": {"bits": [7]}}}}}"#;
        let design = design_view(&parse(netlist, None).unwrap());
        let pll = &design.plls[0];
        let reference = pll.reference_net.map(|b| design.names.display(b));
        assert_eq!((reference.as_deref(), pll.divf, pll.feedback_path.as_str()), (Some("osc"), 3, "SIMPLE"));
    }

    #[test]
    fn a_one_bit_port_named_like_a_bus_bit_answers_to_that_name_as_the_bus_bit_does() {
        let netlist = r#"{"modules": {"top": {"ports": {
            "a[1]": {"direction": "input", "bits": [2]},
            "a": {"direction": "input", "bits": [3, 4]}
        }}}}"#;
        let design = design_view(&parse(netlist, None).unwrap());
        let named: Vec<_> = design.names.lookup("a[1]").collect();
        assert_eq!(named.len(), 2);
        assert!(named.iter().all(|b| design.io_bits.contains(b)));
        assert_eq!(design.names.lookup("a").count(), 1);
        assert!(design.names.lookup("a[2]").all(|b| !design.io_bits.contains(&b)), "bus a has bits 0 and 1");
    }

    #[test]
    fn a_pad_pll_on_a_bus_bit_names_that_bit() {
        let netlist = r#"{"modules": {"top": {"ports": {"bus": {"direction": "input", "bits": [2, 3, 4], "upto": 1}}, "cells": {
            "pll": {"type": "SB_PLL40_PAD", "connections": {"PACKAGEPIN": [3]}}}}}}"#;
        let design = design_view(&parse(netlist, None).unwrap());
        assert_eq!(design.plls[0].pad_port.map(|b| design.names.display(b)).as_deref(), Some("bus[1]"));
    }
}
