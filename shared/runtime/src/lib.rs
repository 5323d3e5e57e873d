//! The runtime shared by the three consumer functions, on Lambda and on one machine.
//!
//! - [`kafka`]: the AWS MSK trigger's event shape — building it from log records (the local
//!   emulator) and reading it back (records keyed `"topic-partition"`, base64 key and value,
//!   headers as lists of signed bytes, headers possibly absent).
//! - [`consumer`]: the per-record driver every consumer function uses. It decodes envelopes,
//!   calls the function's [`consumer::RecordHandler`] with panics caught, gives up on records
//!   that can never succeed (see [`dead_letter`]), and on a retriable error fails that record's
//!   partition from there (a partial-batch response) so it is retried in order. What handlers
//!   publish waits in an [`outbox::Outbox`], flushed once per lane; an event over the record
//!   limit fails its record, never the batch. The store writes handlers name go to the store a
//!   batch at a time ([`writes`]).
//! - [`share`]: a tenant's share of a batch in the slow functions' lanes: past it, its records go
//!   back to the end of the topic, so one tenant's backlog never holds a partition for long.
//! - [`writes`]: a record's store write ([`writes::Write`]) and the gathering that applies
//!   the writes of a batch's lanes in one `DesignWrites::apply_batch`.
//! - [`dead_letter`]: giving up on a record — its dead letter (the original bytes, the reason in
//!   headers) and its revision marked `failed` with the reason.
//! - [`esm`]: the event-source-mapping emulator that runs a consumer locally as the MSK trigger
//!   would: batches per partition within a batching window, commit of what the function got
//!   through, backoff while the failed partitions wait, the on-failure destination after the last attempt, and a
//!   draining shutdown.
//! - [`response`]: the partial-batch response a function gives the trigger.
//!
//! It depends on the core alone (and the AWS event types): a handler crate links no Kafka client,
//! no AWS SDK, no command-line parser and no Lambda runtime. Choosing backends from settings and
//! running under Lambda is `openqq-platform`'s.

pub mod consumer;
pub mod dead_letter;
pub mod esm;
pub mod kafka;
pub mod outbox;
pub mod response;
pub mod share;
pub mod writes;

pub use consumer::{
    BatchError, BatchHandler, Consumer, FailedPartitions, Outbox, RecordError, RecordHandler, Step, Write,
};
pub use esm::{EventSourceMapping, MappingConfig};
