//! Reads of the embedded store are bounded whatever is stored: a report too large to serve is
//! refused without being loaded, and a timeline read returns at most the latest entries; and
//! accepted-revision markers, batches and deleted designs' tombstones past their retention leave
//! the tables; a deletion's lookups of other designs' objects are index reads, whatever the data
//! dir's age.

use openqq_adapters::{Durability, EmbeddedDesignStore};
use openqq_core::ports::MAX_TIMELINE_ENTRIES;
use openqq_core::StoreRetention;
use openqq_core::{
    AcceptedRevision, AcceptedRevisions, Change, CorrelationId, DesignId, DesignReads, DesignWrites, EventKind,
    TenantId, TimelineEntry, Verdict,
};
use serde_json::value::RawValue;

fn entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse("corr").unwrap(),
        occurred_at: chrono::Utc::now(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_report_over_the_read_limit_is_refused_and_a_smaller_one_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let (t, d) = (TenantId::parse("t").unwrap(), DesignId::generate());
    for revision in [1, 2] {
        store
            .apply(&t, &d, &entry(EventKind::DesignSubmitted, revision), &Change::Submitted { name: None })
            .await
            .unwrap();
    }
    let report = |bytes: usize| RawValue::from_string(format!("{{\"pad\":\"{}\"}}", "x".repeat(bytes))).unwrap();
    let finished = |bytes| Change::ValidationFinished { verdict: Verdict::Fail, report: report(bytes) };
    store.apply(&t, &d, &entry(EventKind::ValidationFinished, 1), &finished(200_000)).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::ValidationFinished, 2), &finished(5 << 20)).await.unwrap();
    let err = store.report(&t, &d, Some(2)).await.unwrap_err();
    assert!(!err.is_retriable() && err.to_string().contains("read limit"), "{err}");
    let served = store.report(&t, &d, Some(1)).await.unwrap().expect("the smaller report is there");
    assert_eq!(served.report.get().len(), 200_010);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_read_returns_only_the_latest_entries_in_applied_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let (t, d) = (TenantId::parse("t").unwrap(), DesignId::generate());
    let revisions = MAX_TIMELINE_ENTRIES as u64 + 200;
    for revision in 1..=revisions {
        store
            .apply(&t, &d, &entry(EventKind::DesignSubmitted, revision), &Change::Submitted { name: None })
            .await
            .unwrap();
    }
    let timeline = store.timeline(&t, &d).await.unwrap().unwrap();
    assert_eq!(timeline.len(), MAX_TIMELINE_ENTRIES);
    assert_eq!((timeline[0].revision, timeline.last().unwrap().revision), (201, revisions), "the latest, oldest first");
}

/// Accepted-revision markers past the retention leave the table, a batch at a time as markers
/// are written, so it holds about a retention's worth of accepted designs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_past_the_retention_are_removed_as_new_ones_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let keep = std::time::Duration::from_secs(3600);
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process)
        .unwrap()
        .with_retention(StoreRetention { accepted: keep, ..Default::default() });
    let t = TenantId::parse("t").unwrap();
    let marker = |age: chrono::Duration| AcceptedRevision {
        design_id: DesignId::generate(),
        revision: 1,
        name: None,
        event_id: uuid::Uuid::now_v7(),
        correlation_id: CorrelationId::parse("corr").unwrap(),
        accepted_at: chrono::Utc::now() - age,
    };
    let old: Vec<_> = (0..100).map(|_| (t.clone(), marker(chrono::Duration::minutes(61)))).collect();
    assert!(store.record_accepted_many(&old).await.iter().all(Result::is_ok));
    let rows = || {
        let db = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
        db.query_row("SELECT COUNT(*) FROM accepted", [], |r| r.get::<_, i64>(0)).unwrap()
    };
    // Written already expired: each write removed up to 64 before it, and none is shown.
    assert!(rows() < 100, "{} rows", rows());
    assert!(store.list(&t, None, 100).await.unwrap().items.is_empty());
    let fresh = marker(chrono::Duration::minutes(59));
    store.record_accepted(&t, &fresh).await.unwrap();
    store.record_accepted(&t, &marker(chrono::Duration::zero())).await.unwrap();
    assert_eq!(rows(), 2, "only the markers within the retention are left");
    assert!(store.get(&t, &fresh.design_id).await.unwrap().is_some());
}

/// A deletion finds the other designs naming an object by index: specifications kept before the
/// store recorded each one's objects are recorded when the store is opened, once, so an object
/// such a specification names stays when another design naming it is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_named_only_in_the_text_of_earlier_specifications_are_recorded_when_the_store_opens() {
    use openqq_core::{Deletion, DesignDeletes, KeptSpec, KeptSpecs};
    let dir = tempfile::tempdir().unwrap();
    let (t, doomed, older) = (TenantId::parse("t").unwrap(), DesignId::generate(), DesignId::generate());
    let (shared, own) = ("c".repeat(64), "d".repeat(64));
    let naming = |digests: &[&str]| KeptSpec {
        revision: 1,
        submission: format!(
            r#"{{"spec":{{"refs":[{}]}}}}"#,
            digests.iter().map(|d| format!(r#"{{"digest":"{d}","bytes":9}}"#)).collect::<Vec<_>>().join(",")
        ),
    };
    {
        let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
        for (d, spec) in [(&doomed, naming(&[&shared, &own])), (&older, naming(&[&shared]))] {
            store.apply(&t, d, &entry(EventKind::DesignSubmitted, 1), &Change::Submitted { name: None }).await.unwrap();
            store.keep_spec(&t, d, &spec).await.unwrap();
        }
    }
    // As a data dir of a version before the record: `older`'s objects only in its text.
    let db = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
    db.execute_batch(&format!(
        "DELETE FROM spec_objects WHERE design_id='{older}'; DELETE FROM spec_objects_recorded;"
    ))
    .unwrap();
    drop(db);

    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let deleted = store
        .delete_design(&t, &doomed, &Deletion::now(CorrelationId::parse("delete").unwrap()))
        .await
        .unwrap()
        .expect("the design existed");
    assert_eq!(deleted.objects, std::collections::BTreeSet::from([own]), "the shared object stays");
}

/// Batches past the retention leave the tables with their items, two at a time as batches are
/// created, so the store holds about a retention's worth of batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_past_the_retention_are_removed_with_their_items_as_new_ones_are_created() {
    use openqq_core::batch::{BatchItem, Batches, ItemStatus, NewBatch, NewItem};
    let dir = tempfile::tempdir().unwrap();
    let keep = std::time::Duration::from_secs(3600);
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process)
        .unwrap()
        .with_retention(StoreRetention { batches: keep, ..Default::default() });
    let t = TenantId::parse("t").unwrap();
    let batch = |age: chrono::Duration| NewBatch {
        id: openqq_core::BatchId::generate(),
        name: "nightly".into(),
        max_failed: None,
        created_at: chrono::Utc::now() - age,
    };
    let items: Vec<NewItem> = (0..10)
        .map(|index| NewItem {
            item: BatchItem {
                index,
                custom_id: None,
                design_id: Some(DesignId::generate()),
                revision: Some(1),
                status: ItemStatus::Queued,
                verdict: None,
                reason: None,
            },
            submission: Some("{}".into()),
        })
        .collect();
    let rows = |table: &str| {
        let db = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
        db.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get::<_, i64>(0)).unwrap()
    };
    for _ in 0..3 {
        store.create_batch(&t, &batch(chrono::Duration::minutes(61)), &items).await.unwrap();
    }
    // Each create removed up to two expired batches before it: the first two are gone.
    assert_eq!((rows("batches"), rows("batch_items")), (1, 10));
    let fresh = batch(chrono::Duration::minutes(59));
    store.create_batch(&t, &fresh, &items).await.unwrap();
    assert_eq!((rows("batches"), rows("batch_items")), (1, 10), "only the batch within the retention is left");
    assert!(store.batch(&t, &fresh.id).await.unwrap().is_some());
}

/// Deleted designs' tombstones past the retention leave the table as designs are deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_past_the_retention_are_removed_as_designs_are_deleted() {
    use openqq_core::{Deletion, DesignDeletes};
    let dir = tempfile::tempdir().unwrap();
    let keep = std::time::Duration::from_secs(3600);
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process)
        .unwrap()
        .with_retention(StoreRetention { tombstones: keep, ..Default::default() });
    let t = TenantId::parse("t").unwrap();
    let delete = |age: chrono::Duration| {
        let store = &store;
        let t = t.clone();
        async move {
            let d = DesignId::generate();
            store
                .apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &Change::Submitted { name: None })
                .await
                .unwrap();
            let deletion = Deletion {
                occurred_at: chrono::Utc::now() - age,
                ..Deletion::now(CorrelationId::parse("corr").unwrap())
            };
            store.delete_design(&t, &d, &deletion).await.unwrap().expect("deleted");
            d
        }
    };
    let tombstones = || {
        let db = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
        db.query_row("SELECT COUNT(*) FROM deleted_designs", [], |r| r.get::<_, i64>(0)).unwrap()
    };
    for _ in 0..3 {
        delete(chrono::Duration::minutes(61)).await;
    }
    assert_eq!(tombstones(), 1, "each deletion removed the expired tombstones before its own");
    let kept = delete(chrono::Duration::minutes(59)).await;
    delete(chrono::Duration::zero()).await;
    assert_eq!(tombstones(), 2, "only the tombstones within the retention are left");
    // The tombstone within the retention still makes a write of its design a no-op.
    store.apply(&t, &kept, &entry(EventKind::DesignSubmitted, 2), &Change::Submitted { name: None }).await.unwrap();
    assert!(store.get(&t, &kept).await.unwrap().is_none(), "a deleted design stays deleted");
}
