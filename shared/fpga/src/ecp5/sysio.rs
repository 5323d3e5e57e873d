//! The sysIO electrical rules for the pins an LPF places: one IO voltage per bank, differential
//! standards on a pair's true pin, and a free VREF pin for referenced inputs.
//!
//! nextpnr-ecp5 0.11.1 checks these only when it writes the configuration (`--textcfg`,
//! `ecp5/bitstream.cc`), after placing and routing; the design is refused all the same, so they
//! are errors here. Lattice's TN1262 (*ECP5 and ECP5-5G sysIO Usage Guide*) describes the
//! hardware behind them: a VCCIO and a VREF input per bank, pairs of true and complement pads.
//! Each rule and its nextpnr check:
//!
//! - `BANK_VCCIO_CONFLICT`: `init_io_banks`, "incompatible IO voltages … on bank N". Outputs,
//!   bidirectional pins and referenced inputs set their bank's VCCIO from their `IO_TYPE`
//!   (default `LVCMOS33`); two different voltages in one bank are refused. Inputs of an
//!   unreferenced standard do not count, as in nextpnr.
//! - `VREF_PIN_MISSING`, `VREF_PIN_OCCUPIED`: `init_io_banks`, "unable to find VREF input for
//!   bank N" and "VREF pin P of bank N is occupied by IO …". A bank with a referenced input or
//!   bidirectional pin (`SSTL*`, `HSUL12*`) needs its `VREF1_<bank>` pin free; only banks 2, 3,
//!   6 and 7 have one.
//! - `DIFFERENTIAL_ON_COMPLEMENT_PIN`, `PSEUDO_DIFFERENTIAL_INPUT`: `write_io`, "cannot place
//!   differential IO at location PIOB" and, on the top edge, "Pseudo-differential IO … must be
//!   constrained to 'A' side of pair" and "… must be output". A differential standard sits on
//!   the true pad of its pair (PIO A or C; the complement, B or D, is driven with it); the top
//!   banks have only pseudo-differential outputs.
//! - `TERMINATION_UNSUPPORTED`: `write_io`, "TERMINATION is not supported with Vcc = …": on-chip
//!   termination exists for 1.8, 1.5 and 1.35 V standards only (any `TERMINATION` value, `OFF`
//!   included, is refused on the others, as nextpnr refuses it).

use std::collections::BTreeMap;

use super::device::{Device, Package, Pin};
use crate::report::{Finding, Location};

/// One IO standard nextpnr-ecp5 and Trellis know (`ecp5/iotypes.inc`, `ecp5/pio.cc`).
#[derive(Debug)]
pub(crate) struct IoType {
    pub name: &'static str,
    /// The bank voltage it needs (`get_vccio`), as nextpnr prints it (`3V3`); `None` where
    /// nextpnr has none and stops on an assertion when it needs one (`BLVDS25E`).
    pub vccio: Option<&'static str>,
    /// Needs the bank's reference voltage as an input (`is_referenced`).
    pub referenced: bool,
    /// A differential standard, placed on a pair (`is_differential`).
    pub differential: bool,
}

const fn t(name: &'static str, vccio: &'static str, referenced: bool, differential: bool) -> IoType {
    IoType { name, vccio: Some(vccio), referenced, differential }
}

/// Every IO type nextpnr-ecp5 knows, in `iotypes.inc`'s order.
pub(crate) const IO_TYPES: &[IoType] = &[
    t("LVTTL33", "3V3", false, false),
    t("LVCMOS33", "3V3", false, false),
    t("LVCMOS25", "2V5", false, false),
    t("LVCMOS18", "1V8", false, false),
    t("LVCMOS15", "1V5", false, false),
    t("LVCMOS12", "1V2", false, false),
    t("SSTL18_I", "1V8", true, false),
    t("SSTL18_II", "1V8", true, false),
    t("SSTL15_I", "1V5", true, false),
    t("SSTL15_II", "1V5", true, false),
    t("SSTL135_I", "1V35", true, false),
    t("SSTL135_II", "1V35", true, false),
    t("HSUL12", "1V2", true, false),
    t("SSTL18D_I", "1V8", true, true),
    t("SSTL18D_II", "1V8", true, true),
    t("SSTL135D_I", "1V35", true, true),
    t("SSTL135D_II", "1V35", true, true),
    t("SSTL15D_I", "1V5", true, true),
    t("SSTL15D_II", "1V5", true, true),
    t("HSUL12D", "1V2", true, true),
    t("LVCMOS33D", "3V3", false, true),
    t("LVCMOS25D", "2V5", false, true),
    t("LVCMOS15D", "1V5", false, true),
    t("LVCMOS12D", "1V2", false, true),
    t("LVDS", "2V5", false, true),
    t("BLVDS25", "2V5", false, true),
    t("MLVDS25", "2V5", false, true),
    t("LVPECL33", "3V3", false, true),
    t("SLVS", "2V5", false, true),
    t("SUBLVDS", "2V5", false, true),
    t("LVCMOS18D", "1V8", false, true),
    // The emulated ("E") standards are single-ended pairs of outputs to nextpnr.
    t("LVDS25E", "2V5", false, false),
    IoType { name: "BLVDS25E", vccio: None, referenced: false, differential: false },
    t("MLVDS25E", "2V5", false, false),
    t("LVPECL33E", "3V3", false, false),
];

/// nextpnr's IO type when the LPF gives none.
pub(crate) const DEFAULT_IO_TYPE: &str = "LVCMOS33";

/// Looks an IO type up by its exact name.
pub(crate) fn io_type(name: &str) -> Option<&'static IoType> {
    IO_TYPES.iter().find(|t| t.name == name)
}

/// The direction nextpnr gives the IO (its `DIR`): from the top-level port's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Input,
    Output,
    Bidir,
}

/// A port bit placed on a package pin, with what the LPF says about it.
#[derive(Debug)]
pub(crate) struct PlacedIo {
    /// The port bit as nextpnr names its IO (`led[0]`).
    pub port: String,
    pub pin: &'static Pin,
    pub io_type: &'static IoType,
    pub dir: Dir,
    /// Whether the LPF gives it a `TERMINATION`.
    pub termination: bool,
    /// Where its `LOCATE` is, for the findings.
    pub at: Location,
}

/// Runs every rule on the placed IO, in LPF order (the first IO of a bank sets its voltage).
pub(crate) fn check(device: &Device, package: &Package, ios: &[PlacedIo]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let located =
        |io: &PlacedIo| Location { port: Some(io.port.clone()), pin: Some(io.pin.name.to_owned()), ..io.at.clone() };

    // One voltage per bank.
    let mut bank_vcc: BTreeMap<u8, (&str, &PlacedIo)> = BTreeMap::new();
    for io in ios {
        if io.dir == Dir::Input && !io.io_type.referenced {
            continue;
        }
        let Some(vcc) = io.io_type.vccio else {
            findings.push(Finding::error(
                "IO_TYPE_UNSUPPORTED",
                format!(
                    "port '{}' on pin '{}' is {} with {}, a standard nextpnr-ecp5 knows no bank voltage for (it stops on an assertion writing the configuration)",
                    io.port,
                    io.pin.name,
                    dir_word(io.dir),
                    io.io_type.name
                ),
                located(io),
            ));
            continue;
        };
        match bank_vcc.get(&io.pin.bank) {
            None => {
                bank_vcc.insert(io.pin.bank, (vcc, io));
            }
            Some(&(first_vcc, first)) if first_vcc != vcc => findings.push(Finding::error(
                "BANK_VCCIO_CONFLICT",
                format!(
                    "bank {} would need two IO voltages: {} on pin '{}' ({} '{}', {}) and {} on pin '{}' ({} '{}', {}); a bank has one VCCIO",
                    io.pin.bank,
                    volts(first_vcc),
                    first.pin.name,
                    dir_word(first.dir),
                    first.port,
                    first.io_type.name,
                    volts(vcc),
                    io.pin.name,
                    dir_word(io.dir),
                    io.port,
                    io.io_type.name
                ),
                located(io),
            )),
            Some(_) => {}
        }
    }

    // A free VREF pin for each bank with referenced inputs.
    let mut referenced: BTreeMap<u8, &PlacedIo> = BTreeMap::new();
    for io in ios.iter().filter(|io| io.io_type.referenced && io.dir != Dir::Output) {
        referenced.entry(io.pin.bank).or_insert(io);
    }
    for (&bank, io) in &referenced {
        let Some(vref) = device.vref(bank) else {
            let banks: Vec<String> = device.vrefs.iter().map(|v| v.bank.to_string()).collect();
            findings.push(Finding::error(
                "VREF_PIN_MISSING",
                format!(
                    "port '{}' on pin '{}' is a referenced input ({}) in bank {bank}, which has no VREF pin (VREF1_{bank}); on the {} only banks {} have one",
                    io.port,
                    io.pin.name,
                    io.io_type.name,
                    device.name,
                    banks.join(", ")
                ),
                located(io),
            ));
            continue;
        };
        let Some(occupant) = ios.iter().find(|o| (o.pin.row, o.pin.col, o.pin.pio) == (vref.row, vref.col, vref.pio))
        else {
            continue;
        };
        findings.push(Finding::error(
            "VREF_PIN_OCCUPIED",
            format!(
                "pin '{}' is bank {bank}'s VREF (VREF1_{bank}), which port '{}' ({}) needs for its reference voltage, but port '{}' is placed on it",
                occupant.pin.name, io.port, io.io_type.name, occupant.port
            ),
            located(occupant),
        ));
    }

    // Differential standards on a pair's true pin; only outputs on the top edge.
    for io in ios.iter().filter(|io| io.io_type.differential) {
        let top = io.pin.row == 0;
        if top && io.dir != Dir::Output {
            findings.push(Finding::error(
                "PSEUDO_DIFFERENTIAL_INPUT",
                format!(
                    "port '{}' is {} with {} on pin '{}' in bank {}, on the top edge, where differential IO is pseudo-differential and output only",
                    io.port,
                    dir_word(io.dir),
                    io.io_type.name,
                    io.pin.name,
                    io.pin.bank
                ),
                located(io),
            ));
        } else if io.pin.pio == b'B' || io.pin.pio == b'D' || (top && io.pin.pio != b'A') {
            let true_pin = package.pin_at(io.pin.row, io.pin.col, io.pin.pio - 1);
            let pair = true_pin.map_or_else(
                || " (whose true pin the package does not bond out)".to_owned(),
                |p| format!("; its pair's true pin is '{}'", p.name),
            );
            findings.push(Finding::error(
                "DIFFERENTIAL_ON_COMPLEMENT_PIN",
                format!(
                    "port '{}' has the differential standard {} on pin '{}' (PIO {} of bank {}), the complement side of a pair{pair}",
                    io.port,
                    io.io_type.name,
                    io.pin.name,
                    io.pin.pio as char,
                    io.pin.bank
                ),
                located(io),
            ));
        }
    }

    // On-chip termination only at 1.8, 1.5 and 1.35 V.
    for io in ios.iter().filter(|io| io.termination) {
        if let Some(vcc @ ("3V3" | "2V5" | "1V2")) = io.io_type.vccio {
            findings.push(Finding::error(
                "TERMINATION_UNSUPPORTED",
                format!(
                    "port '{}' on pin '{}' has a TERMINATION, which the sysIO has only for 1.8, 1.5 and 1.35 V standards; {} is {}",
                    io.port,
                    io.pin.name,
                    io.io_type.name,
                    volts(vcc)
                ),
                located(io),
            ));
        }
    }
    for f in &mut findings {
        f.message.push_str(&cite(&f.code));
    }
    findings
}

/// The rule's source, for the finding: nextpnr-ecp5's check and Lattice's sysIO guide.
fn cite(code: &str) -> String {
    let check = match code {
        "BANK_VCCIO_CONFLICT" | "VREF_PIN_OCCUPIED" | "VREF_PIN_MISSING" => "init_io_banks",
        "IO_TYPE_UNSUPPORTED" => "get_vccio",
        _ => "write_io",
    };
    format!(" (nextpnr-ecp5 refuses it when writing the configuration, in {check}; Lattice TN1262, ECP5 and ECP5-5G sysIO Usage Guide)")
}

fn dir_word(dir: Dir) -> &'static str {
    match dir {
        Dir::Input => "an input",
        Dir::Output => "an output",
        Dir::Bidir => "bidirectional",
    }
}

/// `3V3` as `3.3 V`.
fn volts(vcc: &str) -> String {
    format!("{} V", vcc.replace('V', "."))
}

#[cfg(test)]
mod tests;
