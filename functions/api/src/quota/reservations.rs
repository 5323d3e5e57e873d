//! Bytes admitted against the storage quota that its usage figure does not show yet.
//!
//! The usage figure is read from the stores and reused for a few seconds ([`super::USAGE_TTL`]),
//! so on its own it lets parallel uploads each see the same room and together overshoot the
//! quota by as much as fits in memory at once (512 MiB). An upload therefore reserves its length
//! before it is accepted: it fits only if the usage figure, plus what is reserved, plus its
//! length stay within the quota, decided under one lock. A reservation is given back when the
//! upload fails, and when it was stored it stays until a usage figure read after the store
//! (which counts the object) replaces the one in use: never counted twice, never uncounted.
//!
//! The ledger is per API instance, as the cache is; instances behind a load balancer (Lambda
//! concurrency) each hold their own, so the quota is exact per instance and soft by the
//! instances' uploads in progress across them.

use openqq_core::TenantId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One reservation's place in the ledger.
#[derive(Debug)]
struct Held {
    id: u64,
    bytes: u64,
    /// When the upload was stored; `None` while it is in progress.
    stored_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct Ledger {
    next_id: u64,
    by_tenant: HashMap<TenantId, Vec<Held>>,
}

/// Every tenant's reservations on this instance.
#[derive(Debug, Default, Clone)]
pub(crate) struct Reservations(Arc<Mutex<Ledger>>);

impl Reservations {
    /// Reserves `adding` bytes for `tenant` if `used` (a usage figure read from `read_at`) plus
    /// what `tenant` has reserved plus `adding` stay within `limit`; otherwise answers how much
    /// is reserved. Reservations of objects stored before `read_at` are in `used` and are
    /// dropped here. `read_at` is `None` when the usage is unknown (the stores did not answer):
    /// the upload goes ahead, and is still reserved so that its neighbours count it.
    pub fn reserve(
        &self,
        tenant: &TenantId,
        used: u64,
        read_at: Option<Instant>,
        adding: u64,
        limit: u64,
    ) -> Result<Reservation, u64> {
        let mut ledger = self.0.lock().unwrap();
        let id = ledger.next_id;
        let held = ledger.by_tenant.entry(tenant.clone()).or_default();
        if let Some(read_at) = read_at {
            held.retain(|h| h.stored_at.is_none_or(|at| at >= read_at));
        }
        let reserved: u64 = held.iter().map(|h| h.bytes).sum();
        if read_at.is_some() && used.saturating_add(reserved).saturating_add(adding) > limit {
            if held.is_empty() {
                ledger.by_tenant.remove(tenant);
            }
            return Err(reserved);
        }
        held.push(Held { id, bytes: adding, stored_at: None });
        ledger.next_id += 1;
        Ok(Reservation { ledger: self.clone(), tenant: tenant.clone(), id, stored: false })
    }

    /// A usage figure of `tenant` was read from `read_at`: the objects stored before it are in it.
    pub fn settle(&self, tenant: &TenantId, read_at: Instant) {
        let mut ledger = self.0.lock().unwrap();
        if let Some(held) = ledger.by_tenant.get_mut(tenant) {
            held.retain(|h| h.stored_at.is_none_or(|at| at >= read_at));
            if held.is_empty() {
                ledger.by_tenant.remove(tenant);
            }
        }
    }

    /// What `tenant` has reserved and not yet seen in a usage figure read from `read_at`.
    pub fn held(&self, tenant: &TenantId, read_at: Instant) -> u64 {
        let ledger = self.0.lock().unwrap();
        let held = ledger.by_tenant.get(tenant).into_iter().flatten();
        held.filter(|h| h.stored_at.is_none_or(|at| at >= read_at)).map(|h| h.bytes).sum()
    }

    fn release(&self, tenant: &TenantId, id: u64) {
        let mut ledger = self.0.lock().unwrap();
        if let Some(held) = ledger.by_tenant.get_mut(tenant) {
            held.retain(|h| h.id != id);
            if held.is_empty() {
                ledger.by_tenant.remove(tenant);
            }
        }
    }

    fn mark_stored(&self, tenant: &TenantId, id: u64) {
        let mut ledger = self.0.lock().unwrap();
        let held = ledger.by_tenant.get_mut(tenant).into_iter().flatten();
        if let Some(h) = held.into_iter().find(|h| h.id == id) {
            h.stored_at = Some(Instant::now());
        }
    }
}

/// Bytes reserved for one upload: given back when dropped, unless [`Reservation::stored`] said
/// the object is kept, in which case they stay until a usage figure counts it.
#[derive(Debug)]
#[must_use = "a reservation is given back as soon as it is dropped"]
pub struct Reservation {
    ledger: Reservations,
    tenant: TenantId,
    id: u64,
    stored: bool,
}

impl Reservation {
    /// The upload was stored: its bytes stay reserved until the usage figure is read again.
    pub fn stored(mut self) {
        self.ledger.mark_stored(&self.tenant, self.id);
        self.stored = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.stored {
            self.ledger.release(&self.tenant, self.id);
        }
    }
}
