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

/// Clock skew allowed between the token's issuer and this server, in seconds, for `exp`, `nbf`
/// and `iat`.
pub const LEEWAY_SECS: u64 = 30;

/// The claims `openqq token` writes. `tenant_id` is the only one the API uses for access.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub tenant_id: String,
    pub sub: String,
    pub iat: u64,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
}

/// What verification reads after the signature and the registered claims checked out.
#[derive(Deserialize)]
struct Verified {
    tenant_id: String,
    /// Who the token speaks for within the tenant, for audit records.
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    iat: Option<u64>,
    exp: u64,
}

/// Claims every token must carry when set: `iss` and `aud` (`--jwt-issuer`, `--jwt-audience`;
/// `OPENQQ_JWT_ISSUER`, `OPENQQ_JWT_AUDIENCE` on Lambda); and the longest a token may live
/// (`--jwt-max-lifetime`): one whose `exp` lies further past its `iat` (or, without one, past
/// now) is refused, so a leaked token is not good for months.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRules {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub max_lifetime: Duration,
}

/// The longest a bearer token may live unless set otherwise.
pub const DEFAULT_MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

impl Default for ClaimRules {
    fn default() -> Self {
        Self { issuer: None, audience: None, max_lifetime: DEFAULT_MAX_TOKEN_LIFETIME }
    }
}

/// Longest `iss` or `aud` setting accepted, in bytes.
pub const MAX_CLAIM_RULE_BYTES: usize = 256;

impl ClaimRules {
    fn check(&self) -> Result<(), JwtKeysError> {
        for (claim, value) in [("issuer", &self.issuer), ("audience", &self.audience)] {
            if value.as_ref().is_some_and(|v| v.trim().is_empty() || v.len() > MAX_CLAIM_RULE_BYTES) {
                return Err(JwtKeysError::ClaimRule { claim });
            }
        }
        if self.max_lifetime < Duration::from_secs(60) {
            return Err(JwtKeysError::ShortLifetime);
        }
        Ok(())
    }
}

/// Why keys could not be made from a secret and claim rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtKeysError {
    #[error("the JWT secret must be at least {min} bytes", min = MIN_SECRET_BYTES)]
    ShortSecret { bytes: usize },
    /// The `issuer` or `audience` rule is blank or longer than [`MAX_CLAIM_RULE_BYTES`].
    #[error("the JWT {claim} must be 1 to {max} bytes", max = MAX_CLAIM_RULE_BYTES)]
    ClaimRule { claim: &'static str },
    #[error("the longest a token may live (--jwt-max-lifetime) must be at least a minute")]
    ShortLifetime,
}

/// Why a request was not authenticated. Logged at debug level; the client only ever sees one
/// fixed sentence ([`AuthError::problem`]).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("the request has no Authorization header")]
    Missing,
    #[error("the Authorization header is not a bearer token")]
    NotBearer,
    #[error("the bearer token did not verify")]
    Invalid(#[source] jsonwebtoken::errors::Error),
    #[error("the bearer token was issued in the future (iat {iat}, now {now})")]
    IssuedInFuture { iat: u64, now: u64 },
    #[error("the bearer token lives {lifetime} s, longer than the {max} s allowed")]
    TooLongLived { lifetime: u64, max: u64 },
    #[error("the bearer token's tenant_id claim is invalid")]
    Tenant(#[source] openqq_core::IdError),
    #[error("the gateway verified a token without a tenant_id claim")]
    NoTenantClaim,
}

impl AuthError {
    /// A 401 that reveals nothing about the token, with `WWW-Authenticate` as RFC 6750 §3 asks:
    /// no error code when there were no bearer credentials, `invalid_token` when there were.
    pub fn problem(&self) -> Problem {
        let challenge = match self {
            AuthError::Missing | AuthError::NotBearer => "Bearer realm=\"openqq\"",
            _ => "Bearer realm=\"openqq\", error=\"invalid_token\"",
        };
        // A tenant id outside the grammar is found only once the token verified (or the gateway
        // verified it), so saying so tells the holder nothing about the secret or the checks.
        let detail = match self {
            AuthError::Tenant(e) => format!("the token verified, but its tenant_id is not a tenant id: {e}"),
            _ => UNAUTHORIZED_DETAIL.to_owned(),
        };
        let mut p = Problem::unauthorized(detail);
        p.headers.push(("www-authenticate", challenge.to_owned()));
        p
    }
}

/// The detail of every 401, whatever the cause: nothing tells which check failed.
pub const UNAUTHORIZED_DETAIL: &str = "send a valid bearer token: `Authorization: Bearer <token>` (see `openqq token`)";

/// Signing and verification keys. `Debug` never prints the secret.
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    rules: ClaimRules,
    /// Upload tokens ([`UploadClaims`]) are signed with a key derived from the secret
    /// ([`upload_secret`]), never the secret itself: a bearer token can never pass for an upload
    /// token, nor an upload token for a bearer token, whatever their claims.
    upload_encoding: EncodingKey,
    upload_decoding: DecodingKey,
}

/// The claims of an upload token (`PUT /v1/uploads/{digest}?token=…`): which tenant may upload
/// which object, until when. Like a presigned URL, it is the only credential that request needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadClaims {
    /// The tenant the object will belong to.
    pub upload_tenant: String,
    /// SHA-256 of the object, lower-case hex.
    pub digest: String,
    /// The object's exact length.
    pub bytes: u64,
    pub iat: u64,
    pub exp: u64,
}

/// What a valid upload token allows: `tenant` may upload exactly `object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadGrant {
    pub tenant: TenantId,
    pub object: openqq_core::ObjectRef,
}

/// The key upload tokens are signed with: SHA-256 over a fixed label and the JWT secret.
fn upload_secret(secret: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"openqq upload token v1\0");
    h.update(secret);
    h.finalize().to_vec()
}

impl fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JwtKeys {{ secret: <redacted>, rules: {:?} }}", self.rules)
    }
}

/// Shortest secret accepted, in bytes (HS256 wants at least the hash size).
pub const MIN_SECRET_BYTES: usize = 32;

impl JwtKeys {
    /// HS256 keys: tokens must be signed with `secret` by HS256 (no other algorithm, `none`
    /// included), unexpired and past their `nbf`, within [`LEEWAY_SECS`].
    pub fn from_secret(secret: &[u8]) -> Result<Self, JwtKeysError> {
        Self::with_rules(secret, ClaimRules::default())
    }

    /// [`JwtKeys::from_secret`], and tokens must also carry the `iss` and `aud` that `rules` set;
    /// tokens issued here carry them.
    pub fn with_rules(secret: &[u8], rules: ClaimRules) -> Result<Self, JwtKeysError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(JwtKeysError::ShortSecret { bytes: secret.len() });
        }
        rules.check()?;
        let mut validation = Validation::new(Algorithm::HS256);
        // `exp` is read back too, for the lifetime rule.
        let mut required = vec!["exp"];
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        if let Some(iss) = &rules.issuer {
            validation.set_issuer(&[iss]);
            required.push("iss");
        }
        if let Some(aud) = &rules.audience {
            validation.set_audience(&[aud]);
            required.push("aud");
        }
        validation.set_required_spec_claims(&required);
        let upload = upload_secret(secret);
        Ok(Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            rules,
            upload_encoding: EncodingKey::from_secret(&upload),
            upload_decoding: DecodingKey::from_secret(&upload),
        })
    }

    /// An upload token letting `tenant` upload exactly `object`, valid for `ttl`, and when it
    /// expires.
    pub fn issue_upload(
        &self,
        tenant: &TenantId,
        object: &openqq_core::ObjectRef,
        ttl: Duration,
    ) -> (String, chrono::DateTime<chrono::Utc>) {
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        let claims = UploadClaims {
            upload_tenant: tenant.to_string(),
            digest: object.digest.clone(),
            bytes: object.bytes,
            iat: now,
            exp: now + ttl.as_secs(),
        };
        let expires = chrono::DateTime::from_timestamp(claims.exp as i64, 0).unwrap_or_default();
        (self.sign_upload(&claims), expires)
    }

    /// Signs upload claims as they are (for tests that need tokens `issue_upload` never makes).
    pub fn sign_upload(&self, claims: &UploadClaims) -> String {
        encode(&Header::new(Algorithm::HS256), claims, &self.upload_encoding).expect("HS256 signing cannot fail")
    }

    /// What a valid upload token allows. Expiry is checked with no leeway beyond [`LEEWAY_SECS`].
    pub fn verify_upload(&self, token: &str) -> Result<UploadGrant, AuthError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECS;
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp"]);
        let claims =
            decode::<UploadClaims>(token, &self.upload_decoding, &validation).map_err(AuthError::Invalid)?.claims;
        let tenant = TenantId::parse(claims.upload_tenant).map_err(AuthError::Tenant)?;
        Ok(UploadGrant { tenant, object: openqq_core::ObjectRef { digest: claims.digest, bytes: claims.bytes } })
    }

    /// A token for `tenant`, valid for `ttl`.
    pub fn issue(&self, tenant: &TenantId, ttl: Duration) -> String {
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        let claims = Claims {
            tenant_id: tenant.to_string(),
            sub: tenant.to_string(),
            iat: now,
            exp: now + ttl.as_secs(),
            iss: self.rules.issuer.clone(),
            aud: self.rules.audience.clone(),
        };
        self.sign(&claims)
    }

    /// Signs any claims with these keys (HS256); for tests that need tokens `issue` never makes.
    pub fn sign<C: Serialize>(&self, claims: &C) -> String {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding).expect("HS256 signing cannot fail")
    }

    /// The tenant of a valid token.
    pub fn verify(&self, token: &str) -> Result<TenantId, AuthError> {
        self.verify_caller(token).map(|caller| caller.tenant)
    }

    /// The tenant and subject of a valid token.
    pub fn verify_caller(&self, token: &str) -> Result<Caller, AuthError> {
        let data = decode::<Verified>(token, &self.decoding, &self.validation).map_err(AuthError::Invalid)?;
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        if let Some(iat) = data.claims.iat.filter(|iat| *iat > now + LEEWAY_SECS) {
            return Err(AuthError::IssuedInFuture { iat, now });
        }
        let from = data.claims.iat.unwrap_or(now);
        let lifetime = data.claims.exp.saturating_sub(from);
        if lifetime > self.rules.max_lifetime.as_secs() + LEEWAY_SECS {
            return Err(AuthError::TooLongLived { lifetime, max: self.rules.max_lifetime.as_secs() });
        }
        let tenant = TenantId::parse(data.claims.tenant_id).map_err(AuthError::Tenant)?;
        Ok(Caller { tenant, subject: Subject::of(data.claims.sub) })
    }
}

/// Who made a request: the token's tenant and, when it names one, its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    pub subject: Subject,
}

/// The `sub` claim of the request's token, for audit records (who deleted a design); in the
/// request's extensions beside the tenant. Never used for access: the tenant is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject(pub Option<String>);

/// Longest subject kept, in characters: a longer claim is cut there.
pub const MAX_SUBJECT_CHARS: usize = 256;

impl Subject {
    /// The subject of a `sub` claim: absent or empty is none, a long one is cut.
    pub fn of(sub: Option<String>) -> Self {
        Subject(sub.filter(|s| !s.is_empty()).map(|s| s.chars().take(MAX_SUBJECT_CHARS).collect()))
    }

    /// The subject as a log field writes it (`-` when the token named none).
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("-")
    }
}

fn bearer(req: &Request) -> Result<&str, AuthError> {
    let value = req.headers().get(header::AUTHORIZATION).ok_or(AuthError::Missing)?;
    let value = value.to_str().map_err(|_| AuthError::NotBearer)?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => Ok(token.trim()),
        _ => Err(AuthError::NotBearer),
    }
}

/// The tenant a request speaks for, or the 401 to answer. The cause is logged at debug level
/// (never the token).
pub fn authenticate(state: &AppState, req: &Request) -> Result<Caller, Problem> {
    let tenant = match state.identity {
        Identity::Token => bearer(req).and_then(|t| state.keys.verify_caller(t)),
        Identity::Gateway => match req.extensions().get::<GatewayClaims>() {
            Some(GatewayClaims { tenant_id: Some(id), sub }) => TenantId::parse(id.clone())
                .map(|tenant| Caller { tenant, subject: Subject::of(sub.clone()) })
                .map_err(AuthError::Tenant),
            Some(GatewayClaims { tenant_id: None, .. }) => Err(AuthError::NoTenantClaim),
            None => Err(AuthError::Missing),
        },
    };
    tenant.map_err(|e| {
        tracing::debug!(error = %e, cause = ?std::error::Error::source(&e).map(|s| s.to_string()), "A request was not authenticated.");
        e.problem()
    })
}

/// Who establishes the caller's tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Identity {
    /// The API verifies each bearer token with its own keys (`openqq up`; a function without an
    /// authorizer in front).
    #[default]
    Token,
    /// A gateway in front verified the token (API Gateway's JWT authorizer, against the issuer's
    /// keys) and passed its claims on as [`GatewayClaims`]; the tenant is their `tenant_id`. Only
    /// right where no request reaches the API without passing that gateway.
    Gateway,
}

/// The claims a gateway's authorizer verified, put into the request's extensions by whatever
/// received the request from the gateway (the Lambda entry point).
#[derive(Debug, Clone, Default)]
pub struct GatewayClaims {
    pub tenant_id: Option<String>,
    /// The token's `sub`, for audit records.
    pub sub: Option<String>,
}

/// Authenticates, then applies the tenant's rate limit; the tenant goes into the request's
/// extensions for the handlers.
pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Caller { tenant, subject } = match authenticate(&state, &req) {
        Ok(caller) => caller,
        Err(p) => {
            crate::body::drain(req.into_body(), state.max_body_bytes).await;
            return p.into_response();
        }
    };
    let decision = match limit::check(&state, &tenant).await {
        Ok(d) => d,
        Err(p) => {
            crate::body::drain(req.into_body(), state.max_body_bytes).await;
            let mut resp = p.into_response();
            resp.extensions_mut().insert(tenant);
            return resp;
        }
    };
    tracing::Span::current().record("tenant_id", tenant.as_str());
    req.extensions_mut().insert(tenant.clone());
    req.extensions_mut().insert(subject);
    let mut resp = next.run(req).await;
    limit::add_headers(resp.headers_mut(), &decision);
    // For the request metrics by tenant ([`crate::observe`]).
    resp.extensions_mut().insert(tenant);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn now() -> u64 {
        chrono::Utc::now().timestamp() as u64
    }

    fn acme() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    fn claims(iat: u64, exp: u64) -> serde_json::Value {
        serde_json::json!({"tenant_id": "acme", "sub": "acme", "iat": iat, "exp": exp})
    }

    #[test]
    fn a_token_verifies_only_with_its_own_secret() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let token = keys.issue(&acme(), Duration::from_secs(60));
        assert_eq!(keys.verify(&token).unwrap(), acme());
        let other = JwtKeys::from_secret(&[8; 32]).unwrap();
        assert!(other.verify(&token).is_err());
        assert!(keys.verify("not.a.token").is_err());
    }

    #[test]
    fn short_secrets_are_refused_and_never_printed() {
        let refused = JwtKeys::from_secret(b"short").unwrap_err();
        assert_eq!(refused, JwtKeysError::ShortSecret { bytes: 5 });
        assert_eq!(refused.to_string(), "the JWT secret must be at least 32 bytes");
        let keys = JwtKeys::from_secret(b"0123456789abcdef0123456789abcdef").unwrap();
        assert!(!format!("{keys:?}").contains("0123"));
    }

    #[test]
    fn a_token_not_yet_valid_or_issued_in_the_future_is_refused_beyond_the_leeway() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let (now, hour) = (now(), 3600);
        let mut nbf = claims(now, now + hour);
        nbf["nbf"] = (now + 600).into();
        assert!(matches!(keys.verify(&keys.sign(&nbf)), Err(AuthError::Invalid(_))), "nbf in ten minutes");
        let future = claims(now + 600, now + hour);
        assert!(matches!(keys.verify(&keys.sign(&future)), Err(AuthError::IssuedInFuture { .. })));
        let mut skewed = claims(now + 10, now + hour);
        skewed["nbf"] = (now + 10).into();
        assert_eq!(keys.verify(&keys.sign(&skewed)).unwrap(), acme(), "a few seconds of clock skew are fine");
        assert!(keys.verify(&keys.sign(&claims(now - 2 * hour, now - hour))).is_err(), "expired");
    }

    #[test]
    fn a_token_living_longer_than_the_maximum_is_refused_with_or_without_iat() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let (now, hour) = (now(), 3600);
        assert_eq!(keys.verify(&keys.sign(&claims(now, now + 24 * hour))).unwrap(), acme(), "a day is the default");
        let months = claims(now - hour, now + 90 * 24 * hour);
        assert!(matches!(keys.verify(&keys.sign(&months)), Err(AuthError::TooLongLived { .. })));
        let no_iat = serde_json::json!({"tenant_id": "acme", "exp": now + 25 * hour});
        assert!(matches!(keys.verify(&keys.sign(&no_iat)), Err(AuthError::TooLongLived { .. })), "measured from now");
        let rules = ClaimRules { max_lifetime: Duration::from_secs(hour), ..ClaimRules::default() };
        let strict = JwtKeys::with_rules(&[7; 32], rules).unwrap();
        assert!(strict.verify(&strict.sign(&claims(now, now + 2 * hour))).is_err(), "the setting is the bound");
        assert_eq!(strict.verify(&strict.issue(&acme(), Duration::from_secs(hour))).unwrap(), acme());
    }

    #[test]
    fn tokens_with_alg_none_or_another_algorithm_are_refused() {
        let secret = [7u8; 32];
        let keys = JwtKeys::from_secret(&secret).unwrap();
        let b64 = |v: &serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
        };
        let body = b64(&claims(now(), now() + 60));
        for alg in ["none", "None", "NONE"] {
            let unsigned = format!("{}.{body}.", b64(&serde_json::json!({"alg": alg, "typ": "JWT"})));
            assert!(keys.verify(&unsigned).is_err(), "alg {alg}");
        }
        let hs512 =
            encode(&Header::new(Algorithm::HS512), &claims(now(), now() + 60), &EncodingKey::from_secret(&secret))
                .unwrap();
        assert!(matches!(keys.verify(&hs512), Err(AuthError::Invalid(_))), "same secret, another algorithm");
    }

    #[test]
    fn issuer_and_audience_are_required_when_set_and_carried_by_issued_tokens() {
        let rules = ClaimRules {
            issuer: Some("https://id.example".into()),
            audience: Some("openqq".into()),
            ..ClaimRules::default()
        };
        let keys = JwtKeys::with_rules(&[7; 32], rules).unwrap();
        assert_eq!(keys.verify(&keys.issue(&acme(), Duration::from_secs(60))).unwrap(), acme());
        let (now, later) = (now(), now() + 60);
        let bare = claims(now, later);
        assert!(keys.verify(&keys.sign(&bare)).is_err(), "no iss or aud");
        let mut wrong = bare.clone();
        wrong["iss"] = "https://evil.example".into();
        wrong["aud"] = "openqq".into();
        assert!(keys.verify(&keys.sign(&wrong)).is_err(), "wrong issuer");
        let mut right = bare.clone();
        right["iss"] = "https://id.example".into();
        right["aud"] = serde_json::json!(["other", "openqq"]);
        assert_eq!(keys.verify(&keys.sign(&right)).unwrap(), acme(), "aud may be a list that names us");
        let plain = JwtKeys::from_secret(&[7; 32]).unwrap();
        assert!(plain.verify(&plain.issue(&acme(), Duration::from_secs(60))).is_ok());
        let blank = JwtKeys::with_rules(&[7; 32], ClaimRules { issuer: Some(" ".into()), ..ClaimRules::default() });
        assert_eq!(blank.unwrap_err().to_string(), "the JWT issuer must be 1 to 256 bytes");
    }

    fn object() -> openqq_core::ObjectRef {
        openqq_core::ObjectRef { digest: "ab".repeat(32), bytes: 1000 }
    }

    #[test]
    fn an_upload_token_grants_its_tenant_exactly_its_object_until_it_expires() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let (token, expires) = keys.issue_upload(&acme(), &object(), Duration::from_secs(60));
        assert_eq!(keys.verify_upload(&token).unwrap(), UploadGrant { tenant: acme(), object: object() });
        assert!(expires > chrono::Utc::now());
        let expired = UploadClaims {
            upload_tenant: "acme".into(),
            digest: object().digest,
            bytes: 1000,
            iat: now() - 7200,
            exp: now() - 3600,
        };
        assert!(keys.verify_upload(&keys.sign_upload(&expired)).is_err(), "expired");
        let other = JwtKeys::from_secret(&[8; 32]).unwrap();
        assert!(other.verify_upload(&token).is_err(), "another secret");
    }

    #[test]
    fn upload_tokens_and_bearer_tokens_never_pass_for_each_other() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let (upload, _) = keys.issue_upload(&acme(), &object(), Duration::from_secs(60));
        assert!(keys.verify(&upload).is_err(), "an upload token is no bearer token");
        let bearer = keys.issue(&acme(), Duration::from_secs(60));
        assert!(keys.verify_upload(&bearer).is_err(), "a bearer token is no upload token");
        // Even with an upload's claims, a token signed with the JWT secret itself is refused.
        let claims = UploadClaims {
            upload_tenant: "acme".into(),
            digest: object().digest,
            bytes: 1000,
            iat: now(),
            exp: now() + 60,
        };
        assert!(keys.verify_upload(&keys.sign(&claims)).is_err());
    }

    #[test]
    fn every_refusal_is_one_fixed_sentence_with_an_rfc_6750_challenge() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        let garbage = "eyJhbGciOiJIUzI1NiJ9.eyJ0ZW5hbnRfaWQiOjQyfQ.c2ln";
        let causes = [
            keys.verify(garbage).unwrap_err(),
            keys.verify("not.a.token").unwrap_err(),
            keys.verify(&keys.sign(&claims(now() + 600, now() + 900))).unwrap_err(),
        ];
        for cause in &causes {
            let p = cause.problem();
            assert_eq!(p.status, axum::http::StatusCode::UNAUTHORIZED);
            assert_eq!(p.detail, UNAUTHORIZED_DETAIL, "{cause}");
            assert_eq!(
                p.headers,
                [("www-authenticate", "Bearer realm=\"openqq\", error=\"invalid_token\"".to_owned())]
            );
        }
        let missing = AuthError::Missing.problem();
        assert_eq!(missing.headers, [("www-authenticate", "Bearer realm=\"openqq\"".to_owned())]);
        assert_eq!(missing.detail, UNAUTHORIZED_DETAIL);
    }

    #[test]
    fn a_verified_token_naming_a_tenant_outside_the_grammar_is_told_the_grammar() {
        let keys = JwtKeys::from_secret(&[7; 32]).unwrap();
        for tenant in ["..", "Acme", ".hidden"] {
            let token = keys.sign(&serde_json::json!({"tenant_id": tenant, "iat": now(), "exp": now() + 60}));
            let refused = keys.verify(&token).unwrap_err();
            assert!(matches!(refused, AuthError::Tenant(_)), "{tenant}: {refused}");
            let p = refused.problem();
            assert_eq!((p.status, p.slug), (axum::http::StatusCode::UNAUTHORIZED, "unauthorized"));
            assert!(p.detail.contains("not a tenant id") && p.detail.contains("lower-case"), "{}", p.detail);
        }
    }
}
