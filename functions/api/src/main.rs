//! The API function on AWS Lambda: builds its clients once at cold start and hands the router
//! to `lambda_http`.
//!
//! Backends come from the environment through the same settings as the consumer functions
//! (`openqq_runtime::lambda::backends_from_env`): the event log on Kafka / MSK with
//! `OPENQQ_KAFKA_BROKERS` or `OPENQQ_MSK_CLUSTER_ARN`, else embedded; the store on DynamoDB with
//! `OPENQQ_DYNAMODB_TABLE` (shared with the consumer functions), else the embedded one in
//! `OPENQQ_DATA_DIR`, which is useful for `cargo lambda watch` but not for a fleet of Lambdas.
//!
//! Per-tenant limits come from the same variables as `openqq up`'s flags where they apply inside
//! one instance: `OPENQQ_RATE_LIMIT`, `OPENQQ_BYTE_LIMIT`, `OPENQQ_TENANT_CONCURRENCY` and
//! `OPENQQ_MAX_BODY_BYTES`. (API Gateway reads bodies and holds no streams, so the body timeout and
//! stream cap have nothing to bound here.) A bad value stops the cold start with a sentence.

use openqq_adapters::InProcessRateLimiter;
use openqq_api::limit::{ByteQuotaSpec, QuotaSpec};
use openqq_api::{router, AppState, JwtKeys, LimitPolicy, PoolConfig, TenantGuard, TenantLimits};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let secret = std::env::var("OPENQQ_JWT_SECRET").map_err(|_| "OPENQQ_JWT_SECRET must be set")?;
    let settings = Settings::from_env()?;
    let (backends, topics) = openqq_runtime::lambda::backends_from_env().await?;
    let state = AppState {
        log: backends.log,
        store: backends.store,
        objects: backends.objects,
        limiter: Arc::new(InProcessRateLimiter::new()),
        limits: Arc::new(LimitPolicy::new(settings.rate_limit)),
        // OPENQQ_JWT_ISSUER / OPENQQ_JWT_AUDIENCE, when set, are required claims.
        keys: Arc::new(JwtKeys::with_rules(secret.as_bytes(), openqq_api::auth::ClaimRules::from_env())?),
        topics,
        metrics: None,
        max_body_bytes: settings.max_body_bytes,
        live: None,
        tenants: TenantGuard::new(settings.tenants),
        quota: Arc::new(openqq_api::quota::StorageQuota::new(openqq_api::quota::StorageLimits::from_env()?)),
    };
    // Reserved concurrency bounds the pool on Lambda; one request per instance.
    lambda_http::run(router(state, PoolConfig { workers: 1, queue: 0, ..PoolConfig::default() })).await
}

/// The limits this function reads from its environment.
struct Settings {
    rate_limit: openqq_core::Quota,
    max_body_bytes: usize,
    tenants: TenantLimits,
}

impl Settings {
    fn from_env() -> Result<Self, String> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings from `lookup` (the environment, or a test's table); blank values are unset.
    fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let rate_limit = match var("OPENQQ_RATE_LIMIT") {
            Some(v) => v.parse::<QuotaSpec>().map_err(|e| format!("OPENQQ_RATE_LIMIT: {e}"))?.0,
            None => openqq_core::Quota { limit: 100, window: std::time::Duration::from_secs(1) },
        };
        let max_body_bytes = match var("OPENQQ_MAX_BODY_BYTES") {
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("OPENQQ_MAX_BODY_BYTES must be a positive number of bytes, not {v:?}"))?,
            None => openqq_api::DEFAULT_MAX_BODY_BYTES,
        };
        let mut tenants = TenantLimits::default();
        if let Some(v) = var("OPENQQ_BYTE_LIMIT") {
            tenants.bytes = v.parse::<ByteQuotaSpec>().map_err(|e| format!("OPENQQ_BYTE_LIMIT: {e}"))?.0;
        }
        if let Some(v) = var("OPENQQ_TENANT_CONCURRENCY") {
            tenants.concurrency = v
                .trim()
                .parse()
                .map_err(|_| format!("OPENQQ_TENANT_CONCURRENCY must be a number of requests, not {v:?}"))?;
        }
        tenants.check(max_body_bytes)?;
        Ok(Self { rate_limit, max_body_bytes, tenants })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, String> {
        Settings::from_vars(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn limits_come_from_the_environment_with_the_same_defaults_as_openqq_up() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.rate_limit.limit, s.max_body_bytes), (100, openqq_api::DEFAULT_MAX_BODY_BYTES));
        assert_eq!(s.tenants, TenantLimits::default());
        let s = settings(&[("OPENQQ_BYTE_LIMIT", "8MiB/10s"), ("OPENQQ_TENANT_CONCURRENCY", "3")]).unwrap();
        assert_eq!((s.tenants.bytes.limit, s.tenants.concurrency), (8 << 20, 3));
    }

    #[test]
    fn a_bad_value_stops_the_cold_start_with_a_sentence_naming_it() {
        for (name, value) in [
            ("OPENQQ_BYTE_LIMIT", "lots"),
            ("OPENQQ_BYTE_LIMIT", "1KiB/1m"),
            ("OPENQQ_TENANT_CONCURRENCY", "0"),
            ("OPENQQ_TENANT_CONCURRENCY", "many"),
            ("OPENQQ_MAX_BODY_BYTES", "-1"),
            ("OPENQQ_RATE_LIMIT", "fast"),
        ] {
            let err = settings(&[(name, value)]).err().unwrap_or_else(|| panic!("{name}={value} was accepted"));
            assert!(err.contains(name), "{name}={value}: {err}");
        }
    }
}
