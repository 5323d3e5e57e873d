//! The event-source-mapping emulator over the embedded log, with scripted handlers.

use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use openqq_adapters::{Durability, EmbeddedEventLog};
use openqq_core::partition::partition_for;
use openqq_core::{EventLog, LogSource, Record};
use openqq_runtime::kafka::{records, Incoming};
use openqq_runtime::{BatchError, BatchHandler, EventSourceMapping, FailedPartitions, MappingConfig};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Records what it saw; fails every batch containing a poisoned value, up to `fail_times` times
/// per poisoned value (u32::MAX: forever).
#[derive(Default)]
struct Script {
    seen: Mutex<Vec<(String, Vec<u8>)>>,
    batches: Mutex<Vec<usize>>,
    failures: Mutex<HashMap<Vec<u8>, u32>>,
    poison: Vec<(Vec<u8>, u32)>,
    /// Batches still to panic on.
    panics: Mutex<u32>,
    /// What `dead_lettered` was told: (offsets, reason).
    told: Mutex<Vec<(Vec<u64>, String)>>,
    /// `dead_lettered` fails (the store behind it is down).
    refuse_dead_letters: bool,
}

#[async_trait]
impl BatchHandler for Script {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions> {
        let recs = records(&event);
        let panic_now = {
            let mut left = self.panics.lock().unwrap();
            let panic_now = *left > 0;
            *left = left.saturating_sub(1);
            panic_now
        };
        if panic_now {
            panic!("scripted panic");
        }
        for r in &recs {
            let v = r.value.clone().unwrap();
            if let Some((_, times)) = self.poison.iter().find(|(p, _)| *p == v) {
                let mut f = self.failures.lock().unwrap();
                let n = f.entry(v.clone()).or_default();
                if *n < *times {
                    *n += 1;
                    // What a handler reporting this failure has done: every other partition's
                    // records, and this partition's before the failed one.
                    let done = recs.iter().filter(|d| d.partition != r.partition || d.offset < r.offset);
                    self.seen.lock().unwrap().extend(
                        done.map(|d| (String::from_utf8(d.key.clone().unwrap()).unwrap(), d.value.clone().unwrap())),
                    );
                    return Err(BatchError {
                        function: "scripted".into(),
                        topic: r.topic.clone(),
                        partition: r.partition,
                        offset: r.offset,
                        reason: "scripted failure".into(),
                    }
                    .into());
                }
            }
        }
        self.batches.lock().unwrap().push(recs.len());
        let mut seen = self.seen.lock().unwrap();
        for r in recs {
            seen.push((String::from_utf8(r.key.unwrap()).unwrap(), r.value.unwrap()));
        }
        Ok(())
    }

    async fn dead_lettered(&self, records: &[Incoming], reason: &str) -> Result<(), openqq_core::PortError> {
        self.told.lock().unwrap().push((records.iter().map(|r| r.offset).collect(), reason.to_owned()));
        if self.refuse_dead_letters {
            return Err(openqq_core::PortError::Unavailable("the store is down".into()));
        }
        Ok(())
    }
}

fn rec(key: &str, n: u32) -> Record {
    Record { key: key.into(), value: format!("{key}:{n}").into_bytes(), headers: vec![] }
}

fn config(window_ms: u64) -> MappingConfig {
    let mut c = MappingConfig::new("in", "dlq");
    c.batch_size = 10;
    c.batch_window = Duration::from_millis(window_ms);
    c.initial_backoff = Duration::from_millis(20);
    c.max_retries = 2;
    c.give_up_after = Duration::ZERO;
    c
}

async fn until(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn start(
    log: Arc<EmbeddedEventLog>,
    handler: Arc<Script>,
    cfg: MappingConfig,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let esm = EventSourceMapping::new(log.clone(), log, handler, cfg).await.unwrap();
    let (tx, rx) = watch::channel(false);
    (tx, tokio::spawn(esm.run(rx)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_is_delivered_once_in_partition_order_and_committed_after() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
    let keys = ["a", "b", "c", "d", "e"];
    for n in 0..30 {
        log.publish("in", keys.iter().map(|k| rec(k, n)).collect()).await.unwrap();
    }
    let h = Arc::new(Script::default());
    let (stop, task) = start(log.clone(), h.clone(), config(50)).await;
    until("all records", Duration::from_secs(10), || h.seen.lock().unwrap().len() == 150).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    let seen = h.seen.lock().unwrap().clone();
    for k in keys {
        let mine: Vec<_> = seen.iter().filter(|(key, _)| key == k).map(|(_, v)| v.clone()).collect();
        let want: Vec<_> = (0..30).map(|n| format!("{k}:{n}").into_bytes()).collect();
        assert_eq!(mine, want, "key {k} delivered once each, in order");
        let p = partition_for(k, 4);
        assert_eq!(log.committed("scripted", "in", p).await.unwrap(), log.end_offsets("in").await.unwrap()[p as usize]);
    }
    assert!(h.batches.lock().unwrap().iter().all(|n| *n <= 10), "no batch exceeds batch_size");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_partition_waits_and_retries_while_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
    let bad = "a";
    let good = ["b", "c", "d", "e", "f"].into_iter().find(|k| partition_for(k, 4) != partition_for(bad, 4)).unwrap();
    log.publish("in", vec![rec(bad, 0), rec(bad, 1)]).await.unwrap();
    let h = Arc::new(Script { poison: vec![(b"a:0".to_vec(), 2)], ..Script::default() });
    let mut cfg = config(0);
    cfg.initial_backoff = Duration::from_millis(300);
    let (stop, task) = start(log.clone(), h.clone(), cfg).await;
    until("the first failure", Duration::from_secs(5), || !h.failures.lock().unwrap().is_empty()).await;
    log.publish("in", vec![rec(good, 0)]).await.unwrap();
    until("the healthy partition", Duration::from_secs(5), || h.seen.lock().unwrap().iter().any(|(k, _)| k == good))
        .await;
    assert!(!h.seen.lock().unwrap().iter().any(|(k, _)| k == bad), "the failing partition has not moved on yet");
    assert_eq!(
        log.committed("scripted", "in", partition_for(bad, 4)).await.unwrap(),
        0,
        "nothing committed for the failing partition"
    );
    until("the retried records", Duration::from_secs(10), || {
        h.seen.lock().unwrap().iter().filter(|(k, _)| k == bad).count() == 2
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap();
    let bad_seen: Vec<_> = h.seen.lock().unwrap().iter().filter(|(k, _)| k == bad).map(|(_, v)| v.clone()).collect();
    assert_eq!(bad_seen, vec![b"a:0".to_vec(), b"a:1".to_vec()], "retried in order, once each");
    assert!(
        log.read("dlq", 0, 0, 10).await.unwrap().is_empty()
            && log.end_offsets("dlq").await.unwrap().iter().all(|e| *e == 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_never_succeeds_goes_to_the_dead_letter_topic_and_the_partition_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
    log.publish("in", vec![rec("a", 0)]).await.unwrap();
    let h = Arc::new(Script { poison: vec![(b"a:0".to_vec(), u32::MAX)], ..Script::default() });
    let (stop, task) = start(log.clone(), h.clone(), config(0)).await;
    let p = partition_for("a", 4);
    until("the dead letter", Duration::from_secs(10), || {
        *h.failures.lock().unwrap().get(&b"a:0".to_vec()).unwrap_or(&0) >= 3
    })
    .await;
    until("the commit", Duration::from_secs(5), || {
        futures_lite_block(log.committed("scripted", "in", p)).unwrap() == 1
    })
    .await;
    log.publish("in", vec![rec("a", 1)]).await.unwrap();
    until("the next record", Duration::from_secs(5), || h.seen.lock().unwrap().len() == 1).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(
        *h.failures.lock().unwrap().get(&b"a:0".to_vec()).unwrap(),
        3,
        "one attempt and max_retries = 2 retries"
    );
    let dlq = log.read("dlq", p, 0, 10).await.unwrap();
    assert_eq!(dlq.len(), 1);
    let letter = openqq_core::DeadLetter::from_record(&dlq[0]).unwrap();
    assert_eq!((letter.source_offset, letter.value.as_slice()), (0, &b"a:0"[..]), "the original bytes");
    assert!(letter.reason.contains("scripted failure"));
    let told = h.told.lock().unwrap().clone();
    assert_eq!(told.len(), 1, "the handler heard of the dead letter once");
    assert_eq!(told[0].0, vec![0]);
    assert!(told[0].1.starts_with("retries exhausted") && told[0].1.contains("scripted failure"), "{}", told[0].1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_its_batch_and_releases_its_partitions_without_ending_its_worker() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap());
    log.publish("in", vec![rec("a", 0)]).await.unwrap();
    let h = Arc::new(Script { panics: Mutex::new(2), ..Script::default() });
    let mut cfg = config(0);
    // One worker: if the panic ended it, or left the partition claimed, nothing would follow.
    cfg.concurrency = 1;
    cfg.max_retries = 5;
    let (stop, task) = start(log.clone(), h.clone(), cfg).await;
    until("the record after two panics", Duration::from_secs(10), || h.seen.lock().unwrap().len() == 1).await;
    log.publish("in", vec![rec("a", 1)]).await.unwrap();
    until("the next record", Duration::from_secs(5), || h.seen.lock().unwrap().len() == 2).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert!(log.end_offsets("dlq").await.unwrap().iter().all(|e| *e == 0), "a panic is retried like an error");
}

fn futures_lite_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_keep_arriving_share_a_batch_until_the_window_closes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap());
    let h = Arc::new(Script::default());
    let mut cfg = config(300);
    cfg.batch_size = 1000;
    cfg.linger = Duration::from_millis(150);
    let (stop, task) = start(log.clone(), h.clone(), cfg).await;
    // One record every 20 ms for a second: never a pause as long as the linger.
    for n in 0..50 {
        log.publish("in", vec![rec("a", n)]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until("every record", Duration::from_secs(10), || h.seen.lock().unwrap().len() == 50).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    let batches = h.batches.lock().unwrap().clone();
    assert!(batches[0] > 1, "records arriving within the linger were batched: {batches:?}");
    assert!(batches.len() >= 2, "the window closed the first batch before the stream ended: {batches:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_record_on_an_idle_log_is_not_held_for_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap());
    let h = Arc::new(Script::default());
    // A window far longer than the test may take: only the linger may hold the record.
    let (stop, task) = start(log.clone(), h.clone(), config(60_000)).await;
    log.publish("in", vec![rec("a", 0)]).await.unwrap();
    until("the record", Duration::from_secs(10), || !h.seen.lock().unwrap().is_empty()).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(*h.batches.lock().unwrap(), vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_whose_revisions_cannot_be_failed_are_neither_dead_lettered_nor_committed() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap());
    log.publish("in", vec![rec("a", 0)]).await.unwrap();
    let h =
        Arc::new(Script { poison: vec![(b"a:0".to_vec(), u32::MAX)], refuse_dead_letters: true, ..Script::default() });
    let (stop, task) = start(log.clone(), h.clone(), config(0)).await;
    until("two refused dead letters", Duration::from_secs(10), || h.told.lock().unwrap().len() >= 2).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert!(log.end_offsets("dlq").await.unwrap().iter().all(|e| *e == 0), "nothing was dead-lettered");
    assert_eq!(log.committed("scripted", "in", 0).await.unwrap(), 0, "the record waits to be tried again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_records_a_batch_never_got_past_are_reported_given_up_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap());
    log.publish("in", vec![rec("a", 0), rec("a", 1), rec("a", 2)]).await.unwrap();
    let h = Arc::new(Script { poison: vec![(b"a:1".to_vec(), u32::MAX)], ..Script::default() });
    let (stop, task) = start(log.clone(), h.clone(), config(0)).await;
    until("the dead letters", Duration::from_secs(10), || !h.told.lock().unwrap().is_empty()).await;
    until("the commit", Duration::from_secs(5), || {
        futures_lite_block(log.committed("scripted", "in", 0)).unwrap() == 3
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(h.told.lock().unwrap()[0].0, vec![1, 2], "a:0 was handled before the failure; a:1 and a:2 never were");
    let dlq: Vec<u64> = log.read("dlq", 0, 0, 10).await.unwrap().iter().map(|r| r.offset).collect();
    assert_eq!(dlq.len(), 2, "only the records the partition never got past are dead-lettered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_partition_resumes_from_its_failed_record_and_the_rest_of_the_batch_is_committed_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
    let other = ["b", "c", "d", "e", "f"].into_iter().find(|k| partition_for(k, 4) != partition_for("a", 4)).unwrap();
    let mut batch = vec![rec("a", 0), rec("a", 1), rec("a", 2)];
    batch.extend([rec(other, 0), rec(other, 1)]);
    log.publish("in", batch).await.unwrap();
    // a:1 fails once: the partition's first attempt stops there, the second gets past it.
    let h = Arc::new(Script { poison: vec![(b"a:1".to_vec(), 1)], ..Script::default() });
    let (stop, task) = start(log.clone(), h.clone(), config(100)).await;
    until("every record", Duration::from_secs(10), || h.seen.lock().unwrap().len() >= 5).await;
    let (pa, po) = (partition_for("a", 4), partition_for(other, 4));
    until("the commits", Duration::from_secs(5), || {
        futures_lite_block(log.committed("scripted", "in", pa)).unwrap() == 3
            && futures_lite_block(log.committed("scripted", "in", po)).unwrap() == 2
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap();
    let seen: Vec<String> = h.seen.lock().unwrap().iter().map(|(_, v)| String::from_utf8(v.clone()).unwrap()).collect();
    let count = |v: &str| seen.iter().filter(|s| *s == v).count();
    for v in ["a:0", "a:1", "a:2"] {
        assert_eq!(count(v), 1, "{v} delivered to completion once: {seen:?}");
    }
    for n in 0..2 {
        let v = format!("{other}:{n}");
        assert_eq!(count(&v), 1, "{v} of the healthy partition is not delivered again: {seen:?}");
    }
    let a: Vec<&String> = seen.iter().filter(|s| s.starts_with("a:")).collect();
    assert_eq!(a, ["a:0", "a:1", "a:2"], "in order");
    assert!(log.end_offsets("dlq").await.unwrap().iter().all(|e| *e == 0), "nothing dead-lettered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_holds_at_most_its_byte_bound_but_always_one_record_and_every_record_arrives_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
    // 300 KB records: three fit a 1 MB bound; one 1 MB record is over it on its own.
    let big = |n: u32, len: usize| Record { key: "a".into(), value: vec![b'0' + (n % 10) as u8; len], headers: vec![] };
    let mut records: Vec<Record> = (0..9).map(|n| big(n, 300_000)).collect();
    records.insert(4, big(99, 1_000_000));
    log.publish("in", records.clone()).await.unwrap();
    let h = Arc::new(Script::default());
    let mut cfg = config(50);
    cfg.max_batch_bytes = 950_000;
    let (stop, task) = start(log.clone(), h.clone(), cfg).await;
    until("all records", Duration::from_secs(10), || h.seen.lock().unwrap().len() == records.len()).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    let seen: Vec<Vec<u8>> = h.seen.lock().unwrap().iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(seen, records.iter().map(|r| r.value.clone()).collect::<Vec<_>>(), "once each, in order");
    let batches = h.batches.lock().unwrap().clone();
    assert!(batches.iter().all(|n| *n <= 3), "no batch holds more than its byte bound allows: {batches:?}");
    assert!(batches.contains(&1), "the record over the bound went in a batch of its own: {batches:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_failing_for_less_than_give_up_after_is_retried_past_max_retries_not_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
    log.publish("in", vec![rec("a", 0)]).await.unwrap();
    // Fails 8 times (an outage that outlasts the 2 retries), then succeeds.
    let h = Arc::new(Script { poison: vec![(b"a:0".to_vec(), 8)], ..Script::default() });
    let mut cfg = config(0);
    cfg.initial_backoff = Duration::from_millis(10);
    cfg.max_backoff = Duration::from_millis(40);
    cfg.give_up_after = Duration::from_secs(30);
    let (stop, task) = start(log.clone(), h.clone(), cfg).await;
    until("the record, once the outage is over", Duration::from_secs(10), || h.seen.lock().unwrap().len() == 1).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(*h.failures.lock().unwrap().get(&b"a:0".to_vec()).unwrap(), 8, "retried past max_retries = 2");
    assert!(h.told.lock().unwrap().is_empty(), "no revision was failed");
    assert!(log.end_offsets("dlq").await.unwrap().iter().all(|e| *e == 0), "nothing dead-lettered");
}
