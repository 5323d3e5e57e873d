//! Fuzzes bearer token verification (`JwtKeys::verify`), as the API checks every request's
//! `Authorization: Bearer` token, on two kinds of input: the token text itself (what a client
//! sends), and header and claims bytes signed with the API's key ([`openqq_fuzz::token`]), so
//! the claims are decoded and checked (issuer, audience, lifetime, tenant id) rather than the
//! signature refused. The keys require `iss` and `aud`, as a deployment with both set does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_api::auth::{ClaimRules, JwtKeys};
use openqq_fuzz::token;
use std::sync::OnceLock;
use std::time::Duration;

fn keys() -> &'static JwtKeys {
    static KEYS: OnceLock<JwtKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let rules = ClaimRules {
            issuer: Some("openqq".into()),
            audience: Some("api".into()),
            max_lifetime: Duration::from_secs(3600),
        };
        let keys = JwtKeys::with_rules(token::SECRET, rules).expect("the keys are valid");
        let claims = br#"{"tenant_id":"acme","sub":"acme","iss":"openqq","aud":"api","iat":0,"exp":600}"#;
        let (header, claims) = token::parts(claims);
        keys.verify(&token::signed(header, &claims, token::SECRET)).expect("a token the target signs verifies");
        keys
    })
}

fuzz_target!(|data: &[u8]| {
    let keys = keys();
    let Some((&mode, data)) = data.split_first() else { return };
    if mode % 2 == 0 {
        let _ = keys.verify(&String::from_utf8_lossy(data));
    } else {
        let (header, claims) = token::parts(data);
        if let Ok(tenant) = keys.verify(&token::signed(header, &claims, token::SECRET)) {
            assert!(!tenant.to_string().is_empty());
        }
    }
});
