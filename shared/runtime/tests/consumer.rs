//! The consumer driver with a scripted record handler: what happens to a record the platform
//! gives up on (dead letter with the original bytes, revision failed with the reason), a handler
//! that panics, and an event too large to publish.

use async_trait::async_trait;
use openqq_adapters::{Backends, Durability};
use openqq_core::event::Origin;
use openqq_core::ports::MAX_RECORD_BYTES;
use openqq_core::*;
use openqq_runtime::kafka::to_event;
use openqq_runtime::{
    BatchHandler, Consumer, EventSourceMapping, MappingConfig, Outbox, RecordError, RecordHandler, Step, Write,
};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Does what each record's payload says: `fail` (refused when planned, never written), `retry`
/// (retriable failure after its write), `panic` (after its write), `slow`, `huge` (publish an
/// event over the record limit), `unknown` (a write of a design that does not exist, which the
/// store refuses for good), anything else: publish `validation.requested`. Every record but
/// `fail` first writes its submission.
struct Scripted;

#[async_trait]
impl RecordHandler for Scripted {
    type Payload = Value;
    type State = Envelope<Value>;
    const KIND: EventKind = EventKind::DesignSubmitted;

    fn name(&self) -> &'static str {
        "scripted"
    }

    fn plan(&self, env: Envelope<Value>) -> Result<Step<Self::State>, RecordError> {
        let (entry, change) = match env.payload["do"].as_str() {
            Some("fail") => return Err(RecordError::Permanent("scripted: the payload can never be valid".into())),
            Some("unknown") => {
                let mut entry = env.timeline_entry();
                entry.kind = EventKind::ResultsReady;
                (entry, Change::ResultsReady { verdict: Verdict::Pass })
            }
            _ => (env.timeline_entry(), Change::Submitted { name: None }),
        };
        Ok(Step::Write(Write::new(&env.cause(), false, entry, change), env))
    }

    async fn after(
        &self,
        env: Envelope<Value>,
        _: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Self::State>, RecordError> {
        match env.payload["do"].as_str() {
            Some("retry") => return Err(RecordError::Retriable("scripted: the store is down".into())),
            Some("panic") => panic!("scripted: index out of bounds"),
            Some("slow") => tokio::time::sleep(Duration::from_secs(3)).await,
            Some("huge") => {
                let big = "x".repeat(MAX_RECORD_BYTES);
                out.publish(&Envelope::new(EventKind::ValidationFinished, &env.cause(), "scripted", big));
            }
            _ => out.publish(&Envelope::new(EventKind::ValidationRequested, &env.cause(), "scripted", json!({}))),
        }
        Ok(Step::Done)
    }
}

fn cause(tenant: &str, design: &str, revision: u64) -> Origin {
    Origin {
        tenant_id: TenantId::parse(tenant).unwrap(),
        design_id: DesignId::parse(design).unwrap(),
        revision,
        correlation_id: CorrelationId::parse(format!("corr-{design}")).unwrap(),
        batch: None,
    }
}

/// A `design.submitted` record of `design` (tenant `acme`) at `offset`, `pad` bytes of padding.
fn submitted(design: &str, offset: u64, what: &str, pad: usize) -> LogRecord {
    submitted_by("acme", design, offset, what, pad)
}

/// [`submitted`] for another tenant (on the same partition).
fn submitted_by(tenant: &str, design: &str, offset: u64, what: &str, pad: usize) -> LogRecord {
    let payload = json!({"do": what, "pad": "p".repeat(pad)});
    let rec = Envelope::new(EventKind::DesignSubmitted, &cause(tenant, design, 1), "api", payload).to_record();
    LogRecord {
        topic: "design.submitted".into(),
        partition: 2,
        offset,
        timestamp_ms: 1_764_420_000_000,
        key: rec.key,
        value: rec.value,
        headers: rec.headers,
    }
}

struct Rig {
    b: Backends,
    topics: Topics,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let b = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    Rig { b, topics: Topics::default(), _dir: dir }
}

impl Rig {
    fn consumer(&self) -> Consumer<Scripted> {
        Consumer::new(Scripted, self.b.log.clone(), self.b.store.clone(), self.topics.clone())
    }

    async fn dead_letters(&self) -> Vec<DeadLetter> {
        let mut out = Vec::new();
        for p in 0..4 {
            for r in self.b.source.read(&self.topics.dead_letter(), p, 0, 100).await.unwrap() {
                out.push(DeadLetter::from_record(&r).unwrap());
            }
        }
        out
    }

    async fn published(&self, kind: EventKind) -> u64 {
        self.b.source.end_offsets(&self.topics.of(kind)).await.unwrap().iter().sum()
    }

    async fn design(&self, design: &str) -> Option<DesignView> {
        self.b.store.get(&TenantId::parse("acme").unwrap(), &DesignId::parse(design).unwrap()).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_record_at_the_size_limit_is_dead_lettered_with_its_original_bytes() {
    let rig = rig();
    // An envelope of just under 1 MiB: its base64 copy alone would be 1.3 MiB.
    let mut big = submitted("big", 7, "fail", 0);
    let pad = MAX_RECORD_BYTES - big.value.len() - 16;
    big = submitted("big", 7, "fail", pad);
    assert!(big.value.len() > MAX_RECORD_BYTES - 64 && big.value.len() <= MAX_RECORD_BYTES);
    rig.consumer().handle(to_event(std::slice::from_ref(&big))).await.expect("the batch goes on");

    let letters = rig.dead_letters().await;
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.value, big.value, "the dead letter carries the original bytes");
    assert_eq!(letter.key, "acme", "keyed like the original");
    assert_eq!(
        (letter.source_topic.as_str(), letter.source_partition, letter.source_offset),
        ("design.submitted", 2, 7)
    );
    assert_eq!((letter.function.as_str(), letter.correlation_id()), ("scripted", Some("corr-big")));
    assert_eq!(letter.event_kind(), Some("design.submitted"));
    assert!(letter.reason.contains("never be valid"), "{}", letter.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_revision_becomes_failed_with_the_reason_even_if_it_never_materialised() {
    let rig = rig();
    rig.consumer().handle(to_event(&[submitted("lost", 0, "fail", 10)])).await.unwrap();
    let view = rig.design("lost").await.expect("the design is visible");
    assert_eq!(view.status, DesignStatus::Failed);
    assert_eq!(view.failure_reason.as_deref(), Some("scripted: the payload can never be valid"));
    let timeline =
        rig.b.store.timeline(&TenantId::parse("acme").unwrap(), &DesignId::parse("lost").unwrap()).await.unwrap();
    let kinds: Vec<EventKind> = timeline.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventKind::DesignFailed]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panic_dead_letters_its_record_as_a_bug_and_the_batch_goes_on() {
    let rig = rig();
    let batch = [submitted("a", 0, "ok", 0), submitted("b", 1, "panic", 0), submitted("c", 2, "ok", 0)];
    rig.consumer().handle(to_event(&batch)).await.expect("a panic fails one record, not the batch");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 2, "the records around it were handled");
    let letters = rig.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].source_offset, 1);
    assert!(letters[0].reason.starts_with("bug: the scripted handler panicked"), "{}", letters[0].reason);
    assert!(letters[0].reason.contains("index out of bounds"), "{}", letters[0].reason);
    assert_eq!(rig.design("b").await.unwrap().status, DesignStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_over_the_record_limit_fails_its_record_never_the_batch() {
    let rig = rig();
    let batch = [submitted("a", 0, "ok", 0), submitted("huge", 1, "huge", 0), submitted("c", 2, "ok", 0)];
    rig.consumer().handle(to_event(&batch)).await.expect("the batch is not failed for one record's output");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 2);
    assert_eq!(rig.published(EventKind::ValidationFinished).await, 0, "the oversized event is not published");
    let letters = rig.dead_letters().await;
    assert_eq!(letters.iter().map(|l| l.source_offset).collect::<Vec<_>>(), vec![1]);
    assert!(letters[0].reason.contains("validation.finished"), "{}", letters[0].reason);
    let view = rig.design("huge").await.unwrap();
    assert_eq!(view.status, DesignStatus::Failed);
    assert!(view.failure_reason.unwrap().contains("limit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_retries_run_out_the_revisions_fail_and_the_records_are_dead_lettered() {
    let rig = rig();
    let topic = rig.topics.of(EventKind::DesignSubmitted);
    let rec = Envelope::new(EventKind::DesignSubmitted, &cause("acme", "stuck", 4), "api", json!({"do": "retry"}));
    rig.b.log.publish(&topic, vec![rec.to_record()]).await.unwrap();
    let mut cfg = MappingConfig::new(topic.clone(), rig.topics.dead_letter());
    cfg.batch_window = Duration::ZERO;
    cfg.initial_backoff = Duration::from_millis(10);
    cfg.max_retries = 1;
    cfg.give_up_after = Duration::ZERO;
    let handler: Arc<dyn BatchHandler> = Arc::new(rig.consumer());
    let esm = EventSourceMapping::new(rig.b.source.clone(), rig.b.log.clone(), handler, cfg).await.unwrap();
    let (stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(esm.run(rx));
    let start = Instant::now();
    while rig.dead_letters().await.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "the batch was never dead-lettered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    task.await.unwrap();
    let view = rig.design("stuck").await.expect("the failed revision is visible");
    assert_eq!((view.revision, view.status), (4, DesignStatus::Failed));
    let reason = view.failure_reason.unwrap();
    assert!(reason.starts_with("retries exhausted") && reason.contains("the store is down"), "{reason}");
    assert_eq!(rig.dead_letters().await[0].value, rec.to_record().value);
}

/// Counts counter increments by name and labels (`name{k=v,…}`).
#[derive(Default)]
struct Counting(Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>);

struct CountingCell(String, Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>);

impl metrics::CounterFn for CountingCell {
    fn increment(&self, value: u64) {
        *self.1.lock().unwrap().entry(self.0.clone()).or_default() += value;
    }
    fn absolute(&self, value: u64) {
        self.1.lock().unwrap().insert(self.0.clone(), value);
    }
}

impl metrics::Recorder for Counting {
    fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        metrics::Counter::from_arc(Arc::new(CountingCell(name, self.0.clone())))
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

#[test]
fn a_caught_panic_is_counted_for_its_function() {
    let counting = Counting::default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rig = rig();
    let batch = [submitted("a", 0, "panic", 0), submitted("b", 1, "ok", 0)];
    metrics::with_local_recorder(&counting, || runtime.block_on(rig.consumer().handle(to_event(&batch)))).unwrap();
    let counts = counting.0.lock().unwrap();
    assert_eq!(counts.get("openqq_handler_panics_total{function=scripted}"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("openqq_dead_letters_total{function=scripted,reason=panic}"), Some(&1), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tenant_in_a_batch_holds_back_only_its_own_records_not_another_tenants_on_its_partition() {
    let rig = rig();
    // The slow tenant's records come first in the partition; a victim's record follows them.
    let batch = [
        submitted_by("slowpoke", "s1", 0, "slow", 0),
        submitted_by("slowpoke", "s2", 1, "slow", 0),
        submitted("quick", 2, "ok", 0),
    ];
    let consumer = Arc::new(rig.consumer());
    let started = Instant::now();
    let running = tokio::spawn({
        let consumer = consumer.clone();
        let event = to_event(&batch);
        async move { consumer.handle(event).await }
    });
    while rig.published(EventKind::ValidationRequested).await == 0 {
        assert!(started.elapsed() < Duration::from_secs(2), "the victim's event waited for the slow tenant");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!running.is_finished(), "the slow tenant's records are still being handled");
    running.await.unwrap().expect("the batch succeeds");
    assert!(started.elapsed() >= Duration::from_secs(6), "one tenant's records are handled in order, one at a time");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 1, "only the victim's record publishes");
}

#[tokio::test]
async fn a_retriable_failure_fails_only_its_partition_from_its_record_and_the_rest_of_the_batch_is_done() {
    let rig = rig();
    let mut elsewhere = submitted_by("other", "fine-too", 0, "ok", 10);
    elsewhere.partition = 3;
    let batch = vec![
        submitted("first", 4, "ok", 10),
        submitted("stuck", 5, "retry", 10),
        submitted("after", 6, "ok", 10),
        submitted_by("other", "fine", 7, "ok", 10),
        elsewhere,
    ];
    let failed = rig.consumer().handle(to_event(&batch)).await.expect_err("a record failed retriably");
    let at: Vec<(u32, u64)> = failed.0.iter().map(|e| (e.partition, e.offset)).collect();
    assert_eq!(at, vec![(2, 5)], "partition 2 resumes at the failed record; partition 3 is done");
    assert!(failed.to_string().contains("the store is down"), "{failed}");
    // The records the batch got through published their events: acme's first, the other tenant's
    // on the same partition, and partition 3's.
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 3);
}

/// Issue 13: a batch's store writes go to the store together. Records of two tenants on one
/// partition and a third tenant on another, three lanes, make one `apply_batch` call (one
/// transaction on the embedded store) where each record made its own call before.
#[test]
fn the_writes_of_a_batch_across_tenants_and_partitions_are_one_store_call() {
    let counting = Counting::default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rig = rig();
    let mut elsewhere = submitted_by("other", "o1", 0, "ok", 0);
    elsewhere.partition = 3;
    let batch = [
        submitted("a1", 0, "ok", 0),
        submitted_by("globex", "g1", 1, "ok", 0),
        submitted("a2", 2, "ok", 0),
        elsewhere,
        submitted_by("globex", "g2", 3, "ok", 0),
        submitted("a3", 4, "ok", 0),
    ];
    metrics::with_local_recorder(&counting, || runtime.block_on(rig.consumer().handle(to_event(&batch)))).unwrap();
    let counts = counting.0.lock().unwrap().clone();
    let calls =
        |op: &str| counts.get(&format!("openqq_store_requests_total{{backend=embedded,operation={op}}}")).copied();
    assert_eq!((calls("apply_batch"), calls("apply")), (Some(1), None), "{counts:?}");
    runtime.block_on(async {
        assert_eq!(rig.published(EventKind::ValidationRequested).await, 6, "every record went on");
        for design in ["a1", "a2", "a3"] {
            assert_eq!(rig.design(design).await.expect("materialised").status, DesignStatus::Submitted);
        }
    });
}

/// A write the store refuses for good (here: results for a design that never materialised)
/// dead-letters its record; the writes after it in the same call, its own lane's and another
/// tenant's, are applied in the next call, and their records go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_store_refuses_for_good_dead_letters_its_record_and_the_writes_after_it_go_on() {
    let rig = rig();
    let batch = [
        submitted("before", 0, "ok", 0),
        submitted("nowhere", 1, "unknown", 0),
        submitted("after", 2, "ok", 0),
        submitted_by("globex", "theirs", 3, "ok", 0),
    ];
    rig.consumer().handle(to_event(&batch)).await.expect("a refused write fails its record, not the batch");
    let letters = rig.dead_letters().await;
    assert_eq!(letters.iter().map(|l| l.source_offset).collect::<Vec<_>>(), [1], "only the refused record");
    assert!(letters[0].reason.contains("not found"), "{}", letters[0].reason);
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 3);
    assert!(rig.design("before").await.is_some() && rig.design("after").await.is_some());
    let theirs = rig.b.store.get(&TenantId::parse("globex").unwrap(), &DesignId::parse("theirs").unwrap()).await;
    assert!(theirs.unwrap().is_some(), "another tenant's write in the same call was applied");
    assert_eq!(rig.design("nowhere").await.expect("its revision shows as failed").status, DesignStatus::Failed);
}

/// A retriable failure after a record's write stops its lane there: the records before it are
/// done, the records after it are left to the retry, even though their first writes went in the
/// same call (the retry applies them again as duplicates and goes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retriable_failure_after_a_batched_write_leaves_the_records_after_it_to_the_retry() {
    let rig = rig();
    let batch = [submitted("done", 0, "ok", 0), submitted("stuck", 1, "retry", 0), submitted("later", 2, "ok", 0)];
    let failed = rig.consumer().handle(to_event(&batch)).await.expect_err("the lane stopped");
    assert_eq!(failed.0.iter().map(|e| (e.partition, e.offset)).collect::<Vec<_>>(), [(2, 1)]);
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 1, "only the record before the failure went on");
    // The retry, from the failed record on, as the trigger makes it once the store is back.
    let retried = [submitted("stuck", 1, "ok", 0), submitted("later", 2, "ok", 0)];
    rig.consumer().handle(to_event(&retried)).await.expect("the retry succeeds");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 3);
    let timeline =
        rig.b.store.timeline(&TenantId::parse("acme").unwrap(), &DesignId::parse("later").unwrap()).await.unwrap();
    assert_eq!(timeline.unwrap().len(), 1, "the write applied before the failure was not applied twice");
}

/// A record that can never succeed, after a record that failed retriably in its lane, is left to
/// the retry like the rest of the lane: dead-lettering it now would dead-letter it again when the
/// retry reads it. (Its plan failed before the first record's write was even applied.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_after_a_retriable_failure_in_its_lane_is_not_dead_lettered_before_the_retry() {
    let rig = rig();
    let batch = [submitted("stuck", 0, "retry", 0), submitted("broken", 1, "fail", 0), submitted("x", 2, "panic", 0)];
    let failed = rig.consumer().handle(to_event(&batch)).await.expect_err("the lane stopped");
    assert_eq!(failed.0.iter().map(|e| e.offset).collect::<Vec<_>>(), [0]);
    assert!(rig.dead_letters().await.is_empty(), "nothing is given up on before the records ahead of it end");
    assert!(rig.design("broken").await.is_none(), "nor is its revision failed");
    assert_eq!(rig.design("x").await.expect("its write went in the batch").status, DesignStatus::Submitted);
}

/// [`Scripted`] with a tenant's share of a batch.
struct Sharing(usize);

#[async_trait]
impl RecordHandler for Sharing {
    type Payload = Value;
    type State = Envelope<Value>;
    const KIND: EventKind = EventKind::DesignSubmitted;

    fn name(&self) -> &'static str {
        "sharing"
    }

    fn share(&self) -> Option<usize> {
        Some(self.0)
    }

    fn plan(&self, env: Envelope<Value>) -> Result<Step<Self::State>, RecordError> {
        Scripted.plan(env)
    }

    async fn after(
        &self,
        env: Envelope<Value>,
        a: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Self::State>, RecordError> {
        Scripted.after(env, a, out).await
    }
}

impl Rig {
    fn sharing(&self, share: usize) -> Consumer<Sharing> {
        Consumer::new(Sharing(share), self.b.log.clone(), self.b.store.clone(), self.topics.clone())
    }

    /// What was published back on `design.submitted` (on the partitions the keys hash to; the
    /// test's records claim partition 2 whatever their key), partition by partition.
    async fn put_back(&self) -> Vec<LogRecord> {
        let mut out = Vec::new();
        for p in 0..4 {
            out.extend(self.b.source.read(&self.topics.of(EventKind::DesignSubmitted), p, 0, 100).await.unwrap());
        }
        out
    }
}

/// The `deferred` header of `r`.
fn deferrals(r: &LogRecord) -> Option<&str> {
    let (_, v) = r.headers.iter().find(|(n, _)| n == openqq_core::event::headers::DEFERRED)?;
    std::str::from_utf8(v).ok()
}

#[tokio::test]
async fn past_its_share_a_tenants_records_go_back_to_the_end_of_the_topic_as_they_were() {
    let rig = rig();
    let batch = [
        submitted_by("noisy", "n1", 0, "ok", 0),
        submitted_by("noisy", "n2", 1, "ok", 0),
        submitted("quiet", 2, "ok", 0),
        submitted_by("noisy", "n3", 3, "ok", 0),
    ];
    rig.sharing(1).handle(to_event(&batch)).await.expect("the batch succeeds");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 2, "noisy's first record and quiet's");
    let back = rig.put_back().await;
    assert_eq!(back.len(), 2, "noisy's two records past its share");
    for (again, original) in back.iter().zip([&batch[1], &batch[3]]) {
        assert_eq!((&again.key, &again.value), (&original.key, &original.value), "in their order, as they were");
        assert!(original.headers.iter().all(|h| again.headers.contains(h)), "with their headers");
        assert_eq!(deferrals(again), Some("1"));
    }
    // Read again, the first of them is handled and the other put back once more.
    rig.sharing(1).handle_records(&back).await.expect("the batch succeeds");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 3);
    let back = rig.put_back().await;
    assert_eq!(back.len(), 3);
    assert_eq!(deferrals(&back[2]), Some("2"));
    assert_eq!(back[2].value, batch[3].value);
}

#[tokio::test]
async fn records_past_a_share_that_the_retry_reads_again_are_not_put_back() {
    let rig = rig();
    // acme fails at offset 5: other's record at 4 (past its share) is before the failure and goes
    // back on the topic; its record at 6 is read again by the retry, so it does not.
    let batch = [
        submitted_by("other", "o1", 3, "ok", 0),
        submitted_by("other", "o2", 4, "ok", 0),
        submitted("stuck", 5, "retry", 0),
        submitted_by("other", "o3", 6, "ok", 0),
    ];
    let failed = rig.sharing(1).handle(to_event(&batch)).await.expect_err("a record failed retriably");
    let at: Vec<(u32, u64)> = failed.0.iter().map(|e| (e.partition, e.offset)).collect();
    assert_eq!(at, vec![(2, 5)]);
    let back = rig.put_back().await;
    assert_eq!(back.iter().map(|r| &r.value).collect::<Vec<_>>(), [&batch[1].value]);
}

/// [`Scripted`] with a tenant's time slice of a batch.
struct Slicing(Duration);

#[async_trait]
impl RecordHandler for Slicing {
    type Payload = Value;
    type State = Envelope<Value>;
    const KIND: EventKind = EventKind::DesignSubmitted;

    fn name(&self) -> &'static str {
        "slicing"
    }

    fn slice(&self) -> Option<Duration> {
        Some(self.0)
    }

    fn plan(&self, env: Envelope<Value>) -> Result<Step<Self::State>, RecordError> {
        Scripted.plan(env)
    }

    async fn after(
        &self,
        env: Envelope<Value>,
        a: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Self::State>, RecordError> {
        Scripted.after(env, a, out).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_time_slice_a_lane_begins_no_more_records_and_puts_the_rest_back_in_order() {
    let rig = rig();
    // noisy's four records take 3 s each; quiet's one is quick and shares the partition.
    let batch = [
        submitted_by("noisy", "n1", 0, "slow", 0),
        submitted_by("noisy", "n2", 1, "slow", 0),
        submitted("quiet", 2, "ok", 0),
        submitted_by("noisy", "n3", 3, "slow", 0),
        submitted_by("noisy", "n4", 4, "ok", 0),
    ];
    let consumer =
        Consumer::new(Slicing(Duration::from_secs(1)), rig.b.log.clone(), rig.b.store.clone(), rig.topics.clone());
    let t0 = Instant::now();
    consumer.handle(to_event(&batch)).await.expect("the batch succeeds");
    let took = t0.elapsed();
    // The slice (1 s) plus the one record begun inside it (3 s), never the lane's 9 s.
    assert!(took < Duration::from_secs(5), "the batch held its partition for {took:?}");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 1, "quiet's record; noisy's first is slow");
    let back = rig.put_back().await;
    let values: Vec<_> = back.iter().map(|r| &r.value).collect();
    assert_eq!(values, [&batch[1].value, &batch[3].value, &batch[4].value], "noisy's others, in their order");
    assert!(back.iter().all(|r| deferrals(r) == Some("1")));
}

#[tokio::test]
async fn a_batch_of_quick_records_is_handled_whole_within_its_slice() {
    let rig = rig();
    let batch: Vec<LogRecord> = (0..20).map(|i| submitted_by("busy", &format!("b{i}"), i, "ok", 0)).collect();
    let consumer =
        Consumer::new(Slicing(Duration::from_secs(5)), rig.b.log.clone(), rig.b.store.clone(), rig.topics.clone());
    consumer.handle(to_event(&batch)).await.expect("the batch succeeds");
    assert_eq!(rig.published(EventKind::ValidationRequested).await, 20);
    assert!(rig.put_back().await.is_empty(), "nothing is deferred");
}
