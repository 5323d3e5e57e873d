//! The design-job function: materialises each submitted revision in the store (conditional on
//! revision) and requests its validation.
//!
//! A repeated revision (a re-read, or a client's retried send) is a duplicate: the store is not
//! touched again, but `validation.requested` is published again, because the first attempt may
//! have crashed between the store write and the publish; downstream writes are conditional too,
//! so the extra event changes nothing. A stale revision (older than one already applied) stops
//! here.
//!
//! The specification travels on unchanged, large payloads included as the API left them: by
//! reference to the object store (`netlist_ref`, …), so `validation.requested` is as small as
//! `design.submitted`; only the validation function reads the objects.

use async_trait::async_trait;
use openqq_core::event::DesignSubmitted;
use openqq_core::ports::apply_for;
use openqq_core::{Applied, Change, DesignStore, Envelope, EventKind};
use openqq_runtime::{Outbox, RecordError, RecordHandler};
use std::sync::Arc;

pub const NAME: &str = "design-job";

pub struct DesignJob {
    pub store: Arc<dyn DesignStore>,
}

#[async_trait]
impl RecordHandler for DesignJob {
    type Payload = DesignSubmitted;
    const KIND: EventKind = EventKind::DesignSubmitted;

    fn name(&self) -> &'static str {
        NAME
    }

    async fn handle(&self, env: Envelope<DesignSubmitted>, out: &mut Outbox) -> Result<(), RecordError> {
        let change = Change::Submitted { name: env.payload.spec.name.clone() };
        let replayed = env.replay_of.is_some();
        let applied =
            apply_for(self.store.as_ref(), replayed, &env.tenant_id, &env.design_id, &env.timeline_entry(), &change)
                .await?;
        if applied == Applied::Stale {
            tracing::info!("A stale revision arrived after a newer one and was ignored.");
            return Ok(());
        }
        out.publish(&Envelope::new(EventKind::ValidationRequested, &env.cause(), NAME, env.payload));
        Ok(())
    }
}
