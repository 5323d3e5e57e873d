//! Bad input gets the right RFC 9457 problem document, and nothing else happens.

use openqq_e2e::{blink_design, App, Client};
use serde_json::{json, Value};

async fn raw(
    c: &Client,
    method: &str,
    path: &str,
    auth: Option<&str>,
    ctype: Option<&str>,
    body: Vec<u8>,
) -> (u16, String, Value) {
    let mut req = c.http.request(method.parse().unwrap(), format!("{}{path}", c.base)).body(body);
    if let Some(t) = auth {
        req = req.header("authorization", t);
    }
    if let Some(ct) = ctype {
        req = req.header("content-type", ct);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, ct, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_problem_documents_with_the_right_status() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &["--max-body-bytes", "200000"]).unwrap();
    let token = server.token("acme");
    let c = Client::new(&server.url, &token);
    let bearer = format!("Bearer {token}");
    let good = serde_json::to_vec(&blink_design("p")).unwrap();
    let json_ct = Some("application/json");

    let mut no_name = blink_design("p");
    no_name.as_object_mut().unwrap().remove("name");
    let mut bad_device = blink_design("p");
    bad_device["target"]["device"] = json!(42);
    let mut bad_format = blink_design("p");
    bad_format["constraints"]["format"] = json!("xdc");
    let mut netlist_array = blink_design("p");
    netlist_array["netlist"] = json!([1, 2]);
    let mut unknown_field = blink_design("p");
    unknown_field["colour"] = json!("red");
    let huge = vec![b' '; 300_000];

    let other_secret = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ0ZW5hbnRfaWQiOiJhY21lIiwic3ViIjoiYWNtZSIsImlhdCI6MCwiZXhwIjo5OTk5OTk5OTk5fQ.c2lnbmF0dXJlLW1hZGUtd2l0aC1hbm90aGVyLXNlY3JldA";
    // (what, method, path, authorization, content type, body, expected status, expected field)
    type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, Option<&'a str>, Vec<u8>, u16, Option<&'a str>);
    let cases: Vec<Case> = vec![
        ("no token", "POST", "/v1/designs", None, json_ct, good.clone(), 401, None),
        ("a token signed elsewhere", "GET", "/v1/designs", Some(other_secret), None, vec![], 401, None),
        ("not a bearer token", "GET", "/v1/designs", Some("Basic YTpi"), None, vec![], 401, None),
        ("malformed JSON", "POST", "/v1/designs", Some(&bearer), json_ct, b"{\"name\": ".to_vec(), 400, None),
        ("a body over the limit", "POST", "/v1/designs", Some(&bearer), json_ct, huge, 413, None),
        ("not JSON at all", "POST", "/v1/designs", Some(&bearer), Some("text/plain"), b"hi".to_vec(), 415, None),
        (
            "a missing name",
            "POST",
            "/v1/designs",
            Some(&bearer),
            json_ct,
            serde_json::to_vec(&no_name).unwrap(),
            422,
            Some("name"),
        ),
        (
            "a wrongly typed device",
            "POST",
            "/v1/designs",
            Some(&bearer),
            json_ct,
            serde_json::to_vec(&bad_device).unwrap(),
            422,
            Some("target.device"),
        ),
        (
            "an unknown constraint format",
            "POST",
            "/v1/designs",
            Some(&bearer),
            json_ct,
            serde_json::to_vec(&bad_format).unwrap(),
            422,
            Some("constraints.format"),
        ),
        (
            "a netlist that is not an object",
            "POST",
            "/v1/designs",
            Some(&bearer),
            json_ct,
            serde_json::to_vec(&netlist_array).unwrap(),
            422,
            Some("netlist"),
        ),
        (
            "an unknown field",
            "POST",
            "/v1/designs",
            Some(&bearer),
            json_ct,
            serde_json::to_vec(&unknown_field).unwrap(),
            422,
            None,
        ),
        (
            "a revision without its number",
            "POST",
            "/v1/designs/01a227d4-fb0d-7377-abd1-e342a03ff5cd/revisions",
            Some(&bearer),
            json_ct,
            good.clone(),
            422,
            Some("revision"),
        ),
        ("a design id that is no id", "GET", "/v1/designs/nope", Some(&bearer), None, vec![], 404, None),
        (
            "an unknown design",
            "GET",
            "/v1/designs/01a227d4-fb0d-7377-abd1-e342a03ff5cd",
            Some(&bearer),
            None,
            vec![],
            404,
            None,
        ),
        ("an unknown route", "GET", "/v2/everything", Some(&bearer), None, vec![], 404, None),
        ("a wrong method", "PUT", "/v1/designs", Some(&bearer), None, vec![], 405, None),
        ("a bad page size", "GET", "/v1/designs?limit=1000", Some(&bearer), None, vec![], 422, Some("limit")),
        ("a bad query", "GET", "/v1/designs?limit=many", Some(&bearer), None, vec![], 400, None),
    ];
    for (what, method, path, auth, ct, body, want, field) in cases {
        let (status, ctype, problem) = raw(&c, method, path, auth, ct, body).await;
        assert_eq!(status, want, "{what}: {problem}");
        assert_eq!(ctype, "application/problem+json", "{what} is a problem document");
        assert_eq!(problem["status"], want, "{what}: {problem}");
        assert!(
            problem["type"].as_str().is_some_and(|t| !t.is_empty())
                && problem["title"].is_string()
                && problem["detail"].is_string(),
            "{what}: {problem}"
        );
        assert!(problem["correlation_id"].is_string(), "{what}: the problem carries the correlation id");
        if let Some(f) = field {
            assert_eq!(problem["field"], f, "{what} names the field: {problem}");
        }
    }
    // None of that reached the log: the tenant has no designs.
    let (_, list) = c.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_correlation_id_is_replaced_and_a_well_formed_one_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let http = reqwest::Client::new();
    let kept = http.get(format!("{}/healthz", server.url)).header("x-correlation-id", "abc-123").send().await.unwrap();
    assert_eq!(kept.headers()["x-correlation-id"], "abc-123");
    let replaced = http
        .get(format!("{}/healthz", server.url))
        .header("x-correlation-id", "no spaces allowed")
        .send()
        .await
        .unwrap();
    let id = replaced.headers()["x-correlation-id"].to_str().unwrap();
    assert_ne!(id, "no spaces allowed");
    assert_eq!(id.len(), 36, "a fresh UUID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_limit_gets_429_with_retry_after_and_others_are_unaffected() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &["--rate-limit", "5/10s"]).unwrap();
    let noisy = Client::new(&server.url, &server.token("noisy"));
    let calm = Client::new(&server.url, &server.token("calm"));
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let resp = noisy.http.get(format!("{}/v1/designs", server.url)).bearer_auth(&noisy.token).send().await.unwrap();
        statuses.push(resp.status().as_u16());
        if resp.status() == 429 {
            assert!(resp.headers()["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
            assert_eq!(resp.headers()["ratelimit-remaining"], "0");
        } else {
            assert_eq!(resp.headers()["ratelimit-limit"], "5");
        }
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    assert_eq!(calm.get("/v1/designs").await.unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_the_limit_is_enforced_by_the_redis_limiter() {
    let url = std::env::var("OPENQQ_TEST_REDIS_URL")
        .expect("set OPENQQ_TEST_REDIS_URL (scripts/test.sh starts a redis-server)");
    let dir = tempfile::tempdir().unwrap();
    let tenant = format!("redis-{}", std::process::id());
    let overrides = dir.path().join("limits.txt");
    std::fs::write(&overrides, format!("{tenant} 3/10s\n")).unwrap();
    let server = App::start(dir.path(), &["--redis-url", &url, "--rate-limits", overrides.to_str().unwrap()]).unwrap();
    let c = Client::new(&server.url, &server.token(&tenant));
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(c.get("/v1/designs").await.unwrap().0);
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429], "the override (3 per 10 s) applies");
    // The decisions live in Redis: the tenant's sliding log is there.
    let out = std::process::Command::new("redis-cli")
        .args(["-u", &url, "ZCARD", &format!("rl:{{{tenant}}}")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
}
