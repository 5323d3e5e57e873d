//! The load: a steady stream of designs from every tenant, each followed until it is ready (its
//! time from the 202 to `ready` is the latency sampled), a burst now and then (one tenant's
//! batch), a webhook receiver every tenant's results are delivered to, and tenants that delete
//! their designs once they are a few minutes old.

use anyhow::{bail, Result};
use openqq_e2e::batches::submit_by_upload;
use openqq_e2e::throughput::compact;
use openqq_e2e::Client;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the load has seen, shared between its tasks and the sampler.
#[derive(Default)]
pub struct Seen {
    /// Designs and batch items answered 202.
    pub accepted: AtomicU64,
    /// Steady designs that did not become ready within [`READY_WITHIN`], or were refused.
    pub errors: AtomicU64,
    /// (when it became ready, its time from the 202 to `ready`) of every steady design.
    pub ready: Mutex<Vec<(Instant, Duration)>>,
    /// Designs that ended, oldest first, to delete once they are old enough: (when it ended, its
    /// tenant's index, its id).
    pub ended: Mutex<VecDeque<(Instant, usize, String)>>,
    /// Designs deleted (204), and deletions that failed for good.
    pub deleted: AtomicU64,
    pub delete_errors: AtomicU64,
}

/// Longest a steady design is followed.
const READY_WITHIN: Duration = Duration::from_secs(120);

impl Seen {
    /// p50 and p99 (ms) of the designs that became ready in the last `window`, and how many.
    pub fn percentiles(&self, window: Duration) -> (f64, f64, usize) {
        let now = Instant::now();
        let mut ms: Vec<f64> = self
            .ready
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| now.duration_since(*at) <= window)
            .map(|(_, d)| d.as_secs_f64() * 1000.0)
            .collect();
        if ms.is_empty() {
            return (f64::NAN, f64::NAN, 0);
        }
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
        (at(0.50), at(0.99), ms.len())
    }
}

/// Submits `design` under an `Idempotency-Key` (so the store keeps one key a design, as a
/// retrying client's would), then follows it to `ready`.
pub async fn steady_one(client: Client, tenant: usize, design: Value, key: String, seen: Arc<Seen>) {
    match submit_and_follow(&client, &design, &key, &seen).await {
        Ok((id, took)) => {
            seen.ready.lock().unwrap().push((Instant::now(), took));
            seen.ended.lock().unwrap().push_back((Instant::now(), tenant, id));
        }
        Err(e) => {
            eprintln!("a steady design failed: {e:#}");
            seen.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn submit_and_follow(client: &Client, design: &Value, key: &str, seen: &Seen) -> Result<(String, Duration)> {
    let id = client.submit_keyed(design, key, Some(key)).await?;
    let accepted = Instant::now();
    seen.accepted.fetch_add(1, Ordering::Relaxed);
    client.wait_for(&id, READY_WITHIN, |v| v["status"] == "ready").await?;
    Ok((id, accepted.elapsed()))
}

/// Queues the designs of the finished batch `id` (tenant 0's) for deletion.
pub async fn batch_ended(client: &Client, id: &str, seen: &Seen) -> Result<()> {
    let mut after = String::new();
    loop {
        let page = client.get_ok(&format!("/v1/batches/{id}/items?limit=1000{after}"), Duration::from_secs(30)).await?;
        let now = Instant::now();
        let designs = page["items"].as_array().into_iter().flatten().filter_map(|i| i["design_id"].as_str());
        seen.ended.lock().unwrap().extend(designs.map(|d| (now, 0, d.to_owned())));
        match page["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => return Ok(()),
        }
    }
}

/// Deletes every design `keep` after it ended, as tenants that keep only their recent designs
/// do (or one at its `--tenant-designs`): a design still in flight (409), or a tenant over its
/// request rate (429), is tried again 10 s later.
pub async fn deleter(clients: Vec<Client>, seen: Arc<Seen>, keep: Duration) {
    loop {
        let due = {
            let mut ended = seen.ended.lock().unwrap();
            let n = ended.iter().take_while(|(at, _, _)| at.elapsed() >= keep).count();
            ended.drain(..n).collect::<Vec<_>>()
        };
        for (_, tenant, id) in due {
            match clients[tenant].delete(&format!("/v1/designs/{id}")).await {
                Ok((204 | 404, _)) => {
                    seen.deleted.fetch_add(1, Ordering::Relaxed);
                }
                Ok((409 | 429 | 503, _)) | Err(_) => {
                    let later = Instant::now().checked_sub(keep).unwrap_or_else(Instant::now) + Duration::from_secs(10);
                    seen.ended.lock().unwrap().push_back((later, tenant, id));
                }
                Ok((status, body)) => {
                    eprintln!("deleting design {id} answered {status}: {body}");
                    seen.delete_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The burst: `items` compact designs (the full netlist's cells without the library's blackbox
/// modules, so the batch fits an upload) from `client`'s tenant as one batch.
pub async fn burst(client: &Client, n: usize, round: usize, seen: &Seen) -> Result<String> {
    let design = compact(openqq_e2e::blink_design("soak-burst"));
    let items: Vec<Value> = (0..n)
        .map(|i| {
            let mut d = design.clone();
            d["name"] = Value::String(format!("burst-{round}-{i}"));
            d
        })
        .collect();
    let id = submit_by_upload(client, &format!("soak-burst-{round}"), &items).await?;
    seen.accepted.fetch_add(n as u64, Ordering::Relaxed);
    Ok(id)
}

/// A webhook endpoint that answers every delivery 204, counting them; its URL.
pub async fn webhook_receiver(count: Arc<AtomicU64>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Registers a webhook for `results.ready` to `url` for `client`'s tenant.
pub async fn register_webhook(client: &Client, url: &str) -> Result<()> {
    let (status, body) =
        client.post("/v1/webhooks", &serde_json::json!({"url": url, "kinds": ["results.ready"]})).await?;
    if status != 201 {
        bail!("registering a webhook answered {status}: {body}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let seen = Seen::default();
        let now = Instant::now();
        seen.ready.lock().unwrap().extend((1..=100).map(|ms| (now, Duration::from_millis(ms))));
        let (p50, p99, n) = seen.percentiles(Duration::from_secs(60));
        assert_eq!((p50, p99, n), (50.0, 99.0, 100));
    }
}
