//! The per-record driver shared by the consumer functions.
//!
//! A function implements [`RecordHandler`] for one decoded envelope of its kind; [`Consumer`]
//! turns it into a [`BatchHandler`] over a whole `KafkaEvent`. Records are handled partition by
//! partition, in offset order. What a handler publishes goes into an [`Outbox`] that is flushed
//! once per batch (in order), so a batch of 100 records costs one append per topic, not 100.
//!
//! A permanent failure dead-letters that record (with the reason and the original bytes) and the
//! partition moves on; a retriable failure flushes what came before it and fails the batch, so
//! the trigger retries it from the last committed offset — everything applied before it in the
//! batch is applied again as a no-op, because every write is conditional on revision.

use crate::kafka::{records, Incoming};
use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_core::event::headers;
use openqq_core::{DeadLetter, Envelope, EventKind, EventLog, PortError, Record, Topics};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;
use tracing::{info_span, warn, Instrument};

/// How one record failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Worth retrying later (storage or log unavailable, throttled). Fails the batch.
    #[error("retriable: {0}")]
    Retriable(String),
    /// Can never succeed (undecodable, unknown schema, invalid). Dead-lettered.
    #[error("permanent: {0}")]
    Permanent(String),
}

impl From<PortError> for RecordError {
    fn from(e: PortError) -> Self {
        if e.is_retriable() {
            RecordError::Retriable(e.to_string())
        } else {
            RecordError::Permanent(e.to_string())
        }
    }
}

/// A batch failed and must be retried from its first uncommitted record.
#[derive(Debug, thiserror::Error)]
#[error("{function} failed at {topic}-{partition} offset {offset}: {reason}")]
pub struct BatchError {
    pub function: String,
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub reason: String,
}

/// What the Lambda runtime and the local emulator invoke.
#[async_trait]
pub trait BatchHandler: Send + Sync {
    /// The function's name, also its consumer group.
    fn name(&self) -> &str;
    async fn handle(&self, event: KafkaEvent) -> Result<(), BatchError>;
}

/// Events a handler wants published, kept in order until the batch flushes them.
#[derive(Debug)]
pub struct Outbox {
    topics: Topics,
    records: Vec<(String, Record)>,
}

impl Outbox {
    pub fn new(topics: Topics) -> Self {
        Self { topics, records: Vec::new() }
    }

    /// Queues `envelope` for its kind's topic.
    pub fn publish<P: Serialize>(&mut self, envelope: &Envelope<P>) {
        self.records.push((self.topics.of(envelope.kind), envelope.to_record()));
    }

    /// The queued records, oldest first.
    pub fn records(&self) -> &[(String, Record)] {
        &self.records
    }

    /// Publishes everything queued, one append per topic with that topic's records in the order
    /// they were queued, topics in the order they first appear; then empties the outbox. (A
    /// handler that emits `validation.started` and `validation.finished` per record makes two
    /// appends a batch, not two a record: each append waits for its acknowledgement.) Order
    /// across topics is not something consumers can rely on: each topic has its own consumers.
    pub async fn flush(&mut self, log: &dyn EventLog) -> Result<(), PortError> {
        let mut by_topic: Vec<(String, Vec<Record>)> = Vec::new();
        for (topic, record) in std::mem::take(&mut self.records) {
            match by_topic.iter_mut().find(|(t, _)| *t == topic) {
                Some((_, run)) => run.push(record),
                None => by_topic.push((topic, vec![record])),
            }
        }
        for (topic, run) in by_topic {
            log.publish(&topic, run).await?;
        }
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

/// Wraps a [`RecordHandler`] into a [`BatchHandler`] with dead-lettering and a batched outbox.
pub struct Consumer<H> {
    handler: H,
    log: Arc<dyn EventLog>,
    topics: Topics,
}

impl<H: RecordHandler> Consumer<H> {
    pub fn new(handler: H, log: Arc<dyn EventLog>, topics: Topics) -> Self {
        Self { handler, log, topics }
    }

    async fn one(&self, rec: &Incoming, out: &mut Outbox) -> Result<(), RecordError> {
        let bytes = rec.value.as_ref().map_err(|e| RecordError::Permanent(e.clone()))?;
        let env =
            Envelope::<H::Payload>::decode_as(bytes, H::KIND).map_err(|e| RecordError::Permanent(e.to_string()))?;
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

    async fn dead_letter(&self, rec: &Incoming, reason: &str) -> Result<(), PortError> {
        self.log.publish(&self.topics.dead_letter(), vec![dead_letter_record(rec, self.handler.name(), reason)]).await
    }
}

/// The dead-letter record for `rec`: the reason, where it came from, and its original bytes
/// (base64) so an operator can replay it after a fix. Keyed like the original.
pub(crate) fn dead_letter_record(rec: &Incoming, function: &str, reason: &str) -> Record {
    let letter = DeadLetter {
        source_topic: rec.topic.clone(),
        source_partition: rec.partition,
        source_offset: rec.offset,
        function: function.to_owned(),
        reason: reason.to_owned(),
        correlation_id: rec.header_str(headers::CORRELATION_ID).map(str::to_owned),
        key_base64: rec.key.as_ref().map(|k| B64.encode(k)),
        value_base64: rec.value.as_ref().ok().map(|v| B64.encode(v)),
        dead_lettered_at: chrono::Utc::now(),
    };
    let key = rec.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_default();
    letter.to_record(&key)
}

#[async_trait]
impl<H: RecordHandler> BatchHandler for Consumer<H> {
    fn name(&self) -> &str {
        self.handler.name()
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), BatchError> {
        let function = self.handler.name();
        let mut out = Outbox::new(self.topics.clone());
        for rec in records(&event) {
            let kind = kind_label(rec.header_str(headers::EVENT_KIND).unwrap_or("unknown"));
            let fail = |reason: String| BatchError {
                function: function.to_owned(),
                topic: rec.topic.clone(),
                partition: rec.partition,
                offset: rec.offset,
                reason,
            };
            let outcome = match self.one(&rec, &mut out).await {
                Ok(()) => "applied",
                Err(RecordError::Retriable(reason)) => {
                    metrics::counter!("openqq_events_total", "function" => function, "kind" => kind, "outcome" => "retried").increment(1);
                    // Keep the progress made so far; the retry re-applies it as no-ops either way.
                    let _ = out.flush(self.log.as_ref()).await;
                    return Err(fail(reason));
                }
                Err(RecordError::Permanent(reason)) => {
                    warn!(function, topic = %rec.topic, partition = rec.partition, offset = rec.offset,
                        correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(""), %reason,
                        "The record can never succeed and was sent to the dead-letter topic.");
                    out.flush(self.log.as_ref()).await.map_err(|e| fail(format!("publishing failed: {e}")))?;
                    self.dead_letter(&rec, &reason).await.map_err(|e| fail(format!("dead-lettering failed: {e}")))?;
                    metrics::counter!("openqq_dead_letters_total", "function" => function, "source" => "handler")
                        .increment(1);
                    "dead_lettered"
                }
            };
            metrics::counter!("openqq_events_total", "function" => function, "kind" => kind, "outcome" => outcome)
                .increment(1);
        }
        if let Err(e) = out.flush(self.log.as_ref()).await {
            let first = records(&event).into_iter().next();
            return Err(BatchError {
                function: function.to_owned(),
                topic: first.as_ref().map(|r| r.topic.clone()).unwrap_or_default(),
                partition: first.as_ref().map(|r| r.partition).unwrap_or(0),
                offset: first.as_ref().map(|r| r.offset).unwrap_or(0),
                reason: format!("publishing the batch's events failed: {e}"),
            });
        }
        Ok(())
    }
}

/// Keeps the `kind` label bounded: anything unknown is `unknown`.
fn kind_label(kind: &str) -> &'static str {
    EventKind::parse(kind).map(|k| k.as_str()).unwrap_or("unknown")
}
