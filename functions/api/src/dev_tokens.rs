//! `POST /v1/dev/tokens`: a bearer token for any tenant, signed with the server's own key as
//! `openqq token` signs it, so the web UI can be tried without a shell; `GET` says whether it is
//! on. Only `openqq up --dev-tokens` serves them ([`crate::AppState::dev_tokens`]); everywhere
//! else, Lambda included, both are 404 like a route that does not exist. Anyone who reaches the
//! server can then act as any tenant: it is for a developer's own machine (`openqq up` refuses
//! it on an address other than loopback).

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use openqq_core::TenantId;
use serde::Deserialize;
use std::time::Duration;

/// How long a minted token stays valid.
pub const TOKEN_TTL: Duration = Duration::from_secs(12 * 3600);
/// Largest request body accepted, in bytes (a tenant id is at most 64).
pub const MAX_BODY_BYTES: usize = 1024;
/// How long the body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MintRequest {
    pub tenant_id: String,
}

/// `GET /v1/dev/tokens`: whether minting is on, so the UI offers it only where it works (404
/// where it is off, as for `POST`).
pub async fn offered(State(state): State<AppState>) -> Result<Response, Problem> {
    if !state.dev_tokens {
        return Err(crate::problem::not_found().await);
    }
    Ok(Json(serde_json::json!({ "enabled": true })).into_response())
}

pub async fn mint(State(state): State<AppState>, req: Request) -> Result<Response, Problem> {
    if !state.dev_tokens {
        crate::body::drain(req.into_body(), MAX_BODY_BYTES).await;
        return Err(crate::problem::not_found().await);
    }
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Unsupported media type",
            "send the body as application/json",
        ));
    }
    let bytes = crate::body::read_within(req.into_body(), MAX_BODY_BYTES, BODY_TIMEOUT).await.map_err(|(e, _)| e)?;
    let MintRequest { tenant_id } = crate::body::parse(&bytes)?;
    let tenant = TenantId::parse(tenant_id).map_err(|e| Problem::invalid_field("tenant_id", e.to_string()))?;
    let token = state.keys.issue(&tenant, TOKEN_TTL);
    let expires_at = chrono::Utc::now() + TOKEN_TTL;
    tracing::info!(tenant_id = %tenant, "A development token was minted.");
    let body = serde_json::json!({ "token": token, "tenant_id": tenant, "expires_at": expires_at });
    let mut resp = Json(body).into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(resp)
}
