//! The checker: once every fault has ended, reads back what the platform holds and compares it
//! with what clients were told (the journal) and what the receiver got, per tenant and design.

use super::journal::{CutOff, Entries, Hook};
use super::receiver::Receiver;
use crate::Client;
use openqq_core::{DeadLetter, LogRecord};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// The four stages every acknowledged revision must reach exactly once, in revision order.
const STAGES: [&str; 4] = ["design.submitted", "validation.started", "validation.finished", "results.ready"];

/// How long after a down window ends a failed request is still put down to it: a restarted
/// process's clients reconnecting, a broker's producer finding its partitions again.
pub const SETTLE_GRACE: Duration = Duration::from_secs(5);

/// What the checker found. Every `Vec<String>` names the violations of one promise.
#[derive(Debug, Default)]
pub struct Findings {
    pub designs: usize,
    pub revisions: usize,
    pub lost: Vec<String>,
    pub twice: Vec<String>,
    pub out_of_order: Vec<String>,
    pub failed: Vec<String>,
    pub batches: usize,
    pub batch_items: usize,
    pub batch_problems: Vec<String>,
    /// Designs a tenant holds that no client was told of (a creation cut off by a kill, then
    /// retried): counted, not a violation.
    /// Designs a tenant holds that no client was told of: every creation is keyed, so a creation
    /// cut off and retried must name the same design.
    pub unacknowledged_designs: Vec<String>,
    /// Keyed creations the run's end cut off, sent again and acknowledged before the checks.
    pub settled: usize,
    pub poison: usize,
    pub poison_missing: Vec<String>,
    pub other_dead_letters: Vec<String>,
    pub hooks: usize,
    pub delivered: usize,
    pub dead: BTreeMap<String, usize>,
    pub delivery_problems: Vec<String>,
    /// Deliveries the receiver answered 2xx more than once (its de-duplication on `webhook-id`
    /// drops the repeats).
    pub redelivered: usize,
    pub requests: usize,
    pub failed_in_windows: usize,
    /// Failed within [`SETTLE_GRACE`] after a window, by the fault of the window they follow and
    /// what they got (a status, or `no answer`).
    pub failed_in_grace: BTreeMap<(&'static str, String), usize>,
    pub failed_outside: Vec<String>,
    pub unexpected: Vec<String>,
}

impl Findings {
    pub fn violations(&self) -> Vec<(&'static str, &Vec<String>)> {
        [
            ("acknowledged revision lost", &self.lost),
            ("event applied twice", &self.twice),
            ("revision applied out of order", &self.out_of_order),
            ("acknowledged revision failed", &self.failed),
            ("batch not whole", &self.batch_problems),
            ("poison record not dead-lettered with its reason", &self.poison_missing),
            ("dead letter that is no poison record", &self.other_dead_letters),
            ("webhook delivery wrong", &self.delivery_problems),
            ("5xx or no answer outside a down window", &self.failed_outside),
            ("refusal a compliant client should not get", &self.unexpected),
            ("design created that no client was told of (created twice)", &self.unacknowledged_designs),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect()
    }
}

/// GETs `path` until it answers 200: a read may time out or be refused for a while as the
/// platform catches up after the faults (a slow store stand-in, say).
async fn get(c: &Client, path: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let last = match c.get(path).await {
            Ok((200, body)) => return body,
            Ok((status, body)) if status < 500 && status != 429 => panic!("reading back {path}: {status} {body}"),
            Ok((status, body)) => format!("{status} {body}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(Instant::now() < deadline, "reading back {path}: {last}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every page of a listing: `field` holds the page's items, `next` the cursor parameter's value.
async fn pages(c: &Client, path: &str, field: &str, next: &str, param: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{path}{sep}{param}={c}"),
            None => path.to_owned(),
        };
        let page = get(c, &url).await;
        let items = page[field].as_array().cloned().unwrap_or_default();
        let done = items.is_empty();
        all.extend(items);
        cursor = match &page[next] {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        if cursor.is_none() || done {
            return all;
        }
    }
}

/// A design's timeline once every revision submitted has ended (or `within` passed).
async fn settled_timeline(c: &Client, id: &str, last: u64, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let events =
            get(c, &format!("/v1/designs/{id}/events")).await["events"].as_array().cloned().unwrap_or_default();
        let submitted: HashSet<u64> = of_kind(&events, "design.submitted").into_iter().collect();
        let ended: HashSet<u64> =
            events.iter().filter(|e| e["kind"] == "results.ready" || e["kind"] == "design.failed").map(rev).collect();
        if (submitted.contains(&last) && submitted.is_subset(&ended)) || Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn rev(e: &Value) -> u64 {
    e["revision"].as_u64().unwrap_or(0)
}

fn of_kind(events: &[Value], kind: &str) -> Vec<u64> {
    events.iter().filter(|e| e["kind"] == kind).map(rev).collect()
}

/// Revisions, acknowledged ones first: lost, applied twice, out of order, failed.
pub async fn designs(f: &mut Findings, e: &Entries, clients: &HashMap<String, Client>, within: Duration) {
    for ((tenant, id), posted) in &e.designs {
        if posted.acknowledged.is_empty() {
            continue;
        }
        f.designs += 1;
        f.revisions += posted.acknowledged.len();
        let c = &clients[tenant];
        let last = *posted.acknowledged.iter().max().unwrap();
        let events = settled_timeline(c, id, last, within).await;
        let at = |what: &str| format!("{tenant}/{id}: {what}");
        for kind in STAGES {
            let revs = of_kind(&events, kind);
            for r in &posted.acknowledged {
                match revs.iter().filter(|x| *x == r).count() {
                    0 => f.lost.push(at(&format!("revision {r} has no {kind} (revisions with one: {revs:?})"))),
                    1 => {}
                    n => f.twice.push(at(&format!("revision {r} has {n} {kind}"))),
                }
            }
            if revs.windows(2).any(|w| w[0] > w[1]) {
                f.out_of_order.push(at(&format!("{kind} in the order {revs:?}")));
            }
            if let Some(r) = revs.iter().find(|r| !posted.attempted.contains(r)) {
                f.twice.push(at(&format!("revision {r} applied, never posted")));
            }
        }
        let ids: HashSet<&str> = events.iter().filter_map(|e| e["event_id"].as_str()).collect();
        if ids.len() != events.len() {
            f.twice.push(at("an event id appears twice in its timeline"));
        }
        for r in of_kind(&events, "design.failed") {
            if posted.acknowledged.contains(&r) {
                f.failed.push(at(&format!("revision {r} failed")));
            }
        }
    }
}

/// Each acknowledged batch finished with every item ready, each item's design through the four
/// stages once.
pub async fn batches(f: &mut Findings, e: &Entries, clients: &HashMap<String, Client>, within: Duration) {
    for (tenant, id, items) in &e.batches {
        f.batches += 1;
        f.batch_items += items;
        let c = &clients[tenant];
        let batch = match crate::batches::finished(c, id, within, Duration::from_millis(250)).await {
            Ok(b) => b,
            Err(err) => {
                f.batch_problems.push(format!("{tenant}/{id}: {err:#}"));
                continue;
            }
        };
        let ready = batch["counts"]["ready"].as_u64().unwrap_or(0) as usize;
        if ready != *items {
            f.batch_problems.push(format!("{tenant}/{id}: {ready} of {items} items ready: {}", batch["counts"]));
        }
        let listed = get(c, &format!("/v1/batches/{id}/items?limit=1000")).await;
        for item in listed["items"].as_array().into_iter().flatten() {
            let Some(design) = item["design_id"].as_str() else {
                f.batch_problems.push(format!("{tenant}/{id}: an item without a design: {item}"));
                continue;
            };
            let events = get(c, &format!("/v1/designs/{design}/events")).await["events"].as_array().cloned();
            let events = events.unwrap_or_default();
            for kind in STAGES {
                let n = of_kind(&events, kind).len();
                if n != 1 {
                    f.batch_problems.push(format!("{tenant}/{id} item {design}: {n} {kind}"));
                }
            }
        }
    }
}

/// Sends each keyed creation the run's end cut off again, as its client would, and journals what
/// it is answered as acknowledged: the checks after it then hold it to every promise. If the
/// cut-off request had created something, the answer must name it ([`unacknowledged`]).
pub async fn settle_cut_offs(f: &mut Findings, e: &mut Entries, clients: &HashMap<String, Client>) {
    for c in std::mem::take(&mut e.cut_off) {
        match settle(&clients[&c.tenant], &c).await {
            Ok(answer) => {
                if let Some(design) = answer["design_id"].as_str() {
                    let posted = e.designs.entry((c.tenant.clone(), design.to_owned())).or_default();
                    posted.attempted.push(1);
                    posted.acknowledged.push(1);
                }
                if let Some(batch) = answer["batch_id"].as_str() {
                    let items = answer["items"].as_u64().unwrap_or(0) as usize;
                    e.batches.push((c.tenant.clone(), batch.to_owned(), items));
                }
                f.settled += 1;
            }
            Err(why) => f.unacknowledged_designs.push(format!("{} {} ({}): {why}", c.tenant, c.path, c.key)),
        }
    }
}

/// Designs each tenant holds that neither an editor nor a batch was told of: every creation is
/// keyed, so a creation cut off and sent again names the same design or batch, never a second.
pub async fn unacknowledged(f: &mut Findings, e: &Entries, clients: &HashMap<String, Client>) {
    let mut known: HashSet<String> = e.designs.keys().map(|(_, d)| d.clone()).collect();
    for (tenant, id, _) in &e.batches {
        let listed = get(&clients[tenant], &format!("/v1/batches/{id}/items?limit=1000")).await;
        known.extend(
            listed["items"].as_array().into_iter().flatten().filter_map(|i| i["design_id"].as_str()).map(str::to_owned),
        );
    }
    for c in clients.values() {
        for d in pages(c, "/v1/designs?limit=100", "designs", "next_cursor", "cursor").await {
            if let Some(id) = d["design_id"].as_str().filter(|id| !known.contains(*id)) {
                f.unacknowledged_designs.push(format!("{id}: {}", d["name"]));
            }
        }
    }
}

/// Sends a cut-off creation again with its key until it is answered 202 (a claim its first
/// sending left holds the key for up to a minute: 409 until then), within two minutes.
async fn settle(c: &Client, cut: &CutOff) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let sent = c
            .http
            .post(format!("{}{}", c.base, cut.path))
            .bearer_auth(&c.token)
            .header("idempotency-key", &cut.key)
            .json(&cut.body)
            .send()
            .await;
        let last = match sent {
            Ok(resp) if resp.status().as_u16() == 202 => return resp.json::<Value>().await.map_err(|e| e.to_string()),
            Ok(resp) if matches!(resp.status().as_u16(), 409 | 429) || resp.status().is_server_error() => {
                format!("answered {}", resp.status())
            }
            Ok(resp) => return Err(format!("answered {}: {}", resp.status(), resp.text().await.unwrap_or_default())),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(format!("not acknowledged within 120 s: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every poison record was dead-lettered with a reason; nothing else was.
pub fn dead_letters(f: &mut Findings, e: &Entries, records: &[LogRecord]) {
    let mut found: HashMap<String, String> = HashMap::new();
    for r in records {
        match DeadLetter::from_record(r) {
            Ok(d) => {
                let correlation = d
                    .headers
                    .iter()
                    .find(|(k, _)| k == "correlation-id")
                    .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default();
                if e.poison.contains(&correlation) {
                    found.insert(correlation, d.reason);
                } else {
                    f.other_dead_letters.push(format!(
                        "{} gave up on {}/{}@{} ({correlation}): {}",
                        d.function, d.source_topic, d.source_partition, d.source_offset, d.reason
                    ));
                }
            }
            Err(err) => f.other_dead_letters.push(format!("an unreadable dead letter: {err}")),
        }
    }
    f.poison = e.poison.len();
    for marker in &e.poison {
        match found.get(marker) {
            Some(reason) if !reason.trim().is_empty() => {}
            Some(_) => f.poison_missing.push(format!("{marker}: dead-lettered without a reason")),
            None => f.poison_missing.push(format!("{marker}: not dead-lettered")),
        }
    }
}

/// Every delivery ended (delivered or dead with its reason); each delivered one reached the
/// receiver with a 2xx; a webhook there from the start got every entry of its kinds.
pub async fn deliveries(
    f: &mut Findings,
    e: &Entries,
    clients: &HashMap<String, Client>,
    r: &Receiver,
    within: Duration,
) {
    let mut listed = Vec::new();
    for hook in &e.hooks {
        listed.push(settled_deliveries(&clients[&hook.tenant], hook, within).await);
    }
    // What the receiver got, read once every delivery has ended.
    let got = r.log();
    let mut answered_ok: HashMap<&str, usize> = HashMap::new();
    for g in got.iter().filter(|g| g.answered.is_some_and(|s| (200..300).contains(&s))) {
        *answered_ok.entry(g.webhook_id.as_str()).or_default() += 1;
    }
    f.redelivered = answered_ok.values().filter(|n| **n > 1).count();
    for (hook, items) in e.hooks.iter().zip(listed) {
        f.hooks += 1;
        let c = &clients[&hook.tenant];
        let mut seqs = HashSet::new();
        for d in &items {
            let message = d["message_id"].as_str().unwrap_or_default();
            if !seqs.insert(d["seq"].as_u64().unwrap_or(0)) {
                f.delivery_problems.push(format!("{}: entry {} has two deliveries", hook.id, d["seq"]));
            }
            match d["status"].as_str() {
                Some("delivered") if answered_ok.contains_key(message) => f.delivered += 1,
                Some("delivered") => {
                    f.delivery_problems.push(format!("{message}: listed delivered, never answered 2xx by the receiver"))
                }
                Some("dead") => {
                    let reason = match (&d["last_status_code"], d["last_error"].as_str()) {
                        (Value::Number(n), _) => format!("status {n}"),
                        (_, Some(err)) if !err.is_empty() => err.chars().take(60).collect(),
                        _ => {
                            f.delivery_problems.push(format!("{message}: dead without a reason"));
                            continue;
                        }
                    };
                    *f.dead.entry(reason).or_default() += 1;
                }
                other => f.delivery_problems.push(format!("{message}: still {other:?} after the run settled")),
            }
        }
        if hook.from_start {
            let feed = pages(c, "/v1/events?limit=500", "items", "next_after", "after").await;
            for entry in feed.iter().filter(|x| hook.kinds.iter().any(|k| x["kind"] == k.as_str())) {
                if !seqs.contains(&entry["seq"].as_u64().unwrap_or(0)) {
                    f.delivery_problems
                        .push(format!("{}: entry {} ({}) has no delivery", hook.id, entry["seq"], entry["kind"]));
                }
            }
        }
    }
}

async fn settled_deliveries(c: &Client, hook: &Hook, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let path = format!("/v1/webhooks/{}/deliveries?limit=100", hook.id);
        let items = pages(c, &path, "items", "next", "cursor").await;
        if items.iter().all(|d| d["status"] != "pending") || Instant::now() > deadline {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every request that got a 5xx or no answer happened while something every request needs was
/// down (or within [`SETTLE_GRACE`] of it coming back).
pub fn availability(f: &mut Findings, e: &Entries, end: Instant) {
    f.requests = e.requests.len();
    f.unexpected = e.unexpected.clone();
    let spans: Vec<(Instant, Instant, &'static str)> =
        e.windows.iter().map(|w| (w.start, w.end.unwrap_or(end), w.fault)).collect();
    for r in e.requests.iter().filter(|r| r.status.is_none_or(|s| s >= 500)) {
        let overlapping = |grace: Duration| spans.iter().find(|(s, end, _)| r.sent <= *end + grace && r.answered >= *s);
        if overlapping(Duration::ZERO).is_some() {
            f.failed_in_windows += 1;
            continue;
        }
        let status = r.status.map_or("no answer".to_owned(), |s| s.to_string());
        if let Some((_, _, fault)) = overlapping(SETTLE_GRACE) {
            *f.failed_in_grace.entry((fault, status)).or_default() += 1;
        } else {
            f.failed_outside.push(format!("{} {}: {status} after {:?}", r.tenant, r.what, r.answered - r.sent));
        }
    }
}
