//! Validation time: a netlist that is slow to validate must not stall its partition. Every
//! shape that once cost more than linear time validates far inside the service's default
//! budget, and a validation that outlasts its budget ends in a `VALIDATION_BUDGET_EXCEEDED`
//! error and a `fail` verdict instead of running on.

use std::time::Duration;

use openqq_fpga::{hostile, Input, Report, Verdict, BUDGET_EXCEEDED};

fn validate(design: &hostile::Design, budget: Option<Duration>) -> Report {
    openqq_fpga::validate(&Input {
        device: "hx8k",
        package: "ct256",
        netlist: &design.netlist,
        constraints: Some(&design.pcf),
        budget,
        ..Input::default()
    })
}

fn out_of_time(report: &Report) -> bool {
    report.findings.iter().any(|f| f.code == BUDGET_EXCEEDED)
}

/// Just under the API's 900 KiB body limit.
const LARGEST_BODY: usize = 850_000;

#[test]
fn every_hostile_shape_under_the_body_limit_validates_inside_a_generous_budget() {
    // Generous so that an unoptimised build on a busy machine passes; the quadratic versions
    // took minutes on these inputs. Throughput is measured by `examples/hostile.rs`.
    for (name, make) in hostile::CASES {
        let report = validate(&make(LARGEST_BODY), Some(Duration::from_secs(30)));
        assert!(!out_of_time(&report), "{name} ran out of its budget");
    }
}

#[test]
fn a_netlist_that_outlasts_a_one_millisecond_budget_ends_in_the_budget_finding_and_a_fail_verdict() {
    let report = validate(&hostile::many_cells(4_000_000), Some(Duration::from_millis(1)));
    assert!(out_of_time(&report), "{:?}", report.findings);
    assert_eq!(report.verdict, Verdict::Fail);
    let finding = report.findings.iter().find(|f| f.code == BUDGET_EXCEEDED).unwrap();
    assert!(finding.message.contains("1 ms"), "{}", finding.message);
}

#[test]
fn a_spent_budget_stops_validation_before_it_reads_the_netlist() {
    let report = validate(&hostile::huge_pcf(10_000), Some(Duration::ZERO));
    let codes: Vec<_> = report.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, [BUDGET_EXCEEDED]);
    assert_eq!(report.verdict, Verdict::Fail);
}

#[test]
fn a_budget_that_does_not_run_out_changes_nothing() {
    let design = hostile::huge_pcf(20_000);
    assert_eq!(validate(&design, Some(Duration::from_secs(600))), validate(&design, None));
}

#[test]
fn a_budget_that_began_before_validation_counts_the_time_already_spent() {
    let design = hostile::huge_pcf(20_000);
    let budget = Duration::from_secs(60);
    let started = std::time::Instant::now().checked_sub(budget).expect("the clock is past a minute");
    let report = openqq_fpga::validate(&Input {
        device: "hx8k",
        package: "ct256",
        netlist: &design.netlist,
        constraints: Some(&design.pcf),
        budget: Some(budget),
        started: Some(started),
        ..Input::default()
    });
    let codes: Vec<_> = report.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, [BUDGET_EXCEEDED], "the caller spent the whole budget reading the input");
}

/// The CPU time this thread has used: what validation (single-threaded, on the caller's thread)
/// did, without the time the machine gave to other processes.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[test]
fn a_bus_of_a_million_port_bits_stops_near_its_budget_whichever_stage_it_reaches() {
    // Naming each port bit, hashing them and giving each its own IO site once ran past the
    // budget (64 MiB of this shape: 9.6 s against 5 s), since those stages did not look at it.
    // The budgets are fractions of what the whole validation takes here, so that each runs out
    // in a different stage however fast the machine is (fixed budgets of up to 3.2 s were all
    // longer than the whole validation on a quiet machine). The budget is wall time; what is
    // bounded is the work done, as CPU time: at most the budget before the deadline and only
    // dropping what was built after it, however busy the machine (wall time on a loaded machine
    // took 0.7-1.2 s for a 200 ms budget).
    let design = hostile::long_named_bus(14 << 20);
    let cpu0 = thread_cpu_time();
    let whole = validate(&design, None);
    let full = thread_cpu_time() - cpu0;
    assert!(!out_of_time(&whole));
    assert!(full >= Duration::from_millis(400), "the whole validation took {full:?}: too little to cut into parts");
    let mut reached = Vec::new();
    for part in [16, 4, 2] {
        let budget = full / part;
        let (t0, cpu0) = (std::time::Instant::now(), thread_cpu_time());
        let report = validate(&design, Some(budget));
        let (took, worked) = (t0.elapsed(), thread_cpu_time() - cpu0);
        reached.push((budget, took, worked, report.findings.len()));
        assert!(out_of_time(&report), "{budget:?} of {full:?}: {:?}", report.findings);
        // Dropping what was built is the only work past the deadline.
        let bound = budget * 3 / 2 + Duration::from_millis(300);
        assert!(worked < bound, "{budget:?} budget worked {worked:?} ({took:?} wall): {reached:?}");
    }
    eprintln!("whole validation {full:?}; (budget, wall, cpu, findings): {reached:?}");
}
