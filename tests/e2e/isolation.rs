//! The tenant-isolation matrix: every route × {own tenant, other tenant, no token, expired
//! token, wrong signature, `alg: none`}, each with only the outcome docs/openapi.yaml documents.
//! Another tenant's design ids must be indistinguishable from ids that do not exist: same status,
//! same headers, same body apart from the correlation id.
//!
//! Bad tokens are minted here (HS256 by hand, with the data dir's secret), next to a control
//! token minted the same way that must be accepted, so a refusal is the server's judgement of
//! the defect and not a minting mistake.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use openqq_e2e::{blink_design, App, Client};
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A well-formed design id that no tenant has.
const UNKNOWN_ID: &str = "01a227d4-fb0d-7377-abd1-e342a03ff5cd";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Own,
    OtherTenant,
    NoToken,
    Expired,
    WrongSignature,
    AlgNone,
}

const CALLERS: [Caller; 6] =
    [Caller::Own, Caller::OtherTenant, Caller::NoToken, Caller::Expired, Caller::WrongSignature, Caller::AlgNone];

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A JWT with `header` and `claims`, HMAC-SHA256-signed with `secret` (unsigned when `None`).
fn mint(header: &Value, claims: &Value, secret: Option<&[u8]>) -> String {
    let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let signature = secret.map_or_else(String::new, |s| {
        let mut mac = Hmac::<Sha256>::new_from_slice(s).unwrap();
        mac.update(input.as_bytes());
        b64(&mac.finalize().into_bytes())
    });
    format!("{input}.{signature}")
}

fn claims(tenant: &str, iat: u64, exp: u64) -> Value {
    json!({"tenant_id": tenant, "sub": tenant, "iat": iat, "exp": exp})
}

/// The data dir's JWT secret, as `openqq up` reads it.
fn secret(server: &App) -> Vec<u8> {
    std::fs::read_to_string(server.data_dir.join("jwt-secret")).unwrap().trim().as_bytes().to_vec()
}

struct Tokens {
    own: String,
    other: String,
    expired: String,
    wrong_signature: String,
    alg_none: String,
}

impl Tokens {
    fn of(&self, caller: Caller) -> Option<&str> {
        match caller {
            Caller::Own => Some(&self.own),
            Caller::OtherTenant => Some(&self.other),
            Caller::NoToken => None,
            Caller::Expired => Some(&self.expired),
            Caller::WrongSignature => Some(&self.wrong_signature),
            Caller::AlgNone => Some(&self.alg_none),
        }
    }
}

/// What one request got back: status, content type, the header names (without the ones whose
/// presence depends on timing), and the JSON body without its correlation id.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    status: u16,
    content_type: String,
    header_names: BTreeSet<String>,
    body: Value,
}

async fn send(http: &reqwest::Client, url: &str, method: &str, token: Option<&str>, body: Option<&Value>) -> Answer {
    let mut req = http.request(method.parse().unwrap(), url).timeout(Duration::from_secs(10));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let content_type = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let header_names = resp.headers().keys().map(|k| k.as_str().to_owned()).filter(|k| k != "date").collect();
    if content_type == "text/event-stream" {
        // An endless stream: the status and headers are the answer.
        return Answer { status, content_type, header_names, body: Value::Null };
    }
    let text = resp.text().await.unwrap();
    let mut body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if let Some(o) = body.as_object_mut() {
        o.remove("correlation_id");
    }
    Answer { status, content_type, header_names, body }
}

/// A route of the API: method, path (with `{id}` for a design id) and body, if any.
struct Route {
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
}

impl Route {
    fn url(&self, base: &str, id: &str) -> String {
        format!("{base}{}", self.path.replace("{id}", id))
    }
    fn names_a_design(&self) -> bool {
        self.path.contains("{id}")
    }
    fn needs_token(&self) -> bool {
        self.path.starts_with("/v1/")
    }
    fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

fn routes() -> Vec<Route> {
    let mut revision = blink_design("isolated");
    revision["revision"] = json!(2);
    revision.as_object_mut().unwrap().remove("name");
    vec![
        Route { method: "POST", path: "/v1/designs", body: Some(blink_design("isolated")) },
        Route { method: "GET", path: "/v1/designs", body: None },
        Route { method: "GET", path: "/v1/designs/{id}", body: None },
        Route { method: "POST", path: "/v1/designs/{id}/revisions", body: Some(revision) },
        Route { method: "GET", path: "/v1/designs/{id}/report", body: None },
        Route { method: "GET", path: "/v1/designs/{id}/report/full", body: None },
        Route { method: "GET", path: "/v1/designs/{id}/events", body: None },
        Route { method: "GET", path: "/v1/events/stream", body: None },
        Route { method: "GET", path: "/healthz", body: None },
    ]
}

/// The status a successful call of `route` answers.
fn success(route: &Route) -> u16 {
    if route.method == "POST" {
        202
    } else {
        200
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_kind_of_caller_only_as_documented_and_other_tenants_ids_look_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let secret = secret(&server);
    let hs256 = json!({"alg": "HS256", "typ": "JWT"});
    let t = now();
    let tokens = Tokens {
        own: server.token("alpha"),
        other: server.token("beta"),
        expired: mint(&hs256, &claims("alpha", t - 7200, t - 3600), Some(&secret)),
        wrong_signature: mint(&hs256, &claims("alpha", t, t + 3600), Some(b"another-secret-of-at-least-32-bytes!")),
        alg_none: mint(&json!({"alg": "none", "typ": "JWT"}), &claims("alpha", t, t + 3600), None),
    };
    let http = reqwest::Client::new();
    let base = &server.url;

    // Controls: a token minted here with the right secret and fresh claims is accepted.
    let control = mint(&hs256, &claims("alpha", t, t + 3600), Some(&secret));
    let answer = send(&http, &format!("{base}/v1/designs"), "GET", Some(&control), None).await;
    assert_eq!(answer.status, 200, "a correctly minted token is accepted: {:?}", answer.body);

    // alpha's design, with a report and a timeline.
    let alpha = Client::new(base, &tokens.own);
    let (status, accepted) = alpha.post("/v1/designs", &blink_design("alpha's")).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    alpha.wait_for(&id, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();

    let mut unauthorized: Vec<(String, Answer)> = Vec::new();
    for route in routes() {
        for caller in CALLERS {
            let what = format!("{} as {caller:?}", route.label());
            let answer = send(&http, &route.url(base, &id), route.method, tokens.of(caller), route.body.as_ref()).await;
            let authenticated = matches!(caller, Caller::Own | Caller::OtherTenant);
            if !route.needs_token() {
                assert_eq!(answer.status, 200, "{what} is open to anyone: {:?}", answer.body);
                continue;
            }
            if !authenticated {
                assert_eq!(answer.status, 401, "{what}: {:?}", answer.body);
                assert_eq!(answer.content_type, "application/problem+json", "{what}");
                assert!(answer.header_names.contains("www-authenticate"), "{what} says how to authenticate");
                unauthorized.push((what, answer));
                continue;
            }
            if caller == Caller::Own || !route.names_a_design() {
                assert_eq!(answer.status, success(&route), "{what}: {:?}", answer.body);
                if route.path == "/v1/designs" && route.method == "GET" {
                    let listed = answer.body["designs"].as_array().unwrap().iter().any(|d| d["design_id"] == *id);
                    assert_eq!(listed, caller == Caller::Own, "{what}: alpha's design is listed to alpha only");
                }
                continue;
            }
            // Another tenant naming alpha's design: exactly what an unknown id gets.
            assert_eq!(answer.status, 404, "{what}: {:?}", answer.body);
            let unknown_url = route.url(base, UNKNOWN_ID);
            let unknown = send(&http, &unknown_url, route.method, Some(&tokens.other), route.body.as_ref()).await;
            assert_eq!(answer, unknown, "{what} is indistinguishable from an id that does not exist");
            let own_unknown = send(&http, &unknown_url, route.method, Some(&tokens.own), route.body.as_ref()).await;
            assert_eq!(answer, own_unknown, "{what} is what any tenant gets for an id that does not exist");
        }
    }

    // Every refusal of a bad or missing token reads the same: nothing tells which check failed.
    let (first_what, first) = &unauthorized[0];
    for (what, answer) in &unauthorized {
        assert_eq!(answer.body, first.body, "{what} and {first_what} are refused alike");
    }

    // Nothing an unauthenticated or foreign request sent was submitted: alpha has its design and
    // the one its own POST made, beta only its own.
    let beta = Client::new(base, &tokens.other);
    for (client, want) in [(&alpha, 2), (&beta, 1)] {
        let count = || async { client.get("/v1/designs").await.unwrap().1["designs"].as_array().unwrap().len() };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while count().await < want && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(count().await, want, "designs of {}", if want == 2 { "alpha" } else { "beta" });
    }
    let design = alpha.wait_for(&id, Duration::from_secs(10), |d| d["revision"] == 2).await.unwrap();
    assert_eq!(design["name"], "alpha's", "a revision without a name keeps the design's name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_is_scoped_to_its_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let http = reqwest::Client::new();
    let post = |token: String| {
        http.post(format!("{}/v1/designs", server.url))
            .bearer_auth(token)
            .header("idempotency-key", "shared-key-1")
            .json(&blink_design("same body"))
            .send()
    };
    let alpha: Value = post(server.token("alpha")).await.unwrap().json().await.unwrap();
    let alpha_again: Value = post(server.token("alpha")).await.unwrap().json().await.unwrap();
    let beta: Value = post(server.token("beta")).await.unwrap().json().await.unwrap();
    assert_eq!(alpha_again["design_id"], alpha["design_id"], "the same tenant's retry gets the same answer");
    assert!(beta["design_id"].is_string(), "{beta}");
    assert_ne!(beta["design_id"], alpha["design_id"], "another tenant's key never answers with alpha's design");
}

/// `/metrics` names tenants (their request counts), so the API's listener serves it to no one,
/// with a token or without: it is served on a listener of its own (`--metrics-listen`, loopback
/// by default), which serves nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_listener_serves_no_metrics_so_no_caller_learns_a_tenant_id_there() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let named = Client::new(&server.url, &server.token("tenant-named-in-metrics"));
    let (status, accepted) = named.post("/v1/designs", &blink_design("counted")).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let http = reqwest::Client::new();
    let metrics_url = server.metrics_url.clone().expect("openqq up serves metrics by default");
    let scraped = http.get(&metrics_url).send().await.unwrap().text().await.unwrap();
    assert!(scraped.contains("tenant=\"tenant-named-in-metrics\""), "the metrics listener names the tenant");
    for path in ["/metrics", "/metrics/", "/v1/metrics"] {
        for token in [None, Some(named.token.as_str())] {
            let answer = send(&http, &format!("{}{path}", server.url), "GET", token, None).await;
            assert_eq!(answer.status, 404, "GET {path} on the API's listener: {:?}", answer.body);
            assert!(!answer.body.to_string().contains("tenant-named-in-metrics"), "{:?}", answer.body);
        }
    }
    let metrics_base = metrics_url.trim_end_matches("/metrics");
    for path in ["/v1/designs", "/healthz", "/"] {
        let answer = send(&http, &format!("{metrics_base}{path}"), "GET", Some(&named.token), None).await;
        assert_eq!(answer.status, 404, "the metrics listener serves /metrics only, not {path}");
    }
}
