//! A model of nextpnr-ecp5's packer (`--pack-only`), enough to reproduce its utilisation.
//!
//! ECP5's bel types are fine-grained (`TRELLIS_COMB` is one LUT4 and its muxes, `TRELLIS_FF` one
//! flip-flop), so utilisation is a count of what each netlist cell becomes, with the cells the
//! packer adds:
//!
//! - `LUT4` is one `TRELLIS_COMB`; `PFUMX` and `L6MUX21` fold into the COMBs of the LUTs they
//!   join (LUT5 to LUT7) and add none;
//! - `CCU2C` is two COMBs. Each carry chain gets a feed-in `CCU2C` when its first cell's `CIN`
//!   is connected (a constant too: nextpnr's constant net is a connection), a feed-out when a
//!   cell's `COUT` has users besides the next cell's `CIN` or the last cell's `COUT` is
//!   connected at all, and chains longer than the die allows are split with a feed-out and a
//!   feed-in;
//! - `TRELLIS_DPR16X4` is four RAM COMBs, two COMBs that block the write-port slice, and one
//!   `TRELLIS_RAMW`;
//! - a constant `0` or `1` anywhere in the netlist (a cell input or a port bit) brings
//!   nextpnr's constant driver, one COMB each for ground and power;
//! - every top-level port bit is a `TRELLIS_IO` unless it reaches a `TRELLIS_IO`'s `B` or a
//!   SERDES pad (`DCUA`, `EXTREFB`) directly; a `$_TBUF_` driving a port becomes its IO's
//!   tristate control and one COMB (the enable's inverter);
//! - IO logic (DDR, delay and DQS primitives) is one `IOLOGIC`, or `SIOLOGIC` on the top and
//!   bottom edges, per pin, which must be placed;
//! - global promotion: every net with 5 or more clock users (flip-flop `CLK`, distributed RAM
//!   `WCK` per RAM COMB; IO logic counts 11, SERDES clocks 101), most first, gets a `DCCA`, up
//!   to 16 global clocks together with the design's own `DCCA`s, and so does each `DCSC` input;
//! - hard cells count one each under their bel type (`PDPW16KD` as `DP16KD`, `SGSR` as `GSR`).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::device::{Device, Pin};
use super::ports::PortBits;
use crate::budget::Deadline;
use crate::netlist::{Bit, Direction, Module};

/// How many cells the packer visits between looks at the deadline.
const CELLS_PER_LOOK: usize = 4096;

/// Utilisation after packing, by nextpnr bel type, and what the resource checks need.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Packing {
    pub used: BTreeMap<&'static str, u32>,
    /// Indices of cells of a type no ECP5 bel takes, which nextpnr-ecp5 packs as they are and
    /// cannot place ("cell type … is unsupported").
    pub unknown_cells: Vec<usize>,
    /// Those cells counted by type, as nextpnr's report lists them (with none available).
    pub unsupported: BTreeMap<String, u32>,
    /// The netlist cells behind each hard resource, in netlist order, so a finding can name them.
    pub hard_cells: BTreeMap<&'static str, Vec<usize>>,
    /// IO logic cells whose pin is not placed, which nextpnr rejects: (cell index, the
    /// [`PortBits`] number of the port bit it reaches, if any).
    pub unplaced_iologic: Vec<(usize, Option<usize>)>,
    /// The nets global promotion takes, in its order (most clock users first): nextpnr places
    /// their global buffers in that order (`super::globals`).
    pub promoted: Vec<u32>,
}

/// Cell types nextpnr-ecp5 maps one to one onto a bel type of the same or another name.
fn hard_resource(t: &str) -> Option<&'static str> {
    Some(match t {
        "DP16KD" | "PDPW16KD" => "DP16KD",
        "MULT18X18D" => "MULT18X18D",
        "ALU54B" => "ALU54B",
        "EHXPLLL" => "EHXPLLL",
        "EXTREFB" => "EXTREFB",
        "DCUA" => "DCUA",
        "PCSCLKDIV" => "PCSCLKDIV",
        "GSR" | "SGSR" => "GSR",
        "JTAGG" => "JTAGG",
        "OSCG" => "OSCG",
        "SEDGA" => "SEDGA",
        "DTR" => "DTR",
        "USRMCLK" => "USRMCLK",
        "CLKDIVF" => "CLKDIVF",
        "ECLKSYNCB" => "ECLKSYNCB",
        "DLLDELD" => "DLLDELD",
        "DDRDLL" => "DDRDLL",
        "DQSBUFM" => "DQSBUFM",
        "ECLKBRIDGECS" => "ECLKBRIDGECS",
        "TRELLIS_ECLKBUF" => "TRELLIS_ECLKBUF",
        "DCSC" => "DCSC",
        "DCCA" => "DCCA",
        "TRELLIS_IO" => "TRELLIS_IO",
        _ => return None,
    })
}

/// IO logic primitives and the port that reaches their pin.
fn iologic_pad_port(t: &str) -> Option<&'static str> {
    Some(match t {
        "IDDRX1F" | "IDDRX2F" | "IDDR71B" | "IDDRX2DQA" => "D",
        "ODDRX1F" | "ODDRX2F" | "ODDR71B" | "OSHX2A" | "ODDRX2DQA" | "ODDRX2DQSB" | "TSHX2DQA" | "TSHX2DQSA" => "Q",
        _ => return None,
    })
}

/// Cells the packer knows that take no resource of their own, or whose count comes from
/// elsewhere (`VLO`/`VHI` are nextpnr's constants; `PFUMX`/`L6MUX21` join LUTs).
fn folded(t: &str) -> bool {
    matches!(t, "PFUMX" | "L6MUX21" | "VLO" | "VHI" | "$scopeinfo" | "$print" | "$check" | "DELAYF" | "DELAYG")
}

/// What the packer needs to know about one net.
#[derive(Debug, Clone, Copy, Default)]
struct NetStat {
    /// Some cell output or top-level input drives it.
    driven: bool,
    /// Driven by a `DCCA` or `DCSC` (already a global clock).
    by_clock_buffer: bool,
    /// Read by this many cell inputs and top-level outputs.
    users: u32,
    /// Clock users as nextpnr's global promotion weighs them.
    clock_weight: u32,
}

/// Packs the top module for a part, as `nextpnr-ecp5 --pack-only` would; `pins` maps each placed
/// top-level port bit (`led[0]`) to the row of its pin, for the IO logic of that pin. `None`
/// once `deadline` has passed.
pub(crate) fn pack_within(
    m: &Module<'_>,
    device: &Device,
    pin_rows: &HashMap<usize, &Pin>,
    deadline: &Deadline,
) -> Option<Packing> {
    let mut p = Packing::default();
    let mut nets: HashMap<u32, NetStat> = HashMap::new();
    let (mut gnd, mut vcc) = (false, false);
    // Top-level ports: inputs drive their nets, outputs read them.
    let ports = PortBits::new(m);
    for port in &m.ports {
        for &bit in &port.bits {
            match bit {
                Bit::Net(n) => {
                    let s = nets.entry(n).or_default();
                    match port.direction {
                        Direction::Input => s.driven = true,
                        Direction::Output => s.users += 1,
                        Direction::Inout => {
                            s.driven = true;
                            s.users += 1;
                        }
                    }
                }
                Bit::Zero => gnd = true,
                Bit::One => vcc = true,
                Bit::Undriven => {}
            }
        }
    }
    // Cells: drivers, users and clock weights; constants anywhere.
    for (i, cell) in m.cells.iter().enumerate() {
        if i % CELLS_PER_LOOK == 0 && deadline.passed() {
            return None;
        }
        let t = cell.cell_type.as_ref();
        if matches!(t, "$scopeinfo" | "$print" | "$check") {
            continue;
        }
        for c in m.connections(cell) {
            let weight = match (t, c.port.as_ref()) {
                ("TRELLIS_FF", "CLK") => 1,
                ("TRELLIS_DPR16X4", "WCK") => 4,
                ("DCUA", "CH0_FF_RXI_CLK" | "CH1_FF_RXI_CLK" | "CH0_FF_TXI_CLK" | "CH1_FF_TXI_CLK") => 101,
                _ => 0,
            };
            for bit in m.bits(c) {
                match *bit {
                    Bit::Net(n) => {
                        let s = nets.entry(n).or_default();
                        if c.output {
                            s.driven = true;
                            s.by_clock_buffer |= matches!(t, "DCCA" | "DCSC");
                        } else {
                            s.users += 1;
                            s.clock_weight += weight;
                        }
                    }
                    Bit::Zero => gnd = true,
                    Bit::One => vcc = true,
                    Bit::Undriven => {}
                }
            }
        }
        match t {
            "VLO" if m.bit(cell, "Z").is_some_and(|b| matches!(b, Bit::Net(_))) => gnd = true,
            "VHI" if m.bit(cell, "Z").is_some_and(|b| matches!(b, Bit::Net(_))) => vcc = true,
            // nextpnr ties a delay line's unconnected control inputs to ground.
            "DELAYF" | "DELAYG" => {
                gnd |= ["LOADN", "MOVE", "DIRECTION"].iter().any(|p| m.port(cell, p).is_empty());
            }
            _ => {}
        }
    }
    let mut comb = u32::from(gnd) + u32::from(vcc);
    let add = |p: &mut Packing, r: &'static str, n: u32| *p.used.entry(r).or_insert(0) += n;

    // IO: the nets that reach a TRELLIS_IO pad or a SERDES pad directly.
    let mut pad_nets: HashSet<u32> = HashSet::new();
    for cell in &m.cells {
        let pads: &[&str] = match cell.cell_type.as_ref() {
            "TRELLIS_IO" => &["B"],
            "DCUA" => &[
                "CH0_HDINP",
                "CH0_HDINN",
                "CH0_HDOUTP",
                "CH0_HDOUTN",
                "CH1_HDINP",
                "CH1_HDINN",
                "CH1_HDOUTP",
                "CH1_HDOUTN",
            ],
            "EXTREFB" => &["REFCLKP", "REFCLKN"],
            _ => continue,
        };
        for port in pads {
            if let Some(Bit::Net(n)) = m.bit(cell, port) {
                pad_nets.insert(n);
            }
        }
    }
    let new_ios =
        m.ports.iter().flat_map(|p| &p.bits).filter(|b| !matches!(b, Bit::Net(n) if pad_nets.contains(n))).count();
    add(&mut p, "TRELLIS_IO", new_ios as u32);

    // The port bit on each net, for IO logic.
    let port_of_net: HashMap<u32, usize> = (0..ports.len())
        .filter_map(|b| match ports.bit(b) {
            Bit::Net(n) => Some((n, b)),
            _ => None,
        })
        .collect();
    let mut iologic_pins: BTreeMap<usize, bool> = BTreeMap::new();

    let mut ccu2c = Vec::new();
    let mut clock_buffers = 0u32;
    let mut dcsc_inputs: Vec<u32> = Vec::new();
    for (i, cell) in m.cells.iter().enumerate() {
        let t = cell.cell_type.as_ref();
        match t {
            "LUT4" | "TRELLIS_COMB" => comb += 1,
            "TRELLIS_FF" => add(&mut p, "TRELLIS_FF", 1),
            "CCU2C" => ccu2c.push(i),
            // A tristate buffer on a port becomes that port's TRELLIS_IO tristate control, with
            // a LUT to invert its enable.
            "$_TBUF_" if matches!(m.bit(cell, "Y"), Some(Bit::Net(n)) if port_of_net.contains_key(&n)) => comb += 1,
            "TRELLIS_DPR16X4" => {
                comb += 6;
                add(&mut p, "TRELLIS_RAMW", 1);
            }
            _ if folded(t) => {}
            _ => {
                if let Some(pad_port) = iologic_pad_port(t).or(match t {
                    "DELAYF" | "DELAYG" => Some("A"),
                    _ => None,
                }) {
                    let pin = m.bit(cell, pad_port).and_then(|b| match b {
                        Bit::Net(n) => port_of_net.get(&n).copied(),
                        _ => None,
                    });
                    match pin.and_then(|bit| pin_rows.get(&bit).map(|pin| (bit, pin.row))) {
                        Some((name, row)) => {
                            let edge = row == 0 || u32::from(row) + 1 == device.height;
                            // The pin's IO logic takes the primitive's clock: one clock user of
                            // weight 11 per pin, however many primitives share it.
                            if iologic_pins.insert(name, edge).is_none() {
                                if let Some(Bit::Net(clk)) = m.bit(cell, "SCLK") {
                                    if let Some(s) = nets.get_mut(&clk) {
                                        s.clock_weight += 11;
                                    }
                                }
                            }
                        }
                        None => p.unplaced_iologic.push((i, pin)),
                    }
                } else if let Some(r) = hard_resource(t) {
                    add(&mut p, r, 1);
                    p.hard_cells.entry(r).or_default().push(i);
                    if t == "DCCA" && matches!(m.bit(cell, "CLKO"), Some(Bit::Net(_))) {
                        clock_buffers += 1;
                    }
                    if t == "DCSC" {
                        for port in ["CLK0", "CLK1"] {
                            if let Some(Bit::Net(n)) = m.bit(cell, port) {
                                dcsc_inputs.push(n);
                            }
                        }
                    }
                } else {
                    p.unknown_cells.push(i);
                    *p.unsupported.entry(t.to_owned()).or_insert(0) += 1;
                }
            }
        }
    }
    for (_, top_or_bottom) in iologic_pins {
        add(&mut p, if top_or_bottom { "SIOLOGIC" } else { "IOLOGIC" }, 1);
    }
    if deadline.passed() {
        return None;
    }
    let (carries, orphans) = carry_cells(m, &ccu2c, &nets, device.max_carry_chain());
    comb += 2 * carries;
    for ci in orphans {
        p.unknown_cells.push(ci);
        *p.unsupported.entry("CCU2C".to_owned()).or_insert(0) += 1;
    }

    // Global promotion.
    let mut candidates: Vec<(u32, u32)> =
        nets.iter().filter(|(_, s)| s.driven && s.clock_weight >= 5).map(|(n, s)| (*n, s.clock_weight)).collect();
    candidates.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let room = 16usize.saturating_sub(clock_buffers as usize);
    let mut promoted: HashSet<u32> = HashSet::new();
    let mut new_dcca = 0;
    for (n, _) in candidates.into_iter().take(room) {
        promoted.insert(n);
        p.promoted.push(n);
        if !nets[&n].by_clock_buffer {
            new_dcca += 1;
        }
    }
    let mut seen = HashSet::new();
    for n in dcsc_inputs {
        if !promoted.contains(&n) && seen.insert(n) && !nets.get(&n).is_some_and(|s| s.by_clock_buffer) {
            new_dcca += 1;
        }
    }
    add(&mut p, "DCCA", new_dcca);
    add(&mut p, "TRELLIS_COMB", comb);
    Some(p)
}

/// How many `CCU2C` cells the carry chains take once nextpnr has added feed-ins and feed-outs
/// and split the chains too long for the die, and the carries no chain reaches (which nextpnr
/// leaves unpacked and cannot place).
fn carry_cells(m: &Module<'_>, ccu2c: &[usize], nets: &HashMap<u32, NetStat>, max_length: usize) -> (u32, Vec<usize>) {
    let net = |ci: usize, port: &str| match m.bit(&m.cells[ci], port) {
        Some(Bit::Net(n)) => Some(n),
        _ => None,
    };
    // A connected CIN: a net or a constant (nextpnr's constant net is a connection).
    let cin_connected = |ci: usize| matches!(m.bit(&m.cells[ci], "CIN"), Some(Bit::Net(_) | Bit::Zero | Bit::One));
    // Each carry's successor: the first carry (in name order) whose CIN its COUT drives.
    let mut by_cin: HashMap<u32, usize> = HashMap::new();
    let mut by_cout: HashMap<u32, usize> = HashMap::new();
    for &ci in ccu2c {
        if let Some(n) = net(ci, "CIN") {
            by_cin.entry(n).or_insert(ci);
        }
        if let Some(n) = net(ci, "COUT") {
            by_cout.entry(n).or_insert(ci);
        }
    }
    let next = |ci: usize| net(ci, "COUT").and_then(|n| by_cin.get(&n).copied());
    let prev = |ci: usize| net(ci, "CIN").and_then(|n| by_cout.get(&n).copied());
    let mut chained: HashSet<usize> = HashSet::new();
    // The start each visited cell walks back to, so no cell is walked over twice: a carry whose
    // COUT feeds several CINs (never from yosys, but a netlist may say so) shares its start.
    let mut start_of: HashMap<usize, usize> = HashMap::new();
    let mut total = 0u32;
    let mut orphans = Vec::new();
    for &ci in ccu2c {
        if chained.contains(&ci) {
            continue;
        }
        // Walk back to the chain's start (stopping on a loop or a cell already walked).
        let mut start = ci;
        let mut path = vec![ci];
        let mut back = HashSet::from([ci]);
        while let Some(p) = prev(start) {
            if let Some(&known) = start_of.get(&p) {
                start = known;
                break;
            }
            if !back.insert(p) {
                break;
            }
            path.push(p);
            start = p;
        }
        for c in path {
            start_of.insert(c, start);
        }
        // A start already packed: this cell hangs off a chain nextpnr does not follow into it,
        // and stays an unpacked CCU2C there.
        if chained.contains(&start) {
            orphans.push(ci);
            continue;
        }
        let mut chain = Vec::new();
        let mut at = Some(start);
        while let Some(c) = at {
            if !chained.insert(c) {
                break;
            }
            chain.push(c);
            at = next(c);
        }
        let mut size = 0usize;
        let mut start_of_chain = true;
        for (k, &c) in chain.iter().enumerate() {
            if start_of_chain {
                start_of_chain = false;
                size = 0;
                if cin_connected(c) {
                    size += 1;
                    total += 1;
                }
            }
            size += 1;
            total += 1;
            let at_end = k + 1 == chain.len();
            let split = size > max_length;
            if let Some(cout) = net(c, "COUT") {
                let users = nets.get(&cout).map_or(0, |s| s.users);
                if split || users > 1 || at_end {
                    if split && at_end {
                        // nextpnr puts the feed-out in the last cell's place, which stays unpacked.
                    } else {
                        size += 1;
                        total += 1;
                    }
                }
            }
            if split {
                start_of_chain = true;
            }
        }
    }
    (total, orphans)
}

#[cfg(test)]
mod tests;
