//! `Idempotency-Key` on every POST (draft-ietf-httpapi-idempotency-key-header): a retried
//! request with the same key gets the first answer again, for the window
//! (`--idempotency-window`, [`DEFAULT_WINDOW`]), without publishing again. The store keeps a key
//! that long, then removes it.
//!
//! - A key is 1 to 255 visible ASCII characters, as a bare token or a quoted string
//!   (`Idempotency-Key: "…"`); anything else is 400 `invalid-idempotency-key`.
//! - Keys are scoped to the tenant. The request's fingerprint is the SHA-256 of its path and
//!   body; the same key with another fingerprint is 422 `idempotency-key-reused`.
//! - While the first request is being handled, a retry is 409 `idempotency-conflict` with
//!   `Retry-After`.
//! - Only successful answers are kept; an error releases the key, so a retry is handled anew.
//! - A request that creates something the server names (a new design, a batch) names it when it
//!   first claims its key ([`once_naming`]): a retry handled again, after the first handling
//!   was cut off (the process killed after the record was durable, or an error after it), gives
//!   it the same name, so it publishes the same revision again (a no-op downstream) instead of
//!   creating a second design or batch.

use crate::problem::Problem;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use openqq_core::{IdempotencyClaim, IdempotencyKey, IdempotencyKeys, KeptResponse, KeyClaim, TenantId};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// Set (`true`) on an answer replayed for a key.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// How long a successful answer is replayed for its key, unless set otherwise.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The store's idempotency keys and how long each answer is kept for its key.
#[derive(Clone)]
pub struct Idempotency {
    pub keys: Arc<dyn IdempotencyKeys>,
    pub window: Duration,
}
/// How long a key stays claimed by a request that has not finished: past this, its handler is
/// taken to have crashed and a retry is handled anew. Longer than any submission takes.
pub const KEY_LEASE: Duration = Duration::from_secs(60);

/// The request's key, if it sent one.
pub fn key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    let mut values = headers.get_all(HEADER).iter();
    let Some(value) = values.next() else { return Ok(None) };
    let invalid = || {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-idempotency-key",
            "The Idempotency-Key header is invalid",
            format!("send one {HEADER} of 1 to {} visible ASCII characters", IdempotencyKey::MAX_LEN),
        )
    };
    if values.next().is_some() {
        return Err(invalid());
    }
    let text = value.to_str().map_err(|_| invalid())?;
    let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
    IdempotencyKey::parse(text).map(Some).map_err(|_| invalid())
}

/// SHA-256 of the request's path and its body as sent.
pub fn fingerprint(path: &str, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(body);
    h.finalize().into()
}

/// Runs `handle` at most once per tenant and key: its successful answer is kept and replayed.
pub async fn once<F, Fut>(
    idempotency: &Idempotency,
    tenant: &TenantId,
    key: Option<IdempotencyKey>,
    fingerprint: [u8; 32],
    handle: F,
) -> Result<Response, Problem>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<KeptResponse, Problem>>,
{
    once_naming(idempotency, tenant, key, fingerprint, String::new(), |_| handle()).await
}

/// [`once`] for a request that creates something the server names: `handle` is given `fresh`,
/// or the name an earlier, unfinished handling of the same request under the same key gave.
pub async fn once_naming<F, Fut>(
    idempotency: &Idempotency,
    tenant: &TenantId,
    key: Option<IdempotencyKey>,
    fingerprint: [u8; 32],
    fresh: String,
    handle: F,
) -> Result<Response, Problem>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<KeptResponse, Problem>>,
{
    let Some(key) = key else { return handle(fresh).await.map(|kept| respond(kept, false)) };
    let store = idempotency.keys.as_ref();
    let held = KeyClaim { fingerprint: &fingerprint, lease: KEY_LEASE, keep: idempotency.window, name: &fresh };
    let claim = store
        .claim_idempotency_key(tenant, &key, &held)
        .await
        .map_err(|e| Problem::from_port(e, "checking the idempotency key"))?;
    let name = match claim {
        IdempotencyClaim::Claimed { name } => name,
        IdempotencyClaim::Completed(kept) => return Ok(respond(kept, true)),
        IdempotencyClaim::InProgress => {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                "idempotency-conflict",
                "A request with this Idempotency-Key is in progress",
                "the first request with this key has not finished; retry shortly for its answer",
            )
            .retry_after(1))
        }
        IdempotencyClaim::Mismatch => {
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-reused",
                "The Idempotency-Key was used for another request",
                format!(
                    "this key was sent with a different request (path or body) in the last {}; use a new key",
                    humantime::format_duration(idempotency.window)
                ),
            ))
        }
    };
    match handle(name).await {
        Ok(kept) => {
            if let Err(e) = store.complete_idempotency_key(tenant, &key, &fingerprint, &kept, idempotency.window).await
            {
                tracing::warn!(error = %e, "The answer could not be kept for its idempotency key; a retry may be handled again.");
            }
            Ok(respond(kept, false))
        }
        Err(p) => {
            if let Err(e) = store.release_idempotency_key(tenant, &key, &fingerprint).await {
                tracing::warn!(error = %e, "An idempotency key could not be released; it frees itself after its lease.");
            }
            Err(p)
        }
    }
}

fn respond(kept: KeptResponse, replayed: bool) -> Response {
    let status = StatusCode::from_u16(kept.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, kept.body).into_response();
    let h = resp.headers_mut();
    for (name, value) in kept.headers {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            h.insert(n, v);
        }
    }
    if !h.contains_key(header::CONTENT_TYPE) {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    if replayed {
        h.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use openqq_adapters::{Durability, EmbeddedDesignStore};

    fn keys(dir: &std::path::Path) -> Idempotency {
        let store = EmbeddedDesignStore::open(dir, Durability::Process).unwrap();
        Idempotency { keys: Arc::new(store), window: DEFAULT_WINDOW }
    }

    fn accepted(body: &str) -> KeptResponse {
        KeptResponse {
            status: 202,
            headers: vec![("location".into(), "/v1/designs/d".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_retry_while_the_first_request_runs_is_409_and_after_it_gets_the_same_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = keys(dir.path());
        let tenant = TenantId::parse("acme").unwrap();
        let k = IdempotencyKey::parse("retry-1").unwrap();
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let first = once(&store, &tenant, Some(k.clone()), [1; 32], || async {
            started_tx.send(()).unwrap();
            held.await.unwrap();
            Ok(accepted("{\"n\":1}"))
        });
        let second = async {
            started.await.unwrap();
            let p = once(&store, &tenant, Some(k.clone()), [1; 32], || async { Ok(accepted("{\"n\":2}")) })
                .await
                .unwrap_err();
            release.send(()).unwrap();
            p
        };
        let (first, in_progress) = tokio::join!(first, second);
        assert_eq!(
            (in_progress.status, in_progress.slug, in_progress.retry_after_secs),
            (StatusCode::CONFLICT, "idempotency-conflict", Some(1))
        );
        let first = first.unwrap();
        assert_eq!(first.status(), StatusCode::ACCEPTED);
        assert!(first.headers().get(REPLAYED_HEADER).is_none());
        let replay =
            once(&store, &tenant, Some(k.clone()), [1; 32], || async { panic!("handled twice") }).await.unwrap();
        assert_eq!(
            (replay.status(), &replay.headers()["location"], &replay.headers()[REPLAYED_HEADER]),
            (StatusCode::ACCEPTED, &HeaderValue::from_static("/v1/designs/d"), &HeaderValue::from_static("true"))
        );
        let body = axum::body::to_bytes(replay.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"{\"n\":1}");
        let reused = once(&store, &tenant, Some(k), [2; 32], || async { panic!("handled twice") }).await.unwrap_err();
        assert_eq!((reused.status, reused.slug), (StatusCode::UNPROCESSABLE_ENTITY, "idempotency-key-reused"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_request_releases_its_key_so_a_retry_is_handled_anew() {
        let dir = tempfile::tempdir().unwrap();
        let store = keys(dir.path());
        let tenant = TenantId::parse("acme").unwrap();
        let k = IdempotencyKey::parse("retry-2").unwrap();
        let failed =
            once(&store, &tenant, Some(k.clone()), [1; 32], || async { Err(Problem::unavailable("log down")) }).await;
        assert_eq!(failed.unwrap_err().status, StatusCode::SERVICE_UNAVAILABLE);
        let retried = once(&store, &tenant, Some(k), [1; 32], || async { Ok(accepted("{}")) }).await.unwrap();
        assert_eq!(retried.status(), StatusCode::ACCEPTED);
    }

    /// A request that failed after what it created was durable (the record published, then a 503)
    /// is handled again under the name its first handling gave: the same design, not a second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_retry_of_a_request_cut_off_names_what_it_creates_as_the_first_handling_did() {
        let dir = tempfile::tempdir().unwrap();
        let store = keys(dir.path());
        let tenant = TenantId::parse("acme").unwrap();
        let k = IdempotencyKey::parse("create-1").unwrap();
        let named = std::sync::Mutex::new(Vec::new());
        let handle = |fail: bool| {
            let named = &named;
            move |name: String| async move {
                named.lock().unwrap().push(name);
                if fail {
                    Err(Problem::unavailable("the marker could not be kept"))
                } else {
                    Ok(accepted("{}"))
                }
            }
        };
        let first = once_naming(&store, &tenant, Some(k.clone()), [1; 32], "d-first".into(), handle(true)).await;
        assert_eq!(first.unwrap_err().status, StatusCode::SERVICE_UNAVAILABLE);
        once_naming(&store, &tenant, Some(k.clone()), [1; 32], "d-second".into(), handle(false)).await.unwrap();
        let other = IdempotencyKey::parse("create-2").unwrap();
        once_naming(&store, &tenant, Some(other), [1; 32], "d-third".into(), handle(false)).await.unwrap();
        once_naming(&store, &tenant, None, [1; 32], "d-fourth".into(), handle(false)).await.unwrap();
        assert_eq!(*named.lock().unwrap(), ["d-first", "d-first", "d-third", "d-fourth"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_is_replayed_for_the_window_and_the_key_is_handled_anew_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Idempotency { window: Duration::from_millis(400), ..keys(dir.path()) };
        let tenant = TenantId::parse("acme").unwrap();
        let k = IdempotencyKey::parse("window-1").unwrap();
        let answer = |n: u32| async move { Ok(accepted(&format!("{{\"n\":{n}}}"))) };
        let body = |r: Response| async { axum::body::to_bytes(r.into_body(), 1024).await.unwrap() };
        let first = once(&store, &tenant, Some(k.clone()), [1; 32], || answer(1)).await.unwrap();
        assert_eq!(&body(first).await[..], b"{\"n\":1}");
        let replay = once(&store, &tenant, Some(k.clone()), [1; 32], || answer(2)).await.unwrap();
        assert!(replay.headers().contains_key(REPLAYED_HEADER), "within the window: the first answer");
        assert_eq!(&body(replay).await[..], b"{\"n\":1}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let anew = once(&store, &tenant, Some(k), [2; 32], || answer(3)).await.unwrap();
        assert!(!anew.headers().contains_key(REPLAYED_HEADER), "past the window: handled anew, whatever the body");
        assert_eq!(&body(anew).await[..], b"{\"n\":3}");
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(HEADER, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_key_is_a_bare_or_quoted_run_of_visible_ascii_and_anything_else_is_400() {
        assert_eq!(key(&headers(&[])).unwrap(), None);
        assert_eq!(key(&headers(&["abc-1"])).unwrap().unwrap().as_str(), "abc-1");
        assert_eq!(key(&headers(&["\"abc-1\""])).unwrap().unwrap().as_str(), "abc-1");
        for bad in [vec!["a b"], vec!["\"\""], vec!["a", "b"], vec![&*"k".repeat(256)]] {
            let p = key(&headers(&bad)).unwrap_err();
            assert_eq!((p.status, p.slug), (StatusCode::BAD_REQUEST, "invalid-idempotency-key"), "{bad:?}");
        }
    }

    #[test]
    fn the_fingerprint_covers_the_path_and_the_body() {
        let (body, other) = (b"{\"a\":1}", b"{\"a\":2}");
        assert_eq!(fingerprint("/v1/designs", body), fingerprint("/v1/designs", body));
        assert_ne!(fingerprint("/v1/designs", body), fingerprint("/v1/designs", other));
        assert_ne!(fingerprint("/v1/designs", body), fingerprint("/v1/designs/x/revisions", body));
    }
}
