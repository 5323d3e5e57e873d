//! Finding 1 of issue 9 at the function's level: a netlist with one 20,000-bit port and an empty
//! PCF asks for one finding per bit. The report that is stored is capped (and too large to travel
//! in the event); the full report is kept by reference, readable by its tenant only.

mod support;

use openqq_core::ports::MAX_RECORD_BYTES;
use openqq_core::*;
use openqq_validation::DEFAULT_BUDGET;
use serde_json::{json, Value};
use support::Rig;

fn wide_port_spec(bits: usize) -> DesignSpec {
    let port_bits: Vec<usize> = (2..bits + 2).collect();
    serde_json::from_value(json!({
        "name": "wide",
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {"top": {
            "attributes": {"top": "00000000000000000000000000000001"},
            "ports": {"big": {"direction": "input", "bits": port_bits}},
            "cells": {},
            "netnames": {"big": {"hide_name": 0, "bits": port_bits, "attributes": {}}}
        }}},
        "constraints": {"format": "pcf", "text": ""},
    }))
    .unwrap()
}

/// The `bits`-bit port design, validated by the validation consumer.
async fn validated(bits: usize) -> Rig {
    support::validated("wide", wide_port_spec(bits), DEFAULT_BUDGET).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_with_a_finding_per_bit_of_a_20000_bit_port_is_capped_and_kept_whole_by_reference() {
    let rig = validated(20_000).await;
    let (b, topics, cause) = (&rig.b, &rig.topics, &rig.cause);

    // The event fits in a record: the verdict alone.
    let finished_topic = topics.of(EventKind::ValidationFinished);
    let mut finished = Vec::new();
    for p in 0..4 {
        finished.extend(b.source.read(&finished_topic, p, 0, 10).await.unwrap());
    }
    assert_eq!(finished.len(), 1, "validation.finished was published");
    assert!(finished[0].value.len() < MAX_RECORD_BYTES / 2, "{} bytes", finished[0].value.len());
    let event: Value = serde_json::from_slice(&finished[0].value).unwrap();
    assert_eq!(event["payload"], json!({"verdict": "fail"}), "a capped report this large is only in the store");

    // The store keeps the capped report: it says what was cut and where the rest is.
    let stored = b.store.report(&cause.tenant_id, &cause.design_id, None).await.unwrap().unwrap();
    let report: Value = serde_json::from_str(stored.report.get()).unwrap();
    let report = &report;
    assert_eq!(report["verdict"], "fail");
    let total = report["truncated"]["findings_total"].as_u64().unwrap();
    assert!(total >= 20_000, "one finding per bit at least: {total}");
    let kept = report["findings"].as_array().unwrap().len();
    assert!(kept > 0 && kept < 20_000, "{kept} findings kept");
    let full: ObjectRef = serde_json::from_value(report["full_report"].clone()).expect("a full_report reference");
    assert_eq!(report["full_report"]["design_id"], cause.design_id.as_str(), "the pointer says whose it is");

    // The full report has every finding, and only its tenant can read it.
    let bytes = b.objects.get(&cause.tenant_id, &full.digest).await.unwrap();
    assert_eq!(bytes.len() as u64, full.bytes);
    let whole: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(whole["findings"].as_array().unwrap().len() as u64, total, "every finding");
    assert!(whole.get("truncated").is_none() && whole.get("full_report").is_none());
    assert_eq!(whole["design_id"], cause.design_id.as_str(), "its own design's alone, whatever the findings");
    let other = TenantId::parse("globex").unwrap();
    assert!(matches!(b.objects.get(&other, &full.digest).await, Err(PortError::NotFound)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_report_is_stored_whole_without_a_reference() {
    let rig = validated(3).await;
    let (b, cause) = (&rig.b, &rig.cause);
    let stored = b.store.report(&cause.tenant_id, &cause.design_id, None).await.unwrap().unwrap();
    let stored: Value = serde_json::from_str(stored.report.get()).unwrap();
    assert_eq!(stored["findings"].as_array().unwrap().len(), 3);
    assert!(stored.get("truncated").is_none() && stored.get("full_report").is_none(), "{stored}");
}
