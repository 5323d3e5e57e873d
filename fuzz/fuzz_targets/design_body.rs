//! Fuzzes the body of `POST /v1/designs` and `POST /v1/designs/{id}/revisions` as the API reads
//! it (`designs::submission`: syntax errors 400, field errors 422) and checks it
//! (`DesignSpec::check`). A specification the API accepts must survive the trip through its
//! `design.submitted` event: serialised, decoded as the consumers decode it, and accepted again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_api::designs::submission;
use openqq_core::event::DesignSubmitted;
use openqq_fuzz::spec;

fuzz_target!(|data: &[u8]| {
    let req = match submission(data) {
        Ok(req) => req,
        Err(problem) => {
            assert!(matches!(problem.status.as_u16(), 400 | 422), "{problem:?}");
            return;
        }
    };
    let spec = spec(req);
    if spec.check().is_err() {
        return;
    }
    let event = serde_json::to_vec(&DesignSubmitted { spec, checks: None }).expect("a specification serialises");
    let read: DesignSubmitted = serde_json::from_slice(&event).expect("the consumers read what the API writes");
    read.spec.check().expect("what the API accepted is accepted again after the trip");
});
