//! Bounded concurrency for the local runner: a fixed number of requests in progress and a
//! bounded queue behind them. A request that finds the queue full is rejected at once with 503
//! and `Retry-After`; one that waited [`PoolConfig::queue_timeout`] without a worker gets the same
//! 503, so nothing is queued forever. On AWS the API function's reserved concurrency plays this
//! part. Bodies are read before the pool ([`crate::tenant_guard`]): a worker only ever waits on
//! the handler's own work.

use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// Requests in progress at once (default 2 × cores).
    pub workers: usize,
    /// Requests allowed to wait for a worker.
    pub queue: usize,
    /// How long a request may wait for a worker before it is refused with 503.
    pub queue_timeout: Duration,
    /// A simulated slow dependency called by every request while it holds a worker; for
    /// overload experiments only (see [`crate::downstream`]). `None` in production.
    pub simulated_downstream: Option<crate::downstream::DownstreamConfig>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Self { workers: 2 * cores, queue: 64 * cores, queue_timeout: DEFAULT_QUEUE_TIMEOUT, simulated_downstream: None }
    }
}

/// Default time a request may wait for a worker.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Pool {
    workers: Semaphore,
    waiting: AtomicUsize,
    queue: usize,
    queue_timeout: Duration,
}

impl Pool {
    pub fn new(cfg: PoolConfig) -> Arc<Self> {
        // Exported from the start (at 0), so an empty queue reads 0 rather than no data.
        metrics::gauge!(QUEUE_DEPTH).increment(0.0);
        Arc::new(Self {
            workers: Semaphore::new(cfg.workers.max(1)),
            waiting: AtomicUsize::new(0),
            queue: cfg.queue,
            queue_timeout: cfg.queue_timeout,
        })
    }
}

/// Requests waiting for a worker, exported as a gauge.
const QUEUE_DEPTH: &str = "openqq_pool_queue_depth";
/// Requests refused by the pool, by reason (`queue_full`, `queue_timeout`).
const REJECTIONS: &str = "openqq_pool_rejections_total";

/// Decrements the waiting count however the wait ends (a worker, the deadline, or the client
/// going away and the request future being dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(QUEUE_DEPTH).decrement(1.0);
    }
}

pub async fn layer(State(pool): State<Arc<Pool>>, req: Request, next: Next) -> Response {
    let _permit = match pool.workers.try_acquire() {
        Ok(p) => p,
        Err(_) => {
            if pool.waiting.fetch_add(1, Ordering::AcqRel) >= pool.queue {
                pool.waiting.fetch_sub(1, Ordering::AcqRel);
                metrics::counter!(REJECTIONS, "reason" => "queue_full").increment(1);
                return Problem::unavailable("the server is at capacity; retry shortly").into_response();
            }
            metrics::gauge!(QUEUE_DEPTH).increment(1.0);
            let waiting = Waiting(&pool.waiting);
            let permit = tokio::time::timeout(pool.queue_timeout, pool.workers.acquire()).await;
            drop(waiting);
            match permit {
                Ok(permit) => permit.expect("the semaphore is never closed"),
                Err(_) => {
                    metrics::counter!(REJECTIONS, "reason" => "queue_timeout").increment(1);
                    return Problem::unavailable("no worker came free in time; retry shortly").into_response();
                }
            }
        }
    };
    next.run(req).await
}
