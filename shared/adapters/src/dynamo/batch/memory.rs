//! [`Memory`]: what the store last knew of each tenant and design, so that a write can be planned
//! without a read, kept in maps of bounded size ([`Bounded`]).

use super::plan::{Design, Feed, Hooks};
use openqq_core::{DesignId, TenantId};
use std::collections::HashMap;
use std::sync::Mutex;

/// Tenants whose feed head [`Memory`] keeps; past this it starts over.
const MAX_REMEMBERED_TENANTS: usize = 10_000;
/// Designs whose state [`Memory`] keeps; past this it starts over.
const MAX_REMEMBERED_DESIGNS: usize = 100_000;
/// After an unread write of a tenant guessed wrong, this many of the tenant's next writes read
/// first: where other processes write the same tenant (Lambda), what one remembers is often old,
/// and a wrong guess costs a request.
const COOL_DOWN: u32 = 4;

/// What the store last knew, so that a write can be made without a read: each tenant's feed head
/// and webhook count with version, its webhooks as listed at that version, and each design's
/// item, as last read or written here. A hint only: every write planned from it is conditional
/// on exactly what it assumed.
#[derive(Default)]
pub(crate) struct Memory {
    feeds: Bounded<TenantId, Feed, MAX_REMEMBERED_TENANTS>,
    hooks: Bounded<TenantId, (u64, Hooks), MAX_REMEMBERED_TENANTS>,
    designs: Bounded<(TenantId, DesignId), Design, MAX_REMEMBERED_DESIGNS>,
    /// Tenants whose next writes read first, and for how many more.
    cooling: Bounded<TenantId, u32, MAX_REMEMBERED_TENANTS>,
}

/// A map of at most `CAP` entries that starts over when a new key would pass it: what
/// [`Memory`] forgets only costs a read.
struct Bounded<K, V, const CAP: usize>(Mutex<HashMap<K, V>>);

impl<K, V, const CAP: usize> Default for Bounded<K, V, CAP> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: std::hash::Hash + Eq, V, const CAP: usize> Bounded<K, V, CAP> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, key: K, value: V) {
        let mut map = self.lock();
        if map.len() >= CAP && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, value);
    }
}

impl Memory {
    pub(super) fn design(&self, tenant: &TenantId, design: &DesignId) -> Option<Design> {
        self.designs.lock().get(&(tenant.clone(), design.clone())).cloned()
    }

    pub(super) fn remember_design(&self, key: &(TenantId, DesignId), design: &Design) {
        self.designs.insert(key.clone(), design.clone());
    }

    /// An unread write of `tenant` guessed wrong: its next [`COOL_DOWN`] writes read first.
    pub(super) fn missed(&self, tenant: &TenantId) {
        self.cooling.insert(tenant.clone(), COOL_DOWN);
    }

    /// Whether this write of `tenant` reads first (counting it against the cool-down).
    pub(super) fn cooling(&self, tenant: &TenantId) -> bool {
        let mut cooling = self.cooling.lock();
        match cooling.get_mut(tenant) {
            Some(left) if *left > 1 => {
                *left -= 1;
                true
            }
            Some(_) => {
                cooling.remove(tenant);
                true
            }
            None => false,
        }
    }

    pub(super) fn feed(&self, tenant: &TenantId) -> Option<Feed> {
        self.feeds.lock().get(tenant).copied()
    }

    pub(super) fn remember(&self, tenant: &TenantId, feed: Feed) {
        self.feeds.insert(tenant.clone(), feed);
    }

    pub(super) fn hooks(&self, tenant: &TenantId, version: u64) -> Option<Hooks> {
        self.hooks.lock().get(tenant).filter(|(v, _)| *v == version).map(|(_, h)| h.clone())
    }

    pub(super) fn remember_hooks(&self, tenant: &TenantId, version: u64, list: Hooks) {
        self.hooks.insert(tenant.clone(), (version, list));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::batch::fixtures::{design, tenant};
    use openqq_core::revision::HeldDesign;
    use openqq_core::{DesignStatus, EventKind, WebhookId};
    use std::sync::Arc;

    #[test]
    fn a_bounded_map_starts_over_when_a_new_key_would_pass_its_capacity() {
        let map: Bounded<u32, &str, 3> = Bounded::default();
        for k in 1..=3 {
            map.insert(k, "first");
        }
        map.insert(2, "again");
        assert_eq!(map.lock().len(), 3, "a key it holds is replaced, not added");
        assert_eq!(map.lock().get(&2), Some(&"again"));
        map.insert(4, "new");
        let held: Vec<u32> = map.lock().keys().copied().collect();
        assert_eq!(held, [4], "a fourth key clears the three before it");
    }

    #[test]
    fn a_tenants_feed_head_is_remembered_as_last_told() {
        let memory = Memory::default();
        let (acme, other) = (tenant("acme"), tenant("other"));
        assert_eq!(memory.feed(&acme), None);
        memory.remember(&acme, Feed { head: 3, hooks: None });
        memory.remember(&acme, Feed { head: 5, hooks: Some((1, 2)) });
        assert_eq!(memory.feed(&acme), Some(Feed { head: 5, hooks: Some((1, 2)) }));
        assert_eq!(memory.feed(&other), None, "only the tenant told");
    }

    #[test]
    fn past_its_cap_of_tenants_memory_forgets_the_feed_heads_it_held() {
        let memory = Memory::default();
        let tenants: Vec<TenantId> = (0..=MAX_REMEMBERED_TENANTS).map(|i| tenant(&format!("t-{i}"))).collect();
        let (first, last) = (&tenants[0], &tenants[MAX_REMEMBERED_TENANTS]);
        for (i, t) in tenants[..MAX_REMEMBERED_TENANTS].iter().enumerate() {
            memory.remember(t, Feed { head: i as u64, hooks: None });
        }
        assert_eq!(memory.feed(first), Some(Feed { head: 0, hooks: None }), "at the cap, all are held");
        memory.remember(last, Feed { head: 7, hooks: None });
        assert_eq!(memory.feed(first), None, "one more tenant: the others are forgotten");
        assert_eq!(memory.feed(last), Some(Feed { head: 7, hooks: None }));
    }

    #[test]
    fn webhooks_are_given_only_at_the_version_they_were_listed_at() {
        let memory = Memory::default();
        let (acme, other) = (tenant("acme"), tenant("other"));
        let listed: Hooks = Arc::new(vec![(WebhookId::generate(), vec![EventKind::DesignSubmitted])]);
        memory.remember_hooks(&acme, 2, listed.clone());
        assert!(memory.hooks(&acme, 2).is_some_and(|h| Arc::ptr_eq(&h, &listed)));
        assert!(memory.hooks(&acme, 3).is_none(), "a webhook registered or deleted since: listed again");
        assert!(memory.hooks(&other, 2).is_none());
        memory.remember_hooks(&acme, 3, Arc::new(Vec::new()));
        assert!(memory.hooks(&acme, 2).is_none(), "the older listing is replaced");
        assert_eq!(memory.hooks(&acme, 3).map(|h| h.len()), Some(0));
    }

    #[test]
    fn after_a_missed_guess_the_tenants_next_writes_read_first_for_the_cool_down() {
        let memory = Memory::default();
        let (acme, other) = (tenant("acme"), tenant("other"));
        assert!(!memory.cooling(&acme), "no miss, no read first");
        memory.missed(&acme);
        let reads: Vec<bool> = (0..COOL_DOWN + 2).map(|_| memory.cooling(&acme)).collect();
        let mut expected = vec![true; COOL_DOWN as usize];
        expected.extend([false, false]);
        assert_eq!(reads, expected);
        assert!(!memory.cooling(&other), "another tenant guesses on");
        memory.missed(&acme);
        memory.cooling(&acme);
        memory.missed(&acme);
        assert_eq!(
            (0..COOL_DOWN).filter(|_| memory.cooling(&acme)).count(),
            COOL_DOWN as usize,
            "a new miss starts over"
        );
    }

    #[test]
    fn a_design_is_remembered_by_tenant_and_design() {
        let memory = Memory::default();
        let (acme, other, d1, d2) = (tenant("acme"), tenant("other"), design("d-1"), design("d-2"));
        let held = HeldDesign { revision: 2, status: DesignStatus::Validating };
        let latest = [("validation.started".to_owned(), 2)].into();
        memory
            .remember_design(&(acme.clone(), d1.clone()), &Design { held: Some(held), seq: 3, latest, deleted: false });
        let found = memory.design(&acme, &d1).expect("remembered");
        assert_eq!((found.held, found.seq, found.latest.get("validation.started")), (Some(held), 3, Some(&2)));
        assert!(memory.design(&acme, &d2).is_none());
        assert!(memory.design(&other, &d1).is_none(), "the same design id of another tenant is another design");
    }
}
