//! Resource checks: packs the design as nextpnr-ice40 would and compares every resource with
//! the device's capacity and the package's pins.
//!
//! Codes: `RESOURCE_OVER_CAPACITY`, `RESOURCE_ABSENT`, `IO_EXCEEDS_PACKAGE`, `CELL_TYPE_UNSUPPORTED` (an
//! iCE40 library cell nextpnr-ice40 0.4 rejects), `CELL_TYPE_UNKNOWN`.

use std::collections::{HashMap, HashSet};

use crate::budget::Deadline;
use crate::device::{Device, Package};
use crate::netlist::Module;
use crate::netlist::{bit_names, Bit};
use crate::pack::pack_placed;
use crate::report::{short_name, Finding, Location, Utilization};

/// How many cells a resource finding names before it says how many more there are.
const MAX_NAMED: usize = 4;

/// The extra utilisation row for bonded pins; nextpnr's own `SB_IO` row counts die pads.
pub const PACKAGE_PINS: &str = "PACKAGE_PIN";

/// Utilisation rows (nextpnr's resources, then [`PACKAGE_PINS`]) and resource findings.
pub fn check(
    device: &Device,
    package: &Package,
    module: &Module<'_>,
    file: Option<&str>,
) -> (Vec<Utilization>, Vec<Finding>) {
    // Without a deadline there is nothing to run out of.
    check_within(device, package, module, None, file, &Deadline::default()).unwrap_or_default()
}

/// [`check`], or `None` once `deadline` has passed. With the PCF, global buffers fed from IO
/// are counted on the networks of their pins, as nextpnr packs them.
pub(crate) fn check_within(
    device: &Device,
    package: &Package,
    module: &Module<'_>,
    pcf: Option<&str>,
    file: Option<&str>,
    deadline: &Deadline,
) -> Option<(Vec<Utilization>, Vec<Finding>)> {
    let networks = pcf.map(|text| gb_io_networks(package, module, text)).unwrap_or_default();
    let packed = pack_placed(module, device, &networks, deadline)?;
    let at = || Location { file: file.map(str::to_owned), ..Location::default() };
    let mut rows: Vec<Utilization> = device
        .capacities()
        .into_iter()
        .map(|(r, available)| Utilization {
            resource: r.to_owned(),
            used: packed.used.get(r).copied().unwrap_or(0),
            available,
        })
        .collect();
    let mut findings = Vec::new();
    // The cells behind a hard resource, for the message, and the first one that does not fit.
    let named = |r: &str, fit: u32| -> (String, Option<String>) {
        let Some(cells) = packed.hard_cells.get(r) else { return (String::new(), None) };
        let names: Vec<String> =
            cells.iter().take(MAX_NAMED).map(|ci| format!("'{}'", short_name(&module.cells[*ci].name))).collect();
        let more = cells.len().saturating_sub(MAX_NAMED);
        let list = if more > 0 { format!("{} and {more} more", names.join(", ")) } else { names.join(", ") };
        let first_extra = cells.get(fit as usize).map(|ci| short_name(&module.cells[*ci].name).into_owned());
        (format!(" ({list})"), first_extra)
    };
    for (r, used) in &packed.used {
        if *used > 0 && !rows.iter().any(|u| u.resource == *r) {
            let (cells, first) = named(r, 0);
            findings.push(Finding::error(
                "RESOURCE_ABSENT",
                format!("the design uses {used} {r}{cells} but the {} has none", device.name),
                Location { cell: first, ..at() },
            ));
            rows.push(Utilization { resource: (*r).to_owned(), used: *used, available: 0 });
        }
    }
    for u in &rows {
        if u.available > 0 && u.used > u.available {
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
    let ios = packed.used.get("SB_IO").copied().unwrap_or(0);
    let pins = package.pins.len() as u32;
    rows.push(Utilization { resource: PACKAGE_PINS.to_owned(), used: ios, available: pins });
    if ios > pins {
        // nextpnr counts die pads here and only fails at placement; we say so up front.
        findings.push(Finding::error(
            "IO_EXCEEDS_PACKAGE",
            format!("the design needs {ios} IO pins but the {} {} package bonds out {pins}", device.name, package.name),
            at(),
        ));
    }
    for &ci in &packed.unknown_cells {
        let cell = &module.cells[ci];
        let location = Location { cell: Some(cell.name.clone().into_owned()), ..at() };
        if cell.cell_type.starts_with("SB_") || cell.cell_type.starts_with("ICESTORM_") {
            // nextpnr-ice40 0.4 stops on these ("cell type … is unsupported"), even with
            // --pack-only: SB_IO_OD, SB_IO_I3C and SB_FILTER_50NS are in yosys's iCE40 library
            // but nextpnr has no bel or timing model for them.
            findings.push(Finding::error(
                "CELL_TYPE_UNSUPPORTED",
                format!(
                    "cell '{}' is a {}, which nextpnr-ice40 0.4 does not support (it has no site for it on any iCE40 device)",
                    short_name(&cell.name),
                    cell.cell_type
                ),
                location,
            ));
        } else {
            findings.push(Finding::warning(
                "CELL_TYPE_UNKNOWN",
                format!(
                    "cell type {} is not an iCE40 primitive nextpnr-ice40 knows; it is not counted",
                    cell.cell_type
                ),
                location,
            ));
        }
    }
    Some((rows, findings))
}

/// The global network of the pin each `SB_GB_IO`'s `PACKAGE_PIN` port is placed on, by the
/// port's net: the first `set_io` line naming the port wins, as in nextpnr. Empty (and the PCF
/// not read) when the design has no `SB_GB_IO`.
fn gb_io_networks(package: &Package, module: &Module<'_>, pcf: &str) -> HashMap<u32, u8> {
    let pads: HashSet<u32> = module
        .cells
        .iter()
        .filter(|c| c.cell_type == "SB_GB_IO")
        .filter_map(|c| match module.bit(c, "PACKAGE_PIN") {
            Some(Bit::Net(n)) => Some(n),
            _ => None,
        })
        .collect();
    if pads.is_empty() {
        return HashMap::new();
    }
    let mut net_of: HashMap<String, u32> = HashMap::new();
    for p in &module.ports {
        for (bit, name) in bit_names(&p.name, &p.bits, p.offset, p.upto) {
            if let Bit::Net(n) = bit {
                if pads.contains(&n) {
                    net_of.entry(name).or_insert(n);
                }
            }
        }
    }
    let (parsed, _) = crate::pcf::parse(pcf, None);
    let mut networks = HashMap::new();
    for io in &parsed.ios {
        let Some(net) = net_of.get(&io.port) else { continue };
        let network = package.pins.iter().find(|p| p.name == io.pin).and_then(|p| p.global_network);
        if let Some(network) = network {
            networks.entry(*net).or_insert(network);
        }
    }
    networks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::device;
    use crate::netlist::parse;

    fn run(dev: &str, netlist: &str) -> (Vec<Utilization>, Vec<Finding>) {
        let d = device(dev).unwrap();
        check(d, d.package("").unwrap(), &parse(netlist, None).unwrap(), None)
    }

    fn codes(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.code.as_str()).collect()
    }

    fn luts(n: usize, ports: &str) -> String {
        let cells: Vec<String> = (0..n)
            .map(|i| format!(r#""l{i}":{{"type":"SB_LUT4","port_directions":{{"I0":"input","O":"output"}},"connections":{{"I0":[2],"O":[{}]}}}}"#, i + 10))
            .collect();
        format!(r#"{{"modules":{{"top":{{"ports":{{{ports}}},"cells":{{{}}}}}}}}}"#, cells.join(","))
    }

    #[test]
    fn block_ram_on_lp384_is_resource_absent() {
        // nextpnr-ice40 0.4 crashes on this design (no RAM bels on the 384 die); we say why.
        let ram = r#"{"modules":{"top":{"ports":{},"cells":{"r":{"type":"SB_RAM40_4K","connections":{}}}}}}"#;
        let (rows, findings) = run("lp384", ram);
        assert_eq!(codes(&findings), ["RESOURCE_ABSENT"]);
        assert!(rows.iter().any(|u| u.resource == "ICESTORM_RAM" && u.used == 1 && u.available == 0));
    }

    #[test]
    fn more_logic_cells_than_the_die_has_is_over_capacity() {
        let (rows, findings) = run("lp384", &luts(400, ""));
        assert_eq!(codes(&findings), ["RESOURCE_OVER_CAPACITY"]);
        // 400 LUTs + the VCC driver nextpnr always adds.
        assert_eq!(rows.iter().find(|u| u.resource == "ICESTORM_LC").unwrap().used, 401);
    }

    #[test]
    fn more_ports_than_package_pins_is_io_exceeds_package() {
        // nextpnr only notices this at placement; pack-only passes. lp384 qn32 bonds 21 pins.
        let wide =
            r#""a":{"direction":"input","bits":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26]}"#;
        let (rows, findings) = run("lp384", &luts(0, wide));
        assert_eq!(codes(&findings), ["IO_EXCEEDS_PACKAGE"]);
        let pins = rows.iter().find(|u| u.resource == PACKAGE_PINS).unwrap();
        assert_eq!((pins.used, pins.available), (25, 21));
    }

    #[test]
    fn an_unknown_cell_type_is_a_warning_naming_the_cell() {
        let (_, findings) =
            run("hx8k", r#"{"modules":{"top":{"ports":{},"cells":{"m":{"type":"XC_DSP48","connections":{}}}}}}"#);
        assert_eq!(codes(&findings), ["CELL_TYPE_UNKNOWN"]);
        assert_eq!(findings[0].location.cell.as_deref(), Some("m"));
    }
}
