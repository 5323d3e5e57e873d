//! ECP5 device data: parts, packages, package pins (with their PIO sites and IO banks) and the
//! capacities nextpnr-ecp5 reports.
//!
//! The tables live in `device/generated.rs`, produced by `scripts/gen-devices-ecp5.py` from
//! Project Trellis's database (see `DEVICES.md` for the source commit and licence). Part names
//! are Lattice's (`LFE5U-25F`, `LFE5UM5G-85F`); package names are Trellis's (`CABGA256`,
//! `CSFBGA285`, `TQFP144`), matched exactly, as nextpnr-ecp5 matches them.

mod generated;

/// One ECP5 part.
#[derive(Debug, PartialEq, Eq)]
pub struct Device {
    /// Lattice part name without speed grade and package (`LFE5U-25F`).
    pub name: &'static str,
    /// The JTAG IDCODE a bitstream for this part names.
    pub idcode: u32,
    /// Tile grid width (Trellis `max_col + 1`); bounds carry-chain length.
    pub width: u32,
    /// Tile grid height (Trellis `max_row + 1`); PIOs on the first and last rows have `SIOLOGIC`.
    pub height: u32,
    /// Configuration frames in a bitstream for this part.
    pub frames: u32,
    /// Bytes per configuration frame, padding included.
    pub frame_bytes: u32,
    /// Every resource nextpnr-ecp5 reports, as (bel type, available), in its report's order.
    pub capacities: &'static [(&'static str, u32)],
    /// Each bank's VREF input, where the bank has one (Trellis gives banks 2, 3, 6 and 7 one on
    /// every die): referenced inputs (SSTL) need it free.
    pub vrefs: &'static [Vref],
    /// Every package Trellis lists for this part.
    pub packages: &'static [Package],
}

/// The PIO a bank's referenced inputs take their reference voltage from (Trellis's function
/// `VREF1_<bank>`); nextpnr-ecp5 looks it up on the die, bonded or not.
#[derive(Debug, PartialEq, Eq)]
pub struct Vref {
    /// The IO bank it serves (and is in).
    pub bank: u8,
    /// Tile row of the PIO.
    pub row: u8,
    /// Tile column of the PIO.
    pub col: u8,
    /// The PIO within its tile: `A`, `B`, `C` or `D`.
    pub pio: u8,
}

/// A package: the pins bonded out to the outside world.
#[derive(Debug, PartialEq, Eq)]
pub struct Package {
    /// Package name as Trellis spells it (`CABGA381`).
    pub name: &'static str,
    /// Pins in natural order (`A2` before `A10`).
    pub pins: &'static [Pin],
}

/// A package pin and the PIO site it is bonded to.
#[derive(Debug, PartialEq, Eq)]
pub struct Pin {
    /// Pin name as an LPF `LOCATE COMP … SITE` names it (`P6`, `17`).
    pub name: &'static str,
    /// Tile row of the PIO (0 is the top edge).
    pub row: u8,
    /// Tile column of the PIO.
    pub col: u8,
    /// The PIO within its tile: `A`, `B`, `C` or `D`.
    pub pio: u8,
    /// IO bank.
    pub bank: u8,
}

/// The package nextpnr-ecp5 picks when none is given.
pub const DEFAULT_PACKAGE: &str = "CABGA381";

/// Looks a part up by name, case-insensitively (`lfe5u-25f` works too).
pub fn device(name: &str) -> Option<&'static Device> {
    generated::DEVICES.iter().find(|d| d.name.eq_ignore_ascii_case(name))
}

/// Every known ECP5 part.
pub fn devices() -> &'static [Device] {
    generated::DEVICES
}

impl Device {
    /// Looks a package up by its exact name; an empty name means nextpnr's default package
    /// ([`DEFAULT_PACKAGE`], which every part comes in).
    pub fn package(&self, name: &str) -> Option<&'static Package> {
        let name = if name.is_empty() { DEFAULT_PACKAGE } else { name };
        self.packages.iter().find(|p| p.name == name)
    }

    /// The package nextpnr-ecp5 picks when none is given (`CABGA381`, which every part has).
    pub fn default_package(&self) -> &'static str {
        DEFAULT_PACKAGE
    }

    /// How many of a resource the part has, by nextpnr bel type (0 if none).
    pub fn available(&self, resource: &str) -> u32 {
        self.capacities.iter().find(|(r, _)| *r == resource).map_or(0, |(_, n)| *n)
    }

    /// Every resource nextpnr-ecp5 reports for this part, as (bel type, available).
    pub fn capacities(&self) -> Vec<(&'static str, u32)> {
        self.capacities.to_vec()
    }

    /// The VREF input of a bank, if the bank has one.
    pub fn vref(&self, bank: u8) -> Option<&'static Vref> {
        self.vrefs.iter().find(|v| v.bank == bank)
    }

    /// The longest carry chain nextpnr-ecp5 places in one piece, in `CCU2C` cells.
    pub fn max_carry_chain(&self) -> usize {
        (self.width as usize).saturating_sub(4) * 4 - 2
    }
}

impl Package {
    /// Looks a pin up by its exact name (nextpnr-ecp5 compares pin names as they are).
    pub fn pin(&self, name: &str) -> Option<&'static Pin> {
        self.pins.iter().find(|p| p.name == name)
    }

    /// The pin bonded to a PIO site, if the package bonds it out.
    pub fn pin_at(&self, row: u8, col: u8, pio: u8) -> Option<&'static Pin> {
        self.pins.iter().find(|p| (p.row, p.col, p.pio) == (row, col, pio))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ecp5_part_the_issue_names_is_known() {
        for name in [
            "LFE5U-12F",
            "LFE5U-25F",
            "LFE5U-45F",
            "LFE5U-85F",
            "LFE5UM-25F",
            "LFE5UM-45F",
            "LFE5UM-85F",
            "LFE5UM5G-25F",
            "LFE5UM5G-45F",
            "LFE5UM5G-85F",
        ] {
            let d = device(name).unwrap_or_else(|| panic!("{name} is known"));
            assert!(d.package("").is_some(), "{name} comes in nextpnr's default package");
        }
        assert_eq!(devices().len(), 10);
    }

    #[test]
    fn the_25f_has_the_capacities_nextpnr_ecp5_reports() {
        let d = device("LFE5U-25F").unwrap();
        let caps: Vec<u32> = ["TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_RAMW", "TRELLIS_IO", "DP16KD", "MULT18X18D"]
            .iter()
            .map(|r| d.available(r))
            .collect();
        assert_eq!(caps, [24288, 24288, 3036, 197, 56, 28]);
        assert_eq!((d.available("EHXPLLL"), d.available("DCCA")), (2, 56));
        assert_eq!(d.idcode, 0x4111_1043);
    }

    #[test]
    fn the_85f_has_the_capacities_nextpnr_ecp5_reports() {
        let d = device("LFE5UM5G-85F").unwrap();
        assert_eq!(d.available("TRELLIS_COMB"), 83640);
        assert_eq!((d.available("DP16KD"), d.available("MULT18X18D"), d.available("EHXPLLL")), (208, 156, 4));
    }

    #[test]
    fn the_12f_reports_the_25f_die_as_nextpnr_does_but_has_its_own_idcode() {
        let (d12, d25) = (device("LFE5U-12F").unwrap(), device("LFE5U-25F").unwrap());
        assert_eq!(d12.capacities, d25.capacities);
        assert_ne!(d12.idcode, d25.idcode);
    }

    #[test]
    fn packages_are_the_ones_trellis_lists_per_part_spelt_exactly() {
        let d = device("LFE5U-25F").unwrap();
        let names: Vec<&str> = d.packages.iter().map(|p| p.name).collect();
        assert_eq!(names, ["CABGA256", "CABGA381", "CSFBGA285", "TQFP144"]);
        assert!(d.package("cabga256").is_none());
        assert!(device("LFE5U-85F").unwrap().package("CABGA256").is_none());
        assert!(device("LFE5UM-25F").unwrap().package("TQFP144").is_none());
        assert!(device("LFE5U-85F").unwrap().package("CABGA756").is_some());
    }

    #[test]
    fn a_pin_knows_its_pio_site_and_bank() {
        let pin = device("LFE5U-25F").unwrap().package("CABGA256").unwrap().pin("A10").unwrap();
        assert_eq!((pin.row, pin.col, pin.pio), (0, 42, b'B'));
        assert!(device("LFE5U-25F").unwrap().package("CABGA256").unwrap().pin("a10").is_none());
    }

    #[test]
    fn banks_2_3_6_and_7_have_a_vref_pin_bonded_in_every_package() {
        for d in devices() {
            let banks: Vec<u8> = d.vrefs.iter().map(|v| v.bank).collect();
            assert_eq!(banks, [2, 3, 6, 7], "{}", d.name);
            for p in d.packages {
                for v in d.vrefs {
                    let pin = p.pin_at(v.row, v.col, v.pio);
                    assert!(pin.is_some_and(|pin| pin.bank == v.bank), "{} {} bank {}", d.name, p.name, v.bank);
                }
            }
        }
        let d = device("LFE5U-25F").unwrap();
        let v = d.vref(6).unwrap();
        assert_eq!((v.row, v.col, v.pio), (35, 0, b'B'));
        assert!(d.vref(0).is_none());
    }

    #[test]
    fn device_lookup_ignores_case_and_rejects_other_families() {
        assert!(device("lfe5u-25f").is_some());
        assert!(device("hx8k").is_none());
        assert!(device("LFE5U-25").is_none());
    }
}
