//! The `main` of each function on AWS Lambda: JSON logs in Lambda's shape, [`Settings`] from the environment, the
//! platform built once at cold start, then the Lambda runtime. A bad setting stops the cold start
//! with a sentence naming its variable.
//!
//! With `OPENQQ_DYNAMODB_TABLE` set every function shares one store; with `OPENQQ_KAFKA_BROKERS`
//! or `OPENQQ_MSK_CLUSTER_ARN` the log is Kafka / MSK. Without them the function falls back to the
//! embedded store and log in `OPENQQ_DATA_DIR` (default `/tmp/openqq` on Lambda): right for
//! `cargo lambda watch` on one machine, not for a fleet.
//!
//! The scheduler function ([`scheduler`]) is invoked by an EventBridge rule every minute and
//! fires due schedules through the same `Scheduler` as `openqq up`, a pass a second for most of
//! its minute (docs/DEPLOY.md, "Schedules on AWS").
//!
//! Nothing scrapes a function, so its metrics leave as CloudWatch embedded-metric-format lines on
//! stdout ([`openqq_telemetry::emf`]): recorded in memory during an invocation and printed at its
//! end, before the response leaves (the sandbox may be frozen as soon as it has).

use crate::{Platform, Settings};
use lambda_runtime::{service_fn, LambdaEvent};
use openqq_api::auth::GatewayClaims;
use openqq_api::schedules::runner::Scheduler;
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
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|jwt| {
            GatewayClaims { tenant_id: jwt.claims.get("tenant_id").cloned(), sub: jwt.claims.get("sub").cloned() }
        }),
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

/// How often a scheduler invocation runs a pass over the due schedules, as `openqq up`'s
/// scheduler does: a fire leaves within about this of its time.
pub const SCHEDULER_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// How long after the time its event was sent for (the minute of the rule's rate) a scheduler
/// invocation starts passes: the next minute's invocation finds this one ended, so one runner
/// runs at a time (reserved concurrency 1) and a late invocation runs shorter, never on into the
/// next one's minute.
pub const SCHEDULER_WINDOW: std::time::Duration = std::time::Duration::from_secs(55);
/// How long before Lambda's deadline a scheduler invocation stops starting passes, so the last
/// one ends before the function is stopped.
pub const SCHEDULER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The scheduler function, invoked every minute by an EventBridge rule: fires the due
/// schedules of every tenant from the store, a pass every [`SCHEDULER_EVERY`] for
/// [`SCHEDULER_WINDOW`] from the minute its event was sent for (ending [`SCHEDULER_MARGIN`]
/// before Lambda's deadline at the latest), through the same `Scheduler` and fire ledger as
/// `openqq up` (a fire is submitted once however many runners there are). An event that is not a
/// scheduled event is refused.
pub async fn scheduler() -> Result<(), Error> {
    let platform = Platform::build(settings()?).await.map_err(|e| format!("{e:#}"))?;
    let scheduler = Arc::new(Scheduler::new(scheduler_state(&platform)?));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let scheduler = scheduler.clone();
        async move {
            let until = passes_until(event_time(&event.payload), event.context.deadline);
            let answer = scheduled_passes(&scheduler, &event.payload, until).await;
            openqq_telemetry::emf::flush();
            answer.map(|done| serde_json::to_value(done).expect("a pass count serialises"))
        }
    }))
    .await
}

/// The API's state for the scheduler, with every setting the API function has, so a fire's
/// items are checked as `POST /v1/batches` checks them. The scheduler neither verifies nor issues
/// tokens; the state holds keys all the same, made from random bytes that never leave the
/// process, so no secret is needed and nothing signed elsewhere verifies with them.
fn scheduler_state(platform: &Platform) -> Result<openqq_api::AppState, Error> {
    let keys = JwtKeys::from_secret(&rand::random::<[u8; 32]>()).map_err(|e| e.to_string())?;
    Ok(platform.api_state(keys).build())
}

/// What one scheduler invocation did: its passes, those that failed, and the schedules handled.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
struct Passes {
    passes: u32,
    failed: u32,
    handled: usize,
}

/// One scheduler invocation: refused unless `payload` is a scheduled event; else passes every
/// [`SCHEDULER_EVERY`], the first at once, none started after `until`. A pass that fails is
/// logged and the next tries again (its fires are in the ledger or not at all); an invocation
/// whose every pass failed fails, so the function's errors show it.
async fn scheduled_passes(
    scheduler: &Scheduler,
    payload: &serde_json::Value,
    until: tokio::time::Instant,
) -> Result<Passes, Error> {
    if !is_scheduled(payload) {
        let source = payload.get("source").and_then(|s| s.as_str()).unwrap_or("none");
        return Err(format!(
            "the scheduler function runs on its EventBridge schedule only: this is not a scheduled event (source {source})"
        )
        .into());
    }
    let mut done = Passes::default();
    let mut last_error = None;
    let mut tick = tokio::time::interval(SCHEDULER_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        done.passes += 1;
        match scheduler.tick().await {
            Ok(handled) => done.handled += handled,
            Err(e) => {
                tracing::warn!(error = %e, "A pass of the scheduler failed; the next pass tries again.");
                done.failed += 1;
                last_error = Some(e);
            }
        }
        if tokio::time::Instant::now() + SCHEDULER_EVERY > until {
            break;
        }
    }
    match last_error {
        Some(e) if done.failed == done.passes => {
            Err(format!("every pass of the invocation ({}) failed to read the due schedules: {e}", done.passes).into())
        }
        _ => Ok(done),
    }
}

/// The time a scheduled event was sent for (`time`, which EventBridge writes as
/// `2026-11-30T12:00:00Z`), if the payload has one.
fn event_time(payload: &serde_json::Value) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(payload.get("time")?.as_str()?).ok()
}

/// When a scheduler invocation stops starting passes: [`SCHEDULER_WINDOW`] after the time its
/// event was sent for, and [`SCHEDULER_MARGIN`] before Lambda's deadline (milliseconds since the
/// epoch), whichever comes first. A deadline that is not in the future is a local emulator's
/// (see [`invocation_deadline`]): whoever invokes it there decides when passes run, so an
/// invocation runs one.
fn passes_until(event_time: Option<std::time::SystemTime>, deadline_ms: u64) -> tokio::time::Instant {
    let now = std::time::SystemTime::now();
    let start = tokio::time::Instant::now();
    let deadline = std::time::UNIX_EPOCH + std::time::Duration::from_millis(deadline_ms);
    let Ok(left) = deadline.duration_since(now) else { return start };
    let mut until = start + left.saturating_sub(SCHEDULER_MARGIN);
    if let Some(sent) = event_time {
        let window = (sent + SCHEDULER_WINDOW).duration_since(now).unwrap_or_default();
        until = until.min(start + window);
    }
    until
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
        let batch_id = BatchId::generate();
        let item = |d: &str| openqq_core::batch::StoredItem {
            custom_id: None,
            design_id: Some(openqq_core::DesignId::parse(d).unwrap()),
            revision: Some(1),
            submission: Some(serde_json::value::RawValue::from_string("{}".into()).unwrap()),
            rejected: None,
        };
        let items = openqq_core::batch::items_object(&batch_id, &[item("d0"), item("d1")]);
        let items_ref = b.objects.put(&tenant, items).await.unwrap();
        let digest = items_ref.digest.clone();
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
        assert!(
            b.objects.get(&tenant, &digest).await.is_err(),
            "the items object, this batch's alone, goes once the batch is created"
        );

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

    /// The scheduler function's invocation on embedded storage, as the Lambda runtime calls it:
    /// a scheduled event runs passes until its end (two in 1.5 s), the due schedule fires once
    /// (its batch published on `batch.submitted` and created for reads, the fire settled in the
    /// ledger with that batch), the second pass fires nothing again, and any other event is
    /// refused.
    #[tokio::test(flavor = "current_thread")]
    async fn a_scheduled_invocation_fires_a_due_schedule_once_over_its_passes_and_any_other_event_is_refused() {
        use openqq_core::schedule::{FireOutcome, RunnerState, StoredSchedule, Template};
        use std::time::{Duration, SystemTime, UNIX_EPOCH};
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::from_args(["--data-dir", dir.path().to_str().unwrap(), "--partitions", "1"]).unwrap();
        let platform = Platform::build(settings).await.unwrap();
        let b = &platform.backends;
        let tenant = openqq_core::TenantId::parse("acme").unwrap();
        // The template's item is checked at the fire as a batch item is: this one is refused, so
        // the fire's batch carries it rejected.
        let items_ref = b.objects.put(&tenant, b"{\"name\":\"nightly\"}\n".to_vec()).await.unwrap();
        // Hourly from an hour and ten seconds ago: its first fire is ten seconds late.
        let whole_seconds = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let start = UNIX_EPOCH + Duration::from_secs(whole_seconds - 3_610);
        let mut schedule = StoredSchedule {
            id: openqq_core::ScheduleId::generate(),
            name: "hourly".into(),
            config: serde_json::from_value(serde_json::json!({"expression": "rate(1 hour)"})).unwrap(),
            template: Template::Items { items_ref, items: 1 },
            created_at: start.into(),
            updated_at: start.into(),
            resumed_at: None,
            state: RunnerState::default(),
            next_due: None,
            version: 0,
        };
        let nominal = schedule.created_at + Duration::from_secs(3_600);
        schedule.next_due = openqq_api::schedules::runner::next_due(&schedule, &schedule.state, schedule.created_at);
        assert_eq!(schedule.next_due, Some(nominal));
        assert!(b.store.create_schedule(&tenant, &schedule).await.unwrap());

        let scheduler = Scheduler::new(scheduler_state(&platform).unwrap());
        let scheduled = serde_json::json!({"version": "0", "id": "s", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2026-11-30T12:00:00Z", "region": "us-east-1", "resources": [], "detail": {}});
        let began = tokio::time::Instant::now();
        let until = began + Duration::from_millis(1_500);
        let done = scheduled_passes(&scheduler, &scheduled, until).await.unwrap();
        assert_eq!(done, Passes { passes: 2, failed: 0, handled: 1 }, "the second pass found nothing due");
        assert!(tokio::time::Instant::now() < until, "no pass started after the invocation's end");

        let fires = b.store.fires(&tenant, &schedule.id, None, 10).await.unwrap().expect("the schedule exists");
        assert_eq!(fires.items.len(), 1, "{fires:?}");
        let fire = &fires.items[0];
        assert_eq!((fire.nominal_time, fire.outcome), (nominal, FireOutcome::Submitted), "{fire:?}");
        let batch = fire.batch_id.clone().expect("a submitted fire names its batch");
        let published = b.source.read(&platform.topics.of(EventKind::BatchSubmitted), 0, 0, 10).await.unwrap();
        assert_eq!(published.len(), 1, "one batch published");
        let envelope = openqq_core::Envelope::decode(&published[0].value).unwrap();
        assert_eq!((envelope.tenant_id, envelope.design_id), (tenant.clone(), batch.as_design()), "the fire's batch");
        let view = b.store.batch(&tenant, &batch).await.unwrap().expect("the batch was created for reads");
        assert_eq!(view.counts.total(), 1, "{view:?}");

        let kafka = serde_json::json!({"eventSource": "aws:kafka", "records": {}});
        let refused = scheduled_passes(&scheduler, &kafka, tokio::time::Instant::now()).await.unwrap_err();
        assert!(refused.to_string().contains("not a scheduled event"), "{refused}");
    }

    #[test]
    fn a_scheduler_invocation_starts_passes_for_55_seconds_from_its_minute_and_ends_before_lambdas_deadline() {
        use std::time::{Duration, SystemTime, UNIX_EPOCH};
        let now = SystemTime::now();
        let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let secs = Duration::from_secs;
        let start = tokio::time::Instant::now();
        let about =
            |got: tokio::time::Instant, want: Duration| (got - start).abs_diff(want) < Duration::from_millis(500);
        let timeout = ms(now + secs(60));
        assert!(about(passes_until(Some(now), timeout), SCHEDULER_WINDOW), "on time: the whole window");
        assert!(about(passes_until(Some(now - secs(20)), timeout), secs(35)), "started late: what is left of it");
        assert!(about(passes_until(Some(now - secs(120)), timeout), secs(0)), "a retried event's minute is over");
        assert!(about(passes_until(Some(now), ms(now + secs(30))), secs(25)), "the deadline comes first");
        assert!(about(passes_until(None, ms(now + secs(40))), secs(35)), "no time: until the deadline's margin");
        assert!(about(passes_until(Some(now), 600_000), secs(0)), "an emulator's deadline: one pass");
        let sent = event_time(&serde_json::json!({"source": "aws.events", "time": "2026-11-30T12:00:00Z"}));
        assert_eq!(sent, Some(UNIX_EPOCH + secs(1_796_040_000)));
        assert_eq!(event_time(&serde_json::json!({"time": "noon"})), None);
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
