//! Concurrent submissions share their durable writes: [`Grouped`] queues what callers hand it
//! while a write is under way and does the whole queue in the next one (one transaction in the
//! embedded log and store, one produce per topic on Kafka) rather than one write each. Two kinds
//! of work are grouped: log appends ([`GroupCommit`], the event log the API publishes to) and the
//! accepted-revision markers written once a submission is durable ([`AcceptedMarkers`]).
//!
//! Each caller still gets its answer only once its own write is done, and the items of one call
//! keep their order (they go together, in order, after those of calls that came earlier). A
//! write that fails fails every call in it, each with the same kind of error, so each client is
//! answered as if its own write had failed. At idle a lone call is written at once: nothing
//! waits for company, a call only joins a write that has not started yet.
//!
//! The writes run on a task of their own, so a request that goes away (its client closed the
//! connection) never strands the calls that joined its group.

use async_trait::async_trait;
use openqq_core::ports::{by_topic, check_record_sizes, Failure, PortResult, Record};
use openqq_core::{AcceptedRevision, DesignStore, EventLog, PortError, TenantId};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Most bytes one group carries; the calls past it wait for the next write. A single call over
/// it is written alone.
pub const MAX_GROUP_BYTES: usize = 4 << 20;

/// Histogram of the calls per grouped write, labelled by `group` ([`GroupWork::NAME`]).
pub const GROUP_CALLS_METRIC: &str = "openqq_api_group_calls";

/// Where a call waits for its write's outcome.
pub type Answer = oneshot::Sender<PortResult<()>>;

/// Work that callers hand over one item at a time and that is done a group at a time.
#[async_trait]
pub trait GroupWork: Send + Sync + 'static {
    type Item: Send + 'static;
    /// The `group` label of [`GROUP_CALLS_METRIC`].
    const NAME: &'static str;
    /// Bytes `item` adds to its group (see [`MAX_GROUP_BYTES`]).
    fn bytes(item: &Self::Item) -> usize;
    /// Does the work of `group`, in order, and answers each of its callers.
    async fn run(&self, group: Vec<(Self::Item, Answer)>);
}

/// Calls to [`Grouped::submit`] made while a write is under way, done together in the next.
pub struct Grouped<W: GroupWork> {
    work: Arc<W>,
    pending: Arc<Mutex<Pending<W::Item>>>,
}

struct Pending<T> {
    /// Whether a writing task is running; it takes every call queued before it stops.
    running: bool,
    queue: Vec<(T, Answer)>,
}

impl<W: GroupWork> Grouped<W> {
    pub fn new(work: W) -> Self {
        Self { work: Arc::new(work), pending: Arc::new(Mutex::new(Pending { running: false, queue: Vec::new() })) }
    }

    /// Queues `item` for the next write and waits for that write's outcome.
    pub async fn submit(&self, item: W::Item) -> PortResult<()> {
        let (done, answer) = oneshot::channel();
        let start = {
            let mut pending = lock(&self.pending);
            pending.queue.push((item, done));
            !std::mem::replace(&mut pending.running, true)
        };
        if start {
            tokio::spawn(drain(self.work.clone(), self.pending.clone()));
        }
        answer.await.unwrap_or_else(|_| {
            Err(PortError::Unavailable(Failure::from("the shared write this call joined was interrupted")))
        })
    }
}

fn lock<T>(pending: &Mutex<Pending<T>>) -> MutexGuard<'_, Pending<T>> {
    // Nothing that holds the lock can panic half-way through a change; take the queue as it is.
    pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Stops the writing task's claim when it panics, so the next call starts another (the calls it
/// had taken are answered with an error as their senders drop).
struct Running<'a, T>(&'a Mutex<Pending<T>>);

impl<T> Drop for Running<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).running = false;
        }
    }
}

/// Writes what is queued, group after group, until the queue is empty.
async fn drain<W: GroupWork>(work: Arc<W>, pending: Arc<Mutex<Pending<W::Item>>>) {
    let _running = Running(&pending);
    loop {
        let group = {
            let mut pending = lock(&pending);
            if pending.queue.is_empty() {
                pending.running = false;
                return;
            }
            take_group::<W>(&mut pending.queue)
        };
        metrics::histogram!(GROUP_CALLS_METRIC, "group" => W::NAME).record(group.len() as f64);
        work.run(group).await;
    }
}

/// The first calls of `queue`, up to [`MAX_GROUP_BYTES`] (at least one call).
fn take_group<W: GroupWork>(queue: &mut Vec<(W::Item, Answer)>) -> Vec<(W::Item, Answer)> {
    let mut bytes = 0;
    let mut n = 0;
    for (item, _) in queue.iter() {
        let size = W::bytes(item);
        if n > 0 && bytes + size > MAX_GROUP_BYTES {
            break;
        }
        bytes += size;
        n += 1;
    }
    queue.drain(..n).collect()
}

/// Log appends: a call's records for one topic.
pub struct Appends(pub Arc<dyn EventLog>);

/// The event log, with concurrent calls to `publish` grouped into shared appends.
pub type GroupCommit = Grouped<Appends>;

#[async_trait]
impl GroupWork for Appends {
    type Item = (String, Vec<Record>);
    const NAME: &'static str = "log_append";

    fn bytes((_, records): &Self::Item) -> usize {
        records.iter().map(|r| r.value.len() + r.key.len()).sum()
    }

    async fn run(&self, group: Vec<(Self::Item, Answer)>) {
        // One append per topic, the topics in the order their first call came.
        for (topic, calls) in by_topic(group.into_iter().map(|((topic, records), done)| (topic, (records, done)))) {
            let (records, waiters): (Vec<Vec<Record>>, Vec<Answer>) = calls.into_iter().unzip();
            let result = self.0.publish(&topic, records.into_iter().flatten().collect()).await;
            answer_all(waiters, result);
        }
    }
}

#[async_trait]
impl EventLog for GroupCommit {
    async fn publish(&self, topic: &str, records: Vec<Record>) -> PortResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        // A record the log refuses is this call's own problem, not its group's.
        check_record_sizes(&records)?;
        self.submit((topic.to_owned(), records)).await
    }
}

/// Accepted-revision markers ([`DesignStore::record_accepted_many`]).
pub struct AcceptedMarkers(pub Arc<dyn DesignStore>);

/// The accepted-revision markers of `store`, with concurrent calls grouped into shared writes.
pub type Markers = Grouped<AcceptedMarkers>;

/// [`Markers`] of `store`.
pub fn markers(store: Arc<dyn DesignStore>) -> Arc<Markers> {
    Arc::new(Grouped::new(AcceptedMarkers(store)))
}

#[async_trait]
impl GroupWork for AcceptedMarkers {
    type Item = (TenantId, AcceptedRevision);
    const NAME: &'static str = "accepted";

    fn bytes((_, a): &Self::Item) -> usize {
        // The marker's row: its ids and timestamps, and the design's name.
        256 + a.name.as_ref().map_or(0, String::len)
    }

    async fn run(&self, group: Vec<(Self::Item, Answer)>) {
        let (markers, waiters): (Vec<Self::Item>, Vec<Answer>) = group.into_iter().unzip();
        // Markers keep the highest revision, so writing a group again is harmless.
        let written = retried(MARKER_RETRY_FOR, || self.0.record_accepted_many(&markers)).await;
        answer_all(waiters, written);
    }
}

/// How long a group of accepted markers is tried again while the store answers with a retriable
/// error (throttled, unreachable). The submissions are durable already and their clients wait
/// for the 202, which promises that the design reads at once (and so takes revisions at once);
/// past this the 202 goes out anyway and the design shows once the consumers materialise it.
pub const MARKER_RETRY_FOR: Duration = Duration::from_secs(2);

/// Longest pause between two tries of [`retried`].
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Runs `write` until it succeeds, fails for good, or the next try would start after `within`:
/// pausing 10 ms before the second try, twice as long before each next one up to
/// [`MAX_RETRY_PAUSE`], or as long as a throttled answer asks.
async fn retried<F, Fut>(within: Duration, mut write: F) -> PortResult<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = PortResult<()>>,
{
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_millis(10);
    loop {
        let e = match write().await {
            Err(e) if e.is_retriable() => e,
            done => return done,
        };
        let wait = match &e {
            PortError::Throttled { retry_after: Some(asked) } => pause.max(*asked),
            _ => pause,
        };
        if Instant::now() + wait > deadline {
            return Err(e);
        }
        tokio::time::sleep(wait).await;
        pause = (pause * 2).min(MAX_RETRY_PAUSE);
    }
}

fn answer_all(waiters: Vec<Answer>, result: PortResult<()>) {
    match result {
        Ok(()) => {
            for w in waiters {
                let _ = w.send(Ok(()));
            }
        }
        Err(e) => {
            let shared = Arc::new(e);
            for w in waiters {
                let _ = w.send(Err(same_kind(&shared)));
            }
        }
    }
}

/// An error of the same kind and message as `e`, with `e` kept as its cause.
fn same_kind(e: &Arc<PortError>) -> PortError {
    let cause = || Shared(e.clone());
    match e.as_ref() {
        PortError::NotFound => PortError::NotFound,
        PortError::ConditionFailed(m) => PortError::ConditionFailed(m.clone()),
        PortError::Throttled { retry_after } => PortError::Throttled { retry_after: *retry_after },
        PortError::Unavailable(f) => PortError::Unavailable(Failure::new(f.message(), cause())),
        PortError::Invalid(m) => PortError::Invalid(m.clone()),
        PortError::Backend { message, retriable, .. } => {
            PortError::Backend { message: message.clone(), retriable: *retriable, source: Some(Box::new(cause())) }
        }
        PortError::Settings(f) => PortError::Settings(Failure::new(f.message(), cause())),
    }
}

/// The error of a shared append, as the cause of each call's own error.
#[derive(Debug)]
struct Shared(Arc<PortError>);

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the shared log append failed: {}", self.0)
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.0.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::Semaphore;

    /// A log that counts its appends, holds each until let go, and fails them on demand.
    #[derive(Default)]
    struct Held {
        appends: AtomicUsize,
        records: Mutex<Vec<(String, String)>>,
        gate: Option<Arc<Semaphore>>,
        fail: bool,
    }

    #[async_trait]
    impl EventLog for Held {
        async fn publish(&self, topic: &str, records: Vec<Record>) -> PortResult<()> {
            if let Some(gate) = &self.gate {
                gate.acquire().await.unwrap().forget();
            }
            self.appends.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return Err(PortError::Unavailable(Failure::from("the disk is gone")));
            }
            let mut seen = self.records.lock().unwrap();
            seen.extend(records.into_iter().map(|r| (topic.to_owned(), String::from_utf8(r.value).unwrap())));
            Ok(())
        }
    }

    fn record(value: &str) -> Record {
        Record { key: "acme".into(), value: value.as_bytes().to_vec(), headers: Vec::new() }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_waiting_while_an_append_runs_share_the_next_one_and_each_keeps_its_order() {
        let gate = Arc::new(Semaphore::new(0));
        let inner = Arc::new(Held { gate: Some(gate.clone()), ..Held::default() });
        let log = Arc::new(GroupCommit::new(Appends(inner.clone())));
        let first = tokio::spawn({
            let log = log.clone();
            async move { log.publish("t", vec![record("first")]).await }
        });
        // The first append is under way (held at the gate); ten more calls queue behind it.
        while lock(&log.pending).queue.len() == 1 || !lock(&log.pending).running {
            tokio::task::yield_now().await;
        }
        let later: Vec<_> = (0..10)
            .map(|i| {
                let log = log.clone();
                tokio::spawn(
                    async move { log.publish("t", vec![record(&format!("{i}a")), record(&format!("{i}b"))]).await },
                )
            })
            .collect();
        while lock(&log.pending).queue.len() < 10 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(2);
        first.await.unwrap().unwrap();
        for l in later {
            l.await.unwrap().unwrap();
        }
        assert_eq!(inner.appends.load(Ordering::SeqCst), 2, "one append for the first call, one for the ten");
        let seen = inner.records.lock().unwrap();
        assert_eq!(seen.len(), 21);
        for i in 0..10 {
            let a = seen.iter().position(|(_, v)| *v == format!("{i}a")).unwrap();
            assert_eq!(seen[a + 1].1, format!("{i}b"), "a call's records stay together and in order");
        }
    }

    #[tokio::test]
    async fn a_failed_append_fails_every_call_in_it_with_the_same_kind_of_error() {
        let log = GroupCommit::new(Appends(Arc::new(Held { fail: true, ..Held::default() })));
        let (a, b) = tokio::join!(log.publish("t", vec![record("a")]), log.publish("u", vec![record("b")]));
        for e in [a.unwrap_err(), b.unwrap_err()] {
            assert!(matches!(&e, PortError::Unavailable(f) if f.message() == "the disk is gone"), "{e}");
        }
        // The log recovers: nothing is left claimed.
        assert!(!lock(&log.pending).running);
    }

    #[tokio::test]
    async fn a_record_over_the_log_limit_is_refused_alone_before_it_joins_a_group() {
        let inner = Arc::new(Held::default());
        let log = GroupCommit::new(Appends(inner.clone()));
        let huge =
            Record { key: "acme".into(), value: vec![b'x'; openqq_core::ports::MAX_RECORD_BYTES + 1], headers: vec![] };
        assert!(matches!(log.publish("t", vec![huge]).await, Err(PortError::Invalid(_))));
        assert_eq!(inner.appends.load(Ordering::SeqCst), 0);
        log.publish("t", vec![record("fine")]).await.unwrap();
        assert_eq!(inner.appends.load(Ordering::SeqCst), 1);
    }

    /// A write that fails with `errors`, one per try, then succeeds; counts its tries.
    fn failing(errors: Vec<PortError>) -> (Arc<AtomicUsize>, impl FnMut() -> std::future::Ready<PortResult<()>>) {
        let tries = Arc::new(AtomicUsize::new(0));
        let mut errors = errors.into_iter();
        let counted = tries.clone();
        (tries, move || {
            counted.fetch_add(1, Ordering::SeqCst);
            std::future::ready(errors.next().map_or(Ok(()), Err))
        })
    }

    fn unavailable() -> PortError {
        PortError::Unavailable(Failure::from("throttled past the SDK's retries"))
    }

    #[tokio::test]
    async fn a_write_failing_retriably_is_tried_again_until_it_succeeds() {
        let errors = vec![unavailable(), PortError::Throttled { retry_after: None }, unavailable()];
        let (tries, write) = failing(errors);
        retried(Duration::from_secs(5), write).await.unwrap();
        assert_eq!(tries.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_permanent_error_is_not_tried_again() {
        let (tries, write) = failing(vec![PortError::Invalid("no such table".into()), unavailable()]);
        assert!(matches!(retried(Duration::from_secs(5), write).await, Err(PortError::Invalid(_))));
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_write_that_keeps_failing_gives_up_with_its_error_before_its_time_is_up() {
        let (tries, write) = failing((0..1000).map(|_| unavailable()).collect());
        assert!(matches!(retried(Duration::from_millis(100), write).await, Err(PortError::Unavailable(_))));
        // Tries at 0, 10, 30 and 70 ms at the earliest (fewer if a pause runs late); the next
        // would start at 150 ms.
        let tries = tries.load(Ordering::SeqCst);
        assert!((2..=4).contains(&tries), "{tries} tries");
    }

    #[tokio::test]
    async fn a_throttled_answer_asking_for_longer_than_the_time_left_ends_the_tries() {
        let asked = PortError::Throttled { retry_after: Some(Duration::from_secs(60)) };
        let (tries, write) = failing(vec![asked]);
        let started = Instant::now();
        assert!(matches!(retried(Duration::from_secs(2), write).await, Err(PortError::Throttled { .. })));
        assert_eq!(tries.load(Ordering::SeqCst), 1);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_group_stops_at_its_byte_bound_but_always_takes_one_call() {
        let waiting = |bytes: usize| {
            (
                ("t".to_owned(), vec![Record { key: String::new(), value: vec![0; bytes], headers: vec![] }]),
                oneshot::channel().0,
            )
        };
        let mut queue = vec![waiting(MAX_GROUP_BYTES + 1), waiting(10)];
        assert_eq!(take_group::<Appends>(&mut queue).len(), 1, "an oversized call goes alone");
        let mut queue = vec![waiting(MAX_GROUP_BYTES / 2), waiting(MAX_GROUP_BYTES / 2), waiting(1)];
        assert_eq!(take_group::<Appends>(&mut queue).len(), 2);
        assert_eq!(queue.len(), 1, "the rest waits for the next append");
    }
}
