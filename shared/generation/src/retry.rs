//! When to try again: the server's `Retry-After`, or a capped, jittered exponential backoff.
//! Pure but for the jitter's random draw.

use std::time::{Duration, SystemTime};

/// `Retry-After` as seconds (`120`) or an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`), as a wait
/// from `now`; a date in the past is no wait. `None` when the value is neither.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait before retry number `retry` (0 for the first): `base · 2^retry`, capped at `cap`,
/// then drawn uniformly from its upper half ("equal jitter"), so waits grow yet callers that
/// failed together spread out.
pub(crate) fn backoff(retry: u32, base: Duration, cap: Duration) -> Duration {
    let full = base.saturating_mul(2u32.saturating_pow(retry.min(16))).min(cap);
    let half = full / 2;
    half + full.mul_f64(rand::random::<f64>() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_is_read() {
        assert_eq!(parse_retry_after(" 3 ", SystemTime::now()), Some(Duration::from_secs(3)));
    }

    #[test]
    fn retry_after_as_an_http_date_is_a_wait_from_now() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:05 GMT", now), Some(Duration::from_secs(5)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now), Some(Duration::ZERO));
    }

    #[test]
    fn an_unreadable_retry_after_is_ignored() {
        assert_eq!(parse_retry_after("soon", SystemTime::now()), None);
        assert_eq!(parse_retry_after("-1", SystemTime::now()), None);
    }

    #[test]
    fn backoff_doubles_within_equal_jitter_and_stops_at_the_cap() {
        let (base, cap) = (Duration::from_millis(100), Duration::from_secs(1));
        for _ in 0..100 {
            let first = backoff(0, base, cap);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
            let third = backoff(2, base, cap);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400), "{third:?}");
            let late = backoff(40, base, cap);
            assert!(late >= cap / 2 && late <= cap, "{late:?}");
        }
    }
}
