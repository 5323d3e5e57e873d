//! The design lifecycle with the design store on DynamoDB (`openqq up --dynamodb-table T
//! --dynamodb-endpoint URL`), and with the objects in S3 too (`--s3-bucket B --s3-endpoint URL`),
//! against a local server that speaks both wire protocols (moto, started by the test command; its
//! URL in `OPENQQ_TEST_DYNAMODB_ENDPOINT`). Each test uses a
//! table of its own, which start-up creates. Without the variable these tests print why and pass.
//! Bad DynamoDB settings are checked at start-up, before any server is contacted, so those tests
//! always run; the Lambda one runs the `validation` function's binary (`cargo build --workspace
//! --bins`).

use openqq_e2e::aws::endpoint;
use openqq_e2e::ordering::sigkill_restarts_keep_every_acknowledged_revision_in_order;
use openqq_e2e::{blink_design, compact_blink_design, Client, Server};
use serde_json::json;
use std::time::Duration;

/// The flags that put the store on `table` at `endpoint`, then `extra`.
fn on_dynamodb<'a>(table: &'a str, endpoint: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--dynamodb-table", table, "--dynamodb-endpoint", endpoint];
    args.extend_from_slice(extra);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_on_dynamodb_a_design_reads_at_once_reaches_ready_and_survives_a_restart() {
    let Some(endpoint) = endpoint("the DynamoDB lifecycle test") else { return };
    let table = openqq_e2e::aws::unique_name("lifecycle");
    let dir = tempfile::tempdir().unwrap();
    // A long batch window: the design is read back before any consumer has run.
    let args = on_dynamodb(&table, &endpoint, &["--batch-window", "2s"]);
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let id = acme.submit_correlated(&blink_design("blink"), "e2e-dynamo-1").await.unwrap();

    // Read-your-writes: the 202 means the store already holds it.
    let (status, design) = acme.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!(status, 200, "never 404 after a 202: {design}");
    assert_eq!(
        (&design["name"], &design["revision"], &design["status"]),
        (&json!("blink"), &json!(1), &json!("submitted"))
    );
    let (_, list) = acme.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"][0]["design_id"], json!(id), "listed at once too");

    let design = acme.wait_for(&id, Duration::from_secs(40), |d| d["status"] == "ready").await.unwrap();
    assert_eq!((design["revision"].clone(), design["verdict"].clone()), (json!(1), json!("pass")));
    let (status, report) = acme.get(&format!("/v1/designs/{id}/report")).await.unwrap();
    assert_eq!((status, &report["verdict"], &report["revision"]), (200, &json!("pass"), &json!(1)));
    let timeline = |events: serde_json::Value| -> Vec<(String, String)> {
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["kind"].as_str().unwrap().to_owned(), e["correlation_id"].as_str().unwrap().to_owned()))
            .collect()
    };
    let expected: Vec<(String, String)> =
        ["design.submitted", "validation.started", "validation.finished", "results.ready"]
            .iter()
            .map(|k| (k.to_string(), "e2e-dynamo-1".to_owned()))
            .collect();
    let (_, events) = acme.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    assert_eq!(timeline(events), expected);

    // Another tenant sees nothing of it.
    let globex = Client::new(&server.url, &server.token("globex"));
    let (status, _) = globex.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!(status, 404);

    // A restart on the same table still shows the design, its report and its timeline.
    server.terminate().unwrap();
    server.restart().unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (status, again) = acme.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!((status, &again["status"], &again["verdict"]), (200, &json!("ready"), &json!("pass")));
    let (status, _) = acme.get(&format!("/v1/designs/{id}/report")).await.unwrap();
    assert_eq!(status, 200);
    let (_, events) = acme.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    assert_eq!(timeline(events), expected, "the same timeline after the restart");

    // The design lives in the table, not in the data dir: a server on a fresh data dir and the
    // same table shows it too.
    let fresh = tempfile::tempdir().unwrap();
    let other = Server::start(fresh.path(), "127.0.0.1:0", &on_dynamodb(&table, &endpoint, &[])).unwrap();
    let acme = Client::new(&other.url, &other.token("acme"));
    let (status, elsewhere) = acme.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!((status, &elsewhere["status"]), (200, &json!("ready")), "{elsewhere}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_on_dynamodb_and_objects_in_s3_every_acknowledged_revision_reaches_results_ready_once_in_order_across_sigkill_restarts(
) {
    let Some(endpoint) = endpoint("the DynamoDB SIGKILL ordering test") else { return };
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--rate-limit", "100000/1s", "--batch-window", "20ms", "--batch-size", "7"];
    let args = openqq_e2e::aws::on_aws(&endpoint, "ordering", &extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    sigkill_restarts_keep_every_acknowledged_revision_in_order(
        &mut server,
        compact_blink_design("durable"),
        6,
        20,
        Duration::ZERO,
    )
    .await;
}

/// A bad DynamoDB setting stops `openqq up` at once with a sentence naming the setting, before
/// the data dir is opened or any endpoint is contacted.
#[test]
fn a_bad_dynamodb_setting_stops_openqq_up_at_start_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let cases: [(&[&str], &str); 4] = [
        (&["--dynamodb-table", ""], "--dynamodb-table (OPENQQ_DYNAMODB_TABLE) must be a DynamoDB table name"),
        (&["--dynamodb-table", "no spaces allowed"], "--dynamodb-table (OPENQQ_DYNAMODB_TABLE) must be"),
        (
            &["--dynamodb-table", "designs", "--dynamodb-endpoint", "not a url"],
            "--dynamodb-endpoint (OPENQQ_DYNAMODB_ENDPOINT) must be an http:// or https:// URL",
        ),
        (&["--dynamodb-endpoint", "http://127.0.0.1:9"], "which needs --dynamodb-table (OPENQQ_DYNAMODB_TABLE)"),
    ];
    for (args, needle) in cases {
        let out = std::process::Command::new(openqq_e2e::openqq_bin())
            .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data_dir)
            .args(args)
            .env_remove("OPENQQ_JWT_SECRET")
            .env_remove("OPENQQ_DYNAMODB_TABLE")
            .env_remove("OPENQQ_DYNAMODB_ENDPOINT")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!data_dir.exists(), "{args:?}: nothing is opened before the settings are checked");
    }
}

/// The functions on Lambda read the store's settings from their environment, with the same
/// checks as `openqq up`: a bad value stops the cold start naming it, an unreachable endpoint
/// stops it naming the table's setting, and good ones get past the store (outside Lambda the
/// function then stops for want of the Lambda runtime API).
#[test]
fn a_function_on_lambda_takes_the_dynamodb_settings_from_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let function = |env: &[(&str, &str)]| {
        std::process::Command::new(openqq_e2e::function_bin("validation"))
            .env("OPENQQ_DATA_DIR", dir.path().join("data"))
            .env("RUST_BACKTRACE", "0")
            .env_remove("OPENQQ_DYNAMODB_TABLE")
            .env_remove("OPENQQ_DYNAMODB_ENDPOINT")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let bad = function(&[("OPENQQ_DYNAMODB_TABLE", "x")]);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("OPENQQ_DYNAMODB_TABLE") && stderr.contains("must be a DynamoDB table name"), "{stderr}");
    assert!(!dir.path().join("data").exists(), "the data dir is untouched by a bad setting");

    // Nothing listens on port 9: the cold start fails at the store, naming its setting.
    let unreachable =
        function(&[("OPENQQ_DYNAMODB_TABLE", "designs"), ("OPENQQ_DYNAMODB_ENDPOINT", "http://127.0.0.1:9")]);
    assert!(!unreachable.status.success());
    let stderr = String::from_utf8_lossy(&unreachable.stderr);
    assert!(stderr.contains("putting the design store on the DynamoDB table designs"), "{stderr}");
    assert!(stderr.contains("OPENQQ_DYNAMODB_TABLE"), "{stderr}");

    let Some(endpoint) = endpoint("the Lambda function's DynamoDB start") else { return };
    let table = openqq_e2e::aws::unique_name("lambda");
    let out = function(&[("OPENQQ_DYNAMODB_TABLE", &table), ("OPENQQ_DYNAMODB_ENDPOINT", &endpoint)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("AWS_LAMBDA"), "with the store on DynamoDB the function starts up: {stderr}");
}

/// A function whose log, store and objects are all elsewhere (Kafka, DynamoDB, S3) builds only
/// those at its cold start: no data dir, no SQLite file, no log compactor. Each of the four
/// functions' binaries starts with the cloud settings and stops for want of the Lambda runtime
/// API (outside Lambda), after its platform is built; its data dir must not exist.
#[test]
fn a_function_on_kafka_dynamodb_and_s3_writes_no_file_at_its_cold_start() {
    let Some(endpoint) = endpoint("the cloud functions' cold starts") else { return };
    let (_broker, brokers) = openqq_e2e::tansu::shared();
    let table = openqq_e2e::aws::unique_name("cold");
    let bucket = openqq_e2e::aws::unique_name("cold");
    for function in ["api", "design-job", "validation", "results"] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let out = std::process::Command::new(openqq_e2e::function_bin(function))
            .env("OPENQQ_DATA_DIR", &data)
            .env("OPENQQ_KAFKA_BROKERS", &brokers)
            .env("OPENQQ_DYNAMODB_TABLE", &table)
            .env("OPENQQ_DYNAMODB_ENDPOINT", &endpoint)
            .env("OPENQQ_S3_BUCKET", &bucket)
            .env("OPENQQ_S3_ENDPOINT", &endpoint)
            .env("OPENQQ_JWT_SECRET", "a secret of the test, long enough to sign with")
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("AWS_LAMBDA"), "{function} got past its cold start to the runtime API: {stderr}");
        assert!(!data.exists(), "{function} made its data dir {} at its cold start: {stderr}", data.display());
    }
}

/// Throttling injected on the wire (a proxy answering DynamoDB's `ThrottlingException` to three
/// of every seven requests, in bursts that outlast the SDK's own retries) is retried by the
/// platform and never loses, duplicates or reorders a write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_dynamodb_throttling_every_acknowledged_revision_still_reaches_results_ready_once_in_order() {
    let Some(endpoint) = endpoint("the DynamoDB throttling test") else { return };
    let throttler = openqq_e2e::throttler::Throttler::start(&endpoint, 7, 3).await;
    let table = openqq_e2e::aws::unique_name("throttled");
    let dir = tempfile::tempdir().unwrap();
    // Retries without end: giving up after the last retry is another test's subject.
    let extra = ["--rate-limit", "100000/1s", "--batch-window", "20ms", "--batch-size", "7", "--max-retries", "1000"];
    // Every throttled write is logged as a warning; only errors are worth a test log here.
    let quiet = [("RUST_LOG", "error")];
    let args = on_dynamodb(&table, &throttler.url, &extra);
    let server = Server::start_with_env(dir.path(), "127.0.0.1:0", &args, &quiet).unwrap();
    throttler.throttle();
    let attempts = openqq_e2e::ordering::Attempts::default();
    let mut clients = std::collections::BTreeMap::new();
    let mut editors = Vec::new();
    for i in 0..3usize {
        let c = Client::new(&server.url, &server.token(&format!("tenant-{i}")));
        clients.insert(i, c.clone());
        let design = compact_blink_design(&format!("throttled-{i}"));
        editors.push(tokio::spawn(openqq_e2e::ordering::editor(c, i as u64 + 1, design, 8, 60, attempts.clone())));
    }
    let mut results = std::collections::BTreeMap::new();
    for (i, e) in editors.into_iter().enumerate() {
        results.insert(i, e.await.unwrap());
    }
    openqq_e2e::ordering::assert_every_acknowledged_revision_ready_once_in_order(&clients, &results).await;
    assert!(throttler.throttled() > 20 && throttler.forwarded() > 0, "{} throttled", throttler.throttled());
    let metrics = reqwest::get(server.metrics()).await.unwrap().text().await.unwrap();
    let failed = openqq_e2e::counter_sum(&metrics, "openqq_batches_total", &["outcome=\"failed\""]);
    assert!(failed > 0.0, "the throttling reached the consumers, which retried: {failed} failed batches");
}
