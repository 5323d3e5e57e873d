//! Uploads: payloads too large to send inline (a netlist over the request-body limit), up to
//! [`MAX_UPLOAD_BYTES`], in three steps:
//!
//! 1. `POST /v1/uploads` with `{"sha256": "…", "bytes": n}` ([`begin`]) answers where to upload:
//!    the object store's own direct upload when it offers one (a presigned S3 `PUT`), otherwise
//!    `PUT /v1/uploads/{digest}?token=…` on this API. The token is signed like a presigned URL
//!    ([`JwtKeys::issue_upload`](crate::auth::JwtKeys::issue_upload)): it names the tenant, the
//!    digest and the length, expires after [`UPLOAD_TTL`], and is the only credential the `PUT`
//!    needs.
//! 2. The client sends exactly those bytes there ([`receive`]).
//! 3. A submission names the object as `netlist_ref` (or `bitstream_ref`), `{"digest", "bytes"}`;
//!    the API adopts it for the tenant ([`ObjectStore::adopt_upload`]) before publishing.
//!
//! The `PUT` served here is outside the JSON request path: no bearer token, no request-body limit
//! and no byte quota meant for JSON. Its own bounds instead: the body may not exceed the declared
//! length (413 as soon as it does), must arrive within the body timeout plus the time the
//! declared length takes at [`MIN_UPLOAD_BYTES_PER_SEC`] (408 after), and must hash to the
//! declared digest (400, nothing stored). It counts among the tenant's requests in progress and
//! against its request quota, and the tenant's storage quota must have room for it (403). Bodies
//! are buffered whole (the object store takes whole objects), so the bytes buffered across all
//! uploads in progress are capped at [`UPLOAD_MEMORY_BYTES`] (503 with `Retry-After` past it).

use crate::body::{self, BodyError};
use crate::problem::Problem;
use crate::AppState;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use openqq_core::ports::MAX_OBJECT_BYTES;
use openqq_core::{ObjectRef, TenantId, UploadTarget};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Largest upload, in bytes: the object store's limit, 64 MiB.
pub const MAX_UPLOAD_BYTES: u64 = MAX_OBJECT_BYTES as u64;
/// How long an upload URL (token or presigned) stays valid.
pub const UPLOAD_TTL: Duration = Duration::from_secs(15 * 60);
/// The slowest average rate an upload may arrive at, after the body timeout's head start: a
/// 64 MiB upload has about 4½ minutes more than the body timeout.
pub const MIN_UPLOAD_BYTES_PER_SEC: u64 = 256 * 1024;
/// Bytes buffered at once across every upload in progress on this instance.
pub const UPLOAD_MEMORY_BYTES: u64 = 512 * 1024 * 1024;
/// Counter of uploads received by this API, by `outcome` (`stored`, `refused`).
pub const UPLOADS_METRIC: &str = "openqq_uploads_total";

/// `POST /v1/uploads`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadRequest {
    /// SHA-256 of the bytes to upload, lower-case hex.
    pub sha256: String,
    /// Their exact length (a whole number however JSON writes it, as for revisions).
    #[serde(deserialize_with = "crate::designs::whole")]
    pub bytes: u64,
}

/// The answer to `POST /v1/uploads`.
#[derive(Debug, Serialize)]
pub struct UploadAnswer {
    /// What a submission names as `netlist_ref` once uploaded.
    pub object: ObjectRef,
    /// Whether the tenant has this object already (the upload may be skipped).
    pub present: bool,
    /// Where and how to send the bytes.
    pub upload: UploadTarget,
}

/// Checks an upload request; the problem names what is wrong.
pub fn requested(req: &UploadRequest) -> Result<ObjectRef, Problem> {
    let sha256 = req.sha256.to_ascii_lowercase();
    if !ObjectRef::well_formed(&sha256) {
        return Err(Problem::invalid_field("sha256", "must be a SHA-256 in hex (64 characters)"));
    }
    if req.bytes == 0 {
        return Err(Problem::invalid_field("bytes", "must be at least 1"));
    }
    if req.bytes > MAX_UPLOAD_BYTES {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "The upload is too large",
            format!("uploads are limited to {MAX_UPLOAD_BYTES} bytes (64 MiB); this one declares {}", req.bytes),
        )
        .with_field("bytes"));
    }
    Ok(ObjectRef { digest: sha256, bytes: req.bytes })
}

pub async fn begin(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    headers: HeaderMap,
    crate::body::JsonBody(req): crate::body::JsonBody<UploadRequest>,
) -> Result<Response, Problem> {
    let object = requested(&req)?;
    let present = state
        .objects
        .stat(&tenant, &object.digest)
        .await
        .map_err(|e| Problem::from_port(e, "looking the object up"))?
        == Some(object.bytes);
    if !present {
        state.quota.check_adding(state.reads.as_ref(), state.objects.as_ref(), &tenant, object.bytes).await?;
    }
    let upload = match &state.presigned {
        Some(presigned) => presigned
            .presign_upload(&tenant, &object, UPLOAD_TTL)
            .await
            .map_err(|e| Problem::from_port(e, "preparing the upload"))?,
        None => {
            let (token, expires_at) = state.keys.issue_upload(&tenant, &object, UPLOAD_TTL);
            UploadTarget {
                method: "PUT".into(),
                url: format!("{}/v1/uploads/{}?token={token}", origin(&headers), object.digest),
                headers: [("content-type".to_owned(), "application/octet-stream".to_owned())].into(),
                expires_at,
            }
        }
    };
    tracing::info!(tenant_id = %tenant, digest = %object.digest, bytes = object.bytes, present, "An upload was granted.");
    Ok(Json(UploadAnswer { object, present, upload }).into_response())
}

/// `scheme://host` of this API as the client reached it, from `Host` (and
/// `X-Forwarded-Proto` behind a proxy); empty, so the URL is relative, without a usable `Host`.
fn origin(headers: &HeaderMap) -> String {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let host_ok = !host.is_empty()
        && host.len() <= 255
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if !host_ok {
        return String::new();
    }
    let https = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p == "https");
    format!("{}://{host}", if https { "https" } else { "http" })
}

#[derive(Debug, Deserialize)]
pub struct TokenQuery {
    pub token: Option<String>,
}

/// The detail of every refused upload token: nothing tells which check failed.
pub const UPLOAD_TOKEN_DETAIL: &str =
    "this upload needs the URL POST /v1/uploads answered, unchanged and unexpired (valid for 15 minutes, for exactly \
     that object); ask for a new one";

fn not_authorized() -> Problem {
    Problem::new(StatusCode::FORBIDDEN, "upload-not-authorized", "The upload is not authorized", UPLOAD_TOKEN_DETAIL)
}

fn mismatch(detail: String) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "upload-mismatch", "The upload does not match what was declared", detail)
}

/// The buffer budget shared by every upload in progress, in KiB permits.
fn memory() -> Arc<Semaphore> {
    static MEMORY: OnceLock<Arc<Semaphore>> = OnceLock::new();
    MEMORY.get_or_init(|| Arc::new(Semaphore::new((UPLOAD_MEMORY_BYTES / 1024) as usize))).clone()
}

/// Answers `problem`, letting a client still sending read it (see [`body::drain`]).
async fn refuse(rest: Body, problem: Problem) -> Response {
    metrics::counter!(UPLOADS_METRIC, "outcome" => "refused").increment(1);
    body::drain(rest, body::DRAIN_BYTES).await;
    problem.into_response()
}

/// `PUT /v1/uploads/{digest}?token=…`: the bytes of a granted upload.
pub async fn receive(
    State(state): State<AppState>,
    Path(digest): Path<String>,
    query: Result<Query<TokenQuery>, axum::extract::rejection::QueryRejection>,
    req: Request,
) -> Response {
    let (parts, rest) = req.into_parts();
    let grant = query.ok().and_then(|Query(q)| q.token).map(|t| state.keys.verify_upload(&t));
    let grant = match grant {
        Some(Ok(grant)) if grant.object.digest == digest => grant,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "An upload token was refused.");
            return refuse(rest, not_authorized()).await;
        }
        _ => return refuse(rest, not_authorized()).await,
    };
    let (tenant, object) = (grant.tenant, grant.object);
    tracing::Span::current().record("tenant_id", tenant.as_str());
    // From here on the request metrics count the upload under its tenant ([`crate::observe`]).
    let _slot = match state.tenants.begin(&tenant) {
        Ok(slot) => slot,
        Err(p) => return with_tenant(refuse(rest, p).await, &tenant),
    };
    let decision = match crate::limit::check(&state, &tenant).await {
        Ok(d) => d,
        Err(p) => return with_tenant(refuse(rest, p).await, &tenant),
    };
    let mut resp = match store(&state, &tenant, &object, &parts.headers, rest).await {
        Ok(stored) => {
            metrics::counter!(UPLOADS_METRIC, "outcome" => "stored").increment(1);
            tracing::info!(tenant_id = %tenant, digest = %stored.digest, bytes = stored.bytes, "An upload was stored.");
            (StatusCode::CREATED, Json(stored)).into_response()
        }
        Err(resp) => resp,
    };
    crate::limit::add_headers(resp.headers_mut(), &decision);
    with_tenant(resp, &tenant)
}

/// Marks `resp` as `tenant`'s, for the request metrics.
fn with_tenant(mut resp: Response, tenant: &TenantId) -> Response {
    resp.extensions_mut().insert(tenant.clone());
    resp
}

/// Checks the quota, reads the body within its bounds, checks it against `object` and stores it.
async fn store(
    state: &AppState,
    tenant: &TenantId,
    object: &ObjectRef,
    headers: &HeaderMap,
    rest: Body,
) -> Result<ObjectRef, Response> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > object.bytes) {
        return Err(refuse(rest, too_many_bytes(object)).await);
    }
    let present = match state.objects.stat(tenant, &object.digest).await {
        Ok(found) => found == Some(object.bytes),
        Err(e) => return Err(refuse(rest, Problem::from_port(e, "looking the object up")).await),
    };
    // Reserved before any byte is accepted, so parallel uploads admit only what fits the quota.
    let reservation = match present {
        true => None,
        false => match state.quota.reserve(state.reads.as_ref(), state.objects.as_ref(), tenant, object.bytes).await {
            Ok(reservation) => Some(reservation),
            Err(p) => return Err(refuse(rest, p).await),
        },
    };
    let permits = u32::try_from(object.bytes.div_ceil(1024)).unwrap_or(u32::MAX);
    let Ok(_memory) = memory().try_acquire_many_owned(permits) else {
        let p = Problem::unavailable("too many uploads are in progress on this server; retry shortly");
        return Err(refuse(rest, p).await);
    };
    let within = state.tenants.limits.body_timeout + Duration::from_secs(object.bytes / MIN_UPLOAD_BYTES_PER_SEC);
    let bytes = match read_exactly(rest, object, within).await {
        Ok(bytes) => bytes,
        Err((problem, rest)) => return Err(refuse(rest, problem).await),
    };
    let stored = state
        .objects
        .put_upload(tenant, bytes)
        .await
        .map_err(|e| Problem::from_port(e, "storing the upload").into_response())?;
    if let Some(reservation) = reservation {
        reservation.stored();
    }
    state.quota.forget(tenant);
    if stored != *object {
        // The store hashes what it keeps; the check above makes this unreachable.
        tracing::error!(expected = %object.digest, stored = %stored.digest, "An upload was stored under another digest.");
        return Err(mismatch("the stored object does not match the declared one".into()).into_response());
    }
    Ok(stored)
}

fn too_many_bytes(object: &ObjectRef) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload-too-large",
        "The upload is larger than declared",
        format!("this upload was declared as {} bytes; send exactly those bytes", object.bytes),
    )
}

/// Reads the body, hashing as it arrives: at most `object.bytes` (413 past them), within `within`
/// (408), then exactly that length and digest (400). On failure the rest of the body comes back
/// for draining.
async fn read_exactly(mut rest: Body, object: &ObjectRef, within: Duration) -> Result<Vec<u8>, (Problem, Body)> {
    use http_body_util::BodyExt;
    let mut hasher = Sha256::new();
    let mut out = Vec::new();
    let read = tokio::time::timeout(within, async {
        while let Some(frame) = rest.frame().await {
            let frame = frame.map_err(|e| Problem::from(BodyError::Broken(e)))?;
            let Ok(data) = frame.into_data() else { continue };
            if (out.len() + data.len()) as u64 > object.bytes {
                return Err(too_many_bytes(object));
            }
            hasher.update(&data);
            out.extend_from_slice(&data);
        }
        Ok(())
    })
    .await;
    match read {
        Ok(Ok(())) => {}
        Ok(Err(p)) => return Err((p, rest)),
        Err(_) => return Err((BodyError::TimedOut { after: within }.into(), rest)),
    }
    if out.len() as u64 != object.bytes {
        let detail = format!(
            "the body has {} bytes; the upload was declared as {}; nothing was stored",
            out.len(),
            object.bytes
        );
        return Err((mismatch(detail), rest));
    }
    let got: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if got != object.digest {
        let detail = format!("the body's SHA-256 is {got}, not the declared {}; nothing was stored", object.digest);
        return Err((mismatch(detail), rest));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sha256: &str, bytes: u64) -> UploadRequest {
        UploadRequest { sha256: sha256.into(), bytes }
    }

    #[test]
    fn an_upload_length_is_a_whole_number_however_json_writes_it() {
        let parsed: UploadRequest = serde_json::from_str(r#"{"sha256": "ab", "bytes": 188.0}"#).unwrap();
        assert_eq!(parsed.bytes, 188);
        for bad in ["1.5", "-1", "null"] {
            let body = format!(r#"{{"sha256": "ab", "bytes": {bad}}}"#);
            assert!(serde_json::from_str::<UploadRequest>(&body).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_upload_request_is_a_hex_digest_and_a_length_up_to_64_mib() {
        let digest = "ab".repeat(32);
        assert_eq!(requested(&request(&digest, 1)).unwrap(), ObjectRef { digest: digest.clone(), bytes: 1 });
        let upper = requested(&request(&digest.to_uppercase(), MAX_UPLOAD_BYTES)).unwrap();
        assert_eq!(upper.digest, digest, "upper-case hex is the same digest");
        let too_big = requested(&request(&digest, MAX_UPLOAD_BYTES + 1)).unwrap_err();
        assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(requested(&request(&digest, 0)).unwrap_err().field.as_deref(), Some("bytes"));
        assert_eq!(requested(&request("abc", 10)).unwrap_err().field.as_deref(), Some("sha256"));
    }

    #[tokio::test]
    async fn a_body_is_read_only_up_to_its_declared_length_and_must_hash_to_its_digest() {
        let data = b"hello netlist".to_vec();
        let digest: String = Sha256::digest(&data).iter().map(|b| format!("{b:02x}")).collect();
        let object = ObjectRef { digest: digest.clone(), bytes: data.len() as u64 };
        let t = Duration::from_secs(5);
        assert_eq!(read_exactly(Body::from(data.clone()), &object, t).await.unwrap(), data);
        let mut longer = data.clone();
        longer.push(b'!');
        let (p, _) = read_exactly(Body::from(longer), &object, t).await.unwrap_err();
        assert_eq!(p.status, StatusCode::PAYLOAD_TOO_LARGE);
        let (p, _) = read_exactly(Body::from(data[1..].to_vec()), &object, t).await.unwrap_err();
        assert_eq!((p.status, p.slug), (StatusCode::BAD_REQUEST, "upload-mismatch"));
        let mut other = data.clone();
        other[0] = b'H';
        let (p, _) = read_exactly(Body::from(other), &object, t).await.unwrap_err();
        assert!(p.detail.contains("SHA-256"), "{}", p.detail);
    }

    #[test]
    fn the_upload_url_uses_the_host_the_client_reached_and_nothing_unsafe_from_it() {
        let mut h = HeaderMap::new();
        assert_eq!(origin(&h), "");
        h.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(origin(&h), "http://127.0.0.1:8080");
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        assert_eq!(origin(&h), "https://127.0.0.1:8080");
        h.insert(header::HOST, "evil.example/path?x".parse().unwrap());
        assert_eq!(origin(&h), "");
    }
}
