//! The packer's working state: the netlist's nets as dense indices, who drives and uses each
//! one, and the logic cells built so far.
//!
//! Built once per validation, so it avoids per-net allocations: net numbers map through a
//! table (yosys numbers nets densely from 2), and each net's users are a slice of one shared
//! list (compressed rows), in netlist order, which nextpnr's choices depend on.

use std::collections::HashMap;

use super::{is_ff, Lc};
use crate::netlist::{Bit, Direction, Module};

pub(crate) type Net = usize;

/// Who uses a net: a netlist cell (by index) or a top-level port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Cell(usize),
    TopPort,
}

/// What the packer does with a cell, decided once from its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Lut,
    Carry,
    Ff,
    Other,
}

impl Kind {
    fn of(cell_type: &str) -> Kind {
        match cell_type {
            "SB_LUT4" => Kind::Lut,
            "SB_CARRY" => Kind::Carry,
            t if is_ff(t) => Kind::Ff,
            _ => Kind::Other,
        }
    }
}

/// A cell port the packer cares about, recognised once while building the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    I0,
    I1,
    I2,
    I3,
    O,
    Ci,
    Co,
    D,
    C,
    E,
    R,
    S,
    Lock,
    Other,
}

const ROLES: usize = Role::Other as usize;

impl Role {
    fn of(port: &str) -> Role {
        match port {
            "I0" => Role::I0,
            "I1" => Role::I1,
            "I2" => Role::I2,
            "I3" => Role::I3,
            "O" => Role::O,
            "CI" => Role::Ci,
            "CO" => Role::Co,
            "D" => Role::D,
            "C" => Role::C,
            "E" => Role::E,
            "R" => Role::R,
            "S" => Role::S,
            "LOCK" => Role::Lock,
            _ => Role::Other,
        }
    }
}

/// A port of a logic cell (`ICESTORM_LC`) that a netlist cell's port became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LcPort {
    I0,
    I1,
    I2,
    I3,
    Cin,
    Clk,
    Cen,
    Sr,
}

/// One user of a net, in twelve bytes: a net's users are written into one shared list while
/// the graph is built, and that list is the largest thing the packer writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Use {
    /// The netlist cell, or `u32::MAX` for a top-level port.
    cell: u32,
    /// Which of the cell's connections (its index among them); [`Graph::port`] names it.
    conn: u32,
    pub role: Role,
}

impl Use {
    pub fn owner(&self) -> Owner {
        match self.cell {
            u32::MAX => Owner::TopPort,
            ci => Owner::Cell(ci as usize),
        }
    }
}

/// yosys net numbers to dense [`Net`] indices.
enum NetIds {
    /// Indexed by net number; `u32::MAX` for numbers not in the netlist. `len` nets in all.
    Table { table: Vec<u32>, len: usize },
    /// For sparse or huge numbers, which yosys never writes but input may contain.
    Map(HashMap<u32, u32>),
}

impl NetIds {
    fn new(m: &Module<'_>) -> Self {
        // First-seen order (cells by name, ports by name, then top-level ports) sets the
        // dense indices, and ties in global promotion go to the lowest index.
        let each_number = |visit: &mut dyn FnMut(u32)| {
            for c in &m.cells {
                for conn in m.connections(c) {
                    for b in m.bits(conn) {
                        if let Bit::Net(n) = b {
                            visit(*n);
                        }
                    }
                }
            }
            for p in &m.ports {
                for b in &p.bits {
                    if let Bit::Net(n) = b {
                        visit(*n);
                    }
                }
            }
        };
        let (mut count, mut max) = (0usize, 0u32);
        each_number(&mut |n| {
            count += 1;
            max = max.max(n);
        });
        let mut next = 0u32;
        if (max as usize) <= 4 * count + 1024 {
            let mut table = vec![u32::MAX; max as usize + 1];
            each_number(&mut |n| {
                if table[n as usize] == u32::MAX {
                    table[n as usize] = next;
                    next += 1;
                }
            });
            NetIds::Table { table, len: next as usize }
        } else {
            let mut map = HashMap::new();
            each_number(&mut |n| {
                map.entry(n).or_insert_with(|| {
                    next += 1;
                    next - 1
                });
            });
            NetIds::Map(map)
        }
    }

    fn get(&self, n: u32) -> Option<Net> {
        let id = match self {
            NetIds::Table { table, .. } => table.get(n as usize).copied().filter(|i| *i != u32::MAX),
            NetIds::Map(m) => m.get(&n).copied(),
        };
        id.map(|i| i as Net)
    }

    fn len(&self) -> usize {
        match self {
            NetIds::Table { len, .. } => *len,
            NetIds::Map(m) => m.len(),
        }
    }
}

pub(crate) struct Graph<'a> {
    pub module: &'a Module<'a>,
    pub kinds: Vec<Kind>,
    pub nets: usize,
    pub vcc: Net,
    ids: NetIds,
    user_start: Vec<u32>,
    user_list: Vec<Use>,
    /// Each cell's net on the ports in [`Role`] (first bit), `u32::MAX` when unconnected.
    pins: Vec<[u32; ROLES]>,
    pub driver: Vec<Option<(Owner, &'a str)>>,
    pub lcs: Vec<Lc>,
    /// Which LC each netlist cell ended up in.
    pub cell_lc: Vec<Option<usize>>,
}

impl<'a> Graph<'a> {
    pub fn new(m: &'a Module<'a>) -> Self {
        let ids = NetIds::new(m);
        let vcc = ids.len();
        let nets = vcc + 2; // VCC, then GND
        let mut g = Graph {
            module: m,
            kinds: m.cells.iter().map(|c| Kind::of(&c.cell_type)).collect(),
            nets,
            vcc,
            ids,
            user_start: vec![0; nets + 1],
            user_list: Vec::new(),
            pins: vec![[u32::MAX; ROLES]; m.cells.len()],
            driver: vec![None; nets],
            // Every LUT, flip-flop and carry cell makes at most one LC: one allocation, not a
            // growing list's several.
            lcs: Vec::with_capacity(m.cells.len()),
            cell_lc: vec![None; m.cells.len()],
        };
        // Two passes over the same uses: count each net's users, then place them.
        let mut fill: Option<Vec<u32>> = None;
        let mut roles = Vec::with_capacity(m.cells.iter().map(|c| m.connections(c).len()).sum());
        for pass in 0..2 {
            g.cell_uses(pass, &mut fill, &mut roles);
            g.port_uses(pass, &mut fill);
            if pass == 0 {
                fill = Some(g.allocate_users());
            }
        }
        g
    }

    /// One pass over the cells' connections. The first records each port's role (in `roles`,
    /// read back in the same order by the second), each cell's pins and each net's driver, and
    /// counts users; the second places them.
    fn cell_uses(&mut self, pass: usize, fill: &mut Option<Vec<u32>>, roles: &mut Vec<Role>) {
        let m = self.module;
        let mut k = 0;
        for (ci, c) in m.cells.iter().enumerate() {
            for (k_conn, conn) in m.connections(c).iter().enumerate() {
                let role = if pass == 0 {
                    roles.push(Role::of(&conn.port));
                    roles[roles.len() - 1]
                } else {
                    k += 1;
                    roles[k - 1]
                };
                if pass == 0 && role != Role::Other {
                    if let Some(n) = m.bits(conn).first().and_then(|b| self.net_of(*b)) {
                        self.pins[ci][role as usize] = n as u32;
                    }
                }
                for b in m.bits(conn) {
                    let Some(n) = self.net_of(*b) else { continue };
                    if conn.output {
                        if pass == 0 {
                            self.driver[n] = Some((Owner::Cell(ci), conn.port.as_ref()));
                        }
                    } else {
                        self.add_user(pass, fill, n, Use { cell: ci as u32, conn: k_conn as u32, role });
                    }
                }
            }
        }
    }

    /// One pass over the top-level ports: an input port drives its nets (unless a cell already
    /// does), any other port uses them.
    fn port_uses(&mut self, pass: usize, fill: &mut Option<Vec<u32>>) {
        for p in &self.module.ports {
            for b in &p.bits {
                let Some(n) = self.net_of(*b) else { continue };
                match p.direction {
                    Direction::Input if pass == 0 => self.driver[n] = self.driver[n].or(Some((Owner::TopPort, "O"))),
                    Direction::Input => {}
                    _ => self.add_user(pass, fill, n, Use { cell: u32::MAX, conn: 0, role: Role::Other }),
                }
            }
        }
    }

    /// Turns the user counts into each net's first slot in one shared list, allocates the
    /// list and returns the next free slot of each net (its first, for now).
    fn allocate_users(&mut self) -> Vec<u32> {
        let mut total = 0;
        for s in self.user_start.iter_mut() {
            let count = *s;
            *s = total;
            total += count;
        }
        self.user_list = vec![Use { cell: u32::MAX, conn: 0, role: Role::Other }; total as usize];
        self.user_start.clone()
    }

    fn add_user(&mut self, pass: usize, fill: &mut Option<Vec<u32>>, n: Net, user: Use) {
        match (pass, fill) {
            (0, _) => self.user_start[n] += 1,
            (_, Some(next)) => {
                self.user_list[next[n] as usize] = user;
                next[n] += 1;
            }
            _ => {}
        }
    }

    /// Who uses a net, in netlist order (cells by name, then top-level ports).
    pub fn users(&self, n: Net) -> &[Use] {
        &self.user_list[self.user_start[n] as usize..self.user_start[n + 1] as usize]
    }

    /// The port a user takes the net on (`I` for a top-level port).
    pub fn port(&self, u: &Use) -> &'a str {
        match u.owner() {
            Owner::Cell(ci) => &self.module.connections(&self.module.cells[ci])[u.conn as usize].port,
            Owner::TopPort => "I",
        }
    }

    /// A bit as a net: constant one is the VCC net; zero and undriven bits are no net, which is
    /// what nextpnr does to constant-zero LUT and carry inputs.
    pub fn net_of(&self, b: Bit) -> Option<Net> {
        match b {
            Bit::Net(n) => self.ids.get(n),
            Bit::One => Some(self.vcc),
            Bit::Zero | Bit::Undriven => None,
        }
    }

    /// Like [`Graph::net_of`] but a constant zero stays connected (to the GND net, right after
    /// VCC), as on flip-flop D inputs.
    pub fn net_of_any(&self, b: Bit) -> Option<Net> {
        match b {
            Bit::Zero => Some(self.vcc + 1),
            other => self.net_of(other),
        }
    }

    /// The net on a cell's one-bit port.
    pub fn pin(&self, ci: usize, role: Role) -> Option<Net> {
        let n = self.pins[ci][role as usize];
        (n != u32::MAX).then_some(n as Net)
    }

    /// The LC port a netlist cell's port became, if that cell is inside an LC.
    pub fn lc_port(&self, u: &Use) -> Option<(usize, LcPort)> {
        let Owner::Cell(ci) = u.owner() else { return None };
        let lc = self.cell_lc[ci]?;
        let mapped = match (self.kinds[ci], u.role) {
            (Kind::Lut, Role::I0) => LcPort::I0,
            (Kind::Lut, Role::I1) => LcPort::I1,
            (Kind::Lut, Role::I2) => LcPort::I2,
            (Kind::Lut, Role::I3) => LcPort::I3,
            (Kind::Carry, Role::Ci) => LcPort::Cin,
            (Kind::Carry, Role::I0) => LcPort::I1,
            (Kind::Carry, Role::I1) => LcPort::I2,
            (Kind::Ff, Role::D) if !self.lcs[lc].lut => LcPort::I0,
            (Kind::Ff, Role::C) => LcPort::Clk,
            (Kind::Ff, Role::E) => LcPort::Cen,
            (Kind::Ff, Role::R | Role::S) => LcPort::Sr,
            _ => return None,
        };
        Some((lc, mapped))
    }

    /// For every net, the LC of its first user (in netlist order) on `port`: nextpnr's
    /// `net_only_drives(net, is_lc, port, false)`, for all nets in one pass over the users, so
    /// asking about a net with many users does not cost them each time. Valid while no cell
    /// moves into another LC.
    pub fn first_lc_on(&self, port: LcPort) -> Vec<Option<usize>> {
        let [on] = self.first_lcs_on([port]);
        on
    }

    /// [`Graph::first_lc_on`] for several ports in the same pass over the users.
    pub fn first_lcs_on<const N: usize>(&self, ports: [LcPort; N]) -> [Vec<Option<usize>>; N] {
        let mut on = std::array::from_fn(|_| vec![None; self.nets]);
        for n in 0..self.nets {
            for u in self.users(n) {
                let Some((lc, lp)) = self.lc_port(u) else { continue };
                for (port, on) in ports.iter().zip(on.iter_mut()) {
                    if lp == *port && on[n].is_none() {
                        on[n] = Some(lc);
                    }
                }
            }
        }
        on
    }
}
