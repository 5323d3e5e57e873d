//! Fuzzes the LPF parser (ECP5 constraints): any text must parse to constraints plus findings,
//! never a panic, and every finding must point at a line of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (_, findings) = openqq_fpga::ecp5::lpf::parse(&text, None);
    // The parser splits on '\n' only, so a final line without one still counts.
    let lines = text.split('\n').count() as u32;
    for f in findings {
        if let Some(line) = f.location.line {
            assert!((1..=lines).contains(&line), "line {line} of {lines}: {f:?}");
        }
    }
});
