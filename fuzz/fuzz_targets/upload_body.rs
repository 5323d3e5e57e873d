//! Fuzzes the body of `POST /v1/uploads` (`{sha256, bytes}`) as the API reads it
//! (`body::parse`: 400 or 422) and checks it (`uploads::requested`): what it grants names a
//! well-formed digest and a length within the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_api::body::parse;
use openqq_api::uploads::{requested, UploadRequest};
use openqq_core::ObjectRef;

fuzz_target!(|data: &[u8]| {
    let req = match parse::<UploadRequest>(data) {
        Ok(req) => req,
        Err(problem) => {
            assert!(matches!(problem.status.as_u16(), 400 | 422), "{problem:?}");
            return;
        }
    };
    if let Ok(object) = requested(&req) {
        assert!(ObjectRef::well_formed(&object.digest), "{object:?}");
        assert!(object.bytes >= 1 && object.bytes == req.bytes);
    }
});
