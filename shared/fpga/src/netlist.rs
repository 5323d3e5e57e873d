//! Yosys `write_json` netlists: the top module's ports and cells, nothing else.
//!
//! Parsing is total: any input yields either a [`Module`] or a [`NetlistError`] that becomes a
//! `NETLIST_INVALID` or `TOP_NOT_FOUND` finding. Cells and connections are sorted by name:
//! nextpnr-ice40 0.4 reads JSON objects into sorted maps and its packer visits cells in that
//! order, and some of its choices (which LC a carry joins) depend on it.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

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
pub struct Port {
    pub name: String,
    pub direction: Direction,
    pub bits: Vec<Bit>,
}

/// A cell instance. `connections` keep the file's order; `outputs` names the ports the cell drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub name: String,
    pub cell_type: String,
    /// Parameters as strings (yosys writes bit strings, numbers or text).
    pub parameters: BTreeMap<String, String>,
    pub connections: Vec<(String, Vec<Bit>)>,
    /// Ports yosys marked `output` in `port_directions`.
    pub outputs: Vec<String>,
}

/// The top module after blackbox library modules have been set aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    pub ports: Vec<Port>,
    pub cells: Vec<Cell>,
}

/// Why a netlist could not be read; `code` is the finding code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetlistError {
    pub code: &'static str,
    pub message: String,
    /// 1-based line of a JSON syntax error.
    pub line: Option<u32>,
}

impl Cell {
    /// The bits on a port, or an empty slice when the port is not connected.
    pub fn port(&self, name: &str) -> &[Bit] {
        self.connections.iter().find(|(p, _)| p == name).map_or(&[], |(_, b)| b.as_slice())
    }

    /// The single bit on a one-bit port.
    pub fn bit(&self, name: &str) -> Option<Bit> {
        self.port(name).first().copied()
    }

    pub fn is_output(&self, port: &str) -> bool {
        self.outputs.iter().any(|p| p == port)
    }
}

/// A JSON object read into a vector of entries (no map, no sorting, no cloning).
struct Entries<T>(Vec<(String, T)>);

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_unit<E>(self) -> Result<Entries<T>, E> {
                Ok(Entries(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, T>()? {
                    entries.push((k, v));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct RawDoc {
    modules: Entries<RawModule>,
}

#[derive(serde::Deserialize)]
struct RawModule {
    #[serde(default)]
    attributes: Entries<Value>,
    #[serde(default)]
    ports: Entries<RawPort>,
    #[serde(default)]
    cells: Entries<RawCell>,
}

#[derive(serde::Deserialize)]
struct RawPort {
    direction: String,
    bits: Vec<RawBit>,
}

#[derive(serde::Deserialize)]
struct RawCell {
    #[serde(rename = "type")]
    cell_type: String,
    #[serde(default)]
    parameters: Entries<Value>,
    #[serde(default)]
    port_directions: Entries<String>,
    #[serde(default)]
    connections: Entries<Vec<RawBit>>,
}

/// A bit as written: a net number or a constant string. Hand-written visitor because serde's
/// untagged enums buffer every value and made parsing several times slower.
enum RawBit {
    Net(u32),
    Const(String),
}

impl<'de> Deserialize<'de> for RawBit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawBit;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a net number or \"0\", \"1\", \"x\", \"z\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<RawBit, E> {
                u32::try_from(n).map(RawBit::Net).map_err(|_| E::custom("net number out of range"))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<RawBit, E> {
                u32::try_from(n).map(RawBit::Net).map_err(|_| E::custom("net number out of range"))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RawBit, E> {
                Ok(RawBit::Const(s.to_owned()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

fn invalid(message: impl Into<String>) -> NetlistError {
    NetlistError { code: "NETLIST_INVALID", message: message.into(), line: None }
}

fn truthy(attrs: &Entries<Value>, key: &str) -> bool {
    match attrs.0.iter().find(|(k, _)| k == key).map(|(_, v)| v) {
        Some(Value::String(s)) => s.chars().any(|c| c != '0'),
        Some(Value::Number(n)) => n.as_u64().is_some_and(|n| n != 0),
        Some(Value::Bool(b)) => *b,
        _ => false,
    }
}

fn bits(raw: Vec<RawBit>, what: &str) -> Result<Vec<Bit>, NetlistError> {
    raw.into_iter()
        .map(|b| match b {
            RawBit::Net(n) => Ok(Bit::Net(n)),
            RawBit::Const(s) => match s.as_str() {
                "0" => Ok(Bit::Zero),
                "1" => Ok(Bit::One),
                "x" | "z" => Ok(Bit::Undriven),
                other => Err(invalid(format!("{what}: bit {other:?} is neither a net number nor 0/1/x/z"))),
            },
        })
        .collect()
}

fn param_string(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// Parses yosys JSON and picks the top module: `top` if given, else the module with the `top`
/// attribute, else the only module that is not a blackbox.
pub fn parse(text: &str, top: Option<&str>) -> Result<Module, NetlistError> {
    let doc: RawDoc = serde_json::from_str(text).map_err(|e| NetlistError {
        code: "NETLIST_INVALID",
        message: format!("the netlist is not yosys JSON: {e}"),
        line: u32::try_from(e.line()).ok().filter(|l| *l > 0),
    })?;
    let mut real: Vec<(String, RawModule)> =
        doc.modules.0.into_iter().filter(|(_, m)| !truthy(&m.attributes, "blackbox")).collect();
    let index = match top {
        Some(want) => {
            let want = want.trim_start_matches('\\');
            real.iter().position(|(n, _)| n.trim_start_matches('\\') == want).ok_or_else(|| NetlistError {
                code: "TOP_NOT_FOUND",
                message: format!("the netlist has no module named `{want}`"),
                line: None,
            })?
        }
        None => {
            let marked: Vec<usize> = (0..real.len()).filter(|i| truthy(&real[*i].1.attributes, "top")).collect();
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
    let (name, m) = real.swap_remove(index);
    module(&name, m)
}

fn module(name: &str, m: RawModule) -> Result<Module, NetlistError> {
    let mut ports = Vec::new();
    for (pname, p) in m.ports.0 {
        let direction = match p.direction.as_str() {
            "input" => Direction::Input,
            "output" => Direction::Output,
            "inout" => Direction::Inout,
            other => return Err(invalid(format!("port `{pname}` has direction {other:?}"))),
        };
        let b = bits(p.bits, &format!("port `{pname}`"))?;
        ports.push(Port { name: pname, direction, bits: b });
    }
    let mut cells = Vec::new();
    for (cname, c) in m.cells.0 {
        let parameters = c.parameters.0.into_iter().map(|(k, v)| (k, param_string(v))).collect();
        let mut connections = Vec::new();
        for (port, b) in c.connections.0 {
            let b = bits(b, &format!("cell `{cname}` port `{port}`"))?;
            connections.push((port, b));
        }
        connections.sort_by(|a: &(String, Vec<Bit>), b| a.0.cmp(&b.0));
        let outputs = c.port_directions.0.into_iter().filter(|(_, d)| d == "output").map(|(k, _)| k).collect();
        cells.push(Cell { name: cname, cell_type: c.cell_type, parameters, connections, outputs });
    }
    cells.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Module { name: name.trim_start_matches('\\').to_owned(), ports, cells })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"{"modules":{
        "SB_LUT4":{"attributes":{"blackbox":"00000000000000000000000000000001"},"ports":{},"cells":{}},
        "top":{"attributes":{"top":"00000000000000000000000000000001"},
          "ports":{"a":{"direction":"input","bits":[2,3]},"y":{"direction":"output","bits":[4]}},
          "cells":{"z_lut":{"type":"SB_LUT4","parameters":{"LUT_INIT":"0110"},
            "port_directions":{"I0":"input","I1":"input","O":"output"},
            "connections":{"I0":[2],"I1":["0"],"O":[4]}},
            "a_first":{"type":"SB_DFF","connections":{"D":[3],"C":["x"],"Q":[5]}}}}}}"#;

    #[test]
    fn the_module_marked_top_is_chosen_and_blackboxes_are_ignored() {
        let m = parse(SMALL, None).unwrap();
        assert_eq!(m.name, "top");
        assert_eq!(m.ports[0].bits, vec![Bit::Net(2), Bit::Net(3)]);
        assert_eq!(m.cells[1].bit("I1"), Some(Bit::Zero));
        assert!(m.cells[1].is_output("O"));
    }

    #[test]
    fn cells_are_sorted_by_name_as_nextpnr_reads_them() {
        let m = parse(SMALL, None).unwrap();
        let names: Vec<_> = m.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a_first", "z_lut"]);
        assert_eq!(m.cells[0].bit("C"), Some(Bit::Undriven));
    }

    #[test]
    fn a_named_top_that_does_not_exist_is_top_not_found() {
        assert_eq!(parse(SMALL, Some("nope")).unwrap_err().code, "TOP_NOT_FOUND");
        assert_eq!(parse(SMALL, Some("SB_LUT4")).unwrap_err().code, "TOP_NOT_FOUND");
    }

    #[test]
    fn two_unmarked_modules_are_top_not_found() {
        let two = r#"{"modules":{"a":{"ports":{},"cells":{}},"b":{"ports":{},"cells":{}}}}"#;
        assert_eq!(parse(two, None).unwrap_err().code, "TOP_NOT_FOUND");
        assert_eq!(parse(two, Some("b")).unwrap().name, "b");
    }

    #[test]
    fn broken_json_is_netlist_invalid_with_a_line() {
        let e = parse("{\n\"modules\": [", None).unwrap_err();
        assert_eq!((e.code, e.line.is_some()), ("NETLIST_INVALID", true));
    }

    #[test]
    fn wrong_shapes_are_netlist_invalid_not_panics() {
        for text in ["[]", "{\"modules\":3}", "{\"modules\":{\"t\":{\"cells\":{\"c\":{}}}}}",
                     "{\"modules\":{\"t\":{\"ports\":{\"p\":{\"direction\":\"up\",\"bits\":[]}}}}}",
                     "{\"modules\":{\"t\":{\"cells\":{\"c\":{\"type\":\"X\",\"connections\":{\"A\":[-1]}}}}}}"] {
            assert_eq!(parse(text, None).unwrap_err().code, "NETLIST_INVALID", "{text}");
        }
    }
}
