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

use openqq_e2e::{blink_design, Client, Server};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const EVENTS_PER_DESIGN: usize = 5;

/// The request body, serialised once so the load generator spends its CPU on sending.
fn bytes_of(v: &serde_json::Value) -> Arc<Vec<u8>> {
    Arc::new(serde_json::to_vec(v).unwrap())
}

fn applied_results(metrics: &str) -> usize {
    metrics
        .lines()
        .filter(|l| l.starts_with("openqq_events_total{") && l.contains("function=\"results\"") && l.contains("outcome=\"applied\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as usize
}

struct Run {
    submit: Duration,
    total: Duration,
}

/// The design without the blackbox library modules yosys writes beside the user's modules.
fn compact(mut design: serde_json::Value) -> serde_json::Value {
    if let Some(modules) = design["netlist"]["modules"].as_object_mut() {
        modules.retain(|_, m| m["attributes"]["blackbox"].is_null());
    }
    design
}

async fn run(designs: usize, tenants: usize, concurrency: usize, design: &serde_json::Value, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--rate-limit", "1000000/1s", "--workers", "64", "--queue", "4096"];
    args.extend_from_slice(extra);
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let clients: Vec<Client> = (0..tenants).map(|t| Client::new(&server.url, &server.token(&format!("bench-{t}")))).collect();
    let body = bytes_of(design);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (clients, body, next) = (clients.clone(), body.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= designs {
                        return;
                    }
                    let c = &clients[i % clients.len()];
                    loop {
                        let sent = c
                            .http
                            .post(format!("{}/v1/designs", c.base))
                            .bearer_auth(&c.token)
                            .header("content-type", "application/json")
                            .body(body.as_ref().clone())
                            .send()
                            .await;
                        match sent.map(|r| r.status().as_u16()) {
                            Ok(202) => break,
                            Ok(s) if s < 500 && s != 429 => panic!("submission refused: {s}"),
                            _ => tokio::time::sleep(Duration::from_millis(5)).await,
                        }
                    }
                }
            })
        })
        .collect();
    let mut last_report = Instant::now();
    for w in workers {
        w.await.unwrap();
    }
    let submit = started.elapsed();
    let http = reqwest::Client::new();
    loop {
        let m = http.get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
        let done = applied_results(&m);
        if done >= designs {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(2) {
            eprintln!("  … {done}/{designs} designs ready after {:.1?}", started.elapsed());
            last_report = Instant::now();
        }
        assert!(started.elapsed() < Duration::from_secs(600), "the pipeline did not drain in 10 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Run { submit, total: started.elapsed() }
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).take(3).map(|a| a.parse().expect("numbers: DESIGNS TENANTS CONCURRENCY")).collect();
    // An optional fourth argument picks runs: any of full,compact,fsync (default: all three).
    let only = std::env::args().nth(4).unwrap_or_else(|| "full,compact,fsync".into());
    let designs = args.first().copied().unwrap_or(10_000);
    let tenants = args.get(1).copied().unwrap_or(20);
    let concurrency = args.get(2).copied().unwrap_or(32);
    let events = designs * EVENTS_PER_DESIGN;
    println!("{designs} designs ({events} events) from {tenants} tenants, {concurrency} requests in flight, {} cores", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0));
    println!("{:<24} {:>10} {:>12} {:>12} {:>12}", "run", "total", "designs/s", "events/s", "submit/s");
    let full = blink_design("bench");
    let small = compact(full.clone());
    println!("netlist sizes: full {} bytes, compact {} bytes", full["netlist"].to_string().len(), small["netlist"].to_string().len());
    let mut totals = Vec::new();
    let runs = [("full", "full netlist", &full, vec![]), ("compact", "compact netlist", &small, vec![]), ("fsync", "full netlist, --fsync", &full, vec!["--fsync"])];
    for (key, label, design, extra) in runs {
        if !only.split(',').any(|k| k == key) {
            totals.push(f64::NAN);
            continue;
        }
        eprintln!("running: {label}");
        let r = run(designs, tenants, concurrency, design, &extra).await;
        let secs = r.total.as_secs_f64();
        println!(
            "{:<24} {:>9.2}s {:>12.0} {:>12.0} {:>12.0}",
            label,
            secs,
            designs as f64 / secs,
            events as f64 / secs,
            designs as f64 / r.submit.as_secs_f64()
        );
        totals.push(secs);
    }
    println!("time ratios: full / compact {:.2}×, fsync / default {:.2}×", totals[0] / totals[1], totals[2] / totals[0]);
}
