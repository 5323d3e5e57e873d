//! The API function on AWS Lambda: builds its clients once at cold start and hands the router
//! to `lambda_http`.
//!
//! Backends come from the environment through the same settings as the consumer functions
//! (`openqq_runtime::lambda::backends_from_env`): the event log on Kafka / MSK with
//! `OPENQQ_KAFKA_BROKERS` or `OPENQQ_MSK_CLUSTER_ARN`, else embedded. Until the DynamoDB adapter
//! lands, the store is the embedded one in `OPENQQ_DATA_DIR`, which is useful for `cargo lambda
//! watch` but not for a fleet of Lambdas.

use openqq_adapters::InProcessRateLimiter;
use openqq_api::{router, AppState, JwtKeys, LimitPolicy, PoolConfig};
use openqq_core::Quota;
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let secret = std::env::var("OPENQQ_JWT_SECRET").map_err(|_| "OPENQQ_JWT_SECRET must be set")?;
    let (backends, topics) = openqq_runtime::lambda::backends_from_env().await?;
    let state = AppState {
        log: backends.log,
        store: backends.store,
        limiter: Arc::new(InProcessRateLimiter::new()),
        limits: Arc::new(LimitPolicy::new(Quota { limit: 100, window: Duration::from_secs(1) })),
        keys: Arc::new(JwtKeys::from_secret(secret.as_bytes())?),
        topics,
        metrics: None,
        max_body_bytes: openqq_api::DEFAULT_MAX_BODY_BYTES,
        live: None,
    };
    // Reserved concurrency bounds the pool on Lambda; one request per instance.
    lambda_http::run(router(state, PoolConfig { workers: 1, queue: 0, simulated_downstream: None })).await
}
