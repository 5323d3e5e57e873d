//! The API is unsurprising: a design is readable right after its 202; revisions only for designs
//! that exist; one design id however a UUID is written; `Idempotency-Key` on every POST; JWT
//! `nbf`, `iat`, `iss` and `aud` checked, and 401s that reveal nothing.
//!
//! The design-job function is held back by a long batch window, so every read here that comes
//! right after a 202 happens before the design is materialised.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use hmac::{Hmac, Mac};
use openqq_e2e::{blink_design, openqq_bin, Client, Server};
use serde_json::{json, Value};
use sha2::Sha256;
use std::time::Duration;

/// Holds the design-job function back: a partial batch waits this long for more records.
const SLOW_CONSUMERS: [&str; 4] = ["--batch-window", "4s", "--batch-size", "1000"];

/// The detail of every 401.
const DETAIL_401: &str = "send a valid bearer token: `Authorization: Bearer <token>` (see `openqq token`)";

const SECRET: &str = "an-e2e-secret-of-at-least-thirty-two-bytes";

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// An HS256 token over `claims` with `SECRET`, or with the header `header` as given.
fn sign(header: &Value, claims: &Value) -> String {
    let head = B64URL.encode(serde_json::to_vec(header).unwrap());
    let body = B64URL.encode(serde_json::to_vec(claims).unwrap());
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{head}.{body}").as_bytes());
    format!("{head}.{body}.{}", B64URL.encode(mac.finalize().into_bytes()))
}

fn token(tenant: &str) -> String {
    sign(
        &json!({"alg": "HS256", "typ": "JWT"}),
        &json!({"tenant_id": tenant, "sub": tenant, "iat": now(), "exp": now() + 600}),
    )
}

fn start(dir: &std::path::Path, extra: &[&str]) -> Server {
    Server::start_with_env(dir, "127.0.0.1:0", extra, &[("OPENQQ_JWT_SECRET", SECRET)]).unwrap()
}

struct Answer {
    status: u16,
    location: Option<String>,
    replayed: bool,
    body: Value,
}

async fn post(c: &Client, path: &str, key: Option<&str>, body: &Value) -> Answer {
    let mut req = c.http.post(format!("{}{path}", c.base)).bearer_auth(&c.token).json(body);
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let resp = req.send().await.unwrap();
    let header = |name: &str| resp.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
    let (status, location, replayed) =
        (resp.status().as_u16(), header("location"), header("idempotent-replayed").as_deref() == Some("true"));
    Answer { status, location, replayed, body: resp.json().await.unwrap_or(Value::Null) }
}

fn revision(name: Option<&str>, rev: u64) -> Value {
    let mut body = blink_design(name.unwrap_or("x"));
    if name.is_none() {
        body.as_object_mut().unwrap().remove("name");
    }
    body["revision"] = json!(rev);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_reads_as_submitted_right_after_its_202_and_so_does_each_new_revision() {
    let dir = tempfile::tempdir().unwrap();
    // The consumers do not run yet, so what is read is the API's accepted revision, whatever
    // the machine's load (a lone record otherwise reaches validation within milliseconds).
    let server = start(dir.path(), &["--api-only"]);
    let c = Client::new(&server.url, &token("acme"));
    let created = post(&c, "/v1/designs", None, &blink_design("fresh")).await;
    assert_eq!(created.status, 202);
    let id = created.body["design_id"].as_str().unwrap().to_owned();

    let (status, design) = c.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!(status, 200, "never 404 after a 202: {design}");
    assert_eq!(
        (&design["name"], &design["revision"], &design["status"]),
        (&json!("fresh"), &json!(1), &json!("submitted"))
    );
    let (_, list) = c.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"][0]["design_id"], json!(id), "listed at once too");
    let (status, events) = c.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(events["events"][0]["kind"], "design.submitted");
    assert_eq!(events["events"][0]["correlation_id"], created.body["correlation_id"]);

    let revised = post(&c, &format!("/v1/designs/{id}/revisions"), None, &revision(None, 2)).await;
    assert_eq!(revised.status, 202, "{}", revised.body);
    let (_, design) = c.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!(
        (&design["name"], &design["revision"], &design["status"]),
        (&json!("fresh"), &json!(2), &json!("submitted"))
    );

    // Once the consumers run, the design moves on as before.
    drop(server);
    let server = start(dir.path(), &[]);
    let c = Client::new(&server.url, &token("acme"));
    let done = c.wait_for(&id, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();
    assert_eq!(done["revision"], 2);
    let (_, events) = c.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let submitted = events["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "design.submitted").count();
    assert_eq!(submitted, 2, "the accepted entries are not shown twice once applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_of_a_design_the_tenant_never_created_is_404_exactly_like_another_tenants_design() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let acme = Client::new(&server.url, &token("acme"));
    let globex = Client::new(&server.url, &token("globex"));
    let id =
        post(&acme, "/v1/designs", None, &blink_design("mine")).await.body["design_id"].as_str().unwrap().to_owned();

    let unknown =
        post(&acme, "/v1/designs/01a227d4-fb0d-7377-abd1-e342a03ff5cd/revisions", None, &revision(None, 2)).await;
    let foreign = post(&globex, &format!("/v1/designs/{id}/revisions"), None, &revision(None, 2)).await;
    for (what, a) in [("an unknown id", &unknown), ("another tenant's id", &foreign)] {
        assert_eq!(a.status, 404, "{what}: {}", a.body);
    }
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("correlation_id");
        v
    };
    assert_eq!(strip(unknown.body), strip(foreign.body), "indistinguishable");
    let (_, list) = globex.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"], json!([]), "nothing was created for the other tenant");
    let (_, design) = acme.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!(design["revision"], 1, "nor was the owner's design revised");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_text_form_of_a_design_id_names_the_same_design() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &SLOW_CONSUMERS);
    let c = Client::new(&server.url, &token("acme"));
    let id = post(&c, "/v1/designs", None, &blink_design("forms")).await.body["design_id"].as_str().unwrap().to_owned();
    let upper = id.to_uppercase();
    let forms = [format!("urn:uuid:{id}"), upper.clone(), id.replace('-', ""), format!("URN:UUID:{upper}")];
    for form in &forms {
        let (status, design) = c.get(&format!("/v1/designs/{form}")).await.unwrap();
        assert_eq!((status, &design["design_id"]), (200, &json!(id)), "{form}");
        let (status, _) = c.get(&format!("/v1/designs/{form}/events")).await.unwrap();
        assert_eq!(status, 200, "{form}");
    }
    let revised = post(&c, &format!("/v1/designs/{upper}/revisions"), None, &revision(None, 2)).await;
    assert_eq!((revised.status, &revised.body["design_id"]), (202, &json!(id)));
    assert_eq!(revised.location.as_deref(), Some(&*format!("/v1/designs/{id}")));
    let (_, list) = c.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"].as_array().unwrap().len(), 1, "still one design: {list}");
    assert_eq!(list["designs"][0]["revision"], 2);

    let second =
        post(&c, "/v1/designs", None, &blink_design("second")).await.body["design_id"].as_str().unwrap().to_owned();
    let (status, page) = c.get(&format!("/v1/designs?limit=1&cursor={}", second.to_uppercase())).await.unwrap();
    assert_eq!((status, &page["designs"][0]["design_id"]), (200, &json!(id)), "an upper-case cursor pages the same");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_retried_with_its_idempotency_key_gets_the_same_answer_and_creates_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &SLOW_CONSUMERS);
    let acme = Client::new(&server.url, &token("acme"));
    let first = post(&acme, "/v1/designs", Some("create-blink-1"), &blink_design("once")).await;
    let retry = post(&acme, "/v1/designs", Some("create-blink-1"), &blink_design("once")).await;
    assert_eq!(first.status, 202);
    assert_eq!((retry.status, &retry.body, &retry.location), (first.status, &first.body, &first.location));
    assert!(retry.replayed && !first.replayed, "the replay says so");
    let (_, list) = acme.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"].as_array().unwrap().len(), 1, "one design: {list}");

    let other_body = post(&acme, "/v1/designs", Some("create-blink-1"), &blink_design("different")).await;
    assert_eq!(
        (other_body.status, &other_body.body["type"]),
        (422, &json!("urn:openqq:problem:idempotency-key-reused"))
    );
    let id = first.body["design_id"].as_str().unwrap();
    let other_path =
        post(&acme, &format!("/v1/designs/{id}/revisions"), Some("create-blink-1"), &revision(Some("once"), 1)).await;
    assert_eq!(other_path.status, 422, "the same key on another route is another request");

    let path = format!("/v1/designs/{id}/revisions");
    let rev = post(&acme, &path, Some("rev-2"), &revision(None, 2)).await;
    let rev_again = post(&acme, &path, Some("\"rev-2\""), &revision(None, 2)).await;
    assert_eq!(
        (rev.status, rev_again.status, &rev_again.body),
        (202, 202, &rev.body),
        "revisions too; quoted keys too"
    );

    let globex = Client::new(&server.url, &token("globex"));
    let theirs = post(&globex, "/v1/designs", Some("create-blink-1"), &blink_design("once")).await;
    assert_eq!(theirs.status, 202);
    assert!(!theirs.replayed && theirs.body["design_id"] != first.body["design_id"], "keys are per tenant");

    for bad in ["", "has space", &"k".repeat(256)] {
        let a = post(&acme, "/v1/designs", Some(bad), &blink_design("bad")).await;
        assert_eq!((a.status, &a.body["type"]), (400, &json!("urn:openqq:problem:invalid-idempotency-key")), "{bad:?}");
    }
    let (_, list) = acme.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"].as_array().unwrap().len(), 1, "none of that created a design: {list}");
    // The replayed design is the one that gets materialised; the events show one submission each.
    acme.wait_for(id, Duration::from_secs(30), |d| d["status"] == "ready" && d["revision"] == 2).await.unwrap();
    let (_, events) = acme.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let submitted: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "design.submitted")
        .map(|e| &e["revision"])
        .collect();
    assert_eq!(submitted, [&json!(1), &json!(2)]);
}

async fn unauthorized(c: &reqwest::Client, url: &str, authorization: Option<&str>) -> (u16, String, Value) {
    let mut req = c.get(format!("{url}/v1/designs"));
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.unwrap();
    let challenge = resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (resp.status().as_u16(), challenge, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_not_yet_valid_issued_in_the_future_or_unsigned_get_a_401_that_reveals_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let http = reqwest::Client::new();
    let hs256 = json!({"alg": "HS256", "typ": "JWT"});
    let claims = |iat: u64, extra: Value| {
        let mut c = json!({"tenant_id": "acme", "sub": "acme", "iat": iat, "exp": now() + 600});
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        c
    };
    let unsigned = {
        let t = sign(&json!({"alg": "none", "typ": "JWT"}), &claims(now(), json!({})));
        format!("{}.", &t[..t.rfind('.').unwrap()])
    };
    let cases = [
        ("nbf in ten minutes", sign(&hs256, &claims(now(), json!({"nbf": now() + 600})))),
        ("iat in ten minutes", sign(&hs256, &claims(now() + 600, json!({})))),
        ("alg none", unsigned),
        ("garbage", "eyJhbGciOiJIUzI1NiJ9.eyJ0ZW5hbnRfaWQiOjQyfQ.c2ln".to_owned()),
    ];
    let (ok, _, _) = unauthorized(&http, &server.url, Some(&format!("Bearer {}", token("acme")))).await;
    assert_eq!(ok, 200, "a current token passes");
    for (what, t) in &cases {
        let (status, challenge, body) = unauthorized(&http, &server.url, Some(&format!("Bearer {t}"))).await;
        assert_eq!(status, 401, "{what}");
        assert_eq!(challenge, "Bearer realm=\"openqq\", error=\"invalid_token\"", "{what}");
        assert_eq!(body["detail"], DETAIL_401, "{what}: {body}");
    }
    let (status, challenge, body) = unauthorized(&http, &server.url, None).await;
    assert_eq!((status, challenge.as_str(), &body["detail"]), (401, "Bearer realm=\"openqq\"", &json!(DETAIL_401)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_issuer_and_audience_set_only_tokens_carrying_both_pass_and_openqq_token_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let rules = ["--jwt-issuer", "https://id.openqq.test", "--jwt-audience", "openqq-api"];
    let server = Server::start(dir.path(), "127.0.0.1:0", &rules).unwrap();
    let http = reqwest::Client::new();
    let plain = server.token("acme");
    let (status, _, _) = unauthorized(&http, &server.url, Some(&format!("Bearer {plain}"))).await;
    assert_eq!(status, 401, "a token without iss and aud");
    let out = std::process::Command::new(openqq_bin())
        .args(["token", "--tenant", "acme", "--data-dir"])
        .arg(dir.path())
        .env_remove("OPENQQ_JWT_SECRET")
        .env("OPENQQ_JWT_ISSUER", "https://id.openqq.test")
        .env("OPENQQ_JWT_AUDIENCE", "openqq-api")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let carrying = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let (status, _, body) = unauthorized(&http, &server.url, Some(&format!("Bearer {carrying}"))).await;
    assert_eq!(status, 200, "{body}");
}
