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
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(cmd.up))
}

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
