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
//!
//! Each run's figure of merit is netlist megabytes per second (the netlist bytes of all designs
//! over the run's time), printed beside a floor measured in the same run: the time to read the
//! same bytes from a file (page cache) and scan them once as JSON, building nothing.

use openqq_e2e::blink_design;
use openqq_e2e::throughput::{compact, run, EVENTS_PER_DESIGN};
use std::time::Instant;

/// Netlist megabytes per second of reading `netlist` from a file and scanning it once as JSON,
/// `times` times over (the bytes a run of `times` designs carries).
fn floor_mb_per_s(netlist: &[u8], times: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("netlist.json");
    std::fs::write(&path, netlist).unwrap();
    let started = Instant::now();
    for _ in 0..times {
        let bytes = std::fs::read(&path).unwrap();
        serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).expect("the netlist is JSON");
    }
    (netlist.len() * times) as f64 / 1e6 / started.elapsed().as_secs_f64()
}

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
    let full = blink_design("bench");
    let small = compact(full.clone());
    let netlist_bytes = |d: &serde_json::Value| d["netlist"].to_string().into_bytes();
    let (full_netlist, small_netlist) = (netlist_bytes(&full), netlist_bytes(&small));
    println!("netlist sizes: full {} bytes, compact {} bytes", full_netlist.len(), small_netlist.len());
    println!(
        "{:<24} {:>10} {:>12} {:>12} {:>12} {:>14} {:>12}",
        "run", "total", "designs/s", "events/s", "submit/s", "peak RSS MiB", "netlist MB/s"
    );
    let mut totals = Vec::new();
    let runs = [
        ("full", "full netlist", &full, &full_netlist, vec![]),
        ("compact", "compact netlist", &small, &small_netlist, vec![]),
        ("fsync", "full netlist, --fsync", &full, &full_netlist, vec!["--fsync"]),
    ];
    for (key, label, design, netlist, extra) in runs {
        if !only.split(',').any(|k| k == key) {
            totals.push(f64::NAN);
            continue;
        }
        eprintln!("running: {label}");
        let r = run(designs, tenants, concurrency, design, &extra).await;
        let secs = r.total.as_secs_f64();
        let mb_per_s = (netlist.len() * designs) as f64 / 1e6 / secs;
        println!(
            "{:<24} {:>9.2}s {:>12.0} {:>12.0} {:>12.0} {:>14.0} {:>12.1}",
            label,
            secs,
            designs as f64 / secs,
            events as f64 / secs,
            designs as f64 / r.submit.as_secs_f64(),
            r.peak_rss_mib,
            mb_per_s
        );
        let floor = floor_mb_per_s(netlist, designs);
        println!(
            "{:<24} floor (read and scan the same bytes once): {floor:.1} MB/s; run / floor {:.3}×",
            "",
            mb_per_s / floor
        );
        totals.push(secs);
    }
    println!(
        "time ratios: full / compact {:.2}×, fsync / default {:.2}×",
        totals[0] / totals[1],
        totals[2] / totals[0]
    );
}
