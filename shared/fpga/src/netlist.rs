//! Yosys `write_json` netlists: the top module's ports and cells, read once and borrowed from
//! the input text.
//!
//! Parsing is total: any input yields either a [`Module`] or a [`NetlistError`] that becomes a
//! `NETLIST_INVALID` or `TOP_NOT_FOUND` finding. This is the one place that picks the top
//! module; the packer and the constraint checks both work from the [`Module`] it returns.
//!
//! Cells and each cell's connections are sorted by name: nextpnr-ice40 0.4 reads JSON objects
//! into sorted maps and its packer visits cells in that order, and some of its choices (which
//! LC a carry joins) depend on it. Cell parameters and the module's `netnames` are kept as raw
//! JSON text and only read for the few cells (PLLs) that need them; `attributes` and `src`
//! strings are skipped (checked, never stored).

use std::borrow::Cow;
use std::ops::Range;

use crate::budget::{Deadline, BUDGET_EXCEEDED};
use crate::json_scan::{Scan, ScanError, Scanner};

mod read;

/// One bit of a port or connection: a net number or a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bit {
    Net(u32),
    Zero,
    One,
    /// `x` or `z`: undriven.
    Undriven,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Input,
    Output,
    Inout,
}

/// A top-level port; each bit becomes an IO pad unless an `SB_IO` already owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port<'a> {
    pub name: Cow<'a, str>,
    pub direction: Direction,
    pub bits: Vec<Bit>,
    /// Index of the first bit (yosys `offset`), for naming bits as nextpnr does.
    pub offset: i64,
    /// Bits are numbered downwards (yosys `upto`).
    pub upto: bool,
}

/// A cell instance. Its connections live in the [`Module`]; read them with [`Module::port`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell<'a> {
    pub name: Cow<'a, str>,
    pub cell_type: Cow<'a, str>,
    /// The `parameters` object as JSON text (checked while parsing), read on demand.
    parameters: &'a str,
    /// The `attributes` object as JSON text (checked while parsing), read on demand.
    attributes: &'a str,
    /// This cell's entries in [`Module::connections`], sorted by port name.
    connections: Range<u32>,
}

/// One connected cell port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection<'a> {
    pub port: Cow<'a, str>,
    /// Yosys marked the port `output` in `port_directions`.
    pub output: bool,
    bits: Range<u32>,
}

/// A parameter value as yosys writes it: a string (bit string or text) or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param<'a> {
    Text(Cow<'a, str>),
    /// The number's JSON text.
    Number(&'a str),
    /// `true`, `false`, `null`, an array or an object.
    Other,
}

/// The top module after blackbox library modules have been set aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module<'a> {
    pub name: Cow<'a, str>,
    pub ports: Vec<Port<'a>>,
    pub cells: Vec<Cell<'a>>,
    /// Every cell's connections, back to back (one allocation instead of one per cell).
    connections: Vec<Connection<'a>>,
    /// Every connection's bits, back to back.
    bits: Vec<Bit>,
    /// The `netnames` object as JSON text, read (once) only to name PLLs' reference nets.
    netnames: &'a str,
}

/// Why a netlist could not be read; `code` is the finding code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetlistError {
    pub code: &'static str,
    pub message: String,
    /// 1-based line of a JSON syntax error.
    pub line: Option<u32>,
}

impl<'a> Module<'a> {
    /// A cell's connections, sorted by port name.
    pub fn connections(&self, cell: &Cell<'a>) -> &[Connection<'a>] {
        &self.connections[cell.connections.start as usize..cell.connections.end as usize]
    }

    /// The bits of one connection.
    pub fn bits(&self, connection: &Connection<'a>) -> &[Bit] {
        &self.bits[connection.bits.start as usize..connection.bits.end as usize]
    }

    /// The bits on a cell's port, or an empty slice when the port is not connected.
    pub fn port(&self, cell: &Cell<'a>, name: &str) -> &[Bit] {
        let conns = self.connections(cell);
        match conns.binary_search_by(|c| c.port.as_ref().cmp(name)) {
            Ok(i) => self.bits(&conns[i]),
            Err(_) => &[],
        }
    }

    /// The single bit on a one-bit port.
    pub fn bit(&self, cell: &Cell<'a>, name: &str) -> Option<Bit> {
        self.port(cell, name).first().copied()
    }

    /// Whether yosys marked the cell's port as an output.
    pub fn is_output(&self, cell: &Cell<'a>, port: &str) -> bool {
        self.connections(cell).iter().any(|c| c.output && c.port == port)
    }

    /// Every bit of every connection of every cell.
    pub fn all_cell_bits(&self) -> &[Bit] {
        &self.bits
    }

    /// A cell parameter, read from the raw `parameters` text.
    pub fn parameter(&self, cell: &Cell<'a>, name: &str) -> Option<Param<'a>> {
        Self::entry(cell.parameters, name)
    }

    /// A cell attribute (`ROUTE_THROUGH_FABRIC`, …), read from the raw `attributes` text.
    pub fn attribute(&self, cell: &Cell<'a>, name: &str) -> Option<Param<'a>> {
        Self::entry(cell.attributes, name)
    }

    /// One entry of a cell's `parameters` or `attributes` object text.
    fn entry(text: &'a str, name: &str) -> Option<Param<'a>> {
        let mut found = None;
        let mut s = Scanner::new(text);
        if text.is_empty() || s.null() {
            return None;
        }
        let ok = s.object(|s, key| {
            if key == name && found.is_none() {
                found = Some(match s.peek() {
                    Some(b'"') => Param::Text(s.string()?),
                    Some(b'-' | b'0'..=b'9') => Param::Number(s.number()?),
                    _ => s.skip().map(|_| Param::Other)?,
                });
                Ok(())
            } else {
                s.skip().map(drop)
            }
        });
        ok.ok().and(found)
    }

    /// Reads `netnames` once, calling `visit` with each entry's name, bits, offset and `upto`.
    /// Entries that are not well formed end the walk (the netlist is otherwise valid: this
    /// text was checked while parsing).
    pub fn each_net_name(&self, mut visit: impl FnMut(Cow<'a, str>, &[Bit], i64, bool)) {
        let mut s = Scanner::new(self.netnames);
        if self.netnames.is_empty() || s.null() {
            return;
        }
        let mut bits = Vec::new();
        let _ = s.object(|s, name| {
            let (mut offset, mut upto) = (0, false);
            bits.clear();
            read::port_fields(s, &mut bits, &mut offset, &mut upto, &mut |_, s| s.skip().map(drop))?;
            visit(name, &bits, offset, upto);
            Ok(())
        });
    }
}

/// The bits of a port or net, each named as nextpnr does: the bare name for one bit, else
/// `name[i]` counting from `offset`, downwards when `upto` is set.
pub fn bit_names(name: &str, bits: &[Bit], offset: i64, upto: bool) -> Vec<(Bit, String)> {
    let n = bits.len() as i64;
    bits.iter()
        .enumerate()
        .map(|(i, bit)| {
            let index = if upto { offset + n - 1 - i as i64 } else { offset + i as i64 };
            let label = if n == 1 { name.to_owned() } else { format!("{name}[{index}]") };
            (*bit, label)
        })
        .collect()
}

/// Parses yosys JSON and picks the top module: `top` if given, else the module with the `top`
/// attribute, else the only module that is not a blackbox.
pub fn parse<'a>(text: &'a str, top: Option<&str>) -> Result<Module<'a>, NetlistError> {
    parse_within(text, top, &Deadline::default())
}

/// [`parse`], stopping with a `VALIDATION_BUDGET_EXCEEDED` error once `deadline` has passed
/// (looked at per module, port and cell).
pub(crate) fn parse_within<'a>(
    text: &'a str,
    top: Option<&str>,
    deadline: &Deadline,
) -> Result<Module<'a>, NetlistError> {
    let want = top.map(|t| t.trim_start_matches('\\'));
    let syntax = |e: ScanError| match deadline.passed() {
        true => NetlistError { code: BUDGET_EXCEEDED, message: "the time budget ran out".to_owned(), line: None },
        false => NetlistError {
            code: "NETLIST_INVALID",
            message: format!("the netlist is not yosys JSON: {} (byte {})", e.message, e.offset),
            line: Some(e.line(text)),
        },
    };
    let mut real = read::document(text, want, deadline).map_err(syntax)?;
    let index = match want {
        Some(want) => {
            real.iter().position(|m| m.name.trim_start_matches('\\') == want).ok_or_else(|| NetlistError {
                code: "TOP_NOT_FOUND",
                message: format!("the netlist has no module named `{want}`"),
                line: None,
            })?
        }
        None => {
            let marked: Vec<usize> = (0..real.len()).filter(|i| real[*i].top).collect();
            match (marked.as_slice(), real.len()) {
                ([one], _) => *one,
                ([], 1) => 0,
                _ => {
                    return Err(NetlistError {
                        code: "TOP_NOT_FOUND",
                        message: format!(
                            "cannot tell the top module: {} candidate modules and {} marked `top`; name one",
                            real.len(),
                            marked.len()
                        ),
                        line: None,
                    })
                }
            }
        }
    };
    Ok(real.swap_remove(index).into_module())
}

/// Reads an unsigned net number from a JSON number's text.
fn net_number(s: &Scanner<'_>, text: &str) -> Scan<u32> {
    match text.parse::<u32>() {
        Ok(n) => Ok(n),
        Err(_) => s.error(format!("net number {text} is not an unsigned 32-bit integer")),
    }
}

#[cfg(test)]
mod tests;
