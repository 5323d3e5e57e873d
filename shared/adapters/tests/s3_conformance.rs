//! The S3 object store against the object-store conformance suite, on a real S3-compatible
//! server: `OPENQQ_TEST_S3_ENDPOINT` (scripts/services/moto.sh prints one; moto serves S3 and
//! DynamoDB on the same endpoint). Without it the tests say so and pass without running.
//!
//!   endpoint=$(scripts/services/moto.sh)
//!   OPENQQ_TEST_S3_ENDPOINT=$endpoint cargo test -p openqq-adapters --features s3 --test s3_conformance
#![cfg(feature = "s3")]

use aws_config::BehaviorVersion;
use aws_sdk_s3::config::{Credentials, Region};
use openqq_adapters::conformance;
use openqq_adapters::s3::{UPLOAD_EXPIRY_DAYS, UPLOAD_EXPIRY_RULE};
use openqq_adapters::{S3ObjectStore, S3Settings};
use openqq_core::{ObjectStore, PortError, PresignedUploads, TenantId};

const ENDPOINT_VAR: &str = "OPENQQ_TEST_S3_ENDPOINT";

fn endpoint() -> Option<String> {
    let endpoint = std::env::var(ENDPOINT_VAR).ok();
    if endpoint.is_none() {
        eprintln!("{ENDPOINT_VAR} is not set: skipping (scripts/services/moto.sh starts a server)");
    }
    endpoint
}

/// A client for the test server, path-style as a local server wants.
fn client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// A store on a fresh bucket of the test server, or `None` (with a note) when none is set.
async fn store() -> Option<(S3ObjectStore, aws_sdk_s3::Client)> {
    let endpoint = endpoint()?;
    let bucket = conformance::unique("openqq");
    let store = S3ObjectStore::new(client(&endpoint), bucket).unwrap();
    assert!(store.create_bucket_if_missing().await.unwrap(), "a fresh bucket is created");
    assert!(!store.create_bucket_if_missing().await.unwrap(), "and found the second time");
    Some((store, client(&endpoint)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_s3_object_store_passes_the_object_store_suite() {
    let Some((store, _)) = store().await else { return };
    conformance::objects::run(&store, Some(&store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_bucket_expires_unadopted_uploads_after_a_day() {
    let Some((store, client)) = store().await else { return };
    let rules = client.get_bucket_lifecycle_configuration().bucket(store.bucket()).send().await.unwrap();
    let rule = rules.rules().iter().find(|r| r.id() == Some(UPLOAD_EXPIRY_RULE)).expect("the rule is there");
    assert_eq!(rule.status().as_str(), "Enabled");
    assert_eq!(rule.filter().and_then(|f| f.prefix()), Some("uploads/"));
    assert_eq!(rule.expiration().and_then(|e| e.days()), Some(UPLOAD_EXPIRY_DAYS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_and_uploads_sit_under_the_documented_keys() {
    let Some((store, client)) = store().await else { return };
    let t = TenantId::parse("acme.eu:1").unwrap();
    let stored = store.put(&t, b"netlist".to_vec()).await.unwrap();
    let announced = openqq_core::ObjectRef {
        digest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into(),
        bytes: 0,
    };
    let target = store.presign_upload(&t, &announced, std::time::Duration::from_secs(60)).await.unwrap();
    let mut request = reqwest::Client::new().put(&target.url);
    for (name, value) in &target.headers {
        request = request.header(name, value);
    }
    assert!(request.send().await.unwrap().status().is_success());
    let listed = client.list_objects_v2().bucket(store.bucket()).send().await.unwrap();
    let mut keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [format!("objects/acme.eu:1/{}", stored.digest), format!("uploads/acme.eu:1/{}", announced.digest)],
        "a tenant's keys are under its id (leading dots, which no tenant id has, are escaped: keys.rs)"
    );
    assert_eq!(store.usage(&t).await.unwrap(), 7, "the pending upload (no bytes) and the object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_changed_in_the_bucket_is_reported_not_served() {
    let Some((store, client)) = store().await else { return };
    let t = TenantId::parse(conformance::unique("t")).unwrap();
    let r = store.put(&t, b"report".to_vec()).await.unwrap();
    let key = format!("objects/{t}/{}", r.digest);
    client.put_object().bucket(store.bucket()).key(key).body(b"tampered".to_vec().into()).send().await.unwrap();
    let err = store.get(&t, &r.digest).await.unwrap_err();
    assert!(matches!(err, PortError::Corrupt { what: "stored object", .. }) && !err.is_retriable(), "{err:?}");
}

/// What `openqq up --s3-endpoint` does: the environment's settings, the bucket created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_an_endpoint_creates_the_bucket_and_serves_from_it() {
    let Some(endpoint) = endpoint() else { return };
    let settings = S3Settings { bucket: conformance::unique("connect"), endpoint: Some(endpoint) };
    let store = S3ObjectStore::connect(&settings).await.unwrap();
    let t = TenantId::parse("connect").unwrap();
    let r = store.put(&t, b"kept".to_vec()).await.unwrap();
    assert!(!store.create_bucket_if_missing().await.unwrap(), "the bucket is there");
    let again = S3ObjectStore::connect(&settings).await.unwrap();
    assert_eq!(again.get(&t, &r.digest).await.unwrap(), b"kept", "a second start finds the same bucket");
}
