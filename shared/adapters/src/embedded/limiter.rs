//! In-process sliding-window limiter with the semantics of the Redis one: an exact sliding log
//! per tenant; a request is admitted only if fewer than `limit` admissions happened in the last
//! `window`; rejections are not recorded; idle tenants are forgotten.
//!
//! Weighted checks (bytes per window) keep a second log per tenant whose entries carry their
//! cost, with a running total, so a decision costs the entries it expires, not the whole window.

use async_trait::async_trait;
use openqq_core::ports::PortResult;
use openqq_core::{Decision, Meter, Quota, RateLimiter, TenantId};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many decisions pass between sweeps of idle tenants.
const SWEEP_EVERY: u64 = 4096;

pub struct InProcessRateLimiter {
    /// Time zero of this limiter's clock; decisions report microseconds since it.
    epoch: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Admission times (µs since `epoch`) per tenant, oldest first.
    logs: HashMap<TenantId, VecDeque<u64>>,
    /// Weighted admissions per tenant and meter, apart from `logs` (another quota, another unit).
    weighted: HashMap<(TenantId, Meter), WeightedLog>,
    decisions: u64,
    /// Longest window seen, so a sweep never drops a log that a longer quota still needs.
    longest_window_us: u64,
}

/// Admissions with their cost, oldest first, and the sum of their costs.
#[derive(Default)]
struct WeightedLog {
    entries: VecDeque<(u64, u32)>,
    total: u64,
}

impl State {
    /// Counts a decision and, every `SWEEP_EVERY` decisions, forgets idle tenants' logs.
    fn tick(&mut self, now_us: u64, window_us: u64) {
        self.decisions += 1;
        self.longest_window_us = self.longest_window_us.max(window_us);
        if self.decisions.is_multiple_of(SWEEP_EVERY) {
            let keep_after = now_us.saturating_sub(self.longest_window_us);
            self.logs.retain(|_, log| log.back().is_some_and(|t| *t > keep_after));
            self.weighted.retain(|_, log| log.entries.back().is_some_and(|(t, _)| *t > keep_after));
        }
    }
}

impl Default for InProcessRateLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl InProcessRateLimiter {
    pub fn new() -> Self {
        Self { epoch: Instant::now(), state: Mutex::new(State::default()) }
    }

    /// The decision for `tenant` at the time `clock` reads; pure apart from the state it
    /// updates. The clock is read under the lock, so decisions are made in timestamp order (as
    /// Redis makes them), which is what lets their timestamps prove exactness.
    fn decide(&self, tenant: &TenantId, quota: Quota, clock: impl FnOnce() -> u64) -> Decision {
        let window_us = quota.window.as_micros().max(1) as u64;
        let mut state = self.state.lock().unwrap();
        let now_us = clock();
        state.tick(now_us, window_us);
        let log = state.logs.entry(tenant.clone()).or_default();
        // An entry at time t is inside the window (now - W, now]; at exactly now - W it has expired.
        while log.front().is_some_and(|t| *t + window_us <= now_us) {
            log.pop_front();
        }
        let allowed = (log.len() as u64) < quota.limit as u64;
        if allowed {
            log.push_back(now_us);
        }
        let reset = log.front().map(|t| Duration::from_micros(t + window_us - now_us)).unwrap_or(Duration::ZERO);
        Decision {
            allowed,
            limit: quota.limit,
            remaining: quota.limit.saturating_sub(log.len() as u32),
            reset,
            now_micros: now_us,
        }
    }

    /// The weighted decision for `cost` units of `meter` of `tenant` at the time `clock` reads
    /// (see [`RateLimiter::check_weighted`]); the clock is read under the lock, as in `decide`.
    fn decide_weighted(
        &self,
        tenant: &TenantId,
        meter: Meter,
        quota: Quota,
        cost: u32,
        clock: impl FnOnce() -> u64,
    ) -> Decision {
        let window_us = quota.window.as_micros().max(1) as u64;
        let limit = u64::from(quota.limit);
        let mut state = self.state.lock().unwrap();
        let now_us = clock();
        state.tick(now_us, window_us);
        let log = state.weighted.entry((tenant.clone(), meter)).or_default();
        while let Some(&(t, w)) = log.entries.front() {
            if t + window_us > now_us {
                break;
            }
            log.total -= u64::from(w);
            log.entries.pop_front();
        }
        let allowed = log.total + u64::from(cost) <= limit;
        if allowed && cost > 0 {
            log.entries.push_back((now_us, cost));
            log.total += u64::from(cost);
        }
        let expires = |t: u64| Duration::from_micros(t + window_us - now_us);
        let reset = if allowed {
            log.entries.front().map_or(Duration::ZERO, |&(t, _)| expires(t))
        } else if u64::from(cost) > limit {
            quota.window
        } else {
            // The oldest entries whose expiry frees enough for `cost`.
            let need = log.total + u64::from(cost) - limit;
            let mut freed = 0u64;
            let mut at = quota.window;
            for &(t, w) in &log.entries {
                freed += u64::from(w);
                if freed >= need {
                    at = expires(t);
                    break;
                }
            }
            at
        };
        Decision {
            allowed,
            limit: quota.limit,
            remaining: u32::try_from(limit.saturating_sub(log.total)).unwrap_or(u32::MAX),
            reset,
            now_micros: now_us,
        }
    }
}

#[async_trait]
impl RateLimiter for InProcessRateLimiter {
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision> {
        Ok(self.decide(tenant, quota, || self.epoch.elapsed().as_micros() as u64))
    }

    async fn check_weighted(&self, tenant: &TenantId, meter: Meter, quota: Quota, cost: u32) -> PortResult<Decision> {
        Ok(self.decide_weighted(tenant, meter, quota, cost, || self.epoch.elapsed().as_micros() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_expires_exactly_one_window_after_it_was_admitted() {
        let l = InProcessRateLimiter::new();
        let t = TenantId::parse("t").unwrap();
        let q = Quota { limit: 2, window: Duration::from_micros(100) };
        assert!(l.decide(&t, q, || 1000).allowed);
        assert!(l.decide(&t, q, || 1050).allowed);
        let rejected = l.decide(&t, q, || 1099);
        assert!(!rejected.allowed);
        assert_eq!(rejected.reset, Duration::from_micros(1));
        assert!(l.decide(&t, q, || 1100).allowed, "the first entry expires at 1000 + 100");
        assert!(!l.decide(&t, q, || 1149).allowed);
    }

    #[test]
    fn idle_tenants_are_swept() {
        let l = InProcessRateLimiter::new();
        let q = Quota { limit: 1, window: Duration::from_micros(10) };
        for i in 0..SWEEP_EVERY {
            l.decide(&TenantId::parse(format!("t{i}")).unwrap(), q, || i * 100);
        }
        assert!(l.state.lock().unwrap().logs.len() < 10);
    }

    #[test]
    fn a_weighted_entry_frees_its_cost_exactly_one_window_after_it_was_admitted() {
        let l = InProcessRateLimiter::new();
        let t = TenantId::parse("t").unwrap();
        let q = Quota { limit: 100, window: Duration::from_micros(100) };
        assert!(l.decide_weighted(&t, Meter::Bytes, q, 60, || 1000).allowed);
        let d = l.decide_weighted(&t, Meter::Bytes, q, 30, || 1050);
        assert!(d.allowed && d.remaining == 10, "{d:?}");
        let rejected = l.decide_weighted(&t, Meter::Bytes, q, 50, || 1060);
        assert!(!rejected.allowed);
        assert_eq!(rejected.reset, Duration::from_micros(40), "the first entry's expiry frees enough");
        assert_eq!(
            l.decide_weighted(&t, Meter::Bytes, q, 71, || 1099).reset,
            Duration::from_micros(51),
            "both must expire"
        );
        assert!(l.decide_weighted(&t, Meter::Bytes, q, 50, || 1100).allowed, "60 freed at 1000 + 100, 30 + 50 fit");
        assert!(!l.decide_weighted(&t, Meter::Bytes, q, 21, || 1100).allowed);
        assert!(l.decide_weighted(&t, Meter::Bytes, q, 20, || 1100).allowed, "exactly the limit is admitted");
    }

    #[test]
    fn a_cost_over_the_limit_is_never_admitted_and_a_zero_cost_always_is() {
        let l = InProcessRateLimiter::new();
        let t = TenantId::parse("t").unwrap();
        let q = Quota { limit: 10, window: Duration::from_micros(100) };
        let d = l.decide_weighted(&t, Meter::Bytes, q, 11, || 0);
        assert!(!d.allowed && d.reset == q.window && d.remaining == 10, "{d:?}");
        assert!(l.decide_weighted(&t, Meter::Bytes, q, 10, || 1).allowed);
        assert!(l.decide_weighted(&t, Meter::Bytes, q, 0, || 2).allowed);
        assert!(
            l.state.lock().unwrap().weighted[&(t.clone(), Meter::Bytes)].entries.len() == 1,
            "a zero cost leaves no entry"
        );
    }
}
