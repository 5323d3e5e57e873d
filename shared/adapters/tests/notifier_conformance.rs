//! The notifiers against the notifier conformance suite: the broadcast notifier (the live
//! stream), the webhook notifier (each tenant's endpoint a receiver on 127.0.0.1 that verifies
//! the Standard Webhooks signature with that tenant's secret), and the fan-out of both, as
//! `openqq up` wires them.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use openqq_adapters::conformance::notifier::{self, Capabilities, Delivery, Harness, Observer, FAILURE_TAKES};
use openqq_adapters::conformance::unique;
use openqq_adapters::{BroadcastNotifier, Endpoint, FanoutNotifier, WebhookNotifier, WebhookSecret};
use openqq_core::{Notifier, TenantId};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};

/// Requests a receiver reads at most (a notification is a few hundred bytes).
const MAX_REQUEST: usize = 64 * 1024;

fn tenant(prefix: &str) -> TenantId {
    TenantId::parse(unique(prefix)).unwrap()
}

/// A signing key of 32 bytes, different per tenant, and its `whsec_` form.
fn secret_for(tenant: &TenantId) -> (Vec<u8>, WebhookSecret) {
    let key: Vec<u8> = tenant.as_str().bytes().cycle().take(32).collect();
    let secret = WebhookSecret::parse(&format!("whsec_{}", B64.encode(&key))).unwrap();
    (key, secret)
}

/// One HTTP/1.1 request off `stream`: its headers (names lower-cased) and its body.
async fn read_request(stream: &mut TcpStream) -> Option<(HashMap<String, String>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > MAX_REQUEST {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let headers: HashMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    if length > MAX_REQUEST {
        return None;
    }
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((headers, buf[head_end..head_end + length].to_vec()))
}

/// What the receiver of `owner` makes of one delivery: the Standard Webhooks checks (id,
/// timestamp, HMAC-SHA256 over `{id}.{timestamp}.{body}` with the owner's key), then the body.
fn verify(owner: &TenantId, key: &[u8], headers: &HashMap<String, String>, body: &[u8]) -> Delivery {
    let mut problems = Vec::new();
    let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
    let (id, timestamp, signature) = (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"));
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let want = format!("v1,{}", B64.encode(mac.finalize().into_bytes()));
    if !signature.split(' ').any(|s| s == want) {
        problems.push(format!("the signature {signature:?} is not the owner's {want:?}"));
    }
    match timestamp.parse::<i64>() {
        Ok(ts) if (chrono::Utc::now().timestamp() - ts).abs() <= 300 => {}
        _ => problems.push(format!("the timestamp {timestamp:?} is not within five minutes of now")),
    }
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if json["type"] != "results.ready" {
        problems.push(format!("the type is {}", json["type"]));
    }
    let data = &json["data"];
    let event_id = data["event_id"].as_str().and_then(|s| uuid::Uuid::parse_str(s).ok()).unwrap_or_default();
    if id != event_id.to_string() {
        problems.push(format!("webhook-id {id:?} is not the event id {event_id}"));
    }
    Delivery {
        observer: Observer::Endpoint(owner.clone()),
        event_id,
        tenant_id: data["tenant_id"].as_str().and_then(|s| TenantId::parse(s).ok()).unwrap_or_else(|| owner.clone()),
        revision: data["revision"].as_u64().unwrap_or_default(),
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

/// `owner`'s endpoint on a free loopback port: each request verified and reported, then 204.
async fn receiver(owner: TenantId, key: Vec<u8>, report: UnboundedSender<Delivery>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (owner, key, report) = (owner.clone(), key.clone(), report.clone());
            tokio::spawn(async move {
                while let Some((headers, body)) = read_request(&mut stream).await {
                    let _ = report.send(verify(&owner, &key, &headers, &body));
                    let answered = stream.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").await;
                    if answered.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// An endpoint that takes every request and answers none for [`FAILURE_TAKES`] and more, so each
/// attempt ends in the notifier's timeout.
async fn failing_receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    url
}

/// The webhook notifier with an endpoint for each of two tenants and a failing one; the timeout
/// per attempt is [`FAILURE_TAKES`], so a failing delivery holds its slot at least that long.
async fn webhooks(report: &UnboundedSender<Delivery>) -> (Arc<WebhookNotifier>, Vec<TenantId>, TenantId) {
    let tenants = vec![tenant("a"), tenant("b")];
    let failing = tenant("failing");
    let mut endpoints = HashMap::new();
    for t in &tenants {
        let (key, secret) = secret_for(t);
        endpoints.insert(t.clone(), Endpoint { url: receiver(t.clone(), key, report.clone()).await, secret });
    }
    endpoints.insert(failing.clone(), Endpoint { url: failing_receiver().await, secret: secret_for(&failing).1 });
    (WebhookNotifier::start(endpoints, FAILURE_TAKES, 2).unwrap(), tenants, failing)
}

/// A broadcast notifier with one live-stream subscriber reporting what it receives.
fn stream(report: &UnboundedSender<Delivery>) -> Arc<BroadcastNotifier> {
    let broadcast = Arc::new(BroadcastNotifier::new(1024));
    let mut subscriber = broadcast.subscribe();
    let report = report.clone();
    tokio::spawn(async move {
        while let Ok(n) = subscriber.recv().await {
            let delivery = Delivery {
                observer: Observer::Stream,
                event_id: n.event_id,
                tenant_id: n.tenant_id,
                revision: n.revision,
                problem: None,
            };
            let _ = report.send(delivery);
        }
    });
    broadcast
}

/// Deliveries to a failing endpoint outstanding at once while the others must still arrive: more
/// than the webhook notifier's 16 parallel deliveries, which one tenant's hanging endpoint must
/// never fill (it holds at most its own share).
const FAILING_IN_FLIGHT: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broadcast_notifier_passes_the_notifier_suite() {
    let (report, deliveries) = mpsc::unbounded_channel();
    let notifier = stream(&report);
    let harness = Harness { notifier, deliveries, tenants: vec![tenant("a"), tenant("b")], failing: None };
    let capabilities = Capabilities { stream: true, ..Capabilities::default() };
    notifier::run(harness, &capabilities).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_notifier_passes_the_notifier_suite() {
    let (report, deliveries) = mpsc::unbounded_channel();
    let (notifier, tenants, failing) = webhooks(&report).await;
    let harness = Harness { notifier, deliveries, tenants, failing: Some(failing) };
    let capabilities =
        Capabilities { endpoints: true, failing_in_flight: FAILING_IN_FLIGHT, ..Capabilities::default() };
    notifier::run(harness, &capabilities).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fanout_of_the_stream_and_webhooks_passes_the_notifier_suite() {
    let (report, deliveries) = mpsc::unbounded_channel();
    let (webhooks, tenants, failing) = webhooks(&report).await;
    let notifier = Arc::new(FanoutNotifier(vec![stream(&report) as Arc<dyn Notifier>, webhooks]));
    let harness = Harness { notifier, deliveries, tenants, failing: Some(failing) };
    let capabilities =
        Capabilities { stream: true, endpoints: true, endpoint_order: false, failing_in_flight: FAILING_IN_FLIGHT };
    notifier::run(harness, &capabilities).await;
}

/// The receivers' checks mean something: a delivery signed with another tenant's key is
/// reported as a problem.
#[test]
fn a_delivery_signed_with_another_tenants_key_is_reported() {
    let (owner, other) = (tenant("owner"), tenant("other"));
    let body = br#"{"type":"results.ready","data":{}}"#;
    let ts = chrono::Utc::now().timestamp();
    let signature = openqq_adapters::webhook::sign(&secret_for(&other).1 .0, "id", ts, body);
    let headers: HashMap<String, String> = [
        ("webhook-id".to_owned(), "id".to_owned()),
        ("webhook-timestamp".to_owned(), ts.to_string()),
        ("webhook-signature".to_owned(), signature),
    ]
    .into();
    let seen = verify(&owner, &secret_for(&owner).0, &headers, body);
    assert!(seen.problem.as_ref().is_some_and(|p| p.contains("signature")), "{seen:?}");
}

/// A notifier that hands every notification to the first tenant's endpoint.
struct Misrouting {
    first: TenantId,
    report: UnboundedSender<Delivery>,
}

#[async_trait::async_trait]
impl Notifier for Misrouting {
    async fn notify(&self, n: &openqq_core::Notification) -> openqq_core::ports::PortResult<()> {
        let observer = Observer::Endpoint(self.first.clone());
        let delivery = Delivery {
            observer,
            event_id: n.event_id,
            tenant_id: n.tenant_id.clone(),
            revision: n.revision,
            problem: None,
        };
        let _ = self.report.send(delivery);
        Ok(())
    }
}

/// The suite means something: a notifier that sends one tenant's notifications to another's
/// endpoint fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "a tenant's endpoint receives only that tenant's notifications")]
async fn the_suite_fails_a_notifier_that_delivers_to_another_tenants_endpoint() {
    let (report, deliveries) = mpsc::unbounded_channel();
    let tenants = vec![tenant("a"), tenant("b")];
    let notifier = Arc::new(Misrouting { first: tenants[0].clone(), report });
    let harness = Harness { notifier, deliveries, tenants, failing: None };
    notifier::run(harness, &Capabilities { endpoints: true, ..Capabilities::default() }).await;
}
