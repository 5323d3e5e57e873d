//! Noisy neighbours: each attack runs while victim tenants on the attacker's partition submit
//! designs. Every victim must reach `ready` within a small multiple of its latency without the
//! attack, measured first on the same server, and the attacker's own designs must reach a final
//! state (`ready` or `failed`): nothing the attacker does may wedge a partition.

use openqq_adapters::{Durability, EmbeddedEventLog};
use openqq_core::event::Origin;
use openqq_core::ports::MAX_RECORD_BYTES;
use openqq_core::{CorrelationId, DesignId, Envelope, EventKind, EventLog, LogSource, TenantId, Topics};
use openqq_e2e::noisy::PARTITIONS;
use openqq_e2e::noisy::{
    all_final, allowed_under_attack, long_named_bus_design, pll_netnames_design, wide_port_design, worst_latency, Arena,
};
use openqq_e2e::slow_client::open_slow_posts;
use openqq_e2e::{compact_blink_design, Client};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

mod front_door;

const VICTIMS: usize = 3;
const ROUNDS: usize = 3;
const WITHIN: Duration = Duration::from_secs(60);

/// Measures the victims without and then with `attack` running, and checks the bound.
async fn victims_keep_their_latency<F, Fut>(arena: &Arena, attack: F) -> Vec<String>
where
    F: FnOnce(Client, Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = Vec<String>> + Send + 'static,
{
    let baseline = worst_latency(&arena.victims, ROUNDS, WITHIN).await.expect("victims reach ready without an attack");
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = tokio::spawn(attack(arena.attacker.clone(), stop.clone()));
    // Let the attack build up before the victims start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let under_attack = worst_latency(&arena.victims, ROUNDS, WITHIN).await;
    stop.store(true, Ordering::SeqCst);
    let attacker_designs = attacker.await.expect("the attack task ends");
    let under_attack = under_attack.expect("victims reach ready during the attack");
    eprintln!("victims: {baseline:?} without the attack, {under_attack:?} with it");
    assert!(
        under_attack <= allowed_under_attack(baseline),
        "victims took {under_attack:?} under attack against {baseline:?} without"
    );
    attacker_designs
}

/// Submits `design` every `every` until stopped (at most `max` times); returns the accepted ids.
async fn submit_until_stopped(
    c: Client,
    stop: Arc<AtomicBool>,
    design: serde_json::Value,
    every: Duration,
    max: usize,
) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..max {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if let Ok((202, body)) = c.post("/v1/designs", &design).await {
            ids.push(body["design_id"].as_str().unwrap().to_owned());
        }
        tokio::time::sleep(every).await;
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_with_a_finding_per_bit_of_a_20000_bit_port_wedges_no_victim() {
    let arena = Arena::start(VICTIMS, &[]);
    let design = wide_port_design("wide", 20_000);
    let ids = victims_keep_their_latency(&arena, move |c, stop| {
        submit_until_stopped(c, stop, design, Duration::from_millis(250), 200)
    })
    .await;
    assert!(!ids.is_empty(), "the attacker's designs were accepted");
    all_final(&arena.attacker, &ids, WITHIN).await.expect("the attacker's designs reach a final state");
    let (status, report) = arena.attacker.get(&format!("/v1/designs/{}/report", ids[0])).await.unwrap();
    assert_eq!(status, 200, "the capped report is readable: {report}");
    assert_eq!(report["verdict"], "fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_huge_report_over_and_over_slows_no_victim() {
    let arena = Arena::start(VICTIMS, &[]);
    let (status, body) = arena.attacker.post("/v1/designs", &wide_port_design("wide", 20_000)).await.unwrap();
    assert_eq!(status, 202, "{body}");
    let id = body["design_id"].as_str().unwrap().to_owned();
    all_final(&arena.attacker, std::slice::from_ref(&id), WITHIN).await.unwrap();
    victims_keep_their_latency(&arena, move |c, stop| async move {
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let (c, stop, id) = (c.clone(), stop.clone(), id.clone());
                tokio::spawn(async move {
                    let deadline = Instant::now() + WITHIN;
                    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                        let _ = c.get(&format!("/v1/designs/{id}/report")).await;
                    }
                })
            })
            .collect();
        for r in readers {
            let _ = r.await;
        }
        Vec::new()
    })
    .await;
}

/// Holds `n` POSTs whose bodies arrive at one byte a second until stopped.
async fn slow_posts(url: &str, token: &str, n: usize, stop: Arc<AtomicBool>) {
    let mut conns = open_slow_posts(url, token, n).await;
    let deadline = Instant::now() + WITHIN;
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        for s in conns.iter_mut() {
            let _ = s.write_all(b" ").await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hundred_forty_slow_request_bodies_slow_no_victim() {
    let arena = Arena::start(VICTIMS, &[]);
    let (url, token) = (arena.server.url.clone(), arena.attacker.token.clone());
    victims_keep_their_latency(&arena, move |_, stop| async move {
        slow_posts(&url, &token, 140, stop).await;
        Vec::new()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_many_live_streams_slows_no_victim_and_is_refused_past_the_cap() {
    let arena = Arena::start(VICTIMS, &[]);
    let c = arena.attacker.clone();
    let mut statuses = Vec::new();
    let mut open = Vec::new();
    for _ in 0..50 {
        let resp = c.http.get(format!("{}/v1/events/stream", c.base)).bearer_auth(&c.token).send().await.unwrap();
        statuses.push(resp.status().as_u16());
        open.push(resp);
    }
    assert!(statuses.contains(&200), "some streams open: {statuses:?}");
    assert!(statuses.contains(&429), "streams past the per-tenant cap are refused: {statuses:?}");
    victims_keep_their_latency(&arena, |_, _| async { Vec::new() }).await;
    // A victim's own stream still opens while the attacker holds its streams.
    let v = &arena.victims[0];
    let resp = v.http.get(format!("{}/v1/events/stream", v.base)).bearer_auth(&v.token).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    drop(open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netlists_built_to_be_slow_to_validate_slow_no_victim() {
    let arena = Arena::start(VICTIMS, &[]);
    // Each just under the default body limit (900 KiB), as fast as the tenant's limits allow.
    let designs = [long_named_bus_design("bus", 850_000), pll_netnames_design("plls", 850_000)];
    let ids = victims_keep_their_latency(&arena, move |c, stop| async move {
        let mut ids = Vec::new();
        for design in designs.iter().cycle().take(400) {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            match c.post("/v1/designs", design).await {
                Ok((202, body)) => ids.push(body["design_id"].as_str().unwrap().to_owned()),
                Ok((429, _)) => tokio::time::sleep(Duration::from_millis(500)).await,
                _ => {}
            }
        }
        ids
    })
    .await;
    assert!(!ids.is_empty(), "the attacker's designs were accepted");
    all_final(&arena.attacker, &ids, Duration::from_secs(180))
        .await
        .expect("the attacker's designs reach a final state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sending_as_many_bytes_as_it_can_is_held_to_its_byte_limit_and_slows_no_victim() {
    let arena = Arena::start(VICTIMS, &["--byte-limit", "8MiB/1m"]);
    let big = wide_port_design("bytes", 40_000);
    let most = 8 * 1024 * 1024 / serde_json::to_vec(&big).unwrap().len();
    let (refused, accepted) = (Arc::new(AtomicBool::new(false)), Arc::new(std::sync::Mutex::new(0usize)));
    let (r, a) = (refused.clone(), accepted.clone());
    let ids = victims_keep_their_latency(&arena, move |c, stop| async move {
        let mut ids = Vec::new();
        for _ in 0..400 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let resp = c.http.post(format!("{}/v1/designs", c.base)).bearer_auth(&c.token).json(&big).send().await;
            let Ok(resp) = resp else { continue };
            match resp.status().as_u16() {
                202 => {
                    *a.lock().unwrap() += 1;
                    ids.push(resp.json::<serde_json::Value>().await.unwrap()["design_id"].as_str().unwrap().to_owned());
                }
                429 => {
                    assert!(resp.headers().contains_key("retry-after"), "a 429 says when to retry");
                    r.store(true, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                s => panic!("the attacker got {s}"),
            }
        }
        ids
    })
    .await;
    assert!(refused.load(Ordering::SeqCst), "the byte limit refused the flood");
    // The run is shorter than the window: no more than 8 MiB of bodies can have been accepted.
    assert!(*accepted.lock().unwrap() <= most, "accepted {} bodies of at most {most}", accepted.lock().unwrap());
    all_final(&arena.attacker, &ids, WITHIN).await.expect("the attacker's designs reach a final state");
}

/// Issue 29: one upload of the slowest netlist shape, then many tiny submissions naming it. Each
/// once re-read and re-validated the whole object past the validation budget, so the attacker's
/// records held its partition for minutes. Now each use weighs the upload against the byte
/// quota and each record's budget covers reading it. Scaled down: a 6 MiB upload, a 1 s budget
/// and a byte limit that admits two uses per window, so it is the charge per use that keeps the
/// victims' bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_submissions_naming_one_slow_upload_over_and_over_slow_no_victim() {
    let arena = Arena::start(VICTIMS, &["--validation-budget", "1s", "--byte-limit", "16MiB/10s"]);
    let mut design = long_named_bus_design("amplified", 6 << 20);
    let netlist = serde_json::to_vec(&design["netlist"]).unwrap();
    let object = openqq_e2e::noisy::upload(&arena.attacker, netlist).await.expect("the upload is stored");
    design.as_object_mut().unwrap().remove("netlist");
    design["netlist_ref"] = object;
    let refused = Arc::new(AtomicBool::new(false));
    let r = refused.clone();
    let ids = victims_keep_their_latency(&arena, move |c, stop| async move {
        let mut ids = Vec::new();
        for _ in 0..200 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            match c.post("/v1/designs", &design).await {
                Ok((202, body)) => ids.push(body["design_id"].as_str().unwrap().to_owned()),
                Ok((429, _)) => {
                    r.store(true, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Ok((status, body)) => panic!("the attacker got {status}: {body}"),
                Err(_) => {}
            }
        }
        ids
    })
    .await;
    assert!(ids.len() >= 2, "several uses of the upload were accepted: {}", ids.len());
    assert!(refused.load(Ordering::SeqCst), "each use weighs the upload against the byte limit");
    all_final(&arena.attacker, &ids, Duration::from_secs(180))
        .await
        .expect("the attacker's designs reach a final state");
    let (_, report) = arena.attacker.get(&format!("/v1/designs/{}/report", ids[0])).await.unwrap();
    assert_eq!(report["verdict"], "fail", "the budget ends each validation of the upload: {report}");
    eprintln!("{} uses of the upload accepted", ids.len());
}

/// Finding 2: a record near the 1 MiB limit that can never succeed (what an outage, a bad deploy
/// or a schema change can leave in the log) once could not be dead-lettered, because the dead
/// letter carried a base64 copy, and its partition retried it forever. Five such records of the
/// attacker sit ahead of the victims in the attacker's partition when the server starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_near_the_size_limit_that_never_succeed_are_dead_lettered_and_stall_no_victim() {
    let mut arena = Arena::start(VICTIMS, &[]);
    let baseline = worst_latency(&arena.victims, ROUNDS, WITHIN).await.expect("victims reach ready without an attack");
    arena.server.terminate().unwrap();
    let mut broken = Vec::new();
    {
        let log = EmbeddedEventLog::open(&arena.server.data_dir, PARTITIONS, Durability::Process).unwrap();
        for i in 0..5 {
            let cause = Origin {
                tenant_id: TenantId::parse("attacker").unwrap(),
                design_id: DesignId::generate(),
                revision: 1,
                correlation_id: CorrelationId::parse(format!("broken-{i}")).unwrap(),
                batch: None,
            };
            // A payload no design-job can read, just under the record limit.
            let payload = json!({"spec": {"not": "a design"}, "pad": "x".repeat(MAX_RECORD_BYTES - 2_000)});
            let record = Envelope::new(EventKind::DesignSubmitted, &cause, "api", payload).to_record();
            assert!(record.value.len() > MAX_RECORD_BYTES * 3 / 4, "a base64 copy of it would not fit a record");
            log.publish(&Topics::default().of(EventKind::DesignSubmitted), vec![record]).await.unwrap();
            broken.push(cause.design_id.to_string());
        }
    }
    arena.server.restart().unwrap();
    let under_attack = worst_latency(&arena.victims, ROUNDS, WITHIN).await.expect("victims reach ready");
    eprintln!("victims: {baseline:?} without the attack, {under_attack:?} with it");
    assert!(under_attack <= allowed_under_attack(baseline), "victims took {under_attack:?} against {baseline:?}");
    for id in &broken {
        let d = arena.attacker.wait_for(id, WITHIN, |d| d["status"] == "failed").await.expect("the revision fails");
        assert!(d["failure_reason"].as_str().is_some_and(|r| !r.is_empty()), "with its reason: {d}");
    }
    let metrics = reqwest::get(arena.server.metrics()).await.unwrap().text().await.unwrap();
    let dead = openqq_e2e::counter_sum(&metrics, "openqq_dead_letters_total", &["function=\"design-job\""]);
    assert_eq!(dead, 5.0, "each went to the dead-letter topic once");
}

/// Issue 29: the event log keeps records for days and is outside the storage quota, so what one
/// tenant's submissions may write there is bounded per UTC day (`--tenant-log-bytes`): each
/// accepted design, and each item of an accepted batch, is charged the most its records may take
/// of the log. Past the day's bytes the tenant's designs and batches are refused (429
/// `log-bytes-spent`, `Retry-After` until midnight UTC) while a tenant on the same partition goes
/// on; `GET /v1/usage` says what was charged. Read back from the log, the attacker's records take
/// no more than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_past_its_days_log_bytes_is_refused_until_midnight_and_its_records_take_no_more() {
    const LIMIT: u64 = 256 << 10;
    let mut arena = Arena::start(1, &["--tenant-log-bytes", "256KiB"]);
    let attacker = &arena.attacker;
    let (status, _) = attacker
        .post(
            "/v1/batches",
            &json!({"name": "nightly", "items": [compact_blink_design("b0"), compact_blink_design("b1")]}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202, "a batch is charged too, within the day's bytes");
    let mut ids = Vec::new();
    let refused = loop {
        let resp = attacker.http.post(format!("{}/v1/designs", attacker.base)).bearer_auth(&attacker.token);
        let resp = resp.json(&compact_blink_design(&format!("d{}", ids.len()))).send().await.unwrap();
        match resp.status().as_u16() {
            202 => ids.push(resp.json::<serde_json::Value>().await.unwrap()["design_id"].as_str().unwrap().to_owned()),
            429 => break resp,
            s => panic!("the attacker got {s}"),
        }
        assert!(ids.len() < 64, "{} designs of the attacker were charged no more than {LIMIT} bytes", ids.len());
    };
    let retry_after: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry_after), "until midnight UTC: {retry_after}");
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(problem["type"], "urn:openqq:problem:log-bytes-spent", "{problem}");
    assert!(ids.len() >= 3, "several designs fit the day's bytes: {}", ids.len());
    let (status, problem) =
        attacker.post("/v1/batches", &json!({"name": "late", "items": [compact_blink_design("b2")]})).await.unwrap();
    assert_eq!((status, problem["type"].as_str()), (429, Some("urn:openqq:problem:log-bytes-spent")), "{problem}");

    let victim = &arena.victims[0];
    let (status, accepted) = victim.post("/v1/designs", &compact_blink_design("victim")).await.unwrap();
    assert_eq!(status, 202, "a tenant on the same partition has a day of its own: {accepted}");
    let id = accepted["design_id"].as_str().unwrap();
    victim.wait_for(id, WITHIN, |d| d["status"] == "ready").await.expect("the victim's design is ready");
    all_final(attacker, &ids, WITHIN).await.expect("the attacker's accepted designs are worked through");

    let (_, usage) = attacker.get("/v1/usage").await.unwrap();
    let charged = usage["log_bytes"]["spent"].as_u64().unwrap();
    assert_eq!(usage["log_bytes"]["limit"], LIMIT, "{usage}");
    assert!(charged <= LIMIT, "{usage}");
    // The batch's items end in the batch lane; give its last records a moment to be written.
    tokio::time::sleep(Duration::from_secs(2)).await;
    arena.server.terminate().unwrap();
    let log = EmbeddedEventLog::open(&arena.server.data_dir, PARTITIONS, Durability::Process).unwrap();
    let mut written = 0;
    for topic in Topics::default().all() {
        for partition in 0..log.partitions(&topic) {
            let records = log.read(&topic, partition, 0, 100_000).await.unwrap();
            written += records
                .iter()
                .filter(|r| r.key == "attacker")
                .map(|r| r.key.len() + r.value.len() + r.headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>())
                .sum::<usize>() as u64;
        }
    }
    eprintln!(
        "{} designs and a 2-item batch accepted; {charged} log bytes charged, {written} written ({:.1}% of the charge)",
        ids.len(),
        100.0 * written as f64 / charged as f64
    );
    assert!(written > 0 && written <= charged, "the attacker's records took {written} bytes of the {charged} charged");
}
