//! Batches on the embedded default, side by side in one run:
//!
//! 1. **Throughput**: ITEMS compact designs (5 events each) as one batch, an upload of JSON
//!    lines, from the submission to the batch's finish (its last item's `results.ready`), with
//!    `--batch-in-flight` 64 (the default) and 1,000; beside the floor, reading the items' bytes
//!    from a file and scanning them once as JSON.
//! 2. **The lane**: an interactive tenant submits designs one after another (submission → ready)
//!    alone, then during a batch of ITEMS with the batch lane on (the default), then with
//!    `--batch-lane off` (batch items on the interactive topics); its p50 and p99 each time.
//!
//!   cargo build --release -p openqq-cli --bin openqq
//!   cargo run --release -p openqq-e2e --example batch -- [ITEMS] [OUT_DIR]
//!   python3 scripts/plot-batch-lane.py OUT_DIR     # lane.png (matplotlib)
//!
//! Default: 10,000 items. The `openqq` beside the example is the one measured. With OUT_DIR, the
//! interactive tenant's every design (when it was submitted, how long it took) goes to
//! `OUT_DIR/lane.json`, which the script plots.

use openqq_e2e::batches::{finished, submit_by_upload};
use openqq_e2e::throughput::compact;
use openqq_e2e::{blink_design, openqq_bin, Client, Server};
use serde_json::Value;
use std::time::{Duration, Instant};

const EVENTS_PER_ITEM: usize = 5;

fn items(n: usize) -> Vec<Value> {
    let design = compact(blink_design("bench"));
    (0..n)
        .map(|i| {
            let mut d = design.clone();
            d["name"] = Value::String(format!("bench-{i}"));
            d
        })
        .collect()
}

/// Items per second of reading the batch's JSON lines from a file and scanning them once.
fn floor_items_per_s(items: &[Value]) -> f64 {
    let lines: String = items.iter().map(|i| format!("{i}\n")).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("items.jsonl");
    std::fs::write(&path, &lines).unwrap();
    let started = Instant::now();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut n = 0;
    for line in text.lines() {
        serde_json::from_str::<serde::de::IgnoredAny>(line).expect("an item is JSON");
        n += 1;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn start(args: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["--rate-limit", "100000/1s", "--byte-limit", "1GiB/1s"];
    all.extend_from_slice(args);
    let server = Server::start(dir.path(), "127.0.0.1:0", &all).expect("openqq up starts");
    (dir, server)
}

/// One batch of `items` on a fresh platform: its time from submission to finish.
async fn throughput(items: &[Value], in_flight: &str) -> Duration {
    let (_dir, server) = start(&["--batch-in-flight", in_flight]);
    let c = Client::new(&server.url, &server.token("bulk"));
    let started = Instant::now();
    let id = submit_by_upload(&c, "bench", items).await.unwrap();
    let batch = finished(&c, &id, Duration::from_secs(600), Duration::from_millis(20)).await.unwrap();
    let took = started.elapsed();
    assert_eq!(batch["counts"]["ready"].as_u64(), Some(items.len() as u64), "{batch}");
    took
}

/// Interactive designs one after another until `until` says stop (at least `min` of them); each
/// one's start (since the first's) and its time from submission to ready, in order.
async fn interactive(c: &Client, min: usize, until: impl Fn() -> bool) -> Vec<(Duration, Duration)> {
    let design = compact(blink_design("live"));
    let mut samples = Vec::new();
    let first = Instant::now();
    while samples.len() < min || !until() {
        let started = Instant::now();
        let (status, accepted) = c.post("/v1/designs", &design).await.unwrap();
        assert_eq!(status, 202, "{accepted}");
        let id = accepted["design_id"].as_str().unwrap();
        c.wait_for(id, Duration::from_secs(120), |d| d["status"] == "ready").await.unwrap();
        samples.push((started - first, started.elapsed()));
    }
    samples
}

/// The latencies of `samples`, sorted.
fn sorted(samples: &[(Duration, Duration)]) -> Vec<Duration> {
    let mut took: Vec<Duration> = samples.iter().map(|s| s.1).collect();
    took.sort();
    took
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// The interactive tenant's samples with `args`, alone (`items` empty) or during the batch.
async fn lane(items: &[Value], args: &[&str]) -> Vec<(Duration, Duration)> {
    let (_dir, server) = start(args);
    let live = Client::new(&server.url, &server.token("live"));
    if items.is_empty() {
        return interactive(&live, 200, || true).await;
    }
    let bulk = Client::new(&server.url, &server.token("bulk"));
    let id = submit_by_upload(&bulk, "bench", items).await.unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let (done, bulk) = (done.clone(), bulk.clone());
        tokio::spawn(async move {
            finished(&bulk, &id, Duration::from_secs(600), Duration::from_millis(50)).await.unwrap();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let took = interactive(&live, 20, || done.load(std::sync::atomic::Ordering::SeqCst)).await;
    watch.await.unwrap();
    took
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args().nth(1).map(|a| a.parse().expect("ITEMS is a number")).unwrap_or(10_000);
    let out = std::env::args().nth(2).map(std::path::PathBuf::from);
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(0);
    println!("{n} items ({} events), {cores} cores, {}", n * EVENTS_PER_ITEM, openqq_bin().display());
    let items = items(n);
    let floor = floor_items_per_s(&items);

    println!("\n| run | total | items/s | events/s | floor items/s | share of floor |\n|---|---|---|---|---|---|");
    for in_flight in ["64", "1000"] {
        let took = throughput(&items, in_flight).await;
        let rate = n as f64 / took.as_secs_f64();
        println!(
            "| --batch-in-flight {in_flight} | {:.2} s | {rate:.0} | {:.0} | {floor:.0} | {:.4} |",
            took.as_secs_f64(),
            rate * EVENTS_PER_ITEM as f64,
            rate / floor
        );
    }

    println!("\n| interactive tenant | designs | p50 ms | p99 ms | p99 / alone |\n|---|---|---|---|---|");
    let samples = [
        ("alone", lane(&[], &[]).await),
        ("lane on", lane(&items, &[]).await),
        ("lane off", lane(&items, &["--batch-lane", "off"]).await),
    ];
    if let Some(out) = &out {
        let runs: serde_json::Map<String, Value> = samples
            .iter()
            .map(|(name, s)| {
                let points: Vec<Value> = s
                    .iter()
                    .map(|(at, took)| serde_json::json!([at.as_secs_f64(), took.as_secs_f64() * 1000.0]))
                    .collect();
                (name.to_string(), Value::Array(points))
            })
            .collect();
        std::fs::create_dir_all(out).unwrap();
        let doc = serde_json::json!({"items": n, "runs": runs});
        std::fs::write(out.join("lane.json"), serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    }
    let [alone, on, off] = [0, 1, 2].map(|i| sorted(&samples[i].1));
    let base = quantile(&alone, 0.99).as_secs_f64();
    for (name, took) in [("alone", &alone), ("batch, lane on", &on), ("batch, lane off", &off)] {
        let p99 = quantile(took, 0.99);
        println!(
            "| {name} | {} | {} | {} | {:.2} |",
            took.len(),
            ms(quantile(took, 0.5)),
            ms(p99),
            p99.as_secs_f64() / base
        );
    }
    println!("\np99 of the interactive tenant, to scale (each # is 10 ms):");
    for (name, took) in [("alone", &alone), ("lane on", &on), ("lane off", &off)] {
        let p99 = quantile(took, 0.99);
        let bar = "#".repeat(((p99.as_secs_f64() * 100.0).round() as usize).clamp(1, 200));
        println!("  {name:<9} {bar} {} ms", ms(p99));
    }
}
