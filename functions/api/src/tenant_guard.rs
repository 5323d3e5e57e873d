//! Per-tenant bounds behind authentication, so that one tenant can hold at most its share of
//! the front door however slowly it sends:
//!
//! - **requests in progress**: at most [`TenantLimits::concurrency`] per tenant, counted from
//!   here (body being read, waiting for a pool worker, running) until the handler answers; one
//!   more is refused at once with 429;
//! - **the body**: read here, outside the worker pool, within [`TenantLimits::body_timeout`] in
//!   total (408 after it) and the body size limit (413), so handlers get it already buffered and
//!   a slow sender never holds a worker;
//! - **bytes per window**: the body's size is weighed against [`TenantLimits::bytes`] through the
//!   rate limiter ([`RateLimiter::check_weighted`](openqq_core::RateLimiter::check_weighted),
//!   in process or in Redis); over it, 429 with `Retry-After` and `RateLimit-*` headers;
//! - **live streams**: at most [`TenantLimits::streams`] open per tenant ([`crate::stream`]).
//!
//! Every refusal is counted in `openqq_front_door_rejections_total{reason}` (`in_flight`,
//! `streams`, `bytes`, `body_timeout`, `body_too_large`, `body_broken`).

use crate::body::{self, BodyError};
use crate::problem::Problem;
use crate::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use openqq_core::{Quota, TenantId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The metric counting refusals at the front door, by `reason`.
pub const REJECTIONS_METRIC: &str = "openqq_front_door_rejections_total";

/// The per-tenant bounds; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantLimits {
    /// Requests of one tenant in progress at once: body being read, queued or running.
    pub concurrency: usize,
    /// Event streams (`GET /v1/events/stream`) one tenant may hold open.
    pub streams: usize,
    /// How long a request body may take to arrive, from the end of its headers.
    pub body_timeout: Duration,
    /// Request-body bytes one tenant may send per window.
    pub bytes: Quota,
    /// Batch items one tenant may submit per window (`POST /v1/batches`, retries and schedule
    /// fires alike), apart from its request rate.
    pub batch_items: Quota,
    /// Batch items one tenant may have open at once (queued or validating in its unfinished
    /// batches); a batch that would take it past this is refused.
    pub batch_open: u64,
    /// Bytes one tenant's submissions may write to the event log per UTC day, as
    /// [`openqq_core::budget::log_bytes_of_revision`] bounds them; a design or batch that would
    /// pass it is refused until the next day ([`crate::limit::charge_log_bytes`]).
    pub log_bytes_per_day: u64,
}

/// Default requests in progress per tenant.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Default open live streams per tenant.
pub const DEFAULT_STREAMS: usize = 4;
/// Default time a request body may take.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bytes per tenant: 8 MiB in any 10 s, about 40 typical 200 KB netlists (or one of the
/// largest inline bodies, 4.5 MiB) every 10 s, far above what a tenant submits by hand or from
/// CI; larger netlists go through uploads, which this quota does not weigh. The window is
/// short on purpose: what one tenant may send at once is what the validation function must work
/// through before a later record on the same partition, and at the slowest netlist shape known
/// (about 9 MB/s) 8 MiB is under a second of validation.
pub const DEFAULT_BYTES: Quota = Quota { limit: 8 << 20, window: Duration::from_secs(10) };
/// Default batch items per tenant: 20,000 a minute, two of the largest batches.
pub const DEFAULT_BATCH_ITEMS: Quota = Quota { limit: 20_000, window: Duration::from_secs(60) };
/// Default batch items one tenant may have open at once: five of the largest batches.
pub const DEFAULT_BATCH_OPEN: u64 = 50_000;
/// Default event-log bytes per tenant and day: 4 GiB, some 130,000 netlist designs of a few
/// kilobytes by the bound each is charged (33 KB; they take 14 KB), a dozen of the largest
/// batches; the log keeps records 7 days, so one tenant holds at most 28 GiB of it.
pub const DEFAULT_LOG_BYTES_PER_DAY: u64 = 4 << 30;

impl Default for TenantLimits {
    fn default() -> Self {
        Self {
            concurrency: DEFAULT_CONCURRENCY,
            streams: DEFAULT_STREAMS,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            bytes: DEFAULT_BYTES,
            batch_items: DEFAULT_BATCH_ITEMS,
            batch_open: DEFAULT_BATCH_OPEN,
            log_bytes_per_day: DEFAULT_LOG_BYTES_PER_DAY,
        }
    }
}

impl TenantLimits {
    /// Checks the limits against each other and the body limit; the error is a sentence naming
    /// the setting (flag and environment variable) at fault.
    pub fn check(&self, max_body_bytes: usize) -> Result<(), TenantLimitsError> {
        if self.concurrency == 0 {
            return Err(TenantLimitsError::NoConcurrency);
        }
        if self.streams == 0 {
            return Err(TenantLimitsError::NoStreams);
        }
        if self.body_timeout.is_zero() {
            return Err(TenantLimitsError::NoBodyTimeout);
        }
        if u64::from(self.bytes.limit) < max_body_bytes as u64 {
            return Err(TenantLimitsError::BytesBelowBody {
                limit: self.bytes.limit,
                window: self.bytes.window,
                max_body_bytes,
            });
        }
        Ok(())
    }
}

/// Why [`TenantLimits`] were refused; each names the setting (flag and environment variable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantLimitsError {
    #[error("--tenant-concurrency (OPENQQ_TENANT_CONCURRENCY) must allow at least 1 request")]
    NoConcurrency,
    #[error("--tenant-streams (OPENQQ_TENANT_STREAMS) must allow at least 1 stream")]
    NoStreams,
    #[error("--body-timeout (OPENQQ_BODY_TIMEOUT) must be longer than 0 s")]
    NoBodyTimeout,

    /// The byte quota is smaller than one body of the largest size allowed.
    #[error(
        "--byte-limit (OPENQQ_BYTE_LIMIT) allows {limit} bytes per {window:?}, less than one body of \
         --max-body-bytes (OPENQQ_MAX_BODY_BYTES, {max_body_bytes} bytes): such a body could never be \
         accepted; raise the byte limit or lower the body limit"
    )]
    BytesBelowBody { limit: u32, window: Duration, max_body_bytes: usize },
}

/// The running counts behind [`TenantLimits`]; one per API instance, in [`AppState`].
#[derive(Debug)]
pub struct TenantGuard {
    pub limits: TenantLimits,
    in_flight: Arc<Slots>,
    streams: Arc<Slots>,
}

impl TenantGuard {
    pub fn new(limits: TenantLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            in_flight: Slots::new(limits.concurrency, "openqq_tenant_requests_in_flight"),
            streams: Slots::new(limits.streams, "openqq_streams_open"),
        })
    }

    /// A stream slot for `tenant`, or the 429 that refuses the stream.
    pub fn open_stream(&self, tenant: &TenantId) -> Result<Slot, Problem> {
        self.streams.take(tenant).ok_or_else(|| {
            reject("streams");
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-streams",
                "Too many open streams",
                format!("tenant {tenant} already has {} live streams open; close one first", self.limits.streams),
            )
            .retry_after(1)
        })
    }

    /// A place among `tenant`'s requests in progress, held until the slot is dropped, or the 429
    /// that refuses the request. Routes outside this layer (the upload `PUT`) take one too.
    pub fn begin(&self, tenant: &TenantId) -> Result<Slot, Problem> {
        self.in_flight.take(tenant).ok_or_else(|| {
            reject("in_flight");
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-in-flight",
                "Too many requests in progress",
                format!(
                    "tenant {tenant} already has {} requests in progress, the most allowed at once; retry when one \
                     finishes",
                    self.limits.concurrency
                ),
            )
            .retry_after(1)
        })
    }

    /// Requests `tenant` has in progress now.
    pub fn in_flight(&self, tenant: &TenantId) -> usize {
        self.in_flight.count(tenant)
    }
}

/// Per-tenant counts with a ceiling; a [`Slot`] gives its place back when dropped.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    /// Only tenants with something in progress have an entry, so the map stays as small as the
    /// set of active tenants.
    held: Mutex<HashMap<TenantId, usize>>,
    /// A gauge of all slots held, over every tenant (tenant ids stay out of the labels).
    gauge: &'static str,
}

impl Slots {
    fn new(max: usize, gauge: &'static str) -> Arc<Self> {
        Arc::new(Self { max, held: Mutex::new(HashMap::new()), gauge })
    }

    fn take(self: &Arc<Self>, tenant: &TenantId) -> Option<Slot> {
        let mut held = self.held.lock().unwrap();
        let n = held.entry(tenant.clone()).or_insert(0);
        if *n >= self.max {
            if *n == 0 {
                held.remove(tenant);
            }
            return None;
        }
        *n += 1;
        metrics::gauge!(self.gauge).increment(1.0);
        Some(Slot { slots: self.clone(), tenant: tenant.clone() })
    }

    fn count(&self, tenant: &TenantId) -> usize {
        self.held.lock().unwrap().get(tenant).copied().unwrap_or(0)
    }
}

/// One place held in [`Slots`] by one tenant.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    tenant: TenantId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap();
        if let Some(n) = held.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
        metrics::gauge!(self.slots.gauge).decrement(1.0);
    }
}

fn reject(reason: &'static str) {
    metrics::counter!(REJECTIONS_METRIC, "reason" => reason).increment(1);
}

/// The layer between the request limiter and the pool: the in-flight cap, the body read with its
/// deadline and size limit, then the byte quota. The authenticated tenant must be in the
/// request's extensions (put there by [`crate::auth::guard`]).
pub async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(tenant) = req.extensions().get::<TenantId>().cloned() else {
        tracing::error!("The tenant guard ran before authentication; refusing the request.");
        return Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "the request was not authenticated",
        )
        .into_response();
    };
    let guard = &state.tenants;
    let _slot = match guard.begin(&tenant) {
        Ok(slot) => slot,
        Err(p) => {
            body::drain(req.into_body(), state.max_body_bytes).await;
            return p.into_response();
        }
    };
    let (parts, body) = req.into_parts();
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let read = match declared {
        Some(n) if n > state.max_body_bytes as u64 => Err((BodyError::TooLarge { limit: state.max_body_bytes }, body)),
        _ => body::read_within(body, state.max_body_bytes, guard.limits.body_timeout).await,
    };
    let bytes = match read {
        Ok(bytes) => bytes,
        Err((e, rest)) => {
            reject(match e {
                BodyError::TooLarge { .. } => "body_too_large",
                BodyError::TimedOut { .. } => "body_timeout",
                BodyError::Broken(_) => "body_broken",
            });
            // The client may still be sending; let it go on (briefly) so it reads the answer.
            body::drain(rest, body::DRAIN_BYTES).await;
            return Problem::from(e).into_response();
        }
    };
    if !bytes.is_empty() {
        let cost = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        if let Err(p) = crate::limit::check_bytes(&state, &tenant, guard.limits.bytes, cost).await {
            if p.status == StatusCode::TOO_MANY_REQUESTS {
                reject("bytes");
            }
            return p.into_response();
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_tenant_and_come_back_when_dropped() {
        let slots = Slots::new(2, "test_slots");
        let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
        let first = slots.take(&a).unwrap();
        let _second = slots.take(&a).unwrap();
        assert!(slots.take(&a).is_none(), "a third is refused");
        let _other = slots.take(&b).expect("another tenant has its own slots");
        drop(first);
        assert!(slots.take(&a).is_some(), "a dropped slot comes back");
        assert_eq!(slots.count(&a), 1, "the temporary slot above was dropped at once");
    }

    #[test]
    fn idle_tenants_leave_no_entry_behind() {
        let slots = Slots::new(1, "test_slots");
        let t = TenantId::parse("t").unwrap();
        drop(slots.take(&t));
        assert!(slots.held.lock().unwrap().is_empty());
        let none = Slots::new(0, "test_slots");
        assert!(none.take(&t).is_none());
        assert!(none.held.lock().unwrap().is_empty());
    }

    #[test]
    fn limits_that_contradict_each_other_are_refused_with_the_setting_named() {
        assert!(TenantLimits::default().check(crate::DEFAULT_MAX_BODY_BYTES).is_ok());
        let small = TenantLimits { bytes: Quota { limit: 1000, window: Duration::from_secs(1) }, ..Default::default() };
        assert!(small.check(1001).unwrap_err().to_string().contains("--byte-limit"));
        let zero = TenantLimits { concurrency: 0, ..Default::default() };
        assert!(zero.check(10).unwrap_err().to_string().contains("--tenant-concurrency"));
        let instant = TenantLimits { body_timeout: Duration::ZERO, ..Default::default() };
        assert!(instant.check(10).unwrap_err().to_string().contains("--body-timeout"));
    }
}
