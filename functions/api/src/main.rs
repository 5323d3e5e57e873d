//! The API function on AWS Lambda: builds its clients once at cold start and hands the router
//! to `lambda_http`.
//!
//! Backends come from the environment through the same settings as the local runner. Until the
//! cloud adapters land (DynamoDB, MSK), the only backend is the embedded one in
//! `OPENQQ_DATA_DIR`, which is useful for `cargo lambda watch` but not for a fleet of Lambdas.

use openqq_adapters::{Durability, EmbeddedDesignStore, EmbeddedEventLog, InProcessRateLimiter};
use openqq_api::{router, AppState, JwtKeys, LimitPolicy, PoolConfig};
use openqq_core::{Quota, Topics};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let dir = PathBuf::from(std::env::var("OPENQQ_DATA_DIR").unwrap_or_else(|_| "/tmp/openqq".into()));
    std::fs::create_dir_all(&dir)?;
    let secret = std::env::var("OPENQQ_JWT_SECRET").map_err(|_| "OPENQQ_JWT_SECRET must be set")?;
    let partitions = std::env::var("OPENQQ_PARTITIONS").ok().and_then(|p| p.parse().ok()).unwrap_or(12);
    let log = Arc::new(EmbeddedEventLog::open(&dir, partitions, Durability::Process)?);
    let state = AppState {
        log,
        store: Arc::new(EmbeddedDesignStore::open(&dir, Durability::Process)?),
        limiter: Arc::new(InProcessRateLimiter::new()),
        limits: Arc::new(LimitPolicy::new(Quota { limit: 100, window: Duration::from_secs(1) })),
        keys: Arc::new(JwtKeys::from_secret(secret.as_bytes())?),
        topics: Topics::new(std::env::var("OPENQQ_TOPIC_PREFIX").unwrap_or_default()),
        metrics: None,
        max_body_bytes: openqq_api::DEFAULT_MAX_BODY_BYTES,
        live: None,
    };
    // Reserved concurrency bounds the pool on Lambda; one request per instance.
    lambda_http::run(router(state, PoolConfig { workers: 1, queue: 0, simulated_downstream: None })).await
}
