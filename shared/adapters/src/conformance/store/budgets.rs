//! Daily budgets: charges within the limit pass, one that would pass it is refused and changes
//! nothing, refunds never go below zero, tenants, days and budgets are apart, and charges racing
//! for the last of a budget never pass the limit together.

use super::super::unique;
use openqq_core::{Budget, Charge, DesignStore, TenantId};

const T: Budget = Budget::GenerationTokens;

pub async fn a_charge_passes_only_within_the_limit_and_a_refund_never_goes_below_zero<S: DesignStore + ?Sized>(
    store: &S,
) {
    let tenant = TenantId::parse(unique("budget")).unwrap();
    let other = TenantId::parse(unique("budget")).unwrap();
    let day = "2026-12-02";
    assert_eq!(store.budget_spent(&tenant, T, day).await.unwrap(), 0, "nothing spent on a fresh day");
    assert_eq!(store.charge_budget(&tenant, T, day, 60, 100).await.unwrap(), Charge::Charged { spent: 60 });
    assert_eq!(store.charge_budget(&tenant, T, day, 50, 100).await.unwrap(), Charge::Refused { spent: 60 });
    assert_eq!(store.charge_budget(&tenant, T, day, 40, 100).await.unwrap(), Charge::Charged { spent: 100 });
    assert_eq!(
        store.charge_budget(&tenant, T, day, 0, u64::MAX).await.unwrap(),
        Charge::Charged { spent: 100 },
        "a charge of nothing answers the total"
    );
    let fresh = TenantId::parse(unique("budget")).unwrap();
    assert_eq!(store.charge_budget(&fresh, T, day, 0, u64::MAX).await.unwrap(), Charge::Charged { spent: 0 });
    assert_eq!(store.charge_budget(&tenant, T, day, 1, 100).await.unwrap(), Charge::Refused { spent: 100 });
    store.refund_budget(&tenant, T, day, 30).await.unwrap();
    assert_eq!(store.budget_spent(&tenant, T, day).await.unwrap(), 70);
    store.refund_budget(&tenant, T, day, 1000).await.unwrap();
    assert_eq!(store.budget_spent(&tenant, T, day).await.unwrap(), 0, "a refund stops at zero");
    assert_eq!(store.charge_budget(&tenant, T, day, 101, 100).await.unwrap(), Charge::Refused { spent: 0 });
    store.refund_budget(&other, T, day, 5).await.unwrap();
    assert_eq!(store.budget_spent(&other, T, day).await.unwrap(), 0, "a refund of nothing charged is a no-op");

    // Another tenant, and another day, start from nothing.
    assert_eq!(store.charge_budget(&other, T, day, 100, 100).await.unwrap(), Charge::Charged { spent: 100 });
    assert_eq!(store.charge_budget(&tenant, T, "2026-12-03", 100, 100).await.unwrap(), Charge::Charged { spent: 100 });
    assert_eq!(store.budget_spent(&tenant, T, day).await.unwrap(), 0);

    // Another budget of the same tenant and day starts from nothing, and is charged apart.
    let bytes = Budget::LogBytes;
    assert_eq!(store.budget_spent(&other, bytes, day).await.unwrap(), 0, "log bytes are not tokens");
    assert_eq!(store.charge_budget(&other, bytes, day, 5000, 8000).await.unwrap(), Charge::Charged { spent: 5000 });
    assert_eq!(store.charge_budget(&other, bytes, day, 5000, 8000).await.unwrap(), Charge::Refused { spent: 5000 });
    assert_eq!(store.budget_spent(&other, T, day).await.unwrap(), 100, "tokens are not log bytes");
}

pub async fn charges_racing_for_the_last_tokens_never_pass_the_limit_together<S: DesignStore + ?Sized>(store: &S) {
    let tenant = TenantId::parse(unique("budget-race")).unwrap();
    let day = "2026-12-02";
    let charges = (0..16).map(|_| store.charge_budget(&tenant, T, day, 10, 100)).collect();
    let answers = super::feed::join_all(charges).await;
    let charged = answers.iter().filter(|a| matches!(a, Ok(Charge::Charged { .. }))).count();
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(charged, 10, "exactly the limit's worth was charged: {answers:?}");
    assert_eq!(store.budget_spent(&tenant, T, day).await.unwrap(), 100);
}
