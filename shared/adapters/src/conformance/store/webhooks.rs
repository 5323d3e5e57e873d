//! Design-store conformance for webhooks and their deliveries ([`openqq_core::WebhookRegistry`] and [`openqq_core::DeliveryQueue`]):
//! registrations per tenant up to the limit, secret rotation, deliveries queued with the feed
//! entry for the webhooks that want its kind, claims that are fair between tenants and leased,
//! attempts recorded as their outcome says, deliveries listed newest first, and tenants that never
//! see each other's webhooks or deliveries.
//!
//! Claims take due deliveries of every tenant, so the claim checks first lease away whatever
//! earlier checks left due ([`clear_due`]) and then look only at their own tenants.

use super::feed::{append, tenant};
use chrono::Utc;
use openqq_core::webhook::{
    AttemptOutcome, Delivery, DeliveryStatus, MAX_DELIVERY_ERROR_BYTES, MAX_WEBHOOKS_PER_TENANT,
};
use openqq_core::{
    CorrelationId, DesignId, DesignStore, EventKind, FeedEntry, PortError, TenantId, Webhook, WebhookId, WebhookSecret,
};
use std::time::Duration;

fn secret(byte: u8) -> WebhookSecret {
    WebhookSecret::from_bytes(vec![byte; 32]).unwrap()
}

fn hook(kinds: &[EventKind]) -> Webhook {
    Webhook {
        id: WebhookId::generate(),
        url: format!("https://receiver.example/{}", uuid::Uuid::now_v7().simple()),
        kinds: kinds.to_vec(),
        description: Some("conformance".into()),
        created_at: Utc::now(),
        secret: secret(7),
        previous_secret: None,
    }
}

async fn deliveries<S: DesignStore + ?Sized>(store: &S, t: &TenantId, id: &WebhookId) -> Vec<Delivery> {
    store.list_deliveries(t, id, None, 100).await.unwrap().items
}

fn seqs(ds: &[Delivery]) -> Vec<u64> {
    ds.iter().map(|d| d.entry.seq).collect()
}

const LEASE: Duration = Duration::from_secs(60);
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Leases every delivery due within the next day for a century, so a claim check sees only the
/// deliveries it queues itself.
pub async fn clear_due<S: DesignStore + ?Sized>(store: &S) {
    let later = Utc::now() + chrono::Duration::days(1);
    while !store.claim_due_deliveries(later, FOREVER, 100, 100).await.unwrap().is_empty() {}
}

/// Deliveries of `t` in a claim.
fn of(claimed: &[Delivery], t: &TenantId) -> Vec<Delivery> {
    claimed.iter().filter(|d| &d.tenant_id == t).cloned().collect()
}

pub async fn webhooks_are_listed_oldest_first_and_read_back_as_registered<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("hooks");
    let mut made = Vec::new();
    for kinds in [&[EventKind::ResultsReady][..], &[EventKind::DesignSubmitted, EventKind::DesignFailed]] {
        let mut h = hook(kinds);
        if made.is_empty() {
            h.description = None;
            h.previous_secret = Some((secret(3), Utc::now()));
        }
        store.create_webhook(&t, &h).await.unwrap();
        made.push(h);
    }
    assert_eq!(store.list_webhooks(&t).await.unwrap(), made);
    assert_eq!(store.get_webhook(&t, &made[1].id).await.unwrap().as_ref(), Some(&made[1]));
    assert_eq!(store.get_webhook(&t, &WebhookId::generate()).await.unwrap(), None);
    let again = store.create_webhook(&t, &made[0]).await.unwrap_err();
    assert!(matches!(again, PortError::ConditionFailed { .. }), "an id is registered once: {again:?}");
    let mut long = hook(&[EventKind::ResultsReady]);
    long.url = format!("https://receiver.example/{}", "x".repeat(openqq_core::webhook::MAX_URL_BYTES));
    assert!(matches!(store.create_webhook(&t, &long).await.unwrap_err(), PortError::Invalid { .. }), "URL too long");
    assert_eq!(store.list_webhooks(&t).await.unwrap().len(), 2);
}

pub async fn a_tenant_holds_at_most_the_webhook_limit<S: DesignStore + ?Sized>(store: &S) {
    let (t, other) = (tenant("hook-limit"), tenant("hook-limit-other"));
    let mut ids = Vec::new();
    for _ in 0..MAX_WEBHOOKS_PER_TENANT {
        let h = hook(&[EventKind::ResultsReady]);
        store.create_webhook(&t, &h).await.unwrap();
        ids.push(h.id);
    }
    let over = store.create_webhook(&t, &hook(&[EventKind::ResultsReady])).await.unwrap_err();
    assert!(matches!(over, PortError::ConditionFailed { .. }), "one over the limit is refused: {over:?}");
    assert_eq!(store.list_webhooks(&t).await.unwrap().len(), MAX_WEBHOOKS_PER_TENANT);
    store.create_webhook(&other, &hook(&[EventKind::ResultsReady])).await.expect("the limit is per tenant");
    assert!(store.delete_webhook(&t, &ids[3]).await.unwrap());
    store.create_webhook(&t, &hook(&[EventKind::ResultsReady])).await.expect("a deleted webhook frees its place");
}

pub async fn rotating_a_secret_keeps_the_old_one_signing_until_the_given_time<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("hook-rotate");
    let h = hook(&[EventKind::ResultsReady]);
    store.create_webhook(&t, &h).await.unwrap();
    let until = Utc::now() + chrono::Duration::hours(24);
    let rotated = store.rotate_webhook_secret(&t, &h.id, &secret(9), until).await.unwrap().expect("it exists");
    assert_eq!(rotated.secret, secret(9));
    assert_eq!(rotated.previous_secret, Some((secret(7), until)));
    assert_eq!((&rotated.url, &rotated.kinds, rotated.created_at), (&h.url, &h.kinds, h.created_at));
    assert_eq!(store.get_webhook(&t, &h.id).await.unwrap(), Some(rotated));
    let again = store.rotate_webhook_secret(&t, &h.id, &secret(11), until).await.unwrap().unwrap();
    assert_eq!(again.previous_secret, Some((secret(9), until)), "only the last secret keeps signing");
    assert_eq!(store.rotate_webhook_secret(&t, &WebhookId::generate(), &secret(9), until).await.unwrap(), None);
    let other = tenant("hook-rotate-other");
    assert_eq!(store.rotate_webhook_secret(&other, &h.id, &secret(1), until).await.unwrap(), None);
    assert_eq!(store.get_webhook(&t, &h.id).await.unwrap().unwrap().secret, secret(11), "untouched by another tenant");
}

/// An append queues one pending delivery of its entry per webhook that wants the kind and exists
/// at that moment; a repeated append queues nothing new.
pub async fn deliveries_are_queued_for_the_webhooks_that_want_the_kind_when_it_is_appended<S: DesignStore + ?Sized>(
    store: &S,
) {
    let t = tenant("hook-queue");
    let ready_only = hook(&[EventKind::ResultsReady]);
    let both = hook(&[EventKind::DesignSubmitted, EventKind::ResultsReady]);
    store.create_webhook(&t, &ready_only).await.unwrap();
    store.create_webhook(&t, &both).await.unwrap();
    let d = DesignId::generate();
    let before = Utc::now();
    assert_eq!(append(store, &t, &d, EventKind::DesignSubmitted, 1).await, 1);
    assert_eq!(append(store, &t, &d, EventKind::ValidationStarted, 1).await, 2);
    assert_eq!(append(store, &t, &d, EventKind::ResultsReady, 1).await, 3);
    assert_eq!(append(store, &t, &d, EventKind::DesignSubmitted, 1).await, 1, "a repeat");
    let late = hook(&[EventKind::DesignSubmitted, EventKind::ResultsReady]);
    store.create_webhook(&t, &late).await.unwrap();

    let feed = store.read_feed(&t, 0, 10).await.unwrap();
    let got = deliveries(store, &t, &both.id).await;
    assert_eq!(seqs(&got), [3, 1], "one each of the kinds it wants, newest first");
    for d in &got {
        assert_eq!((&d.tenant_id, d.webhook_id), (&t, both.id));
        assert_eq!(Some(&d.entry), feed.iter().find(|e| e.seq == d.entry.seq), "the entry as the feed holds it");
        assert_eq!(
            (d.status, d.attempts, d.last_status_code, &d.last_error),
            (DeliveryStatus::Pending, 0, None, &None)
        );
        let due = d.next_attempt_at.expect("a pending delivery has a due time");
        assert!(due >= before && due <= Utc::now(), "due at once: {due}");
        assert!(d.created_at >= before && d.updated_at >= d.created_at);
        assert_eq!(d.message_id(), format!("msg_{}_{}", both.id.0.simple(), d.entry.seq));
    }
    assert_eq!(seqs(&deliveries(store, &t, &ready_only.id).await), [3]);
    assert!(deliveries(store, &t, &late.id).await.is_empty(), "a webhook registered later gets no earlier event");
    assert_eq!(append(store, &t, &d, EventKind::ResultsReady, 2).await, 4);
    assert_eq!(seqs(&deliveries(store, &t, &late.id).await), [4], "but the events after");
}

/// A test event (`seq` 0) queued twice is one delivery; one for a webhook the tenant does not
/// have is refused.
pub async fn a_test_delivery_is_queued_once_and_only_to_the_tenants_own_webhook<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("hook-test");
    let h = hook(&[EventKind::ResultsReady]);
    store.create_webhook(&t, &h).await.unwrap();
    let entry = FeedEntry {
        seq: 0,
        design_id: DesignId::generate(),
        kind: EventKind::ResultsReady,
        revision: 1,
        event_id: uuid::Uuid::now_v7(),
        correlation_id: CorrelationId::parse("test-event").unwrap(),
        occurred_at: Utc::now(),
        verdict: Some(openqq_core::Verdict::Pass),
        elapsed_ms: None,
        batch: None,
    };
    store.queue_delivery(&t, &h.id, &entry).await.unwrap();
    store.queue_delivery(&t, &h.id, &entry).await.unwrap();
    let got = deliveries(store, &t, &h.id).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((&got[0].entry, got[0].status), (&entry, DeliveryStatus::Pending));
    assert!(store.queue_delivery(&t, &WebhookId::generate(), &entry).await.is_err(), "no such webhook");
    let other = tenant("hook-test-other");
    assert!(store.queue_delivery(&other, &h.id, &entry).await.is_err(), "not this tenant's webhook");
    assert!(store.list_deliveries(&other, &h.id, None, 10).await.unwrap().items.is_empty());
}

/// Deleting a webhook deletes its deliveries: they are neither listed nor claimed, and a late
/// attempt on one is ignored.
pub async fn deleting_a_webhook_deletes_its_deliveries<S: DesignStore + ?Sized>(store: &S) {
    clear_due(store).await;
    let (t, other) = (tenant("hook-delete"), tenant("hook-delete-other"));
    let (gone, kept) = (hook(&[EventKind::DesignSubmitted]), hook(&[EventKind::DesignSubmitted]));
    store.create_webhook(&t, &gone).await.unwrap();
    store.create_webhook(&t, &kept).await.unwrap();
    append(store, &t, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    assert!(!store.delete_webhook(&other, &gone.id).await.unwrap(), "another tenant cannot delete it");
    assert_eq!(deliveries(store, &t, &gone.id).await.len(), 1);
    assert!(store.delete_webhook(&t, &gone.id).await.unwrap());
    assert!(!store.delete_webhook(&t, &gone.id).await.unwrap(), "gone already");
    assert_eq!(store.get_webhook(&t, &gone.id).await.unwrap(), None);
    assert!(deliveries(store, &t, &gone.id).await.is_empty());
    let claimed = store.claim_due_deliveries(Utc::now(), LEASE, 10, 100).await.unwrap();
    assert_eq!(of(&claimed, &t).iter().map(|d| d.webhook_id).collect::<Vec<_>>(), [kept.id], "only the kept one's");
    let outcome = AttemptOutcome::Delivered { status_code: 200 };
    store.finish_attempt(&t, &gone.id, 1, &outcome, Utc::now()).await.expect("an attempt on a gone delivery");
    assert!(deliveries(store, &t, &gone.id).await.is_empty(), "is ignored");
    assert_eq!(store.list_webhooks(&t).await.unwrap().iter().map(|h| h.id).collect::<Vec<_>>(), [kept.id]);
}

/// One tenant with a backlog of 100 due deliveries and another with one: a claim of at most 5
/// per tenant takes the second tenant's too, and each tenant's oldest first.
pub async fn a_claim_takes_at_most_its_share_of_each_tenant_so_a_backlog_starves_nobody<S: DesignStore + ?Sized>(
    store: &S,
) {
    clear_due(store).await;
    let (busy, quiet) = (tenant("claim-busy"), tenant("claim-quiet"));
    let (busy_hook, quiet_hook) = (hook(&[EventKind::DesignSubmitted]), hook(&[EventKind::DesignSubmitted]));
    store.create_webhook(&busy, &busy_hook).await.unwrap();
    store.create_webhook(&quiet, &quiet_hook).await.unwrap();
    for _ in 0..100 {
        append(store, &busy, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    }
    append(store, &quiet, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    let now = Utc::now();
    let claimed = store.claim_due_deliveries(now, LEASE, 5, 10).await.unwrap();
    assert_eq!(seqs(&of(&claimed, &busy)), [1, 2, 3, 4, 5], "the busy tenant's five oldest");
    assert_eq!(seqs(&of(&claimed, &quiet)), [1], "and the quiet tenant's one");
    assert_eq!(claimed.len(), 6, "nothing else was due: {claimed:?}");
    let next = store.claim_due_deliveries(now, LEASE, 5, 3).await.unwrap();
    assert_eq!(seqs(&next), [6, 7, 8], "at most the limit, oldest due first");
    assert!(next.iter().all(|d| d.tenant_id == busy && d.webhook_id == busy_hook.id));
}

/// A claimed delivery is leased: no claim takes it again before the lease ends, and one after
/// does (its worker may have died mid-attempt).
pub async fn a_claimed_delivery_is_claimed_again_only_after_its_lease<S: DesignStore + ?Sized>(store: &S) {
    clear_due(store).await;
    let t = tenant("claim-lease");
    let h = hook(&[EventKind::DesignSubmitted]);
    store.create_webhook(&t, &h).await.unwrap();
    append(store, &t, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    let now = Utc::now();
    let first = store.claim_due_deliveries(now, LEASE, 5, 10).await.unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    let lease_end = now + chrono::Duration::from_std(LEASE).unwrap();
    assert_eq!(first[0].next_attempt_at, Some(lease_end), "leased until now + lease");
    assert_eq!((first[0].status, first[0].attempts), (DeliveryStatus::Pending, 0));
    let during = store.claim_due_deliveries(now + chrono::Duration::seconds(59), LEASE, 5, 10).await.unwrap();
    assert!(during.is_empty(), "not again during the lease: {during:?}");
    let after = store.claim_due_deliveries(lease_end, LEASE, 5, 10).await.unwrap();
    assert_eq!(seqs(&after), [1], "again once the lease is over");
    assert_eq!(after[0].webhook_id, h.id);
}

/// `finish_attempt` counts the attempt and records its status code and error: delivered and
/// dead are final (never claimed again), a retry is due at its time and not before.
pub async fn an_attempt_moves_its_delivery_as_the_outcome_says<S: DesignStore + ?Sized>(store: &S) {
    clear_due(store).await;
    let t = tenant("attempt");
    let h = hook(&[EventKind::DesignSubmitted]);
    store.create_webhook(&t, &h).await.unwrap();
    for _ in 0..3 {
        append(store, &t, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    }
    let now = Utc::now();
    assert_eq!(store.claim_due_deliveries(now, LEASE, 5, 10).await.unwrap().len(), 3);
    let at = now + chrono::Duration::seconds(300);
    let retry = AttemptOutcome::Retry { at, status_code: Some(503), error: "the receiver answered 503".into() };
    store.finish_attempt(&t, &h.id, 1, &retry, now).await.unwrap();
    store.finish_attempt(&t, &h.id, 2, &AttemptOutcome::Delivered { status_code: 204 }, now).await.unwrap();
    let long = "é".repeat(MAX_DELIVERY_ERROR_BYTES);
    let dead = AttemptOutcome::Dead { status_code: None, error: format!("x{long}") };
    store.finish_attempt(&t, &h.id, 3, &dead, now).await.unwrap();

    let got = deliveries(store, &t, &h.id).await;
    let by = |seq: u64| got.iter().find(|d| d.entry.seq == seq).unwrap();
    let view = |d: &Delivery| (d.status, d.attempts, d.next_attempt_at, d.last_status_code, d.last_error.clone());
    let error = Some("the receiver answered 503".to_owned());
    assert_eq!(view(by(1)), (DeliveryStatus::Pending, 1, Some(at), Some(503), error));
    assert_eq!(view(by(2)), (DeliveryStatus::Delivered, 1, None, Some(204), None));
    let cut = by(3).last_error.clone().unwrap();
    assert_eq!(cut.len(), MAX_DELIVERY_ERROR_BYTES - 1, "cut to the limit at a character boundary");
    assert!(cut.starts_with("xé") && cut.chars().skip(1).all(|c| c == 'é'));
    assert_eq!(view(by(3)), (DeliveryStatus::Dead, 1, None, None, Some(cut)));
    assert_eq!(by(1).updated_at, now);

    let early = store.claim_due_deliveries(at - chrono::Duration::seconds(1), LEASE, 5, 10).await.unwrap();
    assert!(of(&early, &t).is_empty(), "a retry is not due before its time: {early:?}");
    let due = store.claim_due_deliveries(at, LEASE, 5, 10).await.unwrap();
    assert_eq!(seqs(&of(&due, &t)), [1], "a retry is due at its time, delivered and dead ones never");
    let later = at + chrono::Duration::seconds(5);
    store.finish_attempt(&t, &h.id, 1, &AttemptOutcome::Delivered { status_code: 200 }, later).await.unwrap();
    assert_eq!(view(&deliveries(store, &t, &h.id).await[2]), (DeliveryStatus::Delivered, 2, None, Some(200), None));
}

pub async fn deliveries_are_listed_newest_first_a_page_at_a_time<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("hook-pages");
    let h = hook(&[EventKind::DesignSubmitted]);
    store.create_webhook(&t, &h).await.unwrap();
    for _ in 0..7 {
        append(store, &t, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.list_deliveries(&t, &h.id, cursor.as_deref(), 3).await.unwrap();
        assert!(page.items.len() <= 3, "{}", page.items.len());
        seen.extend(seqs(&page.items));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, [7, 6, 5, 4, 3, 2, 1], "every delivery once, newest first");
    let err = store.list_deliveries(&t, &h.id, Some("not a cursor"), 3).await.unwrap_err();
    assert!(!err.is_retriable(), "a cursor that is not one is refused: {err:?}");
}

/// Another tenant naming a webhook's id sees nothing of it and changes nothing.
pub async fn a_tenant_never_sees_or_touches_another_tenants_webhooks_or_deliveries<S: DesignStore + ?Sized>(store: &S) {
    let (t, other) = (tenant("hook-owner"), tenant("hook-intruder"));
    let h = hook(&[EventKind::DesignSubmitted]);
    store.create_webhook(&t, &h).await.unwrap();
    append(store, &t, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    assert!(store.list_webhooks(&other).await.unwrap().is_empty());
    assert_eq!(store.get_webhook(&other, &h.id).await.unwrap(), None);
    assert!(store.list_deliveries(&other, &h.id, None, 10).await.unwrap().items.is_empty());
    assert!(store.read_feed(&other, 0, 10).await.unwrap().is_empty());
    let outcome = AttemptOutcome::Dead { status_code: Some(410), error: "gone".into() };
    store.finish_attempt(&other, &h.id, 1, &outcome, Utc::now()).await.unwrap();
    let mine = deliveries(store, &t, &h.id).await;
    assert_eq!((mine.len(), mine[0].status, mine[0].attempts), (1, DeliveryStatus::Pending, 0), "untouched");
    // The other tenant's own webhook of the same kind gets none of this tenant's events.
    let theirs = hook(&[EventKind::DesignSubmitted]);
    store.create_webhook(&other, &theirs).await.unwrap();
    append(store, &t, &DesignId::generate(), EventKind::DesignSubmitted, 1).await;
    assert!(deliveries(store, &other, &theirs.id).await.is_empty());
    assert_eq!(deliveries(store, &t, &h.id).await.len(), 2);
}
