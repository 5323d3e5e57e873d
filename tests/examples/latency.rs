//! Latency at idle: one design at a time on an otherwise idle `openqq up` (release build), from
//! its 202 to `ready`, as a new user sees it.
//!
//!   cargo build --release --bin openqq
//!   cargo run --release -p openqq-e2e --example latency -- [DESIGNS]
//!
//! Two runs side by side, DESIGNS (default 50) sequential designs each, without a rate limit (the
//! client polls every 2 ms): the defaults (batch
//! window 500 ms, which a batch waits out only while records keep arriving) and
//! `--batch-window 0ms` (no batching at all: the floor the pipeline itself costs). Each design's
//! time is read twice: by the client (202 received → a poll every 2 ms sees `ready`) and from the
//! design's own timeline (`design.submitted` → `results.ready`, stamped by the functions).

use chrono::DateTime;
use openqq_e2e::{blink_design, openqq_bin, throughput::compact, Client, Server};
use serde_json::Value;
use std::time::{Duration, Instant};

struct Sample {
    client: Duration,
    timeline: Duration,
}

async fn one(c: &Client, design: &Value) -> Sample {
    let t0 = Instant::now();
    let id = c.submit_correlated(design, "latency").await.expect("a 202");
    let client = loop {
        if let Ok((200, d)) = c.get(&format!("/v1/designs/{id}")).await {
            if d["status"] == "ready" {
                break t0.elapsed();
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "design {id} not ready within 30 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let (status, events) = c.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let at = |kind: &str| {
        let list = events["events"].as_array().unwrap_or_else(|| panic!("{status}: {events}"));
        let e = list.iter().find(|e| e["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in {events}"));
        DateTime::parse_from_rfc3339(e["occurred_at"].as_str().unwrap()).unwrap()
    };
    let timeline = (at("results.ready") - at("design.submitted")).to_std().unwrap_or_default();
    Sample { client, timeline }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let designs: usize = std::env::args().nth(1).map(|a| a.parse().expect("a number of designs")).unwrap_or(50);
    assert!(openqq_bin().exists());
    let design = compact(blink_design("latency"));
    println!("{designs} designs, one at a time; milliseconds from the 202 to ready");
    println!("{:<28} {:>9} {:>9} {:>9} {:>14}", "run", "p50", "p90", "max", "timeline p50");
    let mut p50s = Vec::new();
    for (label, window) in [("defaults (window 500ms)", "500ms"), ("--batch-window 0ms", "0ms")] {
        let dir = tempfile::tempdir().unwrap();
        // The client polls every 2 ms: no rate limit may slow it.
        let args = ["--batch-window", window, "--rate-limit", "1000000/1s"];
        let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
        let c = Client::new(&server.url, &server.token("idle"));
        one(&c, &design).await; // warm-up: the first design opens files and connections
        let mut client = Vec::new();
        let mut timeline = Vec::new();
        for _ in 0..designs {
            let s = one(&c, &design).await;
            client.push(s.client);
            timeline.push(s.timeline);
        }
        client.sort();
        timeline.sort();
        let p50 = percentile(&client, 0.5);
        p50s.push(p50);
        println!(
            "{label:<28} {p50:>9.1} {:>9.1} {:>9.1} {:>14.1}",
            percentile(&client, 0.9),
            percentile(&client, 1.0),
            percentile(&timeline, 0.5)
        );
    }
    println!("defaults / no window (p50): {:.2}x", p50s[0] / p50s[1]);
}
