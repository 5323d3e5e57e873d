//! Giving up on a record: its dead letter, and what that means for its revision.
//!
//! A dead letter carries the record's own key, value and headers (never an inflated copy), so
//! every record the log accepted can be dead-lettered. When the record names a revision (its
//! envelope decodes), that revision becomes `failed` with the reason, so its tenant sees why
//! instead of a design stuck in `validating`.
//!
//! `openqq dead-letters replay` publishes a dead letter's key, value and headers to its source
//! topic again, with a [`headers::REPLAY_OF`] header naming the dead letter. The consumer hands
//! that to the handler in the envelope (`replay_of`), and the record's store writes follow the
//! replay rule ([`openqq_core::revision::plan_replay`]): the revision this failure marked
//! `failed` is revived at the same revision and moves on. The header is an original header of the
//! replayed record, so if it fails again its new dead letter still says it was a replay.

use crate::kafka::Incoming;
use openqq_core::batch::{BatchItemEnded, ItemStatus};
use openqq_core::event::{clip, headers, MAX_DEAD_LETTER_REASON_BYTES};
use openqq_core::ports::apply_for;
use openqq_core::{
    Change, DeadLetter, DesignWrites, Envelope, EventKind, EventLog, PortError, Record, TimelineEntry, Topics,
};
use tracing::warn;

/// The dead-letter record for `rec`: its original key, value and headers, with the reason and
/// where it came from in headers. Keyed like the original, so it lands on the tenant's partition.
pub fn dead_letter_record(rec: &Incoming, function: &str, reason: &str) -> Record {
    DeadLetter {
        source_topic: rec.topic.clone(),
        source_partition: rec.partition,
        source_offset: rec.offset,
        function: function.to_owned(),
        reason: reason.to_owned(),
        dead_lettered_at: chrono::Utc::now(),
        key: rec.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_default(),
        value: rec.value.as_ref().cloned().unwrap_or_default(),
        headers: rec.headers.clone(),
    }
    .to_record()
}

/// Marks the revision `rec` belongs to as failed, with `reason` and a `design.failed` timeline
/// entry. A record whose envelope does not decode names no revision and changes nothing. Only a
/// retriable store error is returned: the caller must not commit the record yet.
pub async fn fail_revision(store: &dyn DesignWrites, rec: &Incoming, reason: &str) -> Result<(), PortError> {
    let Ok(bytes) = &rec.value else { return Ok(()) };
    let Ok(env) = Envelope::decode(bytes) else { return Ok(()) };
    let entry = TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind: EventKind::DesignFailed,
        revision: env.revision,
        correlation_id: env.correlation_id.clone(),
        occurred_at: chrono::Utc::now(),
    };
    let change = Change::Failed { reason: clip(reason, MAX_DEAD_LETTER_REASON_BYTES).into_owned() };
    // A replayed record that fails again fails the revision its replay revived, once more.
    let replayed = rec.header(headers::REPLAY_OF).is_some();
    match apply_for(store, replayed, &env.tenant_id, &env.design_id, &entry, &change).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_retriable() => Err(e),
        Err(e) => {
            warn!(tenant_id = %env.tenant_id, design_id = %env.design_id, revision = env.revision, error = %e,
                "Marking a dead-lettered revision failed was refused; it keeps its status.");
            Ok(())
        }
    }
}

/// Tells the batch, when `rec` is of a batch item ([`Envelope::batch`]), that its design failed:
/// a `batch.item.ended` record, so the batch counts it and releases its next item. Call once the
/// revision was marked failed ([`fail_revision`]); a repeat is counted once by the batch.
pub async fn end_batch_item(log: &dyn EventLog, topics: &Topics, rec: &Incoming) -> Result<(), PortError> {
    let Ok(bytes) = &rec.value else { return Ok(()) };
    let Ok(env) = Envelope::decode(bytes) else { return Ok(()) };
    if env.batch.is_none() {
        return Ok(());
    }
    let ended = BatchItemEnded { status: ItemStatus::Failed, verdict: None };
    let record = Envelope::new(EventKind::BatchItemEnded, &env.cause(), "runtime", ended).to_record();
    log.publish(&topics.of(EventKind::BatchItemEnded), vec![record]).await
}

/// The message a panic carried, when it is text.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_owned(),
    }
}
