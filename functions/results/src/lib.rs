//! The results function: marks the revision's results ready (conditional on revision) and
//! publishes `results.ready`. The write enters the tenant's feed, which queues its webhook
//! deliveries in the same store write ([`openqq_core::feed`]); a delivery worker sends them.
//!
//! It needs only the verdict of `validation.finished`, never its report (which the validation
//! function stored, and which travels by reference when large), so it reads no object.
//!

use async_trait::async_trait;
use openqq_core::event::{ResultsReady, ValidationFinished};
use openqq_core::ports::apply_for;
use openqq_core::{Applied, Change, DesignStatus, DesignStore, Envelope, EventKind};
use openqq_runtime::{Outbox, RecordError, RecordHandler};
use std::sync::Arc;

pub const NAME: &str = "results";

pub struct Results {
    pub store: Arc<dyn DesignStore>,
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
        Ok(())
    }
}
