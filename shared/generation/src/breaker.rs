//! The circuit breaker in front of one backend: after `failure_threshold` consecutive failed
//! calls it opens and refuses calls at once; after `cool_down` it lets one probe through
//! (half-open); the probe's success closes it, its failure opens it for another cool-down.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::settings::BreakerSettings;

/// The breaker's state, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through; the count of consecutive failures so far.
    Closed { failures: u32 },
    /// Calls are refused until the cool-down ends.
    Open,
    /// One probe is in flight; other calls are refused until it ends.
    HalfOpen,
}

#[derive(Debug)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen,
}

#[derive(Debug)]
pub(crate) struct Breaker {
    settings: BreakerSettings,
    state: Mutex<State>,
}

/// Leave to make one call; say how it went with [`succeeded`](Permit::succeeded) or
/// [`failed`](Permit::failed). A probe dropped unanswered (the caller gave up) reopens the
/// circuit with no cool-down, so the next call probes again.
#[must_use]
pub(crate) struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
    done: bool,
}

impl Breaker {
    pub fn new(settings: BreakerSettings) -> Self {
        Self { settings, state: Mutex::new(State::Closed { failures: 0 }) }
    }

    /// Leave for a call at `now`, or how long until a probe will be let through.
    pub fn admit(&self, now: Instant) -> Result<Permit<'_>, Duration> {
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => Ok(Permit { breaker: self, probe: false, done: false }),
            State::Open { until } if now >= until => {
                *state = State::HalfOpen;
                Ok(Permit { breaker: self, probe: true, done: false })
            }
            State::Open { until } => Err(until - now),
            // The probe decides soon; a caller is told to come back after at most a cool-down.
            State::HalfOpen => Err(self.settings.cool_down),
        }
    }

    pub fn state(&self) -> BreakerState {
        match *self.lock() {
            State::Closed { failures } => BreakerState::Closed { failures },
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen => BreakerState::HalfOpen,
        }
    }

    fn record(&self, probe: bool, success: bool, now: Instant) {
        let mut state = self.lock();
        let open = State::Open { until: now + self.settings.cool_down };
        *state = match (&*state, success) {
            (_, true) => State::Closed { failures: 0 },
            (State::HalfOpen, false) if probe => open,
            (State::Closed { failures }, false) if failures + 1 >= self.settings.failure_threshold => open,
            (State::Closed { failures }, false) => State::Closed { failures: failures + 1 },
            // A call admitted before the circuit opened failed: it stays open as it is.
            (State::Open { until }, false) => State::Open { until: *until },
            (State::HalfOpen, false) => State::HalfOpen,
        };
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is one enum written whole: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Permit<'_> {
    pub fn succeeded(mut self) {
        self.done = true;
        self.breaker.record(self.probe, true, Instant::now());
    }

    pub fn failed(mut self) {
        self.done = true;
        self.breaker.record(self.probe, false, Instant::now());
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe && !self.done {
            let mut state = self.breaker.lock();
            if matches!(*state, State::HalfOpen) {
                *state = State::Open { until: Instant::now() };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(BreakerSettings { failure_threshold: 3, cool_down: Duration::from_secs(10) })
    }

    #[test]
    fn the_circuit_opens_after_the_threshold_of_consecutive_failures() {
        let b = breaker();
        for _ in 0..2 {
            b.admit(Instant::now()).unwrap().failed();
        }
        assert_eq!(b.state(), BreakerState::Closed { failures: 2 });
        b.admit(Instant::now()).unwrap().failed();
        assert_eq!(b.state(), BreakerState::Open);
        let wait = b.admit(Instant::now()).err().unwrap();
        assert!(wait > Duration::from_secs(9) && wait <= Duration::from_secs(10));
    }

    #[test]
    fn a_success_resets_the_count() {
        let b = breaker();
        b.admit(Instant::now()).unwrap().failed();
        b.admit(Instant::now()).unwrap().failed();
        b.admit(Instant::now()).unwrap().succeeded();
        b.admit(Instant::now()).unwrap().failed();
        assert_eq!(b.state(), BreakerState::Closed { failures: 1 });
    }

    #[test]
    fn after_the_cool_down_one_probe_goes_through_and_its_success_closes() {
        let b = breaker();
        for _ in 0..3 {
            b.admit(Instant::now()).unwrap().failed();
        }
        let later = Instant::now() + Duration::from_secs(11);
        let probe = b.admit(later).unwrap();
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(b.admit(later).is_err(), "a second call while the probe runs is refused");
        probe.succeeded();
        assert_eq!(b.state(), BreakerState::Closed { failures: 0 });
    }

    #[test]
    fn a_failed_probe_opens_the_circuit_again() {
        let b = breaker();
        for _ in 0..3 {
            b.admit(Instant::now()).unwrap().failed();
        }
        b.admit(Instant::now() + Duration::from_secs(11)).unwrap().failed();
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.admit(Instant::now() + Duration::from_secs(5)).is_err());
    }

    #[test]
    fn a_probe_dropped_unanswered_lets_the_next_call_probe() {
        let b = breaker();
        for _ in 0..3 {
            b.admit(Instant::now()).unwrap().failed();
        }
        drop(b.admit(Instant::now() + Duration::from_secs(11)).unwrap());
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.admit(Instant::now()).is_ok());
    }
}
