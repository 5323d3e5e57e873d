//! Limiter conformance: exactness judged by the limiter's own clock. Several concurrent callers
//! hammer one tenant; no window of length W may ever hold more than N admissions, the admitted
//! total must be close to what the windows allow, and the first entry must expire exactly one
//! window after it was admitted.

use super::unique;
use openqq_core::{Decision, Quota, RateLimiter, TenantId};
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

/// Runs every limiter check against `limiter`.
pub async fn run(limiter: Arc<dyn RateLimiter>) {
    never_more_than_the_limit_in_any_window(limiter.clone(), false).await;
    never_more_than_the_limit_in_any_window(limiter.clone(), true).await;
    the_first_entry_expires_one_window_after_admission(limiter.clone()).await;
    tenants_have_separate_windows(limiter.clone()).await;
    remaining_counts_down_and_reset_stays_within_the_window(limiter).await;
}

pub async fn never_more_than_the_limit_in_any_window(limiter: Arc<dyn RateLimiter>, bursty: bool) {
    let tenant = TenantId::parse(unique("hammered")).unwrap();
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    let run_for = Duration::from_millis(1200);
    let decisions = hammer(limiter, &tenant, quota, 3, run_for, bursty).await;
    let max = max_in_any_window(&decisions, quota.window);
    assert!(max <= 20, "at most 20 admissions in any 100 ms window, saw {max} (bursty={bursty})");
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
            in_window, 20,
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
