//! The platform started in this process, as `openqq up` would run it: the same settings, the
//! same builder (`openqq_platform::start`), on its own multi-threaded runtime and a free port.
//! Route tests use it instead of spawning the binary; tests that kill, restart or signal the
//! process keep [`crate::Server`].

use anyhow::{Context, Result};
use openqq_api::auth::ClaimRules;
use openqq_api::JwtKeys;
use openqq_core::TenantId;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;

/// A running in-process platform; dropping it stops it (in-flight work drains first).
pub struct App {
    pub url: String,
    /// Where its `/metrics` is served (a listener apart from the API), unless turned off.
    pub metrics_url: Option<String>,
    pub data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl App {
    /// Starts the platform with `openqq up`'s `extra_args` on `127.0.0.1:0` with `data_dir`, and
    /// the test defaults of [`crate::Server`] (a 50 ms batch window).
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> Result<Self> {
        Self::start_with(data_dir, extra_args, None)
    }

    /// [`App::start`] with schedules reading `clock` (and the scheduler woken through it), so a
    /// test moves time across fires instead of waiting for them.
    pub fn start_with_clock(
        data_dir: &Path,
        extra_args: &[&str],
        clock: openqq_api::schedules::ScheduleClock,
    ) -> Result<Self> {
        Self::start_with(data_dir, extra_args, Some(clock))
    }

    fn start_with(
        data_dir: &Path,
        extra_args: &[&str],
        clock: Option<openqq_api::schedules::ScheduleClock>,
    ) -> Result<Self> {
        let mut args: Vec<String> = ["--listen", "127.0.0.1:0", "--batch-window", "50ms", "--data-dir"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        args.push(data_dir.display().to_string());
        if !crate::names_metrics_listen(extra_args) {
            // A free port of its own, as tests run side by side.
            args.extend(["--metrics-listen".to_owned(), "127.0.0.1:0".to_owned()]);
        }
        args.extend(extra_args.iter().map(|s| s.to_string()));
        let mut up = openqq_platform::UpArgs::from_args(args)?;
        up.schedule_clock = clock;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(async move {
                let running = match openqq_platform::start(up).await {
                    Ok(r) => r,
                    Err(e) => return drop(ready_tx.send(Err(e))),
                };
                let _ = ready_tx.send(Ok((running.addr, running.metrics_addr)));
                let _ = stop_rx.await;
                let _ = running.stop().await;
            });
        });
        let (addr, metrics) = ready_rx.recv().context("the platform's thread ended before it was up")??;
        Ok(Self {
            url: format!("http://{addr}"),
            metrics_url: metrics.map(|m| format!("http://{m}/metrics")),
            data_dir: data_dir.to_owned(),
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// A token for `tenant`, signed with the data dir's secret as `openqq token` would.
    pub fn token(&self, tenant: &str) -> String {
        let secret = openqq_platform::secret::load_or_create(&self.data_dir).expect("the data dir has a secret");
        let keys = JwtKeys::with_rules(&secret, ClaimRules::default()).expect("the secret makes keys");
        keys.issue(&TenantId::parse(tenant).expect("a valid tenant id"), Duration::from_secs(3600))
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
