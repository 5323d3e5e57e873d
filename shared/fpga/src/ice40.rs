//! The iCE40 family: Yosys `synth_ice40` netlists, PCF constraints and iCE40 bitstreams,
//! checked against Project IceStorm's chip database and nextpnr-ice40 0.4's rules.
//!
//! Family-neutral parts stay at the crate root: the Yosys JSON reader ([`crate::netlist`]),
//! reports and budgets.

pub mod bitstream;
pub(crate) mod constraints;
pub(crate) mod design_view;
pub mod device;
pub mod pack;
pub mod pcf;
pub(crate) mod pll;
pub mod resources;
pub(crate) mod sites;

use crate::budget;
use crate::netlist;
use crate::{Finding, Input, Location, Report, BUDGET_EXCEEDED};
use device::Device;

/// [`crate::validate`] for an iCE40 part: Yosys `synth_ice40` netlists, PCF constraints and iCE40
/// bitstreams, against nextpnr-ice40 0.4.
pub(crate) fn validate(device: &'static Device, input: &Input<'_>) -> Report {
    let deadline = budget::Deadline::since(input.started, input.budget);
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
                resources::check_within(device, package, &module, input.constraints, input.files.netlist, &deadline)
            else {
                return out_of_time(utilization, findings);
            };
            utilization = rows;
            findings.extend(resource_findings);
            if deadline.passed() {
                return out_of_time(utilization, findings);
            }
            let Some(design) = design_view::design_view_within(&module, &deadline) else {
                return out_of_time(utilization, findings);
            };
            findings.extend(constraints::check_constraints(
                device,
                package,
                &design,
                input.constraints,
                input.allow_unconstrained,
                input.files.constraints,
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
