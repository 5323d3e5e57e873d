//! Fuzzes the bodies of `POST /v1/webhooks` (`{url, kinds, description?}`) and
//! `POST /v1/webhooks/{id}/rotate` as the API reads them (`body::parse`: 400 or 422), and the
//! target URL check (`check_target_url`) with and without private addresses allowed: a URL
//! accepted for the public internet is accepted when private ones are allowed too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_api::body::parse;
use openqq_api::webhooks::{CreateRequest, RotateRequest};
use openqq_core::webhook::target::check_target_url;
use openqq_core::webhook::SUBSCRIBABLE;

fuzz_target!(|data: &[u8]| {
    let _ = parse::<RotateRequest>(data);
    let req = match parse::<CreateRequest>(data) {
        Ok(req) => req,
        Err(problem) => {
            assert!(matches!(problem.status.as_u16(), 400 | 422), "{problem:?}");
            // The URL check on its own, on the raw text, reaches further than a whole body.
            if let Ok(url) = std::str::from_utf8(data) {
                let public = check_target_url(url, false);
                assert!(public.is_err() || check_target_url(url, true).is_ok());
            }
            return;
        }
    };
    let public = check_target_url(&req.url, false);
    let any = check_target_url(&req.url, true);
    assert!(public.is_err() || any.is_ok(), "{}: {public:?} but {any:?}", req.url);
    let _ = req.kinds.iter().filter(|k| SUBSCRIBABLE.iter().any(|s| s.as_str() == k.as_str())).count();
});
