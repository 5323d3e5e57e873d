//! The netlist parser and the packer are total: arbitrary or mangled yosys JSON yields a module
//! or a NETLIST_INVALID/TOP_NOT_FOUND error, never a panic.

use openqq_fpga::{device, netlist, pack};
use proptest::prelude::*;

fn sample_netlist() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cases/pll_lock-hx8k.json");
    let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    case["netlist"].to_string()
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics_the_parser(text in ".{0,400}") {
        if let Err(e) = netlist::parse(&text, None) {
            prop_assert!(e.code == "NETLIST_INVALID" || e.code == "TOP_NOT_FOUND");
        }
    }

    #[test]
    fn a_real_netlist_with_bytes_changed_never_panics_parse_or_pack(cuts in proptest::collection::vec((0usize..4000, "[\\]\\[{}\":,0-9a-z]{0,3}"), 1..6)) {
        let mut text = sample_netlist();
        for (at, with) in cuts {
            let mut at = at % text.len();
            while !text.is_char_boundary(at) { at -= 1; }
            text.replace_range(at..(at + 1).min(text.len()), &with);
        }
        if let Ok(module) = netlist::parse(&text, None) {
            for d in device::devices() {
                let _ = pack::pack(&module, d);
            }
        }
    }
}
