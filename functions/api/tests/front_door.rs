//! The per-tenant bounds at the front door, driven through the whole router in process: bodies
//! are read outside the worker pool within their deadline, a tenant's requests in progress,
//! bytes per window and open streams are capped, and nothing one tenant does there takes a
//! worker, a queue place or a slot from another.

use axum::body::{Body, Bytes};
use axum::http::{header, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use openqq_adapters::{Backends, Durability};
use openqq_api::auth::{GatewayClaims, Identity};
use openqq_api::{router, AppState, JwtKeys, LimitPolicy, PoolConfig, TenantLimits};
use openqq_core::{Quota, TenantId, Topics};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tower::ServiceExt;

struct App {
    router: Router,
    keys: Arc<JwtKeys>,
    _dir: tempfile::TempDir,
}

fn app(pool: PoolConfig, limits: TenantLimits, max_body_bytes: usize) -> App {
    app_with(pool, limits, max_body_bytes, Identity::Token)
}

fn app_with(pool: PoolConfig, limits: TenantLimits, max_body_bytes: usize, identity: Identity) -> App {
    let dir = tempfile::tempdir().unwrap();
    let backends = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    let keys = Arc::new(JwtKeys::from_secret(&[7; 32]).unwrap());
    let state = AppState::builder(
        backends.log.clone(),
        backends.store.clone(),
        backends.objects.clone(),
        backends.limiter.clone(),
        keys.clone(),
    )
    .limits(Arc::new(LimitPolicy::new(Quota { limit: 1000, window: Duration::from_secs(1) })))
    .identity(identity)
    .topics(Topics::new(""))
    .max_body_bytes(max_body_bytes)
    .feed_poll(Duration::from_millis(100))
    .tenant_limits(limits)
    .build();
    App { router: router(state, pool), keys, _dir: dir }
}

fn one_worker() -> PoolConfig {
    PoolConfig { workers: 1, queue: 0, ..PoolConfig::default() }
}

impl App {
    fn bearer(&self, tenant: &str) -> String {
        format!("Bearer {}", self.keys.issue(&TenantId::parse(tenant).unwrap(), Duration::from_secs(600)))
    }

    async fn send(&self, req: Request<Body>) -> Response {
        self.router.clone().oneshot(req).await.unwrap()
    }

    async fn get(&self, tenant: &str, path: &str) -> Response {
        let req = Request::get(path).header(header::AUTHORIZATION, self.bearer(tenant)).body(Body::empty()).unwrap();
        self.send(req).await
    }

    fn post(&self, tenant: &str, body: Body) -> Request<Body> {
        Request::post("/v1/designs")
            .header(header::AUTHORIZATION, self.bearer(tenant))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .unwrap()
    }

    /// Starts a POST whose body sends `{` and then nothing until the returned sender is dropped.
    fn stalled_post(&self, tenant: &str) -> (tokio::task::JoinHandle<Response>, mpsc::Sender<Bytes>) {
        let (tx, rx) = mpsc::channel::<Bytes>(1);
        tx.try_send(Bytes::from_static(b"{")).unwrap();
        let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
            let chunk = rx.recv().await?;
            Some((Ok::<_, std::io::Error>(chunk), rx))
        });
        let req = self.post(tenant, Body::from_stream(chunks));
        let router = self.router.clone();
        (tokio::spawn(async move { router.oneshot(req).await.unwrap() }), tx)
    }
}

fn header_of<'a>(resp: &'a Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).map(|v| v.to_str().unwrap())
}

async fn problem(resp: Response) -> serde_json::Value {
    assert_eq!(header_of(&resp, "content-type"), Some("application/problem+json"));
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_still_arriving_holds_no_worker_so_other_tenants_are_served() {
    let app = app(one_worker(), TenantLimits::default(), 10_000);
    let (slow, _sending) = app.stalled_post("slow");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // One worker, no queue: were the slow body read inside the pool, this would be a 503.
    assert_eq!(app.get("victim", "/v1/designs").await.status(), StatusCode::OK);
    assert!(!slow.is_finished(), "the slow body is still being read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_not_complete_within_the_body_timeout_gets_a_408_problem() {
    let limits = TenantLimits { body_timeout: Duration::from_millis(300), ..TenantLimits::default() };
    let app = app(one_worker(), limits, 10_000);
    let started = Instant::now();
    let (slow, _sending) = app.stalled_post("slow");
    let resp = slow.await.unwrap();
    assert_eq!(resp.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(2), "answered at the deadline ({:?})", started.elapsed());
    let p = problem(resp).await;
    assert_eq!(p["type"], "urn:openqq:problem:request-timeout", "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_tenant_concurrency_are_refused_at_once_with_429_and_others_are_not() {
    let limits = TenantLimits { concurrency: 2, ..TenantLimits::default() };
    let app = app(one_worker(), limits, 10_000);
    let held = [app.stalled_post("busy"), app.stalled_post("busy")];
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let refused = app.get("busy", "/v1/designs").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(started.elapsed() < Duration::from_millis(500), "refused at once");
    assert_eq!(header_of(&refused, "retry-after"), Some("1"));
    assert_eq!(problem(refused).await["type"], "urn:openqq:problem:too-many-in-flight");
    assert_eq!(app.get("calm", "/v1/designs").await.status(), StatusCode::OK, "another tenant has its own slots");
    // A finished request gives its slot back.
    let (task, sender) = held.into_iter().next().unwrap();
    drop(sender);
    let _ = task.await.unwrap();
    assert_eq!(app.get("busy", "/v1/designs").await.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_would_push_the_tenant_over_its_byte_quota_gets_429_with_ratelimit_headers() {
    let bytes = Quota { limit: 1000, window: Duration::from_secs(60) };
    let app = app(one_worker(), TenantLimits { bytes, ..TenantLimits::default() }, 800);
    let body = || Body::from(vec![b' '; 600]);
    // Not a design, but 600 bytes were sent and are counted: 400 is the answer, not 429.
    assert_eq!(app.send(app.post("heavy", body())).await.status(), StatusCode::BAD_REQUEST);
    let refused = app.send(app.post("heavy", body())).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header_of(&refused, "ratelimit-limit"),
        Some("1000"),
        "the byte quota's headers, not the request quota's"
    );
    assert_eq!(header_of(&refused, "ratelimit-remaining"), Some("400"));
    let retry: u64 = header_of(&refused, "retry-after").unwrap().parse().unwrap();
    assert!((59..=60).contains(&retry), "until the first body's bytes expire: {retry}");
    assert_eq!(problem(refused).await["type"], "urn:openqq:problem:byte-limited");
    assert_eq!(app.send(app.post("light", body())).await.status(), StatusCode::BAD_REQUEST, "others have their own");
    assert_eq!(app.get("heavy", "/v1/designs").await.status(), StatusCode::OK, "bodiless requests cost nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_still_413_whether_declared_or_sent() {
    let app = app(one_worker(), TenantLimits::default(), 100);
    let declared = app.post("t", Body::from(vec![b' '; 101]));
    assert_eq!(app.send(declared).await.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let chunks = futures_util::stream::iter((0..3).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 50]))));
    let resp = app.send(app.post("t", Body::from_stream(chunks))).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(problem(resp).await["type"], "urn:openqq:problem:payload-too-large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_tenant_cap_are_refused_and_an_open_stream_holds_no_worker() {
    let limits = TenantLimits { streams: 2, ..TenantLimits::default() };
    let app = app(one_worker(), limits, 10_000);
    let first = app.get("watcher", "/v1/events/stream").await;
    let second = app.get("watcher", "/v1/events/stream").await;
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    let third = app.get("watcher", "/v1/events/stream").await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(problem(third).await["type"], "urn:openqq:problem:too-many-streams");
    // One worker, no queue, two streams open: requests still find the worker free.
    assert_eq!(app.get("watcher", "/v1/designs").await.status(), StatusCode::OK);
    assert_eq!(app.get("other", "/v1/events/stream").await.status(), StatusCode::OK, "another tenant has its own");
    drop(first);
    assert_eq!(
        app.get("watcher", "/v1/events/stream").await.status(),
        StatusCode::OK,
        "a closed stream gives its slot back"
    );
}

#[tokio::test]
async fn behind_api_gateway_the_tenant_is_the_claim_its_authorizer_verified_and_nothing_else() {
    let app = app_with(one_worker(), TenantLimits::default(), 1 << 20, Identity::Gateway);
    let with_claims = |tenant_id: Option<&str>| {
        let mut req = Request::get("/v1/designs").body(Body::empty()).unwrap();
        req.extensions_mut().insert(GatewayClaims { tenant_id: tenant_id.map(str::to_owned), sub: None });
        req
    };
    let ok = app.send(with_claims(Some("acme"))).await;
    assert_eq!(ok.status(), StatusCode::OK, "the authorizer's tenant_id is the tenant");
    for (what, req) in [
        ("no claims", Request::get("/v1/designs").body(Body::empty()).unwrap()),
        ("claims without a tenant", with_claims(None)),
        ("a tenant id that is not one", with_claims(Some("../etc"))),
        (
            "a bearer token the API could verify, but no claims",
            Request::get("/v1/designs").header(header::AUTHORIZATION, app.bearer("acme")).body(Body::empty()).unwrap(),
        ),
    ] {
        assert_eq!(app.send(req).await.status(), StatusCode::UNAUTHORIZED, "{what}");
    }
    // And where the API checks tokens itself, claims put into a request count for nothing.
    let own = app_with(one_worker(), TenantLimits::default(), 1 << 20, Identity::Token);
    assert_eq!(own.send(with_claims(Some("acme"))).await.status(), StatusCode::UNAUTHORIZED);
}
