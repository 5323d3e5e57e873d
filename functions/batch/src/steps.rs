//! What one record of the batch topics does: a submitted batch fans out, an ended item is counted
//! and makes room for the next.

use crate::{BatchFunction, StepError, NAME};
use openqq_core::batch::{
    read_items_object, released_by, BatchId, BatchItemEnded, BatchState, BatchSubmitted, BatchSummary, BatchView,
    ItemRef, ItemStatus, NewBatch, NewItem, MAX_BATCH_ITEMS,
};
use openqq_core::event::Origin;
use openqq_core::{EventKind, NewFeedEntry, PortError, Record, TenantId, TimelineEntry};
use openqq_runtime::kafka::Incoming;
use serde_json::value::RawValue;
use std::ops::Range;

impl BatchFunction {
    pub(crate) async fn record(&self, rec: &Incoming, out: &mut Vec<(String, Record)>) -> Result<(), StepError> {
        let bytes = rec.value.as_ref().map_err(|e| StepError::Permanent(e.clone()))?;
        let env = openqq_core::Envelope::decode(bytes).map_err(|e| StepError::Permanent(e.to_string()))?;
        match env.kind {
            EventKind::BatchSubmitted => {
                let env = env
                    .typed::<BatchSubmitted>(EventKind::BatchSubmitted)
                    .map_err(|e| StepError::Permanent(e.to_string()))?;
                self.submitted(&env.cause(), &env.payload, out).await
            }
            EventKind::BatchItemEnded => {
                let env = env
                    .typed::<BatchItemEnded>(EventKind::BatchItemEnded)
                    .map_err(|e| StepError::Permanent(e.to_string()))?;
                let item =
                    env.batch.clone().ok_or_else(|| StepError::Permanent("the event names no batch item".into()))?;
                self.ended(&env.cause(), &item, &env.payload, out).await
            }
            other => Err(StepError::Permanent(format!("the batch function does not handle {other} events"))),
        }
    }

    /// Creates the batch (once) and releases its first window.
    async fn submitted(
        &self,
        cause: &Origin,
        batch: &BatchSubmitted,
        out: &mut Vec<(String, Record)>,
    ) -> Result<(), StepError> {
        let tenant = &cause.tenant_id;
        if self.batches.batch(tenant, &batch.batch_id).await?.is_none() {
            self.create(tenant, batch).await?;
        }
        self.release(cause, &batch.batch_id, 0..self.limits.in_flight, out).await?;
        // A batch of rejected items only is final at once.
        if let Some(view) = self.batches.batch(tenant, &batch.batch_id).await? {
            self.complete_if_final(cause, &view).await?;
        }
        Ok(())
    }

    /// Creates the batch from its items object, which then goes if it is this batch's alone
    /// ([`openqq_core::batch::ItemsHeader`]). The API creates the batch too, and deletes the
    /// object once it has: an object gone by the time it is read is fine once the batch is there.
    async fn create(&self, tenant: &TenantId, batch: &BatchSubmitted) -> Result<(), StepError> {
        let bytes = match self.objects.get(tenant, &batch.items_ref.digest).await {
            Err(PortError::NotFound) if self.batches.batch(tenant, &batch.batch_id).await?.is_some() => return Ok(()),
            read => read?,
        };
        let (items, own) = items(batch, &bytes)?;
        let new = NewBatch {
            id: batch.batch_id.clone(),
            name: batch.name.clone(),
            max_failed: batch.max_failed,
            created_at: chrono::Utc::now(),
        };
        self.batches.create_batch(tenant, &new, &items).await?;
        tracing::info!(tenant_id = %tenant, batch_id = %batch.batch_id, items = items.len(), "A batch was created.");
        if own {
            if let Err(e) = self.objects.delete(tenant, &batch.items_ref.digest).await {
                tracing::warn!(error = %e, tenant_id = %tenant, batch_id = %batch.batch_id,
                    "A batch's items object could not be deleted once the batch was created; it is left behind.");
            }
        }
        Ok(())
    }
}

/// The batch's items, as the API kept them (one JSON line each), and whether the object is this
/// batch's alone.
fn items(batch: &BatchSubmitted, bytes: &[u8]) -> Result<(Vec<NewItem>, bool), StepError> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| StepError::Permanent("the batch's items are not UTF-8".into()))?;
    let object = read_items_object(text, MAX_BATCH_ITEMS).map_err(StepError::Permanent)?;
    let own = object.batch_id.as_ref() == Some(&batch.batch_id);
    let items: Vec<NewItem> = object.items.into_iter().enumerate().map(|(i, item)| item.into_new(i as u32)).collect();
    if items.len() > MAX_BATCH_ITEMS || items.len() != batch.items as usize {
        return Err(StepError::Permanent(format!(
            "the batch's object holds {} items where its record says {}",
            items.len(),
            batch.items
        )));
    }
    Ok((items, own))
}

impl BatchFunction {
    /// Releases the items of `indexes` and queues a `design.submitted` for each on the batch lane.
    async fn release(
        &self,
        cause: &Origin,
        batch_id: &BatchId,
        indexes: Range<u32>,
        out: &mut Vec<(String, Record)>,
    ) -> Result<(), StepError> {
        for item in self.batches.release_items(&cause.tenant_id, batch_id, indexes).await? {
            let payload = RawValue::from_string(item.submission)
                .map_err(|e| StepError::Permanent(format!("item {} was stored unreadable: {e}", item.index)))?;
            let origin = Origin {
                tenant_id: cause.tenant_id.clone(),
                design_id: item.design_id,
                revision: item.revision,
                correlation_id: cause.correlation_id.clone(),
                batch: Some(ItemRef { batch_id: batch_id.clone(), index: item.index }),
            };
            let env = openqq_core::Envelope::new(EventKind::DesignSubmitted, &origin, NAME, payload);
            out.push((self.topics.lane(EventKind::DesignSubmitted, true), env.to_record()));
        }
        Ok(())
    }

    /// Counts an item's end, releases the item it makes room for, and ends the batch when due.
    async fn ended(
        &self,
        cause: &Origin,
        item: &ItemRef,
        ended: &BatchItemEnded,
        out: &mut Vec<(String, Record)>,
    ) -> Result<(), StepError> {
        let tenant = &cause.tenant_id;
        // `cancelled` is the API's word that it stopped the batch: nothing to count, but the
        // batch may have ended with it.
        let view = if ended.status == ItemStatus::Cancelled {
            self.batches.batch(tenant, &item.batch_id).await?
        } else {
            let done = self.batches.end_item(tenant, &item.batch_id, item.index, ended.status, ended.verdict).await?;
            match done {
                Some(done) => {
                    if let Some(ordinal) = done.ordinal {
                        let next = released_by(ordinal, self.limits.in_flight);
                        self.release(cause, &item.batch_id, next..next.saturating_add(1), out).await?;
                    }
                    Some(self.fail_past_threshold(tenant, done.batch).await?)
                }
                None => None,
            }
        };
        match view {
            Some(view) => self.complete_if_final(cause, &view).await,
            None => {
                tracing::warn!(tenant_id = %tenant, batch_id = %item.batch_id, index = item.index,
                    "An item's end names a batch item the tenant does not have; it is ignored.");
                Ok(())
            }
        }
    }

    /// Fails the batch (cancelling what is queued) once more items failed than it tolerates.
    async fn fail_past_threshold(&self, tenant: &TenantId, view: BatchView) -> Result<BatchView, StepError> {
        let past = view.max_failed.is_some_and(|m| m.exceeded(&view.counts));
        if !past || view.reason.is_some() {
            return Ok(view);
        }
        let max = view.max_failed.map(|m| m.to_text()).unwrap_or_default();
        let reason =
            format!("{} items failed, more than max_failed ({max}): the rest was cancelled", view.counts.failed);
        tracing::info!(tenant_id = %tenant, batch_id = %view.batch_id, %reason, "A batch failed past its threshold.");
        Ok(self.batches.stop_batch(tenant, &view.batch_id, BatchState::Failed, &reason).await?.unwrap_or(view))
    }

    /// Appends `batch.completed` to the tenant's feed once no item is open (the feed keeps one
    /// entry per batch, so a repeat appends nothing).
    async fn complete_if_final(&self, cause: &Origin, view: &BatchView) -> Result<(), StepError> {
        if !view.counts.is_final() {
            return Ok(());
        }
        let entry = TimelineEntry {
            event_id: uuid::Uuid::now_v7(),
            kind: EventKind::BatchCompleted,
            revision: 1,
            correlation_id: cause.correlation_id.clone(),
            occurred_at: chrono::Utc::now(),
        };
        let design = view.batch_id.as_design();
        let summary = BatchSummary {
            status: view.status,
            counts: view.counts,
            verdicts: view.verdicts,
            reason: view.reason.clone(),
        };
        let new =
            NewFeedEntry { design_id: &design, entry: &entry, verdict: None, elapsed_ms: None, batch: Some(&summary) };
        self.feed.append_feed(&cause.tenant_id, &new).await?;
        Ok(())
    }
}
