//! The per-record driver shared by the consumer functions.
//!
//! A function implements [`RecordHandler`] for one decoded envelope of its kind; [`Consumer`]
//! turns it into a [`BatchHandler`] over a whole `KafkaEvent`.
//!
//! Order is promised per tenant, not per partition: a batch is split into **lanes**, the records
//! of one key (tenant) of one partition in offset order. Lanes run concurrently (at most
//! [`LANES`] at once), so a tenant whose records are slow (a large netlist, a validation that
//! runs to its budget) holds back only its own records, never another tenant's that share its
//! partition. What a lane's handlers publish goes into the lane's [`Outbox`], flushed once when
//! the lane ends (in order), so a lane of 100 records costs one append per topic, not 100, and a
//! quick tenant's events leave without waiting for a slow one's.
//!
//! Store writes are batched too. A handler does not write: it names each write a record makes
//! ([`Step::Write`]) and goes on with the outcome ([`RecordHandler::after`]). A lane asks for its
//! records' first writes together, then runs each record's follow-up in offset order, then asks
//! for the writes those named, and so on; the batch's [`BatchWriter`](crate::writes) applies what
//! the lanes ask for at about the same time in one [`openqq_core::DesignWrites::apply_batch`].
//! A batch of design-job or results records is one store call (one transaction on the embedded
//! store) where it was one per record; a validation batch, whose records write before and after
//! validating, is one call for the `started` writes and, for the `finished` writes, one per group
//! of lanes that finish validating together. A lane's writes are applied in its order, so each
//! design's still are; two revisions of a design in one lane now write `started` r1, `started` r2,
//! `finished` r1, `finished` r2 where they wrote r1's two before r2's, which ends the same: a
//! write is stale only against a newer one of its own kind, and status moves only at the design's
//! current revision ([`openqq_core::revision`]).
//!
//! A permanent failure gives up on that record and the partition moves on: its revision becomes
//! `failed` with the reason, and the record goes to the dead-letter topic as it was. Permanent
//! failures are the handler's own verdict, a write the store refuses for good, a panic (a bug:
//! caught per record, so the worker and the rest of the batch go on), and an event the handler
//! produced that is over the log's record limit. A retriable failure stops its lane at that
//! record: the records before it are seen through and their events flushed, and its partition
//! fails from that record on (a partial-batch response): the trigger retries each failed
//! partition from its earliest failed record, and the other partitions move on. Whatever after
//! that record was applied (a later record's first write, or a record in another lane of the
//! partition) is applied again as a no-op, because every write is conditional on revision.

use crate::dead_letter::{dead_letter_record, end_batch_item, fail_revision, panic_message};
use crate::kafka::{records, Incoming};
use crate::writes::BatchWriter;
use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use futures_util::{FutureExt, StreamExt};
use openqq_core::event::headers;
use openqq_core::{Applied, DesignWrites, Envelope, EventKind, EventLog, LogRecord, PortError, Topics};
use serde::de::DeserializeOwned;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{error, info, info_span, warn, Instrument};

pub use crate::outbox::Outbox;
pub use crate::writes::Write;

/// How one record failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Worth retrying later (storage or log unavailable, throttled). Fails the batch.
    #[error("retriable: {0}")]
    Retriable(String),
    /// Can never succeed (undecodable, unknown schema, invalid). Dead-lettered.
    #[error("permanent: {0}")]
    Permanent(String),
    /// A port failed: retriable or permanent as [`PortError::is_retriable`] says, and kept whole
    /// (with the cause underneath it) as this error's source.
    #[error("{kind}: {0}", kind = if .0.is_retriable() { "retriable" } else { "permanent" })]
    Port(#[from] PortError),
}

impl RecordError {
    /// Whether the record is worth trying again (its batch fails) rather than dead-lettered.
    pub fn is_retriable(&self) -> bool {
        match self {
            RecordError::Retriable(_) => true,
            RecordError::Permanent(_) => false,
            RecordError::Port(e) => e.is_retriable(),
        }
    }

    /// Why the record failed, without the classification: what the batch error, the log line
    /// and the dead letter say.
    pub fn reason(&self) -> String {
        match self {
            RecordError::Retriable(reason) | RecordError::Permanent(reason) => reason.clone(),
            RecordError::Port(e) => e.to_string(),
        }
    }
}

/// Why giving up on a record did not succeed: the lane stops at the record and its batch is
/// retried.
#[derive(Debug, thiserror::Error)]
enum GiveUpError {
    #[error("marking the revision failed did not succeed")]
    FailRevision(#[source] PortError),
    #[error("telling the batch its item failed did not succeed")]
    EndBatchItem(#[source] PortError),
    #[error("dead-lettering failed")]
    DeadLetter(#[source] PortError),
}

/// One partition of a batch failed and must be retried from this record; the partition's records
/// before it are done.
#[derive(Debug, thiserror::Error)]
#[error("{function} failed at {topic}-{partition} offset {offset}: {reason}")]
pub struct BatchError {
    pub function: String,
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub reason: String,
}

/// The partitions of a batch that failed, each at the first record to try again (at most one
/// per partition). Every record of a partition not named here is done: this is the partial-batch
/// response (`batchItemFailures`) the trigger resumes each named partition from.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct FailedPartitions(pub Vec<BatchError>);

impl From<BatchError> for FailedPartitions {
    fn from(e: BatchError) -> Self {
        Self(vec![e])
    }
}

impl FailedPartitions {
    /// The earliest failure of each partition among `failures`.
    pub fn earliest(failures: impl IntoIterator<Item = BatchError>) -> Option<Self> {
        let mut by_partition: Vec<BatchError> = Vec::new();
        for e in failures {
            match by_partition.iter_mut().find(|k| k.topic == e.topic && k.partition == e.partition) {
                Some(kept) if e.offset < kept.offset => *kept = e,
                Some(_) => {}
                None => by_partition.push(e),
            }
        }
        by_partition.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        (!by_partition.is_empty()).then_some(Self(by_partition))
    }
}

/// What the Lambda runtime and the local emulator invoke.
#[async_trait]
pub trait BatchHandler: Send + Sync {
    /// The function's name, also its consumer group.
    fn name(&self) -> &str;
    /// Handles a batch; an error names, per failed partition, the record to resume from.
    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions>;
    /// Handles records the local trigger read from the log, as [`handle`](Self::handle) would
    /// handle the MSK event carrying them (which is what it does unless a handler overrides it).
    async fn handle_records(&self, batch: &[LogRecord]) -> Result<(), FailedPartitions> {
        self.handle(crate::kafka::to_event(batch)).await
    }
    /// The trigger is about to dead-letter a batch that failed every retry, for `reason`;
    /// `records` are the ones the handler never got past (the record its error named and those
    /// after it; all of them after a panic). The function records what that means for them. An
    /// error keeps the whole batch uncommitted, to be tried again later.
    async fn dead_lettered(&self, _records: &[Incoming], _reason: &str) -> Result<(), PortError> {
        Ok(())
    }
}

/// What a record does next.
#[derive(Debug)]
pub enum Step<S> {
    /// Apply this write to the store, then go on with [`RecordHandler::after`], given this state
    /// and the write's outcome.
    Write(Write, S),
    /// The record is done.
    Done,
}

/// A consumer function's logic for one record of its kind, split at its store writes so that
/// the consumer can apply a batch's writes together: [`plan`](RecordHandler::plan) names the
/// record's first write, and [`after`](RecordHandler::after) goes on once a write was applied,
/// with its outcome, until the record is done.
#[async_trait]
pub trait RecordHandler: Send + Sync {
    /// The payload of the events this function consumes.
    type Payload: DeserializeOwned + Send;
    /// What a record carries from a write to what follows it.
    type State: Send;
    /// The kind of event this function consumes.
    const KIND: EventKind;
    /// The function's name (`design-job`, `validation`, `results`).
    fn name(&self) -> &'static str;
    /// The most records of one tenant a batch handles (see [`crate::share`]); the rest go back
    /// to the end of the topic. `None` (the default): all of them.
    fn share(&self) -> Option<usize> {
        None
    }
    /// How long after its batch began a lane may still begin a record's work (see
    /// [`crate::share`]): past it, the lane's records whose work has not begun go back to the end
    /// of the topic, so a tenant holds its partition for at most this plus one record. `None`
    /// (the default): no limit.
    fn slice(&self) -> Option<Duration> {
        None
    }
    /// The record's first store write, from its envelope alone (no I/O).
    fn plan(&self, envelope: Envelope<Self::Payload>) -> Result<Step<Self::State>, RecordError>;
    /// Goes on once the write the last step asked for was applied (`applied`: duplicate and stale
    /// are success too): publishes the record's events, does its work, and asks for its next
    /// write or ends.
    async fn after(
        &self,
        state: Self::State,
        applied: Applied,
        out: &mut Outbox,
    ) -> Result<Step<Self::State>, RecordError>;
}

/// Wraps a [`RecordHandler`] into a [`BatchHandler`] with batched store writes, dead-lettering,
/// failed revisions, panic isolation and a batched outbox.
pub struct Consumer<H> {
    handler: H,
    log: Arc<dyn EventLog>,
    /// Where the batch's writes are applied, and where a revision whose record is dead-lettered
    /// becomes `failed`.
    store: Arc<dyn DesignWrites>,
    topics: Topics,
}

/// Whom a record is about, once its envelope decoded: what its log line names.
#[derive(Default)]
struct About {
    correlation_id: String,
    tenant_id: String,
    design_id: String,
}

/// How far one record of a lane got: whom it is about, its span, and the time it took (its own
/// steps and the store calls its writes were in).
struct Progress {
    about: About,
    span: tracing::Span,
    took: Duration,
}

impl Default for Progress {
    fn default() -> Self {
        Self { about: About::default(), span: tracing::Span::none(), took: Duration::ZERO }
    }
}

/// Why a record is given up on, for the `reason` label of `openqq_dead_letters_total`.
#[derive(Debug, Clone, Copy)]
enum GiveUp {
    Handler,
    Panic,
    OversizedOutput,
}

impl GiveUp {
    fn label(self) -> &'static str {
        match self {
            GiveUp::Handler => "handler",
            GiveUp::Panic => "panic",
            GiveUp::OversizedOutput => "oversized_output",
        }
    }
}

/// A step that failed, with why it is given up on if it is.
type Failed = (GiveUp, RecordError);

impl<H: RecordHandler> Consumer<H> {
    pub fn new(handler: H, log: Arc<dyn EventLog>, store: Arc<dyn DesignWrites>, topics: Topics) -> Self {
        Self { handler, log, store, topics }
    }

    /// Handles a batch's records, lane by lane ([`lanes`]).
    async fn handle_incoming(&self, records: Vec<Incoming>) -> Result<(), FailedPartitions> {
        let writer = BatchWriter::new(self.store.as_ref());
        let began = Instant::now();
        let (lanes, mut deferred) = crate::share::split(lanes(records), self.handler.share());
        let outcomes: Vec<(Result<(), BatchError>, Vec<Incoming>)> =
            futures_util::stream::iter(lanes.into_iter().map(|lane| self.lane(lane, &writer, began)))
                .buffer_unordered(LANES)
                .collect()
                .await;
        // Every lane ran to its end, its first retriable failure or its time slice; each failed
        // partition resumes from its earliest failure (later records of other lanes there are
        // applied again as no-ops).
        let mut failures = Vec::new();
        for (outcome, past_slice) in outcomes {
            failures.extend(outcome.err());
            deferred.extend(past_slice);
        }
        if let Err(e) = self.defer(deferred, &failures).await {
            failures.push(e);
        }
        match FailedPartitions::earliest(failures) {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    /// Puts the records past their tenant's share or time slice back at the end of their topic, except those
    /// a failed partition reads again anyway (at or after its failure). When that does not
    /// succeed, their partitions fail from the earliest of them.
    async fn defer(&self, deferred: Vec<Incoming>, failures: &[BatchError]) -> Result<(), BatchError> {
        let read_again = |r: &Incoming| {
            failures.iter().any(|f| f.topic == r.topic && f.partition == r.partition && f.offset <= r.offset)
        };
        let deferred: Vec<Incoming> = deferred.into_iter().filter(|r| !read_again(r)).collect();
        let Some(first) = deferred.iter().min_by_key(|r| r.offset) else { return Ok(()) };
        let function = self.handler.name();
        let records: Vec<(String, openqq_core::Record)> =
            deferred.iter().map(|r| (r.topic.clone(), crate::share::again(r))).collect();
        for (topic, run) in openqq_core::ports::by_topic(records) {
            if let Err(e) = self.log.publish(&topic, run).await {
                return Err(BatchError {
                    function: function.to_owned(),
                    topic: first.topic.clone(),
                    partition: first.partition,
                    offset: first.offset,
                    reason: format!("putting records past their tenant's share back on the topic failed: {e}"),
                });
            }
        }
        for tenant in deferred.iter().filter_map(|r| r.key.as_deref()).collect::<std::collections::BTreeSet<_>>() {
            let n = deferred.iter().filter(|r| r.key.as_deref() == Some(tenant)).count();
            info!(function, tenant_id = %String::from_utf8_lossy(tenant), deferred = n,
                "A tenant's records past its share of the batch went back to the end of the topic.");
        }
        metrics::counter!("openqq_records_deferred_total", "function" => function).increment(deferred.len() as u64);
        Ok(())
    }

    /// Decodes the record and plans its first write, with panics caught.
    fn planned(&self, rec: &Incoming, progress: &mut Progress) -> Result<Step<H::State>, Failed> {
        let bytes = rec.value.as_ref().map_err(|e| (GiveUp::Handler, RecordError::Permanent(e.clone())))?;
        let mut env = Envelope::<H::Payload>::decode_as(bytes, H::KIND)
            .map_err(|e| (GiveUp::Handler, RecordError::Permanent(e.to_string())))?;
        progress.about = About {
            correlation_id: env.correlation_id.to_string(),
            tenant_id: env.tenant_id.to_string(),
            design_id: env.design_id.to_string(),
        };
        // A record an operator replayed from the dead-letter topic: its writes follow the replay
        // rule (openqq_core::revision::plan_replay).
        env.replay_of = rec.header_str(headers::REPLAY_OF).map(str::to_owned);
        progress.span = info_span!(
            "record",
            function = self.handler.name(),
            correlation_id = %env.correlation_id,
            tenant_id = %env.tenant_id,
            design_id = %env.design_id,
            revision = env.revision,
            kind = %env.kind,
        );
        let planned = progress.span.in_scope(|| std::panic::catch_unwind(AssertUnwindSafe(|| self.handler.plan(env))));
        match planned {
            Ok(step) => step.map_err(|e| (GiveUp::Handler, e)),
            Err(panic) => Err(self.panicked(rec, panic.as_ref())),
        }
    }

    /// What follows an applied write, with panics caught: a panic, or an event too large to
    /// publish, is a permanent failure of this record.
    async fn followed(
        &self,
        rec: &Incoming,
        progress: &Progress,
        state: H::State,
        applied: Applied,
        out: &mut Outbox,
    ) -> Result<Step<H::State>, Failed> {
        let queued = out.records().len();
        let outcome = AssertUnwindSafe(self.handler.after(state, applied, out))
            .catch_unwind()
            .instrument(progress.span.clone())
            .await;
        let refused = out.take_refusal();
        match outcome {
            Err(panic) => {
                out.truncate(queued);
                Err(self.panicked(rec, panic.as_ref()))
            }
            Ok(Ok(step)) => match refused {
                Some(reason) => Err((GiveUp::OversizedOutput, RecordError::Permanent(reason))),
                None => Ok(step),
            },
            Ok(Err(e)) => Err((GiveUp::Handler, e)),
        }
    }

    /// A handler panicked on `rec` (a bug): counted, logged, and a permanent failure.
    fn panicked(&self, rec: &Incoming, panic: &(dyn std::any::Any + Send)) -> Failed {
        let function = self.handler.name();
        metrics::counter!("openqq_handler_panics_total", "function" => function).increment(1);
        let reason = format!("bug: the {function} handler panicked: {}", panic_message(panic));
        error!(function, topic = %rec.topic, partition = rec.partition, offset = rec.offset, %reason,
            "A handler panicked; the record is dead-lettered and the batch goes on.");
        (GiveUp::Panic, RecordError::Permanent(reason))
    }

    /// Fails the record's revision, then dead-letters the record.
    async fn give_up(&self, rec: &Incoming, reason: &str) -> Result<(), GiveUpError> {
        fail_revision(self.store.as_ref(), rec, reason).await.map_err(GiveUpError::FailRevision)?;
        end_batch_item(self.log.as_ref(), &self.topics, rec).await.map_err(GiveUpError::EndBatchItem)?;
        let letter = dead_letter_record(rec, self.handler.name(), reason);
        self.log.publish(&self.topics.dead_letter(), vec![letter]).await.map_err(GiveUpError::DeadLetter)
    }

    /// The log line of a handled record.
    fn handled_line(&self, rec: &Incoming, progress: &Progress, outcome: &str, reason: Option<&str>) {
        let (function, about) = (self.handler.name(), &progress.about);
        let kind = kind_label(rec.header_str(headers::EVENT_KIND).unwrap_or("unknown"));
        let correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(&about.correlation_id);
        let elapsed_ms = (progress.took.as_secs_f64() * 1e6).round() / 1e3;
        info!(function, kind, topic = %rec.topic, partition = rec.partition, offset = rec.offset,
            correlation_id, tenant_id = %about.tenant_id, design_id = %about.design_id,
            elapsed_ms, outcome, reason, "A record was handled.");
    }

    /// Counts a handled record by its outcome, and its time.
    fn count(&self, rec: &Incoming, progress: &Progress, outcome: &'static str) {
        let function = self.handler.name();
        let kind = kind_label(rec.header_str(headers::EVENT_KIND).unwrap_or("unknown"));
        metrics::histogram!("openqq_event_duration_seconds", "function" => function)
            .record(progress.took.as_secs_f64());
        metrics::counter!("openqq_events_total", "function" => function, "kind" => kind, "outcome" => outcome)
            .increment(1);
    }

    /// Records how a record ended, once every record before it in its lane did: done, or failed
    /// for good, in which case it is given up on (revision failed, record dead-lettered). Returns
    /// why the lane stops at this record when giving up did not succeed.
    async fn settle(&self, rec: &Incoming, progress: &Progress, outcome: Result<(), Failed>) -> Option<String> {
        let function = self.handler.name();
        let outcome = match outcome {
            Ok(()) => {
                self.handled_line(rec, progress, "applied", None);
                "applied"
            }
            Err((source, e)) => {
                let reason = e.reason();
                warn!(function, topic = %rec.topic, partition = rec.partition, offset = rec.offset,
                    correlation_id = rec.header_str(headers::CORRELATION_ID).unwrap_or(""), %reason,
                    "The record can never succeed; its revision failed and it was sent to the dead-letter topic.");
                if let Err(failed) = self.give_up(rec, &reason).await {
                    return Some(openqq_core::error::with_causes(&failed));
                }
                metrics::counter!("openqq_dead_letters_total", "function" => function, "reason" => source.label())
                    .increment(1);
                self.handled_line(rec, progress, "dead_lettered", Some(&reason));
                "dead_lettered"
            }
        };
        self.count(rec, progress, outcome);
        None
    }

    /// Handles one lane (one tenant's records of one partition), then publishes what its handlers
    /// queued. Records go through their steps together: every record's first write in one
    /// request to the batch's [`BatchWriter`], then each record's follow-up in offset order, then
    /// the writes those asked for in one request, and so on. Each write is conditional on
    /// revision and a lane's writes are applied in its order, so a design's records still apply
    /// in order.
    ///
    /// Records end in offset order, as they did one at a time: a record that failed for good is
    /// dead-lettered only once every record before it ended, and a retriable failure stops the
    /// lane at its record (the records before it are seen through, those from it on are left to
    /// the retry, and none of them is dead-lettered now, for the retry would read it again).
    ///
    /// Once the handler's time slice since the batch `began` has passed, a record whose work has
    /// not begun is not begun here: it and the lane's records after it are returned, to go back to
    /// the end of the topic. A lane always begins at least one record, so it moves on.
    async fn lane(
        &self,
        mut lane: Vec<Incoming>,
        writer: &BatchWriter<'_>,
        began: Instant,
    ) -> (Result<(), BatchError>, Vec<Incoming>) {
        let mut run = Run {
            progress: lane.iter().map(|_| Progress::default()).collect(),
            ended: lane.iter().map(|_| None).collect(),
            settled: 0,
            stop: None,
            deferred_from: None,
        };
        let mut begun = vec![false; lane.len()];
        let slice_over = || self.handler.slice().is_some_and(|slice| began.elapsed() >= slice);
        let mut out = Outbox::new(self.topics.clone());
        let mut waiting: Vec<(usize, Write, H::State)> = Vec::new();
        for (i, rec) in lane.iter().enumerate() {
            let t0 = Instant::now();
            let planned = self.planned(rec, &mut run.progress[i]);
            run.progress[i].took += t0.elapsed();
            match planned {
                Ok(Step::Write(write, state)) => waiting.push((i, write, state)),
                Ok(Step::Done) => run.end(i, Ok(())),
                Err(failed) => run.end(i, Err(failed)),
            }
            if run.stopped(i) {
                break;
            }
        }
        self.settle_ended(&lane, &mut run).await;
        while !waiting.is_empty() {
            waiting.retain(|(i, ..)| !run.stopped(*i));
            let (mut records, mut writes, mut states) = (Vec::new(), Vec::new(), Vec::new());
            for (i, write, state) in waiting.drain(..) {
                records.push(i);
                writes.push(write);
                states.push(state);
            }
            let t0 = Instant::now();
            let (writes, done) = writer.apply(writes).await;
            let call = t0.elapsed();
            let (mut outcomes, mut error) = (done.applied.into_iter(), done.error);
            for ((i, write), state) in records.into_iter().zip(writes).zip(states) {
                if run.stopped(i) {
                    continue;
                }
                run.progress[i].took += call;
                let step = match outcomes.next() {
                    Some(_) if !begun[i] && begun.contains(&true) && slice_over() => {
                        run.deferred_from = Some(i);
                        continue;
                    }
                    Some(applied) => {
                        begun[i] = true;
                        let t = Instant::now();
                        let step = self.followed(&lane[i], &run.progress[i], state, applied, &mut out).await;
                        run.progress[i].took += t.elapsed();
                        step
                    }
                    None => match error.take() {
                        Some(e) => Err((GiveUp::Handler, RecordError::from(e))),
                        // Not attempted: this lane's write before it failed. It goes in the next request.
                        None => {
                            waiting.push((i, write, state));
                            continue;
                        }
                    },
                };
                match step {
                    Ok(Step::Write(write, state)) => waiting.push((i, write, state)),
                    Ok(Step::Done) => run.end(i, Ok(())),
                    Err(failed) => run.end(i, Err(failed)),
                }
            }
            self.settle_ended(&lane, &mut run).await;
        }
        // Records past the slice come after every record that began, and after the stop if any.
        let past_slice = run.deferred_from.map(|d| lane.split_off(d)).unwrap_or_default();
        let fail = |i: usize, reason: String| {
            let rec: &Incoming = &lane[i];
            BatchError {
                function: self.handler.name().to_owned(),
                topic: rec.topic.clone(),
                partition: rec.partition,
                offset: rec.offset,
                reason,
            }
        };
        // Keep the progress made so far even when the lane stopped: the retry re-applies it as
        // no-ops either way. Events that cannot be published fail the lane from its start.
        if let Err(e) = out.flush(self.log.as_ref()).await {
            return (Err(fail(0, format!("publishing the batch's events failed: {e}"))), past_slice);
        }
        let outcome = match run.stop {
            Some(stop) => {
                if stop.retried {
                    let rec = &lane[stop.at];
                    self.handled_line(rec, &run.progress[stop.at], "retried", Some(&stop.reason));
                    self.count(rec, &run.progress[stop.at], "retried");
                }
                Err(fail(stop.at, stop.reason))
            }
            None => Ok(()),
        };
        (outcome, past_slice)
    }

    /// Settles, in offset order, the records that ended whose predecessors all did.
    async fn settle_ended(&self, lane: &[Incoming], run: &mut Run) {
        while run.settled < lane.len() && !run.stopped(run.settled) {
            let i = run.settled;
            let Some(outcome) = run.ended[i].take() else { break };
            if let Some(reason) = self.settle(&lane[i], &run.progress[i], outcome).await {
                run.stop = Some(Stop { at: i, reason, retried: false });
                break;
            }
            run.settled += 1;
        }
    }
}

/// Where a lane's records are.
struct Run {
    progress: Vec<Progress>,
    /// How each record ended, until it is settled (`None` while it runs, and once settled).
    ended: Vec<Option<Result<(), Failed>>>,
    /// Records before this one are settled.
    settled: usize,
    /// The record the lane does not get past, if there is one.
    stop: Option<Stop>,
    /// The first record left for a later batch (its tenant's time slice was over), if any: it
    /// and the records after it are not begun here.
    deferred_from: Option<usize>,
}

/// The record a lane stops at, and why.
struct Stop {
    at: usize,
    reason: String,
    /// It failed retriably (rather than failing to be given up on): its log line says so.
    retried: bool,
}

impl Run {
    /// Record `i` ended: a retriable failure stops the lane there (the earliest such record
    /// wins); anything else waits to be settled in order.
    fn end(&mut self, i: usize, outcome: Result<(), Failed>) {
        match outcome {
            Err((_, e)) if e.is_retriable() => {
                if !self.stopped(i) {
                    self.stop = Some(Stop { at: i, reason: e.reason(), retried: true });
                }
            }
            outcome => self.ended[i] = Some(outcome),
        }
    }

    /// Whether record `i` is at or after the record the lane stops at, or the first it defers.
    fn stopped(&self, i: usize) -> bool {
        self.stop.as_ref().is_some_and(|stop| i >= stop.at) || self.deferred_from.is_some_and(|d| i >= d)
    }
}

#[async_trait]
impl<H: RecordHandler> BatchHandler for Consumer<H> {
    fn name(&self) -> &str {
        self.handler.name()
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions> {
        self.handle_incoming(records(&event)).await
    }

    /// The records as they are: no round trip through the event's base64.
    async fn handle_records(&self, batch: &[LogRecord]) -> Result<(), FailedPartitions> {
        self.handle_incoming(crate::kafka::in_event_order(batch)).await
    }

    async fn dead_lettered(&self, records: &[Incoming], reason: &str) -> Result<(), PortError> {
        for rec in records {
            fail_revision(self.store.as_ref(), rec, reason).await?;
            end_batch_item(self.log.as_ref(), &self.topics, rec).await?;
        }
        Ok(())
    }
}

/// Lanes of one batch handled at once. Each lane is one tenant's records of one partition; more
/// lanes than cores is on purpose, since a lane mostly waits (on the store, the log, or the
/// validator's blocking thread) and the operating system shares the cores among the rest.
pub const LANES: usize = 16;

/// Splits a batch into lanes: the records of one (topic, partition, key) in offset order, lanes
/// in the order their first record appears.
pub(crate) fn lanes(records: Vec<Incoming>) -> Vec<Vec<Incoming>> {
    let mut lanes: Vec<Vec<Incoming>> = Vec::new();
    let mut index: std::collections::HashMap<(String, u32, Option<Vec<u8>>), usize> = std::collections::HashMap::new();
    for rec in records {
        let at = *index.entry((rec.topic.clone(), rec.partition, rec.key.clone())).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[at].push(rec);
    }
    lanes
}

/// Keeps the `kind` label bounded: anything unknown is `unknown`.
fn kind_label(kind: &str) -> &'static str {
    EventKind::parse(kind).map(|k| k.as_str()).unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: u32, offset: u64, key: &str) -> Incoming {
        Incoming {
            topic: "t".into(),
            partition,
            offset,
            key: Some(key.as_bytes().to_vec()),
            value: Ok(Vec::new()),
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_batch_splits_into_one_lane_per_tenant_and_partition_each_in_offset_order() {
        let batch = vec![rec(0, 1, "a"), rec(0, 2, "b"), rec(0, 3, "a"), rec(1, 7, "a"), rec(0, 4, "b")];
        let got: Vec<Vec<(u32, u64)>> =
            lanes(batch).iter().map(|l| l.iter().map(|r| (r.partition, r.offset)).collect()).collect();
        assert_eq!(got, vec![vec![(0, 1), (0, 3)], vec![(0, 2), (0, 4)], vec![(1, 7)]]);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Refused;

    #[test]
    fn a_record_error_from_a_port_keeps_its_class_its_words_and_its_cause() {
        let retriable = RecordError::from(PortError::unavailable("the store did not answer", Refused));
        assert!(retriable.is_retriable());
        assert_eq!(retriable.to_string(), "retriable: unavailable: the store did not answer");
        assert_eq!(retriable.reason(), "unavailable: the store did not answer");
        let port = std::error::Error::source(&retriable).expect("the port error is the source");
        let cause = port.source().expect("and its cause is kept underneath");
        assert!(cause.downcast_ref::<Refused>().is_some());

        let permanent = RecordError::from(PortError::invalid("record", "too large"));
        assert!(!permanent.is_retriable());
        assert_eq!(permanent.to_string(), "permanent: invalid record: too large");
        assert_eq!(permanent.reason(), "invalid record: too large");
    }
}
