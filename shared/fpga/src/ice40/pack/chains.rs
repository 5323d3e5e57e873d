//! Carry-chain legalisation (nextpnr-ice40's `constrain_chains`): chains are walked through
//! CIN/COUT (and a final COUT into the next LUT's I3), then split where a tile of 8 LCs cannot
//! share its flip-flop controls or a chain outgrows a column. Each split or fabric entry/exit
//! costs an extra LC (a feed-in or a pass-out). Returns how many such LCs were added.

use super::{Dff, Graph, LcPort, Net};
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
fn compatible(tile: &[TileCell], global: &[bool]) -> bool {
    let mut first: Option<Dff> = None;
    let mut locals = 0;
    for c in tile {
        if let Some(d) = c.dff {
            match first {
                None => {
                    first = Some(d);
                    locals += [d.cen, d.clk, d.sr].iter().filter(|n| n.is_some_and(|n| !global[n])).count();
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
    let mut global = vec![false; g.nets];
    for n in promoted
        .iter()
        .copied()
        .chain((0..g.nets).filter(|n| matches!(g.driver[*n], Some((_, "GLOBAL_BUFFER_OUTPUT")))))
    {
        global[n] = true;
    }
    let mut cout_driver: Vec<Option<usize>> = vec![None; g.nets];
    for (i, l) in g.lcs.iter().enumerate().filter(|(_, l)| !l.gone) {
        if let Some(c) = l.cout {
            cout_driver[c] = Some(i);
        }
    }
    let [cin, i3] = g.first_lcs_on([LcPort::Cin, LcPort::I3]);
    let lc_on = LcOn { cin, i3 };
    let prev = |g: &Graph, lc: usize| g.lcs[lc].cin.and_then(|c| cout_driver[c]);
    let next = |g: &Graph, lc: usize| g.lcs[lc].cout.and_then(|c| lc_on.cin[c].or(lc_on.i3[c]));
    let mut chained = vec![false; g.lcs.len()];
    // Visit stamps instead of a fresh set per walk: `stamp[lc] == walk` means seen in this walk.
    let mut stamp = vec![usize::MAX; g.lcs.len()];
    let mut walk = 0;
    let mut chains = Vec::new();
    for start in 0..g.lcs.len() {
        if g.lcs[start].gone || chained[start] || g.lcs[start].cin.is_none() && g.lcs[start].cout.is_none() {
            continue;
        }
        walk += 1;
        let mut first = start;
        while let Some(p) = prev(g, first) {
            if stamp[p] == walk {
                break;
            }
            stamp[p] = walk;
            first = p;
        }
        // Cells join `chained` only once their chain is long enough to keep, so a chain's
        // last LUT (reached through I3) is not lost by being visited on its own first.
        walk += 1;
        let mut chain = Vec::new();
        let mut cur = Some(first);
        while let Some(c) = cur {
            if stamp[c] == walk {
                break;
            }
            stamp[c] = walk;
            chain.push(c);
            cur = next(g, c);
        }
        if chain.len() >= 2 {
            chain.iter().for_each(|c| chained[*c] = true);
            chains.push(chain);
        }
    }
    let max_len = (device.height as usize - 2) * 8 - 2;
    chains.iter().map(|c| split(g, c, max_len, &global, &lc_on)).sum()
}

/// [`Graph::first_lc_on`] for the two ports chains follow, computed once per legalisation
/// (nothing moves between LCs while it runs).
struct LcOn {
    cin: Vec<Option<usize>>,
    i3: Vec<Option<usize>>,
}

/// nextpnr's `split_carry_chain`, counting the LCs it inserts.
fn split(g: &mut Graph, chain: &[usize], max_len: usize, global: &[bool], lc_on: &LcOn) -> u32 {
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
                let (i3, cin) = (lc_on.i3[cout], lc_on.cin[cout]);
                // Exclusive: the net's only user is an I3.
                let only_i3 = users == 1 && i3.is_some();
                if users > 2 || i3 != cin || (at_end && !only_i3) {
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
