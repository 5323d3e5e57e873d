//! The event log on Kafka against the embedded log, side by side in one run, on a tansu broker
//! (SQLite storage) that the benchmark starts on loopback.
//!
//!   cargo build --release --bin openqq
//!   OPENQQ_TANSU_BIN=$(scripts/services/tansu.sh bin) \
//!     cargo run --release -p openqq-e2e --example kafka -- [RECORDS] [DESIGNS]
//!
//! 1. Produce: RECORDS (default 20,000) records of 6 KB, a compact design's size, one per
//!    `publish` as the API makes them, 64 publishers at once, into 6 partitions, on: the
//!    embedded log; Kafka with the platform's producer (idempotent, `acks=all`); Kafka with
//!    `acks=1` and no idempotence. Each twice, alternating; the better run counts.
//! 2. End to end: DESIGNS (default 2,000) compact designs through all four functions on the
//!    embedded log, on Kafka (tansu), and on librdkafka's in-memory mock cluster (the adapter's
//!    own cost, with a broker that answers at once).
//!
//! tansu is not Apache Kafka: its numbers say what this platform costs on a Kafka-protocol
//! broker on this machine, not what MSK does.

use openqq_adapters::embedded::{Durability, EmbeddedEventLog};
use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use openqq_adapters::{conformance, KafkaEventLog, KafkaSettings};
use openqq_core::{EventLog, Record, Topics};
use openqq_e2e::compact_blink_design;
use openqq_e2e::tansu::Tansu;
use openqq_e2e::throughput::{run, EVENTS_PER_DESIGN};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PUBLISHERS: usize = 64;
const RECORD_BYTES: usize = 6 * 1024;
const PARTITIONS: u32 = 6;

struct Produced {
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
}

/// `records` single-record publishes from [`PUBLISHERS`] tasks, each record keyed by one of
/// 100 tenants.
async fn produce(log: Arc<dyn EventLog>, topic: &str, records: usize) -> Produced {
    let next = Arc::new(AtomicUsize::new(0));
    let value = vec![b'x'; RECORD_BYTES];
    let started = Instant::now();
    let tasks: Vec<_> = (0..PUBLISHERS)
        .map(|_| {
            let (log, next, topic, value) = (log.clone(), next.clone(), topic.to_owned(), value.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= records {
                        return latencies;
                    }
                    let record = Record {
                        key: format!("tenant-{}", i % 100),
                        value: value.clone(),
                        headers: vec![("event-id".into(), i.to_string().into_bytes())],
                    };
                    let t = Instant::now();
                    log.publish(&topic, vec![record]).await.expect("publish");
                    latencies.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(records);
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Produced { elapsed, p50: at(0.5), p99: at(0.99) }
}

async fn kafka_log(brokers: &str, topic: &str, overrides: &[(&str, &str)]) -> Arc<dyn EventLog> {
    let mut s = KafkaSettings::new(brokers, vec![topic.to_owned()]);
    s.partitions = PARTITIONS;
    s.producer_overrides = overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Arc::new(KafkaEventLog::connect(s).await.expect("connecting to tansu"))
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> =
        std::env::args().skip(1).take(2).map(|a| a.parse().expect("numbers: RECORDS DESIGNS")).collect();
    let records = args.first().copied().unwrap_or(20_000);
    let designs = args.get(1).copied().unwrap_or(2_000);
    let broker = Tansu::start();
    let brokers = broker.brokers();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!("tansu at {brokers}; {cores} cores shared by the broker, the runner and the load");

    println!("\n1. produce: {records} records of {RECORD_BYTES} bytes, one per publish, {PUBLISHERS} publishers, {PARTITIONS} partitions");
    println!("{:<34} {:>9} {:>11} {:>9} {:>9}", "log", "seconds", "records/s", "p50 ms", "p99 ms");
    let variants: [(&str, &[(&str, &str)]); 3] = [
        ("embedded (SQLite)", &[]),
        ("kafka, idempotent, acks=all", &[]),
        ("kafka, acks=1, not idempotent", &[("enable.idempotence", "false"), ("acks", "1")]),
    ];
    let mut best = [f64::INFINITY; 3];
    for round in 0..2 {
        for (i, (label, overrides)) in variants.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let topic = conformance::unique("bench");
            let log: Arc<dyn EventLog> = if i == 0 {
                Arc::new(EmbeddedEventLog::open(dir.path(), PARTITIONS, Durability::Process).unwrap())
            } else {
                kafka_log(&brokers, &topic, overrides).await
            };
            let r = produce(log, &topic, records).await;
            let secs = r.elapsed.as_secs_f64();
            best[i] = best[i].min(secs);
            println!(
                "{:<34} {:>9.2} {:>11.0} {:>9.1} {:>9.1}   (round {})",
                label,
                secs,
                records as f64 / secs,
                r.p50.as_secs_f64() * 1e3,
                r.p99.as_secs_f64() * 1e3,
                round + 1
            );
        }
    }
    println!(
        "records/s ratios (best runs): kafka acks=all / embedded {:.2}×, acks=all / acks=1 {:.2}×",
        best[0] / best[1],
        best[2] / best[1]
    );

    // A fresh broker: tansu slows down as its SQLite file grows, and part 1 wrote ~0.5 GB.
    drop(broker);
    let broker = Tansu::start();
    let brokers = broker.brokers();
    println!("\n2. end to end: {designs} compact designs ({} events), on a fresh tansu", designs * EVENTS_PER_DESIGN);
    let design = compact_blink_design("bench");
    let partitions = PARTITIONS.to_string();
    // The same flow on librdkafka's in-process mock cluster, which stores in memory: what the
    // adapter costs with a broker that answers at once, against what tansu adds.
    let mock = MockCluster::new(1).unwrap();
    for topic in Topics::new("").all() {
        mock.create_topic(&topic, PARTITIONS as i32, 1).unwrap();
    }
    let mock_brokers = mock.bootstrap_servers();
    let mut totals = Vec::new();
    for (label, extra) in [
        ("embedded log", vec!["--partitions", &partitions]),
        (
            "kafka log on tansu",
            vec!["--partitions", &partitions, "--kafka-brokers", &brokers, "--topic-prefix", "bench-e2e."],
        ),
        (
            "kafka log on the mock cluster",
            vec!["--partitions", &partitions, "--kafka-brokers", &mock_brokers, "--kafka-create-topics", "false"],
        ),
    ] {
        eprintln!("running: {label}");
        let r = run(designs, 20, 32, &design, &extra).await;
        let secs = r.total.as_secs_f64();
        println!("{:<34} {:>9.2}s {:>10.0} events/s", label, secs, (designs * EVENTS_PER_DESIGN) as f64 / secs);
        totals.push(secs);
    }
    println!(
        "events/s ratios: kafka on tansu / embedded {:.2}×, kafka on the mock / embedded {:.2}×",
        totals[0] / totals[1],
        totals[0] / totals[2]
    );
}
