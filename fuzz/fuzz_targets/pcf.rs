//! Fuzzes the PCF parser: any text must parse to constraints plus findings, never a panic, and
//! every finding must point at a line of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (_, findings) = openqq_fpga::pcf::parse(&text, None);
    let lines = text.lines().count() as u32;
    for f in findings {
        assert!(f.location.line.is_some_and(|l| (1..=lines).contains(&l)));
    }
});
