//! The revision rules, case by case and as properties over whole event histories of a design.

use super::model::{entry, report, Model, Row, DESIGN_ID};
use super::*;
use crate::event::EventKind;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn at(revision: u64, status: DesignStatus) -> Option<HeldDesign> {
    Some(HeldDesign { revision, status })
}

#[test]
fn a_seen_revision_is_a_duplicate_even_below_the_latest() {
    let held = Held { deleted: false, seen: true, latest_of_kind: Some(5), design: at(5, DesignStatus::Ready) };
    let change = Change::Submitted { name: None };
    assert_eq!(plan(&held, &entry(EventKind::DesignSubmitted, 2), &change), Plan::Duplicate);
    assert_eq!(Plan::Duplicate.outcome(), Some(Applied::Duplicate));
}

#[test]
fn an_unseen_revision_below_the_latest_of_its_kind_is_stale() {
    let held = Held { deleted: false, seen: false, latest_of_kind: Some(3), design: at(3, DesignStatus::Submitted) };
    let change = Change::Submitted { name: Some("b".into()) };
    assert_eq!(plan(&held, &entry(EventKind::DesignSubmitted, 2), &change), Plan::Stale);
}

#[test]
fn every_entry_for_a_deleted_design_is_stale_replays_included() {
    let deleted = Held { deleted: true, ..Held::default() };
    let submitted = Change::Submitted { name: Some("back".into()) };
    assert_eq!(plan(&deleted, &entry(EventKind::DesignSubmitted, 1), &submitted), Plan::Stale, "never recreated");
    assert_eq!(plan(&deleted, &entry(EventKind::DesignSubmitted, 9), &submitted), Plan::Stale, "nor revised");
    let failed = Change::Failed { reason: "late".into() };
    assert_eq!(plan(&deleted, &entry(EventKind::DesignFailed, 1), &failed), Plan::Stale);
    let ready = Change::ResultsReady { verdict: Verdict::Pass };
    assert_eq!(plan_replay(&deleted, true, &entry(EventKind::ResultsReady, 1), &ready), Plan::Stale);
    assert_eq!(plan_replay(&deleted, false, &entry(EventKind::DesignSubmitted, 1), &submitted), Plan::Stale);
}

#[test]
fn a_first_submission_creates_the_design_and_a_later_one_revises_it() {
    let change = Change::Submitted { name: Some("blinky".into()) };
    let first = plan(&Held::default(), &entry(EventKind::DesignSubmitted, 1), &change);
    let insert = DesignWrite::Insert {
        name: Some("blinky"),
        revision: 1,
        status: DesignStatus::Submitted,
        failure_reason: None,
    };
    assert_eq!(first, Plan::Apply(Writes { design: insert, report: None }));
    let held = Held { deleted: false, seen: false, latest_of_kind: Some(1), design: at(1, DesignStatus::Ready) };
    let unnamed = Change::Submitted { name: None };
    let Plan::Apply(w) = plan(&held, &entry(EventKind::DesignSubmitted, 2), &unnamed) else { panic!() };
    assert_eq!(
        w.design,
        DesignWrite::Revise { name: None, revision: 2, status: DesignStatus::Submitted, failure_reason: None }
    );
}

#[test]
fn an_event_other_than_a_submission_or_failure_needs_the_design() {
    for change in [
        Change::ValidationStarted,
        Change::ValidationFinished { verdict: Verdict::Pass, report: report(Verdict::Pass) },
        Change::ResultsReady { verdict: Verdict::Pass },
    ] {
        assert_eq!(plan(&Held::default(), &entry(EventKind::ValidationStarted, 1), &change), Plan::NotFound);
    }
    assert_eq!(Plan::NotFound.outcome(), None);
}

#[test]
fn a_failure_of_a_revision_that_never_materialised_creates_or_revises_the_design_as_failed() {
    let change = Change::Failed { reason: "undecodable".into() };
    let Plan::Apply(w) = plan(&Held::default(), &entry(EventKind::DesignFailed, 1), &change) else { panic!() };
    assert_eq!(
        w.design,
        DesignWrite::Insert {
            name: None,
            revision: 1,
            status: DesignStatus::Failed,
            failure_reason: Some("undecodable")
        }
    );
    let held = Held { deleted: false, seen: false, latest_of_kind: None, design: at(1, DesignStatus::Ready) };
    let Plan::Apply(w) = plan(&held, &entry(EventKind::DesignFailed, 2), &change) else { panic!() };
    assert_eq!(
        w.design,
        DesignWrite::Revise {
            name: None,
            revision: 2,
            status: DesignStatus::Failed,
            failure_reason: Some("undecodable")
        }
    );
}

#[test]
fn status_moves_only_forward_and_only_at_the_designs_revision() {
    let ready = Change::ResultsReady { verdict: Verdict::Fail };
    let held = Held { deleted: false, seen: false, latest_of_kind: None, design: at(2, DesignStatus::Validating) };
    let Plan::Apply(w) = plan(&held, &entry(EventKind::ResultsReady, 2), &ready) else { panic!() };
    let to_ready = DesignWrite::Move {
        from: DesignStatus::Validating,
        to: DesignStatus::Ready,
        verdict: Some(Verdict::Fail),
        failure_reason: None,
    };
    assert_eq!(w.design, to_ready);
    let Plan::Apply(w) = plan(&held, &entry(EventKind::ResultsReady, 1), &ready) else { panic!() };
    assert_eq!(w.design, DesignWrite::Keep, "an older revision's result leaves the design alone");
    let done = Held { deleted: false, seen: false, latest_of_kind: None, design: at(2, DesignStatus::Ready) };
    let Plan::Apply(w) = plan(&done, &entry(EventKind::ValidationStarted, 2), &Change::ValidationStarted) else {
        panic!()
    };
    assert_eq!(w.design, DesignWrite::Keep, "ready never moves back to validating");
    let failed = Change::Failed { reason: "late".into() };
    let Plan::Apply(w) = plan(&done, &entry(EventKind::DesignFailed, 2), &failed) else { panic!() };
    assert_eq!(w.design, DesignWrite::Keep, "ready is final");
}

#[test]
fn a_report_is_kept_for_its_revision_whatever_the_designs_revision() {
    let change = Change::ValidationFinished { verdict: Verdict::Pass, report: report(Verdict::Pass) };
    let held = Held { deleted: false, seen: false, latest_of_kind: None, design: at(3, DesignStatus::Submitted) };
    let Plan::Apply(w) = plan(&held, &entry(EventKind::ValidationFinished, 2), &change) else { panic!() };
    assert_eq!(w.design, DesignWrite::Keep);
    let r = w.report.expect("the report of revision 2 is written");
    assert_eq!((r.revision, r.verdict, r.report.get()), (2, Verdict::Pass, "{\"verdict\":\"pass\"}"));
}

// ---------------------------------------------------------------------------------------------
// Properties: a reference store that executes plans, and whole histories delivered in random
// orders with duplicates.

#[derive(Debug, Clone)]
struct Event {
    kind: EventKind,
    revision: u64,
    change: Change,
}

/// How one revision's processing went.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// Its submission was dead-lettered.
    SubmissionLost,
    /// It got `stages` stages past the submission (0: submitted only, up to 3: results ready).
    Progressed { stages: usize, verdict: Verdict },
    /// It failed after `stages` stages (0 to 2) past the submission.
    FailedAfter { stages: usize },
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        1 => Just(Fate::SubmissionLost),
        4 => (0..=3usize, any::<bool>()).prop_map(|(stages, pass)| Fate::Progressed {
            stages,
            verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        }),
        2 => (0..=2usize).prop_map(|stages| Fate::FailedAfter { stages }),
    ]
}

/// A revision's events, each caused by the one before it.
fn chain(revision: u64, fate: Fate, name: Option<&str>) -> Vec<Event> {
    let ev = |kind, change| Event { kind, revision, change };
    let failed = || ev(EventKind::DesignFailed, Change::Failed { reason: format!("revision {revision} failed") });
    let submitted = ev(EventKind::DesignSubmitted, Change::Submitted { name: name.map(str::to_owned) });
    let stages = |verdict: Verdict| {
        vec![
            ev(EventKind::ValidationStarted, Change::ValidationStarted),
            ev(EventKind::ValidationFinished, Change::ValidationFinished { verdict, report: report(verdict) }),
            ev(EventKind::ResultsReady, Change::ResultsReady { verdict }),
        ]
    };
    match fate {
        Fate::SubmissionLost => vec![failed()],
        Fate::Progressed { stages: n, verdict } => {
            std::iter::once(submitted).chain(stages(verdict).into_iter().take(n)).collect()
        }
        Fate::FailedAfter { stages: n } => {
            std::iter::once(submitted).chain(stages(Verdict::Fail).into_iter().take(n)).chain([failed()]).collect()
        }
    }
}

/// A design's whole history: revisions 1..=n, the first named, later ones sometimes renamed.
#[derive(Debug, Clone)]
struct History {
    chains: Vec<Vec<Event>>,
}

fn history() -> impl Strategy<Value = History> {
    prop::collection::vec((fate(), prop::option::of("[a-z]{1,4}")), 1..=4).prop_map(|revisions| History {
        chains: revisions
            .iter()
            .enumerate()
            .map(|(i, (fate, rename))| {
                let name = if i == 0 { Some("first") } else { rename.as_deref() };
                chain(i as u64 + 1, *fate, name)
            })
            .collect(),
    })
}

/// Where one delivery comes from: a revision's chain and a position in it.
type Step = (usize, usize);

/// How a delivery order is drawn.
struct Delivery<'a> {
    /// Which ready event goes next, cycled through.
    choices: &'a [usize],
    /// Re-deliveries of already delivered events (a consumer re-reading after a crash, a retried
    /// batch): after how many deliveries, which earlier one.
    dups: &'a [(usize, usize)],
    /// Deliveries (counted from 1) whose handler crashed after its write and before publishing:
    /// what the event causes waits until the event is delivered again.
    crashes: &'a [usize],
    /// Each kind's events in revision order (each kind is one topic and a tenant's records
    /// share a partition).
    per_kind_order: bool,
}

/// A delivery order of `history`: each event after the one that caused it was handled; a
/// revision's submission after the previous revision's submission was handled (one partition
/// of one topic); a crashed event delivered again before anything it causes.
fn schedule(history: &History, how: &Delivery<'_>) -> Vec<Step> {
    let chains = &history.chains;
    let mut next = vec![0usize; chains.len()];
    // Whether chain c's last delivered event crashed before publishing.
    let mut lost = vec![false; chains.len()];
    let mut delivered: Vec<Step> = Vec::new();
    let mut choice = how.choices.iter().cycle();
    let mut dups = how.dups.iter().peekable();
    loop {
        let pending = |c: usize, next: &[usize], lost: &[bool]| match lost[c] {
            true => Some(next[c] - 1),
            false => (next[c] < chains[c].len()).then_some(next[c]),
        };
        let handled_first = |c: usize| next[c] > 1 || (next[c] == 1 && !lost[c]);
        let ready: Vec<usize> = (0..chains.len())
            .filter(|&c| pending(c, &next, &lost).is_some())
            .filter(|&c| c == 0 || next[c] > 0 || handled_first(c - 1))
            .filter(|&c| {
                let kind = chains[c][pending(c, &next, &lost).unwrap()].kind;
                !how.per_kind_order
                    || (0..c).all(|e| {
                        let from = if lost[e] { next[e] - 1 } else { next[e] };
                        chains[e][from..].iter().all(|ev| ev.kind != kind)
                    })
            })
            .collect();
        if ready.is_empty() {
            break;
        }
        let c = ready[*choice.next().unwrap() % ready.len()];
        let step = (c, pending(c, &next, &lost).unwrap());
        let retry = lost[c];
        if retry {
            lost[c] = false;
        } else {
            next[c] += 1;
        }
        delivered.push(step);
        if !retry && how.crashes.contains(&delivered.len()) {
            lost[c] = true;
        }
        if let Some(&&(at, which)) = dups.peek() {
            if at <= delivered.len() {
                dups.next();
                delivered.push(delivered[which % delivered.len()]);
            }
        }
    }
    let done = next.iter().zip(chains).zip(&lost).all(|((n, c), l)| *n == c.len() && !l);
    assert!(done, "every event is delivered");
    delivered
}

fn rank(s: DesignStatus) -> u8 {
    match s {
        DesignStatus::Submitted => 0,
        DesignStatus::Validating => 1,
        DesignStatus::Ready | DesignStatus::Failed => 2,
    }
}

/// Delivers `order`, checking after each step that nothing went backwards.
fn run(history: &History, order: &[Step]) -> Model {
    let mut model = Model::default();
    let mut applied = BTreeSet::new();
    for &(c, i) in order {
        let event = &history.chains[c][i];
        let before = model.clone();
        let outcome = model
            .apply(event.kind, event.revision, &event.change, false)
            .expect("a caused event always finds its design");
        if applied.contains(&(event.kind.as_str(), event.revision)) {
            assert_eq!(outcome, Applied::Duplicate, "a re-delivery is a duplicate: {event:?}");
        }
        if outcome == Applied::Applied {
            applied.insert((event.kind.as_str(), event.revision));
        } else {
            assert_eq!(model.row, before.row, "a no-op changes nothing");
            assert_eq!(model.timeline, before.timeline);
        }
        let (was, now) = (before.row.as_ref(), model.row.as_ref().expect("a design exists after any event"));
        if let Some(was) = was {
            assert!(now.revision >= was.revision, "revision went back: {was:?} -> {now:?}");
            if now.revision == was.revision {
                assert!(rank(now.status) >= rank(was.status), "status went back: {was:?} -> {now:?}");
                if rank(was.status) == 2 {
                    assert_eq!(now, was, "a finished revision is final");
                }
            }
        }
        assert!(before.reports.iter().all(|(r, text)| model.reports.get(r) == Some(text)), "a report changed");
        assert_eq!(model.timeline[..before.timeline.len()], before.timeline[..], "the timeline only grows");
    }
    model
}

/// What a history must end as, whatever the order: the last revision's fate.
fn expected_row(history: &History) -> Row {
    let last = history.chains.last().unwrap().last().unwrap();
    let revision = last.revision;
    let name = history
        .chains
        .iter()
        .flat_map(|c| c.iter())
        .rev()
        .find_map(|e| match &e.change {
            Change::Submitted { name } => name.clone(),
            _ => None,
        })
        .unwrap_or_else(|| DESIGN_ID.to_owned());
    let (status, verdict, failure_reason) = match &last.change {
        Change::Submitted { .. } | Change::Checked { .. } => (DesignStatus::Submitted, None, None),
        Change::ValidationStarted | Change::ValidationFinished { .. } => (DesignStatus::Validating, None, None),
        Change::ResultsReady { verdict } => (DesignStatus::Ready, Some(*verdict), None),
        Change::Failed { reason } => (DesignStatus::Failed, None, Some(reason.clone())),
    };
    Row { name, revision, status, verdict, failure_reason }
}

/// A history, two sequences of scheduling choices, re-deliveries (after how many deliveries,
/// which earlier one) and crashes between write and publish (which deliveries).
type Draw = (History, Vec<usize>, Vec<usize>, Vec<(usize, usize)>, Vec<usize>);

fn draws() -> impl Strategy<Value = Draw> {
    (
        history(),
        prop::collection::vec(any::<usize>(), 1..40),
        prop::collection::vec(any::<usize>(), 1..40),
        prop::collection::vec((0..30usize, any::<usize>()), 0..8).prop_map(|mut d| {
            d.sort();
            d
        }),
        prop::collection::vec(1..30usize, 0..6),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Within a partition's promise (each kind in revision order), any interleaving of the kinds
    /// with any re-deliveries and crashes between write and publish ends in the same design, the
    /// same timeline entries and the same reports, and the design is the last revision's fate.
    #[test]
    fn the_outcome_never_depends_on_interleaving_duplicates_or_crashes((history, a, b, dups, crashes) in draws()) {
        let one = run(&history, &schedule(&history, &Delivery { choices: &a, dups: &[], crashes: &[], per_kind_order: true }));
        let other = run(&history, &schedule(&history, &Delivery { choices: &b, dups: &dups, crashes: &crashes, per_kind_order: true }));
        prop_assert_eq!(&one.row, &other.row);
        prop_assert_eq!(one.row.as_ref().unwrap(), &expected_row(&history));
        let entries = |m: &Model| m.timeline.iter().map(|(k, r)| (k.as_str(), *r)).collect::<BTreeSet<_>>();
        prop_assert_eq!(entries(&one), entries(&other));
        prop_assert_eq!(one.timeline.len(), entries(&one).len(), "each kind and revision at most once");
        prop_assert_eq!(&one.reports, &other.reports);
        let every: BTreeSet<_> = history.chains.iter().flatten().map(|e| (e.kind.as_str(), e.revision)).collect();
        prop_assert_eq!(entries(&one), every, "every event of the history is in the timeline");
    }

    /// Even when one kind's events arrive out of revision order (records of several partitions
    /// or topics re-driven together), the design still ends as the last revision's fate and never
    /// moves backwards on the way; only older revisions' entries may be dropped as stale.
    #[test]
    fn the_design_never_goes_backwards_whatever_the_order((history, a, _b, dups, crashes) in draws()) {
        let how = Delivery { choices: &a, dups: &dups, crashes: &crashes, per_kind_order: false };
        let model = run(&history, &schedule(&history, &how));
        prop_assert_eq!(model.row.unwrap(), expected_row(&history));
    }
}
