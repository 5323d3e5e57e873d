//! The event-log conformance suite against `KafkaEventLog`, on librdkafka's in-process mock
//! cluster (real Kafka protocol over loopback TCP). Topics are auto-created by the mock with its
//! default of 4 partitions.
#![cfg(feature = "kafka")]

use openqq_adapters::conformance;
use openqq_adapters::{KafkaEventLog, KafkaSettings};
use openqq_core::partition::partition_for;
use openqq_core::{EventLog, LogSource, Record};
use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use std::time::Duration;

fn settings(brokers: String, topics: Vec<String>) -> KafkaSettings {
    let mut s = KafkaSettings::new(brokers, topics);
    // The mock cluster does not implement CreateTopics; it auto-creates topics on first use.
    s.create_topics = false;
    s.timeout = Duration::from_secs(10);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kafka_log_passes_the_event_log_conformance_suite() {
    let mock = MockCluster::new(3).unwrap();
    let log = KafkaEventLog::connect(settings(mock.bootstrap_servers(), vec![])).await.unwrap();
    conformance::log::run(&log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_puts_a_tenant_on_the_partition_the_embedded_log_computes() {
    let mock = MockCluster::new(1).unwrap();
    let topic = conformance::unique("partitioner");
    mock.create_topic(&topic, 12, 1).unwrap();
    let log = KafkaEventLog::connect(settings(mock.bootstrap_servers(), vec![topic.clone()])).await.unwrap();
    assert_eq!(log.partitions(&topic), 12, "the partition count comes from metadata");
    let tenants: Vec<String> = (0..40).map(|i| format!("tenant-{i}")).collect();
    let records = tenants.iter().map(|t| Record { key: t.clone(), value: t.clone().into_bytes(), headers: vec![] }).collect();
    log.publish(&topic, records).await.unwrap();
    let mut seen = 0;
    for p in 0..12 {
        for r in log.read(&topic, p, 0, 100).await.unwrap() {
            assert_eq!(r.partition, partition_for(&r.key, 12), "{} is on partition {p}, as murmur2 computes", r.key);
            seen += 1;
        }
    }
    assert_eq!(seen, 40);
    let used: std::collections::HashSet<u32> = tenants.iter().map(|t| partition_for(t, 12)).collect();
    assert!(used.len() > 6, "the tenants spread over the partitions, so the check means something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_brokers_fail_at_start_with_a_clear_message() {
    let mut s = settings("127.0.0.1:1".into(), vec!["openqq-t".into()]);
    s.timeout = Duration::from_secs(1);
    let err = KafkaEventLog::connect(s).await.err().expect("connecting fails");
    assert!(err.is_retriable(), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}
