//! Object-store conformance: content addressing, digest checks, size limit and tenant isolation.

use super::unique;
use openqq_core::ports::MAX_OBJECT_BYTES;
use openqq_core::{ObjectRef, ObjectStore, PortError, TenantId};

fn tenant() -> TenantId {
    TenantId::parse(unique("t")).unwrap()
}

/// Runs every object-store check against `store`.
pub async fn run<S: ObjectStore + ?Sized>(store: &S) {
    an_object_reads_back_byte_for_byte_under_its_sha256(store).await;
    storing_the_same_bytes_again_returns_the_same_reference(store).await;
    a_tenant_never_reads_another_tenants_object(store).await;
    unknown_and_malformed_digests_are_refused(store).await;
    an_object_over_the_limit_is_refused_and_one_at_the_limit_is_kept(store).await;
    usage_counts_each_of_a_tenants_objects_once_and_nobody_elses(store).await;
}

pub async fn usage_counts_each_of_a_tenants_objects_once_and_nobody_elses<S: ObjectStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    assert_eq!(store.usage(&t).await.unwrap(), 0, "a tenant with no objects uses nothing");
    store.put(&t, vec![1; 1000]).await.unwrap();
    store.put(&t, vec![2; 500]).await.unwrap();
    store.put(&t, vec![1; 1000]).await.unwrap();
    assert_eq!(store.usage(&t).await.unwrap(), 1500, "each distinct object counts once");
    store.put(&other, vec![3; 700]).await.unwrap();
    assert_eq!(store.usage(&t).await.unwrap(), 1500, "another tenant's objects are not counted");
    assert_eq!(store.usage(&other).await.unwrap(), 700);
}

pub async fn an_object_reads_back_byte_for_byte_under_its_sha256<S: ObjectStore + ?Sized>(store: &S) {
    let t = tenant();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let r = store.put(&t, bytes.clone()).await.unwrap();
    assert_eq!(r.bytes, 70_000);
    assert!(ObjectRef::well_formed(&r.digest), "the digest is lower-case hex SHA-256: {}", r.digest);
    let empty = store.put(&t, Vec::new()).await.unwrap();
    assert_eq!(
        empty.digest, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "the digest is SHA-256 of the bytes"
    );
    assert_eq!(store.get(&t, &r.digest).await.unwrap(), bytes);
    assert_eq!(store.get(&t, &empty.digest).await.unwrap(), Vec::<u8>::new());
}

pub async fn storing_the_same_bytes_again_returns_the_same_reference<S: ObjectStore + ?Sized>(store: &S) {
    let t = tenant();
    let a = store.put(&t, b"report".to_vec()).await.unwrap();
    let b = store.put(&t, b"report".to_vec()).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(store.get(&t, &a.digest).await.unwrap(), b"report");
}

pub async fn a_tenant_never_reads_another_tenants_object<S: ObjectStore + ?Sized>(store: &S) {
    let (owner, other) = (tenant(), tenant());
    let r = store.put(&owner, b"secret findings".to_vec()).await.unwrap();
    assert!(
        matches!(store.get(&other, &r.digest).await, Err(PortError::NotFound)),
        "another tenant's digest is not found, like one nobody stored"
    );
    // Even once the other tenant stored the same bytes, each reads only its own copy.
    store.put(&other, b"secret findings".to_vec()).await.unwrap();
    assert_eq!(store.get(&other, &r.digest).await.unwrap(), b"secret findings");
}

pub async fn unknown_and_malformed_digests_are_refused<S: ObjectStore + ?Sized>(store: &S) {
    let t = tenant();
    let unknown = "0".repeat(64);
    assert!(matches!(store.get(&t, &unknown).await, Err(PortError::NotFound)));
    for bad in ["../../store.db", "", &"A".repeat(64), &"0".repeat(63)] {
        assert!(matches!(store.get(&t, bad).await, Err(PortError::Invalid(_))), "{bad:?} is refused as malformed");
    }
}

pub async fn an_object_over_the_limit_is_refused_and_one_at_the_limit_is_kept<S: ObjectStore + ?Sized>(store: &S) {
    let t = tenant();
    let err = store.put(&t, vec![7; MAX_OBJECT_BYTES + 1]).await.unwrap_err();
    assert!(matches!(err, PortError::Invalid(_)) && !err.is_retriable(), "{err}");
    let r = store.put(&t, vec![7; MAX_OBJECT_BYTES]).await.unwrap();
    assert_eq!(r.bytes as usize, MAX_OBJECT_BYTES);
}
