//! Adapters for the ports defined in `openqq-core`.
//!
//! - [`embedded`]: the one-machine defaults. SQLite (bundled, WAL mode) for the partitioned event
//!   log and the design store (with the tenants' feeds, webhooks and their deliveries), an
//!   in-process sliding-window limiter, and a directory of content-addressed files for the object
//!   store (full reports).
//! - [`redis_limiter`]: the per-tenant sliding-window limiter in Redis (ElastiCache in
//!   production), one atomic Lua script per decision; [`fallback_limiter`] wraps it with the
//!   Redis-down policy (fail open to an in-process share of the limit, or fail closed);
//!   [`limiter_choice`] builds the limiter a process asks for (in process, a Redis URL, or
//!   an ElastiCache cache by name through `elasticache`, cargo feature `elasticache`).
//! - [`kafka`] (cargo feature `kafka`): the event log on Kafka / MSK through `rdkafka`, with the
//!   consumer side the local runner reads through, TLS / SASL/SCRAM / MSK IAM auth, and MSK
//!   bootstrap-broker lookup; `--kafka-brokers` or `--msk-cluster-arn` selects it.
//! - [`dynamo`] (cargo feature `dynamodb`): the design store on one DynamoDB table, every state
//!   change one conditional `TransactWriteItems` planned by the core's revision rules.
//! - [`s3`] (cargo feature `s3`): the object store on one S3 bucket, content-addressed per
//!   tenant, with presigned direct uploads adopted after their digest is checked.
//! - [`webhook`]: the delivery worker that sends the webhook deliveries the store queued, signed
//!   (Standard Webhooks, HMAC-SHA256), to public addresses only, fair between tenants.
//! - [`settings`]: [`SettingsError`], an adapter refusing one of its settings (apart from the
//!   ports' [`PortError`](openqq_core::PortError), which is about requests).
//! - [`conformance`]: one suite per port. Every adapter — embedded here, cloud ones as they are
//!   added — must pass the same suite; backend differences are flags to the suite, never a
//!   second suite.
//!
//! Why SQLite rather than redb: the log, the offsets and the store each need a few small indexed
//! tables with conditional, multi-row atomic updates; SQL expresses "insert the timeline entry
//! only if no newer revision of this kind exists, then move the status if the design is still at
//! this revision" in one transaction, and WAL mode gives readers that never block the writer.
//! The `sqlite3` shell also lets an operator inspect a data dir by hand.

mod append_signal;
#[cfg(any(feature = "dynamodb", feature = "s3"))]
mod aws_common;
pub mod backends;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(test)]
mod counting_recorder;
#[cfg(feature = "dynamodb")]
pub mod dynamo;
#[cfg(feature = "elasticache")]
pub mod elasticache;
pub mod embedded;
pub mod fallback_limiter;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod limiter_choice;
pub mod redis_limiter;
#[cfg(feature = "s3")]
pub mod s3;
pub mod settings;
pub mod webhook;

pub use backends::Backends;
#[cfg(feature = "dynamodb")]
pub use dynamo::{DynamoDesignStore, DynamoSettings};
pub use embedded::{Durability, EmbeddedDesignStore, EmbeddedEventLog, EmbeddedObjectStore, InProcessRateLimiter};
pub use fallback_limiter::{FallbackRateLimiter, RedisDownPolicy};
#[cfg(feature = "kafka")]
pub use kafka::{KafkaEventLog, KafkaSettings};
pub use limiter_choice::{build_limiter, LimiterBackend, LimiterChoiceError, LimiterSettings};
pub use redis_limiter::RedisRateLimiter;
#[cfg(feature = "s3")]
pub use s3::{S3ObjectStore, S3Settings};
pub use settings::SettingsError;
pub use webhook::{DeliverySettings, DeliveryWorker, WebhookClient};

/// The counter of a design store's round trips: one per request the DynamoDB store sends
/// (retries included, `backend="dynamodb"`, `operation` the DynamoDB API), one per port call of
/// the embedded store (`backend="embedded"`, `operation` the port method).
pub const STORE_REQUESTS_METRIC: &str = "openqq_store_requests_total";
