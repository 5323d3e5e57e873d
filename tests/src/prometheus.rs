//! A Prometheus server for the observability suite: Debian's `prometheus` on 127.0.0.1 with the
//! shipped scrape config and alert rules (infra/prometheus), queried over its HTTP API.

use crate::repo_root;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Prometheus server on 127.0.0.1, stopped when dropped.
pub struct Prometheus {
    child: Child,
    pub url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's `prometheus` (or `OPENQQ_PROMETHEUS_BIN`); `None` when absent outside CI.
pub fn bin() -> Option<PathBuf> {
    let found = std::env::var_os("OPENQQ_PROMETHEUS_BIN").map(PathBuf::from).or_else(|| crate::on_path("prometheus"));
    crate::needed(found, "prometheus", "apt-get install prometheus; scripts/test.sh installs it")
}

impl Prometheus {
    /// Scrapes `target` (an `openqq up`'s metrics address, `--metrics-listen`) every second with
    /// the shipped scrape config and rules, the rules' `for:` durations shortened to 2 s so alerts
    /// fire within a test.
    pub async fn start(bin: &Path, target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let shipped = repo_root().join("infra/prometheus");
        let mut config = std::fs::read_to_string(shipped.join("prometheus.yml")).unwrap();
        for (from, to) in [
            ("scrape_interval: 5s", "scrape_interval: 1s"),
            ("evaluation_interval: 5s", "evaluation_interval: 1s"),
            ("127.0.0.1:9464", target),
        ] {
            assert!(config.contains(from), "infra/prometheus/prometheus.yml no longer has {from:?}");
            config = config.replace(from, to);
        }
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let rules = std::fs::read_to_string(shipped.join("rules.yml")).unwrap();
        let rules: String = rules
            .lines()
            .map(|l| match l.trim_start().strip_prefix("for: ") {
                Some(_) => format!("{}for: 2s\n", &l[..l.len() - l.trim_start().len()]),
                None => format!("{l}\n"),
            })
            .collect();
        std::fs::write(dir.path().join("rules.yml"), rules).unwrap();
        let port = crate::tansu::free_port();
        let log = dir.path().join("prometheus.log");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus starts");
        let p = Prometheus { child, url: format!("http://127.0.0.1:{port}"), log, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !reqwest::get(format!("{}/-/ready", p.url)).await.is_ok_and(|r| r.status().is_success()) {
            assert!(Instant::now() < deadline, "prometheus did not get ready: {}", p.logs());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        p
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        let url = format!("{}{path}?{}", self.url, query.join("&"));
        let v: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        assert_eq!(v["status"], "success", "{path} {params:?}: {v}");
        v["data"].clone()
    }

    /// An instant query's result vector.
    pub async fn query(&self, expr: &str) -> Vec<Value> {
        self.api("/api/v1/query", &[("query", expr)]).await["result"].as_array().unwrap().clone()
    }
}

/// Percent-encodes a query-string value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
