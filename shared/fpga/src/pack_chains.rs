//! Carry-chain legalisation (nextpnr-ice40's `constrain_chains`): chains are walked through
//! CIN/COUT (and a final COUT into the next LUT's I3), then split where a tile of 8 LCs cannot
//! share its flip-flop controls or a chain outgrows a column. Each split or fabric entry/exit
//! costs an extra LC (a feed-in or a pass-out). Returns how many such LCs were added.

use std::collections::HashSet;

use super::{Dff, Graph, Net};
use crate::device::Device;

/// What the tile check needs to know about one LC of a chain.
#[derive(Clone, Copy)]
struct TileCell {
    dff: Option<Dff>,
    inputs: usize,
}

const FEED: TileCell = TileCell { dff: None, inputs: 1 };

/// nextpnr's `logic_cells_compatible`: one clock/enable/reset set per tile and at most 32
/// local inputs (LUT inputs plus non-global control nets).
fn compatible(tile: &[TileCell], global: &HashSet<Net>) -> bool {
    let mut first: Option<Dff> = None;
    let mut locals = 0;
    for c in tile {
        if let Some(d) = c.dff {
            match first {
                None => {
                    first = Some(d);
                    locals += [d.cen, d.clk, d.sr].iter().filter(|n| n.is_some_and(|n| !global.contains(&n))).count();
                }
                Some(f) if f != d => return false,
                Some(_) => {}
            }
        }
        locals += c.inputs;
    }
    locals <= 32
}

pub(crate) fn legalise(g: &mut Graph, promoted: &[Net], device: &Device) -> u32 {
    let global: HashSet<Net> = promoted.iter().copied().chain((0..g.nets).filter(|n| {
        matches!(g.driver[*n], Some((_, "GLOBAL_BUFFER_OUTPUT")))
    })).collect();
    let cout_driver: std::collections::HashMap<Net, usize> =
        g.lcs.iter().enumerate().filter(|(_, l)| !l.gone).filter_map(|(i, l)| l.cout.map(|c| (c, i))).collect();
    let prev = |g: &Graph, lc: usize| g.lcs[lc].cin.and_then(|c| cout_driver.get(&c).copied());
    let next = |g: &Graph, lc: usize| {
        g.lcs[lc].cout.and_then(|c| g.only_drives(c, "CIN", false).or_else(|| g.only_drives(c, "I3", false)))
    };
    let mut chained = HashSet::new();
    let mut chains = Vec::new();
    for start in 0..g.lcs.len() {
        if g.lcs[start].gone || chained.contains(&start) {
            continue;
        }
        let mut first = start;
        let mut seen = HashSet::new();
        while let Some(p) = prev(g, first) {
            if !seen.insert(p) {
                break;
            }
            first = p;
        }
        // Cells join `chained` only once their chain is long enough to keep, so a chain's
        // last LUT (reached through I3) is not lost by being visited on its own first.
        let mut chain = Vec::new();
        let mut in_chain = HashSet::new();
        let mut cur = Some(first);
        while let Some(c) = cur {
            if !in_chain.insert(c) {
                break;
            }
            chain.push(c);
            cur = next(g, c);
        }
        if chain.len() >= 2 {
            chained.extend(chain.iter().copied());
            chains.push(chain);
        }
    }
    let max_len = (device.height as usize - 2) * 8 - 2;
    chains.iter().map(|c| split(g, c, max_len, &global)).sum()
}

/// nextpnr's `split_carry_chain`, counting the LCs it inserts.
fn split(g: &mut Graph, chain: &[usize], max_len: usize, global: &HashSet<Net>) -> u32 {
    let mut added = 0;
    let mut tile: Vec<TileCell> = Vec::new();
    let mut len = 0usize;
    let mut start = true;
    let mut i = 0;
    let mut cin_from_passout = false;
    while i < chain.len() {
        let lc = chain[i];
        if tile.len() >= 8 {
            tile.clear();
        }
        if start {
            tile.clear();
            len = 0;
            start = false;
            if g.lcs[lc].cin.is_some() || cin_from_passout {
                tile.push(FEED);
                len += 1;
                added += 1;
            }
            cin_from_passout = false;
        }
        let l = &g.lcs[lc];
        tile.push(TileCell { dff: l.dff, inputs: l.input_count() });
        len += 1;
        if !compatible(&tile, global) || len > max_len {
            // The cell is replaced by a pass-out and starts the next chain.
            tile.pop();
            added += 1;
            start = true;
            cin_from_passout = true;
            continue;
        }
        if let Some(cout) = g.lcs[lc].cout {
            let at_end = i == chain.len() - 1;
            let users = g.users(cout).len();
            if users > 1 || at_end {
                let i3 = g.only_drives(cout, "I3", false);
                let cin = g.only_drives(cout, "CIN", false);
                if users > 2 || i3 != cin || (at_end && g.only_drives(cout, "I3", true).is_none()) {
                    g.lcs[lc].cout = None;
                    tile.push(FEED);
                    len += 1;
                    added += 1;
                }
            }
        }
        i += 1;
    }
    added
}
