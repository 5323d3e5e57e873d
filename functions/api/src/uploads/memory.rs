//! The memory the upload `PUT` buffers bodies in, shared fairly and taken only as bytes arrive.
//!
//! Two bounds, one per instance of the API:
//!
//! - **a tenant's share**: the uploads one tenant has in progress may declare at most
//!   [`UploadLimits::tenant_share`] bytes together (a quarter of the budget: two of the largest
//!   uploads with the default 512 MiB), checked when an upload begins, before any byte is read;
//!   one more is refused at once with 429. What a tenant holds is never more than it declared, so
//!   no tenant holds more than its share however it sends, and filling the budget takes at least
//!   four tenants uploading at once.
//! - **the budget**: [`UploadLimits::memory`] bytes buffered across every upload, taken in KiB
//!   as each piece of a body arrives ([`Admission::grow`]) and given back when the upload ends. A
//!   `PUT` that sends nothing holds nothing. A piece that finds the budget spent waits for memory
//!   at most [`UploadLimits::memory_wait`] (503 after it); that wait does not count against the
//!   sender's pace.

use crate::problem::Problem;
use axum::http::StatusCode;
use openqq_core::TenantId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::UploadLimits;

/// Gauge of the bytes (in whole KiB) buffered by uploads in progress.
pub const BUFFERED_METRIC: &str = "openqq_upload_buffered_bytes";

/// The budget and the tenants' declared bytes; one per API instance, in [`crate::AppState`].
#[derive(Debug)]
pub struct UploadMemory {
    pub limits: UploadLimits,
    /// The budget in KiB permits.
    budget: Arc<Semaphore>,
    /// Bytes declared by each tenant's uploads in progress; only tenants with one have an entry.
    declared: Mutex<HashMap<TenantId, u64>>,
}

impl UploadMemory {
    pub fn new(limits: UploadLimits) -> Arc<Self> {
        let permits = usize::try_from(limits.memory / 1024).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
        Arc::new(Self { limits, budget: Arc::new(Semaphore::new(permits)), declared: Mutex::new(HashMap::new()) })
    }

    /// A place for an upload of `bytes` by `tenant`, holding no memory yet, or the 429 that
    /// refuses it because the tenant's uploads in progress would declare more than its share.
    pub fn admit(self: &Arc<Self>, tenant: &TenantId, bytes: u64) -> Result<Admission, Problem> {
        let share = self.limits.tenant_share();
        let mut declared = self.declared.lock().unwrap();
        let held = declared.get(tenant).copied().unwrap_or(0);
        if held + bytes > share {
            metrics::counter!(crate::tenant_guard::REJECTIONS_METRIC, "reason" => "upload_share").increment(1);
            return Err(Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "upload-share-exceeded",
                "Too many upload bytes in progress",
                format!(
                    "tenant {tenant}'s uploads in progress declare {held} bytes; with this one's {bytes} they would pass \
                     the tenant's share of the server's upload memory, {share} bytes; retry when one finishes"
                ),
            )
            .retry_after(1));
        }
        *declared.entry(tenant.clone()).or_insert(0) += bytes;
        Ok(Admission { memory: self.clone(), tenant: tenant.clone(), declared: bytes, permit: None, kib: 0 })
    }

    /// Bytes `tenant`'s uploads in progress declare.
    pub fn declared(&self, tenant: &TenantId) -> u64 {
        self.declared.lock().unwrap().get(tenant).copied().unwrap_or(0)
    }

    /// KiB of the budget free now.
    pub fn free_kib(&self) -> usize {
        self.budget.available_permits()
    }
}

/// One upload's place: its declared bytes against its tenant's share, and the memory its body
/// holds so far. Dropping it gives both back.
#[derive(Debug)]
pub struct Admission {
    memory: Arc<UploadMemory>,
    tenant: TenantId,
    declared: u64,
    permit: Option<OwnedSemaphorePermit>,
    /// KiB held (the permit's count).
    kib: u32,
}

impl Admission {
    /// Holds enough of the budget for `bytes` buffered in all (never more than declared), waiting
    /// at most [`UploadLimits::memory_wait`] for other uploads to give memory back; 503 after it.
    pub async fn grow(&mut self, bytes: u64) -> Result<(), Problem> {
        let want = u32::try_from(bytes.min(self.declared).div_ceil(1024)).unwrap_or(u32::MAX);
        if want <= self.kib {
            return Ok(());
        }
        let more = want - self.kib;
        let acquired =
            tokio::time::timeout(self.memory.limits.memory_wait, self.memory.budget.clone().acquire_many_owned(more))
                .await;
        let Ok(Ok(permit)) = acquired else {
            metrics::counter!(crate::tenant_guard::REJECTIONS_METRIC, "reason" => "upload_memory").increment(1);
            return Err(Problem::unavailable(
                "the server's upload memory is taken by other uploads in progress; retry shortly",
            ));
        };
        metrics::gauge!(BUFFERED_METRIC).increment(f64::from(more) * 1024.0);
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.kib = want;
        Ok(())
    }

    /// KiB of the budget this upload holds.
    pub fn held_kib(&self) -> u32 {
        self.kib
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        metrics::gauge!(BUFFERED_METRIC).decrement(f64::from(self.kib) * 1024.0);
        let mut declared = self.memory.declared.lock().unwrap();
        if let Some(n) = declared.get_mut(&self.tenant) {
            *n = n.saturating_sub(self.declared);
            if *n == 0 {
                declared.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(memory: u64) -> UploadLimits {
        UploadLimits { memory, memory_wait: std::time::Duration::from_millis(200), ..UploadLimits::default() }
    }

    #[test]
    fn an_admitted_upload_holds_no_memory_until_its_bytes_arrive() {
        let memory = UploadMemory::new(limits(1 << 20));
        let a = TenantId::parse("a").unwrap();
        let admitted: Vec<_> = (0..4).map(|_| memory.admit(&a, 64 << 10).unwrap()).collect();
        assert_eq!(memory.free_kib(), 1024, "nothing is held before a byte arrives");
        assert_eq!(memory.declared(&a), 256 << 10);
        drop(admitted);
        assert_eq!(memory.declared(&a), 0, "dropping an admission gives its declared bytes back");
    }

    #[test]
    fn one_tenant_declares_at_most_a_quarter_of_the_budget_and_others_still_get_in() {
        let memory = UploadMemory::new(limits(1 << 20));
        let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
        let first = memory.admit(&a, 256 << 10).unwrap();
        let refused = memory.admit(&a, 1).unwrap_err();
        assert_eq!((refused.status, refused.slug), (StatusCode::TOO_MANY_REQUESTS, "upload-share-exceeded"));
        assert!(refused.retry_after_secs.is_some() && refused.detail.contains("share"), "{}", refused.detail);
        memory.admit(&b, 1024).expect("another tenant is admitted beside it");
        drop(first);
        memory.admit(&a, 256 << 10).expect("the share is free again once the upload ends");
    }

    #[tokio::test]
    async fn memory_is_taken_as_bytes_arrive_never_past_the_declared_length_and_given_back_at_the_end() {
        let memory = UploadMemory::new(limits(1 << 20));
        let a = TenantId::parse("a").unwrap();
        let mut up = memory.admit(&a, 100 << 10).unwrap();
        up.grow(1).await.unwrap();
        assert_eq!((up.held_kib(), memory.free_kib()), (1, 1023));
        up.grow(10 << 10).await.unwrap();
        up.grow(5 << 10).await.unwrap();
        assert_eq!(up.held_kib(), 10, "a smaller total takes nothing more");
        up.grow(1 << 30).await.unwrap();
        assert_eq!(up.held_kib(), 100, "never more than declared");
        drop(up);
        assert_eq!(memory.free_kib(), 1024);
    }

    #[tokio::test]
    async fn a_piece_that_finds_the_budget_spent_waits_for_memory_then_is_refused_with_503() {
        let memory = UploadMemory::new(limits(4 << 10));
        let ids: Vec<TenantId> = ["a", "b", "c", "d", "e"].iter().map(|t| TenantId::parse(*t).unwrap()).collect();
        let mut held = Vec::new();
        for t in &ids[..4] {
            let mut up = memory.admit(t, 1024).unwrap();
            up.grow(1024).await.unwrap();
            held.push(up);
        }
        let mut late = memory.admit(&ids[4], 1024).unwrap();
        let refused = late.grow(1).await.unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        let freed = held.pop();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            drop(freed);
        });
        late.grow(1).await.expect("memory given back is taken by the waiting upload");
    }
}
