//! What the chaos run starts and breaks: `openqq up` on a data dir (on a tmpfs it can fill, when
//! it may mount one), a redis-server of its own for the limiter, and in Kafka mode a tansu broker
//! of its own. Every piece is on 127.0.0.1 and can be stopped and started again.

use super::journal::Journal;
use super::Mode;
use crate::disk::Tmpfs;
use crate::tansu::{free_port, Tansu};
use crate::throttler::Throttler;
use crate::Server;
use openqq_adapters::{Durability, EmbeddedEventLog, KafkaEventLog, KafkaSettings};
use openqq_core::{EventKind, EventLog, Record, Topics};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const PARTITIONS: u32 = 6;

/// How long a killed `openqq up` stays down in Kafka mode: tansu can elect a member killed in the
/// middle of a join its group's leader, so a restart waits out the killed member's session
/// (docs/KAFKA.md, "Known broker differences").
const KAFKA_SESSION: Duration = Duration::from_secs(7);

/// A redis-server of the run's own on a fixed port, so it can stop and come back where the
/// platform looks for it.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
}

impl Redis {
    /// `None` when redis-server is not installed (the test command installs it).
    pub fn start() -> Option<Self> {
        crate::on_path("redis-server")?;
        let mut redis = Self { port: free_port(), child: None };
        redis.up();
        Some(redis)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn up(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen on {} within 10 s", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.down();
    }
}

pub struct Platform {
    pub mode: Mode,
    pub server: tokio::sync::Mutex<Server>,
    pub url: String,
    pub data_dir: PathBuf,
    pub redis: Option<std::sync::Mutex<Redis>>,
    pub broker: Option<std::sync::Mutex<Tansu>>,
    /// The data dir's own file system, when the run may fill it.
    pub disk: Option<Tmpfs>,
    pub topics: Topics,
    /// The proxy in front of the DynamoDB endpoint (DynamoDB mode).
    pub throttler: Option<Throttler>,
    /// Whether the limiter refuses requests while Redis is down (else it falls back to a local
    /// limit): the run switches it at restarts.
    pub fail_closed: AtomicBool,
    _scratch: tempfile::TempDir,
}

impl Platform {
    pub async fn start(mode: Mode) -> anyhow::Result<Self> {
        let scratch = tempfile::tempdir()?;
        let disk = Tmpfs::mount("1g");
        let data_dir = disk.as_ref().map_or_else(|| scratch.path().join("data"), |d| d.path.clone());
        std::fs::create_dir_all(&data_dir)?;
        let redis = Redis::start();
        let broker = matches!(mode, Mode::Kafka).then(Tansu::start);
        let prefix = broker.as_ref().map_or_else(String::new, |_| "chaos.".to_owned());
        let mut args: Vec<String> = [
            "--partitions",
            &PARTITIONS.to_string(),
            "--rate-limit",
            "100000/1s",
            "--webhooks-allow-private",
            "--webhook-timeout",
            "1s",
            "--webhook-retry-delays",
            "200ms,500ms,1s,2s,3s",
            "--batch-window",
            "20ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(r) = &redis {
            args.extend(["--redis-url".to_owned(), r.url(), "--redis-timeout".to_owned(), "200ms".to_owned()]);
        }
        if let Some(b) = &broker {
            args.extend(["--kafka-brokers".to_owned(), b.brokers(), "--topic-prefix".to_owned(), prefix.clone()]);
        }
        let mut throttler = None;
        if mode == Mode::Dynamodb {
            let endpoint = std::env::var("OPENQQ_TEST_DYNAMODB_ENDPOINT").map_err(|_| {
                anyhow::anyhow!("DynamoDB mode needs OPENQQ_TEST_DYNAMODB_ENDPOINT (scripts/services/moto.sh start)")
            })?;
            // Bursts of 3 throttled requests in every 7 while a fault is on: more than the SDK's
            // own retries absorb.
            let proxy = Throttler::start(&endpoint, 7, 3).await;
            let (table, bucket) = (crate::aws::unique_name("chaos"), crate::aws::unique_name("chaos"));
            args.extend([
                "--dynamodb-table".to_owned(),
                table,
                "--dynamodb-endpoint".to_owned(),
                proxy.url.clone(),
                "--s3-bucket".to_owned(),
                bucket,
                "--s3-endpoint".to_owned(),
                endpoint,
            ]);
            throttler = Some(proxy);
        }
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Server::start(&data_dir, "127.0.0.1:0", &arg_refs)?;
        Ok(Self {
            mode,
            url: server.url.clone(),
            server: tokio::sync::Mutex::new(server),
            data_dir,
            redis: redis.map(std::sync::Mutex::new),
            broker: broker.map(std::sync::Mutex::new),
            disk,
            topics: Topics::new(prefix),
            throttler,
            fail_closed: AtomicBool::new(false),
            _scratch: scratch,
        })
    }

    /// SIGKILLs `openqq up` and starts it again on the same data dir and port, with the limiter's
    /// policy `fail_closed`; `while_down` runs while it is down. The outage is a down window.
    pub async fn kill_and_restart(
        &self,
        journal: &Journal,
        down_for: Duration,
        fail_closed: bool,
        while_down: impl FnOnce(&Self),
    ) {
        let mut server = self.server.lock().await;
        let window = journal.down("openqq killed");
        tokio::task::block_in_place(|| {
            server.kill9();
            let wait = if matches!(self.mode, Mode::Kafka) { down_for.max(KAFKA_SESSION) } else { down_for };
            std::thread::sleep(wait);
            while_down(self);
            server.extra_args.retain(|a| a != "--redis-fail-closed");
            if fail_closed {
                server.extra_args.push("--redis-fail-closed".to_owned());
            }
            self.fail_closed.store(fail_closed, Ordering::SeqCst);
            server.restart().expect("openqq up starts again");
        });
        journal.up(window);
    }

    /// Puts `records` on the `design.submitted` topic behind the API's back. The embedded log is
    /// the server's own file: only call that while it is down.
    pub async fn inject(&self, records: Vec<Record>) -> anyhow::Result<()> {
        let topic = self.topics.of(EventKind::DesignSubmitted);
        match &self.broker {
            Some(b) => {
                let brokers = b.lock().unwrap().brokers();
                let mut settings = KafkaSettings::new(brokers, vec![]);
                settings.create_topics = false;
                settings.timeout = Duration::from_secs(5);
                KafkaEventLog::connect(settings).await?.publish(&topic, records).await?;
            }
            None => self.inject_embedded(&topic, records)?,
        }
        Ok(())
    }

    fn inject_embedded(&self, topic: &str, records: Vec<Record>) -> anyhow::Result<()> {
        self.on_embedded_log(|log| async move { Ok(log.publish(topic, records).await?) })
    }

    /// Runs `work` on the embedded log (only while the server is down: its files are the
    /// server's), on a thread and a runtime of their own that end with it, so that the log's
    /// background tasks (retention) end too.
    pub fn on_embedded_log<T, F, Fut>(&self, work: F) -> anyhow::Result<T>
    where
        T: Send,
        F: FnOnce(EmbeddedEventLog) -> Fut + Send,
        Fut: std::future::Future<Output = anyhow::Result<T>>,
    {
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                rt.block_on(async {
                    work(EmbeddedEventLog::open(&self.data_dir, PARTITIONS, Durability::Process)?).await
                })
            })
            .join()
            .expect("the thread on the embedded log ran")
        })
    }
}
