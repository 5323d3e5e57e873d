//! Request bodies: a size limit (413), JSON syntax (400) and schema errors naming the field (422),
//! all as problem documents.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

/// A JSON body of type `T`, read within `AppState::max_body_bytes`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
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
        let bytes = read_limited(req.into_body(), limit).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// How much of an oversized body is read and dropped so the client, still sending, gets to read
/// the 413 instead of a reset connection. Past this the connection is simply closed.
const DRAIN_BYTES: usize = 16 * 1024 * 1024;

/// Reads and drops up to `cap` bytes of a request being rejected before its body was read, so a
/// client still sending it can read the answer rather than see the connection reset.
pub async fn drain(mut body: axum::body::Body, cap: usize) {
    use http_body_util::BodyExt;
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        seen += frame.data_ref().map_or(0, |d| d.len());
        if seen > cap {
            break;
        }
    }
}

/// Reads at most `limit` bytes; a larger body is 413, after draining what the client sends.
async fn read_limited(mut body: axum::body::Body, limit: usize) -> Result<Vec<u8>, Problem> {
    use http_body_util::BodyExt;
    let too_large = || {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "The request body is too large",
            format!("bodies are limited to {limit} bytes"),
        )
    };
    let mut out = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Problem::bad_request(format!("reading the body failed: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len();
        if seen <= limit {
            out.extend_from_slice(&data);
        } else if seen > DRAIN_BYTES {
            break;
        }
    }
    if seen > limit {
        Err(too_large())
    } else {
        Ok(out)
    }
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
