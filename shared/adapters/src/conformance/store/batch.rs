//! Design-store conformance for [`DesignStore::apply_batch`]: a batch has exactly the effects of
//! its ops applied one by one through `apply_and_append` (outcomes, designs, timelines, reports,
//! feed); the first op that fails changes nothing and ends the batch while the ops before it stay;
//! the feed stays numbered without gaps.

use super::feed::{tenant, timeline_entry};
use openqq_core::ports::{ApplyOp, BatchApplied};
use openqq_core::{Applied, Change, DesignId, DesignStore, EventKind, FeedEntry, TenantId, TimelineEntry, Verdict};
use serde_json::value::RawValue;

/// One op of a scripted batch: which of the script's designs, and what it writes there.
struct Scripted {
    design: usize,
    entry: TimelineEntry,
    change: Change,
}

fn scripted(design: usize, kind: EventKind, revision: u64) -> Scripted {
    let change = match kind {
        EventKind::DesignSubmitted => Change::Submitted { name: Some(format!("rev-{revision}")) },
        EventKind::ValidationStarted => Change::ValidationStarted,
        EventKind::ValidationFinished => Change::ValidationFinished {
            verdict: Verdict::Pass,
            report: RawValue::from_string(format!("{{\"revision\":{revision}}}")).unwrap(),
        },
        EventKind::ResultsReady => Change::ResultsReady { verdict: Verdict::Fail },
        EventKind::DesignFailed => Change::Failed { reason: "given up".into() },
        other => unreachable!("no change scripted for {other}"),
    };
    Scripted { design, entry: timeline_entry(kind, revision), change }
}

/// A consumer's batch over two designs of one tenant: two revisions of the first in one batch
/// (all `started` before any `finished`, as the validation function writes them), a repeat
/// (duplicate) and an older revision after a newer one (stale), and a second design interleaved.
fn script() -> Vec<Scripted> {
    use EventKind::*;
    vec![
        scripted(0, DesignSubmitted, 1),
        scripted(1, DesignSubmitted, 1),
        scripted(0, DesignSubmitted, 2),
        scripted(0, ValidationStarted, 1),
        scripted(0, ValidationStarted, 2),
        scripted(1, ValidationStarted, 1),
        scripted(0, ValidationFinished, 1),
        scripted(0, ValidationFinished, 2),
        scripted(0, DesignSubmitted, 1),
        scripted(1, DesignFailed, 1),
        scripted(0, ResultsReady, 2),
        scripted(0, ResultsReady, 1),
        scripted(0, ValidationStarted, 2),
    ]
}

fn ops<'a>(t: &'a TenantId, designs: &'a [DesignId], script: &'a [Scripted]) -> Vec<ApplyOp<'a>> {
    script
        .iter()
        .map(|s| ApplyOp { replayed: false, tenant: t, design: &designs[s.design], entry: &s.entry, change: &s.change })
        .collect()
}

/// What a tenant can read of its designs after a script: each design's row, timeline (kind and
/// revision), reports, and the feed (number, design index, kind, revision, verdict).
async fn observed<S: DesignStore + ?Sized>(store: &S, t: &TenantId, designs: &[DesignId]) -> String {
    let mut seen = Vec::new();
    for d in designs {
        let v = store.get(t, d).await.unwrap();
        seen.push(format!("{:?}", v.map(|v| (v.name, v.revision, v.status, v.verdict, v.failure_reason))));
        let timeline = store.timeline(t, d).await.unwrap().unwrap_or_default();
        seen.push(format!("{:?}", timeline.iter().map(|e| (e.kind, e.revision)).collect::<Vec<_>>()));
        for revision in 1..=2 {
            let report = store.report(t, d, Some(revision)).await.unwrap();
            seen.push(format!("{:?}", report.map(|r| (r.revision, r.verdict, r.report.get().to_owned()))));
        }
    }
    let feed = store.read_feed(t, 0, 100).await.unwrap();
    let index = |e: &FeedEntry| designs.iter().position(|d| *d == e.design_id);
    seen.push(format!(
        "{:?}",
        feed.iter().map(|e| (e.seq, index(e), e.kind, e.revision, e.verdict)).collect::<Vec<_>>()
    ));
    seen.join("\n")
}

/// The same script as one batch (one tenant) and op by op through `apply_and_append` (another
/// tenant): the same outcomes, and the tenants read the same designs, timelines, reports and feed.
pub async fn a_batch_has_the_effects_of_its_ops_applied_one_by_one<S: DesignStore + ?Sized>(store: &S) {
    let script = script();
    let (batched, single) = (tenant("batch"), tenant("batch-single"));
    let (bd, sd) = ([DesignId::generate(), DesignId::generate()], [DesignId::generate(), DesignId::generate()]);

    let BatchApplied { applied, error } = store.apply_batch(&ops(&batched, &bd, &script)).await;
    assert!(error.is_none(), "the batch applied whole: {error:?}");
    let mut one_by_one = Vec::new();
    for op in ops(&single, &sd, &script) {
        one_by_one.push(store.apply_and_append(op.replayed, op.tenant, op.design, op.entry, op.change).await.unwrap());
    }
    assert_eq!(applied, one_by_one, "the same outcomes, op for op");
    let (new, dup, stale) = (Applied::Applied, Applied::Duplicate, Applied::Stale);
    assert_eq!(
        applied,
        [new, new, new, new, new, new, new, new, dup, new, new, stale, dup],
        "ops of one batch see the writes of the ops before them"
    );
    assert_eq!(observed(store, &batched, &bd).await, observed(store, &single, &sd).await);
    let first = store.get(&batched, &bd[0]).await.unwrap().expect("the design materialised");
    assert_eq!(
        (first.revision, first.status, first.verdict),
        (2, openqq_core::DesignStatus::Ready, Some(Verdict::Fail)),
        "revision 2 ends ready even though revision 1 started and finished in the same batch"
    );
    assert!(store.apply_batch(&[]).await.is_complete(0), "an empty batch does nothing and fails nothing");
}

/// An op that fails (here: a validation of a design that never materialised, which is
/// [`openqq_core::PortError::NotFound`]) changes nothing and ends the batch: the ops before it
/// stay applied with their feed entries, the ops after it are not attempted, and the next write
/// takes the next feed number (no gap where the failed op was).
pub async fn a_failing_op_changes_nothing_and_ends_the_batch_and_the_ops_before_it_stay<S: DesignStore + ?Sized>(
    store: &S,
) {
    use EventKind::*;
    let t = tenant("batch-fail");
    let designs = [DesignId::generate(), DesignId::generate(), DesignId::generate()];
    let script = vec![
        scripted(0, DesignSubmitted, 1),
        scripted(0, ValidationStarted, 1),
        scripted(1, ValidationStarted, 1),
        scripted(2, DesignSubmitted, 1),
    ];
    let done = store.apply_batch(&ops(&t, &designs, &script)).await;
    assert_eq!(done.applied, [Applied::Applied, Applied::Applied], "the prefix before the failed op");
    assert!(!done.is_complete(script.len()));
    let error = done.error.expect("the third op fails");
    assert_eq!(error.label(), "not_found", "{error}");
    assert!(store.get(&t, &designs[1]).await.unwrap().is_none(), "the failed op wrote nothing");
    assert!(store.get(&t, &designs[2]).await.unwrap().is_none(), "the op after it was not attempted");
    let timeline = store.timeline(&t, &designs[0]).await.unwrap().expect("the prefix stays");
    assert_eq!(timeline.iter().map(|e| e.kind).collect::<Vec<_>>(), [DesignSubmitted, ValidationStarted]);

    // The rest of the batch, tried again, goes on from the feed's next number.
    let done = store.apply_batch(&ops(&t, &designs, &script[3..])).await;
    assert_eq!((done.applied.as_slice(), done.error.is_none()), ([Applied::Applied].as_slice(), true));
    let feed = store.read_feed(&t, 0, 100).await.unwrap();
    let got: Vec<_> = feed.iter().map(|e| (e.seq, e.kind, designs.iter().position(|d| *d == e.design_id))).collect();
    assert_eq!(
        got,
        [(1, DesignSubmitted, Some(0)), (2, ValidationStarted, Some(0)), (3, DesignSubmitted, Some(2))],
        "numbered without a gap: the failed op took no number"
    );
}

/// Two batches of one tenant at once (two consumers' batches) number the feed 1..=n between them,
/// every entry once.
pub async fn concurrent_batches_number_the_feed_without_gaps<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant("batch-race");
    let designs: Vec<DesignId> = (0..6).map(|_| DesignId::generate()).collect();
    let scripts: Vec<Vec<Scripted>> =
        (0..2).map(|half| (0..3).map(|i| scripted(half * 3 + i, EventKind::DesignSubmitted, 1)).collect()).collect();
    let batches: Vec<Vec<ApplyOp<'_>>> = scripts.iter().map(|s| ops(&t, &designs, s)).collect();
    let outcomes = super::feed::join_all(batches.iter().map(|b| store.apply_batch(b)).collect()).await;
    for done in &outcomes {
        assert!(done.is_complete(3), "{:?}", done.error);
    }
    let feed = store.read_feed(&t, 0, 100).await.unwrap();
    assert_eq!(feed.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=6).collect::<Vec<u64>>(), "{feed:?}");
    let mut ids: Vec<&DesignId> = feed.iter().map(|e| &e.design_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), designs.len(), "every design's entry once");
}
