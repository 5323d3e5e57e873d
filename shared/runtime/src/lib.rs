//! The runtime shared by the three consumer functions, on Lambda and on one machine.
//!
//! - [`kafka`]: the AWS MSK trigger's event shape — building it from log records (the local
//!   emulator) and reading it back (records keyed `"topic-partition"`, base64 key and value,
//!   headers as lists of signed bytes, headers possibly absent).
//! - [`consumer`]: the per-record driver every consumer function uses. It decodes envelopes,
//!   calls the function's [`consumer::RecordHandler`] with panics caught, gives up on records
//!   that can never succeed (see [`dead_letter`]), and fails the whole batch on a retriable error
//!   so it is retried in order. What handlers publish waits in an [`outbox::Outbox`], flushed
//!   once per batch; an event over the record limit fails its record, never the batch.
//! - [`dead_letter`]: giving up on a record — its dead letter (the original bytes, the reason in
//!   headers) and its revision marked `failed` with the reason.
//! - [`esm`]: the event-source-mapping emulator that runs a consumer locally as the MSK trigger
//!   would: batches per partition within a batching window, commit after success, backoff
//!   while the failed partitions wait, the on-failure destination after the last attempt, and a
//!   draining shutdown.
//! - [`kafka_flags`]: where the event log goes (Kafka brokers or an MSK cluster) and how its
//!   clients authenticate, as flags of `openqq up` and as the environment of a Lambda function.
//! - [`dynamo_flags`]: whether the design store is on DynamoDB (`--dynamodb-table`,
//!   `--dynamodb-endpoint`), as flags of `openqq up` and as the environment of a Lambda function.
//! - [`s3_flags`]: whether the object store is on S3 (`--s3-bucket`, `--s3-endpoint`), as flags
//!   of `openqq up` and as the environment of a Lambda function.
//! - [`limiter_flags`]: where the per-tenant limiter lives (in process, `--redis-url`,
//!   `--elasticache-cache`) and its Redis-down policy, as flags of `openqq up` and as the
//!   environment of the API function on Lambda.
//! - [`lambda`]: a function's `main` on AWS Lambda, its backends from the environment.

pub mod consumer;
pub mod dead_letter;
pub mod dynamo_flags;
pub mod esm;
pub mod kafka;
pub mod kafka_flags;
pub mod lambda;
pub mod limiter_flags;
pub mod outbox;
pub mod s3_flags;

pub use consumer::{BatchError, BatchHandler, Consumer, FailedPartitions, Outbox, RecordError, RecordHandler};
pub use esm::{EventSourceMapping, MappingConfig};
