//! In-process sliding-window limiter with the semantics of the Redis one: an exact sliding log
//! per tenant; a request is admitted only if fewer than `limit` admissions happened in the last
//! `window`; rejections are not recorded; idle tenants are forgotten.

use async_trait::async_trait;
use openqq_core::ports::PortResult;
use openqq_core::{Decision, Quota, RateLimiter, TenantId};
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
    decisions: u64,
    /// Longest window seen, so a sweep never drops a log that a longer quota still needs.
    longest_window_us: u64,
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
        state.decisions += 1;
        state.longest_window_us = state.longest_window_us.max(window_us);
        if state.decisions.is_multiple_of(SWEEP_EVERY) {
            let keep_after = now_us.saturating_sub(state.longest_window_us);
            state.logs.retain(|_, log| log.back().is_some_and(|t| *t > keep_after));
        }
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
}

#[async_trait]
impl RateLimiter for InProcessRateLimiter {
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision> {
        Ok(self.decide(tenant, quota, || self.epoch.elapsed().as_micros() as u64))
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
}
