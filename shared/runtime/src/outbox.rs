//! The events a batch's handlers publish, kept in order until the batch flushes them.

use openqq_core::ports::{by_topic, check_record_sizes};
use openqq_core::{Envelope, EventLog, PortError, Record, Topics};
use serde::Serialize;

/// Events a handler wants published, kept in order until the batch flushes them.
///
/// An event over the log's record limit is never queued: the outbox remembers why, and the
/// [`crate::Consumer`] turns that into a permanent failure of the record being handled (dead
/// letter, revision failed) instead of a batch whose flush fails on every retry.
#[derive(Debug)]
pub struct Outbox {
    topics: Topics,
    records: Vec<(String, Record)>,
    /// Why an event of the record being handled could not be queued.
    refused: Option<String>,
}

impl Outbox {
    pub fn new(topics: Topics) -> Self {
        Self { topics, records: Vec::new(), refused: None }
    }

    /// Queues `envelope` for its kind's topic (in the batch lane for a batch item's), unless its
    /// record is over the size limit.
    pub fn publish<P: Serialize>(&mut self, envelope: &Envelope<P>) {
        let record = envelope.to_record();
        if let Err(e) = check_record_sizes(std::slice::from_ref(&record)) {
            self.refused
                .get_or_insert_with(|| format!("the {} event it produced cannot be published: {e}", envelope.kind));
            return;
        }
        self.records.push((self.topics.lane(envelope.kind, envelope.batch.is_some()), record));
    }

    /// The queued records, oldest first.
    pub fn records(&self) -> &[(String, Record)] {
        &self.records
    }

    /// Why an event was refused since the last call, if one was.
    pub(crate) fn take_refusal(&mut self) -> Option<String> {
        self.refused.take()
    }

    /// Drops what was queued after the first `len` records (a handler that panicked half-way).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.records.truncate(len);
    }

    /// Publishes everything queued, one append per topic with that topic's records in the order
    /// they were queued, topics in the order they first appear; then empties the outbox. (A
    /// handler that emits `validation.started` and `validation.finished` per record makes two
    /// appends a batch, not two a record: each append waits for its acknowledgement.) Order
    /// across topics is not something consumers can rely on: each topic has its own consumers.
    pub async fn flush(&mut self, log: &dyn EventLog) -> Result<(), PortError> {
        for (topic, run) in by_topic(std::mem::take(&mut self.records)) {
            log.publish(&topic, run).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openqq_core::event::Origin;
    use openqq_core::{CorrelationId, DesignId, EventKind, TenantId};

    #[test]
    fn an_event_over_the_record_limit_is_refused_with_a_reason_and_not_queued() {
        let cause = Origin {
            tenant_id: TenantId::parse("acme").unwrap(),
            design_id: DesignId::parse("d").unwrap(),
            revision: 1,
            correlation_id: CorrelationId::parse("c").unwrap(),
            batch: None,
        };
        let mut out = Outbox::new(Topics::default());
        out.publish(&Envelope::new(EventKind::ValidationStarted, &cause, "t", ()));
        let huge = "x".repeat(openqq_core::ports::MAX_RECORD_BYTES);
        out.publish(&Envelope::new(EventKind::ValidationFinished, &cause, "t", huge));
        assert_eq!(out.records().len(), 1, "only the event that fits is queued");
        let reason = out.take_refusal().expect("the refusal is remembered");
        assert!(reason.contains("validation.finished") && reason.contains("limit"), "{reason}");
        assert!(out.take_refusal().is_none());
    }
}
