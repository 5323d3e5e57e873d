//! The revision rules: what applying one event does to a design, decided from what the store
//! holds. Every design-store adapter reads the few facts in [`Held`] (in one consistent read or
//! inside its transaction), calls [`plan`], and executes the [`Plan`] atomically: a design row
//! write, the timeline entry and, for a validation report, the report. The rules therefore live
//! here once, and the embedded store and DynamoDB cannot drift apart.
//!
//! The rules, for an entry of kind `k` and revision `r`:
//!
//! 1. **Duplicate** when an entry of kind `k` and revision `r` is in the timeline, even if newer
//!    revisions were applied since (a handler that crashed before publishing re-reads its
//!    record; it must publish again, and must not change anything).
//! 2. **Stale** when an entry of kind `k` with a revision above `r` is in the timeline.
//! 3. A new revision (`design.submitted`, or `design.failed` for a revision whose submission
//!    never materialised) creates the design or moves it to that revision; a lower revision
//!    changes no design field.
//! 4. Any other change needs the design (else **NotFound**, permanent), moves its status only
//!    while it is at revision `r` and only forward ([`DesignStatus::may_become`]), and a
//!    validation report is kept per revision whatever the design's current revision.
//! 5. Every applied entry goes into the timeline.
//!
//! 0. **Deleted**: a design its tenant deleted (the store keeps a tombstone of it) takes no
//!    write at all: every entry for it is **Stale**, replays included, so a record read again,
//!    a late result or a dead letter replayed after the deletion never brings it back.
//!
//! A record replayed from the dead-letter topic is planned by [`plan_replay`], which adds one
//! rule and keeps all of the above:
//!
//! 6. **Revival**: when the design is at revision `r`, `failed` because dead-lettering gave up on
//!    one of that revision's records (its `design.failed` entry of revision `r` is in the
//!    timeline, which only dead-lettering writes), a replayed entry of revision `r` that is
//!    neither duplicate nor stale moves the design out of `failed` to where its change leads
//!    ([`Change::revives_to`]), at the same revision, failure reason cleared. A replayed
//!    record that fails again fails its revision again. Nothing else changes: a duplicate is
//!    still a duplicate (replaying twice changes nothing), a design `ready` (whatever its
//!    verdict) or failed for any other reason is planned as without replay, and the revision
//!    never moves.

use crate::design::{Change, DesignStatus, Verdict};
use crate::event::TimelineEntry;
use serde_json::value::RawValue;

/// The outcome of a revision-conditional write. Both variants are success: a consumer commits
/// its offset either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The entry was new; it and its change were written.
    Applied,
    /// This exact kind and revision was already applied (a re-read or a retried send), whether
    /// or not newer revisions were applied since. Handlers publish their events again: the first
    /// attempt may have crashed before publishing them.
    Duplicate,
    /// This revision was never applied and a newer revision of this kind was; nothing changed.
    Stale,
}

/// What the store holds that the decision needs, for one design and one entry kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// Whether an entry of this exact kind and revision is in the design's timeline.
    pub seen: bool,
    /// The highest revision of any entry of this kind in the design's timeline.
    pub latest_of_kind: Option<u64>,
    /// The design row, if the design has materialised.
    pub design: Option<HeldDesign>,
    /// The tenant deleted the design: the store holds its tombstone (and no design row).
    pub deleted: bool,
}

/// The two fields of a design row the rules look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldDesign {
    pub revision: u64,
    pub status: DesignStatus,
}

/// What to do with an event. Only [`Plan::Apply`] writes anything.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan<'a> {
    /// This kind and revision was applied before; nothing changes.
    Duplicate,
    /// A newer revision of this kind was applied; nothing changes.
    Stale,
    /// The change needs a design that has not materialised; permanent.
    NotFound,
    /// Write, in one atomic step: the design row, the report (if any) and the timeline entry.
    Apply(Writes<'a>),
}

impl Plan<'_> {
    /// The port's outcome of executing this plan; `None` for [`Plan::NotFound`].
    pub fn outcome(&self) -> Option<Applied> {
        match self {
            Plan::Duplicate => Some(Applied::Duplicate),
            Plan::Stale => Some(Applied::Stale),
            Plan::NotFound => None,
            Plan::Apply(_) => Some(Applied::Applied),
        }
    }
}

/// The writes of an applied entry. The timeline entry itself is always written.
#[derive(Debug, Clone, PartialEq)]
pub struct Writes<'a> {
    pub design: DesignWrite<'a>,
    /// The validation report of the entry's revision, to insert.
    pub report: Option<ReportWrite<'a>>,
}

/// What happens to the design row. `updated_at` is set by every variant but [`DesignWrite::Keep`].
#[derive(Debug, Clone, PartialEq)]
pub enum DesignWrite<'a> {
    /// No row yet: create it, named `name` (or, without one, after the design id), with no
    /// verdict.
    Insert { name: Option<&'a str>, revision: u64, status: DesignStatus, failure_reason: Option<&'a str> },
    /// The row is at a lower revision (or, for a replayed submission, at this revision and failed
    /// by a dead letter): move it to `revision` and `status`, clear the verdict, set the failure
    /// reason (or clear it), and rename it when `name` is given.
    Revise { name: Option<&'a str>, revision: u64, status: DesignStatus, failure_reason: Option<&'a str> },
    /// The row is at this revision and its status may move forward (or, for a replay, out of a
    /// dead-lettered `failed`): to `to`, with `verdict` when given (else the verdict is kept), and
    /// the failure reason set (or cleared).
    Move { from: DesignStatus, to: DesignStatus, verdict: Option<Verdict>, failure_reason: Option<&'a str> },
    /// The design row is left as it is.
    Keep,
}

/// A report to insert for `revision`.
#[derive(Debug, Clone)]
pub struct ReportWrite<'a> {
    pub revision: u64,
    pub verdict: Verdict,
    pub report: &'a RawValue,
}

/// Reports compare by their JSON text, as stored.
impl PartialEq for ReportWrite<'_> {
    fn eq(&self, other: &Self) -> bool {
        (self.revision, self.verdict, self.report.get()) == (other.revision, other.verdict, other.report.get())
    }
}

/// Decides what applying `entry` with `change` does, given what the store `held` for the design
/// and the entry's kind.
pub fn plan<'a>(held: &Held, entry: &TimelineEntry, change: &'a Change) -> Plan<'a> {
    let revision = entry.revision;
    if held.deleted {
        return Plan::Stale;
    }
    // Duplicate first: a re-read of an applied revision must be recognised as such even after
    // newer revisions were applied (a crash can lose the events it was about to publish).
    if held.seen {
        return Plan::Duplicate;
    }
    if held.latest_of_kind.is_some_and(|latest| latest > revision) {
        return Plan::Stale;
    }
    let design = match (change, held.design) {
        (Change::Submitted { name }, None) => DesignWrite::Insert {
            name: name.as_deref(),
            revision,
            status: DesignStatus::Submitted,
            failure_reason: None,
        },
        (Change::Submitted { name }, Some(d)) if d.revision < revision => DesignWrite::Revise {
            name: name.as_deref(),
            revision,
            status: DesignStatus::Submitted,
            failure_reason: None,
        },
        (Change::Submitted { .. }, Some(_)) => DesignWrite::Keep,
        // A revision the platform gave up on before it materialised (its `design.submitted` was
        // dead-lettered) still shows, as failed: the tenant was told it was accepted.
        (Change::Failed { reason }, None) => {
            DesignWrite::Insert { name: None, revision, status: DesignStatus::Failed, failure_reason: Some(reason) }
        }
        (Change::Failed { reason }, Some(d)) if d.revision < revision => {
            DesignWrite::Revise { name: None, revision, status: DesignStatus::Failed, failure_reason: Some(reason) }
        }
        (_, None) => return Plan::NotFound,
        (change, Some(d)) => match change.status() {
            Some(to) if d.revision == revision && d.status.may_become(to) => DesignWrite::Move {
                from: d.status,
                to,
                verdict: match change {
                    Change::ResultsReady { verdict } => Some(*verdict),
                    _ => None,
                },
                failure_reason: match change {
                    Change::Failed { reason } => Some(reason),
                    _ => None,
                },
            },
            _ => DesignWrite::Keep,
        },
    };
    let report = match change {
        Change::ValidationFinished { verdict, report } => {
            Some(ReportWrite { revision, verdict: *verdict, report: report.as_ref() })
        }
        _ => None,
    };
    Plan::Apply(Writes { design, report })
}

/// [`plan`] for an entry of a record replayed from the dead-letter topic (rule 6). `dead_lettered`
/// says whether the timeline holds a `design.failed` entry of the design's revision (what the
/// store reads for it: only dead-lettering writes that kind), that is, whether a `failed` design
/// at that revision failed because a record was dead-lettered.
pub fn plan_replay<'a>(held: &Held, dead_lettered: bool, entry: &TimelineEntry, change: &'a Change) -> Plan<'a> {
    let revision = entry.revision;
    if held.deleted {
        return Plan::Stale;
    }
    let at_revision = held.design.filter(|d| d.revision == revision);
    if let Change::Failed { reason } = change {
        // Seen: this revision was failed by a dead letter before. A design at that revision that
        // is no longer failed was revived by this replay, whose record has now failed again.
        return match at_revision {
            Some(d) if held.seen && d.status != DesignStatus::Failed && d.status.may_become(DesignStatus::Failed) => {
                Plan::Apply(Writes {
                    design: DesignWrite::Move {
                        from: d.status,
                        to: DesignStatus::Failed,
                        verdict: None,
                        failure_reason: Some(reason),
                    },
                    report: None,
                })
            }
            _ => plan(held, entry, change),
        };
    }
    let stale = held.latest_of_kind.is_some_and(|latest| latest > revision);
    let revivable = dead_lettered && at_revision.is_some_and(|d| d.status == DesignStatus::Failed);
    let (false, false, true, Some(to)) = (held.seen, stale, revivable, change.revives_to()) else {
        return plan(held, entry, change);
    };
    let design = match change {
        // The submission itself was dead-lettered (the row was made by its failure): it names
        // the design now.
        Change::Submitted { name } => {
            DesignWrite::Revise { name: name.as_deref(), revision, status: to, failure_reason: None }
        }
        Change::ResultsReady { verdict } => {
            DesignWrite::Move { from: DesignStatus::Failed, to, verdict: Some(*verdict), failure_reason: None }
        }
        _ => DesignWrite::Move { from: DesignStatus::Failed, to, verdict: None, failure_reason: None },
    };
    let report = match change {
        Change::ValidationFinished { verdict, report } => {
            Some(ReportWrite { revision, verdict: *verdict, report: report.as_ref() })
        }
        _ => None,
    };
    Plan::Apply(Writes { design, report })
}

#[cfg(test)]
mod model;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod tests;
