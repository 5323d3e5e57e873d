//! Where nextpnr-ecp5 puts each global buffer, and whether its router can then bring the clock
//! in (`ecp5/globals.cc`: `promote_globals`, `insert_dcc`, `place_dcc_dcs`).
//!
//! Each edge of the die has `DCCA` bels (12 on the top, 14 on each side, 16 on the bottom). A
//! clock from a primary clock pin (`PCLKT`) or the oscillator reaches some of them through
//! dedicated wires; any other clock (an ordinary pin, logic, a PLL nextpnr has not placed yet)
//! enters through one of the edge's four fabric entries (`QPCLKCIB` wires), and each bel's
//! input mux takes one of them (Lattice's layout, as Trellis and prjcombine document it). For
//! each buffer, in the order nextpnr creates them, `place_dcc_dcs` picks the bel with dedicated
//! routing from the source, or else the nearest bel (Manhattan distance from a placed pin, none
//! for an unplaced driver) whose entry no earlier buffer has claimed, first in bel order on a
//! tie. It does not know that an entry is unreachable: on the 25k die (`LFE5U-12F`/`25F`) the
//! left edge's `ULQPCLKCIB1` has no route from the fabric, so a buffer placed on a bel whose
//! only entry it is leaves its clock unrouted ("Failed to find a route for arc … of net …",
//! "Routing design failed"). Measured with nextpnr-ecp5 0.11.1: one `DCCA` pinned to each bel
//! of each entry; on the 45k and 85k dies all 16 entries route.
//!
//! nextpnr places a buffer again when a `DCSC` input is already a global (a promoted clock, a
//! design's `DCCA`, the same net on both inputs or on two `DCSC`s): the first bel and its entry
//! stay taken, so later buffers land further along the edge. That is how three fabric clocks
//! on the 25k's left edge can already reach the dead entry.
//!
//! Not modelled: a buffer whose source nextpnr pins with a `BEL` attribute (skipped), the centre
//! `DCC`s (they have no fabric entry, so `place_dcc_dcs` never picks them for these clocks),
//! PLL outputs on a dead entry (the router may reach the bel from the PLL directly, once the
//! PLL is placed; such a buffer is never reported), and nextpnr's exact order: its cells in the
//! order of a hash map its packer reshuffles, and promoted clocks of equal weight in the order
//! of another. When the clocks competing for an edge all come through the fabric the verdict
//! does not depend on it, only which clock the finding names.

use std::collections::{HashMap, HashSet};

use super::constraints::PinSites;
use super::device::Device;
use super::pack::Packing;
use super::ports::PortBits;
use crate::netlist::{Bit, Direction, Module};
use crate::report::{short_name, Finding, Location};

/// The four edges in nextpnr's bel order (by row, then column): top, left, right, bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    Top,
    Left,
    Right,
    Bottom,
}

const EDGES: [Edge; 4] = [Edge::Top, Edge::Left, Edge::Right, Edge::Bottom];

impl Edge {
    /// The fabric entry each bel's input mux takes (an index into [`Edge::entries`]), if any.
    fn entry(self, bel: usize) -> Option<u8> {
        const SIDE: [Option<u8>; 14] = [
            Some(0),
            Some(1),
            Some(2),
            Some(3),
            Some(3),
            Some(2),
            Some(1),
            Some(0),
            Some(3),
            Some(2),
            Some(1),
            None,
            Some(0),
            None,
        ];
        const TOP: [u8; 12] = [3, 0, 0, 1, 3, 2, 1, 2, 0, 3, 1, 2];
        const BOTTOM: [u8; 16] = [0, 1, 2, 3, 3, 2, 1, 0, 3, 2, 1, 0, 0, 1, 2, 3];
        match self {
            Edge::Left | Edge::Right => SIDE[bel],
            Edge::Top => Some(TOP[bel]),
            Edge::Bottom => Some(BOTTOM[bel]),
        }
    }

    /// The edge's fabric entries as nextpnr names them (`G_J<name>`).
    fn entries(self) -> [&'static str; 4] {
        match self {
            Edge::Top => ["TLQPCLKCIB0", "TLQPCLKCIB1", "TRQPCLKCIB0", "TRQPCLKCIB1"],
            Edge::Left => ["LLQPCLKCIB0", "LLQPCLKCIB1", "ULQPCLKCIB0", "ULQPCLKCIB1"],
            Edge::Right => ["LRQPCLKCIB0", "LRQPCLKCIB1", "URQPCLKCIB0", "URQPCLKCIB1"],
            Edge::Bottom => ["BLQPCLKCIB0", "BLQPCLKCIB1", "BRQPCLKCIB0", "BRQPCLKCIB1"],
        }
    }

    /// The primary clock pin (by its index on the edge, as [`pclkt`] numbers them) a bel's
    /// mux takes directly, if any.
    fn pclkt(self, bel: usize) -> Option<u8> {
        const LEFT: [Option<u8>; 14] = [
            Some(0),
            Some(1),
            Some(2),
            Some(3),
            Some(3),
            Some(2),
            Some(1),
            None,
            Some(3),
            None,
            Some(0),
            Some(2),
            Some(1),
            Some(0),
        ];
        const RIGHT: [Option<u8>; 14] = [
            Some(2),
            Some(3),
            Some(0),
            Some(1),
            Some(1),
            Some(0),
            Some(3),
            None,
            Some(1),
            None,
            Some(2),
            Some(0),
            Some(3),
            Some(2),
        ];
        const TOP: [u8; 12] = [1, 2, 0, 3, 1, 0, 3, 1, 3, 2, 0, 2];
        match self {
            Edge::Left => LEFT[bel],
            Edge::Right => RIGHT[bel],
            Edge::Top => Some(TOP[bel]),
            Edge::Bottom => None,
        }
    }

    fn bels(self) -> usize {
        match self {
            Edge::Top => 12,
            Edge::Left | Edge::Right => 14,
            Edge::Bottom => 16,
        }
    }

    fn name(self) -> char {
        match self {
            Edge::Top => 'T',
            Edge::Left => 'L',
            Edge::Right => 'R',
            Edge::Bottom => 'B',
        }
    }
}

/// The die's clock geometry: the centre column and row its edge `DCC`s sit on, and its fabric
/// entries nothing reaches.
struct Die {
    width: u32,
    height: u32,
    centre_col: u32,
    centre_row: u32,
    dead: &'static [(Edge, u8)],
}

fn die(device: &Device) -> Option<Die> {
    let (centre_col, centre_row, dead): (u32, u32, &'static [(Edge, u8)]) = match device.width {
        73 => (31, 25, &[(Edge::Left, 3)]),
        91 => (40, 34, &[]),
        127 => (67, 46, &[]),
        _ => return None,
    };
    Some(Die { width: device.width, height: device.height, centre_col, centre_row, dead })
}

impl Die {
    /// Where nextpnr puts an edge's `DCC` bels (X, Y).
    fn bel_at(&self, edge: Edge) -> (i64, i64) {
        let (x, y) = match edge {
            Edge::Top => (self.centre_col, 0),
            Edge::Left => (3, self.centre_row),
            Edge::Right => (self.width - 4, self.centre_row),
            Edge::Bottom => (self.centre_col, self.height - 1),
        };
        (i64::from(x), i64::from(y))
    }

    /// The primary clock pin at a PIO site, as (edge, index of its input on that edge's muxes):
    /// `PCLKT0_0`, `0_1`, `1_0`, `1_1` on the top, `6_0` … `7_1` on the left, `3_0`, `3_1`,
    /// `2_0`, `2_1` on the right (Trellis's pin functions).
    fn pclkt(&self, row: u32, col: u32, pio: u8) -> Option<(Edge, u8)> {
        let (cx, cy) = (self.centre_col, self.centre_row);
        if row == 0 && pio == b'A' {
            return [cx - 2, cx - 4, cx + 4, cx + 2].iter().position(|&c| c == col).map(|i| (Edge::Top, i as u8));
        }
        let index = |low: u32, high: u32| match (row, pio) {
            (r, b'C') if r == low => Some(0),
            (r, b'A') if r == low => Some(1),
            (r, b'C') if r == high => Some(2),
            (r, b'A') if r == high => Some(3),
            _ => None,
        };
        if col == 0 {
            index(cy + 1, cy - 2).map(|i| (Edge::Left, i))
        } else if col + 1 == self.width {
            index(cy + 1, cy - 2).map(|i| (Edge::Right, i))
        } else {
            None
        }
    }
}

/// Where a global buffer's clock comes from, as `get_dcc_metric` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A placed primary clock pin: dedicated wires to some bels of its edge.
    Pclkt { edge: Edge, input: u8, x: i64, y: i64 },
    /// Another placed pin: through the fabric, nearest bel first.
    Pin { x: i64, y: i64 },
    /// The oscillator (one on the die): dedicated wires to left bels 2, 5, 7 and 10.
    Osc,
    /// A PLL output: nextpnr places the PLL later, so any bel with a free entry will do.
    Pll,
    /// Logic, an unplaced pin or nothing: through the fabric, any bel with a free entry.
    Fabric,
}

impl Source {
    /// `DccMetric` at a bel: (dedicated, wire length); dedicated routes all take the same hops.
    fn metric(self, die: &Die, edge: Edge, bel: usize) -> (bool, i64) {
        let distance = |x: i64, y: i64| {
            let (bx, by) = die.bel_at(edge);
            (bx - x).abs() + (by - y).abs()
        };
        match self {
            Source::Pclkt { edge: e, input, x, y } => {
                if e == edge && edge.pclkt(bel) == Some(input) {
                    (true, 0)
                } else {
                    (false, distance(x, y))
                }
            }
            Source::Osc => (edge == Edge::Left && matches!(bel, 2 | 5 | 7 | 10), 0),
            Source::Pin { x, y } => (false, distance(x, y)),
            Source::Pll | Source::Fabric => (false, 0),
        }
    }

    /// Whether the router needs the bel's fabric entry to bring this clock in.
    fn needs_entry(self) -> bool {
        !matches!(self, Source::Pll)
    }
}

/// `DccMetric::operator<`.
fn better(a: (bool, i64), b: (bool, i64)) -> bool {
    if a.0 {
        !b.0 || a.1 < b.1
    } else {
        !b.0 && a.1 < b.1
    }
}

/// A global buffer: a design's `DCCA` (by cell index) or one nextpnr adds for a net.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Buffer {
    Cell(usize),
    Net(u32),
}

/// `place_dcc_dcs` over the edge bels: the bels taken and the entries claimed.
struct Placer<'d> {
    die: &'d Die,
    taken: HashSet<(usize, usize)>,
    claimed: HashSet<(usize, u8)>,
}

impl Placer<'_> {
    /// The bel nextpnr picks for a buffer fed from `source` (edge, bel index, the entry it
    /// claims), or `None` when no bel will do (nextpnr's assertion `best_bel != BelId()`).
    fn place(&mut self, source: Source) -> Option<(Edge, usize, Option<u8>)> {
        let mut best: Option<(Edge, usize, Option<u8>)> = None;
        let mut best_metric = (false, 9_999_999);
        for (e, &edge) in EDGES.iter().enumerate() {
            for bel in 0..edge.bels() {
                if self.taken.contains(&(e, bel)) {
                    continue;
                }
                let metric = source.metric(self.die, edge, bel);
                if !better(metric, best_metric) {
                    continue;
                }
                let entry = if metric.0 {
                    None
                } else {
                    match edge.entry(bel) {
                        Some(q) if !self.claimed.contains(&(e, q)) => Some(q),
                        _ => continue,
                    }
                };
                best = Some((edge, bel, entry));
                best_metric = metric;
            }
        }
        let (edge, bel, entry) = best?;
        let e = EDGES.iter().position(|&x| x == edge).unwrap_or(0);
        self.taken.insert((e, bel));
        if let Some(q) = entry {
            self.claimed.insert((e, q));
        }
        Some((edge, bel, entry))
    }
}

/// Global buffers nextpnr-ecp5 places where no route reaches them. Skipped when the design
/// needs more than the 16 global networks (`GLOBAL_BUFFERS_EXCEEDED` says so already).
pub(crate) fn check(
    m: &Module<'_>,
    device: &Device,
    pins: &PinSites,
    packed: &Packing,
    file: Option<&str>,
) -> Vec<Finding> {
    let Some(die) = die(device) else { return Vec::new() };
    let dccas: Vec<usize> = (0..m.cells.len())
        .filter(|&i| m.cells[i].cell_type == "DCCA" && matches!(m.bit(&m.cells[i], "CLKO"), Some(Bit::Net(_))))
        .collect();
    let dcscs: Vec<usize> = (0..m.cells.len()).filter(|&i| m.cells[i].cell_type == "DCSC").collect();
    if dccas.is_empty() && dcscs.is_empty() && packed.promoted.is_empty() {
        return Vec::new();
    }
    let globals = packed.used.get("DCCA").copied().unwrap_or(0) + packed.used.get("DCSC").copied().unwrap_or(0);
    if globals > super::GLOBAL_NETWORKS {
        return Vec::new();
    }

    // The driver of each net that matters: (cell, port), or a top-level input's port bit.
    let mut wanted: HashSet<u32> = packed.promoted.iter().copied().collect();
    for &i in dccas.iter().chain(&dcscs) {
        for port in ["CLKI", "CLKO", "CLK0", "CLK1"] {
            if let Some(Bit::Net(n)) = m.bit(&m.cells[i], port) {
                wanted.insert(n);
            }
        }
    }
    let mut cell_driver: HashMap<u32, (usize, &str)> = HashMap::new();
    for (i, cell) in m.cells.iter().enumerate() {
        for c in m.connections(cell) {
            if c.output {
                for bit in m.bits(c) {
                    if let Bit::Net(n) = *bit {
                        if wanted.contains(&n) {
                            cell_driver.insert(n, (i, c.port.as_ref()));
                        }
                    }
                }
            }
        }
    }
    let ports = PortBits::new(m);
    let mut port_driver: HashMap<u32, usize> = HashMap::new();
    for b in 0..ports.len() {
        if let Bit::Net(n) = ports.bit(b) {
            if ports.direction(b) != Direction::Output && wanted.contains(&n) {
                port_driver.entry(n).or_insert(b);
            }
        }
    }
    let source = |n: Option<u32>| -> Source {
        let Some(n) = n else { return Source::Fabric };
        if let Some(&b) = port_driver.get(&n) {
            let Some(pin) = pins.get(&b) else { return Source::Fabric };
            let (x, y) = (i64::from(pin.col), i64::from(pin.row));
            return match die.pclkt(u32::from(pin.row), u32::from(pin.col), pin.pio) {
                Some((edge, input)) => Source::Pclkt { edge, input, x, y },
                None => Source::Pin { x, y },
            };
        }
        match cell_driver.get(&n).map(|(c, _)| m.cells[*c].cell_type.as_ref()) {
            Some("OSCG") => Source::Osc,
            Some("EHXPLLL") => Source::Pll,
            _ => Source::Fabric,
        }
    };
    let net_of = |cell: usize, port: &str| match m.bit(&m.cells[cell], port) {
        Some(Bit::Net(n)) => Some(n),
        _ => None,
    };
    let pinned = |cell: usize| m.attribute(&m.cells[cell], "BEL").is_some();
    let driven_by_buffer =
        |n: u32| cell_driver.get(&n).is_some_and(|(c, _)| matches!(m.cells[*c].cell_type.as_ref(), "DCCA" | "DCSC"));
    let dcca_on: HashMap<u32, usize> = dccas.iter().filter_map(|&i| net_of(i, "CLKO").map(|n| (n, i))).collect();

    // Every placement in nextpnr's order; the last one of a buffer is where it stays.
    let mut order: Vec<(Buffer, Source)> = Vec::new();
    // The design's DCCAs first, as `get_clocks` lists them, then the promoted clocks, then each
    // DCSC input. nextpnr goes through its cells in the order of its hash map, which its packer
    // reshuffles as it removes cells; taken here as the netlist's, reversed for the DCCAs and
    // not for the DCSCs, as nextpnr-ecp5 0.11.1's log showed on the corpus's designs.
    for &i in dccas.iter().rev() {
        if !pinned(i) {
            order.push((Buffer::Cell(i), source(net_of(i, "CLKI"))));
        }
    }
    let mut buffered: HashSet<u32> = HashSet::new();
    for &n in &packed.promoted {
        if !driven_by_buffer(n) {
            buffered.insert(n);
            order.push((Buffer::Net(n), source(Some(n))));
        }
    }
    for &d in &dcscs {
        for port in ["CLK0", "CLK1"] {
            let Some(n) = net_of(d, port) else { continue };
            if let Some(&i) = dcca_on.get(&n) {
                if !pinned(i) {
                    order.push((Buffer::Cell(i), source(net_of(i, "CLKI"))));
                }
            } else if !driven_by_buffer(n) {
                buffered.insert(n);
                order.push((Buffer::Net(n), source(Some(n))));
            }
        }
    }

    let mut placer = Placer { die: &die, taken: HashSet::new(), claimed: HashSet::new() };
    let mut final_bel: HashMap<Buffer, (Edge, usize, Option<u8>, Source)> = HashMap::new();
    let mut findings = Vec::new();
    // Which of the clocks competing for an edge lands on the dead entry depends on nextpnr's
    // order; the verdict does not, when they are all through the fabric.
    let describe = |buffer: Buffer, src: Source| -> (String, Option<String>) {
        let clock = match buffer {
            Buffer::Cell(i) => net_of(i, "CLKI"),
            Buffer::Net(n) => Some(n),
        };
        let from = match clock.and_then(|n| port_driver.get(&n)) {
            Some(&b) => format!("the clock from port '{}'", ports.display(b)),
            None => match clock.and_then(|n| cell_driver.get(&n)) {
                Some(&(c, p)) => format!("the clock from {}.{}", short_name(&m.cells[c].name), p),
                None => "an undriven clock".to_owned(),
            },
        };
        let via = match src {
            Source::Pin { .. } | Source::Pclkt { .. } => "an ordinary pin, through the fabric",
            _ => "logic, through the fabric",
        };
        match buffer {
            Buffer::Cell(i) => (
                format!("global buffer '{}' ({from}, {via})", short_name(&m.cells[i].name)),
                Some(m.cells[i].name.clone().into_owned()),
            ),
            Buffer::Net(_) => (format!("the global buffer nextpnr adds for {from} ({via})"), None),
        }
    };
    for (buffer, src) in order {
        match placer.place(src) {
            Some((edge, bel, entry)) => {
                final_bel.insert(buffer, (edge, bel, entry, src));
            }
            None => {
                let (what, cell) = describe(buffer, src);
                findings.push(Finding::error(
                    "GLOBAL_CLOCK_UNROUTABLE",
                    format!(
                        "{what} finds no DCC bel on the {} with a free fabric entry: each edge has four (QPCLKCIB), and the buffers before it took them all; nextpnr-ecp5 stops on an assertion in place_dcc_dcs (ecp5/globals.cc)",
                        device.name
                    ),
                    Location { file: file.map(str::to_owned), cell, ..Location::default() },
                ));
                return findings;
            }
        }
    }
    let mut dead: Vec<(Buffer, Edge, usize, u8, Source)> = final_bel
        .iter()
        .filter_map(|(&b, &(edge, bel, entry, src))| {
            let q = entry?;
            (src.needs_entry() && die.dead.contains(&(edge, q))).then_some((b, edge, bel, q, src))
        })
        .collect();
    dead.sort_by_key(|&(b, ..)| match b {
        Buffer::Cell(i) => (0, i as u64),
        Buffer::Net(n) => (1, u64::from(n)),
    });
    for (buffer, edge, bel, q, src) in dead {
        let (what, cell) = describe(buffer, src);
        findings.push(Finding::error(
            "GLOBAL_CLOCK_UNROUTABLE",
            format!(
                "{what} is placed by nextpnr-ecp5 on DCC bel {}DCC{bel} of the {}, whose only fabric entry, {}, nothing reaches on this die (which of the edge's fabric clocks lands there follows nextpnr's cell order): its router cannot route the clock into the global network (\"Failed to find a route for arc\", \"Routing design failed\"). place_dcc_dcs (ecp5/globals.cc) takes the nearest DCC bel with an unclaimed entry, and the buffers placed before it (a DCSC input that is already global is placed twice) claimed the edge's other entries; feed the clock from a primary clock pin (PCLKT) or move it to another edge's pin",
                edge.name(),
                device.name,
                edge.entries()[usize::from(q)]
            ),
            Location { file: file.map(str::to_owned), cell, ..Location::default() },
        ));
    }
    findings
}

#[cfg(test)]
mod tests;
