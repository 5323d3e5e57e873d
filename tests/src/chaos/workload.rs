//! The chaos run's tenants, each a well-behaved client: an editor saving revisions of its
//! designs, some posting batches, all holding webhooks. Each retries what was not acknowledged
//! (5xx, 429, 409 `idempotency-conflict`, no answer) until it is or the run ends, and the journal
//! keeps every request and every acknowledgement.

use super::journal::{CutOff, Hook, Journal, Request};
use super::rng::Rng;
use crate::Client;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The kinds every webhook of the run subscribes to.
pub const HOOK_KINDS: [&str; 3] = ["results.ready", "design.failed", "batch.completed"];

pub struct Tenant {
    pub name: String,
    pub client: Client,
    pub journal: Journal,
    pub stop: Arc<AtomicBool>,
}

/// Sleeps `ms`, waking early when the run stops; whether it is still running.
pub async fn nap(ms: u64, stop: &AtomicBool) -> bool {
    let until = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        tokio::time::sleep((until - Instant::now()).min(Duration::from_millis(100))).await;
    }
    !stop.load(Ordering::SeqCst)
}

impl Tenant {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::SeqCst)
    }

    /// One POST, journaled.
    async fn post(&self, what: &'static str, path: &str, body: &Value, key: Option<&str>) -> Option<(u16, Value)> {
        let sent = Instant::now();
        let c = &self.client;
        let mut req = c.http.post(format!("{}{path}", c.base)).bearer_auth(&c.token).json(body);
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        let outcome = match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                Some((status, resp.json::<Value>().await.unwrap_or(Value::Null)))
            }
            Err(_) => None,
        };
        let status = outcome.as_ref().map(|(s, _)| *s);
        self.journal.request(Request { tenant: self.name.clone(), what, sent, answered: Instant::now(), status });
        outcome
    }

    /// POSTs until answered `expected`; `None` when the run stopped first or the answer was a
    /// refusal a retry cannot change (journaled as unexpected).
    async fn post_until(
        &self,
        what: &'static str,
        path: &str,
        body: &Value,
        key: Option<&str>,
        expected: u16,
    ) -> Option<Value> {
        while self.running() {
            match self.post(what, path, body, key).await {
                Some((s, v)) if s == expected => return Some(v),
                Some((s, v)) if s < 500 && s != 429 && s != 409 => {
                    self.journal.unexpected(format!("{} {what} {path}: {s} {v}", self.name));
                    return None;
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        if let (Some(key), "create" | "batch") = (key, what) {
            let (tenant, path, body, key) = (self.name.clone(), path.to_owned(), body.clone(), key.to_owned());
            self.journal.cut_off(CutOff { tenant, path, body, key });
        }
        None
    }

    /// Creates designs one after another, each under an idempotency key so that a retry after a
    /// lost answer is the same design, and saves 2–30 revisions of each, in order, resending
    /// about one in four as a client that lost the answer would.
    pub async fn edit(self: Arc<Self>, mut rng: Rng, design: Value) {
        while self.running() {
            let key = format!("{}-create-{:016x}", self.name, rng.draw());
            let Some(created) = self.post_until("create", "/v1/designs", &design, Some(&key), 202).await else {
                return;
            };
            let id = created["design_id"].as_str().expect("a 202 names its design").to_owned();
            self.journal.acknowledged(&self.name, &id, 1);
            let path = format!("/v1/designs/{id}/revisions");
            for revision in 2..rng.range(3, 31) {
                let mut body = design.clone();
                body["revision"] = json!(revision);
                self.journal.attempted(&self.name, &id, revision);
                for _ in 0..1 + u64::from(rng.below(4) == 0) {
                    if self.post_until("revise", &path, &body, None, 202).await.is_none() {
                        return;
                    }
                }
                self.journal.acknowledged(&self.name, &id, revision);
                if !nap(rng.range(20, 150), &self.stop).await {
                    return;
                }
            }
        }
    }

    /// Every 5–15 s a batch of 5–20 new designs, under an idempotency key so that a retry after
    /// a lost answer is the same batch.
    pub async fn batches(self: Arc<Self>, mut rng: Rng, design: Value) {
        for n in 0.. {
            if !nap(rng.range(5_000, 15_000), &self.stop).await {
                return;
            }
            let count = rng.range(5, 21) as usize;
            let items: Vec<Value> = (0..count)
                .map(|i| {
                    let mut item = design.clone();
                    item["custom_id"] = json!(format!("{n}-{i}"));
                    item
                })
                .collect();
            let body = json!({"name": format!("chaos-{n}"), "items": items});
            let key = format!("{}-batch-{n}", self.name);
            let Some(accepted) = self.post_until("batch", "/v1/batches", &body, Some(&key), 202).await else { return };
            let id = accepted["batch_id"].as_str().expect("a 202 names its batch");
            self.journal.batch(&self.name, id, count);
        }
    }

    /// Registers a webhook for [`HOOK_KINDS`] at `url`.
    pub async fn register(&self, url: &str, from_start: bool, n: usize) {
        let body = json!({"url": url, "kinds": HOOK_KINDS});
        let key = format!("{}-hook-{n}", self.name);
        if let Some(created) = self.post_until("webhook", "/v1/webhooks", &body, Some(&key), 201).await {
            let id = created["id"].as_str().expect("a 201 names its webhook").to_owned();
            let kinds = HOOK_KINDS.iter().map(|k| k.to_string()).collect();
            self.journal.hook(Hook { tenant: self.name.clone(), id, kinds, from_start });
        }
    }
}
