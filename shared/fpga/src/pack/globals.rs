//! Global promotion as nextpnr-ice40 0.4 does it while packing: the busiest clock, reset and
//! enable nets get an `SB_GB` each until the 8 global buffers run out.

use super::{Graph, LcPort, Net, Owner};

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
        ("SB_MAC16", "CLK") | ("SB_SPRAM256KA", "CLOCK") | ("SB_I2C" | "SB_SPI", "SBCLKI") => Some(Use::Clock),
        ("SB_MAC16", "IRSTTOP" | "IRSTBOT" | "ORSTTOP" | "ORSTBOT") => Some(Use::Reset),
        _ => None,
    }
}

/// Returns the promoted nets, in promotion order.
pub(crate) fn promote(g: &Graph, existing_gbs: u32) -> Vec<Net> {
    // Per use, each candidate net's fanout; `None` for nets that cannot be promoted (undriven,
    // constant, already global) or that were promoted already.
    let mut counts: [Vec<Option<u32>>; 3] = Default::default();
    for c in counts.iter_mut() {
        *c = vec![None; g.nets];
    }
    for net in 0..g.vcc {
        let Some((_, port)) = g.driver[net] else { continue };
        if port == "GLOBAL_BUFFER_OUTPUT" {
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
