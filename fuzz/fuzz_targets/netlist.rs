#![no_main]
//! Parses arbitrary bytes as a yosys JSON netlist and packs whatever parses, on every device.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(module) = openqq_fpga::netlist::parse(text, None) {
            for d in openqq_fpga::device::devices() {
                let _ = openqq_fpga::pack::pack(&module, d);
            }
        }
    }
});
