//! Memory over a long run: a release `openqq up` fed at a steady rate for MINUTES, its resident
//! memory sampled every 5 s; the two halves of the run are compared.
//!
//!   cargo build --release --bin openqq
//!   cargo run --release -p openqq-e2e --example soak -- [MINUTES] [DESIGNS_PER_SECOND] [WARM_UP_DESIGNS]
//!
//! Defaults: 10 minutes at 1.2 designs/s, the seed's peak (50,000 events a day is 10,000 designs,
//! 0.116 a second on average; peaks are 10 times that), from 20 tenants, with the netlist exactly
//! as yosys writes it (≈200 KB, so every design also puts an object in the store), after no
//! warm-up. With WARM_UP_DESIGNS, that many designs are first submitted 16 at a time and
//! processed before the clock starts, so the run measures a process that has been working for a
//! while (its caches and the allocator's arenas at their working size) rather than one that has
//! just started; the warm-up's samples are printed but left out of the halves.
//!
//! Growth between the halves that does not level off is a leak; the trend over the second half
//! is printed too. Resident memory is split into anonymous memory (the heap) and file-backed
//! pages (the databases are read through a memory map, so their touched pages count as resident
//! and grow with the files), and the anonymous part again into SQLite's own heap
//! (`openqq_sqlite_memory_bytes`: page caches, which fill up to their fixed size as the files
//! grow) and the rest, where a leak of the platform's own would show.

use openqq_e2e::throughput::applied_results;
use openqq_e2e::{blink_design, Client, Server};
use std::time::{Duration, Instant};

/// (total, anonymous, file-backed, SQLite's heap, anonymous without SQLite's heap) in MiB.
type Sample = [f64; 5];

async fn sample(server: &Server, http: &reqwest::Client) -> Sample {
    let (rss, _) = server.rss_mib();
    let (anon, file) = server.rss_parts_mib();
    let text = metrics(server, http).await;
    let sqlite =
        text.lines().find_map(|l| l.strip_prefix("openqq_sqlite_memory_bytes ")).map(|v| v.trim().parse::<f64>());
    let sqlite = sqlite.expect("the server exports openqq_sqlite_memory_bytes").expect("a number") / 1048576.0;
    [rss, anon, file, sqlite, anon - sqlite]
}

async fn metrics(server: &Server, http: &reqwest::Client) -> String {
    http.get(server.metrics()).send().await.expect("a scrape").text().await.expect("a body")
}

fn print(at: Duration, s: &Sample, sent: usize, note: &str) {
    let [rss, anon, file, sqlite, rest] = s;
    println!(
        "{:>7.0}s {rss:>8.1} {anon:>8.1} {file:>8.1} {sqlite:>8.1} {rest:>8.1}  ({sent} designs){note}",
        at.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let arg = |n: usize, what: &str, default: f64| -> f64 {
        std::env::args().nth(n).map(|a| a.parse().unwrap_or_else(|_| panic!("{what}: a number"))).unwrap_or(default)
    };
    let (minutes, rate, warm_up) =
        (arg(1, "minutes", 10.0), arg(2, "designs per second", 1.2), arg(3, "warm-up designs", 0.0));
    let warm_up = warm_up as usize;
    let dir = tempfile::tempdir().unwrap();
    // No per-tenant bound may refuse the warm-up's burst.
    let server =
        Server::start(dir.path(), "127.0.0.1:0", &["--rate-limit", "1000000/1s", "--byte-limit", "3GiB/1s"]).unwrap();
    let clients: Vec<Client> = (0..20).map(|t| Client::new(&server.url, &server.token(&format!("soak-{t}")))).collect();
    let design = blink_design("soak");
    let http = reqwest::Client::new();
    println!(
        "{minutes} min at {rate} designs/s after a warm-up of {warm_up} designs; resident memory (MiB) every 5 s: \
         total, anonymous, file-backed; of the anonymous: SQLite's heap, the rest"
    );
    let started = Instant::now();
    print(started.elapsed(), &sample(&server, &http).await, 0, " start");
    for chunk in (0..warm_up).collect::<Vec<_>>().chunks(16) {
        let mut sends = tokio::task::JoinSet::new();
        for i in chunk {
            let (client, design) = (clients[i % clients.len()].clone(), design.clone());
            sends.spawn(async move { client.submit_correlated(&design, "soak-warm-up").await });
        }
        while let Some(sent) = sends.join_next().await {
            sent.expect("the task ran").expect("a 202");
        }
    }
    while applied_results(&metrics(&server, &http).await) < warm_up {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if warm_up > 0 {
        print(started.elapsed(), &sample(&server, &http).await, warm_up, " warmed up");
    }

    let run = Duration::from_secs_f64(minutes * 60.0);
    let every = Duration::from_secs_f64(1.0 / rate);
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let (mut sent, mut next_sample) = (0usize, Duration::ZERO);
    while started.elapsed() < run {
        if started.elapsed() >= every.mul_f64(sent as f64) {
            clients[sent % clients.len()].submit_correlated(&design, "soak").await.expect("a 202");
            sent += 1;
        }
        if started.elapsed() >= next_sample {
            let s = sample(&server, &http).await;
            print(started.elapsed(), &s, sent, "");
            samples.push(s);
            next_sample += Duration::from_secs(5);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let half = samples.len() / 2;
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let max = |s: &[f64]| s.iter().copied().fold(f64::MIN, f64::max);
    println!("designs sent: {sent} after the warm-up; peak resident (VmHWM): {:.1} MiB", server.rss_mib().1);
    for (what, column) in
        [("resident", 0), ("anonymous", 1), ("SQLite's heap", 3), ("anonymous without SQLite's heap", 4)]
    {
        let series: Vec<f64> = samples.iter().map(|s| s[column]).collect();
        let (first, second) = series.split_at(half);
        println!(
            "{what}: first half mean {:.1} MiB, max {:.1}; second half mean {:.1} MiB, max {:.1}; second / first (mean) \
             {:.3}x; trend over the second half {:+.2} MiB/min",
            mean(first),
            max(first),
            mean(second),
            max(second),
            mean(second) / mean(first),
            per_minute(second)
        );
    }
}

/// The least-squares slope of samples taken every 5 s, in MiB a minute.
fn per_minute(samples: &[f64]) -> f64 {
    let n = samples.len() as f64;
    let (mean_t, mean_y) = ((n - 1.0) / 2.0, samples.iter().sum::<f64>() / n);
    let (mut cov, mut var) = (0.0, 0.0);
    for (t, y) in samples.iter().enumerate() {
        cov += (t as f64 - mean_t) * (y - mean_y);
        var += (t as f64 - mean_t).powi(2);
    }
    cov / var * 12.0
}
