//! The top-level port bits, numbered densely and named as nextpnr-ecp5 names their IO cells
//! (`clk`, `led[0]`), without spelling out a name per bit: a port's name is stored once, so a
//! long-named wide bus costs its bits, not its bits times its name.

use std::collections::HashMap;

use crate::netlist::{Bit, Direction, Module};
use crate::report::short_name;

/// Every top-level port bit of a module; a bit is its number, `0..len()`, in port order.
pub(crate) struct PortBits<'m, 'a> {
    module: &'m Module<'a>,
    /// The number of each port's first bit.
    starts: Vec<usize>,
    /// Ports by name (the first of two with one name).
    by_name: HashMap<&'m str, usize>,
    len: usize,
}

impl<'m, 'a> PortBits<'m, 'a> {
    pub fn new(module: &'m Module<'a>) -> Self {
        let mut starts = Vec::with_capacity(module.ports.len());
        let mut by_name = HashMap::with_capacity(module.ports.len());
        let mut len = 0;
        for (p, port) in module.ports.iter().enumerate() {
            starts.push(len);
            by_name.entry(port.name.as_ref()).or_insert(p);
            len += port.bits.len();
        }
        PortBits { module, starts, by_name, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The port and the bit's position in it.
    fn locate(&self, bit: usize) -> (usize, usize) {
        let p = self.starts.partition_point(|&s| s <= bit) - 1;
        (p, bit - self.starts[p])
    }

    /// The bit's net or constant.
    pub fn bit(&self, bit: usize) -> Bit {
        let (p, i) = self.locate(bit);
        self.module.ports[p].bits[i]
    }

    pub fn direction(&self, bit: usize) -> Direction {
        self.module.ports[self.locate(bit).0].direction
    }

    /// The bus index nextpnr gives position `i` of a port: `None` for a one-bit port.
    fn index(&self, p: usize, i: usize) -> Option<i64> {
        let port = &self.module.ports[p];
        let n = port.bits.len() as i64;
        (n != 1).then(|| if port.upto { port.offset + n - 1 - i as i64 } else { port.offset + i as i64 })
    }

    /// The bit spelt `text` as nextpnr spells it: a one-bit port's name, or `bus[i]`.
    pub fn lookup(&self, text: &str) -> Option<usize> {
        if let Some(&p) = self.by_name.get(text) {
            if self.module.ports[p].bits.len() == 1 {
                return Some(self.starts[p]);
            }
        }
        let (base, digits) = text.strip_suffix(']')?.rsplit_once('[')?;
        let index = digits.parse::<i64>().ok().filter(|i| i.to_string() == digits)?;
        let &p = self.by_name.get(base)?;
        let port = &self.module.ports[p];
        let n = port.bits.len() as i64;
        if n < 2 {
            return None;
        }
        let pos = if port.upto { port.offset + n - 1 - index } else { index - port.offset };
        (0..n).contains(&pos).then(|| self.starts[p] + pos as usize)
    }

    /// The bit's name for a finding, a long port name shortened.
    pub fn display(&self, bit: usize) -> String {
        let (p, i) = self.locate(bit);
        let name = short_name(&self.module.ports[p].name);
        match self.index(p, i) {
            Some(index) => format!("{name}[{index}]"),
            None => name.into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlist;

    #[test]
    fn bits_are_named_and_found_as_nextpnr_names_them() {
        let text = r#"{"modules": {"top": {"ports": {
            "clk": {"direction": "input", "bits": [2]},
            "led": {"direction": "output", "bits": [3, 4, 5], "offset": 4},
            "up": {"direction": "output", "bits": [6, 7], "upto": 1}
        }, "cells": {}}}}"#;
        let m = netlist::parse(text, None).unwrap();
        let bits = PortBits::new(&m);
        let names: Vec<String> = (0..bits.len()).map(|b| bits.display(b)).collect();
        assert_eq!(names, ["clk", "led[4]", "led[5]", "led[6]", "up[1]", "up[0]"]);
        for (b, name) in names.iter().enumerate() {
            assert_eq!(bits.lookup(name), Some(b), "{name}");
        }
        assert_eq!(bits.lookup("led[3]"), None);
        assert_eq!(bits.lookup("led[05]"), None);
        assert_eq!(bits.lookup("clk[0]"), None);
        assert_eq!(bits.bit(2), Bit::Net(4));
    }
}
