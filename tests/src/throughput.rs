//! The end-to-end throughput run shared by the benchmarks (`examples/`): designs submitted over
//! HTTP to a fresh `openqq up` flow through all four functions; the clock stops when the last
//! `results.ready` is applied.

use crate::{Client, Server};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const EVENTS_PER_DESIGN: usize = 5;

/// The request body, serialised once so the load generator spends its CPU on sending.
fn bytes_of(v: &serde_json::Value) -> Arc<Vec<u8>> {
    Arc::new(serde_json::to_vec(v).unwrap())
}

/// How many `results.ready` events the results function has applied, from a `/metrics` text:
/// designs done.
pub fn applied_results(metrics: &str) -> usize {
    crate::counter_sum(metrics, "openqq_events_total", &["function=\"results\"", "outcome=\"applied\""]) as usize
}

pub struct Run {
    /// Until the last submission was acknowledged.
    pub submit: Duration,
    /// Until the last design was ready.
    pub total: Duration,
    /// The server's `/metrics` as scraped when the last design was ready.
    pub metrics: String,
    /// The server's peak resident memory (MiB) when the last design was ready.
    pub peak_rss_mib: f64,
}

/// The design without the blackbox library modules yosys writes beside the user's modules.
pub fn compact(mut design: serde_json::Value) -> serde_json::Value {
    if let Some(modules) = design["netlist"]["modules"].as_object_mut() {
        modules.retain(|_, m| m["attributes"]["blackbox"].is_null());
    }
    design
}

/// Submits `designs` copies of `design` from `tenants` tenants with `concurrency` requests in
/// flight to an `openqq up` started with `extra` args, and waits until all are ready.
pub async fn run(
    designs: usize,
    tenants: usize,
    concurrency: usize,
    design: &serde_json::Value,
    extra: &[&str],
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    // No per-tenant bound may pace the run: it measures the pipeline, not the front door.
    let mut args = vec!["--rate-limit", "1000000/1s", "--workers", "64", "--queue", "4096"];
    args.extend(["--tenant-concurrency", "4096", "--byte-limit", "3GiB/1s", "--max-connections-per-address", "1024"]);
    args.extend_from_slice(extra);
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let clients: Vec<Client> =
        (0..tenants).map(|t| Client::new(&server.url, &server.token(&format!("bench-{t}")))).collect();
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
    let metrics = loop {
        let m = http.get(server.metrics()).send().await.unwrap().text().await.unwrap();
        let done = applied_results(&m);
        if done >= designs {
            break m;
        }
        if last_report.elapsed() > Duration::from_secs(2) {
            eprintln!("  … {done}/{designs} designs ready after {:.1?}", started.elapsed());
            last_report = Instant::now();
        }
        assert!(started.elapsed() < Duration::from_secs(600), "the pipeline did not drain in 10 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    Run { submit, total: started.elapsed(), metrics, peak_rss_mib: server.rss_mib().1 }
}
