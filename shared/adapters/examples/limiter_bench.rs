//! Benchmark 1: limiter decisions per second through `RedisRateLimiter`, side by side with raw
//! `redis-benchmark` running EVALSHA of the same script on the same server, as a ratio.
//!
//! ```text
//! scripts/bench-limiter.sh                       # starts Redis, builds, runs, stops
//! cargo run --release -p openqq-adapters --example limiter_bench -- --url redis://127.0.0.1:6379 \
//!     [--seconds 3] [--rounds 3] [--tasks 64] [--tenants 10000] [--limit 100] [--window-ms 1000] [--clients 50]
//! ```
//!
//! The three runs (limiter, raw pipelined, raw unpipelined) alternate for `--rounds` rounds and
//! the medians are compared, so a neighbour's load on a shared machine hits both sides alike.
//!
//! The limiter side runs `--tasks` concurrent tasks on ONE limiter (one multiplexed connection),
//! so requests pipeline the way they do in the API. Each decision picks a tenant at random out of
//! `--tenants`; the raw side uses `redis-benchmark -r` over the same key shape and arguments.

use openqq_adapters::redis_limiter::{RedisRateLimiter, SCRIPT};
use openqq_core::{Quota, RateLimiter, TenantId};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    url: String,
    seconds: u64,
    tasks: usize,
    tenants: u64,
    limit: u32,
    window_ms: u64,
    clients: usize,
    rounds: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        url: String::new(),
        seconds: 3,
        tasks: 64,
        tenants: 10_000,
        limit: 100,
        window_ms: 1000,
        clients: 50,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--url" => a.url = value.clone(),
            "--seconds" => a.seconds = num()?,
            "--tasks" => a.tasks = num()? as usize,
            "--tenants" => a.tenants = num()?,
            "--limit" => a.limit = num()? as u32,
            "--window-ms" => a.window_ms = num()?,
            "--clients" => a.clients = num()? as usize,
            "--rounds" => a.rounds = (num()? as usize).max(1),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.url.is_empty() {
        a.url = std::env::var("OPENQQ_TEST_REDIS_URL")
            .map_err(|_| "give --url or set OPENQQ_TEST_REDIS_URL".to_string())?;
    }
    Ok(a)
}

/// Tenant names as `redis-benchmark -r` writes `__rand_int__`: twelve zero-padded digits.
fn tenant(i: u64) -> TenantId {
    TenantId::parse(format!("bench-{i:012}")).unwrap()
}

/// Decisions per second through the limiter, and the share of them that admitted.
async fn limiter_rate(a: &Args) -> (f64, f64) {
    let limiter =
        Arc::new(RedisRateLimiter::connect(&a.url, Duration::from_secs(2)).await.expect("redis is reachable"));
    let quota = Quota { limit: a.limit, window: Duration::from_millis(a.window_ms) };
    limiter.check(&tenant(0), quota).await.expect("warm-up decision");
    let (decisions, admitted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let run_for = Duration::from_secs(a.seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..a.tasks)
        .map(|i| {
            let (limiter, decisions, admitted, tenants) =
                (limiter.clone(), decisions.clone(), admitted.clone(), a.tenants);
            tokio::spawn(async move {
                // xorshift: a cheap, dependency-free spread over the tenants.
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
                while started.elapsed() < run_for {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let d = limiter.check(&tenant(x % tenants), quota).await.expect("decision");
                    decisions.fetch_add(1, Ordering::Relaxed);
                    admitted.fetch_add(d.allowed as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let n = decisions.load(Ordering::Relaxed) as f64;
    (n / started.elapsed().as_secs_f64(), admitted.load(Ordering::Relaxed) as f64 / n)
}

/// Requests per second `redis-benchmark` reaches with EVALSHA of the same script.
fn raw_rate(a: &Args, host: &str, port: &str, pipeline: usize, sha: &str) -> f64 {
    let requests = (if pipeline > 1 { 60_000 } else { 30_000 }) * a.seconds;
    let window_us = (a.window_ms * 1000).to_string();
    let out = Command::new("redis-benchmark")
        .args(["-h", host, "-p", port, "-c", &a.clients.to_string(), "-n", &requests.to_string()])
        .args(["-r", &a.tenants.to_string(), "-P", &pipeline.to_string(), "--csv"])
        .args(["EVALSHA", sha, "1", "rl:{bench-__rand_int__}", &a.limit.to_string(), &window_us])
        .output()
        .expect("redis-benchmark runs (Debian package redis-tools)");
    let csv = String::from_utf8_lossy(&out.stdout);
    // --csv: a header line, then "EVALSHA ...","<rps>",...
    csv.lines()
        .filter_map(|l| l.split("\",\"").nth(1))
        .find_map(|rps| rps.trim_matches('"').parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rate in redis-benchmark output: {csv} {}", String::from_utf8_lossy(&out.stderr)))
}

#[tokio::main]
async fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("limiter_bench: {e}");
            std::process::exit(2);
        }
    };
    let addr = a.url.trim_start_matches("redis://").split('/').next().unwrap().to_string();
    let (host, port) = addr.rsplit_once(':').unwrap_or((&addr, "6379"));
    let sha = redis::Script::new(SCRIPT).get_hash().to_owned();
    // The limiter's warm-up loads the script; load it anyway in case the raw side goes first.
    let mut conn = redis::Client::open(a.url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(SCRIPT).query_async(&mut conn).await.unwrap();

    println!(
        "limit {} per {} ms, {} tenants, {} rounds of {} s per run",
        a.limit, a.window_ms, a.tenants, a.rounds, a.seconds
    );
    let (mut ours, mut admitted, mut pipelined, mut single) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=a.rounds {
        let (rate, share) = limiter_rate(&a).await;
        ours.push(rate);
        admitted.push(share);
        pipelined.push(raw_rate(&a, host, port, 16, &sha));
        single.push(raw_rate(&a, host, port, 1, &sha));
        println!(
            "round {round}: limiter {rate:.0}/s, raw pipelined {:.0}/s, raw unpipelined {:.0}/s",
            pipelined[round - 1],
            single[round - 1]
        );
    }
    let (ours, admitted, pipelined, single) = (median(ours), median(admitted), median(pipelined), median(single));
    println!();
    println!("| run (median of {}) | decisions/s | limiter ÷ raw |", a.rounds);
    println!("|---|---:|---:|");
    println!(
        "| RedisRateLimiter, {} tasks, 1 multiplexed connection ({:.0} % admitted) | {ours:.0} | — |",
        a.tasks,
        admitted * 100.0
    );
    println!(
        "| redis-benchmark EVALSHA, {} connections, pipeline 16 | {pipelined:.0} | {:.0} % |",
        a.clients,
        100.0 * ours / pipelined
    );
    println!(
        "| redis-benchmark EVALSHA, {} connections, no pipelining | {single:.0} | {:.0} % |",
        a.clients,
        100.0 * ours / single
    );
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
