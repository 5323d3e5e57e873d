//! Daily budgets: what each tenant spent per UTC day of a [`Budget`], kept in the store and
//! charged with one conditional write, so that however many processes charge at once (Lambda
//! instances, `openqq up` replicas) a tenant never passes its limit. A generation reserves the
//! most tokens it may cost before the model is called and gives back what it did not use after;
//! a submission charges the event-log bytes its records may take ([`log_bytes_of_revision`]).

use crate::design::INLINE_PAYLOAD_MAX_BYTES;
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

/// What a daily budget counts. Each has its own count per tenant and day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Tokens the tenant's model calls spent (the generation function charges them).
    GenerationTokens,
    /// Bytes the tenant's submissions may write to the event log (the API charges them when it
    /// accepts a design or a batch), so the log's retention bounds what one tenant keeps there.
    LogBytes,
}

impl Budget {
    /// The key a store keeps this budget's count of `day` under: generation tokens under the day
    /// itself (as they always were), log bytes under `log-bytes/<day>`.
    pub fn key(self, day: &str) -> String {
        match self {
            Budget::GenerationTokens => day.to_owned(),
            Budget::LogBytes => format!("log-bytes/{day}"),
        }
    }
}

/// The store's record of what each tenant spent, per budget and day.
#[async_trait]
pub trait DailyBudgets: Send + Sync {
    /// Adds `amount` to what `tenant` spent of `budget` on `day` ([`day`]) if the total stays at
    /// or under `limit`, atomically: two charges racing for the last of it cannot both pass.
    async fn charge_budget(
        &self,
        tenant: &TenantId,
        budget: Budget,
        day: &str,
        amount: u64,
        limit: u64,
    ) -> PortResult<Charge>;
    /// Gives back `amount` of a charge that was not used; the total never goes below zero.
    async fn refund_budget(&self, tenant: &TenantId, budget: Budget, day: &str, amount: u64) -> PortResult<()>;
    /// What `tenant` spent of `budget` on `day`; 0 for a day without charges.
    async fn budget_spent(&self, tenant: &TenantId, budget: Budget, day: &str) -> PortResult<u64>;
}

/// Bytes of a record's envelope beyond its payload (ids, kind, times, headers), at most, for the
/// records of a revision's later stages, which carry little besides.
pub const ENVELOPE_BYTES: u64 = 1024;

/// The most event-log bytes one revision's records take, given its `design.submitted` record of
/// `submitted` bytes: that record; its copy to the next lane (`validation.requested`, or
/// `synthesis.requested`/`generation.requested` and then `validation.requested`, which may also
/// carry the synthesised netlist and the checks' results, each inline up to
/// [`INLINE_PAYLOAD_MAX_BYTES`]); `validation.started`; `validation.finished` with its report
/// inline up to the same; `results.ready`; and a batch item's `batch.item.ended`. A bound, not
/// a measurement: small netlist designs took 43 % of it (the noisy-neighbour suite's log-bytes test).
pub fn log_bytes_of_revision(submitted: usize, from_source: bool) -> u64 {
    let submitted = submitted as u64;
    let inline = INLINE_PAYLOAD_MAX_BYTES as u64;
    let netlist_path = 2 * submitted + (inline + ENVELOPE_BYTES) + 3 * ENVELOPE_BYTES;
    if from_source {
        netlist_path + submitted + 2 * inline
    } else {
        netlist_path
    }
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

/// [`log_bytes_of_revision`] of a revision whose `design.submitted` payload is the JSON text
/// `payload` (as a batch keeps its items): the record is the payload in its envelope. A payload
/// that does not read as one is taken for one from source, the larger bound.
pub fn log_bytes_of_payload(payload: &str) -> u64 {
    use serde::de::IgnoredAny;
    #[derive(serde::Deserialize)]
    struct Submitted {
        spec: Spec,
    }
    #[derive(serde::Deserialize)]
    struct Spec {
        #[serde(default)]
        source: Option<IgnoredAny>,
        #[serde(default)]
        generate: Option<IgnoredAny>,
    }
    let from_source = serde_json::from_str::<Submitted>(payload)
        .map_or(true, |s| s.spec.source.is_some() || s.spec.generate.is_some());
    log_bytes_of_revision(payload.len() + ENVELOPE_BYTES as usize, from_source)
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

    #[test]
    fn each_budget_counts_under_a_key_of_its_own() {
        assert_eq!(Budget::GenerationTokens.key("2026-12-02"), "2026-12-02");
        assert_eq!(Budget::LogBytes.key("2026-12-02"), "log-bytes/2026-12-02");
    }

    #[test]
    fn a_revision_from_source_may_take_more_of_the_log_than_one_from_a_netlist() {
        let netlist = log_bytes_of_revision(2000, false);
        assert_eq!(netlist, 4000 + 16384 + 4 * 1024);
        assert_eq!(log_bytes_of_revision(2000, true), netlist + 2000 + 2 * 16384);
    }

    #[test]
    fn a_kept_payload_is_weighed_by_its_length_and_whether_it_is_source() {
        let netlist = r#"{"spec":{"name":"a","netlist":{"modules":{}},"source":null}}"#;
        let source = r#"{"spec":{"source":{"top":"t","files":[]}}}"#;
        let n = netlist.len() + ENVELOPE_BYTES as usize;
        assert_eq!(log_bytes_of_payload(netlist), log_bytes_of_revision(n, false));
        let s = source.len() + ENVELOPE_BYTES as usize;
        assert_eq!(log_bytes_of_payload(source), log_bytes_of_revision(s, true));
        assert_eq!(log_bytes_of_payload("not json"), log_bytes_of_revision(8 + 1024, true));
    }
}
