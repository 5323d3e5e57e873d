//! Webhooks a tenant registers through the API, delivered by `openqq up` from the store's outbox:
//! signed (and verifiable with the secret the API showed once), only the kinds asked for, only to
//! the tenant's own endpoints, retried on the schedule, dead-lettered after the last attempt and
//! shown to the tenant, never lost or sent under a new id across a SIGKILL, and never sent to a
//! private address unless the runner allows it. Receivers are small HTTP servers on 127.0.0.1
//! that answer as each test scripts them.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use openqq_e2e::chaos::receiver::read_request;
use openqq_e2e::{blink_design, Client, Server};
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request a receiver got: lower-cased headers, the body, and when it arrived.
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a delivery's body is JSON")
    }
}

/// How a receiver answers one request: a status after a delay (`None`: never answer).
#[derive(Clone, Copy)]
pub struct Reply {
    pub status: u16,
    pub after: Option<Duration>,
}

pub const OK: Reply = Reply { status: 204, after: Some(Duration::ZERO) };

/// A receiver on 127.0.0.1: answers each request with the next scripted reply (then `default`),
/// and forwards the request as it arrives (before answering).
pub async fn receiver(script: Vec<Reply>, default: Reply) -> (String, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    let script = Arc::new(Mutex::new(VecDeque::from(script)));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (tx, script) = (tx.clone(), script.clone());
            tokio::spawn(async move {
                let Some((headers, body)) = read_request(&mut sock).await else { return };
                let reply = script.lock().unwrap().pop_front().unwrap_or(default);
                let _ = tx.send(Received { headers, body, at: Instant::now() });
                let Some(after) = reply.after else {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                };
                tokio::time::sleep(after).await;
                let head = format!("HTTP/1.1 {} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n", reply.status);
                let _ = sock.write_all(head.as_bytes()).await;
            });
        }
    });
    (url, rx)
}

/// Registers a webhook; its id and its signing key (decoded from the `whsec_` secret).
pub async fn register(c: &Client, url: &str, kinds: &[&str]) -> (String, Vec<u8>) {
    let (status, body) = c.post("/v1/webhooks", &json!({ "url": url, "kinds": kinds })).await.unwrap();
    assert_eq!(status, 201, "{body}");
    let secret = body["secret"].as_str().unwrap().strip_prefix("whsec_").expect("a Standard Webhooks secret");
    (body["id"].as_str().unwrap().to_owned(), B64.decode(secret).unwrap())
}

/// Whether `r` carries a `v1` signature by `key` over `id.timestamp.body`.
pub fn signed_by(r: &Received, key: &[u8]) -> bool {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(format!("{}.{}.", r.headers["webhook-id"], r.headers["webhook-timestamp"]).as_bytes());
    mac.update(&r.body);
    let expected = format!("v1,{}", B64.encode(mac.finalize().into_bytes()));
    r.headers["webhook-signature"].split(' ').any(|s| s == expected)
}

pub async fn next(rx: &mut mpsc::UnboundedReceiver<Received>, within: Duration) -> Received {
    tokio::time::timeout(within, rx.recv()).await.expect("a delivery arrives in time").expect("the receiver runs")
}

async fn deliveries(c: &Client, hook: &str) -> Vec<Value> {
    let (status, body) = c.get(&format!("/v1/webhooks/{hook}/deliveries")).await.unwrap();
    assert_eq!(status, 200, "{body}");
    body["items"].as_array().unwrap().clone()
}

/// Polls the webhook's deliveries until `done` holds for them.
async fn deliveries_until(c: &Client, hook: &str, within: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let items = deliveries(c, hook).await;
        if done(&items) {
            return items;
        }
        assert!(Instant::now() < deadline, "the deliveries did not settle: {items:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn start(dir: &std::path::Path, extra: &[&str]) -> Server {
    let mut args = vec!["--webhooks-allow-private"];
    args.extend_from_slice(extra);
    Server::start(dir, "127.0.0.1:0", &args).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_webhook_receives_the_kinds_it_asked_for_signed_and_no_other_tenants_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let acme = Client::new(&server.url, &server.token("acme"));
    let globex = Client::new(&server.url, &server.token("globex"));
    let (acme_url, mut acme_hooks) = receiver(vec![], OK).await;
    let (globex_url, mut globex_hooks) = receiver(vec![], OK).await;
    let (hook, key) = register(&acme, &acme_url, &["design.submitted", "results.ready"]).await;
    register(&globex, &globex_url, &["design.submitted", "validation.started", "results.ready"]).await;

    let (_, accepted) = acme.post("/v1/designs", &blink_design("hooked")).await.unwrap();
    let id = accepted["design_id"].as_str().unwrap();
    let mut kinds = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = next(&mut acme_hooks, Duration::from_secs(20)).await;
        let body = r.json();
        assert!(signed_by(&r, &key), "signed with the secret the API showed at registration");
        assert_eq!(body["data"]["design_id"], id);
        assert_eq!(body["type"], body["data"]["kind"]);
        kinds.push(body["type"].as_str().unwrap().to_owned());
        ids.push(r.headers["webhook-id"].clone());
    }
    kinds.sort();
    assert_eq!(kinds, ["design.submitted", "results.ready"], "only the kinds asked for");
    let listed = deliveries_until(&acme, &hook, Duration::from_secs(5), |d| {
        d.len() == 2 && d.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    let mut listed_ids: Vec<String> = listed.iter().map(|d| d["message_id"].as_str().unwrap().to_owned()).collect();
    listed_ids.sort();
    ids.sort();
    assert_eq!(listed_ids, ids, "the tenant sees each delivery under the webhook-id its endpoint got");
    assert!(listed.iter().all(|d| d["attempts"] == 1 && d["last_status_code"] == 204), "{listed:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(800), acme_hooks.recv()).await.is_err(),
        "validation.started was not asked for"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), globex_hooks.recv()).await.is_err(),
        "globex's endpoint hears nothing of acme's design"
    );
    let (status, _) = globex.get(&format!("/v1/webhooks/{hook}/deliveries")).await.unwrap();
    assert_eq!(status, 404, "another tenant cannot read acme's webhook");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_endpoint_gets_retries_and_after_the_last_attempt_the_delivery_is_dead_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--webhook-retry-delays", "200ms,200ms"]);
    let acme = Client::new(&server.url, &server.token("acme"));
    let fail = |status| Reply { status, after: Some(Duration::ZERO) };
    let (flaky_url, mut flaky) = receiver(vec![fail(500), fail(503)], OK).await;
    let (broken_url, mut broken) = receiver(vec![], fail(500)).await;
    let (flaky_hook, key) = register(&acme, &flaky_url, &["results.ready"]).await;
    let (broken_hook, _) = register(&acme, &broken_url, &["results.ready"]).await;

    acme.post("/v1/designs", &blink_design("retried")).await.unwrap();
    let attempts: Vec<Received> = received(&mut flaky, 3).await;
    let first_id = &attempts[0].headers["webhook-id"];
    assert!(attempts.iter().all(|r| &r.headers["webhook-id"] == first_id), "every attempt carries one webhook-id");
    assert!(attempts.iter().all(|r| signed_by(r, &key)));
    let gap = attempts[1].at - attempts[0].at;
    assert!(gap >= Duration::from_millis(150), "the retry waited for its delay (±20 %): {gap:?}");
    let flaky_listed =
        deliveries_until(&acme, &flaky_hook, Duration::from_secs(5), |d| d.len() == 1 && d[0]["status"] == "delivered")
            .await;
    assert_eq!(
        (flaky_listed[0]["attempts"].as_u64(), flaky_listed[0]["last_status_code"].as_u64()),
        (Some(3), Some(204))
    );

    received(&mut broken, 3).await;
    let dead =
        deliveries_until(&acme, &broken_hook, Duration::from_secs(5), |d| d.len() == 1 && d[0]["status"] == "dead")
            .await;
    assert_eq!((dead[0]["attempts"].as_u64(), dead[0]["last_status_code"].as_u64()), (Some(3), Some(500)));
    assert!(dead[0]["last_error"].as_str().is_some_and(|e| !e.is_empty()), "{dead:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(1000), broken.recv()).await.is_err(),
        "no attempt after the last one"
    );
}

async fn received(rx: &mut mpsc::UnboundedReceiver<Received>, n: usize) -> Vec<Received> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(next(rx, Duration::from_secs(20)).await);
    }
    out
}

/// Notes the event a request carried under its webhook-id; one webhook-id never carries two events.
fn record(seen: &mut HashMap<String, (String, String)>, key: &[u8], r: Received) {
    assert!(signed_by(&r, key));
    let body = r.json();
    let event = (body["type"].as_str().unwrap().to_owned(), body["data"]["design_id"].as_str().unwrap().to_owned());
    let first = seen.entry(r.headers["webhook-id"].clone()).or_insert_with(|| event.clone());
    assert_eq!(*first, event, "one webhook-id, one event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_cut_off_by_sigkill_is_delivered_after_the_restart_under_the_same_webhook_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &["--webhook-timeout", "1s"]);
    let acme = Client::new(&server.url, &server.token("acme"));
    // The first request hangs (the runner dies while waiting for it); later ones are answered.
    let (url, mut hooks) = receiver(vec![Reply { status: 204, after: None }], OK).await;
    let (hook, key) = register(&acme, &url, &["design.submitted", "results.ready"]).await;

    acme.post("/v1/designs", &blink_design("cut-off")).await.unwrap();
    let cut = next(&mut hooks, Duration::from_secs(20)).await;
    server.kill9();
    server.restart().unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    // webhook-id → the event it carried, for every request the receiver got.
    let mut seen: HashMap<String, (String, String)> = HashMap::new();
    record(&mut seen, &key, cut);
    let deadline = Instant::now() + Duration::from_secs(60);
    let cut_id = seen.keys().next().unwrap().clone();
    let mut redelivered = false;
    while !(seen.len() == 2 && redelivered) {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = next(&mut hooks, left).await;
        redelivered |= r.headers["webhook-id"] == cut_id;
        record(&mut seen, &key, r);
    }
    let listed = deliveries_until(&acme, &hook, Duration::from_secs(10), |d| {
        d.len() == 2 && d.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    let listed: Vec<&str> = listed.iter().map(|d| d["message_id"].as_str().unwrap()).collect();
    assert!(listed.contains(&cut_id.as_str()), "the cut-off delivery kept its webhook-id");
    // Nothing but the two events, whatever was re-read after the restart. A delivery whose answer
    // came just before the kill, unrecorded, is sent again: under its own webhook-id, which the
    // receiver de-duplicates on ([`record`] holds each id to one event).
    while let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(1500), hooks.recv()).await {
        record(&mut seen, &key, r);
    }
    assert_eq!(seen.len(), 2, "one webhook-id per event: {seen:?}");
    let mut events: Vec<&str> = seen.values().map(|(kind, _)| kind.as_str()).collect();
    events.sort();
    assert_eq!(events, ["design.submitted", "results.ready"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_and_metadata_targets_are_refused_at_registration_without_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    for url in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        format!("http://[::1]:{port}/hook"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.8/hook".to_owned(),
        "http://192.168.1.1/hook".to_owned(),
        "ftp://example.com/hook".to_owned(),
    ] {
        let (status, body) =
            acme.post("/v1/webhooks", &json!({ "url": url, "kinds": ["results.ready"] })).await.unwrap();
        assert_eq!(status, 422, "{url} is refused: {body}");
        assert_eq!(body["field"], "url", "{body}");
    }
    let (status, body) =
        acme.post("/v1/webhooks", &json!({ "url": "https://example.com/x", "kinds": [] })).await.unwrap();
    assert_eq!((status, body["field"].as_str()), (422, Some("kinds")), "{body}");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), listener.accept()).await.is_err(),
        "nothing connected to the private address"
    );
    let (_, listed) = acme.get("/v1/webhooks").await.unwrap();
    assert_eq!(listed["items"], json!([]), "nothing was registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_and_the_old_one_both_sign_during_the_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let acme = Client::new(&server.url, &server.token("acme"));
    let (url, mut hooks) = receiver(vec![], OK).await;
    let (hook, old_key) = register(&acme, &url, &["results.ready"]).await;
    let (status, rotated) =
        acme.post(&format!("/v1/webhooks/{hook}/rotate"), &json!({ "overlap_seconds": 600 })).await.unwrap();
    assert_eq!(status, 200, "{rotated}");
    let new_key = B64.decode(rotated["secret"].as_str().unwrap().strip_prefix("whsec_").unwrap()).unwrap();
    assert_ne!(new_key, old_key);
    let (status, _) = acme.post(&format!("/v1/webhooks/{hook}/test"), &json!({})).await.unwrap();
    assert_eq!(status, 202);
    let r = next(&mut hooks, Duration::from_secs(10)).await;
    assert!(signed_by(&r, &new_key) && signed_by(&r, &old_key), "both signatures: {}", r.headers["webhook-signature"]);
    let (_, shown) = acme.get(&format!("/v1/webhooks/{hook}")).await.unwrap();
    assert!(shown.get("secret").is_none(), "a read never shows a secret: {shown}");

    let deleted = acme.http.delete(format!("{}/v1/webhooks/{hook}", acme.base)).bearer_auth(&acme.token).send();
    assert_eq!(deleted.await.unwrap().status().as_u16(), 204);
    let (status, _) = acme.get(&format!("/v1/webhooks/{hook}")).await.unwrap();
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_hangs_does_not_delay_another_tenants_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--webhook-timeout", "3s", "--rate-limit", "1000/1s"]);
    let acme = Client::new(&server.url, &server.token("acme"));
    let globex = Client::new(&server.url, &server.token("globex"));
    let (globex_url, mut globex_hooks) = receiver(vec![], OK).await;
    register(&globex, &globex_url, &["results.ready"]).await;

    // Alone: how long globex waits for its delivery.
    let alone = delivery_wait(&globex, &mut globex_hooks, "alone").await;

    // acme's endpoint never answers (each attempt runs into the timeout), and acme makes work.
    let hang = Reply { status: 204, after: None };
    let (acme_url, _acme_hooks) = receiver(vec![], hang).await;
    for kinds in [["design.submitted", "validation.started"], ["validation.finished", "results.ready"]] {
        register(&acme, &acme_url, &kinds).await;
    }
    let mut noise = Vec::new();
    for i in 0..8 {
        let (_, accepted) = acme.post("/v1/designs", &blink_design(&format!("noise-{i}"))).await.unwrap();
        noise.push(accepted["design_id"].as_str().unwrap().to_owned());
    }
    // Once acme's designs are done only its deliveries are left in play: 32 of them, hanging.
    for id in &noise {
        acme.wait_for(id, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
    }
    let busy = delivery_wait(&globex, &mut globex_hooks, "busy").await;
    let ratio = busy.as_secs_f64() / alone.as_secs_f64();
    eprintln!("globex's delivery: {alone:?} alone, {busy:?} beside a hanging endpoint ({ratio:.2}x)");
    // Waiting behind acme's attempts would take their 3 s timeout; a delivery that goes out at
    // once takes tens of milliseconds, plus what the machine's load adds to either measurement.
    assert!(
        busy < alone * 3 + Duration::from_secs(1),
        "a hanging endpoint of another tenant delays globex's delivery: {alone:?} alone, {busy:?} beside it"
    );
}

/// From a submission's 202 to its `results.ready` delivery.
async fn delivery_wait(c: &Client, hooks: &mut mpsc::UnboundedReceiver<Received>, name: &str) -> Duration {
    let started = Instant::now();
    let (status, accepted) = c.post("/v1/designs", &blink_design(name)).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    loop {
        let r = next(hooks, Duration::from_secs(30)).await;
        if r.json()["data"]["design_id"] == accepted["design_id"] {
            return r.at - started;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_may_subscribe_to_the_checks_of_a_design_given_as_source_and_hears_each_verdict_and_time() {
    if !openqq_e2e::hdl::tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let acme = Client::new(&server.url, &server.token("acme"));
    let (url, mut hooks) = receiver(vec![], OK).await;
    register(&acme, &url, &["synthesis.finished", "simulation.finished", "equivalence.finished"]).await;

    let job = openqq_e2e::hdl::counter_job("design.v", true, Some("not_equivalent.v"));
    let id = openqq_e2e::hdl::submit(&acme, &job).await;
    let mut heard = Vec::new();
    for _ in 0..3 {
        let body = next(&mut hooks, Duration::from_secs(60)).await.json();
        assert_eq!(body["data"]["design_id"], id.as_str());
        let took = body["data"]["elapsed_ms"].as_u64();
        assert!(took.is_some_and(|ms| ms > 0 && ms < 60_000), "how long the check took: {body}");
        heard.push((body["type"].as_str().unwrap().to_owned(), body["data"]["verdict"].clone()));
    }
    heard.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        heard,
        [
            ("equivalence.finished".to_owned(), json!("fail")),
            ("simulation.finished".to_owned(), json!("pass")),
            ("synthesis.finished".to_owned(), json!("pass")),
        ],
        "each check's verdict, the failing proof included"
    );
    let (status, problem) =
        acme.post("/v1/webhooks", &json!({"url": url, "kinds": ["synthesis.requested"]})).await.unwrap();
    assert_eq!(status, 422, "a topic's kind is not in the feed: {problem}");
}
