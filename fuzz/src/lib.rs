//! Helpers the fuzz targets share (`fuzz_targets/`, one binary per decoder; `scripts/fuzz.sh`
//! builds and runs them). The targets feed the decoders bytes as they arrive from outside;
//! [`token`] lets the token targets reach past the signature check, where the claims are read,
//! and [`spec`] turns a design request into the specification the API checks.

use openqq_api::designs::SubmitRequest;
use openqq_core::design::Constraints;
use openqq_core::{DesignSpec, ObjectRef};

/// The specification a design request stands for, as `SubmitRequest::into_spec` builds it before
/// it calls [`DesignSpec::check`] (`into_spec` needs the whole API state, for one setting).
pub fn spec(req: SubmitRequest) -> DesignSpec {
    DesignSpec {
        name: req.name,
        target: req.target,
        netlist: req.netlist,
        netlist_ref: req.netlist_ref.map(ObjectRef::from),
        constraints: Constraints { format: req.constraints.format, text: req.constraints.text, text_ref: None },
        bitstream_base64: req.bitstream_base64,
        bitstream_ref: req.bitstream_ref.map(ObjectRef::from),
        options: req.options,
        source: req.source,
        tests: req.tests,
        reference: req.reference,
        generate: req.generate,
    }
}

pub mod token {
    //! HS256 tokens signed over arbitrary header and claims bytes, so the claims decoding runs on
    //! what the fuzzer writes instead of stopping at a signature that never verifies.

    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};

    /// The secret the targets' keys are made from (any 32 bytes or more).
    pub const SECRET: &[u8] = b"fuzzing secret, 32 bytes or more, never deployed";

    /// The header of a token the API issues.
    pub const HEADER: &[u8] = br#"{"alg":"HS256","typ":"JWT"}"#;

    /// `header.claims.signature`, signed with `key` as HS256 signs.
    pub fn signed(header: &[u8], claims: &[u8], key: &[u8]) -> String {
        let message = format!("{}.{}", B64URL.encode(header), B64URL.encode(claims));
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(message.as_bytes());
        format!("{message}.{}", B64URL.encode(mac.finalize().into_bytes()))
    }

    /// The key upload tokens are signed with, derived from [`SECRET`] as `openqq_api::auth` derives
    /// it (the token targets check at start-up that a token signed with it verifies, so a change
    /// there cannot leave them fuzzing the signature check alone).
    pub fn upload_key() -> Vec<u8> {
        let mut h = Sha256::new();
        h.update(b"openqq upload token v1\0");
        h.update(SECRET);
        h.finalize().to_vec()
    }

    /// Splits a fuzz input into a token's header and claims: before the first newline the
    /// header, after it the claims; without a newline, [`HEADER`] and the whole input.
    pub fn parts(data: &[u8]) -> (&[u8], Vec<u8>) {
        match data.iter().position(|b| *b == b'\n') {
            Some(i) => (&data[..i], relative_times(&data[i + 1..])),
            None => (HEADER, relative_times(data)),
        }
    }

    /// Claims whose `iat`, `nbf` and `exp` are JSON integers are read as seconds from now, so an
    /// input keeps reaching the checks after the validity window (past the token's lifetime and
    /// leeway) rather than failing on an expired `exp` once the seed is a day old. Anything else
    /// is passed on byte for byte.
    fn relative_times(claims: &[u8]) -> Vec<u8> {
        let Ok(serde_json::Value::Object(mut map)) = serde_json::from_slice::<serde_json::Value>(claims) else {
            return claims.to_vec();
        };
        let now = chrono::Utc::now().timestamp();
        let mut changed = false;
        for name in ["iat", "nbf", "exp"] {
            if let Some(offset) = map.get(name).and_then(serde_json::Value::as_i64) {
                map.insert(name.to_owned(), now.saturating_add(offset).into());
                changed = true;
            }
        }
        if !changed {
            return claims.to_vec();
        }
        serde_json::to_vec(&map).expect("a JSON map serialises")
    }
}
