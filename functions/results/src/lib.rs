//! The results function: marks the revision's results ready (conditional on revision), publishes
//! `results.ready` and notifies the tenant.
//!
//! It needs only the verdict of `validation.finished`, never its report (which the validation
//! function stored, and which travels by reference when large), so it reads no object.
//!
//! Notifications are at least once: a re-read batch (a retry, a replay) notifies again, and each
//! notification carries a new `event_id`, so receivers de-duplicate on (design_id, revision), not
//! on `event_id`. A failing notifier is logged and counted but does not hold the partition back.

use async_trait::async_trait;
use openqq_core::event::{ResultsReady, ValidationFinished};
use openqq_core::ports::apply_for;
use openqq_core::{Applied, Change, DesignStatus, DesignStore, Envelope, EventKind, Notification, Notifier};
use openqq_runtime::{Outbox, RecordError, RecordHandler};
use std::sync::Arc;

pub const NAME: &str = "results";

pub struct Results {
    pub store: Arc<dyn DesignStore>,
    pub notifier: Arc<dyn Notifier>,
}

#[async_trait]
impl RecordHandler for Results {
    type Payload = ValidationFinished;
    const KIND: EventKind = EventKind::ValidationFinished;

    fn name(&self) -> &'static str {
        NAME
    }

    async fn handle(&self, env: Envelope<ValidationFinished>, out: &mut Outbox) -> Result<(), RecordError> {
        let cause = env.cause();
        let verdict = env.payload.verdict;
        let ready =
            Envelope::new(EventKind::ResultsReady, &cause, NAME, ResultsReady { status: DesignStatus::Ready, verdict });
        let change = Change::ResultsReady { verdict };
        let replayed = env.replay_of.is_some();
        let applied = apply_for(
            self.store.as_ref(),
            replayed,
            &cause.tenant_id,
            &cause.design_id,
            &ready.timeline_entry(),
            &change,
        )
        .await?;
        if applied == Applied::Stale {
            return Ok(());
        }
        out.publish(&ready);
        let note = Notification {
            event_id: ready.event_id,
            tenant_id: cause.tenant_id,
            design_id: cause.design_id,
            revision: cause.revision,
            status: DesignStatus::Ready,
            verdict,
            correlation_id: cause.correlation_id,
        };
        if let Err(e) = self.notifier.notify(&note).await {
            metrics::counter!("openqq_notification_failures_total").increment(1);
            tracing::warn!(error = %e, "Notifying the tenant failed; the results are stored and readable.");
        }
        Ok(())
    }
}
