//! Concurrent submissions share their durable writes: [`Grouped`] queues what callers hand it
//! while a write is under way and does the whole queue in the next one (one transaction in the
//! embedded log and store, one produce per topic on Kafka) rather than one write each. Two kinds
//! of work are grouped: log appends ([`GroupedAppends`], the event log the API publishes to) and the
//! accepted-revision markers written once a submission is durable ([`AcceptedMarkers`]).
//!
//! Each caller still gets its answer only once its own write is done, and the items of one call
//! keep their order (they go together, in order, after those of calls that came earlier). An
//! append that fails fails every call in it, each with the same kind of error, so each client is
//! answered as if its own write had failed. Markers are answered one by one: the store says which
//! were recorded, so only the callers of those that failed retriably wait while theirs are tried
//! again (one tenant's throttled marker never holds another tenant's 202). At idle a lone call is
//! written at once: nothing waits for company, a call only joins a write that has not started
//! yet.
//!
//! The writes run on a task of their own, so a request that goes away (its client closed the
//! connection) never strands the calls that joined its group.

use async_trait::async_trait;
use openqq_core::ports::{by_topic, check_record_sizes, Failure, PortResult, Record};
use openqq_core::{AcceptedRevision, AcceptedRevisions, EventLog, PortError, TenantId};
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
pub type GroupedAppends = Grouped<Appends>;

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
impl EventLog for GroupedAppends {
    async fn publish(&self, topic: &str, records: Vec<Record>) -> PortResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        // A record the log refuses is this call's own problem, not its group's.
        check_record_sizes(&records)?;
        self.submit((topic.to_owned(), records)).await
    }
}

/// Accepted-revision markers ([`AcceptedRevisions::record_accepted_many`]).
pub struct AcceptedMarkers(pub Arc<dyn AcceptedRevisions>);

/// The accepted-revision markers of `store`, with concurrent calls grouped into shared writes.
pub type Markers = Grouped<AcceptedMarkers>;

/// [`Markers`] of `store`.
pub fn markers(store: Arc<dyn AcceptedRevisions>) -> Arc<Markers> {
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
        // Markers keep the highest revision, so writing one again is harmless.
        retried_each(MARKER_RETRY_FOR, group, |markers| async move { self.0.record_accepted_many(&markers).await })
            .await;
    }
}

/// How long a marker is tried again while the store answers it with a retriable error
/// (throttled, unreachable). The submissions are durable already and their clients wait for the
/// 202, which promises that the design reads at once (and so takes revisions at once); past this
/// the 202 goes out anyway and the design shows once the consumers materialise it.
pub const MARKER_RETRY_FOR: Duration = Duration::from_secs(2);

/// Longest pause between two tries of [`retried_each`].
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Writes the items of `calls` with `write` (which answers each item, in order) and answers
/// each call as soon as its item is done: written, failed for good, or failed retriably when the
/// next try would start after `within`. Only the items that failed retriably are written again,
/// pausing 10 ms before the second try, twice as long before each next one up to
/// [`MAX_RETRY_PAUSE`], or as long as the longest throttled answer among them asks.
async fn retried_each<T, F, Fut>(within: Duration, calls: Vec<(T, Answer)>, mut write: F)
where
    T: Clone,
    F: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = Vec<PortResult<()>>>,
{
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_millis(10);
    let mut pending = calls;
    while !pending.is_empty() {
        let answers = write(pending.iter().map(|(item, _)| item.clone()).collect()).await;
        let mut failed = Vec::new();
        let mut wait = pause;
        for ((item, done), answer) in pending.into_iter().zip(answers) {
            match answer {
                Err(e) if e.is_retriable() => {
                    if let PortError::Throttled { retry_after: Some(asked) } = &e {
                        wait = wait.max(*asked);
                    }
                    failed.push((item, done, e));
                }
                answer => {
                    let _ = done.send(answer);
                }
            }
        }
        if Instant::now() + wait > deadline {
            for (_, done, e) in failed {
                let _ = done.send(Err(e));
            }
            return;
        }
        if !failed.is_empty() {
            tokio::time::sleep(wait).await;
            pause = (pause * 2).min(MAX_RETRY_PAUSE);
        }
        pending = failed.into_iter().map(|(item, done, _)| (item, done)).collect();
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
            let n = waiters.len();
            for (w, e) in waiters.into_iter().zip(e.copies(n)) {
                let _ = w.send(Err(e));
            }
        }
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
        let log = Arc::new(GroupedAppends::new(Appends(inner.clone())));
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
        let log = GroupedAppends::new(Appends(Arc::new(Held { fail: true, ..Held::default() })));
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
        let log = GroupedAppends::new(Appends(inner.clone()));
        let huge =
            Record { key: "acme".into(), value: vec![b'x'; openqq_core::ports::MAX_RECORD_BYTES + 1], headers: vec![] };
        assert!(matches!(log.publish("t", vec![huge]).await, Err(PortError::Invalid { .. })));
        assert_eq!(inner.appends.load(Ordering::SeqCst), 0);
        log.publish("t", vec![record("fine")]).await.unwrap();
        assert_eq!(inner.appends.load(Ordering::SeqCst), 1);
    }

    /// What a write of items answers: one result per item.
    type Answers = std::future::Ready<Vec<PortResult<()>>>;

    /// A write of one item that fails with `errors`, one per try, then succeeds; counts its tries.
    fn failing(errors: Vec<PortError>) -> (Arc<AtomicUsize>, impl FnMut(Vec<()>) -> Answers) {
        let tries = Arc::new(AtomicUsize::new(0));
        let mut errors = errors.into_iter();
        let counted = tries.clone();
        (tries, move |items: Vec<()>| {
            assert_eq!(items.len(), 1);
            counted.fetch_add(1, Ordering::SeqCst);
            std::future::ready(vec![errors.next().map_or(Ok(()), Err)])
        })
    }

    /// Writes one item with `write` through [`retried_each`]; its answer.
    async fn retried<F, Fut>(within: Duration, write: F) -> PortResult<()>
    where
        F: FnMut(Vec<()>) -> Fut,
        Fut: Future<Output = Vec<PortResult<()>>>,
    {
        let (done, answer) = oneshot::channel();
        retried_each(within, vec![((), done)], write).await;
        answer.await.unwrap()
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
        let (tries, write) = failing(vec![PortError::invalid("record", "too large"), unavailable()]);
        assert!(matches!(retried(Duration::from_secs(5), write).await, Err(PortError::Invalid { .. })));
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

    /// Markers whose tenant `noisy` is throttled until `recovered` is set; everyone else's are
    /// recorded at once. Remembers which markers each write carried.
    #[derive(Default)]
    struct ThrottledTenant {
        recovered: std::sync::atomic::AtomicBool,
        writes: Mutex<Vec<Vec<String>>>,
    }

    #[async_trait]
    impl AcceptedRevisions for ThrottledTenant {
        async fn record_accepted(&self, tenant: &TenantId, _: &AcceptedRevision) -> PortResult<()> {
            self.writes.lock().unwrap().push(vec![tenant.to_string()]);
            match tenant.as_str() == "noisy" && !self.recovered.load(Ordering::SeqCst) {
                true => Err(PortError::Throttled { retry_after: None }),
                false => Ok(()),
            }
        }
    }

    fn marker(tenant: &str) -> (TenantId, AcceptedRevision) {
        let accepted = AcceptedRevision {
            design_id: openqq_core::DesignId::generate(),
            revision: 1,
            name: Some(format!("{tenant}'s design")),
            event_id: uuid::Uuid::now_v7(),
            correlation_id: openqq_core::CorrelationId::generate(),
            accepted_at: chrono::Utc::now(),
        };
        (TenantId::parse(tenant).unwrap(), accepted)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_throttled_tenants_marker_holds_only_its_own_caller_and_only_it_is_written_again() {
        let store = Arc::new(ThrottledTenant::default());
        let markers = AcceptedMarkers(store.clone());
        let (noisy_done, noisy) = oneshot::channel();
        let (quiet_done, quiet) = oneshot::channel();
        // Both markers in one group, the throttled one first.
        let run = tokio::spawn(async move {
            markers.run(vec![(marker("noisy"), noisy_done), (marker("quiet"), quiet_done)]).await
        });
        // The quiet tenant is answered while the noisy one's marker is still being tried again
        // (it stays throttled until told otherwise): had it waited for its group, this would
        // time out.
        tokio::time::timeout(Duration::from_secs(1), quiet)
            .await
            .expect("the other tenant's caller is answered without waiting for the throttled marker")
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        store.recovered.store(true, Ordering::SeqCst);
        noisy.await.unwrap().unwrap();
        run.await.unwrap();
        let writes = store.writes.lock().unwrap();
        assert!(writes.len() >= 3, "the throttled marker was tried again: {writes:?}");
        assert_eq!(
            writes.iter().filter(|w| w[0] == "quiet").count(),
            1,
            "the recorded marker is written once: {writes:?}"
        );
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
