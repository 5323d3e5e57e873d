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
use openqq_core::ports::{PortError, PortResult};
use openqq_core::{Decision, Meter, Quota, RateLimiter, TenantId};
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
    let primary: Arc<dyn RateLimiter> = match RedisRateLimiter::connect(url, settings.timeout).await {
        Ok(redis) => Arc::new(redis),
        // Down rather than misconfigured: start under the Redis-down policy, as a running
        // process would, so that a restart during an outage does not take the API down with it.
        Err(PortError::Unavailable(e)) => {
            tracing::warn!(
                redis = address(url),
                error = %e,
                "Redis did not answer at start-up; applying the Redis-down policy until it does."
            );
            Arc::new(LateRedis::new(url, settings.timeout))
        }
        Err(source) => return Err(LimiterChoiceError::Redis { at, source }),
    };
    Ok(Arc::new(FallbackRateLimiter::new(primary, settings.policy)))
}

/// The Redis limiter of a process that started while Redis was unreachable: a decision connects
/// (one attempt at a time, at most one a second) and is `Unavailable` until that succeeds, so the
/// Redis-down policy answers meanwhile.
struct LateRedis {
    /// May carry a password: never logged.
    url: String,
    timeout: Duration,
    connected: tokio::sync::OnceCell<RedisRateLimiter>,
    last_attempt: tokio::sync::Mutex<Option<std::time::Instant>>,
}

/// How often a process that started without Redis tries to connect.
const LATE_CONNECT_EVERY: Duration = Duration::from_secs(1);

impl LateRedis {
    fn new(url: &str, timeout: Duration) -> Self {
        Self {
            url: url.to_owned(),
            timeout,
            connected: tokio::sync::OnceCell::new(),
            last_attempt: tokio::sync::Mutex::new(None),
        }
    }

    async fn redis(&self) -> PortResult<&RedisRateLimiter> {
        if let Some(redis) = self.connected.get() {
            return Ok(redis);
        }
        let not_yet = || PortError::Unavailable("redis has not answered since start-up".into());
        let Ok(mut last) = self.last_attempt.try_lock() else { return Err(not_yet()) };
        if last.is_some_and(|at| at.elapsed() < LATE_CONNECT_EVERY) {
            return Err(not_yet());
        }
        *last = Some(std::time::Instant::now());
        let redis = RedisRateLimiter::connect(&self.url, self.timeout).await?;
        tracing::info!(redis = address(&self.url), "Redis answers; the limiter is shared through it again.");
        Ok(self.connected.get_or_init(|| async { redis }).await)
    }
}

#[async_trait::async_trait]
impl RateLimiter for LateRedis {
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision> {
        self.redis().await?.check(tenant, quota).await
    }

    async fn check_weighted(&self, tenant: &TenantId, meter: Meter, quota: Quota, cost: u32) -> PortResult<Decision> {
        self.redis().await?.check_weighted(tenant, meter, quota, cost).await
    }
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
    async fn an_unreachable_redis_starts_under_the_redis_down_policy_and_never_shows_its_password() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("redis://:hunter2@127.0.0.1:{port}");
        let local: Arc<dyn RateLimiter> = Arc::new(InProcessRateLimiter::new());
        let mut closed = settings(LimiterBackend::Redis { url });
        closed.policy = RedisDownPolicy::FailClosed;
        let limiter = build_limiter(&closed, local).await.expect("a Redis that is down does not stop start-up");
        let quota = Quota { limit: 10, window: Duration::from_secs(1) };
        let err = limiter.check(&TenantId::parse("acme").unwrap(), quota).await.unwrap_err();
        assert!(matches!(err, PortError::Unavailable(_)), "fail-closed while Redis is down: {err}");
        assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
    }

    #[cfg(not(feature = "elasticache"))]
    #[tokio::test]
    async fn an_elasticache_name_without_the_feature_is_refused() {
        let local: Arc<dyn RateLimiter> = Arc::new(InProcessRateLimiter::new());
        let err = build_limiter(&settings(LimiterBackend::ElastiCache { name: "c".into() }), local).await;
        assert!(matches!(err, Err(LimiterChoiceError::NotBuilt)));
    }
}
