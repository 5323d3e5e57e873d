//! Observability end to end: the metrics a running `openqq up` exports match the contract in
//! docs/OBSERVABILITY.md (names, types, label keys); a flood of tenants cannot grow the `tenant`
//! label past its cap; and a live Prometheus scraping the server through a deploy and an incident
//! answers every dashboard panel of infra/grafana, names the culprit tenant and route, places the
//! deploy marker at the deploy, and fires the alert of infra/prometheus/rules.yml.

use openqq_adapters::{Durability, EmbeddedEventLog};
use openqq_core::event::Origin;
use openqq_core::{CorrelationId, DesignId, Envelope, EventKind, EventLog, TenantId, Topics};
use openqq_e2e::prometheus::Prometheus;
use openqq_e2e::{blink_design, repo_root, Client, Server};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A metric family: its type and the label keys of its series (`le` aside).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
}

/// The documented families, and whether the contract test must see each (rows whose *appears*
/// cell starts with "only" need conditions the test does not set up).
fn documented() -> BTreeMap<String, (Family, bool)> {
    let doc = std::fs::read_to_string(repo_root().join("docs/OBSERVABILITY.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in doc.lines().filter(|l| l.starts_with("| `openqq_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (name, kind, labels, appears) = (cells[1].trim_matches('`'), cells[2], cells[3], cells[4]);
        let labels = labels
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        let family = Family { kind: kind.to_owned(), labels };
        assert!(out.insert(name.to_owned(), (family, !appears.starts_with("only"))).is_none(), "{name} twice");
    }
    assert!(out.len() >= 20, "the metrics table of docs/OBSERVABILITY.md was not found");
    out
}

/// The `openqq_*` families of a Prometheus text exposition.
fn scraped(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.entry(name.to_owned()).or_insert(Family { kind: kind.to_owned(), labels: BTreeSet::new() });
        }
    }
    for line in text.lines().filter(|l| l.starts_with("openqq_")) {
        let series = line.rsplit_once(' ').unwrap().0;
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .find(|base| out.get(*base).is_some_and(|f| f.kind == "histogram"))
            .unwrap_or(name);
        let keys = label_pairs(labels.trim_end_matches('}')).into_iter().map(|(k, _)| k).filter(|k| k != "le");
        out.get_mut(family).unwrap_or_else(|| panic!("{family} has no TYPE line")).labels.extend(keys);
    }
    out.retain(|name, _| name.starts_with("openqq_"));
    out
}

/// `k="v",k2="v2"` as pairs (values may hold commas, braces and escaped quotes).
fn label_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, c)| c)),
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((key.trim_start_matches(',').to_owned(), value));
        rest = &after[end..];
    }
    out
}

/// The values of `label` over the series of `metric`.
fn label_values(text: &str, metric: &str, label: &str) -> BTreeSet<String> {
    let prefix = format!("{metric}{{");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .flat_map(|l| label_pairs(l.rsplit_once('}').unwrap().0))
        .filter(|(k, _)| k == label)
        .map(|(_, v)| v)
        .collect()
}

async fn scrape(server: &Server) -> String {
    server.scrape().await
}

/// Writes a `design.submitted` record no design-job version can read while the server is down,
/// so the restarted server dead-letters it.
async fn publish_unreadable_submission(data_dir: &Path) {
    let cause = Origin {
        tenant_id: TenantId::parse("acme").unwrap(),
        design_id: DesignId::generate(),
        revision: 1,
        correlation_id: CorrelationId::parse("corr-unreadable").unwrap(),
        batch: None,
    };
    let broken = Envelope::new(EventKind::DesignSubmitted, &cause, "api", json!({"spec": {"not": "a design"}}));
    let log = EmbeddedEventLog::open(data_dir, 4, Durability::Process).unwrap();
    log.publish(&Topics::default().of(EventKind::DesignSubmitted), vec![broken.to_record()]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exported_metrics_match_the_documented_contract() {
    let dir = tempfile::tempdir().unwrap();
    let limits = dir.path().join("rate-limits.txt");
    std::fs::write(&limits, "limited 1/1m\n").unwrap();
    let args = [
        "--partitions",
        "4",
        "--rate-limits",
        limits.to_str().unwrap(),
        "--webhooks-allow-private",
        "--workers",
        "1",
        "--queue",
        "0",
    ];
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    server.terminate().unwrap();
    publish_unreadable_submission(dir.path()).await;
    server.restart().unwrap();

    let hooked = Client::new(&server.url, &server.token("hooked"));
    // A webhook endpoint nobody listens on: the delivery of the submission fails and is retried.
    let closed = openqq_e2e::tansu::free_port();
    let hook = json!({"url": format!("http://127.0.0.1:{closed}/hook"), "kinds": ["design.submitted"]});
    let (status, body) = hooked.post("/v1/webhooks", &hook).await.unwrap();
    assert_eq!(status, 201, "{body}");
    let (status, _) = hooked.post("/v1/designs", &blink_design("hooked")).await.unwrap();
    assert_eq!(status, 202);
    // A batch: its items are weighed against the tenant's batch-item quota.
    let batch = json!({"name": "hooked", "items": [openqq_e2e::compact_blink_design("in-a-batch")]});
    let (status, body) = hooked.post("/v1/batches", &batch).await.unwrap();
    assert_eq!(status, 202, "{body}");
    // An upload: its PUT carries no bearer token, yet it counts under the tenant its URL names.
    let object = b"{}";
    let digest: String = Sha256::digest(object).iter().map(|b| format!("{b:02x}")).collect();
    let (status, grant) = hooked.post("/v1/uploads", &json!({"sha256": digest, "bytes": object.len()})).await.unwrap();
    assert_eq!(status, 200, "{grant}");
    let mut put = reqwest::Client::new().put(grant["upload"]["url"].as_str().unwrap()).body(object.to_vec());
    for (name, value) in grant["upload"]["headers"].as_object().into_iter().flatten() {
        put = put.header(name.as_str(), value.as_str().unwrap());
    }
    assert_eq!(put.send().await.unwrap().status(), 201);
    let limited = Client::new(&server.url, &server.token("limited"));
    limited.get("/v1/designs").await.unwrap();
    assert_eq!(limited.get("/v1/designs").await.unwrap().0, 429, "the second request is over the quota");

    let documented = documented();
    let acme = Client::new(&server.url, &server.token("acme"));
    let deadline = Instant::now() + Duration::from_secs(45);
    let exported = loop {
        // One worker and no queue: a burst of requests finds the pool full.
        let burst: Vec<_> = (0..24)
            .map(|_| {
                let acme = acme.clone();
                tokio::spawn(async move { acme.get("/v1/designs").await })
            })
            .collect();
        for request in burst {
            let _ = request.await;
        }
        let exported = scraped(&scrape(&server).await);
        let missing: Vec<&String> = documented
            .iter()
            .filter(|(name, (_, required))| *required && !exported.contains_key(*name))
            .map(|(n, _)| n)
            .collect();
        if missing.is_empty() {
            break exported;
        }
        assert!(Instant::now() < deadline, "documented metrics never appeared: {missing:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let uploads = openqq_e2e::counter_sum(
        &scrape(&server).await,
        "openqq_http_requests_total",
        &["route=\"/v1/uploads/{digest}\"", "status=\"201\"", "tenant=\"hooked\""],
    );
    assert_eq!(uploads, 1.0, "the upload counts under its tenant");
    let undocumented: Vec<&String> = exported.keys().filter(|n| !documented.contains_key(*n)).collect();
    assert!(undocumented.is_empty(), "exported but not in docs/OBSERVABILITY.md: {undocumented:?}");
    for (name, family) in &exported {
        assert_eq!(family, &documented[name].0, "{name}: exported (left) and documented (right) differ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_tenants_adds_no_tenant_label_values_past_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let flood = openqq_telemetry_cap() + 30;
    for i in 0..flood {
        let c = Client::new(&server.url, &server.token(&format!("flood-{i:03}")));
        assert_eq!(c.get("/v1/designs").await.unwrap().0, 200);
    }
    let text = scrape(&server).await;
    for metric in ["openqq_http_requests_total", "openqq_limiter_decisions_total"] {
        let tenants = label_values(&text, metric, "tenant");
        let flooders: Vec<&String> = tenants.iter().filter(|t| t.starts_with("flood-")).collect();
        assert_eq!(flooders.len(), openqq_telemetry_cap(), "{metric}: the first tenants keep their label");
        assert!(tenants.contains("flood-000") && !tenants.contains(&format!("flood-{:03}", flood - 1)), "{metric}");
        assert!(tenants.contains("(other)"), "{metric}: later tenants are counted as (other): {tenants:?}");
        assert!(tenants.len() <= openqq_telemetry_cap() + 2, "{metric}: {} values", tenants.len());
    }
    let others = openqq_e2e::counter_sum(&text, "openqq_http_requests_total", &["tenant=\"(other)\""]);
    assert_eq!(others, 30.0, "every request past the cap is still counted");
}

/// The cap of docs/OBSERVABILITY.md ("the first 100 distinct tenants").
fn openqq_telemetry_cap() -> usize {
    100
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A dashboard of infra/grafana as the test reads it.
struct Dashboard {
    file: String,
    /// Each query with the title of its panel.
    panels: Vec<(String, String)>,
    annotations: Vec<String>,
}

/// Every dashboard of infra/grafana/dashboards.
fn dashboards() -> Vec<Dashboard> {
    let dir = repo_root().join("infra/grafana/dashboards");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let d: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut panels = Vec::new();
        for p in d["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().unwrap() {
                panels.push((p["title"].as_str().unwrap().to_owned(), t["expr"].as_str().unwrap().to_owned()));
            }
        }
        let annotations = d["annotations"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["expr"].as_str().map(str::to_owned))
            .collect();
        out.push(Dashboard { file: name, panels, annotations });
    }
    assert_eq!(out.len(), 5, "overview, by tenant, by endpoint, consumers, limiter");
    out
}

/// What Grafana would send: its interval variables and "All" for the dashboard variables.
fn as_grafana_sends(expr: &str) -> String {
    expr.replace("$__rate_interval", "30s").replace("$tenant", ".+").replace("$route", ".+")
}

/// The label `label` of the highest-valued series of an instant vector.
fn top(result: &[Value], label: &str) -> String {
    let value = |v: &Value| v["value"][1].as_str().unwrap().parse::<f64>().unwrap();
    let best = result.iter().max_by(|a, b| value(a).total_cmp(&value(b))).expect("a result");
    best["metric"][label].as_str().unwrap_or_default().to_owned()
}

/// Submits `design` again and again as `client` until `stop`.
fn keep_submitting(
    client: Client,
    design: Value,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut sent = 0;
        while !stop.load(Ordering::Relaxed) {
            let _ = client.post("/v1/designs", &design).await;
            sent += 1;
            tokio::time::sleep(every).await;
        }
        sent
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_prometheus_sees_the_deploy_and_names_the_tenant_and_route_of_the_incident() {
    let Some(bin) = openqq_e2e::prometheus::bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    // The metrics address is chosen here, so the release that replaces this one serves its
    // metrics where Prometheus scrapes.
    let metrics = format!("127.0.0.1:{}", openqq_e2e::tansu::free_port());
    let mut server = Server::start_with_env(
        dir.path(),
        "127.0.0.1:0",
        &["--partitions", "4", "--metrics-listen", &metrics],
        &[("OPENQQ_BUILD_COMMIT", "release-a")],
    )
    .unwrap();
    let prometheus = Prometheus::start(&bin, &metrics).await;
    let began = now_secs();

    // Release A serves two well-behaved tenants for a few scrapes.
    let stop = Arc::new(AtomicBool::new(false));
    let good = |tenant: &str, server: &Server, stop: &Arc<AtomicBool>| {
        let c = Client::new(&server.url, &server.token(tenant));
        keep_submitting(c, blink_design(tenant), Duration::from_millis(300), stop.clone())
    };
    let before = [good("good-1", &server, &stop), good("good-2", &server, &stop)];
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    for h in before {
        h.await.unwrap();
    }

    // The deploy: release B replaces release A on the same address.
    server.terminate().unwrap();
    server.env.retain(|(k, _)| k != "OPENQQ_BUILD_COMMIT");
    server.env.push(("OPENQQ_BUILD_COMMIT".into(), "release-b".into()));
    let deploying = now_secs();
    server.restart().unwrap();
    let deployed = now_secs();

    // The incident: after the deploy, one tenant's submissions are refused (invalid designs).
    let stop = Arc::new(AtomicBool::new(false));
    let culprit = Client::new(&server.url, &server.token("culprit"));
    let mut traffic = vec![good("good-1", &server, &stop), good("good-2", &server, &stop)];
    traffic.push(keep_submitting(
        culprit,
        json!({"name": "broken", "not": "a design"}),
        Duration::from_millis(100),
        stop.clone(),
    ));

    let deadline = Instant::now() + Duration::from_secs(40);
    let firing = loop {
        let alerts = prometheus.api("/api/v1/alerts", &[]).await["alerts"].as_array().unwrap().clone();
        let firing: Vec<Value> = alerts.into_iter().filter(|a| a["state"] == "firing").collect();
        if firing.iter().any(|a| a["labels"]["alertname"] == "HighTenantErrorRatio") {
            break firing;
        }
        assert!(Instant::now() < deadline, "the tenant error alert never fired: {firing:?}\n{}", prometheus.logs());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let tenant_alerts: Vec<(&str, &str)> = firing
        .iter()
        .filter(|a| a["labels"]["alertname"] == "HighTenantErrorRatio")
        .map(|a| (a["labels"]["tenant"].as_str().unwrap(), a["labels"]["route"].as_str().unwrap()))
        .collect();
    assert_eq!(tenant_alerts, [("culprit", "/v1/designs")], "only the culprit's route: {firing:?}");

    for Dashboard { file: dashboard, panels, annotations } in dashboards() {
        for (title, expr) in &panels {
            let result = prometheus.query(&as_grafana_sends(expr)).await;
            assert!(!result.is_empty(), "{dashboard}: panel {title:?} returned no data: {expr}");
            if title.starts_with("Top tenants by errors") {
                assert_eq!(top(&result, "tenant"), "culprit", "{dashboard}: {title}: {result:?}");
            }
            if title.starts_with("Top routes by errors") {
                assert_eq!(top(&result, "route"), "/v1/designs", "{dashboard}: {title}: {result:?}");
            }
        }
        // The deploy marker: where release B first appears.
        for expr in annotations {
            let (start, end) = (format!("{began:.0}"), format!("{:.0}", now_secs()));
            let range = prometheus
                .api("/api/v1/query_range", &[("query", &expr), ("start", &start), ("end", &end), ("step", "1")])
                .await;
            let series = range["result"].as_array().unwrap();
            let b = series
                .iter()
                .find(|s| s["metric"]["commit"] == "release-b")
                .unwrap_or_else(|| panic!("{dashboard}: no marker for release-b: {range}"));
            let first = b["values"][0][0].as_f64().unwrap();
            // Release B started between the two instants; the first scrape after it (1 s) sees it.
            assert!(
                first >= deploying - 1.0 && first <= deployed + 3.0,
                "{dashboard}: marker at {first}, deploy between {deploying} and {deployed}"
            );
            let a_after: Vec<&Value> = series
                .iter()
                .filter(|s| s["metric"]["commit"] == "release-a")
                .flat_map(|s| s["values"].as_array().unwrap())
                .filter(|v| v[0].as_f64().unwrap() > deployed + 1.0)
                .collect();
            assert!(a_after.is_empty(), "{dashboard}: release A is no deploy once release B runs: {a_after:?}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in traffic {
        h.await.unwrap();
    }
}
