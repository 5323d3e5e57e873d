//! Token budgets: what each tenant's designs written by a model spent, per UTC day, kept in the
//! store and charged with one conditional write, so that however many processes generate at once
//! (Lambda instances, `openqq up` replicas) a tenant never passes its limit. A generation reserves
//! the most it may cost before the model is called and gives back what it did not use after.

use crate::ids::TenantId;
use crate::ports::PortResult;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// What a charge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// Charged: the day's total after it.
    Charged { spent: u64 },
    /// The charge would have passed the limit and was not made: the day's total as it is.
    Refused { spent: u64 },
}

/// The store's record of tokens spent.
#[async_trait]
pub trait TokenBudgets: Send + Sync {
    /// Adds `tokens` to what `tenant` spent on `day` ([`day`]) if the total stays at or under
    /// `limit`, atomically: two charges racing for the last tokens cannot both pass.
    async fn charge_tokens(&self, tenant: &TenantId, day: &str, tokens: u64, limit: u64) -> PortResult<Charge>;
    /// Gives back `tokens` of a charge that was not used; the total never goes below zero.
    async fn refund_tokens(&self, tenant: &TenantId, day: &str, tokens: u64) -> PortResult<()>;
    /// What `tenant` spent on `day`; 0 for a day without charges.
    async fn tokens_spent(&self, tenant: &TenantId, day: &str) -> PortResult<u64>;
}

/// The budget day of `at`: its UTC date, `YYYY-MM-DD`.
pub fn day(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

/// Seconds from `at` until the next budget day begins (at least 1).
pub fn seconds_to_next_day(at: DateTime<Utc>) -> u64 {
    let next = (at.date_naive() + chrono::Days::new(1)).and_hms_opt(0, 0, 0).expect("midnight exists").and_utc();
    (next - at).num_seconds().max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_the_utc_date_and_ends_at_midnight() {
        let at = DateTime::parse_from_rfc3339("2026-12-02T23:59:30+00:00").unwrap().with_timezone(&Utc);
        assert_eq!(day(at), "2026-12-02");
        assert_eq!(seconds_to_next_day(at), 30);
        let east = DateTime::parse_from_rfc3339("2026-12-03T01:00:00+02:00").unwrap().with_timezone(&Utc);
        assert_eq!(day(east), "2026-12-02", "the UTC date, not the local one");
    }
}
