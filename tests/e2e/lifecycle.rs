//! A design's whole path: submit → four functions → ready, with report and timeline.

use openqq_e2e::{blink_design, App, Client, Server};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_design_reaches_ready_with_a_report_and_a_four_kind_timeline_under_one_correlation_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let resp = acme
        .http
        .post(format!("{}/v1/designs", server.url))
        .bearer_auth(&acme.token)
        .header("x-correlation-id", "e2e-lifecycle-1")
        .json(&blink_design("blink"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    assert_eq!(resp.headers()["x-correlation-id"], "e2e-lifecycle-1");
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    let accepted: serde_json::Value = resp.json().await.unwrap();
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("/v1/designs/{id}"));
    assert_eq!(
        (accepted["revision"].clone(), accepted["correlation_id"].clone()),
        (json!(1), json!("e2e-lifecycle-1"))
    );

    let design = acme.wait_for(&id, Duration::from_secs(20), |d| d["status"] == "ready").await.unwrap();
    assert_eq!(
        (design["name"].clone(), design["revision"].clone(), design["verdict"].clone()),
        (json!("blink"), json!(1), json!("pass"))
    );

    let (status, report) = acme.get(&format!("/v1/designs/{id}/report")).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(report["verdict"], "pass");
    assert_eq!(report["revision"], 1);
    let lc = report["utilization"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["resource"] == "ICESTORM_LC")
        .expect("logic cells are reported");
    assert!(lc["used"].as_u64().unwrap() > 0 && lc["available"] == 7680, "real utilisation for hx8k: {lc}");

    let (_, events) = acme.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let events = events["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["design.submitted", "validation.started", "validation.finished", "results.ready"]);
    assert!(events.iter().all(|e| e["correlation_id"] == "e2e-lifecycle-1" && e["revision"] == 1));

    // Another tenant sees nothing of it.
    let globex = Client::new(&server.url, &server.token("globex"));
    for path in [format!("/v1/designs/{id}"), format!("/v1/designs/{id}/report"), format!("/v1/designs/{id}/events")] {
        let (status, body) = globex.get(&path).await.unwrap();
        assert_eq!(status, 404, "{path} is hidden from another tenant");
        assert_eq!(body["status"], 404);
    }
    let (_, list) = globex.get("/v1/designs").await.unwrap();
    assert_eq!(list["designs"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_with_errors_is_ready_with_a_failing_verdict_and_its_findings() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let c = Client::new(&server.url, &server.token("acme"));
    let mut design = blink_design("blink-bad-pin");
    design["constraints"]["text"] = json!("set_io clk Z99\nset_io btn A2\nset_io led[0] B5\nset_io led[1] B4\n");
    let (status, accepted) = c.post("/v1/designs", &design).await.unwrap();
    assert_eq!(status, 202);
    let id = accepted["design_id"].as_str().unwrap();
    let d = c.wait_for(id, Duration::from_secs(20), |d| d["status"] == "ready").await.unwrap();
    assert_eq!(d["verdict"], "fail");
    let (_, report) = c.get(&format!("/v1/designs/{id}/report")).await.unwrap();
    let codes: Vec<&str> = report["findings"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"PIN_NOT_IN_PACKAGE"), "{codes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_apply_in_order_and_a_stale_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let c = Client::new(&server.url, &server.token("acme"));
    let (_, accepted) = c.post("/v1/designs", &blink_design("rev")).await.unwrap();
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    for rev in [2, 3, 2] {
        let mut body = blink_design("rev");
        body["revision"] = json!(rev);
        let (status, resp) = c.post(&format!("/v1/designs/{id}/revisions"), &body).await.unwrap();
        assert_eq!((status, resp["revision"].clone()), (202, json!(rev)), "a stale revision is still accepted");
    }
    c.wait_for(&id, Duration::from_secs(20), |d| d["revision"] == 3 && d["status"] == "ready").await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, events) = c.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let ready: Vec<u64> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "results.ready")
        .map(|e| e["revision"].as_u64().unwrap())
        .collect();
    assert_eq!(ready, vec![1, 2, 3], "each revision once, in order; the stale repeat added nothing");
    let (status, r2) = c.get(&format!("/v1/designs/{id}/report?revision=2")).await.unwrap();
    assert_eq!((status, r2["revision"].clone()), (200, json!(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_and_exits_cleanly_and_metrics_and_health_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let c = Client::new(&server.url, &server.token("acme"));
    let (status, _) = c.get("/healthz").await.unwrap();
    assert_eq!(status, 200);
    c.post("/v1/designs", &blink_design("m")).await.unwrap();
    let metrics = c.http.get(server.metrics()).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains(
            "openqq_http_requests_total{route=\"/v1/designs\",method=\"POST\",status=\"202\",tenant=\"acme\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("openqq_http_request_duration_seconds_bucket{route=\"/v1/designs\""),
        "latency histogram by route"
    );
    let status = server.terminate().unwrap();
    assert!(status.success(), "exit status {status:?}");
}

/// Reads server-sent events from `resp` until one carries `needle`, or `within` passes.
async fn read_until(resp: &mut reqwest::Response, needle: &str, within: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut seen = String::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, resp.chunk()).await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if seen.contains(needle) {
            return Some(seen);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_carries_each_of_a_tenants_events_and_nobody_elses() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let globex = Client::new(&server.url, &server.token("globex"));
    let open = |c: &Client| {
        c.http.get(format!("{}/v1/events/stream", c.base)).bearer_auth(&c.token).timeout(Duration::from_secs(60)).send()
    };
    let mut mine = open(&acme).await.unwrap();
    let mut theirs = open(&globex).await.unwrap();
    assert_eq!(mine.headers()["content-type"], "text/event-stream");

    let (_, accepted) = acme.post("/v1/designs", &blink_design("live")).await.unwrap();
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    let events = read_until(&mut mine, "event: results.ready", Duration::from_secs(20))
        .await
        .expect("acme's stream carries its result");
    assert!(events.contains(&id), "{events}");
    for kind in ["design.submitted", "validation.started", "validation.finished"] {
        assert!(events.contains(&format!("event: {kind}")), "every kind comes before the result: {events}");
    }
    assert!(events.contains("\"verdict\":\"pass\""), "{events}");
    let leaked = read_until(&mut theirs, &id, Duration::from_millis(800)).await;
    assert!(leaked.is_none(), "another tenant's stream never carries acme's design");
}
