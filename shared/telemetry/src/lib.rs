//! Telemetry set up once per binary: structured logs through `tracing` and Prometheus metrics
//! through the `metrics` facade.
//!
//! Metric names follow `openqq_<name>_<unit>[_total]`; label values come from bounded sets
//! (route templates, status codes, function and event-kind names, partitions). Log messages are
//! sentences; spans carry `correlation_id`, `tenant_id`, `design_id` and `function`.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;
use tracing_subscriber::{fmt, EnvFilter};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line, for machines (the default on Lambda and in production).
    Json,
    /// Readable lines, for a developer's terminal.
    Pretty,
}

/// Installs the global subscriber. Filter from `RUST_LOG`, default `info`. Calling it twice is
/// harmless (the second call does nothing).
pub fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}

/// Latency buckets (seconds) for every `*_seconds` histogram: 1 ms to 10 s.
const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The crate version of this build.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit this build was made from: `OPENQQ_BUILD_COMMIT` when it was built (the deployment
/// sets it, e.g. `OPENQQ_BUILD_COMMIT=$(git rev-parse --short HEAD) sam build`), else `dev`. A
/// deploy changes it, and with it `openqq_build_info`'s labels: that change is the dashboards'
/// deploy marker.
pub const COMMIT: &str = match option_env!("OPENQQ_BUILD_COMMIT") {
    Some(commit) => commit,
    None => "dev",
};

/// `openqq_build_info` as one CloudWatch embedded-metric-format log line (namespace `OpenQQ`,
/// dimensions service, version and commit), for processes nothing scrapes: a Lambda function
/// writes it to stdout once per cold start, and CloudWatch turns it into the same gauge.
pub fn build_info_emf(service: &str, at_ms: u128) -> String {
    format!(
        concat!(
            r#"{{"_aws":{{"Timestamp":{at},"CloudWatchMetrics":[{{"Namespace":"OpenQQ","Dimensions":[["service","version","commit"]],"#,
            r#""Metrics":[{{"Name":"openqq_build_info","Unit":"None"}}]}}]}},"service":"{service}","version":"{version}","commit":"{commit}","openqq_build_info":1}}"#
        ),
        at = at_ms,
        service = service.escape_default(),
        version = VERSION,
        commit = COMMIT.escape_default(),
    )
}

/// Installs the Prometheus recorder (once per process) and returns the handle that renders the
/// scrape page. Also records the build-info gauge whose changes mark deploys, and starts the
/// recorder's upkeep when a Tokio runtime is running.
pub fn metrics(service: &str) -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .expect("buckets are not empty")
                .install_recorder()
                .expect("no other metrics recorder is installed");
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let h = handle.clone();
                rt.spawn(async move {
                    let mut tick = tokio::time::interval(Duration::from_secs(5));
                    loop {
                        tick.tick().await;
                        h.run_upkeep();
                    }
                });
            }
            metrics::gauge!("openqq_build_info", "service" => service.to_owned(), "version" => VERSION, "commit" => COMMIT)
                .set(1.0);
            handle
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_info_line_is_a_cloudwatch_embedded_metric_with_the_builds_labels() {
        let line = build_info_emf("api", 1_796_040_000_000);
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["_aws"]["Timestamp"], 1_796_040_000_000u64);
        let spec = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(spec["Namespace"], "OpenQQ");
        assert_eq!(spec["Dimensions"][0], serde_json::json!(["service", "version", "commit"]));
        assert_eq!(spec["Metrics"][0]["Name"], "openqq_build_info");
        assert_eq!(
            (&v["service"], &v["version"], &v["commit"]),
            (&serde_json::json!("api"), &serde_json::json!(VERSION), &serde_json::json!(COMMIT))
        );
        assert_eq!(v["openqq_build_info"], 1);
    }
}
