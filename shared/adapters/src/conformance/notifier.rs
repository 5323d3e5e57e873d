//! Notifier conformance: every notification reaches each live-stream subscriber once, in the
//! order notified, and `notify` never fails for want of a subscriber.
//!
//! The suite notifies through the adapter and judges what a subscriber received: the test builds
//! a [`Harness`] with the notifier and a channel into which its subscriber reports each
//! notification as it arrives. (Webhooks are not notifiers: the store queues their deliveries
//! with the feed entry, and the delivery worker in [`crate::webhook`] has its own tests.)

use super::unique;
use openqq_core::{CorrelationId, DesignId, DesignStatus, Notification, Notifier, TenantId, Verdict};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long the suite waits for notifications that must arrive.
const ARRIVAL: Duration = Duration::from_secs(10);

/// How long the suite keeps listening after the last expected notification, for duplicates.
const QUIET: Duration = Duration::from_millis(300);

/// The notifier under test and what its subscriber receives.
pub struct Harness {
    pub notifier: Arc<dyn Notifier>,
    /// The event id of every notification the subscriber received, in the order received.
    pub received: mpsc::UnboundedReceiver<uuid::Uuid>,
    /// At least two tenants to notify for.
    pub tenants: Vec<TenantId>,
}

/// Runs every notifier check against `harness`.
pub async fn run(mut harness: Harness) {
    assert!(harness.tenants.len() >= 2, "the harness gives the suite at least two tenants");
    every_notification_reaches_the_subscriber_once_in_the_order_notified(&mut harness).await;
}

fn notification(tenant: &TenantId, revision: u64) -> Notification {
    Notification {
        event_id: uuid::Uuid::now_v7(),
        tenant_id: tenant.clone(),
        design_id: DesignId::generate(),
        revision,
        status: DesignStatus::Ready,
        verdict: Verdict::Pass,
        correlation_id: CorrelationId::parse(unique("notify")).expect("a unique name is a correlation id"),
    }
}

/// What arrived until `count` did (waiting at most [`ARRIVAL`]) and then [`QUIET`] passed
/// without another.
async fn collect(received: &mut mpsc::UnboundedReceiver<uuid::Uuid>, count: usize) -> Vec<uuid::Uuid> {
    let mut got = Vec::new();
    let deadline = Instant::now() + ARRIVAL;
    while got.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, received.recv()).await {
            Ok(Some(id)) => got.push(id),
            Ok(None) => panic!("the subscriber stopped reporting after {} of {count} notifications", got.len()),
            Err(_) => panic!("only {} of {count} notifications arrived within {ARRIVAL:?}", got.len()),
        }
    }
    while let Ok(Some(id)) = tokio::time::timeout(QUIET, received.recv()).await {
        got.push(id);
    }
    got
}

/// Five notifications for each tenant, interleaved: the subscriber gets each once, in the order
/// notified.
pub async fn every_notification_reaches_the_subscriber_once_in_the_order_notified(harness: &mut Harness) {
    let mut sent = Vec::new();
    for revision in 1..=5 {
        for t in &harness.tenants {
            sent.push(notification(t, revision));
        }
    }
    for n in &sent {
        harness.notifier.notify(n).await.expect("a notification is taken");
    }
    let got = collect(&mut harness.received, sent.len()).await;
    let want: Vec<uuid::Uuid> = sent.iter().map(|n| n.event_id).collect();
    assert_eq!(got, want, "the subscriber gets every notification once, in the order notified");
}
