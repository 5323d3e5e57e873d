//! Bearer JWT authentication. HS256 locally (the secret lives in the data dir or
//! `OPENQQ_JWT_SECRET`); on AWS the HTTP API's JWT authorizer verifies tokens first and this
//! check still runs, so the function never trusts an unverified tenant.

use crate::limit;
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use openqq_core::TenantId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The claims we read and write. `tenant_id` is the only one the API uses for access.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub tenant_id: String,
    pub sub: String,
    pub iat: u64,
    pub exp: u64,
}

/// Signing and verification keys. `Debug` never prints the secret.
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JwtKeys { secret: <redacted> }")
    }
}

/// Shortest secret accepted, in bytes (HS256 wants at least the hash size).
pub const MIN_SECRET_BYTES: usize = 32;

impl JwtKeys {
    pub fn from_secret(secret: &[u8]) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!("the JWT secret must be at least {MIN_SECRET_BYTES} bytes"));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp"]);
        validation.leeway = 30;
        Ok(Self { encoding: EncodingKey::from_secret(secret), decoding: DecodingKey::from_secret(secret), validation })
    }

    /// A token for `tenant`, valid for `ttl`.
    pub fn issue(&self, tenant: &TenantId, ttl: Duration) -> String {
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        let claims =
            Claims { tenant_id: tenant.to_string(), sub: tenant.to_string(), iat: now, exp: now + ttl.as_secs() };
        encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).expect("HS256 signing cannot fail")
    }

    /// The tenant of a valid token.
    pub fn verify(&self, token: &str) -> Result<TenantId, String> {
        let data = decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| format!("the bearer token is invalid: {e}"))?;
        TenantId::parse(data.claims.tenant_id).map_err(|e| format!("the token's tenant_id claim is invalid: {e}"))
    }
}

fn bearer(req: &Request) -> Result<&str, Problem> {
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or_else(|| Problem::unauthorized("send `Authorization: Bearer <token>` (see `openqq token`)"))?;
    let value = value.to_str().map_err(|_| Problem::unauthorized("the Authorization header is not text"))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => Ok(token.trim()),
        _ => Err(Problem::unauthorized("the Authorization header must use the Bearer scheme")),
    }
}

/// Authenticates, then applies the tenant's rate limit; the tenant goes into the request's
/// extensions for the handlers.
pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let tenant = match bearer(&req).and_then(|t| state.keys.verify(t).map_err(Problem::unauthorized)) {
        Ok(t) => t,
        Err(p) => {
            crate::body::drain(req.into_body(), state.max_body_bytes).await;
            let mut resp = p.into_response();
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return resp;
        }
    };
    let decision = match limit::check(&state, &tenant).await {
        Ok(d) => d,
        Err(p) => {
            crate::body::drain(req.into_body(), state.max_body_bytes).await;
            return p.into_response();
        }
    };
    tracing::Span::current().record("tenant_id", tenant.as_str());
    req.extensions_mut().insert(tenant);
    let mut resp = next.run(req).await;
    limit::add_headers(resp.headers_mut(), &decision);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_with_its_own_secret() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let tenant = TenantId::parse("acme").unwrap();
        let token = keys.issue(&tenant, Duration::from_secs(60));
        assert_eq!(keys.verify(&token).unwrap(), tenant);
        let other = JwtKeys::from_secret(&[8; 32]).unwrap();
        assert!(other.verify(&token).is_err());
        assert!(keys.verify("not.a.token").is_err());
    }

    #[test]
    fn short_secrets_are_refused_and_never_printed() {
        assert!(JwtKeys::from_secret(b"short").is_err());
        let keys = JwtKeys::from_secret(b"0123456789abcdef0123456789abcdef").unwrap();
        assert!(!format!("{keys:?}").contains("0123"));
    }
}
