//! Design-store conformance for the tenant's event feed ([`openqq_core::FeedReader`]): numbered
//! 1, 2, 3… per tenant without gaps, even under concurrent appends; one entry per design, kind
//! and revision; read after a number, a page at a time, never another tenant's.

use super::super::unique;
use openqq_core::{CorrelationId, DesignId, DesignStore, EventKind, NewFeedEntry, TenantId, TimelineEntry, Verdict};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

pub(super) fn tenant(prefix: &str) -> TenantId {
    TenantId::parse(unique(prefix)).unwrap()
}

pub(super) fn timeline_entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse(format!("feed-{revision}")).unwrap(),
        occurred_at: chrono::Utc::now(),
    }
}

/// Appends a fresh entry of `kind` and `revision` for `design`; its number.
pub(super) async fn append<S: DesignStore + ?Sized>(
    store: &S,
    t: &TenantId,
    design: &DesignId,
    kind: EventKind,
    revision: u64,
) -> u64 {
    let entry = timeline_entry(kind, revision);
    store
        .append_feed(
            t,
            &NewFeedEntry { design_id: design, entry: &entry, verdict: None, elapsed_ms: None, batch: None },
        )
        .await
        .unwrap()
}

/// Polls every future until all are done (concurrently, on the calling task); their outputs in
/// order.
pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(|o| o.expect("every future finished")).collect()
}

/// Entries of several designs and kinds are numbered 1, 2, 3… in the order they were appended,
/// and read back as they were appended (design, kind, revision, event id, correlation id, time
/// verdict and time taken).
pub async fn the_feed_numbers_a_tenants_entries_one_by_one_across_designs<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("feed");
    let designs = [DesignId::generate(), DesignId::generate(), DesignId::generate()];
    let mut appended = Vec::new();
    for (i, kind) in
        [EventKind::DesignSubmitted, EventKind::SimulationFinished, EventKind::ResultsReady].into_iter().enumerate()
    {
        for design in &designs {
            let entry = timeline_entry(kind, 1);
            let verdict = (kind != EventKind::DesignSubmitted).then_some(Verdict::Pass);
            let elapsed_ms = (kind == EventKind::SimulationFinished).then_some(1234);
            let new = NewFeedEntry { design_id: design, entry: &entry, verdict, elapsed_ms, batch: None };
            let seq = store.append_feed(&t, &new).await.unwrap();
            appended.push((seq, design.clone(), entry, verdict, elapsed_ms));
            assert_eq!(seq as usize, appended.len(), "entry {} of round {i} takes the next number", appended.len());
        }
    }
    let read = store.read_feed(&t, 0, 100).await.unwrap();
    assert_eq!(read.len(), appended.len(), "{read:?}");
    for (got, (seq, design, entry, verdict, elapsed_ms)) in read.iter().zip(&appended) {
        assert_eq!(got.seq, *seq);
        assert_eq!(&got.design_id, design);
        assert_eq!((got.kind, got.revision, got.event_id), (entry.kind, entry.revision, entry.event_id));
        assert_eq!((&got.correlation_id, got.occurred_at), (&entry.correlation_id, entry.occurred_at));
        assert_eq!((got.verdict, got.elapsed_ms), (*verdict, *elapsed_ms));
    }
}

/// The same design, kind and revision appended again (a record re-read with a new event id)
/// answers the number it has and adds nothing: the entry keeps the first event id.
pub async fn appending_the_same_design_kind_and_revision_again_returns_its_number<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("feed-again");
    let d = DesignId::generate();
    let first = timeline_entry(EventKind::DesignSubmitted, 1);
    let new = |e| NewFeedEntry { design_id: &d, entry: e, verdict: None, elapsed_ms: None, batch: None };
    assert_eq!(store.append_feed(&t, &new(&first)).await.unwrap(), 1);
    assert_eq!(append(store, &t, &d, EventKind::ValidationStarted, 1).await, 2);
    let reread = timeline_entry(EventKind::DesignSubmitted, 1);
    assert_eq!(store.append_feed(&t, &new(&reread)).await.unwrap(), 1, "the entry already there");
    assert_eq!(append(store, &t, &d, EventKind::DesignSubmitted, 2).await, 3, "and no number was used up");
    let read = store.read_feed(&t, 0, 100).await.unwrap();
    assert_eq!(read.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(read[0].event_id, first.event_id, "the first event id is kept");
}

/// Many appends at once, some of them repeats, take every number once: 1..=n without a gap or a
/// number used twice.
pub async fn concurrent_appends_take_every_number_once<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("feed-race");
    let designs: Vec<DesignId> = (0..16).map(|_| DesignId::generate()).collect();
    let entries: Vec<TimelineEntry> = designs.iter().map(|_| timeline_entry(EventKind::DesignSubmitted, 1)).collect();
    // Every design appended twice at once: its repeat must answer the same number.
    let news: Vec<NewFeedEntry<'_>> = designs
        .iter()
        .zip(&entries)
        .chain(designs.iter().zip(&entries))
        .map(|(design_id, entry)| NewFeedEntry { design_id, entry, verdict: None, elapsed_ms: None, batch: None })
        .collect();
    let appends = news.iter().map(|new| store.append_feed(&t, new)).collect();
    let seqs: Vec<u64> = join_all(appends).await.into_iter().map(|r| r.expect("a racing append succeeds")).collect();
    let (firsts, repeats) = seqs.split_at(designs.len());
    assert_eq!(firsts, repeats, "a design's two appends answer one number");
    let mut sorted = firsts.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=designs.len() as u64).collect::<Vec<_>>(), "every number once: {seqs:?}");
    let read = store.read_feed(&t, 0, 100).await.unwrap();
    assert_eq!(read.iter().map(|e| e.seq).collect::<Vec<_>>(), sorted);
    for e in &read {
        let i = designs.iter().position(|d| *d == e.design_id).expect("an appended design");
        assert_eq!(firsts[i], e.seq, "the number answered is the entry's");
    }
}

/// `read_feed` answers the entries after a number, oldest first, at most `limit`, and `feed_head`
/// the latest number; each tenant numbers its own feed from 1 and reads only its own entries.
pub async fn reading_the_feed_pages_after_a_number_and_only_through_the_tenants_own<S: DesignStore + ?Sized>(
    store: &S,
) {
    let (t, other) = (tenant("feed-read"), tenant("feed-other"));
    let d = DesignId::generate();
    assert_eq!(store.feed_head(&t).await.unwrap(), 0, "an empty feed's head is 0");
    for revision in 1..=5 {
        append(store, &t, &d, EventKind::DesignSubmitted, revision).await;
    }
    assert_eq!(store.feed_head(&t).await.unwrap(), 5, "the head is the latest number");
    let od = DesignId::generate();
    assert_eq!(append(store, &other, &od, EventKind::DesignSubmitted, 1).await, 1, "each tenant counts from 1");
    assert_eq!(store.feed_head(&other).await.unwrap(), 1);
    assert_eq!(store.feed_head(&t).await.unwrap(), 5, "heads are per tenant");
    let seqs = |entries: Vec<openqq_core::FeedEntry>| entries.into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(store.read_feed(&t, 0, 2).await.unwrap()), [1, 2]);
    assert_eq!(seqs(store.read_feed(&t, 2, 2).await.unwrap()), [3, 4]);
    assert_eq!(seqs(store.read_feed(&t, 4, 2).await.unwrap()), [5]);
    assert!(store.read_feed(&t, 5, 2).await.unwrap().is_empty(), "nothing after the last");
    assert!(store.read_feed(&t, 0, 0).await.unwrap().is_empty(), "a limit of 0 reads nothing");
    let theirs = store.read_feed(&other, 0, 100).await.unwrap();
    assert_eq!(theirs.iter().map(|e| (e.seq, &e.design_id)).collect::<Vec<_>>(), [(1, &od)]);
    assert!(store.read_feed(&tenant("feed-nobody"), 0, 100).await.unwrap().is_empty());
}

/// Every write a consumer makes through `apply_for` (`apply_and_append`) enters the feed: a new one and a duplicate
/// (its entry already there, so the feed keeps one, with the first event id and the verdict of
/// the change), never a stale one.
pub async fn applied_writes_enter_the_feed_once_and_stale_ones_never<S: DesignStore + ?Sized>(store: &S) {
    use openqq_core::{Applied, Change};
    let t = tenant("feed-apply");
    let d = DesignId::generate();
    let submitted = |revision| (timeline_entry(EventKind::DesignSubmitted, revision), Change::Submitted { name: None });
    let (second, change) = submitted(2);
    assert_eq!(store.apply_and_append(false, &t, &d, &second, &change).await.unwrap(), Applied::Applied);
    let (again, change) = submitted(2);
    assert_eq!(store.apply_and_append(false, &t, &d, &again, &change).await.unwrap(), Applied::Duplicate);
    let (stale, change) = submitted(1);
    assert_eq!(store.apply_and_append(false, &t, &d, &stale, &change).await.unwrap(), Applied::Stale);
    let ready = timeline_entry(EventKind::ResultsReady, 2);
    let change = Change::ResultsReady { verdict: Verdict::Fail };
    assert_eq!(store.apply_and_append(false, &t, &d, &ready, &change).await.unwrap(), Applied::Applied);
    let read = store.read_feed(&t, 0, 100).await.unwrap();
    let got: Vec<_> = read.iter().map(|e| (e.seq, e.kind, e.revision, e.verdict)).collect();
    assert_eq!(
        got,
        [(1, EventKind::DesignSubmitted, 2, None), (2, EventKind::ResultsReady, 2, Some(Verdict::Fail))],
        "one entry per write that was not stale"
    );
    assert_eq!(read[0].event_id, second.event_id, "the duplicate kept the first event id");
}
