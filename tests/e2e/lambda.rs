//! The serverless shape on one machine: a design goes through all four Lambda binaries under
//! `cargo lambda watch` (`openqq_e2e::cargo_lambda`), each invoked over the Lambda Runtime API
//! with the events AWS sends them: API Gateway HTTP API (payload 2.0) requests with the JWT
//! authorizer's claims for the API, MSK batches for the consumers, built from the topic's records
//! as the trigger builds them (several partitions, header values with negative bytes, a record
//! without a `headers` field), and the scheduler's rule's scheduled events for the scheduler. The
//! log is on the Kafka-protocol broker, the store on DynamoDB and the objects in S3 (moto), as in
//! the deployment.

use openqq_core::partition::partition_for;
use openqq_core::EventKind;
use openqq_e2e::cargo_lambda::{cargo_lambda, Watch};
use openqq_e2e::{aws, blink_design, tansu};
use serde_json::{json, Value};
use std::time::Duration;

/// The two suites here run one at a time: each drives eight processes (the watcher, its four
/// functions, `openqq up` or the test's own calls) against the one moto server, whose DynamoDB
/// answers a request at a time; side by side, each took several times as long as alone.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
async fn call(lambda: &Watch, event: Value) -> (u16, Value) {
    let answer = lambda.invoke("api", &event, Duration::from_secs(120)).await.expect("the API function answered");
    let status = answer["statusCode"].as_u64().unwrap() as u16;
    let body = answer["body"].as_str().map(|b| serde_json::from_str(b).unwrap()).unwrap_or(Value::Null);
    (status, body)
}

/// Two tenants whose records land on different partitions of a two-partition topic.
fn tenants_on_two_partitions() -> [&'static str; 2] {
    let first = "acme";
    let second = ["globex", "initech", "umbrella", "hooli", "stark"]
        .into_iter()
        .find(|t| partition_for(t, 2) != partition_for(first, 2))
        .expect("one of the names hashes to the other partition");
    [first, second]
}

/// Gives `event` what MSK sends and our own producers never do: the first record of the first
/// partition gains a header whose value has negative bytes (MSK encodes header bytes as signed
/// Java bytes), and the first record of every other partition loses its `headers` field.
fn as_msk_sends_it(event: &mut Value) {
    let mut groups: Vec<_> = event["records"].as_object_mut().unwrap().iter_mut().collect();
    groups.sort_by(|a, b| a.0.cmp(b.0));
    for (i, (_, records)) in groups.into_iter().enumerate() {
        let record = records[0].as_object_mut().unwrap();
        if i == 0 {
            let headers = record["headers"].as_array_mut().unwrap();
            headers.push(json!({"x-producer-note": [-1, -128, 104, 105]}));
        } else {
            record.remove("headers");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn designs_go_through_all_four_lambda_binaries_under_cargo_lambda_watch() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(endpoint) = aws::endpoint("the Lambda functions test") else { return };
    let Some(cargo_lambda) = cargo_lambda() else { return };
    let Ok(redis) = std::env::var("OPENQQ_TEST_REDIS_URL") else {
        return eprintln!("skipping the Lambda functions test: set OPENQQ_TEST_REDIS_URL");
    };
    let (_broker, brokers) = tansu::shared();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", aws::unique_name("lambda"));
    let mut env = shared_env(&brokers, &endpoint, &prefix);
    env.extend([
        ("OPENQQ_DATA_DIR".to_owned(), dir.path().join("functions").display().to_string()),
        ("OPENQQ_AUTH".to_owned(), "api-gateway".to_owned()),
        ("OPENQQ_REDIS_URL".to_owned(), redis),
        ("OPENQQ_JWT_SECRET".to_owned(), "a-secret-for-upload-tokens-in-e2e-tests".to_owned()),
        ("OPENQQ_WEBHOOKS_ALLOW_PRIVATE".to_owned(), "true".to_owned()),
        ("OPENQQ_WEBHOOK_RETRY_DELAYS".to_owned(), "100ms".to_owned()),
    ]);
    let lambda = Watch::start(&cargo_lambda, &env);

    let tenants = tenants_on_two_partitions();
    // The first tenant's webhook refuses its first delivery, then takes them.
    let refuse_once = crate::webhooks::Reply { status: 500, after: Some(Duration::ZERO) };
    let (hook_url, mut hooks) = crate::webhooks::receiver(vec![refuse_once], crate::webhooks::OK).await;
    let register = json!({"url": hook_url, "kinds": ["design.submitted", "results.ready"]});
    let (status, hook) = call(&lambda, http_event("POST", "/v1/webhooks", Some(&register), Some(tenants[0]))).await;
    assert_eq!(status, 201, "{hook}");
    let hook_id = hook["id"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for tenant in tenants {
        let submit =
            http_event("POST", "/v1/designs", Some(&blink_design(&format!("serverless-{tenant}"))), Some(tenant));
        let (status, accepted) = call(&lambda, submit).await;
        assert_eq!(status, 202, "{accepted}");
        ids.push(accepted["design_id"].as_str().unwrap().to_owned());
    }
    let (status, _) = call(&lambda, http_event("GET", &format!("/v1/designs/{}", ids[0]), None, None)).await;
    assert_eq!(status, 401, "without the authorizer's claims nobody is let in");

    // The trigger's part: each topic's records, as one MSK batch over both partitions, to its
    // function.
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
    let consumers = [
        (EventKind::DesignSubmitted, "design-job"),
        (EventKind::ValidationRequested, "validation"),
        (EventKind::ValidationFinished, "results"),
    ];
    for (kind, function) in consumers {
        let topic = reader.topics.of(kind);
        let mut records = Vec::new();
        for p in 0..2 {
            records.extend(reader.backends.source.read(&topic, p, 0, 100).await.unwrap());
        }
        assert_eq!(records.len(), 2, "one {kind} record per design");
        assert_ne!(records[0].partition, records[1].partition, "the batch spans both partitions");
        let mut event = serde_json::to_value(openqq_runtime::kafka::to_event(&records)).unwrap();
        as_msk_sends_it(&mut event);
        let answer = lambda.invoke(function, &event, Duration::from_secs(120)).await.expect("the consumer answered");
        assert_eq!(answer, json!({"batchItemFailures": []}), "{kind}: every record done");
    }

    for (tenant, id) in tenants.iter().zip(&ids) {
        let (status, design) = call(&lambda, http_event("GET", &format!("/v1/designs/{id}"), None, Some(tenant))).await;
        assert_eq!((status, &design["status"], &design["verdict"]), (200, &json!("ready"), &json!("pass")), "{design}");
        let (status, events) =
            call(&lambda, http_event("GET", &format!("/v1/designs/{id}/events"), None, Some(tenant))).await;
        assert_eq!(status, 200);
        let events = events["events"].as_array().unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
        assert!(events.iter().all(|e| e["correlation_id"] == "e2e-lambda-1"), "{events:?}");
    }
    let (status, _) =
        call(&lambda, http_event("GET", &format!("/v1/designs/{}", ids[0]), None, Some(tenants[1]))).await;
    assert_eq!(status, 404, "another tenant sees nothing of it");

    // The results invocation ran a delivery round after its batch: one delivery got through, the
    // other was refused and waits for its retry, which the schedule's invocation sends.
    let first = crate::webhooks::next(&mut hooks, Duration::from_secs(30)).await;
    let second = crate::webhooks::next(&mut hooks, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let scheduled = json!({"version": "0", "id": "e2e", "detail-type": "Scheduled Event", "source": "aws.events",
        "account": "123456789012", "time": "2026-11-30T12:00:00Z", "region": "us-east-1", "resources": [], "detail": {}});
    let answer =
        lambda.invoke("results", &scheduled, Duration::from_secs(120)).await.expect("the schedule's invocation");
    assert_eq!(answer, json!({}));
    let retried = crate::webhooks::next(&mut hooks, Duration::from_secs(10)).await;
    assert_eq!(retried.headers["webhook-id"], first.headers["webhook-id"], "the refused delivery, retried");
    let mut kinds = vec![second.json()["type"].clone(), retried.json()["type"].clone()];
    kinds.sort_by_key(|k| k.to_string());
    assert_eq!(kinds, [json!("design.submitted"), json!("results.ready")]);
    let path = format!("/v1/webhooks/{hook_id}/deliveries");
    let (status, listed) = call(&lambda, http_event("GET", &path, None, Some(tenants[0]))).await;
    assert_eq!(status, 200, "{listed}");
    let attempts: Vec<(String, u64)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["status"].as_str().unwrap().to_owned(), d["attempts"].as_u64().unwrap()))
        .collect();
    assert_eq!(attempts.len(), 2, "{listed}");
    assert!(attempts.iter().all(|(s, _)| s == "delivered"), "{listed}");
    assert_eq!(attempts.iter().map(|(_, n)| n).sum::<u64>(), 3, "one attempt, and one refused then retried");
    let (status, feed) = call(&lambda, http_event("GET", "/v1/events", None, Some(tenants[0]))).await;
    assert_eq!(status, 200, "{feed}");
    let seqs: Vec<u64> = feed["items"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4], "the tenant's feed on DynamoDB: {feed}");
}

/// `openqq up --invoke URL`: a design goes through all four Lambda binaries under `cargo lambda
/// watch`, submitted to and read from the API function, while the local trigger drives the three
/// consumer functions over the Invoke API instead of in process, with the log on
/// the Kafka-protocol broker, the store on DynamoDB, the objects in S3 and the limiter on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_goes_through_all_four_lambda_binaries_with_openqq_up_as_their_trigger() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(endpoint) = aws::endpoint("the openqq up --invoke test") else { return };
    let Some(cargo_lambda) = cargo_lambda() else { return };
    let Ok(redis) = std::env::var("OPENQQ_TEST_REDIS_URL") else {
        return eprintln!("skipping the openqq up --invoke test: set OPENQQ_TEST_REDIS_URL");
    };
    let (_broker, brokers) = tansu::shared();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", aws::unique_name("invoke"));
    let env = shared_env(&brokers, &endpoint, &prefix);
    // The four functions under cargo lambda watch; the API function as behind API Gateway, with
    // the limiter on Redis.
    let function_env: Vec<(String, String)> = env
        .iter()
        .cloned()
        .chain([
            ("OPENQQ_DATA_DIR".to_owned(), dir.path().join("functions").display().to_string()),
            ("OPENQQ_AUTH".to_owned(), "api-gateway".to_owned()),
            ("OPENQQ_REDIS_URL".to_owned(), redis.clone()),
            ("OPENQQ_JWT_SECRET".to_owned(), "a-secret-for-upload-tokens-in-e2e-tests".to_owned()),
        ])
        .collect();
    let lambda = Watch::start(&cargo_lambda, &function_env);
    // openqq up with the same settings as flags: here only the triggers' part, invoking the three
    // consumer functions behind the Invoke API.
    let mut args: Vec<String> = Vec::new();
    for (var, value) in env.iter().filter(|(k, _)| k.starts_with("OPENQQ_")) {
        args.push(format!("--{}", var.trim_start_matches("OPENQQ_").to_lowercase().replace('_', "-")));
        args.push(value.clone());
    }
    args.extend(["--invoke".into(), lambda.url.clone(), "--redis-url".into(), redis]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let aws_env = [("AWS_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")];
    let server = openqq_e2e::Server::start_with_env(&dir.path().join("up"), "127.0.0.1:0", &args, &aws_env).unwrap();

    // Submitted to the API function, carried by the triggers through the three consumer
    // functions, read back from the API function.
    let submit = http_event("POST", "/v1/designs", Some(&blink_design("invoked")), Some("acme"));
    let (status, accepted) = call(&lambda, submit).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let design = loop {
        let (_, design) = call(&lambda, http_event("GET", &format!("/v1/designs/{id}"), None, Some("acme"))).await;
        if design["status"] == "ready" {
            break design;
        }
        assert!(std::time::Instant::now() < deadline, "not ready within 120 s: {design}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(design["verdict"], "pass", "{design}");
    let (_, events) = call(&lambda, http_event("GET", &format!("/v1/designs/{id}/events"), None, Some("acme"))).await;
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    let metrics = reqwest::get(server.metrics()).await.unwrap().text().await.unwrap();
    for function in ["design-job", "validation", "results"] {
        let label = format!("function=\"{function}\"");
        let ok = openqq_e2e::counter_sum(&metrics, "openqq_batches_total", &[&label, "outcome=\"ok\""]);
        assert!(ok >= 1.0, "the trigger invoked {function} and it answered: {ok}");
    }
}

/// The scheduler function's binary under `cargo lambda watch`, on the broker, DynamoDB and S3 as
/// deployed: invoked with its rule's scheduled event, it fires a tenant's due schedule once (the
/// fire settled in the ledger with its batch, the batch on `batch.submitted` and created for
/// reads); invoked again, it fires nothing again; any other event is refused. Each invocation
/// runs one pass here: the emulator gives no deadline, and the event's minute is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_schedule_fires_once_through_the_scheduler_binary_under_cargo_lambda_watch() {
    use chrono::{SecondsFormat, SubsecRound, TimeDelta, Utc};
    use openqq_core::schedule::{FireOutcome, RunnerState, StoredSchedule, Template};
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(endpoint) = aws::endpoint("the scheduler function test") else { return };
    let Some(cargo_lambda) = cargo_lambda() else { return };
    let (_broker, brokers) = tansu::shared();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{}.", aws::unique_name("scheduler"));
    let mut env = shared_env(&brokers, &endpoint, &prefix);
    // The test's own view of the same log, table and bucket, where it puts the schedule.
    let mut args = vec!["--data-dir".to_owned(), dir.path().join("test").display().to_string()];
    for (var, value) in env.iter().filter(|(k, _)| openqq_platform::Settings::env_vars().contains(k)) {
        args.push(format!("--{}", var.trim_start_matches("OPENQQ_").to_lowercase().replace('_', "-")));
        args.push(value.clone());
    }
    let platform =
        openqq_platform::Platform::build(openqq_platform::Settings::from_args(&args).unwrap()).await.unwrap();
    env.push(("OPENQQ_DATA_DIR".to_owned(), dir.path().join("functions").display().to_string()));
    let lambda = Watch::start(&cargo_lambda, &env);

    let b = &platform.backends;
    let tenant = openqq_core::TenantId::parse("acme").unwrap();
    let item = format!("{}\n", openqq_e2e::compact_blink_design("scheduled"));
    let items_ref = b.objects.put(&tenant, item.into_bytes()).await.unwrap();
    // Hourly from an hour and ten seconds ago: its first fire is ten seconds late.
    let start = Utc::now().trunc_subsecs(0) - TimeDelta::seconds(3_610);
    let mut schedule = StoredSchedule {
        id: openqq_core::ScheduleId::generate(),
        name: "hourly".into(),
        config: serde_json::from_value(json!({"expression": "rate(1 hour)"})).unwrap(),
        template: Template::Items { items_ref, items: 1 },
        created_at: start,
        updated_at: start,
        resumed_at: None,
        state: RunnerState::default(),
        next_due: None,
        version: 0,
    };
    let nominal = start + TimeDelta::hours(1);
    schedule.next_due = openqq_api::schedules::runner::next_due(&schedule, &schedule.state, start);
    assert_eq!(schedule.next_due, Some(nominal));
    assert!(b.store.create_schedule(&tenant, &schedule).await.unwrap());

    let minute = (Utc::now() - TimeDelta::minutes(2)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let scheduled = json!({"version": "0", "id": "e2e", "detail-type": "Scheduled Event", "source": "aws.events",
        "account": "123456789012", "time": minute, "region": "us-east-1", "resources": [], "detail": {}});
    let within = Duration::from_secs(120);
    let answer = lambda.invoke("scheduler", &scheduled, within).await.expect("the scheduler answered");
    assert_eq!(answer, json!({"passes": 1, "failed": 0, "handled": 1}), "the pass handled the due schedule");
    let fires = b.store.fires(&tenant, &schedule.id, None, 10).await.unwrap().expect("the schedule exists");
    assert_eq!(fires.items.len(), 1, "{fires:?}");
    let fire = &fires.items[0];
    assert_eq!((fire.nominal_time, fire.outcome), (nominal, FireOutcome::Submitted), "{fire:?}");
    let batch = fire.batch_id.clone().expect("a submitted fire names its batch");
    let records = batches_published(&platform).await;
    assert_eq!(records.len(), 1, "one batch published");
    let envelope = openqq_core::Envelope::decode(&records[0].value).unwrap();
    assert_eq!((&envelope.tenant_id, &envelope.design_id), (&tenant, &batch.as_design()), "the fire's batch");
    let view = b.store.batch(&tenant, &batch).await.unwrap().expect("the batch was created for reads");
    assert_eq!((view.counts.total(), view.counts.rejected), (1, 0), "its item accepted: {view:?}");

    let answer = lambda.invoke("scheduler", &scheduled, within).await.expect("the scheduler answered again");
    assert_eq!(answer, json!({"passes": 1, "failed": 0, "handled": 0}), "nothing is due any more");
    let fires = b.store.fires(&tenant, &schedule.id, None, 10).await.unwrap().unwrap();
    assert_eq!(fires.items.len(), 1, "the fire is in the ledger once: {fires:?}");
    assert_eq!(batches_published(&platform).await.len(), 1, "and its batch published once");

    let kafka = json!({"eventSource": "aws:kafka", "records": {}});
    let refused = lambda.invoke("scheduler", &kafka, within).await.expect_err("an MSK batch is refused");
    assert!(refused.to_string().contains("not a scheduled event"), "{refused}");
}

/// Every record on `batch.submitted` (two partitions).
async fn batches_published(platform: &openqq_platform::Platform) -> Vec<openqq_core::LogRecord> {
    let topic = platform.topics.of(EventKind::BatchSubmitted);
    let mut records = Vec::new();
    for p in 0..2 {
        records.extend(platform.backends.source.read(&topic, p, 0, 100).await.unwrap());
    }
    records
}
