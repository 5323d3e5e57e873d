//! `openqq dead-letters list|show|replay` against the log of a real `openqq up`, embedded and on
//! Kafka (librdkafka's mock cluster in the test process): a validation request whose netlist
//! object is missing is dead-lettered and fails its revision; once the object is stored,
//! replaying the dead letter brings the design to `ready` at the same revision, and replaying it
//! again changes nothing.

use openqq_adapters::kafka::rdkafka::mocking::MockCluster;
use openqq_adapters::{Durability, EmbeddedEventLog, EmbeddedObjectStore, KafkaEventLog, KafkaSettings};
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::{
    CorrelationId, DesignId, DesignSpec, Envelope, EventKind, EventLog, LogSource, ObjectStore, Record, TenantId,
    Topics,
};
use openqq_e2e::{blink_design, openqq_bin, stdout_of, Client, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

const PARTITIONS: &str = "4";

/// Runs `openqq dead-letters ARGS` on `data_dir`.
fn dead_letters(data_dir: &Path, args: &[&str]) -> Output {
    dead_letters_on(data_dir, &[], args)
}

/// Runs `openqq dead-letters ARGS PLATFORM` on `data_dir`, with more platform settings.
fn dead_letters_on(data_dir: &Path, platform: &[&str], args: &[&str]) -> Output {
    std::process::Command::new(openqq_bin())
        .arg("dead-letters")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--partitions", PARTITIONS])
        .args(platform)
        .env_remove("OPENQQ_JWT_SECRET")
        .output()
        .expect("openqq dead-letters runs")
}

/// A submission of `design_id` whose netlist is by reference to an object the store does not
/// hold (yet), and that netlist's bytes.
async fn submission_of_a_missing_netlist(tenant: &TenantId, design_id: &DesignId) -> (Record, Vec<u8>) {
    let mut design = blink_design("replayed");
    let netlist = serde_json::to_vec(&design["netlist"]).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let reference = EmbeddedObjectStore::open(scratch.path()).unwrap().put(tenant, netlist.clone()).await.unwrap();
    design.as_object_mut().unwrap().remove("netlist");
    design["netlist_ref"] = json!(reference);
    let spec: DesignSpec = serde_json::from_value(design).unwrap();
    let cause = Origin {
        tenant_id: tenant.clone(),
        design_id: design_id.clone(),
        revision: 1,
        correlation_id: CorrelationId::parse("corr-replay").unwrap(),
        batch: None,
    };
    (
        Envelope::new(EventKind::DesignSubmitted, &cause, "api", DesignSubmitted { spec, checks: None }).to_record(),
        netlist,
    )
}

/// The id `list` prints for `design`'s dead letter, once it is there.
async fn listed_id(data_dir: &Path, platform: &[&str], design: &DesignId) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = stdout_of(&dead_letters_on(data_dir, platform, &["list"]));
        if let Some(line) = listed.lines().find(|l| l.contains(design.as_str())) {
            return line.split_whitespace().next().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the dead letter never showed in the list: {listed}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The design's timeline as (kind, revision) pairs.
async fn timeline(client: &Client, design: &str) -> Vec<(String, u64)> {
    let (status, events) = client.get(&format!("/v1/designs/{design}/events")).await.unwrap();
    assert_eq!(status, 200, "{events}");
    let entries = events["events"].as_array().unwrap().iter();
    entries.map(|e| (e["kind"].as_str().unwrap().to_owned(), e["revision"].as_u64().unwrap())).collect()
}

/// Waits until the results function of `server` finished a batch (the end of a replay's chain).
async fn until_results_handled(server: &Server, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let metrics = reqwest::get(server.metrics()).await.unwrap().text().await.unwrap();
        let done =
            openqq_e2e::counter_sum(&metrics, "openqq_batches_total", &["function=\"results\"", "outcome=\"ok\""]);
        if done >= 1.0 {
            return;
        }
        assert!(Instant::now() < deadline, "the results function handled nothing within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_replayed_after_its_cause_is_fixed_brings_its_design_to_ready_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &["--partitions", PARTITIONS]).unwrap();
    server.terminate().unwrap();
    assert!(stdout_of(&dead_letters(dir.path(), &["list"])).contains("is empty"), "no dead letters yet");
    let replay_nothing = dead_letters(dir.path(), &["replay", "--all"]);
    assert!(!replay_nothing.status.success());
    assert!(String::from_utf8_lossy(&replay_nothing.stderr).contains("nothing to replay"));

    let tenant = TenantId::parse("acme").unwrap();
    let design_id = DesignId::generate();
    let (submitted, netlist) = submission_of_a_missing_netlist(&tenant, &design_id).await;
    {
        let log = EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap();
        log.publish(&Topics::default().of(EventKind::DesignSubmitted), vec![submitted]).await.unwrap();
    }
    server.restart().unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let failed = acme.wait_for(design_id.as_str(), Duration::from_secs(30), |d| d["status"] == "failed").await.unwrap();
    let reason = failed["failure_reason"].as_str().unwrap();
    assert!(reason.contains("is not in the object store"), "{reason}");
    // Dead-lettering follows the revision's failure: wait for the dead letter itself.
    let id = listed_id(dir.path(), &[], &design_id).await;
    // The embedded log has one writer: a replay waits until the platform is stopped.
    let busy = dead_letters(dir.path(), &["replay", &id]);
    assert!(!busy.status.success(), "{busy:?}");
    assert!(String::from_utf8_lossy(&busy.stderr).contains("is open in another process"), "{busy:?}");
    server.terminate().unwrap();

    let listed = stdout_of(&dead_letters(dir.path(), &["list", "--tenant", "acme", "--function", "validation"]));
    let line = listed.lines().find(|l| l.contains(design_id.as_str())).unwrap_or_else(|| panic!("{listed}"));
    for part in ["validation.requested/", " validation ", "acme", " 1 validation.requested ", "the netlist object"] {
        assert!(line.contains(part), "{part:?} in {line}");
    }
    assert_eq!(line.split_whitespace().next(), Some(id.as_str()));
    let others = stdout_of(&dead_letters(dir.path(), &["list", "--function", "results"]));
    assert!(others.contains("No dead letter matches"), "{others}");
    let bad = dead_letters(dir.path(), &["list", "--function", "api"]);
    assert!(
        !bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--function"),
        "a bad filter is refused"
    );
    let shown = stdout_of(&dead_letters(dir.path(), &["show", &id]));
    for part in ["function:      validation", "correlation-id: corr-replay", "revision:       1", reason] {
        assert!(shown.contains(part), "{part:?} in {shown}");
    }
    let misused = dead_letters(dir.path(), &["replay", &id, "--tenant", "acme"]);
    assert!(!misused.status.success() && String::from_utf8_lossy(&misused.stderr).contains("--tenant"));
    let unknown = dead_letters(dir.path(), &["replay", "3:999"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("there is no dead letter 3:999"), "{unknown:?}");

    // The cause goes away; the replay brings the revision to ready.
    EmbeddedObjectStore::open(dir.path()).unwrap().put(&tenant, netlist).await.unwrap();
    let replayed = stdout_of(&dead_letters(dir.path(), &["replay", &id]));
    assert!(replayed.contains(&format!("[1/1] replayed {id} to validation.requested")), "{replayed}");
    server.restart().unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let ready = acme.wait_for(design_id.as_str(), Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
    assert_eq!((ready["revision"].as_u64(), ready["verdict"].as_str()), (Some(1), Some("pass")), "{ready}");
    assert!(ready.get("failure_reason").is_none(), "{ready}");
    until_results_handled(&server, Duration::from_secs(30)).await;
    let entries = timeline(&acme, design_id.as_str()).await;
    for kind in ["design.submitted", "validation.started", "validation.finished", "results.ready", "design.failed"] {
        let n = entries.iter().filter(|(k, r)| k == kind && *r == 1).count();
        assert_eq!(n, 1, "{kind} once: {entries:?}");
    }
    server.terminate().unwrap();

    // A second replay: handled again, changes nothing.
    stdout_of(&dead_letters(dir.path(), &["replay", "--all", "--tenant", "acme"]));
    server.restart().unwrap();
    until_results_handled(&server, Duration::from_secs(60)).await;
    let acme = Client::new(&server.url, &server.token("acme"));
    let (_, again) = acme.get(&format!("/v1/designs/{design_id}")).await.unwrap();
    let unchanged = |v: &Value| (v["revision"].clone(), v["status"].clone(), v["verdict"].clone());
    assert_eq!(unchanged(&again), unchanged(&ready));
    assert_eq!(timeline(&acme, design_id.as_str()).await, entries, "no new timeline entry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kafka_a_dead_letter_is_listed_and_replayed_while_the_platform_runs() {
    let mock = MockCluster::new(1).unwrap();
    for topic in Topics::new("").all() {
        mock.create_topic(&topic, 3, 1).unwrap();
    }
    let brokers = mock.bootstrap_servers();
    let kafka = ["--kafka-brokers", brokers.as_str(), "--kafka-create-topics", "false"];
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--partitions", PARTITIONS];
    args.extend(kafka);
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    assert!(stdout_of(&dead_letters_on(dir.path(), &kafka, &["list"])).contains("is empty"));

    let tenant = TenantId::parse("acme").unwrap();
    let design_id = DesignId::generate();
    let (submitted, netlist) = submission_of_a_missing_netlist(&tenant, &design_id).await;
    let mut settings = KafkaSettings::new(brokers.clone(), vec![]);
    settings.create_topics = false;
    let log = KafkaEventLog::connect(settings).await.unwrap();
    let topics = Topics::new("");
    log.publish(&topics.of(EventKind::DesignSubmitted), vec![submitted]).await.unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    acme.wait_for(design_id.as_str(), Duration::from_secs(30), |d| d["status"] == "failed").await.unwrap();
    let id = listed_id(dir.path(), &kafka, &design_id).await;
    let shown = stdout_of(&dead_letters_on(dir.path(), &kafka, &["show", &id]));
    assert!(shown.contains("is not in the object store") && shown.contains("design_id:      "), "{shown}");

    // On Kafka the platform keeps running while the replay is published.
    EmbeddedObjectStore::open(dir.path()).unwrap().put(&tenant, netlist).await.unwrap();
    let replayed = stdout_of(&dead_letters_on(dir.path(), &kafka, &["replay", &id]));
    assert!(replayed.contains("replayed") && replayed.contains("validation.requested"), "{replayed}");
    let ready = acme.wait_for(design_id.as_str(), Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
    assert_eq!((ready["revision"].as_u64(), ready["verdict"].as_str()), (Some(1), Some("pass")), "{ready}");
    let results = || async { log.end_offsets(&topics.of(EventKind::ResultsReady)).await.unwrap().iter().sum::<u64>() };
    let deadline = Instant::now() + Duration::from_secs(30);
    while results().await < 1 {
        assert!(Instant::now() < deadline, "results.ready was never published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let entries = timeline(&acme, design_id.as_str()).await;

    // Replayed again: handled to the end once more (results.ready is published again), and
    // nothing changes.
    stdout_of(&dead_letters_on(dir.path(), &kafka, &["replay", &id]));
    let deadline = Instant::now() + Duration::from_secs(30);
    while results().await < 2 {
        assert!(Instant::now() < deadline, "the second replay was never handled to the end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, again) = acme.get(&format!("/v1/designs/{design_id}")).await.unwrap();
    assert_eq!((again["revision"].clone(), again["status"].clone()), (json!(1), json!("ready")));
    assert_eq!(timeline(&acme, design_id.as_str()).await, entries, "no new timeline entry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_openqq_up_on_the_same_embedded_log_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Server::start(dir.path(), "127.0.0.1:0", &["--partitions", PARTITIONS]).unwrap();
    let mut second = std::process::Command::new(openqq_bin())
        .args(["up", "--listen", "127.0.0.1:0", "--partitions", PARTITIONS, "--data-dir"])
        .arg(dir.path())
        .env_remove("OPENQQ_JWT_SECRET")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            panic!("a second openqq up on the same data dir kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success() && stderr.contains("is open in another process"), "{status}: {stderr}");
    // The lock goes with the process that held it.
    first.terminate().unwrap();
    first.restart().unwrap();
    first.terminate().unwrap();
}
