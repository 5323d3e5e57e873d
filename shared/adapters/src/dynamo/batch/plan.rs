//! What the ops of a round are planned over ([`State`]: read, or assumed for an unread write) and
//! the plan of one op over it (step 2 of the module doc's algorithm, one op at a time).

use openqq_core::ports::{ApplyOp, PortResult};
use openqq_core::revision::{self, HeldDesign, Plan, Writes};
use openqq_core::{Applied, DesignId, EventKind, PortError, TenantId, WebhookId};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A tenant's webhooks and the kinds each wants.
pub(super) type Hooks = Arc<Vec<(WebhookId, Vec<EventKind>)>>;

/// The applied marker or feed-once item of one design, kind and revision.
pub(super) type Once = (TenantId, DesignId, EventKind, u64);

/// A tenant's feed as read (or remembered): the last number used and the webhook count with its
/// version (`None` before the tenant's first registration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Feed {
    pub(super) head: u64,
    pub(super) hooks: Option<(u64, u64)>,
}

/// A design as read, then as the ops planned so far leave it.
#[derive(Debug, Clone, Default)]
pub(super) struct Design {
    pub(super) held: Option<HeldDesign>,
    /// The write counter (0 without an item).
    pub(super) seq: u64,
    /// The highest revision applied of each kind, by kind name.
    pub(super) latest: HashMap<String, u64>,
    /// The item is the design's tombstone: its tenant deleted it.
    pub(super) deleted: bool,
}

/// What the ops of one round depend on: read, or assumed for an unread submission, and then
/// moved on by each op planned.
#[derive(Default)]
pub(super) struct State {
    pub(super) designs: HashMap<(TenantId, DesignId), Design>,
    /// Applied markers known to exist; every other marker the ops need was read absent.
    pub(super) markers: HashSet<Once>,
    /// Feed-once items known to exist, with their entries' numbers.
    pub(super) once: HashMap<Once, u64>,
    pub(super) feeds: HashMap<TenantId, Feed>,
    /// The webhooks of each tenant that has any.
    pub(super) hooks: HashMap<TenantId, Hooks>,
}

pub(super) fn once_of(op: &ApplyOp<'_>, kind: EventKind) -> Once {
    (op.tenant.clone(), op.design.clone(), kind, op.entry.revision)
}

/// What one op does, planned over the state the ops before it left.
pub(super) struct Planned<'a> {
    pub(super) outcome: Applied,
    pub(super) writes: Option<Writes<'a>>,
    /// Its applied marker exists already (a replay that fails again).
    pub(super) seen: bool,
    /// Its feed entry is new: appended.
    pub(super) append: bool,
}

pub(super) fn plan<'a>(state: &State, op: &ApplyOp<'a>) -> PortResult<Planned<'a>> {
    let design = &state.designs[&(op.tenant.clone(), op.design.clone())];
    let kind = op.entry.kind;
    let seen = state.markers.contains(&once_of(op, kind));
    let held = revision::Held {
        deleted: design.deleted,
        seen,
        latest_of_kind: design.latest.get(kind.as_str()).copied(),
        design: design.held,
    };
    let plan = match op.replayed {
        true => {
            let dead_lettered = state.markers.contains(&once_of(op, EventKind::DesignFailed));
            revision::plan_replay(&held, dead_lettered, op.entry, op.change)
        }
        false => revision::plan(&held, op.entry, op.change),
    };
    let outcome = plan.outcome().ok_or(PortError::NotFound)?;
    let append = outcome != Applied::Stale && !state.once.contains_key(&once_of(op, kind));
    let writes = match plan {
        Plan::Apply(writes) => Some(writes),
        _ => None,
    };
    Ok(Planned { outcome, writes, seen, append })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::batch::fixtures::{op, submission};
    use openqq_core::revision::DesignWrite;
    use openqq_core::{Change, DesignStatus};

    /// A state in which `op`'s design is `design` and its tenant's feed is empty.
    fn state_of(op: &ApplyOp<'_>, design: Design) -> State {
        let mut state = State::default();
        state.designs.insert((op.tenant.clone(), op.design.clone()), design);
        state.feeds.insert(op.tenant.clone(), Feed { head: 0, hooks: None });
        state
    }

    fn at(revision: u64, status: DesignStatus) -> Design {
        Design { held: Some(HeldDesign { revision, status }), seq: 1, latest: HashMap::new(), deleted: false }
    }

    #[test]
    fn a_new_designs_submission_inserts_it_and_is_appended() {
        let owned = submission("acme", "d-1");
        let op = owned.op();
        let planned = plan(&state_of(&op, Design::default()), &op).unwrap();
        assert_eq!(planned.outcome, Applied::Applied);
        assert!(matches!(planned.writes.map(|w| w.design), Some(DesignWrite::Insert { revision: 1, .. })));
        assert!(planned.append && !planned.seen);
    }

    #[test]
    fn an_applied_op_is_a_duplicate_that_writes_nothing_and_is_appended_only_if_its_entry_is_missing() {
        let owned = op("acme", "d-1", 1, Change::ValidationStarted);
        let op = owned.op();
        let mut state = state_of(&op, at(1, DesignStatus::Validating));
        state.markers.insert(once_of(&op, op.entry.kind));
        let planned = plan(&state, &op).unwrap();
        assert_eq!(planned.outcome, Applied::Duplicate);
        assert!(planned.writes.is_none() && planned.seen);
        assert!(planned.append, "its feed entry was never written: it goes in now");
        state.once.insert(once_of(&op, op.entry.kind), 4);
        assert!(!plan(&state, &op).unwrap().append, "its feed entry is there already");
    }

    #[test]
    fn a_stale_op_is_not_appended() {
        let owned = op("acme", "d-1", 1, Change::ValidationStarted);
        let op = owned.op();
        let mut design = at(2, DesignStatus::Validating);
        design.latest.insert(op.entry.kind.as_str().to_owned(), 2);
        let planned = plan(&state_of(&op, design), &op).unwrap();
        assert_eq!(planned.outcome, Applied::Stale);
        assert!(planned.writes.is_none() && !planned.append);
    }

    #[test]
    fn a_change_to_a_design_that_never_materialised_is_not_found() {
        let owned = op("acme", "d-1", 1, Change::ValidationStarted);
        let op = owned.op();
        assert!(matches!(plan(&state_of(&op, Design::default()), &op), Err(PortError::NotFound)));
    }

    #[test]
    fn a_replay_revives_a_failed_revision_only_when_its_design_failed_marker_was_read() {
        let owned = op("acme", "d-1", 1, Change::ValidationStarted).replayed();
        let op = owned.op();
        let mut state = state_of(&op, at(1, DesignStatus::Failed));
        let planned = plan(&state, &op).unwrap();
        assert!(matches!(planned.writes.map(|w| w.design), Some(DesignWrite::Keep)), "failed for another reason");
        state.markers.insert(once_of(&op, EventKind::DesignFailed));
        let planned = plan(&state, &op).unwrap();
        let revived = planned.writes.map(|w| w.design);
        assert!(
            matches!(revived, Some(DesignWrite::Move { from: DesignStatus::Failed, to: DesignStatus::Validating, .. })),
            "{revived:?}"
        );
    }
}
