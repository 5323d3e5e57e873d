//! The per-record driver shared by the consumer functions.
//!
//! A function implements [`RecordHandler`] for one decoded envelope of its kind; [`Consumer`]
//! turns it into a [`BatchHandler`] over a whole `KafkaEvent`.
//!
//! Order is promised per tenant, not per partition: a batch is split into **lanes**, the records
//! of one key (tenant) of one partition in offset order. A lane is handled record by record;
//! lanes run concurrently (at most [`LANES`] at once), so a tenant whose records are slow (a
//! large netlist, a validation that runs to its budget) holds back only its own records, never
//! another tenant's that share its partition. What a lane's handlers publish goes into the
//! lane's [`Outbox`], flushed once when the lane ends (in order), so a lane of 100 records costs
//! one append per topic, not 100, and a quick tenant's events leave without waiting for a slow
//! one's.
//!
//! A permanent failure gives up on that record and the partition moves on: its revision becomes
//! `failed` with the reason, and the record goes to the dead-letter topic as it was. Permanent
//! failures are the handler's own verdict, a panic (a bug: caught per record, so the worker and
//! the rest of the batch go on), and an event the handler produced that is over the log's record
//! limit. A retriable failure flushes what its lane did before it and fails its partition from
//! that record on (a partial-batch response): the trigger retries each failed partition from its
//! earliest failed record, and the other partitions move on. Whatever after that record was
//! applied (in another lane of the partition) is applied again as a no-op, because every write is
//! conditional on revision.

use crate::dead_letter::{dead_letter_record, fail_revision, panic_message};
use crate::kafka::{records, Incoming};
use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use futures_util::{FutureExt, StreamExt};
use openqq_core::event::headers;
use openqq_core::{DesignStore, Envelope, EventKind, EventLog, PortError, Topics};
use serde::de::DeserializeOwned;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tracing::{error, info, info_span, warn, Instrument};

pub use crate::outbox::Outbox;

/// How one record failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Worth retrying later (storage or log unavailable, throttled). Fails the batch.
    #[error("retriable: {0}")]
    Retriable(String),
    /// Can never succeed (undecodable, unknown schema, invalid). Dead-lettered.
    #[error("permanent: {0}")]
    Permanent(String),
    /// A port failed: retriable or permanent as [`PortError::is_retriable`] says, and kept whole
    /// (with the cause underneath it) as this error's source.
    #[error("{kind}: {0}", kind = if .0.is_retriable() { "retriable" } else { "permanent" })]
    Port(#[from] PortError),
}

impl RecordError {
    /// Whether the record is worth trying again (its batch fails) rather than dead-lettered.
    pub fn is_retriable(&self) -> bool {
        match self {
            RecordError::Retriable(_) => true,
            RecordError::Permanent(_) => false,
            RecordError::Port(e) => e.is_retriable(),
        }
    }

    /// Why the record failed, without the classification: what the batch error, the log line
    /// and the dead letter say.
    pub fn reason(&self) -> String {
        match self {
            RecordError::Retriable(reason) | RecordError::Permanent(reason) => reason.clone(),
            RecordError::Port(e) => e.to_string(),
        }
    }
}

/// One partition of a batch failed and must be retried from this record; the partition's records
/// before it are done.
#[derive(Debug, thiserror::Error)]
#[error("{function} failed at {topic}-{partition} offset {offset}: {reason}")]
pub struct BatchError {
    pub function: String,
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub reason: String,
}

/// The partitions of a batch that failed, each at the first record to try again (at most one
/// per partition). Every record of a partition not named here is done: this is the partial-batch
/// response (`batchItemFailures`) the trigger resumes each named partition from.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct FailedPartitions(pub Vec<BatchError>);

impl From<BatchError> for FailedPartitions {
    fn from(e: BatchError) -> Self {
        Self(vec![e])
    }
}

impl FailedPartitions {
    /// The earliest failure of each partition among `failures`.
    pub fn earliest(failures: impl IntoIterator<Item = BatchError>) -> Option<Self> {
        let mut by_partition: Vec<BatchError> = Vec::new();
        for e in failures {
            match by_partition.iter_mut().find(|k| k.topic == e.topic && k.partition == e.partition) {
                Some(kept) if e.offset < kept.offset => *kept = e,
                Some(_) => {}
                None => by_partition.push(e),
            }
        }
        by_partition.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        (!by_partition.is_empty()).then_some(Self(by_partition))
    }
}

/// What the Lambda runtime and the local emulator invoke.
#[async_trait]
pub trait BatchHandler: Send + Sync {
    /// The function's name, also its consumer group.
    fn name(&self) -> &str;
    /// Handles a batch; an error names, per failed partition, the record to resume from.
    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions>;
    /// The trigger is about to dead-letter a batch that failed every retry, for `reason`;
    /// `records` are the ones the handler never got past (the record its error named and those
    /// after it; all of them after a panic). The function records what that means for them. An
    /// error keeps the whole batch uncommitted, to be tried again later.
    async fn dead_lettered(&self, _records: &[Incoming], _reason: &str) -> Result<(), PortError> {
        Ok(())
    }
}

/// A consumer function's logic for one record of its kind.
#[async_trait]
pub trait RecordHandler: Send + Sync {
    /// The payload of the events this function consumes.
    type Payload: DeserializeOwned + Send;
    /// The kind of event this function consumes.
    const KIND: EventKind;
    /// The function's name (`design-job`, `validation`, `results`).
    fn name(&self) -> &'static str;
    async fn handle(&self, envelope: Envelope<Self::Payload>, out: &mut Outbox) -> Result<(), RecordError>;
}

/// Wraps a [`RecordHandler`] into a [`BatchHandler`] with dead-lettering, failed revisions, panic
/// isolation and a batched outbox.
pub struct Consumer<H> {
    handler: H,
    log: Arc<dyn EventLog>,
    /// Where a revision whose record is dead-lettered becomes `failed`.
    store: Arc<dyn DesignStore>,
    topics: Topics,
}

/// Whom a record is about, once its envelope decoded: what its log line names.
#[derive(Default)]
struct About {
    correlation_id: String,
    tenant_id: String,
    design_id: String,
}

/// Why a record is given up on, for the `reason` label of `openqq_dead_letters_total`.
#[derive(Debug, Clone, Copy)]
enum GiveUp {
    Handler,
    Panic,
    OversizedOutput,
}

impl GiveUp {
    fn label(self) -> &'static str {
        match self {
            GiveUp::Handler => "handler",
            GiveUp::Panic => "panic",
            GiveUp::OversizedOutput => "oversized_output",
        }
    }
}

impl<H: RecordHandler> Consumer<H> {
    pub fn new(handler: H, log: Arc<dyn EventLog>, store: Arc<dyn DesignStore>, topics: Topics) -> Self {
        Self { handler, log, store, topics }
    }

    async fn one(&self, rec: &Incoming, out: &mut Outbox, about: &mut About) -> Result<(), RecordError> {
        let bytes = rec.value.as_ref().map_err(|e| RecordError::Permanent(e.clone()))?;
        let mut env =
            Envelope::<H::Payload>::decode_as(bytes, H::KIND).map_err(|e| RecordError::Permanent(e.to_string()))?;
        *about = About {
            correlation_id: env.correlation_id.to_string(),
            tenant_id: env.tenant_id.to_string(),
            design_id: env.design_id.to_string(),
        };
        // A record an operator replayed from the dead-letter topic: its writes follow the replay
        // rule (openqq_core::revision::plan_replay).
        env.replay_of = rec.header_str(headers::REPLAY_OF).map(str::to_owned);
        let span = info_span!(
            "record",
            function = self.handler.name(),
            correlation_id = %env.correlation_id,
            tenant_id = %env.tenant_id,
            design_id = %env.design_id,
            revision = env.revision,
            kind = %env.kind,
        );
        self.handler.handle(env, out).instrument(span).await
    }

    /// Handles one record with panics caught: a panic, or an event too large to publish, is a
    /// permanent failure of this record.
    async fn guarded(&self, rec: &Incoming, out: &mut Outbox, about: &mut About) -> Result<(), (GiveUp, RecordError)> {
        let queued = out.records().len();
        let outcome = AssertUnwindSafe(self.one(rec, out, about)).catch_unwind().await;
        let refused = out.take_refusal();
        match outcome {
            Err(panic) => {
                out.truncate(queued);
                let function = self.handler.name();
                metrics::counter!("openqq_handler_panics_total", "function" => function).increment(1);
                let reason = format!("bug: the {function} handler panicked: {}", panic_message(panic.as_ref()));
                error!(function, topic = %rec.topic, partition = rec.partition, offset = rec.offset, %reason,
                    "A handler panicked; the record is dead-lettered and the batch goes on.");
                Err((GiveUp::Panic, RecordError::Permanent(reason)))
            }
            Ok(Ok(())) => match refused {
                Some(reason) => Err((GiveUp::OversizedOutput, RecordError::Permanent(reason))),
                None => Ok(()),
            },
            Ok(Err(e)) => Err((GiveUp::Handler, e)),
        }
    }

    /// Fails the record's revision, then dead-letters the record.
    async fn give_up(&self, rec: &Incoming, reason: &str) -> Result<(), String> {
        fail_revision(self.store.as_ref(), rec, reason)
            .await
            .map_err(|e| format!("marking the revision failed did not succeed: {e}"))?;
        let letter = dead_letter_record(rec, self.handler.name(), reason);
        self.log
            .publish(&self.topics.dead_letter(), vec![letter])
            .await
            .map_err(|e| format!("dead-lettering failed: {e}"))
    }

    /// Handles one lane (one tenant's records of one partition) in offset order, then publishes
    /// what its handlers queued. Stops at the first retriable failure.
    async fn lane(&self, lane: Vec<Incoming>) -> Result<(), BatchError> {
        let function = self.handler.name();
        let mut out = Outbox::new(self.topics.clone());
        for rec in &lane {
            let kind = kind_label(rec.header_str(headers::EVENT_KIND).unwrap_or("unknown"));
            let fail = |reason: String| BatchError {
                function: function.to_owned(),
                topic: rec.topic.clone(),
                partition: rec.partition,
                offset: rec.offset,
                reason,
            };
            let started = std::time::Instant::now();
            let mut about = About::default();
            let handled = self.guarded(rec, &mut out, &mut about).await;
            let took = started.elapsed();
            metrics::histogram!("openqq_event_duration_seconds", "function" => function).record(took.as_secs_f64());
            let handled_line = |outcome: &str, reason: Option<&str>| {
                let correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(&about.correlation_id);
                info!(function, kind, topic = %rec.topic, partition = rec.partition, offset = rec.offset,
                    correlation_id, tenant_id = %about.tenant_id, design_id = %about.design_id,
                    elapsed_ms = (took.as_secs_f64() * 1e6).round() / 1e3, outcome, reason, "A record was handled.");
            };
            let outcome = match handled {
                Ok(()) => "applied",
                Err((_, e)) if e.is_retriable() => {
                    let reason = e.reason();
                    metrics::counter!("openqq_events_total", "function" => function, "kind" => kind, "outcome" => "retried").increment(1);
                    handled_line("retried", Some(&reason));
                    // Keep the progress made so far; the retry re-applies it as no-ops either way.
                    let _ = out.flush(self.log.as_ref()).await;
                    return Err(fail(reason));
                }
                Err((source, e)) => {
                    let reason = e.reason();
                    warn!(function, topic = %rec.topic, partition = rec.partition, offset = rec.offset,
                        correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(""), %reason,
                        "The record can never succeed; its revision failed and it was sent to the dead-letter topic.");
                    out.flush(self.log.as_ref()).await.map_err(|e| fail(format!("publishing failed: {e}")))?;
                    self.give_up(rec, &reason).await.map_err(fail)?;
                    metrics::counter!("openqq_dead_letters_total", "function" => function, "reason" => source.label())
                        .increment(1);
                    handled_line("dead_lettered", Some(&reason));
                    "dead_lettered"
                }
            };
            if outcome == "applied" {
                handled_line(outcome, None);
            }
            metrics::counter!("openqq_events_total", "function" => function, "kind" => kind, "outcome" => outcome)
                .increment(1);
        }
        out.flush(self.log.as_ref()).await.map_err(|e| {
            let first = &lane[0];
            BatchError {
                function: function.to_owned(),
                topic: first.topic.clone(),
                partition: first.partition,
                offset: first.offset,
                reason: format!("publishing the batch's events failed: {e}"),
            }
        })
    }
}

#[async_trait]
impl<H: RecordHandler> BatchHandler for Consumer<H> {
    fn name(&self) -> &str {
        self.handler.name()
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions> {
        let outcomes: Vec<Result<(), BatchError>> =
            futures_util::stream::iter(lanes(records(&event)).into_iter().map(|lane| self.lane(lane)))
                .buffer_unordered(LANES)
                .collect()
                .await;
        // Every lane ran to its end or its first retriable failure; each failed partition resumes
        // from its earliest failure (later records of other lanes there are applied again as no-ops).
        match FailedPartitions::earliest(outcomes.into_iter().filter_map(Result::err)) {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    async fn dead_lettered(&self, records: &[Incoming], reason: &str) -> Result<(), PortError> {
        for rec in records {
            fail_revision(self.store.as_ref(), rec, reason).await?;
        }
        Ok(())
    }
}

/// Lanes of one batch handled at once. Each lane is one tenant's records of one partition; more
/// lanes than cores is on purpose, since a lane mostly waits (on the store, the log, or the
/// validator's blocking thread) and the operating system shares the cores among the rest.
pub const LANES: usize = 16;

/// Splits a batch into lanes: the records of one (topic, partition, key) in offset order, lanes
/// in the order their first record appears.
pub(crate) fn lanes(records: Vec<Incoming>) -> Vec<Vec<Incoming>> {
    let mut lanes: Vec<Vec<Incoming>> = Vec::new();
    let mut index: std::collections::HashMap<(String, u32, Option<Vec<u8>>), usize> = std::collections::HashMap::new();
    for rec in records {
        let at = *index.entry((rec.topic.clone(), rec.partition, rec.key.clone())).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[at].push(rec);
    }
    lanes
}

/// Keeps the `kind` label bounded: anything unknown is `unknown`.
fn kind_label(kind: &str) -> &'static str {
    EventKind::parse(kind).map(|k| k.as_str()).unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: u32, offset: u64, key: &str) -> Incoming {
        Incoming {
            topic: "t".into(),
            partition,
            offset,
            key: Some(key.as_bytes().to_vec()),
            value: Ok(Vec::new()),
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_batch_splits_into_one_lane_per_tenant_and_partition_each_in_offset_order() {
        let batch = vec![rec(0, 1, "a"), rec(0, 2, "b"), rec(0, 3, "a"), rec(1, 7, "a"), rec(0, 4, "b")];
        let got: Vec<Vec<(u32, u64)>> =
            lanes(batch).iter().map(|l| l.iter().map(|r| (r.partition, r.offset)).collect()).collect();
        assert_eq!(got, vec![vec![(0, 1), (0, 3)], vec![(0, 2), (0, 4)], vec![(1, 7)]]);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Refused;

    #[test]
    fn a_record_error_from_a_port_keeps_its_class_its_words_and_its_cause() {
        let retriable = RecordError::from(PortError::unavailable("the store did not answer", Refused));
        assert!(retriable.is_retriable());
        assert_eq!(retriable.to_string(), "retriable: unavailable: the store did not answer");
        assert_eq!(retriable.reason(), "unavailable: the store did not answer");
        let port = std::error::Error::source(&retriable).expect("the port error is the source");
        let cause = port.source().expect("and its cause is kept underneath");
        assert!(cause.downcast_ref::<Refused>().is_some());

        let permanent = RecordError::from(PortError::Invalid("too large".into()));
        assert!(!permanent.is_retriable());
        assert_eq!(permanent.to_string(), "permanent: invalid: too large");
        assert_eq!(permanent.reason(), "invalid: too large");
    }
}
