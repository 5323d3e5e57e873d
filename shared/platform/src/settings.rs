//! The platform's settings: one typed struct, read from flags by `openqq up` and from the
//! environment by each function on Lambda. Every setting `--some-name` is also the variable
//! `OPENQQ_SOME_NAME` (a test holds every one to that rule), so a deployment template and a
//! local command line speak the same language.
//!
//! [`Settings::check`] looks at every value before anything is opened or connected; a bad one
//! stops start-up (or the cold start) with a sentence naming the setting.

use clap::{Args, Parser};
use openqq_api::limit::{ByteQuotaSpec, QuotaSpec};
use openqq_api::quota::StorageLimits;
use openqq_api::TenantLimits;
use std::path::PathBuf;
use std::time::Duration;

/// Everything the platform is built from, the same for `openqq up` and the Lambda functions.
/// (No `Debug`: the Kafka settings hold a password.)
#[derive(Args, Clone)]
pub struct Settings {
    /// Where the embedded log, store, objects and local secret live.
    #[arg(long, env = "OPENQQ_DATA_DIR", default_value = ".openqq")]
    pub data_dir: PathBuf,
    /// Partitions per topic; fixed for the life of a data dir.
    #[arg(long, env = "OPENQQ_PARTITIONS", default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub partitions: u32,
    /// Topic name prefix; consumer groups carry it too.
    #[arg(long, env = "OPENQQ_TOPIC_PREFIX", default_value = "")]
    pub topic_prefix: String,
    /// How long one design's validation may take; past it the design fails with a
    /// VALIDATION_BUDGET_EXCEEDED finding instead of holding its partition.
    #[arg(long, env = openqq_validation::BUDGET_ENV, default_value = "5s", value_parser = openqq_validation::parse_budget)]
    pub validation_budget: Duration,
    /// How long the HDL tools may run for one revision given as source (synthesis, its
    /// testbenches and its equivalence check together; each run at most 30 s of it).
    #[arg(long, env = "OPENQQ_SYNTHESIS_BUDGET", default_value = "120s", value_parser = humantime::parse_duration)]
    pub synthesis_budget: Duration,
    /// Items of one batch on their way through the batch lane at once: another tenant's batch on
    /// the same partition waits behind at most this many of a tenant's items.
    #[arg(long, env = "OPENQQ_BATCH_IN_FLIGHT", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_in_flight: u32,
    /// `on`: batch items travel on the batch lane's own topics with consumers of their own, so
    /// interactive designs never queue behind them. `off` sends them through the interactive
    /// topics: only for measuring what the lane is worth (the batch benchmark), never for
    /// production.
    #[arg(long, env = "OPENQQ_BATCH_LANE", value_enum, default_value = "on")]
    pub batch_lane: Bulkheads,
    /// `on`: designs to be written by a model run in a lane of their own (`generation.requested`,
    /// the generation function), so one tenant's burst of slow model calls never holds up source
    /// jobs. `off` sends them through the synthesis lane beside source jobs: only for measuring
    /// what the lane is worth (the overload benchmark), never for production.
    #[arg(long, env = "OPENQQ_BULKHEADS", value_enum, default_value = "on")]
    pub bulkheads: Bulkheads,
    /// Default per-tenant limit, COUNT/WINDOW.
    #[arg(long, env = "OPENQQ_RATE_LIMIT", default_value = "100/1s")]
    pub rate_limit: QuotaSpec,
    /// Per-tenant overrides, one `TENANT COUNT/WINDOW` per line; reloaded when the file changes.
    #[arg(long, env = "OPENQQ_RATE_LIMITS")]
    pub rate_limits: Option<PathBuf>,
    #[command(flatten)]
    pub limiter: LimiterArgs,
    /// How long one webhook delivery attempt may take (connect, send, answer).
    #[arg(long, env = "OPENQQ_WEBHOOK_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub webhook_timeout: Duration,
    /// The waits between a webhook delivery's attempts, comma separated (one attempt more than
    /// waits; each wait ±20 % jitter). After the last attempt the delivery is dead.
    #[arg(long, env = "OPENQQ_WEBHOOK_RETRY_DELAYS", default_value = "5s,1m,5m,30m,1h,3h,8h", value_parser = parse_delays)]
    pub webhook_retry_delays: Delays,
    /// Lets webhooks target private, loopback and link-local addresses (local development
    /// only: on a shared deployment it lets tenants reach internal services).
    #[arg(long, env = "OPENQQ_WEBHOOKS_ALLOW_PRIVATE")]
    pub webhooks_allow_private: bool,
    /// Largest request body, in bytes.
    #[arg(long, env = "OPENQQ_MAX_BODY_BYTES", default_value_t = openqq_api::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// How long a request body may take to arrive in full; 408 after it.
    #[arg(long, env = "OPENQQ_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub body_timeout: Duration,
    /// Requests of one tenant in progress at once (body being read, queued or running); 429 above.
    #[arg(long, env = "OPENQQ_TENANT_CONCURRENCY", default_value_t = openqq_api::tenant_guard::DEFAULT_CONCURRENCY)]
    pub tenant_concurrency: usize,
    /// Event streams (`GET /v1/events/stream`) one tenant may hold open; 429 above.
    #[arg(long, env = "OPENQQ_TENANT_STREAMS", default_value_t = openqq_api::tenant_guard::DEFAULT_STREAMS)]
    pub tenant_streams: usize,
    /// Request-body bytes per tenant per window, SIZE/WINDOW (B, KiB, MiB, GiB); 429 above.
    #[arg(long, env = "OPENQQ_BYTE_LIMIT", default_value = "8MiB/10s")]
    pub byte_limit: ByteQuotaSpec,
    /// Batch items one tenant may submit per window, N/WINDOW (at least one batch of the largest
    /// size, 10,000); 429 above.
    #[arg(long, env = "OPENQQ_TENANT_BATCH_ITEMS", default_value = "20000/1m")]
    pub tenant_batch_items: QuotaSpec,
    /// Batch items one tenant may have open at once (queued or validating); 429 above.
    #[arg(long, env = "OPENQQ_TENANT_BATCH_OPEN", default_value_t = openqq_api::tenant_guard::DEFAULT_BATCH_OPEN)]
    pub tenant_batch_open: u64,
    /// Event-log bytes one tenant's submissions may write per UTC day (B, KiB, MiB, GiB), each
    /// design charged the most its records may take; 429 above, until the next day.
    #[arg(long, env = "OPENQQ_TENANT_LOG_BYTES", default_value = "4GiB", value_parser = openqq_api::quota::parse_size)]
    pub tenant_log_bytes: u64,
    /// Bytes the upload `PUT` buffers at once across all uploads (B, KiB, MiB, GiB); one tenant's
    /// uploads in progress may declare a quarter of it (429 past that). At least 256MiB.
    #[arg(long, env = "OPENQQ_UPLOAD_MEMORY", default_value = "512MiB", value_parser = openqq_api::quota::parse_size)]
    pub upload_memory: u64,
    /// The slowest an upload `PUT` may send, in bytes a second from its first byte (B, KiB, MiB);
    /// 408 behind it.
    #[arg(long, env = "OPENQQ_UPLOAD_MIN_RATE", default_value = "256KiB", value_parser = openqq_api::quota::parse_size)]
    pub upload_min_rate: u64,
    /// How long an upload `PUT` may take to send its body's first byte; 408 after it.
    #[arg(long, env = "OPENQQ_UPLOAD_FIRST_BYTE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub upload_first_byte_timeout: Duration,
    /// What one tenant may keep in the store (reports and timelines), e.g. 1GiB; 403 above.
    #[arg(long, env = "OPENQQ_TENANT_STORAGE", default_value = "1GiB", value_parser = openqq_api::quota::parse_size)]
    pub tenant_storage: u64,
    /// Designs one tenant may have; new ones get 403 above (revisions still go through).
    #[arg(long, env = "OPENQQ_TENANT_DESIGNS", default_value_t = openqq_api::quota::DEFAULT_TENANT_DESIGNS)]
    pub tenant_designs: u64,
    /// Fsync every commit (survives power loss, not just a killed process).
    #[arg(long, env = "OPENQQ_FSYNC")]
    pub fsync: bool,
    /// Embedded log: records older than this, once every consumer group has read them, are deleted.
    #[arg(long, env = "OPENQQ_LOG_RETENTION", default_value = "7d", value_parser = humantime::parse_duration)]
    pub log_retention: Duration,
    /// Embedded log: how long dead letters are kept (nothing consumes them; an operator reads them).
    #[arg(long, env = "OPENQQ_DEAD_LETTER_RETENTION", default_value = "30d", value_parser = humantime::parse_duration)]
    pub dead_letter_retention: Duration,
    /// Embedded object store: how long an upload no submission has adopted is kept (a batch's
    /// `items_ref` is read, never adopted, so it goes then too); swept as the tenant uploads. On
    /// S3 the bucket's lifecycle rule does this (a day).
    #[arg(long, env = "OPENQQ_UPLOAD_RETENTION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub upload_retention: Duration,
    /// How long an answer is replayed for its `Idempotency-Key`; the store keeps each key that
    /// long, then removes it (embedded: purged as new keys are claimed; DynamoDB: TTL).
    #[arg(long, env = "OPENQQ_IDEMPOTENCY_WINDOW", default_value = "24h", value_parser = humantime::parse_duration)]
    pub idempotency_window: Duration,
    /// How long the store keeps the API's marker of a revision it accepted (what shows a design
    /// as `submitted` before the consumers have applied it); past it a revision not yet applied
    /// no longer shows.
    #[arg(long, env = "OPENQQ_ACCEPTED_RETENTION", default_value = "7d", value_parser = humantime::parse_duration)]
    pub accepted_retention: Duration,
    /// How long the store keeps a batch and its items after it was submitted; past it the batch
    /// is gone (404), and a batch still running then is cut off, so keep it longer than the
    /// longest batch (embedded: removed as new batches are created; DynamoDB: TTL).
    #[arg(long, env = "OPENQQ_BATCH_RETENTION", default_value = "30d", value_parser = humantime::parse_duration)]
    pub batch_retention: Duration,
    /// How long the store keeps a deleted design's tombstone (what makes a record of the design
    /// read again a no-op); keep it at or above the log's and the dead letters' retention
    /// (embedded: removed as designs are deleted; DynamoDB: TTL).
    #[arg(long, env = "OPENQQ_TOMBSTONE_RETENTION", default_value = "30d", value_parser = humantime::parse_duration)]
    pub tombstone_retention: Duration,
    /// How long the design store (embedded or DynamoDB) keeps feed entries, and the webhook
    /// deliveries of them that ended; a reader resuming past removed entries is answered 410.
    #[arg(long, env = "OPENQQ_FEED_RETENTION", default_value = "30d", value_parser = humantime::parse_duration)]
    pub feed_retention: Duration,
    /// Reader connections of the embedded store (default one per core, two to eight).
    #[arg(long, env = "OPENQQ_STORE_READERS")]
    pub store_readers: Option<usize>,
    /// Who establishes a caller's tenant: `token` verifies bearer tokens with the API's own
    /// secret; `api-gateway` takes the `tenant_id` claim API Gateway's JWT authorizer verified
    /// (the API function on Lambda behind the deployment template's HTTP API only).
    #[arg(long, env = "OPENQQ_AUTH", value_enum, default_value = "token")]
    pub auth: AuthArg,
    #[command(flatten)]
    pub jwt: JwtRuleArgs,
    #[command(flatten)]
    pub kafka: crate::flags::kafka::KafkaArgs,
    #[command(flatten)]
    pub dynamo: crate::flags::dynamo::DynamoArgs,
    #[command(flatten)]
    pub s3: crate::flags::s3::S3Args,
    #[command(flatten)]
    pub generation: crate::flags::generation::GenerationArgs,
}

pub use crate::flags::limiter::LimiterArgs;

/// The waits of `--webhook-retry-delays`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delays(pub Vec<Duration>);

/// At most this many waits (so at most one attempt more).
pub const MAX_RETRY_DELAYS: usize = 20;

/// The longest wait of `--webhook-retry-delays`.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

/// Why `--webhook-retry-delays` was refused.
#[derive(Debug, thiserror::Error)]
pub enum DelaysError {
    #[error("{wait:?} is not a duration (for example 5s, 1m or 3h)")]
    NotADuration {
        wait: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("at most {MAX_RETRY_DELAYS} waits, each at most 7 days ({count} waits given)")]
    TooMany { count: usize },
    #[error("at most {MAX_RETRY_DELAYS} waits, each at most 7 days ({wait:?} is longer)")]
    TooLong { wait: String },
}

fn parse_delays(s: &str) -> Result<Delays, DelaysError> {
    let mut delays = Vec::new();
    for wait in s.split(',').map(str::trim) {
        let delay = humantime::parse_duration(wait)
            .map_err(|source| DelaysError::NotADuration { wait: wait.to_owned(), source })?;
        if delay > MAX_RETRY_DELAY {
            return Err(DelaysError::TooLong { wait: wait.to_owned() });
        }
        delays.push(delay);
    }
    if delays.len() > MAX_RETRY_DELAYS {
        return Err(DelaysError::TooMany { count: delays.len() });
    }
    Ok(Delays(delays))
}

impl Settings {
    /// The retry schedule of webhook deliveries.
    pub fn webhook_schedule(&self) -> openqq_core::webhook::RetrySchedule {
        openqq_core::webhook::RetrySchedule { delays: self.webhook_retry_delays.0.clone(), jitter: 0.2 }
    }
}

/// The values of `--bulkheads` and `--batch-lane`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bulkheads {
    On,
    Off,
}

/// The values of `--auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthArg {
    Token,
    ApiGateway,
}

impl From<AuthArg> for openqq_api::auth::Identity {
    fn from(a: AuthArg) -> Self {
        match a {
            AuthArg::Token => Self::Token,
            AuthArg::ApiGateway => Self::Gateway,
        }
    }
}

/// Claims every token must carry, shared by `openqq up` (which requires them) and `openqq
/// token` (which writes them).
#[derive(Args, Clone, Debug)]
pub struct JwtRuleArgs {
    /// When set, tokens must carry this `iss` claim (and `openqq token` writes it).
    #[arg(long, env = "OPENQQ_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// When set, tokens must carry this `aud` claim (and `openqq token` writes it).
    #[arg(long, env = "OPENQQ_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// The longest a bearer token may live (`exp` past `iat`, or past now without one); longer
    /// ones are refused, and `openqq token` will not mint them.
    #[arg(long, env = "OPENQQ_JWT_MAX_LIFETIME", default_value = "24h", value_parser = humantime::parse_duration)]
    pub jwt_max_lifetime: std::time::Duration,
}

impl JwtRuleArgs {
    pub fn rules(&self) -> openqq_api::auth::ClaimRules {
        let set = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        openqq_api::auth::ClaimRules {
            issuer: set(&self.jwt_issuer),
            audience: set(&self.jwt_audience),
            max_lifetime: self.jwt_max_lifetime,
        }
    }
}

/// The settings alone, as a parser (the environment of a function on Lambda, or a test's list).
#[derive(Parser)]
#[command(no_binary_name = true, name = "the function's environment")]
struct FromEnv {
    #[command(flatten)]
    settings: Settings,
}

impl Settings {
    /// The settings a function on Lambda runs with: each from its `OPENQQ_*` variable, else its
    /// default. A value that cannot be read is an error naming the variable.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_args(std::iter::empty::<String>())
    }

    /// The settings from command-line style arguments (and the environment for the rest).
    pub fn from_args<I, T>(args: I) -> anyhow::Result<Self>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let settings = FromEnv::try_parse_from(args).map_err(|e| anyhow::anyhow!(explain::<FromEnv>(e)))?.settings;
        settings.check()?;
        Ok(settings)
    }

    /// Checks what the parsers cannot: relations between values and ranges. Each error names its
    /// setting; nothing is opened.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.log_retention.is_zero() {
            anyhow::bail!("--log-retention (OPENQQ_LOG_RETENTION) must be longer than 0 s");
        }
        if self.feed_retention < Duration::from_secs(60) {
            anyhow::bail!("--feed-retention (OPENQQ_FEED_RETENTION) must be at least a minute");
        }
        if self.idempotency_window < Duration::from_secs(60) {
            anyhow::bail!("--idempotency-window (OPENQQ_IDEMPOTENCY_WINDOW) must be at least a minute");
        }
        if self.accepted_retention < Duration::from_secs(60) {
            anyhow::bail!("--accepted-retention (OPENQQ_ACCEPTED_RETENTION) must be at least a minute");
        }
        if self.upload_retention < Duration::from_secs(60) {
            anyhow::bail!("--upload-retention (OPENQQ_UPLOAD_RETENTION) must be at least a minute");
        }
        if self.tombstone_retention < Duration::from_secs(60) {
            anyhow::bail!("--tombstone-retention (OPENQQ_TOMBSTONE_RETENTION) must be at least a minute");
        }
        if self.batch_retention < Duration::from_secs(60) {
            anyhow::bail!("--batch-retention (OPENQQ_BATCH_RETENTION) must be at least a minute");
        }
        if self.dead_letter_retention.is_zero() {
            anyhow::bail!("--dead-letter-retention (OPENQQ_DEAD_LETTER_RETENTION) must be longer than 0 s");
        }
        if self.store_readers.is_some_and(|n| !(1..=64).contains(&n)) {
            anyhow::bail!("--store-readers (OPENQQ_STORE_READERS) must be between 1 and 64");
        }
        if self.max_body_bytes == 0 || u32::try_from(self.max_body_bytes).is_err() {
            anyhow::bail!("--max-body-bytes (OPENQQ_MAX_BODY_BYTES) must be between 1 byte and 4 GiB");
        }
        self.storage_limits().check()?;
        self.upload_limits().check()?;
        Ok(self.tenant_limits().check(self.max_body_bytes)?)
    }

    /// The per-tenant front-door limits.
    pub fn tenant_limits(&self) -> TenantLimits {
        TenantLimits {
            concurrency: self.tenant_concurrency,
            streams: self.tenant_streams,
            body_timeout: self.body_timeout,
            bytes: self.byte_limit.0,
            batch_items: self.tenant_batch_items.0,
            batch_open: self.tenant_batch_open,
            log_bytes_per_day: self.tenant_log_bytes,
        }
    }

    /// The upload `PUT`'s memory and pace.
    pub fn upload_limits(&self) -> openqq_api::uploads::UploadLimits {
        openqq_api::uploads::UploadLimits {
            memory: self.upload_memory,
            min_rate: self.upload_min_rate,
            first_byte: self.upload_first_byte_timeout,
            ..Default::default()
        }
    }

    /// How long the design store keeps what it removes by age.
    pub fn store_retention(&self) -> openqq_core::StoreRetention {
        openqq_core::StoreRetention {
            feed: self.feed_retention,
            accepted: self.accepted_retention,
            batches: self.batch_retention,
            tombstones: self.tombstone_retention,
        }
    }

    /// What each tenant may keep.
    pub fn storage_limits(&self) -> StorageLimits {
        StorageLimits { bytes: self.tenant_storage, designs: self.tenant_designs }
    }

    /// The topics, under the prefix.
    pub fn topics(&self) -> openqq_core::Topics {
        let mut topics = openqq_core::Topics::new(self.topic_prefix.clone());
        topics.shared_lane = self.batch_lane == Bulkheads::Off;
        topics
    }

    /// Every environment variable the settings read, in order: what a deployment template may
    /// set for a function.
    pub fn env_vars() -> Vec<String> {
        env_vars_of(&<FromEnv as clap::CommandFactory>::command())
    }
}

/// The environment variables of `command`'s arguments.
pub fn env_vars_of(command: &clap::Command) -> Vec<String> {
    command.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()).collect()
}

/// A clap error as one line that names the setting's environment variable as well as its flag.
pub fn explain<P: clap::CommandFactory>(e: clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned();
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return first };
    let flag = arg.split_whitespace().next().unwrap_or(arg).trim_start_matches("--");
    let env = P::command()
        .get_arguments()
        .find(|a| a.get_long() == Some(flag))
        .and_then(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()));
    match env {
        Some(env) => format!("{env}: {first}"),
        None => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_a_flag_and_the_environment_variable_of_the_same_name() {
        let command = <FromEnv as clap::CommandFactory>::command();
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let want = format!("OPENQQ_{}", long.to_uppercase().replace('-', "_"));
            assert_eq!(env.as_deref(), Some(want.as_str()), "--{long}");
        }
        let vars = Settings::env_vars();
        assert!(
            vars.contains(&"OPENQQ_DYNAMODB_TABLE".to_owned()) && vars.contains(&"OPENQQ_KAFKA_BROKERS".to_owned())
        );
    }

    #[test]
    fn the_defaults_are_openqq_ups() {
        let s = Settings::from_args(["--data-dir", "/nonexistent"]).unwrap();
        assert_eq!((s.rate_limit.0.limit, s.max_body_bytes), (100, openqq_api::DEFAULT_MAX_BODY_BYTES));
        assert_eq!(s.tenant_limits(), TenantLimits::default());
        assert_eq!(s.upload_limits(), openqq_api::uploads::UploadLimits::default());
        let s = Settings::from_args(["--byte-limit", "8MiB/10s", "--tenant-concurrency", "3"]).unwrap();
        assert_eq!((s.tenant_limits().bytes.limit, s.tenant_limits().concurrency), (8 << 20, 3));
    }

    #[test]
    fn a_bad_value_stops_start_up_with_a_sentence_naming_the_setting_and_its_variable() {
        for (flag, value, env) in [
            ("--byte-limit", "lots", "OPENQQ_BYTE_LIMIT"),
            ("--byte-limit", "1KiB/1m", "OPENQQ_BYTE_LIMIT"),
            ("--tenant-concurrency", "0", "OPENQQ_TENANT_CONCURRENCY"),
            ("--tenant-concurrency", "many", "OPENQQ_TENANT_CONCURRENCY"),
            ("--max-body-bytes", "-1", "OPENQQ_MAX_BODY_BYTES"),
            ("--max-body-bytes", "0", "OPENQQ_MAX_BODY_BYTES"),
            ("--rate-limit", "fast", "OPENQQ_RATE_LIMIT"),
            ("--validation-budget", "0s", "OPENQQ_VALIDATION_BUDGET"),
            ("--log-retention", "0s", "OPENQQ_LOG_RETENTION"),
            ("--instances", "0", "OPENQQ_INSTANCES"),
            ("--tenant-storage", "much", "OPENQQ_TENANT_STORAGE"),
            ("--upload-memory", "64MiB", "OPENQQ_UPLOAD_MEMORY"),
            ("--upload-min-rate", "0", "OPENQQ_UPLOAD_MIN_RATE"),
            ("--upload-first-byte-timeout", "0s", "OPENQQ_UPLOAD_FIRST_BYTE_TIMEOUT"),
            ("--webhook-retry-delays", "5s,soon", "OPENQQ_WEBHOOK_RETRY_DELAYS"),
        ] {
            let err = match Settings::from_args([format!("{flag}={value}")]) {
                Ok(_) => panic!("{flag} {value} was accepted"),
                Err(e) => format!("{e:#}"),
            };
            assert!(err.contains(flag) && err.contains(env), "{flag} {value}: {err}");
            assert_eq!(err.lines().count(), 1, "one sentence: {err}");
        }
    }

    #[test]
    fn retry_delays_name_the_wait_at_fault_and_keep_the_parse_error_underneath() {
        assert_eq!(parse_delays("5s, 1m").unwrap().0, [Duration::from_secs(5), Duration::from_secs(60)]);
        let soon = parse_delays("5s,soon").unwrap_err();
        assert_eq!(soon.to_string(), r#""soon" is not a duration (for example 5s, 1m or 3h)"#);
        assert!(std::error::Error::source(&soon).is_some());
        assert!(matches!(parse_delays("1s,8days"), Err(DelaysError::TooLong { wait }) if wait == "8days"));
        let many = vec!["1s"; MAX_RETRY_DELAYS + 1].join(",");
        assert!(matches!(parse_delays(&many), Err(DelaysError::TooMany { count }) if count == MAX_RETRY_DELAYS + 1));
    }
}
