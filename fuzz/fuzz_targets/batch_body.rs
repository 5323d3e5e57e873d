//! Fuzzes a batch as `POST /v1/batches` reads an NDJSON body (`batches::items::ndjson_lines`) and
//! then each line as an item is checked before anything touches the store: a JSON object, its
//! `custom_id`, `revalidate` or `design_id` as a design id, the rest as the body of
//! `POST /v1/designs` (`SubmitRequest`, read from a JSON value here, unlike a single submission)
//! checked as one (`DesignSpec::check`); `max_failed` as the JSON body and the query give it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_api::batches::items::ndjson_lines;
use openqq_api::designs::SubmitRequest;
use openqq_core::batch::{MaxFailed, MAX_BATCH_ITEMS};
use openqq_core::DesignId;

fuzz_target!(|data: &[u8]| {
    let Ok(lines) = ndjson_lines(data) else { return };
    assert!(lines.len() <= MAX_BATCH_ITEMS + 1, "the reader stops one line past the limit");
    for line in lines {
        assert!(!line.trim().is_empty() && !line.contains('\n'));
        let Ok(mut object) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&line) else {
            continue;
        };
        if let Some(max_failed) = object.remove("max_failed") {
            if let Ok(parsed) = MaxFailed::parse(&max_failed) {
                assert_eq!(MaxFailed::from_text(&parsed.to_text()), Some(parsed), "max_failed as the store keeps it");
            }
        }
        object.remove("custom_id");
        if let Some(serde_json::Value::String(id)) = object.remove("revalidate") {
            let _ = DesignId::parse_uuid(&id);
            continue;
        }
        if let Some(serde_json::Value::String(id)) = object.remove("design_id") {
            let _ = DesignId::parse_uuid(&id);
        }
        if let Ok(req) = serde_json::from_value::<SubmitRequest>(serde_json::Value::Object(object)) {
            let _ = openqq_fuzz::spec(req).check();
        }
    }
});
