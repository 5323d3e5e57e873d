//! OpenQQuantify's FPGA configuration validator for Lattice iCE40 and ECP5 (one module per
//! family, see [`Family`]).
//!
//! A pure library: every function takes bytes or strings and returns a [`Report`]; nothing here
//! touches files or the network, and the clock only to keep to an [`Input::budget`]. The
//! validation function and `openqq validate` are the two callers.
//!
//! Cost is linear in the input's bytes for every shape of netlist, PCF and LPF we know of
//! (`examples/hostile.rs` times the shapes that once were not, against an iCE40 part; the ECP5
//! path was timed on the same shapes and on long LPFs, `ECP5.md`); the budget bounds the rest.

mod budget;
pub mod ecp5;
mod family;
#[cfg(feature = "hostile")]
pub mod hostile;
pub mod ice40;
mod json_scan;
pub mod netlist;
mod report;

// The iCE40 modules, where they were before families had modules of their own.
pub use ice40::{bitstream, device, pack, pcf, resources};
pub(crate) use ice40::{constraints, design_view, pll, sites};

pub use budget::BUDGET_EXCEEDED;
pub use family::Family;
pub use report::{
    Finding, Location, Report, Severity, Truncation, Utilization, Verdict, MAX_CAPPED_REPORT_JSON_BYTES,
    MAX_REPORT_FINDINGS,
};

/// One validation request: what a tenant submitted, as text and bytes.
#[derive(Debug, Clone, Default)]
pub struct Input<'a> {
    /// Device name: an iCE40 part as nextpnr spells it (`hx8k`, `lp384`, `up5k`, …) or an ECP5
    /// part as Lattice does (`LFE5U-25F`, `LFE5UM5G-85F`, …).
    pub device: &'a str,
    /// Package name as the family's database spells it (`ct256`, `sg48`; `CABGA256`, …).
    pub package: &'a str,
    /// Yosys `write_json` output.
    pub netlist: &'a str,
    /// Constraints text, if the design is constrained: PCF for iCE40, LPF for ECP5.
    pub constraints: Option<&'a str>,
    /// Raw bitstream (iCE40 `.bin`, ECP5 `.bit`), if one was supplied.
    pub bitstream: Option<&'a [u8]>,
    /// Top module; when absent, the module with the `top` attribute (or the only one).
    pub top: Option<&'a str>,
    /// Downgrades `PORT_UNCONSTRAINED` from an error to a warning.
    pub allow_unconstrained: bool,
    /// File names used in finding locations (the CLI passes paths; the API passes none).
    pub files: FileNames<'a>,
    /// How long validation may take. When it runs out the report ends with a
    /// [`BUDGET_EXCEEDED`] error (verdict `fail`) instead of the validation running on; `None`
    /// runs to the end (the CLI, on a user's own files).
    pub budget: Option<std::time::Duration>,
    /// When the budget began; `None`: when validation starts. A caller whose own work on this
    /// input counts against the budget (the validation function reads the payloads from the
    /// object store first) passes when that work started, so reading, parsing and checking
    /// together stay within one budget.
    pub started: Option<std::time::Instant>,
}

/// Names for the inputs, so findings can point at a file.
#[derive(Debug, Clone, Default)]
pub struct FileNames<'a> {
    pub netlist: Option<&'a str>,
    /// The constraints file (PCF or LPF).
    pub constraints: Option<&'a str>,
    pub bitstream: Option<&'a str>,
}

/// Validates one design. Never panics; bad input becomes findings.
pub fn validate(input: &Input<'_>) -> Report {
    match Family::of_device(input.device) {
        Some(Family::Ice40(device)) => ice40::validate(device, input),
        Some(Family::Ecp5(device)) => ecp5::validate(device, input),
        None => {
            let message = format!("unknown device '{}' (no {} part has that name)", input.device, Family::NAMES);
            Report::new(Vec::new(), vec![Finding::error("DEVICE_UNKNOWN", message, Location::default())])
        }
    }
}
