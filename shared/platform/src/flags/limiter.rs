//! The limiter flags of `openqq up`, which are also the environment of the API function on
//! Lambda (`OPENQQ_REDIS_URL`, `OPENQQ_ELASTICACHE_CACHE`, …): whether the per-tenant limiter
//! is in process, in Redis at a URL, or in an ElastiCache cache found by name, and what happens
//! while Redis cannot answer.
//!
//! The values are checked before anything is connected; a bad one stops the process with a
//! sentence naming the setting.

use anyhow::{bail, Context, Result};
use clap::Args;
use openqq_adapters::limiter_choice::{valid_cache_name, MAX_CACHE_NAME_LEN};
use openqq_adapters::{LimiterBackend, LimiterSettings, RedisDownPolicy};
use openqq_core::RateLimiter;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

/// The limiter flags; each has an environment variable too.
#[derive(Args, Clone, Debug)]
pub struct LimiterArgs {
    /// Use Redis for the limiter, e.g. redis://127.0.0.1:6379 (rediss:// for TLS).
    #[arg(long, env = "OPENQQ_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Use this ElastiCache serverless cache or replication group for the limiter, found by name
    /// (AWS_REGION and credentials from the environment) and reached over TLS.
    #[arg(long, env = "OPENQQ_ELASTICACHE_CACHE")]
    pub elasticache_cache: Option<String>,
    /// How long a limiter decision may wait for Redis before the Redis-down policy applies.
    #[arg(long, env = "OPENQQ_REDIS_TIMEOUT", default_value = "50ms", value_parser = humantime::parse_duration)]
    pub redis_timeout: Duration,
    /// While Redis is down, reject with 503 instead of limiting in process.
    #[arg(long, env = "OPENQQ_REDIS_FAIL_CLOSED")]
    pub redis_fail_closed: bool,
    /// API instances sharing the Redis limit; while Redis is down each admits limit ÷ instances.
    #[arg(long, env = "OPENQQ_INSTANCES", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub instances: u32,
}

impl Default for LimiterArgs {
    /// The same values as the flags' defaults: the limiter in process.
    fn default() -> Self {
        Self {
            redis_url: None,
            elasticache_cache: None,
            redis_timeout: Duration::from_millis(50),
            redis_fail_closed: false,
            instances: 1,
        }
    }
}

const REDIS_URL: &str = "--redis-url (OPENQQ_REDIS_URL)";
const ELASTICACHE: &str = "--elasticache-cache (OPENQQ_ELASTICACHE_CACHE)";
const TIMEOUT: &str = "--redis-timeout (OPENQQ_REDIS_TIMEOUT)";
const INSTANCES: &str = "--instances (OPENQQ_INSTANCES)";

/// The longest Redis URL taken.
const MAX_URL_LEN: usize = 2048;
/// The longest `--redis-timeout` taken: the limiter sits in front of every request.
const MAX_TIMEOUT: Duration = Duration::from_secs(10);

/// The limiter settings the flags ask for, checked. Pure: nothing is connected.
pub fn settings(args: &LimiterArgs) -> Result<LimiterSettings> {
    let backend = match (&args.redis_url, &args.elasticache_cache) {
        (Some(_), Some(_)) => bail!("{REDIS_URL} and {ELASTICACHE} both say where the limiter is; give one"),
        (Some(url), None) => {
            check_url(url)?;
            LimiterBackend::Redis { url: url.clone() }
        }
        (None, Some(name)) => {
            check_cache_name(name)?;
            if !cfg!(feature = "elasticache") {
                bail!("{ELASTICACHE} needs an openqq built with the `elasticache` feature");
            }
            LimiterBackend::ElastiCache { name: name.clone() }
        }
        (None, None) => LimiterBackend::InProcess,
    };
    if args.redis_timeout.is_zero() || args.redis_timeout > MAX_TIMEOUT {
        bail!("{TIMEOUT} must be more than 0 and at most {MAX_TIMEOUT:?}, not {:?}", args.redis_timeout);
    }
    let Some(instances) = NonZeroU32::new(args.instances) else {
        bail!("{INSTANCES} must be at least 1");
    };
    let policy =
        if args.redis_fail_closed { RedisDownPolicy::FailClosed } else { RedisDownPolicy::FailOpen { instances } };
    Ok(LimiterSettings { backend, timeout: args.redis_timeout, policy })
}

/// A Redis URL is `redis://` or `rediss://` followed by a host. Its text is never repeated in
/// a message: it may carry a password.
fn check_url(url: &str) -> Result<()> {
    let rest = url.strip_prefix("redis://").or_else(|| url.strip_prefix("rediss://"));
    let has_host = rest.is_some_and(|r| !openqq_adapters::limiter_choice::address(url).is_empty() && !r.is_empty());
    if url.len() > MAX_URL_LEN || !has_host {
        bail!(
            "{REDIS_URL} must be a redis:// or rediss:// (TLS) URL with a host of at most {MAX_URL_LEN} bytes, \
             e.g. redis://127.0.0.1:6379"
        );
    }
    Ok(())
}

/// What ElastiCache accepts as a serverless cache name or replication group id.
fn check_cache_name(name: &str) -> Result<()> {
    if !valid_cache_name(name) {
        bail!(
            "{ELASTICACHE} must be a cache name of 1 to {MAX_CACHE_NAME_LEN} letters, digits or '-' starting with \
             a letter, not {name:?}"
        );
    }
    Ok(())
}

/// The limiter `settings` ask for (`in_process` when no Redis is given), connected. A Redis that
/// cannot be reached, or an ElastiCache name that matches no cache, stops start-up with a
/// sentence naming the setting.
pub async fn build(settings: &LimiterSettings, in_process: Arc<dyn RateLimiter>) -> Result<Arc<dyn RateLimiter>> {
    let setting = match &settings.backend {
        LimiterBackend::InProcess => return Ok(in_process),
        LimiterBackend::Redis { .. } => REDIS_URL,
        LimiterBackend::ElastiCache { .. } => ELASTICACHE,
    };
    let limiter = openqq_adapters::build_limiter(settings, in_process)
        .await
        .with_context(|| format!("the limiter of {setting} is not usable"))?;
    tracing::info!(policy = ?settings.policy, "The per-tenant limiter is shared through Redis.");
    Ok(limiter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        limiter: LimiterArgs,
    }

    fn parse(args: &[&str]) -> LimiterArgs {
        Cli::try_parse_from(std::iter::once("openqq").chain(args.iter().copied())).unwrap().limiter
    }

    #[test]
    fn the_defaults_keep_the_limiter_in_process_and_match_the_flags() {
        let flags = parse(&[]);
        let default = LimiterArgs::default();
        assert_eq!(
            (flags.redis_timeout, flags.instances, flags.redis_fail_closed),
            (default.redis_timeout, default.instances, default.redis_fail_closed)
        );
        let s = settings(&default).unwrap();
        assert_eq!(s.backend, LimiterBackend::InProcess);
        assert_eq!(s.policy, RedisDownPolicy::FailOpen { instances: NonZeroU32::MIN });
    }

    #[test]
    fn a_redis_url_with_its_policy_is_taken() {
        let s = settings(&parse(&["--redis-url", "rediss://cache:6380", "--redis-fail-closed"])).unwrap();
        assert_eq!(s.backend, LimiterBackend::Redis { url: "rediss://cache:6380".into() });
        assert_eq!(s.policy, RedisDownPolicy::FailClosed);
        let s = settings(&parse(&["--redis-url", "redis://127.0.0.1:6379/0", "--instances", "4"])).unwrap();
        assert_eq!(s.policy, RedisDownPolicy::FailOpen { instances: NonZeroU32::new(4).unwrap() });
    }

    #[cfg(feature = "elasticache")]
    #[test]
    fn an_elasticache_name_is_taken() {
        let s = settings(&parse(&["--elasticache-cache", "openqq-limiter"])).unwrap();
        assert_eq!(s.backend, LimiterBackend::ElastiCache { name: "openqq-limiter".into() });
    }

    #[cfg(not(feature = "elasticache"))]
    #[test]
    fn an_elasticache_name_without_the_feature_is_refused_naming_the_setting() {
        let err = settings(&parse(&["--elasticache-cache", "openqq-limiter"])).unwrap_err().to_string();
        assert!(err.contains("--elasticache-cache") && err.contains("feature"), "{err}");
    }

    #[test]
    fn a_bad_value_is_refused_with_a_sentence_naming_the_setting() {
        let long_url = format!("redis://{}", "h".repeat(MAX_URL_LEN));
        for (args, setting) in [
            (vec!["--redis-url", "127.0.0.1:6379"], "--redis-url"),
            (vec!["--redis-url", "http://127.0.0.1:6379"], "--redis-url"),
            (vec!["--redis-url", "redis://"], "--redis-url"),
            (vec!["--redis-url", long_url.as_str()], "--redis-url"),
            (vec!["--elasticache-cache", ""], "--elasticache-cache"),
            (vec!["--elasticache-cache", "1cache"], "--elasticache-cache"),
            (vec!["--elasticache-cache", "has space"], "--elasticache-cache"),
            (vec!["--elasticache-cache", "c".repeat(41).leak()], "--elasticache-cache"),
            (vec!["--redis-url", "redis://h:1", "--elasticache-cache", "c"], "give one"),
            (vec!["--redis-timeout", "0s"], "--redis-timeout"),
            (vec!["--redis-timeout", "1m"], "--redis-timeout"),
        ] {
            let message = settings(&parse(&args)).expect_err("refused").to_string();
            assert!(message.contains(setting), "{args:?}: {message}");
        }
    }

    #[test]
    fn no_instances_is_refused_by_the_flag_and_by_the_settings() {
        let cli = Cli::try_parse_from(["openqq", "--instances", "0"]);
        assert!(cli.err().unwrap().to_string().contains("--instances"));
        let message = settings(&LimiterArgs { instances: 0, ..LimiterArgs::default() }).unwrap_err().to_string();
        assert!(message.contains("--instances"), "{message}");
    }

    #[test]
    fn a_refused_redis_url_is_never_repeated_in_the_message() {
        let message = settings(&parse(&["--redis-url", "http://:hunter2@cache:6379"])).unwrap_err().to_string();
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[tokio::test]
    async fn an_unreachable_redis_does_not_stop_start_up_and_the_redis_down_policy_answers() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("redis://127.0.0.1:{port}");
        let s = settings(&parse(&["--redis-url", &url])).unwrap();
        let local: Arc<dyn RateLimiter> = Arc::new(openqq_adapters::InProcessRateLimiter::new());
        let limiter = build(&s, local).await.expect("a Redis that is down is an outage, not a bad setting");
        let quota = openqq_core::Quota { limit: 5, window: std::time::Duration::from_secs(1) };
        let decision = limiter.check(&openqq_core::TenantId::parse("acme").unwrap(), quota).await;
        assert!(decision.is_ok_and(|d| d.allowed), "failing open, in process");
    }
}
