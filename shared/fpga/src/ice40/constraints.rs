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
use crate::sites::{self, Sites};

/// What the constraint checks need to know about a design.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Design<'a> {
    /// The names `io_bits` and the PLLs' nets refer to.
    pub names: Names<'a>,
    /// Every top-level port bit, named as nextpnr names its IO cell (`clk`, `led[0]`).
    pub io_bits: Vec<BitName>,
    /// Every `SB_PLL40_*` cell.
    pub plls: Vec<Pll>,
    /// IO cells, PLLs and fixed-site hard IP, for the site checks.
    pub sites: Sites,
}

/// The parts whose IO has programmable pull-up strengths (nextpnr: "UP5K/UP3K").
const PULLUP_RESISTOR_DEVICES: &[&str] = &["up5k", "up3k"];

/// Runs every constraint check, returning early (the caller reports it) once `deadline` has
/// passed. `pcf_text` is `None` when the design came without a PCF, which nextpnr accepts with a
/// warning and places every IO itself.
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
        let mut findings = vec![Finding::warning(
            "PORT_UNCONSTRAINED",
            "no PCF was given, so nextpnr will place every IO automatically",
            Location::default(),
        )];
        findings.extend(sites::check(device, package, &design.sites, &design.names, &HashMap::new(), file));
        return findings;
    };
    let (parsed, mut findings) = pcf::parse(text, file);
    // Every port bit, to tell a port of the design from a name it lacks: millions of them take
    // seconds to hash, within the budget like the rest.
    let mut ports = HashSet::with_capacity(design.io_bits.len());
    for (i, bit) in design.io_bits.iter().enumerate() {
        if i.is_multiple_of(4096) && deadline.passed() {
            return findings;
        }
        ports.insert(*bit);
    }
    let mut placement = Placement::new(device, package, design, ports, file);
    for io in &parsed.ios {
        if deadline.passed() {
            return findings;
        }
        placement.place(io, &mut findings);
    }
    let unplaced = design.io_bits.iter().filter(|b| !placement.mentioned.contains(b));
    for (i, bit) in unplaced.enumerate() {
        if i.is_multiple_of(1024) && deadline.passed() {
            return findings;
        }
        findings.push(unconstrained(&design.names.display(*bit), allow_unconstrained, file));
    }
    findings.extend(sites::check(device, package, &design.sites, &design.names, &placement.pins, file));
    findings.extend(pll::check_frequencies(&design.plls, &design.names, &parsed.frequencies, file));
    findings
}

/// The `set_io` lines accepted so far, in file order, and what they say about the port bits.
struct Placement<'a> {
    device: &'a Device,
    package: &'a Package,
    design: &'a Design<'a>,
    file: Option<&'a str>,
    /// Every top-level port bit, to tell a port of the design from a name it lacks.
    ports: HashSet<BitName>,
    /// The first accepted line for each port name.
    placed: HashMap<&'a str, &'a SetIo>,
    /// The accepted line holding each pad (tile x, y and pad z).
    pads: HashMap<(u8, u8, u8), &'a SetIo>,
    /// Bits some line names, accepted or not: ports with a rejected constraint already have an
    /// error, and calling them unconstrained too would only repeat it.
    mentioned: HashSet<BitName>,
    /// Each placed bit's port name and pin, for the site checks (including bits whose pin another
    /// port holds too: nextpnr constrains both).
    pins: HashMap<BitName, (&'a str, &'static Pin)>,
}

impl<'a> Placement<'a> {
    fn new(
        device: &'a Device,
        package: &'a Package,
        design: &'a Design<'a>,
        ports: HashSet<BitName>,
        file: Option<&'a str>,
    ) -> Self {
        Placement {
            device,
            package,
            design,
            file,
            ports,
            placed: HashMap::new(),
            pads: HashMap::new(),
            mentioned: HashSet::new(),
            pins: HashMap::new(),
        }
    }

    /// Checks one `set_io` line in nextpnr's order and, if it passes, places its port bits.
    fn place(&mut self, io: &'a SetIo, findings: &mut Vec<Finding>) {
        findings.extend(self.unsupported_pullup_resistor(io));
        let bits = self.bits_of(io);
        if bits.is_empty() {
            if !io.nowarn {
                findings.push(Finding::warning(
                    "CONSTRAINT_UNKNOWN_PORT",
                    format!("the design has no top-level port '{}'; the constraint is ignored (add -nowarn to silence this)", io.port),
                    at(io, self.file),
                ));
            }
            return;
        }
        self.mentioned.extend(bits.iter().copied());
        let Some(pin) = self.package.pins.iter().find(|p| p.name == io.pin) else {
            findings.push(self.pin_not_in_package(io));
            return;
        };
        if let Some(taken) = self.taken(io, pin) {
            // A second port on a taken pin still carries its constraint into nextpnr's packer,
            // which places PLLs by it before placement finds the clash.
            if taken.code == "PIN_DOUBLE_ASSIGNED" {
                self.pins.extend(bits.iter().map(|b| (*b, (io.port.as_str(), pin))));
            }
            findings.push(taken);
            return;
        }
        self.placed.insert(&io.port, io);
        self.pads.insert((pin.x, pin.y, pin.z), io);
        self.pins.extend(bits.iter().map(|b| (*b, (io.port.as_str(), pin))));
    }

    /// The port bits a `set_io` line names (a name can be both a one-bit port and a bus bit).
    fn bits_of(&self, io: &SetIo) -> Vec<BitName> {
        self.design.names.lookup(&io.port).filter(|b| self.ports.contains(b)).collect()
    }

    /// An error for `-pullup_resistor` on a part whose pull-ups are fixed.
    fn unsupported_pullup_resistor(&self, io: &SetIo) -> Option<Finding> {
        if io.pullup_resistor.is_none() || PULLUP_RESISTOR_DEVICES.contains(&self.device.name) {
            return None;
        }
        Some(Finding::error(
            "PULLUP_RESISTOR_NOT_SUPPORTED",
            format!(
                "-pullup_resistor needs an iCE40 UltraPlus part (up5k, up3k); {} has fixed pull-ups",
                self.device.name
            ),
            at(io, self.file),
        ))
    }

    fn pin_not_in_package(&self, io: &SetIo) -> Finding {
        Finding::error(
            "PIN_NOT_IN_PACKAGE",
            format!(
                "package {} has no IO pin named '{}' (pin names are case-sensitive; power, ground and configuration pins cannot be constrained)",
                self.package.name, io.pin
            ),
            at(io, self.file),
        )
    }

    /// An error if the line's port already has a pin, or another port holds the pin's pad.
    fn taken(&self, io: &SetIo, pin: &Pin) -> Option<Finding> {
        if let Some(first) = self.placed.get(io.port.as_str()) {
            return Some(Finding::error(
                "PORT_CONSTRAINED_TWICE",
                format!("port '{}' is already constrained on line {}", io.port, first.line),
                at(io, self.file),
            ));
        }
        let other = self.pads.get(&(pin.x, pin.y, pin.z))?;
        Some(Finding::error(
            "PIN_DOUBLE_ASSIGNED",
            format!("pin {} is already taken by port '{}' (line {})", io.pin, other.port, other.line),
            at(io, self.file),
        ))
    }
}

/// Where a finding about a `set_io` line points.
fn at(io: &SetIo, file: Option<&str>) -> Location {
    Location {
        file: file.map(str::to_owned),
        line: Some(io.line),
        port: Some(io.port.clone()),
        pin: Some(io.pin.clone()),
        ..Location::default()
    }
}

/// `PORT_UNCONSTRAINED` for a port bit no `set_io` line names: an error, or a warning when
/// unconstrained IO is allowed (nextpnr then places it).
fn unconstrained(port: &str, allow_unconstrained: bool, file: Option<&str>) -> Finding {
    let location = Location { file: file.map(str::to_owned), port: Some(port.to_owned()), ..Location::default() };
    let message = format!("port '{port}' has no set_io constraint");
    if allow_unconstrained {
        Finding::warning("PORT_UNCONSTRAINED", format!("{message}; nextpnr will place it automatically"), location)
    } else {
        Finding::error(
            "PORT_UNCONSTRAINED",
            format!("{message} (allow unconstrained IO to let nextpnr place it)"),
            location,
        )
    }
}

#[cfg(test)]
mod tests;
