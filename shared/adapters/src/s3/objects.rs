//! The object-store operations on S3. Every read checks the SHA-256 of what came back; every
//! write tells S3 the SHA-256 of what it sends (`x-amz-checksum-sha256`), so S3 refuses bytes
//! damaged on the way.

use super::error::{classify, error_chain};
use super::keys::{checksum_of, key, tenant_prefix, OBJECTS, UPLOADS};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use openqq_core::ports::{PortResult, UploadTarget, MAX_OBJECT_BYTES};
use openqq_core::{Failure, ObjectRef, PortError, TenantId};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// The longest a presigned URL can be valid for (SigV4's limit).
pub const MAX_UPLOAD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The length of `key`, or `None` when there is no such key.
pub(crate) async fn head(client: &Client, bucket: &str, key: &str) -> PortResult<Option<u64>> {
    match client.head_object().bucket(bucket).key(key).send().await {
        Ok(out) => Ok(Some(out.content_length().unwrap_or(0).max(0) as u64)),
        Err(e) => match classify("head", e) {
            PortError::NotFound => Ok(None),
            other => Err(other),
        },
    }
}

/// Stores `bytes` as one of `tenant`'s objects, or (`area` [`UPLOADS`]) as an upload, which the
/// bucket's lifecycle rule expires unless it is adopted.
pub(crate) async fn put(
    client: &Client,
    bucket: &str,
    area: &str,
    tenant: &TenantId,
    bytes: Vec<u8>,
) -> PortResult<ObjectRef> {
    ObjectRef::check_size(bytes.len() as u64)?;
    // Hashing tens of megabytes would hold up the other tasks of this thread.
    let (digest, bytes) = tokio::task::spawn_blocking(move || (hex(&Sha256::digest(&bytes)), bytes))
        .await
        .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))?;
    let object = ObjectRef { digest, bytes: bytes.len() as u64 };
    let key = key(area, tenant, &object.digest);
    // Content-addressed: a key that is there holds these bytes already (reads check that). An
    // upload is written again, so that it expires counting from this one.
    if area == OBJECTS && head(client, bucket, &key).await?.is_some() {
        return Ok(object);
    }
    client
        .put_object()
        .bucket(bucket)
        .key(&key)
        .content_type("application/octet-stream")
        .checksum_sha256(checksum_of(&object.digest))
        .body(ByteStream::from(bytes))
        .send()
        .await
        .map_err(|e| classify("put", e))?;
    Ok(object)
}

/// What [`read`] found: the bytes (when kept), their lower-case hex SHA-256 and the ETag they
/// were read at.
struct Read {
    bytes: Vec<u8>,
    sha256: String,
    etag: Option<String>,
}

/// Reads `key` whole, refusing more than `limit` bytes with `over_limit`'s error. The bytes are
/// hashed as they arrive and kept only if `keep` (an adoption needs just their digest).
async fn read(
    client: &Client,
    bucket: &str,
    key: &str,
    limit: u64,
    over_limit: fn(String) -> PortError,
    keep: bool,
) -> PortResult<Read> {
    let out = client.get_object().bucket(bucket).key(key).send().await.map_err(|e| classify("get", e))?;
    let declared = out.content_length().unwrap_or(0).max(0) as u64;
    if declared > limit {
        return Err(over_limit(format!("{key} is {declared} bytes, more than the {limit} expected")));
    }
    let etag = out.e_tag().map(str::to_owned);
    let mut body = out.body;
    let mut bytes = Vec::with_capacity(if keep { declared as usize } else { 0 });
    let (mut hasher, mut seen) = (Sha256::new(), 0u64);
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| PortError::unavailable(format!("S3 get of {key} broke off: {}", error_chain(&e)), e))?;
        seen += chunk.len() as u64;
        if seen > limit {
            return Err(over_limit(format!("{key} holds more than the {limit} bytes expected")));
        }
        hasher.update(&chunk);
        if keep {
            bytes.extend_from_slice(&chunk);
        }
    }
    Ok(Read { bytes, sha256: hex(&hasher.finalize()), etag })
}

pub(crate) async fn get(client: &Client, bucket: &str, tenant: &TenantId, digest: &str) -> PortResult<Vec<u8>> {
    ObjectRef::check_digest(digest)?;
    let key = key(OBJECTS, tenant, digest);
    // Nothing this store wrote is that large: a stored object that is, is damaged.
    let damaged = |message| PortError::corrupt("stored object", message);
    let Read { bytes, sha256: actual, .. } = read(client, bucket, &key, MAX_OBJECT_BYTES as u64, damaged, true).await?;
    if actual != digest {
        return Err(PortError::corrupt(
            "stored object",
            format!("s3://{bucket}/{key} does not match its digest (it hashes to {actual})"),
        ));
    }
    Ok(bytes)
}

pub(crate) async fn usage(client: &Client, bucket: &str, tenant: &TenantId) -> PortResult<u64> {
    let mut total = 0u64;
    // Uploads not yet adopted take space too, until they are adopted or expire.
    for area in [OBJECTS, UPLOADS] {
        let mut pages =
            client.list_objects_v2().bucket(bucket).prefix(tenant_prefix(area, tenant)).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify("list", e))?;
            total += page.contents().iter().map(|o| o.size().unwrap_or(0).max(0) as u64).sum::<u64>();
        }
    }
    Ok(total)
}

pub(crate) async fn stat(client: &Client, bucket: &str, tenant: &TenantId, digest: &str) -> PortResult<Option<u64>> {
    ObjectRef::check_digest(digest)?;
    head(client, bucket, &key(OBJECTS, tenant, digest)).await
}

/// Deletes `objects/{tenant}/{digest}`. S3's delete answers alike whether or not the key
/// existed, so the object is looked up first: `false` when there was none.
pub(crate) async fn delete(client: &Client, bucket: &str, tenant: &TenantId, digest: &str) -> PortResult<bool> {
    ObjectRef::check_digest(digest)?;
    let key = key(OBJECTS, tenant, digest);
    if head(client, bucket, &key).await?.is_none() {
        return Ok(false);
    }
    client.delete_object().bucket(bucket).key(&key).send().await.map_err(|e| classify("delete object", e))?;
    Ok(true)
}

/// A presigned `PUT` of exactly `object` to `uploads/{tenant}/{digest}`: its length and its
/// SHA-256 are signed headers, so S3 refuses any other bytes.
pub(crate) async fn presign_upload(
    client: &Client,
    bucket: &str,
    tenant: &TenantId,
    object: &ObjectRef,
    ttl: Duration,
) -> PortResult<UploadTarget> {
    ObjectRef::check_digest(&object.digest)?;
    ObjectRef::check_size(object.bytes)?;
    let invalid_ttl = || {
        let days = MAX_UPLOAD_TTL.as_secs() / 86_400;
        format!("an upload URL is valid for between 1 second and {days} days, not {ttl:?}")
    };
    if ttl.is_zero() || ttl > MAX_UPLOAD_TTL {
        return Err(PortError::invalid("upload URL validity", invalid_ttl()));
    }
    let config = PresigningConfig::expires_in(ttl)
        .map_err(|e| PortError::invalid("upload URL validity", Failure::new(invalid_ttl(), e)))?;
    let presigned = client
        .put_object()
        .bucket(bucket)
        .key(key(UPLOADS, tenant, &object.digest))
        .content_length(object.bytes as i64)
        .checksum_sha256(checksum_of(&object.digest))
        .presigned(config)
        .await
        .map_err(|e| classify("presign upload", e))?;
    let expires_at = chrono::Utc::now()
        + chrono::Duration::from_std(ttl)
            .map_err(|e| PortError::invalid("upload URL validity", Failure::new(invalid_ttl(), e)))?;
    Ok(UploadTarget {
        method: presigned.method().to_owned(),
        url: presigned.uri().to_owned(),
        headers: presigned.headers().map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned())).collect(),
        expires_at,
    })
}

/// The `x-amz-copy-source` of `key` in `bucket`: the key URL-encoded, `/` kept.
fn copy_source(bucket: &str, key: &str) -> String {
    let mut out = format!("{bucket}/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An upload's bytes, checked and left an upload; the tenant's object of that digest instead if
/// there is no such upload ([`openqq_core::ObjectStore::read_upload`]).
pub(crate) async fn read_upload(
    client: &Client,
    bucket: &str,
    tenant: &TenantId,
    object: &ObjectRef,
) -> PortResult<Vec<u8>> {
    ObjectRef::check_digest(&object.digest)?;
    ObjectRef::check_size(object.bytes)?;
    let upload = key(UPLOADS, tenant, &object.digest);
    match read(client, bucket, &upload, object.bytes, |m| PortError::invalid("upload", m), true).await {
        Ok(Read { bytes, sha256, .. }) if bytes.len() as u64 == object.bytes && sha256 == object.digest => Ok(bytes),
        Ok(_) => Err(PortError::invalid("upload", "its bytes do not match its digest and length")),
        Err(PortError::NotFound) => {
            let bytes = get(client, bucket, tenant, &object.digest).await?;
            object.check_length(bytes.len() as u64)?;
            Ok(bytes)
        }
        Err(e) => Err(e),
    }
}

pub(crate) async fn adopt_upload(
    client: &Client,
    bucket: &str,
    tenant: &TenantId,
    object: &ObjectRef,
) -> PortResult<()> {
    ObjectRef::check_digest(&object.digest)?;
    ObjectRef::check_size(object.bytes)?;
    let upload = key(UPLOADS, tenant, &object.digest);
    let stored = key(OBJECTS, tenant, &object.digest);
    match head(client, bucket, &upload).await? {
        // Adopted before (a retried call), or never uploaded.
        None => {
            return match head(client, bucket, &stored).await? {
                Some(n) => object.check_length(n),
                None => Err(PortError::NotFound),
            }
        }
        Some(n) if n != object.bytes => {
            discard(client, bucket, &upload).await;
            return object.check_length(n);
        }
        Some(_) => {}
    }
    // Read back and hashed here rather than trusting a stored checksum: the bytes are what
    // every later read is checked against, and a server may keep a checksum it never verified.
    let Read { sha256: actual, etag, .. } =
        match read(client, bucket, &upload, object.bytes, |m| PortError::invalid("upload", m), false).await {
            Err(e @ PortError::Invalid { .. }) => {
                discard(client, bucket, &upload).await;
                return Err(e);
            }
            other => other?,
        };
    if actual != object.digest {
        discard(client, bucket, &upload).await;
        return Err(PortError::invalid("upload", format!("its bytes hash to {actual}, not {}", object.digest)));
    }
    // Copied only if the upload is still what was just checked (the URL may still be valid).
    let mut copy = client.copy_object().bucket(bucket).key(&stored).copy_source(copy_source(bucket, &upload));
    if let Some(etag) = etag {
        copy = copy.copy_source_if_match(etag);
    }
    copy.send().await.map_err(|e| match classify("adopt", e) {
        lost @ PortError::ConditionFailed { .. } => PortError::condition_failed(
            "upload",
            Failure::new("the upload changed while it was adopted; adopt it again", lost),
        ),
        other => other,
    })?;
    discard(client, bucket, &upload).await;
    Ok(())
}

/// Deletes an upload that was adopted or refused. A failure only leaves it for the bucket's
/// lifecycle rule to expire, so it is logged, not returned.
async fn discard(client: &Client, bucket: &str, key: &str) {
    if let Err(e) = client.delete_object().bucket(bucket).key(key).send().await {
        let error = classify("delete", e);
        tracing::warn!(bucket, key, %error, "An upload could not be deleted; the bucket's lifecycle rule will expire it.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_source_encodes_everything_but_unreserved_characters_and_slashes() {
        assert_eq!(copy_source("b", "uploads/%2E%2E:x/ab"), "b/uploads/%252E%252E%3Ax/ab");
    }
}
