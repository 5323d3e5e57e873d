//! Error classification and request shapes against recorded S3 answers (the SDK's replaying
//! test client): throttling, server errors and refused credentials that a local server never
//! produces on demand.

use super::*;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
use aws_smithy_types::body::SdkBody;
use openqq_core::PortError;

const DIGEST: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A recorded answer of S3; the request side is not compared.
fn answer(status: u16, body: &str) -> ReplayEvent {
    answer_with(status, body, &[])
}

/// A recorded answer with `headers` besides the usual ones.
fn answer_with(status: u16, body: &str, headers: &[(&str, &str)]) -> ReplayEvent {
    let request = http::Request::builder().uri("https://openqq.s3.eu-west-1.amazonaws.com/").body(SdkBody::empty());
    let mut response = http::Response::builder()
        .status(status)
        .header("content-type", "application/xml")
        .header("x-amz-request-id", "RECORDED");
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    ReplayEvent::new(request.unwrap(), response.body(SdkBody::from(body.to_owned())).unwrap())
}

fn error(status: u16, code: &str) -> ReplayEvent {
    answer(
        status,
        &format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>recorded {code}</Message><RequestId>R</RequestId></Error>"#
        ),
    )
}

/// A store whose client replays `events` in order, with the SDK's own retries off so that each
/// answer reaches the classification.
fn store(events: Vec<ReplayEvent>) -> (S3ObjectStore, StaticReplayClient) {
    let replay = StaticReplayClient::new(events);
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .http_client(replay.clone())
        .build();
    (S3ObjectStore::new(Client::from_conf(config), "openqq").unwrap(), replay)
}

fn tenant() -> TenantId {
    TenantId::parse("acme").unwrap()
}

#[tokio::test]
async fn throttling_is_classified_retriable() {
    for code in ["SlowDown", "Throttling", "RequestLimitExceeded"] {
        let (store, _) = store(vec![error(503, code)]);
        let err = store.get(&tenant(), DIGEST).await.unwrap_err();
        assert!(matches!(err, PortError::Throttled { .. }), "{code}: {err:?}");
        assert!(err.is_retriable(), "{code}");
    }
}

#[tokio::test]
async fn server_errors_request_timeouts_and_no_answer_are_retriable() {
    for (status, code) in [(500, "InternalError"), (503, "ServiceUnavailable"), (400, "RequestTimeout"), (502, "New")] {
        let (store, _) = store(vec![error(status, code)]);
        let err = store.get(&tenant(), DIGEST).await.unwrap_err();
        assert!(matches!(err, PortError::Unavailable(_)), "{code}: {err:?}");
    }
    // No recorded answer left: the client fails to get a response, as on a dropped connection.
    let (silent, _) = store(vec![]);
    assert!(silent.get(&tenant(), DIGEST).await.unwrap_err().is_retriable());
}

#[tokio::test]
async fn a_missing_key_is_not_found_and_refused_credentials_are_permanent_with_their_cause() {
    let (store_404, _) = store(vec![error(404, "NoSuchKey")]);
    assert!(matches!(store_404.get(&tenant(), DIGEST).await, Err(PortError::NotFound)));
    for (status, code) in [(403, "AccessDenied"), (403, "InvalidAccessKeyId"), (404, "NoSuchBucket")] {
        let (store, _) = store(vec![error(status, code)]);
        let err = store.get(&tenant(), DIGEST).await.unwrap_err();
        assert!(matches!(err, PortError::Backend { retriable: false, .. }), "{code}: {err:?}");
        assert!(err.to_string().contains(&format!("recorded {code}")), "the cause is kept: {err}");
    }
    let (invalid, _) = store(vec![error(400, "InvalidArgument")]);
    let err = invalid.get(&tenant(), DIGEST).await.unwrap_err();
    assert!(matches!(err, PortError::Invalid { .. }) && !err.is_retriable(), "{err:?}");
}

#[tokio::test]
async fn the_sdk_error_is_the_source_of_the_port_error() {
    // What the SDK error says is both written into the message and kept as the error itself.
    type GetError = aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::get_object::GetObjectError>;
    let (denied, _) = store(vec![error(403, "AccessDenied")]);
    let err = denied.get(&tenant(), DIGEST).await.unwrap_err();
    let source = std::error::Error::source(&err).expect("a permanent backend error keeps its cause");
    let sdk = source.downcast_ref::<GetError>().expect("the cause is the SDK's error");
    assert_eq!(aws_sdk_s3::error::ProvideErrorMetadata::code(sdk), Some("AccessDenied"));

    let (down, _) = store(vec![error(500, "InternalError")]);
    let err = down.get(&tenant(), DIGEST).await.unwrap_err();
    assert!(matches!(err, PortError::Unavailable(_)), "{err:?}");
    let source = std::error::Error::source(&err).expect("an unavailable error keeps its cause");
    assert!(source.downcast_ref::<GetError>().is_some(), "{source:?}");
}

#[tokio::test]
async fn a_head_answer_without_a_body_is_classified_by_its_status() {
    let (absent, _) = store(vec![answer(404, "")]);
    assert_eq!(absent.stat(&tenant(), DIGEST).await.unwrap(), None, "404: no such object");
    let (forbidden, _) = store(vec![answer(403, "")]);
    let err = forbidden.stat(&tenant(), DIGEST).await.unwrap_err();
    assert!(matches!(err, PortError::Backend { retriable: false, .. }), "403: {err:?}");
    let (down, _) = store(vec![answer(503, "")]);
    assert!(down.stat(&tenant(), DIGEST).await.unwrap_err().is_retriable(), "503");
}

#[tokio::test]
async fn bytes_that_do_not_match_their_digest_are_a_permanent_error_never_served() {
    let (store, _) = store(vec![answer(200, "tampered")]);
    let err = store.get(&tenant(), DIGEST).await.unwrap_err();
    assert!(matches!(err, PortError::Corrupt { what: "stored object", .. }) && !err.is_retriable(), "{err:?}");
    assert!(err.to_string().contains("does not match its digest"), "{err}");
}

#[tokio::test]
async fn a_put_of_bytes_already_stored_sends_nothing_and_a_new_one_carries_its_checksum() {
    let (stored, replay) = store(vec![answer(200, "")]);
    let r = stored.put(&tenant(), Vec::new()).await.unwrap();
    assert_eq!(r.digest, DIGEST);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 1, "only the HEAD");
    assert_eq!(sent[0].method(), "HEAD");
    assert!(sent[0].uri().ends_with(&format!("/objects/acme/{DIGEST}")), "{}", sent[0].uri());

    let (fresh, replay) = store(vec![answer(404, ""), answer(200, "")]);
    fresh.put(&tenant(), Vec::new()).await.unwrap();
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent[1].method(), "PUT");
    assert_eq!(
        sent[1].headers().get("x-amz-checksum-sha256"),
        Some("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),
        "S3 checks the bytes against their SHA-256"
    );
}

#[tokio::test]
async fn usage_follows_every_page_of_both_prefixes() {
    let page = |sizes: &[u64], next: Option<&str>| {
        let contents: String = sizes
            .iter()
            .enumerate()
            .map(|(i, s)| format!("<Contents><Key>k{i}</Key><Size>{s}</Size></Contents>"))
            .collect();
        let more = match next {
            Some(token) => {
                format!("<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken>")
            }
            None => "<IsTruncated>false</IsTruncated>".into(),
        };
        answer(
            200,
            &format!(r#"<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>{more}{contents}</ListBucketResult>"#),
        )
    };
    let (store, replay) = store(vec![page(&[10, 20], Some("n")), page(&[30], None), page(&[5], None)]);
    assert_eq!(store.usage(&tenant()).await.unwrap(), 65);
    let uris: Vec<String> = replay.actual_requests().map(|r| r.uri().to_owned()).collect();
    assert!(uris[0].contains("prefix=objects%2Facme%2F"), "{uris:?}");
    assert!(uris[1].contains("continuation-token=n"), "{uris:?}");
    assert!(uris[2].contains("prefix=uploads%2Facme%2F"), "{uris:?}");
}

#[tokio::test]
async fn a_presigned_upload_signs_its_length_and_checksum_for_the_tenants_upload_key() {
    let (store, replay) = store(vec![]);
    let object = ObjectRef { digest: DIGEST.into(), bytes: 0 };
    let target = store.presign_upload(&tenant(), &object, Duration::from_secs(900)).await.unwrap();
    assert_eq!(replay.actual_requests().count(), 0, "presigning sends nothing");
    assert_eq!(target.method, "PUT");
    assert!(target.url.contains(&format!("/uploads/acme/{DIGEST}?")), "{}", target.url);
    assert!(target.url.contains("X-Amz-Expires=900"), "{}", target.url);
    assert_eq!(target.headers.get("content-length").map(String::as_str), Some("0"), "{:?}", target.headers);
    assert_eq!(
        target.headers.get("x-amz-checksum-sha256").map(String::as_str),
        Some("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
    );
    let signed = target.url.split("X-Amz-SignedHeaders=").nth(1).unwrap().split('&').next().unwrap();
    assert!(signed.contains("content-length") && signed.contains("x-amz-checksum-sha256"), "{signed}");
    for bad in [Duration::ZERO, MAX_UPLOAD_TTL + Duration::from_secs(1)] {
        assert!(matches!(store.presign_upload(&tenant(), &object, bad).await, Err(PortError::Invalid { .. })));
    }
    let huge = ObjectRef { digest: DIGEST.into(), bytes: openqq_core::ports::MAX_OBJECT_BYTES as u64 + 1 };
    assert!(matches!(
        store.presign_upload(&tenant(), &huge, Duration::from_secs(60)).await,
        Err(PortError::Invalid { .. })
    ));
}

#[tokio::test]
async fn adopting_copies_only_the_upload_that_was_checked_and_then_deletes_it() {
    let (store, replay) = store(vec![
        answer(200, ""),                                  // HEAD uploads/…
        answer_with(200, "", &[("etag", "\"checked\"")]), // GET uploads/… (no bytes, matching the empty digest)
        answer(200, r#"<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult><ETag>"e"</ETag></CopyObjectResult>"#),
        answer(204, ""), // DELETE uploads/…
    ]);
    let object = ObjectRef { digest: DIGEST.into(), bytes: 0 };
    store.adopt_upload(&tenant(), &object).await.unwrap();
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.iter().map(|r| r.method()).collect::<Vec<_>>(), ["HEAD", "GET", "PUT", "DELETE"]);
    assert_eq!(sent[2].headers().get("x-amz-copy-source"), Some(format!("openqq/uploads/acme/{DIGEST}").as_str()));
    assert!(sent[2].uri().contains(&format!("/objects/acme/{DIGEST}?")), "{}", sent[2].uri());
    assert_eq!(sent[2].headers().get("x-amz-copy-source-if-match"), Some("\"checked\""), "only what was read");
    assert!(sent[3].uri().contains(&format!("/uploads/acme/{DIGEST}?")), "{}", sent[3].uri());
}

#[test]
fn a_bucket_name_is_checked_before_any_request() {
    let config = aws_sdk_s3::Config::builder().behavior_version(BehaviorVersion::latest()).build();
    for bad in ["", "ab", "Has-Upper", "a_b", "a/b"] {
        let err = S3ObjectStore::new(Client::from_conf(config.clone()), bad).err().unwrap();
        assert!(err.to_string().contains("is not valid"), "{bad:?}: {err}");
    }
}

/// A client on `events` for the bucket-level calls, which take the client itself.
fn client(events: Vec<ReplayEvent>) -> (Client, StaticReplayClient) {
    let (store, replay) = store(events);
    (store.client, replay)
}

#[tokio::test]
async fn a_bucket_missing_on_aws_is_a_permanent_error_naming_it() {
    let (c, replay) = client(vec![answer(404, "")]);
    let err = bucket::require_bucket(&c, "openqq-objects").await.unwrap_err();
    assert!(matches!(err, PortError::Settings(_)), "the operator's to fix: {err:?}");
    assert!(err.to_string().contains("openqq-objects does not exist"), "{err}");
    assert_eq!(replay.actual_requests().count(), 1, "nothing is created: one HeadBucket");
    let (c, _) = client(vec![answer(403, "")]);
    let err = bucket::require_bucket(&c, "openqq-objects").await.unwrap_err();
    assert!(matches!(err, PortError::Backend { retriable: false, .. }), "{err:?}");
    assert!(err.to_string().contains("openqq-objects cannot be used"), "{err}");
}

#[tokio::test]
async fn a_bucket_created_outside_us_east_1_names_its_region_and_gets_the_upload_expiry_rule() {
    let (c, replay) = client(vec![answer(404, ""), answer(200, ""), answer(200, "")]);
    assert!(bucket::create_bucket_if_missing(&c, "openqq").await.unwrap());
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.iter().map(|r| r.method()).collect::<Vec<_>>(), ["HEAD", "PUT", "PUT"]);
    let body = |i: usize| String::from_utf8(sent[i].body().bytes().unwrap().to_vec()).unwrap();
    assert!(body(1).contains("<LocationConstraint>eu-west-1</LocationConstraint>"), "{}", body(1));
    assert!(sent[2].uri().contains("lifecycle"), "{}", sent[2].uri());
    let rule = body(2);
    for part in ["<ID>expire-unadopted-uploads</ID>", "<Prefix>uploads/</Prefix>", "<Days>1</Days>", "Enabled"] {
        assert!(rule.contains(part), "{part} in {rule}");
    }
    let (existing, replay) = client(vec![answer(200, "")]);
    assert!(!bucket::create_bucket_if_missing(&existing, "openqq").await.unwrap());
    assert_eq!(replay.actual_requests().count(), 1, "an existing bucket is left as it is");
}
