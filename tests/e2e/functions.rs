//! The four Lambda functions are built by the platform builder from their environment: every
//! setting of `openqq up` is a variable of the same name, a bad one stops the cold start with a
//! sentence naming it (before the data dir is touched), and good ones reach the Lambda runtime
//! (which then stops for want of the Runtime API outside Lambda).

use std::path::Path;
use std::process::{Command, Output};

/// A secret long enough for the API's keys (32 bytes at least).
const SECRET: &str = "s3cret-for-tests-s3cret-for-tests";

const FUNCTIONS: [&str; 4] = ["api", "design-job", "validation", "results"];

fn cold_start(function: &str, data_dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(openqq_e2e::function_bin(function));
    // Only what the test gives: no OPENQQ_* of the caller's shell leaks in.
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_") || k.starts_with("AWS_LAMBDA")) {
        cmd.env_remove(name);
    }
    cmd.env("OPENQQ_DATA_DIR", data_dir).env("RUST_BACKTRACE", "0").envs(env.iter().copied()).output().unwrap()
}

#[test]
fn a_bad_setting_stops_every_functions_cold_start_naming_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for function in FUNCTIONS {
        for (name, value) in [
            ("OPENQQ_BYTE_LIMIT", "lots"),
            ("OPENQQ_RATE_LIMIT", "fast"),
            ("OPENQQ_VALIDATION_BUDGET", "0s"),
            ("OPENQQ_TENANT_CONCURRENCY", "0"),
            ("OPENQQ_PARTITIONS", "0"),
        ] {
            let out = cold_start(function, &data, &[(name, value), ("OPENQQ_JWT_SECRET", SECRET)]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{function} with {name}={value} started");
            assert!(stderr.contains(name), "{function} with {name}={value}: {stderr}");
            assert!(!data.exists(), "{function} with {name}={value} touched the data dir");
        }
    }
}

#[test]
fn good_settings_bring_every_function_to_the_lambda_runtime_and_the_api_needs_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let settings = [("OPENQQ_RATE_LIMIT", "7/1s"), ("OPENQQ_BYTE_LIMIT", "16MiB/10s"), ("OPENQQ_PARTITIONS", "3")];
    for function in FUNCTIONS {
        let mut env = settings.to_vec();
        env.push(("OPENQQ_JWT_SECRET", SECRET));
        let out = cold_start(function, &data, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("AWS_LAMBDA"), "{function} reached the Lambda runtime: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(r#""Name":"openqq_build_info""#) && l.contains(r#""openqq_build_info":1"#)),
            "{function} wrote its deploy marker (a CloudWatch embedded metric) at cold start: {stdout}"
        );
        assert!(!stderr.contains(SECRET), "{function} never shows the secret: {stderr}");
    }
    let out = cold_start("api", &data, &[("OPENQQ_JWT_SECRET", "short")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("OPENQQ_JWT_SECRET: the JWT secret must be"), "{stderr}");
    let out = cold_start("api", &data, &settings);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("OPENQQ_JWT_SECRET must be set"), "{stderr}");
}

/// A Lambda Runtime API with one invocation (`event`, request id `req-1`); the function's answer
/// comes back through the channel. Later polls for work wait forever, as on an idle sandbox.
async fn runtime_api_with_one_invocation(
    event: serde_json::Value,
) -> (std::net::SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>) {
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicBool, Ordering};
    let (answers, answered) = tokio::sync::mpsc::unbounded_channel();
    let given = std::sync::Arc::new(AtomicBool::new(false));
    let next = move || {
        let (given, event) = (given.clone(), event.clone());
        async move {
            if given.swap(true, Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            let deadline =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 60_000;
            (
                [
                    ("lambda-runtime-aws-request-id", "req-1".to_owned()),
                    ("lambda-runtime-deadline-ms", deadline.to_string()),
                    (
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:f".to_owned(),
                    ),
                ],
                axum::Json(event),
            )
        }
    };
    let answer = move |kind: &'static str| {
        let answers = answers.clone();
        move |body: String| {
            let _ = answers.send(format!("{kind} {body}"));
            async { axum::http::StatusCode::ACCEPTED }
        }
    };
    let app = axum::Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(answer("response")))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(answer("error")))
        .route("/2018-06-01/runtime/init/error", post(answer("init-error")));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, answered)
}

/// Runs the Lambda binary `bin` for one invocation of `event` under a stand-in Runtime API, with
/// `env` and none of this process's `OPENQQ_*` and `AWS_*` variables: the function's answer and
/// what it printed (stdout, stderr).
async fn invoke_once(bin: &str, env: &[(&str, &str)], event: serde_json::Value) -> (String, String, String) {
    let (addr, mut answered) = runtime_api_with_one_invocation(event).await;
    let mut cmd = std::process::Command::new(openqq_e2e::function_bin(bin));
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_") || k.starts_with("AWS_")) {
        cmd.env_remove(name);
    }
    let child = cmd
        .envs(env.iter().copied())
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", bin)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let killer = child.id();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(60), answered.recv()).await;
    // The function waits for its next invocation forever: end it, then read what it wrote.
    let _ = std::process::Command::new("kill").arg(killer.to_string()).status();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let answer = answer.unwrap_or_else(|_| panic!("no answer from {bin}; stderr: {stderr}")).unwrap();
    (answer, stdout, stderr)
}

#[tokio::test]
async fn a_consumer_invocation_prints_its_metrics_as_embedded_metric_lines_and_logs_lambdas_fields() {
    let dir = tempfile::tempdir().unwrap();
    let record = openqq_core::LogRecord {
        topic: openqq_core::Topics::default().of(openqq_core::EventKind::DesignSubmitted),
        partition: 0,
        offset: 0,
        timestamp_ms: 1_796_036_400_000,
        key: "k".into(),
        value: b"not an envelope".to_vec(),
        headers: vec![],
    };
    let event = serde_json::to_value(openqq_runtime::kafka::to_event(&[record])).unwrap();
    let data_dir = dir.path().display().to_string();
    let (answer, stdout, stderr) =
        invoke_once("design-job", &[("OPENQQ_DATA_DIR", &data_dir), ("RUST_LOG", "info")], event).await;
    assert_eq!(answer, r#"response {"batchItemFailures":[]}"#, "{stderr}");

    let lines: Vec<serde_json::Value> = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let dead = lines
        .iter()
        .find(|l| l.get("openqq_dead_letters_total").is_some())
        .unwrap_or_else(|| panic!("the dead letter left as an embedded metric: {stdout}"));
    assert_eq!((&dead["function"], &dead["openqq_dead_letters_total"]), (&"design-job".into(), &1.into()));
    let directive = &dead["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], openqq_platform::lambda::METRICS_NAMESPACE);
    assert!(directive["Dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.as_array().unwrap().contains(&"function".into())));

    let logs: Vec<serde_json::Value> = stderr.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let in_invocation = logs
        .iter()
        .find(|l| l["requestId"] == "req-1")
        .unwrap_or_else(|| panic!("a log line of the invocation names its requestId: {stderr}"));
    assert!(["INFO", "WARN", "ERROR"].contains(&in_invocation["level"].as_str().unwrap()), "{in_invocation}");
    assert!(in_invocation["timestamp"].is_string() && in_invocation["message"].is_string(), "{in_invocation}");
}

#[tokio::test]
async fn an_api_request_prints_its_request_count_and_latency_as_embedded_metric_lines() {
    let dir = tempfile::tempdir().unwrap();
    let event = serde_json::json!({
        "version": "2.0", "routeKey": "GET /healthz", "rawPath": "/healthz", "rawQueryString": "",
        "headers": {"host": "api.example"},
        "requestContext": {
            "accountId": "123456789012", "apiId": "api", "domainName": "api.example", "domainPrefix": "api",
            "http": {"method": "GET", "path": "/healthz", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
            "requestId": "r", "routeKey": "GET /healthz", "stage": "$default", "time": "30/Nov/2026:11:00:00 +0000",
            "timeEpoch": 1_796_036_400_000u64
        },
        "isBase64Encoded": false
    });
    let data_dir = dir.path().display().to_string();
    let (answer, stdout, _) =
        invoke_once("api", &[("OPENQQ_DATA_DIR", &data_dir), ("OPENQQ_JWT_SECRET", SECRET)], event).await;
    assert!(answer.starts_with(r#"response {"statusCode":200"#), "{answer}");

    let lines: Vec<serde_json::Value> = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let line = |metric: &str| {
        lines
            .iter()
            .find(|l| l.get(metric).is_some())
            .unwrap_or_else(|| panic!("{metric} left as an embedded metric: {stdout}"))
    };
    let requests = line("openqq_http_requests_total");
    assert_eq!((&requests["route"], &requests["status"]), (&"/healthz".into(), &"200".into()));
    assert_eq!(requests["tenant"], "(none)");
    let latency = &line("openqq_http_request_duration_seconds")["openqq_http_request_duration_seconds"];
    assert_eq!(latency["Counts"], serde_json::json!([1]), "{latency}");
}
