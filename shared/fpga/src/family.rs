//! The FPGA families the validator knows, and which one a device name belongs to.
//!
//! [`crate::validate`] dispatches on [`Family`]: each variant carries that family's device data
//! and has its own module with its validation path ([`crate::ice40`], [`crate::ecp5`]), so a new
//! family (Gowin, say) is a new variant and a new module beside these, which stay as they are.
//! The Yosys JSON reader, reports and budgets are shared. The iCE40 modules are also
//! re-exported at the crate root, where callers found them before there was a second family.

use crate::device::{self, Device};
use crate::ecp5;

/// A device's family, with the family's data for that device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Lattice iCE40, as nextpnr-ice40 0.4 and Project IceStorm know it.
    Ice40(&'static Device),
    /// Lattice ECP5, as nextpnr-ecp5 and Project Trellis know it.
    Ecp5(&'static ecp5::device::Device),
}

impl Family {
    /// The families' names, for messages about a device none of them has.
    pub const NAMES: &'static str = "iCE40 or ECP5";

    /// The family of a device name, as its place-and-route tool or its vendor spells it (`hx8k`,
    /// `up5k`, `LFE5U-25F`).
    pub fn of_device(name: &str) -> Option<Family> {
        device::device(name).map(Family::Ice40).or_else(|| ecp5::device::device(name).map(Family::Ecp5))
    }

    /// The family's name (`iCE40`, `ECP5`).
    pub fn name(&self) -> &'static str {
        match self {
            Family::Ice40(_) => "iCE40",
            Family::Ecp5(_) => "ECP5",
        }
    }

    /// The constraints format the family reads (`pcf`, `lpf`), as the API names it.
    pub fn constraint_format(&self) -> &'static str {
        match self {
            Family::Ice40(_) => "pcf",
            Family::Ecp5(_) => "lpf",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ice40_parts_belong_to_the_ice40_family_and_others_to_none() {
        assert_eq!(Family::of_device("up5k").map(|f| f.name()), Some("iCE40"));
        assert_eq!(Family::of_device("xc7a35t"), None);
    }

    #[test]
    fn ecp5_parts_belong_to_the_ecp5_family_and_read_lpf() {
        let family = Family::of_device("LFE5UM5G-85F").unwrap();
        assert_eq!((family.name(), family.constraint_format()), ("ECP5", "lpf"));
        assert_eq!(Family::of_device("hx8k").unwrap().constraint_format(), "pcf");
    }
}
