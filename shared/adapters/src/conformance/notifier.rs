//! Notifier conformance: every notification reaches the observers it is meant for, once, and
//! nobody else; the live stream keeps notify order; a failing endpoint never holds back another
//! tenant's delivery, and `notify` never waits for a delivery.
//!
//! The suite notifies through the adapter and judges what its observers received. The test
//! builds a [`Harness`]: the notifier, configured with an endpoint for each of its tenants (and
//! for its failing tenant, one that fails slowly) where it has endpoints, and one channel into
//! which every observer (a live-stream subscriber, a tenant's webhook receiver) reports each
//! [`Delivery`] as it arrives, with anything wrong with it (a signature that does not verify).
//! What differs between notifiers is declared in [`Capabilities`].

use super::unique;
use openqq_core::{CorrelationId, DesignId, DesignStatus, Notification, Notifier, TenantId, Verdict};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long the failing tenant's endpoint must take to fail each attempt: longer than the suite
/// waits for the other tenants' deliveries, so they can only have arrived beside it.
pub const FAILURE_TAKES: Duration = Duration::from_secs(30);

/// How long the suite waits for deliveries that must arrive.
const ARRIVAL: Duration = Duration::from_secs(10);

/// How long the suite keeps listening after the last expected delivery, for duplicates and
/// deliveries to the wrong observer.
const QUIET: Duration = Duration::from_millis(300);

/// Who received a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Observer {
    /// A live-stream subscriber: it is sent every tenant's notifications and shows its viewer
    /// only the viewer's own (the API filters by tenant).
    Stream,
    /// The tenant's own endpoint (a webhook receiver).
    Endpoint(TenantId),
}

/// One notification as an observer received it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub observer: Observer,
    pub event_id: uuid::Uuid,
    pub tenant_id: TenantId,
    pub revision: u64,
    /// What the observer found wrong with how the notification arrived (a missing or wrong
    /// signature, a body that is not a notification), if anything.
    pub problem: Option<String>,
}

/// The notifier under test and what its observers receive.
pub struct Harness {
    pub notifier: Arc<dyn Notifier>,
    /// Every observer's deliveries, each observer's in the order it received them.
    pub deliveries: mpsc::UnboundedReceiver<Delivery>,
    /// At least two tenants the notifier delivers for (each with its own endpoint, when the
    /// notifier has endpoints).
    pub tenants: Vec<TenantId>,
    /// A tenant whose endpoint fails every delivery, taking [`FAILURE_TAKES`] or longer per
    /// attempt; needed when [`Capabilities::failing_in_flight`] is not 0.
    pub failing: Option<TenantId>,
}

/// What a notifier under test offers the suite.
#[derive(Debug, Clone, Copy, Default)]
pub struct Capabilities {
    /// Live-stream subscribers ([`Observer::Stream`]) get every tenant's notifications, each
    /// once, in the order notified. Off (webhooks alone), the stream checks do not run.
    pub stream: bool,
    /// Tenants have endpoints ([`Observer::Endpoint`]): each receives its own tenant's
    /// notifications, each once, and nobody else's; a tenant without an endpoint is skipped
    /// without an error. Off (the broadcast notifier, which has no tenants' endpoints), the
    /// endpoint checks do not run.
    pub endpoints: bool,
    /// Endpoints receive in the order notified. Off for webhooks: deliveries run in parallel and
    /// are retried with backoff, so a later notification may arrive first (receivers order by
    /// revision and de-duplicate on `webhook-id`); the suite then checks each arrives once, not
    /// their order.
    pub endpoint_order: bool,
    /// How many deliveries to the failing tenant's endpoint the suite has outstanding while it
    /// checks that other tenants' deliveries still arrive at once. 0 (nothing that can fail: a
    /// stream alone) turns that check off. Set it above any bound on deliveries in flight (the
    /// webhook notifier's `PARALLEL`): a tenant's failing endpoint must not use up that bound.
    pub failing_in_flight: usize,
}

/// Runs every notifier check that `capabilities` allows against `harness`.
pub async fn run(mut harness: Harness, capabilities: &Capabilities) {
    assert!(harness.tenants.len() >= 2, "the harness gives the suite at least two tenants");
    each_notification_reaches_its_observers_once_and_nobody_elses(&mut harness, capabilities).await;
    if capabilities.failing_in_flight > 0 {
        a_failing_endpoint_never_holds_back_another_tenants_delivery(&mut harness, capabilities).await;
    }
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

/// The deliveries each observer should get for `sent` (in notify order): the stream every one,
/// a tenant's endpoint its tenant's, when the notifier has them.
fn expected(sent: &[Notification], endpoint_tenants: &[TenantId], capabilities: &Capabilities) -> usize {
    let to_stream = if capabilities.stream { sent.len() } else { 0 };
    let to_endpoints = if capabilities.endpoints {
        sent.iter().filter(|n| endpoint_tenants.contains(&n.tenant_id)).count()
    } else {
        0
    };
    to_stream + to_endpoints
}

/// Deliveries until `count` arrived (waiting at most [`ARRIVAL`]) and then [`QUIET`] passed
/// without another.
async fn collect(deliveries: &mut mpsc::UnboundedReceiver<Delivery>, count: usize) -> Vec<Delivery> {
    let mut got = Vec::new();
    let deadline = Instant::now() + ARRIVAL;
    while got.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, deliveries.recv()).await {
            Ok(Some(d)) => got.push(d),
            Ok(None) => panic!("the observers stopped reporting after {} of {count} deliveries", got.len()),
            Err(_) => panic!("only {} of {count} deliveries arrived within {ARRIVAL:?}: {got:?}", got.len()),
        }
    }
    while let Ok(Some(d)) = tokio::time::timeout(QUIET, deliveries.recv()).await {
        got.push(d);
    }
    got
}

/// Every delivery in `got` is sound, went to an observer meant to get it, and arrived once;
/// every notification in `sent` arrived at each observer meant to get it (in notify order where
/// declared). `endpoint_tenants` are the tenants whose endpoints must deliver.
fn judge(got: &[Delivery], sent: &[Notification], endpoint_tenants: &[TenantId], capabilities: &Capabilities) {
    for d in got {
        assert!(d.problem.is_none(), "a delivery arrived sound: {d:?}");
        if let Observer::Endpoint(owner) = &d.observer {
            assert!(capabilities.endpoints, "a notifier without endpoints delivered to one: {d:?}");
            assert_eq!(&d.tenant_id, owner, "a tenant's endpoint receives only that tenant's notifications");
        } else {
            assert!(capabilities.stream, "a notifier without a stream delivered to one: {d:?}");
        }
        let n = sent.iter().find(|n| n.event_id == d.event_id).expect("only notifications that were sent arrive");
        assert_eq!((&d.tenant_id, d.revision), (&n.tenant_id, n.revision), "a notification arrives intact");
    }
    let mut per_observer: HashMap<&Observer, Vec<uuid::Uuid>> = HashMap::new();
    for d in got {
        per_observer.entry(&d.observer).or_default().push(d.event_id);
    }
    for (observer, ids) in &per_observer {
        let distinct: HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{observer:?} receives each notification once: {ids:?}");
    }
    if capabilities.stream {
        let want: Vec<uuid::Uuid> = sent.iter().map(|n| n.event_id).collect();
        let stream = per_observer.get(&Observer::Stream).cloned().unwrap_or_default();
        assert_eq!(stream, want, "the stream gets every tenant's notifications, in the order notified");
    }
    if capabilities.endpoints {
        for t in endpoint_tenants {
            let want: Vec<uuid::Uuid> = sent.iter().filter(|n| &n.tenant_id == t).map(|n| n.event_id).collect();
            let mut have = per_observer.get(&Observer::Endpoint(t.clone())).cloned().unwrap_or_default();
            if !capabilities.endpoint_order {
                have.sort_by_key(|id| want.iter().position(|w| w == id));
            }
            assert_eq!(have, want, "{t}'s endpoint gets each of its notifications (in notify order where declared)");
        }
    }
}

/// Five notifications for each tenant, interleaved, and two for a tenant without an endpoint:
/// each reaches the stream once in notify order, and its tenant's endpoint once and no other.
pub async fn each_notification_reaches_its_observers_once_and_nobody_elses(
    harness: &mut Harness,
    capabilities: &Capabilities,
) {
    let without_endpoint = TenantId::parse(unique("no-endpoint")).expect("a unique name is a tenant id");
    let mut sent = Vec::new();
    for revision in 1..=5 {
        for t in &harness.tenants {
            sent.push(notification(t, revision));
        }
        if revision <= 2 {
            sent.push(notification(&without_endpoint, revision));
        }
    }
    for n in &sent {
        harness.notifier.notify(n).await.expect("a notification is taken, endpoint or not");
    }
    let got = collect(&mut harness.deliveries, expected(&sent, &harness.tenants, capabilities)).await;
    judge(&got, &sent, &harness.tenants, capabilities);
}

/// With deliveries to a failing endpoint outstanding, `notify` still returns at once and every
/// other tenant's notification arrives well before the failing endpoint has failed even once.
pub async fn a_failing_endpoint_never_holds_back_another_tenants_delivery(
    harness: &mut Harness,
    capabilities: &Capabilities,
) {
    let failing = harness.failing.clone().expect("the harness names a failing tenant");
    let mut sent = Vec::new();
    for revision in 1..=capabilities.failing_in_flight as u64 {
        let n = notification(&failing, revision);
        let started = Instant::now();
        harness.notifier.notify(&n).await.expect("a notification for a failing endpoint is taken");
        assert!(started.elapsed() < ARRIVAL, "notify does not wait for the delivery");
        sent.push(n);
    }
    for t in &harness.tenants {
        let n = notification(t, 1);
        harness.notifier.notify(&n).await.expect("a notification is taken");
        sent.push(n);
    }
    let started = Instant::now();
    let got = collect(&mut harness.deliveries, expected(&sent, &harness.tenants, capabilities)).await;
    assert!(started.elapsed() < FAILURE_TAKES, "the others arrived while the failing endpoint was still failing");
    judge(&got, &sent, &harness.tenants, capabilities);
}
