//! The design-job function: materialises each submitted revision in the store (conditional on
//! revision) and requests its validation.
//!
//! A repeated revision (a re-read, or a client's retried send) is a duplicate: the store is not
//! touched again, but `validation.requested` is published again, because the first attempt may
//! have crashed between the store write and the publish; downstream writes are conditional too,
//! so the extra event changes nothing. A stale revision (older than one already applied) stops
//! here.

use async_trait::async_trait;
use openqq_core::event::DesignSubmitted;
use openqq_core::{Applied, Change, DesignStore, Envelope, EventKind, EventLog, Topics};
use openqq_runtime::{RecordError, RecordHandler};
use std::sync::Arc;

pub const NAME: &str = "design-job";

pub struct DesignJob {
    pub store: Arc<dyn DesignStore>,
    pub log: Arc<dyn EventLog>,
    pub topics: Topics,
}

#[async_trait]
impl RecordHandler for DesignJob {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn handle(&self, envelope: Envelope) -> Result<(), RecordError> {
        let env = envelope.typed::<DesignSubmitted>(EventKind::DesignSubmitted).map_err(|e| RecordError::Permanent(e.to_string()))?;
        let change = Change::Submitted { name: env.payload.spec.name.clone() };
        let applied = self.store.apply(&env.tenant_id, &env.design_id, &env.timeline_entry(), &change).await?;
        if applied == Applied::Stale {
            tracing::info!("A stale revision arrived after a newer one and was ignored.");
            return Ok(());
        }
        let request = Envelope::new(EventKind::ValidationRequested, &env.cause(), NAME, env.payload);
        self.log.publish(&self.topics.of(EventKind::ValidationRequested), vec![request.to_record()]).await?;
        Ok(())
    }
}
