//! The notifier that posted a tenant's results to one endpoint per tenant configured at start
//! (`--webhooks FILE`), kept until its last users move to the tenant-registered webhooks and the
//! [`DeliveryWorker`](super::DeliveryWorker). Queued deliveries live in memory only and are lost
//! if the process stops.
//!
//! `notify` only queues: delivery runs in the background (at most `PARALLEL` at once, up to
//! `attempts` tries with exponential backoff, a timeout per try), so a slow endpoint never holds
//! back the results function.

use crate::SettingsError;
use async_trait::async_trait;
use openqq_core::ports::PortResult;
use openqq_core::{Notification, Notifier, PortError, TenantId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Deliveries in flight at once, all tenants together.
const PARALLEL: usize = 16;
/// Deliveries of one tenant in flight at once: an endpoint that hangs holds at most this many of
/// the [`PARALLEL`] slots (each through its timeout and backoff), never all of them.
const PER_TENANT: usize = 4;
/// Notifications of one tenant waiting or in flight before new ones are refused (and counted).
const BACKLOG: usize = 1024;

/// A tenant's signing secret as the `--webhooks` file gives it: the core's secret, read from its
/// `whsec_` form. `Debug` never prints it.
#[derive(Clone)]
pub struct WebhookSecret(pub openqq_core::WebhookSecret);

impl WebhookSecret {
    /// Parses `whsec_<base64>` ([`parse_secret`](super::parse_secret)).
    pub fn parse(s: &str) -> Result<Self, String> {
        super::parse_secret(s).map(Self)
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// Where a tenant's notifications go.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub secret: WebhookSecret,
}

struct Job {
    endpoint: Endpoint,
    notification: Notification,
}

/// One tenant's endpoint and its share of the deliveries.
struct Lane {
    endpoint: Endpoint,
    in_flight: Arc<Semaphore>,
    backlog: Arc<AtomicUsize>,
}

pub struct WebhookNotifier {
    lanes: HashMap<TenantId, Lane>,
    slots: Arc<Semaphore>,
    client: reqwest::Client,
    attempts: u32,
}

impl WebhookNotifier {
    /// The notifier for `endpoints`; deliveries run on the Tokio runtime `notify` is called on.
    pub fn start(
        endpoints: HashMap<TenantId, Endpoint>,
        timeout: Duration,
        attempts: u32,
    ) -> Result<Arc<Self>, SettingsError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("openqq-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SettingsError::caused_by(format!("building the webhook client: {e}"), e))?;
        let lanes = endpoints
            .into_iter()
            .map(|(tenant, endpoint)| {
                let lane = Lane {
                    endpoint,
                    in_flight: Arc::new(Semaphore::new(PER_TENANT)),
                    backlog: Arc::new(AtomicUsize::new(0)),
                };
                (tenant, lane)
            })
            .collect();
        Ok(Arc::new(Self { lanes, slots: Arc::new(Semaphore::new(PARALLEL)), client, attempts: attempts.max(1) }))
    }
}

async fn deliver(client: &reqwest::Client, job: &Job, attempts: u32) {
    let n = &job.notification;
    let id = n.event_id.to_string();
    let body = serde_json::to_vec(&serde_json::json!({
        "type": "results.ready",
        "timestamp": chrono::Utc::now().to_rfc3339(),
        "data": n,
    }))
    .expect("notifications serialise");
    let mut backoff = Duration::from_millis(500);
    for attempt in 1..=attempts {
        let ts = chrono::Utc::now().timestamp();
        let sent = client
            .post(&job.endpoint.url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", super::sign(&job.endpoint.secret.0, &id, ts, &body))
            .body(body.clone())
            .send()
            .await;
        let outcome = match &sent {
            Ok(r) if r.status().is_success() => "delivered",
            Ok(r) if r.status().is_client_error() && r.status() != 429 => "rejected",
            _ => "failed",
        };
        if outcome != "failed" || attempt == attempts {
            metrics::counter!("openqq_webhook_deliveries_total", "outcome" => outcome).increment(1);
            if outcome != "delivered" {
                let status = sent.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
                tracing::warn!(tenant_id = %n.tenant_id, design_id = %n.design_id, correlation_id = %n.correlation_id, status, attempt,
                    "The tenant's webhook endpoint did not accept the notification.");
            }
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
    }
}

#[async_trait]
impl Notifier for WebhookNotifier {
    async fn notify(&self, notification: &Notification) -> PortResult<()> {
        let Some(lane) = self.lanes.get(&notification.tenant_id) else {
            return Ok(());
        };
        if lane.backlog.fetch_add(1, Ordering::AcqRel) >= BACKLOG {
            lane.backlog.fetch_sub(1, Ordering::AcqRel);
            metrics::counter!("openqq_webhook_deliveries_total", "outcome" => "dropped").increment(1);
            return Err(PortError::Throttled { retry_after: None });
        }
        let job = Job { endpoint: lane.endpoint.clone(), notification: notification.clone() };
        let (in_flight, backlog, slots) = (lane.in_flight.clone(), lane.backlog.clone(), self.slots.clone());
        let (client, attempts) = (self.client.clone(), self.attempts);
        // The tenant's own permit first: a tenant at its share waits without taking a shared slot.
        tokio::spawn(async move {
            let mine = in_flight.acquire_owned().await.expect("never closed");
            let shared = slots.acquire_owned().await.expect("never closed");
            deliver(&client, &job, attempts).await;
            drop((shared, mine));
            backlog.fetch_sub(1, Ordering::AcqRel);
        });
        Ok(())
    }
}

/// Sends every notification to each of several notifiers (the live stream and webhooks);
/// reports the first failure after trying them all.
pub struct FanoutNotifier(pub Vec<Arc<dyn Notifier>>);

#[async_trait]
impl Notifier for FanoutNotifier {
    async fn notify(&self, notification: &Notification) -> PortResult<()> {
        let mut first_error = None;
        for n in &self.0 {
            if let Err(e) = n.notify(notification).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
