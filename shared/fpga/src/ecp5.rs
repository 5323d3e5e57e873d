//! The ECP5 family: Yosys `synth_ecp5` netlists, LPF constraints and ECP5 bitstreams, checked
//! against Project Trellis's database and nextpnr-ecp5's rules. `ECP5.md` says what is checked
//! and what is not.
//!
//! Family-neutral parts stay at the crate root: the Yosys JSON reader ([`crate::netlist`]),
//! reports and budgets.

pub mod bitstream;
pub(crate) mod constraints;
pub mod device;
pub(crate) mod dsp;
pub(crate) mod globals;
pub mod lpf;
pub mod pack;
pub(crate) mod ports;
pub(crate) mod sysio;

use crate::budget;
use crate::netlist::{self, Module};
use crate::report::{short_name, Finding, Location, Utilization};
use crate::{Input, Report, BUDGET_EXCEEDED};
use device::{Device, Package};

/// The extra utilisation row for bonded pins; nextpnr's own `TRELLIS_IO` row counts the die's
/// PIOs, bonded or not.
pub const PACKAGE_PINS: &str = "PACKAGE_PIN";

/// Global clock networks: nextpnr-ecp5 routes each `DCCA` and `DCSC` onto one of 16
/// (`ecp5/globals.cc`, `route_globals`), and has no 17th.
pub const GLOBAL_NETWORKS: u32 = 16;

/// How many cells a resource finding names before it says how many more there are.
const MAX_NAMED: usize = 4;

/// [`crate::validate`] for an ECP5 part.
pub(crate) fn validate(device: &'static Device, input: &Input<'_>) -> Report {
    let deadline = budget::Deadline::since(input.started, input.budget);
    let mut findings = Vec::new();
    let at = |file: Option<&str>| Location { file: file.map(str::to_owned), ..Location::default() };
    let Some(package) = device.package(input.package) else {
        let names: Vec<&str> = device.packages.iter().map(|p| p.name).collect();
        let message = format!(
            "the {} has no package '{}' (it comes in {}; package names are case-sensitive)",
            device.name,
            input.package,
            names.join(", ")
        );
        return Report::new(Vec::new(), vec![Finding::error("PACKAGE_UNSUPPORTED", message, Location::default())]);
    };
    let out_of_time = |utilization, mut findings: Vec<Finding>| {
        findings.push(budget::exceeded(input.budget));
        Report::new(utilization, findings)
    };
    let mut utilization = Vec::new();
    match netlist::parse_within(input.netlist, input.top, &deadline) {
        Err(e) if e.code == BUDGET_EXCEEDED => return out_of_time(utilization, findings),
        Err(e) => {
            findings.push(Finding::error(e.code, e.message, Location { line: e.line, ..at(input.files.netlist) }))
        }
        Ok(module) => {
            let (constraint_findings, pin_rows) = constraints::check(
                device,
                package,
                &module,
                input.constraints,
                input.allow_unconstrained,
                input.files.constraints,
                &deadline,
            );
            if deadline.passed() {
                return out_of_time(utilization, findings);
            }
            let Some(packed) = pack::pack_within(&module, device, &pin_rows, &deadline) else {
                return out_of_time(utilization, findings);
            };
            let (rows, resource_findings) = resources(device, package, &module, &packed, input.files.netlist);
            utilization = rows;
            findings.extend(resource_findings);
            findings.extend(globals::check(&module, device, &pin_rows, &packed, input.files.netlist));
            findings.extend(dsp::check(&module, input.files.netlist));
            findings.extend(constraint_findings);
        }
    }
    if let Some(bytes) = input.bitstream {
        findings.extend(bitstream::check(bytes, device, input.files.bitstream));
    }
    Report::new(utilization, findings)
}

/// Utilisation rows (nextpnr's resources in its order, then [`PACKAGE_PINS`]) and the findings
/// about them.
fn resources(
    device: &Device,
    package: &Package,
    module: &Module<'_>,
    packed: &pack::Packing,
    file: Option<&str>,
) -> (Vec<Utilization>, Vec<Finding>) {
    let at = || Location { file: file.map(str::to_owned), ..Location::default() };
    let mut rows: Vec<Utilization> = device
        .capacities
        .iter()
        .map(|&(r, available)| Utilization {
            resource: r.to_owned(),
            used: packed.used.get(r).copied().unwrap_or(0),
            available,
        })
        .collect();
    let mut findings = Vec::new();
    let named = |r: &str, fit: u32| -> (String, Option<String>) {
        let Some(cells) = packed.hard_cells.get(r) else { return (String::new(), None) };
        let names: Vec<String> =
            cells.iter().take(MAX_NAMED).map(|ci| format!("'{}'", short_name(&module.cells[*ci].name))).collect();
        let more = cells.len().saturating_sub(MAX_NAMED);
        let list = if more > 0 { format!("{} and {more} more", names.join(", ")) } else { names.join(", ") };
        let first_extra = cells.get(fit as usize).map(|ci| short_name(&module.cells[*ci].name).into_owned());
        (format!(" ({list})"), first_extra)
    };
    for u in &rows {
        if u.used > u.available {
            let (cells, first) = named(&u.resource, u.available);
            findings.push(Finding::error(
                "RESOURCE_OVER_CAPACITY",
                format!(
                    "the design needs {} {}{cells} but the {} has {}",
                    u.used, u.resource, device.name, u.available
                ),
                Location { cell: first, ..at() },
            ));
        }
    }
    // Each global buffer takes one of the 16 global networks; the DCCA bels are more (56).
    let globals = packed.used.get("DCCA").copied().unwrap_or(0) + packed.used.get("DCSC").copied().unwrap_or(0);
    if globals > GLOBAL_NETWORKS {
        let (cells, first) = named("DCCA", GLOBAL_NETWORKS);
        findings.push(Finding::error(
            "GLOBAL_BUFFERS_EXCEEDED",
            format!(
                "the design needs {globals} global clock networks ({} DCCA{cells}, {} DCSC, counting the DCCAs nextpnr adds for clocks of 5 or more users and for DCSC inputs) but the {} has {GLOBAL_NETWORKS}; nextpnr-ecp5 cannot route the 17th",
                packed.used.get("DCCA").copied().unwrap_or(0),
                packed.used.get("DCSC").copied().unwrap_or(0),
                device.name
            ),
            Location { cell: first, ..at() },
        ));
    }
    // Cells no bel takes: nextpnr's report lists their types with none available.
    for (cell_type, used) in &packed.unsupported {
        rows.push(Utilization { resource: cell_type.clone(), used: *used, available: 0 });
    }
    let ios = packed.used.get("TRELLIS_IO").copied().unwrap_or(0);
    let pins = package.pins.len() as u32;
    rows.push(Utilization { resource: PACKAGE_PINS.to_owned(), used: ios, available: pins });
    if ios > pins && ios <= device.available("TRELLIS_IO") {
        findings.push(Finding::error(
            "IO_EXCEEDS_PACKAGE",
            format!("the design needs {ios} IO pins but the {} {} package bonds out {pins}", device.name, package.name),
            at(),
        ));
    }
    let ports = ports::PortBits::new(module);
    for (ci, port) in &packed.unplaced_iologic {
        let cell = &module.cells[*ci];
        let what = match port {
            None => "its pad port reaches no top-level port".to_owned(),
            Some(bit) => format!("port '{}' has no LOCATE COMP", ports.display(*bit)),
        };
        findings.push(Finding::error(
            "IOLOGIC_PIN_UNCONSTRAINED",
            format!(
                "cell '{}' ({}) is IO logic, which nextpnr-ecp5 can use only on a placed pin, and {what}",
                short_name(&cell.name),
                cell.cell_type
            ),
            Location { cell: Some(cell.name.clone().into_owned()), ..at() },
        ));
    }
    for &ci in &packed.unknown_cells {
        let cell = &module.cells[ci];
        if cell.cell_type == "CCU2C" {
            findings.push(Finding::error(
                "CELL_TYPE_UNSUPPORTED",
                format!(
                    "carry '{}' reads a COUT that also feeds another carry's CIN; nextpnr-ecp5 follows one carry chain and leaves this CCU2C unpacked, which it cannot place",
                    short_name(&cell.name)
                ),
                Location { cell: Some(cell.name.clone().into_owned()), ..at() },
            ));
            continue;
        }
        findings.push(Finding::error(
            "CELL_TYPE_UNSUPPORTED",
            format!(
                "cell '{}' is a {}, which nextpnr-ecp5 does not support: no ECP5 bel takes it (is the netlist from synth_ecp5?)",
                short_name(&cell.name),
                short_name(&cell.cell_type)
            ),
            Location { cell: Some(cell.name.clone().into_owned()), ..at() },
        ));
    }
    (rows, findings)
}
