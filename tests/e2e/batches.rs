//! Batches: accepted whole or refused whole, fanned out in the batch lane a window at a time,
//! tracked to `batch.completed` exactly once, cancellable, and private to their tenant.

use openqq_e2e::{compact_blink_design, App, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `n` compact blink designs as batch items, the custom id `{prefix}-{i}` each.
fn items(prefix: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut item = compact_blink_design(&format!("{prefix}-{i}"));
            item["custom_id"] = json!(format!("{prefix}-{i}"));
            item
        })
        .collect()
}

/// `GET path`, waiting out the request rate (a test reading hundreds of designs passes it).
async fn read(c: &Client, path: &str) -> Value {
    loop {
        let (status, body) = c.get(path).await.unwrap();
        match status {
            200 => return body,
            429 => tokio::time::sleep(Duration::from_millis(200)).await,
            _ => panic!("GET {path} answered {status}: {body}"),
        }
    }
}

/// Waits until the batch is final, returning it.
async fn finished(c: &Client, id: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, batch) = c.get(&format!("/v1/batches/{id}")).await.unwrap();
        assert_eq!(status, 200, "{batch}");
        if batch["finished_at"].is_string() {
            return batch;
        }
        assert!(Instant::now() < deadline, "the batch did not finish within {within:?}: {batch}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every item of the batch, paging through `GET …/items`.
async fn all_items(c: &Client, id: &str, query: &str) -> Vec<Value> {
    let (mut items, mut after) = (Vec::new(), None::<String>);
    loop {
        let cursor = after.as_ref().map(|a| format!("&after={a}")).unwrap_or_default();
        let page = read(c, &format!("/v1/batches/{id}/items?limit=100{query}{cursor}")).await;
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return items,
        }
    }
}

/// The tenant's feed entries of `kind`, paging through the whole feed.
async fn feed_kinds(c: &Client, kind: &str) -> Vec<Value> {
    let (mut found, mut after) = (Vec::new(), 0);
    loop {
        let page = read(c, &format!("/v1/events?limit=500&after={after}")).await;
        let items = page["items"].as_array().unwrap();
        found.extend(items.iter().filter(|e| e["kind"] == kind).cloned());
        match page["next_after"].as_u64() {
            Some(next) if !items.is_empty() => after = next,
            _ => return found,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_every_item_once_through_its_window_and_completes_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &["--batch-in-flight", "4"]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let mut batch_items = items("nightly", 30);
    batch_items[7]["constraints"]["text"] = json!("set_io clk Z99\n");
    let (status, accepted) = acme.post("/v1/batches", &json!({"name": "nightly", "items": batch_items})).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    assert_eq!((accepted["items"].clone(), accepted["rejected"].clone()), (json!(30), json!(0)));
    let id = accepted["batch_id"].as_str().unwrap().to_owned();
    let (status, early) = acme.get(&format!("/v1/batches/{id}")).await.unwrap();
    assert_eq!(status, 200, "a batch reads back as soon as it is accepted: {early}");
    assert_eq!(early["name"], "nightly");

    let done = finished(&acme, &id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["counts"],
        json!({"queued": 0, "validating": 0, "ready": 30, "failed": 0, "rejected": 0, "cancelled": 0})
    );
    assert_eq!(done["verdicts"], json!({"pass": 29, "fail": 1}));
    assert!(done["started_at"].is_string() && done["created_at"].is_string());

    let all = all_items(&acme, &id, "").await;
    assert_eq!(all.len(), 30);
    for (i, item) in all.iter().enumerate() {
        assert_eq!((item["index"].clone(), item["custom_id"].clone()), (json!(i), json!(format!("nightly-{i}"))));
        assert_eq!(item["status"], "ready");
        let design = item["design_id"].as_str().unwrap();
        let events = read(&acme, &format!("/v1/designs/{design}/events")).await;
        let submitted = events["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "design.submitted").count();
        assert_eq!(submitted, 1, "item {i} was submitted once: {events}");
    }
    let failing = all_items(&acme, &id, "&status=ready").await;
    assert_eq!(
        failing.iter().filter(|i| i["verdict"] == "fail").map(|i| i["index"].clone()).collect::<Vec<_>>(),
        [json!(7)]
    );
    let completed = feed_kinds(&acme, "batch.completed").await;
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert_eq!(completed[0]["design_id"], json!(id));

    let (_, listed) = acme.get("/v1/batches").await.unwrap();
    assert_eq!(listed["batches"][0]["batch_id"], json!(id));
    // Another tenant's batch ids answer exactly like unknown ones.
    let globex = Client::new(&app.url, &app.token("globex"));
    let unknown = "0190aaaa-0000-7000-8000-000000000000";
    for path in [format!("/v1/batches/{id}"), format!("/v1/batches/{id}/items")] {
        let (theirs, mine) = (globex.get(&path).await.unwrap(), globex.get(&path.replace(&id, unknown)).await.unwrap());
        assert_eq!((theirs.0, &theirs.1["detail"]), (404, &mine.1["detail"]), "{path}");
    }
    let (status, _) = globex.post(&format!("/v1/batches/{id}/cancel"), &json!({})).await.unwrap();
    assert_eq!(status, 404);
    let (_, theirs) = globex.get("/v1/batches").await.unwrap();
    assert_eq!(theirs["batches"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_invalid_items_is_refused_whole_naming_each_or_skips_them_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let mut bad = items("b", 4);
    bad[1].as_object_mut().unwrap().remove("constraints");
    bad[3]["custom_id"] = json!("b-0");
    let (status, problem) = acme.post("/v1/batches", &json!({"name": "bad", "items": bad.clone()})).await.unwrap();
    assert_eq!(status, 422, "{problem}");
    let errors = problem["errors"].as_array().unwrap();
    assert_eq!(errors.iter().map(|e| e["index"].clone()).collect::<Vec<_>>(), [json!(1), json!(3)], "{problem}");
    assert!(errors[1]["reason"].as_str().unwrap().contains("custom_id"), "{problem}");
    let (_, designs) = acme.get("/v1/designs").await.unwrap();
    assert_eq!(designs["designs"], json!([]), "nothing was submitted");
    let (_, batches) = acme.get("/v1/batches").await.unwrap();
    assert_eq!(batches["batches"], json!([]));

    let (status, accepted) =
        acme.post("/v1/batches", &json!({"name": "skip", "items": bad, "on_invalid": "skip"})).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["rejected"], 2);
    let id = accepted["batch_id"].as_str().unwrap();
    let done = finished(&acme, id, Duration::from_secs(30)).await;
    assert_eq!((done["counts"]["ready"].clone(), done["counts"]["rejected"].clone()), (json!(2), json!(2)), "{done}");
    let rejected = all_items(&acme, id, "&status=rejected").await;
    assert!(rejected.iter().all(|i| i["reason"].is_string() && i["design_id"].is_null()), "{rejected:?}");

    for (body, field) in [
        (json!({"name": "empty", "items": []}), "items"),
        (json!({"items": items("n", 1)}), "name"),
        (json!({"name": "big", "items": vec![json!({}); 10_001]}), "items"),
        (json!({"name": "x", "items": items("m", 1), "max_failed": "150%"}), "max_failed"),
    ] {
        let (status, problem) = acme.post("/v1/batches", &body).await.unwrap();
        assert_eq!((status, problem["field"].as_str()), (422, Some(field)), "{problem}");
    }
    let (_, batches) = acme.get("/v1/batches").await.unwrap();
    assert_eq!(batches["batches"].as_array().unwrap().len(), 1, "only the skipping batch was accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sent_as_json_lines_runs_like_one_sent_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let lines: String = items("l", 3).iter().map(|i| format!("{i}\n")).collect();
    let resp = acme
        .http
        .post(format!("{}/v1/batches?name=lines&max_failed=0", app.url))
        .bearer_auth(&acme.token)
        .header("content-type", "application/x-ndjson")
        .body(lines)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let id = resp.json::<Value>().await.unwrap()["batch_id"].as_str().unwrap().to_owned();
    let done = finished(&acme, &id, Duration::from_secs(30)).await;
    assert_eq!(
        (done["name"].clone(), done["counts"]["ready"].clone(), done["max_failed"].clone()),
        (json!("lines"), json!(3), json!(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_batch_stops_the_items_not_yet_started_and_keeps_what_finished() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &["--batch-in-flight", "1"]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let (_, accepted) = acme.post("/v1/batches", &json!({"name": "c", "items": items("c", 40)})).await.unwrap();
    let id = accepted["batch_id"].as_str().unwrap().to_owned();
    // Once a few items are ready, cancel.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, b) = acme.get(&format!("/v1/batches/{id}")).await.unwrap();
        if b["counts"]["ready"].as_u64().unwrap() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{b}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, cancelled) = acme.post(&format!("/v1/batches/{id}/cancel"), &json!({})).await.unwrap();
    assert_eq!(status, 200, "{cancelled}");
    let done = finished(&acme, &id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    let (ready, cancelled) = (done["counts"]["ready"].as_u64().unwrap(), done["counts"]["cancelled"].as_u64().unwrap());
    assert!(ready >= 2 && cancelled > 0 && ready + cancelled == 40, "{done}");
    assert_eq!(feed_kinds(&acme, "batch.completed").await.len(), 1);
}

/// kill -9 during the fan-out and the items' processing, then a restart: every item ends once,
/// none is submitted twice, and `batch.completed` is in the feed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_killed_mid_flight_ends_every_item_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &["--batch-in-flight", "8"]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (status, accepted) = acme.post("/v1/batches", &json!({"name": "k", "items": items("k", 400)})).await.unwrap();
    assert_eq!(status, 202);
    let id = accepted["batch_id"].as_str().unwrap().to_owned();
    for pause in [30, 700] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        server.kill9();
        server.restart().unwrap();
    }
    let acme = Client::new(&server.url, &server.token("acme"));
    let done = finished(&acme, &id, Duration::from_secs(120)).await;
    assert_eq!(done["counts"]["ready"], 400, "{done}");
    let all = all_items(&acme, &id, "").await;
    let mut designs: Vec<&str> =
        all.iter().map(|i| i["design_id"].as_str().expect("every item has a design")).collect();
    designs.sort_unstable();
    designs.dedup();
    assert_eq!(designs.len(), 400);
    for d in designs {
        let events = read(&acme, &format!("/v1/designs/{d}/events")).await;
        let kinds: Vec<&str> =
            events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "design.submitted").count(), 1, "{kinds:?}");
        assert_eq!(kinds.iter().filter(|k| **k == "results.ready").count(), 1, "{kinds:?}");
    }
    assert_eq!(feed_kinds(&acme, "batch.completed").await.len(), 1);
}
