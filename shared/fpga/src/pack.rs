//! A model of nextpnr-ice40 0.4's packer (`--pack-only`), enough to reproduce its utilisation.
//!
//! The steps follow nextpnr's order: constants, IO, LUT+FF pairing, lone FFs, carries, indirect
//! carry+LUT merges, hard cells, global promotion ([`globals`]) and carry-chain legalisation
//! ([`chains`]). Every logic cell is an [`Lc`]; nets are dense indices. The rules were read off
//! nextpnr's behaviour on the recorded fixtures (`fixtures/cases`), which the oracle test checks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::device::Device;
use crate::netlist::{Bit, Cell, Direction, Module};

#[path = "pack_chains.rs"]
mod chains;
#[path = "pack_globals.rs"]
mod globals;

pub(crate) type Net = usize;

/// Who uses a net: a netlist cell (by index) or a top-level port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Cell(usize),
    TopPort,
}

/// A logic cell (`ICESTORM_LC`) as the packer builds it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lc {
    pub inputs: [Option<Net>; 4],
    pub lut: bool,
    /// The packed flip-flop: clock, enable, set/reset and negative clock.
    pub dff: Option<Dff>,
    pub carry: bool,
    pub cin: Option<Net>,
    pub cout: Option<Net>,
    /// Merged into another LC (an indirect carry+LUT pair) and no longer counted.
    pub gone: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Dff {
    pub clk: Option<Net>,
    pub cen: Option<Net>,
    pub sr: Option<Net>,
    pub neg: bool,
}

impl Lc {
    pub fn input_count(&self) -> usize {
        self.inputs.iter().filter(|i| i.is_some()).count()
    }
}

/// The packer's working state: the netlist's nets and users, and the LCs built so far.
pub(crate) struct Graph<'a> {
    pub cells: &'a [Cell],
    pub nets: usize,
    pub vcc: Net,
    pub users: Vec<Vec<(Owner, &'a str)>>,
    pub driver: Vec<Option<(Owner, &'a str)>>,
    pub lcs: Vec<Lc>,
    /// Which LC each netlist cell ended up in.
    pub cell_lc: Vec<Option<usize>>,
}

/// Utilisation after packing, by nextpnr resource name, plus cells we do not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    pub used: BTreeMap<&'static str, u32>,
    /// Indices of cells whose type nextpnr-ice40 would not recognise.
    pub unknown_cells: Vec<usize>,
    /// The counts nextpnr logs while packing, for comparing step by step.
    pub breakdown: Breakdown,
}

/// nextpnr's packer log lines: "N LCs used as LUT4 only", "... LUT4 and DFF", and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Breakdown {
    pub lut_only: u32,
    pub lut_dff: u32,
    pub dff_only: u32,
    pub carry_only: u32,
    pub merged: u32,
    pub chain_legalise: u32,
}

fn is_ff(t: &str) -> bool {
    t.starts_with("SB_DFF")
}

/// Cell types that own a package pad, so a top port on that pad needs no extra `SB_IO`.
fn pad_port(t: &str) -> Option<&'static str> {
    match t {
        "SB_IO" | "SB_GB_IO" | "SB_IO_I3C" => Some("PACKAGE_PIN"),
        "SB_IO_OD" => Some("PACKAGEPIN"),
        _ => None,
    }
}

/// Hard cells and the resource nextpnr counts them as.
fn hard_resource(t: &str) -> Option<&'static str> {
    Some(match t {
        "SB_RAM40_4K" | "SB_RAM40_4KNR" | "SB_RAM40_4KNW" | "SB_RAM40_4KNRNW" | "ICESTORM_RAM" => "ICESTORM_RAM",
        "SB_IO" | "SB_GB_IO" | "SB_IO_OD" => "SB_IO",
        "SB_GB" => "SB_GB",
        "SB_PLL40_CORE" | "SB_PLL40_PAD" | "SB_PLL40_2_PAD" | "SB_PLL40_2F_CORE" | "SB_PLL40_2F_PAD" => "ICESTORM_PLL",
        "SB_WARMBOOT" => "SB_WARMBOOT",
        "SB_MAC16" | "ICESTORM_DSP" => "ICESTORM_DSP",
        "SB_SPRAM256KA" | "ICESTORM_SPRAM" => "ICESTORM_SPRAM",
        "SB_HFOSC" => "ICESTORM_HFOSC",
        "SB_LFOSC" => "ICESTORM_LFOSC",
        "SB_I2C" => "SB_I2C",
        "SB_SPI" => "SB_SPI",
        "SB_LEDDA_IP" => "SB_LEDDA_IP",
        "SB_RGBA_DRV" => "SB_RGBA_DRV",
        "SB_RGB_DRV" => "SB_RGB_DRV",
        "SB_LED_DRV_CUR" => "SB_LED_DRV_CUR",
        "SB_IO_I3C" => "IO_I3C",
        _ => return None,
    })
}

impl<'a> Graph<'a> {
    fn new(m: &'a Module) -> (Self, HashMap<u32, Net>) {
        let mut ids: HashMap<u32, Net> = HashMap::new();
        let intern = |n: u32, ids: &mut HashMap<u32, Net>| {
            let next = ids.len();
            *ids.entry(n).or_insert(next)
        };
        for c in &m.cells {
            for (_, bits) in &c.connections {
                bits.iter().for_each(|b| if let Bit::Net(n) = b { intern(*n, &mut ids); });
            }
        }
        for p in &m.ports {
            p.bits.iter().for_each(|b| if let Bit::Net(n) = b { intern(*n, &mut ids); });
        }
        let vcc = ids.len();
        let nets = vcc + 2; // VCC, then GND
        let mut g = Graph {
            cells: &m.cells,
            nets,
            vcc,
            users: vec![Vec::new(); nets],
            driver: vec![None; nets],
            lcs: Vec::new(),
            cell_lc: vec![None; m.cells.len()],
        };
        for (ci, c) in m.cells.iter().enumerate() {
            for (port, bits) in &c.connections {
                for b in bits {
                    let Some(n) = g.net_of(&ids, *b) else { continue };
                    if c.is_output(port) {
                        g.driver[n] = Some((Owner::Cell(ci), port.as_str()));
                    } else {
                        g.users[n].push((Owner::Cell(ci), port.as_str()));
                    }
                }
            }
        }
        for p in &m.ports {
            for b in &p.bits {
                let Some(n) = g.net_of(&ids, *b) else { continue };
                match p.direction {
                    Direction::Input => g.driver[n] = g.driver[n].or(Some((Owner::TopPort, "O"))),
                    _ => g.users[n].push((Owner::TopPort, "I")),
                }
            }
        }
        (g, ids)
    }

    /// A bit as a net: constant one is the VCC net; zero and undriven bits are no net, which is
    /// what nextpnr does to constant-zero LUT and carry inputs.
    fn net_of(&self, ids: &HashMap<u32, Net>, b: Bit) -> Option<Net> {
        match b {
            Bit::Net(n) => ids.get(&n).copied(),
            Bit::One => Some(self.vcc),
            Bit::Zero | Bit::Undriven => None,
        }
    }

    /// The LC port a netlist cell's port became, if that cell is inside an LC.
    pub fn lc_port(&self, owner: Owner, port: &str) -> Option<(usize, &'static str)> {
        let Owner::Cell(ci) = owner else { return None };
        let lc = self.cell_lc[ci]?;
        let t = self.cells[ci].cell_type.as_str();
        let mapped = match (t, port) {
            ("SB_LUT4", "I0") => "I0",
            ("SB_LUT4", "I1") => "I1",
            ("SB_LUT4", "I2") => "I2",
            ("SB_LUT4", "I3") => "I3",
            ("SB_CARRY", "CI") => "CIN",
            ("SB_CARRY", "I0") => "I1",
            ("SB_CARRY", "I1") => "I2",
            (t, "D") if is_ff(t) && !self.lcs[lc].lut => "I0",
            (t, "C") if is_ff(t) => "CLK",
            (t, "E") if is_ff(t) => "CEN",
            (t, "R" | "S") if is_ff(t) => "SR",
            _ => return None,
        };
        Some((lc, mapped))
    }

    /// nextpnr's `net_only_drives(net, is_lc, port, exclusive)`.
    pub fn only_drives(&self, net: Net, port: &str, exclusive: bool) -> Option<usize> {
        let users = &self.users[net];
        if exclusive && users.len() != 1 {
            return None;
        }
        users.iter().find_map(|(o, p)| self.lc_port(*o, p).filter(|(_, lp)| *lp == port).map(|(lc, _)| lc))
    }
}

/// Packs the top module for a device, as `nextpnr-ice40 --pack-only` would.
pub fn pack(m: &Module, device: &Device) -> Packing {
    let (mut g, ids) = Graph::new(m);
    let mut used: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut unknown_cells = Vec::new();
    let vcc = g.vcc;
    let n = |b: Option<Bit>| b.and_then(|b| g_net(&ids, vcc, b));

    // LUT4 + DFF pairs: a LUT whose output drives only one flip-flop's D input.
    for (ci, c) in m.cells.iter().enumerate().filter(|(_, c)| c.cell_type == "SB_LUT4") {
        let o = n(c.bit("O"));
        let dff = o.and_then(|o| match g.users[o].as_slice() {
            [(Owner::Cell(d), "D")] if is_ff(&m.cells[*d].cell_type) && g.cell_lc[*d].is_none() => Some(*d),
            _ => None,
        });
        let inputs = ["I0", "I1", "I2", "I3"].map(|p| n(c.bit(p)));
        g.lcs.push(Lc { inputs, lut: true, dff: dff.map(|d| dff_of(&m.cells[d], &n)), ..Lc::default() });
        g.cell_lc[ci] = Some(g.lcs.len() - 1);
        if let Some(d) = dff {
            g.cell_lc[d] = Some(g.lcs.len() - 1);
        }
    }
    // Flip-flops left over get an LC with a pass-through LUT.
    for (ci, c) in m.cells.iter().enumerate() {
        if is_ff(&c.cell_type) && g.cell_lc[ci].is_none() {
            let inputs = [c.bit("D").and_then(|b| g_net_any(&ids, vcc, b)), None, None, None];
            g.lcs.push(Lc { inputs, dff: Some(dff_of(c, &n)), ..Lc::default() });
            g.cell_lc[ci] = Some(g.lcs.len() - 1);
        }
    }
    let mut breakdown = Breakdown {
        lut_only: g.lcs.iter().filter(|l| l.lut && l.dff.is_none()).count() as u32,
        lut_dff: g.lcs.iter().filter(|l| l.lut && l.dff.is_some()).count() as u32,
        dff_only: g.lcs.iter().filter(|l| !l.lut).count() as u32,
        ..Breakdown::default()
    };
    let carry_only = pack_carries(&mut g, m, &n);
    breakdown.carry_only = carry_only.len() as u32;
    merge_indirect(&mut g, &carry_only);
    breakdown.merged = g.lcs.iter().filter(|l| l.gone).count() as u32;

    let mut extra_lcs = 1; // nextpnr always inserts the VCC driver
    let any_zero = m.cells.iter().any(|c| c.connections.iter().any(|(_, b)| b.contains(&Bit::Zero)))
        || m.ports.iter().any(|p| p.bits.contains(&Bit::Zero));
    extra_lcs += u32::from(any_zero);

    for (ci, c) in m.cells.iter().enumerate() {
        let t = c.cell_type.as_str();
        if t == "SB_LUT4" || t == "SB_CARRY" || is_ff(t) {
            continue;
        }
        if t == "ICESTORM_LC" {
            extra_lcs += 1;
        } else if let Some(r) = hard_resource(t) {
            *used.entry(r).or_default() += 1;
            // A used PLL LOCK output cannot reach the fabric directly: nextpnr adds a LUT.
            if r == "ICESTORM_PLL" && n(c.bit("LOCK")).is_some_and(|l| !g.users[l].is_empty()) {
                extra_lcs += 1;
            }
        } else {
            unknown_cells.push(ci);
        }
    }
    // Every top-level port bit needs an SB_IO unless an IO cell already owns its pad.
    let pads: BTreeSet<u32> = m
        .cells
        .iter()
        .flat_map(|c| {
            let p = pad_port(&c.cell_type).or(match c.cell_type.as_str() {
                "SB_RGBA_DRV" | "SB_RGB_DRV" => Some("RGB"),
                t if t.starts_with("SB_PLL40") && t.ends_with("PAD") => Some("PACKAGEPIN"),
                _ => None,
            });
            c.connections.iter().filter(move |(port, _)| p.is_some_and(|p| port.starts_with(p))).flat_map(|(_, b)| b.clone())
        })
        .filter_map(|b| if let Bit::Net(x) = b { Some(x) } else { None })
        .collect();
    let top_ios = m.ports.iter().flat_map(|p| &p.bits).filter(|b| !matches!(b, Bit::Net(x) if pads.contains(x))).count();
    *used.entry("SB_IO").or_default() += top_ios as u32;

    let existing_gbs = used.get("SB_GB").copied().unwrap_or(0);
    let promoted = globals::promote(&g, existing_gbs);
    *used.entry("SB_GB").or_default() += promoted.len() as u32;
    let chain_lcs = chains::legalise(&mut g, &promoted, device);
    breakdown.chain_legalise = chain_lcs;

    let lcs = g.lcs.iter().filter(|l| !l.gone).count() as u32;
    used.insert("ICESTORM_LC", lcs + extra_lcs + chain_lcs);
    Packing { used, unknown_cells, breakdown }
}

fn g_net(ids: &HashMap<u32, Net>, vcc: Net, b: Bit) -> Option<Net> {
    match b {
        Bit::Net(n) => ids.get(&n).copied(),
        Bit::One => Some(vcc),
        Bit::Zero | Bit::Undriven => None,
    }
}

/// Like [`g_net`] but a constant zero stays connected (to the GND net, right after VCC), as
/// on flip-flop D inputs.
fn g_net_any(ids: &HashMap<u32, Net>, vcc: Net, b: Bit) -> Option<Net> {
    match b {
        Bit::Zero => Some(vcc + 1),
        other => g_net(ids, vcc, other),
    }
}

fn dff_of(c: &Cell, n: &impl Fn(Option<Bit>) -> Option<Net>) -> Dff {
    Dff {
        clk: n(c.bit("C")),
        cen: n(c.bit("E")),
        sr: n(c.bit("R")).or_else(|| n(c.bit("S"))),
        neg: c.cell_type.starts_with("SB_DFFN"),
    }
}

/// Puts each SB_CARRY into the LC whose LUT already has the carry's operands on I1/I2 (and
/// whose I3 takes the carry-in), or into a new carry-only LC. Returns the carry-only LCs.
fn pack_carries(g: &mut Graph, m: &Module, n: &impl Fn(Option<Bit>) -> Option<Net>) -> Vec<usize> {
    let mut exhausted = BTreeSet::new();
    let mut carry_only = Vec::new();
    let existing = g.lcs.len();
    for (ci, c) in m.cells.iter().enumerate().filter(|(_, c)| c.cell_type == "SB_CARRY") {
        let cin = n(c.bit("CI")).filter(|x| *x != g.vcc);
        let (i0, i1) = (n(c.bit("I0")), n(c.bit("I1")));
        let ci_lc = cin.and_then(|x| g.only_drives(x, "I3", false)).filter(|l| *l < existing);
        let matches = |net: Option<Net>, port: &str, other: usize| -> (BTreeSet<usize>, BTreeSet<usize>) {
            let (mut own, mut dup) = (BTreeSet::new(), BTreeSet::new());
            if let Some(x) = net {
                for (o, p) in &g.users[x] {
                    if let Some((lc, lp)) = g.lc_port(*o, p) {
                        if lp == port && lc < existing && !exhausted.contains(&lc) {
                            own.insert(lc);
                            if g.lcs[lc].inputs[other].is_none() {
                                dup.insert(lc);
                            }
                        }
                    }
                }
            }
            (own, dup)
        };
        let (mut m0, dup1) = matches(i0, "I1", 2);
        let (mut m1, dup0) = matches(i1, "I2", 1);
        if i1.is_none() {
            m1.extend(dup1);
        }
        if i0.is_none() {
            m0.extend(dup0);
        }
        let both: BTreeSet<usize> = m0.intersection(&m1).copied().collect();
        // An LC whose I3 takes the carry-in is the only candidate when there is one.
        let lc = match ci_lc {
            Some(l) if both.contains(&l) => l,
            _ => match both.first().filter(|_| ci_lc.is_none()) {
                Some(l) => *l,
                None => {
                    g.lcs.push(Lc { inputs: [None, i0, i1, None], ..Lc::default() });
                    carry_only.push(g.lcs.len() - 1);
                    g.lcs.len() - 1
                }
            },
        };
        exhausted.insert(lc);
        let l = &mut g.lcs[lc];
        l.carry = true;
        l.cin = cin;
        l.cout = n(c.bit("CO"));
        g.cell_lc[ci] = Some(lc);
    }
    carry_only
}

/// nextpnr's "indirect carry+LUT pairs": a LUT with at most two inputs of its own that drives
/// a carry-only LC's operand moves into that LC's unused LUT.
fn merge_indirect(g: &mut Graph, carry_only: &[usize]) {
    for &c in carry_only {
        for slot in [1, 2] {
            let Some(x) = g.lcs[c].inputs[slot] else { continue };
            let Some((Owner::Cell(d), "O")) = g.driver[x] else { continue };
            if g.cells[d].cell_type != "SB_LUT4" {
                continue;
            }
            let Some(src) = g.cell_lc[d] else { continue };
            let s = &g.lcs[src];
            if src == c || s.gone || s.dff.is_some() || s.carry || !s.lut {
                continue;
            }
            let own: Vec<Net> = s.inputs.iter().flatten().copied().filter(|i| !g.lcs[c].inputs.contains(&Some(*i))).collect();
            if own.len() > 2 {
                continue;
            }
            let mut own = own.into_iter();
            let target = &mut g.lcs[c];
            for free in [0, 3] {
                if target.inputs[free].is_none() {
                    target.inputs[free] = own.next();
                }
            }
            target.lut = true;
            g.lcs[src].gone = true;
            g.cell_lc[d] = Some(c);
            break;
        }
    }
}
