//! The platform builder.
//!
//! - [`settings`]: [`Settings`], every setting of the platform, as flags of `openqq up` and as
//!   the environment (`OPENQQ_*`, same names) of the Lambda functions, checked before anything
//!   is opened.
//! - [`build`]: [`Platform::build`], the one function that turns settings into backends (log,
//!   store, objects), the limiter and the per-tenant policies, and from those the
//!   API state and the consumer handlers.
//! - [`local`]: `openqq up`'s extra settings and the whole platform serving in one process,
//!   which in-process tests start too.
//! - [`lambda`]: the `main` of each function on AWS Lambda.
//! - [`remote`]: consumer functions invoked over the Lambda Invoke API (`openqq up --invoke`).
//! - [`flags`]: each backend's settings (Kafka / MSK, DynamoDB, S3, the limiter's Redis or
//!   ElastiCache), checked and connected.
//! - [`secret`], [`overrides`], [`data_dir`]: the local JWT secret, the rate-limit overrides
//!   file and the private data dir.
//! - [`allocator`]: glibc's malloc arenas capped at process start, first thing in `openqq`'s and
//!   each Lambda function's `main`.

pub mod allocator;
pub mod build;
pub mod data_dir;
pub mod flags;
pub mod lambda;
pub mod local;
pub mod overrides;
pub mod remote;
pub mod secret;
pub mod settings;

pub use build::{consumer_group, Platform, BATCH_CONSUMED, BATCH_LANE_GROUP_PREFIX, CONSUMED};
pub use local::{start, Running, UpArgs};
pub use settings::{JwtRuleArgs, Settings};

#[cfg(test)]
mod docs_tests;
