//! A long run at the seed's peak rate with its bursts: a release `openqq up` fed for MINUTES,
//! sampled every 5 s, every series compared before and after a warm-up and checked against its
//! bound.
//!
//!   cargo build --release -p openqq-cli --bin openqq --no-default-features
//!   cargo build -p openqq-e2e --example soak
//!   OPENQQ_BIN=$CARGO_TARGET_DIR/release/openqq $CARGO_TARGET_DIR/debug/examples/soak \
//!     [MINUTES] [DESIGNS_PER_SECOND] [WARM_UP_DESIGNS] [OUT_DIR] [BURST_EVERY_MINUTES] [KEEP_MINUTES]
//!   python3 scripts/soak-plot.py OUT_DIR docs/soak
//!
//! Defaults: 10 minutes at 1.2 designs/s, the seed's peak (50,000 events a day is 10,000
//! designs, 0.116 a second on average; peaks are 10 times that), from 20 tenants, with the
//! netlist exactly as yosys writes it (≈200 KB), each under an `Idempotency-Key`, after no
//! warm-up designs, into `soak-out`, with a burst every 10 minutes: one tenant's batch of ten
//! times a minute's worth (720 designs at 1.2/s), with compact netlists so the batch fits an
//! upload; BURST_EVERY_MINUTES 0 for none. The first burst comes half a period in. Every
//! tenant has a webhook for `results.ready` on a local endpoint that answers 204, so the store
//! keeps deliveries. Tenants delete each design KEEP_MINUTES (5) after it ended, steady designs
//! and the bursts' alike, as tenants keeping only their recent designs would (or one at its
//! `--tenant-designs`), so what is kept per design is bounded too; KEEP_MINUTES 0 keeps them all.
//!
//! The server runs with short retention ([`RETENTION`]: the log, the dead letters, the feed with
//! its ended deliveries, idempotency keys, accepted-revision markers, batches, uploads and deleted
//! designs' tombstones kept 5 minutes) so that within the hour all of them really expire.
//!
//! Every 5 s: resident memory (anonymous, file-backed; of the anonymous SQLite's heap from
//! `openqq_sqlite_memory_bytes`, and the rest), open file descriptors and threads (`/proc`),
//! the data dir's bytes (the log's database with its WAL, the store's, the object store,
//! uploads, the rest), the log's records (and per topic, every 30 s, into `topics.csv`), the
//! store's rows that retention or expiry should bound (feed, deliveries, idempotency keys,
//! accepted markers, batch items), consumer lag (`openqq_consumer_lag_records`, summed and the
//! largest partition), p50/p99 from a steady design's 202 to its `ready` over the last 60 s
//! (client side, every steady design followed), and designs accepted. `samples.csv` holds them
//! all. The warm-up is the first third of the run, at most 20 minutes. An hour of it, with each
//! series' bound and whether it held: docs/RELIABILITY.md, "Soak".

mod load;
mod probe;
mod report;

use load::Seen;
use openqq_e2e::batches::finished;
use openqq_e2e::throughput::applied_results;
use openqq_e2e::{blink_design, Client, Server};
use probe::{Col, Probe, Sample};
use report::{Bound, Check};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The retention the soak runs with: short enough that records and feed entries expire many
/// times within an hour (`--feed-retention` takes 1 minute at the least).
const RETENTION: [&str; 16] = [
    "--log-retention",
    "5m",
    "--dead-letter-retention",
    "5m",
    "--feed-retention",
    "5m",
    "--idempotency-window",
    "5m",
    "--accepted-retention",
    "5m",
    "--batch-retention",
    "5m",
    "--upload-retention",
    "5m",
    "--tombstone-retention",
    "5m",
];

/// Tenants of the steady load; the first also sends the bursts.
const TENANTS: usize = 20;

/// How often the server is sampled.
const EVERY: Duration = Duration::from_secs(5);

/// The window of the latency percentiles.
const LATENCY_WINDOW: Duration = Duration::from_secs(60);

struct Args {
    minutes: f64,
    rate: f64,
    warm_up_designs: usize,
    out: PathBuf,
    burst_every: Duration,
    /// How long after it ended a design is deleted; zero for never.
    keep: Duration,
}

fn args() -> Args {
    let arg = |n: usize, what: &str, default: f64| -> f64 {
        std::env::args().nth(n).map(|a| a.parse().unwrap_or_else(|_| panic!("{what}: a number"))).unwrap_or(default)
    };
    Args {
        minutes: arg(1, "minutes", 10.0),
        rate: arg(2, "designs per second", 1.2),
        warm_up_designs: arg(3, "warm-up designs", 0.0) as usize,
        out: std::env::args().nth(4).unwrap_or_else(|| "soak-out".into()).into(),
        burst_every: Duration::from_secs_f64(arg(5, "minutes between bursts", 10.0) * 60.0),
        keep: Duration::from_secs_f64(arg(6, "minutes a design is kept after it ended", 5.0) * 60.0),
    }
}

#[tokio::main]
async fn main() {
    let a = args();
    std::fs::create_dir_all(&a.out).expect("the output dir");
    let dir = tempfile::tempdir().unwrap();
    let mut flags = vec!["--rate-limit", "1000000/1s", "--byte-limit", "3GiB/1s", "--webhooks-allow-private"];
    flags.extend(RETENTION);
    let server = Server::start(dir.path(), "127.0.0.1:0", &flags).expect("openqq up starts");
    let mut probe = Probe::find(dir.path());
    let clients: Vec<Client> =
        (0..TENANTS).map(|t| Client::new(&server.url, &server.token(&format!("soak-{t}")))).collect();
    let delivered = Arc::new(AtomicU64::new(0));
    let hook = load::webhook_receiver(delivered.clone()).await;
    for c in &clients {
        load::register_webhook(c, &hook).await.expect("a webhook");
    }
    let burst_size = (a.rate * 60.0 * 10.0).round() as usize;
    let warm_up_s = (a.minutes * 60.0 / 3.0).min(20.0 * 60.0);
    println!(
        "soak: {} min at {} designs/s from {TENANTS} tenants; a batch of {burst_size} from one tenant every {:.0} s; \
         designs deleted {:.0} s after they end (0: never); warm-up {warm_up_s:.0} s; openqq up pid {} with {}",
        a.minutes,
        a.rate,
        a.burst_every.as_secs_f64(),
        a.keep.as_secs_f64(),
        probe.pid(),
        flags.join(" ")
    );
    let http = reqwest::Client::new();
    let scrape = || async { http.get(server.metrics()).send().await.expect("a scrape").text().await.expect("a body") };
    let seen = Arc::new(Seen::default());
    let design = blink_design("soak");
    warm_up(&clients, &design, a.warm_up_designs, &scrape).await;
    if !a.keep.is_zero() {
        tokio::spawn(load::deleter(clients.clone(), seen.clone(), a.keep));
    }

    let run = Duration::from_secs_f64(a.minutes * 60.0);
    let period = Duration::from_secs_f64(1.0 / a.rate);
    let started = Instant::now();
    let (mut samples, mut topics): (Vec<Sample>, Vec<String>) = (Vec::new(), vec!["t_s,topic,records,bytes".into()]);
    let (mut sent, mut bursts, mut next_sample) = (0usize, 0usize, Duration::ZERO);
    let mut steady = tokio::task::JoinSet::new();
    println!("{}", header());
    while started.elapsed() < run {
        let now = started.elapsed();
        if now >= period.mul_f64(sent as f64) {
            let (tenant, design, seen) = (sent % TENANTS, design.clone(), seen.clone());
            steady.spawn(load::steady_one(clients[tenant].clone(), tenant, design, format!("soak-{sent}"), seen));
            sent += 1;
        }
        if !a.burst_every.is_zero() && now >= a.burst_every.mul_f64(bursts as f64 + 0.5) {
            let (client, seen, round) = (clients[0].clone(), seen.clone(), bursts);
            tokio::spawn(async move {
                let t = Instant::now();
                let id = load::burst(&client, burst_size, round, &seen).await.expect("the burst's batch is accepted");
                let batch = finished(&client, &id, Duration::from_secs(1800), Duration::from_secs(1)).await;
                if let Err(e) = load::batch_ended(&client, &id, &seen).await {
                    eprintln!("the burst's designs could not be listed for deletion: {e:#}");
                }
                let counts = batch.map(|b| b["counts"].to_string()).unwrap_or_else(|e| format!("{e:#}"));
                println!("burst {round}: {burst_size} items done in {:.1} s: {counts}", t.elapsed().as_secs_f64());
            });
            bursts += 1;
        }
        if now >= next_sample {
            let mut s = probe.sample(now.as_secs_f64(), &scrape().await);
            let (p50, p99, n) = seen.percentiles(LATENCY_WINDOW);
            s.values[Col::P50Ms as usize] = p50;
            s.values[Col::P99Ms as usize] = p99;
            s.values[Col::Ready as usize] = n as f64;
            s.values[Col::Accepted as usize] = seen.accepted.load(Ordering::Relaxed) as f64;
            s.values[Col::Bursts as usize] = bursts as f64;
            println!("{}", line(&s));
            if samples.len() % 6 == 0 {
                topics.extend(probe.topics().into_iter().map(|(t, n, b)| format!("{:.0},{t},{n},{b}", s.at_s)));
                report::write_csv(&a.out.join("samples.csv"), &samples).expect("samples.csv");
                std::fs::write(a.out.join("topics.csv"), topics.join("\n") + "\n").expect("topics.csv");
            }
            samples.push(s);
            next_sample += EVERY;
        }
        while steady.try_join_next().is_some() {}
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    report::write_csv(&a.out.join("samples.csv"), &samples).expect("samples.csv");
    std::fs::write(a.out.join("topics.csv"), topics.join("\n") + "\n").expect("topics.csv");
    println!(
        "steady designs sent {sent}, bursts {bursts}, accepted {} (with batch items), steady errors {}, designs \
         deleted {} ({} refused), webhook deliveries received {}; peak resident (VmHWM) {:.1} MiB",
        seen.accepted.load(Ordering::Relaxed),
        seen.errors.load(Ordering::Relaxed),
        seen.deleted.load(Ordering::Relaxed),
        seen.delete_errors.load(Ordering::Relaxed),
        delivered.load(Ordering::Relaxed),
        server.rss_mib().1
    );
    let (text, all) = report::verdicts(&samples, warm_up_s, &checks(!a.keep.is_zero()));
    print!("{text}");
    std::fs::write(a.out.join("verdicts.txt"), &text).expect("verdicts.txt");
    println!("every bound held: {all}");
}

/// Submits `n` designs 16 at a time and waits until they are processed, so the run starts on a
/// process that has already worked.
async fn warm_up<F, Fut>(clients: &[Client], design: &serde_json::Value, n: usize, scrape: &F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    for chunk in (0..n).collect::<Vec<_>>().chunks(16) {
        let mut sends = tokio::task::JoinSet::new();
        for i in chunk {
            let (client, design) = (clients[i % clients.len()].clone(), design.clone());
            sends.spawn(async move { client.submit_correlated(&design, "soak-warm-up").await });
        }
        while let Some(sent) = sends.join_next().await {
            sent.expect("the task ran").expect("a 202");
        }
    }
    while applied_results(&scrape().await) < n {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn header() -> String {
    "      t    rss   anon sqlite   rest  fds thr  log.db store.db objects records  feed deliv   idem accepted lag  \
     p99ms accepted"
        .into()
}

fn line(s: &Sample) -> String {
    let v = |c: Col| s.get(c);
    format!(
        "{:>6.0}s {:>6.1} {:>6.1} {:>6.1} {:>6.1} {:>4.0} {:>3.0} {:>7.1} {:>8.1} {:>7.1} {:>7.0} {:>5.0} {:>5.0} {:>6.0} {:>8.0} {:>4.0} \
         {:>6.0} {:>8.0}",
        s.at_s,
        v(Col::RssMib),
        v(Col::AnonMib),
        v(Col::SqliteHeapMib),
        v(Col::RestMib),
        v(Col::Fds),
        v(Col::Threads),
        v(Col::LogDbMib),
        v(Col::StoreDbMib),
        v(Col::ObjectsMib),
        v(Col::LogRecords),
        v(Col::FeedRows),
        v(Col::DeliveryRows),
        v(Col::IdempotencyRows),
        v(Col::AcceptedRows),
        v(Col::LagRecords),
        v(Col::P99Ms),
        v(Col::Accepted),
    )
}

/// Each series' bound after the warm-up, and why it is the bound; `deleting`: the tenants delete
/// their designs a few minutes after they end.
fn checks(deleting: bool) -> Vec<Check> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) as f64;
    let readers = cores.clamp(2.0, 8.0);
    let caches = 2.0 * 3.0 + readers;
    let peaks = |rel: f64, abs: f64| Bound::PeaksFlat { rel, abs };
    let means = |rel: f64, abs: f64| Bound::MeanFlat { rel, abs };
    let check = |col, unit, bound, why: &str| Check { col, unit, bound, why: why.to_owned() };
    // What is kept per design is flat once the tenants delete, and grows with the designs if not.
    let kept = |rel: f64, abs: f64| if deleting { peaks(rel, abs) } else { Bound::PerDesign };
    vec![
        check(Col::RssMib, "MiB", peaks(0.10, 0.0), "resident memory: its peaks do not climb (within 10 %)"),
        check(Col::AnonMib, "MiB", means(0.05, 2.0), "anonymous memory: flat (within 5 % + 2 MiB)"),
        Check {
            col: Col::SqliteHeapMib,
            unit: "MiB",
            bound: Bound::AtMost(caches + 1.0),
            why: format!(
                "SQLite's page caches at their configured size: 2 MiB for each of the log's writer and reader and \
                 the store's writer, 1 MiB for each of {readers} store readers ({caches} MiB), plus 1 MiB of \
                 statements and schemas; SQLite's soft heap limit, set to that, holds it"
            ),
        },
        check(Col::RestMib, "MiB", means(0.05, 2.0), "the platform's own heap (anonymous less SQLite's): flat"),
        check(
            Col::FileMib,
            "MiB",
            peaks(0.20, 2.0),
            "file-backed pages: the binary and the databases' pages read through their memory map, so it follows \
             the files (the log's bounded by retention, the store's by the designs kept)",
        ),
        check(
            Col::Fds,
            "",
            peaks(0.0, 8.0),
            "open descriptors: the databases, the listeners, the clients' connections",
        ),
        check(
            Col::Threads,
            "",
            // `openqq up`'s blocking pool is capped at 32 threads (cli/src/up.rs); beside it run
            // the runtime's workers, one per core, and the main thread.
            Bound::AtMost(32.0 + cores + 1.0),
            "threads: the blocking pool (store calls in place, their handoffs, validations, file reads), which keeps its \
             busiest moment's size up to its cap of 32, the runtime's workers and the main thread",
        ),
        check(
            Col::LogDbMib,
            "MiB",
            peaks(0.20, 0.0),
            "log.db with its WAL: 5 min of records (retention, checked every minute) plus the WAL (truncated to \
             64 MiB after a checkpoint); freed pages handed back by incremental vacuum",
        ),
        check(Col::LogRecords, "", peaks(0.20, 0.0), "the log's records: those of the last 5-6 minutes"),
        check(Col::LogRecordMib, "MiB", peaks(0.20, 0.0), "the log's record bytes: those of the last 5-6 minutes"),
        check(
            Col::FeedRows,
            "",
            peaks(0.20, 0.0),
            "feed entries: the last 5 min (--feed-retention), swept as feeds grow",
        ),
        check(
            Col::DeliveryRows,
            "",
            peaks(0.20, 0.0),
            "webhook deliveries: those of the feed entries kept, once ended",
        ),
        check(
            Col::UploadsMib,
            "MiB",
            peaks(0.0, 1.0),
            "uploads: the burst's items, read by its batch and swept past --upload-retention (5 min) at the next",
        ),
        check(
            Col::OtherMib,
            "MiB",
            Bound::AtMost(128.0 + 1.0),
            "the rest: the process's own log files (logs/, rotated at 32 MiB, four files at most) and the secret",
        ),
        check(
            Col::StoreDbMib,
            "MiB",
            kept(0.10, 2.0),
            "store.db: designs, timelines, reports are kept per design, until the design is deleted (then its pages \
             are reused)",
        ),
        check(Col::DesignRows, "", kept(0.20, 0.0), "designs: those of the last minutes, the tenants delete the rest"),
        check(
            Col::TombstoneRows,
            "",
            peaks(0.20, 0.0),
            "deleted designs' tombstones: those of the last 5 min (--tombstone-retention), removed as designs are \
             deleted",
        ),
        check(
            Col::ObjectsMib,
            "MiB",
            peaks(0.05, 1.0),
            "the object store: each tenant's netlist once (content-addressed); a batch's items object goes once the \
             batch is in the store",
        ),
        check(Col::ObjectFiles, "", peaks(0.0, 2.0), "objects in the store: as above"),
        check(
            Col::IdempotencyRows,
            "",
            peaks(0.20, 0.0),
            "idempotency keys: the last 5 min of keyed submissions (--idempotency-window), purged as keys are claimed",
        ),
        check(
            Col::AcceptedRows,
            "",
            peaks(0.20, 0.0),
            "accepted markers: the last 5 min of accepted designs (--accepted-retention), removed as markers are \
             written",
        ),
        check(
            Col::BatchItemRows,
            "",
            peaks(0.20, 0.0),
            "batch items: those of the batches of the last 5 min (--batch-retention), removed as batches are created",
        ),
        check(
            Col::LagRecords,
            "",
            peaks(0.5, 10.0),
            "consumer lag: rises with each burst and drains; its peaks do not climb",
        ),
        check(
            Col::P99Ms,
            "ms",
            means(0.5, 50.0),
            "p99 from 202 to ready over 60 s: does not drift up (within 50 % + 50 ms)",
        ),
    ]
}
