//! Fuzzes the bitstream parser: any bytes must yield findings, never a panic. Seed the corpus
//! with `../fixtures/bad/cases/*.bin` for a head start past the sync word.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = openqq_fpga::bitstream::check(data, Some("8k"), None);
});
