//! Helpers for driving the platform: in process ([`app::App`], built by the same platform builder
//! as `openqq up`) or as a real `openqq up` process ([`Server`], for tests that kill, restart or
//! signal it), on port 0 with a temporary data dir; issue tokens, submit designs and wait for
//! results.
//!
//! The binary is found next to the test executable (`target/<profile>/openqq`), or at
//! `OPENQQ_BIN`; build it first (`cargo build --bin openqq`), as the test script does.

pub mod ack_dropper;
pub mod app;
pub mod aws;
pub mod batches;
pub mod cargo_lambda;
pub mod chaos;
pub mod disk;
pub mod hdl;
pub mod noisy;
pub mod ordering;
pub mod overload;
pub mod prometheus;
pub mod slow_client;
pub mod tansu;
pub mod throttler;
pub mod throughput;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use app::App;

/// The `openqq` binary under test.
pub fn openqq_bin() -> PathBuf {
    if let Ok(p) = std::env::var("OPENQQ_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test knows where it runs");
    let profile_dir = exe.parent().and_then(Path::parent).expect("tests run from target/<profile>/deps");
    let bin = profile_dir.join("openqq");
    assert!(bin.exists(), "{} is missing: run `cargo build --bin openqq` first (the test script does)", bin.display());
    bin
}

/// The release build of `openqq` at `OPENQQ_RELEASE_BIN` (the test script builds it), for the
/// suites whose verdicts depend on speed the way a deployment's do; the debug build otherwise.
pub fn openqq_release_bin() -> PathBuf {
    match std::env::var("OPENQQ_RELEASE_BIN") {
        Ok(p) => PathBuf::from(p),
        Err(_) => {
            eprintln!("OPENQQ_RELEASE_BIN is not set: using the debug build, several times slower per request");
            openqq_bin()
        }
    }
}

/// A function's Lambda binary (`api`, `design-job`, `validation`, `results`), built beside
/// `openqq` (`cargo build --workspace --bins`, as the test script does).
pub fn function_bin(name: &str) -> PathBuf {
    let bin = openqq_bin().with_file_name(name);
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (the test script does)",
        bin.display()
    );
    bin
}

/// The sum of a counter's series in a Prometheus text exposition, over the series whose labels
/// include every one of `labels` (written `name="value"`).
pub fn counter_sum(metrics: &str, counter: &str, labels: &[&str]) -> f64 {
    let prefix = format!("{counter}{{");
    metrics
        .lines()
        .filter(|l| l.starts_with(&prefix) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Whether `args` choose where `/metrics` is served (`--metrics-listen ADDR` or `=ADDR`).
pub fn names_metrics_listen(args: &[&str]) -> bool {
    args.iter().any(|a| *a == "--metrics-listen" || a.starts_with("--metrics-listen="))
}

/// A running `openqq up`.
pub struct Server {
    child: Child,
    pub url: String,
    /// Its `/metrics` page, on a listener apart from the API (a free port unless the test chose
    /// one with `--metrics-listen`); `None` with `--metrics-listen off`.
    pub metrics_url: Option<String>,
    pub data_dir: PathBuf,
    pub extra_args: Vec<String>,
    /// Environment variables set for the process (secrets, say), kept across restarts.
    pub env: Vec<(String, String)>,
    /// The `openqq` build it runs, kept across restarts.
    bin: PathBuf,
}

impl Server {
    /// Starts `openqq up` on `listen` (use `127.0.0.1:0` for a free port) and waits for its URL.
    pub fn start(data_dir: &Path, listen: &str, extra_args: &[&str]) -> Result<Self> {
        Self::start_with_env(data_dir, listen, extra_args, &[])
    }

    /// [`Server::start`] with environment variables for the process.
    pub fn start_with_env(data_dir: &Path, listen: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Result<Self> {
        Self::start_bin(&openqq_bin(), data_dir, listen, extra_args, env)
    }

    /// [`Server::start_with_env`] with another build of `openqq` (a release build, say).
    pub fn start_bin(
        bin: &Path,
        data_dir: &Path,
        listen: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let mut child = Command::new(bin)
            .arg("up")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg(listen)
            .args(["--batch-window", "50ms", "--log-format", "json"])
            .args(match names_metrics_listen(extra_args) {
                true => &[][..],
                false => &["--metrics-listen", "127.0.0.1:0"][..],
            })
            .args(extra_args)
            .env("RUST_LOG", std::env::var("OPENQQ_TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .env_remove("OPENQQ_JWT_SECRET")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawning openqq up")?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).context("reading the ready line")?;
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .ok_or_else(|| anyhow!("openqq up did not print its URL; it printed {line:?}"))?
            .to_owned();
        let metrics_url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://") && w.ends_with("/metrics)"))
            .map(|w| w.trim_end_matches(')').to_owned());
        Ok(Self {
            child,
            url,
            metrics_url,
            data_dir: data_dir.to_owned(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            bin: bin.to_owned(),
        })
    }

    /// The `/metrics` page's URL; panics when the server serves none (`--metrics-listen off`).
    pub fn metrics(&self) -> &str {
        self.metrics_url.as_deref().expect("the server serves /metrics (not --metrics-listen off)")
    }

    /// The Prometheus text of `/metrics`, scraped now.
    pub async fn scrape(&self) -> String {
        reqwest::get(self.metrics()).await.expect("a scrape").text().await.expect("a scrape's body")
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("the URL has a port")
    }

    /// SIGKILL: no chance to flush or drain anything.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        let status = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status()?;
        if !status.success() {
            bail!("kill -TERM failed");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            if Instant::now() > deadline {
                bail!("openqq did not exit within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Restarts on the same data dir and port.
    pub fn restart(&mut self) -> Result<()> {
        let listen = format!("127.0.0.1:{}", self.port());
        let args: Vec<&str> = self.extra_args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Server::start_bin(&self.bin.clone(), &self.data_dir.clone(), &listen, &args, &env) {
                Ok(new) => {
                    // The old process is already gone; dropping it just reaps it.
                    drop(std::mem::replace(self, new));
                    return Ok(());
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restart failed ({e:#}); retrying");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The server process's memory from `/proc`: (resident now, peak resident), in MiB.
    pub fn rss_mib(&self) -> (f64, f64) {
        let mib = self.status_mib(&["VmRSS:", "VmHWM:"]);
        (mib[0], mib[1])
    }

    /// The resident memory of the server in MiB, split: anonymous (heap, stacks) and file-backed
    /// (mapped files: the binary, and the databases, which are read through a memory map).
    pub fn rss_parts_mib(&self) -> (f64, f64) {
        let mib = self.status_mib(&["RssAnon:", "RssFile:"]);
        (mib[0], mib[1])
    }

    /// `fields` of the server's `/proc/<pid>/status` (kB values) in MiB; NaN where missing.
    fn status_mib(&self, fields: &[&str]) -> Vec<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = |field: &str| {
            let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_default();
            line.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN)
        };
        fields.iter().map(|f| kib(f) / 1024.0).collect()
    }

    /// A token for `tenant` from `openqq token` on the same data dir.
    pub fn token(&self, tenant: &str) -> String {
        let out = Command::new(openqq_bin())
            .args(["token", "--tenant", tenant, "--data-dir"])
            .arg(&self.data_dir)
            .env_remove("OPENQQ_JWT_SECRET")
            .output()
            .expect("openqq token runs");
        assert!(out.status.success(), "openqq token failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The repository root (for fixtures).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// `name` on the `PATH`, if it is there.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

/// What a suite needs from the test script (a tool, a build), or `None` to skip: its absence
/// fails the test under CI (`CI` set) and skips it elsewhere, saying `what` is missing and `how`
/// to get it.
pub fn needed<T>(found: Option<T>, what: &str, how: &str) -> Option<T> {
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "missing: {what} ({how})");
        eprintln!("SKIPPED, missing: {what} ({how})");
    }
    found
}

/// The standard output of a command that must have succeeded (its output is shown if it did not).
pub fn stdout_of(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "the command failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A small real design: the `blink` netlist synthesised by yosys for hx8k/ct256, with its PCF.
pub fn blink_design(name: &str) -> Value {
    let root = repo_root().join("shared/fpga/fixtures/bad");
    let netlist: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("netlists/blink.json")).unwrap()).unwrap();
    let pcf = std::fs::read_to_string(root.join("cases/good_blink.pcf")).unwrap();
    json!({
        "name": name,
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": netlist,
        "constraints": {"format": "pcf", "text": pcf},
    })
}

/// [`blink_design`] without the library cells yosys writes as blackbox modules: the same
/// design (it validates the same), 6 KB instead of 200 KB. For runs that put hundreds of
/// records on a log with a small retention, like librdkafka's mock cluster (5 MB a partition).
pub fn compact_blink_design(name: &str) -> Value {
    throughput::compact(blink_design(name))
}

/// The SHA-256 of `bytes` in lowercase hex, as uploads are named.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// An HTTP client for one tenant.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Client {
    pub fn new(base: &str, token: &str) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
        Self { http, base: base.to_owned(), token: token.to_owned() }
    }

    pub async fn get(&self, path: &str) -> Result<(u16, Value)> {
        let resp = self.http.get(format!("{}{path}", self.base)).bearer_auth(&self.token).send().await?;
        let status = resp.status().as_u16();
        let body = resp.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    /// GETs `path` until it answers 200 within `within`: a backend may be briefly unavailable
    /// (503), or slow enough under throttling that one request outlives the client's timeout.
    pub async fn get_ok(&self, path: &str, within: Duration) -> Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            match self.get(path).await {
                Ok((200, body)) => return Ok(body),
                Ok((status, body)) if status < 500 || Instant::now() > deadline => {
                    bail!("GET {path} answered {status}: {body}")
                }
                Err(e) if Instant::now() > deadline => return Err(e.context(format!("GET {path}"))),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn delete(&self, path: &str) -> Result<(u16, Value)> {
        let resp = self.http.delete(format!("{}{path}", self.base)).bearer_auth(&self.token).send().await?;
        let status = resp.status().as_u16();
        Ok((status, resp.json::<Value>().await.unwrap_or(Value::Null)))
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value)> {
        let resp = self.http.post(format!("{}{path}", self.base)).bearer_auth(&self.token).json(body).send().await?;
        let status = resp.status().as_u16();
        Ok((status, resp.json::<Value>().await.unwrap_or(Value::Null)))
    }

    /// Submits `design` as a new design under the client's own `correlation_id` and returns the
    /// design id; anything but a 202 is an error.
    pub async fn submit_correlated(&self, design: &Value, correlation_id: &str) -> Result<String> {
        self.submit_keyed(design, correlation_id, None).await
    }

    /// [`Client::submit_correlated`], with an `Idempotency-Key` when `key` is given.
    pub async fn submit_keyed(&self, design: &Value, correlation_id: &str, key: Option<&str>) -> Result<String> {
        let mut request = self
            .http
            .post(format!("{}/v1/designs", self.base))
            .bearer_auth(&self.token)
            .header("x-correlation-id", correlation_id);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let resp = request.json(design).send().await?;
        let status = resp.status().as_u16();
        let body = resp.json::<Value>().await.unwrap_or(Value::Null);
        if status != 202 {
            bail!("the submission was answered {status}: {body}");
        }
        body["design_id"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("the 202 names no design_id: {body}"))
    }

    /// Polls a design until `done` holds for it, or fails after `within`.
    pub async fn wait_for(&self, design_id: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.get(&format!("/v1/designs/{design_id}")).await {
                Ok((200, v)) if done(&v) => return Ok(v),
                Ok((status, v)) => format!("{status} {v}"),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() > deadline {
                bail!("design {design_id} did not reach the expected state within {within:?}; last seen: {last}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
