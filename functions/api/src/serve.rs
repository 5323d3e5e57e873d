//! Serving the router on a TCP listener (the local runner; on Lambda, API Gateway is the server).
//!
//! A small accept loop over hyper's HTTP/1 connection builder rather than `axum::serve`, for the
//! bounds `axum::serve` does not offer:
//!
//! - **header read timeout**: a connection that has not sent a whole request head within
//!   [`ServeConfig::header_timeout`] is closed; this covers both a new connection and an idle
//!   keep-alive one waiting for its next request (slow-loris clients hold nothing for long);
//! - **open connections**: at most [`ServeConfig::max_connections`]; one more is answered with a
//!   503 problem document and closed at once, never left waiting in the backlog.
//!
//! Body deadlines and per-tenant bounds are the router's job ([`crate::tenant_guard`]), where the
//! tenant is known. On shutdown the listener closes, each connection finishes the request it is
//! serving (idle ones close at once), and whatever is still open after
//! [`ServeConfig::shutdown_grace`] (live streams) is dropped.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Gauge of open HTTP connections.
pub const CONNECTIONS_OPEN: &str = "openqq_http_connections_open";
/// Counter of connections closed because their request head did not arrive in time.
pub const HEADER_TIMEOUTS: &str = "openqq_http_header_timeouts_total";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// How long a connection may take to send a request head (new or between keep-alive requests).
    pub header_timeout: Duration,
    /// Connections open at once; more are refused with 503.
    pub max_connections: usize,
    /// How long open connections may take to finish after shutdown begins.
    pub shutdown_grace: Duration,
}

/// Default time a client has to send its request head.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default ceiling on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then drains as described above.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    cfg: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(cfg.header_timeout).keep_alive(true);
    let slots = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors, or a connection reset before it was accepted:
                        // wait a moment rather than spin, and go on.
                        tracing::warn!(error = %e, "Accepting a connection failed.");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    metrics::counter!(crate::tenant_guard::REJECTIONS_METRIC, "reason" => "connections").increment(1);
                    tokio::spawn(refuse(stream, cfg.max_connections));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let stop = stopped(stop_rx.clone());
                conns.spawn(async move {
                    let _slot = slot;
                    metrics::gauge!(CONNECTIONS_OPEN).increment(1.0);
                    tokio::pin!(conn);
                    let served = tokio::select! {
                        served = conn.as_mut() => served,
                        () = stop => {
                            conn.as_mut().graceful_shutdown();
                            conn.await
                        }
                    };
                    metrics::gauge!(CONNECTIONS_OPEN).decrement(1.0);
                    if let Err(e) = served {
                        if e.is_timeout() {
                            metrics::counter!(HEADER_TIMEOUTS).increment(1);
                        }
                        tracing::debug!(error = %e, "An HTTP connection ended with an error.");
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(cfg.shutdown_grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            open = conns.len(),
            grace = ?cfg.shutdown_grace,
            "Open HTTP connections (live streams) were closed after the shutdown grace period."
        );
        conns.shutdown().await;
    }
    Ok(())
}

/// Completes once shutdown has begun.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Answers a connection over the ceiling with a 503 problem document and closes it.
async fn refuse(mut stream: TcpStream, max: usize) {
    let body = format!(
        r#"{{"type":"urn:openqq:problem:unavailable","title":"The service is temporarily unavailable","status":503,"detail":"the server has {max} connections open, its most; retry shortly"}}"#
    );
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}
