//! The local event-source-mapping emulator: runs a consumer function over the log the way the
//! MSK trigger runs it on AWS.
//!
//! Workers (`concurrency` of them) claim partitions that have records and are not backing off,
//! so a partition is only ever in one batch at a time (that is what keeps per-tenant order).
//! Only partitions the consumer group's [`Lease`] gives this process are claimed; when a
//! partition is (re)assigned here, its offset is read again from the group's commit.
//! A batch holds up to `batch_size` records; if it is not full, the worker waits for more while
//! they keep arriving (a wait of `linger` that brings none ends it), at most until the oldest
//! claimed record is `batch_window` old. The handler gets an AWS-shaped `KafkaEvent` and
//! answers as a function with `ReportBatchItemFailures` does: nothing (all done), or per failed
//! partition the record to resume from. Offsets are committed after the handler returned, up to
//! where it got: a failed partition backs off exponentially while the others go on, and is read
//! again from its failed record. After `max_retries` retries the handler is told which records
//! it never got past (so their revisions become `failed`), those records go to the dead-letter
//! topic with the reason, and the partition moves on — once it has also been failing for
//! `give_up_after` (a minute), so that an outage of a few seconds fails no revision. A handler that panics fails every
//! partition of its batch from the start: the worker goes on and its partitions are released.

use crate::consumer::BatchHandler;
use crate::dead_letter::{dead_letter_record, panic_message};
use crate::kafka::{in_event_order, Incoming};
use futures_util::FutureExt;
use openqq_core::event::headers;
use openqq_core::{EventLog, Lease, LogRecord, LogSource, PortError};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

/// A batch's default byte bound. On AWS a batch is bounded by Lambda's 6 MB invocation payload,
/// which carries the values base64-encoded (×4/3) with some JSON around each; 4 MiB of raw bytes
/// stays inside it. It also bounds how long one batch, and so every partition it claimed, can
/// be held by one tenant's large records.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct MappingConfig {
    /// The topic the function consumes.
    pub topic: String,
    /// Where records go after the last retry (the on-failure destination).
    pub dead_letter_topic: String,
    pub batch_size: usize,
    /// Most key and value bytes in one batch (at least one record is always taken).
    pub max_batch_bytes: usize,
    pub batch_window: Duration,
    /// How long a batch that is not full waits for the next record: once a wait brings none,
    /// the batch goes, so the window costs only while records keep arriving (an idle platform
    /// hands a lone record on at once; a busy one still fills batches up to the window).
    pub linger: Duration,
    /// Retries after the first attempt before a batch is dead-lettered.
    pub max_retries: u32,
    /// And how long it must have been failing by then: a failure that outlasts only the retries
    /// (a few seconds of backoff) is an outage of the store, the log or a disk more often than a
    /// record that can never succeed, and giving up would fail revisions that only had to wait.
    pub give_up_after: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Batches in flight at once (each on distinct partitions).
    pub concurrency: usize,
    /// The consumer group is this prefix and the function's name (platforms sharing a cluster
    /// use the topic prefix here too).
    pub group_prefix: String,
    /// The consumer group, where it is not `group_prefix` and the function's name: a function
    /// reading several topics reads each under a group of its own, as Kafka triggers on AWS must.
    pub group: Option<String>,
}

impl MappingConfig {
    pub fn new(topic: impl Into<String>, dead_letter_topic: impl Into<String>) -> Self {
        Self {
            topic: topic.into(),
            dead_letter_topic: dead_letter_topic.into(),
            batch_size: 100,
            max_batch_bytes: MAX_BATCH_BYTES,
            batch_window: Duration::from_millis(500),
            linger: Duration::from_millis(5),
            max_retries: 5,
            give_up_after: Duration::from_secs(60),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            concurrency: 2,
            group_prefix: String::new(),
            group: None,
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// Per-partition bookkeeping, shared by the workers of one mapping.
#[derive(Debug, Clone, Default)]
struct Partition {
    /// Next offset to read: the committed offset, once `epoch` is known.
    next: u64,
    /// The lease epoch `next` was read in; `None` until the committed offset is read.
    epoch: Option<u64>,
    claimed: bool,
    /// Failed attempts of the current batch.
    failures: u32,
    /// When the current batch first failed.
    failing_since: Option<Instant>,
    not_before: Option<Instant>,
}

pub struct EventSourceMapping {
    source: Arc<dyn LogSource>,
    log: Arc<dyn EventLog>,
    handler: Arc<dyn BatchHandler>,
    cfg: MappingConfig,
    /// The consumer group: `group_prefix` and the function's name, unless the config names one.
    group: String,
    lease: Arc<dyn Lease>,
    parts: Mutex<Vec<Partition>>,
}

impl EventSourceMapping {
    /// Joins the function's consumer group on the topic.
    pub async fn new(
        source: Arc<dyn LogSource>,
        log: Arc<dyn EventLog>,
        handler: Arc<dyn BatchHandler>,
        cfg: MappingConfig,
    ) -> Result<Arc<Self>, PortError> {
        let n = source.partitions(&cfg.topic);
        let group = cfg.group.clone().unwrap_or_else(|| format!("{}{}", cfg.group_prefix, handler.name()));
        let lease = source.join(&group, &cfg.topic).await?;
        let parts = Mutex::new(vec![Partition::default(); n as usize]);
        Ok(Arc::new(Self { source, log, handler, cfg, group, lease, parts }))
    }

    fn function(&self) -> &str {
        self.handler.name()
    }

    fn group(&self) -> &str {
        &self.group
    }

    /// Runs the workers until `shutdown` becomes true; batches in flight finish first.
    pub async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        let workers: Vec<_> = (0..self.cfg.concurrency.max(1))
            .map(|_| {
                let me = self.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(async move { me.worker(shutdown).await })
            })
            .collect();
        for w in workers {
            let _ = w.await;
        }
        // Leaving waits (up to the source's timeout) for the group to take the partitions back:
        // on the blocking pool, so every mapping leaves at once and no runtime worker waits.
        let lease = self.lease.clone();
        let _ = tokio::task::spawn_blocking(move || lease.leave()).await;
        info!(function = self.function(), topic = %self.cfg.topic, "The event source mapping drained and stopped.");
    }

    async fn worker(&self, mut shutdown: watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            let ends = match self.source.end_offsets(&self.cfg.topic).await {
                Ok(e) => e,
                Err(e) => {
                    warn!(function = self.function(), error = %e, "Reading end offsets failed; retrying.");
                    tokio::time::sleep(self.cfg.initial_backoff).await;
                    continue;
                }
            };
            self.record_lag(&ends);
            let (claimed, wait) = self.claim(&ends);
            if claimed.is_empty() {
                let pause = wait.unwrap_or(Duration::from_millis(200)).min(Duration::from_millis(200));
                tokio::select! {
                    _ = self.source.wait_for_append(&self.cfg.topic, pause) => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            let batch = self.fill(&claimed, &mut shutdown).await;
            self.invoke(&claimed, batch).await;
        }
    }

    /// Claims every free partition this process holds with records to read, or says how long
    /// until one is free.
    fn claim(&self, ends: &[u64]) -> (Vec<Claim>, Option<Duration>) {
        let now = Instant::now();
        let mut parts = self.parts.lock().unwrap();
        let mut claimed = Vec::new();
        let mut soonest: Option<Duration> = None;
        for (p, st) in parts.iter_mut().enumerate() {
            // With the offset unknown, any record may be unread.
            let next = if st.epoch.is_some() { st.next } else { 0 };
            let has_records = ends.get(p).is_some_and(|end| *end > next);
            if st.claimed || !has_records {
                continue;
            }
            match st.not_before {
                Some(t) if t > now => soonest = Some(soonest.map_or(t - now, |s| s.min(t - now))),
                _ => {
                    let Some(epoch) = self.lease.begin(p as u32) else { continue };
                    st.claimed = true;
                    claimed.push(Claim { partition: p as u32, epoch });
                }
            }
        }
        (claimed, soonest)
    }

    /// The offset to read `claim`'s partition from: the group's commit, read again whenever the
    /// partition was assigned here anew.
    async fn position(&self, claim: &Claim) -> Result<u64, PortError> {
        let p = claim.partition as usize;
        {
            let parts = self.parts.lock().unwrap();
            if parts[p].epoch == Some(claim.epoch) {
                return Ok(parts[p].next);
            }
        }
        let next = self.source.committed(self.group(), &self.cfg.topic, claim.partition).await?;
        let mut parts = self.parts.lock().unwrap();
        parts[p] = Partition { next, epoch: Some(claim.epoch), claimed: true, ..Partition::default() };
        Ok(next)
    }

    /// Reads up to `batch_size` records from the claimed partitions, waiting for more while they
    /// keep coming (each wait at most `linger`) until the oldest one is `batch_window` old (or
    /// shutdown begins). Each wait reads on from where the last read of that partition ended, so
    /// records are fetched once per batch.
    async fn fill(&self, claimed: &[Claim], shutdown: &mut watch::Receiver<bool>) -> Vec<LogRecord> {
        let mut batch = Vec::new();
        let mut cursors: Vec<Option<u64>> = vec![None; claimed.len()];
        let mut before_wait = None;
        loop {
            let bytes_full = self.read_more(claimed, &mut cursors, &mut batch).await;
            let full = bytes_full || batch.len() >= self.cfg.batch_size;
            let quiet = before_wait == Some(batch.len());
            let oldest = batch.iter().map(|r| r.timestamp_ms).min();
            let waited = oldest.map(|ts| (chrono::Utc::now().timestamp_millis() - ts).max(0) as u64).unwrap_or(0);
            let window = self.cfg.batch_window.as_millis() as u64;
            if full || quiet || batch.is_empty() || waited >= window || *shutdown.borrow() {
                return batch;
            }
            before_wait = Some(batch.len());
            let wait = Duration::from_millis(window - waited).min(self.cfg.linger);
            tokio::select! {
                _ = self.source.wait_for_append(&self.cfg.topic, wait) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Appends to `batch` what the claimed partitions hold after their `cursors` (the committed
    /// offset at first), within the batch size and byte bound. Per partition, the batch stays a
    /// run of consecutive offsets from the committed one. Says whether the byte bound was reached.
    async fn read_more(&self, claimed: &[Claim], cursors: &mut [Option<u64>], batch: &mut Vec<LogRecord>) -> bool {
        let size = |r: &LogRecord| r.key.len() + r.value.len();
        let mut bytes: usize = batch.iter().map(size).sum();
        for (claim, cursor) in claimed.iter().zip(cursors.iter_mut()) {
            let budget = self.cfg.batch_size.saturating_sub(batch.len());
            if budget == 0 {
                break;
            }
            let p = claim.partition;
            let from = match *cursor {
                Some(from) => from,
                None => match self.position(claim).await {
                    Ok(from) => from,
                    Err(e) => {
                        warn!(function = self.function(), partition = p, error = %e, "Reading a committed offset failed; it will be read again.");
                        continue;
                    }
                },
            };
            match self.source.read(&self.cfg.topic, p, from, budget).await {
                Ok(recs) => {
                    *cursor = Some(from);
                    for r in recs {
                        if !batch.is_empty() && bytes + size(&r) > self.cfg.max_batch_bytes {
                            return true;
                        }
                        bytes += size(&r);
                        *cursor = Some(r.offset + 1);
                        batch.push(r);
                    }
                }
                Err(e) => {
                    warn!(function = self.function(), partition = p, error = %e, "Reading a partition failed; it will be read again.")
                }
            }
        }
        false
    }

    async fn invoke(&self, claimed: &[Claim], batch: Vec<LogRecord>) {
        if batch.is_empty() {
            self.release(claimed);
            return;
        }
        let function = self.function().to_owned();
        let started = Instant::now();
        // A panic that escapes the handler is a failed batch, not a dead worker holding its
        // partitions for good.
        let result = match AssertUnwindSafe(self.handler.handle_records(&batch)).catch_unwind().await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(failed)) => Err(failed
                .0
                .into_iter()
                .map(|e| Failure { partition: e.partition, offset: Some(e.offset), reason: e.to_string() })
                .collect()),
            Err(panic) => {
                metrics::counter!("openqq_handler_panics_total", "function" => function.clone()).increment(1);
                let reason = format!("bug: the {function} handler panicked: {}", panic_message(panic.as_ref()));
                let whole = |(partition, _)| Failure { partition, offset: None, reason: reason.clone() };
                Err(last_offsets(&batch).into_iter().map(whole).collect())
            }
        };
        metrics::histogram!("openqq_batch_duration_seconds", "function" => function.clone())
            .record(started.elapsed().as_secs_f64());
        let failures: Vec<Failure> = result.err().unwrap_or_default();
        let outcome = if failures.is_empty() { "ok" } else { "failed" };
        metrics::counter!("openqq_batches_total", "function" => function.clone(), "outcome" => outcome).increment(1);
        // What the handler finished is committed; each failed partition resumes from its failure.
        let (done, retry) = split_at_failures(batch, &failures);
        self.commit_batch(&done).await;
        for (records, failure) in retry {
            self.fail_partition(&records, failure).await;
        }
        self.release(claimed);
    }

    /// Commits the offset after the last record of each partition in the batch. A commit that
    /// fails leaves the offset behind: the records are read again and applied as no-ops.
    async fn commit_batch(&self, batch: &[LogRecord]) {
        for (p, next) in last_offsets(batch) {
            match self.source.commit(self.group(), &self.cfg.topic, p, next).await {
                Ok(()) => {
                    let mut parts = self.parts.lock().unwrap();
                    let st = &mut parts[p as usize];
                    st.next = next;
                    st.failures = 0;
                    st.failing_since = None;
                    st.not_before = None;
                }
                Err(e) => {
                    warn!(function = self.function(), partition = p, error = %e, "Committing an offset failed; the records will be delivered again.")
                }
            }
        }
    }

    /// A partition failed at the first of `records` (those it never got past, in offset order):
    /// it backs off and retries from there, and after the last retry its records go to the
    /// dead-letter topic and it moves on.
    async fn fail_partition(&self, batch: &[LogRecord], failure: &Failure) {
        let (partition, reason) = (failure.partition, failure.reason.as_str());
        let (attempts, failing_for) = {
            let mut parts = self.parts.lock().unwrap();
            let st = &mut parts[partition as usize];
            st.failures += 1;
            st.not_before = Some(Instant::now() + self.cfg.backoff(st.failures));
            (st.failures, st.failing_since.get_or_insert_with(Instant::now).elapsed())
        };
        if attempts <= self.cfg.max_retries || failing_for < self.cfg.give_up_after {
            warn!(function = self.function(), attempt = attempts, partition, %reason,
                "The partition failed; it waits and retries from the failed record.");
            return;
        }
        error!(function = self.function(), partition, records = batch.len(), %reason, "The partition failed after every retry; the records it never got past go to the dead-letter topic.");
        let reason = format!("retries exhausted: {reason}");
        let incoming: Vec<Incoming> = in_event_order(batch);
        if let Err(e) = self.handler.dead_lettered(&incoming, &reason).await {
            warn!(function = self.function(), error = %e, "Failing the records' revisions did not succeed; the partition will be retried.");
            return;
        }
        match self.dead_letter(&incoming, &reason).await {
            Ok(()) => {
                metrics::counter!("openqq_dead_letters_total", "function" => self.function().to_owned(), "reason" => "retries_exhausted").increment(batch.len() as u64);
                // One line per record, so each request's trace (`openqq trace`) shows its dead letter.
                for rec in &incoming {
                    warn!(function = self.function(), kind = rec.header_str(headers::EVENT_KIND).unwrap_or("unknown"),
                        topic = %rec.topic, partition = rec.partition, offset = rec.offset,
                        correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(""),
                        tenant_id = %String::from_utf8_lossy(rec.key.as_deref().unwrap_or_default()),
                        outcome = "dead_lettered", %reason, "A record was dead-lettered after every retry.");
                }
                self.commit_batch(batch).await;
            }
            Err(e) => {
                warn!(function = self.function(), error = %e, "Dead-lettering failed; the partition will be retried.")
            }
        }
    }

    async fn dead_letter(&self, batch: &[Incoming], reason: &str) -> Result<(), PortError> {
        let records = batch.iter().map(|r| dead_letter_record(r, self.function(), reason)).collect();
        self.log.publish(&self.cfg.dead_letter_topic, records).await
    }

    fn release(&self, claimed: &[Claim]) {
        {
            let mut parts = self.parts.lock().unwrap();
            for c in claimed {
                parts[c.partition as usize].claimed = false;
            }
        }
        for c in claimed {
            self.lease.end(c.partition);
        }
    }

    fn record_lag(&self, ends: &[u64]) {
        let parts = self.parts.lock().unwrap();
        for (p, st) in parts.iter().enumerate().filter(|(_, st)| st.epoch.is_some()) {
            let lag = ends.get(p).copied().unwrap_or(0).saturating_sub(st.next);
            metrics::gauge!("openqq_consumer_lag_records", "function" => self.function().to_owned(), "partition" => p.to_string()).set(lag as f64);
        }
        debug!(function = self.function(), "Lag recorded.");
    }
}

/// Why a partition of a batch failed, and at which offset when the handler said (a panic says
/// nothing: the whole partition's part of the batch is tried again).
#[derive(Debug)]
struct Failure {
    partition: u32,
    offset: Option<u64>,
    reason: String,
}

/// Splits `batch` into the records that are done (every record of a partition that did not
/// fail, and those before the failed record of one that did) and, per failed partition, the
/// records from its failed one on.
fn split_at_failures(batch: Vec<LogRecord>, failures: &[Failure]) -> (Vec<LogRecord>, Vec<(Vec<LogRecord>, &Failure)>) {
    let mut retry: Vec<(Vec<LogRecord>, &Failure)> = failures.iter().map(|f| (Vec::new(), f)).collect();
    let mut done = Vec::new();
    for r in batch {
        let failed =
            retry.iter_mut().find(|(_, f)| f.partition == r.partition && f.offset.is_none_or(|o| r.offset >= o));
        match failed {
            Some((records, _)) => records.push(r),
            None => done.push(r),
        }
    }
    retry.retain(|(records, _)| !records.is_empty());
    (done, retry)
}

/// A partition taken for one batch, in the lease epoch it was taken in.
#[derive(Debug, Clone, Copy)]
struct Claim {
    partition: u32,
    epoch: u64,
}

/// For each partition in the batch, the offset after its last record.
fn last_offsets(batch: &[LogRecord]) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::new();
    for r in batch {
        match out.iter_mut().find(|(p, _)| *p == r.partition) {
            Some((_, next)) => *next = (*next).max(r.offset + 1),
            None => out.push((r.partition, r.offset + 1)),
        }
    }
    out
}
