//! Which lines `openqq trace` takes, and how it prints them.

use super::*;

/// A consumer's per-record line as the log file holds it (the record span's fields in `spans`).
fn record_line(at: &str, function: &str, kind: &str, offset: u64, outcome: &str, id: &str) -> String {
    json!({
        "timestamp": at, "level": "INFO", "message": "A record was handled.", "target": "openqq_runtime::consumer",
        "function": function, "kind": kind, "topic": kind, "partition": 3, "offset": offset,
        "correlation_id": id, "tenant_id": "acme", "design_id": "d-1", "elapsed_ms": 12.345, "outcome": outcome,
        "reason": if outcome == "dead_lettered" { json!("permanent: the netlist object is missing") } else { Value::Null },
    })
    .to_string()
}

/// The API's line: the correlation id is a field of the request span, not of the event.
fn api_line(at: &str, id: &str) -> String {
    json!({
        "timestamp": at, "level": "INFO", "message": "The design revision was accepted.",
        "tenant_id": "acme", "design_id": "d-1", "revision": 1,
        "spans": [{"name": "request", "function": "api", "correlation_id": id, "method": "POST", "path": "/v1/designs"}],
    })
    .to_string()
}

#[test]
fn a_consumer_line_becomes_a_hop_with_its_record_fields() {
    let hop = parse(
        &record_line("2026-01-01T00:00:01.000000Z", "validation", "validation.requested", 7, "applied", "c-1"),
        "c-1",
    )
    .expect("the line names c-1");
    assert_eq!(hop.function, "validation");
    assert_eq!(hop.kind.as_deref(), Some("validation.requested"));
    assert_eq!((hop.partition, hop.offset), (Some(3), Some(7)));
    assert_eq!(hop.elapsed_ms, Some(12.345));
    assert_eq!(hop.outcome.as_deref(), Some("applied"));
    assert_eq!((hop.design_id.as_deref(), hop.tenant_id.as_deref()), (Some("d-1"), Some("acme")));
    assert!(!hop.is_dead_letter());
}

#[test]
fn a_correlation_id_set_on_an_enclosing_span_makes_the_line_part_of_the_trace() {
    let hop = parse(&api_line("2026-01-01T00:00:00.000000Z", "c-1"), "c-1").expect("the span names c-1");
    assert_eq!(hop.function, "api");
    assert_eq!(hop.message, "The design revision was accepted.");
    assert_eq!(hop.kind, None);
}

#[test]
fn lines_of_another_id_that_contains_this_one_or_that_are_not_json_are_not_taken() {
    let other = record_line("2026-01-01T00:00:01.000000Z", "results", "validation.finished", 1, "applied", "c-10");
    assert_eq!(parse(&other, "c-1"), None);
    assert_eq!(parse("2026-01-01 INFO c-1 plain text", "c-1"), None);
    let mentions = json!({"timestamp": "t", "message": "about c-1", "correlation_id": "c-2"}).to_string();
    assert_eq!(parse(&mentions, "c-1"), None);
}

fn journey() -> Vec<Hop> {
    let lines = [
        record_line("2026-01-01T00:00:03.000000Z", "results", "validation.finished", 9, "applied", "c-1"),
        api_line("2026-01-01T00:00:00.000000Z", "c-1"),
        record_line("2026-01-01T00:00:02.000000Z", "validation", "validation.requested", 4, "applied", "c-1"),
        record_line("2026-01-01T00:00:01.000000Z", "design-job", "design.submitted", 2, "applied", "c-1"),
    ];
    in_time_order(lines.iter().filter_map(|l| parse(l, "c-1")).collect())
}

#[test]
fn hops_are_put_in_time_order_and_the_services_in_the_order_they_were_reached() {
    let hops = journey();
    assert_eq!(services(&hops), SERVICES);
}

#[test]
fn the_table_shows_every_hop_in_order_and_lists_the_dead_letters_under_it() {
    let mut hops = journey();
    hops.push(
        parse(
            &record_line(
                "2026-01-01T00:00:04.000000Z",
                "validation",
                "validation.requested",
                5,
                "dead_lettered",
                "c-1",
            ),
            "c-1",
        )
        .unwrap(),
    );
    let text = table("c-1", &hops);
    assert!(text.starts_with("Correlation id c-1: 5 log lines, api → design-job → validation → results\n"), "{text}");
    assert!(text.contains("Design d-1 of tenant acme"), "{text}");
    let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("TIME (UTC)")).skip(1).take(5).collect();
    let functions: Vec<&str> = rows.iter().map(|r| r.split_whitespace().nth(2).unwrap()).collect();
    assert_eq!(functions, ["api", "design-job", "validation", "results", "validation"], "{text}");
    assert!(
        rows[1].contains("design.submitted") && rows[1].contains("12.3 ms") && rows[1].contains("applied"),
        "{text}"
    );
    assert!(rows[0].starts_with("2026-01-01 00:00:00.000  api"), "{text}");
    let letters = text.split("Dead letters:\n").nth(1).expect("a dead-letter section");
    assert!(
        letters.contains(
            "validation gave up on validation.requested at partition 3 offset 5: permanent: the netlist object is missing"
        ),
        "{letters}"
    );
    assert!(!table("c-1", &journey()).contains("Dead letters"));
}

#[test]
fn a_trace_with_no_lines_says_so() {
    assert_eq!(table("c-404", &[]), "No log line names correlation id c-404.\n");
}

#[test]
fn the_json_trace_names_the_services_hops_and_dead_letters() {
    let v = to_json("c-1", &journey());
    assert_eq!(v["correlation_id"], "c-1");
    assert_eq!(v["services"], json!(SERVICES));
    assert_eq!(v["hops"].as_array().unwrap().len(), 4);
    assert_eq!(v["hops"][1]["kind"], "design.submitted");
    assert_eq!(v["dead_letters"], json!([]));
}

#[test]
fn the_insights_query_filters_on_the_id_in_the_event_or_its_span_over_the_four_log_groups() {
    let query = insights_query("c-1");
    assert!(query.contains(r#"| filter correlation_id = "c-1" or span.correlation_id = "c-1""#), "{query}");
    assert!(query.contains("| sort @timestamp asc"), "{query}");
    assert!(insights_query(r#"a"b"#).contains(r#"correlation_id = "a\"b""#));
    let text = aws_instructions("c-1", "prod");
    for group in [
        "/aws/lambda/prod-api",
        "/aws/lambda/prod-design-job",
        "/aws/lambda/prod-validation",
        "/aws/lambda/prod-results",
    ] {
        assert!(text.contains(group), "{group} in {text}");
    }
    assert!(text.contains("aws logs start-query --log-group-names /aws/lambda/prod-api /aws/lambda/prod-design-job"));
}

#[test]
fn a_request_line_shows_its_route_and_status_and_how_long_it_took() {
    let line = json!({
        "timestamp": "2026-01-01T00:00:00.500000Z", "level": "INFO", "message": "A request was answered.",
        "route": "/v1/designs", "method": "POST", "status": "202", "tenant": "acme", "elapsed_ms": 4.25,
        "spans": [{"name": "request", "function": "api", "correlation_id": "c-1", "method": "POST", "path": "/v1/designs"}],
    })
    .to_string();
    let hop = parse(&line, "c-1").unwrap();
    assert_eq!(hop.route.as_deref(), Some("POST /v1/designs"));
    assert_eq!(hop.outcome.as_deref(), Some("HTTP 202"));
    let text = table("c-1", &[hop]);
    assert!(text.starts_with("Correlation id c-1: 1 log line, api\n"), "{text}");
    let row = text.lines().last().unwrap();
    for cell in ["api", "POST /v1/designs", "4.2 ms", "HTTP 202", "A request was answered."] {
        assert!(row.contains(cell), "{cell:?} in {row}");
    }
}

#[test]
fn a_refused_request_shows_its_problem_type_and_field() {
    let line = json!({
        "timestamp": "2026-01-01T00:00:00.500000Z", "level": "INFO", "message": "A request was answered.",
        "route": "/v1/designs", "method": "POST", "status": "422", "problem": "invalid-field", "field": "netlist",
        "spans": [{"name": "request", "function": "api", "correlation_id": "c-1"}],
    })
    .to_string();
    assert_eq!(parse(&line, "c-1").unwrap().outcome.as_deref(), Some("HTTP 422 invalid-field (netlist)"));
}
