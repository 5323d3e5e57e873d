//! Global promotion as nextpnr-ice40 0.4 does it while packing: the busiest clock, reset and
//! enable nets get an `SB_GB` each until the 8 global buffers run out.

use std::collections::HashMap;

use super::{Graph, Kind, LcPort, Net, Owner};
use crate::device::Device;
use crate::netlist::Bit;

/// Resets and enables promote only above this fanout; clocks promote at any fanout.
const FANOUT_THRESHOLD: u32 = 15;
const GLOBALS: u32 = 8;
const MAX_RESETS: u32 = 4;
const MAX_ENABLES: u32 = 4;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Clock,
    Reset,
    Enable,
}

/// What kind of global user a hard cell's input port is.
fn hard_use(cell_type: &str, port: &str) -> Option<Use> {
    match (cell_type, port) {
        (t, "RCLK" | "WCLK" | "RCLKN" | "WCLKN") if t.starts_with("SB_RAM40") => Some(Use::Clock),
        // Not SB_I2C/SB_SPI's SBCLKI: nextpnr 0.4 does not count it as a clock user.
        ("SB_MAC16", "CLK") | ("SB_SPRAM256KA", "CLOCK") => Some(Use::Clock),
        ("SB_MAC16", "IRSTTOP" | "IRSTBOT" | "ORSTTOP" | "ORSTBOT") => Some(Use::Reset),
        // nextpnr turns an SB_GB_IO into an SB_IO before promoting globals.
        ("SB_IO" | "SB_GB_IO", "INPUT_CLK" | "OUTPUT_CLK") => Some(Use::Clock),
        _ => None,
    }
}

/// What kind of global user a flip-flop's port is.
fn ff_use(port: &str) -> Option<Use> {
    match port {
        "C" => Some(Use::Clock),
        "R" | "S" => Some(Use::Reset),
        "E" => Some(Use::Enable),
        _ => None,
    }
}

/// Whether a net already is global, as nextpnr sees it when it promotes: driven by a global
/// buffer, which by then also drives a PLL's used global outputs and an oscillator's clock
/// unless that is routed through the fabric.
fn is_global(g: &Graph, net: Net) -> bool {
    match g.driver[net] {
        Some((Owner::Cell(ci), port)) => {
            let c = &g.module.cells[ci];
            match (c.cell_type.as_ref(), port) {
                (_, "GLOBAL_BUFFER_OUTPUT" | "PLLOUTGLOBAL" | "PLLOUTGLOBALA" | "PLLOUTGLOBALB") => true,
                ("SB_HFOSC", "CLKHF") | ("SB_LFOSC", "CLKLF") => !super::routes_through_fabric(g.module, c),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Fanout by use of nextpnr's constant-zero net: the flip-flop and hard-cell clock, reset and
/// enable ports tied to 0 (nextpnr cuts zero LUT and carry inputs, which are none of these).
fn gnd_fanout(g: &Graph) -> [u32; 3] {
    let m = g.module;
    let mut fanout = [0u32; 3];
    for (ci, c) in m.cells.iter().enumerate() {
        for conn in m.connections(c).iter().filter(|conn| !conn.output) {
            let usage = if g.kinds[ci] == Kind::Ff { ff_use(&conn.port) } else { hard_use(&c.cell_type, &conn.port) };
            if let Some(kind) = usage {
                fanout[kind as usize] += m.bits(conn).iter().filter(|b| **b == Bit::Zero).count() as u32;
            }
        }
    }
    fanout
}

/// How many of the 4 reset and 4 enable globals the existing global buffers use up, as nextpnr
/// counts them before promoting: a placed buffer (beside an `SB_GB_IO` or an oscillator) by
/// its network, even for a reset and odd for an enable; a netlist `SB_GB` by its first user
/// that is a reset or an enable. PLL global outputs are not counted: which network they take
/// depends on the PLL site, which packing does not know.
pub(crate) fn taken_networks(g: &Graph, device: &Device, gb_io_networks: &HashMap<u32, u8>) -> (u32, u32) {
    let m = g.module;
    let (mut resets, mut enables) = (0, 0);
    let mut count = |network: u8| {
        if network.is_multiple_of(2) {
            resets += 1;
        } else {
            enables += 1;
        }
    };
    for (ci, c) in m.cells.iter().enumerate() {
        match c.cell_type.as_ref() {
            "SB_GB_IO" => {
                let network = match m.bit(c, "PACKAGE_PIN") {
                    Some(Bit::Net(n)) => gb_io_networks.get(&n).copied(),
                    _ => None,
                };
                network.into_iter().for_each(&mut count);
            }
            t @ ("SB_HFOSC" | "SB_LFOSC") if !super::routes_through_fabric(m, c) => {
                device.oscillators.iter().filter(|o| o.cell == t).take(1).for_each(|o| count(o.global_network));
            }
            "SB_GB" => {
                let Some(out) = m.bit(c, "GLOBAL_BUFFER_OUTPUT").and_then(|b| g.net_of(b)) else { continue };
                let first = g.users(out).iter().find_map(|u| match g.lc_port(u) {
                    Some((_, LcPort::Sr)) => Some(Use::Reset),
                    Some((_, LcPort::Cen)) => Some(Use::Enable),
                    Some(_) => None,
                    None => match u.owner() {
                        Owner::Cell(user) if user != ci => {
                            hard_use(&m.cells[user].cell_type, g.port(u)).filter(|k| *k != Use::Clock)
                        }
                        _ => None,
                    },
                });
                match first {
                    // As if on an even (reset) or odd (enable) network.
                    Some(Use::Reset) => count(0),
                    Some(Use::Enable) => count(1),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    (resets, enables)
}

/// Returns the promoted nets, in promotion order. `taken` is what [`taken_networks`] says the
/// existing buffers use of the reset and enable budgets.
pub(crate) fn promote(g: &Graph, existing_gbs: u32, taken: (u32, u32)) -> Vec<Net> {
    // The nets that can be promoted (not undriven, constant or already global) and that some
    // clock, reset or enable uses, in net order, with their fanout by use. Only these can win a
    // round below, so the rounds look at them alone, not at every net.
    let mut candidates: Vec<(Net, [u32; 3])> = Vec::new();
    // Every driven net, and nextpnr's constant nets (VCC, then GND), which its packer drives.
    for net in 0..=g.vcc {
        if net < g.vcc && (g.driver[net].is_none() || is_global(g, net)) {
            continue;
        }
        let mut fanout = [0u32; 3];
        for u in g.users(net) {
            let usage = match g.lc_port(u) {
                Some((_, LcPort::Clk)) => Some(Use::Clock),
                Some((_, LcPort::Sr)) => Some(Use::Reset),
                Some((_, LcPort::Cen)) => Some(Use::Enable),
                Some(_) => None,
                None => match u.owner() {
                    Owner::Cell(ci) => hard_use(&g.module.cells[ci].cell_type, g.port(u)),
                    Owner::TopPort => None,
                },
            };
            if let Some(kind) = usage {
                fanout[kind as usize] += 1;
            }
        }
        if fanout.iter().any(|f| *f > 0) {
            candidates.push((net, fanout));
        }
    }
    let gnd = gnd_fanout(g);
    if gnd.iter().any(|f| *f > 0) {
        candidates.push((g.vcc + 1, gnd));
    }
    // The busiest net for a use; ties go to the lowest net index.
    let best = |candidates: &[(Net, [u32; 3])], usage: Use| {
        candidates.iter().fold((None, 0), |acc, (net, fanout)| match fanout[usage as usize] {
            f if f > acc.1 => (Some(*net), f),
            _ => acc,
        })
    };
    let mut promoted = Vec::new();
    let (mut resets, mut enables) = (0, 0);
    while (promoted.len() as u32) < GLOBALS.saturating_sub(existing_gbs) {
        let (clk, clk_n) = best(&candidates, Use::Clock);
        let (rst, rst_n) = best(&candidates, Use::Reset);
        let (cen, cen_n) = best(&candidates, Use::Enable);
        let pick = if rst_n > clk_n && resets < MAX_RESETS.saturating_sub(taken.0) && rst_n > FANOUT_THRESHOLD {
            resets += 1;
            rst
        } else if cen_n > clk_n && enables < MAX_ENABLES.saturating_sub(taken.1) && cen_n > FANOUT_THRESHOLD {
            enables += 1;
            cen
        } else if clk_n > 0 {
            clk
        } else {
            break;
        };
        let Some(net) = pick else { break };
        candidates.retain(|(n, _)| *n != net);
        promoted.push(net);
    }
    promoted
}
