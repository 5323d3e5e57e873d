//! The per-tenant limit at the front door: a quota per tenant (default plus overrides), the
//! limiter decision, and the `RateLimit-*` / `Retry-After` headers.

use crate::problem::Problem;
use crate::AppState;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use openqq_core::{Decision, Quota, TenantId};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::RwLock;
use std::time::Duration;

/// Quotas per tenant. Overrides can be replaced while running (a reloaded file).
#[derive(Debug)]
pub struct LimitPolicy {
    pub default: Quota,
    overrides: RwLock<HashMap<TenantId, Quota>>,
}

impl LimitPolicy {
    pub fn new(default: Quota) -> Self {
        Self { default, overrides: RwLock::new(HashMap::new()) }
    }

    pub fn quota_for(&self, tenant: &TenantId) -> Quota {
        self.overrides.read().unwrap().get(tenant).copied().unwrap_or(self.default)
    }

    pub fn set_overrides(&self, overrides: HashMap<TenantId, Quota>) {
        *self.overrides.write().unwrap() = overrides;
    }
}

/// `COUNT/WINDOW`, e.g. `100/1s`, `6000/1m`, `50/250ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaSpec(pub Quota);

impl FromStr for QuotaSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let err = || format!("{s:?} is not COUNT/WINDOW (for example 100/1s, 6000/1m, 50/250ms)");
        let (count, window) = s.split_once('/').ok_or_else(err)?;
        let limit: u32 = count.trim().parse().map_err(|_| err())?;
        let window = window.trim();
        let split = window.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
        let (n, unit) = window.split_at(split);
        let n: u64 = n.parse().map_err(|_| err())?;
        let window = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(err()),
        };
        if limit == 0 || window.is_zero() {
            return Err(format!("{s:?}: count and window must be positive"));
        }
        Ok(QuotaSpec(Quota { limit, window }))
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000) as u64
}

pub async fn check(state: &AppState, tenant: &TenantId) -> Result<Decision, Problem> {
    let quota = state.limits.quota_for(tenant);
    let decision = state.limiter.check(tenant, quota).await.map_err(|e| Problem::from_port(e, "the rate limiter"))?;
    let outcome = if decision.allowed { "allowed" } else { "rejected" };
    metrics::counter!("openqq_limiter_decisions_total", "outcome" => outcome).increment(1);
    if decision.allowed {
        return Ok(decision);
    }
    let mut p = Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate-limited",
        "Too many requests",
        format!(
            "tenant {tenant} may send {} requests per {:?}; retry after the Retry-After delay",
            quota.limit, quota.window
        ),
    )
    .retry_after(ceil_secs(decision.reset));
    p.headers = headers(&decision);
    Err(p)
}

fn headers(d: &Decision) -> Vec<(&'static str, String)> {
    vec![
        ("ratelimit-limit", d.limit.to_string()),
        ("ratelimit-remaining", d.remaining.to_string()),
        ("ratelimit-reset", ceil_secs(d.reset).to_string()),
    ]
}

pub fn add_headers(h: &mut HeaderMap, d: &Decision) {
    for (name, value) in headers(d) {
        h.insert(name, HeaderValue::from_str(&value).expect("digits are header-safe"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_specs_parse_with_units_and_refuse_nonsense() {
        assert_eq!("100/1s".parse::<QuotaSpec>().unwrap().0, Quota { limit: 100, window: Duration::from_secs(1) });
        assert_eq!("50/250ms".parse::<QuotaSpec>().unwrap().0.window, Duration::from_millis(250));
        assert_eq!("6000/1m".parse::<QuotaSpec>().unwrap().0.window, Duration::from_secs(60));
        for bad in ["100", "x/1s", "100/1", "100/1d", "0/1s", "10/0s"] {
            assert!(bad.parse::<QuotaSpec>().is_err(), "{bad}");
        }
    }
}
