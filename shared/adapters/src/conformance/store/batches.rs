//! Batches: created once with their items, released a window at a time, each item ended once with
//! the next ordinal, counts kept exactly, stopped batches cancel what is queued, items paged by
//! status, another tenant's batch as unknown as one never created, and a batch past the store's
//! retention as unknown too.

use super::super::unique;
use chrono::Utc;
use openqq_core::batch::{
    BatchItem, BatchState, BatchStatus, Counts, ItemStatus, MaxFailed, NewBatch, NewItem, Verdicts,
    DEFAULT_BATCH_RETENTION,
};
use openqq_core::{BatchId, DesignId, DesignStore, TenantId, Verdict};

fn tenant() -> TenantId {
    TenantId::parse(unique("batch")).unwrap()
}

fn new_batch(name: &str) -> NewBatch {
    NewBatch {
        id: BatchId::generate(),
        name: name.into(),
        max_failed: Some(MaxFailed::Percent(50)),
        created_at: Utc::now(),
    }
}

/// `n` items, queued except those in `rejected`, the custom id `c{i}` each.
fn items(n: u32, rejected: &[u32]) -> Vec<NewItem> {
    (0..n)
        .map(|index| {
            let rejected = rejected.contains(&index);
            NewItem {
                item: BatchItem {
                    index,
                    custom_id: Some(format!("c{index}")),
                    design_id: (!rejected).then(DesignId::generate),
                    revision: (!rejected).then_some(1),
                    status: if rejected { ItemStatus::Rejected } else { ItemStatus::Queued },
                    verdict: None,
                    reason: rejected.then(|| "target: unknown device".to_owned()),
                },
                submission: (!rejected).then(|| format!("{{\"item\":{index}}}")),
            }
        })
        .collect()
}

pub async fn a_batch_is_created_once_with_its_items_and_counts<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant();
    let batch = new_batch("nightly");
    assert!(store.create_batch(&t, &batch, &items(5, &[3])).await.unwrap(), "created");
    assert!(!store.create_batch(&t, &batch, &items(9, &[])).await.unwrap(), "a second create is a no-op");
    let view = store.batch(&t, &batch.id).await.unwrap().expect("the batch reads back");
    assert_eq!(view.name, "nightly");
    assert_eq!(view.status, BatchStatus::Queued);
    assert_eq!(view.counts, Counts { queued: 4, rejected: 1, ..Counts::default() });
    assert_eq!(view.verdicts, Verdicts::default());
    assert_eq!(view.max_failed, Some(MaxFailed::Percent(50)));
    assert!(view.started_at.is_none() && view.finished_at.is_none());
    let page = store.batch_items(&t, &batch.id, None, None, 100).await.unwrap().unwrap();
    assert_eq!(page.items.len(), 5, "the first create's items, not the second's");
    assert_eq!(page.items[3].status, ItemStatus::Rejected);
    assert_eq!(page.items[3].reason.as_deref(), Some("target: unknown device"));
    assert_eq!(page.items[0].custom_id.as_deref(), Some("c0"));
    assert!(page.next.is_none());
}

pub async fn released_items_are_returned_until_they_end_and_each_end_takes_the_next_ordinal<S: DesignStore + ?Sized>(
    store: &S,
) {
    let t = tenant();
    let batch = new_batch("window");
    let made = items(4, &[]);
    store.create_batch(&t, &batch, &made).await.unwrap();
    let first = store.release_items(&t, &batch.id, 0..2).await.unwrap();
    assert_eq!(first.iter().map(|r| r.index).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(Some(&first[0].design_id), made[0].item.design_id.as_ref());
    assert_eq!(first[1].submission, "{\"item\":1}");
    assert_eq!(first[0].revision, 1);
    let again = store.release_items(&t, &batch.id, 0..2).await.unwrap();
    assert_eq!(again, first, "a repeated release returns the same items, still on their way");
    let view = store.batch(&t, &batch.id).await.unwrap().unwrap();
    assert_eq!((view.status, view.counts.queued, view.counts.validating), (BatchStatus::Running, 2, 2));
    assert!(view.started_at.is_some());

    let ended = store.end_item(&t, &batch.id, 1, ItemStatus::Ready, Some(Verdict::Pass)).await.unwrap().unwrap();
    assert_eq!((ended.ordinal, ended.fresh), (Some(1), true));
    let repeated = store.end_item(&t, &batch.id, 1, ItemStatus::Ready, Some(Verdict::Pass)).await.unwrap().unwrap();
    assert_eq!((repeated.ordinal, repeated.fresh), (Some(1), false), "a repeated end keeps its ordinal");
    assert_eq!(repeated.batch.counts, ended.batch.counts, "and counts nothing twice");
    let released = store.release_items(&t, &batch.id, 0..2).await.unwrap();
    assert_eq!(released.iter().map(|r| r.index).collect::<Vec<_>>(), [0], "an ended item is not returned");
    let queued = store.end_item(&t, &batch.id, 3, ItemStatus::Failed, None).await.unwrap().unwrap();
    assert!(!queued.fresh && queued.ordinal.is_none(), "a queued item cannot end");

    store.end_item(&t, &batch.id, 0, ItemStatus::Failed, None).await.unwrap();
    store.release_items(&t, &batch.id, 2..4).await.unwrap();
    store.end_item(&t, &batch.id, 2, ItemStatus::Ready, Some(Verdict::Fail)).await.unwrap();
    let last = store.end_item(&t, &batch.id, 3, ItemStatus::Ready, Some(Verdict::Pass)).await.unwrap().unwrap();
    assert_eq!(last.ordinal, Some(4));
    assert_eq!(last.batch.status, BatchStatus::Completed);
    assert_eq!(last.batch.counts, Counts { ready: 3, failed: 1, ..Counts::default() });
    assert_eq!(last.batch.verdicts, Verdicts { pass: 2, fail: 1 });
    assert!(last.batch.finished_at.is_some());
    let stopped = store.stop_batch(&t, &batch.id, BatchState::Cancelled, "too late").await.unwrap().unwrap();
    assert_eq!(
        (stopped.status, stopped.reason),
        (BatchStatus::Completed, None),
        "a batch that ended stays as it ended"
    );
    assert!(store.end_item(&t, &batch.id, 9, ItemStatus::Ready, None).await.unwrap().is_none(), "no item 9");
}

pub async fn stopping_a_batch_cancels_what_is_queued_and_lets_what_is_on_its_way_end<S: DesignStore + ?Sized>(
    store: &S,
) {
    let t = tenant();
    let batch = new_batch("stop");
    store.create_batch(&t, &batch, &items(5, &[])).await.unwrap();
    store.release_items(&t, &batch.id, 0..2).await.unwrap();
    let stopped = store.stop_batch(&t, &batch.id, BatchState::Cancelled, "cancelled by the tenant").await.unwrap();
    let stopped = stopped.unwrap();
    assert_eq!(stopped.status, BatchStatus::Cancelling);
    assert_eq!(stopped.counts, Counts { validating: 2, cancelled: 3, ..Counts::default() });
    assert_eq!(stopped.reason.as_deref(), Some("cancelled by the tenant"));
    assert!(store.release_items(&t, &batch.id, 2..5).await.unwrap().is_empty(), "cancelled items never leave");
    let again = store.stop_batch(&t, &batch.id, BatchState::Failed, "too many failed").await.unwrap().unwrap();
    assert_eq!(again.reason.as_deref(), Some("cancelled by the tenant"), "a stopped batch stays as it was");
    store.end_item(&t, &batch.id, 0, ItemStatus::Ready, Some(Verdict::Pass)).await.unwrap();
    let last = store.end_item(&t, &batch.id, 1, ItemStatus::Failed, None).await.unwrap().unwrap();
    assert_eq!(last.batch.status, BatchStatus::Cancelled);
    assert!(last.batch.finished_at.is_some());
    let cancelled = store.batch_items(&t, &batch.id, Some(ItemStatus::Cancelled), None, 10).await.unwrap().unwrap();
    assert_eq!(cancelled.items.iter().map(|i| i.index).collect::<Vec<_>>(), [2, 3, 4]);
}

pub async fn items_and_batches_page_in_order_and_another_tenants_are_unknown<S: DesignStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    let first = new_batch("first");
    store.create_batch(&t, &first, &items(7, &[])).await.unwrap();
    let second = new_batch("second");
    store.create_batch(&t, &second, &items(1, &[0])).await.unwrap();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store.batch_items(&t, &first.id, None, after, 3).await.unwrap().unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|i| i.index));
        match page.next {
            Some(next) => after = Some(next.parse().expect("the item cursor is an index")),
            None => break,
        }
    }
    assert_eq!(seen, (0..7).collect::<Vec<_>>(), "every item once, in order");
    let listed = store.list_batches(&t, None, 1).await.unwrap();
    assert_eq!(listed.items[0].batch_id, second.id, "newest first");
    let rest = store.list_batches(&t, listed.next.as_deref(), 10).await.unwrap();
    assert_eq!(rest.items.iter().map(|b| &b.batch_id).collect::<Vec<_>>(), [&first.id]);
    let all_rejected = store.batch(&t, &second.id).await.unwrap().unwrap();
    assert_eq!(all_rejected.status, BatchStatus::Completed, "a batch of rejected items is final at once");
    assert!(all_rejected.finished_at.is_some());

    assert!(store.batch(&other, &first.id).await.unwrap().is_none());
    assert!(store.batch_items(&other, &first.id, None, None, 10).await.unwrap().is_none());
    assert!(store.release_items(&other, &first.id, 0..7).await.unwrap().is_empty());
    assert!(store.end_item(&other, &first.id, 0, ItemStatus::Ready, None).await.unwrap().is_none());
    assert!(store.stop_batch(&other, &first.id, BatchState::Cancelled, "x").await.unwrap().is_none());
    assert!(store.list_batches(&other, None, 10).await.unwrap().items.is_empty());
    assert_eq!(store.batch(&t, &first.id).await.unwrap().unwrap().counts.queued, 7, "untouched by the other");
}

/// Ends racing for one batch's items (the batch function's partitions are per tenant, but a
/// re-read may overlap a late first attempt) each take one ordinal: 1 to n, none twice.
pub async fn racing_ends_take_every_ordinal_once<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant();
    let batch = new_batch("race");
    store.create_batch(&t, &batch, &items(12, &[])).await.unwrap();
    store.release_items(&t, &batch.id, 0..12).await.unwrap();
    let ends = (0..12u32)
        .flat_map(|i| [i, i])
        .map(|i| store.end_item(&t, &batch.id, i, ItemStatus::Ready, Some(Verdict::Pass)))
        .collect();
    let ended: Vec<_> = super::feed::join_all(ends).await.into_iter().map(|e| e.unwrap().unwrap()).collect();
    let mut fresh: Vec<u32> = ended.iter().filter(|e| e.fresh).filter_map(|e| e.ordinal).collect();
    fresh.sort_unstable();
    assert_eq!(fresh, (1..=12).collect::<Vec<_>>());
    let view = store.batch(&t, &batch.id).await.unwrap().unwrap();
    assert_eq!((view.counts.ready, view.verdicts.pass, view.status), (12, 12, BatchStatus::Completed));
}

/// A tenant's open items are the queued and validating items of its batches that have not
/// finished: an item that ends, and a stopped batch's queued items, leave them; another tenant's
/// never count.
pub async fn open_items_count_what_the_tenants_unfinished_batches_hold<S: DesignStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    assert_eq!(store.open_items(&t).await.unwrap(), 0, "nothing open for a new tenant");
    let (first, second) = (new_batch("first"), new_batch("second"));
    store.create_batch(&t, &first, &items(4, &[1])).await.unwrap();
    store.create_batch(&t, &second, &items(3, &[])).await.unwrap();
    store.create_batch(&other, &new_batch("theirs"), &items(5, &[])).await.unwrap();
    assert_eq!(store.open_items(&t).await.unwrap(), 6, "3 + 3 queued; a rejected item is not open");

    store.release_items(&t, &first.id, 0..2).await.unwrap();
    assert_eq!(store.open_items(&t).await.unwrap(), 6, "a validating item is still open");
    store.end_item(&t, &first.id, 0, ItemStatus::Ready, Some(Verdict::Pass)).await.unwrap();
    assert_eq!(store.open_items(&t).await.unwrap(), 5);
    store.stop_batch(&t, &second.id, BatchState::Cancelled, "cancelled").await.unwrap();
    assert_eq!(store.open_items(&t).await.unwrap(), 2, "the cancelled batch's queued items are gone");
    assert_eq!(store.open_items(&other).await.unwrap(), 5);
}

/// A batch is kept for the store's retention (here the default) after it was created: past it,
/// the batch is as unknown as one never created (not read, listed, paged or stopped) and its
/// open items no longer count.
pub async fn a_batch_older_than_the_retention_shows_nothing<S: DesignStore + ?Sized>(store: &S) {
    let keep = chrono::Duration::from_std(DEFAULT_BATCH_RETENTION).unwrap();
    let aged = |name: &str, age: chrono::Duration| NewBatch { created_at: Utc::now() - age, ..new_batch(name) };
    let t = tenant();
    let (gone, kept) =
        (aged("gone", keep + chrono::Duration::hours(1)), aged("kept", keep - chrono::Duration::hours(1)));
    assert!(store.create_batch(&t, &gone, &items(3, &[])).await.unwrap());
    assert!(store.create_batch(&t, &kept, &items(2, &[])).await.unwrap());

    assert!(store.batch(&t, &gone.id).await.unwrap().is_none(), "a batch past the retention is not read");
    assert!(store.batch_items(&t, &gone.id, None, None, 10).await.unwrap().is_none(), "nor its items");
    assert!(store.batch_items(&t, &gone.id, None, Some(u32::MAX), 10).await.unwrap().is_none());
    let listed: Vec<BatchId> =
        store.list_batches(&t, None, 10).await.unwrap().items.into_iter().map(|b| b.batch_id).collect();
    assert_eq!(listed, vec![kept.id.clone()], "listed: only the batch within the retention");
    assert_eq!(store.open_items(&t).await.unwrap(), 2, "the expired batch's 3 queued items do not count");
    assert!(store.stop_batch(&t, &gone.id, BatchState::Cancelled, "late").await.unwrap().is_none());
    let view = store.batch(&t, &kept.id).await.unwrap().expect("a batch within the retention is read");
    assert_eq!(view.counts.queued, 2);
    assert_eq!(store.batch_items(&t, &kept.id, None, None, 10).await.unwrap().unwrap().items.len(), 2);
}
