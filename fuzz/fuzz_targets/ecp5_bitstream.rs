//! Fuzzes the ECP5 bitstream checker: any bytes must yield findings, never a panic. The seed is
//! a real compressed LFE5U-25F bitstream, so mutations start past the preamble and the IDCODE.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let device = openqq_fpga::ecp5::device::device("LFE5U-25F").expect("the LFE5U-25F is known");
    let _ = openqq_fpga::ecp5::bitstream::check(data, device, None);
});
