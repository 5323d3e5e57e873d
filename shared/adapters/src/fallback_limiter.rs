//! The Redis-down policy: a limiter that wraps the shared (Redis) limiter and decides what
//! happens when it cannot answer.
//!
//! - **Fail open** (the default): decide in process instead, at `limit ÷ instances`, so the
//!   fleet as a whole stays near the tenant's quota while every instance decides alone. Each such
//!   decision counts in `openqq_limiter_fallbacks_total{policy="fail_open"}`. Tenants keep being
//!   served; fairness degrades from exact to per-instance.
//! - **Fail closed**: reject with [`PortError::Unavailable`]; the API answers 503 with
//!   `Retry-After: `[`FallbackRateLimiter::retry_after`]. Counted with `policy="fail_closed"`.
//!
//! Either way a dead Redis costs one timeout, not one per request: after a retriable failure
//! the primary is skipped for `retry_after`, then tried again by the next request. Permanent
//! primary errors (a script bug, a denied command) are passed through, never hidden by the
//! policy. Weighted checks (bytes per window) follow the same policy, at the same share. Nothing
//! here panics.

use crate::InProcessRateLimiter;
use async_trait::async_trait;
use openqq_core::ports::{PortError, PortResult};
use openqq_core::{Decision, Meter, Quota, RateLimiter, TenantId};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The metric counting decisions made without the primary limiter. Its one label, `policy`,
/// takes the values `fail_open` and `fail_closed`.
pub const FALLBACKS_METRIC: &str = "openqq_limiter_fallbacks_total";

/// What to do while the primary limiter cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisDownPolicy {
    /// Admit by an in-process limiter at `limit ÷ instances` (at least 1 for a non-zero limit).
    /// `instances` is how many API instances share the primary, so that together they stay near
    /// the quota.
    FailOpen { instances: NonZeroU32 },
    /// Reject every request with `PortError::Unavailable` until the primary answers again.
    FailClosed,
}

impl Default for RedisDownPolicy {
    fn default() -> Self {
        RedisDownPolicy::FailOpen { instances: NonZeroU32::MIN }
    }
}

impl RedisDownPolicy {
    fn label(self) -> &'static str {
        match self {
            RedisDownPolicy::FailOpen { .. } => "fail_open",
            RedisDownPolicy::FailClosed => "fail_closed",
        }
    }
}

pub struct FallbackRateLimiter {
    /// The shared, exact limiter (Redis); asked first whenever it is believed up.
    primary: Arc<dyn RateLimiter>,
    policy: RedisDownPolicy,
    /// Decides while the primary is down under `FailOpen`. Its clock is this process's, so such
    /// decisions carry `now_micros` from a different clock than the primary's.
    local: InProcessRateLimiter,
    /// How long the primary is skipped after a retriable failure; also the `Retry-After` a
    /// fail-closed rejection advertises.
    retry_after: Duration,
    /// Time zero for `down_until_us`.
    epoch: Instant,
    /// Until when (µs since `epoch`) the primary is skipped; 0 when it is believed up.
    down_until_us: AtomicU64,
    /// Decisions made without the primary, for tests and health reports (the metric is the
    /// operator's view).
    fallbacks: AtomicU64,
}

impl FallbackRateLimiter {
    /// Default time the primary is skipped after a failure before it is tried again.
    pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

    pub fn new(primary: Arc<dyn RateLimiter>, policy: RedisDownPolicy) -> Self {
        Self {
            primary,
            policy,
            local: InProcessRateLimiter::new(),
            retry_after: Self::DEFAULT_RETRY_AFTER,
            epoch: Instant::now(),
            down_until_us: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        }
    }

    /// Sets how long the primary is skipped after a failure (and the fail-closed `Retry-After`).
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    pub fn policy(&self) -> RedisDownPolicy {
        self.policy
    }

    /// What a fail-closed rejection asks the client to wait: the API's `Retry-After`.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// Decisions made without the primary so far.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn primary_believed_down(&self) -> bool {
        self.now_us() < self.down_until_us.load(Ordering::Relaxed)
    }

    /// Records a retriable primary failure; logs only when the primary was believed up, so a
    /// dead Redis produces one line per `retry_after`, not one per request.
    fn mark_down(&self, cause: &PortError) {
        let until = self.now_us() + self.retry_after.as_micros() as u64;
        let before = self.down_until_us.swap(until, Ordering::Relaxed);
        if before <= self.now_us() {
            tracing::warn!(error = %cause, policy = self.policy.label(), retry_after_ms = self.retry_after.as_millis() as u64,
                "The shared rate limiter is unavailable; applying the Redis-down policy.");
        }
    }

    /// The decision (or rejection) while the primary cannot answer.
    async fn without_primary(&self, tenant: &TenantId, quota: Quota, cost: Cost, cause: &str) -> PortResult<Decision> {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(FALLBACKS_METRIC, "policy" => self.policy.label()).increment(1);
        match self.policy {
            RedisDownPolicy::FailOpen { instances } => {
                let share = Quota { limit: share(quota.limit, instances), ..quota };
                match cost {
                    Cost::Request => self.local.check(tenant, share).await,
                    Cost::Weighted(meter, cost) => self.local.check_weighted(tenant, meter, share, cost).await,
                }
            }
            RedisDownPolicy::FailClosed => Err(PortError::Unavailable(
                format!(
                    "rate limiter unavailable, failing closed (retry after {} s): {cause}",
                    self.retry_after.as_secs_f64().ceil() as u64
                )
                .into(),
            )),
        }
    }

    /// One decision by the primary, or by the policy while the primary cannot answer.
    async fn decide(&self, tenant: &TenantId, quota: Quota, cost: Cost) -> PortResult<Decision> {
        if self.primary_believed_down() {
            return self.without_primary(tenant, quota, cost, "the primary failed recently").await;
        }
        let answer = match cost {
            Cost::Request => self.primary.check(tenant, quota).await,
            Cost::Weighted(meter, cost) => self.primary.check_weighted(tenant, meter, quota, cost).await,
        };
        match answer {
            Ok(decision) => {
                self.down_until_us.store(0, Ordering::Relaxed);
                Ok(decision)
            }
            Err(e) if e.is_retriable() => {
                self.mark_down(&e);
                self.without_primary(tenant, quota, cost, &e.to_string()).await
            }
            Err(e) => Err(e),
        }
    }
}

/// What a decision counts: one request, or units of a meter against a weighted quota.
#[derive(Debug, Clone, Copy)]
enum Cost {
    Request,
    Weighted(Meter, u32),
}

/// One instance's share of a fleet-wide limit: `limit ÷ instances`, but never 0 for a non-zero
/// limit, so a small quota on a large fleet still lets each tenant through.
pub fn share(limit: u32, instances: NonZeroU32) -> u32 {
    if limit == 0 {
        0
    } else {
        (limit / instances.get()).max(1)
    }
}

#[async_trait]
impl RateLimiter for FallbackRateLimiter {
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision> {
        self.decide(tenant, quota, Cost::Request).await
    }

    async fn check_weighted(&self, tenant: &TenantId, meter: Meter, quota: Quota, cost: u32) -> PortResult<Decision> {
        self.decide(tenant, quota, Cost::Weighted(meter, cost)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A primary that answers or fails on demand.
    struct Switchable {
        up: AtomicBool,
        permanent: bool,
        calls: AtomicU64,
    }

    #[async_trait]
    impl RateLimiter for Switchable {
        async fn check_weighted(&self, tenant: &TenantId, _: Meter, quota: Quota, _: u32) -> PortResult<Decision> {
            self.check(tenant, quota).await
        }

        async fn check(&self, _: &TenantId, quota: Quota) -> PortResult<Decision> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            if self.up.load(Ordering::Relaxed) {
                Ok(Decision {
                    allowed: true,
                    limit: quota.limit,
                    remaining: 0,
                    reset: Duration::ZERO,
                    now_micros: u64::MAX,
                })
            } else if self.permanent {
                Err(PortError::backend_message("script error", false))
            } else {
                Err(PortError::Unavailable("down".into()))
            }
        }
    }

    fn primary(up: bool, permanent: bool) -> Arc<Switchable> {
        Arc::new(Switchable { up: AtomicBool::new(up), permanent, calls: AtomicU64::new(0) })
    }

    fn tenant() -> TenantId {
        TenantId::parse("t").unwrap()
    }

    #[test]
    fn an_instance_gets_its_share_of_the_limit_and_never_zero() {
        let n = |i| NonZeroU32::new(i).unwrap();
        assert_eq!(share(100, n(4)), 25);
        assert_eq!(share(100, n(1)), 100);
        assert_eq!(share(3, n(10)), 1);
        assert_eq!(share(0, n(10)), 0);
    }

    #[tokio::test]
    async fn failing_open_admits_the_instance_share_in_process() {
        let p = primary(false, false);
        let limiter =
            FallbackRateLimiter::new(p.clone(), RedisDownPolicy::FailOpen { instances: NonZeroU32::new(4).unwrap() });
        let quota = Quota { limit: 8, window: Duration::from_secs(60) };
        let mut admitted = 0;
        for _ in 0..10 {
            if limiter.check(&tenant(), quota).await.unwrap().allowed {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 2, "8 ÷ 4 instances");
        assert_eq!(limiter.fallbacks(), 10);
        assert_eq!(p.calls.load(Ordering::Relaxed), 1, "a failed primary is skipped, not asked on every request");
    }

    #[tokio::test]
    async fn failing_open_weighs_in_process_against_the_instance_share() {
        let p = primary(false, false);
        let limiter =
            FallbackRateLimiter::new(p.clone(), RedisDownPolicy::FailOpen { instances: NonZeroU32::new(4).unwrap() });
        let quota = Quota { limit: 1000, window: Duration::from_secs(60) };
        assert!(limiter.check_weighted(&tenant(), Meter::Bytes, quota, 200).await.unwrap().allowed);
        let d = limiter.check_weighted(&tenant(), Meter::Bytes, quota, 100).await.unwrap();
        assert!(!d.allowed && d.limit == 250, "1000 ÷ 4 instances, 200 already used: {d:?}");
        assert!(limiter.check(&tenant(), Quota { limit: 1, ..quota }).await.unwrap().allowed, "requests apart");
        assert_eq!(limiter.fallbacks(), 3);
    }

    #[tokio::test]
    async fn failing_closed_rejects_with_a_retriable_error_naming_the_wait() {
        let limiter = FallbackRateLimiter::new(primary(false, false), RedisDownPolicy::FailClosed)
            .with_retry_after(Duration::from_secs(2));
        let err = limiter.check(&tenant(), Quota { limit: 8, window: Duration::from_secs(1) }).await.unwrap_err();
        assert!(matches!(err, PortError::Unavailable(_)) && err.to_string().contains("retry after 2 s"), "{err}");
        assert_eq!(limiter.retry_after(), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn the_primary_is_asked_again_after_the_retry_interval() {
        let p = primary(false, false);
        let limiter =
            FallbackRateLimiter::new(p.clone(), RedisDownPolicy::default()).with_retry_after(Duration::from_millis(30));
        let quota = Quota { limit: 8, window: Duration::from_secs(1) };
        assert!(limiter.check(&tenant(), quota).await.unwrap().now_micros < u64::MAX);
        p.up.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(limiter.check(&tenant(), quota).await.unwrap().now_micros, u64::MAX, "the primary decides again");
        assert_eq!(limiter.fallbacks(), 1);
    }

    #[tokio::test]
    async fn a_permanent_primary_error_is_passed_through_not_hidden() {
        let limiter = FallbackRateLimiter::new(primary(false, true), RedisDownPolicy::default());
        let err = limiter.check(&tenant(), Quota { limit: 8, window: Duration::from_secs(1) }).await.unwrap_err();
        assert!(!err.is_retriable());
        assert_eq!(limiter.fallbacks(), 0);
    }
}
