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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting_recorder::Counters;
    use crate::{Durability, EmbeddedDesignStore};
    use openqq_core::webhook::{DeliveryQueue, Webhook, WebhookId, WebhookRegistry};
    use openqq_core::{CorrelationId, DesignId, EventKind, FeedEntry, TenantId, WebhookSecret};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A receiver answering every request with `status`; its URL and the requests it took.
    async fn receiver(status: u16) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = taken.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 4096];
                    // A delivery is small: its head and body come before the request stalls.
                    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await
                    {
                        if n == 0 {
                            break;
                        }
                        request.extend_from_slice(&buf[..n]);
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        (url, taken)
    }

    async fn queued(store: &EmbeddedDesignStore, tenant: &TenantId, url: &str) -> WebhookId {
        let hook = Webhook {
            id: WebhookId::generate(),
            url: url.to_owned(),
            kinds: vec![EventKind::ResultsReady],
            description: None,
            created_at: Utc::now(),
            secret: WebhookSecret::from_bytes(vec![1; 32]).unwrap(),
            previous_secret: None,
        };
        store.create_webhook(tenant, &hook).await.unwrap();
        let entry = FeedEntry {
            seq: 0,
            design_id: DesignId::generate(),
            kind: EventKind::ResultsReady,
            revision: 1,
            event_id: uuid::Uuid::now_v7(),
            correlation_id: CorrelationId::parse("corr-attempt").unwrap(),
            occurred_at: Utc::now(),
            verdict: None,
            elapsed_ms: None,
            batch: None,
        };
        store.queue_delivery(tenant, &hook.id, &entry).await.unwrap();
        hook.id
    }

    fn schedule(delays: usize) -> RetrySchedule {
        RetrySchedule { delays: vec![Duration::from_secs(3600); delays], jitter: 0.0 }
    }

    #[tokio::test]
    async fn each_recorded_attempt_counts_once_under_what_it_came_to() {
        let counters = Counters::default();
        let _local = metrics::set_default_local_recorder(&counters);
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
        let client = WebhookClient::new(true).unwrap();
        let wait = Duration::from_secs(10);
        for (tenant, status, delays) in [("ok", 204, 1), ("later", 500, 1), ("never", 503, 0)] {
            let tenant = TenantId::parse(tenant).unwrap();
            let (url, _) = receiver(status).await;
            queued(&store, &tenant, &url).await;
            let claimed = store.claim_due_deliveries(Utc::now(), wait * 2, 1, 10).await.unwrap();
            assert_eq!(claimed.len(), 1);
            attempt(&store, &client, &schedule(delays), &claimed[0], wait).await;
        }
        let count = |outcome: &str| counters.get(&format!("{DELIVERIES_METRIC}{{outcome={outcome}}}"));
        assert_eq!([count("delivered"), count("retried"), count("dead")], [1, 1, 1], "{:?}", counters.all());
    }

    #[tokio::test]
    async fn a_delivery_whose_webhook_was_deleted_after_the_claim_is_not_sent() {
        let counters = Counters::default();
        let _local = metrics::set_default_local_recorder(&counters);
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
        let tenant = TenantId::parse("acme").unwrap();
        let (url, taken) = receiver(204).await;
        let id = queued(&store, &tenant, &url).await;
        let claimed = store.claim_due_deliveries(Utc::now(), Duration::from_secs(20), 1, 10).await.unwrap();
        assert!(store.delete_webhook(&tenant, &id).await.unwrap());
        let client = WebhookClient::new(true).unwrap();
        let got = attempt(&store, &client, &schedule(1), &claimed[0], Duration::from_secs(10)).await;
        assert_eq!(got, Attempted::WebhookGone);
        assert_eq!(taken.load(Ordering::SeqCst), 0, "nothing was sent");
        assert!(counters.all().keys().all(|k| !k.starts_with(DELIVERIES_METRIC)), "{:?}", counters.all());
    }
}
