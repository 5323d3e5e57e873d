//! Deleting a design (`openqq_core::deletion`): its rows go, its `design.deleted` entry enters the
//! feed once, the objects only it named are answered, another tenant can delete nothing of it,
//! and no write that comes after brings it back.

use super::{accepted, entry, ids, submitted};
use openqq_core::ports::ApplyOp;
use openqq_core::{
    Applied, Change, CorrelationId, Deletion, DesignId, DesignStatus, DesignStore, EventKind, KeptSpec, TenantId,
    Verdict,
};
use serde_json::value::RawValue;
use std::collections::BTreeSet;

/// A digest made of one repeated hex digit, as an object reference writes one.
fn digest(c: char) -> String {
    c.to_string().repeat(64)
}

fn spec_naming(revision: u64, digests: &[&str]) -> KeptSpec {
    let refs: Vec<String> = digests.iter().map(|d| format!(r#"{{"digest":"{d}","bytes":20000}}"#)).collect();
    KeptSpec { revision, submission: format!(r#"{{"spec":{{"name":"n","refs":[{}]}}}}"#, refs.join(",")) }
}

/// A stored report pointing at its full report `full`: naming its design `owner`, as every full
/// report kept now does, or naming none, as reports kept before did.
fn pointing_at(full: &str, owner: Option<&DesignId>) -> String {
    let owner = owner.map(|d| format!(r#","design_id":"{d}""#)).unwrap_or_default();
    format!(r#"{{"verdict":"pass","full_report":{{"digest":"{full}","bytes":9{owner}}}}}"#)
}

/// Takes `d`'s `revision` through to `ready` with `report`.
async fn validated<S: DesignStore + ?Sized>(store: &S, t: &TenantId, d: &DesignId, revision: u64, report: String) {
    store.apply(t, d, &entry(EventKind::DesignSubmitted, revision), &submitted("gone")).await.unwrap();
    store.record_accepted(t, &accepted(d, revision, Some("gone"))).await.unwrap();
    store.apply(t, d, &entry(EventKind::ValidationStarted, revision), &Change::ValidationStarted).await.unwrap();
    let finished =
        Change::ValidationFinished { verdict: Verdict::Pass, report: RawValue::from_string(report).unwrap() };
    store.apply(t, d, &entry(EventKind::ValidationFinished, revision), &finished).await.unwrap();
    let ready = Change::ResultsReady { verdict: Verdict::Pass };
    store.apply_and_append(false, t, d, &entry(EventKind::ResultsReady, revision), &ready).await.unwrap();
    assert_eq!(store.get(t, d).await.unwrap().unwrap().status, DesignStatus::Ready);
}

/// A design taken to `ready` at revision 1, with a report whose full report `full` names it and a
/// kept specification naming `inputs`.
async fn ready_design<S: DesignStore + ?Sized>(store: &S, t: &TenantId, d: &DesignId, full: &str, inputs: &[&str]) {
    store.keep_spec(t, d, &spec_naming(1, inputs)).await.unwrap();
    validated(store, t, d, 1, pointing_at(full, Some(d))).await;
}

fn deletion(tag: &str) -> Deletion {
    Deletion::now(CorrelationId::parse(format!("delete-{tag}")).unwrap())
}

pub async fn deleting_a_design_removes_its_rows_and_enters_the_feed_once<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    let shared = digest('c');
    let (netlist, full, newer, legacy) = (digest('a'), digest('b'), digest('f'), digest('8'));
    ready_design(store, &t, &d, &full, &[&netlist, &shared]).await;
    // Revision 2's full report was kept before full reports named their design: another design's
    // identical report might name the same object, so it stays.
    validated(store, &t, &d, 2, pointing_at(&legacy, None)).await;
    // A later specification replaces the first, whose objects are still the design's.
    store.keep_spec(&t, &d, &spec_naming(2, &[&newer])).await.unwrap();
    // Another design of the tenant named one of the same objects in an earlier revision: it stays.
    let keeper = DesignId::parse(super::unique("d")).unwrap();
    store.apply(&t, &keeper, &entry(EventKind::DesignSubmitted, 1), &submitted("keeper")).await.unwrap();
    store.keep_spec(&t, &keeper, &spec_naming(1, &[&shared])).await.unwrap();
    store.keep_spec(&t, &keeper, &spec_naming(2, &[&digest('9')])).await.unwrap();
    let before = store.usage(&t).await.unwrap();
    // Another tenant cannot delete it: to them it does not exist.
    let stranger = TenantId::parse(super::unique("t")).unwrap();
    assert_eq!(store.delete_design(&stranger, &d, &deletion("stranger")).await.unwrap(), None);
    assert!(store.get(&t, &d).await.unwrap().is_some(), "another tenant's deletion touched nothing");

    let head = store.feed_head(&t).await.unwrap();
    let how = deletion("own");
    let deleted = store.delete_design(&t, &d, &how).await.unwrap().expect("the design existed");
    assert_eq!(deleted.revision, 2);
    assert_eq!(deleted.seq, head + 1, "its entry is the feed's next");
    assert_eq!(
        deleted.objects,
        BTreeSet::from([netlist, full, newer]),
        "the objects only it named, in any revision, with its own full report, not the one another design \
         named, nor a full report that does not name its design"
    );

    assert!(store.get(&t, &d).await.unwrap().is_none(), "the design is gone");
    assert!(store.timeline(&t, &d).await.unwrap().is_none(), "with its timeline");
    assert!(store.report(&t, &d, None).await.unwrap().is_none(), "its reports");
    assert!(store.report(&t, &d, Some(1)).await.unwrap().is_none());
    assert!(store.report(&t, &d, Some(2)).await.unwrap().is_none());
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), None, "and its kept specification");
    let listed = store.list(&t, None, 100).await.unwrap();
    assert!(listed.items.iter().all(|v| v.design_id != d), "nor listed, marker or row");
    assert!(listed.items.iter().any(|v| v.design_id == keeper), "the other design stays");
    let after = store.usage(&t).await.unwrap();
    assert_eq!(after.designs, before.designs - 1, "the tenant holds one design fewer");
    assert!(after.bytes < before.bytes, "and fewer bytes: {after:?} after {before:?}");
    assert!(store.kept_spec(&t, &keeper).await.unwrap().is_some());

    let feed = store.read_feed(&t, head, 10).await.unwrap();
    let [entry] = feed.as_slice() else { panic!("one entry for the deletion: {feed:?}") };
    assert_eq!((entry.seq, entry.kind, entry.revision), (head + 1, EventKind::DesignDeleted, 2));
    assert_eq!((&entry.design_id, &entry.correlation_id), (&d, &how.correlation_id));
    assert_eq!((entry.event_id, entry.occurred_at.timestamp()), (how.event_id, how.occurred_at.timestamp()));

    assert_eq!(store.delete_design(&t, &d, &deletion("again")).await.unwrap(), None, "deleted once");
    assert_eq!(store.feed_head(&t).await.unwrap(), head + 1, "a second deletion enters nothing");
}

pub async fn no_write_after_a_deletion_brings_the_design_back<S: DesignStore + ?Sized>(store: &S) {
    let (t, d) = ids();
    ready_design(store, &t, &d, &digest('d'), &[&digest('e')]).await;
    store.delete_design(&t, &d, &deletion("late")).await.unwrap().expect("the design existed");
    let head = store.feed_head(&t).await.unwrap();

    let again = entry(EventKind::DesignSubmitted, 1);
    assert_eq!(store.apply(&t, &d, &again, &submitted("back")).await.unwrap(), Applied::Stale, "a re-read");
    let newer = entry(EventKind::DesignSubmitted, 2);
    let racing = store.apply_and_append(false, &t, &d, &newer, &submitted("back")).await.unwrap();
    assert_eq!(racing, Applied::Stale, "a revision that raced the deletion");
    let late = Change::ResultsReady { verdict: Verdict::Fail };
    let replayed = store.apply_and_append(true, &t, &d, &entry(EventKind::ResultsReady, 1), &late).await.unwrap();
    assert_eq!(replayed, Applied::Stale, "a replayed dead letter");
    let failed = Change::Failed { reason: "late".into() };
    let (e3, submitted3) = (entry(EventKind::DesignSubmitted, 3), submitted("back"));
    let e_failed = entry(EventKind::DesignFailed, 2);
    let ops = [
        ApplyOp { replayed: false, tenant: &t, design: &d, entry: &e3, change: &submitted3 },
        ApplyOp { replayed: false, tenant: &t, design: &d, entry: &e_failed, change: &failed },
    ];
    let batch = store.apply_batch(&ops).await;
    assert!(batch.error.is_none(), "{:?}", batch.error);
    assert_eq!(batch.applied, vec![Applied::Stale, Applied::Stale], "a consumer batch");
    store.record_accepted(&t, &accepted(&d, 4, Some("back"))).await.unwrap();
    store.keep_spec(&t, &d, &spec_naming(4, &[])).await.unwrap();

    assert!(store.get(&t, &d).await.unwrap().is_none(), "the design stays deleted");
    assert!(store.timeline(&t, &d).await.unwrap().is_none());
    assert!(store.list(&t, None, 100).await.unwrap().items.iter().all(|v| v.design_id != d));
    assert_eq!(store.kept_spec(&t, &d).await.unwrap(), None, "no specification is kept for it");
    assert_eq!(store.feed_head(&t).await.unwrap(), head, "and nothing entered the feed");
    assert_eq!(store.delete_design(&t, &d, &deletion("after")).await.unwrap(), None);

    // A design of another id is untouched by the tombstone: deleting is per design.
    let (_, fresh) = ids();
    store.apply(&t, &fresh, &entry(EventKind::DesignSubmitted, 1), &submitted("fresh")).await.unwrap();
    assert!(store.get(&t, &fresh).await.unwrap().is_some());
}
