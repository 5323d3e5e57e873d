//! End-to-end throughput on the embedded default: designs submitted over HTTP flow through all
//! four functions; the clock stops when the last `results.ready` is applied.
//!
//!   cargo build --release --bin openqq
//!   cargo run --release -p openqq-e2e --example throughput -- [DESIGNS] [TENANTS] [CONCURRENCY]
//!
//! Defaults: 10,000 designs (50,000 events: submitted, requested, started, finished, ready),
//! 20 tenants, 32 requests in flight. Three runs side by side: the netlist exactly as yosys
//! writes it (≈200 KB, most of it the blackbox cell library), the same netlist without the
//! blackbox modules (≈10 KB; the validator ignores them anyway), and the full netlist with
//! `--fsync`.

use openqq_e2e::blink_design;
use openqq_e2e::throughput::{compact, run, EVENTS_PER_DESIGN};

#[tokio::main]
async fn main() {
    let args: Vec<usize> =
        std::env::args().skip(1).take(3).map(|a| a.parse().expect("numbers: DESIGNS TENANTS CONCURRENCY")).collect();
    // An optional fourth argument picks runs: any of full,compact,fsync (default: all three).
    let only = std::env::args().nth(4).unwrap_or_else(|| "full,compact,fsync".into());
    let designs = args.first().copied().unwrap_or(10_000);
    let tenants = args.get(1).copied().unwrap_or(20);
    let concurrency = args.get(2).copied().unwrap_or(32);
    let events = designs * EVENTS_PER_DESIGN;
    println!(
        "{designs} designs ({events} events) from {tenants} tenants, {concurrency} requests in flight, {} cores",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );
    println!(
        "{:<24} {:>10} {:>12} {:>12} {:>12} {:>14}",
        "run", "total", "designs/s", "events/s", "submit/s", "peak RSS MiB"
    );
    let full = blink_design("bench");
    let small = compact(full.clone());
    println!(
        "netlist sizes: full {} bytes, compact {} bytes",
        full["netlist"].to_string().len(),
        small["netlist"].to_string().len()
    );
    let mut totals = Vec::new();
    let runs = [
        ("full", "full netlist", &full, vec![]),
        ("compact", "compact netlist", &small, vec![]),
        ("fsync", "full netlist, --fsync", &full, vec!["--fsync"]),
    ];
    for (key, label, design, extra) in runs {
        if !only.split(',').any(|k| k == key) {
            totals.push(f64::NAN);
            continue;
        }
        eprintln!("running: {label}");
        let r = run(designs, tenants, concurrency, design, &extra).await;
        let secs = r.total.as_secs_f64();
        println!(
            "{:<24} {:>9.2}s {:>12.0} {:>12.0} {:>12.0} {:>14.0}",
            label,
            secs,
            designs as f64 / secs,
            events as f64 / secs,
            designs as f64 / r.submit.as_secs_f64(),
            r.peak_rss_mib
        );
        totals.push(secs);
    }
    println!(
        "time ratios: full / compact {:.2}×, fsync / default {:.2}×",
        totals[0] / totals[1],
        totals[2] / totals[0]
    );
}
