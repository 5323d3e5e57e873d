//! Work behind a reference is charged: a submission naming an upload weighs the upload's bytes
//! against the tenant's byte quota each time, as a body of that length would, so tiny requests
//! naming one large upload cannot make the validation function read and check it without limit.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use openqq_adapters::{Backends, Durability};
use openqq_api::{router, AppState, JwtKeys, LimitPolicy, PoolConfig, TenantLimits};
use openqq_core::{ObjectRef, Quota, TenantId, Topics};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

struct App {
    router: Router,
    keys: Arc<JwtKeys>,
    backends: Backends,
    _dir: tempfile::TempDir,
}

/// The API with a byte quota of `bytes` per minute per tenant.
fn app(bytes: u32) -> App {
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
    .topics(Topics::new(""))
    .max_body_bytes(bytes as usize / 4)
    .tenant_limits(TenantLimits {
        bytes: Quota { limit: bytes, window: Duration::from_secs(60) },
        ..TenantLimits::default()
    })
    .build();
    App { router: router(state, PoolConfig::default()), keys, backends, _dir: dir }
}

impl App {
    /// `tenant`'s upload of `len` bytes of netlist (a valid one, padded with spaces).
    async fn upload(&self, tenant: &str, len: usize) -> ObjectRef {
        let mut netlist = br#"{"modules": {"top": {"attributes": {"top": "1"}, "ports": {}, "cells": {}}}}"#.to_vec();
        netlist.resize(len, b' ');
        self.backends.objects.put_upload(&TenantId::parse(tenant).unwrap(), netlist).await.unwrap()
    }

    /// Submits a design naming `object` as its netlist.
    async fn submit(&self, tenant: &str, object: &ObjectRef) -> Response {
        let design = json!({
            "name": "by-ref",
            "target": {"device": "hx8k", "package": "ct256"},
            "netlist_ref": object,
            "constraints": {"format": "pcf", "text": ""},
        });
        let bearer = format!("Bearer {}", self.keys.issue(&TenantId::parse(tenant).unwrap(), Duration::from_secs(600)));
        let req = Request::post("/v1/designs")
            .header(header::AUTHORIZATION, bearer)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&design).unwrap()))
            .unwrap();
        self.router.clone().oneshot(req).await.unwrap()
    }
}

async fn problem(resp: Response) -> Value {
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_use_of_an_upload_weighs_its_bytes_against_the_byte_quota() {
    let app = app(100_000);
    let object = app.upload("heavy", 30_000).await;
    // Each submission is a body of about 300 bytes and 30,000 bytes of upload: three fit in
    // 100,000 bytes a minute, a fourth does not, though its own body is tiny.
    for _ in 0..3 {
        assert_eq!(app.submit("heavy", &object).await.status(), StatusCode::ACCEPTED);
    }
    let refused = app.submit("heavy", &object).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"), "it says when to retry");
    assert_eq!(refused.headers()["ratelimit-limit"], "100000", "the byte quota's headers");
    let p = problem(refused).await;
    assert_eq!(p["type"], "urn:openqq:problem:byte-limited", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("30000 bytes"), "{p}");
    // Another tenant's quota is its own.
    let theirs = app.upload("light", 30_000).await;
    assert_eq!(app.submit("light", &theirs).await.status(), StatusCode::ACCEPTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_larger_than_the_quota_weighs_half_of_it_so_it_is_used_at_most_twice_a_window() {
    let app = app(100_000);
    let object = app.upload("heavy", 400_000).await;
    assert_eq!(app.submit("heavy", &object).await.status(), StatusCode::ACCEPTED);
    assert_eq!(app.submit("heavy", &object).await.status(), StatusCode::TOO_MANY_REQUESTS, "half, plus the bodies");
}
