//! The results function: marks the revision's results ready (conditional on revision) and
//! publishes `results.ready`. The write enters the tenant's feed, which queues its webhook
//! deliveries in the same store write ([`openqq_core::feed`]); a delivery worker sends them.
//!
//! It needs only the verdict of `validation.finished`, never its report (which the validation
//! function stored, and which travels by reference when large), so it reads no object.
//!

use async_trait::async_trait;
use openqq_core::batch::{BatchItemEnded, ItemStatus};
use openqq_core::event::{ResultsReady, ValidationFinished};
use openqq_core::{Applied, Change, DesignStatus, Envelope, EventKind};
use openqq_runtime::{Outbox, RecordError, RecordHandler, Step, Write};

pub const NAME: &str = "results";

/// Its store writes are named to the consumer ([`RecordHandler::plan`]), which applies them.
pub struct Results;

#[async_trait]
impl RecordHandler for Results {
    type Payload = ValidationFinished;
    /// `results.ready`, to publish once it is stored.
    type State = Envelope<ResultsReady>;
    const KIND: EventKind = EventKind::ValidationFinished;

    fn name(&self) -> &'static str {
        NAME
    }

    fn plan(&self, env: Envelope<ValidationFinished>) -> Result<Step<Self::State>, RecordError> {
        let cause = env.cause();
        let verdict = env.payload.verdict;
        let ready =
            Envelope::new(EventKind::ResultsReady, &cause, NAME, ResultsReady { status: DesignStatus::Ready, verdict });
        let change = Change::ResultsReady { verdict };
        let write = Write::new(&cause, env.replay_of.is_some(), ready.timeline_entry(), change);
        Ok(Step::Write(write, ready))
    }

    async fn after(
        &self,
        ready: Envelope<ResultsReady>,
        applied: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Self::State>, RecordError> {
        if applied != Applied::Stale {
            out.publish(&ready);
            // A batch item's end, for its batch to count (and release the next item).
            if ready.batch.is_some() {
                let ended = BatchItemEnded { status: ItemStatus::Ready, verdict: Some(ready.payload.verdict) };
                out.publish(&Envelope::new(EventKind::BatchItemEnded, &ready.cause(), NAME, ended));
            }
        }
        Ok(Step::Done)
    }
}
