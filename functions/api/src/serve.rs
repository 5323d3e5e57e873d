//! Serving the router on a TCP listener (the local runner; on Lambda, API Gateway is the server).
//!
//! A small accept loop over hyper's HTTP/1 connection builder rather than `axum::serve`, for the
//! bounds `axum::serve` does not offer:
//!
//! - **header read timeout**: a connection that has not sent a whole request head within
//!   [`ServeConfig::header_timeout`] is closed; this covers both a new connection and an idle
//!   keep-alive one waiting for its next request (slow-loris clients hold nothing for long);
//! - **open connections**: at most [`ServeConfig::max_connections`]; one more is answered with a
//!   503 problem document and closed at once, never left waiting in the backlog;
//! - **connections per client**: at most [`ServeConfig::max_connections_per_address`] from one
//!   client address ([`addresses`]: an IPv4 address, an IPv6 /64), so one client cannot hold the
//!   whole ceiling; one more is answered with a 429 problem document (`too-many-connections`)
//!   and closed at once;
//! - **connection lifetime**: the first response a connection sends once it is older than
//!   [`ServeConfig::connection_lifetime`] carries `Connection: close`, and the connection ends
//!   there, so a client re-sending `GET /healthz` (each restarting the header timeout) cannot keep
//!   one forever. A response that never ends (a live stream) keeps its connection until it does.
//!
//! Body deadlines and per-tenant bounds are the router's job ([`crate::tenant_guard`]), where the
//! tenant is known. On shutdown the listener closes, each connection finishes the request it is
//! serving (idle ones close at once), and whatever is still open after
//! [`ServeConfig::shutdown_grace`] (live streams) is dropped.

pub mod addresses;

use axum::http::{header, HeaderValue};
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    /// Connections open at once from one client address (an IPv6 /64); more are refused with 429.
    pub max_connections_per_address: usize,
    /// How long a connection is kept: its first response after this closes it.
    pub connection_lifetime: Duration,
    /// How long open connections may take to finish after shutdown begins.
    pub shutdown_grace: Duration,
}

/// Default time a client has to send its request head.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default ceiling on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default ceiling on open connections from one client: a quarter of the whole ceiling, so it
/// takes four clients to fill it.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Default connection lifetime.
pub const DEFAULT_CONNECTION_LIFETIME: Duration = Duration::from_secs(10 * 60);

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            connection_lifetime: DEFAULT_CONNECTION_LIFETIME,
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
    let per_address = addresses::PerAddress::new(cfg.max_connections_per_address);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, or a connection reset before it was accepted:
                        // wait a moment rather than spin, and go on.
                        tracing::warn!(error = %e, "Accepting a connection failed.");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(address_slot) = per_address.take(peer.ip()) else {
                    metrics::counter!(crate::tenant_guard::REJECTIONS_METRIC, "reason" => "connections_per_address")
                        .increment(1);
                    tokio::spawn(refuse(stream, Refusal::PerAddress { max: cfg.max_connections_per_address }));
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    metrics::counter!(crate::tenant_guard::REJECTIONS_METRIC, "reason" => "connections").increment(1);
                    tokio::spawn(refuse(stream, Refusal::Ceiling { max: cfg.max_connections }));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let service = closing_after(app.clone(), cfg.connection_lifetime);
                let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                let stop = stopped(stop_rx.clone());
                conns.spawn(async move {
                    let _slots = (slot, address_slot);
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

/// `app` for one connection: each response once the connection is older than `lifetime` carries
/// `Connection: close`, so hyper ends the connection after it.
fn closing_after(
    app: Router,
    lifetime: Duration,
) -> impl tower::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Future<Output = Result<axum::response::Response, Infallible>> + Send,
> + Clone {
    let born = Instant::now();
    tower::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        async move {
            let mut resp = tower::ServiceExt::oneshot(app, req).await?;
            if born.elapsed() >= lifetime {
                resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(resp)
        }
    })
}

/// Completes once shutdown has begun.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Why a connection is refused before a request is read.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// The server has its most connections open.
    Ceiling { max: usize },
    /// The client's address has its most connections open.
    PerAddress { max: usize },
}

/// Answers a refused connection with a problem document and closes it.
async fn refuse(mut stream: TcpStream, why: Refusal) {
    let (status, body) = match why {
        Refusal::Ceiling { max } => (
            "503 Service Unavailable",
            format!(
                r#"{{"type":"urn:openqq:problem:unavailable","title":"The service is temporarily unavailable","status":503,"detail":"the server has {max} connections open, its most; retry shortly"}}"#
            ),
        ),
        Refusal::PerAddress { max } => (
            "429 Too Many Requests",
            format!(
                r#"{{"type":"urn:openqq:problem:too-many-connections","title":"Too many connections from this address","status":429,"detail":"this address has {max} connections open, the most one address may hold; close one (or reuse it) and retry"}}"#
            ),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\nretry-after: 1\r\n\
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
