//! Bounded tenant label values: the first [`TENANT_LABEL_CAP`] distinct tenants a process sees
//! keep their own `tenant` label; every later one is counted under [`OTHER_TENANTS`]. A flood of
//! new tenant ids therefore adds at most one series per metric and label set, never one per
//! tenant. Every metric with a `tenant` label takes its value from [`tenant_label`].

use std::collections::HashSet;
use std::sync::{OnceLock, RwLock};

/// How many distinct tenants keep their own label value in one process.
pub const TENANT_LABEL_CAP: usize = 100;

/// The label value of every tenant past the cap. Not a valid tenant id (ids take no
/// parentheses), so it never collides with a real tenant.
pub const OTHER_TENANTS: &str = "(other)";

/// The label value where no tenant is known (an unauthenticated request, `/healthz`).
pub const NO_TENANT: &str = "(none)";

/// The tenants that keep their label, up to a cap.
#[derive(Debug)]
pub struct TenantLabels {
    cap: usize,
    /// Who got a label so far, in no order; never more than `cap` entries.
    kept: RwLock<HashSet<String>>,
}

impl TenantLabels {
    pub fn new(cap: usize) -> Self {
        Self { cap, kept: RwLock::new(HashSet::new()) }
    }

    /// `tenant` itself if it already has a label or there is still room, else [`OTHER_TENANTS`].
    pub fn label(&self, tenant: &str) -> String {
        if self.kept.read().unwrap_or_else(|e| e.into_inner()).contains(tenant) {
            return tenant.to_owned();
        }
        let mut kept = self.kept.write().unwrap_or_else(|e| e.into_inner());
        if kept.contains(tenant) || kept.len() < self.cap {
            kept.insert(tenant.to_owned());
            tenant.to_owned()
        } else {
            OTHER_TENANTS.to_owned()
        }
    }
}

/// The process-wide `tenant` label value of `tenant` (cap [`TENANT_LABEL_CAP`]).
pub fn tenant_label(tenant: &str) -> String {
    static LABELS: OnceLock<TenantLabels> = OnceLock::new();
    LABELS.get_or_init(|| TenantLabels::new(TENANT_LABEL_CAP)).label(tenant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_tenants_up_to_the_cap_keep_their_label_and_later_ones_are_other() {
        let labels = TenantLabels::new(3);
        let first: Vec<String> = ["a", "b", "c"].iter().map(|t| labels.label(t)).collect();
        assert_eq!(first, ["a", "b", "c"]);
        assert_eq!(labels.label("d"), OTHER_TENANTS);
        assert_eq!(labels.label("e"), OTHER_TENANTS);
        // Those who got a label keep it after the cap is reached.
        assert_eq!(labels.label("b"), "b");
    }

    #[test]
    fn a_flood_of_tenants_yields_at_most_the_cap_plus_one_label_values() {
        let labels = TenantLabels::new(TENANT_LABEL_CAP);
        let distinct: HashSet<String> = (0..10_000).map(|i| labels.label(&format!("flood-{i}"))).collect();
        assert_eq!(distinct.len(), TENANT_LABEL_CAP + 1);
        assert!(distinct.contains(OTHER_TENANTS));
    }

    #[test]
    fn the_overflow_and_no_tenant_values_are_not_valid_tenant_ids() {
        let id_char = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
        assert!(!OTHER_TENANTS.chars().all(id_char));
        assert!(!NO_TENANT.chars().all(id_char));
    }
}
