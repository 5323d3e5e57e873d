//! A chaos run with a checker: tenants save revisions, post batches and register webhooks against
//! a real `openqq up` (embedded, or on a Kafka-protocol broker) while faults land together and at
//! random from a printed seed — SIGKILLs of the process, Redis stopped under both limiter
//! policies, the broker stopped, the data dir's disk filled, poison records on a topic, a webhook
//! receiver that goes down, hangs and answers 500. When the time is up every fault is undone and
//! the checker reads everything back (see [`check`]). Loopback only; bounded in time.
//!
//! `cargo run -p openqq-e2e --example chaos -- --help`; a short run of each mode is in the e2e
//! suite (`chaos::`), the long runs' results are in docs/RELIABILITY.md.

pub mod check;
pub mod faults;
pub mod journal;
pub mod platform;
pub mod receiver;
pub mod rng;
pub mod workload;

use check::Findings;
use journal::Journal;
use openqq_adapters::{KafkaEventLog, KafkaSettings};
use openqq_core::{LogRecord, LogSource};
use platform::Platform;
use receiver::Receiver;
use rng::Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::{nap, Tenant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Embedded,
    Kafka,
    /// The design store on DynamoDB and the objects in S3, both at the endpoint in
    /// `OPENQQ_TEST_DYNAMODB_ENDPOINT` (moto), the store behind a proxy that can throttle it.
    Dynamodb,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "embedded" => Ok(Mode::Embedded),
            "kafka" => Ok(Mode::Kafka),
            "dynamodb" => Ok(Mode::Dynamodb),
            other => Err(format!("--mode is embedded, kafka or dynamodb, not {other:?}")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub seed: u64,
    /// How long faults are injected; checking comes after.
    pub duration: Duration,
    pub tenants: usize,
}

/// How long the checker waits for the platform to settle after the faults end.
const SETTLE: Duration = Duration::from_secs(180);

pub struct Report {
    pub config: Config,
    pub findings: Findings,
    pub faults: BTreeMap<&'static str, usize>,
    pub down: Duration,
    pub windows: usize,
    pub skipped: Vec<&'static str>,
    pub checked_in: Duration,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.findings.violations().is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (c, f) = (&self.config, &self.findings);
        writeln!(
            out,
            "chaos {:?}, seed {}, {} s of faults, {} tenants",
            c.mode,
            c.seed,
            c.duration.as_secs(),
            c.tenants
        )?;
        let faults: Vec<String> = self.faults.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
        writeln!(out, "  faults: {}", faults.join(", "))?;
        if !self.skipped.is_empty() {
            writeln!(out, "  not run here: {}", self.skipped.join(", "))?;
        }
        writeln!(
            out,
            "  platform down (a part every request needs): {:.1} s in {} windows",
            self.down.as_secs_f64(),
            self.windows
        )?;
        writeln!(
            out,
            "  acknowledged: {} revisions of {} designs; {} batches ({} items); {} webhooks",
            f.revisions, f.designs, f.batches, f.batch_items, f.hooks
        )?;
        writeln!(
            out,
            "  lost {}, applied twice {}, out of order {}, failed {}, batch problems {}",
            f.lost.len(),
            f.twice.len(),
            f.out_of_order.len(),
            f.failed.len(),
            f.batch_problems.len()
        )?;
        writeln!(
            out,
            "  poison records: {} injected, {} not dead-lettered with a reason; other dead letters {}",
            f.poison,
            f.poison_missing.len(),
            f.other_dead_letters.len()
        )?;
        let dead: Vec<String> = f.dead.iter().map(|(k, n)| format!("{n}× {k}")).collect();
        writeln!(
            out,
            "  webhook deliveries: {} delivered, {} dead ({}), {} problems; {} answered 2xx more than once (de-duplicated on webhook-id)",
            f.delivered,
            f.dead.values().sum::<usize>(),
            dead.join(", "),
            f.delivery_problems.len(),
            f.redelivered
        )?;
        let grace: Vec<String> =
            f.failed_in_grace.iter().map(|((fault, got), n)| format!("{n}× {got} after {fault}")).collect();
        writeln!(
            out,
            "  requests: {}; 5xx or no answer: {} inside down windows, {} within {} s after one ({}), {} outside",
            f.requests,
            f.failed_in_windows,
            f.failed_in_grace.values().sum::<usize>(),
            check::SETTLE_GRACE.as_secs(),
            grace.join(", "),
            f.failed_outside.len()
        )?;
        writeln!(
            out,
            "  creations cut off by the run's end and sent again before the checks: {}; designs created without \
             an acknowledgement (each creation is keyed): {}",
            f.settled,
            f.unacknowledged_designs.len()
        )?;
        writeln!(out, "  checked in {:.1} s", self.checked_in.as_secs_f64())?;
        for (promise, cases) in f.violations() {
            writeln!(out, "  VIOLATED: {promise} ({}):", cases.len())?;
            for case in cases.iter().take(10) {
                writeln!(out, "    {case}")?;
            }
        }
        write!(out, "  verdict: {}", if self.passed() { "PASS" } else { "FAIL" })
    }
}

/// Runs the workload and the faults for `config.duration`, then checks.
pub async fn run(config: &Config) -> anyhow::Result<Report> {
    let platform = Arc::new(Platform::start(config.mode).await?);
    let mut skipped = Vec::new();
    if platform.disk.is_none() {
        skipped.push("disk full (mounting a tmpfs needs root)");
    }
    if platform.redis.is_none() {
        skipped.push("Redis faults (redis-server is not installed)");
    }
    let receiver = Arc::new(Receiver::start().await);
    let journal = Journal::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = HashMap::new();
    let mut tenants = Vec::new();
    {
        let server = platform.server.lock().await;
        for i in 0..config.tenants {
            let name = format!("tenant-{i}");
            let client = crate::Client::new(&platform.url, &server.token(&name));
            clients.insert(name.clone(), client.clone());
            tenants.push(Arc::new(Tenant { name, client, journal: journal.clone(), stop: stop.clone() }));
        }
    }
    for t in &tenants {
        t.register(&receiver.url(&t.name), true, 0).await;
    }

    let mut rng = Rng::new(config.seed);
    let started = Instant::now();
    let until = started + config.duration;
    let design = crate::compact_blink_design("chaos");
    let mut work = tokio::task::JoinSet::new();
    for (i, t) in tenants.iter().enumerate() {
        work.spawn(t.clone().edit(rng.fork(), design.clone()));
        if i % 3 == 0 {
            work.spawn(t.clone().batches(rng.fork(), design.clone()));
        }
        if i % 2 == 1 {
            let (t, url, mut r) = (t.clone(), receiver.url(&t.name), rng.fork());
            let later = r.range(1_000, config.duration.as_millis() as u64 / 2 + 1_001);
            work.spawn(async move {
                if nap(later, &t.stop).await {
                    t.register(&url, false, 1).await;
                }
            });
        }
    }
    let mut faults = tokio::task::JoinSet::new();
    {
        let (p, j, r) = (platform.clone(), journal.clone(), rng.fork());
        faults.spawn(async move { faults::kills(&p, &j, r, until).await });
        let (p, j, r) = (platform.clone(), journal.clone(), rng.fork());
        faults.spawn(async move { faults::dependencies(&p, &j, r, until).await });
        let (rc, j, r) = (receiver.clone(), journal.clone(), rng.fork());
        faults.spawn(async move { faults::receiver(&rc, &j, r, until).await });
    }
    while Instant::now() < until {
        tokio::time::sleep((until - Instant::now()).min(Duration::from_secs(10))).await;
        let e = journal.0.lock().unwrap();
        let acked: usize = e.designs.values().map(|p| p.acknowledged.len()).sum();
        eprintln!(
            "chaos: {:>4.0} s · {} requests · {acked} revisions and {} batches acknowledged · {} faults",
            started.elapsed().as_secs_f64(),
            e.requests.len(),
            e.batches.len(),
            e.faults.values().sum::<usize>()
        );
    }
    stop.store(true, Ordering::SeqCst);
    while let Some(done) = faults.join_next().await {
        done?;
    }
    while let Some(done) = work.join_next().await {
        done?;
    }
    let end = Instant::now();
    eprintln!("chaos: faults over after {:.0} s; checking", started.elapsed().as_secs_f64());

    let down = journal.down_time(end);
    let mut entries = std::mem::take(&mut *journal.0.lock().unwrap());
    let mut findings = Findings::default();
    check::settle_cut_offs(&mut findings, &mut entries, &clients).await;
    check::availability(&mut findings, &entries, end);
    check::designs(&mut findings, &entries, &clients, SETTLE).await;
    check::batches(&mut findings, &entries, &clients, SETTLE).await;
    check::unacknowledged(&mut findings, &entries, &clients).await;
    check::deliveries(&mut findings, &entries, &clients, &receiver, SETTLE).await;
    let letters = dead_letters(&platform, entries.poison.len()).await?;
    check::dead_letters(&mut findings, &entries, &letters);
    Ok(Report {
        config: config.clone(),
        findings,
        faults: entries.faults.clone(),
        down,
        windows: entries.windows.len(),
        skipped,
        checked_in: end.elapsed(),
    })
}

/// Every record of the dead-letter topic, once at least `expected` are there (or a minute
/// passed). The embedded log's files belong to `openqq up`: it is read while the process is
/// stopped, which is started again while records are still on their way.
async fn dead_letters(p: &Platform, expected: usize) -> anyhow::Result<Vec<LogRecord>> {
    let topic = p.topics.dead_letter();
    let deadline = Instant::now() + Duration::from_secs(60);
    let kafka = match &p.broker {
        Some(b) => {
            let mut settings = KafkaSettings::new(b.lock().unwrap().brokers(), vec![]);
            settings.create_topics = false;
            Some(KafkaEventLog::connect(settings).await?)
        }
        None => None,
    };
    loop {
        let mut server = p.server.lock().await;
        let all = match &kafka {
            Some(log) => read_all(log, &topic).await?,
            None => {
                server.terminate()?;
                tokio::task::block_in_place(|| {
                    p.on_embedded_log(|log| {
                        let topic = &topic;
                        async move { read_all(&log, topic).await }
                    })
                })?
            }
        };
        if all.len() >= expected || Instant::now() > deadline {
            return Ok(all);
        }
        if kafka.is_none() {
            tokio::task::block_in_place(|| server.restart())?;
        }
        drop(server);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn read_all(log: &dyn LogSource, topic: &str) -> anyhow::Result<Vec<LogRecord>> {
    let mut all = Vec::new();
    for partition in 0..log.partitions(topic) {
        all.extend(log.read(topic, partition, 0, 100_000).await?);
    }
    Ok(all)
}
