//! The design store on DynamoDB against the embedded store, side by side in one run: store round
//! trips per design, by operation, and end-to-end designs/s.
//!
//!   cargo build --release --bin openqq
//!   OPENQQ_TEST_DYNAMODB_ENDPOINT=$(scripts/services/moto.sh) AWS_REGION=us-east-1 \
//!     cargo run --release -p openqq-e2e --example store -- [DESIGNS] [TENANTS] [CONCURRENCY]
//!
//! (`AWS_REGION` spares the server a region lookup in instance metadata at start-up.)
//! docs/BENCHMARKS.md §8 has the figures.
//!
//! Defaults: 200 compact designs from 5 tenants, 8 requests in flight. The same designs go
//! through `openqq up` twice: with the embedded store, then with `--dynamodb-table` (a fresh
//! table) on the local endpoint. Round trips come from `openqq_store_requests_total`: for the
//! DynamoDB store one per request sent (retries included), labelled with the DynamoDB API; for
//! the embedded store one per port call (one SQLite transaction or read).
//!
//! The local endpoint (moto) serves one request at a time and is far slower than DynamoDB, so its
//! designs/s say what the round trips cost on this machine (and fall as moto's table grows), not
//! what AWS does; the round trips per design carry over as they are.

use openqq_e2e::compact_blink_design;
use openqq_e2e::throughput::run;
use std::collections::BTreeMap;

const METRIC: &str = "openqq_store_requests_total";

/// `operation → requests` of one backend, from a Prometheus text exposition.
fn requests_by_operation(metrics: &str, backend: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let backend = format!("backend=\"{backend}\"");
    for line in metrics.lines().filter(|l| l.starts_with(&format!("{METRIC}{{")) && l.contains(&backend)) {
        let operation = line.split("operation=\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("?");
        let value: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        *out.entry(operation.to_owned()).or_default() += value;
    }
    out
}

struct Measured {
    label: &'static str,
    by_operation: BTreeMap<String, f64>,
    designs_per_s: f64,
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> =
        std::env::args().skip(1).take(3).map(|a| a.parse().expect("numbers: DESIGNS TENANTS CONCURRENCY")).collect();
    let designs = args.first().copied().unwrap_or(200);
    let tenants = args.get(1).copied().unwrap_or(5);
    let concurrency = args.get(2).copied().unwrap_or(8);
    let endpoint = std::env::var("OPENQQ_TEST_DYNAMODB_ENDPOINT")
        .expect("OPENQQ_TEST_DYNAMODB_ENDPOINT: a local DynamoDB endpoint, e.g. $(scripts/services/moto.sh)");
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!(
        "{designs} compact designs from {tenants} tenants, {concurrency} requests in flight, {cores} cores; \
         DynamoDB at {endpoint}"
    );
    let design = compact_blink_design("bench");
    let table = format!("openqq-bench-{}", std::process::id());
    let mut measured = Vec::new();
    for (label, backend, extra) in [
        ("embedded", "embedded", vec![]),
        ("dynamodb", "dynamodb", vec!["--dynamodb-table", table.as_str(), "--dynamodb-endpoint", endpoint.as_str()]),
    ] {
        eprintln!("running: {label}");
        let r = run(designs, tenants, concurrency, &design, &extra).await;
        let by_operation = requests_by_operation(&r.metrics, backend);
        assert!(!by_operation.is_empty(), "the {label} store counted no requests; is the release build current?");
        measured.push(Measured { label, by_operation, designs_per_s: designs as f64 / r.total.as_secs_f64() });
    }

    for m in &measured {
        println!("\n{} store: round trips per design by operation", m.label);
        for (operation, n) in &m.by_operation {
            println!("  {operation:<28} {:>8.2}", n / designs as f64);
        }
    }
    let per_design = |m: &Measured| m.by_operation.values().sum::<f64>() / designs as f64;
    println!("\n{:<10} {:>22} {:>12}", "store", "round trips per design", "designs/s");
    for m in &measured {
        println!("{:<10} {:>22.2} {:>12.1}", m.label, per_design(m), m.designs_per_s);
    }
    let (embedded, dynamodb) = (&measured[0], &measured[1]);
    println!(
        "ratios dynamodb / embedded: round trips {:.2}×, designs/s {:.3}×",
        per_design(dynamodb) / per_design(embedded),
        dynamodb.designs_per_s / embedded.designs_per_s
    );
}
