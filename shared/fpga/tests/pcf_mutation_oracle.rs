//! PCF mutation oracle: seeded random edits of good PCFs (drop a line, duplicate one, swap two
//! pins, invent or steal a pin, add a constraint for a port the design lacks, add an option),
//! each run through nextpnr-ice40 0.4 by `fixtures/bad/generate.sh`. Our error/no-error verdict
//! must equal nextpnr's exit status on every mutant.

mod oracle;

use openqq_fpga::Verdict;
use oracle::{str_field, Oracle, Run};

#[test]
fn our_verdict_equals_nextpnrs_exit_status_on_every_pcf_mutant() {
    let mut oracle = Oracle::load();
    let recordings = oracle.json("mutants.json");
    let mutants = recordings["mutants"].as_array().expect("mutants.json has a mutants array");
    assert!(mutants.len() >= 100, "only {} mutants recorded", mutants.len());
    let (mut rejected, mut problems) = (0, Vec::new());
    for m in mutants {
        let design = str_field(m, "design");
        let run = Run {
            device: str_field(m, "device").to_owned(),
            package: str_field(m, "package").to_owned(),
            netlist: oracle.text(&format!("netlists/{design}.json")),
            pcf: str_field(m, "pcf").to_owned(),
            bitstream: None,
            top: None,
            allow_unconstrained: false,
        };
        let report = run.validate();
        let tool_failed = m["oracle"]["exit"].as_i64() != Some(0);
        rejected += usize::from(tool_failed);
        if tool_failed != (report.verdict == Verdict::Fail) {
            let codes: Vec<_> = report.findings.iter().map(|f| format!("{:?} {}", f.severity, f.code)).collect();
            problems.push(format!(
                "{design} seed {} {}: nextpnr exit {} ({}) vs our {:?} {codes:?}\n{}",
                m["seed"],
                m["edits"],
                m["oracle"]["exit"],
                str_field(&m["oracle"], "message"),
                report.verdict,
                str_field(m, "pcf")
            ));
        }
    }
    assert!(problems.is_empty(), "{} of {} mutants disagree:\n{}", problems.len(), mutants.len(), problems.join("\n"));
    // Both verdicts must be well represented, or the comparison proves little.
    assert!(
        rejected >= mutants.len() / 4 && rejected <= mutants.len() * 3 / 4,
        "{rejected} of {} rejected",
        mutants.len()
    );
}
