//! Design-store conformance for writes made together with their feed entries
//! (`DesignStore::apply_and_append`, `DesignStore::apply_batch`), where a store that plans them
//! from one read can get it wrong: designs of one tenant racing for the next feed number, a
//! replayed dead letter, and a batch larger than one DynamoDB transaction.

use super::feed::{join_all, tenant, timeline_entry};
use super::{entry, failed, report, submitted};
use chrono::Utc;
use openqq_core::ports::ApplyOp;
use openqq_core::{
    Applied, Change, DesignId, DesignStatus, DesignStore, EventKind, TimelineEntry, Verdict, Webhook, WebhookId,
    WebhookSecret,
};

/// Eight designs of one tenant applied at once, each a submission and then its validation start,
/// race for the tenant's next feed number: every write lands once, and the feed numbers them
/// 1..=16 without a gap or a number used twice, each entry naming its own design.
pub async fn designs_of_one_tenant_racing_for_the_feed_head_each_take_one_number<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("race-head");
    let designs: Vec<DesignId> = (0..8).map(|_| DesignId::generate()).collect();
    let change = submitted("racer");
    let submissions: Vec<TimelineEntry> =
        designs.iter().map(|_| timeline_entry(EventKind::DesignSubmitted, 1)).collect();
    let writes = designs.iter().zip(&submissions).map(|(d, e)| store.apply_and_append(false, &t, d, e, &change));
    let outcomes = join_all(writes.collect()).await;
    for outcome in outcomes {
        assert_eq!(outcome.expect("a racing write succeeds"), Applied::Applied);
    }
    // The second round reads each design first: the race is on the head alone.
    let started: Vec<TimelineEntry> = designs.iter().map(|_| timeline_entry(EventKind::ValidationStarted, 1)).collect();
    let writes =
        designs.iter().zip(&started).map(|(d, e)| store.apply_and_append(false, &t, d, e, &Change::ValidationStarted));
    for outcome in join_all(writes.collect()).await {
        assert_eq!(outcome.expect("a racing write succeeds"), Applied::Applied);
    }
    let feed = store.read_feed(&t, 0, 100).await.unwrap();
    assert_eq!(feed.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=16).collect::<Vec<_>>(), "{feed:?}");
    for (d, (sub, start)) in designs.iter().zip(submissions.iter().zip(&started)) {
        let mine: Vec<_> = feed.iter().filter(|e| &e.design_id == d).map(|e| (e.kind, e.event_id)).collect();
        assert_eq!(
            mine,
            [(EventKind::DesignSubmitted, sub.event_id), (EventKind::ValidationStarted, start.event_id)],
            "each design's entries once, in the order applied"
        );
        let view = store.get(&t, d).await.unwrap().expect("the design exists");
        assert_eq!(view.status, DesignStatus::Validating);
        assert_eq!(store.timeline(&t, d).await.unwrap().unwrap().len(), 2);
    }
    assert_eq!(store.feed_head(&t).await.unwrap(), 16);
}

/// A result dead-lettered after its revision failed, replayed through `apply_and_append`: the
/// revival and its feed entry land once; the same replay again and a plain re-read of it are
/// duplicates that add nothing to the feed.
pub async fn a_replayed_dead_letter_enters_the_feed_once<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("replay-feed");
    let d = DesignId::generate();
    let ready = Change::ResultsReady { verdict: Verdict::Pass };
    let finished = Change::ValidationFinished { verdict: Verdict::Pass, report: report("pass") };
    let steps = [
        (entry(EventKind::DesignSubmitted, 1), submitted("r")),
        (entry(EventKind::ValidationStarted, 1), Change::ValidationStarted),
        (entry(EventKind::ValidationFinished, 1), finished),
        (entry(EventKind::DesignFailed, 1), failed("the store was down")),
    ];
    for (e, c) in &steps {
        assert_eq!(store.apply_and_append(false, &t, &d, e, c).await.unwrap(), Applied::Applied);
    }
    let result = entry(EventKind::ResultsReady, 1);
    assert_eq!(store.apply_and_append(true, &t, &d, &result, &ready).await.unwrap(), Applied::Applied);
    let view = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((view.status, view.verdict, view.failure_reason), (DesignStatus::Ready, Some(Verdict::Pass), None));
    let again = entry(EventKind::ResultsReady, 1);
    assert_eq!(store.apply_and_append(true, &t, &d, &again, &ready).await.unwrap(), Applied::Duplicate);
    assert_eq!(store.apply_and_append(false, &t, &d, &again, &ready).await.unwrap(), Applied::Duplicate);
    let feed = store.read_feed(&t, 0, 100).await.unwrap();
    let kinds: Vec<_> = feed.iter().map(|e| (e.seq, e.kind)).collect();
    assert_eq!(
        kinds,
        [
            (1, EventKind::DesignSubmitted),
            (2, EventKind::ValidationStarted),
            (3, EventKind::ValidationFinished),
            (4, EventKind::DesignFailed),
            (5, EventKind::ResultsReady),
        ],
        "the revival once, with the replayed record's event id"
    );
    assert_eq!(feed[4].event_id, result.event_id);
    assert_eq!(feed[4].verdict, Some(Verdict::Pass));
}

fn webhook(kinds: &[EventKind]) -> Webhook {
    Webhook {
        id: WebhookId::generate(),
        url: format!("https://receiver.example/{}", uuid::Uuid::now_v7().simple()),
        kinds: kinds.to_vec(),
        description: None,
        created_at: Utc::now(),
        secret: WebhookSecret::from_bytes(vec![9; 32]).unwrap(),
        previous_secret: None,
    }
}

/// A batch of 45 writes of one tenant (15 designs, each submitted, started and finished with a
/// report, two webhooks wanting some kinds), more than one DynamoDB transaction holds, with a
/// re-read in the middle: each write lands once in the order given, the feed numbers them 1..=45
/// in that order, the re-read is a duplicate that adds nothing, and each webhook gets one delivery
/// per entry of a kind it wants.
pub async fn a_batch_larger_than_one_transaction_applies_each_write_once_in_order<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("big-batch");
    let (everything, finished_only) = (
        webhook(&[EventKind::DesignSubmitted, EventKind::ValidationStarted, EventKind::ValidationFinished]),
        webhook(&[EventKind::ValidationFinished]),
    );
    store.create_webhook(&t, &everything).await.unwrap();
    store.create_webhook(&t, &finished_only).await.unwrap();
    let designs: Vec<DesignId> = (0..15).map(|_| DesignId::generate()).collect();
    let finished = Change::ValidationFinished { verdict: Verdict::Pass, report: report("pass") };
    let change = submitted("batched");
    let mut steps: Vec<(usize, TimelineEntry, &Change)> = Vec::new();
    for (kind, c) in [
        (EventKind::DesignSubmitted, &change),
        (EventKind::ValidationStarted, &Change::ValidationStarted),
        (EventKind::ValidationFinished, &finished),
    ] {
        for i in 0..designs.len() {
            steps.push((i, timeline_entry(kind, 1), c));
        }
    }
    // A re-read of the first submission, in the middle.
    let reread = (0, timeline_entry(EventKind::DesignSubmitted, 1), &change);
    steps.insert(20, reread);
    let ops: Vec<ApplyOp<'_>> = steps
        .iter()
        .map(|(i, e, c)| ApplyOp { replayed: false, tenant: &t, design: &designs[*i], entry: e, change: c })
        .collect();
    let done = store.apply_batch(&ops).await;
    assert!(done.is_complete(ops.len()), "{:?}", done.error);
    let mut expected = vec![Applied::Applied; ops.len()];
    expected[20] = Applied::Duplicate;
    assert_eq!(done.applied, expected);

    let feed = store.read_feed(&t, 0, 100).await.unwrap();
    assert_eq!(feed.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=45).collect::<Vec<_>>());
    let applied: Vec<_> = steps.iter().enumerate().filter(|(n, _)| *n != 20).map(|(_, (i, e, _))| (*i, e)).collect();
    for (got, (i, e)) in feed.iter().zip(&applied) {
        assert_eq!((&got.design_id, got.kind, got.event_id), (&designs[*i], e.kind, e.event_id), "in the order given");
    }
    for d in &designs {
        let view = store.get(&t, d).await.unwrap().unwrap();
        assert_eq!((view.revision, view.status), (1, DesignStatus::Validating));
        assert_eq!(store.timeline(&t, d).await.unwrap().unwrap().len(), 3);
        assert!(store.report(&t, d, Some(1)).await.unwrap().is_some(), "the report is kept");
    }
    let t = &t;
    let count = |id| async move { store.list_deliveries(t, id, None, 100).await.unwrap().items.len() };
    assert_eq!(count(&everything.id).await, 45, "one delivery per entry of a wanted kind");
    assert_eq!(count(&finished_only.id).await, 15);
}
