//! Fuzzes upload token verification (`JwtKeys::verify_upload`, the credential of
//! `PUT /v1/uploads/{digest}?token=…`) on the token text and on claims signed with the upload key
//! ([`openqq_fuzz::token`]). A bearer token must never pass for an upload token: the same claims
//! signed with the bearer secret are refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_api::auth::JwtKeys;
use openqq_fuzz::token;
use std::sync::OnceLock;

fn keys() -> &'static (JwtKeys, Vec<u8>) {
    static KEYS: OnceLock<(JwtKeys, Vec<u8>)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let keys = JwtKeys::from_secret(token::SECRET).expect("the keys are valid");
        let upload_key = token::upload_key();
        let digest = "0".repeat(64);
        let claims = format!(r#"{{"upload_tenant":"acme","digest":"{digest}","bytes":5,"iat":0,"exp":600}}"#);
        let (header, claims) = token::parts(claims.as_bytes());
        keys.verify_upload(&token::signed(header, &claims, &upload_key))
            .expect("a token the target signs with the upload key verifies");
        (keys, upload_key)
    })
}

fuzz_target!(|data: &[u8]| {
    let (keys, upload_key) = keys();
    let Some((&mode, data)) = data.split_first() else { return };
    if mode % 2 == 0 {
        let _ = keys.verify_upload(&String::from_utf8_lossy(data));
    } else {
        let (header, claims) = token::parts(data);
        let _ = keys.verify_upload(&token::signed(header, &claims, upload_key));
        assert!(
            keys.verify_upload(&token::signed(header, &claims, token::SECRET)).is_err(),
            "a token signed with the bearer secret is not an upload token"
        );
    }
});
