//! Event-log conformance: partitioning by key, per-partition order, offsets only after commit,
//! resuming from the committed offset, wake-ups on append, and (where the test can provide an
//! empty topic of a known partition count) placement on murmur2's partition.

use super::unique;
use openqq_core::partition::partition_for;
use openqq_core::{EventLog, LogSource, Record};
use std::time::{Duration, Instant};

fn record(key: &str, n: u32) -> Record {
    Record {
        key: key.into(),
        value: format!("{key}:{n}").into_bytes(),
        headers: vec![("n".into(), n.to_be_bytes().to_vec())],
    }
}

async fn read_all<L: LogSource + ?Sized>(
    log: &L,
    topic: &str,
    partition: u32,
    from: u64,
) -> Vec<openqq_core::LogRecord> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let batch = log.read(topic, partition, next, 7).await.expect("read succeeds");
        if batch.is_empty() {
            return out;
        }
        next = batch.last().unwrap().offset + 1;
        out.extend(batch);
    }
}

/// What an event log under test offers the suite.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// A topic that holds nothing yet, with the partition count the log reports for it, for
    /// [`tenants_land_on_the_murmur2_partition`]. `None` turns that one check off: declare it
    /// wherever the test can make such a topic (the embedded log: any fresh name and the count it
    /// was opened with; Kafka: a topic created on the cluster beforehand).
    pub placement_topic: Option<PlacementTopic>,
}

/// An empty topic and its partition count.
#[derive(Debug, Clone)]
pub struct PlacementTopic {
    pub topic: String,
    pub partitions: u32,
}

/// Runs every event-log check against `log` that `capabilities` allows.
pub async fn run<L: EventLog + LogSource + ?Sized>(log: &L, capabilities: &Capabilities) {
    records_of_one_key_share_a_partition_in_publish_order(log).await;
    offsets_move_only_when_committed_and_reading_resumes_there(log).await;
    a_waiting_consumer_is_woken_by_an_append(log).await;
    if let Some(placement) = &capabilities.placement_topic {
        tenants_land_on_the_murmur2_partition(log, &placement.topic, placement.partitions).await;
    }
}

pub async fn records_of_one_key_share_a_partition_in_publish_order<L: EventLog + LogSource + ?Sized>(log: &L) {
    let topic = unique("order");
    let parts = log.partitions(&topic);
    let keys: Vec<String> = (0..5).map(|i| unique(&format!("tenant{i}"))).collect();
    for n in 0..20u32 {
        // Interleave keys, and publish some in multi-record calls.
        let batch: Vec<Record> = keys.iter().map(|k| record(k, n)).collect();
        if n % 2 == 0 {
            log.publish(&topic, batch).await.expect("publish succeeds");
        } else {
            for r in batch {
                log.publish(&topic, vec![r]).await.expect("publish succeeds");
            }
        }
    }
    for k in &keys {
        let p = partition_for(k, parts);
        let recs: Vec<_> = read_all(log, &topic, p, 0).await.into_iter().filter(|r| &r.key == k).collect();
        assert_eq!(recs.len(), 20, "every record of key {k} is in partition {p}");
        for (n, r) in recs.iter().enumerate() {
            assert_eq!(r.value, format!("{k}:{n}").into_bytes(), "records of one key keep publish order");
            assert_eq!(r.headers, vec![("n".to_owned(), (n as u32).to_be_bytes().to_vec())], "headers survive");
            assert_eq!(r.partition, p);
        }
        assert!(recs.windows(2).all(|w| w[0].offset < w[1].offset), "offsets increase");
    }
    let ends = log.end_offsets(&topic).await.unwrap();
    assert_eq!(ends.len() as u32, parts);
    assert_eq!(ends.iter().sum::<u64>(), 100, "end offsets count every record once");
}

pub async fn offsets_move_only_when_committed_and_reading_resumes_there<L: EventLog + LogSource + ?Sized>(log: &L) {
    let topic = unique("offsets");
    let group = unique("group");
    let key = unique("tenant");
    let p = partition_for(&key, log.partitions(&topic));
    log.publish(&topic, (0..10).map(|n| record(&key, n)).collect()).await.unwrap();
    assert_eq!(log.committed(&group, &topic, p).await.unwrap(), 0, "a new group starts at the beginning");
    let first = log.read(&topic, p, 0, 4).await.unwrap();
    assert_eq!(first.len(), 4);
    assert_eq!(log.committed(&group, &topic, p).await.unwrap(), 0, "reading does not commit");
    log.commit(&group, &topic, p, first.last().unwrap().offset + 1).await.unwrap();
    let from = log.committed(&group, &topic, p).await.unwrap();
    let rest = read_all(log, &topic, p, from).await;
    assert_eq!(rest.len(), 6, "reading resumes at the committed offset");
    assert_eq!(rest[0].value, format!("{key}:4").into_bytes());
    assert_eq!(log.committed(&unique("other"), &topic, p).await.unwrap(), 0, "offsets are per group");
}

pub async fn a_waiting_consumer_is_woken_by_an_append<L: EventLog + LogSource + ?Sized>(log: &L) {
    let topic = unique("wake");
    let key = unique("tenant");
    let started = Instant::now();
    let wait = log.wait_for_append(&topic, Duration::from_secs(5));
    let publish = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        log.publish(&topic, vec![record(&key, 0)]).await.unwrap();
    };
    tokio::join!(wait, publish);
    assert!(started.elapsed() < Duration::from_secs(4), "the append woke the waiter well before its timeout");
}

/// Forty tenants published to `topic` (which has `partitions` partitions and nothing else in
/// it) land exactly on [`partition_for`]'s partition: a Kafka producer's partitioner must agree
/// with the embedded log's, or a tenant would move when the log does. Checks the tenants spread.
pub async fn tenants_land_on_the_murmur2_partition<L: EventLog + LogSource + ?Sized>(
    log: &L,
    topic: &str,
    partitions: u32,
) {
    assert_eq!(log.partitions(topic), partitions, "the partition count comes from the cluster");
    let tenants: Vec<String> = (0..40).map(|i| format!("tenant-{i}")).collect();
    let records =
        tenants.iter().map(|t| Record { key: t.clone(), value: t.clone().into_bytes(), headers: vec![] }).collect();
    log.publish(topic, records).await.expect("publish succeeds");
    let mut seen = 0;
    for p in 0..partitions {
        for r in log.read(topic, p, 0, 100).await.expect("read succeeds") {
            assert_eq!(
                r.partition,
                partition_for(&r.key, partitions),
                "{} is on partition {p}, as murmur2 computes",
                r.key
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 40);
    let used: std::collections::HashSet<u32> = tenants.iter().map(|t| partition_for(t, partitions)).collect();
    assert!(
        used.len() > partitions as usize / 2,
        "the tenants spread over the partitions, so the check means something"
    );
}
