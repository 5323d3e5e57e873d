//! The validation time budget: a design whose validation outlasts it fails with a
//! `VALIDATION_BUDGET_EXCEEDED` finding instead of holding its partition.

mod support;

use std::time::Duration;

use openqq_core::*;
use openqq_fpga::BUDGET_EXCEEDED;
use openqq_validation::{parse_budget, validate, BudgetSettingError, DEFAULT_BUDGET};
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
    // Under the API's body limit, and far more than a millisecond of work.
    let rig = support::validated("slow", lut_chain_spec(12_000), Duration::from_millis(1)).await;

    let (b, cause) = (&rig.b, &rig.cause);
    let stored = b.store.report(&cause.tenant_id, &cause.design_id, None).await.unwrap().unwrap();
    let report: Value = serde_json::from_str(stored.report.get()).unwrap();
    assert_eq!(report["verdict"], "fail");
    let codes: Vec<&str> = report["findings"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str()).collect();
    assert!(codes.contains(&BUDGET_EXCEEDED), "{codes:?}");
}
