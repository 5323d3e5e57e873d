//! The fire decision: given a schedule, what its ledger says and the time, which fires are due
//! and what becomes of each. Pure: the runner gathers the inputs, calls [`decide`], and records
//! and executes the result.
//!
//! **The ledger.** Every outcome is recorded under its [`FireKey`] — the schedule's id and the
//! fire's *nominal* time, never an attempt id — with a conditional insert, and only the runner
//! whose insert succeeded submits. Two runners deciding at once therefore compute the same fires
//! (the decision is a function of its inputs, jitter included) and only one of them submits each;
//! a runner restarting after recording decides again from the ledger and finds nothing new.
//! [`FireState::last_handled`] is the highest nominal time recorded: fires at or before it are
//! never due again, so a clock stepped backwards (`now` before it) yields nothing new.
//!
//! **What is due.** Fires strictly after the later of `last_handled` and
//! [`Schedule::active_since`] (so a new schedule counts only fires after its creation, and a
//! resumed one only fires after its resumption), whose fire time (nominal plus jitter) has come.
//! Fires are handled in nominal order and a fire waits for the one before it, so jitter never
//! reorders them and `last_handled` stays a watermark.
//!
//! **Outcomes.** A fire more than `catch_up` late (measured from its jittered fire time) is
//! [`Outcome::Missed`]: recorded, not run. Otherwise, if no batch of the schedule is running it is
//! [`Outcome::Submit`]ted — and from then on counts as running for the fires after it in the same
//! decision, so after an outage a `skip` schedule runs the oldest fire still within the window and
//! skips the rest (as Temporal's schedules do). While a batch runs, `skip` gives
//! [`Outcome::SkippedOverlap`]; `buffer_one` gives [`Outcome::Buffered`] to the first fire if none
//! is waiting and skips the others; `allow` submits every one. A buffered fire is
//! [`Decision::released`] by the first decision that sees its batch finished: submitted, or
//! missed if by then it is more than `catch_up` late.
//!
//! **Pause.** A paused schedule's decision is empty: nothing runs, nothing is recorded, and a
//! buffered fire keeps waiting (Temporal's behaviour). The fires that fell while paused never
//! become due: the caller sets [`Schedule::resumed_at`] on unpausing.
//!
//! **Bounds.** After a long outage a per-minute schedule has thousands of fires to account for.
//! One decision lists at most [`Limits::max_fires`] fires. Of the fires certainly missed (older
//! than the window even with the largest jitter), only the last [`Limits::max_missed`] are listed;
//! the earlier ones come back as one [`MissedRange`], recorded as one ledger entry, found without
//! walking them one by one. When more fires are due than listed, [`Decision::more_due`] is set and
//! the runner decides again once it has recorded these.

use crate::config::{OverlapPolicy, Schedule};
use crate::fires::Fires;
use crate::jitter::fire_time;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What the ledger and the runner know about a schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FireState {
    /// The highest nominal time recorded in the ledger; `None` for a schedule never handled.
    pub last_handled: Option<DateTime<Utc>>,
    /// A batch submitted by this schedule is still running.
    pub running: bool,
    /// The nominal time of a buffered fire waiting for that batch (`buffer_one` only).
    pub buffered: Option<DateTime<Utc>>,
}

/// How much one decision returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most fires listed in [`Decision::fires`] (at least 1).
    pub max_fires: usize,
    /// The most certainly-missed fires listed one by one before the rest are summarised as a
    /// [`MissedRange`] (at most `max_fires`).
    pub max_missed: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_fires: 100, max_missed: 10 }
    }
}

/// What becomes of a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Submit the batch now.
    Submit,
    /// The previous batch is still running and the policy is `skip` (or the buffer is full).
    SkippedOverlap,
    /// More than the catch-up window late: recorded, not run.
    Missed,
    /// Waits for the running batch to finish (`buffer_one`).
    Buffered,
}

/// The ledger's key for a fire: the schedule and the nominal time. It is the idempotency key of
/// the fire's batch, the same for every runner and every attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FireKey {
    pub schedule_id: String,
    pub nominal: DateTime<Utc>,
}

/// One fire and its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fire {
    /// When the expression says the schedule fires; with the schedule's id, the ledger key.
    pub nominal: DateTime<Utc>,
    /// When it runs: nominal plus the jitter offset.
    pub at: DateTime<Utc>,
    pub outcome: Outcome,
}

impl Fire {
    pub fn key(&self, schedule: &Schedule) -> FireKey {
        FireKey { schedule_id: schedule.id.clone(), nominal: self.nominal }
    }
}

/// Every fire in `(after, through]` was missed and is not listed. Recorded as one ledger entry
/// under the key of `through`, which is a nominal fire time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissedRange {
    pub after: DateTime<Utc>,
    pub through: DateTime<Utc>,
}

/// The outcome of [`decide`]. Record it in order — `released`, `missed_range`, then `fires` —
/// so a runner that dies part way has recorded a prefix, and its successor carries on from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// The buffered fire, now that the batch it waited for finished: [`Outcome::Submit`] or
    /// [`Outcome::Missed`]. Its nominal time is already in the ledger (as buffered): record the
    /// release as a conditional change of that entry from buffered, so one runner releases it.
    pub released: Option<Fire>,
    /// Certainly-missed fires summarised rather than listed.
    pub missed_range: Option<MissedRange>,
    /// Newly handled fires in nominal order.
    pub fires: Vec<Fire>,
    /// More fires were due than [`Limits::max_fires`]: decide again after recording these.
    pub more_due: bool,
}

impl Decision {
    /// The new [`FireState::last_handled`] once everything here is recorded, if it moved.
    pub fn handled_through(&self) -> Option<DateTime<Utc>> {
        self.fires.last().map(|f| f.nominal).or(self.missed_range.map(|r| r.through))
    }

    /// Nothing to record or run.
    pub fn is_empty(&self) -> bool {
        self.released.is_none() && self.missed_range.is_none() && self.fires.is_empty()
    }
}

/// Decides which fires of `schedule` are due at `now` and what becomes of each.
pub fn decide(schedule: &Schedule, state: &FireState, now: DateTime<Utc>, limits: Limits) -> Decision {
    let mut decision = Decision::default();
    if schedule.config.paused {
        return decision;
    }
    let window = Window::new(schedule, now);
    let mut batch = Batch { running: state.running, buffered: state.buffered };
    decision.released = batch.release(schedule, &window);
    let active_since = schedule.active_since();
    let lower = state.last_handled.map_or(active_since, |last| last.max(active_since));
    let max_fires = limits.max_fires.max(1);
    let after = list_certainly_missed(schedule, &window, lower, limits.max_missed.min(max_fires), &mut decision);
    list_due(schedule, &window, after, max_fires, &mut batch, &mut decision);
    decision
}

/// `now` and how late a fire may be.
struct Window {
    now: DateTime<Utc>,
    catch_up: TimeDelta,
    /// The largest jitter offset (exclusive).
    jitter: TimeDelta,
}

impl Window {
    fn new(schedule: &Schedule, now: DateTime<Utc>) -> Window {
        let catch_up = TimeDelta::from_std(schedule.config.catch_up).unwrap_or(TimeDelta::MAX);
        let jitter = schedule.config.jitter.and_then(|j| TimeDelta::from_std(j).ok()).unwrap_or_default();
        Window { now, catch_up, jitter }
    }

    /// A fire running at `at` is more than the catch-up window late.
    fn late(&self, at: DateTime<Utc>) -> bool {
        self.now.signed_duration_since(at) > self.catch_up
    }

    /// Fires with a nominal time before this are late whatever their jitter offset.
    fn certainly_missed_before(&self) -> Option<DateTime<Utc>> {
        self.now.checked_sub_signed(self.catch_up)?.checked_sub_signed(self.jitter)
    }
}

/// The schedule's batch as the decision goes along: a submitted fire makes it running.
struct Batch {
    running: bool,
    buffered: Option<DateTime<Utc>>,
}

impl Batch {
    /// Releases the buffered fire if the batch it waited for has finished.
    fn release(&mut self, schedule: &Schedule, window: &Window) -> Option<Fire> {
        let nominal = self.buffered.filter(|_| !self.running)?;
        let at = fire_time(schedule, nominal);
        let outcome = if window.late(at) { Outcome::Missed } else { Outcome::Submit };
        self.running = outcome == Outcome::Submit;
        self.buffered = None;
        Some(Fire { nominal, at, outcome })
    }

    /// The outcome of a fire that is not late.
    fn admit(&mut self, policy: OverlapPolicy, nominal: DateTime<Utc>) -> Outcome {
        if !self.running {
            self.running = true;
            return Outcome::Submit;
        }
        match policy {
            OverlapPolicy::Allow => Outcome::Submit,
            OverlapPolicy::Skip => Outcome::SkippedOverlap,
            OverlapPolicy::BufferOne if self.buffered.is_none() => {
                self.buffered = Some(nominal);
                Outcome::Buffered
            }
            OverlapPolicy::BufferOne => Outcome::SkippedOverlap,
        }
    }
}

/// Lists the last `max_missed` certainly-missed fires after `lower` and summarises the earlier
/// ones; returns the nominal time the due fires follow.
fn list_certainly_missed(
    schedule: &Schedule,
    window: &Window,
    lower: DateTime<Utc>,
    max_missed: usize,
    decision: &mut Decision,
) -> DateTime<Utc> {
    let Some(bound) = window.certainly_missed_before() else { return lower };
    let (listed, range) = last_fires_before(schedule, lower, bound, max_missed);
    decision.missed_range = range;
    let mut after = range.map_or(lower, |range| range.through);
    for nominal in listed {
        decision.fires.push(Fire { nominal, at: fire_time(schedule, nominal), outcome: Outcome::Missed });
        after = nominal;
    }
    after
}

/// Lists the fires after `after` whose time has come, in order, up to `max_fires` in all.
fn list_due(
    schedule: &Schedule,
    window: &Window,
    after: DateTime<Utc>,
    max_fires: usize,
    batch: &mut Batch,
    decision: &mut Decision,
) {
    for nominal in Fires::after(schedule, after) {
        let at = fire_time(schedule, nominal);
        if nominal > window.now || at > window.now {
            return;
        }
        if decision.fires.len() == max_fires {
            decision.more_due = true;
            return;
        }
        let outcome = if window.late(at) { Outcome::Missed } else { batch.admit(schedule.config.overlap, nominal) };
        decision.fires.push(Fire { nominal, at, outcome });
    }
}

/// The last `n` fires in `(lower, bound)`, and the range of those before them if there are any.
/// Searches backwards from `bound` over spans growing fourfold, so a long outage costs about as
/// much as its last few fires, not all of them.
fn last_fires_before(
    schedule: &Schedule,
    lower: DateTime<Utc>,
    bound: DateTime<Utc>,
    n: usize,
) -> (Vec<DateTime<Utc>>, Option<MissedRange>) {
    if bound <= lower {
        return (Vec::new(), None);
    }
    let mut span = TimeDelta::hours(1);
    loop {
        let from = bound.checked_sub_signed(span).map_or(lower, |from| from.max(lower));
        // One more than listed: the fire just before the listed ones ends the range.
        let mut last = VecDeque::with_capacity(n + 1);
        for fire in Fires::after(schedule, from).take_while(|fire| *fire < bound) {
            if last.len() == n + 1 {
                last.pop_front();
            }
            last.push_back(fire);
        }
        if last.len() > n {
            if let Some(through) = last.pop_front() {
                return (last.into(), Some(MissedRange { after: lower, through }));
            }
        }
        if from == lower {
            return (last.into(), None);
        }
        span = span.checked_mul(4).unwrap_or(TimeDelta::MAX);
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
