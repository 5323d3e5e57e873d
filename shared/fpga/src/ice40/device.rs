//! iCE40 device data: dies, packages, package pins and capacities.
//!
//! The tables live in `device/generated.rs`, produced by `scripts/gen-devices.py` from Project
//! IceStorm's chip database (see `DEVICES.md` for the source version and licence). Device names
//! are nextpnr-ice40's flags (`hx8k`, `lp384`, `up5k`, …); package names are the chipdb's
//! (`ct256`, `sg48`, …) with the `:4k` suffix of the 4k parts removed, as nextpnr accepts them.

mod generated;

/// One iCE40 part as nextpnr-ice40 knows it. Several parts share a die (hx1k and lp1k; hx8k,
/// lp8k, hx4k and lp4k; up3k and up5k; u1k, u2k and u4k), and nextpnr reports the die's
/// capacity for each of them, so we do too.
#[derive(Debug, PartialEq, Eq)]
pub struct Device {
    /// nextpnr-ice40 device flag without dashes (`hx8k`).
    pub name: &'static str,
    /// Chip database die (`384`, `1k`, `8k`, `5k`, `u4k`, `lm4k`).
    pub die: &'static str,
    /// False for parts in the chip database that nextpnr-ice40 0.4 has no flag for (lm4k).
    pub supported_by_nextpnr: bool,
    /// The package nextpnr picks when none is given.
    pub default_package: &'static str,
    /// Every package the chip database lists for this part.
    pub packages: &'static [Package],
    /// Tile grid width, IO ring included.
    pub width: u32,
    /// Tile grid height, IO ring included; bounds carry-chain length (`(height - 2) * 8 - 2`).
    pub height: u32,
    /// Logic tiles; each holds 8 logic cells (`ICESTORM_LC`).
    pub logic_tiles: u32,
    /// Block RAM tiles (`ICESTORM_RAM`); each pairs a `ramb` and a `ramt` tile.
    pub ram_tiles: u32,
    /// IO tiles; each holds 2 IO pads (`SB_IO`), bonded or not.
    pub io_tiles: u32,
    /// Hard cells other than logic, RAM and IO, as (nextpnr resource name, count).
    pub extra_cells: &'static [(&'static str, u32)],
    /// Sites of the hard cells nextpnr places at fixed coordinates (`SB_I2C`, `SB_SPI`), as
    /// (resource name, (x, y, z)).
    pub fixed_sites: &'static [(&'static str, (u8, u8, u8))],
    /// The die's oscillators.
    pub oscillators: &'static [Oscillator],
    /// The die's PLL sites, in the chip database's order (which is nextpnr's bel order).
    pub plls: &'static [PllSite],
}

/// An oscillator (`SB_HFOSC`, `SB_LFOSC`) and how its clock leaves it.
#[derive(Debug, PartialEq, Eq)]
pub struct Oscillator {
    pub cell: &'static str,
    /// The global network its clock drives directly.
    pub global_network: u8,
    /// The chip database has the fabric output nextpnr-ice40 uses for `ROUTE_THROUGH_FABRIC`
    /// under the name it looks for (the u4k database misspells `SB_HFOSC`'s).
    pub fabric_output: bool,
}

/// A PLL site and the two IO pads its outputs take over (chipdb `PLLOUT_A`, `PLLOUT_B`).
#[derive(Debug, PartialEq, Eq)]
pub struct PllSite {
    /// IO tile x, y and pad z of output A; a PAD PLL reads its input from this pad.
    pub out_a: (u8, u8, u8),
    /// IO tile x, y and pad z of output B (used by the two-output PLLs).
    pub out_b: (u8, u8, u8),
    /// Packages in which this PLL is not bonded out (chipdb `LOCKED`); nextpnr cannot use it there.
    pub locked_in: &'static [&'static str],
}

impl PllSite {
    /// Whether nextpnr can use this PLL in a package.
    pub fn usable_in(&self, package: &str) -> bool {
        !self.locked_in.contains(&package)
    }
}

/// A package: the pins bonded out to the outside world.
#[derive(Debug, PartialEq, Eq)]
pub struct Package {
    /// Package name (`ct256`).
    pub name: &'static str,
    /// Pins in natural order (`A2` before `A10`).
    pub pins: &'static [Pin],
}

/// A package pin and the IO pad (tile x, y and pad z) it is bonded to.
#[derive(Debug, PartialEq, Eq)]
pub struct Pin {
    /// Pin name as a PCF `set_io` names it (`J3`, `35`).
    pub name: &'static str,
    pub x: u8,
    pub y: u8,
    pub z: u8,
    /// The pad can drive a global network directly (a `GBIN` pin).
    pub global_buffer: bool,
    /// Which of the 8 global networks it drives, when `global_buffer` is true.
    pub global_network: Option<u8>,
    /// The pad is a PLL output pad (`PLLOUT_A`/`PLLOUT_B`) of a PLL bonded in this package; a
    /// used PLL takes it over, so ordinary IO placed there conflicts with the PLL.
    pub pll_pad: bool,
}

/// Logic cells per logic tile.
pub const LCS_PER_TILE: u32 = 8;
/// IO pads per IO tile.
pub const PADS_PER_IO_TILE: u32 = 2;
/// Global buffers (`SB_GB`) on every iCE40 die.
pub const GLOBAL_BUFFERS: u32 = 8;

/// Looks a device up by its nextpnr name, case-insensitively (`HX8K` works too).
pub fn device(name: &str) -> Option<&'static Device> {
    generated::DEVICES.iter().find(|d| d.name.eq_ignore_ascii_case(name))
}

/// Every known device.
pub fn devices() -> &'static [Device] {
    generated::DEVICES
}

impl Device {
    /// Looks a package up by name; an empty name means nextpnr's default package.
    pub fn package(&self, name: &str) -> Option<&'static Package> {
        let name = if name.is_empty() { self.default_package } else { name };
        self.packages.iter().find(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// Logic cells (`ICESTORM_LC`).
    pub fn logic_cells(&self) -> u32 {
        self.logic_tiles * LCS_PER_TILE
    }

    /// IO pads on the die (`SB_IO` as nextpnr counts it), bonded or not.
    pub fn io_pads(&self) -> u32 {
        self.io_tiles * PADS_PER_IO_TILE
    }

    /// How many of a hard cell the die has, by nextpnr resource name (0 if none).
    pub fn extra(&self, resource: &str) -> u32 {
        self.extra_cells.iter().find(|(r, _)| *r == resource).map_or(0, |(_, n)| *n)
    }

    pub fn plls(&self) -> u32 {
        self.extra("ICESTORM_PLL")
    }
    pub fn dsps(&self) -> u32 {
        self.extra("ICESTORM_DSP")
    }
    pub fn sprams(&self) -> u32 {
        self.extra("ICESTORM_SPRAM")
    }

    /// Capacity of every resource nextpnr reports for this device, sorted by name as nextpnr's
    /// `--report` JSON lists them. Resources the die lacks are absent, as in nextpnr.
    pub fn capacities(&self) -> Vec<(&'static str, u32)> {
        let mut caps = vec![("ICESTORM_LC", self.logic_cells()), ("SB_GB", GLOBAL_BUFFERS), ("SB_IO", self.io_pads())];
        if self.ram_tiles > 0 {
            caps.push(("ICESTORM_RAM", self.ram_tiles));
        }
        caps.extend(self.extra_cells.iter().copied());
        caps.sort_unstable();
        caps
    }
}

impl Package {
    /// Looks a pin up by name, case-insensitively.
    pub fn pin(&self, name: &str) -> Option<&'static Pin> {
        self.pins.iter().find(|p| p.name.eq_ignore_ascii_case(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hx8k_has_the_capacities_nextpnr_reports() {
        let d = device("hx8k").unwrap();
        assert_eq!(d.logic_cells(), 7680);
        assert_eq!(d.ram_tiles, 32);
        assert_eq!(d.io_pads(), 256);
        assert_eq!(d.plls(), 2);
        assert_eq!(d.default_package, "ct256");
    }

    #[test]
    fn lp384_has_no_block_ram_and_no_pll() {
        let d = device("lp384").unwrap();
        assert_eq!(d.logic_cells(), 384);
        assert_eq!(d.ram_tiles, 0);
        assert_eq!(d.plls(), 0);
        assert!(d.capacities().iter().all(|(r, _)| *r != "ICESTORM_RAM"));
    }

    #[test]
    fn up5k_has_dsps_and_sprams() {
        let d = device("up5k").unwrap();
        assert_eq!((d.logic_cells(), d.ram_tiles, d.dsps(), d.sprams(), d.io_pads()), (5280, 30, 8, 4, 96));
    }

    #[test]
    fn hx4k_packages_drop_the_4k_suffix_and_exclude_ct256() {
        let d = device("hx4k").unwrap();
        assert!(d.package("tq144").is_some());
        assert!(d.package("ct256").is_none());
        assert!(d.packages.iter().all(|p| !p.name.contains(':')));
    }

    #[test]
    fn hx1k_tq144_pin_21_the_icestick_clock_is_a_global_buffer_pad() {
        let pin = device("hx1k").unwrap().package("tq144").unwrap().pin("21").unwrap();
        assert!(pin.global_buffer);
        assert_eq!((pin.x, pin.y, pin.z, pin.global_network), (0, 8, 1, Some(1)));
    }

    #[test]
    fn pll_pads_are_marked_only_where_the_pll_is_bonded() {
        let hx1k = device("hx1k").unwrap();
        assert!(hx1k.package("tq144").unwrap().pins.iter().any(|p| p.pll_pad));
        assert!(hx1k.package("vq100").unwrap().pins.iter().all(|p| !p.pll_pad));
    }

    #[test]
    fn device_lookup_ignores_case_and_rejects_unknown_names() {
        assert!(device("HX8K").is_some());
        assert!(device("xc7a35t").is_none());
    }

    #[test]
    fn an_empty_package_name_means_the_default_package() {
        assert_eq!(device("up5k").unwrap().package("").unwrap().name, "sg48");
    }
}
