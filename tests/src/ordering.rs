//! The ordering scenario shared by the embedded-log and Kafka suites: tenants' editors post
//! client-numbered revisions, retrying until 202 and sometimes resending an acknowledged one,
//! and the check that every acknowledged revision reached each stage exactly once, in order.

use crate::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One POST as the client saw it: when it was sent, when it was answered, and the status
/// (`None` when the connection failed or timed out).
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub sent: Instant,
    pub answered: Instant,
    pub status: Option<u16>,
}

/// Every POST of every editor, for suites that check answers against a fault window.
pub type Attempts = Arc<Mutex<Vec<Attempt>>>;

/// Posts until 202 (the server may be down, restarting, or its log unavailable); returns the
/// accepted body. Any other 4xx but 429 fails the test.
pub async fn post_until_accepted(c: &Client, path: &str, body: &Value, attempts: &Attempts) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let sent = Instant::now();
        let outcome = c.post(path, body).await;
        let status = outcome.as_ref().ok().map(|(s, _)| *s);
        attempts.lock().unwrap().push(Attempt { sent, answered: Instant::now(), status });
        match outcome {
            Ok((202, accepted)) => return accepted,
            Ok((status, problem)) if status < 500 && status != 429 => panic!("{path} answered {status}: {problem}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "{path} was never accepted");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// Pause between an editor's saves: up to this many milliseconds.
pub const EDITOR_PAUSE_MS: u64 = 60;

/// One tenant's editor: creates `design`, then saves revisions `2..=revisions` of it in order,
/// each until acknowledged, resending about one in four and pausing up to `pause_ms` between
/// saves. Returns the design id and the acknowledged revisions.
pub async fn editor(
    c: Client,
    seed: u64,
    design: Value,
    revisions: u64,
    pause_ms: u64,
    attempts: Attempts,
) -> (String, Vec<u64>) {
    editor_until(c, seed, design, revisions, pause_ms, attempts, Arc::new(AtomicBool::new(false))).await
}

/// [`editor`] that goes on saving past `revisions` for as long as `keep_going` is set, so that
/// faults injected meanwhile land while it is still posting, however fast the machine is.
pub async fn editor_until(
    c: Client,
    seed: u64,
    design: Value,
    revisions: u64,
    pause_ms: u64,
    attempts: Attempts,
    keep_going: Arc<AtomicBool>,
) -> (String, Vec<u64>) {
    let mut rng = seed;
    let mut next = || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        rng >> 33
    };
    let created = post_until_accepted(&c, "/v1/designs", &design, &attempts).await;
    let id = created["design_id"].as_str().unwrap().to_owned();
    let mut acked = vec![1];
    let mut rev = 2;
    while rev <= revisions || keep_going.load(Ordering::SeqCst) {
        let mut body = design.clone();
        body["revision"] = json!(rev);
        let path = format!("/v1/designs/{id}/revisions");
        post_until_accepted(&c, &path, &body, &attempts).await;
        acked.push(rev);
        if next() % 4 == 0 {
            // A client that lost the response resends the same revision.
            post_until_accepted(&c, &path, &body, &attempts).await;
        }
        tokio::time::sleep(Duration::from_millis(next() % pause_ms.max(1))).await;
        rev += 1;
    }
    (id, acked)
}

/// The partitions the scenarios below spread their editors over: the `openqq up` default, and
/// the mock cluster's in the Kafka suite.
pub const SPREAD_OVER: u32 = 12;

/// `n` tenant names whose records land on `n` different partitions of `partitions` (for `n` up
/// to `partitions`), so that no partition carries more than one editor's records: librdkafka's
/// mock cluster keeps 5 MB a partition and deletes what is older, read or not.
pub fn tenants_apart(n: usize, partitions: u32) -> Vec<String> {
    let mut taken = HashSet::new();
    (0..)
        .map(|i| format!("tenant-{i}"))
        .filter(|t| {
            taken.insert(openqq_core::partition::partition_for(t, partitions)) || taken.len() >= partitions as usize
        })
        .take(n)
        .collect()
}

/// How long a design may take to reach `ready` at its last acknowledged revision: a bound on
/// liveness, not a speed. Generous, because some suites slow every write on purpose (injected
/// throttling: each applied event on DynamoDB is two conditional writes, the event and its feed
/// entry, and each request may be throttled into a retried batch) and the DynamoDB stand-in serves
/// one request at a time to every suite running beside it.
pub const READY_WITHIN: Duration = Duration::from_secs(180);

/// The kinds every acknowledged revision reaches, in the order it reaches them.
const KINDS: [&str; 4] = ["design.submitted", "validation.started", "validation.finished", "results.ready"];

/// How a timeline's revisions of one kind differ from the acknowledged ones: which are missing,
/// which are there more than once, and whether the rest are out of order.
fn differences(acked: &[u64], revs: &[u64]) -> String {
    let missing: Vec<u64> = acked.iter().copied().filter(|r| !revs.contains(r)).collect();
    let mut seen = HashSet::new();
    let repeated: Vec<u64> = revs.iter().copied().filter(|r| !seen.insert(*r)).collect();
    let unacknowledged: Vec<u64> = revs.iter().copied().filter(|r| !acked.contains(r)).collect();
    let in_order = revs.windows(2).all(|w| w[0] < w[1]);
    format!(
        "missing {missing:?}, repeated {repeated:?}, never acknowledged {unacknowledged:?}, {}",
        if in_order { "the rest in order" } else { "OUT OF ORDER" }
    )
}

/// A timeline entry as `kind@revision`, for failure messages.
fn entry_label(e: &Value) -> String {
    format!("{}@{}", e["kind"].as_str().unwrap_or("?"), e["revision"])
}

/// Waits until each design is `ready` at its last acknowledged revision, then checks its
/// timeline: every acknowledged revision has exactly one entry of each of the four kinds, in
/// revision order, and no event was applied twice.
pub async fn assert_every_acknowledged_revision_ready_once_in_order(
    clients: &BTreeMap<usize, Client>,
    results: &BTreeMap<usize, (String, Vec<u64>)>,
) {
    for (i, (id, acked)) in results {
        let c = &clients[i];
        let last = *acked.last().unwrap();
        if let Err(e) = c.wait_for(id, READY_WITHIN, |d| d["revision"] == last && d["status"] == "ready").await {
            let events = c.get(&format!("/v1/designs/{id}/events")).await.map(|(_, v)| v).unwrap_or_default();
            let timeline: Vec<String> = events["events"].as_array().into_iter().flatten().map(entry_label).collect();
            panic!("editor {i}: {e:#}\nacknowledged revisions: {acked:?}\ntimeline: {timeline:?}");
        }
        let events = c.get_ok(&format!("/v1/designs/{id}/events"), Duration::from_secs(30)).await.unwrap();
        let events = events["events"].as_array().unwrap();
        // Every kind's differences at once: which stage first missed a revision says where it went.
        let wrong: Vec<String> = KINDS
            .iter()
            .filter_map(|kind| {
                let revs: Vec<u64> =
                    events.iter().filter(|e| e["kind"] == *kind).map(|e| e["revision"].as_u64().unwrap()).collect();
                (&revs != acked).then(|| format!("{kind}: {}", differences(acked, &revs)))
            })
            .collect();
        // Entries of other kinds (a revision given up on shows as design.failed) tell why.
        let others: Vec<String> =
            events.iter().filter(|e| !KINDS.iter().any(|k| e["kind"] == *k)).map(entry_label).collect();
        assert!(
            wrong.is_empty(),
            "editor {i} (design {id}): every acknowledged revision must have exactly one entry of each kind, in order; \
             acknowledged {}..={last} ({} revisions), but\n  {}\n  entries of other kinds: {others:?}",
            acked[0],
            acked.len(),
            wrong.join("\n  ")
        );
        let ids: HashSet<&str> = events.iter().map(|e| e["event_id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), events.len(), "editor {i}: no event applied twice");
    }
}

/// The SIGKILL scenario on a running server: `tenants` editors post `revisions` revisions of
/// `design` each while the server is SIGKILLed four times mid-stream, and once more after the
/// last acknowledgement, each time restarted after `down_for`; then every acknowledged revision
/// must reach `results.ready` once, in order. The server's extra args decide where the log lives
/// (embedded, or Kafka).
pub async fn sigkill_restarts_keep_every_acknowledged_revision_in_order(
    server: &mut crate::Server,
    design: Value,
    tenants: usize,
    revisions: u64,
    down_for: Duration,
) {
    let attempts = Attempts::default();
    let clients: BTreeMap<usize, Client> = tenants_apart(tenants, SPREAD_OVER)
        .iter()
        .enumerate()
        .map(|(i, t)| (i, Client::new(&server.url, &server.token(t))))
        .collect();
    let tasks: Vec<_> = clients
        .iter()
        .map(|(i, c)| {
            tokio::spawn(editor(c.clone(), *i as u64 + 1, design.clone(), revisions, EDITOR_PAUSE_MS, attempts.clone()))
        })
        .collect();

    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!tasks.iter().all(|t| t.is_finished()), "the kill lands while clients are still posting");
        server.kill9();
        tokio::time::sleep(down_for).await;
        server.restart().unwrap();
    }
    let mut results = BTreeMap::new();
    for (i, t) in tasks.into_iter().enumerate() {
        results.insert(i, t.await.unwrap());
    }
    // One more kill after the last acknowledgement: nothing acknowledged may be lost.
    server.kill9();
    tokio::time::sleep(down_for).await;
    server.restart().unwrap();

    assert_every_acknowledged_revision_ready_once_in_order(&clients, &results).await;
}

/// Batches a runner's consumers finished successfully, from its `/metrics`.
pub async fn batches_done(server: &crate::Server) -> u64 {
    let Ok(resp) = reqwest::get(server.metrics()).await else { return 0 };
    let text = resp.text().await.unwrap_or_default();
    crate::counter_sum(&text, "openqq_batches_total", &["outcome=\"ok\""]) as u64
}

/// Waits until `server` has finished a batch of its own: it holds some of the group's
/// partitions. Fails after `within`.
async fn until_it_consumes(server: &crate::Server, within: Duration) {
    let deadline = Instant::now() + within;
    while batches_done(server).await == 0 {
        assert!(Instant::now() < deadline, "the joining runner at {} consumed nothing within {within:?}", server.url);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runners joining and leaving the consumer groups during a burst. Editors post to `first`
/// while a second runner on the same cluster and data dir joins (a rebalance gives it part of
/// the partitions), consumes, and is SIGKILLed (its partitions return after the session
/// timeout, from the offsets it committed); then a third joins, consumes, and leaves with
/// SIGTERM (its partitions are revoked after its batches end and commit). Every acknowledged
/// revision must still reach `results.ready` once, in order. Editors pause up to `pause_ms`
/// between saves: the burst must outlast two joins and a session timeout.
pub async fn runners_joining_and_leaving_keep_every_acknowledged_revision_in_order(
    first: &crate::Server,
    design: Value,
    tenants: usize,
    revisions: u64,
    pause_ms: u64,
) {
    let attempts = Attempts::default();
    let clients: BTreeMap<usize, Client> = tenants_apart(tenants, SPREAD_OVER)
        .iter()
        .enumerate()
        .map(|(i, t)| (i, Client::new(&first.url, &first.token(t))))
        .collect();
    let tasks: Vec<_> = clients
        .iter()
        .map(|(i, c)| {
            tokio::spawn(editor(c.clone(), *i as u64 + 1, design.clone(), revisions, pause_ms, attempts.clone()))
        })
        .collect();
    let args: Vec<&str> = first.extra_args.iter().map(String::as_str).collect();

    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut second = crate::Server::start(&first.data_dir, "127.0.0.1:0", &args).unwrap();
    until_it_consumes(&second, Duration::from_secs(30)).await;
    assert!(!tasks.iter().all(|t| t.is_finished()), "the second runner consumed while clients were still posting");
    second.kill9();

    let mut third = crate::Server::start(&first.data_dir, "127.0.0.1:0", &args).unwrap();
    until_it_consumes(&third, Duration::from_secs(30)).await;
    assert!(!tasks.iter().all(|t| t.is_finished()), "the third runner consumed while clients were still posting");
    assert!(third.terminate().unwrap().success(), "a runner leaves the group cleanly on SIGTERM");

    let mut results = BTreeMap::new();
    for (i, t) in tasks.into_iter().enumerate() {
        results.insert(i, t.await.unwrap());
    }
    assert_every_acknowledged_revision_ready_once_in_order(&clients, &results).await;
}
