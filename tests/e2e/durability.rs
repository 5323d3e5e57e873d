//! Order and durability under SIGKILL: many tenants post client-numbered revisions while the
//! runner is killed mid-stream and restarted on the same data dir. Clients retry until 202 and
//! sometimes resend an acknowledged revision, so duplicates reach the log. Every acknowledged
//! revision must reach `results.ready` exactly once, in revision order, and every design must
//! end at its highest revision.

use openqq_e2e::{blink_design, Client, Server};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const TENANTS: usize = 8;
const REVISIONS: u64 = 25;

/// Posts until 202 (the server may be down or restarting); returns the accepted body.
async fn post_until_accepted(c: &Client, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match c.post(path, body).await {
            Ok((202, accepted)) => return accepted,
            Ok((status, problem)) if status < 500 && status != 429 => panic!("{path} answered {status}: {problem}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "{path} was never accepted");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// One tenant's editor: creates a design, then saves revisions 2..=REVISIONS in order.
async fn editor(c: Client, seed: u64) -> (String, Vec<u64>) {
    let mut rng = seed;
    let mut next = || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        rng >> 33
    };
    let created = post_until_accepted(&c, "/v1/designs", &blink_design("durable")).await;
    let id = created["design_id"].as_str().unwrap().to_owned();
    let mut acked = vec![1];
    for rev in 2..=REVISIONS {
        let mut body = blink_design("durable");
        body["revision"] = json!(rev);
        let path = format!("/v1/designs/{id}/revisions");
        post_until_accepted(&c, &path, &body).await;
        acked.push(rev);
        if next() % 4 == 0 {
            // A client that lost the response resends the same revision.
            post_until_accepted(&c, &path, &body).await;
        }
        tokio::time::sleep(Duration::from_millis(next() % 60)).await;
    }
    (id, acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_revision_reaches_results_ready_once_in_order_across_sigkill_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--rate-limit", "100000/1s", "--batch-window", "20ms", "--batch-size", "7"];
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let editors: Vec<_> = (0..TENANTS)
        .map(|i| {
            let c = Client::new(&server.url, &server.token(&format!("tenant-{i}")));
            (i, c)
        })
        .collect();
    let clients: BTreeMap<usize, Client> = editors.iter().cloned().collect();
    let tasks: Vec<_> = editors.into_iter().map(|(i, c)| tokio::spawn(editor(c, i as u64 + 1))).collect();

    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!tasks.iter().all(|t| t.is_finished()), "the kill lands while clients are still posting");
        server.kill9();
        server.restart().unwrap();
    }
    let mut results = BTreeMap::new();
    for (i, t) in tasks.into_iter().enumerate() {
        results.insert(i, t.await.unwrap());
    }
    // One more kill after the last acknowledgement: nothing acknowledged may be lost.
    server.kill9();
    server.restart().unwrap();

    for (i, (id, acked)) in &results {
        let c = &clients[i];
        let last = *acked.last().unwrap();
        c.wait_for(id, Duration::from_secs(60), |d| d["revision"] == last && d["status"] == "ready").await.unwrap();
        let (_, events) = c.get(&format!("/v1/designs/{id}/events")).await.unwrap();
        let events = events["events"].as_array().unwrap();
        for kind in ["design.submitted", "validation.started", "validation.finished", "results.ready"] {
            let revs: Vec<u64> = events.iter().filter(|e| e["kind"] == kind).map(|e| e["revision"].as_u64().unwrap()).collect();
            assert_eq!(&revs, acked, "tenant-{i}: every acknowledged revision has exactly one {kind}, in order");
        }
        let ids: std::collections::HashSet<&str> = events.iter().map(|e| e["event_id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), events.len(), "no event applied twice");
    }
}
