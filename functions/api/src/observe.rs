//! Request metrics by route template (bounded), status and tenant (capped by
//! [`openqq_telemetry::tenant_label`]), and the Prometheus scrape page. The counter carries the
//! tenant; the latency histogram does not (a histogram is a dozen series per label set).
//! docs/OBSERVABILITY.md lists every metric. Each request also gets one log line (route, status,
//! time taken) inside the request's span, so `openqq trace` shows the API's hop.
//!
//! The scrape page names tenants, so it is never part of the API's router: [`metrics_page`] is
//! a separate app that `openqq up` serves on a listener of its own (`--metrics-listen`, loopback
//! by default), where only whoever reaches that address (Prometheus) reads it.

use crate::problem::Problem;
use axum::extract::{MatchedPath, Request};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use openqq_core::TenantId;
use std::time::Instant;

pub async fn record(req: Request, next: Next) -> Response {
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "unmatched".to_owned());
    let method = req.method().as_str().to_owned();
    let started = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    // Set by authentication ([`crate::auth::guard`]) on the response of every authenticated request.
    let tenant = match resp.extensions().get::<TenantId>() {
        Some(t) => openqq_telemetry::tenant_label(t.as_str()),
        None => openqq_telemetry::NO_TENANT.to_owned(),
    };
    let took = started.elapsed();
    // The API's hop of a trace (the request span carries the correlation id).
    let problem = resp.extensions().get::<crate::problem::Answered>();
    let (problem, field) = (problem.map(|p| p.slug), problem.and_then(|p| p.field.as_deref()));
    let elapsed_ms = (took.as_secs_f64() * 1e6).round() / 1e3;
    tracing::info!(%route, %method, %status, tenant = %tenant, problem, field, elapsed_ms, "A request was answered.");
    let labels = [("route", route), ("method", method), ("status", status)];
    metrics::histogram!("openqq_http_request_duration_seconds", &labels).record(took.as_secs_f64());
    let [route, method, status] = labels;
    let labels = [route, method, status, ("tenant", tenant)];
    metrics::counter!("openqq_http_requests_total", &labels).increment(1);
    resp
}

/// The metrics listener's whole app: `GET /metrics` renders `handle` as Prometheus text; any
/// other path or method is a 404 problem document.
pub fn metrics_page(handle: PrometheusHandle) -> Router {
    Router::new().fallback(move |req: Request| {
        let handle = handle.clone();
        async move {
            if req.uri().path() == "/metrics" && req.method() == Method::GET {
                ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], handle.render()).into_response()
            } else {
                Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "this listener serves GET /metrics only")
                    .into_response()
            }
        }
    })
}
