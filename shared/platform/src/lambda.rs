//! The `main` of each function on AWS Lambda: JSON logs, [`Settings`] from the environment, the
//! platform built once at cold start, then the Lambda runtime. A bad setting stops the cold start
//! with a sentence naming its variable.
//!
//! With `OPENQQ_DYNAMODB_TABLE` set every function shares one store; with `OPENQQ_KAFKA_BROKERS`
//! or `OPENQQ_MSK_CLUSTER_ARN` the log is Kafka / MSK. Without them the function falls back to the
//! embedded store and log in `OPENQQ_DATA_DIR` (default `/tmp/openqq` on Lambda): right for
//! `cargo lambda watch` on one machine, not for a fleet.

use crate::{Platform, Settings};
use openqq_api::{router, JwtKeys, PoolConfig};
use openqq_core::EventKind;

pub use openqq_runtime::lambda::Error;

/// Where a function on Lambda keeps embedded storage unless `OPENQQ_DATA_DIR` says otherwise.
const LAMBDA_DATA_DIR: &str = "/tmp/openqq";

/// The settings from the environment, with the Lambda default for the data dir.
fn settings() -> Result<Settings, Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let data_dir = std::env::var("OPENQQ_DATA_DIR").unwrap_or_else(|_| LAMBDA_DATA_DIR.to_owned());
    Ok(Settings::from_args(["--data-dir", data_dir.as_str()]).map_err(|e| format!("{e:#}"))?)
}

/// The API function: the router handed to `lambda_http`. Bearer tokens are verified with
/// `OPENQQ_JWT_SECRET`, which must be set.
pub async fn api() -> Result<(), Error> {
    let settings = settings()?;
    // The secret is checked before anything is opened, like every other setting.
    let secret = std::env::var(crate::secret::ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{} must be set: it verifies the bearer tokens", crate::secret::ENV))?;
    let keys = JwtKeys::with_rules(secret.as_bytes(), settings.jwt.rules())
        .map_err(|e| format!("{}: {e}", crate::secret::ENV))?;
    let platform = Platform::build(settings).await.map_err(|e| format!("{e:#}"))?;
    if platform.settings.limiter.redis_url.is_none() && platform.settings.limiter.elasticache_cache.is_none() {
        tracing::warn!("The request limiter is in process: each instance limits on its own. Set OPENQQ_ELASTICACHE_CACHE or OPENQQ_REDIS_URL to share it.");
    }
    // No live stream on Lambda; reserved concurrency bounds the pool: one request per instance.
    let state = platform.api_state(keys, None, false);
    lambda_http::run(router(state, PoolConfig { workers: 1, queue: 0, ..PoolConfig::default() })).await
}

/// A consumer function: the MSK trigger's batches of `kind`'s topic through its handler.
pub async fn consumer(kind: EventKind) -> Result<(), Error> {
    let platform = Platform::build(settings()?).await.map_err(|e| format!("{e:#}"))?;
    openqq_runtime::lambda::serve(platform.handler(kind)?).await
}
