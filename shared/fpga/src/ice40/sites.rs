//! Hard-IP and IO sites as nextpnr-ice40 0.4 assigns them once the PCF has placed the IO:
//! which PLL site each PLL takes (`place_plls` in its packer), which pins a global buffer fed
//! from IO can sit on, the rules for the two pads of one IO tile (`isBelLocationValid`), and the
//! fixed sites of the UltraPlus I2C and SPI blocks.
//!
//! Codes, each an error because nextpnr stops on it:
//! - `PLL_PAD_PIN_INVALID`: a PAD PLL reads a pin that is not the input pad of a PLL usable in
//!   the package (a PLL the package does not bond out is `LOCKED` in the chip database);
//! - `PLL_PAD_NOT_FROM_PIN`: a PAD PLL's `PACKAGEPIN` is not a top-level input used by it alone;
//! - `PLL_SITE_TAKEN`: two PAD PLLs need the same PLL site;
//! - `PLL_OUTPUT_PAD_CONFLICT`: an input IO sits on the pad a two-output PAD PLL drives (output B);
//! - `PLL_NO_SITE`: a CORE PLL finds no free PLL site whose output pads carry no input IO;
//! - `GB_IO_PIN_NOT_GLOBAL`, `GB_IO_UNCONSTRAINED`: an `SB_GB_IO` off a global-buffer input pin;
//! - `IO_PAIR_CONFLICT`: the two pads of an IO tile disagree on LVDS or on their shared clocks;
//! - `HARD_IP_SITE_INVALID`, `HARD_IP_SITE_TAKEN`: an `SB_I2C`/`SB_SPI` `BUS_ADDR74` that names
//!   no block, or a block two cells name;
//! - `LED_DRIVER_OUTPUT_SHARED`, `LED_DRIVER_UNPOWERED`: an LED driver's pad output read by
//!   logic, an `SB_RGB_DRV` without an `SB_LED_DRV_CUR`;
//! - `OSC_FABRIC_UNSUPPORTED`: an oscillator routed through the fabric where nextpnr has no
//!   such route (the u4k die's `SB_HFOSC`).

use std::collections::HashMap;

use crate::budget::Deadline;
use crate::design_view::{BitName, Names};
use crate::device::{Device, Package, Pin, PllSite};
use crate::netlist::{Bit, Direction, Module, Param};
use crate::pll::param_u32;
use crate::report::{short_name, Finding, Location};

/// One IO cell as nextpnr has it after packing IO: an `SB_IO` or `SB_GB_IO` of the netlist, or
/// the `SB_IO` nextpnr inserts for a top-level port bit that has none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IoCell {
    /// The cell's name as nextpnr prints it (`io0`, or `clk$sb_io` for an inserted one).
    pub cell: String,
    pub cell_type: &'static str,
    /// The top-level port bit on its pad.
    pub port: Option<BitName>,
    /// Used as an input, as nextpnr's PLL placer asks it: `D_IN_0` or `D_IN_1` reaches a user,
    /// or it is an `SB_GB_IO`.
    pub input: bool,
    pub pin_type: u32,
    /// `IO_STANDARD` is `SB_LVDS_INPUT`.
    pub lvds: bool,
    /// The nets on `INPUT_CLK`, `OUTPUT_CLK` and `CLOCK_ENABLE`.
    pub clocks: [Option<Bit>; 3],
}

/// One `SB_PLL40_*` cell, as the PLL placer sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PllCell {
    pub cell: String,
    pub cell_type: String,
    /// PAD variants: the top-level port bit whose `SB_IO` feeds `PACKAGEPIN`, if it is one.
    pub pad: Option<BitName>,
    /// PAD variants: `PACKAGEPIN` comes from a pin and nothing else uses that signal.
    pub pad_ok: bool,
}

impl PllCell {
    fn is_pad(&self) -> bool {
        self.cell_type.ends_with("_PAD")
    }

    /// The variants with two outputs, whose output B takes the second pad.
    fn is_dual(&self) -> bool {
        self.cell_type.contains("_2")
    }
}

/// An `SB_I2C` or `SB_SPI`, placed by its `BUS_ADDR74` parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BusCell {
    pub cell: String,
    pub cell_type: String,
    pub addr: String,
}

/// An oscillator whose clock is routed through the fabric (`ROUTE_THROUGH_FABRIC`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FabricOsc {
    pub cell: String,
    pub cell_type: String,
}

/// An LED driver (`SB_RGBA_DRV`, `SB_RGB_DRV`) and what nextpnr checks of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LedDriver {
    pub cell: String,
    pub cell_type: String,
    /// The first of `RGB0`..`RGB2` whose signal also reaches a cell: those outputs drive their
    /// pads directly and nothing else.
    pub shared_output: Option<&'static str>,
    /// `SB_RGB_DRV`: `RGBPU` comes from an `SB_LED_DRV_CUR`'s `LEDPU`.
    pub powered: bool,
}

/// What the site checks need from the netlist.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sites {
    pub ios: Vec<IoCell>,
    pub plls: Vec<PllCell>,
    pub buses: Vec<BusCell>,
    pub fabric_oscs: Vec<FabricOsc>,
    pub led_drivers: Vec<LedDriver>,
}

/// `SB_IO` pin types (nextpnr's `_io_pintype_need_clk_*`): which of the tile's shared clock
/// and clock-enable nets the pad's registers use.
fn needs_clk_in(pin_type: u32) -> bool {
    pin_type & 0x01 == 0
}

fn needs_clk_out(pin_type: u32) -> bool {
    pin_type & 0x30 == 0x30 || (pin_type & 0x3c != 0 && pin_type & 0x0c != 0x08)
}

fn needs_clk_en(pin_type: u32) -> bool {
    needs_clk_in(pin_type) || needs_clk_out(pin_type)
}

/// Reads the sites view from the top module. `port_bits` are the top-level port bits in order,
/// each with its net and name; `port_of` maps a port's net to the first such name. Linear in
/// the module's size.
pub(crate) fn sites_view(
    module: &Module<'_>,
    names: &Names<'_>,
    port_bits: &[(Bit, BitName, Direction)],
    port_of: &HashMap<Bit, BitName>,
    deadline: &Deadline,
) -> Option<Sites> {
    // How many cell inputs and output ports use the nets the checks ask about (an SB_IO's D_IN,
    // which nextpnr disconnects when nothing reads it; a PAD PLL's PACKAGEPIN; an LED driver's
    // pad outputs). Only those nets are counted, and none when the design has no such cell, so
    // designs without hard IP pay one pass over the cells' types.
    let asked = |c: &crate::netlist::Cell<'_>| -> &'static [&'static str] {
        match c.cell_type.as_ref() {
            "SB_IO" | "SB_GB_IO" => &["D_IN_0", "D_IN_1"],
            "SB_RGBA_DRV" | "SB_RGB_DRV" => &["RGB0", "RGB1", "RGB2"],
            t if t.starts_with("SB_PLL40_") => &["PACKAGEPIN"],
            _ => &[],
        }
    };
    let mut users: HashMap<Bit, u32> = module
        .cells
        .iter()
        .flat_map(|c| asked(c).iter().filter_map(|p| module.bit(c, p)))
        .filter(|b| matches!(b, Bit::Net(_)))
        .map(|b| (b, 0))
        .collect();
    if !users.is_empty() {
        for c in &module.cells {
            for conn in module.connections(c).iter().filter(|conn| !conn.output) {
                for b in module.bits(conn) {
                    if let Some(n) = users.get_mut(b) {
                        *n += 1;
                    }
                }
            }
        }
    }
    // Cells reading a net, top-level ports aside, for the LED drivers' pad outputs.
    let cell_users = users.clone();
    let led_power: std::collections::HashSet<Bit> = module
        .cells
        .iter()
        .filter(|c| c.cell_type == "SB_LED_DRV_CUR")
        .filter_map(|c| module.bit(c, "LEDPU"))
        .filter(|b| matches!(b, Bit::Net(_)))
        .collect();
    if !users.is_empty() {
        for p in module.ports.iter().filter(|p| p.direction != Direction::Input) {
            for b in &p.bits {
                if let Some(n) = users.get_mut(b) {
                    *n += 1;
                }
            }
        }
    }
    let used = |b: Option<Bit>| b.is_some_and(|b| matches!(b, Bit::Net(_)) && users.get(&b).copied().unwrap_or(0) > 0);
    let text = |c, name: &str| match module.parameter(c, name) {
        Some(Param::Text(t)) => Some(t.trim_end().to_owned()),
        _ => None,
    };
    // The netlist's IO cells by the net on their D_IN_0, for PAD PLLs fed through one.
    let io_by_input: HashMap<Bit, usize> = module
        .cells
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c.cell_type.as_ref(), "SB_IO" | "SB_GB_IO"))
        .filter_map(|(i, c)| module.bit(c, "D_IN_0").map(|b| (b, i)))
        .collect();
    let mut sites = Sites::default();
    let mut owned: std::collections::HashSet<Bit> = std::collections::HashSet::new();
    for c in &module.cells {
        let t = c.cell_type.as_ref();
        match t {
            "SB_IO" | "SB_GB_IO" => {
                let pad = module.bit(c, "PACKAGE_PIN");
                owned.extend(pad);
                let global = t == "SB_GB_IO";
                sites.ios.push(IoCell {
                    cell: c.name.clone().into_owned(),
                    cell_type: if global { "SB_GB_IO" } else { "SB_IO" },
                    port: pad.and_then(|b| port_of.get(&b).copied()),
                    input: global || used(module.bit(c, "D_IN_0")) || used(module.bit(c, "D_IN_1")),
                    pin_type: module.parameter(c, "PIN_TYPE").as_ref().and_then(param_u32).unwrap_or(0),
                    lvds: text(c, "IO_STANDARD").as_deref() == Some("SB_LVDS_INPUT"),
                    clocks: ["INPUT_CLK", "OUTPUT_CLK", "CLOCK_ENABLE"]
                        .map(|p| module.bit(c, p).filter(|b| *b != Bit::Undriven)),
                });
            }
            "SB_IO_OD" => owned.extend(module.bit(c, "PACKAGEPIN")),
            "SB_IO_I3C" => owned.extend(module.bit(c, "PACKAGE_PIN")),
            "SB_RGBA_DRV" | "SB_RGB_DRV" => {
                owned.extend(["RGB0", "RGB1", "RGB2"].iter().filter_map(|p| module.bit(c, p)));
                let shared_output = ["RGB0", "RGB1", "RGB2"].into_iter().find(|p| {
                    module
                        .bit(c, p)
                        .is_some_and(|b| matches!(b, Bit::Net(_)) && cell_users.get(&b).is_some_and(|n| *n > 0))
                });
                sites.led_drivers.push(LedDriver {
                    cell: c.name.clone().into_owned(),
                    cell_type: t.to_owned(),
                    shared_output,
                    powered: t == "SB_RGBA_DRV" || module.bit(c, "RGBPU").is_some_and(|b| led_power.contains(&b)),
                });
            }
            "SB_HFOSC" | "SB_LFOSC" if crate::pack::routes_through_fabric(module, c) => {
                sites.fabric_oscs.push(FabricOsc { cell: c.name.clone().into_owned(), cell_type: t.to_owned() })
            }
            "SB_I2C" | "SB_SPI" => sites.buses.push(BusCell {
                cell: c.name.clone().into_owned(),
                cell_type: t.to_owned(),
                addr: text(c, "BUS_ADDR74")
                    .unwrap_or_else(|| (if t == "SB_I2C" { "0b0001" } else { "0b0000" }).to_owned()),
            }),
            _ if t.starts_with("SB_PLL40_") => {
                let pin = module.bit(c, "PACKAGEPIN");
                // The pad's SB_IO: nextpnr's own for a top-level input, or the netlist's.
                let from_io = |b: Bit| io_by_input.get(&b).map(|i| &module.cells[*i]);
                let (pad, pad_ok) = match pin {
                    Some(b @ Bit::Net(_)) => match (port_of.get(&b), from_io(b)) {
                        (Some(port), None) => (Some(*port), users.get(&b).copied() == Some(1)),
                        (None, Some(io)) => (
                            module.bit(io, "PACKAGE_PIN").and_then(|p| port_of.get(&p).copied()),
                            users.get(&b).copied() == Some(1),
                        ),
                        _ => (None, false),
                    },
                    _ => (None, false),
                };
                sites.plls.push(PllCell { cell: c.name.clone().into_owned(), cell_type: t.to_owned(), pad, pad_ok });
            }
            _ => {}
        }
    }
    // nextpnr's own SB_IO for every top-level port bit no IO cell or LED driver owns: one name
    // each, so millions of bits take seconds, within the budget like the rest.
    for (i, (b, port, direction)) in port_bits.iter().enumerate() {
        if i.is_multiple_of(4096) && deadline.passed() {
            return None;
        }
        if owned.contains(b) {
            continue;
        }
        let input = *direction != Direction::Output;
        sites.ios.push(IoCell {
            cell: format!("{}$sb_io", names.display(*port)),
            cell_type: "SB_IO",
            port: Some(*port),
            input,
            pin_type: if input { 1 } else { 0b011001 },
            lvds: false,
            clocks: [None; 3],
        });
    }
    Some(sites)
}

/// Runs every site check. `pins` maps each placed port bit to its `set_io` port text and pin.
pub(crate) fn check(
    device: &Device,
    package: &Package,
    sites: &Sites,
    names: &Names<'_>,
    pins: &HashMap<BitName, (&str, &'static Pin)>,
    file: Option<&str>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let at = |cell: &str, pin: Option<&Pin>, port: Option<BitName>| Location {
        file: file.map(str::to_owned),
        cell: Some(short_name(cell).into_owned()),
        pin: pin.map(|p| p.name.to_owned()),
        port: port.map(|p| names.display(p)),
        ..Location::default()
    };
    let pin_of = |port: Option<BitName>| port.and_then(|p| pins.get(&p)).map(|(_, pin)| *pin);
    let xyz = |p: &Pin| (p.x, p.y, p.z);
    let pin_name = |site: (u8, u8, u8)| {
        package
            .pins
            .iter()
            .find(|p| xyz(p) == site)
            .map_or_else(|| "an unbonded pad".to_owned(), |p| format!("pin {}", p.name))
    };
    gb_ios(sites, package, &mut findings, &at, &pin_of);
    io_pairs(sites, &mut findings, &at, &pin_of, &xyz);
    plls(device, package, sites, &mut findings, &at, &pin_of, &pin_name);
    buses(device, sites, &mut findings, &at);
    led_drivers_and_oscillators(device, sites, &mut findings, &at);
    findings
}

/// LED drivers drive their pads and nothing else, and `SB_RGB_DRV` takes its current from an
/// `SB_LED_DRV_CUR`; an oscillator routed through the fabric needs the fabric output nextpnr
/// knows for that die.
fn led_drivers_and_oscillators(device: &Device, sites: &Sites, findings: &mut Vec<Finding>, at: &At<'_>) {
    for led in &sites.led_drivers {
        if let Some(port) = led.shared_output {
            findings.push(Finding::error(
                "LED_DRIVER_OUTPUT_SHARED",
                format!(
                    "{} '{}' output {port} drives its LED pad directly; its signal cannot also reach other cells",
                    led.cell_type,
                    short_name(&led.cell)
                ),
                at(&led.cell, None, None),
            ));
        }
        if !led.powered {
            findings.push(Finding::error(
                "LED_DRIVER_UNPOWERED",
                format!(
                    "SB_RGB_DRV '{}' needs RGBPU driven by the LEDPU output of an SB_LED_DRV_CUR",
                    short_name(&led.cell)
                ),
                at(&led.cell, None, None),
            ));
        }
    }
    for osc in &sites.fabric_oscs {
        let known = device.oscillators.iter().find(|o| o.cell == osc.cell_type);
        if known.is_some_and(|o| !o.fabric_output) {
            findings.push(Finding::error(
                "OSC_FABRIC_UNSUPPORTED",
                format!(
                    "{} '{}' routes its clock through the fabric (ROUTE_THROUGH_FABRIC), but nextpnr-ice40 0.4 finds no fabric output for it on the {}; drive a global buffer instead",
                    osc.cell_type,
                    short_name(&osc.cell),
                    device.name
                ),
                at(&osc.cell, None, None),
            ));
        }
    }
}

/// An IO cell and the pin it is placed on.
type Placed<'a> = (&'a IoCell, &'static Pin);
type At<'a> = dyn Fn(&str, Option<&Pin>, Option<BitName>) -> Location + 'a;
type PinOf<'a> = dyn Fn(Option<BitName>) -> Option<&'static Pin> + 'a;

/// An `SB_GB_IO` drives the global network of its pad, so the pad must be a global-buffer input.
fn gb_ios(sites: &Sites, package: &Package, findings: &mut Vec<Finding>, at: &At<'_>, pin_of: &PinOf<'_>) {
    for io in sites.ios.iter().filter(|io| io.cell_type == "SB_GB_IO") {
        match pin_of(io.port) {
            None => findings.push(Finding::error(
                "GB_IO_UNCONSTRAINED",
                format!(
                    "SB_GB_IO '{}' has no pin: nextpnr-ice40 places a global buffer fed from IO only on the pin a set_io gives it",
                    short_name(&io.cell)
                ),
                at(&io.cell, None, io.port),
            )),
            Some(pin) if !pin.global_buffer => {
                let gbins: Vec<&str> = package.pins.iter().filter(|p| p.global_buffer).map(|p| p.name).collect();
                findings.push(Finding::error(
                    "GB_IO_PIN_NOT_GLOBAL",
                    format!(
                        "SB_GB_IO '{}' is on pin {}, which has no global buffer connection; in {} only pins {} drive a global network",
                        short_name(&io.cell),
                        pin.name,
                        package.name,
                        gbins.join(", ")
                    ),
                    at(&io.cell, Some(pin), io.port),
                ));
            }
            Some(_) => {}
        }
    }
}

/// The two pads of an IO tile share their clock and clock-enable nets, and an LVDS input takes
/// both pads (it must be pad 0).
fn io_pairs(
    sites: &Sites,
    findings: &mut Vec<Finding>,
    at: &At<'_>,
    pin_of: &PinOf<'_>,
    xyz: &dyn Fn(&Pin) -> (u8, u8, u8),
) {
    let mut tiles: HashMap<(u8, u8), [Option<Placed<'_>>; 2]> = HashMap::new();
    for io in &sites.ios {
        if let Some(pin) = pin_of(io.port) {
            let (x, y, z) = xyz(pin);
            let slot = &mut tiles.entry((x, y)).or_default()[usize::from(z.min(1))];
            // Two cells on one pad are PIN_DOUBLE_ASSIGNED already.
            slot.get_or_insert((io, pin));
        }
    }
    let mut tiles: Vec<_> = tiles.into_iter().collect();
    tiles.sort_unstable_by_key(|(tile, _)| *tile);
    for (_, pads) in tiles {
        for (io, pin) in pads.iter().flatten() {
            if io.lvds && pin.z != 0 {
                findings.push(Finding::error(
                    "IO_PAIR_CONFLICT",
                    format!(
                        "'{}' is an LVDS input (IO_STANDARD SB_LVDS_INPUT) on pin {}, the second pad of its IO tile; an LVDS pair must be placed on the tile's first pad",
                        short_name(&io.cell),
                        pin.name
                    ),
                    at(&io.cell, Some(pin), io.port),
                ));
            }
        }
        let [Some((a, pa)), Some((b, pb))] = pads else { continue };
        let rule = if a.lvds || b.lvds {
            let (lvds, other) = if a.lvds { (a, b) } else { (b, a) };
            Some(format!(
                "'{}' is an LVDS input, which takes both pads of its IO tile, but '{}' is on the other pad",
                short_name(&lvds.cell),
                short_name(&other.cell)
            ))
        } else {
            let uses = |io: &IoCell| [needs_clk_in(io.pin_type), needs_clk_out(io.pin_type), needs_clk_en(io.pin_type)];
            let (ua, ub) = (uses(a), uses(b));
            (0..3)
                .find(|&i| {
                    // Each pad needs the shared net or connects one, and they differ: nextpnr's
                    // placer refuses a pad whose registers need it when the other needs or
                    // connects another, and its router fails on two nets connected to it.
                    let (na, nb) = (a.clocks[i].is_some(), b.clocks[i].is_some());
                    a.clocks[i] != b.clocks[i]
                        && (ua[i] || na)
                        && (ub[i] || nb)
                })
                .map(|i| {
                    let port = ["INPUT_CLK", "OUTPUT_CLK", "CLOCK_ENABLE"][i];
                    format!(
                        "'{}' (PIN_TYPE {:06b}) and '{}' (PIN_TYPE {:06b}) share one IO tile, whose two pads share {port}, but they connect different nets to it",
                        short_name(&a.cell),
                        a.pin_type,
                        short_name(&b.cell),
                        b.pin_type
                    )
                })
        };
        if let Some(rule) = rule {
            findings.push(Finding::error(
                "IO_PAIR_CONFLICT",
                format!("pins {} and {}: {rule}", pa.name, pb.name),
                at(&b.cell, Some(pb), b.port),
            ));
        }
    }
}

/// nextpnr-ice40 0.4's PLL placer: PAD PLLs go to the site whose output-A pad is their input pin;
/// then CORE PLLs (two-output ones first) take the first free site whose output pads carry no
/// input IO. A PLL the package does not bond out is no site at all.
#[allow(clippy::too_many_arguments)]
fn plls(
    device: &Device,
    package: &Package,
    sites: &Sites,
    findings: &mut Vec<Finding>,
    at: &At<'_>,
    pin_of: &PinOf<'_>,
    pin_name: &dyn Fn((u8, u8, u8)) -> String,
) {
    if sites.plls.is_empty() {
        return;
    }
    let usable: Vec<&PllSite> = device.plls.iter().filter(|s| s.usable_in(package.name)).collect();
    // Input IO by pad, as the placer scans them (placed ones only).
    let mut inputs: HashMap<(u8, u8, u8), &IoCell> = HashMap::new();
    for io in sites.ios.iter().filter(|io| io.input) {
        if let Some(pin) = pin_of(io.port) {
            inputs.entry((pin.x, pin.y, pin.z)).or_insert(io);
        }
    }
    let mut taken: Vec<Option<&PllCell>> = vec![None; usable.len()];
    let input_pads: Vec<String> = usable.iter().map(|s| pin_name(s.out_a)).collect();
    let input_pads = if input_pads.is_empty() {
        format!("{} bonds out no PLL", package.name)
    } else {
        format!("the PLL input pads are {}", input_pads.join(", "))
    };
    for pll in sites.plls.iter().filter(|p| p.is_pad()) {
        if !pll.pad_ok || pll.pad.is_none() {
            findings.push(Finding::error(
                "PLL_PAD_NOT_FROM_PIN",
                format!(
                    "{} '{}' must read PACKAGEPIN straight from a top-level input port that nothing else uses",
                    pll.cell_type,
                    short_name(&pll.cell)
                ),
                at(&pll.cell, None, pll.pad),
            ));
            continue;
        }
        let Some(pin) = pin_of(pll.pad) else {
            findings.push(Finding::error(
                "PLL_PAD_PIN_INVALID",
                format!(
                    "{} '{}' reads its input from a port with no pin; nextpnr places a PAD PLL only by its input pin, and in {} {input_pads}",
                    pll.cell_type,
                    short_name(&pll.cell),
                    package.name
                ),
                at(&pll.cell, None, pll.pad),
            ));
            continue;
        };
        let Some(site) = usable.iter().position(|s| s.out_a == (pin.x, pin.y, pin.z)) else {
            findings.push(Finding::error(
                "PLL_PAD_PIN_INVALID",
                format!(
                    "{} '{}' reads its input from pin {}, which is not a PLL input pad; in {} {input_pads}",
                    pll.cell_type,
                    short_name(&pll.cell),
                    pin.name,
                    package.name
                ),
                at(&pll.cell, Some(pin), pll.pad),
            ));
            continue;
        };
        if let Some(other) = taken[site] {
            findings.push(Finding::error(
                "PLL_SITE_TAKEN",
                format!(
                    "{} '{}' reads pin {}, so it needs the PLL site that '{}' already takes",
                    pll.cell_type,
                    short_name(&pll.cell),
                    pin.name,
                    short_name(&other.cell)
                ),
                at(&pll.cell, Some(pin), pll.pad),
            ));
            continue;
        }
        taken[site] = Some(pll);
    }
    // An input on the B pad of a placed two-output PAD PLL.
    for (site, pll) in usable.iter().zip(&taken) {
        let Some(pll) = pll.filter(|p| p.is_dual()) else { continue };
        if let Some(io) = inputs.get(&site.out_b) {
            let pin = pin_of(io.port);
            findings.push(Finding::error(
                "PLL_OUTPUT_PAD_CONFLICT",
                format!(
                    "{} '{}' drives its output B on {}, but '{}' uses that pad as an input",
                    pll.cell_type,
                    short_name(&pll.cell),
                    pin_name(site.out_b),
                    short_name(&io.cell)
                ),
                at(&io.cell, pin, io.port),
            ));
        }
    }
    for dual in [true, false] {
        for pll in sites.plls.iter().filter(|p| !p.is_pad() && p.is_dual() == dual) {
            let mut reasons = Vec::new();
            let found = usable.iter().enumerate().position(|(i, site)| {
                if let Some(other) = taken[i] {
                    reasons.push(format!(
                        "the PLL at {} is taken by '{}'",
                        pin_name(site.out_a),
                        short_name(&other.cell)
                    ));
                    return false;
                }
                for (pad, needed) in [(site.out_a, true), (site.out_b, pll.is_dual())] {
                    if let Some(io) = inputs.get(&pad).filter(|_| needed) {
                        reasons.push(format!(
                            "input '{}' is on {}, an output pad of that PLL",
                            short_name(&io.cell),
                            pin_name(pad)
                        ));
                        return false;
                    }
                }
                true
            });
            match found {
                Some(i) => taken[i] = Some(pll),
                None => {
                    if usable.is_empty() {
                        reasons.push(format!("{} has no PLL that the {} package bonds out", device.name, package.name));
                    }
                    findings.push(Finding::error(
                        "PLL_NO_SITE",
                        format!(
                            "{} '{}' cannot be placed: {}",
                            pll.cell_type,
                            short_name(&pll.cell),
                            reasons.join("; ")
                        ),
                        at(&pll.cell, None, None),
                    ));
                }
            }
        }
    }
}

/// `SB_I2C` and `SB_SPI` blocks sit where their `BUS_ADDR74` says. nextpnr-ice40 0.4 maps the
/// address to UltraPlus (5k die) coordinates whatever the device, so on a die whose block sits
/// elsewhere (the u4k die's I2C blocks) the cell has no site. A device without the block at all
/// is `RESOURCE_ABSENT` already.
fn buses(device: &Device, sites: &Sites, findings: &mut Vec<Finding>, at: &At<'_>) {
    /// (cell type, BUS_ADDR74, tile x, y and z, what it is).
    type BusSite = (&'static str, &'static str, (u8, u8, u8), &'static str);
    const SITES: [BusSite; 4] = [
        ("SB_SPI", "0b0000", (0, 0, 0), "the left SPI block"),
        ("SB_I2C", "0b0001", (0, 31, 0), "the left I2C block"),
        ("SB_SPI", "0b0010", (25, 0, 1), "the right SPI block"),
        ("SB_I2C", "0b0011", (25, 31, 0), "the right I2C block"),
    ];
    let mut taken: HashMap<&str, &BusCell> = HashMap::new();
    for bus in &sites.buses {
        let Some((_, _, xyz, site)) = SITES.iter().find(|(t, a, _, _)| *t == bus.cell_type && *a == bus.addr) else {
            let valid: Vec<&str> = SITES.iter().filter(|(t, ..)| *t == bus.cell_type).map(|(_, a, ..)| *a).collect();
            findings.push(Finding::error(
                "HARD_IP_SITE_INVALID",
                format!(
                    "{} '{}' has BUS_ADDR74 \"{}\", which names no {} block; it must be {}",
                    bus.cell_type,
                    short_name(&bus.cell),
                    bus.addr,
                    bus.cell_type,
                    valid.join(" or ")
                ),
                at(&bus.cell, None, None),
            ));
            continue;
        };
        let on_die = |t: &str| device.fixed_sites.iter().any(|(r, _)| *r == t);
        if on_die(&bus.cell_type) && !device.fixed_sites.contains(&(bus.cell_type.as_str(), *xyz)) {
            findings.push(Finding::error(
                "HARD_IP_SITE_INVALID",
                format!(
                    "{} '{}' has BUS_ADDR74 \"{}\", which nextpnr-ice40 0.4 places at tile ({}, {}) as on the UltraPlus die, but the {} has no {} there",
                    bus.cell_type,
                    short_name(&bus.cell),
                    bus.addr,
                    xyz.0,
                    xyz.1,
                    device.name,
                    bus.cell_type
                ),
                at(&bus.cell, None, None),
            ));
            continue;
        }
        if let Some(other) = taken.insert(site, bus) {
            findings.push(Finding::error(
                "HARD_IP_SITE_TAKEN",
                format!(
                    "{} '{}' and '{}' both have BUS_ADDR74 \"{}\", so both need {site}",
                    bus.cell_type,
                    short_name(&other.cell),
                    short_name(&bus.cell),
                    bus.addr
                ),
                at(&bus.cell, None, None),
            ));
        }
    }
}

#[cfg(test)]
mod tests;
