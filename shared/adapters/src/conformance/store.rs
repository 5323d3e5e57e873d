//! Design-store conformance: revision-conditional writes, forward-only status, reports by
//! revision, timelines in applied order, pagination, tenant isolation, the replay of dead
//! letters (a revision failed by a dead letter revived once by its replay, and no other), the
//! tenant's event feed ([`feed`]), its webhooks and deliveries ([`webhooks`]), a consumer
//! batch's writes applied together ([`batch`]), generation token budgets ([`budgets`]),
//! batches of design jobs ([`batches`]), schedules with their fire ledger ([`schedules`]), and the
//! specifications kept for revalidations ([`specs`]), and deleting a design ([`deletes`]).

use super::unique;
use chrono::Utc;
use openqq_core::{
    AcceptedRevision, Applied, Change, CorrelationId, DesignId, DesignStatus, DesignStore, EventKind, IdempotencyClaim,
    IdempotencyKey, KeptResponse, KeyClaim, TenantId, TimelineEntry, Verdict,
};
use serde_json::value::RawValue;
use std::time::Duration;

pub mod batch;
pub mod batches;
pub mod budgets;
pub mod combined;
pub mod deletes;
pub mod feed;
pub mod replay;
pub mod schedules;
pub mod specs;
pub mod webhooks;

fn entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse(format!("corr-{revision}")).unwrap(),
        occurred_at: Utc::now(),
    }
}

fn submitted(name: &str) -> Change {
    Change::Submitted { name: Some(name.into()) }
}

fn report(v: &str) -> Box<RawValue> {
    RawValue::from_string(format!("{{\"verdict\":\"{v}\"}}")).unwrap()
}

fn ids() -> (TenantId, DesignId) {
    (TenantId::parse(unique("t")).unwrap(), DesignId::parse(unique("d")).unwrap())
}

/// What a design store under test offers the suite. The embedded store and the DynamoDB store
/// pass every check alike (both execute the core's one revision plan), so there is nothing to
/// declare yet; a store that differs gets a field here, documented with the checks it turns off.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {}

/// Runs every design-store check against `store`.
pub async fn run<S: DesignStore + ?Sized>(store: &S, _capabilities: &Capabilities) {
    repeated_and_stale_revisions_are_no_ops_that_succeed(store).await;
    status_moves_forward_only_at_the_current_revision(store).await;
    reports_are_kept_per_revision(store).await;
    a_tenant_never_sees_another_tenants_design(store).await;
    listing_pages_through_every_design_newest_first(store).await;
    events_for_an_unknown_design_are_refused(store).await;
    a_failed_revision_shows_its_reason_and_stays_failed(store).await;
    a_revision_that_never_materialised_still_shows_as_failed(store).await;
    replay::a_replayed_dead_letter_revives_its_revision_once_and_only_its_own(store).await;
    replay::a_replayed_submission_that_was_dead_lettered_names_its_design_and_moves_on(store).await;
    replay::a_replay_that_fails_again_fails_its_revision_again(store).await;
    an_accepted_revision_reads_as_submitted_until_a_newer_one_is_materialised(store).await;
    listing_merges_accepted_and_materialised_designs_newest_first(store).await;
    markers_recorded_together_each_keep_the_highest_revision_of_their_own_design(store).await;
    a_marker_older_than_the_retention_shows_nothing(store).await;
    an_idempotency_key_replays_its_response_and_refuses_another_request(store).await;
    a_released_abandoned_or_expired_idempotency_key_can_be_claimed_again(store).await;
    racing_writers_on_one_design_each_land_once(store).await;
    deletes::deleting_a_design_removes_its_rows_and_enters_the_feed_once(store).await;
    deletes::no_write_after_a_deletion_brings_the_design_back(store).await;
    feed::the_feed_numbers_a_tenants_entries_one_by_one_across_designs(store).await;
    feed::appending_the_same_design_kind_and_revision_again_returns_its_number(store).await;
    feed::concurrent_appends_take_every_number_once(store).await;
    feed::reading_the_feed_pages_after_a_number_and_only_through_the_tenants_own(store).await;
    feed::applied_writes_enter_the_feed_once_and_stale_ones_never(store).await;
    batch::a_batch_has_the_effects_of_its_ops_applied_one_by_one(store).await;
    batch::a_failing_op_changes_nothing_and_ends_the_batch_and_the_ops_before_it_stay(store).await;
    batch::concurrent_batches_number_the_feed_without_gaps(store).await;
    combined::designs_of_one_tenant_racing_for_the_feed_head_each_take_one_number(store).await;
    combined::a_replayed_dead_letter_enters_the_feed_once(store).await;
    combined::a_batch_larger_than_one_transaction_applies_each_write_once_in_order(store).await;
    webhooks::webhooks_are_listed_oldest_first_and_read_back_as_registered(store).await;
    webhooks::a_tenant_holds_at_most_the_webhook_limit(store).await;
    webhooks::rotating_a_secret_keeps_the_old_one_signing_until_the_given_time(store).await;
    webhooks::deliveries_are_queued_for_the_webhooks_that_want_the_kind_when_it_is_appended(store).await;
    webhooks::a_test_delivery_is_queued_once_and_only_to_the_tenants_own_webhook(store).await;
    webhooks::deleting_a_webhook_deletes_its_deliveries(store).await;
    webhooks::a_claim_takes_at_most_its_share_of_each_tenant_so_a_backlog_starves_nobody(store).await;
    webhooks::a_claimed_delivery_is_claimed_again_only_after_its_lease(store).await;
    webhooks::an_attempt_moves_its_delivery_as_the_outcome_says(store).await;
    webhooks::deliveries_are_listed_newest_first_a_page_at_a_time(store).await;
    webhooks::a_tenant_never_sees_or_touches_another_tenants_webhooks_or_deliveries(store).await;
    budgets::a_charge_passes_only_within_the_limit_and_a_refund_never_goes_below_zero(store).await;
    budgets::charges_racing_for_the_last_tokens_never_pass_the_limit_together(store).await;
    batches::a_batch_is_created_once_with_its_items_and_counts(store).await;
    batches::released_items_are_returned_until_they_end_and_each_end_takes_the_next_ordinal(store).await;
    batches::stopping_a_batch_cancels_what_is_queued_and_lets_what_is_on_its_way_end(store).await;
    batches::items_and_batches_page_in_order_and_another_tenants_are_unknown(store).await;
    batches::racing_ends_take_every_ordinal_once(store).await;
    batches::open_items_count_what_the_tenants_unfinished_batches_hold(store).await;
    batches::a_batch_older_than_the_retention_shows_nothing(store).await;
    schedules::a_schedule_reads_back_and_changes_only_at_the_version_read(store).await;
    schedules::a_tenant_holds_at_most_the_schedule_limit_and_lists_them_oldest_first(store).await;
    schedules::a_fire_is_recorded_once_and_a_second_record_gets_the_first_back(store).await;
    schedules::a_fire_settles_only_from_the_outcome_it_is_in(store).await;
    schedules::fires_are_listed_newest_first_a_page_at_a_time_and_go_with_their_schedule(store).await;
    schedules::due_schedules_are_found_across_tenants_and_the_runner_saves_only_at_the_version_read(store).await;
    specs::the_latest_revisions_spec_is_kept_and_an_older_one_changes_nothing(store).await;
}

/// Writers racing on one design (a replayed record handled six times at once, and two stages of
/// a revision at once) each land exactly once: the losers read again and come out duplicate.
pub async fn racing_writers_on_one_design_each_land_once<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    let sub = entry(EventKind::DesignSubmitted, 1);
    let change = submitted("r");
    let racer = || store.apply(&t, &d, &sub, &change);
    let (a, b, c, e, f, g) = tokio::join!(racer(), racer(), racer(), racer(), racer(), racer());
    let outcomes = [a, b, c, e, f, g].map(|o| o.expect("a racing writer succeeds"));
    assert_eq!(outcomes.iter().filter(|o| **o == Applied::Applied).count(), 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| matches!(o, Applied::Applied | Applied::Duplicate)), "{outcomes:?}");

    let (started, ready) = (entry(EventKind::ValidationStarted, 1), entry(EventKind::ResultsReady, 1));
    let (a, b) = tokio::join!(
        store.apply(&t, &d, &started, &Change::ValidationStarted),
        store.apply(&t, &d, &ready, &Change::ResultsReady { verdict: Verdict::Pass }),
    );
    assert_eq!((a.unwrap(), b.unwrap()), (Applied::Applied, Applied::Applied));
    let view = store.get(&t, &d).await.unwrap().expect("the design exists");
    assert_eq!(view.status, DesignStatus::Ready, "ready is final whichever landed first");
    let timeline = store.timeline(&t, &d).await.unwrap().expect("and so does its timeline");
    assert_eq!(timeline.len(), 3, "each entry once: {timeline:?}");
}

pub async fn repeated_and_stale_revisions_are_no_ops_that_succeed<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    let sub = EventKind::DesignSubmitted;
    assert_eq!(store.apply(&t, &d, &entry(sub, 1), &submitted("a")).await.unwrap(), Applied::Applied);
    assert_eq!(store.apply(&t, &d, &entry(sub, 1), &submitted("a")).await.unwrap(), Applied::Duplicate);
    assert_eq!(store.apply(&t, &d, &entry(sub, 3), &submitted("c")).await.unwrap(), Applied::Applied);
    assert_eq!(store.apply(&t, &d, &entry(sub, 2), &submitted("b")).await.unwrap(), Applied::Stale);
    assert_eq!(
        store.apply(&t, &d, &entry(sub, 1), &submitted("a")).await.unwrap(),
        Applied::Duplicate,
        "a re-read of an applied revision is a duplicate even after newer ones"
    );
    let view = store.get(&t, &d).await.unwrap().expect("design exists");
    assert_eq!((view.revision, view.name.as_str()), (3, "c"), "state never goes backwards");
    store.apply(&t, &d, &entry(sub, 4), &Change::Submitted { name: None }).await.unwrap();
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().name, "c", "a revision without a name keeps the name");
    let timeline = store.timeline(&t, &d).await.unwrap().unwrap();
    let revs: Vec<u64> = timeline.iter().map(|e| e.revision).collect();
    assert_eq!(revs, vec![1, 3, 4], "only applied entries are in the timeline, in applied order");
    assert_eq!(timeline[1].correlation_id.as_str(), "corr-3");
}

pub async fn status_moves_forward_only_at_the_current_revision<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("x")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 2), &submitted("x")).await.unwrap();
    // Revision 1 finishing late must not move revision 2's status.
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap();
    store
        .apply(&t, &d, &entry(EventKind::ResultsReady, 1), &Change::ResultsReady { verdict: Verdict::Fail })
        .await
        .unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status, v.verdict), (2, DesignStatus::Submitted, None));
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 2), &Change::ValidationStarted).await.unwrap();
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Validating);
    store
        .apply(&t, &d, &entry(EventKind::ResultsReady, 2), &Change::ResultsReady { verdict: Verdict::Pass })
        .await
        .unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.status, v.verdict), (DesignStatus::Ready, Some(Verdict::Pass)));
    // A replayed validation.started of revision 2 is a duplicate and cannot move ready back.
    assert_eq!(
        store.apply(&t, &d, &entry(EventKind::ValidationStarted, 2), &Change::ValidationStarted).await.unwrap(),
        Applied::Duplicate
    );
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Ready);
}

pub async fn reports_are_kept_per_revision<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    assert!(store.report(&t, &d, None).await.unwrap().is_none());
    for (rev, v) in [(1, Verdict::Fail), (2, Verdict::Pass)] {
        store.apply(&t, &d, &entry(EventKind::DesignSubmitted, rev), &submitted("r")).await.unwrap();
        let change = Change::ValidationFinished { verdict: v, report: report(v.as_str()) };
        store.apply(&t, &d, &entry(EventKind::ValidationFinished, rev), &change).await.unwrap();
    }
    let latest = store.report(&t, &d, None).await.unwrap().unwrap();
    assert_eq!((latest.revision, latest.verdict), (2, Verdict::Pass));
    let first = store.report(&t, &d, Some(1)).await.unwrap().unwrap();
    assert_eq!((first.revision, first.verdict, first.report.get()), (1, Verdict::Fail, "{\"verdict\":\"fail\"}"));
    assert!(store.report(&t, &d, Some(9)).await.unwrap().is_none());
}

pub async fn a_tenant_never_sees_another_tenants_design<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    let other = TenantId::parse(unique("other")).unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("secret")).await.unwrap();
    store
        .apply(
            &t,
            &d,
            &entry(EventKind::ValidationFinished, 1),
            &Change::ValidationFinished { verdict: Verdict::Pass, report: report("pass") },
        )
        .await
        .unwrap();
    assert!(store.get(&other, &d).await.unwrap().is_none());
    assert!(store.timeline(&other, &d).await.unwrap().is_none());
    assert!(store.report(&other, &d, None).await.unwrap().is_none());
    assert!(store.list(&other, None, 10).await.unwrap().items.is_empty());
}

pub async fn listing_pages_through_every_design_newest_first<S: DesignStore + ?Sized>(store: &S) {
    let t = TenantId::parse(unique("lister")).unwrap();
    let mut made = Vec::new();
    for i in 0..7 {
        let d = DesignId::generate();
        store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted(&format!("n{i}"))).await.unwrap();
        made.push(d);
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.list(&t, cursor.as_deref(), 3).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|v| v.design_id));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    made.reverse();
    assert_eq!(seen, made, "every design once, newest first");
}

pub async fn events_for_an_unknown_design_are_refused<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    let err =
        store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap_err();
    assert!(!err.is_retriable(), "an event for a design that was never submitted cannot succeed later");
}

fn accepted(d: &DesignId, revision: u64, name: Option<&str>) -> AcceptedRevision {
    AcceptedRevision {
        design_id: d.clone(),
        revision,
        name: name.map(str::to_owned),
        event_id: uuid::Uuid::now_v7(),
        correlation_id: CorrelationId::parse(format!("accepted-{revision}")).unwrap(),
        accepted_at: Utc::now(),
    }
}

pub async fn an_accepted_revision_reads_as_submitted_until_a_newer_one_is_materialised<S: DesignStore + ?Sized>(
    store: &S,
) {
    let (t, d) = ids();
    let other = TenantId::parse(unique("other")).unwrap();
    let first = accepted(&d, 1, Some("fresh"));
    store.record_accepted(&t, &first).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().expect("an accepted design is visible at once");
    assert_eq!((v.name.as_str(), v.revision, v.status), ("fresh", 1, DesignStatus::Submitted));
    let timeline = store.timeline(&t, &d).await.unwrap().expect("and so is its timeline");
    assert_eq!(
        timeline.iter().map(|e| (e.kind, e.revision, e.event_id)).collect::<Vec<_>>(),
        [(EventKind::DesignSubmitted, 1, first.event_id)]
    );
    assert!(store.get(&other, &d).await.unwrap().is_none(), "markers are per tenant");
    assert!(store.timeline(&other, &d).await.unwrap().is_none());

    // The consumers catch up: the materialised design wins, and the entry is not shown twice.
    let mut entry1 = entry(EventKind::DesignSubmitted, 1);
    entry1.event_id = first.event_id;
    store.apply(&t, &d, &entry1, &submitted("fresh")).await.unwrap();
    store
        .apply(&t, &d, &entry(EventKind::ResultsReady, 1), &Change::ResultsReady { verdict: Verdict::Pass })
        .await
        .unwrap();
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Ready);
    assert_eq!(store.timeline(&t, &d).await.unwrap().unwrap().len(), 2);

    // A newer accepted revision shows as submitted over the ready one; an older marker is ignored.
    store.record_accepted(&t, &accepted(&d, 2, None)).await.unwrap();
    store.record_accepted(&t, &accepted(&d, 1, Some("older"))).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.name.as_str(), v.revision, v.status, v.verdict), ("fresh", 2, DesignStatus::Submitted, None));
    let kinds: Vec<(EventKind, u64)> =
        store.timeline(&t, &d).await.unwrap().unwrap().iter().map(|e| (e.kind, e.revision)).collect();
    assert_eq!(kinds, [(EventKind::DesignSubmitted, 1), (EventKind::ResultsReady, 1), (EventKind::DesignSubmitted, 2)]);
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 2), &Change::Submitted { name: None }).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 2), &Change::ValidationStarted).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status), (2, DesignStatus::Validating), "the marker never holds a design back");
}

/// A marker is kept for the store's retention (here the default) after its revision was
/// accepted: past it, a design never materialised no longer shows, and a materialised one shows
/// as materialised.
pub async fn a_marker_older_than_the_retention_shows_nothing<S: DesignStore + ?Sized>(store: &S) {
    let keep = chrono::Duration::from_std(openqq_core::accepted::DEFAULT_ACCEPTED_RETENTION).unwrap();
    let aged = |d: &DesignId, revision: u64, age: chrono::Duration| AcceptedRevision {
        accepted_at: Utc::now() - age,
        ..accepted(d, revision, Some("aged"))
    };
    let (t, gone) = ids();
    let (kept, applied) = (DesignId::generate(), DesignId::generate());
    store.record_accepted(&t, &aged(&gone, 1, keep + chrono::Duration::hours(1))).await.unwrap();
    let together = [(t.clone(), aged(&kept, 1, keep - chrono::Duration::hours(1)))];
    assert!(store.record_accepted_many(&together).await.iter().all(Result::is_ok));
    store.apply(&t, &applied, &entry(EventKind::DesignSubmitted, 1), &submitted("applied")).await.unwrap();
    store.record_accepted(&t, &aged(&applied, 2, keep + chrono::Duration::hours(1))).await.unwrap();

    assert!(store.get(&t, &gone).await.unwrap().is_none(), "an expired marker of a design never applied");
    assert!(store.timeline(&t, &gone).await.unwrap().is_none());
    let v = store.get(&t, &kept).await.unwrap().expect("a marker within the retention shows");
    assert_eq!((v.revision, v.status), (1, DesignStatus::Submitted));
    let v = store.get(&t, &applied).await.unwrap().unwrap();
    assert_eq!((v.name.as_str(), v.revision), ("applied", 1), "an expired marker overlays nothing");
    let kinds: Vec<_> = store.timeline(&t, &applied).await.unwrap().unwrap().iter().map(|e| e.revision).collect();
    assert_eq!(kinds, [1], "nor adds its entry to the timeline");
    let listed: Vec<DesignId> =
        store.list(&t, None, 10).await.unwrap().items.into_iter().map(|v| v.design_id).collect();
    let mut expected = vec![kept.clone(), applied.clone()];
    expected.sort_by(|a, b| b.as_str().cmp(a.as_str()));
    assert_eq!(listed, expected, "listed: the marker within the retention and the applied design");

    // A newer revision of a design whose marker expired shows again.
    store.record_accepted(&t, &accepted(&gone, 2, None)).await.unwrap();
    assert_eq!(store.get(&t, &gone).await.unwrap().map(|v| v.revision), Some(2));
}

pub async fn markers_recorded_together_each_keep_the_highest_revision_of_their_own_design<S: DesignStore + ?Sized>(
    store: &S,
) {
    let (t, d) = ids();
    let other = TenantId::parse(unique("other")).unwrap();
    let e = DesignId::generate();
    store.record_accepted(&t, &accepted(&e, 5, Some("ahead"))).await.unwrap();
    let markers = [
        (t.clone(), accepted(&d, 1, Some("one"))),
        (t.clone(), accepted(&d, 3, None)),
        (t.clone(), accepted(&d, 2, Some("lower, later"))),
        (t.clone(), accepted(&e, 4, Some("behind"))),
        (other.clone(), accepted(&d, 7, Some("theirs"))),
    ];
    let answers = store.record_accepted_many(&markers).await;
    assert_eq!(answers.len(), markers.len(), "one answer per marker");
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert!(store.record_accepted_many(&[]).await.is_empty());
    let v = store.get(&t, &d).await.unwrap().expect("each marker of the call is recorded");
    assert_eq!((v.name.as_str(), v.revision), ("one", 3), "the highest revision, with the name it kept");
    let v = store.get(&t, &e).await.unwrap().unwrap();
    assert_eq!((v.name.as_str(), v.revision), ("ahead", 5), "a lower marker in the call changes nothing");
    let v = store.get(&other, &d).await.unwrap().unwrap();
    assert_eq!((v.name.as_str(), v.revision), ("theirs", 7), "markers stay with their own tenant");
}

pub async fn listing_merges_accepted_and_materialised_designs_newest_first<S: DesignStore + ?Sized>(store: &S) {
    let t = TenantId::parse(unique("merger")).unwrap();
    let mut made = Vec::new();
    for i in 0..7 {
        let d = DesignId::generate();
        if i % 2 == 0 {
            store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted(&format!("n{i}"))).await.unwrap();
        }
        if i % 3 != 1 {
            store.record_accepted(&t, &accepted(&d, 1, Some(&format!("n{i}")))).await.unwrap();
        }
        if i % 2 == 0 || i % 3 != 1 {
            made.push(d);
        }
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.list(&t, cursor.as_deref(), 2).await.unwrap();
        assert!(page.items.len() <= 2);
        assert!(page.items.iter().all(|v| v.revision == 1 && v.name.starts_with('n')));
        seen.extend(page.items.into_iter().map(|v| v.design_id));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    made.reverse();
    assert_eq!(seen, made, "every design once, accepted or materialised, newest first");
}

fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey::parse(k).unwrap()
}

fn response(body: &str) -> KeptResponse {
    KeptResponse {
        status: 202,
        headers: vec![("location".into(), "/v1/designs/x".into())],
        body: body.as_bytes().to_vec(),
    }
}

const DAY: Duration = Duration::from_secs(24 * 3600);
const LEASE: Duration = Duration::from_secs(60);

/// A claim of a request with fingerprint `fp`, naming what it creates `name`.
fn held<'a>(fp: &'a [u8; 32], lease: Duration, name: &'a str) -> KeyClaim<'a> {
    KeyClaim { fingerprint: fp, lease, keep: DAY, name }
}

fn claimed(name: &str) -> IdempotencyClaim {
    IdempotencyClaim::Claimed { name: name.into() }
}

pub async fn an_idempotency_key_replays_its_response_and_refuses_another_request<S: DesignStore + ?Sized>(store: &S) {
    let t = TenantId::parse(unique("idem")).unwrap();
    let other = TenantId::parse(unique("idem-other")).unwrap();
    let k = key(&unique("key"));
    let (fp, other_fp) = ([1u8; 32], [2u8; 32]);
    let claim = |t: &TenantId, fp: &[u8; 32], name: &str| {
        let (t, fp, name) = (t.clone(), *fp, name.to_owned());
        let k = k.clone();
        async move { store.claim_idempotency_key(&t, &k, &held(&fp, LEASE, &name)).await.unwrap() }
    };
    assert_eq!(claim(&t, &fp, "a").await, claimed("a"));
    assert_eq!(claim(&t, &fp, "b").await, IdempotencyClaim::InProgress);
    assert_eq!(claim(&t, &other_fp, "c").await, IdempotencyClaim::Mismatch);
    assert_eq!(claim(&other, &other_fp, "d").await, claimed("d"), "keys are per tenant");
    store.complete_idempotency_key(&t, &k, &fp, &response("{\"a\":1}"), DAY).await.unwrap();
    assert_eq!(claim(&t, &fp, "e").await, IdempotencyClaim::Completed(response("{\"a\":1}")));
    assert_eq!(claim(&t, &other_fp, "f").await, IdempotencyClaim::Mismatch);
    // Neither a release nor another request's completion undoes a completed key.
    store.release_idempotency_key(&t, &k, &fp).await.unwrap();
    store.complete_idempotency_key(&t, &k, &other_fp, &response("{}"), DAY).await.unwrap();
    assert_eq!(claim(&t, &fp, "g").await, IdempotencyClaim::Completed(response("{\"a\":1}")));
    let huge = KeptResponse { status: 202, headers: vec![], body: vec![b'x'; 64 * 1024] };
    let k2 = key(&unique("huge"));
    store.claim_idempotency_key(&t, &k2, &held(&fp, LEASE, "h")).await.unwrap();
    let err = store.complete_idempotency_key(&t, &k2, &fp, &huge, DAY).await.unwrap_err();
    assert!(!err.is_retriable(), "an oversized response is refused for good: {err}");
}

/// A key is free again once its claim was released or its lease ran out (its handler crashed),
/// or once it expired. The same request claiming it again keeps the name its first claim gave
/// (what that claim may have created already); another request takes it with its own.
pub async fn a_released_abandoned_or_expired_idempotency_key_can_be_claimed_again<S: DesignStore + ?Sized>(store: &S) {
    let t = TenantId::parse(unique("idem")).unwrap();
    let fp = [3u8; 32];
    let claim = |k: &IdempotencyKey, fp: [u8; 32], lease: Duration, name: &str| {
        let (t, k, name) = (t.clone(), k.clone(), name.to_owned());
        async move { store.claim_idempotency_key(&t, &k, &held(&fp, lease, &name)).await.unwrap() }
    };
    let released = key(&unique("released"));
    assert_eq!(claim(&released, fp, LEASE, "first").await, claimed("first"));
    store.release_idempotency_key(&t, &released, &fp).await.unwrap();
    assert_eq!(claim(&released, fp, LEASE, "second").await, claimed("first"), "a retry keeps its name");
    assert_eq!(claim(&released, fp, LEASE, "third").await, IdempotencyClaim::InProgress, "and holds the key");
    store.release_idempotency_key(&t, &released, &fp).await.unwrap();
    assert_eq!(claim(&released, [9u8; 32], LEASE, "other").await, claimed("other"), "another request's own name");

    let abandoned = key(&unique("abandoned"));
    assert_eq!(claim(&abandoned, fp, Duration::ZERO, "cut-off").await, claimed("cut-off"));
    assert_eq!(
        claim(&abandoned, fp, LEASE, "retried").await,
        claimed("cut-off"),
        "a claim whose lease ran out no longer holds the key, and its retry keeps its name"
    );
    store.complete_idempotency_key(&t, &abandoned, &fp, &response("{}"), DAY).await.unwrap();
    assert_eq!(claim(&abandoned, fp, LEASE, "again").await, IdempotencyClaim::Completed(response("{}")));
    let taken = key(&unique("taken"));
    claim(&taken, fp, Duration::ZERO, "cut-off").await;
    assert_eq!(claim(&taken, [4u8; 32], LEASE, "theirs").await, claimed("theirs"), "taken over by another request");

    let expired = key(&unique("expired"));
    claim(&expired, fp, LEASE, "old").await;
    store.complete_idempotency_key(&t, &expired, &fp, &response("{}"), Duration::ZERO).await.unwrap();
    assert_eq!(claim(&expired, [5u8; 32], LEASE, "new").await, claimed("new"), "a key past its lifetime is free");
}

fn failed(reason: &str) -> Change {
    Change::Failed { reason: reason.into() }
}

pub async fn a_failed_revision_shows_its_reason_and_stays_failed<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("f")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap();
    let applied = store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("the validator crashed")).await;
    assert_eq!(applied.unwrap(), Applied::Applied);
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.status, v.failure_reason.as_deref()), (DesignStatus::Failed, Some("the validator crashed")));
    let again = store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("again")).await.unwrap();
    assert_eq!(again, Applied::Duplicate, "a dead letter handled twice fails its revision once");
    store
        .apply(&t, &d, &entry(EventKind::ResultsReady, 1), &Change::ResultsReady { verdict: Verdict::Pass })
        .await
        .unwrap();
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Failed, "failed is final");
    let kinds: Vec<EventKind> = store.timeline(&t, &d).await.unwrap().unwrap().iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EventKind::DesignFailed), "the failure is in the timeline: {kinds:?}");
    // A new revision starts afresh.
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 2), &submitted("f")).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status, v.failure_reason), (2, DesignStatus::Submitted, None));
    // A late failure of revision 1 does not touch revision 2.
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("late")).await.unwrap();
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Submitted);
}

pub async fn a_revision_that_never_materialised_still_shows_as_failed<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("the submission is undecodable")).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().expect("a failed submission is visible");
    assert_eq!((v.revision, v.status), (1, DesignStatus::Failed));
    assert_eq!(v.failure_reason.as_deref(), Some("the submission is undecodable"));
    assert!(store.timeline(&t, &d).await.unwrap().is_some());
    // Likewise a later revision of an existing design whose submission was dead-lettered.
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("g")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 2), &failed("lost")).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status, v.failure_reason.as_deref()), (2, DesignStatus::Failed, Some("lost")));
}
