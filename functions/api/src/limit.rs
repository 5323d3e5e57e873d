//! The per-tenant limits at the front door: a request quota per tenant (default plus
//! overrides), a byte quota on request bodies, the limiter decisions, and the `RateLimit-*` /
//! `Retry-After` headers.

use crate::log_bytes::Charged;
use crate::problem::Problem;
use crate::quota::SizeError;
use crate::AppState;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use openqq_core::budget;
use openqq_core::{Decision, Meter, Quota, TenantId};
use std::collections::HashMap;
use std::num::ParseIntError;
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

/// Why a `COUNT/WINDOW` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaSpecError {
    /// No `/`, no unit on the window, or a unit other than `ms`, `s`, `m`, `h`.
    #[error("{text:?} is not COUNT/WINDOW (for example 100/1s, 6000/1m, 50/250ms)")]
    Malformed { text: String },
    /// The count or the window's number did not parse.
    #[error("{text:?} is not COUNT/WINDOW (for example 100/1s, 6000/1m, 50/250ms)")]
    Number {
        text: String,
        #[source]
        source: ParseIntError,
    },
    #[error("{text:?}: count and window must be positive")]
    NotPositive { text: String },
}

impl FromStr for QuotaSpec {
    type Err = QuotaSpecError;
    fn from_str(s: &str) -> Result<Self, QuotaSpecError> {
        let malformed = || QuotaSpecError::Malformed { text: s.to_owned() };
        let number = |source| QuotaSpecError::Number { text: s.to_owned(), source };
        let (count, window) = s.split_once('/').ok_or_else(malformed)?;
        let limit: u32 = count.trim().parse().map_err(number)?;
        let window = window.trim();
        let split = window.find(|c: char| !c.is_ascii_digit()).ok_or_else(malformed)?;
        let (n, unit) = window.split_at(split);
        let n: u64 = n.parse().map_err(number)?;
        let window = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(malformed()),
        };
        if limit == 0 || window.is_zero() {
            return Err(QuotaSpecError::NotPositive { text: s.to_owned() });
        }
        Ok(QuotaSpec(Quota { limit, window }))
    }
}

/// `SIZE/WINDOW` for a byte quota, e.g. `64MiB/1m`, `500KiB/10s`, `1048576/1s`. Sizes take
/// `B`, `KiB`, `MiB` or `GiB` (or none: bytes); the quota must stay under 4 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteQuotaSpec(pub Quota);

/// Why a `SIZE/WINDOW` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByteQuotaSpecError {
    /// No `/` between the size and the window.
    #[error("{text:?} is not SIZE/WINDOW (for example 64MiB/1m, 500KiB/10s)")]
    Malformed { text: String },
    #[error("{text:?} is not SIZE/WINDOW (for example 64MiB/1m, 500KiB/10s)")]
    Size {
        text: String,
        #[source]
        source: SizeError,
    },
    #[error("{text:?} is not SIZE/WINDOW (for example 64MiB/1m, 500KiB/10s)")]
    Window {
        text: String,
        #[source]
        source: QuotaSpecError,
    },
    #[error("{text:?}: the size must be under 4 GiB")]
    TooLarge { text: String },
    #[error("{text:?}: the size must be positive")]
    NotPositive { text: String },
}

impl FromStr for ByteQuotaSpec {
    type Err = ByteQuotaSpecError;
    fn from_str(s: &str) -> Result<Self, ByteQuotaSpecError> {
        let text = || s.to_owned();
        let (size, window) = s.split_once('/').ok_or_else(|| ByteQuotaSpecError::Malformed { text: text() })?;
        let bytes =
            crate::quota::parse_size(size).map_err(|source| ByteQuotaSpecError::Size { text: text(), source })?;
        let limit = u32::try_from(bytes).map_err(|_| ByteQuotaSpecError::TooLarge { text: text() })?;
        // The window takes the same forms as a request quota's.
        let QuotaSpec(Quota { window, .. }) = format!("1/{window}")
            .parse::<QuotaSpec>()
            .map_err(|source| ByteQuotaSpecError::Window { text: text(), source })?;
        if limit == 0 {
            return Err(ByteQuotaSpecError::NotPositive { text: text() });
        }
        Ok(ByteQuotaSpec(Quota { limit, window }))
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000) as u64
}

pub async fn check(state: &AppState, tenant: &TenantId) -> Result<Decision, Problem> {
    let quota = state.limits.quota_for(tenant);
    let decision = state.limiter.check(tenant, quota).await.map_err(|e| Problem::from_port(e, "the rate limiter"))?;
    let verdict = if decision.allowed { "allowed" } else { "rejected" };
    let tenant_label = openqq_telemetry::tenant_label(tenant.as_str());
    metrics::counter!("openqq_limiter_decisions_total", "tenant" => tenant_label, "decision" => verdict).increment(1);
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

/// Weighs a request body of `cost` bytes against the tenant's byte quota: 429 with
/// `Retry-After` (until enough of the window's bytes expire for this body to fit) and the
/// `RateLimit-*` headers of the byte quota when it does not fit.
pub async fn check_bytes(state: &AppState, tenant: &TenantId, quota: Quota, cost: u32) -> Result<Decision, Problem> {
    let decision = weigh(state, tenant, Meter::Bytes, quota, cost).await?;
    if decision.allowed {
        return Ok(decision);
    }
    let detail = if cost > quota.limit {
        format!(
            "a body of {cost} bytes is larger than tenant {tenant}'s whole byte quota of {} per {:?}",
            quota.limit, quota.window
        )
    } else {
        format!(
            "tenant {tenant} may send {} bytes of request bodies per {:?} and has {} left; this body is {cost} bytes; \
             retry after the Retry-After delay",
            quota.limit, quota.window, decision.remaining
        )
    };
    Err(refused(&decision, "byte-limited", "Too many bytes", detail))
}

/// The batch quotas a batch of `items` must pass, in this order: what the tenant has open
/// (`check_open_batch_items`), then its items per window (`check_batch_items`). Every path
/// that submits a batch (`POST /v1/batches`, a retry, a schedule's fire) checks them here.
pub async fn check_batch(state: &AppState, tenant: &TenantId, items: usize) -> Result<(), Problem> {
    let items = u32::try_from(items).unwrap_or(u32::MAX);
    check_open_batch_items(state, tenant, items).await?;
    check_batch_items(state, tenant, items).await.map(drop)
}

/// Weighs a batch of `items` against the tenant's batch-item quota
/// ([`crate::tenant_guard::TenantLimits::batch_items`]): 429 `batch-items-limited` with
/// `Retry-After` and the quota's `RateLimit-*` headers when the items do not fit.
async fn check_batch_items(state: &AppState, tenant: &TenantId, items: u32) -> Result<Decision, Problem> {
    let quota = state.tenants.limits.batch_items;
    let decision = weigh(state, tenant, Meter::BatchItems, quota, items).await?;
    if decision.allowed {
        return Ok(decision);
    }
    let detail = if items > quota.limit {
        format!(
            "a batch of {items} items is larger than tenant {tenant}'s whole batch-item quota of {} per {:?}; split it",
            quota.limit, quota.window
        )
    } else {
        format!(
            "tenant {tenant} may submit {} batch items per {:?} and has {} left; this batch has {items}; \
             retry after the Retry-After delay",
            quota.limit, quota.window, decision.remaining
        )
    };
    Err(refused(&decision, "batch-items-limited", "Too many batch items", detail))
}

/// Refuses a batch of `items` that would take what the tenant has open in the batch lane past
/// [`crate::tenant_guard::TenantLimits::batch_open`]: 429 `batch-items-open` with a
/// `Retry-After` of [`OPEN_RETRY_SECS`] (open items end as the lane works through them). Checked
/// before the batch is submitted, so batches submitted at the same moment may pass it together
/// by at most their own items.
async fn check_open_batch_items(state: &AppState, tenant: &TenantId, items: u32) -> Result<(), Problem> {
    let limit = state.tenants.limits.batch_open;
    let open =
        state.batches.open_items(tenant).await.map_err(|e| Problem::from_port(e, "counting open batch items"))?;
    if open + u64::from(items) <= limit {
        return Ok(());
    }
    let detail = format!(
        "tenant {tenant} may have {limit} batch items open at once and has {open}; this batch has {items}; \
         retry once some have ended"
    );
    Err(Problem::new(StatusCode::TOO_MANY_REQUESTS, "batch-items-open", "Too many batch items open", detail)
        .retry_after(OPEN_RETRY_SECS))
}

/// What a refusal for open batch items asks the client to wait, in seconds.
pub const OPEN_RETRY_SECS: u64 = 10;

/// Charges `bytes` of the event log to `tenant`'s day
/// ([`crate::tenant_guard::TenantLimits::log_bytes_per_day`], counted as [`crate::log_bytes`]
/// says) before what they stand for is published. Over it: 429 `log-bytes-spent`, with
/// `Retry-After` until the next day (UTC). Returns the day charged, for a refund.
pub async fn charge_log_bytes(state: &AppState, tenant: &TenantId, bytes: u64) -> Result<String, Problem> {
    let limit = state.tenants.limits.log_bytes_per_day;
    let charged = state
        .log_bytes
        .charge(tenant, bytes, limit)
        .await
        .map_err(|e| Problem::from_port(e, "charging the event log's bytes"))?;
    match charged {
        Charged::Yes { day } => Ok(day),
        Charged::Refused { spent } => Err(Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "log-bytes-spent",
            "The tenant's event-log bytes for today are spent",
            format!(
                "tenant {tenant}'s submissions may write {limit} bytes to the event log a day and {spent} are \
                 charged; this one may write up to {bytes}; the budget renews at 00:00 UTC"
            ),
        )
        .retry_after(budget::seconds_to_next_day(chrono::Utc::now()))),
    }
}

/// Publishes `record` on the topic of `kind` once `log_bytes` are charged to `tenant`'s day
/// ([`charge_log_bytes`]); a publish that fails gives the charge back. `doing` names the publish
/// in the problem a failure answers.
pub async fn publish_charged(
    state: &AppState,
    tenant: &TenantId,
    log_bytes: u64,
    kind: openqq_core::EventKind,
    record: openqq_core::ports::Record,
    doing: &str,
) -> Result<(), Problem> {
    let day = charge_log_bytes(state, tenant, log_bytes).await?;
    if let Err(e) = state.log.publish(&state.topics.of(kind), vec![record]).await {
        state.log_bytes.refund(tenant, &day, log_bytes);
        return Err(Problem::from_port(e, doing));
    }
    Ok(())
}

/// One weighted decision of `meter`, counted in the meter's decisions metric
/// (`openqq_byte_limiter_decisions_total`, `openqq_batch_item_limiter_decisions_total`).
async fn weigh(
    state: &AppState,
    tenant: &TenantId,
    meter: Meter,
    quota: Quota,
    cost: u32,
) -> Result<Decision, Problem> {
    let decision = state
        .limiter
        .check_weighted(tenant, meter, quota, cost)
        .await
        .map_err(|e| Problem::from_port(e, "the limiter"))?;
    let verdict = if decision.allowed { "allowed" } else { "rejected" };
    let tenant_label = openqq_telemetry::tenant_label(tenant.as_str());
    let name = match meter {
        Meter::Bytes => "openqq_byte_limiter_decisions_total",
        Meter::BatchItems => "openqq_batch_item_limiter_decisions_total",
    };
    metrics::counter!(name, "tenant" => tenant_label, "decision" => verdict).increment(1);
    Ok(decision)
}

/// The 429 of a weighted quota that refused: `Retry-After` and its `RateLimit-*` headers.
fn refused(decision: &Decision, slug: &'static str, title: &'static str, detail: String) -> Problem {
    let mut p = Problem::new(StatusCode::TOO_MANY_REQUESTS, slug, title, detail).retry_after(ceil_secs(decision.reset));
    p.headers = headers(decision);
    p
}

fn headers(d: &Decision) -> Vec<(&'static str, String)> {
    vec![
        ("ratelimit-limit", d.limit.to_string()),
        ("ratelimit-remaining", d.remaining.to_string()),
        ("ratelimit-reset", ceil_secs(d.reset).to_string()),
    ]
}

/// Adds the request quota's `RateLimit-*` headers, unless an inner limit (the byte quota that
/// refused the request) already set its own: those are the ones the client must act on.
pub fn add_headers(h: &mut HeaderMap, d: &Decision) {
    if h.contains_key("ratelimit-limit") {
        return;
    }
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
        let refused = "x/1s".parse::<QuotaSpec>().unwrap_err();
        assert_eq!(refused.to_string(), r#""x/1s" is not COUNT/WINDOW (for example 100/1s, 6000/1m, 50/250ms)"#);
        assert!(matches!(refused, QuotaSpecError::Number { .. }), "the number's error is kept: {refused:?}");
        assert_eq!("0/1s".parse::<QuotaSpec>(), Err(QuotaSpecError::NotPositive { text: "0/1s".into() }));
    }

    #[test]
    fn byte_quota_specs_parse_with_binary_units_and_refuse_nonsense() {
        let q = |s: &str| s.parse::<ByteQuotaSpec>().map(|b| b.0);
        assert_eq!(q("64MiB/1m").unwrap(), Quota { limit: 64 << 20, window: Duration::from_secs(60) });
        assert_eq!(q("500KiB/10s").unwrap().limit, 500 * 1024);
        assert_eq!(q("1000/250ms").unwrap(), Quota { limit: 1000, window: Duration::from_millis(250) });
        assert_eq!(q("3GiB/1h").unwrap().limit, 3 << 30);
        for bad in ["64MiB", "64MB/1m", "4GiB/1m", "0/1s", "10KiB/0s", "x/1s", "10KiB/1d", "-1/1s"] {
            assert!(q(bad).is_err(), "{bad}");
        }
        assert_eq!(q("4GiB/1m"), Err(ByteQuotaSpecError::TooLarge { text: "4GiB/1m".into() }));
        let refused = q("64MB/1m").unwrap_err();
        assert_eq!(refused.to_string(), r#""64MB/1m" is not SIZE/WINDOW (for example 64MiB/1m, 500KiB/10s)"#);
        assert!(matches!(refused, ByteQuotaSpecError::Size { .. }), "the size's error is kept: {refused:?}");
    }

    #[test]
    fn an_inner_limits_headers_are_not_overwritten_by_the_request_quotas() {
        let d = |limit| Decision { allowed: true, limit, remaining: 1, reset: Duration::from_secs(1), now_micros: 0 };
        let mut h = HeaderMap::new();
        add_headers(&mut h, &d(5));
        assert_eq!(h["ratelimit-limit"], "5");
        add_headers(&mut h, &d(100));
        assert_eq!(h["ratelimit-limit"], "5", "the first (inner) limit's headers stay");
    }
}
