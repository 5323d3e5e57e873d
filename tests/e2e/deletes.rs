//! `DELETE /v1/designs/{id}` end to end (docs/API.md, "Deleting a design"): refused while a
//! revision is in flight, then the design is 404 everywhere, its objects are gone from the data
//! dir, the deletion is in the tenant's feed with the request's correlation id, another tenant
//! could not delete it (and got what an unknown id gets), and the same design submitted again is
//! a new design that validates; and a full report goes with its design alone.

use openqq_e2e::noisy::wide_port_design;
use openqq_e2e::{blink_design, openqq_bin, Client, Server};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// A well-formed design id that no tenant has.
const UNKNOWN_ID: &str = "01a227d4-fb0d-7377-abd1-e342a03ff5cd";

/// Consumers that wait for their batch window: a revision stays in flight for seconds, long
/// enough to ask for its deletion meanwhile.
const SLOW_CONSUMERS: [&str; 4] = ["--batch-window", "2s", "--batch-size", "1000"];

/// The objects `tenant` has in the data dir (temporary files of puts in progress aside).
fn objects_of(data_dir: &Path, tenant: &str) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("objects").join(tenant)) else { return BTreeSet::new() };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect()
}

/// `DELETE path` as `client`, with `correlation_id`: the status, the echoed correlation id and
/// the body (without its correlation id, which differs per request).
async fn delete(client: &Client, path: &str, correlation_id: &str) -> (u16, String, Value) {
    let resp = client
        .http
        .delete(format!("{}{path}", client.base))
        .bearer_auth(&client.token)
        .header("x-correlation-id", correlation_id)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let echoed = resp.headers().get("x-correlation-id").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let text = resp.text().await.unwrap();
    let mut body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if let Some(o) = body.as_object_mut() {
        o.remove("correlation_id");
    }
    (status, echoed, body)
}

/// `openqq design delete ID` against `server` with `token`.
fn cli_delete(server: &Server, token: &str, id: &str) -> Output {
    Command::new(openqq_bin())
        .args(["design", "delete", id, "--wait", "30", "--url", &server.url])
        .env("OPENQQ_TOKEN", token)
        .output()
        .expect("openqq design delete runs")
}

/// The log line of the deletion made under `correlation_id`, as `openqq up` writes it to the data
/// dir's log (its fields flattened), once it is there.
async fn audit_line(data_dir: &Path, correlation_id: &str) -> Value {
    let log = data_dir.join("logs").join("openqq.jsonl");
    for _ in 0..100 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|l| if l["fields"].is_object() { l["fields"].clone() } else { l })
            .find(|l| l["message"] == "A design was deleted." && l["correlation_id"] == correlation_id);
        if let Some(line) = found {
            return line;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no audit line for {correlation_id} in {}", log.display());
}

/// The tenant's feed entries after `after`.
async fn feed_after(client: &Client, after: u64) -> Vec<Value> {
    let (status, page) = client.get(&format!("/v1/events?after={after}&limit=500")).await.unwrap();
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_design_is_gone_with_its_objects_audited_in_the_feed_and_can_be_submitted_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &SLOW_CONSUMERS).unwrap();
    let alpha = Client::new(&server.url, &server.token("alpha"));
    let beta = Client::new(&server.url, &server.token("beta"));

    let (status, accepted) = alpha.post("/v1/designs", &blink_design("doomed")).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/designs/{id}");

    // In flight: refused, and nothing is deleted.
    let (status, _, problem) = delete(&alpha, &path, "delete-too-early").await;
    assert_eq!(status, 409, "a revision in flight: {problem}");
    assert_eq!(problem["type"], "urn:openqq:problem:design-in-flight", "{problem}");
    alpha.wait_for(&id, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
    let objects = objects_of(&server.data_dir, "alpha");
    assert!(!objects.is_empty(), "the 200 KB netlist is kept by reference in the data dir");

    // Another tenant cannot delete it, and learns nothing: what an unknown id gets.
    let (status, _, foreign) = delete(&beta, &path, "delete-foreign").await;
    assert_eq!(status, 404, "{foreign}");
    let (_, _, unknown) = delete(&beta, &format!("/v1/designs/{UNKNOWN_ID}"), "delete-unknown").await;
    assert_eq!(foreign, unknown, "another tenant's design reads as an id that does not exist");
    assert_eq!(alpha.get(&path).await.unwrap().0, 200, "the design is untouched");

    let head = feed_after(&alpha, 0).await.last().map_or(0, |e| e["seq"].as_u64().unwrap());
    let (status, echoed, body) = delete(&alpha, &path, "delete-doomed-1").await;
    assert_eq!((status, echoed.as_str()), (204, "delete-doomed-1"), "{body}");

    for route in [path.clone(), format!("{path}/report"), format!("{path}/events")] {
        assert_eq!(alpha.get(&route).await.unwrap().0, 404, "GET {route} after the deletion");
    }
    let (_, listed) = alpha.get("/v1/designs").await.unwrap();
    assert!(listed["designs"].as_array().unwrap().iter().all(|d| d["design_id"] != *id), "{listed}");
    let left: BTreeSet<_> = objects_of(&server.data_dir, "alpha").intersection(&objects).cloned().collect();
    assert!(left.is_empty(), "its objects are gone from the data dir: {left:?}");

    let audit = feed_after(&alpha, head).await;
    let deleted: Vec<&Value> = audit.iter().filter(|e| e["kind"] == "design.deleted").collect();
    let [entry] = deleted.as_slice() else { panic!("one design.deleted entry: {audit:?}") };
    assert_eq!(
        (&entry["design_id"], &entry["revision"], &entry["correlation_id"]),
        (&Value::from(id.as_str()), &Value::from(1), &Value::from("delete-doomed-1")),
        "{entry}"
    );
    assert!(feed_after(&beta, 0).await.iter().all(|e| e["design_id"] != *id), "beta's feed never names it");
    let line = audit_line(&server.data_dir, "delete-doomed-1").await;
    assert_eq!(
        (&line["tenant_id"], &line["subject"], &line["design_id"]),
        (&"alpha".into(), &"alpha".into(), &id.as_str().into()),
        "{line}"
    );

    let (status, _, _) = delete(&alpha, &path, "delete-doomed-2").await;
    assert_eq!(status, 404, "a design is deleted once");
    let mut revision = blink_design("doomed");
    revision["revision"] = 2.into();
    revision.as_object_mut().unwrap().remove("name");
    let (status, _) = alpha.post(&format!("{path}/revisions"), &revision).await.unwrap();
    assert_eq!(status, 404, "a deleted design takes no revision");

    // The same design again: a new design, validated, its netlist kept again.
    let (status, again) = alpha.post("/v1/designs", &blink_design("doomed")).await.unwrap();
    assert_eq!(status, 202, "{again}");
    let new_id = again["design_id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, id);
    let design = alpha.wait_for(&new_id, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
    assert_eq!(design["name"], "doomed");
    assert!(!objects_of(&server.data_dir, "alpha").is_disjoint(&objects), "its netlist is stored again");
    assert_eq!(alpha.get(&path).await.unwrap().0, 404, "the deleted design stays deleted");

    // The CLI deletes it too, and says so when there is nothing to delete.
    let out = cli_delete(&server, &alpha.token, &new_id);
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openqq design delete: {said}");
    assert!(said.contains(&format!("Deleted design {new_id}.")), "{said}");
    assert_eq!(alpha.get(&format!("/v1/designs/{new_id}")).await.unwrap().0, 404);
    let out = cli_delete(&server, &alpha.token, &new_id);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success() && said.contains("was not found"), "a second deletion fails: {said}");
}

/// Two designs with the very same findings each have their own full report: deleting one takes
/// its full report from the data dir and leaves the other's readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_design_takes_its_full_report_and_leaves_an_identical_designs() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let alpha = Client::new(&server.url, &server.token("alpha"));
    let mut full_reports = Vec::new();
    for name in ["wide-1", "wide-2"] {
        let (status, accepted) = alpha.post("/v1/designs", &wide_port_design("wide", 20_000)).await.unwrap();
        assert_eq!(status, 202, "{name}: {accepted}");
        let id = accepted["design_id"].as_str().unwrap().to_owned();
        alpha.wait_for(&id, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
        let (_, report) = alpha.get(&format!("/v1/designs/{id}/report")).await.unwrap();
        let digest = report["full_report"]["digest"].as_str().expect("a capped report").to_owned();
        assert_eq!(report["full_report"]["design_id"], id.as_str(), "{name}: the pointer names its design");
        full_reports.push((id, digest));
    }
    let [(doomed, doomed_full), (twin, twin_full)] = full_reports.as_slice() else { unreachable!() };
    assert_ne!(doomed_full, twin_full, "the same findings, yet each design's full report is its own object");

    let (status, _, body) = delete(&alpha, &format!("/v1/designs/{doomed}"), "delete-wide").await;
    assert_eq!(status, 204, "{body}");
    let objects = objects_of(&server.data_dir, "alpha");
    assert!(!objects.contains(doomed_full), "the deleted design's full report is gone");
    assert!(objects.contains(twin_full), "the other's stays");
    let (status, full) = alpha.get(&format!("/v1/designs/{twin}/report/full")).await.unwrap();
    assert_eq!(status, 200, "{full}");
    assert!(full["findings"].as_array().unwrap().len() >= 20_000, "every finding of the other design");
    assert_eq!(full["design_id"], twin.as_str());
}
