//! Checks an LPF against the part's package and the netlist's top-level ports.
//!
//! The rules follow nextpnr-ecp5, so that our error/no-error verdict is the tool's exit status:
//!
//! - `LOCATE COMP` names a port bit as nextpnr names its IO cell (`led[0]`; a one-bit port may be
//!   named `x[0]`); a name the design lacks is only a warning (nextpnr ignores it silently);
//!   a later `LOCATE` of the same port replaces the earlier one, as in nextpnr (a warning);
//! - a site the package lacks is `PIN_NOT_IN_PACKAGE` (nextpnr: "IO pin … constrained to pin …,
//!   which does not exist for package …"); two ports on one pin is `PIN_DOUBLE_ASSIGNED` (nextpnr
//!   fails at placement);
//! - with an LPF, every port bit needs a `LOCATE`: `PORT_UNCONSTRAINED`, a warning under
//!   `allow_unconstrained` (nextpnr's `--lpf-allow-unconstrained`); without one nextpnr checks
//!   nothing and places every IO itself (a warning);
//! - `IOBUF` attributes need `KEY=VALUE` (`LPF_SYNTAX`); keys nextpnr does not know are a warning;
//!   an `IO_TYPE` Trellis does not know is `IO_TYPE_UNKNOWN`, an error (nextpnr places and
//!   routes it and stops only when writing the bitstream);
//! - the placed pins' sysIO rules (one voltage per bank, differential pairs, VREF pins,
//!   termination) are [`super::sysio`]'s;
//! - `PULLMODE`, `SLEWRATE` and `OPENDRAIN` values outside the sysIO's are a warning
//!   (`IOBUF_VALUE_UNKNOWN`: nextpnr copies them into the configuration unread);
//! - `FREQUENCY` of a port or net the design lacks is a warning, and so is one that is not a
//!   positive number of hertz (`FREQUENCY_INVALID`).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use super::device::{Device, Package};
use super::lpf::{self, At, FrequencyOf, IOBUF_KEYS};
use super::ports::PortBits;
use super::sysio::{self, Dir, PlacedIo, DEFAULT_IO_TYPE, IO_TYPES};
use crate::budget::Deadline;
use crate::netlist::{Direction, Module};
use crate::report::{short_name, Finding, Location};

/// Values of the other `IOBUF` attributes an ECP5 PIO has (Lattice's sysIO guide); others draw
/// a warning.
const IOBUF_VALUES: &[(&str, &[&str])] =
    &[("PULLMODE", &["UP", "DOWN", "NONE", "KEEPER"]), ("SLEWRATE", &["FAST", "SLOW"]), ("OPENDRAIN", &["ON", "OFF"])];

/// The pin each placed port bit (by [`PortBits`] number) ended on: its row for the packer's IO
/// logic, its site for where nextpnr puts the global buffers of clocks from pins.
pub(crate) type PinSites = HashMap<usize, &'static super::device::Pin>;

/// Runs every constraint check. `text` is `None` when the design came without an LPF. Also
/// returns the pin of each placed port bit.
pub(crate) fn check(
    device: &Device,
    package: &Package,
    module: &Module<'_>,
    text: Option<&str>,
    allow_unconstrained: bool,
    file: Option<&str>,
    deadline: &Deadline,
) -> (Vec<Finding>, PinSites) {
    let at = |a: At, port: Option<&str>, pin: Option<&str>| Location {
        file: file.map(str::to_owned),
        line: Some(a.line),
        port: port.map(str::to_owned),
        pin: pin.map(str::to_owned),
        ..Location::default()
    };
    let ports = PortBits::new(module);
    let Some(text) = text else {
        let finding = Finding::warning(
            "PORT_UNCONSTRAINED",
            "no LPF was given, so nextpnr will place every IO automatically",
            Location::default(),
        );
        return (vec![finding], PinSites::new());
    };
    let cells: HashSet<&str> = module.cells.iter().map(|c| c.name.as_ref()).collect();
    let (parsed, mut findings) = lpf::parse(text, file);
    let unknown_port = |what: &str, name: &str, a: At| {
        Finding::warning(
            "CONSTRAINT_UNKNOWN_PORT",
            format!("the design has no top-level port '{}'; nextpnr ignores this {what}", short_name(name)),
            at(a, Some(name), None),
        )
    };

    // LOCATE: the last one for each port bit wins, as in nextpnr.
    let mut site: HashMap<usize, (&str, &lpf::Locate)> = HashMap::new();
    for (k, locate) in parsed.locates.iter().enumerate() {
        if k % 1024 == 0 && deadline.passed() {
            return (findings, PinSites::new());
        }
        let comp = locate.comp.as_str();
        let bit = ports.lookup(comp).or_else(|| comp.strip_suffix("[0]").and_then(|c| ports.lookup(c)));
        let Some(bit) = bit else {
            if !cells.contains(comp) {
                findings.push(unknown_port("LOCATE", comp, locate.at));
            }
            continue;
        };
        let pin = match locate.site() {
            Ok(pin) => pin,
            Err(message) => {
                findings.push(Finding::error(
                    "LPF_SYNTAX",
                    format!("line {}, column {}: {message}", locate.site_at.line, locate.site_at.column),
                    at(locate.site_at, Some(comp), None),
                ));
                continue;
            }
        };
        if let Some((old, before)) = site.insert(bit, (pin, locate)) {
            findings.push(Finding::warning(
                "PORT_CONSTRAINED_TWICE",
                format!(
                    "port '{}' is located twice: at pin '{}' (line {}) and at pin '{}'; nextpnr keeps the last",
                    ports.display(bit),
                    short_name(old),
                    before.at.line,
                    short_name(pin)
                ),
                at(locate.at, Some(&ports.display(bit)), Some(pin)),
            ));
        }
    }

    // The pins: in the package, and one port each.
    let mut rows = PinSites::new();
    let mut pin_owner: HashMap<&str, usize> = HashMap::new();
    let mut placed: Vec<(usize, &'static super::device::Pin, &lpf::Locate)> = Vec::new();
    let mut ordered: Vec<(&usize, &(&str, &lpf::Locate))> = site.iter().collect();
    ordered.sort_unstable_by_key(|(_, (_, l))| (l.at.line, l.at.column));
    for (&bit, &(pin, locate)) in ordered {
        let name = ports.display(bit);
        let name = name.as_str();
        let Some(p) = package.pin(pin) else {
            findings.push(Finding::error(
                "PIN_NOT_IN_PACKAGE",
                format!(
                    "port '{}' is located at pin '{}', which the {} {} package does not have (pin names are case-sensitive)",
                    short_name(name),
                    short_name(pin),
                    device.name,
                    package.name
                ),
                at(locate.site_at, Some(name), Some(pin)),
            ));
            continue;
        };
        if let Some(&other) = pin_owner.get(p.name) {
            findings.push(Finding::error(
                "PIN_DOUBLE_ASSIGNED",
                format!(
                    "ports '{}' and '{}' are both located at pin '{}'; nextpnr cannot place both",
                    ports.display(other),
                    name,
                    p.name
                ),
                at(locate.site_at, Some(name), Some(p.name)),
            ));
            continue;
        }
        pin_owner.insert(p.name, bit);
        rows.insert(bit, p);
        placed.push((bit, p, locate));
    }

    // Every port bit needs a LOCATE.
    for i in 0..ports.len() {
        if i % 1024 == 0 && deadline.passed() {
            return (findings, rows);
        }
        if site.contains_key(&i) {
            continue;
        }
        let name = ports.display(i);
        let message = format!("port '{name}' has no LOCATE COMP in the LPF");
        let location = Location { file: file.map(str::to_owned), port: Some(name), ..Location::default() };
        findings.push(if allow_unconstrained {
            Finding::warning("PORT_UNCONSTRAINED", format!("{message}; nextpnr will place it automatically"), location)
        } else {
            Finding::error(
                "PORT_UNCONSTRAINED",
                format!("{message} (allow unconstrained ports to let nextpnr place it)"),
                location,
            )
        });
    }

    // IOBUF attributes.
    let mut io_type: HashMap<usize, (&str, At)> = HashMap::new();
    let mut termination: HashSet<usize> = HashSet::new();
    for iobuf in &parsed.iobufs {
        let Some(bit) = ports.lookup(&iobuf.port) else {
            if !cells.contains(iobuf.port.as_str()) {
                findings.push(unknown_port("IOBUF", &iobuf.port, iobuf.at));
            }
            continue;
        };
        let attributes = match iobuf.attributes() {
            Ok(a) => a,
            Err((message, a)) => {
                findings.push(Finding::error(
                    "LPF_SYNTAX",
                    format!("line {}, column {}: {message}", a.line, a.column),
                    at(a, Some(&iobuf.port), None),
                ));
                continue;
            }
        };
        for (key, value, a) in attributes {
            if !IOBUF_KEYS.contains(&key) {
                findings.push(Finding::warning(
                    "LPF_IGNORED_OPTION",
                    format!(
                        "line {}, column {}: IOBUF attribute '{}' of port '{}' is not one nextpnr-ecp5 knows ({})",
                        a.line,
                        a.column,
                        short_name(key),
                        short_name(&iobuf.port),
                        IOBUF_KEYS.join(", ")
                    ),
                    at(a, Some(&iobuf.port), None),
                ));
            }
            if let Some((_, values)) = IOBUF_VALUES.iter().find(|(k, _)| *k == key) {
                if !values.contains(&value) {
                    findings.push(Finding::warning(
                        "IOBUF_VALUE_UNKNOWN",
                        format!(
                            "line {}, column {}: port '{}' has {key}={}, which is not one of {}; nextpnr places it but the bitstream tools reject it",
                            a.line,
                            a.column,
                            short_name(&iobuf.port),
                            short_name(value),
                            values.join(", ")
                        ),
                        at(a, Some(&iobuf.port), None),
                    ));
                }
            }
            if key == "TERMINATION" {
                termination.insert(bit);
            }
            if key == "IO_TYPE" {
                if sysio::io_type(value).is_none() {
                    let known: Vec<&str> = IO_TYPES.iter().map(|t| t.name).collect();
                    findings.push(Finding::error(
                        "IO_TYPE_UNKNOWN",
                        format!(
                            "line {}, column {}: port '{}' has IO_TYPE '{}', which nextpnr-ecp5 does not know (it knows {})",
                            a.line,
                            a.column,
                            short_name(&iobuf.port),
                            short_name(value),
                            known.join(", ")
                        ),
                        at(a, Some(&iobuf.port), None),
                    ));
                } else {
                    io_type.insert(bit, (value, a));
                }
            }
        }
    }

    // The sysIO rules, on the placed pins in LPF order.
    placed.sort_unstable_by_key(|(_, _, l)| (l.at.line, l.at.column));
    let ios: Vec<PlacedIo> = placed
        .iter()
        .filter_map(|&(bit, pin, locate)| {
            let name = io_type.get(&bit).map_or(DEFAULT_IO_TYPE, |(t, _)| t);
            Some(PlacedIo {
                port: ports.display(bit),
                pin,
                io_type: sysio::io_type(name)?,
                dir: match ports.direction(bit) {
                    Direction::Input => Dir::Input,
                    Direction::Output => Dir::Output,
                    Direction::Inout => Dir::Bidir,
                },
                termination: termination.contains(&bit),
                at: at(locate.at, None, None),
            })
        })
        .collect();
    findings.extend(sysio::check(device, package, &ios));

    // FREQUENCY.
    // Net names: (width, offset, upto) by name, each name stored once.
    let mut net_names: Option<HashMap<Cow<'_, str>, (usize, i64, bool)>> = None;
    for f in &parsed.frequencies {
        if !(f.mhz.is_finite() && f.mhz > 0.0) {
            findings.push(Finding::warning(
                "FREQUENCY_INVALID",
                format!(
                    "line {}: the frequency of '{}' is not a positive number of hertz",
                    f.at.line,
                    short_name(&f.name)
                ),
                at(f.at, None, None),
            ));
            continue;
        }
        let known = match f.of {
            FrequencyOf::Port => ports.lookup(&f.name).is_some(),
            FrequencyOf::Net => {
                let names = net_names.get_or_insert_with(|| {
                    let mut names = HashMap::new();
                    module.each_net_name(|name, bits, offset, upto| {
                        names.entry(name).or_insert((bits.len(), offset, upto));
                    });
                    names
                });
                net_bit_exists(names, &f.name) || ports.lookup(&f.name).is_some()
            }
        };
        if !known {
            let what = if f.of == FrequencyOf::Port { "top-level port" } else { "net" };
            findings.push(Finding::warning(
                "CONSTRAINT_UNKNOWN_PORT",
                format!("the design has no {what} '{}'; its FREQUENCY constrains nothing", short_name(&f.name)),
                at(f.at, Some(&f.name), None),
            ));
        }
    }
    (findings, rows)
}

/// Whether a net bit spelt `text` as nextpnr spells it (`n`, `bus[i]`) is among `names`.
fn net_bit_exists(names: &HashMap<Cow<'_, str>, (usize, i64, bool)>, text: &str) -> bool {
    if names.get(text).is_some_and(|(width, _, _)| *width == 1) {
        return true;
    }
    let Some((base, digits)) = text.strip_suffix(']').and_then(|t| t.rsplit_once('[')) else { return false };
    let Some(index) = digits.parse::<i64>().ok().filter(|i| i.to_string() == digits) else { return false };
    names.get(base).is_some_and(|&(width, offset, _)| width > 1 && (offset..offset + width as i64).contains(&index))
}

#[cfg(test)]
mod tests;
