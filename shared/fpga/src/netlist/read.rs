//! The reading half of the netlist module: walks the yosys JSON once with the [`Scanner`],
//! filling a [`Module`] per candidate top module. Blackbox library modules are skipped as
//! soon as their `blackbox` attribute is seen (yosys writes `attributes` first).

use std::borrow::Cow;

use super::{net_number, Bit, Cell, Connection, Direction, Module, Port};
use crate::budget::Deadline;
use crate::json_scan::{Scan, Scanner};

/// A module that could be the top one.
pub(super) struct Candidate<'a> {
    pub name: Cow<'a, str>,
    /// Has a truthy `top` attribute.
    pub top: bool,
    module: Module<'a>,
}

impl<'a> Candidate<'a> {
    /// The finished module: named without yosys' leading backslash, cells sorted by name.
    pub fn into_module(self) -> Module<'a> {
        let mut m = self.module;
        m.name = match self.name {
            Cow::Borrowed(n) => Cow::Borrowed(n.trim_start_matches('\\')),
            Cow::Owned(n) => Cow::Owned(n.trim_start_matches('\\').to_owned()),
        };
        // Yosys writes cells sorted; checking that first spares the sort its scratch copy.
        if !m.cells.is_sorted_by(|a, b| a.name <= b.name) {
            m.cells.sort_by(|a, b| a.name.cmp(&b.name));
        }
        m
    }
}

/// Reads the document; with `want`, modules of other names are only checked, not read.
/// Stops with an error once `deadline` has passed (the caller tells that error apart).
pub(super) fn document<'a>(text: &'a str, want: Option<&str>, deadline: &Deadline) -> Scan<Vec<Candidate<'a>>> {
    let mut s = Scanner::new(text);
    let mut modules = None;
    s.object(|s, key| {
        if key != "modules" {
            return s.skip().map(drop);
        }
        if modules.is_some() {
            return s.error("duplicate field `modules`");
        }
        let mut found = Vec::new();
        maybe_object(s, |s, name| {
            if want.is_some_and(|w| name.trim_start_matches('\\') != w) {
                return s.skip().map(drop);
            }
            if let Some(candidate) = module(s, name, deadline)? {
                found.push(candidate);
            }
            Ok(())
        })?;
        modules = Some(found);
        Ok(())
    })?;
    s.finish()?;
    match modules {
        Some(m) => Ok(m),
        None => s.error("missing field `modules`"),
    }
}

/// An object, or `null` read as an empty one.
fn maybe_object<'a>(s: &mut Scanner<'a>, field: impl FnMut(&mut Scanner<'a>, Cow<'a, str>) -> Scan<()>) -> Scan<()> {
    if s.null() {
        return Ok(());
    }
    s.object(field)
}

/// One module, or `None` for a blackbox.
fn module<'a>(s: &mut Scanner<'a>, name: Cow<'a, str>, deadline: &Deadline) -> Scan<Option<Candidate<'a>>> {
    if deadline.passed() {
        return s.error("the time budget ran out");
    }
    let mut m = Module {
        name: Cow::Borrowed(""),
        ports: Vec::new(),
        cells: Vec::new(),
        connections: Vec::new(),
        bits: Vec::new(),
        netnames: "",
    };
    let (mut top, mut blackbox) = (None, None);
    let mut outputs = Vec::new();
    s.object(|s, key| match key.as_ref() {
        _ if blackbox == Some(true) => s.skip().map(drop),
        "attributes" => maybe_object(s, |s, key| match key.as_ref() {
            "top" if top.is_none() => truthy(s).map(|t| top = Some(t)),
            "blackbox" if blackbox.is_none() => truthy(s).map(|b| blackbox = Some(b)),
            _ => s.skip().map(drop),
        }),
        "ports" => maybe_object(s, |s, name| {
            if deadline.passed() {
                return s.error("the time budget ran out");
            }
            port(s, name).map(|p| m.ports.push(p))
        }),
        "cells" => maybe_object(s, |s, name| {
            if deadline.passed() {
                return s.error("the time budget ran out");
            }
            cell(s, name, &mut m, &mut outputs)
        }),
        "netnames" => {
            if s.null() {
                return Ok(());
            }
            if s.peek() != Some(b'{') {
                return s.error("`netnames` must be an object");
            }
            m.netnames = s.skip()?;
            Ok(())
        }
        _ => s.skip().map(drop),
    })?;
    if blackbox == Some(true) {
        return Ok(None);
    }
    Ok(Some(Candidate { name, top: top == Some(true), module: m }))
}

/// A yosys attribute as a flag: a bit string with a one in it, a non-zero number, or `true`.
fn truthy(s: &mut Scanner<'_>) -> Scan<bool> {
    Ok(match s.peek() {
        Some(b'"') => s.string()?.bytes().any(|c| c != b'0'),
        Some(b'-' | b'0'..=b'9') => s.number()?.parse::<u64>().is_ok_and(|n| n != 0),
        Some(b't') => s.skip().map(|_| true)?,
        _ => s.skip().map(|_| false)?,
    })
}

/// The fields ports and netnames share (`bits`, `offset`, `upto`); `other` reads the rest.
/// Returns whether `bits` was present.
pub(super) fn port_fields<'a>(
    s: &mut Scanner<'a>,
    bits: &mut Vec<Bit>,
    offset: &mut i64,
    upto: &mut bool,
    other: &mut dyn FnMut(Cow<'a, str>, &mut Scanner<'a>) -> Scan<()>,
) -> Scan<bool> {
    let mut has_bits = false;
    let int = |s: &mut Scanner<'a>| -> Scan<i64> {
        match s.peek() {
            Some(b'-' | b'0'..=b'9') => Ok(s.number()?.parse().unwrap_or(0)),
            _ => s.skip().map(|_| 0),
        }
    };
    s.object(|s, key| match key.as_ref() {
        "bits" => {
            has_bits = true;
            bits.clear();
            bit_array(s, bits)
        }
        "offset" => int(s).map(|v| *offset = v),
        "upto" => int(s).map(|v| *upto = v != 0),
        _ => other(key, s),
    })?;
    Ok(has_bits)
}

fn port<'a>(s: &mut Scanner<'a>, name: Cow<'a, str>) -> Scan<Port<'a>> {
    let (mut bits, mut offset, mut upto) = (Vec::new(), 0, false);
    let mut direction = None;
    let has_bits = port_fields(s, &mut bits, &mut offset, &mut upto, &mut |key, s| {
        if key != "direction" {
            return s.skip().map(drop);
        }
        direction = Some(match s.string()?.as_ref() {
            "input" => Direction::Input,
            "output" => Direction::Output,
            "inout" => Direction::Inout,
            other => return s.error(format!("port `{name}` has direction {other:?}")),
        });
        Ok(())
    })?;
    match (direction, has_bits) {
        (Some(direction), true) => Ok(Port { name, direction, bits, offset, upto }),
        _ => s.error(format!("port `{name}` needs a direction and bits")),
    }
}

fn bit_array(s: &mut Scanner<'_>, out: &mut Vec<Bit>) -> Scan<()> {
    s.array(|s| {
        let bit = if s.peek() == Some(b'"') {
            match s.string()?.as_ref() {
                "0" => Bit::Zero,
                "1" => Bit::One,
                "x" | "z" => Bit::Undriven,
                other => return s.error(format!("bit {other:?} is neither a net number nor 0/1/x/z")),
            }
        } else if let Some(n) = s.small_unsigned() {
            Bit::Net(n)
        } else {
            let text = s.number()?;
            Bit::Net(net_number(s, text)?)
        };
        out.push(bit);
        Ok(())
    })
}

/// One cell; `outputs` is scratch space for its output port names.
fn cell<'a>(s: &mut Scanner<'a>, name: Cow<'a, str>, m: &mut Module<'a>, outputs: &mut Vec<Cow<'a, str>>) -> Scan<()> {
    let first = m.connections.len();
    let (mut cell_type, mut parameters, mut attributes) = (None, "", "");
    outputs.clear();
    s.object(|s, key| match key.as_ref() {
        "type" => s.string().map(|t| cell_type = Some(t)),
        "parameters" => {
            if !s.null() {
                if s.peek() != Some(b'{') {
                    return s.error("`parameters` must be an object");
                }
                parameters = s.skip()?;
            }
            Ok(())
        }
        "attributes" => {
            if !s.null() {
                if s.peek() != Some(b'{') {
                    return s.error("`attributes` must be an object");
                }
                attributes = s.skip()?;
            }
            Ok(())
        }
        "port_directions" => maybe_object(s, |s, port| {
            if s.string()? == "output" {
                outputs.push(port);
            }
            Ok(())
        }),
        "connections" => maybe_object(s, |s, port| {
            let start = m.bits.len() as u32;
            bit_array(s, &mut m.bits)?;
            let bits = start..m.bits.len() as u32;
            m.connections.push(Connection { port, output: false, bits });
            Ok(())
        }),
        _ => s.skip().map(drop),
    })?;
    let Some(cell_type) = cell_type else {
        return s.error(format!("cell `{name}` has no type"));
    };
    let own = &mut m.connections[first..];
    own.sort_by(|a, b| a.port.cmp(&b.port));
    outputs.sort_unstable();
    for c in own.iter_mut() {
        c.output = outputs.binary_search(&c.port).is_ok();
    }
    let connections = first as u32..m.connections.len() as u32;
    m.cells.push(Cell { name, cell_type, parameters, attributes, connections });
    Ok(())
}
