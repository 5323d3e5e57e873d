//! The event-log bytes each tenant's submissions may write per UTC day
//! ([`crate::tenant_guard::TenantLimits::log_bytes_per_day`]), kept in the store's daily budgets
//! ([`Budget::LogBytes`]) so every API process counts against one total.
//!
//! A submission must not pay a store write of its own for this: the submit path shares its log
//! appends and markers between concurrent requests precisely so that each costs no more than
//! one durable write. So each process counts what it charged locally and adds it to the store's
//! total at most once a second per tenant ([`SYNC_EVERY`]), in the request that finds the count
//! that old (a Lambda instance has no timer between invocations); the answer brings back what
//! every process charged. A tenant is refused once what the store last said plus what this
//! process charged since would pass the limit. What this costs in exactness, and bounds: other
//! processes' charges of the last second are seen a second late (a day's total passes the limit
//! by at most that), and a process that dies loses its last second's charges.

use openqq_core::budget::{self, Budget, Charge};
use openqq_core::ports::PortResult;
use openqq_core::{DailyBudgets, TenantId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How old a tenant's count may get before a charge adds it to the store's total.
pub const SYNC_EVERY: Duration = Duration::from_secs(1);

/// One process's count of each tenant's log bytes.
pub struct LogBytes {
    budgets: Arc<dyn DailyBudgets>,
    tenants: Mutex<HashMap<TenantId, Count>>,
}

/// A tenant's count on one day: the store's total when last synced, and what this process
/// charged since (part of it maybe being added to the store right now).
#[derive(Debug)]
struct Count {
    day: String,
    stored: u64,
    pending: u64,
    syncing: u64,
    synced: Option<Instant>,
}

/// What [`LogBytes::charge`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charged {
    /// Charged to `day`: give it back with [`LogBytes::refund`] if the records are not published.
    Yes { day: String },
    /// The charge would pass the day's limit: `spent` is charged already.
    Refused { spent: u64 },
}

impl LogBytes {
    pub fn new(budgets: Arc<dyn DailyBudgets>) -> Self {
        Self { budgets, tenants: Mutex::new(HashMap::new()) }
    }

    /// Charges `bytes` to `tenant`'s day, within `limit`.
    pub async fn charge(&self, tenant: &TenantId, bytes: u64, limit: u64) -> PortResult<Charged> {
        let day = budget::day(chrono::Utc::now());
        self.sync_if_due(tenant, &day, false).await?;
        let mut tenants = self.tenants.lock().unwrap();
        let count = tenants.get_mut(tenant).expect("synced above");
        let spent = count.stored + count.syncing + count.pending;
        if spent.saturating_add(bytes) > limit {
            return Ok(Charged::Refused { spent });
        }
        count.pending += bytes;
        Ok(Charged::Yes { day })
    }

    /// Gives back a charge of `day` whose records were never published.
    pub fn refund(&self, tenant: &TenantId, day: &str, bytes: u64) {
        if let Some(count) = self.tenants.lock().unwrap().get_mut(tenant).filter(|c| c.day == day) {
            count.pending = count.pending.saturating_sub(bytes);
        }
    }

    /// What `tenant` was charged today, by every process: this process's charges are added to
    /// the store's total first.
    pub async fn spent(&self, tenant: &TenantId) -> PortResult<u64> {
        let day = budget::day(chrono::Utc::now());
        self.sync_if_due(tenant, &day, true).await?;
        let tenants = self.tenants.lock().unwrap();
        let count = &tenants[tenant];
        Ok(count.stored + count.syncing + count.pending)
    }

    /// Adds what this process charged `tenant` to the store's total of `day`, and reads that
    /// total back, when the count is older than [`SYNC_EVERY`] (or `now`), unless another
    /// request is doing it. A new day starts from the store's count of it.
    async fn sync_if_due(&self, tenant: &TenantId, day: &str, now: bool) -> PortResult<()> {
        let flush = {
            let mut tenants = self.tenants.lock().unwrap();
            let count = tenants.entry(tenant.clone()).or_insert_with(|| Count::new(day));
            if count.day != day {
                // Yesterday's last second of charges is not carried over.
                *count = Count::new(day);
            }
            let due = now || count.synced.is_none_or(|at| at.elapsed() >= SYNC_EVERY);
            if !due || count.syncing > 0 {
                return Ok(());
            }
            // What is being added stays counted while the write is under way.
            count.syncing = std::mem::take(&mut count.pending);
            count.synced = Some(Instant::now());
            count.syncing
        };
        let result = self.budgets.charge_budget(tenant, Budget::LogBytes, day, flush, u64::MAX).await;
        let mut tenants = self.tenants.lock().unwrap();
        let count = tenants.get_mut(tenant).filter(|c| c.day == day);
        match (result, count) {
            (Ok(Charge::Charged { spent } | Charge::Refused { spent }), Some(count)) => {
                count.stored = spent;
                count.syncing = 0;
                Ok(())
            }
            (Err(e), Some(count)) => {
                count.pending += std::mem::take(&mut count.syncing);
                count.synced = None;
                Err(e)
            }
            (result, None) => result.map(drop),
        }
    }
}

impl Count {
    fn new(day: &str) -> Self {
        Self { day: day.to_owned(), stored: 0, pending: 0, syncing: 0, synced: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openqq_adapters::{Durability, EmbeddedDesignStore};

    fn store() -> (tempfile::TempDir, Arc<EmbeddedDesignStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap());
        (dir, store)
    }

    #[tokio::test]
    async fn charges_pass_within_the_limit_and_reach_the_store_in_one_write_a_second() {
        let (_dir, store) = store();
        let bytes = LogBytes::new(store.clone());
        let acme = TenantId::parse("acme").unwrap();
        let today = budget::day(chrono::Utc::now());
        for _ in 0..3 {
            assert!(matches!(bytes.charge(&acme, 300, 1000).await.unwrap(), Charged::Yes { .. }));
        }
        assert_eq!(bytes.charge(&acme, 300, 1000).await.unwrap(), Charged::Refused { spent: 900 });
        let stored = store.budget_spent(&acme, Budget::LogBytes, &today).await.unwrap();
        assert_eq!(stored, 0, "the first charge synced an empty count; the rest wait for the next sync");
        assert_eq!(bytes.spent(&acme).await.unwrap(), 900);
        assert_eq!(store.budget_spent(&acme, Budget::LogBytes, &today).await.unwrap(), 900, "spent syncs first");
    }

    #[tokio::test]
    async fn two_processes_share_the_stores_total() {
        let (_dir, store) = store();
        let (one, two) = (LogBytes::new(store.clone()), LogBytes::new(store.clone()));
        let acme = TenantId::parse("acme").unwrap();
        assert!(matches!(one.charge(&acme, 600, 1000).await.unwrap(), Charged::Yes { .. }));
        assert_eq!(one.spent(&acme).await.unwrap(), 600);
        // The second process reads the day's total on its first charge.
        assert_eq!(two.charge(&acme, 600, 1000).await.unwrap(), Charged::Refused { spent: 600 });
        assert!(matches!(two.charge(&acme, 400, 1000).await.unwrap(), Charged::Yes { .. }));
    }

    #[tokio::test]
    async fn a_refund_gives_back_a_charge_that_was_not_published() {
        let (_dir, store) = store();
        let bytes = LogBytes::new(store);
        let acme = TenantId::parse("acme").unwrap();
        let Charged::Yes { day } = bytes.charge(&acme, 1000, 1000).await.unwrap() else { panic!("charged") };
        bytes.refund(&acme, &day, 1000);
        assert!(matches!(bytes.charge(&acme, 1000, 1000).await.unwrap(), Charged::Yes { .. }));
        assert_eq!(bytes.spent(&acme).await.unwrap(), 1000);
    }
}
