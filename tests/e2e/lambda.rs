//! The serverless shape on one machine: a design goes through all four Lambda binaries, each
//! invoked over the Lambda Runtime API (`openqq_e2e::runtime_api`, serving the real `bootstrap`
//! protocol) with the events AWS sends them: API Gateway HTTP API (payload 2.0) requests with the
//! JWT authorizer's claims for the API, MSK batches for the consumers, built from the topic's
//! records as the trigger builds them. The log is on the Kafka-protocol broker, the store on
//! DynamoDB and the objects in S3 (moto), as in the deployment.

use openqq_core::EventKind;
use openqq_e2e::runtime_api::LambdaEmulator;
use openqq_e2e::{aws, blink_design, function_bin, tansu};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A function binary serving invocations from the emulator's Runtime API.
struct Function {
    name: String,
    child: Child,
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn function(lambda: &LambdaEmulator, name: &str, env: &[(String, String)]) -> Function {
    let mut cmd = Command::new(function_bin(name));
    for (var, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_")) {
        cmd.env_remove(var);
    }
    let child = cmd
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", lambda.runtime_api(name).await)
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("RUST_LOG", std::env::var("OPENQQ_TEST_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Function { name: name.to_owned(), child }
}

/// What the deployment template gives every function (`openqq up`'s flags, as variables), with
/// the broker, the AWS stand-in and a fresh topic prefix, table and bucket.
fn shared_env(brokers: &str, endpoint: &str, prefix: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("OPENQQ_KAFKA_BROKERS", brokers),
        ("OPENQQ_TOPIC_PREFIX", prefix),
        ("OPENQQ_PARTITIONS", "2"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for pair in aws::on_aws(endpoint, "lambda", &[]).chunks(2) {
        let var = format!("OPENQQ_{}", pair[0].trim_start_matches("--").to_uppercase().replace('-', "_"));
        env.push((var, pair[1].clone()));
    }
    env
}

/// An API Gateway HTTP API request, as the JWT authorizer passes it on (claims verified).
fn http_event(method: &str, path: &str, body: Option<&Value>, tenant: Option<&str>) -> Value {
    let mut ctx = json!({
        "accountId": "123456789012", "apiId": "api", "domainName": "api.example", "domainPrefix": "api",
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "e2e"},
        "requestId": "r", "routeKey": "$default", "stage": "$default",
        "time": "30/Nov/2026:12:00:00 +0000", "timeEpoch": 1_796_040_000_000u64
    });
    if let Some(tenant) = tenant {
        ctx["authorizer"] = json!({"jwt": {"claims": {"tenant_id": tenant, "sub": "e2e"}, "scopes": null}});
    }
    json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": {"host": "api.example", "content-type": "application/json", "x-correlation-id": "e2e-lambda-1"},
        "requestContext": ctx,
        "body": body.map(Value::to_string),
        "isBase64Encoded": false
    })
}

/// The API function's answer: status and JSON body.
async fn call(lambda: &LambdaEmulator, event: Value) -> (u16, Value) {
    let answer = lambda.invoke("api", event, Duration::from_secs(60)).await.expect("the API function answered");
    let status = answer["statusCode"].as_u64().unwrap() as u16;
    let body = answer["body"].as_str().map(|b| serde_json::from_str(b).unwrap()).unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_goes_through_all_four_lambda_binaries_invoked_over_the_runtime_api() {
    let Some(endpoint) = aws::endpoint("the Lambda functions test") else { return };
    let (_broker, brokers) = tansu::shared();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", aws::unique_name("lambda"));
    let env = shared_env(&brokers, &endpoint, &prefix);
    let own_dir = |name: &str| ("OPENQQ_DATA_DIR".to_owned(), dir.path().join(name).display().to_string());
    let with = |extra: &[(String, String)]| env.iter().chain(extra).cloned().collect::<Vec<_>>();
    let lambda = LambdaEmulator::start().await;
    let _api = function(
        &lambda,
        "api",
        &with(&[
            own_dir("api"),
            ("OPENQQ_AUTH".into(), "api-gateway".into()),
            ("OPENQQ_JWT_SECRET".into(), "a-secret-for-upload-tokens-in-e2e-tests".into()),
        ]),
    )
    .await;
    let consumers = [
        (EventKind::DesignSubmitted, function(&lambda, "design-job", &with(&[own_dir("design-job")])).await),
        (EventKind::ValidationRequested, function(&lambda, "validation", &with(&[own_dir("validation")])).await),
        (EventKind::ValidationFinished, function(&lambda, "results", &with(&[own_dir("results")])).await),
    ];

    let (status, accepted) =
        call(&lambda, http_event("POST", "/v1/designs", Some(&blink_design("serverless")), Some("acme"))).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    let (status, _) = call(&lambda, http_event("GET", &format!("/v1/designs/{id}"), None, None)).await;
    assert_eq!(status, 401, "without the authorizer's claims nobody is let in");

    // The trigger's part: each topic's records, as one MSK batch, to its function.
    let reader = openqq_platform::Settings::from_args([
        "--data-dir".to_owned(),
        dir.path().join("reader").display().to_string(),
        "--kafka-brokers".to_owned(),
        brokers.clone(),
        "--topic-prefix".to_owned(),
        prefix.clone(),
        "--partitions".to_owned(),
        "2".to_owned(),
    ])
    .unwrap();
    let reader = openqq_platform::Platform::build(reader).await.unwrap();
    for (kind, f) in &consumers {
        let topic = reader.topics.of(*kind);
        let mut records = Vec::new();
        for p in 0..2 {
            records.extend(reader.backends.source.read(&topic, p, 0, 100).await.unwrap());
        }
        assert_eq!(records.len(), 1, "one {kind} record for the design");
        let event = serde_json::to_value(openqq_runtime::kafka::to_event(&records)).unwrap();
        let answer = lambda.invoke(&f.name, event, Duration::from_secs(60)).await.expect("the consumer answered");
        assert_eq!(answer, json!({"batchItemFailures": []}), "{kind}: every record done");
    }

    let (status, design) = call(&lambda, http_event("GET", &format!("/v1/designs/{id}"), None, Some("acme"))).await;
    assert_eq!((status, &design["status"], &design["verdict"]), (200, &json!("ready"), &json!("pass")), "{design}");
    let (status, events) =
        call(&lambda, http_event("GET", &format!("/v1/designs/{id}/events"), None, Some("acme"))).await;
    assert_eq!(status, 200);
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    assert!(events["events"].as_array().unwrap().iter().all(|e| e["correlation_id"] == "e2e-lambda-1"));
    let (status, _) = call(&lambda, http_event("GET", &format!("/v1/designs/{id}"), None, Some("globex"))).await;
    assert_eq!(status, 404, "another tenant sees nothing of it");
}

/// `openqq up --invoke URL`: the local trigger drives the three consumer Lambda binaries over the
/// Invoke API (as it would under `cargo lambda watch`) instead of in process, with the log on
/// the Kafka-protocol broker, the store on DynamoDB, the objects in S3 and the limiter on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openqq_up_invokes_the_consumer_lambda_binaries_over_the_invoke_api() {
    let Some(endpoint) = aws::endpoint("the openqq up --invoke test") else { return };
    let Ok(redis) = std::env::var("OPENQQ_TEST_REDIS_URL") else {
        return eprintln!("skipping the openqq up --invoke test: set OPENQQ_TEST_REDIS_URL");
    };
    let (_broker, brokers) = tansu::shared();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", aws::unique_name("invoke"));
    let env = shared_env(&brokers, &endpoint, &prefix);
    let lambda = LambdaEmulator::start().await;
    let own_dir = |name: &str| ("OPENQQ_DATA_DIR".to_owned(), dir.path().join(name).display().to_string());
    let mut functions = Vec::new();
    for name in ["design-job", "validation", "results"] {
        functions.push(function(&lambda, name, &env.iter().cloned().chain([own_dir(name)]).collect::<Vec<_>>()).await);
    }
    // openqq up with the same settings as flags, and the functions behind the Invoke API.
    let mut args: Vec<String> = Vec::new();
    for (var, value) in env.iter().filter(|(k, _)| k.starts_with("OPENQQ_")) {
        args.push(format!("--{}", var.trim_start_matches("OPENQQ_").to_lowercase().replace('_', "-")));
        args.push(value.clone());
    }
    args.extend(["--invoke".into(), lambda.url.clone(), "--redis-url".into(), redis]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let aws_env = [("AWS_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")];
    let server = openqq_e2e::Server::start_with_env(&dir.path().join("up"), "127.0.0.1:0", &args, &aws_env).unwrap();
    let acme = openqq_e2e::Client::new(&server.url, &server.token("acme"));
    let id = acme.submit_correlated(&blink_design("invoked"), "e2e-invoke-1").await.unwrap();
    let design = acme.wait_for(&id, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
    assert_eq!(design["verdict"], "pass", "{design}");
    let events = acme.get_ok(&format!("/v1/designs/{id}/events"), Duration::from_secs(10)).await.unwrap();
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    let metrics = reqwest::get(format!("{}/metrics", server.url)).await.unwrap().text().await.unwrap();
    for function in ["design-job", "validation", "results"] {
        let label = format!("function=\"{function}\"");
        let ok = openqq_e2e::counter_sum(&metrics, "openqq_batches_total", &[&label, "outcome=\"ok\""]);
        assert!(ok >= 1.0, "the trigger invoked {function} and it answered: {ok}");
    }
}
