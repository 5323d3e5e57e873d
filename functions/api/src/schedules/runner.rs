//! The scheduler: reads the schedules that are due, asks `openqq_schedule::decide` what becomes
//! of each fire, records every outcome in the ledger (the first record of a nominal time wins)
//! and submits only the fires whose record it created ([`super::fire`]). `openqq up` runs it
//! every second and whenever it is woken ([`Scheduler::run`]); anything that holds the store can
//! run [`Scheduler::tick`], and two runners on one store never submit a fire twice.
//!
//! Per schedule, a pass: whether its last batch still runs (read through the `Batches` role:
//! not final), the decision, then in order the released buffered fire, the summary of fires
//! certainly missed, and each fire; the runner's state is saved last, on condition that nobody
//! wrote the schedule since it was read. A fire left `pending` (its submission failed for now, or
//! another runner is submitting it) holds the schedule there: the state does not move past it,
//! and the schedule is looked at again a second later.

use super::fire::{self, FireError};
use crate::AppState;
use chrono::{DateTime, TimeDelta, Utc};
use openqq_core::batch::BatchStatus;
use openqq_core::schedule::{DueSchedule, FireOutcome, FireRecord, RunnerState, Settle, StoredSchedule};
use openqq_core::{BatchId, PortError, TenantId};
use openqq_schedule::{decide, fire_time, next_fires, Clock, Decision, Fire, FireState, Limits, Outcome};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Schedules handled in one pass at most; more wait for the next.
const MAX_DUE: usize = 100;
/// How often a schedule with a buffered fire is looked at, for its batch's end.
const BUFFER_POLL: TimeDelta = TimeDelta::seconds(5);
/// How soon a schedule held by a pending fire is looked at again.
const PENDING_POLL: TimeDelta = TimeDelta::seconds(1);

/// Fires due schedules; see the module's doc.
#[derive(Clone)]
pub struct Scheduler {
    state: AppState,
    clock: Arc<dyn Clock>,
}

impl Scheduler {
    /// A scheduler over the API's state (its store, log, objects and clock).
    pub fn new(state: AppState) -> Self {
        let clock = state.clock.clock.clone();
        Self { state, clock }
    }

    /// Runs passes every `every` and whenever `wake` is notified, until `stop` resolves.
    pub async fn run(self, every: Duration, wake: Arc<Notify>, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => {}
                _ = wake.notified() => {}
            }
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "A pass of the scheduler failed; the next pass tries again.");
            }
        }
    }

    /// One pass over the schedules due now; how many were handled.
    pub async fn tick(&self) -> Result<usize, PortError> {
        let now = self.clock.now();
        let due = self.state.schedules.due_schedules(now, MAX_DUE).await?;
        let handled = due.len();
        for DueSchedule { tenant, schedule } in due {
            if let Err(e) = self.handle(&tenant, &schedule, now).await {
                tracing::warn!(error = %e, tenant_id = %tenant, schedule_id = %schedule.id,
                    "A schedule's fires could not be handled now; they are handled at a later pass.");
            }
        }
        Ok(handled)
    }

    async fn handle(&self, tenant: &TenantId, schedule: &StoredSchedule, now: DateTime<Utc>) -> Result<(), FireError> {
        let domain = schedule.domain();
        let mut st = schedule.state.clone();
        let running = match &st.last_batch {
            Some(batch) => self.running(tenant, batch).await?,
            None => false,
        };
        let fire_state = FireState { last_handled: st.last_handled, running, buffered: st.buffered };
        let decision = decide(&domain, &fire_state, now, Limits::default());
        let held = self.carry_out(tenant, schedule, &decision, &mut st, now).await?;
        let next_due = match (schedule.config.paused, held, decision.more_due) {
            (true, _, _) => None,
            (false, true, _) => Some(now + PENDING_POLL),
            (false, false, true) => Some(now),
            (false, false, false) => next_due(schedule, &st, now),
        };
        self.state.schedules.save_runner_state(tenant, &schedule.id, schedule.version, &st, next_due).await?;
        Ok(())
    }

    /// Records and executes `decision` in its order; whether a pending fire holds the schedule.
    async fn carry_out(
        &self,
        tenant: &TenantId,
        schedule: &StoredSchedule,
        decision: &Decision,
        st: &mut RunnerState,
        now: DateTime<Utc>,
    ) -> Result<bool, FireError> {
        if let Some(released) = decision.released {
            if self.release(tenant, schedule, released, st, now).await? {
                return Ok(true);
            }
        }
        if let Some(range) = decision.missed_range {
            let reason = format!(
                "missed, with every fire after {} through it: more than the catch-up window late",
                range.after.to_rfc3339()
            );
            self.record(tenant, schedule, range.through, FireOutcome::Missed, Some(reason), now).await?;
            st.last_handled = Some(range.through);
        }
        for f in &decision.fires {
            let record = match f.outcome {
                Outcome::Submit => fire::fire(&self.state, tenant, schedule, f.nominal, now).await?.record,
                Outcome::Buffered => {
                    let record = self.record(tenant, schedule, f.nominal, FireOutcome::Buffered, None, now).await?;
                    if record.outcome == FireOutcome::Buffered {
                        st.buffered = Some(f.nominal);
                    }
                    record
                }
                Outcome::Missed => {
                    let reason = "more than the catch-up window late".to_owned();
                    self.record(tenant, schedule, f.nominal, FireOutcome::Missed, Some(reason), now).await?
                }
                Outcome::SkippedOverlap => {
                    let reason = match &st.last_batch {
                        Some(b) => format!("the schedule's batch {b} was still running"),
                        None => "the schedule's previous batch was still running".to_owned(),
                    };
                    self.record(tenant, schedule, f.nominal, FireOutcome::SkippedOverlap, Some(reason), now).await?
                }
            };
            if note(&record, st) {
                return Ok(true);
            }
            st.last_handled = Some(f.nominal);
        }
        Ok(false)
    }

    /// The buffered fire, its batch ended: submitted, or missed if it waited too long.
    async fn release(
        &self,
        tenant: &TenantId,
        schedule: &StoredSchedule,
        released: Fire,
        st: &mut RunnerState,
        now: DateTime<Utc>,
    ) -> Result<bool, FireError> {
        let to = match released.outcome {
            Outcome::Submit => {
                Settle { outcome: FireOutcome::Pending, batch_id: Some(BatchId::generate()), reason: None }
            }
            _ => Settle {
                outcome: FireOutcome::Missed,
                batch_id: None,
                reason: Some("buffered until it was more than the catch-up window late".into()),
            },
        };
        let settled = self
            .state
            .schedules
            .settle_fire(tenant, &schedule.id, released.nominal, FireOutcome::Buffered, &to)
            .await?;
        st.buffered = None;
        let Some((changed, record)) = settled else { return Ok(false) };
        let record = match (changed, record.outcome) {
            (true, FireOutcome::Pending) => fire::submit(&self.state, tenant, schedule, &record).await?,
            (_, FireOutcome::Pending) => fire::follow_up(&self.state, tenant, schedule, record, now).await?,
            _ => record,
        };
        Ok(note(&record, st))
    }

    /// Records a fire that submits nothing; the ledger's record of it (this one, or the first).
    async fn record(
        &self,
        tenant: &TenantId,
        schedule: &StoredSchedule,
        nominal: DateTime<Utc>,
        outcome: FireOutcome,
        reason: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<FireRecord, FireError> {
        let fire = FireRecord { nominal_time: nominal, fired_at: now, outcome, batch_id: None, reason };
        let recorded = self.state.schedules.record_fire(tenant, &schedule.id, &fire).await?;
        match recorded.created {
            true => Ok(recorded.record),
            false => Ok(fire::follow_up(&self.state, tenant, schedule, recorded.record, now).await?),
        }
    }

    /// Whether the schedule's batch is still on its way (not final; one not created yet is).
    async fn running(&self, tenant: &TenantId, batch: &BatchId) -> Result<bool, FireError> {
        let view = self.state.batches.batch(tenant, batch).await?;
        Ok(view
            .is_none_or(|v| !matches!(v.status, BatchStatus::Completed | BatchStatus::Cancelled | BatchStatus::Failed)))
    }
}

/// Notes what a fire's record means for the runner's state; whether it is still pending (which
/// holds the schedule there).
fn note(record: &FireRecord, st: &mut RunnerState) -> bool {
    if let (FireOutcome::Submitted | FireOutcome::Pending, Some(batch)) = (record.outcome, &record.batch_id) {
        st.last_batch = Some(batch.clone());
    }
    record.outcome == FireOutcome::Pending
}

/// When the schedule should be looked at next: its next fire's time, or sooner while a fire is
/// buffered (to see its batch end).
pub fn next_due(schedule: &StoredSchedule, st: &RunnerState, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if schedule.config.paused {
        return None;
    }
    let domain = schedule.domain();
    let after = st.last_handled.map_or(domain.active_since(), |last| last.max(domain.active_since()));
    let next = next_fires(&domain, after, 1).first().map(|nominal| fire_time(&domain, *nominal));
    match st.buffered {
        Some(_) => Some(next.map_or(now + BUFFER_POLL, |n| n.min(now + BUFFER_POLL))),
        None => next,
    }
}
