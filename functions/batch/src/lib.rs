//! The batch function: fans a batch out into its items and tracks it to its end
//! (`openqq_core::batch` says how a batch works).
//!
//! It consumes two topics, both keyed by tenant:
//! - `batch.submitted`: creates the batch and its items in the store (once: a re-read finds the
//!   batch and creates nothing) and releases the first window of items, each published as
//!   `design.submitted` on the batch lane (`batch.design.submitted`) with the item in its envelope;
//! - `batch.item.ended`: ends the item in the store (once), releases the item its end makes room
//!   for, fails the batch past its `max_failed`, and once nothing is open appends
//!   `batch.completed` to the tenant's feed (which keeps one entry per batch: exactly once).
//!
//! Every step is a conditional write that a re-read repeats as a no-op, and what a record
//! publishes is published before its partition's offset is committed, so a crash anywhere
//! re-reads the record and ends the same: no item submitted twice, none lost.

mod steps;

use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use openqq_core::batch::{BatchLimits, Batches};
use openqq_core::{DesignWrites, EventLog, ObjectStore, Record, Topics};
use openqq_runtime::dead_letter::dead_letter_record;
use openqq_runtime::kafka::{records, Incoming};
use openqq_runtime::{BatchError, BatchHandler, FailedPartitions};
use std::sync::Arc;

pub const NAME: &str = "batch";

/// What the batch function reaches.
pub struct BatchFunction {
    pub batches: Arc<dyn Batches>,
    /// Where `batch.completed` enters the tenant's feed.
    pub feed: Arc<dyn DesignWrites>,
    /// Where a batch's items wait as one object of the tenant.
    pub objects: Arc<dyn ObjectStore>,
    pub log: Arc<dyn EventLog>,
    pub topics: Topics,
    pub limits: BatchLimits,
}

/// Why a record of the batch topics failed.
#[derive(Debug)]
pub(crate) enum StepError {
    /// Worth retrying: the partition fails from this record.
    Retriable(String),
    /// Never succeeds: the record is dead-lettered and the partition moves on.
    Permanent(String),
}

impl From<openqq_core::PortError> for StepError {
    fn from(e: openqq_core::PortError) -> Self {
        match e.is_retriable() {
            true => StepError::Retriable(e.to_string()),
            false => StepError::Permanent(e.to_string()),
        }
    }
}

impl BatchFunction {
    /// Handles one partition's records in order; what they publish leaves before it returns.
    async fn partition(&self, recs: &[Incoming]) -> Result<(), BatchError> {
        let mut out: Vec<(String, Record)> = Vec::new();
        let fail = |rec: &Incoming, reason: String| BatchError {
            function: NAME.to_owned(),
            topic: rec.topic.clone(),
            partition: rec.partition,
            offset: rec.offset,
            reason,
        };
        let mut failed = None;
        for rec in recs {
            match self.record(rec, &mut out).await {
                Ok(()) => {}
                Err(StepError::Permanent(reason)) => {
                    tracing::warn!(topic = %rec.topic, partition = rec.partition, offset = rec.offset, %reason,
                        "A batch record can never succeed; it is dead-lettered.");
                    out.push((self.topics.dead_letter(), dead_letter_record(rec, NAME, &reason)));
                }
                Err(StepError::Retriable(reason)) => {
                    failed = Some(fail(rec, reason));
                    break;
                }
            }
        }
        for (topic, run) in openqq_core::ports::by_topic(out) {
            if let Err(e) = self.log.publish(&topic, run).await {
                return Err(fail(&recs[0], format!("publishing what the batch records caused failed: {e}")));
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

#[async_trait]
impl BatchHandler for BatchFunction {
    fn name(&self) -> &str {
        NAME
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions> {
        let mut partitions: Vec<Vec<Incoming>> = Vec::new();
        for rec in records(&event) {
            match partitions.iter_mut().find(|p| p[0].topic == rec.topic && p[0].partition == rec.partition) {
                Some(p) => p.push(rec),
                None => partitions.push(vec![rec]),
            }
        }
        let mut failures = Vec::new();
        for recs in &partitions {
            if let Err(e) = self.partition(recs).await {
                failures.push(e);
            }
        }
        FailedPartitions::earliest(failures).map_or(Ok(()), Err)
    }
}
