//! Global promotion as nextpnr-ice40 0.4 does it while packing: the busiest clock, reset and
//! enable nets get an `SB_GB` each until the 8 global buffers run out.

use super::{Graph, Kind, LcPort, Net, Owner};
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

/// Returns the promoted nets, in promotion order.
pub(crate) fn promote(g: &Graph, existing_gbs: u32) -> Vec<Net> {
    // Per use, each candidate net's fanout; `None` for nets that cannot be promoted (undriven,
    // constant, already global) or that were promoted already.
    let mut counts: [Vec<Option<u32>>; 3] = Default::default();
    for c in counts.iter_mut() {
        *c = vec![None; g.nets];
    }
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
                None => match u.owner {
                    Owner::Cell(ci) => hard_use(&g.module.cells[ci].cell_type, u.port),
                    Owner::TopPort => None,
                },
            };
            if let Some(kind) = usage {
                fanout[kind as usize] += 1;
            }
        }
        for (c, f) in counts.iter_mut().zip(fanout) {
            c[net] = Some(f);
        }
    }
    let gnd = gnd_fanout(g);
    if gnd.iter().any(|f| *f > 0) {
        for (c, f) in counts.iter_mut().zip(gnd) {
            c[g.vcc + 1] = Some(f);
        }
    }
    // The busiest net; ties go to the lowest net index.
    let best = |v: &[Option<u32>]| {
        v.iter().enumerate().fold((None, 0), |acc, (n, c)| match c {
            Some(c) if *c > acc.1 => (Some(n), *c),
            _ => acc,
        })
    };
    let mut promoted = Vec::new();
    let (mut resets, mut enables) = (0, 0);
    while (promoted.len() as u32) < GLOBALS.saturating_sub(existing_gbs) {
        let (clk, clk_n) = best(&counts[Use::Clock as usize]);
        let (rst, rst_n) = best(&counts[Use::Reset as usize]);
        let (cen, cen_n) = best(&counts[Use::Enable as usize]);
        let pick = if rst_n > clk_n && resets < MAX_RESETS && rst_n > FANOUT_THRESHOLD {
            resets += 1;
            rst
        } else if cen_n > clk_n && enables < MAX_ENABLES && cen_n > FANOUT_THRESHOLD {
            enables += 1;
            cen
        } else if clk_n > 0 {
            clk
        } else {
            break;
        };
        let Some(net) = pick else { break };
        for c in counts.iter_mut() {
            c[net] = None;
        }
        promoted.push(net);
    }
    promoted
}
