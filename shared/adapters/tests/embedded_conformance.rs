//! The embedded adapters against the port conformance suites.

use openqq_adapters::conformance::{self, limiter, log, objects, store};
use openqq_adapters::{
    Durability, EmbeddedDesignStore, EmbeddedEventLog, EmbeddedObjectStore, FallbackRateLimiter, InProcessRateLimiter,
    RedisDownPolicy,
};
use openqq_core::{Decision, Quota, RateLimiter, TenantId};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_log_passes_the_event_log_suite() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedEventLog::open(dir.path(), 12, Durability::Process).unwrap();
    let placement_topic = Some(log::PlacementTopic { topic: conformance::unique("placement"), partitions: 12 });
    log::run(&log, &log::Capabilities { placement_topic }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_log_keeps_records_and_offsets_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedEventLog::open(dir.path(), 3, Durability::Process).unwrap();
    log::offsets_move_only_when_committed_and_reading_resumes_there(&log).await;
    use openqq_core::{EventLog, LogSource, Record};
    log.publish("t", vec![Record { key: "k".into(), value: b"v".to_vec(), headers: vec![] }]).await.unwrap();
    log.commit("g", "t", openqq_core::partition::partition_for("k", 3), 1).await.unwrap();
    drop(log);
    let log = EmbeddedEventLog::open(dir.path(), 3, Durability::Process).unwrap();
    let p = openqq_core::partition::partition_for("k", 3);
    assert_eq!(log.committed("g", "t", p).await.unwrap(), 1);
    assert_eq!(log.end_offsets("t").await.unwrap()[p as usize], 1);
    log.publish("t", vec![Record { key: "k".into(), value: b"w".to_vec(), headers: vec![] }]).await.unwrap();
    let recs = log.read("t", p, 0, 10).await.unwrap();
    assert_eq!(recs.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1], "offsets continue after a reopen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_passes_the_design_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap();
    store::run(&store, &store::Capabilities::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_object_store_passes_the_object_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedObjectStore::open(dir.path()).unwrap();
    // Reports are written by the results function; nothing uploads to a directory directly.
    objects::run(&store, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_limiter_passes_the_limiter_suite() {
    limiter::run(Arc::new(InProcessRateLimiter::new()), &limiter::Capabilities::EXACT).await;
}

/// While its shared limiter answers, the fallback limiter is that limiter: exact. (The same over
/// Redis, and with Redis down under each policy, runs in `redis_conformance`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_limiter_over_an_answering_in_process_limiter_passes_the_limiter_suite() {
    for policy in [RedisDownPolicy::default(), RedisDownPolicy::FailClosed] {
        let fallback = FallbackRateLimiter::new(Arc::new(InProcessRateLimiter::new()), policy);
        limiter::run(Arc::new(fallback), &limiter::Capabilities::EXACT).await;
    }
}

/// A fixed-window limiter: the classic mistake. Up to 2N admissions straddle a window edge.
struct FixedWindow {
    epoch: Instant,
    state: Mutex<(u64, u32)>,
}

#[async_trait::async_trait]
impl RateLimiter for FixedWindow {
    async fn check(&self, _: &TenantId, q: Quota) -> openqq_core::ports::PortResult<Decision> {
        let now = self.epoch.elapsed().as_micros() as u64;
        let w = q.window.as_micros() as u64;
        let mut s = self.state.lock().unwrap();
        if s.0 != now / w {
            *s = (now / w, 0);
        }
        let allowed = s.1 < q.limit;
        if allowed {
            s.1 += 1;
        }
        Ok(Decision { allowed, limit: q.limit, remaining: q.limit - s.1, reset: Duration::ZERO, now_micros: now })
    }

    /// Weighs nothing: every cost is one admission of a fixed window.
    async fn check_weighted(
        &self,
        t: &TenantId,
        _: openqq_core::Meter,
        q: Quota,
        _: u32,
    ) -> openqq_core::ports::PortResult<Decision> {
        self.check(t, q).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exactness_check_catches_a_fixed_window_limiter() {
    let bad: Arc<dyn RateLimiter> = Arc::new(FixedWindow { epoch: Instant::now(), state: Mutex::new((0, 0)) });
    let tenant = TenantId::parse("t").unwrap();
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    let decisions = limiter::hammer(bad, &tenant, quota, 3, Duration::from_millis(1200), false).await;
    let max = limiter::max_in_any_window(&decisions, quota.window);
    assert!(max > 20, "a fixed window lets more than the limit through across an edge (saw {max})");
}

/// A weighted limiter that forgets costs: each admission counts as one unit.
struct CountsNotCosts(InProcessRateLimiter);

#[async_trait::async_trait]
impl RateLimiter for CountsNotCosts {
    async fn check(&self, t: &TenantId, q: Quota) -> openqq_core::ports::PortResult<Decision> {
        self.0.check(t, q).await
    }

    async fn check_weighted(
        &self,
        t: &TenantId,
        meter: openqq_core::Meter,
        q: Quota,
        _: u32,
    ) -> openqq_core::ports::PortResult<Decision> {
        self.0.check_weighted(t, meter, q, 1).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_weighted_exactness_check_catches_a_limiter_that_counts_requests_instead_of_costs() {
    let bad: Arc<dyn RateLimiter> = Arc::new(CountsNotCosts(InProcessRateLimiter::new()));
    let tenant = TenantId::parse("t").unwrap();
    let quota = Quota { limit: 2000, window: Duration::from_millis(100) };
    let decisions = limiter::hammer_weighted(bad, &tenant, quota, 400, 3, Duration::from_millis(600)).await;
    let max = limiter::max_weight_in_any_window(&decisions, quota.window);
    assert!(max > 2000, "counting requests lets far more than the limit's worth through (saw {max})");
}

/// Two stores on one data directory (two `openqq up`s sharing the file) appending to one tenant's
/// feed from separate threads at once: every number is taken once, without a gap.
#[test]
fn two_stores_on_one_file_number_one_feed_without_gaps_or_repeats() {
    use openqq_core::{CorrelationId, DesignId, DesignWrites, EventKind, NewFeedEntry, TimelineEntry};
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::parse("shared-file").unwrap();
    let start = Arc::new(std::sync::Barrier::new(2));
    let appenders: Vec<_> = (0..2)
        .map(|_| {
            let store = EmbeddedDesignStore::open_with_readers(dir.path(), Durability::Process, 1).unwrap();
            let (tenant, start) = (tenant.clone(), start.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                start.wait();
                (0..200)
                    .map(|_| {
                        let (design, entry) = (
                            DesignId::generate(),
                            TimelineEntry {
                                event_id: uuid::Uuid::now_v7(),
                                kind: EventKind::DesignSubmitted,
                                revision: 1,
                                correlation_id: CorrelationId::parse("shared").unwrap(),
                                occurred_at: chrono::Utc::now(),
                            },
                        );
                        let new = NewFeedEntry {
                            design_id: &design,
                            entry: &entry,
                            verdict: None,
                            elapsed_ms: None,
                            batch: None,
                        };
                        runtime.block_on(store.append_feed(&tenant, &new)).unwrap()
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = appenders.into_iter().flat_map(|a| a.join().unwrap()).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=400).collect::<Vec<u64>>());
}
