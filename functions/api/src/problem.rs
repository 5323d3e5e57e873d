//! RFC 9457 problem documents: the one error type every handler returns. Internals never reach
//! the client; the cause is logged with the correlation id instead.

use crate::correlation;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use openqq_core::PortError;
use serde::Serialize;

#[derive(Debug, Clone)]
pub struct Problem {
    pub status: StatusCode,
    /// Short machine-readable slug; the `type` URI is derived from it.
    pub slug: &'static str,
    pub title: &'static str,
    pub detail: String,
    /// The request field at fault, for validation problems.
    pub field: Option<String>,
    pub retry_after_secs: Option<u64>,
    pub headers: Vec<(&'static str, String)>,
    /// What each of several parts got wrong (a batch's items), as the `errors` member.
    pub errors: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a serde_json::Value>,
}

/// What a refusal for lack of storage asks the client to wait, in seconds: space returns when
/// retention or an operator frees it, not in a second.
pub const STORAGE_FULL_RETRY_SECS: u64 = 30;

impl Problem {
    pub fn new(status: StatusCode, slug: &'static str, title: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            slug,
            title,
            detail: detail.into(),
            field: None,
            retry_after_secs: None,
            headers: Vec::new(),
            errors: None,
        }
    }

    /// The problem with an `errors` member (what each part got wrong).
    pub fn with_errors(mut self, errors: serde_json::Value) -> Self {
        self.errors = Some(errors);
        self
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs.max(1));
        self
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed-request", "The request body is not valid JSON", detail)
    }

    pub fn invalid_field(field: impl Into<String>, detail: impl Into<String>) -> Self {
        let field = field.into();
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-field",
            "A field of the request is invalid",
            format!("{field}: {}", detail.into()),
        )
        .with_field(field)
    }

    /// A job carrying `generate` where no generation model is configured.
    pub fn generation_not_configured() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "generation-not-configured",
            "This deployment has no generation model",
            "generate needs a model: the operator sets --generation-url and --generation-model \
             (OPENQQ_GENERATION_URL, OPENQQ_GENERATION_MODEL); submit source or a netlist instead",
        )
        .with_field("generate")
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "Authentication is required", detail)
    }

    pub fn design_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such design for this tenant")
    }

    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "The service is temporarily unavailable", detail)
            .retry_after(1)
    }

    /// Maps a port error: retriable ones are 503 with `Retry-After`; the rest are 500 with a
    /// generic detail (the cause is logged, never sent).
    pub fn from_port(e: PortError, doing: &str) -> Self {
        if let PortError::StorageFull(_) = e {
            tracing::error!(error = %e, doing, "The platform's storage is full; the client was asked to retry later.");
            return Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage-unavailable",
                "The platform's storage is full",
                format!("{doing} failed: no space is left to keep it; nothing was accepted, retry later"),
            )
            .retry_after(STORAGE_FULL_RETRY_SECS);
        }
        if e.is_retriable() {
            tracing::warn!(error = %e, doing, "A backend is unavailable; the client was asked to retry.");
            let secs = match &e {
                PortError::Throttled { retry_after: Some(d) } => d.as_secs().max(1),
                _ => 1,
            };
            Self::unavailable(format!("{doing} failed for now; retry shortly")).retry_after(secs)
        } else {
            tracing::error!(error = %e, doing, "A backend failed permanently.");
            Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal error",
                format!("{doing} failed; quote the correlation id when reporting it"),
            )
        }
    }
}

/// What a problem response was, for the request's log line ([`crate::observe::record`]): its
/// slug and the field at fault, never the detail (which may quote the request).
#[derive(Clone, Debug)]
pub struct Answered {
    pub slug: &'static str,
    pub field: Option<String>,
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = Body {
            kind: format!("urn:openqq:problem:{}", self.slug),
            title: self.title,
            status: self.status.as_u16(),
            detail: &self.detail,
            field: self.field.as_deref(),
            correlation_id: correlation::current().map(|c| c.to_string()),
            errors: self.errors.as_ref(),
        };
        let mut resp = (self.status, serde_json::to_string(&body).expect("problem serialises")).into_response();
        resp.extensions_mut().insert(Answered { slug: self.slug, field: self.field.clone() });
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if let Some(secs) = self.retry_after_secs {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        for (name, value) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(name, v);
            }
        }
        resp
    }
}

pub async fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such route; the API lives under /v1")
}

pub async fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        "this route does not accept that method",
    )
}
