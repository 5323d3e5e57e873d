//! `openqq trace` against the log file of a real `openqq up`: a design submitted under a chosen
//! correlation id is followed through the API and the three consumer functions in order, each
//! consumer hop with the event kind it handled; a design whose record is dead-lettered shows the
//! dead letter; an id nothing logged is said to be absent.

use openqq_adapters::{Durability, EmbeddedEventLog, EmbeddedObjectStore};
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::{
    CorrelationId, DesignId, DesignSpec, Envelope, EventKind, EventLog, ObjectStore, Record, TenantId, Topics,
};
use openqq_e2e::{blink_design, openqq_bin, stdout_of, Client, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

const PARTITIONS: &str = "4";

/// Runs `openqq trace ARGS --data-dir DATA_DIR`.
fn trace(data_dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(openqq_bin())
        .arg("trace")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("openqq trace runs")
}

/// The JSON trace of `id` once `done` holds for it (lines are written as the hops finish, a
/// little after the design's status changes), or the last one read when `within` ran out.
async fn trace_until(data_dir: &Path, id: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let got: Value = serde_json::from_str(&stdout_of(&trace(data_dir, &[id, "--json"]))).unwrap();
        if done(&got) || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The consumer hops of a trace (each record's line: it names an offset and an outcome) as
/// (function, kind, outcome).
fn record_hops(trace: &Value) -> Vec<(String, String, String)> {
    let field = |h: &Value, k: &str| h[k].as_str().unwrap_or_default().to_owned();
    let hops = trace["hops"].as_array().unwrap().iter().filter(|h| h["offset"].is_u64() && h["outcome"].is_string());
    hops.map(|h| (field(h, "function"), field(h, "kind"), field(h, "outcome"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlated_design_is_traced_through_the_four_services_in_order_with_their_event_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--partitions", PARTITIONS]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let id = "trace-e2e-ready-1";
    let design = acme.submit_correlated(&blink_design("traced"), id).await.unwrap();
    acme.wait_for(&design, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();

    let got =
        trace_until(dir.path(), id, Duration::from_secs(10), |t| t["services"].as_array().unwrap().len() == 4).await;
    assert_eq!(got["services"], json!(["api", "design-job", "validation", "results"]), "{got:#}");
    let applied = |f: &str, k: &str| (f.to_owned(), k.to_owned(), "applied".to_owned());
    assert_eq!(
        record_hops(&got),
        [
            applied("design-job", "design.submitted"),
            applied("validation", "validation.requested"),
            applied("results", "validation.finished")
        ],
        "{got:#}"
    );
    for hop in got["hops"].as_array().unwrap().iter().filter(|h| h["offset"].is_u64() && h["outcome"].is_string()) {
        assert_eq!(hop["design_id"], design.as_str(), "{hop}");
        assert_eq!(hop["tenant_id"], "acme", "{hop}");
        assert!(hop["partition"].is_u64() && hop["offset"].is_u64() && hop["elapsed_ms"].is_f64(), "{hop}");
    }
    assert_eq!(got["dead_letters"], json!([]));
    let hops = got["hops"].as_array().unwrap();
    let request = hops.iter().find(|h| h["route"].is_string()).unwrap_or_else(|| panic!("no request line: {got:#}"));
    assert_eq!(hops[0]["function"], "api", "the request comes first: {got:#}");
    assert_eq!((&request["function"], &request["route"]), (&json!("api"), &json!("POST /v1/designs")), "{got:#}");
    assert_eq!(request["outcome"], "HTTP 202", "{got:#}");

    let table = stdout_of(&trace(dir.path(), &[id]));
    assert!(table.contains("api → design-job → validation → results"), "{table}");
    assert!(table.contains(&format!("Design {design} of tenant acme")), "{table}");

    // A refused request's trace is its one API line, naming the problem the client was sent.
    let refused = acme.http.post(format!("{}/v1/designs", server.url)).bearer_auth(server.token("acme"));
    let refused = refused.header("x-correlation-id", "trace-e2e-refused").json(&json!({"name": "broken"}));
    let status = refused.send().await.unwrap().status().as_u16();
    let got = trace_until(dir.path(), "trace-e2e-refused", Duration::from_secs(10), |t| {
        !t["hops"].as_array().unwrap().is_empty()
    })
    .await;
    let outcomes: Vec<&str> = got["hops"].as_array().unwrap().iter().filter_map(|h| h["outcome"].as_str()).collect();
    assert_eq!(outcomes.len(), 1, "{got:#}");
    assert!(outcomes[0].starts_with(&format!("HTTP {status} ")), "the status and the problem type: {got:#}");
    assert_eq!(got["services"], json!(["api"]), "{got:#}");

    let nothing = stdout_of(&trace(dir.path(), &["trace-e2e-never-sent"]));
    assert!(nothing.starts_with("No log line names correlation id trace-e2e-never-sent."), "{nothing}");
    // Another request's trace does not take this one's lines.
    let other = acme.submit_correlated(&blink_design("other"), "trace-e2e-ready-10").await.unwrap();
    acme.wait_for(&other, Duration::from_secs(30), |d| d["status"] == "ready").await.unwrap();
    let again = trace_until(dir.path(), id, Duration::ZERO, |_| true).await;
    assert_eq!(record_hops(&again).len(), 3, "{again:#}");
}

/// A submission of `design_id` under `correlation_id` whose netlist is by reference to an object
/// the store does not hold: the validation function can never succeed and dead-letters it.
async fn submission_of_a_missing_netlist(tenant: &TenantId, design_id: &DesignId, correlation_id: &str) -> Record {
    let mut design = blink_design("poisoned");
    let netlist = serde_json::to_vec(&design["netlist"]).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let reference = EmbeddedObjectStore::open(scratch.path()).unwrap().put(tenant, netlist).await.unwrap();
    design.as_object_mut().unwrap().remove("netlist");
    design["netlist_ref"] = json!(reference);
    let spec: DesignSpec = serde_json::from_value(design).unwrap();
    let cause = Origin {
        tenant_id: tenant.clone(),
        design_id: design_id.clone(),
        revision: 1,
        correlation_id: CorrelationId::parse(correlation_id).unwrap(),
        batch: None,
    };
    Envelope::new(EventKind::DesignSubmitted, &cause, "api", DesignSubmitted { spec, checks: None }).to_record()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_record_shows_in_its_trace_with_the_function_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::parse("acme").unwrap();
    let design = DesignId::generate();
    let id = "trace-e2e-poison-1";
    {
        let log = EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap();
        let poison = submission_of_a_missing_netlist(&tenant, &design, id).await;
        log.publish(&Topics::default().of(EventKind::DesignSubmitted), vec![poison]).await.unwrap();
    }
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--partitions", PARTITIONS]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    acme.wait_for(design.as_str(), Duration::from_secs(30), |d| d["status"] == "failed").await.unwrap();

    let got =
        trace_until(dir.path(), id, Duration::from_secs(10), |t| !t["dead_letters"].as_array().unwrap().is_empty())
            .await;
    let letters = got["dead_letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "{got:#}");
    assert_eq!(letters[0]["function"], "validation");
    assert_eq!(letters[0]["kind"], "validation.requested");
    assert!(letters[0]["reason"].as_str().unwrap().contains("is not in the object store"), "{got:#}");
    assert_eq!(
        record_hops(&got),
        [
            ("design-job".to_owned(), "design.submitted".to_owned(), "applied".to_owned()),
            ("validation".to_owned(), "validation.requested".to_owned(), "dead_lettered".to_owned()),
        ],
        "{got:#}"
    );
    let table = stdout_of(&trace(dir.path(), &[id]));
    let section = table.split("Dead letters:\n").nth(1).unwrap_or_else(|| panic!("no dead letters in {table}"));
    assert!(section.contains("validation gave up on validation.requested at partition"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_dead_lettered_after_every_retry_show_in_their_trace() {
    // The consumer functions are invoked at an address where nothing listens: every batch fails
    // and, with no retries, goes to the dead-letter topic at once.
    let dir = tempfile::tempdir().unwrap();
    let args =
        ["--partitions", PARTITIONS, "--invoke", "http://127.0.0.1:9", "--max-retries", "0", "--give-up-after", "0s"];
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let id = "trace-e2e-exhausted-1";
    let design = acme.submit_correlated(&blink_design("unreachable"), id).await.unwrap();
    acme.wait_for(&design, Duration::from_secs(30), |d| d["status"] == "failed").await.unwrap();

    let got =
        trace_until(dir.path(), id, Duration::from_secs(10), |t| !t["dead_letters"].as_array().unwrap().is_empty())
            .await;
    let letters = got["dead_letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "{got:#}");
    assert_eq!((&letters[0]["function"], &letters[0]["kind"]), (&json!("design-job"), &json!("design.submitted")));
    assert!(letters[0]["reason"].as_str().unwrap().starts_with("retries exhausted"), "{got:#}");
    assert!(letters[0]["offset"].is_u64() && letters[0]["partition"].is_u64(), "{got:#}");
}

#[test]
fn the_aws_trace_is_a_logs_insights_query_over_the_four_functions_log_groups() {
    let out = std::process::Command::new(openqq_bin())
        .args(["trace", "--aws", "--stack", "prod", "trace-e2e-aws"])
        .output()
        .expect("openqq trace runs");
    let text = stdout_of(&out);
    for group in [
        "/aws/lambda/prod-api",
        "/aws/lambda/prod-design-job",
        "/aws/lambda/prod-validation",
        "/aws/lambda/prod-results",
    ] {
        assert!(text.contains(group), "{group} in {text}");
    }
    assert!(
        text.contains(r#"filter correlation_id = "trace-e2e-aws" or span.correlation_id = "trace-e2e-aws""#),
        "{text}"
    );
}
