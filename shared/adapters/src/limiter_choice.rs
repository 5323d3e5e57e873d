//! Which per-tenant limiter a process uses, built in one place for `openqq up` and the API
//! function on Lambda alike:
//!
//! - **in process** (no Redis given): the instance's own limiter, exact for one instance;
//! - **Redis at a URL** (`redis://` or `rediss://` for TLS);
//! - **ElastiCache by name** (cargo feature `elasticache`): the name resolved to its TLS
//!   endpoint ([`crate::elasticache`]), then as a Redis URL.
//!
//! Redis and ElastiCache are wrapped in the Redis-down policy ([`FallbackRateLimiter`]): fail
//! open to an in-process share of `limit ÷ instances`, or fail closed.

use crate::fallback_limiter::{FallbackRateLimiter, RedisDownPolicy};
use crate::redis_limiter::RedisRateLimiter;
use openqq_core::ports::PortError;
use openqq_core::RateLimiter;
use std::sync::Arc;
use std::time::Duration;

/// Where the limiter's state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimiterBackend {
    /// This process only.
    InProcess,
    /// Redis at this URL (`redis://…` or `rediss://…`). May carry a password: never logged.
    Redis { url: String },
    /// The ElastiCache serverless cache or replication group of this name, over TLS.
    ElastiCache { name: String },
}

/// Everything that decides the limiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterSettings {
    pub backend: LimiterBackend,
    /// Bound on connecting and on every decision; after it the Redis-down policy applies.
    pub timeout: Duration,
    /// What happens while Redis cannot answer.
    pub policy: RedisDownPolicy,
}

#[derive(Debug, thiserror::Error)]
pub enum LimiterChoiceError {
    /// Redis could not be reached or refused the connection (the URL is left out: it may carry
    /// a password).
    #[error("connecting to Redis{at}")]
    Redis {
        /// ` at HOST:PORT`, from the URL without its credentials, or empty.
        at: String,
        #[source]
        source: PortError,
    },
    #[cfg(feature = "elasticache")]
    #[error(transparent)]
    ElastiCache(#[from] crate::elasticache::ElastiCacheError),
    /// An ElastiCache name was given to a build without the `elasticache` feature.
    #[error("the limiter on ElastiCache needs a build with the `elasticache` feature")]
    NotBuilt,
}

/// The limiter `settings` ask for; `in_process` is used as it is when no Redis is given. For
/// ElastiCache the lookup uses the AWS settings of the environment (`AWS_REGION`,
/// `AWS_ENDPOINT_URL`, credentials …).
pub async fn build_limiter(
    settings: &LimiterSettings,
    in_process: Arc<dyn RateLimiter>,
) -> Result<Arc<dyn RateLimiter>, LimiterChoiceError> {
    match &settings.backend {
        LimiterBackend::InProcess => Ok(in_process),
        LimiterBackend::Redis { url } => redis(url, settings).await,
        #[cfg(feature = "elasticache")]
        LimiterBackend::ElastiCache { .. } => {
            let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
            build_limiter_with_aws(settings, in_process, &sdk).await
        }
        #[cfg(not(feature = "elasticache"))]
        LimiterBackend::ElastiCache { .. } => Err(LimiterChoiceError::NotBuilt),
    }
}

/// [`build_limiter`] with the AWS settings the caller chose (region, endpoint, credentials)
/// for the ElastiCache lookup.
#[cfg(feature = "elasticache")]
pub async fn build_limiter_with_aws(
    settings: &LimiterSettings,
    in_process: Arc<dyn RateLimiter>,
    sdk: &aws_config::SdkConfig,
) -> Result<Arc<dyn RateLimiter>, LimiterChoiceError> {
    match &settings.backend {
        LimiterBackend::ElastiCache { name } => {
            let url = crate::elasticache::redis_url(sdk, name).await?;
            tracing::info!(cache = name, endpoint = %address(&url), "The limiter is on ElastiCache.");
            redis(&url, settings).await
        }
        LimiterBackend::Redis { url } => redis(url, settings).await,
        LimiterBackend::InProcess => Ok(in_process),
    }
}

/// The Redis limiter at `url` behind the Redis-down policy.
async fn redis(url: &str, settings: &LimiterSettings) -> Result<Arc<dyn RateLimiter>, LimiterChoiceError> {
    let at = match address(url) {
        "" => String::new(),
        a => format!(" at {a}"),
    };
    let redis = RedisRateLimiter::connect(url, settings.timeout)
        .await
        .map_err(|source| LimiterChoiceError::Redis { at, source })?;
    Ok(Arc::new(FallbackRateLimiter::new(Arc::new(redis), settings.policy)))
}

/// The longest ElastiCache cache name (serverless caches and replication groups alike).
pub const MAX_CACHE_NAME_LEN: usize = 40;

/// What ElastiCache accepts as a serverless cache name or replication group id: 1 to
/// [`MAX_CACHE_NAME_LEN`] letters, digits or '-', starting with a letter.
pub fn valid_cache_name(name: &str) -> bool {
    (1..=MAX_CACHE_NAME_LEN).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `HOST:PORT` of a Redis URL without scheme, credentials, database or query; empty when the
/// URL has no `://`. Safe to log.
pub fn address(url: &str) -> &str {
    let Some((_, rest)) = url.split_once("://") else { return "" };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map_or(authority, |(_, host)| host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InProcessRateLimiter;
    use std::num::NonZeroU32;

    fn settings(backend: LimiterBackend) -> LimiterSettings {
        LimiterSettings {
            backend,
            timeout: Duration::from_millis(200),
            policy: RedisDownPolicy::FailOpen { instances: NonZeroU32::MIN },
        }
    }

    #[test]
    fn the_address_of_a_url_leaves_credentials_and_database_out() {
        assert_eq!(address("redis://127.0.0.1:6379"), "127.0.0.1:6379");
        assert_eq!(address("rediss://user:s3cret@cache.example:6380/2?x=1"), "cache.example:6380");
        assert_eq!(address("rediss://:p@ss@h:1"), "h:1");
        assert_eq!(address("not a url"), "");
    }

    #[tokio::test]
    async fn no_redis_keeps_the_in_process_limiter_itself() {
        let local: Arc<dyn RateLimiter> = Arc::new(InProcessRateLimiter::new());
        let built = build_limiter(&settings(LimiterBackend::InProcess), local.clone()).await.unwrap();
        assert!(Arc::ptr_eq(&built, &local));
    }

    #[tokio::test]
    async fn an_unreachable_redis_names_its_address_but_never_its_password() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("redis://:hunter2@127.0.0.1:{port}");
        let local: Arc<dyn RateLimiter> = Arc::new(InProcessRateLimiter::new());
        let err = build_limiter(&settings(LimiterBackend::Redis { url }), local).await.err().unwrap();
        let chain = format!("{err} / {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains(&format!("127.0.0.1:{port}")), "{chain}");
        assert!(!chain.contains("hunter2"), "{chain}");
    }

    #[cfg(not(feature = "elasticache"))]
    #[tokio::test]
    async fn an_elasticache_name_without_the_feature_is_refused() {
        let local: Arc<dyn RateLimiter> = Arc::new(InProcessRateLimiter::new());
        let err = build_limiter(&settings(LimiterBackend::ElastiCache { name: "c".into() }), local).await;
        assert!(matches!(err, Err(LimiterChoiceError::NotBuilt)));
    }
}
