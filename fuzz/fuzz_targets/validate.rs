//! Fuzzes a whole validation as the validation function runs one: a netlist, its constraints
//! (PCF for iCE40, LPF for ECP5) and a bitstream, checked together for a device. The input is
//! `device byte, netlist \0 constraints \0 bitstream`. Whatever the input, the report must say
//! why a design fails: a failing verdict comes with at least one error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_fpga::{validate, Input, Severity, Verdict};
use std::time::Duration;

/// (device, package) pairs, one iCE40 of each kind and an ECP5 (`""`: the default package).
const PARTS: [(&str, &str); 4] = [("hx8k", "ct256"), ("up5k", "sg48"), ("lp384", ""), ("LFE5U-25F", "CABGA256")];

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let (device, package) = PARTS[usize::from(which) % PARTS.len()];
    let mut parts = rest.splitn(3, |b| *b == 0);
    let netlist = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let constraints = parts.next().map(String::from_utf8_lossy);
    let bitstream = parts.next();
    let input = Input {
        device,
        package,
        netlist: &netlist,
        constraints: constraints.as_deref(),
        bitstream,
        allow_unconstrained: which & 0x80 != 0,
        budget: Some(Duration::from_secs(10)),
        ..Input::default()
    };
    let report = validate(&input);
    if report.verdict == Verdict::Fail {
        assert!(report.findings.iter().any(|f| f.severity == Severity::Error), "{report:?}");
    }
});
