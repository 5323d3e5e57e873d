//! Telemetry set up once per binary: structured logs through `tracing` and Prometheus metrics
//! through the `metrics` facade.
//!
//! Metric names follow `openqq_<name>_<unit>[_total]`; label values come from bounded sets
//! (route templates, status codes, function and event-kind names, partitions, and tenants capped
//! by [`tenants`]). docs/OBSERVABILITY.md is the contract: every metric, its type and label keys.
//! Log messages are sentences; spans carry `correlation_id`, `tenant_id`, `design_id` and
//! `function`.
//!
//! On Lambda, where nothing scrapes, [`emf`] records the same metrics and prints them as CloudWatch
//! embedded-metric-format lines at the end of each invocation, and [`lambda_logs`] writes logs in the
//! shape of Lambda's JSON log format.
//!
//! The build script embeds the git revision and build time; [`metrics`] exports them with the
//! process's start time as the deploy markers (`openqq_build_info`, `openqq_start_time_seconds`).

pub mod emf;
pub mod lambda_logs;
pub mod log_file;
pub mod tenants;

pub use tenants::{tenant_label, NO_TENANT, OTHER_TENANTS, TENANT_LABEL_CAP};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line, for machines (the default on Lambda and in production).
    Json,
    /// Readable lines, for a developer's terminal.
    Pretty,
}

/// Installs the global subscriber: stderr in `format`, filtered by `RUST_LOG` (default `info`),
/// and the [`log_file`] (JSON, `info` and up, once [`log_file::open`] names it). Calling it twice
/// is harmless (the second call does nothing).
pub fn init_logs(format: LogFormat) {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let stderr = fmt::layer().with_writer(std::io::stderr);
    let stderr = match format {
        LogFormat::Json => stderr
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter())
            .boxed(),
        LogFormat::Pretty => stderr.compact().with_filter(filter()).boxed(),
    };
    let _ = tracing_subscriber::registry().with(stderr).with(log_file::layer()).try_init();
}

/// Latency buckets (seconds) for every `*_seconds` histogram: 1 ms to 10 s.
const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Buckets of the histograms that count things per operation (names ending in `_calls`).
const COUNT_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The crate version of this build.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git revision this build was made from (the build script: `OPENQQ_BUILD_COMMIT` when set at
/// build time, else the checkout's `HEAD`, else `unknown` outside a checkout). A deploy changes
/// it, and with it `openqq_build_info`'s labels: that change is the dashboards' deploy marker.
pub const COMMIT: &str = env!("OPENQQ_BUILD_COMMIT");

/// When this build was made, in seconds since the Unix epoch (`SOURCE_DATE_EPOCH` when set).
pub const BUILD_TIME: &str = env!("OPENQQ_BUILD_TIME");

/// The revision this process reports: `OPENQQ_BUILD_COMMIT` at run time when set (an image built
/// outside a checkout is given its revision by the deployment), else [`COMMIT`].
pub fn revision() -> String {
    std::env::var("OPENQQ_BUILD_COMMIT").ok().filter(|c| !c.trim().is_empty()).unwrap_or_else(|| COMMIT.to_owned())
}

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
                .set_buckets_for_metric(Matcher::Suffix("_calls".into()), COUNT_BUCKETS)
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
            record_build_info(service);
            handle
        })
        .clone()
}

/// Sets `openqq_build_info{service, version, commit, build_time} 1` and
/// `openqq_start_time_seconds{service}`, the process's start (seconds since the Unix epoch): a new
/// revision's first start time is the deploy's time.
fn record_build_info(service: &str) {
    let labels = [
        ("service", service.to_owned()),
        ("version", VERSION.to_owned()),
        ("commit", revision()),
        ("build_time", BUILD_TIME.to_owned()),
    ];
    metrics::gauge!("openqq_build_info", &labels).set(1.0);
    let started = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    metrics::gauge!("openqq_start_time_seconds", "service" => service.to_owned()).set(started.floor());
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

    #[test]
    fn the_build_carries_a_revision_and_a_build_time() {
        assert!(!COMMIT.is_empty());
        // Built from this repository's checkout, so the build script found a revision.
        assert_ne!(COMMIT, "unknown", "the build script did not find the git revision");
        let built: u64 = BUILD_TIME.parse().expect("the build time is seconds since the epoch");
        assert!(built > 1_600_000_000, "{built}");
    }

    #[test]
    fn build_info_and_start_time_are_recorded_with_their_labels() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || record_build_info("api"));
        let page = handle.render();
        let info = page.lines().find(|l| l.starts_with("openqq_build_info{")).expect("build info rendered");
        for label in ["service=\"api\"", &format!("commit=\"{}\"", revision()), &format!("build_time=\"{BUILD_TIME}\"")]
        {
            assert!(info.contains(label), "{info} lacks {label}");
        }
        let start = page.lines().find(|l| l.starts_with("openqq_start_time_seconds{service=\"api\"}")).unwrap();
        let at: f64 = start.rsplit(' ').next().unwrap().parse().unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
        assert!((now - at).abs() < 60.0, "{start}");
    }
}
