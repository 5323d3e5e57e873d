//! A simulated slow downstream, for overload experiments only; off unless configured.
//!
//! Every v1 request, once it holds a pool worker, makes one call to an imaginary dependency (a
//! database, another service) that takes `latency` and serves at most `capacity` calls at once;
//! further calls wait in line for it. Nothing else in the request path is slow on one machine,
//! so without this the bounded pool has nothing to bound. `openqq up
//! --simulated-downstream-latency` switches it on.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownstreamConfig {
    /// How long one call takes.
    pub latency: Duration,
    /// Calls served at once; `None` means any number (a pure delay).
    pub capacity: Option<usize>,
}

pub struct Downstream {
    latency: Duration,
    /// Slots of the imaginary dependency; FIFO, so waiting calls are served in arrival order.
    slots: Option<Semaphore>,
}

impl Downstream {
    pub fn new(cfg: DownstreamConfig) -> Arc<Self> {
        Arc::new(Self { latency: cfg.latency, slots: cfg.capacity.map(|c| Semaphore::new(c.max(1))) })
    }

    async fn call(&self) {
        let _slot = match &self.slots {
            Some(s) => Some(s.acquire().await.expect("the semaphore is never closed")),
            None => None,
        };
        tokio::time::sleep(self.latency).await;
    }
}

pub async fn layer(State(downstream): State<Arc<Downstream>>, req: Request, next: Next) -> Response {
    downstream.call().await;
    next.run(req).await
}
