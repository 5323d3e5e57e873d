//! The per-record driver shared by the consumer functions.
//!
//! A function implements [`RecordHandler`] for one decoded envelope; [`Consumer`] turns it into
//! a [`BatchHandler`] over a whole `KafkaEvent`. Records are handled partition by partition, in
//! offset order. A permanent failure dead-letters that record (with the reason and the original
//! bytes) and the partition moves on; a retriable failure stops the batch and fails it, so the
//! trigger retries it from the last committed offset — everything applied before it in the batch
//! is applied again as a no-op, because every write is conditional on revision.

use crate::kafka::{records, Incoming};
use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_core::event::headers;
use openqq_core::{DeadLetter, Envelope, EventLog, PortError, Topics};
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

/// A consumer function's logic for one record.
#[async_trait]
pub trait RecordHandler: Send + Sync {
    /// The function's name (`design-job`, `validation`, `results`).
    fn name(&self) -> &'static str;
    async fn handle(&self, envelope: Envelope) -> Result<(), RecordError>;
}

/// Wraps a [`RecordHandler`] into a [`BatchHandler`] with dead-lettering.
pub struct Consumer<H> {
    handler: H,
    log: Arc<dyn EventLog>,
    topics: Topics,
}

impl<H: RecordHandler> Consumer<H> {
    pub fn new(handler: H, log: Arc<dyn EventLog>, topics: Topics) -> Self {
        Self { handler, log, topics }
    }

    async fn one(&self, rec: &Incoming) -> Result<(), RecordError> {
        let bytes = rec.value.as_ref().map_err(|e| RecordError::Permanent(e.clone()))?;
        let env = Envelope::decode(bytes).map_err(|e| RecordError::Permanent(e.to_string()))?;
        let span = info_span!(
            "record",
            function = self.handler.name(),
            correlation_id = %env.correlation_id,
            tenant_id = %env.tenant_id,
            design_id = %env.design_id,
            revision = env.revision,
            kind = %env.kind,
        );
        self.handler.handle(env).instrument(span).await
    }

    async fn dead_letter(&self, rec: &Incoming, reason: &str) -> Result<(), PortError> {
        let letter = DeadLetter {
            source_topic: rec.topic.clone(),
            source_partition: rec.partition,
            source_offset: rec.offset,
            function: self.handler.name().to_owned(),
            reason: reason.to_owned(),
            correlation_id: rec.header_str(headers::CORRELATION_ID).map(str::to_owned),
            key_base64: rec.key.as_ref().map(|k| B64.encode(k)),
            value_base64: rec.value.as_ref().ok().map(|v| B64.encode(v)),
            dead_lettered_at: chrono::Utc::now(),
        };
        let key = rec.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_default();
        self.log.publish(&self.topics.dead_letter(), vec![letter.to_record(&key)]).await
    }
}

#[async_trait]
impl<H: RecordHandler> BatchHandler for Consumer<H> {
    fn name(&self) -> &str {
        self.handler.name()
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), BatchError> {
        let function = self.handler.name();
        for rec in records(&event) {
            let kind = rec.header_str(headers::EVENT_KIND).unwrap_or("unknown").to_owned();
            let fail = |reason: String| BatchError {
                function: function.to_owned(),
                topic: rec.topic.clone(),
                partition: rec.partition,
                offset: rec.offset,
                reason,
            };
            let outcome = match self.one(&rec).await {
                Ok(()) => "applied",
                Err(RecordError::Retriable(reason)) => {
                    metrics::counter!("openqq_events_total", "function" => function, "kind" => kind_label(&kind), "outcome" => "retried").increment(1);
                    return Err(fail(reason));
                }
                Err(RecordError::Permanent(reason)) => {
                    warn!(function, topic = %rec.topic, partition = rec.partition, offset = rec.offset,
                        correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(""), %reason,
                        "The record can never succeed and was sent to the dead-letter topic.");
                    self.dead_letter(&rec, &reason).await.map_err(|e| fail(format!("dead-lettering failed: {e}")))?;
                    metrics::counter!("openqq_dead_letters_total", "function" => function, "source" => "handler").increment(1);
                    "dead_lettered"
                }
            };
            metrics::counter!("openqq_events_total", "function" => function, "kind" => kind_label(&kind), "outcome" => outcome).increment(1);
        }
        Ok(())
    }
}

/// Keeps the `kind` label bounded: anything unknown is `unknown`.
fn kind_label(kind: &str) -> &'static str {
    openqq_core::EventKind::parse(kind).map(|k| k.as_str()).unwrap_or("unknown")
}
