//! Memory over a long run: a release `openqq up` fed at a steady rate for MINUTES, its resident
//! memory sampled every 5 s; the two halves of the run are compared.
//!
//!   cargo build --release --bin openqq
//!   cargo run --release -p openqq-e2e --example soak -- [MINUTES] [DESIGNS_PER_SECOND]
//!
//! Defaults: 10 minutes at 1.2 designs/s, the seed's peak (50,000 events a day is 10,000 designs,
//! 0.116 a second on average; peaks are 10 times that), from 20 tenants, with the netlist exactly
//! as yosys writes it (≈200 KB, so every design also puts an object in the store). Growth between
//! the halves that does not level off is a leak. Resident memory is also printed split into
//! anonymous memory (the heap: where a leak shows) and file-backed pages (the databases are read
//! through a memory map, so their touched pages count as resident and grow with the files).

use openqq_e2e::{blink_design, Client, Server};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let minutes: f64 = std::env::args().nth(1).map(|a| a.parse().expect("minutes")).unwrap_or(10.0);
    let rate: f64 = std::env::args().nth(2).map(|a| a.parse().expect("designs per second")).unwrap_or(1.2);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--rate-limit", "1000000/1s"]).unwrap();
    let clients: Vec<Client> = (0..20).map(|t| Client::new(&server.url, &server.token(&format!("soak-{t}")))).collect();
    let design = blink_design("soak");
    let run = Duration::from_secs_f64(minutes * 60.0);
    let every = Duration::from_secs_f64(1.0 / rate);
    println!("{minutes} min at {rate} designs/s; resident memory (MiB) every 5 s: total, anonymous, file-backed");
    let started = Instant::now();
    // (total, anonymous) resident MiB.
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let (mut sent, mut next_sample) = (0usize, Duration::ZERO);
    while started.elapsed() < run {
        let due = every.mul_f64(sent as f64);
        if started.elapsed() >= due {
            clients[sent % clients.len()].submit_correlated(&design, "soak").await.expect("a 202");
            sent += 1;
        }
        if started.elapsed() >= next_sample {
            let (rss, _) = server.rss_mib();
            let (anon, file) = server.rss_parts_mib();
            samples.push((rss, anon));
            println!("{:>7.0}s {rss:>8.1} {anon:>8.1} {file:>8.1}  ({sent} designs)", started.elapsed().as_secs_f64());
            next_sample += Duration::from_secs(5);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let half = samples.len() / 2;
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let max = |s: &[f64]| s.iter().copied().fold(f64::MIN, f64::max);
    println!("designs sent: {sent}; peak resident (VmHWM): {:.1} MiB", server.rss_mib().1);
    for (what, series) in [
        ("resident", samples.iter().map(|(rss, _)| *rss).collect::<Vec<f64>>()),
        ("anonymous", samples.iter().map(|(_, anon)| *anon).collect()),
    ] {
        let (first, second) = series.split_at(half);
        println!(
            "{what}: first half mean {:.1} MiB, max {:.1}; second half mean {:.1} MiB, max {:.1}; second / first (mean) {:.3}x",
            mean(first),
            max(first),
            mean(second),
            max(second),
            mean(second) / mean(first)
        );
    }
}
