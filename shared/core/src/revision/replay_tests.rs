//! The replay rule (rule 6): case by case, as properties of [`plan_replay`] over any held state,
//! and over whole histories where a record is dead-lettered, replayed, and replayed again.

use super::model::{entry, report, Model};
use super::*;
use crate::event::EventKind;
use proptest::prelude::*;

fn failed_at(revision: u64) -> Held {
    Held {
        deleted: false,
        seen: false,
        latest_of_kind: None,
        design: Some(HeldDesign { revision, status: DesignStatus::Failed }),
    }
}

#[test]
fn a_replayed_submission_revives_its_dead_lettered_revision_and_names_it() {
    let change = Change::Submitted { name: Some("blinky".into()) };
    let Plan::Apply(w) = plan_replay(&failed_at(2), true, &entry(EventKind::DesignSubmitted, 2), &change) else {
        panic!()
    };
    assert_eq!(
        w.design,
        DesignWrite::Revise {
            name: Some("blinky"),
            revision: 2,
            status: DesignStatus::Submitted,
            failure_reason: None
        }
    );
    let Plan::Apply(w) = plan(&failed_at(2), &entry(EventKind::DesignSubmitted, 2), &change) else { panic!() };
    assert_eq!(w.design, DesignWrite::Keep, "without replay the failed revision stays failed");
}

#[test]
fn a_replayed_result_moves_a_dead_lettered_revision_on_to_ready_with_its_verdict() {
    let change = Change::ResultsReady { verdict: Verdict::Fail };
    let Plan::Apply(w) = plan_replay(&failed_at(1), true, &entry(EventKind::ResultsReady, 1), &change) else {
        panic!()
    };
    assert_eq!(
        w.design,
        DesignWrite::Move {
            from: DesignStatus::Failed,
            to: DesignStatus::Ready,
            verdict: Some(Verdict::Fail),
            failure_reason: None
        }
    );
}

#[test]
fn a_replayed_report_revives_to_validating_and_keeps_the_report() {
    let change = Change::ValidationFinished { verdict: Verdict::Pass, report: report(Verdict::Pass) };
    let Plan::Apply(w) = plan_replay(&failed_at(1), true, &entry(EventKind::ValidationFinished, 1), &change) else {
        panic!()
    };
    assert_eq!(
        w.design,
        DesignWrite::Move {
            from: DesignStatus::Failed,
            to: DesignStatus::Validating,
            verdict: None,
            failure_reason: None
        }
    );
    assert_eq!(w.report.map(|r| r.revision), Some(1));
}

#[test]
fn a_replay_never_revives_a_failure_that_was_not_a_dead_letter() {
    let change = Change::ResultsReady { verdict: Verdict::Pass };
    let Plan::Apply(w) = plan_replay(&failed_at(1), false, &entry(EventKind::ResultsReady, 1), &change) else {
        panic!()
    };
    assert_eq!(w.design, DesignWrite::Keep);
}

#[test]
fn a_replay_of_an_older_revision_leaves_a_newer_failed_revision_alone() {
    let change = Change::ResultsReady { verdict: Verdict::Pass };
    let Plan::Apply(w) = plan_replay(&failed_at(3), true, &entry(EventKind::ResultsReady, 2), &change) else {
        panic!()
    };
    assert_eq!(w.design, DesignWrite::Keep);
}

#[test]
fn a_revived_revision_whose_replay_fails_again_is_failed_again() {
    let held = Held {
        deleted: false,
        seen: true,
        latest_of_kind: Some(1),
        design: Some(HeldDesign { revision: 1, status: DesignStatus::Validating }),
    };
    let change = Change::Failed { reason: "again".into() };
    let Plan::Apply(w) = plan_replay(&held, true, &entry(EventKind::DesignFailed, 1), &change) else { panic!() };
    assert_eq!(
        w.design,
        DesignWrite::Move {
            from: DesignStatus::Validating,
            to: DesignStatus::Failed,
            verdict: None,
            failure_reason: Some("again")
        }
    );
    assert_eq!(plan(&held, &entry(EventKind::DesignFailed, 1), &change), Plan::Duplicate, "unlike a re-read");
}

// ---------------------------------------------------------------------------------------------
// Properties of the plan over any held state.

fn status() -> impl Strategy<Value = DesignStatus> {
    prop_oneof![
        Just(DesignStatus::Submitted),
        Just(DesignStatus::Validating),
        Just(DesignStatus::Ready),
        Just(DesignStatus::Failed),
    ]
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![Just(Verdict::Pass), Just(Verdict::Fail)]
}

/// A change with the kind of entry that carries it.
fn change() -> impl Strategy<Value = (EventKind, Change)> {
    prop_oneof![
        prop::option::of("[a-z]{1,3}").prop_map(|name| (EventKind::DesignSubmitted, Change::Submitted { name })),
        Just((EventKind::ValidationStarted, Change::ValidationStarted)),
        verdict().prop_map(|v| (
            EventKind::ValidationFinished,
            Change::ValidationFinished { verdict: v, report: report(v) }
        )),
        verdict().prop_map(|v| (EventKind::ResultsReady, Change::ResultsReady { verdict: v })),
        Just((EventKind::DesignFailed, Change::Failed { reason: "r".into() })),
    ]
}

fn held() -> impl Strategy<Value = Held> {
    (any::<bool>(), prop::option::of(1..5u64), prop::option::of((1..5u64, status()))).prop_map(
        |(seen, latest_of_kind, design)| Held {
            deleted: false,
            seen,
            latest_of_kind,
            design: design.map(|(revision, status)| HeldDesign { revision, status }),
        },
    )
}

/// The revision and status a write leaves the design at (`None`: the row is untouched).
fn moved_to(design: &DesignWrite<'_>) -> Option<(Option<u64>, DesignStatus)> {
    match design {
        DesignWrite::Insert { revision, status, .. } | DesignWrite::Revise { revision, status, .. } => {
            Some((Some(*revision), *status))
        }
        DesignWrite::Move { to, .. } => Some((None, *to)),
        DesignWrite::Keep => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Outside a dead-lettered failure of the entry's own revision, a replay plans exactly what
    /// the record would without replay: a design `ready` (whatever its verdict), failed for any
    /// other reason, or at another revision is never revived; a duplicate stays a duplicate.
    #[test]
    fn a_replay_plans_as_a_record_unless_it_revives_a_dead_lettered_failure(
        held in held(), dead_lettered in any::<bool>(), revision in 1..5u64, (kind, change) in change(),
    ) {
        let e = entry(kind, revision);
        let revivable = dead_lettered
            && held.design.is_some_and(|d| d.revision == revision && d.status == DesignStatus::Failed);
        let refail = matches!(change, Change::Failed { .. })
            && held.seen
            && held.design.is_some_and(|d| d.revision == revision && d.status.may_become(DesignStatus::Failed));
        if !revivable && !refail {
            prop_assert_eq!(plan_replay(&held, dead_lettered, &e, &change), plan(&held, &e, &change));
        }
        if held.seen && !matches!(change, Change::Failed { .. }) {
            prop_assert_eq!(plan_replay(&held, dead_lettered, &e, &change), Plan::Duplicate, "replaying twice changes nothing");
        }
    }

    /// A replay never moves a design to a lower revision, never changes the status of a design
    /// at another revision, and moves out of `failed` only a dead-lettered one.
    #[test]
    fn a_replay_never_moves_a_revision_backwards(
        held in held(), dead_lettered in any::<bool>(), revision in 1..5u64, (kind, change) in change(),
    ) {
        let Plan::Apply(w) = plan_replay(&held, dead_lettered, &entry(kind, revision), &change) else { return Ok(()) };
        let Some((to_revision, to_status)) = moved_to(&w.design) else { return Ok(()) };
        if let Some(d) = held.design {
            let lands_at = to_revision.unwrap_or(d.revision);
            prop_assert!(lands_at >= d.revision, "{d:?} -> {:?}", w.design);
            if lands_at == d.revision && d.status == DesignStatus::Failed && to_status != DesignStatus::Failed {
                prop_assert!(dead_lettered && d.revision == revision, "only a dead-lettered failure is revived");
            }
            if d.status == DesignStatus::Ready && lands_at == d.revision {
                prop_assert!(false, "a ready design was changed: {:?}", w.design);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Histories: a store that executes plans, records handled by the three functions, one of them
// dead-lettered part-way, replayed (perhaps failing again), and replayed once more.

/// The records of one revision, in pipeline order, each as the writes its function makes.
fn records(revision: u64, verdict: Verdict) -> Vec<Vec<(EventKind, Change)>> {
    vec![
        vec![(EventKind::DesignSubmitted, Change::Submitted { name: Some(format!("n{revision}")) })],
        vec![
            (EventKind::ValidationStarted, Change::ValidationStarted),
            (EventKind::ValidationFinished, Change::ValidationFinished { verdict, report: report(verdict) }),
        ],
        vec![(EventKind::ResultsReady, Change::ResultsReady { verdict })],
    ]
}

/// What happens to the dead-lettered revision's record.
#[derive(Debug, Clone, Copy)]
struct Poison {
    /// Which record (0: submission, 1: validation request, 2: validation result).
    record: usize,
    /// How many of its writes happened before it failed.
    done: usize,
    /// Replays that fail again at the same point before one succeeds.
    failing_replays: usize,
}

fn poison() -> impl Strategy<Value = Poison> {
    (0..3usize, 0..2usize, 0..3usize).prop_map(|(record, done, failing_replays)| Poison {
        record,
        done: if record == 1 { done } else { 0 },
        failing_replays,
    })
}

/// Handles `record` of `revision` (its writes, or the first `fail_after` of them and then the
/// failure of its revision, as the consumer does when it gives up) and, when it succeeds, the
/// records it causes.
fn handle(model: &mut Model, revision: u64, verdict: Verdict, record: usize, replay: bool, fail_after: Option<usize>) {
    let recs = records(revision, verdict);
    let writes = &recs[record];
    let n = fail_after.unwrap_or(writes.len());
    for (kind, change) in &writes[..n] {
        model.apply(*kind, revision, change, replay);
    }
    if fail_after.is_some() {
        let failed = Change::Failed { reason: format!("record {record} of revision {revision} failed") };
        model.apply(EventKind::DesignFailed, revision, &failed, replay);
        return;
    }
    for downstream in &recs[record + 1..] {
        for (kind, change) in downstream {
            model.apply(*kind, revision, change, false);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A revision whose record was dead-lettered (after any of its writes) and then replayed ends
    /// `ready` at the same revision, as if it never failed; a replay that fails again leaves it
    /// `failed` with the new reason; replaying once more after success changes nothing.
    #[test]
    fn a_replayed_dead_letter_ends_ready_and_a_second_replay_changes_nothing(
        earlier in 0..3u64, p in poison(), pass in any::<bool>(),
    ) {
        let verdict = if pass { Verdict::Pass } else { Verdict::Fail };
        let mut model = Model::default();
        for revision in 1..=earlier {
            handle(&mut model, revision, verdict, 0, false, None);
        }
        let r = earlier + 1;
        // The records before the poisoned one were handled (their writes only: what each causes
        // is the next record).
        let recs = records(r, verdict);
        for rec in &recs[..p.record] {
            for (kind, change) in rec {
                model.apply(*kind, r, change, false);
            }
        }
        handle(&mut model, r, verdict, p.record, false, Some(p.done));
        let failed = model.row.clone().unwrap();
        prop_assert_eq!((failed.revision, failed.status), (r, DesignStatus::Failed));

        for _ in 0..p.failing_replays {
            let before = model.row.clone().unwrap();
            handle(&mut model, r, verdict, p.record, true, Some(p.done));
            let after = model.row.clone().unwrap();
            prop_assert_eq!((after.revision, after.status), (r, DesignStatus::Failed), "a failing replay fails again");
            prop_assert_eq!(after.name, before.name);
        }

        handle(&mut model, r, verdict, p.record, true, None);
        let done = model.row.clone().unwrap();
        prop_assert_eq!((done.revision, done.status, done.verdict), (r, DesignStatus::Ready, Some(verdict)));
        prop_assert_eq!(done.failure_reason, None);
        prop_assert_eq!(done.name, format!("n{r}"), "the replayed revision keeps or takes its name");
        for kind in [EventKind::DesignSubmitted, EventKind::ValidationStarted, EventKind::ValidationFinished, EventKind::ResultsReady] {
            let count = model.timeline.iter().filter(|e| **e == (kind, r)).count();
            prop_assert_eq!(count, 1, "{} of revision {} once in the timeline", kind, r);
        }

        let settled = model.clone();
        handle(&mut model, r, verdict, p.record, true, None);
        prop_assert_eq!(&model, &settled, "a second replay changes nothing");
        for record in 0..3 {
            handle(&mut model, r, verdict, record, true, None);
        }
        prop_assert_eq!(&model, &settled, "replaying any record whose effect was applied changes nothing");
    }

    /// A dead letter replayed after its design moved on to a newer revision changes no design
    /// field: the revision never goes back.
    #[test]
    fn a_replay_after_a_newer_revision_leaves_the_design_alone(p in poison(), pass in any::<bool>()) {
        let verdict = if pass { Verdict::Pass } else { Verdict::Fail };
        let mut model = Model::default();
        let recs = records(1, verdict);
        for rec in &recs[..p.record] {
            for (kind, change) in rec {
                model.apply(*kind, 1, change, false);
            }
        }
        handle(&mut model, 1, verdict, p.record, false, Some(p.done));
        handle(&mut model, 2, verdict, 0, false, None);
        let newer = model.row.clone().unwrap();
        handle(&mut model, 1, verdict, p.record, true, None);
        prop_assert_eq!(model.row.unwrap(), newer);
    }
}
