//! Correlation ids: accepted from `x-correlation-id` when well-formed, otherwise created; scoped
//! for the request so problem documents and events carry it; echoed on every response.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use openqq_core::CorrelationId;
use tracing::Instrument;

pub const HEADER: &str = "x-correlation-id";

tokio::task_local! {
    static CURRENT: CorrelationId;
}

/// The correlation id of the request being handled, if any.
pub fn current() -> Option<CorrelationId> {
    CURRENT.try_with(|c| c.clone()).ok()
}

pub async fn layer(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| CorrelationId::parse(s).ok())
        .unwrap_or_else(CorrelationId::generate);
    req.extensions_mut().insert(id.clone());
    let span = tracing::info_span!("request", function = "api", correlation_id = %id, method = %req.method(), path = %req.uri().path());
    let mut resp = CURRENT.scope(id.clone(), next.run(req).instrument(span)).await;
    resp.headers_mut().insert(HEADER, HeaderValue::from_str(id.as_str()).expect("ids are header-safe"));
    resp
}
