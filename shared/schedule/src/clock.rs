//! Where "now" comes from. The runner asks a [`Clock`] instead of the system, so its tests can
//! hold time still, step it forward across a fire, or step it back as a misbehaving host would.

use chrono::{DateTime, TimeDelta, Utc};
use std::sync::{Arc, Mutex};

/// The current time.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told. Clones share one time, so a test keeps a clone and hands
/// another (or an `Arc<dyn Clock>`) to the code under test.
#[derive(Debug, Clone)]
pub struct TestClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl TestClock {
    pub fn new(now: DateTime<Utc>) -> TestClock {
        TestClock { now: Arc::new(Mutex::new(now)) }
    }

    /// Sets the time, forwards or backwards.
    pub fn set(&self, now: DateTime<Utc>) {
        *self.lock() = now;
    }

    /// Moves the time by `by`, which may be negative.
    pub fn advance(&self, by: TimeDelta) {
        let mut now = self.lock();
        *now += by;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        // The guarded value is a plain timestamp: a panic elsewhere cannot leave it half-written.
        self.now.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_test_clock_stands_still_until_moved_and_clones_share_its_time() {
        let start = Utc.with_ymd_and_hms(2026, 3, 8, 6, 0, 0).unwrap();
        let clock = TestClock::new(start);
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        assert_eq!(shared.now(), start);
        clock.advance(TimeDelta::minutes(90));
        assert_eq!(shared.now(), start + TimeDelta::minutes(90));
        clock.advance(TimeDelta::minutes(-30));
        assert_eq!(shared.now(), start + TimeDelta::minutes(60));
        clock.set(start);
        assert_eq!(shared.now(), start);
    }

    #[test]
    fn the_system_clock_reads_the_current_time() {
        let before = Utc::now();
        let now = SystemClock.now();
        assert!(now >= before && now <= Utc::now());
    }
}
