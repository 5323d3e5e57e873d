//! The validation time budget: a design whose validation outlasts it fails with a
//! `VALIDATION_BUDGET_EXCEEDED` finding instead of holding its partition.

use std::time::Duration;

use openqq_adapters::{Backends, Durability};
use openqq_core::event::{Cause, DesignSubmitted};
use openqq_core::*;
use openqq_fpga::BUDGET_EXCEEDED;
use openqq_runtime::kafka::to_event;
use openqq_runtime::{BatchHandler, Consumer};
use openqq_validation::{parse_budget, validate, BudgetSettingError, Validation, DEFAULT_BUDGET};
use serde_json::{json, Value};

/// A design of `luts` chained LUTs: a few megabytes of netlist take well over a millisecond.
fn lut_chain_spec(luts: usize) -> DesignSpec {
    let cells: serde_json::Map<String, serde_json::Value> = (0..luts)
        .map(|i| {
            let cell = json!({"type": "SB_LUT4", "connections": {"I0": [10 + i], "O": [11 + i]}});
            (format!("l{i}"), cell)
        })
        .collect();
    serde_json::from_value(json!({
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {"top": {"attributes": {"top": "1"}, "ports": {}, "cells": cells}}},
        "constraints": {"format": "pcf", "text": ""},
    }))
    .unwrap()
}

#[test]
fn a_design_that_outlasts_a_one_millisecond_budget_fails_with_the_budget_finding() {
    let report = validate(&lut_chain_spec(60_000), Duration::from_millis(1));
    assert_eq!(report.verdict, openqq_fpga::Verdict::Fail);
    assert!(report.findings.iter().any(|f| f.code == BUDGET_EXCEEDED), "{:?}", report.findings);
}

#[test]
fn the_same_design_passes_within_the_default_budget() {
    let report = validate(&lut_chain_spec(2_000), DEFAULT_BUDGET);
    assert_eq!(report.verdict, openqq_fpga::Verdict::Pass, "{:?}", report.findings);
}

#[test]
fn the_budget_setting_is_a_duration_above_zero() {
    assert_eq!(parse_budget("5s").unwrap(), Duration::from_secs(5));
    assert_eq!(parse_budget(" 750ms ").unwrap(), Duration::from_millis(750));
    assert!(matches!(parse_budget("0s"), Err(BudgetSettingError::Zero)));
    let err = parse_budget("soon").unwrap_err();
    assert!(matches!(err, BudgetSettingError::NotADuration { .. }));
    assert!(err.to_string().contains("OPENQQ_VALIDATION_BUDGET"), "{err}");
    assert!(std::error::Error::source(&err).is_some(), "keeps its cause");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_validation_function_finishes_a_design_over_its_budget_as_failed_with_the_budget_finding() {
    let dir = tempfile::tempdir().unwrap();
    let b = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    let topics = Topics::default();
    let cause = Cause {
        tenant_id: TenantId::parse("acme").unwrap(),
        design_id: DesignId::generate(),
        revision: 1,
        correlation_id: CorrelationId::parse("corr-slow").unwrap(),
    };
    let submitted = Envelope::new(EventKind::DesignSubmitted, &cause, "api", ());
    let change = Change::Submitted { name: None };
    b.store.apply(&cause.tenant_id, &cause.design_id, &submitted.timeline_entry(), &change).await.unwrap();
    // Under the API's body limit, and far more than a millisecond of work.
    let spec = lut_chain_spec(12_000);
    let rec = Envelope::new(EventKind::ValidationRequested, &cause, "design-job", DesignSubmitted { spec }).to_record();
    let incoming = LogRecord {
        topic: topics.of(EventKind::ValidationRequested),
        partition: 1,
        offset: 0,
        timestamp_ms: 0,
        key: rec.key,
        value: rec.value,
        headers: rec.headers,
    };
    let validation =
        Validation { store: b.store.clone(), objects: b.objects.clone(), budget: Duration::from_millis(1) };
    let consumer = Consumer::new(validation, b.log.clone(), b.store.clone(), topics.clone());
    consumer
        .handle(to_event(&[incoming]))
        .await
        .expect("the batch succeeds: a spent budget is a verdict, not an error");

    let stored = b.store.report(&cause.tenant_id, &cause.design_id, None).await.unwrap().unwrap();
    let report: Value = serde_json::from_str(stored.report.get()).unwrap();
    assert_eq!(report["verdict"], "fail");
    let codes: Vec<&str> = report["findings"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str()).collect();
    assert!(codes.contains(&BUDGET_EXCEEDED), "{codes:?}");
}
