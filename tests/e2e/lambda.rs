//! The serverless shape on one machine: a design goes through all four Lambda binaries, each
//! invoked over the Lambda Runtime API (`openqq_e2e::runtime_api`, serving the real `bootstrap`
//! protocol) with the events AWS sends them: API Gateway HTTP API (payload 2.0) requests with the
//! JWT authorizer's claims for the API, MSK batches for the consumers, built from the topic's
//! records as the trigger builds them. The log is on the Kafka-protocol broker, the store on
//! DynamoDB and the objects in S3 (moto), as in the deployment.

use openqq_core::EventKind;
use openqq_e2e::runtime_api::RuntimeApi;
use openqq_e2e::{aws, blink_design, function_bin, tansu};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A function binary serving invocations from its own Runtime API.
struct Function {
    api: RuntimeApi,
    child: Child,
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn function(name: &str, env: &[(String, String)]) -> Function {
    let api = RuntimeApi::start().await;
    let mut cmd = Command::new(function_bin(name));
    for (var, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_")) {
        cmd.env_remove(var);
    }
    let child = cmd
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", &api.addr)
        .env("AWS_LAMBDA_FUNCTION_NAME", format!("openqq-{name}"))
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("RUST_LOG", std::env::var("OPENQQ_TEST_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Function { api, child }
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
async fn call(api: &Function, event: Value) -> (u16, Value) {
    let answer = api.api.invoke(event, Duration::from_secs(60)).await.expect("the API function answered");
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
    // What the deployment template gives every function, with local endpoints.
    let mut env: Vec<(String, String)> = [
        ("OPENQQ_KAFKA_BROKERS", brokers.as_str()),
        ("OPENQQ_TOPIC_PREFIX", prefix.as_str()),
        ("OPENQQ_PARTITIONS", "2"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let aws_args = aws::on_aws(&endpoint, "lambda", &[]);
    for pair in aws_args.chunks(2) {
        let var = format!("OPENQQ_{}", pair[0].trim_start_matches("--").to_uppercase().replace('-', "_"));
        env.push((var, pair[1].clone()));
    }
    let own_dir = |name: &str| ("OPENQQ_DATA_DIR".to_owned(), dir.path().join(name).display().to_string());
    let with = |extra: &[(String, String)]| env.iter().chain(extra).cloned().collect::<Vec<_>>();
    let api = function(
        "api",
        &with(&[
            own_dir("api"),
            ("OPENQQ_AUTH".into(), "api-gateway".into()),
            ("OPENQQ_JWT_SECRET".into(), "a-secret-for-upload-tokens-in-e2e-tests".into()),
        ]),
    )
    .await;
    let consumers = [
        (EventKind::DesignSubmitted, function("design-job", &with(&[own_dir("design-job")])).await),
        (EventKind::ValidationRequested, function("validation", &with(&[own_dir("validation")])).await),
        (EventKind::ValidationFinished, function("results", &with(&[own_dir("results")])).await),
    ];

    let (status, accepted) =
        call(&api, http_event("POST", "/v1/designs", Some(&blink_design("serverless")), Some("acme"))).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    let (status, _) = call(&api, http_event("GET", &format!("/v1/designs/{id}"), None, None)).await;
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
        let answer = f.api.invoke(event, Duration::from_secs(60)).await.expect("the consumer answered");
        assert_eq!(answer, json!({"batchItemFailures": []}), "{kind}: every record done");
    }

    let (status, design) = call(&api, http_event("GET", &format!("/v1/designs/{id}"), None, Some("acme"))).await;
    assert_eq!((status, &design["status"], &design["verdict"]), (200, &json!("ready"), &json!("pass")), "{design}");
    let (status, events) = call(&api, http_event("GET", &format!("/v1/designs/{id}/events"), None, Some("acme"))).await;
    assert_eq!(status, 200);
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    assert!(events["events"].as_array().unwrap().iter().all(|e| e["correlation_id"] == "e2e-lambda-1"));
    let (status, _) = call(&api, http_event("GET", &format!("/v1/designs/{id}"), None, Some("globex"))).await;
    assert_eq!(status, 404, "another tenant sees nothing of it");
}
