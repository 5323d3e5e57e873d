//! A big batch beside interactive work and a small batch: the big batch's items run in the batch
//! lane a window at a time, so an interactive tenant's designs and another tenant's small batch on
//! the same partition keep close to their times without it, judged as ratios to a no-batch run in
//! the same test; and every item of the big batch reaches a final state exactly once.

use openqq_core::partition::partition_for;
use openqq_e2e::batches::{finished, submit_by_upload};
use openqq_e2e::{compact_blink_design, App, Client};
use serde_json::Value;
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 12;
const BIG: &str = "bulk";

/// `n` compact blink designs as batch items.
fn items(prefix: &str, n: usize) -> Vec<Value> {
    (0..n).map(|i| compact_blink_design(&format!("{prefix}-{i}"))).collect()
}

/// A tenant whose records land on `BIG`'s partition, named from `prefix`.
fn beside_big(prefix: &str) -> String {
    let target = partition_for(BIG, PARTITIONS);
    (0..).map(|i| format!("{prefix}-{i}")).find(|t| partition_for(t, PARTITIONS) == target).unwrap()
}

/// Submits a batch (as an upload of JSON lines) and waits for it to finish; its time from
/// submission to finish.
async fn run_batch(c: &Client, name: &str, items: Vec<Value>, within: Duration) -> (String, Duration) {
    let start = Instant::now();
    let id = submit_by_upload(c, name, &items).await.unwrap();
    let batch = finished(c, &id, within, Duration::from_millis(50)).await.unwrap();
    assert_eq!(batch["status"], "completed", "{batch}");
    (id, start.elapsed())
}

/// `n` interactive designs one after another; each one's time from submission to `ready`.
async fn interactive(c: &Client, n: usize) -> Vec<Duration> {
    let mut took = Vec::new();
    for i in 0..n {
        let start = Instant::now();
        let (status, accepted) = c.post("/v1/designs", &compact_blink_design(&format!("live-{i}"))).await.unwrap();
        assert_eq!(status, 202, "{accepted}");
        let id = accepted["design_id"].as_str().unwrap();
        c.wait_for(id, Duration::from_secs(60), |d| d["status"] == "ready").await.unwrap();
        took.push(start.elapsed());
    }
    took.sort();
    took
}

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_item_batch_keeps_interactive_designs_and_a_small_batch_beside_it_near_their_times() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(dir.path(), &["--partitions", "12"]).unwrap();
    let big = Client::new(&app.url, &app.token(BIG));
    let small = Client::new(&app.url, &app.token(&beside_big("small")));
    let live = Client::new(&app.url, &app.token(&beside_big("live")));

    // Without the big batch.
    let live_alone = interactive(&live, 10).await;
    let (_, small_alone) = run_batch(&small, "alone", items("a", 10), Duration::from_secs(60)).await;

    // With it: the big batch starts, then the same work again beside it.
    let big_run = {
        let big = big.clone();
        tokio::spawn(async move { run_batch(&big, "bulk", items("b", 1000), Duration::from_secs(300)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (live_beside, (_, small_beside)) =
        tokio::join!(interactive(&live, 10), run_batch(&small, "beside", items("s", 10), Duration::from_secs(120)));
    let (big_id, big_took) = big_run.await.unwrap();

    let (alone, beside) = (median(&live_alone), median(&live_beside));
    eprintln!(
        "interactive median {alone:?} alone, {beside:?} beside the batch ({:.2}x); small batch {small_alone:?} alone, \
         {small_beside:?} beside ({:.2}x); the 1000-item batch took {big_took:?}",
        beside.as_secs_f64() / alone.as_secs_f64(),
        small_beside.as_secs_f64() / small_alone.as_secs_f64()
    );
    assert!(beside <= alone * 3 + Duration::from_millis(500), "interactive {alone:?} → {beside:?}");
    assert!(small_beside <= small_alone * 3 + Duration::from_secs(2), "small batch {small_alone:?} → {small_beside:?}");

    // Every item of the big batch ended once: all ready, each design with one submission.
    let (_, batch) = big.get(&format!("/v1/batches/{big_id}")).await.unwrap();
    assert_eq!(batch["counts"]["ready"], 1000, "{batch}");
    assert_eq!(batch["verdicts"]["pass"], 1000, "{batch}");
    let mut after = String::new();
    let mut designs = std::collections::BTreeSet::new();
    loop {
        let (_, page) = big.get(&format!("/v1/batches/{big_id}/items?limit=1000{after}")).await.unwrap();
        for item in page["items"].as_array().unwrap() {
            assert_eq!(item["status"], "ready", "{item}");
            assert!(designs.insert(item["design_id"].as_str().unwrap().to_owned()), "a design twice: {item}");
        }
        match page["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    assert_eq!(designs.len(), 1000);
    let (_, listed) = big.get("/v1/designs?limit=100").await.unwrap();
    assert!(listed["designs"].as_array().unwrap().iter().all(|d| d["revision"] == 1), "{listed}");
}
