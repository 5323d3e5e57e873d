//! The FPGA families the validator knows, and which one a device name belongs to.
//!
//! [`crate::validate`] dispatches on [`Family`]: each variant carries that family's device data
//! and has its own module with its validation path ([`crate::ice40`]), so a new family (ECP5
//! with its LPF constraints, Gowin) is a new variant and a new module beside the iCE40 one,
//! which stays as it is. The Yosys JSON reader, reports and budgets are shared. iCE40 is the
//! only family so far; its modules are also re-exported at the crate root, where callers
//! found them before.

use crate::device::{self, Device};

/// A device's family, with the family's data for that device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Lattice iCE40, as nextpnr-ice40 0.4 and Project IceStorm know it.
    Ice40(&'static Device),
}

impl Family {
    /// The families' names, for messages about a device none of them has.
    pub const NAMES: &'static str = "iCE40";

    /// The family of a device name, as its place-and-route tool spells it (`hx8k`, `up5k`).
    pub fn of_device(name: &str) -> Option<Family> {
        device::device(name).map(Family::Ice40)
    }

    /// The family's name (`iCE40`).
    pub fn name(&self) -> &'static str {
        match self {
            Family::Ice40(_) => "iCE40",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ice40_parts_belong_to_the_ice40_family_and_others_to_none() {
        assert_eq!(Family::of_device("up5k").map(|f| f.name()), Some("iCE40"));
        assert_eq!(Family::of_device("LFE5U-25F"), None);
    }
}
