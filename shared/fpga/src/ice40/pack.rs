//! A model of nextpnr-ice40 0.4's packer (`--pack-only`), enough to reproduce its utilisation.
//!
//! The steps follow nextpnr's order: constants, IO, LUT+FF pairing, lone FFs, carries, indirect
//! carry+LUT merges, hard cells, global promotion ([`globals`]) and carry-chain legalisation
//! ([`chains`]). Every logic cell is an [`Lc`]; nets are dense indices. The rules were read off
//! nextpnr's behaviour on the recorded fixtures (`fixtures/cases`), which the oracle test checks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rustc_hash::FxHashMap;

use crate::budget::Deadline;
use crate::device::Device;
use crate::netlist::{Bit, Module};

mod chains;
mod globals;
mod graph;

pub(crate) use graph::{Graph, Kind, LcPort, Net, Owner, Role};

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

/// Utilisation after packing, by nextpnr resource name, plus cells we do not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    pub used: BTreeMap<&'static str, u32>,
    /// Indices of cells whose type nextpnr-ice40 would not recognise.
    pub unknown_cells: Vec<usize>,
    /// The netlist cells behind each hard resource other than IO (`ICESTORM_PLL`,
    /// `SB_WARMBOOT`, …), in netlist order, so a finding about the resource can name them.
    pub hard_cells: BTreeMap<&'static str, Vec<usize>>,
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

pub(crate) fn is_ff(t: &str) -> bool {
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
        "SB_IO" | "SB_GB_IO" => "SB_IO",
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
        _ => return None,
    })
}

/// Packs the top module for a device, as `nextpnr-ice40 --pack-only` would.
pub fn pack(m: &Module<'_>, device: &Device) -> Packing {
    // Without a deadline there is nothing to run out of.
    pack_within(m, device, &Deadline::default()).unwrap_or_else(|| Packing {
        used: BTreeMap::new(),
        unknown_cells: Vec::new(),
        hard_cells: BTreeMap::new(),
        breakdown: Breakdown::default(),
    })
}

/// [`pack`], or `None` once `deadline` has passed (looked at between steps and every
/// [`CELLS_PER_LOOK`] cells).
pub(crate) fn pack_within(m: &Module<'_>, device: &Device, deadline: &Deadline) -> Option<Packing> {
    pack_placed(m, device, &HashMap::new(), deadline)
}

/// [`pack_within`] for a design whose IO the PCF has placed: `gb_io_networks` maps the net on
/// each `SB_GB_IO`'s `PACKAGE_PIN` to the global network of its pin. nextpnr's promotion counts
/// those buffers against its budget of 4 reset and 4 enable globals (even networks can carry a
/// reset, odd ones an enable), so where they sit changes what else it promotes.
pub(crate) fn pack_placed(
    m: &Module<'_>,
    device: &Device,
    gb_io_networks: &HashMap<u32, u8>,
    deadline: &Deadline,
) -> Option<Packing> {
    let mut g = Graph::new(m);
    pair_luts_with_ffs(&mut g, deadline)?;
    pack_lone_ffs(&mut g);
    let mut breakdown = lut_and_ff_breakdown(&g);
    if deadline.passed() {
        return None;
    }
    let carry_only = pack_carries(&mut g);
    breakdown.carry_only = carry_only.len() as u32;
    let vcc_merged = merge_indirect(&mut g, &carry_only);
    breakdown.merged = g.lcs.iter().filter(|l| l.gone).count() as u32 + u32::from(vcc_merged);

    // nextpnr always inserts the VCC driver, unless a carry LC swallowed it.
    let mut extra_lcs = u32::from(!vcc_merged) + u32::from(uses_constant_zero(m));
    let mut used: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut hard_cells = BTreeMap::new();
    let (hard_cell_lcs, unknown_cells) = count_hard_cells(&g, &mut used, &mut hard_cells);
    extra_lcs += hard_cell_lcs;
    *used.entry("SB_IO").or_default() += top_port_ios(m);

    if deadline.passed() {
        return None;
    }
    let existing_gbs = used.get("SB_GB").copied().unwrap_or(0);
    let taken = globals::taken_networks(&g, device, gb_io_networks);
    let promoted = globals::promote(&g, existing_gbs, taken);
    if deadline.passed() {
        return None;
    }
    *used.entry("SB_GB").or_default() += promoted.len() as u32;
    let chain_lcs = chains::legalise(&mut g, &promoted, device);
    breakdown.chain_legalise = chain_lcs;

    let lcs = g.lcs.iter().filter(|l| !l.gone).count() as u32;
    used.insert("ICESTORM_LC", lcs + extra_lcs + chain_lcs);
    Some(Packing { used, unknown_cells, hard_cells, breakdown })
}

/// LUT4 + DFF pairs: gives every LUT an LC, packing with it the flip-flop its output drives
/// when that is the output's only user (on D). `None` once `deadline` has passed.
fn pair_luts_with_ffs(g: &mut Graph, deadline: &Deadline) -> Option<()> {
    for ci in 0..g.module.cells.len() {
        if ci.is_multiple_of(CELLS_PER_LOOK) && deadline.passed() {
            return None;
        }
        if g.kinds[ci] != Kind::Lut {
            continue;
        }
        let dff = g.pin(ci, Role::O).and_then(|o| match g.users(o) {
            [u] if u.role == Role::D => match u.owner() {
                Owner::Cell(d) if g.kinds[d] == Kind::Ff && g.cell_lc[d].is_none() => Some(d),
                _ => None,
            },
            _ => None,
        });
        let inputs = [Role::I0, Role::I1, Role::I2, Role::I3].map(|p| g.pin(ci, p));
        let lc = Lc { inputs, lut: true, dff: dff.map(|d| dff_of(g, d)), ..Lc::default() };
        g.lcs.push(lc);
        g.cell_lc[ci] = Some(g.lcs.len() - 1);
        if let Some(d) = dff {
            g.cell_lc[d] = Some(g.lcs.len() - 1);
        }
    }
    Some(())
}

/// Flip-flops left over get an LC with a pass-through LUT.
fn pack_lone_ffs(g: &mut Graph) {
    let m = g.module;
    for (ci, c) in m.cells.iter().enumerate() {
        if g.kinds[ci] == Kind::Ff && g.cell_lc[ci].is_none() {
            let inputs = [m.bit(c, "D").and_then(|b| g.net_of_any(b)), None, None, None];
            let lc = Lc { inputs, dff: Some(dff_of(g, ci)), ..Lc::default() };
            g.lcs.push(lc);
            g.cell_lc[ci] = Some(g.lcs.len() - 1);
        }
    }
}

/// The LUT and flip-flop counts nextpnr logs once they are packed.
fn lut_and_ff_breakdown(g: &Graph) -> Breakdown {
    Breakdown {
        lut_only: g.lcs.iter().filter(|l| l.lut && l.dff.is_none()).count() as u32,
        lut_dff: g.lcs.iter().filter(|l| l.lut && l.dff.is_some()).count() as u32,
        dff_only: g.lcs.iter().filter(|l| !l.lut).count() as u32,
        ..Breakdown::default()
    }
}

/// Whether anything is tied to constant zero, for which nextpnr adds a GND driver LC.
fn uses_constant_zero(m: &Module<'_>) -> bool {
    m.all_cell_bits().contains(&Bit::Zero) || m.ports.iter().any(|p| p.bits.contains(&Bit::Zero))
}

/// Counts the cells that are not LUTs, carries or flip-flops into `used` by resource. Returns
/// the LCs they add (an `ICESTORM_LC` cell each, a pass-through LUT for a PLL `LOCK` output
/// that does not reach only LUTs) and the indices of the cells nextpnr-ice40 would not
/// recognise.
///
/// Some hard cells bring a global buffer (`SB_GB`) with them, as nextpnr's packer creates one
/// beside them: every `SB_GB_IO`, every oscillator whose clock is not routed through the fabric
/// (`ROUTE_THROUGH_FABRIC`), and every PLL global output (`PLLOUTGLOBAL*`) that something uses.
fn count_hard_cells(
    g: &Graph,
    used: &mut BTreeMap<&'static str, u32>,
    cells: &mut BTreeMap<&'static str, Vec<usize>>,
) -> (u32, Vec<usize>) {
    let (mut extra_lcs, mut unknown_cells) = (0, Vec::new());
    let m = g.module;
    for (ci, c) in m.cells.iter().enumerate() {
        let t = c.cell_type.as_ref();
        if g.kinds[ci] != Kind::Other {
            continue;
        }
        if t == "ICESTORM_LC" {
            extra_lcs += 1;
            continue;
        }
        let Some(r) = hard_resource(t) else {
            unknown_cells.push(ci);
            continue;
        };
        *used.entry(r).or_default() += 1;
        if r != "SB_IO" {
            cells.entry(r).or_default().push(ci);
        }
        let gbs = match t {
            "SB_GB_IO" => 1,
            "SB_HFOSC" | "SB_LFOSC" if !routes_through_fabric(m, c) => 1,
            _ if r == "ICESTORM_PLL" => {
                let global = |port: &str| match m.bit(c, port).and_then(|b| g.net_of(b)) {
                    Some(net) => !g.users(net).is_empty(),
                    None => false,
                };
                ["PLLOUTGLOBAL", "PLLOUTGLOBALA", "PLLOUTGLOBALB"].into_iter().filter(|p| global(p)).count() as u32
            }
            _ => 0,
        };
        if gbs > 0 {
            *used.entry("SB_GB").or_default() += gbs;
        }
        if r == "ICESTORM_PLL" {
            extra_lcs += u32::from(lock_needs_a_lut(g, ci));
        }
    }
    (extra_lcs, unknown_cells)
}

/// Whether an oscillator's clock goes through the fabric instead of a global buffer.
pub(crate) fn routes_through_fabric(m: &Module<'_>, c: &crate::netlist::Cell<'_>) -> bool {
    m.attribute(c, "ROUTE_THROUGH_FABRIC").as_ref().and_then(crate::pll::param_u32).is_some_and(|v| v != 0)
}

/// A PLL's `LOCK` output reaches only LUT inputs, so nextpnr-ice40 0.4 puts a pass-through LUT
/// between it and its users unless every user is a logic cell without a carry and there are
/// fewer than 8 of them (it then places those users next to the PLL instead).
fn lock_needs_a_lut(g: &Graph, ci: usize) -> bool {
    let Some(lock) = g.pin(ci, Role::Lock) else { return false };
    let users = g.users(lock);
    let mut luts = 0;
    for u in users {
        let Owner::Cell(user) = u.owner() else { return true };
        let Some(lc) = g.cell_lc[user] else { return true };
        if g.lcs[lc].carry {
            return true;
        }
        luts += 1;
    }
    !(1..8).contains(&luts)
}

/// How many `SB_IO`s the top-level ports need: one per port bit, unless an IO cell already
/// owns its pad.
fn top_port_ios(m: &Module<'_>) -> u32 {
    let pads: BTreeSet<u32> = m
        .cells
        .iter()
        .flat_map(|c| {
            // An LED driver's RGB outputs drive their pads directly. A PAD PLL's PACKAGEPIN
            // does not: nextpnr gives its port an input SB_IO like any other.
            let pads: &[&str] = match (pad_port(&c.cell_type), c.cell_type.as_ref()) {
                (Some("PACKAGE_PIN"), _) => &["PACKAGE_PIN"],
                (Some(_), _) => &["PACKAGEPIN"],
                (None, "SB_RGBA_DRV" | "SB_RGB_DRV") => &["RGB0", "RGB1", "RGB2"],
                (None, _) => &[],
            };
            m.connections(c).iter().filter(move |conn| pads.contains(&conn.port.as_ref())).flat_map(|conn| m.bits(conn))
        })
        .filter_map(|b| if let Bit::Net(x) = b { Some(*x) } else { None })
        .collect();
    let top_ios =
        m.ports.iter().flat_map(|p| &p.bits).filter(|b| !matches!(b, Bit::Net(x) if pads.contains(x))).count();
    top_ios as u32
}

/// How many cells the packer's loops visit between looks at the clock.
const CELLS_PER_LOOK: usize = 1024;

fn dff_of(g: &Graph, ci: usize) -> Dff {
    Dff {
        clk: g.pin(ci, Role::C),
        cen: g.pin(ci, Role::E),
        sr: g.pin(ci, Role::R).or_else(|| g.pin(ci, Role::S)),
        neg: g.module.cells[ci].cell_type.starts_with("SB_DFFN"),
    }
}

/// Puts each SB_CARRY into the LC whose LUT already has the carry's operands on I1/I2 (and
/// whose I3 takes the carry-in, or the only such LC when the carry-in is constant), or into a
/// new carry-only LC. Returns the carry-only LCs.
fn pack_carries(g: &mut Graph) -> Vec<usize> {
    let mut carry_only = Vec::new();
    let existing = g.lcs.len();
    // Carries only ever become Cin/I1/I2 users, so which LC takes a net on I3 is fixed here.
    let i3_of = g.first_lc_on(LcPort::I3);
    // Candidate LCs by the nets on their I1 and I2; an LC leaves when a carry takes it.
    let mut by_operands: FxHashMap<(Option<Net>, Option<Net>), BTreeSet<usize>> = FxHashMap::default();
    for (lc, l) in g.lcs.iter().enumerate().filter(|(_, l)| l.lut) {
        by_operands.entry((l.inputs[1], l.inputs[2])).or_default().insert(lc);
    }
    for ci in 0..g.kinds.len() {
        if g.kinds[ci] != Kind::Carry {
            continue;
        }
        let cin = g.pin(ci, Role::Ci).filter(|x| *x != g.vcc);
        // A constant carry-in stays on nextpnr's GND/VCC net (only `I*` ports are cut from GND).
        let ci_const = matches!(g.module.bit(&g.module.cells[ci], "CI"), Some(Bit::Zero | Bit::One));
        let (i0, i1) = (g.pin(ci, Role::I0), g.pin(ci, Role::I1));
        let ci_lc = cin.and_then(|x| i3_of[x]).filter(|l| *l < existing);
        // The LCs (built before this step, not yet given a carry) with I1 on `i0` and I2 on
        // `i1`; an absent operand asks for a free input. nextpnr intersects the users of both
        // nets; the index answers the same without walking a net's users once per carry.
        let both = match (i0, i1) {
            (None, None) => None,
            operands => by_operands.get(&operands),
        };
        // The LC whose I3 takes the carry-in, if it has the operands; else, with a constant
        // carry-in, the one LC that has them (several is ambiguous, so nextpnr adds an LC).
        let lc = match ci_lc {
            Some(l) if both.is_some_and(|b| b.contains(&l)) => l,
            _ => match both.filter(|b| ci_const && b.len() == 1).and_then(|b| b.first()) {
                Some(l) => *l,
                None => {
                    g.lcs.push(Lc { inputs: [None, i0, i1, None], ..Lc::default() });
                    carry_only.push(g.lcs.len() - 1);
                    g.lcs.len() - 1
                }
            },
        };
        if lc < existing {
            let l = &g.lcs[lc];
            if let Some(set) = by_operands.get_mut(&(l.inputs[1], l.inputs[2])) {
                set.remove(&lc);
            }
        }
        let cout = g.pin(ci, Role::Co);
        let l = &mut g.lcs[lc];
        l.carry = true;
        l.cin = cin;
        l.cout = cout;
        g.cell_lc[ci] = Some(lc);
    }
    carry_only
}

/// nextpnr's "indirect carry+LUT pairs": a LUT-only LC whose I0 and I1 are unconnected (a
/// LUT2 or smaller; yosys fills the top inputs first) and that drives a carry-only LC's operand
/// moves into that LC's unused LUT, its I2 and I3 becoming the carry LC's I0 and I3.
///
/// The constant-one driver nextpnr inserts (`$PACKER_VCC`, a LUT-only LC with no inputs) is
/// such a LUT too: the first carry-only LC with VCC on an operand swallows it, and the VCC LC
/// disappears. Returns whether that happened.
fn merge_indirect(g: &mut Graph, carry_only: &[usize]) -> bool {
    let mut vcc_merged = false;
    for &c in carry_only {
        for slot in [1, 2] {
            let Some(x) = g.lcs[c].inputs[slot] else { continue };
            if x == g.vcc {
                if vcc_merged {
                    continue;
                }
                vcc_merged = true;
                g.lcs[c].lut = true;
                break;
            }
            let Some((Owner::Cell(d), "O")) = g.driver[x] else { continue };
            if g.kinds[d] != Kind::Lut {
                continue;
            }
            let Some(src) = g.cell_lc[d] else { continue };
            let s = &g.lcs[src];
            if src == c || s.gone || s.dff.is_some() || s.carry || !s.lut {
                continue;
            }
            if s.inputs[0].is_some() || s.inputs[1].is_some() {
                continue;
            }
            let (i2, i3) = (s.inputs[2], s.inputs[3]);
            let target = &mut g.lcs[c];
            target.inputs[0] = i2;
            target.inputs[3] = i3;
            target.lut = true;
            g.lcs[src].gone = true;
            g.cell_lc[d] = Some(c);
            break;
        }
    }
    vcc_merged
}
