//! Batches: accepted whole or refused whole, fanned out in the batch lane a window at a time,
//! tracked to `batch.completed` exactly once, cancellable, retried once, able to revalidate the
//! tenant's stored designs, and private to their tenant.

use openqq_e2e::batches::upload;
use openqq_e2e::{compact_blink_design, sha256_hex, App, Client, Server};
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
    assert_eq!(
        completed[0]["batch"],
        json!({"status": "completed", "counts": done["counts"], "verdicts": {"pass": 29, "fail": 1}}),
        "batch.completed carries the counts"
    );

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

    // The batch's items are in the store: the object that carried them to the batch function is
    // gone.
    let objects = dir.path().join("objects").join("acme");
    let holds_items = |bytes: Vec<u8>| bytes.windows(23).any(|w| w == b"\"custom_id\":\"nightly-0\"");
    let carrying_items = std::fs::read_dir(&objects)
        .map(|files| files.filter(|f| holds_items(std::fs::read(f.as_ref().unwrap().path()).unwrap())).count())
        .unwrap_or(0);
    assert_eq!(carrying_items, 0, "no items object left in {}", objects.display());
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
    let completed = feed_kinds(&acme, "batch.completed").await;
    assert_eq!(completed.len(), 1);
    let summary = &completed[0]["batch"];
    assert_eq!((&summary["status"], &summary["counts"]), (&json!("cancelled"), &done["counts"]), "{summary}");
    assert_eq!(summary["reason"], "cancelled by the tenant");
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

/// `{"revalidate": id}` submits the design's kept specification again as its next revision, and
/// a foreign, unknown or repeated design is refused as a single submission would be; a finished
/// batch's failed items are retried once, as a new batch, and a second retry answers the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_designs_are_revalidated_from_their_kept_specification_and_failed_items_retried_once() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &["--batch-in-flight", "1"]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let globex = Client::new(&app.url, &app.token("globex"));
    let (status, accepted) = acme.post("/v1/designs", &compact_blink_design("kept")).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let kept = accepted["design_id"].as_str().unwrap().to_owned();
    acme.wait_for(&kept, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();
    let (_, theirs) = globex.post("/v1/designs", &compact_blink_design("theirs")).await.unwrap();
    let theirs = theirs["design_id"].as_str().unwrap().to_owned();
    globex.wait_for(&theirs, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();

    let unknown = "0190aaaa-0000-7000-8000-000000000000";
    let bad = json!({"name": "bad", "items": [
        {"revalidate": theirs}, {"revalidate": unknown}, {"revalidate": kept}, {"revalidate": kept},
        {"revalidate": kept, "name": "renamed"}, {"revalidate": 7},
    ]});
    let (status, problem) = acme.post("/v1/batches", &bad).await.unwrap();
    assert_eq!(status, 422, "{problem}");
    let errors = problem["errors"].as_array().unwrap();
    let reasons: Vec<(u64, &str)> =
        errors.iter().map(|e| (e["index"].as_u64().unwrap(), e["reason"].as_str().unwrap())).collect();
    assert_eq!(reasons.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 3, 4, 5], "{problem}");
    // Another tenant's design is as unknown as one that never existed.
    assert_eq!(reasons[0].1.replace(&theirs, "D"), reasons[1].1.replace(unknown, "D"), "{problem}");
    assert!(reasons[2].1.contains("earlier item (index 2)"), "{problem}");
    assert!(reasons[3].1.starts_with("name: "), "{problem}");
    assert!(reasons[4].1.starts_with("revalidate: must be"), "{problem}");

    // A batch: nine new designs, a revalidation, and a design whose netlist is an upload that is
    // lost before its item runs (the nine and the revalidation go one at a time before it).
    let mut by_ref = compact_blink_design("by-ref");
    let netlist = serde_json::to_vec(&by_ref["netlist"]).unwrap();
    by_ref.as_object_mut().unwrap().remove("netlist");
    by_ref["netlist_ref"] = upload(&acme, &netlist).await.unwrap();
    by_ref["custom_id"] = json!("by-ref");
    let mut batch_items = items("n", 9);
    batch_items.push(json!({"revalidate": kept, "custom_id": "again"}));
    batch_items.push(by_ref);
    let (status, accepted) = acme.post("/v1/batches", &json!({"name": "nightly", "items": batch_items})).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["batch_id"].as_str().unwrap().to_owned();
    std::fs::remove_file(dir.path().join("objects/acme").join(sha256_hex(&netlist))).unwrap();
    let (status, running) = acme.post(&format!("/v1/batches/{id}/retry"), &json!({})).await.unwrap();
    assert_eq!((status, running["type"].as_str()), (409, Some("urn:openqq:problem:batch-running")), "{running}");

    let done = finished(&acme, &id, Duration::from_secs(90)).await;
    assert_eq!((done["counts"]["ready"].clone(), done["counts"]["failed"].clone()), (json!(10), json!(1)), "{done}");
    let all = all_items(&acme, &id, "").await;
    let again = &all[9];
    assert_eq!((again["custom_id"].as_str(), again["design_id"].as_str()), (Some("again"), Some(kept.as_str())));
    assert_eq!((again["revision"].clone(), again["status"].clone()), (json!(2), json!("ready")), "{again}");
    let design = read(&acme, &format!("/v1/designs/{kept}")).await;
    assert_eq!((design["revision"].clone(), design["name"].clone()), (json!(2), json!("kept")), "{design}");
    let failed = &all[10];
    assert_eq!((failed["custom_id"].as_str(), failed["status"].as_str()), (Some("by-ref"), Some("failed")));

    // The lost netlist uploaded again, the failed item is retried: a new batch of one item, the
    // same design at its next revision; asking again answers the same retry.
    upload(&acme, &netlist).await.unwrap();
    let (status, retried) = acme.post(&format!("/v1/batches/{id}/retry"), &json!({})).await.unwrap();
    assert_eq!(status, 202, "{retried}");
    assert_eq!((retried["retry_of"].as_str(), retried["items"].clone()), (Some(id.as_str()), json!(1)), "{retried}");
    let (status, same) = acme.post(&format!("/v1/batches/{id}/retry"), &json!({})).await.unwrap();
    assert_eq!((status, &same["batch_id"]), (202, &retried["batch_id"]), "{same}");
    let retry_id = retried["batch_id"].as_str().unwrap();
    let done = finished(&acme, retry_id, Duration::from_secs(30)).await;
    assert_eq!((done["name"].clone(), done["counts"]["ready"].clone()), (json!("nightly (retry)"), json!(1)), "{done}");
    let item = &all_items(&acme, retry_id, "").await[0];
    assert_eq!((item["custom_id"].as_str(), &item["design_id"]), (Some("by-ref"), &failed["design_id"]), "{item}");
    assert_eq!(item["revision"], 2, "{item}");

    let (status, nothing) = acme.post(&format!("/v1/batches/{retry_id}/retry"), &json!({})).await.unwrap();
    assert_eq!((status, nothing["type"].as_str()), (409, Some("urn:openqq:problem:nothing-to-retry")), "{nothing}");
    let (status, _) = globex.post(&format!("/v1/batches/{id}/retry"), &json!({})).await.unwrap();
    assert_eq!(status, 404, "another tenant's batch is unknown");
}

/// Batch items are weighed against quotas of their own per tenant: items per window (past it 429
/// `batch-items-limited` with `Retry-After`, nothing submitted; an idempotent replay takes
/// nothing; a batch larger than the whole quota says so) and items open at once (429
/// `batch-items-open` until some end); another tenant is not affected by either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_batch_items_are_limited_per_window_apart_from_other_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &["--api-only", "--tenant-batch-items", "5/1m"]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let batch = |prefix: &str, n| json!({"name": prefix, "items": items(prefix, n)});
    let keyed = |body: &Value| {
        acme.http
            .post(format!("{}/v1/batches", acme.base))
            .bearer_auth(&acme.token)
            .header("idempotency-key", "first-batch")
            .json(body)
            .send()
    };
    let first = batch("a", 3);
    assert_eq!(keyed(&first).await.unwrap().status().as_u16(), 202);
    let replay = keyed(&first).await.unwrap();
    assert_eq!(replay.status().as_u16(), 202, "a replay answers the first batch");
    assert_eq!(replay.headers()["idempotent-replayed"], "true");

    let (status, problem) = acme.post("/v1/batches", &batch("b", 3)).await.unwrap();
    assert_eq!((status, problem["type"].as_str()), (429, Some("urn:openqq:problem:batch-items-limited")), "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("has 2 left; this batch has 3"), "{problem}");
    let resp = acme.http.post(format!("{}/v1/batches", acme.base)).bearer_auth(&acme.token).json(&batch("c", 3));
    let resp = resp.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    let retry_after: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(resp.headers()["ratelimit-limit"], "5");

    let (status, _) = acme.post("/v1/batches", &batch("d", 2)).await.unwrap();
    assert_eq!(status, 202, "what is left of the window still fits");
    let (status, problem) = acme.post("/v1/batches", &batch("e", 6)).await.unwrap();
    assert_eq!(status, 429);
    assert!(
        problem["detail"].as_str().unwrap().contains("larger than tenant acme's whole batch-item quota"),
        "{problem}"
    );
    let (_, listed) = acme.get("/v1/batches").await.unwrap();
    assert_eq!(listed["batches"].as_array().unwrap().len(), 2, "refused batches submitted nothing: {listed}");

    let globex = Client::new(&app.url, &app.token("globex"));
    let (status, _) = globex.post("/v1/batches", &batch("g", 5)).await.unwrap();
    assert_eq!(status, 202, "another tenant has a quota of its own");
    drop(app);

    // Open items: without consumers every item stays queued, so what is submitted stays open.
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &["--api-only", "--tenant-batch-open", "4"]).unwrap();
    let acme = Client::new(&app.url, &app.token("acme"));
    let (status, _) = acme.post("/v1/batches", &batch("f", 3)).await.unwrap();
    assert_eq!(status, 202);
    let (status, problem) = acme.post("/v1/batches", &batch("h", 2)).await.unwrap();
    assert_eq!((status, problem["type"].as_str()), (429, Some("urn:openqq:problem:batch-items-open")), "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("has 3; this batch has 2"), "{problem}");
    let (status, _) = acme.post("/v1/batches", &batch("i", 1)).await.unwrap();
    assert_eq!(status, 202, "up to the limit");
    let (_, listed) = acme.get("/v1/batches").await.unwrap();
    let id = listed["batches"][0]["batch_id"].as_str().unwrap().to_owned();
    let (status, _) = acme.post(&format!("/v1/batches/{id}/cancel"), &json!({})).await.unwrap();
    assert_eq!(status, 200);
    let (status, _) = acme.post("/v1/batches", &batch("j", 1)).await.unwrap();
    assert_eq!(status, 202, "a cancelled batch's items are no longer open");
    let globex = Client::new(&app.url, &app.token("globex"));
    assert_eq!(globex.post("/v1/batches", &batch("k", 4)).await.unwrap().0, 202);
}

/// The batch and schedule paths with the store on DynamoDB and the log on Kafka (tansu) at once:
/// a batch with a revalidation completes, and a schedule's fire (triggered now) submits its batch,
/// which completes, all recorded in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_dynamodb_and_kafka_a_batch_revalidates_and_a_schedules_fire_runs_its_batch() {
    let Some(endpoint) = openqq_e2e::aws::endpoint("the batch test on DynamoDB and Kafka") else { return };
    let (_broker, brokers) = openqq_e2e::tansu::shared();
    let table = openqq_e2e::aws::unique_name("batches");
    let prefix = format!("{}.", openqq_adapters::conformance::unique("batches"));
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--dynamodb-table",
        &table,
        "--dynamodb-endpoint",
        &endpoint,
        "--kafka-brokers",
        &brokers,
        "--topic-prefix",
        &prefix,
        "--partitions",
        "4",
    ];
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (_, kept) = acme.post("/v1/designs", &compact_blink_design("kept")).await.unwrap();
    let kept = kept["design_id"].as_str().unwrap().to_owned();
    acme.wait_for(&kept, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();

    let mut batch_items = items("d", 4);
    batch_items.push(json!({"revalidate": kept, "custom_id": "again"}));
    let (status, accepted) = acme.post("/v1/batches", &json!({"name": "on-aws", "items": batch_items})).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["batch_id"].as_str().unwrap().to_owned();
    let done = finished(&acme, &id, Duration::from_secs(120)).await;
    assert_eq!((done["status"].clone(), done["counts"]["ready"].clone()), (json!("completed"), json!(5)), "{done}");
    let again = &all_items(&acme, &id, "&status=ready").await[4];
    assert_eq!((again["design_id"].as_str(), again["revision"].clone()), (Some(kept.as_str()), json!(2)), "{again}");
    let completed = feed_kinds(&acme, "batch.completed").await;
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["batch"]["counts"], done["counts"]);

    let schedule = json!({"name": "nightly", "expression": "0 3 * * *", "template": {"revalidate": "all"}});
    let (status, schedule) = acme.post("/v1/schedules", &schedule).await.unwrap();
    assert_eq!(status, 201, "{schedule}");
    let sid = schedule["schedule_id"].as_str().unwrap();
    let (status, fired) = acme.post(&format!("/v1/schedules/{sid}/trigger"), &json!({})).await.unwrap();
    assert_eq!((status, fired["outcome"].as_str()), (202, Some("submitted")), "{fired}");
    let fire_batch = fired["batch_id"].as_str().unwrap();
    let done = finished(&acme, fire_batch, Duration::from_secs(120)).await;
    assert_eq!(done["counts"]["ready"], 5, "every design of the tenant revalidated: {done}");
    let (_, ledger) = acme.get(&format!("/v1/schedules/{sid}/fires")).await.unwrap();
    assert_eq!(ledger["items"][0]["batch_id"].as_str(), Some(fire_batch), "{ledger}");
}
