//! The `main` of each function on AWS Lambda: JSON logs in Lambda's shape, [`Settings`] from the environment, the
//! platform built once at cold start, then the Lambda runtime. A bad setting stops the cold start
//! with a sentence naming its variable.
//!
//! With `OPENQQ_DYNAMODB_TABLE` set every function shares one store; with `OPENQQ_KAFKA_BROKERS`
//! or `OPENQQ_MSK_CLUSTER_ARN` the log is Kafka / MSK. Without them the function falls back to the
//! embedded store and log in `OPENQQ_DATA_DIR` (default `/tmp/openqq` on Lambda): right for
//! `cargo lambda watch` on one machine, not for a fleet.
//!
//! Nothing scrapes a function, so its metrics leave as CloudWatch embedded-metric-format lines on
//! stdout ([`openqq_telemetry::emf`]): recorded in memory during an invocation and printed at its
//! end, before the response leaves (the sandbox may be frozen as soon as it has).

use crate::{Platform, Settings};
use lambda_runtime::{service_fn, LambdaEvent};
use openqq_api::auth::GatewayClaims;
use openqq_api::{router, JwtKeys, PoolConfig};
use openqq_core::EventKind;
use openqq_runtime::kafka::parse_event;
use openqq_runtime::response::BatchResponse;
use openqq_runtime::BatchHandler;
use std::sync::Arc;

pub use lambda_runtime::Error;
/// The CloudWatch namespace of the functions' metrics, and the smaller dimension sets some are
/// published under besides their full label set: what the deployment's dashboard and alarms may read.
pub use openqq_telemetry::emf::{rollups as published_dimension_sets, NAMESPACE as METRICS_NAMESPACE};

/// Where a function on Lambda keeps embedded storage unless `OPENQQ_DATA_DIR` says otherwise.
const LAMBDA_DATA_DIR: &str = "/tmp/openqq";

/// The settings from the environment, with the Lambda default for the data dir.
fn settings() -> Result<Settings, Error> {
    // Lambda's JSON log format: `timestamp`, `level`, `message` and the invocation's `requestId`.
    openqq_telemetry::lambda_logs::init();
    // Before anything is built, so what the cold start records is counted too.
    openqq_telemetry::emf::install();
    // As under `openqq up`: what the function writes in its data dir is its own (/tmp on Lambda
    // is the sandbox's alone, but a function run elsewhere, as under `cargo lambda watch`, shares
    // the machine).
    crate::data_dir::owner_only();
    let data_dir = std::env::var("OPENQQ_DATA_DIR").unwrap_or_else(|_| LAMBDA_DATA_DIR.to_owned());
    let settings = Settings::from_args(["--data-dir", data_dir.as_str()]).map_err(|e| format!("{e:#}"))?;
    // The deploy marker: one embedded-metric line per cold start (CloudWatch reads stdout).
    let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "openqq".into());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    println!("{}", openqq_telemetry::build_info_emf(&function, now.as_millis()));
    Ok(settings)
}

/// The API function: the router handed to `lambda_http`. Bearer tokens are verified with
/// `OPENQQ_JWT_SECRET`, which must be set.
pub async fn api() -> Result<(), Error> {
    let settings = settings()?;
    // The secret is checked before anything is opened, like every other setting.
    let secret = std::env::var(crate::secret::ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{} must be set: it verifies the bearer tokens", crate::secret::ENV))?;
    let keys = JwtKeys::with_rules(secret.as_bytes(), settings.jwt.rules())
        .map_err(|e| format!("{}: {e}", crate::secret::ENV))?;
    let platform = Platform::build(settings).await.map_err(|e| format!("{e:#}"))?;
    if platform.settings.limiter.redis_url.is_none() && platform.settings.limiter.elasticache_cache.is_none() {
        tracing::warn!("The request limiter is in process: each instance limits on its own. Set OPENQQ_ELASTICACHE_CACHE or OPENQQ_REDIS_URL to share it.");
    }
    // Reserved concurrency bounds the pool: one request per instance.
    let state = platform.api_state(keys).build();
    let app = router(state, PoolConfig { workers: 1, queue: 0, ..PoolConfig::default() })
        .layer(axum::middleware::map_request(pass_on_gateway_claims))
        .layer(axum::middleware::from_fn(flush_metrics));
    lambda_http::run(app).await
}

/// Prints the request's metrics once the router answered (outermost layer: the request counter
/// and latency histogram are recorded inside it).
async fn flush_metrics(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let resp = next.run(req).await;
    openqq_telemetry::emf::flush();
    resp
}

/// Puts what API Gateway's JWT authorizer verified (its `tenant_id` claim) into the request as
/// [`GatewayClaims`], for `--auth api-gateway`. Requests without an authorizer context carry none.
async fn pass_on_gateway_claims(mut req: axum::extract::Request) -> axum::extract::Request {
    use lambda_http::request::RequestContext;
    let claims = match req.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .map(|jwt| GatewayClaims { tenant_id: jwt.claims.get("tenant_id").cloned() }),
        _ => None,
    };
    if let Some(claims) = claims {
        req.extensions_mut().insert(claims);
    }
    req
}

/// A consumer function: the MSK trigger's batches of `kind`'s topic through its handler.
pub async fn consumer(kind: EventKind) -> Result<(), Error> {
    let platform = Platform::build(settings()?).await.map_err(|e| format!("{e:#}"))?;
    serve(platform.handler(kind)?).await
}

/// How long a results invocation leaves itself after its deliveries, before Lambda's deadline.
const DELIVERY_MARGIN: std::time::Duration = std::time::Duration::from_secs(3);
/// The most a results invocation spends on deliveries after its batch.
pub const DELIVERY_ROUND: std::time::Duration = std::time::Duration::from_secs(20);
/// How long a delivery claimed on Lambda stays claimed: longer than the function's timeout
/// (template.yaml), so an invocation cut off mid-round leaves its claims to a later one.
pub const LAMBDA_DELIVERY_LEASE: std::time::Duration = std::time::Duration::from_secs(90);

/// The results function: each MSK batch of `validation.finished` goes through its handler, then
/// one round of webhook deliveries (what the store queued, by this function or the others, and
/// retries that came due). The template also invokes it on a schedule (an EventBridge event, not
/// an MSK batch), which runs the round alone, so retries come due without new results.
pub async fn results() -> Result<(), Error> {
    let platform = Platform::build(settings()?).await.map_err(|e| format!("{e:#}"))?;
    let handler = platform.handler(EventKind::ValidationFinished)?;
    let deliveries = Arc::new(Deliveries::new(&platform)?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let (handler, deliveries) = (handler.clone(), deliveries.clone());
        async move {
            let deadline = invocation_deadline(event.context.deadline);
            let answer = match is_scheduled(&event.payload) {
                true => Ok(serde_json::json!({})),
                false => invoke(&*handler, event.payload, || {})
                    .await
                    .map(|r| serde_json::to_value(r).expect("responses serialise")),
            };
            deliveries.round(deadline).await;
            openqq_telemetry::emf::flush();
            answer
        }
    }))
    .await
}

/// Whether a payload is a scheduled EventBridge event rather than an MSK batch.
fn is_scheduled(payload: &serde_json::Value) -> bool {
    payload.get("source").and_then(|s| s.as_str()) == Some("aws.events")
}

/// When deliveries must be done by: Lambda's deadline (milliseconds since the epoch) less a
/// margin, and at most [`DELIVERY_ROUND`] from now. A deadline that is not in the future cannot
/// be Lambda's (which would have stopped the function): local emulators send other things there
/// (`cargo lambda watch` 1.9 sends the function's timeout, 600000), so the round gets its usual
/// time.
fn invocation_deadline(deadline_ms: u64) -> tokio::time::Instant {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    let left = match u128::from(deadline_ms).checked_sub(now_ms) {
        Some(left) if left > 0 => std::time::Duration::from_millis(u64::try_from(left).unwrap_or(u64::MAX)),
        _ => DELIVERY_ROUND + DELIVERY_MARGIN,
    };
    tokio::time::Instant::now() + left.saturating_sub(DELIVERY_MARGIN).min(DELIVERY_ROUND)
}

/// Webhook deliveries run from a function: one claim round per invocation.
struct Deliveries {
    store: Arc<dyn openqq_core::WebhookStore>,
    client: openqq_adapters::WebhookClient,
    settings: openqq_adapters::DeliverySettings,
}

impl Deliveries {
    fn new(platform: &Platform) -> Result<Self, Error> {
        let mut settings = platform.delivery_settings();
        settings.lease = settings.lease.max(LAMBDA_DELIVERY_LEASE);
        settings.check().map_err(|e| e.to_string())?;
        let client = openqq_adapters::WebhookClient::new(settings.allow_private).map_err(|e| e.to_string())?;
        Ok(Self { store: platform.backends.store.clone(), client, settings })
    }

    /// One round; a failure is logged (the deliveries stay queued for the next round).
    async fn round(&self, deadline: tokio::time::Instant) {
        match openqq_adapters::webhook::deliver_due_once(self.store.clone(), &self.client, &self.settings, deadline)
            .await
        {
            Ok(r) if r.claimed > 0 => tracing::info!(
                claimed = r.claimed,
                delivered = r.delivered,
                retried = r.retried,
                dead = r.dead,
                unrecorded = r.unrecorded,
                "Webhook deliveries attempted."
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "Claiming webhook deliveries failed; they stay queued."),
        }
    }
}

/// Runs `handler` under the Lambda runtime until the sandbox is shut down: each MSK batch goes
/// through it and the answer is a partial-batch response. An event that cannot be read fails
/// the whole invocation.
async fn serve(handler: Arc<dyn BatchHandler>) -> Result<(), Error> {
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let handler = handler.clone();
        async move { invoke(&*handler, event.payload, openqq_telemetry::emf::flush).await }
    }))
    .await
}

/// One invocation: the batch through `handler`, then `flush` prints the invocation's metrics
/// (also when the event could not be read), before the answer is returned.
async fn invoke(
    handler: &dyn BatchHandler,
    payload: serde_json::Value,
    flush: impl FnOnce(),
) -> Result<BatchResponse, Error> {
    let answer = async {
        let kafka = parse_event(payload)?;
        let failed = handler.handle(kafka).await.err();
        if let Some(failed) = &failed {
            tracing::warn!(function = handler.name(), reason = %failed, "Partitions of the batch failed; the trigger resumes them from the failed records.");
        }
        Ok::<BatchResponse, Error>(BatchResponse::new(failed))
    }
    .await;
    flush();
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API Gateway HTTP API (payload 2.0) request, as the JWT authorizer passes it on.
    fn gateway_request(claims: serde_json::Value) -> axum::extract::Request {
        let event = serde_json::json!({
            "version": "2.0", "routeKey": "GET /v1/designs", "rawPath": "/v1/designs", "rawQueryString": "",
            "headers": {"host": "api.example"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "api", "domainName": "api.example", "domainPrefix": "api",
                "http": {"method": "GET", "path": "/v1/designs", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
                "requestId": "r", "routeKey": "GET /v1/designs", "stage": "$default", "time": "30/Nov/2026:11:00:00 +0000",
                "timeEpoch": 1_796_036_400_000u64,
                "authorizer": {"jwt": {"claims": claims, "scopes": null}}
            },
            "isBase64Encoded": false
        });
        let req = lambda_http::request::from_str(&event.to_string()).expect("an API Gateway v2 event");
        let (parts, _) = req.into_parts();
        axum::extract::Request::from_parts(parts, axum::body::Body::empty())
    }

    /// One invocation of the design-job consumer on embedded storage, through [`invoke`] as the
    /// Lambda runtime calls it, with a record that is not an event: it is dead-lettered, and the
    /// invocation's metrics leave as valid embedded-metric lines.
    #[tokio::test(flavor = "current_thread")]
    async fn a_consumer_invocation_prints_its_metrics_as_embedded_metric_lines_before_answering() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::from_args(["--data-dir", dir.path().to_str().unwrap()]).unwrap();
        let platform = Platform::build(settings).await.unwrap();
        let handler = platform.handler(EventKind::DesignSubmitted).unwrap();
        let record = openqq_core::LogRecord {
            topic: platform.topics.of(EventKind::DesignSubmitted),
            partition: 0,
            offset: 0,
            timestamp_ms: 1_796_036_400_000,
            key: "k".into(),
            value: b"not an envelope".to_vec(),
            headers: vec![],
        };
        let payload = serde_json::to_value(openqq_runtime::kafka::to_event(&[record])).unwrap();

        let recorder = openqq_telemetry::emf::EmfRecorder::new();
        let _local = recorder.set_local();
        let mut lines = Vec::new();
        let answer = invoke(&*handler, payload, || lines = recorder.lines(1_796_036_400_000)).await.unwrap();
        assert!(serde_json::to_value(&answer).unwrap()["batchItemFailures"].as_array().unwrap().is_empty());

        let lines: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let find =
            |name: &str| lines.iter().find(|l| l.get(name).is_some()).unwrap_or_else(|| panic!("{name} in {lines:#?}"));
        let dead = find("openqq_dead_letters_total");
        assert_eq!(
            (&dead["function"], &dead["openqq_dead_letters_total"]),
            (&serde_json::json!("design-job"), &serde_json::json!(1))
        );
        let event = find("openqq_events_total");
        assert_eq!(
            (&event["function"], &event["outcome"]),
            (&serde_json::json!("design-job"), &serde_json::json!("dead_lettered"))
        );
        for l in &lines {
            let aws = &l["_aws"]["CloudWatchMetrics"];
            for d in aws.as_array().unwrap() {
                assert_eq!(d["Namespace"], openqq_telemetry::emf::NAMESPACE);
                for key in d["Dimensions"].as_array().unwrap().iter().flat_map(|s| s.as_array().unwrap()) {
                    assert!(l[key.as_str().unwrap()].is_string(), "{key} is a member of {l}");
                }
                for m in d["Metrics"].as_array().unwrap() {
                    assert!(l.get(m["Name"].as_str().unwrap()).is_some(), "{m} has a value in {l}");
                }
            }
        }
    }

    /// The batch function's bin hands `lambda::consumer` the kind of one of its two topics; the
    /// handler it gets serves both: a `batch.submitted` invocation fans the batch out onto the
    /// batch lane, and an invocation of its items' `batch.item.ended` records completes it.
    #[tokio::test(flavor = "current_thread")]
    async fn the_batch_functions_handler_serves_both_of_its_topics() {
        use openqq_core::batch::{BatchId, BatchItemEnded, BatchSubmitted, ItemStatus};
        use openqq_core::{Envelope, Verdict};
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::from_args(["--data-dir", dir.path().to_str().unwrap(), "--partitions", "1"]).unwrap();
        let platform = Platform::build(settings).await.unwrap();
        let b = &platform.backends;
        let handler = platform.handler(EventKind::BatchSubmitted).unwrap();
        assert_eq!(handler.name(), platform.handler(EventKind::BatchItemEnded).unwrap().name());
        let tenant = openqq_core::TenantId::parse("acme").unwrap();
        let items = b"{\"design_id\":\"d0\",\"revision\":1,\"submission\":{}}\n{\"design_id\":\"d1\",\"revision\":1,\"submission\":{}}\n";
        let items_ref = b.objects.put(&tenant, items.to_vec()).await.unwrap();
        let batch_id = BatchId::generate();
        let origin = openqq_core::event::Origin {
            tenant_id: tenant.clone(),
            design_id: batch_id.as_design(),
            revision: 1,
            correlation_id: openqq_core::CorrelationId::parse("corr-batch").unwrap(),
            batch: None,
        };
        let submitted = BatchSubmitted {
            batch_id: batch_id.clone(),
            name: "nightly".into(),
            items_ref,
            items: 2,
            max_failed: None,
        };
        let on_topic = |kind: EventKind, offset: u64, record: openqq_core::Record| openqq_core::LogRecord {
            topic: platform.topics.of(kind),
            partition: 0,
            offset,
            timestamp_ms: 1_796_036_400_000,
            key: record.key,
            value: record.value,
            headers: record.headers,
        };
        let record = Envelope::new(EventKind::BatchSubmitted, &origin, "api", submitted).to_record();
        let payload =
            serde_json::to_value(openqq_runtime::kafka::to_event(&[on_topic(EventKind::BatchSubmitted, 0, record)]))
                .unwrap();
        let answer = invoke(&*handler, payload, || {}).await.unwrap();
        assert!(serde_json::to_value(&answer).unwrap()["batchItemFailures"].as_array().unwrap().is_empty());

        let lane = platform.topics.lane(EventKind::DesignSubmitted, true);
        let released = b.source.read(&lane, 0, 0, 10).await.unwrap();
        assert_eq!(released.len(), 2, "both items released onto the batch lane");
        let ends: Vec<_> = released
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let item = Envelope::decode(&r.value).unwrap();
                assert_eq!(item.batch.as_ref().map(|i| &i.batch_id), Some(&batch_id));
                let ended = BatchItemEnded { status: ItemStatus::Ready, verdict: Some(Verdict::Pass) };
                on_topic(
                    EventKind::BatchItemEnded,
                    i as u64,
                    Envelope::new(EventKind::BatchItemEnded, &item.cause(), "results", ended).to_record(),
                )
            })
            .collect();
        let payload = serde_json::to_value(openqq_runtime::kafka::to_event(&ends)).unwrap();
        let answer = invoke(&*handler, payload, || {}).await.unwrap();
        assert!(serde_json::to_value(&answer).unwrap()["batchItemFailures"].as_array().unwrap().is_empty());
        let view = b.store.batch(&tenant, &batch_id).await.unwrap().expect("the batch exists");
        assert_eq!((view.counts.ready, view.counts.total()), (2, 2), "{view:?}");
        assert!(view.counts.is_final(), "{view:?}");
        let dead = b.source.read(&platform.topics.dead_letter(), 0, 0, 10).await.unwrap();
        assert!(dead.is_empty(), "nothing dead-lettered");
    }

    #[tokio::test]
    async fn a_delivery_round_ends_before_lambdas_deadline_and_gets_its_usual_time_from_an_emulator() {
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let start = tokio::time::Instant::now();
        let about = |got: std::time::Duration, want: std::time::Duration| got.abs_diff(want).as_millis() < 500;
        let soon = invocation_deadline(now_ms + 10_000) - start;
        assert!(about(soon, std::time::Duration::from_secs(10) - DELIVERY_MARGIN), "{soon:?}");
        let later = invocation_deadline(now_ms + 600_000) - start;
        assert!(about(later, DELIVERY_ROUND), "{later:?}");
        let relative = invocation_deadline(600_000) - start;
        assert!(about(relative, DELIVERY_ROUND), "{relative:?}");
        assert!(is_scheduled(&serde_json::json!({"source": "aws.events", "detail-type": "Scheduled Event"})));
        assert!(!is_scheduled(&serde_json::json!({"eventSource": "aws:kafka", "records": {}})));
    }

    #[tokio::test]
    async fn the_authorizers_tenant_id_claim_is_passed_on_to_the_api() {
        let req = pass_on_gateway_claims(gateway_request(serde_json::json!({"tenant_id": "acme", "sub": "u1"}))).await;
        assert_eq!(req.extensions().get::<GatewayClaims>().and_then(|c| c.tenant_id.as_deref()), Some("acme"));
        let req = pass_on_gateway_claims(gateway_request(serde_json::json!({"sub": "u1"}))).await;
        assert_eq!(req.extensions().get::<GatewayClaims>().map(|c| c.tenant_id.clone()), Some(None));
        let plain = pass_on_gateway_claims(axum::extract::Request::new(axum::body::Body::empty())).await;
        assert!(plain.extensions().get::<GatewayClaims>().is_none(), "no gateway, no claims");
    }
}
