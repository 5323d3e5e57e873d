//! The Lambda binaries under `cargo lambda watch` on 127.0.0.1: the emulator AWS's Rust tooling
//! ships, serving the Lambda Runtime API to each function's `bootstrap` (`openqq-lambda`'s bins
//! `api`, `design-job`, `validation` and `results`, started by `cargo run` on their first
//! invocation) and the Invoke API (`POST /2015-03-31/functions/{name}/invocations`) that hands a
//! function one event and answers with what it returned. Tests invoke with [`Watch::invoke`];
//! `openqq up --invoke` uses the same Invoke API at [`Watch::url`].
//!
//! `cargo-lambda` comes from PyPI (the test script installs it); it is found at
//! `OPENQQ_TEST_CARGO_LAMBDA` or as `cargo-lambda` on the `PATH`. The functions are built by the
//! test script beforehand (`cargo build -p openqq-lambda --bins -F dev-build`, which reuses every
//! dependency the workspace build compiled), so the first invocation only starts them.

use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `cargo lambda watch`; stopped (with its functions) when dropped.
pub struct Watch {
    /// `http://127.0.0.1:PORT`, the Invoke API's base URL.
    pub url: String,
    child: Child,
    http: reqwest::Client,
}

/// The `cargo-lambda` executable; `None` when absent outside CI.
pub fn cargo_lambda() -> Option<PathBuf> {
    let found =
        std::env::var_os("OPENQQ_TEST_CARGO_LAMBDA").map(PathBuf::from).or_else(|| crate::on_path("cargo-lambda"));
    crate::needed(found, "cargo-lambda", "set OPENQQ_TEST_CARGO_LAMBDA; scripts/test.sh installs it")
}

impl Watch {
    /// Starts `cargo lambda watch` for the functions, each started with `env` (and nothing
    /// else of this process's `OPENQQ_*` variables), and waits until its Invoke API answers.
    pub fn start(cargo_lambda: &Path, env: &[(String, String)]) -> Self {
        build_functions_once();
        // The port is free when picked, but another process may bind it before the watcher does;
        // then the watcher exits, and it starts again on another.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut watch = Self::spawn(cargo_lambda, env, free_port());
            match watch.until_it_answers(Duration::from_secs(60)) {
                Ok(()) => return watch,
                Err(e) if attempts < 3 => eprintln!("{e}; starting it again"),
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn spawn(cargo_lambda: &Path, env: &[(String, String)], port: u16) -> Self {
        let mut cmd = Command::new(cargo_lambda);
        // `dev-build`: the dependencies as the workspace build made them, so nothing compiles here.
        cmd.args([
            "lambda",
            "watch",
            "--package",
            "openqq-lambda",
            "--features",
            "dev-build",
            "--ignore-changes",
            "--quiet",
        ])
        .args(["--invoke-address", "127.0.0.1", "--invoke-port", &port.to_string()])
        .current_dir(crate::repo_root())
        .process_group(0);
        for (var, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_")) {
            cmd.env_remove(var);
        }
        // The functions' logs, and what they print when the watcher stops under them, only
        // when asked for (OPENQQ_TEST_LOG=info, say).
        let log = std::env::var("OPENQQ_TEST_LOG").ok();
        let child = cmd
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RUST_LOG", log.as_deref().unwrap_or("error"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if log.is_some() { Stdio::inherit() } else { Stdio::null() })
            .spawn()
            .unwrap_or_else(|e| panic!("starting {} lambda watch: {e}", cargo_lambda.display()));
        Self { url: format!("http://127.0.0.1:{port}"), child, http: reqwest::Client::new() }
    }

    /// Waits until the emulator answers HTTP on its port (any status: an open port alone could be
    /// a listener that is not serving yet, or not this one); an error if it exited first.
    fn until_it_answers(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the watcher's status can be read") {
                return Err(format!("cargo lambda watch exited ({status}) before it answered on {}", self.url));
            }
            if answers_http(&self.url) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("cargo lambda watch did not answer on {} within {within:?}", self.url));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Invokes `function` with `event` through the Invoke API: what it returned, or the error it
    /// reported (`X-Amz-Function-Error`).
    pub async fn invoke(&self, function: &str, event: &Value, within: Duration) -> Result<Value, Value> {
        let url = format!("{}/2015-03-31/functions/{function}/invocations", self.url);
        // A refused connection means the request was never sent, so it is tried again; any other
        // failure is the answer (an invocation is not repeated: it may have run).
        let deadline = Instant::now() + Duration::from_secs(10);
        let resp = loop {
            match self.http.post(&url).timeout(within).json(event).send().await {
                Ok(resp) => break resp,
                Err(e) if e.is_connect() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("invoking {function}: {}", openqq_core::error::with_causes(&e)),
            }
        };
        let failed = resp.headers().contains_key("x-amz-function-error") || !resp.status().is_success();
        let status = resp.status();
        let body = resp.text().await.unwrap_or_else(|e| panic!("reading {function}'s answer: {e}"));
        let value = serde_json::from_str(&body).unwrap_or(Value::String(format!("{status}: {body}")));
        if failed {
            Err(value)
        } else {
            Ok(value)
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // The watcher, the `cargo run`s it started and the functions share one process group.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// Whether something at `url` (`http://HOST:PORT`) answers a plain HTTP request with a status line.
fn answers_http(url: &str) -> bool {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://");
    let ask = || -> std::io::Result<bool> {
        let mut stream = std::net::TcpStream::connect(host)?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        write!(stream, "GET /2015-03-31/functions HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 7];
        stream.read_exact(&mut head)?;
        Ok(&head == b"HTTP/1.")
    };
    ask().unwrap_or(false)
}

/// Builds the functions as the watcher's `cargo run` does, once per test process, so that no
/// invocation waits for a compile: a function the watcher has to build first can keep an
/// invocation waiting past what the watcher allows. Nothing compiles when the test command built
/// them (it does, beforehand); after a change it compiles here, with the output shown.
fn build_functions_once() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "openqq-lambda", "--bins", "--features", "dev-build"])
            .current_dir(crate::repo_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the Lambda functions failed ({status})");
    });
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
