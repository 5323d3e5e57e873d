//! The consumer driver with a scripted record handler: what happens to a record the platform
//! gives up on (dead letter with the original bytes, revision failed with the reason), a handler
//! that panics, and an event too large to publish.

use async_trait::async_trait;
use openqq_adapters::{Backends, Durability};
use openqq_core::event::Cause;
use openqq_core::ports::MAX_RECORD_BYTES;
use openqq_core::*;
use openqq_runtime::kafka::to_event;
use openqq_runtime::{BatchHandler, Consumer, EventSourceMapping, MappingConfig, Outbox, RecordError, RecordHandler};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Does what each record's payload says: `fail`, `panic`, `retry`, `huge` (publish an event over
/// the record limit), anything else: publish `validation.requested`.
struct Scripted;

#[async_trait]
impl RecordHandler for Scripted {
    type Payload = Value;
    const KIND: EventKind = EventKind::DesignSubmitted;

    fn name(&self) -> &'static str {
        "scripted"
    }

    async fn handle(&self, env: Envelope<Value>, out: &mut Outbox) -> Result<(), RecordError> {
        match env.payload["do"].as_str() {
            Some("fail") => Err(RecordError::Permanent("scripted: the payload can never be valid".into())),
            Some("retry") => Err(RecordError::Retriable("scripted: the store is down".into())),
            Some("panic") => panic!("scripted: index out of bounds"),
            Some("slow") => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Ok(())
            }
            Some("huge") => {
                let big = "x".repeat(MAX_RECORD_BYTES);
                out.publish(&Envelope::new(EventKind::ValidationFinished, &env.cause(), "scripted", big));
                Ok(())
            }
            _ => {
                out.publish(&Envelope::new(EventKind::ValidationRequested, &env.cause(), "scripted", json!({})));
                Ok(())
            }
        }
    }
}

fn cause(tenant: &str, design: &str, revision: u64) -> Cause {
    Cause {
        tenant_id: TenantId::parse(tenant).unwrap(),
        design_id: DesignId::parse(design).unwrap(),
        revision,
        correlation_id: CorrelationId::parse(format!("corr-{design}")).unwrap(),
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
