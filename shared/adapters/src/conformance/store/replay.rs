//! Design-store conformance for replayed dead letters (`DesignStore::apply_replay`): a revision
//! failed by a dead letter is revived once by its replay and moves on at the same revision; a
//! replay never revives anything else, never moves a revision back, and one that fails again fails
//! its revision again.

use super::{entry, failed, ids, report, submitted};
use openqq_core::{Applied, Change, DesignStatus, DesignStore, EventKind, TimelineEntry, Verdict};

fn kinds_of(timeline: &[TimelineEntry]) -> Vec<(&str, u64)> {
    timeline.iter().map(|e| (e.kind.as_str(), e.revision)).collect()
}

/// A validation result dead-lettered by the results function, replayed: the revision comes out
/// of `failed` to `ready` at the same revision; replaying it again adds nothing; and a replay
/// never revives a `ready` design, a revision that is not the design's, or moves it back.
pub async fn a_replayed_dead_letter_revives_its_revision_once_and_only_its_own<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    let ready = Change::ResultsReady { verdict: Verdict::Fail };
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("r")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap();
    let finished = Change::ValidationFinished { verdict: Verdict::Fail, report: report("fail") };
    store.apply(&t, &d, &entry(EventKind::ValidationFinished, 1), &finished).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("the store was down")).await.unwrap();
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Failed);
    let plain = store.apply(&t, &d, &entry(EventKind::ResultsReady, 1), &ready).await.unwrap();
    assert_eq!(plain, Applied::Applied, "a plain record applies its entry");
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Failed, "but revives nothing");

    // The plain record's entry is in the timeline now: only a fresh design shows the replay.
    let (t, d) = ids();
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("r")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::ValidationFinished, 1), &finished).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("the store was down")).await.unwrap();
    let replayed = store.apply_replay(&t, &d, &entry(EventKind::ResultsReady, 1), &ready).await.unwrap();
    assert_eq!(replayed, Applied::Applied);
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!(
        (v.revision, v.status, v.verdict, v.failure_reason.clone()),
        (1, DesignStatus::Ready, Some(Verdict::Fail), None)
    );
    let timeline = store.timeline(&t, &d).await.unwrap().unwrap();

    let again = store.apply_replay(&t, &d, &entry(EventKind::ResultsReady, 1), &ready).await.unwrap();
    assert_eq!(again, Applied::Duplicate, "a second replay is a duplicate");
    let started = entry(EventKind::ValidationStarted, 1);
    let started = store.apply_replay(&t, &d, &started, &Change::ValidationStarted).await.unwrap();
    assert_eq!(started, Applied::Duplicate);
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap(), v, "nothing changed");
    assert_eq!(kinds_of(&store.timeline(&t, &d).await.unwrap().unwrap()), kinds_of(&timeline), "no new entry");

    // A newer revision fails; a replay of the older one's result leaves it alone.
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 2), &submitted("r")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 2), &failed("lost")).await.unwrap();
    store.apply_replay(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status), (2, DesignStatus::Failed), "the revision never goes back");
}

/// A submission dead-lettered before it materialised (the design exists only as failed, named
/// after its id), replayed: the design takes its name, moves to `submitted` at the same
/// revision, and on through validation under the ordinary rules.
pub async fn a_replayed_submission_that_was_dead_lettered_names_its_design_and_moves_on<S: DesignStore + ?Sized>(
    store: &S,
) {
    let (t, d) = ids();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("the log was down")).await.unwrap();
    let replayed = store.apply_replay(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("named")).await;
    assert_eq!(replayed.unwrap(), Applied::Applied);
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.name.as_str(), v.revision, v.status, v.failure_reason), ("named", 1, DesignStatus::Submitted, None));
    store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await.unwrap();
    store
        .apply(&t, &d, &entry(EventKind::ResultsReady, 1), &Change::ResultsReady { verdict: Verdict::Pass })
        .await
        .unwrap();
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status, v.verdict), (1, DesignStatus::Ready, Some(Verdict::Pass)));
    let again = store.apply_replay(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("named")).await;
    assert_eq!(again.unwrap(), Applied::Duplicate);
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Ready, "ready stays ready");
}

/// A replayed record revives its revision, then fails again: the revision is `failed` again with
/// the new reason, in one more `design.failed` entry.
pub async fn a_replay_that_fails_again_fails_its_revision_again<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted("x")).await.unwrap();
    store.apply(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("first")).await.unwrap();
    let started = entry(EventKind::ValidationStarted, 1);
    let started = store.apply_replay(&t, &d, &started, &Change::ValidationStarted).await.unwrap();
    assert_eq!(started, Applied::Applied);
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().status, DesignStatus::Validating, "revived");
    let refailed = store.apply_replay(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("second")).await.unwrap();
    assert_eq!(refailed, Applied::Applied);
    let v = store.get(&t, &d).await.unwrap().unwrap();
    assert_eq!((v.revision, v.status, v.failure_reason.as_deref()), (1, DesignStatus::Failed, Some("second")));
    let failures =
        store.timeline(&t, &d).await.unwrap().unwrap().iter().filter(|e| e.kind == EventKind::DesignFailed).count();
    assert_eq!(failures, 2);
    // Failing it once more while failed changes nothing.
    let more = store.apply_replay(&t, &d, &entry(EventKind::DesignFailed, 1), &failed("third")).await.unwrap();
    assert_eq!(more, Applied::Duplicate);
    assert_eq!(store.get(&t, &d).await.unwrap().unwrap().failure_reason.as_deref(), Some("second"));
}
