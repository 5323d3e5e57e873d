//! What an attempt comes to, decided from what the receiver answered: pure, so the rules are
//! tested without a receiver.
//!
//! - 2xx: delivered.
//! - 4xx other than 408 (timeout) and 429 (too many requests): dead at once. The receiver
//!   refused this request, and the same request again (the body and `webhook-id` never change)
//!   would be refused again; the tenant sees the status and error in its delivery list.
//! - Any other answer (3xx, as redirects are not followed; 408, 429, 5xx) or none (timeout,
//!   refused connection, a name resolving to an address that is not public): retried on the
//!   [`RetrySchedule`], dead after its last attempt.
//! - A target refused before sending ([`SendError::Refused`]: not http(s), a literal address that
//!   is not public): dead at once; no retry changes a URL.

use super::client::SendError;
use chrono::{DateTime, Utc};
use openqq_core::webhook::{AttemptOutcome, RetrySchedule, MAX_DELIVERY_ERROR_BYTES};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// The outcome of the attempt that came after `attempts_before` earlier ones, given `answer`;
/// `unit` in [0, 1) draws the retry's jitter.
pub fn decide(
    answer: Result<u16, &SendError>,
    attempts_before: u32,
    schedule: &RetrySchedule,
    unit: f64,
    now: DateTime<Utc>,
) -> AttemptOutcome {
    let (status_code, error) = match answer {
        Ok(code @ 200..=299) => return AttemptOutcome::Delivered { status_code: code },
        Ok(code @ 400..=499) if code != 408 && code != 429 => {
            let error = format!("the receiver answered {code}: it refused the delivery");
            return AttemptOutcome::Dead { status_code: Some(code), error };
        }
        Ok(code) => (Some(code), format!("the receiver answered {code}")),
        Err(e @ SendError::Refused(_)) => {
            return AttemptOutcome::Dead { status_code: None, error: bounded(e.to_string()) }
        }
        Err(e) => (None, e.to_string()),
    };
    let error = bounded(error);
    match schedule.after(attempts_before.saturating_add(1), unit) {
        Some(delay) => {
            let at = now + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
            AttemptOutcome::Retry { at, status_code, error }
        }
        None => AttemptOutcome::Dead { status_code, error },
    }
}

/// The `outcome` label of `openqq_webhook_deliveries_total`.
pub fn label(outcome: &AttemptOutcome) -> &'static str {
    match outcome {
        AttemptOutcome::Delivered { .. } => "delivered",
        AttemptOutcome::Retry { .. } => "retried",
        AttemptOutcome::Dead { .. } => "dead",
    }
}

/// A number in [0, 1) for the jitter: from the standard library's per-instance random hash keys,
/// which is random enough to spread retries (nothing depends on it being unpredictable).
pub fn jitter_unit() -> f64 {
    let bits = RandomState::new().hash_one(0u8);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// `error` cut to [`MAX_DELIVERY_ERROR_BYTES`] on a character boundary.
fn bounded(mut error: String) -> String {
    if error.len() > MAX_DELIVERY_ERROR_BYTES {
        let mut end = MAX_DELIVERY_ERROR_BYTES;
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        error.truncate(end);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn now() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn schedule() -> RetrySchedule {
        RetrySchedule { delays: vec![Duration::from_secs(5), Duration::from_secs(60)], jitter: 0.2 }
    }

    #[test]
    fn any_2xx_is_delivered() {
        for code in [200, 201, 202, 204, 299] {
            assert_eq!(decide(Ok(code), 0, &schedule(), 0.5, now()), AttemptOutcome::Delivered { status_code: code });
        }
    }

    #[test]
    fn other_answers_are_retried_after_the_delay_for_this_attempt_with_the_status_kept() {
        for code in [301, 302, 408, 429, 500, 502, 503, 504] {
            let first = decide(Ok(code), 0, &schedule(), 0.5, now());
            let at = now() + chrono::Duration::seconds(5);
            assert_eq!(
                first,
                AttemptOutcome::Retry { at, status_code: Some(code), error: format!("the receiver answered {code}") }
            );
            let second = decide(Ok(code), 1, &schedule(), 0.5, now());
            assert!(matches!(second, AttemptOutcome::Retry { at, .. } if at == now() + chrono::Duration::seconds(60)));
        }
    }

    #[test]
    fn the_jitter_moves_the_retry_within_its_fraction() {
        let early = decide(Ok(500), 0, &schedule(), 0.0, now());
        assert!(matches!(early, AttemptOutcome::Retry { at, .. } if at == now() + chrono::Duration::seconds(4)));
        for _ in 0..100 {
            let unit = jitter_unit();
            assert!((0.0..1.0).contains(&unit), "{unit}");
        }
        assert_ne!(jitter_unit(), jitter_unit(), "two draws differ");
    }

    #[test]
    fn the_last_attempt_that_fails_is_dead_with_its_status() {
        let last = decide(Ok(503), 2, &schedule(), 0.5, now());
        assert_eq!(last, AttemptOutcome::Dead { status_code: Some(503), error: "the receiver answered 503".into() });
        let timed_out = decide(Err(&SendError::Timeout(Duration::from_secs(10))), 2, &schedule(), 0.5, now());
        assert!(matches!(timed_out, AttemptOutcome::Dead { status_code: None, ref error } if error.contains("within")));
    }

    #[test]
    fn a_timeout_is_retried_without_a_status() {
        let outcome = decide(Err(&SendError::Timeout(Duration::from_secs(10))), 0, &schedule(), 0.5, now());
        assert!(matches!(outcome, AttemptOutcome::Retry { status_code: None, .. }), "{outcome:?}");
    }

    #[test]
    fn a_refusal_by_the_receiver_and_a_refused_target_are_dead_at_once() {
        for code in [400, 401, 403, 404, 410, 413, 422, 499] {
            let error = format!("the receiver answered {code}: it refused the delivery");
            let outcome = decide(Ok(code), 0, &schedule(), 0.5, now());
            assert_eq!(outcome, AttemptOutcome::Dead { status_code: Some(code), error });
        }
        let refused = SendError::Refused("127.0.0.1 is not a public address".into());
        assert!(matches!(
            decide(Err(&refused), 0, &schedule(), 0.5, now()),
            AttemptOutcome::Dead { status_code: None, .. }
        ));
    }

    #[test]
    fn outcomes_have_the_metric_labels() {
        let o = |code| decide(Ok(code), 0, &schedule(), 0.5, now());
        assert_eq!([label(&o(200)), label(&o(500)), label(&o(404))], ["delivered", "retried", "dead"]);
    }

    #[test]
    fn a_long_error_is_cut_on_a_character_boundary() {
        let long = SendError::Refused("é".repeat(MAX_DELIVERY_ERROR_BYTES));
        let AttemptOutcome::Dead { error, .. } = decide(Err(&long), 0, &schedule(), 0.5, now()) else { panic!() };
        assert!(error.len() <= MAX_DELIVERY_ERROR_BYTES && error.len() > MAX_DELIVERY_ERROR_BYTES - 2);
    }
}
