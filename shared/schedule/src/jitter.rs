//! Jitter: a fire runs at its nominal time plus an offset in `[0, jitter)`, so that many
//! schedules on the same minute do not all submit at once.
//!
//! The offset is not random: it is derived from the schedule's id and the nominal time, so two
//! runners, or one runner before and after a restart, compute the same fire time. The
//! derivation is a contract (a runner in another language must agree): the first 8 bytes of
//! `SHA-256(id ‖ 0x00 ‖ seconds ‖ nanoseconds)`, with the nominal time's Unix seconds as a
//! big-endian i64 and its nanoseconds as a big-endian u32, read as a big-endian u64, modulo the
//! jitter in nanoseconds. The modulo's bias is below 2⁻¹⁷ for jitters up to 24 hours.

use crate::config::Schedule;
use chrono::{DateTime, TimeDelta, Utc};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// The offset of the fire at `nominal` of schedule `schedule_id`: in `[0, max)`, zero when `max`
/// is zero.
pub fn jitter_offset(schedule_id: &str, nominal: DateTime<Utc>, max: Duration) -> Duration {
    let max_nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if max_nanos == 0 {
        return Duration::ZERO;
    }
    let mut hash = Sha256::new();
    hash.update(schedule_id.as_bytes());
    hash.update([0]);
    hash.update(nominal.timestamp().to_be_bytes());
    hash.update(nominal.timestamp_subsec_nanos().to_be_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    Duration::from_nanos(u64::from_be_bytes(first) % max_nanos)
}

/// When the fire at `nominal` actually runs: nominal plus the schedule's jitter offset.
pub fn fire_time(schedule: &Schedule, nominal: DateTime<Utc>) -> DateTime<Utc> {
    let Some(max) = schedule.config.jitter else { return nominal };
    let offset = jitter_offset(&schedule.id, nominal, max);
    // The offset is under 24 hours (the configuration's limit), so it always fits.
    nominal + TimeDelta::from_std(offset).unwrap_or(TimeDelta::zero())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).unwrap()
    }

    #[test]
    fn the_offset_is_the_same_every_time_it_is_computed() {
        let nominal = at(1_780_000_000);
        let first = jitter_offset("0197a1b2-schedule", nominal, Duration::from_secs(300));
        for _ in 0..10 {
            assert_eq!(jitter_offset("0197a1b2-schedule", nominal, Duration::from_secs(300)), first);
        }
    }

    #[test]
    fn the_offset_pins_its_derivation_with_reference_values() {
        // SHA-256("s-1" ‖ 00 ‖ 00000000 6A18A580 ‖ 00000000), first 8 bytes, mod 300 s in ns.
        let nominal = at(1_780_000_128);
        let offset = jitter_offset("s-1", nominal, Duration::from_secs(300));
        let mut hash = Sha256::new();
        hash.update(b"s-1\0");
        hash.update([0, 0, 0, 0, 0x6a, 0x18, 0xa5, 0x80]);
        hash.update([0, 0, 0, 0]);
        let digest = hash.finalize();
        let expected = u64::from_be_bytes(digest[..8].try_into().unwrap()) % 300_000_000_000;
        assert_eq!(offset, Duration::from_nanos(expected));
        assert_eq!(offset, Duration::from_nanos(REFERENCE_S1));
    }

    /// The offset above as computed independently (Python's hashlib), so a change of derivation
    /// fails here even if the test's own hashing changed with it.
    const REFERENCE_S1: u64 = 262_210_041_515;

    #[test]
    fn different_schedules_and_different_fires_get_different_offsets() {
        let max = Duration::from_secs(3600);
        let a = jitter_offset("a", at(1_780_000_000), max);
        let b = jitter_offset("b", at(1_780_000_000), max);
        let a_next = jitter_offset("a", at(1_780_000_060), max);
        assert_ne!(a, b);
        assert_ne!(a, a_next);
    }

    #[test]
    fn no_jitter_means_no_offset() {
        assert_eq!(jitter_offset("a", at(0), Duration::ZERO), Duration::ZERO);
    }

    proptest! {
        #[test]
        fn the_offset_always_lies_in_zero_to_the_jitter(
            id in "[a-z0-9-]{1,40}",
            secs in 0i64..4_000_000_000,
            max_ms in 1u64..86_400_000,
        ) {
            let max = Duration::from_millis(max_ms);
            let offset = jitter_offset(&id, at(secs), max);
            prop_assert!(offset < max);
        }
    }

    #[test]
    fn offsets_spread_over_the_whole_window() {
        let max = Duration::from_secs(600);
        let offsets: Vec<Duration> =
            (0..1000).map(|i| jitter_offset("spread", at(1_780_000_000 + 60 * i), max)).collect();
        let low = offsets.iter().filter(|o| **o < Duration::from_secs(300)).count();
        // A fair split is 500; 400-600 is over six standard deviations wide.
        assert!((400..=600).contains(&low), "{low} of 1000 offsets in the first half");
    }
}
