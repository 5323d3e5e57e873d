//! The submit path against the same server's cheapest route: `POST /v1/designs` (202 means the
//! submission is durable in the log) beside `GET /healthz`, under the same load generator in one
//! run.
//!
//!   cargo build --release --bin openqq
//!   cargo run --release -p openqq-e2e --example submit -- [SECONDS] [IN_FLIGHT] [MODES]
//!
//! Defaults: 10 s per route, 32 requests in flight from 20 tenants, the compact blink design
//! (5 KB). Rate limits are lifted: this measures the path, not the front door's quotas. MODES is
//! any of `api-only,pipeline` (default both), each on its own fresh server:
//!
//! - `api-only`: `openqq up --api-only`, the API alone; accepted submissions wait in the log, so
//!   the two routes share the cores with nothing but the load generator;
//! - `pipeline`: the consumers run in the same process, as they do under `openqq up`, so
//!   submissions also pay for the pipeline they start.

use openqq_e2e::{blink_design, throughput::compact, Client, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Route {
    requests: usize,
    latencies: Vec<Duration>,
}

async fn drive(clients: Arc<Vec<Client>>, body: Arc<Vec<u8>>, post: bool, run: Duration, in_flight: usize) -> Route {
    let until = Instant::now() + run;
    let workers: Vec<_> = (0..in_flight)
        .map(|w| {
            let (clients, body) = (clients.clone(), body.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = w;
                while Instant::now() < until {
                    let c = &clients[n % clients.len()];
                    n += in_flight;
                    let t0 = Instant::now();
                    let req = if post {
                        c.http
                            .post(format!("{}/v1/designs", c.base))
                            .bearer_auth(&c.token)
                            .header("content-type", "application/json")
                            .body(body.as_ref().clone())
                    } else {
                        c.http.get(format!("{}/healthz", c.base))
                    };
                    let status = req.send().await.map(|r| r.status().as_u16()).unwrap_or(0);
                    assert!(matches!(status, 200 | 202), "answered {status}");
                    latencies.push(t0.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.unwrap());
    }
    latencies.sort();
    Route { requests: latencies.len(), latencies }
}

fn p(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0
}

fn server(dir: &std::path::Path, api_only: bool) -> Server {
    let mut args = vec!["--rate-limit", "1000000/1s", "--workers", "64", "--queue", "4096"];
    args.extend(["--tenant-concurrency", "4096", "--byte-limit", "3GiB/1s"]);
    if api_only {
        args.push("--api-only");
    }
    Server::start(dir, "127.0.0.1:0", &args).unwrap()
}

#[tokio::main]
async fn main() {
    let secs: f64 = std::env::args().nth(1).map(|a| a.parse().expect("seconds")).unwrap_or(10.0);
    let in_flight: usize = std::env::args().nth(2).map(|a| a.parse().expect("requests in flight")).unwrap_or(32);
    let modes = std::env::args().nth(3).unwrap_or_else(|| "api-only,pipeline".into());
    let body = Arc::new(serde_json::to_vec(&compact(blink_design("submit"))).unwrap());
    let run = Duration::from_secs_f64(secs);
    println!(
        "{secs} s per route, {in_flight} in flight, {} cores, body {} bytes",
        std::thread::available_parallelism().unwrap(),
        body.len()
    );
    println!("{:<10} {:<18} {:>10} {:>10} {:>10}", "server", "route", "req/s", "p50 ms", "p99 ms");
    for mode in ["api-only", "pipeline"] {
        if !modes.split(',').any(|m| m == mode) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let server = server(dir.path(), mode == "api-only");
        let clients: Arc<Vec<Client>> =
            Arc::new((0..20).map(|t| Client::new(&server.url, &server.token(&format!("submit-{t}")))).collect());
        let mut rates = Vec::new();
        for (label, post) in [("GET /healthz", false), ("POST /v1/designs", true)] {
            let r = drive(clients.clone(), body.clone(), post, run, in_flight).await;
            let rate = r.requests as f64 / secs;
            rates.push(rate);
            println!(
                "{mode:<10} {label:<18} {rate:>10.0} {:>10.2} {:>10.2}",
                p(&r.latencies, 0.5),
                p(&r.latencies, 0.99)
            );
        }
        println!("{mode:<10} submit / healthz rate: {:.2}x", rates[1] / rates[0]);
        drop(server);
    }
}
