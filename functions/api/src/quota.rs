//! The storage quota: how much one tenant may keep in the design store and the object store
//! (full reports).
//!
//! Submissions check it before publishing. A tenant at or over its byte quota can submit nothing;
//! one at its design count can still revise its designs but not create more. Usage comes from
//! [`DesignReads::usage`](openqq_core::DesignReads::usage) plus
//! [`ObjectStore::usage`](openqq_core::ObjectStore::usage) and is cached per tenant for
//! [`USAGE_TTL`], so the check costs one store query per tenant every few seconds: the quota is
//! soft by what a tenant can submit in that time (its request and byte limits bound that).
//! Uploads, which can each be 64 MiB, are not: each reserves its length before it is accepted
//! ([`StorageQuota::reserve`], [`reservations`]), so parallel uploads admit only what fits.
//!
//! Over quota is `403 storage-quota-exceeded`: retrying the same request cannot succeed until
//! something outside it changes (designs removed, the quota raised), which is what 403 says; it
//! is not 409 (no conflict with the target resource, which may not exist yet), 413 (the request
//! itself is fine) or 429 (waiting does not help). Google Drive answers a full quota the same way.

use crate::problem::Problem;
use axum::http::StatusCode;
use openqq_core::ports::Usage;
use openqq_core::{DesignId, DesignReads, ObjectStore, TenantId};
pub use reservations::Reservation;
use reservations::Reservations;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Default bytes one tenant may keep: 1 GiB.
pub const DEFAULT_TENANT_BYTES: u64 = 1 << 30;
/// Default designs one tenant may have.
pub const DEFAULT_TENANT_DESIGNS: u64 = 10_000;
/// How long a tenant's usage is reused before it is read again.
pub const USAGE_TTL: Duration = Duration::from_secs(5);
/// Tenants whose usage is cached at once; past it, expired entries go, then all.
const MAX_CACHED_TENANTS: usize = 10_000;

/// What one tenant may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageLimits {
    pub bytes: u64,
    pub designs: u64,
}

impl Default for StorageLimits {
    fn default() -> Self {
        Self { bytes: DEFAULT_TENANT_BYTES, designs: DEFAULT_TENANT_DESIGNS }
    }
}

/// Why the storage quota's settings were refused; each names the setting.
#[derive(Debug, thiserror::Error)]
pub enum QuotaSettingsError {
    #[error("reading OPENQQ_TENANT_STORAGE")]
    Storage(#[source] SizeError),
    #[error("OPENQQ_TENANT_DESIGNS: {value:?} is not a number of designs")]
    Designs {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("--tenant-storage (OPENQQ_TENANT_STORAGE) must be at least 1 byte")]
    NoBytes,
    #[error("--tenant-designs (OPENQQ_TENANT_DESIGNS) must allow at least 1 design")]
    NoDesigns,
}

impl StorageLimits {
    /// From `OPENQQ_TENANT_STORAGE` and `OPENQQ_TENANT_DESIGNS` (the defaults where unset), checked.
    pub fn from_env() -> Result<Self, QuotaSettingsError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let mut limits = Self::default();
        if let Some(v) = var("OPENQQ_TENANT_STORAGE") {
            limits.bytes = parse_size(&v).map_err(QuotaSettingsError::Storage)?;
        }
        if let Some(v) = var("OPENQQ_TENANT_DESIGNS") {
            limits.designs =
                v.trim().parse().map_err(|source| QuotaSettingsError::Designs { value: v.clone(), source })?;
        }
        limits.check()?;
        Ok(limits)
    }

    /// Checked at start-up; the message names the setting.
    pub fn check(&self) -> Result<(), QuotaSettingsError> {
        if self.bytes == 0 {
            return Err(QuotaSettingsError::NoBytes);
        }
        if self.designs == 0 {
            return Err(QuotaSettingsError::NoDesigns);
        }
        Ok(())
    }
}

/// The limits and a short-lived cache of each tenant's usage.
pub struct StorageQuota {
    limits: StorageLimits,
    ttl: Duration,
    /// Each tenant's usage and when its reading began.
    cache: Mutex<HashMap<TenantId, (Instant, Usage)>>,
    /// Uploads admitted that the cached usage does not count yet.
    reservations: Reservations,
}

impl StorageQuota {
    pub fn new(limits: StorageLimits) -> Self {
        Self::with_ttl(limits, USAGE_TTL)
    }

    pub fn with_ttl(limits: StorageLimits, ttl: Duration) -> Self {
        Self { limits, ttl, cache: Mutex::new(HashMap::new()), reservations: Reservations::default() }
    }

    pub fn limits(&self) -> StorageLimits {
        self.limits
    }

    /// Refuses a submission of `design` by `tenant` when the tenant is over its quota. If the
    /// store cannot say, the submission goes ahead (it only reaches the log) and a warning is
    /// logged: an outage of the store must not stop intake.
    pub async fn check(
        &self,
        store: &dyn DesignReads,
        objects: &dyn ObjectStore,
        tenant: &TenantId,
        design: &DesignId,
    ) -> Result<(), Problem> {
        let usage = match self.usage(store, objects, tenant).await {
            Ok((_, u)) => u,
            Err(e) => {
                tracing::warn!(error = %e, tenant_id = %tenant, "The tenant's storage could not be read; the submission goes ahead unchecked.");
                return Ok(());
            }
        };
        if usage.bytes >= self.limits.bytes {
            return Err(over(format!(
                "this tenant stores {} of its {} storage quota, so no design or revision is accepted; \
                 ask the operator to remove designs you no longer need or to raise the quota",
                size(usage.bytes),
                size(self.limits.bytes)
            )));
        }
        if usage.designs >= self.limits.designs {
            // Only a new design is refused: revising one the tenant has adds no design.
            let exists = store.get(tenant, design).await.map(|d| d.is_some()).unwrap_or(true);
            if !exists {
                return Err(over(format!(
                    "this tenant has {} designs, its quota is {}, so no new design is accepted; post revisions \
                     to an existing design, or ask the operator to remove designs you no longer need or to raise the quota",
                    usage.designs, self.limits.designs
                )));
            }
        }
        Ok(())
    }

    /// Refuses an upload of `adding` bytes by `tenant` when it would take the tenant past its
    /// byte quota, counting the uploads in progress. As for submissions, a store that cannot say
    /// lets the upload go ahead.
    pub async fn check_adding(
        &self,
        store: &dyn DesignReads,
        objects: &dyn ObjectStore,
        tenant: &TenantId,
        adding: u64,
    ) -> Result<(), Problem> {
        let (read_at, usage) = match self.usage(store, objects, tenant).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, tenant_id = %tenant, "The tenant's storage could not be read; the upload goes ahead unchecked.");
                return Ok(());
            }
        };
        let reserved = self.reservations.held(tenant, read_at);
        if usage.bytes.saturating_add(reserved).saturating_add(adding) > self.limits.bytes {
            return Err(self.upload_over(usage.bytes, reserved, adding));
        }
        Ok(())
    }

    /// Reserves `adding` bytes of `tenant`'s byte quota for an upload about to be received, or
    /// refuses it when the tenant's usage, the uploads it has in progress and this one do not
    /// fit together. The reservation is given back when dropped (the upload failed); once the
    /// upload is stored, [`Reservation::stored`] keeps it until the usage is read again. As for
    /// submissions, a store that cannot say lets the upload go ahead (reserved all the same).
    pub async fn reserve(
        &self,
        store: &dyn DesignReads,
        objects: &dyn ObjectStore,
        tenant: &TenantId,
        adding: u64,
    ) -> Result<Reservation, Problem> {
        let (read_at, used) = match self.usage(store, objects, tenant).await {
            Ok((read_at, usage)) => (Some(read_at), usage.bytes),
            Err(e) => {
                tracing::warn!(error = %e, tenant_id = %tenant, "The tenant's storage could not be read; the upload goes ahead unchecked.");
                (None, 0)
            }
        };
        self.reservations
            .reserve(tenant, used, read_at, adding, self.limits.bytes)
            .map_err(|reserved| self.upload_over(used, reserved, adding))
    }

    fn upload_over(&self, used: u64, reserved: u64, adding: u64) -> Problem {
        let in_progress = match reserved {
            0 => String::new(),
            n => format!(" and has uploads of {} in progress", size(n)),
        };
        over(format!(
            "this tenant stores {} of its {} storage quota{in_progress}, so an upload of {} does not fit; \
             ask the operator to remove designs you no longer need or to raise the quota",
            size(used),
            size(self.limits.bytes),
            size(adding)
        ))
    }

    /// Drops `tenant`'s cached usage, so the next check reads it afresh: called once an upload
    /// is stored, which would otherwise go uncounted for up to [`USAGE_TTL`].
    pub fn forget(&self, tenant: &TenantId) {
        self.cache.lock().unwrap().remove(tenant);
    }

    /// `tenant`'s usage, and when its reading began (cached for the TTL).
    async fn usage(
        &self,
        store: &dyn DesignReads,
        objects: &dyn ObjectStore,
        tenant: &TenantId,
    ) -> openqq_core::ports::PortResult<(Instant, Usage)> {
        let now = Instant::now();
        if let Some((at, usage)) = self.cache.lock().unwrap().get(tenant) {
            if now.duration_since(*at) < self.ttl {
                return Ok((*at, *usage));
            }
        }
        let mut usage = store.usage(tenant).await?;
        usage.bytes += objects.usage(tenant).await?;
        self.reservations.settle(tenant, now);
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= MAX_CACHED_TENANTS {
            cache.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
            if cache.len() >= MAX_CACHED_TENANTS {
                cache.clear();
            }
        }
        cache.insert(tenant.clone(), (now, usage));
        Ok((now, usage))
    }
}

fn over(detail: String) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, "storage-quota-exceeded", "The tenant's storage quota is used up", detail)
}

/// `bytes` in the largest binary unit that keeps one decimal meaningful.
fn size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, scale)| bytes >= *scale) {
        Some((unit, scale)) => format!("{:.1} {unit}", bytes as f64 / *scale as f64),
        None => format!("{bytes} B"),
    }
}

/// Why a size was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a number of bytes, with or without a binary unit.
    #[error("{text:?} is not a size (for example 1GiB, 500MiB, 64KiB or a number of bytes)")]
    Malformed { text: String },
    /// The number did not parse (no digits, or too many for 64 bits).
    #[error("{text:?} is not a size (for example 1GiB, 500MiB, 64KiB or a number of bytes)")]
    Number {
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("{text:?} is too large a size")]
    TooLarge { text: String },
}

/// Parses a size such as `1GiB`, `500MiB`, `64KiB` or `1048576` (bytes), for the flag.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|source| SizeError::Number { text: s.to_owned(), source })?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return Err(SizeError::Malformed { text: s.to_owned() }),
    };
    n.checked_mul(scale).ok_or_else(|| SizeError::TooLarge { text: s.to_owned() })
}

mod reservations;

#[cfg(test)]
mod tests;
