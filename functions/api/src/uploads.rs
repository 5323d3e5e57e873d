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
//!    the API adopts it for the tenant ([`ObjectStore::adopt_upload`]) before publishing. A batch
//!    names its JSON-lines items as `items_ref`: those are read without adopting
//!    ([`ObjectStore::read_upload`]), kept with the batch, and the upload expires.
//!
//! The `PUT` served here is outside the JSON request path: no bearer token, no request-body limit
//! and no byte quota meant for JSON. Its own bounds instead ([`UploadLimits`]): the body may not
//! exceed the declared length (413 as soon as it does); its first byte must come within
//! [`UploadLimits::first_byte`] and the rest at [`UploadLimits::min_rate`] at least, measured from
//! that first byte ([`read`]; 408 `upload-too-slow` behind it); and it must hash to the declared
//! digest (400, nothing stored). It counts among the tenant's requests in progress and against
//! its request quota, and the tenant's storage quota must have room for it (403). Bodies are
//! buffered whole (the object store takes whole objects) in memory taken as the bytes arrive,
//! within a budget shared fairly between tenants ([`memory`]: a tenant's uploads in progress may
//! declare a quarter of it, 429 past that; 503 while the budget is spent).

pub mod memory;
pub mod read;

use crate::body;
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
use std::time::Duration;

/// Largest upload, in bytes: the object store's limit, 64 MiB.
pub const MAX_UPLOAD_BYTES: u64 = MAX_OBJECT_BYTES as u64;
/// How long an upload URL (token or presigned) stays valid.
pub const UPLOAD_TTL: Duration = Duration::from_secs(15 * 60);
/// Counter of uploads received by this API, by `outcome` (`stored`, `refused`).
pub const UPLOADS_METRIC: &str = "openqq_uploads_total";

/// The bounds of the upload `PUT`; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// Bytes buffered at once across every upload in progress on this instance; each tenant's
    /// uploads may declare a quarter of it ([`UploadLimits::tenant_share`]).
    pub memory: u64,
    /// The slowest an upload may arrive, in bytes a second, measured from its first byte.
    pub min_rate: u64,
    /// How long an upload's first byte may take from the request.
    pub first_byte: Duration,
    /// How far behind [`min_rate`](Self::min_rate) an upload may fall from its first byte: a
    /// start for slow networks' first round trips ([`DEFAULT_UPLOAD_RATE_ALLOWANCE`]; not a
    /// setting).
    pub rate_allowance: Duration,
    /// How long a piece of a body waits for memory while the budget is spent, before the upload
    /// is refused with 503 ([`DEFAULT_UPLOAD_MEMORY_WAIT`]; not a setting).
    pub memory_wait: Duration,
}

/// Default upload memory: 512 MiB, eight of the largest uploads; a tenant's share is 128 MiB.
pub const DEFAULT_UPLOAD_MEMORY: u64 = 512 << 20;
/// Default minimum rate: 256 KiB a second (a 64 MiB upload in at most about 4½ minutes).
pub const DEFAULT_UPLOAD_MIN_RATE: u64 = 256 << 10;
/// Default wait for an upload's first byte.
pub const DEFAULT_UPLOAD_FIRST_BYTE: Duration = Duration::from_secs(10);
/// How far behind the minimum rate an upload may fall from its first byte.
pub const DEFAULT_UPLOAD_RATE_ALLOWANCE: Duration = Duration::from_secs(5);
/// How long a piece of a body waits for memory while the budget is spent.
pub const DEFAULT_UPLOAD_MEMORY_WAIT: Duration = Duration::from_secs(10);

impl Default for UploadLimits {
    fn default() -> Self {
        Self {
            memory: DEFAULT_UPLOAD_MEMORY,
            min_rate: DEFAULT_UPLOAD_MIN_RATE,
            first_byte: DEFAULT_UPLOAD_FIRST_BYTE,
            rate_allowance: DEFAULT_UPLOAD_RATE_ALLOWANCE,
            memory_wait: DEFAULT_UPLOAD_MEMORY_WAIT,
        }
    }
}

impl UploadLimits {
    /// What the uploads of one tenant in progress may declare together: a quarter of the memory,
    /// so no tenant holds more than that and filling the memory takes four tenants at least.
    pub fn tenant_share(&self) -> u64 {
        self.memory / 4
    }

    /// Checks the limits; the error is a sentence naming the setting (flag and variable).
    pub fn check(&self) -> Result<(), UploadLimitsError> {
        if self.tenant_share() < MAX_UPLOAD_BYTES {
            return Err(UploadLimitsError::MemoryBelowUpload { memory: self.memory });
        }
        if self.min_rate == 0 {
            return Err(UploadLimitsError::NoRate);
        }
        if self.first_byte.is_zero() {
            return Err(UploadLimitsError::NoFirstByte);
        }
        Ok(())
    }
}

/// Why [`UploadLimits`] were refused; each names the setting (flag and environment variable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadLimitsError {
    #[error(
        "--upload-memory (OPENQQ_UPLOAD_MEMORY) is {memory} bytes; a tenant's share, a quarter of it, must hold one \
         upload of the largest size (64 MiB), so it must be at least 256MiB"
    )]
    MemoryBelowUpload { memory: u64 },
    #[error("--upload-min-rate (OPENQQ_UPLOAD_MIN_RATE) must be at least 1 byte a second")]
    NoRate,
    #[error("--upload-first-byte-timeout (OPENQQ_UPLOAD_FIRST_BYTE_TIMEOUT) must be longer than 0 s")]
    NoFirstByte,
}

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
        return Err(refuse(rest, read::too_many_bytes(object)).await);
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
    // A place within the tenant's share now; memory only as the bytes arrive.
    let mut admission = match state.uploads.admit(tenant, object.bytes) {
        Ok(admission) => admission,
        Err(p) => return Err(refuse(rest, p).await),
    };
    let limits = state.uploads.limits;
    let bytes = match read::read_exactly(rest, object, &limits, &mut admission).await {
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
        return Err(read::mismatch("the stored object does not match the declared one".into()).into_response());
    }
    Ok(stored)
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
