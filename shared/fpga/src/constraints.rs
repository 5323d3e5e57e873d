//! Checks a PCF against the device's package and the netlist's top-level ports.
//!
//! The rules and their order follow nextpnr-ice40 0.4, so that our error/no-error verdict is
//! the tool's exit status: a constraint for a port the design lacks is only a warning (and
//! `-nowarn` silences it), and its pin is then never looked at; pin names are case-sensitive;
//! two ports on one pad fail at placement in nextpnr and are `PIN_DOUBLE_ASSIGNED` here.
//! PLL frequency checks (stricter than nextpnr, which checks none) live in [`crate::pll`].

use std::collections::{HashMap, HashSet};

use crate::budget::Deadline;
use crate::design_view::{BitName, Names};
use crate::device::{Device, Package, Pin};
use crate::pcf::{self, SetIo};
use crate::pll::{self, Pll};
use crate::report::{Finding, Location};

/// What the constraint checks need to know about a design.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Design<'a> {
    /// The names `io_bits` and the PLLs' nets refer to.
    pub names: Names<'a>,
    /// Every top-level port bit, named as nextpnr names its IO cell (`clk`, `led[0]`).
    pub io_bits: Vec<BitName>,
    /// Every `SB_PLL40_*` cell.
    pub plls: Vec<Pll>,
}

/// The parts whose IO has programmable pull-up strengths (nextpnr: "UP5K/UP3K").
const PULLUP_RESISTOR_DEVICES: &[&str] = &["up5k", "up3k"];

/// Runs every constraint check, returning early (the caller reports it) once `deadline` has passed. `pcf_text` is `None` when the design came without a PCF, which
/// nextpnr accepts with a warning and places every IO itself.
pub(crate) fn check_constraints(
    device: &Device,
    package: &Package,
    design: &Design<'_>,
    pcf_text: Option<&str>,
    allow_unconstrained: bool,
    file: Option<&str>,
    deadline: &Deadline,
) -> Vec<Finding> {
    let Some(text) = pcf_text else {
        return vec![Finding::warning(
            "PORT_UNCONSTRAINED",
            "no PCF was given, so nextpnr will place every IO automatically",
            Location::default(),
        )];
    };
    let (parsed, mut findings) = pcf::parse(text, file);
    let at = |io: &SetIo| Location {
        file: file.map(str::to_owned),
        line: Some(io.line),
        port: Some(io.port.clone()),
        pin: Some(io.pin.clone()),
        ..Location::default()
    };
    let ports: HashSet<BitName> = design.io_bits.iter().copied().collect();
    // The port bits a set_io line names (a name can be both a one-bit port and a bus bit).
    let bits_of = |io: &SetIo| design.names.lookup(&io.port).filter(|b| ports.contains(b)).collect::<Vec<_>>();
    let mut placed: HashMap<&str, (&SetIo, &'static Pin)> = HashMap::new();
    let mut pads: HashMap<(u8, u8, u8), &SetIo> = HashMap::new();
    // Ports with a rejected constraint already have an error; calling them unconstrained too
    // would only repeat it.
    let mut mentioned: HashSet<BitName> = HashSet::new();
    let mut pins: HashMap<BitName, (&str, &'static Pin)> = HashMap::new();
    for io in &parsed.ios {
        if deadline.passed() {
            return findings;
        }
        if io.pullup_resistor.is_some() && !PULLUP_RESISTOR_DEVICES.contains(&device.name) {
            findings.push(Finding::error(
                "PULLUP_RESISTOR_NOT_SUPPORTED",
                format!(
                    "-pullup_resistor needs an iCE40 UltraPlus part (up5k, up3k); {} has fixed pull-ups",
                    device.name
                ),
                at(io),
            ));
        }
        let bits = bits_of(io);
        if bits.is_empty() {
            if !io.nowarn {
                findings.push(Finding::warning(
                    "CONSTRAINT_UNKNOWN_PORT",
                    format!("the design has no top-level port '{}'; the constraint is ignored (add -nowarn to silence this)", io.port),
                    at(io),
                ));
            }
            continue;
        }
        mentioned.extend(bits.iter().copied());
        let Some(pin) = package.pins.iter().find(|p| p.name == io.pin) else {
            findings.push(Finding::error(
                "PIN_NOT_IN_PACKAGE",
                format!(
                    "package {} has no IO pin named '{}' (pin names are case-sensitive; power, ground and configuration pins cannot be constrained)",
                    package.name, io.pin
                ),
                at(io),
            ));
            continue;
        };
        if let Some((first, _)) = placed.get(io.port.as_str()) {
            findings.push(Finding::error(
                "PORT_CONSTRAINED_TWICE",
                format!("port '{}' is already constrained on line {}", io.port, first.line),
                at(io),
            ));
            continue;
        }
        if let Some(other) = pads.get(&(pin.x, pin.y, pin.z)) {
            findings.push(Finding::error(
                "PIN_DOUBLE_ASSIGNED",
                format!("pin {} is already taken by port '{}' (line {})", io.pin, other.port, other.line),
                at(io),
            ));
            continue;
        }
        placed.insert(&io.port, (io, pin));
        pads.insert((pin.x, pin.y, pin.z), io);
        pins.extend(bits.iter().map(|b| (*b, (io.port.as_str(), pin))));
    }
    for (i, bit) in design.io_bits.iter().filter(|b| !mentioned.contains(b)).enumerate() {
        if i.is_multiple_of(1024) && deadline.passed() {
            return findings;
        }
        let port = design.names.display(*bit);
        let location = Location { file: file.map(str::to_owned), port: Some(port.clone()), ..Location::default() };
        let message = format!("port '{port}' has no set_io constraint");
        findings.push(if allow_unconstrained {
            Finding::warning("PORT_UNCONSTRAINED", format!("{message}; nextpnr will place it automatically"), location)
        } else {
            Finding::error(
                "PORT_UNCONSTRAINED",
                format!("{message} (allow unconstrained IO to let nextpnr place it)"),
                location,
            )
        });
    }
    findings.extend(pll::check_pads(&design.plls, &pins, file));
    findings.extend(pll::check_frequencies(&design.plls, &design.names, &parsed.frequencies, file));
    findings
}

#[cfg(test)]
mod tests;
