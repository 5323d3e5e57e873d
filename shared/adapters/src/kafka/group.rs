//! Consumer-group membership for the local runner: which partitions of a topic this process
//! consumes, as the group's coordinator divides them among every `openqq up` on the cluster.
//!
//! One member per consumer group (per function) subscribes to the topic and never fetches: its
//! partitions are paused as soon as they are assigned, since the emulator reads through its own
//! readers. The member is polled on a thread of its own, which serves heartbeats and rebalances.
//! Revocation waits until the emulator's batches on the revoked partitions have ended (and
//! committed, through this same member, with the generation the coordinator still accepts), so
//! the next owner starts at the offset after them. The protocol is cooperative-sticky: a member
//! joining or leaving moves only the partitions that change owner.

use super::KafkaContext;
use openqq_core::Lease;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::TopicPartitionList;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A member's partitions and their batches in flight, shared by the lease (the emulator's side)
/// and the rebalance callbacks (librdkafka's side).
#[derive(Default)]
pub(super) struct Membership {
    state: Mutex<State>,
    ended: Condvar,
    /// How long a revocation waits for batches in flight.
    drain: Duration,
    /// Set once the member's poll thread runs: from then on only that thread polls it (a
    /// revocation served on another thread could wait for that thread's own batch).
    polled: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Held partitions and the epoch each was assigned in.
    owned: HashMap<(String, u32), u64>,
    /// Partitions with a batch in flight.
    busy: HashMap<(String, u32), u32>,
    epochs: u64,
}

impl Membership {
    pub(super) fn new(drain: Duration) -> Self {
        Self { drain, ..Self::default() }
    }

    fn assigned(&self, tpl: &TopicPartitionList) {
        let mut st = self.state.lock().unwrap();
        for e in tpl.elements() {
            st.epochs += 1;
            let epoch = st.epochs;
            st.owned.insert((e.topic().to_owned(), e.partition() as u32), epoch);
        }
        if tpl.count() > 0 {
            tracing::info!(partitions = ?partitions_of(tpl), "The consumer group assigned partitions to this process.");
        }
    }

    /// Stops new batches on the revoked partitions, then waits for the ones in flight.
    fn revoked(&self, tpl: &TopicPartitionList) {
        let revoked: Vec<(String, u32)> =
            tpl.elements().iter().map(|e| (e.topic().to_owned(), e.partition() as u32)).collect();
        let deadline = Instant::now() + self.drain;
        let mut st = self.state.lock().unwrap();
        for key in &revoked {
            st.owned.remove(key);
        }
        while revoked.iter().any(|k| st.busy.contains_key(k)) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(partitions = ?revoked, "Batches on revoked partitions did not end in time; their records will be delivered again to the next owner.");
                break;
            }
            st = self.ended.wait_timeout(st, left).unwrap().0;
        }
        tracing::info!(partitions = ?partitions_of(tpl), "The consumer group revoked partitions from this process.");
    }

    pub(super) fn is_polled(&self) -> bool {
        self.polled.load(Ordering::SeqCst)
    }

    fn holds_any(&self, topic: &str) -> bool {
        self.state.lock().unwrap().owned.keys().any(|(t, _)| t == topic)
    }
}

fn partitions_of(tpl: &TopicPartitionList) -> Vec<String> {
    tpl.elements().iter().map(|e| format!("{}/{}", e.topic(), e.partition())).collect()
}

/// The member's librdkafka context: rebalances update the [`Membership`]; token requests (MSK
/// IAM) go to the context every other client has.
pub(super) struct GroupContext {
    pub(super) membership: Arc<Membership>,
    pub(super) auth: KafkaContext,
}

impl ClientContext for GroupContext {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = KafkaContext::ENABLE_REFRESH_OAUTH_TOKEN;

    fn generate_oauth_token(&self, config: Option<&str>) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        self.auth.generate_oauth_token(config)
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => self.membership.revoked(tpl),
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => tracing::warn!(error = %e, "A consumer-group rebalance failed."),
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            // The member only holds partitions; the emulator's readers fetch them.
            if let Err(e) = consumer.pause(tpl) {
                tracing::warn!(error = %e, "Pausing the group member's partitions failed; it will fetch records it does not use.");
            }
            self.membership.assigned(tpl);
        }
    }
}

pub(super) type Member = BaseConsumer<GroupContext>;

/// The emulator's view of a member subscribed to one topic.
pub(super) struct GroupLease {
    topic: String,
    member: Arc<Member>,
    membership: Arc<Membership>,
    stop: Arc<AtomicBool>,
    poller: Mutex<Option<JoinHandle<()>>>,
}

impl GroupLease {
    /// Subscribes `member` to `topic` and polls it until [`Lease::leave`].
    pub(super) fn subscribe(
        member: Arc<Member>,
        membership: Arc<Membership>,
        topic: &str,
    ) -> rdkafka::error::KafkaResult<Self> {
        member.subscribe(&[topic])?;
        membership.polled.store(true, Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (member, stop) = (member.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("kafka-group-{topic}"))
                .spawn(move || poll_until(&member, &stop))
                .expect("spawning the consumer-group thread")
        };
        Ok(Self { topic: topic.to_owned(), member, membership, stop, poller: Mutex::new(Some(poller)) })
    }
}

fn poll_until(member: &Member, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        if let Some(Err(e)) = member.poll(Duration::from_millis(100)) {
            tracing::debug!(error = %e, "The consumer-group member reported an error.");
        }
    }
}

impl Lease for GroupLease {
    fn begin(&self, partition: u32) -> Option<u64> {
        let mut st = self.membership.state.lock().unwrap();
        let key = (self.topic.clone(), partition);
        let epoch = *st.owned.get(&key)?;
        *st.busy.entry(key).or_default() += 1;
        Some(epoch)
    }

    fn end(&self, partition: u32) {
        let mut st = self.membership.state.lock().unwrap();
        let key = (self.topic.clone(), partition);
        if let Some(n) = st.busy.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                st.busy.remove(&key);
            }
        }
        self.membership.ended.notify_all();
    }

    /// Unsubscribes, lets the poll thread serve the revocation, then stops polling.
    fn leave(&self) {
        let Some(poller) = self.poller.lock().unwrap().take() else { return };
        self.member.unsubscribe();
        let deadline = Instant::now() + self.membership.drain;
        while self.membership.holds_any(&self.topic) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::Relaxed);
        let _ = poller.join();
    }
}

impl Drop for GroupLease {
    fn drop(&mut self) {
        self.leave();
    }
}
