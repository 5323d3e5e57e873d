//! `openqq up`: the whole platform in one process (see `openqq_platform::local`), until SIGTERM
//! or Ctrl-C; then it stops accepting requests, lets the in-flight requests and batches finish
//! and commit, and exits 0.

use anyhow::Result;
use clap::{Args, ValueEnum};
use openqq_platform::UpArgs;

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Pretty,
}

/// `openqq up`'s command line: the platform's settings, and how this process logs.
#[derive(Args, Clone)]
pub struct UpCommand {
    #[command(flatten)]
    up: UpArgs,
    #[arg(long, env = "OPENQQ_LOG_FORMAT", value_enum, default_value = "pretty")]
    log_format: LogFormat,
}

pub fn run(cmd: UpCommand) -> Result<()> {
    openqq_telemetry::init_logs(match cmd.log_format {
        LogFormat::Json => openqq_telemetry::LogFormat::Json,
        LogFormat::Pretty => openqq_telemetry::LogFormat::Pretty,
    });
    // Everything this process creates (data dir, store, log, secret, their -wal/-shm siblings)
    // is the owner's alone, before any of it is created.
    openqq_platform::data_dir::owner_only();
    // Settings are checked before the runtime starts, let alone anything is opened.
    cmd.up.check()?;
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()?
        .block_on(serve(cmd.up))
}

/// The runtime's blocking pool, at most: store and log calls run in place (`block_in_place`, one
/// per SQLite connection at a time: 7 on two cores, 13 at most), each handing its worker's core
/// to a pool thread meanwhile, and validations, synthesis and object reads run on it. Tokio's
/// default cap is 512, and an idle pool thread ends only after 10 s without work, which a steady
/// trickle of calls never leaves it: without a lower cap the pool kept its busiest moment's size
/// (a burst on a loaded machine: 54 threads). At the cap nothing waits forever: a core no thread
/// took is taken back by its own worker when the call ends, and no blocking task waits on
/// another one, so work queued for a thread runs as others finish.
const BLOCKING_THREADS: usize = 32;

async fn serve(args: UpArgs) -> Result<()> {
    let data_dir = args.platform.data_dir.clone();
    let running = openqq_platform::start(args).await?;
    let addr = running.addr;
    let metrics = match running.metrics_addr {
        Some(m) => format!("; metrics at http://{m}/metrics"),
        None => String::new(),
    };
    println!("OpenQQuantify is up at http://{addr} (data in {}{metrics})", data_dir.display());
    tracing::info!(%addr, metrics_addr = ?running.metrics_addr, data_dir = %data_dir.display(), "The platform is up.");
    shutdown_signal().await;
    tracing::info!("Shutting down: finishing in-flight requests and batches.");
    running.stop().await?;
    tracing::info!("Stopped cleanly.");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
