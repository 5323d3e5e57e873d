//! Who sends what, when: the tenants, their classes and their send schedules. Pure, so the
//! arrival process is tested without a server.

use rand::{Rng, SeedableRng};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Sends at the steady rate throughout.
    Compliant,
    /// Sends at the steady rate, multiplied during the burst.
    Noisy,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Compliant => "compliant",
            Class::Noisy => "noisy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Burst {
    /// The noisy tenants' rate is multiplied by this during the burst.
    pub factor: f64,
    /// When the burst starts, from the start of the run.
    pub start: Duration,
    pub length: Duration,
}

impl Burst {
    pub fn contains(&self, t: Duration) -> bool {
        t >= self.start && t < self.start + self.length
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly spaced sends (each tenant offset by its own phase so tenants don't fire together).
    Even,
    /// A Poisson process: exponential gaps, seeded per tenant so runs repeat.
    Poisson,
}

/// Send times of one tenant, as offsets from the start of the run, all before `duration`.
/// The rate in force at a send decides the gap to the next one; a gap that would jump over the
/// start of the burst ends at it instead, so the burst begins on time.
pub fn schedule(rate: f64, burst: Option<Burst>, duration: Duration, arrivals: Arrivals, seed: u64) -> Vec<Duration> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rate_at = |t: f64| match burst {
        Some(b) if b.contains(Duration::from_secs_f64(t)) => rate * b.factor,
        _ => rate,
    };
    let gap = |t: f64, rng: &mut rand::rngs::StdRng| match arrivals {
        Arrivals::Even => 1.0 / rate_at(t),
        Arrivals::Poisson => -(1.0 - rng.random::<f64>()).ln() / rate_at(t),
    };
    let mut out = Vec::new();
    let mut t = rng.random::<f64>() / rate;
    while Duration::from_secs_f64(t) < duration {
        out.push(Duration::from_secs_f64(t));
        let next = t + gap(t, &mut rng);
        t = match burst {
            Some(b) if t < b.start.as_secs_f64() => next.min(b.start.as_secs_f64()),
            _ => next,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_in(s: &[Duration], from: f64, to: f64) -> usize {
        s.iter().filter(|t| t.as_secs_f64() >= from && t.as_secs_f64() < to).count()
    }

    #[test]
    fn even_arrivals_keep_the_rate_and_a_burst_multiplies_it_only_inside_its_window() {
        let burst = Burst { factor: 10.0, start: Duration::from_secs(2), length: Duration::from_secs(2) };
        let s = schedule(20.0, Some(burst), Duration::from_secs(6), Arrivals::Even, 1);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(s.last().unwrap() < &Duration::from_secs(6));
        for (from, to, want) in [(0.0, 2.0, 40), (2.0, 4.0, 400), (4.0, 6.0, 40)] {
            let n = count_in(&s, from, to) as i64;
            assert!((n - want).abs() <= 2, "{from}..{to}: {n} sends, want about {want}");
        }
    }

    #[test]
    fn poisson_arrivals_average_the_rate_and_repeat_with_the_seed() {
        let s = schedule(100.0, None, Duration::from_secs(20), Arrivals::Poisson, 7);
        assert!((1800..2200).contains(&s.len()), "{}", s.len());
        assert_eq!(s, schedule(100.0, None, Duration::from_secs(20), Arrivals::Poisson, 7));
        assert_ne!(s, schedule(100.0, None, Duration::from_secs(20), Arrivals::Poisson, 8));
    }
}
