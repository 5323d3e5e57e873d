//! The same design lifecycle with the event log on Kafka: the test process runs librdkafka's
//! mock cluster (real Kafka protocol on loopback TCP) and `openqq up --kafka-brokers` connects to
//! it, so every event between the four functions crosses the Kafka protocol. The mock lives in
//! the test process, so it keeps its records and group offsets while `openqq up` is SIGKILLed and
//! restarted, and its fault injection (request errors, broker down, round-trip delay) reaches
//! the runner's producer and consumers through the wire.

use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use openqq_adapters::kafka::rdkafka::producer::DefaultProducerContext;
use openqq_adapters::kafka::rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use openqq_adapters::{KafkaEventLog, KafkaSettings};
use openqq_core::{EventKind, LogSource, Topics};
use openqq_e2e::ordering::{self, Attempt, Attempts};
use openqq_e2e::{blink_design, compact_blink_design, Client, Server};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Partitions of each topic of the mock cluster: as many as the ordering scenarios spread their
/// editors over, one editor a partition (the mock keeps 5 MB a partition).
const PARTITIONS: i32 = ordering::SPREAD_OVER as i32;

/// A one-broker mock cluster holding the platform's topics. The mock has no CreateTopics API:
/// the topics are made here and `openqq up` is told not to create them, as on MSK.
fn mock_with_topics() -> MockCluster<'static, DefaultProducerContext> {
    let mock = MockCluster::new(1).unwrap();
    for topic in Topics::new("").all() {
        mock.create_topic(&topic, PARTITIONS, 1).unwrap();
    }
    mock
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_log_on_kafka_a_submitted_design_reaches_ready_with_a_four_kind_timeline_under_one_correlation_id() {
    let mock = mock_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let brokers = mock.bootstrap_servers();
    let server =
        Server::start(dir.path(), "127.0.0.1:0", &["--kafka-brokers", &brokers, "--kafka-create-topics", "false"])
            .unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let id = acme.submit_correlated(&blink_design("blink"), "e2e-kafka-1").await.unwrap();

    let design = acme.wait_for(&id, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();
    assert_eq!((design["revision"].clone(), design["verdict"].clone()), (json!(1), json!("pass")));

    let (_, events) = acme.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let events = events["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    assert!(events.iter().all(|e| e["correlation_id"] == "e2e-kafka-1" && e["revision"] == 1), "{events:?}");

    // Every event crossed Kafka: each of the five topics of a netlist's path holds this design's
    // record (none on synthesis.requested and generation.requested, for designs given as source or
    // written by a model), and nothing was dead-lettered.
    let mut settings = KafkaSettings::new(brokers, vec![]);
    settings.create_topics = false;
    let log = KafkaEventLog::connect(settings).await.unwrap();
    let topics = Topics::new("");
    for kind in EventKind::ALL {
        let ends = log.end_offsets(&topics.of(kind)).await.unwrap();
        // Nor on the batch topics: no batch was submitted.
        let batch = matches!(kind, EventKind::BatchSubmitted | EventKind::BatchItemEnded);
        let expected = u64::from(!openqq_e2e::hdl::LANES.contains(&kind) && !batch);
        assert_eq!(ends.iter().sum::<u64>(), expected, "{} records on Kafka", kind.as_str());
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

/// Bad security settings stop `openqq up` at once, before the data dir is opened or any broker
/// or AWS endpoint is contacted (none is running here), with a message naming what to change.
#[test]
fn bad_kafka_security_settings_stop_openqq_up_at_start_before_opening_anything() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let missing_ca = dir.path().join("no-such-ca.pem");
    let missing_ca = missing_ca.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--kafka-brokers", "127.0.0.1:9", "--kafka-auth", "scram-sha-512", "--kafka-sasl-username", "openqq"],
            "needs a password: set OPENQQ_KAFKA_SASL_PASSWORD",
        ),
        (
            &["--kafka-brokers", "127.0.0.1:9", "--kafka-auth", "tls", "--kafka-ca-file", missing_ca],
            "no-such-ca.pem cannot be read",
        ),
        (
            &["--kafka-brokers", "127.0.0.1:9", "--kafka-auth", "msk-iam", "--aws-region", "Ireland"],
            "\"Ireland\" is not an AWS region name",
        ),
        (&["--msk-cluster-arn", "arn:aws:kafka:eu-west-1:42:cluster/openqq"], "is not an MSK cluster ARN"),
    ];
    for (args, expected) in cases {
        let started = Instant::now();
        let out = std::process::Command::new(openqq_e2e::openqq_bin())
            .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data_dir)
            .args(args)
            .env_remove("OPENQQ_JWT_SECRET")
            .env_remove("OPENQQ_KAFKA_SASL_PASSWORD")
            .env_remove("OPENQQ_KAFKA_CA_FILE")
            .env_remove("OPENQQ_AWS_REGION")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must not start");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        // The default Kafka timeout is 30 s: a process that had tried to connect would still be
        // waiting.
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?} failed only after {:?}", started.elapsed());
        assert!(!data_dir.exists(), "{args:?}: the data dir was opened before the settings were checked");
    }
}

/// The embedded log's SIGKILL ordering scenario (`durability.rs`) with the log on Kafka: the
/// records and committed group offsets live in the mock, which survives every kill, so each
/// restart resumes from the offsets the killed runner committed and re-reads what it had not.
/// The design is the compact blink: the mock keeps only 5 MB a partition and drops the oldest
/// records beyond that, which 200 KB netlists would exceed before they are consumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kafka_every_acknowledged_revision_reaches_results_ready_once_in_order_across_sigkill_restarts() {
    let mock = mock_with_topics();
    let brokers = mock.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--kafka-brokers",
        &brokers,
        "--kafka-create-topics",
        "false",
        "--rate-limit",
        "100000/1s",
        "--batch-window",
        "20ms",
        "--batch-size",
        "7",
    ];
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    ordering::sigkill_restarts_keep_every_acknowledged_revision_in_order(
        &mut server,
        compact_blink_design("durable"),
        8,
        60,
        Duration::ZERO,
    )
    .await;
}

/// Checks the API's answers to the requests sent after a fault began and answered before it
/// ended: none may be 202 (no record could be acknowledged), each must be 503. Returns how many
/// there were.
fn assert_only_503_within(attempts: &Attempts, from: Instant, to: Instant, fault: &str) -> usize {
    let within: Vec<Attempt> =
        attempts.lock().unwrap().iter().filter(|a| a.sent > from && a.answered < to).copied().collect();
    for a in &within {
        assert_eq!(a.status, Some(503), "{fault}: a submission sent during the fault was answered {:?}", a.status);
    }
    within.len()
}

/// Keeps a fault in place until at least `n` submissions were sent and answered while it
/// lasted (at most 20 s); returns the end of the window, taken before the fault is lifted.
async fn hold_until_answered_during(attempts: &Attempts, from: Instant, n: usize) -> Instant {
    let give_up = from + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        let answered = attempts.lock().unwrap().iter().filter(|a| a.sent > from).count();
        if answered >= n || now > give_up {
            return now;
        }
    }
}

/// Faults during a burst. Tenants post client-numbered revisions (retrying until 202, sometimes
/// resending) while the mock cluster
///
/// 1. fails every Produce request (`NOT_ENOUGH_REPLICAS`, retriable) until a few submissions
///    made during the fault were answered: the producer retries until its deadline and the API
///    must answer 503, never 202, to each of them; the runner's own publishes fail too and its
///    batches are retried;
/// 2. fails some Fetch and OffsetCommit requests while every round trip takes 200 ms: reads
///    stall and commits fail, so batches are re-read;
/// 3. takes the broker down, again until a few submissions were answered: only 503s. (On the
///    mock, librdkafka did not time these publishes out after `--kafka-timeout` by itself; the
///    adapter's own deadline, `--kafka-timeout` + 1 s, does.)
///
/// After the faults clear, every acknowledged revision must reach `results.ready` exactly
/// once, in order, for every tenant (the timeline check of the SIGKILL tests).
///
/// What this cannot prove: the mock does not drop a retried batch whose acknowledgement was
/// lost (it checks producer sequence numbers only for transactional producers), so a record
/// may be in the log twice and "no duplicates in the log" is not provable here. Duplicates
/// also come from clients resending and from batches re-read after a failed commit. What makes
/// the applied effects exactly-once is the store's revision-conditional writes, and that is
/// what the timeline check verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kafka_faults_during_a_burst_get_503_and_every_acknowledged_revision_still_reaches_results_ready_once_in_order(
) {
    let mock = mock_with_topics();
    let brokers = mock.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--kafka-brokers",
        &brokers,
        "--kafka-create-topics",
        "false",
        "--kafka-timeout",
        "1s",
        // Faults last seconds; the runner must keep retrying rather than dead-letter.
        "--max-retries",
        "1000",
        "--rate-limit",
        "100000/1s",
        "--batch-window",
        "20ms",
        "--batch-size",
        "7",
    ];
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let attempts = Attempts::default();
    let clients: BTreeMap<usize, Client> = ordering::tenants_apart(6, ordering::SPREAD_OVER)
        .iter()
        .enumerate()
        .map(|(i, t)| (i, Client::new(&server.url, &server.token(t))))
        .collect();
    let tasks: Vec<_> = clients
        .iter()
        .map(|(i, c)| {
            tokio::spawn(ordering::editor(
                c.clone(),
                *i as u64 + 1,
                compact_blink_design("faults"),
                80,
                ordering::EDITOR_PAUSE_MS,
                attempts.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // 1. Every Produce request fails.
    // (The window starts once the fault is in place: a submission sent just before may be
    // acknowledged legitimately.)
    mock.request_errors(RDKafkaApiKey::Produce, &vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 100_000]);
    let from = Instant::now();
    let to = hold_until_answered_during(&attempts, from, 3).await;
    mock.clear_request_errors(RDKafkaApiKey::Produce);
    let refused = assert_only_503_within(&attempts, from, to, "produce errors");
    assert!(refused >= 3, "submissions were made while every produce failed");

    // 2. Fetches and commits fail now and then; every round trip is slow.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!tasks.iter().all(|t| t.is_finished()), "the faults land while clients are still posting");
    mock.broker_round_trip_time(-1, Duration::from_millis(200)).unwrap();
    mock.request_errors(RDKafkaApiKey::Fetch, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION; 20]);
    mock.request_errors(RDKafkaApiKey::OffsetCommit, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_COORDINATOR; 20]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    mock.broker_round_trip_time(-1, Duration::ZERO).unwrap();
    mock.clear_request_errors(RDKafkaApiKey::Fetch);
    mock.clear_request_errors(RDKafkaApiKey::OffsetCommit);

    // 3. The broker goes down.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!tasks.iter().all(|t| t.is_finished()), "the broker goes down while clients are still posting");
    mock.broker_down(-1).unwrap();
    let from = Instant::now();
    let to = hold_until_answered_during(&attempts, from, 3).await;
    mock.broker_up(-1).unwrap();
    let refused_down = assert_only_503_within(&attempts, from, to, "broker down");
    let late: Vec<(Option<Duration>, Duration, Option<u16>)> = attempts
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a.answered > from)
        .map(|a| (a.sent.checked_duration_since(from), a.answered.duration_since(from), a.status))
        .collect();
    assert!(refused_down >= 3, "submissions were made while the broker was down: {late:?}");

    let mut results = BTreeMap::new();
    for (i, t) in tasks.into_iter().enumerate() {
        results.insert(i, t.await.unwrap());
    }
    ordering::assert_every_acknowledged_revision_ready_once_in_order(&clients, &results).await;
    let a = attempts.lock().unwrap();
    eprintln!(
        "{} submissions, {} answered 503 ({refused} during produce errors, {refused_down} with the broker down)",
        a.len(),
        a.iter().filter(|a| a.status == Some(503)).count()
    );
}

/// Consumer-group rebalances during a burst: runners join (taking part of the partitions),
/// are SIGKILLed mid-stream and leave on SIGTERM, while one stays up; see
/// [`ordering::runners_joining_and_leaving_keep_every_acknowledged_revision_in_order`]. All
/// runners share one data dir, whose store file stands in for the shared table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kafka_runners_joining_and_leaving_the_groups_keep_every_acknowledged_revision_in_order() {
    let mock = mock_with_topics();
    let brokers = mock.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--kafka-brokers",
        &brokers,
        "--kafka-create-topics",
        "false",
        "--rate-limit",
        "100000/1s",
        "--batch-window",
        "20ms",
        "--batch-size",
        "7",
    ];
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    ordering::runners_joining_and_leaving_keep_every_acknowledged_revision_in_order(
        &server,
        compact_blink_design("rebalance"),
        8,
        150,
        300,
    )
    .await;
}
