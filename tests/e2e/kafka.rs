//! The same design lifecycle with the event log on Kafka: the test process runs librdkafka's
//! mock cluster (real Kafka protocol on loopback TCP) and `openqq up --kafka-brokers` connects to
//! it, so every event between the four functions crosses the Kafka protocol.

use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use openqq_adapters::{KafkaEventLog, KafkaSettings};
use openqq_core::{EventKind, LogSource, Topics};
use openqq_e2e::{blink_design, Client, Server};
use serde_json::json;
use std::time::Duration;

const PARTITIONS: i32 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_log_on_kafka_a_submitted_design_reaches_ready_with_a_four_kind_timeline_under_one_correlation_id() {
    let mock = MockCluster::new(1).unwrap();
    // The mock cluster has no CreateTopics API: the topics are made here and `openqq up` is told
    // not to create them, as on MSK.
    for topic in Topics::new("").all() {
        mock.create_topic(&topic, PARTITIONS, 1).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let brokers = mock.bootstrap_servers();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--kafka-brokers", &brokers, "--kafka-create-topics", "false"]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let resp = acme
        .http
        .post(format!("{}/v1/designs", server.url))
        .bearer_auth(&acme.token)
        .header("x-correlation-id", "e2e-kafka-1")
        .json(&blink_design("blink"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let accepted: serde_json::Value = resp.json().await.unwrap();
    let id = accepted["design_id"].as_str().unwrap().to_owned();

    let design = acme.wait_for(&id, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();
    assert_eq!((design["revision"].clone(), design["verdict"].clone()), (json!(1), json!("pass")));

    let (_, events) = acme.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let events = events["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    assert!(events.iter().all(|e| e["correlation_id"] == "e2e-kafka-1" && e["revision"] == 1), "{events:?}");

    // Every event crossed Kafka: each of the five topics holds this design's record, and
    // nothing was dead-lettered.
    let mut settings = KafkaSettings::new(brokers, vec![]);
    settings.create_topics = false;
    let log = KafkaEventLog::connect(settings).await.unwrap();
    let topics = Topics::new("");
    for kind in EventKind::ALL {
        let ends = log.end_offsets(&topics.of(kind)).await.unwrap();
        assert_eq!(ends.iter().sum::<u64>(), 1, "one {} record on Kafka", kind.as_str());
    }
    assert_eq!(log.end_offsets(&topics.dead_letter()).await.unwrap().iter().sum::<u64>(), 0, "nothing dead-lettered");
}

#[test]
fn a_bad_kafka_setting_stops_openqq_up_at_start_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(openqq_e2e::openqq_bin())
        .args(["up", "--listen", "127.0.0.1:0", "--kafka-brokers", "no-port-here", "--data-dir"])
        .arg(dir.path())
        .env_remove("OPENQQ_JWT_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"no-port-here\" is not HOST:PORT"), "{stderr}");
}
