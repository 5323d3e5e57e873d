//! OpenQQuantify's FPGA configuration validator (iCE40 first).
//!
//! A pure library: every function takes bytes or strings and returns a [`Report`]; nothing here
//! touches files or the network, and the clock only to keep to an [`Input::budget`]. The
//! validation function and `openqq validate` are the two callers.
//!
//! Cost is linear in the input's bytes for every shape of netlist and PCF we know of
//! (`examples/hostile.rs` times the shapes that once were not); the budget bounds the rest.

pub mod bitstream;
mod budget;
mod constraints;
mod design_view;
pub mod device;
mod family;
#[cfg(feature = "hostile")]
pub mod hostile;
mod json_scan;
pub mod netlist;
pub mod pack;
pub mod pcf;
mod pll;
mod report;
pub mod resources;
mod sites;

pub use budget::BUDGET_EXCEEDED;
pub use family::Family;
pub use report::{
    Finding, Location, Report, Severity, Truncation, Utilization, Verdict, MAX_CAPPED_REPORT_JSON_BYTES,
    MAX_REPORT_FINDINGS,
};

/// One validation request: what a tenant submitted, as text and bytes.
#[derive(Debug, Clone, Default)]
pub struct Input<'a> {
    /// Device name as nextpnr spells it (`hx8k`, `lp384`, `up5k`, …).
    pub device: &'a str,
    /// Package name as the chip database spells it (`ct256`, `sg48`, …).
    pub package: &'a str,
    /// Yosys `write_json` output.
    pub netlist: &'a str,
    /// PCF text, if the design is constrained.
    pub pcf: Option<&'a str>,
    /// Raw iCE40 `.bin` bitstream, if one was supplied.
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
}

/// Names for the inputs, so findings can point at a file.
#[derive(Debug, Clone, Default)]
pub struct FileNames<'a> {
    pub netlist: Option<&'a str>,
    pub pcf: Option<&'a str>,
    pub bitstream: Option<&'a str>,
}

/// Validates one design. Never panics; bad input becomes findings.
pub fn validate(input: &Input<'_>) -> Report {
    match Family::of_device(input.device) {
        Some(Family::Ice40(device)) => validate_ice40(device, input),
        None => {
            let message = format!("unknown device '{}' (no {} part has that name)", input.device, Family::NAMES);
            Report::new(Vec::new(), vec![Finding::error("DEVICE_UNKNOWN", message, Location::default())])
        }
    }
}

/// [`validate`] for an iCE40 part: Yosys `synth_ice40` netlists, PCF constraints and iCE40
/// bitstreams, against nextpnr-ice40 0.4.
fn validate_ice40(device: &'static device::Device, input: &Input<'_>) -> Report {
    let deadline = budget::Deadline::after(input.budget);
    let mut findings = Vec::new();
    let at = |file: Option<&str>| Location { file: file.map(str::to_owned), ..Location::default() };
    let package = device
        .packages
        .iter()
        .find(|p| p.name == input.package || (input.package.is_empty() && p.name == device.default_package));
    let Some(package) = package else {
        let message = format!("device {} has no package '{}'", device.name, input.package);
        return Report::new(Vec::new(), vec![Finding::error("PACKAGE_UNSUPPORTED", message, Location::default())]);
    };
    // Packing and resource checks (utilisation as nextpnr-ice40 --pack-only reports it), then
    // the pin and PLL checks on the same netlist.
    let mut utilization = Vec::new();
    let out_of_time = |utilization, mut findings: Vec<Finding>| {
        findings.push(budget::exceeded(input.budget));
        Report::new(utilization, findings)
    };
    match netlist::parse_within(input.netlist, input.top, &deadline) {
        Err(e) if e.code == BUDGET_EXCEEDED => return out_of_time(utilization, findings),
        Err(e) => {
            findings.push(Finding::error(e.code, e.message, Location { line: e.line, ..at(input.files.netlist) }))
        }
        Ok(module) => {
            let Some((rows, resource_findings)) =
                resources::check_within(device, package, &module, input.pcf, input.files.netlist, &deadline)
            else {
                return out_of_time(utilization, findings);
            };
            utilization = rows;
            findings.extend(resource_findings);
            if deadline.passed() {
                return out_of_time(utilization, findings);
            }
            let design = design_view::design_view(&module);
            findings.extend(constraints::check_constraints(
                device,
                package,
                &design,
                input.pcf,
                input.allow_unconstrained,
                input.files.pcf,
                &deadline,
            ));
            if deadline.passed() {
                return out_of_time(utilization, findings);
            }
        }
    }
    if let Some(bytes) = input.bitstream {
        findings.extend(bitstream::check(bytes, Some(device.die), input.files.bitstream));
    }
    Report::new(utilization, findings)
}
