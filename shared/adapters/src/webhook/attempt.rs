//! One attempt of one claimed delivery: find its webhook, sign, send, decide, record.

use super::client::{Message, WebhookClient};
use super::outcome::{decide, jitter_unit, label};
use super::signing::{payload, signature_header};
use chrono::Utc;
use openqq_core::webhook::{AttemptOutcome, Delivery, RetrySchedule, WebhookStore};
use std::time::Duration;

/// The `openqq_webhook_deliveries_total` counter.
pub const DELIVERIES_METRIC: &str = "openqq_webhook_deliveries_total";

/// What became of one claimed delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// Sent (or refused before sending) and recorded.
    Recorded(AttemptOutcome),
    /// The webhook is gone: nothing to send (its deliveries went with it).
    WebhookGone,
    /// The store failed to answer or to record: the delivery is claimed again after its lease.
    StoreFailed,
}

/// Attempts `delivery` once, within `timeout`, and records the outcome. The store's failures are
/// logged and answered as [`Attempted::StoreFailed`], never retried here: the lease brings the
/// delivery back.
pub async fn attempt(
    store: &dyn WebhookStore,
    client: &WebhookClient,
    schedule: &RetrySchedule,
    delivery: &Delivery,
    timeout: Duration,
) -> Attempted {
    let (tenant, webhook_id, seq) = (&delivery.tenant_id, &delivery.webhook_id, delivery.entry.seq);
    let hook = match store.get_webhook(tenant, webhook_id).await {
        Ok(Some(hook)) => hook,
        Ok(None) => return Attempted::WebhookGone,
        Err(e) => {
            tracing::warn!(tenant_id = %tenant, webhook_id = %webhook_id, seq, error = %e,
                "The webhook of a claimed delivery could not be read; it is tried again after its lease.");
            return Attempted::StoreFailed;
        }
    };
    let now = Utc::now();
    let id = delivery.message_id();
    let body = payload(tenant, &delivery.entry);
    let timestamp = now.timestamp();
    let signature = signature_header(&hook.signing_secrets(now), &id, timestamp, &body);
    let message = Message { id, timestamp, signature, body };
    let answer = client.send(&hook.url, &message, timeout).await;
    let outcome = decide(answer.as_ref().copied(), delivery.attempts, schedule, jitter_unit(), Utc::now());
    let host = url::Url::parse(&hook.url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
    if let Err(e) = store.finish_attempt(tenant, webhook_id, seq, &outcome, Utc::now()).await {
        tracing::warn!(tenant_id = %tenant, webhook_id = %webhook_id, seq, host, error = %e,
            "A webhook attempt could not be recorded; the delivery is tried again after its lease.");
        return Attempted::StoreFailed;
    }
    metrics::counter!(DELIVERIES_METRIC, "outcome" => label(&outcome)).increment(1);
    let attempt = delivery.attempts + 1;
    match &outcome {
        AttemptOutcome::Delivered { status_code } => {
            tracing::debug!(tenant_id = %tenant, webhook_id = %webhook_id, seq, host, attempt, status = status_code,
                "A webhook delivery was accepted.");
        }
        AttemptOutcome::Retry { at, status_code, error } => {
            tracing::info!(tenant_id = %tenant, webhook_id = %webhook_id, seq, host, attempt, status = ?status_code,
                error, retry_at = %at, "A webhook delivery failed and is retried later.");
        }
        AttemptOutcome::Dead { status_code, error } => {
            tracing::warn!(tenant_id = %tenant, webhook_id = %webhook_id, seq, host, attempt, status = ?status_code,
                error, "A webhook delivery failed for good.");
        }
    }
    Attempted::Recorded(outcome)
}
