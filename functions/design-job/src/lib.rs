//! The design-job function: materialises each submitted revision in the store (conditional on
//! revision) and requests its validation, or, for a revision given as HDL source, its synthesis
//! (`synthesis.requested`, the synthesis function's lane, which then requests validation), or,
//! for one to be written by a model, its generation (`generation.requested`, a lane of its own:
//! one tenant's burst of slow model calls never holds up anyone's source jobs).
//!
//! A repeated revision (a re-read, or a client's retried send) is a duplicate: the store is not
//! touched again, but `validation.requested` is published again, because the first attempt may
//! have crashed between the store write and the publish; downstream writes are conditional too,
//! so the extra event changes nothing. A stale revision (older than one already applied) stops
//! here.
//!
//! Each revision's specification is kept in the store ([`KeptSpecs`]) before it is passed on, so
//! that the design can be validated again later without its client (`{"revalidate": …}` in a
//! batch or a schedule's template): only a later revision's replaces it, so re-reads and stale
//! revisions leave it alone.
//!
//! The specification travels on unchanged, large payloads included as the API left them: by
//! reference to the object store (`netlist_ref`, …), so `validation.requested` is as small as
//! `design.submitted`; only the validation function reads the objects.

use async_trait::async_trait;
use openqq_core::event::DesignSubmitted;
use openqq_core::{Applied, Change, Envelope, EventKind, KeptSpec, KeptSpecs};
use openqq_runtime::{Outbox, RecordError, RecordHandler, Step, Write};
use std::sync::Arc;

pub const NAME: &str = "design-job";

/// Its store writes are named to the consumer ([`RecordHandler::plan`]), which applies them.
#[derive(Clone)]
pub struct DesignJob {
    /// Where each revision's specification is kept.
    pub specs: Arc<dyn KeptSpecs>,
    /// Whether designs to be written by a model go to their own lane (the default), or share the
    /// synthesis lane with designs given as source (`--bulkheads off`: for measuring what the
    /// lane is worth, never for production).
    pub generation_lane: bool,
}

impl DesignJob {
    /// The design-job function keeping specifications in `specs`, with the generation lane.
    pub fn new(specs: Arc<dyn KeptSpecs>) -> Self {
        Self { specs, generation_lane: true }
    }
}

#[async_trait]
impl RecordHandler for DesignJob {
    type Payload = DesignSubmitted;
    /// The submission, to pass on once its revision is stored.
    type State = Envelope<DesignSubmitted>;
    const KIND: EventKind = EventKind::DesignSubmitted;

    fn name(&self) -> &'static str {
        NAME
    }

    fn plan(&self, env: Envelope<DesignSubmitted>) -> Result<Step<Self::State>, RecordError> {
        let change = Change::Submitted { name: env.payload.spec.name.clone() };
        let write = Write::new(&env.cause(), env.replay_of.is_some(), env.timeline_entry(), change);
        Ok(Step::Write(write, env))
    }

    async fn after(
        &self,
        env: Envelope<DesignSubmitted>,
        applied: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Self::State>, RecordError> {
        if applied == Applied::Stale {
            tracing::info!("A stale revision arrived after a newer one and was ignored.");
            return Ok(Step::Done);
        }
        let cause = env.cause();
        let submission = serde_json::to_string(&env.payload)
            .map_err(|e| RecordError::Permanent(format!("the submission does not serialise: {e}")))?;
        let kept = KeptSpec { revision: cause.revision, submission };
        self.specs.keep_spec(&cause.tenant_id, &cause.design_id, &kept).await.map_err(RecordError::from)?;
        // A revision given as HDL source goes to the synthesis function's lane first, one to be
        // written by a model to the generation lane.
        let spec = &env.payload.spec;
        let next = if spec.generate.is_some() && self.generation_lane {
            EventKind::GenerationRequested
        } else if spec.source.is_some() || spec.generate.is_some() {
            EventKind::SynthesisRequested
        } else {
            EventKind::ValidationRequested
        };
        out.publish(&Envelope::new(next, &cause, NAME, env.payload));
        Ok(Step::Done)
    }
}
