//! A real Kafka-protocol broker for the Kafka suites: tansu (SQLite storage) in a process of
//! its own, so a test can SIGKILL and restart it on the same storage.
//!
//! The binary is `OPENQQ_TANSU_BIN`, or `tansu` on the PATH; the test command exports it
//! (`scripts/services/tansu.sh bin` builds it once). Tests that only publish and read their own
//! topics share the broker the test command started (`OPENQQ_TEST_KAFKA_BROKERS`); tests that
//! kill the broker or put a proxy in front of it start a private one. Without tansu these
//! tests fail; they never skip.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tansu binary to run.
pub fn bin() -> PathBuf {
    if let Ok(p) = std::env::var("OPENQQ_TANSU_BIN") {
        return PathBuf::from(p);
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("tansu")).find(|p| p.is_file()));
    on_path.expect("tansu is needed: run `scripts/services/tansu.sh bin` and set OPENQQ_TANSU_BIN to the path it prints (the test command does)")
}

/// A tansu broker on 127.0.0.1, storing in a temporary directory.
pub struct Tansu {
    child: Option<Child>,
    pub port: u16,
    /// The port clients are told to connect to (a proxy's, when one sits in front).
    pub advertised_port: u16,
    dir: tempfile::TempDir,
    /// Clients must authenticate (SASL PLAIN or SCRAM, over plaintext: tansu has no TLS).
    authentication: bool,
}

impl Tansu {
    /// A private broker on a free port.
    pub fn start() -> Self {
        let port = free_port();
        Self::start_advertising(port, port)
    }

    /// A private broker on `port` that tells clients to connect to `advertised_port`.
    pub fn start_advertising(port: u16, advertised_port: u16) -> Self {
        let mut broker =
            Self { child: None, port, advertised_port, dir: tempfile::tempdir().unwrap(), authentication: false };
        broker.spawn();
        broker
    }

    /// The bootstrap address clients use.
    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.advertised_port)
    }

    fn spawn(&mut self) {
        let child = Command::new(bin())
            .current_dir(self.dir.path())
            .arg("broker")
            .args(["--listener-url", &format!("tcp://127.0.0.1:{}", self.port)])
            .args(["--advertised-listener-url", &format!("tcp://127.0.0.1:{}", self.advertised_port)])
            .args(["--storage-engine", "sqlite://tansu.db"])
            .args(self.authentication.then_some("--authentication"))
            .env("RUST_LOG", std::env::var("OPENQQ_TEST_TANSU_LOG").unwrap_or_else(|_| "error".into()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning tansu");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "tansu did not listen on {} within 20 s", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: whatever tansu had not written to its SQLite file is gone.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same port and storage.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Adds a SCRAM-SHA-512 user and restarts the broker requiring authentication. (Users are
    /// added through the Kafka API, which an authenticating broker refuses before a login.)
    pub fn require_scram_user(&mut self, name: &str, password: &str) {
        let out = Command::new(bin())
            .args([
                "user",
                "create",
                "--broker",
                &format!("tcp://127.0.0.1:{}", self.port),
                name,
                password,
                "--mechanism",
                "scram512",
            ])
            .output()
            .expect("running tansu user create");
        assert!(out.status.success(), "tansu user create failed: {}", String::from_utf8_lossy(&out.stderr));
        self.authentication = true;
        self.restart();
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The broker the test command started, or a private one kept alive by the returned guard.
pub fn shared() -> (Option<Tansu>, String) {
    match std::env::var("OPENQQ_TEST_KAFKA_BROKERS") {
        Ok(brokers) if !brokers.is_empty() => (None, brokers),
        _ => {
            let broker = Tansu::start();
            let brokers = broker.brokers();
            (Some(broker), brokers)
        }
    }
}

/// A port nothing listens on now (tansu panics when its port is taken).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
