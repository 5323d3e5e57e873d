use super::*;
use openqq_adapters::{Durability, EmbeddedDesignStore, EmbeddedObjectStore};
use openqq_core::{Change, CorrelationId, DesignWrites, EventKind, TimelineEntry, Verdict};
use serde_json::value::RawValue;
use std::sync::Arc;

fn entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse("corr").unwrap(),
        occurred_at: chrono::Utc::now(),
    }
}

/// Gives `tenant` a design with a report of `report_bytes` bytes.
async fn design_with_report(store: &dyn DesignWrites, tenant: &TenantId, report_bytes: usize) -> DesignId {
    let d = DesignId::generate();
    store
        .apply(tenant, &d, &entry(EventKind::DesignSubmitted, 1), &Change::Submitted { name: Some("n".into()) })
        .await
        .unwrap();
    let report = RawValue::from_string(format!("{{\"pad\":\"{}\"}}", "x".repeat(report_bytes - 10))).unwrap();
    let finished = Change::ValidationFinished { verdict: Verdict::Pass, report };
    store.apply(tenant, &d, &entry(EventKind::ValidationFinished, 1), &finished).await.unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_a_tenants_designs_and_report_bytes_and_nobody_elses() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
    design_with_report(&store, &a, 100_000).await;
    design_with_report(&store, &a, 50_000).await;
    design_with_report(&store, &b, 70_000).await;
    let usage = store.usage(&a).await.unwrap();
    assert_eq!(usage.designs, 2);
    let rows = 2 + 4; // two designs, two timeline entries each
    assert_eq!(usage.bytes, 150_000 + rows * openqq_core::ports::USAGE_ROW_BYTES);
    assert_eq!(store.usage(&TenantId::parse("nobody").unwrap()).await.unwrap(), Usage::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_byte_quota_gets_a_403_and_other_tenants_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let objects = EmbeddedObjectStore::open(dir.path()).unwrap();
    let (big, small) = (TenantId::parse("big").unwrap(), TenantId::parse("small").unwrap());
    let quota = StorageQuota::with_ttl(StorageLimits { bytes: 200_000, designs: 100 }, Duration::ZERO);
    let existing = design_with_report(&store, &big, 150_000).await;
    assert!(quota.check(&store, &objects, &big, &DesignId::generate()).await.is_ok(), "under the quota");
    design_with_report(&store, &big, 60_000).await;
    for design in [DesignId::generate(), existing] {
        let refused = quota.check(&store, &objects, &big, &design).await.unwrap_err();
        assert_eq!((refused.status, refused.slug), (StatusCode::FORBIDDEN, "storage-quota-exceeded"));
        assert!(refused.detail.contains("storage quota") && refused.detail.contains("195.3 KiB"), "{}", refused.detail);
    }
    design_with_report(&store, &small, 1_000).await;
    assert!(quota.check(&store, &objects, &small, &DesignId::generate()).await.is_ok(), "quotas are per tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_design_count_may_revise_but_not_create() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let objects = EmbeddedObjectStore::open(dir.path()).unwrap();
    let t = TenantId::parse("t").unwrap();
    let quota = StorageQuota::with_ttl(StorageLimits { bytes: 1 << 30, designs: 2 }, Duration::ZERO);
    let first = design_with_report(&store, &t, 100).await;
    design_with_report(&store, &t, 100).await;
    let refused = quota.check(&store, &objects, &t, &DesignId::generate()).await.unwrap_err();
    assert_eq!(refused.slug, "storage-quota-exceeded");
    assert!(refused.detail.contains("2 designs"), "{}", refused.detail);
    assert!(quota.check(&store, &objects, &t, &first).await.is_ok(), "a revision of an existing design adds no design");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_read_again_only_after_the_cache_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let objects = EmbeddedObjectStore::open(dir.path()).unwrap();
    let t = TenantId::parse("t").unwrap();
    let quota = StorageQuota::with_ttl(StorageLimits { bytes: 1 << 30, designs: 1 }, Duration::from_millis(300));
    assert!(quota.check(&store, &objects, &t, &DesignId::generate()).await.is_ok());
    design_with_report(&store, &t, 100).await;
    assert!(quota.check(&store, &objects, &t, &DesignId::generate()).await.is_ok(), "the cached usage is reused");
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(quota.check(&store, &objects, &t, &DesignId::generate()).await.is_err(), "then read again");
}

#[test]
fn sizes_parse_in_binary_units() {
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("500MiB"), Ok(500 << 20));
    assert_eq!(parse_size("4096"), Ok(4096));
    for bad in ["1GB", "x", "", "-1", "99999999999TiB"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_size("1GB"), Err(SizeError::Malformed { text: "1GB".into() }));
    assert_eq!(parse_size("99999999999TiB"), Err(SizeError::TooLarge { text: "99999999999TiB".into() }));
    assert!(matches!(parse_size("x"), Err(SizeError::Number { .. })));
}

#[test]
fn the_limits_refuse_zero_naming_the_setting() {
    assert!(StorageLimits { bytes: 0, designs: 1 }.check().unwrap_err().to_string().contains("--tenant-storage"));
    assert!(StorageLimits { bytes: 1, designs: 0 }.check().unwrap_err().to_string().contains("--tenant-designs"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_reports_in_the_object_store_count_toward_the_byte_quota() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let objects = EmbeddedObjectStore::open(dir.path()).unwrap();
    let t = TenantId::parse("reports").unwrap();
    let quota = StorageQuota::with_ttl(StorageLimits { bytes: 1_000_000, designs: 100 }, Duration::ZERO);
    design_with_report(&store, &t, 10_000).await;
    assert!(quota.check(&store, &objects, &t, &DesignId::generate()).await.is_ok(), "under the quota");
    objects.put(&t, vec![7; 1_000_000]).await.unwrap();
    let refused = quota.check(&store, &objects, &t, &DesignId::generate()).await.unwrap_err();
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "a full report kept by reference takes the tenant's space too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_would_take_the_tenant_past_its_byte_quota_is_refused_with_a_403() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let objects = EmbeddedObjectStore::open(dir.path()).unwrap();
    let tenant = TenantId::parse("up").unwrap();
    let quota = StorageQuota::with_ttl(StorageLimits { bytes: 100_000, designs: 100 }, Duration::ZERO);
    objects.put(&tenant, vec![7; 60_000]).await.unwrap();
    assert!(quota.check_adding(&store, &objects, &tenant, 40_000).await.is_ok(), "exactly at the quota");
    let refused = quota.check_adding(&store, &objects, &tenant, 40_001).await.unwrap_err();
    assert_eq!((refused.status, refused.slug), (StatusCode::FORBIDDEN, "storage-quota-exceeded"));
    let other = TenantId::parse("other").unwrap();
    assert!(quota.check_adding(&store, &objects, &other, 100_000).await.is_ok(), "quotas are per tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_upload_counts_at_once_once_the_tenants_cached_usage_is_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    let objects = EmbeddedObjectStore::open(dir.path()).unwrap();
    let tenant = TenantId::parse("up").unwrap();
    let quota = StorageQuota::with_ttl(StorageLimits { bytes: 100_000, designs: 100 }, Duration::from_secs(3600));
    assert!(quota.check_adding(&store, &objects, &tenant, 60_000).await.is_ok());
    objects.put(&tenant, vec![7; 60_000]).await.unwrap();
    assert!(quota.check_adding(&store, &objects, &tenant, 60_000).await.is_ok(), "the cached usage is stale");
    quota.forget(&tenant);
    assert!(quota.check_adding(&store, &objects, &tenant, 60_000).await.is_err(), "read afresh, it counts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_uploads_against_a_nearly_full_quota_admit_only_what_fits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap());
    let objects = Arc::new(EmbeddedObjectStore::open(dir.path()).unwrap());
    let t = TenantId::parse("t").unwrap();
    design_with_report(store.as_ref(), &t, 100_000).await;
    let used = store.usage(&t).await.unwrap().bytes;
    // Room for three uploads of 10,000 bytes, with the usage cached all along (as for 5 s).
    let quota = Arc::new(StorageQuota::with_ttl(StorageLimits { bytes: used + 35_000, designs: 100 }, USAGE_TTL));
    let attempts: Vec<_> = (0..10)
        .map(|_| {
            let (quota, store, objects, t) = (quota.clone(), store.clone(), objects.clone(), t.clone());
            tokio::spawn(async move { quota.reserve(store.as_ref(), objects.as_ref(), &t, 10_000).await })
        })
        .collect();
    let mut admitted = Vec::new();
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(reservation) => admitted.push(reservation),
            Err(refused) => {
                assert_eq!(refused.slug, "storage-quota-exceeded");
                assert!(refused.detail.contains("uploads of 29.3 KiB in progress"), "{}", refused.detail);
            }
        }
    }
    assert_eq!(admitted.len(), 3, "three fit; the cached usage alone would have admitted all ten");
    assert!(quota.check_adding(store.as_ref(), objects.as_ref(), &t, 10_000).await.is_err(), "grants count them too");

    // A failed upload gives its room back.
    drop(admitted.pop());
    let again = quota.reserve(store.as_ref(), objects.as_ref(), &t, 10_000).await.expect("its room is free again");
    // A stored one keeps it until the usage is read again, which then counts the object instead.
    let stored = objects.put_upload(&t, vec![b'x'; 10_000]).await.unwrap();
    objects.adopt_upload(&t, &stored).await.unwrap();
    again.stored();
    assert!(quota.reserve(store.as_ref(), objects.as_ref(), &t, 10_000).await.is_err(), "still counted while cached");
    quota.forget(&t);
    let refused = quota.reserve(store.as_ref(), objects.as_ref(), &t, 10_000).await.unwrap_err();
    assert!(
        refused.detail.contains("uploads of 19.5 KiB in progress"),
        "the stored one is in the usage now: {}",
        refused.detail
    );
    drop(admitted);
    assert!(quota.reserve(store.as_ref(), objects.as_ref(), &t, 10_000).await.is_ok(), "once the others gave back");
}
