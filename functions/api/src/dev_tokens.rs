//! `POST /v1/dev/tokens`: a bearer token for any tenant, signed with the server's own key as
//! `openqq token` signs it, so the web UI can be tried without a shell; `GET` says whether it is
//! on. Only `openqq up --dev-tokens` serves them ([`crate::AppState::dev_tokens`]); everywhere
//! else, Lambda included, both are 404 like a route that does not exist. Anyone who reaches the
//! server can then act as any tenant: it is for a developer's own machine (`openqq up` refuses
//! it on an address other than loopback). A listener on loopback is not enough on its own: a
//! page on another site whose name resolves to 127.0.0.1 (DNS rebinding) reaches it from the
//! developer's browser. So both routes answer only requests whose `Host` is a loopback name or
//! address and whose `Origin`, when sent, is that same host: anything else is 403
//! `dev-tokens-loopback-only`.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
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
pub async fn offered(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, Problem> {
    if !state.dev_tokens {
        return Err(crate::problem::not_found().await);
    }
    same_machine(&headers)?;
    Ok(Json(serde_json::json!({ "enabled": true })).into_response())
}

pub async fn mint(State(state): State<AppState>, req: Request) -> Result<Response, Problem> {
    if !state.dev_tokens {
        crate::body::drain(req.into_body(), MAX_BODY_BYTES).await;
        return Err(crate::problem::not_found().await);
    }
    if let Err(refused) = same_machine(req.headers()) {
        crate::body::drain(req.into_body(), MAX_BODY_BYTES).await;
        return Err(refused);
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

/// Refuses a request that did not come from a page of this server on this machine: its `Host`
/// must be a loopback name or address, and its `Origin`, when sent, that same host and port.
fn same_machine(headers: &HeaderMap) -> Result<(), Problem> {
    let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let host = value(header::HOST).unwrap_or_default();
    let origin = value(header::ORIGIN);
    let origin_host = origin.map(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")));
    let refused = if !is_loopback(host) {
        Some(format!("the Host {host:?} is not a loopback name or address"))
    } else {
        match origin_host {
            Some(Some(from)) if from.eq_ignore_ascii_case(host) => None,
            Some(_) => Some(format!("the Origin {:?} is not this server's", origin.unwrap_or_default())),
            None => None,
        }
    };
    match refused {
        None => Ok(()),
        Some(why) => Err(Problem::new(
            StatusCode::FORBIDDEN,
            "dev-tokens-loopback-only",
            "Development tokens are for this machine only",
            format!("{why}: development tokens are minted only for pages this server serves on loopback"),
        )),
    }
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) is `localhost`, an
/// IPv4 loopback address or `[::1]`.
fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(
            host,
            |(name, port)| {
                if port.chars().all(|c| c.is_ascii_digit()) {
                    name
                } else {
                    host
                }
            },
        ),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, host.parse().unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, o.parse().unwrap());
        }
        h
    }

    #[test]
    fn loopback_hosts_and_their_own_origin_are_served() {
        for (host, origin) in [
            ("127.0.0.1:8080", None),
            ("localhost:8080", Some("http://localhost:8080")),
            ("127.0.0.1:8080", Some("http://127.0.0.1:8080")),
            ("[::1]:8080", Some("http://[::1]:8080")),
            ("127.1.2.3", None),
        ] {
            assert!(same_machine(&headers(host, origin)).is_ok(), "{host} {origin:?}");
        }
    }

    #[test]
    fn another_host_or_another_origin_is_refused() {
        for (host, origin) in [
            ("attacker.example:8080", None),
            ("attacker.example", Some("http://attacker.example")),
            ("127.0.0.1.attacker.example:8080", None),
            ("10.0.0.5:8080", None),
            ("127.0.0.1:8080", Some("http://attacker.example:8080")),
            ("127.0.0.1:8080", Some("http://127.0.0.1:3000")),
            ("127.0.0.1:8080", Some("null")),
        ] {
            let refused = same_machine(&headers(host, origin)).expect_err(&format!("{host} {origin:?}"));
            assert_eq!((refused.status, refused.slug), (StatusCode::FORBIDDEN, "dev-tokens-loopback-only"));
        }
    }
}
