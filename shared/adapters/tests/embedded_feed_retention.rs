//! Feed retention in the embedded store: as a tenant's feed grows, its entries older than the
//! retention go (never the newest, which carries the numbering on), with the deliveries of them
//! that ended; numbering goes on without reuse; another tenant's feed is untouched; and a reader
//! that resumes past removed entries can tell (`openqq_core::feed::resumable`).

use openqq_adapters::{Durability, EmbeddedDesignStore};
use openqq_core::feed::{resumable, FeedReader};
use openqq_core::StoreRetention;
use openqq_core::{CorrelationId, DesignId, DesignWrites, EventKind, NewFeedEntry, TenantId, TimelineEntry};
use std::time::Duration;

fn entry(revision: u64, age: chrono::Duration) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind: EventKind::DesignSubmitted,
        revision,
        correlation_id: CorrelationId::parse("corr").unwrap(),
        occurred_at: chrono::Utc::now() - age,
    }
}

async fn append(store: &EmbeddedDesignStore, tenant: &TenantId, design: &DesignId, e: &TimelineEntry) -> u64 {
    let new = NewFeedEntry { design_id: design, entry: e, verdict: None, elapsed_ms: None, batch: None };
    store.append_feed(tenant, &new).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_past_the_retention_go_as_the_feed_grows_and_a_reader_past_them_can_tell() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process)
        .unwrap()
        .with_retention(StoreRetention { feed: Duration::from_secs(86_400), ..Default::default() });
    let (acme, globex) = (TenantId::parse("acme").unwrap(), TenantId::parse("globex").unwrap());
    let design = DesignId::generate();
    // 100 entries two days old for acme, then recent ones; 50 old ones for globex, whose feed
    // never reaches a sweep of its own.
    for revision in 1..=100 {
        append(&store, &acme, &design, &entry(revision, chrono::Duration::days(2))).await;
        if revision <= 50 {
            append(&store, &globex, &design, &entry(revision, chrono::Duration::days(2))).await;
        }
    }
    let mut last = 0;
    for revision in 101..=160 {
        last = append(&store, &acme, &design, &entry(revision, chrono::Duration::zero())).await;
    }
    assert_eq!(last, 160, "numbering goes on after a sweep, no number reused");

    let kept = store.read_feed(&acme, 0, 500).await.unwrap();
    let first = kept.first().unwrap().seq;
    assert_eq!(first, 101, "every entry past the retention went, and only those: {first}");
    assert_eq!(kept.len(), 60);
    assert_eq!(resumable(50, Some(first)), Err(101), "a reader that saw 50 is told what it missed");
    let after_100 = store.read_feed(&acme, 100, 1).await.unwrap();
    assert_eq!(resumable(100, after_100.first().map(|e| e.seq)), Ok(()), "one that saw 100 resumes");
    assert_eq!(store.read_feed(&globex, 0, 500).await.unwrap().len(), 50, "another tenant's growth sweeps none of it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_newest_entry_stays_however_old_so_numbering_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process)
        .unwrap()
        .with_retention(StoreRetention { feed: Duration::from_secs(60), ..Default::default() });
    let acme = TenantId::parse("acme").unwrap();
    let design = DesignId::generate();
    for revision in 1..=64 {
        append(&store, &acme, &design, &entry(revision, chrono::Duration::days(2))).await;
    }
    let kept = store.read_feed(&acme, 0, 500).await.unwrap();
    assert_eq!(kept.iter().map(|e| e.seq).collect::<Vec<_>>(), [64], "the newest stays");
    let next = append(&store, &acme, &design, &entry(65, chrono::Duration::zero())).await;
    assert_eq!(next, 65);
}
