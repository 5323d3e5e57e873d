//! The event log on Kafka against the embedded log, side by side in one run, on tansu brokers
//! (SQLite storage) that the benchmark starts on loopback.
//!
//!   cargo build --release --bin openqq
//!   OPENQQ_TANSU_BIN=$(scripts/services/tansu.sh bin) \
//!     cargo run --release -p openqq-e2e --example kafka -- [RECORDS] [DESIGNS]
//!
//! 1. Produce: RECORDS (default 20,000; 0 skips this part) records of 6 KB, a compact design's
//!    size, one per `publish` as the API makes them, 64 publishers at once, into 6 partitions,
//!    on: the embedded log; Kafka with the platform's producer (idempotent, `acks=all`); Kafka
//!    with `acks=1` and no idempotence. Each twice, alternating; the better run counts.
//! 2. End to end: DESIGNS (default 2,000) compact designs through all four functions on the
//!    embedded log, on Kafka (tansu), and on librdkafka's in-memory mock cluster (the adapter's
//!    own cost, with a broker that answers at once).
//! 3. The broker's ceiling for the same record flow: a plain pipeline of rdkafka clients, no
//!    store, no validation, no HTTP, moving the platform's own records (sampled from a short
//!    platform run: the same bytes, keys and headers, so the same partitions) through the same
//!    topics layout on a fresh tansu: an idempotent `acks=all` producer with `linger.ms=5`
//!    publishes `design.submitted` with 32 publishes in flight (as the load's 32 requests); per
//!    hop a consumer group (two members, as the platform's two batches in flight) reads batches
//!    of up to 100 records (a batch goes when a 5 ms wait brings nothing more), publishes the
//!    next topic's records, waits for their acknowledgements, then commits the offsets after
//!    the batch. The platform on Kafka runs the same flow on another fresh tansu in the same
//!    run, and the ratio of the two is what to read.
//!
//! tansu is not Apache Kafka: its numbers say what this platform costs on a Kafka-protocol
//! broker on this machine, not what MSK does.

use openqq_adapters::embedded::{Durability, EmbeddedEventLog};
use openqq_adapters::kafka::rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use openqq_adapters::kafka::rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use openqq_adapters::kafka::rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use openqq_adapters::kafka::rdkafka::{ClientConfig, Offset, TopicPartitionList};
use openqq_adapters::{conformance, KafkaEventLog, KafkaSettings};
use openqq_core::{EventKind, EventLog, Record, Topics};
use openqq_e2e::compact_blink_design;
use openqq_e2e::tansu::Tansu;
use openqq_e2e::throughput::{run, EVENTS_PER_DESIGN};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PUBLISHERS: usize = 64;
const RECORD_BYTES: usize = 6 * 1024;
const PARTITIONS: u32 = 6;
/// The load of part 2: tenants and requests in flight.
const TENANTS: usize = 20;
const IN_FLIGHT: usize = 32;
/// The platform's consumer defaults (`openqq up`): batch size, linger, batches in flight.
const BATCH: usize = 100;
const LINGER: Duration = Duration::from_millis(5);
const MEMBERS: usize = 2;

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

/// Part 1: single-record publishes on the embedded log and on Kafka, both producer settings.
async fn produce_part(records: usize) {
    let broker = Tansu::start();
    let brokers = broker.brokers();
    println!("tansu at {brokers}");
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
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> =
        std::env::args().skip(1).take(2).map(|a| a.parse().expect("numbers: RECORDS DESIGNS")).collect();
    let records = args.first().copied().unwrap_or(20_000);
    let designs = args.get(1).copied().unwrap_or(2_000);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!("{cores} cores shared by the broker, the runner and the load");
    if records > 0 {
        produce_part(records).await;
    }

    println!("\n2. end to end: {designs} compact designs ({} events), {TENANTS} tenants, {IN_FLIGHT} requests in flight; each Kafka run on a fresh tansu", designs * EVENTS_PER_DESIGN);
    let design = compact_blink_design("bench");
    let partitions = PARTITIONS.to_string();
    // The platform's records, one per tenant and topic, for the baseline to move.
    let samples = {
        let broker = Tansu::start();
        sample_records(&broker.brokers(), &design).await
    };
    let events = (designs * EVENTS_PER_DESIGN) as f64;
    let row = |label: &str, secs: f64| println!("{:<40} {:>9.2}s {:>10.0} events/s", label, secs, events / secs);

    eprintln!("running: embedded log");
    let embedded = run(designs, TENANTS, IN_FLIGHT, &design, &["--partitions", &partitions]).await.total.as_secs_f64();
    row("platform, embedded log", embedded);

    // tansu slows down as its SQLite file grows: a fresh broker for each Kafka run.
    eprintln!("running: plain rdkafka pipeline on tansu");
    let ceiling = {
        let broker = Tansu::start();
        baseline(&broker.brokers(), designs, &samples).await.as_secs_f64()
    };
    row("baseline: plain rdkafka pipeline, tansu", ceiling);

    eprintln!("running: kafka log on tansu");
    let kafka = {
        let broker = Tansu::start();
        let brokers = broker.brokers();
        let extra = ["--partitions", &partitions, "--kafka-brokers", &brokers, "--topic-prefix", "bench-e2e."];
        run(designs, TENANTS, IN_FLIGHT, &design, &extra).await.total.as_secs_f64()
    };
    row("platform, kafka log on tansu", kafka);

    // The same flow on librdkafka's in-process mock cluster, which stores in memory: what the
    // adapter costs with a broker that answers at once, against what tansu adds.
    eprintln!("running: kafka log on the mock cluster");
    let mock = MockCluster::new(1).unwrap();
    for topic in Topics::new("").all() {
        mock.create_topic(&topic, PARTITIONS as i32, 1).unwrap();
    }
    let mock_brokers = mock.bootstrap_servers();
    let extra = ["--partitions", &partitions, "--kafka-brokers", &mock_brokers, "--kafka-create-topics", "false"];
    let on_mock = run(designs, TENANTS, IN_FLIGHT, &design, &extra).await.total.as_secs_f64();
    row("platform, kafka log on the mock cluster", on_mock);

    println!(
        "events/s ratios: platform on tansu / baseline on tansu {:.2}×; platform on tansu / embedded {:.2}×, on the mock / embedded {:.2}×",
        ceiling / kafka,
        embedded / kafka,
        embedded / on_mock
    );
}

/// A record the platform wrote, to be written again by the baseline.
struct Sample {
    value: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
}

/// One record per (topic kind, tenant) as the platform writes them: one design per tenant
/// through a platform on the broker at `brokers`, then every record of its topics read back.
async fn sample_records(brokers: &str, design: &serde_json::Value) -> HashMap<(EventKind, String), Sample> {
    let prefix = "sample.";
    let partitions = PARTITIONS.to_string();
    let extra = ["--partitions", &partitions, "--kafka-brokers", brokers, "--topic-prefix", prefix];
    run(TENANTS, TENANTS, IN_FLIGHT, design, &extra).await;
    let topics = Topics::new(prefix);
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "bench-sampler")
        .set("enable.auto.commit", "false")
        .create()
        .expect("a sampling consumer");
    let mut samples = HashMap::new();
    tokio::task::block_in_place(|| {
        for kind in NETLIST_PATH {
            let topic = topics.of(kind);
            // The run ends once the last record is applied, which may be before its own
            // publishes (results.ready) are: wait until every tenant's are in.
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut tpl = TopicPartitionList::new();
            let mut left = loop {
                let ends = (0..PARTITIONS as i32)
                    .map(|p| reader.fetch_watermarks(&topic, p, Duration::from_secs(10)).expect("watermarks").1.max(0));
                let total: i64 = ends.sum();
                if total >= TENANTS as i64 {
                    break total;
                }
                assert!(Instant::now() < deadline, "the sampling run did not write {topic} for every tenant");
                std::thread::sleep(Duration::from_millis(50));
            };
            for p in 0..PARTITIONS as i32 {
                tpl.add_partition_offset(&topic, p, Offset::Beginning).unwrap();
            }
            reader.assign(&tpl).expect("assigning the sampled topic");
            let deadline = Instant::now() + Duration::from_secs(30);
            while left > 0 {
                assert!(Instant::now() < deadline, "the sampled records of {topic} did not all arrive");
                let Some(m) = reader.poll(Duration::from_millis(100)) else { continue };
                let m = m.expect("reading a sampled record");
                left -= 1;
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                let headers = m
                    .headers()
                    .map(|h| h.iter().map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec())).collect())
                    .unwrap_or_default();
                samples
                    .entry((kind, key))
                    .or_insert(Sample { value: m.payload().unwrap_or_default().to_vec(), headers });
            }
        }
    });
    for kind in NETLIST_PATH {
        let sizes: Vec<usize> = samples.iter().filter(|((k, _), _)| *k == kind).map(|(_, s)| s.value.len()).collect();
        assert_eq!(sizes.len(), TENANTS, "one {kind} record per tenant");
        println!("  {kind}: {} bytes a record (mean)", sizes.iter().sum::<usize>() / sizes.len());
    }
    samples
}

/// The tenant (record key) of the i-th design, as the load picks it.
fn tenant(i: usize) -> String {
    format!("bench-{}", i % TENANTS)
}

fn sampled_record<'a>(topic: &'a str, key: &'a str, sample: &'a Sample) -> FutureRecord<'a, str, [u8]> {
    let mut headers = OwnedHeaders::new_with_capacity(sample.headers.len());
    for (k, v) in &sample.headers {
        headers = headers.insert(Header { key: k, value: Some(v) });
    }
    FutureRecord::to(topic).key(key).payload(&sample.value[..]).headers(headers)
}

async fn acknowledged(pending: Vec<DeliveryFuture>) {
    for f in pending {
        f.await.expect("the producer kept the delivery").map_err(|(e, _)| e).expect("the broker took the record");
    }
}

/// One consumer hop of the baseline: the function that consumes `from` and publishes `to`.
struct Hop {
    group: &'static str,
    from: EventKind,
    to: &'static [EventKind],
}

const HOPS: [Hop; 3] = [
    Hop { group: "design-job", from: EventKind::DesignSubmitted, to: &[EventKind::ValidationRequested] },
    Hop {
        group: "validation",
        from: EventKind::ValidationRequested,
        to: &[EventKind::ValidationStarted, EventKind::ValidationFinished],
    },
    Hop { group: "results", from: EventKind::ValidationFinished, to: &[EventKind::ResultsReady] },
];

/// The broker's ceiling for the platform's record flow: the same records through the same
/// topics by plain rdkafka clients (see the module's part 3). Returns the time from the first
/// `design.submitted` until the results hop has read the last `validation.finished`.
async fn baseline(brokers: &str, designs: usize, samples: &HashMap<(EventKind, String), Sample>) -> Duration {
    let topics = Topics::new("baseline.");
    // The topics as the platform creates them (through its adapter, so with the same layout).
    let mut settings = KafkaSettings::new(brokers, topics.all());
    settings.partitions = PARTITIONS;
    drop(KafkaEventLog::connect(settings).await.expect("creating the baseline's topics"));
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("partitioner", "murmur2_random")
        .create()
        .expect("the baseline's producer");
    let samples: Arc<HashMap<(EventKind, String), Sample>> = Arc::new(
        samples
            .iter()
            .map(|(k, s)| (k.clone(), Sample { value: s.value.clone(), headers: s.headers.clone() }))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let results = Arc::new(std::sync::Mutex::new(HashSet::new()));
    let (all_read_tx, all_read) = tokio::sync::oneshot::channel::<Instant>();
    let all_read_tx = Arc::new(std::sync::Mutex::new(Some(all_read_tx)));
    let mut members = Vec::new();
    let mut threads = Vec::new();
    for hop in &HOPS {
        for _ in 0..MEMBERS {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", brokers)
                .set("group.id", format!("baseline.{}", hop.group))
                .set("enable.auto.commit", "false")
                .set("enable.auto.offset.store", "false")
                .set("auto.offset.reset", "earliest")
                .set("fetch.wait.max.ms", "100")
                .create()
                .expect("a baseline consumer");
            consumer.subscribe(&[&topics.of(hop.from)]).expect("subscribing");
            let consumer = Arc::new(consumer);
            members.push(consumer.clone());
            let (producer, samples, stop, topics) = (producer.clone(), samples.clone(), stop.clone(), topics.clone());
            let (results, all_read_tx) = (results.clone(), all_read_tx.clone());
            let last = hop.from == EventKind::ValidationFinished;
            let (from, to) = (topics.of(hop.from), hop.to);
            let runtime = tokio::runtime::Handle::current();
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // A batch: what arrives until a wait of LINGER brings nothing more.
                    let mut batch: Vec<(i32, i64, String)> = Vec::new();
                    let mut wait = Duration::from_millis(100);
                    while batch.len() < BATCH {
                        let Some(m) = consumer.poll(wait) else { break };
                        let m = m.expect("reading a batch");
                        batch.push((
                            m.partition(),
                            m.offset(),
                            String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                        ));
                        wait = LINGER;
                    }
                    if batch.is_empty() {
                        continue;
                    }
                    let mut pending = Vec::new();
                    for (_, _, key) in &batch {
                        for kind in to {
                            let topic = topics.of(*kind);
                            let sample = &samples[&(*kind, key.clone())];
                            pending.push(
                                producer
                                    .send_result(sampled_record(&topic, key, sample))
                                    .map_err(|(e, _)| e)
                                    .expect("enqueueing"),
                            );
                        }
                    }
                    runtime.block_on(acknowledged(pending));
                    // Offsets after the batch, once its records are acknowledged.
                    let mut next: HashMap<i32, i64> = HashMap::new();
                    for (p, offset, _) in &batch {
                        let n = next.entry(*p).or_default();
                        *n = (*n).max(offset + 1);
                    }
                    let mut tpl = TopicPartitionList::new();
                    for (p, n) in next {
                        tpl.add_partition_offset(&from, p, Offset::Offset(n)).unwrap();
                    }
                    consumer.commit(&tpl, CommitMode::Async).expect("committing");
                    if last {
                        let mut seen = results.lock().unwrap();
                        seen.extend(batch.iter().map(|(p, o, _)| (*p, *o)));
                        if seen.len() >= designs {
                            if let Some(tx) = all_read_tx.lock().unwrap().take() {
                                let _ = tx.send(Instant::now());
                            }
                        }
                    }
                }
            }));
        }
    }
    // Every hop's group has divided its partitions before the clock starts.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held: usize = members.iter().map(|m| m.assignment().map(|a| a.count()).unwrap_or(0)).sum();
        if held == HOPS.len() * PARTITIONS as usize {
            break;
        }
        assert!(Instant::now() < deadline, "the baseline's consumer groups did not assign every partition");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let publishers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (producer, samples, next, topic) =
                (producer.clone(), samples.clone(), next.clone(), topics.of(EventKind::DesignSubmitted));
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= designs {
                        return;
                    }
                    let key = tenant(i);
                    let sample = &samples[&(EventKind::DesignSubmitted, key.clone())];
                    let ack = producer
                        .send_result(sampled_record(&topic, &key, sample))
                        .map_err(|(e, _)| e)
                        .expect("enqueueing");
                    acknowledged(vec![ack]).await;
                }
            })
        })
        .collect();
    for p in publishers {
        p.await.unwrap();
    }
    let done = tokio::time::timeout(Duration::from_secs(600), all_read)
        .await
        .expect("the baseline did not drain in 10 minutes")
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    tokio::task::block_in_place(|| {
        for t in threads {
            t.join().unwrap();
        }
    });
    done - started
}

/// The topics a design given as a netlist crosses (synthesis.requested and generation.requested
/// carry only designs given as source or written by a model).
const NETLIST_PATH: [EventKind; 5] = [
    EventKind::DesignSubmitted,
    EventKind::ValidationRequested,
    EventKind::ValidationStarted,
    EventKind::ValidationFinished,
    EventKind::ResultsReady,
];
