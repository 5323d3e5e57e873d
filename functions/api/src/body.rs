//! Request bodies: a size limit (413), a deadline for the whole body (408), JSON syntax (400) and
//! schema errors naming the field (422), all as problem documents.
//!
//! [`read_within`] is what the [`tenant_guard`](crate::tenant_guard) reads bodies with, outside
//! the worker pool; [`JsonBody`] then parses the buffered bytes inside it.

use crate::problem::Problem;
use crate::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// A JSON body of type `T`, read within `AppState::max_body_bytes`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Problem> {
        let JsonBytes(bytes) = JsonBytes::from_request(req, state).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// An `application/json` body as its bytes, read within `AppState::max_body_bytes` and not
/// parsed yet: for handlers that parse it once, into exactly what they need.
pub struct JsonBytes(pub Bytes);

impl FromRequest<AppState> for JsonBytes {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Problem> {
        let is_json =
            req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| {
                ct.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
            });
        if !is_json {
            return Err(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
                "send the body as application/json",
            ));
        }
        let limit = state.max_body_bytes;
        // Behind the tenant guard the body is already buffered and this is immediate (and takes
        // the buffer as it is); the limit still holds wherever the router is used without it.
        match collect(req.into_body(), limit).await {
            Ok(bytes) => Ok(JsonBytes(bytes)),
            Err((e, rest)) => {
                if matches!(e, BodyError::TooLarge { .. }) {
                    drain(rest, DRAIN_BYTES).await;
                }
                Err(e.into())
            }
        }
    }
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("bodies are limited to {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the body did not arrive within {after:?}")]
    TimedOut { after: Duration },
    #[error("reading the body failed")]
    Broken(#[source] axum::Error),
}

impl From<BodyError> for Problem {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooLarge { limit } => Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                "The request body is too large",
                format!("bodies are limited to {limit} bytes"),
            ),
            BodyError::TimedOut { after } => Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request-timeout",
                "The request body took too long",
                format!("the whole body must arrive within {} s of the headers; send it faster", after.as_secs_f64()),
            ),
            BodyError::Broken(cause) => Problem::bad_request(format!("reading the body failed: {cause}")),
        }
    }
}

/// How much of an oversized body is read and dropped so the client, still sending, gets to read
/// the 413 instead of a reset connection. Past this the connection is simply closed.
pub const DRAIN_BYTES: usize = 16 * 1024 * 1024;

/// How long a rejected request's body is drained at most: long enough for a client that sends
/// at a normal pace to finish and read the answer, short enough that a slow sender holds its
/// connection only briefly.
pub const DRAIN_FOR: Duration = Duration::from_secs(2);

/// Reads and drops, in the background, up to `cap` bytes (for at most [`DRAIN_FOR`]) of a request
/// being rejected before its body was read, so a client still sending it can read the answer
/// rather than see the connection reset. Returns at once: the answer goes out while the body
/// drains, and the connection closes when draining stops.
pub async fn drain(body: axum::body::Body, cap: usize) {
    tokio::spawn(async move {
        use http_body_util::BodyExt;
        let mut body = body;
        let _ = tokio::time::timeout(DRAIN_FOR, async move {
            let mut seen = 0usize;
            while let Some(Ok(frame)) = body.frame().await {
                seen += frame.data_ref().map_or(0, |d| d.len());
                if seen > cap {
                    break;
                }
            }
        })
        .await;
    });
}

/// Reads the whole body, at most `limit` bytes, within `timeout`. On failure the rest of the
/// body comes back with the error, for the caller to drain or drop.
///
/// A body that arrives as one frame (an already buffered one, say) is returned as it is, not
/// copied; otherwise the frames are copied once into a buffer of the body's exact size hint.
pub async fn read_within(
    body: axum::body::Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, (BodyError, axum::body::Body)> {
    use http_body_util::BodyExt;
    use hyper::body::Body as _;
    let mut body = body;
    let hint = body.size_hint().exact().map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX).min(limit));
    let mut first: Option<Bytes> = None;
    let mut out = Vec::new();
    let read = tokio::time::timeout(timeout, async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(BodyError::Broken)?;
            let Ok(data) = frame.into_data() else { continue };
            let held = first.as_ref().map_or(0, Bytes::len) + out.len();
            if held + data.len() > limit {
                return Err(BodyError::TooLarge { limit });
            }
            if first.is_none() && out.is_empty() {
                first = Some(data);
                continue;
            }
            if let Some(f) = first.take() {
                out.reserve(hint.max(f.len() + data.len()));
                out.extend_from_slice(&f);
            }
            out.extend_from_slice(&data);
        }
        Ok(())
    })
    .await;
    match read {
        Ok(Ok(())) => Ok(first.unwrap_or_else(|| Bytes::from(out))),
        Ok(Err(e)) => Err((e, body)),
        Err(_) => Err((BodyError::TimedOut { after: timeout }, body)),
    }
}

/// A body of any media type as its bytes, read within `limit` (for extractors of their own
/// types); a body over it is drained while the problem goes out, as [`JsonBytes`] does.
pub(crate) async fn read_all(body: axum::body::Body, limit: usize) -> Result<Bytes, Problem> {
    match collect(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err((e, rest)) => {
            if matches!(e, BodyError::TooLarge { .. }) {
                drain(rest, DRAIN_BYTES).await;
            }
            Err(e.into())
        }
    }
}

/// Reads at most `limit` bytes with no deadline of its own (for bodies already buffered).
async fn collect(body: axum::body::Body, limit: usize) -> Result<Bytes, (BodyError, axum::body::Body)> {
    read_within(body, limit, Duration::from_secs(24 * 3600)).await
}

/// Parses JSON, telling syntax errors (400) from schema errors (422, with the field's path).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data => {
                let field = if path == "." {
                    missing_field(&inner.to_string()).unwrap_or_else(|| "body".to_owned())
                } else {
                    path
                };
                Problem::invalid_field(field, strip_position(&inner.to_string()))
            }
            _ => Problem::bad_request(inner.to_string()),
        }
    })?;
    de.end().map_err(|e| Problem::bad_request(e.to_string()))?;
    Ok(value)
}

/// serde reports a missing top-level field with an empty path; take its name from the message.
fn missing_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("missing field `")?;
    Some(rest[..rest.find('`')?].to_owned())
}

fn strip_position(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct T {
        a: u32,
        inner: Inner,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Inner {
        device: String,
    }

    #[test]
    fn syntax_errors_are_400_and_schema_errors_name_the_field() {
        assert_eq!(parse::<T>(b"{not json").unwrap_err().status, StatusCode::BAD_REQUEST);
        assert_eq!(
            parse::<T>(br#"{"a": 1, "inner": {"device": "x"}} trailing"#).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        let p = parse::<T>(br#"{"a": 1, "inner": {"device": 5}}"#).unwrap_err();
        assert_eq!((p.status, p.field.as_deref()), (StatusCode::UNPROCESSABLE_ENTITY, Some("inner.device")));
        let p = parse::<T>(br#"{"inner": {"device": "x"}}"#).unwrap_err();
        assert_eq!(p.field.as_deref(), Some("a"));
    }
}
