//! Bounded concurrency for the local runner: a fixed number of requests in progress and a
//! bounded queue behind them. A request that finds the queue full is rejected at once with 503
//! and `Retry-After`, never queued forever. On AWS the API function's reserved concurrency plays
//! this part.

use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;

#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// Requests in progress at once (default 2 × cores).
    pub workers: usize,
    /// Requests allowed to wait for a worker.
    pub queue: usize,
    /// A simulated slow dependency called by every request while it holds a worker; for
    /// overload experiments only (see [`crate::downstream`]). `None` in production.
    pub simulated_downstream: Option<crate::downstream::DownstreamConfig>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Self { workers: 2 * cores, queue: 64 * cores, simulated_downstream: None }
    }
}

pub struct Pool {
    workers: Semaphore,
    waiting: AtomicUsize,
    queue: usize,
}

impl Pool {
    pub fn new(cfg: PoolConfig) -> Arc<Self> {
        Arc::new(Self { workers: Semaphore::new(cfg.workers.max(1)), waiting: AtomicUsize::new(0), queue: cfg.queue })
    }
}

pub async fn layer(State(pool): State<Arc<Pool>>, req: Request, next: Next) -> Response {
    let _permit = match pool.workers.try_acquire() {
        Ok(p) => p,
        Err(_) => {
            if pool.waiting.fetch_add(1, Ordering::AcqRel) >= pool.queue {
                pool.waiting.fetch_sub(1, Ordering::AcqRel);
                metrics::counter!("openqq_pool_rejections_total").increment(1);
                return Problem::unavailable("the server is at capacity; retry shortly").into_response();
            }
            let permit = pool.workers.acquire().await.expect("the semaphore is never closed");
            pool.waiting.fetch_sub(1, Ordering::AcqRel);
            permit
        }
    };
    next.run(req).await
}
