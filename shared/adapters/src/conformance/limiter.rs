//! Limiter conformance: exactness judged by the limiter's own clock. Several concurrent callers
//! hammer one tenant; no window of length W may ever hold more than N admissions, the admitted
//! total must be close to what the windows allow, and the first entry must expire exactly one
//! window after it was admitted. The weighted checks (bytes per window) are held to the same
//! standard by cost: no window holds more than the limit's worth, every rejection happened when
//! the cost did not fit, and `reset` names the moment it would have.
//!
//! How the limiter answers is a declared capability ([`Answers`]): exactly at the quota (the
//! in-process and Redis limiters, and the fallback limiter while its shared limiter is up),
//! exactly at a share of it (the fail-open policy while the shared limiter is down), or not at
//! all (the fail-closed policy while it is down).

use super::unique;
use openqq_core::{Decision, Meter, PortError, Quota, RateLimiter, TenantId};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Checks a log of decisions: at most `limit` admissions in any half-open window `(t - W, t]`.
/// Returns the largest count seen. Public so tests can show it catches a broken limiter.
pub fn max_in_any_window(decisions: &[Decision], window: Duration) -> usize {
    let mut admitted: Vec<u64> = decisions.iter().filter(|d| d.allowed).map(|d| d.now_micros).collect();
    admitted.sort_unstable();
    let w = window.as_micros() as u64;
    let mut max = 0;
    let mut lo = 0;
    for hi in 0..admitted.len() {
        while admitted[lo] + w <= admitted[hi] {
            lo += 1;
        }
        max = max.max(hi - lo + 1);
    }
    max
}

/// Several tasks call the limiter for one tenant for `run_for`, steadily or in bursts; returns
/// every decision.
pub async fn hammer(
    limiter: Arc<dyn RateLimiter>,
    tenant: &TenantId,
    quota: Quota,
    clients: usize,
    run_for: Duration,
    bursty: bool,
) -> Vec<Decision> {
    let mut tasks = Vec::new();
    for c in 0..clients {
        let limiter = limiter.clone();
        let tenant = tenant.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let start = Instant::now();
            let mut i = 0u64;
            while start.elapsed() < run_for {
                out.push(limiter.check(&tenant, quota).await.expect("limiter answers"));
                i += 1;
                let pause = if bursty && (i + c as u64).is_multiple_of(50) { 37 } else { 1 };
                tokio::time::sleep(Duration::from_micros(200 * pause)).await;
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// How a limiter under test answers during the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Every check is decided by an exact sliding window at the quota asked for: every check of
    /// the suite runs.
    Exactly,
    /// Every check is decided by an exact sliding window at `limit ÷ instances` (at least 1 for a
    /// non-zero limit): the fail-open policy while the shared limiter is down. The exactness
    /// checks (counted, steady and bursty, and weighted) run at that share, and tenants are
    /// checked to have separate windows. The checks of `remaining`, `reset` and expiry at a given
    /// limit do not run: they hold the deciding limiter (the in-process one) to exact numbers in
    /// its own run with [`Answers::Exactly`].
    Share { instances: NonZeroU32 },
    /// Every check, counted or weighted, is refused with a retriable [`PortError::Unavailable`]:
    /// the fail-closed policy while the shared limiter is down. Only that is checked; no
    /// decision exists to hold to a window.
    Unavailable,
}

/// What a limiter under test offers the suite.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    pub answers: Answers,
}

impl Capabilities {
    /// An exact limiter: every check applies.
    pub const EXACT: Capabilities = Capabilities { answers: Answers::Exactly };

    /// The limit a quota of `limit` is held to.
    fn held_to(&self, limit: u32) -> u32 {
        match self.answers {
            Answers::Share { instances } if limit > 0 => (limit / instances.get()).max(1),
            _ => limit,
        }
    }
}

/// Runs every limiter check against `limiter` that `capabilities` allows.
pub async fn run(limiter: Arc<dyn RateLimiter>, capabilities: &Capabilities) {
    match capabilities.answers {
        Answers::Exactly => {
            never_more_than_the_limit_in_any_window(limiter.clone(), capabilities, false).await;
            never_more_than_the_limit_in_any_window(limiter.clone(), capabilities, true).await;
            the_first_entry_expires_one_window_after_admission(limiter.clone()).await;
            tenants_have_separate_windows(limiter.clone()).await;
            remaining_counts_down_and_reset_stays_within_the_window(limiter.clone()).await;
            weighted_admissions_never_exceed_the_limit_in_any_window(limiter.clone(), capabilities).await;
            a_weighted_rejection_is_not_recorded_and_resets_when_enough_has_expired(limiter.clone()).await;
            a_cost_over_the_limit_is_never_admitted_and_a_zero_cost_always_is(limiter.clone()).await;
            weighted_and_counted_logs_are_separate(limiter).await;
        }
        Answers::Share { .. } => {
            never_more_than_the_limit_in_any_window(limiter.clone(), capabilities, false).await;
            never_more_than_the_limit_in_any_window(limiter.clone(), capabilities, true).await;
            tenants_have_separate_windows(limiter.clone()).await;
            weighted_admissions_never_exceed_the_limit_in_any_window(limiter, capabilities).await;
        }
        Answers::Unavailable => every_check_is_refused_as_unavailable(limiter).await,
    }
}

/// A limiter that declares [`Answers::Unavailable`] refuses counted and weighted checks alike,
/// retriably, for every tenant and every cost.
pub async fn every_check_is_refused_as_unavailable(limiter: Arc<dyn RateLimiter>) {
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    for tenant in [unique("closed"), unique("closed")] {
        let tenant = TenantId::parse(tenant).unwrap();
        for cost in [None, Some(0), Some(1), Some(20)] {
            let refused = match cost {
                None => limiter.check(&tenant, quota).await,
                Some(cost) => limiter.check_weighted(&tenant, Meter::Bytes, quota, cost).await,
            };
            let err = refused.expect_err("no decision while unavailable");
            assert!(
                matches!(err, PortError::Unavailable { .. }) && err.is_retriable(),
                "a check of cost {cost:?} is refused as retriably unavailable: {err}"
            );
        }
    }
}

/// Steady or bursty load from three clients: never more than the limit held to (the quota's 20,
/// or the declared share of it) in any window, and not starved.
pub async fn never_more_than_the_limit_in_any_window(
    limiter: Arc<dyn RateLimiter>,
    capabilities: &Capabilities,
    bursty: bool,
) {
    let tenant = TenantId::parse(unique("hammered")).unwrap();
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    let held_to = capabilities.held_to(quota.limit) as usize;
    let run_for = Duration::from_millis(1200);
    let decisions = hammer(limiter, &tenant, quota, 3, run_for, bursty).await;
    let max = max_in_any_window(&decisions, quota.window);
    assert!(max <= held_to, "at most {held_to} admissions in any 100 ms window, saw {max} (bursty={bursty})");
    // Not starved, judged exactly rather than by a throughput ratio (which a loaded machine
    // skews by starving the clients, not the limiter): every rejection happened while the
    // window ending at it already held the full limit of admissions.
    let rejections: Vec<u64> = decisions.iter().filter(|d| !d.allowed).map(|d| d.now_micros).collect();
    assert!(!rejections.is_empty(), "the load exceeded the limit, so some were rejected");
    let mut admitted: Vec<u64> = decisions.iter().filter(|d| d.allowed).map(|d| d.now_micros).collect();
    admitted.sort_unstable();
    let w = quota.window.as_micros() as u64;
    for t in rejections {
        let in_window = admitted.partition_point(|a| *a <= t) - admitted.partition_point(|a| *a + w <= t);
        assert_eq!(
            in_window, held_to,
            "a request at {t} µs was rejected with only {in_window} admissions in its window (bursty={bursty})"
        );
    }
}

pub async fn the_first_entry_expires_one_window_after_admission(limiter: Arc<dyn RateLimiter>) {
    let tenant = TenantId::parse(unique("probe")).unwrap();
    let quota = Quota { limit: 3, window: Duration::from_millis(300) };
    let mut first = None;
    for i in 0..3 {
        let d = limiter.check(&tenant, quota).await.unwrap();
        assert!(d.allowed);
        first.get_or_insert(d.now_micros);
        if i == 0 {
            // Space the first admission from the others, so its expiry frees exactly one slot.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let first = first.unwrap();
    let rejected = limiter.check(&tenant, quota).await.unwrap();
    assert!(!rejected.allowed, "the fourth request in the window is rejected");
    assert_eq!(rejected.remaining, 0);
    let expires_at = first + 300_000;
    assert!(
        rejected.reset.as_micros() as u64 <= expires_at - rejected.now_micros + 1000,
        "reset points at the first entry's expiry"
    );
    // Just before the first entry expires: still full.
    let sleep_until = |t: u64, now: u64| Duration::from_micros(t.saturating_sub(now));
    tokio::time::sleep(sleep_until(expires_at - 60_000, rejected.now_micros)).await;
    let before = limiter.check(&tenant, quota).await.unwrap();
    if before.now_micros < expires_at {
        assert!(!before.allowed, "just before the first entry expires the window is still full");
    }
    // Just after: exactly one slot frees.
    let now = before.now_micros;
    tokio::time::sleep(sleep_until(expires_at + 5_000, now)).await;
    let after = limiter.check(&tenant, quota).await.unwrap();
    assert!(after.allowed, "once the first entry expired one request is admitted");
    let again = limiter.check(&tenant, quota).await.unwrap();
    if again.now_micros < first + 300_000 + 40_000 {
        assert!(!again.allowed, "only the one expired slot was freed");
    }
}

pub async fn tenants_have_separate_windows(limiter: Arc<dyn RateLimiter>) {
    let quota = Quota { limit: 1, window: Duration::from_secs(10) };
    let a = TenantId::parse(unique("a")).unwrap();
    let b = TenantId::parse(unique("b")).unwrap();
    assert!(limiter.check(&a, quota).await.unwrap().allowed);
    assert!(!limiter.check(&a, quota).await.unwrap().allowed);
    assert!(limiter.check(&b, quota).await.unwrap().allowed, "one tenant's use does not limit another");
}

pub async fn remaining_counts_down_and_reset_stays_within_the_window(limiter: Arc<dyn RateLimiter>) {
    let tenant = TenantId::parse(unique("headers")).unwrap();
    let quota = Quota { limit: 3, window: Duration::from_secs(10) };
    let mut remaining = Vec::new();
    for _ in 0..4 {
        let d = limiter.check(&tenant, quota).await.unwrap();
        assert_eq!(d.limit, 3, "the decision carries the limit for RateLimit-Limit");
        assert!(d.reset > Duration::ZERO && d.reset <= quota.window, "reset lies within the window, was {:?}", d.reset);
        remaining.push((d.allowed, d.remaining));
    }
    assert_eq!(remaining, vec![(true, 2), (true, 1), (true, 0), (false, 0)], "remaining counts the admissions left");
}

// ---------------------------------------------------------------------------------------------
// Weighted checks

/// Like [`hammer`], with weighted checks of varying cost (1 to `max_cost`); every decision with
/// its cost.
pub async fn hammer_weighted(
    limiter: Arc<dyn RateLimiter>,
    tenant: &TenantId,
    quota: Quota,
    max_cost: u32,
    clients: usize,
    run_for: Duration,
) -> Vec<(Decision, u32)> {
    let mut tasks = Vec::new();
    for c in 0..clients {
        let limiter = limiter.clone();
        let tenant = tenant.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let start = Instant::now();
            let mut i = 0u32;
            while start.elapsed() < run_for {
                let cost = 1 + (i.wrapping_mul(37) + c as u32 * 11) % max_cost;
                out.push((
                    limiter.check_weighted(&tenant, Meter::Bytes, quota, cost).await.expect("limiter answers"),
                    cost,
                ));
                i += 1;
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// The largest sum of admitted costs in any half-open window `(t - W, t]`. Public so tests can
/// show it catches a broken limiter.
pub fn max_weight_in_any_window(decisions: &[(Decision, u32)], window: Duration) -> u64 {
    let mut admitted: Vec<(u64, u64)> =
        decisions.iter().filter(|(d, _)| d.allowed).map(|(d, c)| (d.now_micros, u64::from(*c))).collect();
    admitted.sort_unstable();
    let w = window.as_micros() as u64;
    let (mut max, mut sum, mut lo) = (0, 0, 0);
    for hi in 0..admitted.len() {
        sum += admitted[hi].1;
        while admitted[lo].0 + w <= admitted[hi].0 {
            sum -= admitted[lo].1;
            lo += 1;
        }
        max = max.max(sum);
    }
    max
}

/// Weighted load of costs 1 to 400: never more than the limit held to (the quota's 2000 units,
/// or the declared share of it) in any window, and every rejection because the cost did not fit.
pub async fn weighted_admissions_never_exceed_the_limit_in_any_window(
    limiter: Arc<dyn RateLimiter>,
    capabilities: &Capabilities,
) {
    let tenant = TenantId::parse(unique("weighed")).unwrap();
    let quota = Quota { limit: 2000, window: Duration::from_millis(100) };
    let held_to = u64::from(capabilities.held_to(quota.limit));
    let decisions = hammer_weighted(limiter, &tenant, quota, 400, 3, Duration::from_millis(1200)).await;
    let max = max_weight_in_any_window(&decisions, quota.window);
    assert!(max <= held_to, "at most {held_to} units admitted in any 100 ms window, saw {max}");
    // Not starved: every rejection happened while its cost did not fit beside what the window
    // ending at it already held.
    let mut admitted: Vec<(u64, u64)> =
        decisions.iter().filter(|(d, _)| d.allowed).map(|(d, c)| (d.now_micros, u64::from(*c))).collect();
    admitted.sort_unstable();
    let w = quota.window.as_micros() as u64;
    let rejections: Vec<(u64, u32)> =
        decisions.iter().filter(|(d, _)| !d.allowed).map(|(d, c)| (d.now_micros, *c)).collect();
    assert!(!rejections.is_empty(), "the load exceeded the limit, so some were rejected");
    for (t, cost) in rejections {
        let held: u64 = admitted.iter().filter(|(a, _)| *a <= t && *a + w > t).map(|(_, c)| c).sum();
        assert!(
            held + u64::from(cost) > held_to,
            "a cost of {cost} at {t} µs was rejected with only {held} units held"
        );
    }
}

pub async fn a_weighted_rejection_is_not_recorded_and_resets_when_enough_has_expired(limiter: Arc<dyn RateLimiter>) {
    let tenant = TenantId::parse(unique("resets")).unwrap();
    let quota = Quota { limit: 100, window: Duration::from_millis(300) };
    let first = limiter.check_weighted(&tenant, Meter::Bytes, quota, 60).await.unwrap();
    assert!(first.allowed && first.remaining == 40, "{first:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = limiter.check_weighted(&tenant, Meter::Bytes, quota, 30).await.unwrap();
    assert!(second.allowed && second.remaining == 10, "{second:?}");
    assert_eq!(
        second.reset.as_micros() as u64,
        first.now_micros + 300_000 - second.now_micros,
        "an admission's reset points at the oldest entry's expiry"
    );
    let rejected = limiter.check_weighted(&tenant, Meter::Bytes, quota, 50).await.unwrap();
    assert!(!rejected.allowed && rejected.remaining == 10 && rejected.limit == 100, "{rejected:?}");
    assert_eq!(
        rejected.reset.as_micros() as u64,
        first.now_micros + 300_000 - rejected.now_micros,
        "a rejection's reset points at the expiry that frees enough for its cost"
    );
    let fits = limiter.check_weighted(&tenant, Meter::Bytes, quota, 10).await.unwrap();
    assert!(fits.allowed && fits.remaining == 0, "the rejection was not recorded: {fits:?}");
    let wait = Duration::from_micros(first.now_micros + 305_000 - fits.now_micros);
    tokio::time::sleep(wait).await;
    let after = limiter.check_weighted(&tenant, Meter::Bytes, quota, 50).await.unwrap();
    if after.now_micros < second.now_micros + 300_000 {
        assert!(after.allowed && after.remaining == 10, "the first entry's 60 units came free: {after:?}");
    }
}

pub async fn a_cost_over_the_limit_is_never_admitted_and_a_zero_cost_always_is(limiter: Arc<dyn RateLimiter>) {
    let tenant = TenantId::parse(unique("costly")).unwrap();
    let quota = Quota { limit: 100, window: Duration::from_secs(10) };
    let over = limiter.check_weighted(&tenant, Meter::Bytes, quota, 101).await.unwrap();
    assert!(!over.allowed && over.remaining == 100 && over.reset == quota.window, "{over:?}");
    let all = limiter.check_weighted(&tenant, Meter::Bytes, quota, 100).await.unwrap();
    assert!(all.allowed && all.remaining == 0, "exactly the limit fits: {all:?}");
    assert!(limiter.check_weighted(&tenant, Meter::Bytes, quota, 0).await.unwrap().allowed, "a zero cost always fits");
    assert!(!limiter.check_weighted(&tenant, Meter::Bytes, quota, 1).await.unwrap().allowed);
}

pub async fn weighted_and_counted_logs_are_separate(limiter: Arc<dyn RateLimiter>) {
    let (a, b) = (TenantId::parse(unique("a")).unwrap(), TenantId::parse(unique("b")).unwrap());
    let one = Quota { limit: 1, window: Duration::from_secs(10) };
    let ten = Quota { limit: 10, window: Duration::from_secs(10) };
    assert!(limiter.check(&a, one).await.unwrap().allowed);
    assert!(limiter.check_weighted(&a, Meter::Bytes, ten, 10).await.unwrap().allowed, "a request is not a unit");
    assert!(!limiter.check(&a, one).await.unwrap().allowed, "units are not requests");
    assert!(!limiter.check_weighted(&a, Meter::Bytes, ten, 1).await.unwrap().allowed);
    assert!(
        limiter.check_weighted(&b, Meter::Bytes, ten, 10).await.unwrap().allowed,
        "one tenant's units do not limit another"
    );
    assert!(
        limiter.check_weighted(&a, Meter::BatchItems, ten, 10).await.unwrap().allowed,
        "one meter's units do not limit another's"
    );
    assert!(!limiter.check_weighted(&a, Meter::BatchItems, ten, 1).await.unwrap().allowed);
    assert!(!limiter.check_weighted(&a, Meter::Bytes, ten, 1).await.unwrap().allowed);
}
