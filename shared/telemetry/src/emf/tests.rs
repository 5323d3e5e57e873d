//! The recorder's lines against CloudWatch's embedded metric format specification.

use super::*;
use std::collections::HashSet;

/// CloudWatch's units (the `Unit` enumeration of `PutMetricData`).
const UNITS: [&str; 27] = [
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// Checks one line against the EMF specification and returns it parsed: a JSON object whose
/// `_aws` holds a millisecond `Timestamp` and `CloudWatchMetrics` directives; each directive a
/// namespace, dimension sets of at most 30 keys naming string members, and at most 100 metrics
/// in all, each with a name, a CloudWatch unit and a member that is a number or a
/// `Values`/`Counts` pair of at most 100 numbers each.
fn valid(line: &str) -> Value {
    assert!(!line.contains('\n'), "one line: {line}");
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let o = v.as_object().expect("an EMF line is a JSON object");
    let aws = o["_aws"].as_object().expect("_aws is an object");
    assert!(aws["Timestamp"].as_u64().is_some_and(|t| t > 1_600_000_000_000), "Timestamp in ms: {line}");
    let directives = aws["CloudWatchMetrics"].as_array().expect("CloudWatchMetrics is an array");
    assert!(!directives.is_empty());
    let mut names = HashSet::new();
    for d in directives {
        let ns = d["Namespace"].as_str().expect("Namespace is a string");
        assert!(!ns.is_empty() && ns.len() <= 255);
        for set in d["Dimensions"].as_array().expect("Dimensions is an array") {
            let set = set.as_array().expect("a dimension set is an array");
            assert!(set.len() <= MAX_DIMENSIONS, "{} dimensions: {line}", set.len());
            for k in set {
                let k = k.as_str().expect("a dimension key is a string");
                let value = o.get(k).unwrap_or_else(|| panic!("dimension {k} names no member: {line}"));
                let value = value.as_str().unwrap_or_else(|| panic!("dimension {k} is not a string: {line}"));
                assert!(!value.is_empty() && value.chars().count() <= 1024);
            }
        }
        for m in d["Metrics"].as_array().expect("Metrics is an array") {
            let name = m["Name"].as_str().expect("a metric has a Name");
            assert!(!name.is_empty() && name.len() <= 255);
            let unit = m["Unit"].as_str().expect("a metric has a Unit");
            assert!(UNITS.contains(&unit), "{unit} is not a CloudWatch unit");
            names.insert(name.to_owned());
            match &o[name] {
                Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite)),
                Value::Object(h) => {
                    let values = h["Values"].as_array().expect("Values");
                    let counts = h["Counts"].as_array().expect("Counts");
                    assert_eq!(values.len(), counts.len());
                    assert!(!values.is_empty() && values.len() <= MAX_VALUES, "{} values", values.len());
                    assert!(values.iter().chain(counts).all(|x| x.as_f64().is_some_and(f64::is_finite)));
                }
                other => panic!("metric {name} has no numeric member: {other}"),
            }
        }
    }
    assert!(names.len() <= MAX_METRICS, "{} metrics in one object", names.len());
    v
}

fn lines(recorder: &EmfRecorder) -> Vec<Value> {
    recorder.lines(1_796_040_000_000).iter().map(|l| valid(l)).collect()
}

#[test]
fn counters_leave_as_their_increase_since_the_previous_flush() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        metrics::counter!("openqq_events_total", "function" => "results", "kind" => "design.validated", "outcome" => "applied")
            .increment(3)
    });
    let first = lines(&r);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["openqq_events_total"], 3);
    assert_eq!((&first[0]["function"], &first[0]["outcome"]), (&json!("results"), &json!("applied")));
    assert!(lines(&r).is_empty(), "a counter that did not move writes nothing");
    metrics::with_local_recorder(&r, || {
        metrics::counter!("openqq_events_total", "function" => "results", "kind" => "design.validated", "outcome" => "applied")
            .increment(2)
    });
    assert_eq!(lines(&r)[0]["openqq_events_total"], 2);
}

#[test]
fn gauges_leave_as_their_current_value_at_every_flush() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        metrics::gauge!("openqq_pool_queue_depth").set(4.0);
        metrics::gauge!("openqq_pool_queue_depth").decrement(1.0);
    });
    for _ in 0..2 {
        let l = lines(&r);
        assert_eq!(l[0]["openqq_pool_queue_depth"], 3.0);
        assert_eq!(l[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([[]]));
        assert_eq!(l[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"], "Count");
    }
}

#[test]
fn histograms_leave_as_values_and_counts_of_the_invocations_samples_in_seconds() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        let h = metrics::histogram!("openqq_event_duration_seconds", "function" => "validation");
        for v in [0.0123456, 0.0123411, 0.5, f64::NAN, 1e-300] {
            h.record(v);
        }
    });
    let l = lines(&r);
    assert_eq!(l[0]["openqq_event_duration_seconds"], json!({"Values": [0.0, 0.0123, 0.5], "Counts": [1, 2, 1]}));
    assert_eq!(l[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"], "Seconds");
    assert!(lines(&r).is_empty(), "the samples left with the previous flush");
}

#[test]
fn a_histogram_of_more_than_a_hundred_distinct_values_is_split_over_lines_that_keep_every_sample() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        for i in 1..=250 {
            metrics::histogram!("openqq_batch_duration_seconds", "function" => "design-job").record(i as f64);
        }
    });
    let l = lines(&r);
    assert_eq!(l.len(), 3);
    let counted: u64 = l
        .iter()
        .flat_map(|v| v["openqq_batch_duration_seconds"]["Counts"].as_array().unwrap().clone())
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counted, 250);
}

#[test]
fn more_than_a_hundred_metrics_of_one_label_set_are_split_over_lines_of_at_most_a_hundred() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        for i in 0..230 {
            metrics::counter!(format!("openqq_test_{i}_total"), "function" => "api").increment(1);
        }
    });
    let l = lines(&r);
    assert_eq!(l.len(), 3);
    let metrics: usize =
        l.iter().map(|v| v.as_object().unwrap().keys().filter(|k| k.starts_with("openqq_")).count()).sum();
    assert_eq!(metrics, 230);
}

#[test]
fn a_label_set_over_thirty_keys_is_cut_to_thirty_dimensions() {
    let r = EmfRecorder::new();
    let labels: Vec<(String, String)> = (0..40).map(|i| (format!("k{i:02}"), format!("v{i}"))).collect();
    metrics::with_local_recorder(&r, || metrics::counter!("openqq_wide_total", &labels).increment(1));
    let l = lines(&r);
    assert_eq!(l[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0].as_array().unwrap().len(), MAX_DIMENSIONS);
}

#[test]
fn requests_are_also_published_by_route_and_status_by_status_and_in_total_for_the_alarms() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        let labels = [("route", "/v1/designs"), ("method", "POST"), ("status", "503"), ("tenant", "acme")];
        metrics::counter!("openqq_http_requests_total", &labels).increment(1);
        metrics::histogram!("openqq_http_request_duration_seconds", &labels[..3]).record(0.2);
    });
    let l = lines(&r);
    let directive = |name: &str| {
        l.iter()
            .flat_map(|v| v["_aws"]["CloudWatchMetrics"].as_array().unwrap().clone())
            .find(|d| d["Metrics"][0]["Name"] == name)
            .unwrap_or_else(|| panic!("{name} is published"))
    };
    assert_eq!(
        directive("openqq_http_requests_total")["Dimensions"],
        json!([["method", "route", "status", "tenant"], ["route", "status"], ["status"], []])
    );
    assert_eq!(
        directive("openqq_http_request_duration_seconds")["Dimensions"],
        json!([["method", "route", "status"], ["route"], []])
    );
}

#[test]
fn tenant_dimensions_are_held_to_the_tenant_cap() {
    let r = EmfRecorder::new();
    metrics::with_local_recorder(&r, || {
        for i in 0..(crate::TENANT_LABEL_CAP + 50) {
            let tenant = format!("emf-flood-{i}");
            metrics::counter!("openqq_limiter_decisions_total", "tenant" => tenant, "decision" => "allowed")
                .increment(1);
        }
    });
    let tenants: HashSet<String> = lines(&r).iter().map(|v| v["tenant"].as_str().unwrap().to_owned()).collect();
    assert!(tenants.len() <= crate::TENANT_LABEL_CAP + 1, "{} tenant values", tenants.len());
    assert!(tenants.contains(crate::OTHER_TENANTS));
}

#[test]
fn units_come_from_the_names_unit_suffix() {
    assert_eq!(unit_of("openqq_http_request_duration_seconds"), "Seconds");
    assert_eq!(unit_of("openqq_dead_letters_total"), "Count");
    assert_eq!(unit_of("openqq_consumer_lag_records"), "Count");
    assert_eq!(unit_of("openqq_body_bytes_total"), "Bytes");
    assert_eq!(unit_of("openqq_build_info"), "None");
}

#[test]
fn an_idle_recorder_writes_nothing() {
    assert!(EmfRecorder::new().lines(1_796_040_000_000).is_empty());
}
