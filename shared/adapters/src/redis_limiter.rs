//! The per-tenant sliding-window limiter on Redis (ElastiCache on AWS, `redis-server` on one
//! machine), with the semantics of [`InProcessRateLimiter`](crate::InProcessRateLimiter): an exact
//! sliding log per tenant, rejections not recorded, idle tenants forgotten.
//!
//! Each decision is one atomic Lua script ([`SCRIPT`], `redis_limiter.lua`) that reads the
//! server's clock, drops expired admissions, counts, and adds the request only if under the limit.
//! Every API instance therefore shares one clock and one log per tenant, and two instances can
//! never both take the last slot.
//!
//! Weighted checks (bytes per window) run a second script ([`WEIGHTED_SCRIPT`],
//! `redis_limiter_weighted.lua`) over a second log per tenant whose members carry their cost,
//! with the running total in a key beside it; both keys share the tenant's hash tag.
//!
//! Scripts are sent by hash (EVALSHA). Only a `NOSCRIPT` answer (a restarted or flushed
//! Redis, a failover to a replica that never saw it) makes us send it in full, once. A timeout is
//! never retried: the script may have run, and running it again would count the request twice.
//! Every failure to reach Redis is [`PortError::Unavailable`], which the
//! [`FallbackRateLimiter`](crate::fallback_limiter::FallbackRateLimiter) turns into the
//! documented Redis-down policy.

use async_trait::async_trait;
use openqq_core::ports::{PortError, PortResult};
use openqq_core::{Decision, Meter, Quota, RateLimiter, TenantId};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, ServerErrorKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The decision script. Public so benchmarks can run exactly this script through
/// `redis-benchmark` and tests can derive broken variants from it.
pub const SCRIPT: &str = include_str!("redis_limiter.lua");

/// The weighted decision script (see [`RateLimiter::check_weighted`]).
pub const WEIGHTED_SCRIPT: &str = include_str!("redis_limiter_weighted.lua");

/// How long a lost connection is retried before each wait gives up; calls in between fail fast
/// with `Unavailable` once their own timeout passes.
const RECONNECT_MAX_DELAY: Duration = Duration::from_millis(500);

pub struct RedisRateLimiter {
    /// One multiplexed connection that reconnects by itself. Clones share the socket, so
    /// concurrent decisions pipeline instead of waiting for each other's round trip.
    conn: ConnectionManager,
    /// The script body, sent only after a `NOSCRIPT` answer.
    script: &'static str,
    /// SHA1 of `script`, what EVALSHA sends on every decision.
    sha: String,
    /// SHA1 of [`WEIGHTED_SCRIPT`], for weighted decisions.
    weighted_sha: String,
    /// Upper bound on one decision, reload and reconnect wait included. Short on purpose: the
    /// limiter sits in front of every request, and the fallback policy needs to act quickly.
    timeout: Duration,
    /// How often the script had to be sent in full. Counted so tests can show the reload path
    /// ran, and operators can see Redis losing its script cache.
    reloads: AtomicU64,
}

impl RedisRateLimiter {
    /// Connects to `url` (`redis://host:port[/db]`, or `rediss://` for TLS with a certificate
    /// the system trusts, as ElastiCache's are). `timeout` bounds the connection attempt
    /// and every decision. Fails with `Invalid` for a malformed URL and `Unavailable` when Redis
    /// cannot be reached, so a start-up check can tell the two apart.
    pub async fn connect(url: &str, timeout: Duration) -> PortResult<Self> {
        Self::connect_with_script(url, timeout, SCRIPT).await
    }

    /// Like [`connect`](Self::connect), with another decision script that takes the same
    /// arguments and returns the same reply. Exists so tests can prove the conformance checks
    /// catch a broken script; production code uses `connect`.
    #[doc(hidden)]
    pub async fn connect_with_script(url: &str, timeout: Duration, script: &'static str) -> PortResult<Self> {
        let client = redis::Client::open(url)
            .map_err(|e| PortError::from(crate::SettingsError::caused_by(format!("redis url: {e}"), e)))?;
        Self::connect_client(client, timeout, script).await
    }

    /// Like [`connect`](Self::connect) for a `rediss://` URL whose server certificate is signed
    /// by `root_certificate_pem` (a private CA, or a test's self-signed certificate) instead of
    /// a CA the system trusts. ElastiCache's certificates need no such root.
    pub async fn connect_trusting(url: &str, timeout: Duration, root_certificate_pem: &[u8]) -> PortResult<Self> {
        let certificates = redis::TlsCertificates { client_tls: None, root_cert: Some(root_certificate_pem.to_vec()) };
        let client = redis::Client::build_with_tls(url, certificates).map_err(|e| {
            PortError::from(crate::SettingsError::caused_by(format!("redis url or root certificate: {e}"), e))
        })?;
        Self::connect_client(client, timeout, SCRIPT).await
    }

    async fn connect_client(client: redis::Client, timeout: Duration, script: &'static str) -> PortResult<Self> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_max_delay(RECONNECT_MAX_DELAY);
        let conn = tokio::time::timeout(timeout, ConnectionManager::new_with_config(client, config))
            .await
            .map_err(|_| PortError::Unavailable(format!("redis did not answer within {timeout:?}").into()))?
            .map_err(classify)?;
        let sha = redis::Script::new(script).get_hash().to_owned();
        let weighted_sha = redis::Script::new(WEIGHTED_SCRIPT).get_hash().to_owned();
        Ok(Self { conn, script, sha, weighted_sha, timeout, reloads: AtomicU64::new(0) })
    }

    /// The key of a tenant's sliding log. The braces are a cluster hash tag, so any key added
    /// for the tenant later lands in the same slot and one script can still touch them all.
    pub fn key(tenant: &TenantId) -> String {
        format!("rl:{{{tenant}}}")
    }

    /// The keys of a tenant's weighted log of `meter` and of the running total of its costs;
    /// same hash tag. The byte meter keeps the names it had before there were other meters.
    pub fn weighted_keys(tenant: &TenantId, meter: Meter) -> [String; 2] {
        let log = match meter {
            Meter::Bytes => format!("rlw:{{{tenant}}}"),
            other => format!("rlw:{{{tenant}}}:{}", other.as_str()),
        };
        let sum = format!("{log}:sum");
        [log, sum]
    }

    /// How many times a script was sent in full after a `NOSCRIPT` answer.
    pub fn script_reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// One round trip: EVALSHA, and only on `NOSCRIPT` one EVAL with the full body (which also
    /// caches it again). Any other failure, a timeout above all, is returned as it is.
    async fn eval(&self, script: &str, sha: &str, keys: &[String], args: &[u64]) -> Result<Reply, RedisError> {
        let mut conn = self.conn.clone();
        let mut by_hash = redis::cmd("EVALSHA");
        by_hash.arg(sha).arg(keys.len()).arg(keys).arg(args);
        match by_hash.query_async(&mut conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(sha, "Redis did not know a limiter script; sending it in full.");
                redis::cmd("EVAL").arg(script).arg(keys.len()).arg(keys).arg(args).query_async(&mut conn).await
            }
            other => other,
        }
    }

    /// Runs one decision within the timeout and classifies what went wrong.
    async fn decide(
        &self,
        script: &str,
        sha: &str,
        keys: &[String],
        args: &[u64],
        quota: Quota,
    ) -> PortResult<Decision> {
        match tokio::time::timeout(self.timeout, self.eval(script, sha, keys, args)).await {
            Ok(Ok(reply)) => Ok(decision(quota, reply)),
            Ok(Err(e)) => Err(classify(e)),
            Err(_) => {
                Err(PortError::Unavailable(format!("redis limiter did not answer within {:?}", self.timeout).into()))
            }
        }
    }
}

/// The script's reply: `{allowed, count, now_us, reset_us}`.
type Reply = (i64, i64, i64, i64);

/// Turns the script's reply into the port's decision.
fn decision(quota: Quota, (allowed, count, now_us, reset_us): Reply) -> Decision {
    Decision {
        allowed: allowed == 1,
        limit: quota.limit,
        remaining: quota.limit.saturating_sub(u32::try_from(count).unwrap_or(u32::MAX)),
        reset: Duration::from_micros(reset_us.max(0) as u64),
        now_micros: now_us.max(0) as u64,
    }
}

/// Classifies a Redis error. Not reaching Redis, or Redis being busy, failing over or read-only,
/// is `Unavailable` (retriable: the Redis-down policy applies). A reply we cannot use (a script
/// error, a key of the wrong type, a denied command) is a bug or a misconfiguration that retrying
/// will not fix, so it stays permanent and loud.
fn classify(e: RedisError) -> PortError {
    let permanent = matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::ResponseError | ServerErrorKind::NoPerm)
            | ErrorKind::AuthenticationFailed
            | ErrorKind::InvalidClientConfig
            | ErrorKind::UnexpectedReturnType
            | ErrorKind::Parse
    );
    if permanent {
        PortError::backend(format!("redis limiter: {e}"), false, e)
    } else {
        PortError::unavailable(format!("redis limiter: {e}"), e)
    }
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision> {
        let keys = [Self::key(tenant)];
        self.decide(self.script, &self.sha, &keys, &[u64::from(quota.limit), window_us(quota)], quota).await
    }

    async fn check_weighted(&self, tenant: &TenantId, meter: Meter, quota: Quota, cost: u32) -> PortResult<Decision> {
        let keys = Self::weighted_keys(tenant, meter);
        let args = [u64::from(quota.limit), window_us(quota), u64::from(cost)];
        self.decide(WEIGHTED_SCRIPT, &self.weighted_sha, &keys, &args, quota).await
    }
}

fn window_us(quota: Quota) -> u64 {
    (quota.window.as_micros().max(1)).min(i64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_hash_tagged_by_tenant() {
        let tenant = TenantId::parse("acme-1").unwrap();
        assert_eq!(RedisRateLimiter::key(&tenant), "rl:{acme-1}");
        assert_eq!(RedisRateLimiter::weighted_keys(&tenant, Meter::Bytes), ["rlw:{acme-1}", "rlw:{acme-1}:sum"]);
        assert_eq!(
            RedisRateLimiter::weighted_keys(&tenant, Meter::BatchItems),
            ["rlw:{acme-1}:batch_items", "rlw:{acme-1}:batch_items:sum"]
        );
    }

    #[test]
    fn the_reply_becomes_a_decision_with_what_the_headers_need() {
        let quota = Quota { limit: 10, window: Duration::from_secs(1) };
        let d = decision(quota, (0, 10, 1_700_000_000_000_001, 250_000));
        assert_eq!(
            d,
            Decision {
                allowed: false,
                limit: 10,
                remaining: 0,
                reset: Duration::from_millis(250),
                now_micros: 1_700_000_000_000_001
            }
        );
        assert_eq!(decision(quota, (1, 3, 5, 7)).remaining, 7);
    }

    #[test]
    fn the_script_formats_members_as_integers_never_with_tostring() {
        let code: Vec<&str> = SCRIPT.lines().filter(|l| !l.trim_start().starts_with("--")).collect();
        assert!(!code.iter().any(|l| l.contains("tostring(")), "tostring prints %.14g and makes members collide");
        assert!(SCRIPT.contains("redis.call('TIME')"), "the server clock decides");
        let code: Vec<&str> = WEIGHTED_SCRIPT.lines().filter(|l| !l.trim_start().starts_with("--")).collect();
        assert!(!code.iter().any(|l| l.contains("tostring(")));
        assert!(WEIGHTED_SCRIPT.contains("redis.call('TIME')"));
    }

    #[test]
    fn unreachable_redis_is_retriable_and_a_script_error_is_not() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(matches!(classify(io), PortError::Unavailable(_)));
        let script = RedisError::from((ErrorKind::Server(ServerErrorKind::ResponseError), "ERR user_script:1: boom"));
        assert!(!classify(script).is_retriable());
        let loading = RedisError::from((ErrorKind::Server(ServerErrorKind::BusyLoading), "LOADING"));
        assert!(classify(loading).is_retriable());
    }

    #[test]
    fn a_redis_error_is_kept_as_the_source_of_the_port_error() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let err = classify(io);
        let source = std::error::Error::source(&err).expect("the cause is kept");
        assert!(source.downcast_ref::<RedisError>().is_some_and(|e| e.is_connection_refusal()), "{source:?}");
    }
}
