//! The event-log conformance suite against `KafkaEventLog`, on librdkafka's in-process mock
//! cluster (real Kafka protocol over loopback TCP). Topics are auto-created by the mock with its
//! default of 4 partitions.
#![cfg(feature = "kafka")]

use openqq_adapters::conformance::{self, log};
use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use openqq_adapters::{KafkaEventLog, KafkaSettings};
use std::time::Duration;

fn settings(brokers: String, topics: Vec<String>) -> KafkaSettings {
    let mut s = KafkaSettings::new(brokers, topics);
    // The mock cluster does not implement CreateTopics; it auto-creates topics on first use.
    s.create_topics = false;
    s.timeout = Duration::from_secs(10);
    s
}

/// The whole suite, murmur2 placement included: the producer puts a tenant on the partition
/// the embedded log computes, on a 12-partition topic made on the cluster beforehand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kafka_log_passes_the_event_log_conformance_suite() {
    let mock = MockCluster::new(3).unwrap();
    let topic = conformance::unique("partitioner");
    mock.create_topic(&topic, 12, 1).unwrap();
    let log = KafkaEventLog::connect(settings(mock.bootstrap_servers(), vec![topic.clone()])).await.unwrap();
    let placement_topic = Some(log::PlacementTopic { topic, partitions: 12 });
    log::run(&log, &log::Capabilities { placement_topic }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_brokers_fail_at_start_with_a_clear_message() {
    let mut s = settings("127.0.0.1:1".into(), vec!["openqq-t".into()]);
    s.timeout = Duration::from_secs(1);
    let err = KafkaEventLog::connect(s).await.err().expect("connecting fails");
    assert!(err.is_retriable(), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}
