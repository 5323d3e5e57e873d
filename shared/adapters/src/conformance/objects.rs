//! Object-store conformance: content addressing, digest checks, size limit, tenant isolation,
//! `stat`, adoption, and deletion.
//!
//! Direct uploads are a capability ([`PresignedUploads`]). A store that has it (S3) goes through
//! the whole flow: the suite uploads with an HTTP client using exactly the presigned method, URL
//! and headers, adopts, and reads back; wrong bytes are refused (by the upload or by the
//! adoption), and another tenant can neither adopt nor read the upload. For a store without it
//! (the embedded store) the upload-flow checks confirm that nobody can adopt an upload that was
//! never made. Either way, adopting what is already stored is a no-op and adopting nothing is
//! [`PortError::NotFound`].

use super::unique;
use openqq_core::ports::{UploadTarget, MAX_OBJECT_BYTES};
use openqq_core::{ObjectRef, ObjectStore, PortError, PresignedUploads, TenantId};
use std::time::Duration;

fn tenant() -> TenantId {
    TenantId::parse(unique("t")).unwrap()
}

/// Runs every object-store check against `store`; the direct-upload flows when `presigned` (the
/// same store's [`PresignedUploads`]) is given.
pub async fn run<S: ObjectStore + ?Sized>(store: &S, presigned: Option<&dyn PresignedUploads>) {
    an_object_reads_back_byte_for_byte_under_its_sha256(store).await;
    storing_the_same_bytes_again_returns_the_same_reference(store).await;
    a_tenant_never_reads_another_tenants_object(store).await;
    unknown_and_malformed_digests_are_refused(store).await;
    an_object_over_the_limit_is_refused_and_one_at_the_limit_is_kept(store).await;
    usage_counts_each_of_a_tenants_objects_once_and_nobody_elses(store).await;
    stat_gives_the_length_of_a_tenants_own_objects_only(store).await;
    adopting_a_stored_object_is_a_no_op_and_adopting_nothing_is_not_found(store).await;
    an_upload_read_without_adopting_stays_an_upload(store).await;
    a_deleted_object_is_gone_for_its_tenant_only(store).await;
    an_upload_through_the_returned_target_is_adopted_and_then_read_back(store, presigned).await;
    an_upload_of_other_bytes_than_presigned_is_never_adopted(store, presigned).await;
    another_tenant_can_neither_adopt_nor_read_an_upload(store, presigned).await;
}

pub async fn a_deleted_object_is_gone_for_its_tenant_only<S: ObjectStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    let r = store.put(&t, vec![9; 3000]).await.unwrap();
    store.put(&other, vec![9; 3000]).await.unwrap();
    assert!(!store.delete(&other, &unique_digest()).await.unwrap(), "nothing to delete is false");
    assert!(store.delete(&t, &r.digest).await.unwrap(), "the object was there");
    assert!(matches!(store.get(&t, &r.digest).await, Err(PortError::NotFound)), "it no longer reads");
    assert_eq!(store.stat(&t, &r.digest).await.unwrap(), None);
    assert_eq!(store.usage(&t).await.unwrap(), 0, "nor counts");
    assert!(!store.delete(&t, &r.digest).await.unwrap(), "deleting it again finds nothing");
    assert_eq!(store.get(&other, &r.digest).await.unwrap(), vec![9; 3000], "another tenant's copy stays");
    assert!(matches!(store.delete(&t, "../../etc").await, Err(PortError::Invalid { .. })));
    let again = store.put(&t, vec![9; 3000]).await.unwrap();
    assert_eq!(store.get(&t, &again.digest).await.unwrap(), vec![9; 3000], "the same bytes may be stored again");
}

/// A well-formed digest no test stores.
fn unique_digest() -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    format!("{id}{id}")
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
        assert!(matches!(store.get(&t, bad).await, Err(PortError::Invalid { .. })), "{bad:?} is refused as malformed");
    }
}

pub async fn an_object_over_the_limit_is_refused_and_one_at_the_limit_is_kept<S: ObjectStore + ?Sized>(store: &S) {
    let t = tenant();
    let err = store.put(&t, vec![7; MAX_OBJECT_BYTES + 1]).await.unwrap_err();
    assert!(matches!(err, PortError::Invalid { .. }) && !err.is_retriable(), "{err}");
    let r = store.put(&t, vec![7; MAX_OBJECT_BYTES]).await.unwrap();
    assert_eq!(r.bytes as usize, MAX_OBJECT_BYTES);
}

pub async fn stat_gives_the_length_of_a_tenants_own_objects_only<S: ObjectStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    let r = store.put(&t, vec![9; 1234]).await.unwrap();
    assert_eq!(store.stat(&t, &r.digest).await.unwrap(), Some(1234));
    assert_eq!(store.stat(&other, &r.digest).await.unwrap(), None, "another tenant's object is not there");
    assert_eq!(store.stat(&t, &"0".repeat(64)).await.unwrap(), None);
    let empty = store.put(&t, Vec::new()).await.unwrap();
    assert_eq!(store.stat(&t, &empty.digest).await.unwrap(), Some(0), "an empty object is there, with no bytes");
    for bad in ["../x", "", &"A".repeat(64)] {
        assert!(matches!(store.stat(&t, bad).await, Err(PortError::Invalid { .. })), "{bad:?} is refused as malformed");
    }
}

/// An upload read without adopting it (a batch's items) is read back checked and stays an
/// upload; a stored object of the digest is read too; nothing, or a wrong length, is refused;
/// another tenant reads nothing.
pub async fn an_upload_read_without_adopting_stays_an_upload<S: ObjectStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    let upload = store.put_upload(&t, b"{\"name\":\"a\"}\n".to_vec()).await.unwrap();
    assert_eq!(store.read_upload(&t, &upload).await.unwrap(), b"{\"name\":\"a\"}\n");
    assert_eq!(store.stat(&t, &upload.digest).await.unwrap(), None, "still an upload, not an object");
    assert_eq!(store.read_upload(&t, &upload).await.unwrap().len() as u64, upload.bytes, "and read again");
    let longer = ObjectRef { digest: upload.digest.clone(), bytes: upload.bytes + 1 };
    assert!(matches!(store.read_upload(&t, &longer).await, Err(PortError::Invalid { .. })), "a wrong length");
    assert!(matches!(store.read_upload(&other, &upload).await, Err(PortError::NotFound)), "another tenant's");
    store.adopt_upload(&t, &upload).await.expect("it can still be adopted");
    assert_eq!(store.read_upload(&t, &upload).await.unwrap().len() as u64, upload.bytes, "an object of the digest");
    let nothing = ObjectRef { digest: "2".repeat(64), bytes: 5 };
    assert!(matches!(store.read_upload(&t, &nothing).await, Err(PortError::NotFound)));
}

pub async fn adopting_a_stored_object_is_a_no_op_and_adopting_nothing_is_not_found<S: ObjectStore + ?Sized>(store: &S) {
    let t = tenant();
    let r = store.put(&t, b"already here".to_vec()).await.unwrap();
    store.adopt_upload(&t, &r).await.unwrap();
    assert_eq!(store.get(&t, &r.digest).await.unwrap(), b"already here");
    let longer = ObjectRef { digest: r.digest.clone(), bytes: r.bytes + 1 };
    assert!(
        matches!(store.adopt_upload(&t, &longer).await, Err(PortError::Invalid { .. })),
        "a wrong length is refused"
    );
    let nothing = ObjectRef { digest: "1".repeat(64), bytes: 5 };
    assert!(matches!(store.adopt_upload(&t, &nothing).await, Err(PortError::NotFound)));
}

/// How long the suite's upload URLs are valid.
const UPLOAD_TTL: Duration = Duration::from_secs(600);

/// `bytes` sent as `target` says: exactly its method, URL and headers. Returns the status.
async fn upload(target: &UploadTarget, bytes: Vec<u8>) -> reqwest::StatusCode {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let method = reqwest::Method::from_bytes(target.method.as_bytes()).unwrap();
    let mut request = client.request(method, &target.url).body(bytes);
    for (name, value) in &target.headers {
        request = request.header(name, value);
    }
    request.send().await.unwrap_or_else(|e| panic!("uploading to {}: {e}", target.url)).status()
}

/// `object`'s upload target for `tenant`, or `None` for a store without direct uploads.
async fn presign(
    presigned: Option<&dyn PresignedUploads>,
    tenant: &TenantId,
    object: &ObjectRef,
) -> Option<UploadTarget> {
    let target = presigned?.presign_upload(tenant, object, UPLOAD_TTL).await.expect("presigning answers");
    assert!(target.expires_at > chrono::Utc::now(), "the target is valid for a while: {target:?}");
    Some(target)
}

fn object_of(bytes: &[u8]) -> ObjectRef {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    ObjectRef { digest, bytes: bytes.len() as u64 }
}

pub async fn an_upload_through_the_returned_target_is_adopted_and_then_read_back<S: ObjectStore + ?Sized>(
    store: &S,
    presigned: Option<&dyn PresignedUploads>,
) {
    let t = tenant();
    let bytes: Vec<u8> = (0..=250u8).cycle().take(300_000).collect();
    let object = object_of(&bytes);
    let Some(target) = presign(presigned, &t, &object).await else { return };
    assert!(upload(&target, bytes.clone()).await.is_success(), "the upload is taken");
    assert_eq!(store.stat(&t, &object.digest).await.unwrap(), None, "an upload is not an object until adopted");
    store.adopt_upload(&t, &object).await.unwrap();
    assert_eq!(store.stat(&t, &object.digest).await.unwrap(), Some(300_000));
    assert_eq!(store.get(&t, &object.digest).await.unwrap(), bytes);
    store.adopt_upload(&t, &object).await.expect("adopting again (a retried call) changes nothing");
    assert_eq!(store.usage(&t).await.unwrap(), 300_000, "an adopted upload counts once");
}

pub async fn an_upload_of_other_bytes_than_presigned_is_never_adopted<S: ObjectStore + ?Sized>(
    store: &S,
    presigned: Option<&dyn PresignedUploads>,
) {
    let t = tenant();
    let announced = b"the netlist that was announced".to_vec();
    let object = object_of(&announced);
    let Some(target) = presign(presigned, &t, &object).await else { return };
    // As long as the announced bytes (the length is a signed header), only one byte differs.
    let mut smuggled = announced;
    smuggled[4] ^= 0x20;
    let status = upload(&target, smuggled).await;
    if status.is_success() {
        let adopted = store.adopt_upload(&t, &object).await;
        assert!(matches!(adopted, Err(PortError::Invalid { .. })), "other bytes are refused at adoption: {adopted:?}");
    }
    assert_eq!(store.stat(&t, &object.digest).await.unwrap(), None, "nothing was adopted");
    assert!(matches!(store.get(&t, &object.digest).await, Err(PortError::NotFound)));
    let adopted = store.adopt_upload(&t, &object).await;
    assert!(matches!(adopted, Err(PortError::NotFound)), "the refused upload is gone: {adopted:?}");
}

pub async fn another_tenant_can_neither_adopt_nor_read_an_upload<S: ObjectStore + ?Sized>(
    store: &S,
    presigned: Option<&dyn PresignedUploads>,
) {
    let (owner, other) = (tenant(), tenant());
    let bytes = b"owner's bitstream".to_vec();
    let object = object_of(&bytes);
    let Some(target) = presign(presigned, &owner, &object).await else {
        assert!(matches!(store.adopt_upload(&other, &object).await, Err(PortError::NotFound)));
        return;
    };
    assert!(upload(&target, bytes.clone()).await.is_success());
    assert!(matches!(store.adopt_upload(&other, &object).await, Err(PortError::NotFound)), "not the other's upload");
    assert!(matches!(store.get(&other, &object.digest).await, Err(PortError::NotFound)));
    assert_eq!(store.usage(&other).await.unwrap(), 0, "nor counted for the other tenant");
    store.adopt_upload(&owner, &object).await.unwrap();
    assert!(matches!(store.get(&other, &object.digest).await, Err(PortError::NotFound)), "nor once adopted");
    assert_eq!(store.get(&owner, &object.digest).await.unwrap(), bytes);
}
