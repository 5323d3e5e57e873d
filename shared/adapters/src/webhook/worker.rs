//! The delivery worker: claims due deliveries from the store and attempts them, a bounded number
//! at once, each tenant within its own share.
//!
//! Fairness: at most [`DeliverySettings::per_tenant`] of one tenant's deliveries are in flight,
//! and at most [`DeliverySettings::parallel`] in all, with `parallel` above `per_tenant`, so a
//! tenant whose endpoint hangs holds its own share through the timeout and never the others'.
//! The worker claims `parallel` at a time (the store gives at most `per_tenant` of one tenant per
//! claim, oldest due first, so one tenant's backlog never fills a claim) when a slot is free: on
//! every poll and wake, and when an attempt ends whose tenant has nothing waiting. What a claim
//! brings beyond the free slots, or for a tenant at its share, waits in the worker (at most two
//! claims' worth, `2 * per_tenant`, per tenant) and takes the next slot its tenant may use,
//! tenants taking turns, while its lease leaves time for an attempt; the rest is left to its
//! lease and claimed again after it.
//!
//! Nothing is lost when the worker stops or dies: a delivery is recorded only after its attempt
//! (`finish_attempt`), and one claimed and never recorded is claimed again after its lease, with
//! the same `webhook-id`, so a receiver de-duplicates a delivery it got just before the crash.

use super::attempt::{attempt, Attempted};
use super::client::WebhookClient;
use crate::SettingsError;
use chrono::Utc;
use openqq_core::ports::PortResult;
use openqq_core::webhook::{AttemptOutcome, Delivery, RetrySchedule, WebhookStore};
use openqq_core::TenantId;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::task::{Id, JoinError, JoinHandle, JoinSet};
use tokio::time::Instant;

/// Most deliveries in flight at once that [`DeliverySettings::check`] accepts (each holds a
/// connection and a task).
pub const MAX_PARALLEL: usize = 1024;

/// How the worker delivers.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliverySettings {
    /// Longest one attempt may take, from connecting to the end of the answer; a receiver slower
    /// than this fails the attempt.
    pub timeout: Duration,
    /// How long a claimed delivery stays this worker's: at least twice `timeout`, so an attempt
    /// in progress is never claimed by another worker, and short enough that a delivery whose
    /// worker died is soon claimed again.
    pub lease: Duration,
    /// Deliveries of one tenant in flight at once (and claimed at once).
    pub per_tenant: usize,
    /// Deliveries in flight at once, all tenants together; above `per_tenant`.
    pub parallel: usize,
    /// How often the store is asked for due deliveries when nothing wakes the worker earlier
    /// ([`DeliveryWorker::wake`]); retries come due on this clock.
    pub poll: Duration,
    pub schedule: RetrySchedule,
    /// Whether receivers may be at loopback, private and link-local addresses (development only:
    /// on a shared deployment it lets tenants reach internal services).
    pub allow_private: bool,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            lease: Duration::from_secs(60),
            per_tenant: 4,
            parallel: 32,
            poll: Duration::from_millis(250),
            schedule: RetrySchedule::default(),
            allow_private: false,
        }
    }
}

impl DeliverySettings {
    /// Refuses settings the worker cannot keep its promises with.
    pub fn check(&self) -> Result<(), SettingsError> {
        if self.timeout.is_zero() || self.poll.is_zero() {
            return Err(SettingsError::new("the webhook timeout and poll interval must be above zero"));
        }
        if self.lease < self.timeout * 2 {
            return Err(SettingsError::new(format!(
                "the webhook lease ({:?}) must be at least twice the timeout ({:?}): an attempt in progress must \
                 not be claimed again",
                self.lease, self.timeout
            )));
        }
        if self.per_tenant == 0 || self.parallel <= self.per_tenant || self.parallel > MAX_PARALLEL {
            return Err(SettingsError::new(format!(
                "webhook deliveries in flight ({}) must be more than one tenant's share ({}, at least 1) and at most \
                 {MAX_PARALLEL}",
                self.parallel, self.per_tenant
            )));
        }
        Ok(())
    }

    /// Whether a delivery whose lease ends at `lease_ends` still has time for an attempt.
    fn time_left(&self, lease_ends: Instant) -> bool {
        lease_ends.saturating_duration_since(Instant::now()) > self.timeout + self.timeout / 2
    }
}

/// The running worker. Dropping it aborts the worker and its attempts in flight (their
/// deliveries are claimed again after the lease); [`DeliveryWorker::stop`] lets them finish.
pub struct DeliveryWorker {
    wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl DeliveryWorker {
    /// Starts the worker on the current Tokio runtime.
    pub fn start(store: Arc<dyn WebhookStore>, settings: DeliverySettings) -> Result<Self, SettingsError> {
        settings.check()?;
        let client = WebhookClient::new(settings.allow_private)?;
        let wake = Arc::new(Notify::new());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(Worker::start(store, client, settings).run(wake.clone(), stopped));
        Ok(Self { wake, stop, task: Some(task) })
    }

    /// Asks the store for due deliveries now rather than at the next poll (after an append that
    /// queued some). Never lost: a wake while the worker is busy is taken at its next wait.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// What [`DeliveryWorker::wake`] pokes, for a caller that outlives this handle's borrow.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Stops claiming and waits for the attempts in flight (each within its timeout).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for DeliveryWorker {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A claimed delivery waiting for a slot.
struct Waiting {
    delivery: Delivery,
    lease_ends: Instant,
}

struct Worker {
    store: Arc<dyn WebhookStore>,
    client: WebhookClient,
    settings: DeliverySettings,
    /// The attempts in flight.
    running: JoinSet<()>,
    /// The tenant of each attempt in flight, to free its slot when it ends (also by a panic).
    owners: HashMap<Id, TenantId>,
    /// Attempts in flight per tenant; tenants with none are absent.
    busy: HashMap<TenantId, usize>,
    /// Claimed deliveries not started yet, at most `2 * per_tenant` per tenant (room for a poll's
    /// claim beside the one an ended attempt made); tenants with none are absent.
    waiting: HashMap<TenantId, VecDeque<Waiting>>,
    /// The tenants in `waiting`, in the order they get the next free slot.
    turns: VecDeque<TenantId>,
}

impl Worker {
    fn start(store: Arc<dyn WebhookStore>, client: WebhookClient, settings: DeliverySettings) -> Self {
        Self {
            store,
            client,
            settings,
            running: JoinSet::new(),
            owners: HashMap::new(),
            busy: HashMap::new(),
            waiting: HashMap::new(),
            turns: VecDeque::new(),
        }
    }

    async fn run(mut self, wake: Arc<Notify>, mut stop: watch::Receiver<bool>) {
        let mut store_failing = false;
        let mut poll = tokio::time::interval(self.settings.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whether to ask the store: on every poll and wake, and when an attempt ends whose tenant
        // has nothing waiting (it may have more due). Not on every attempt that ends: a tenant
        // with deliveries waiting gets them first, and claiming more of it would only lease
        // deliveries it has no slot for.
        let mut claim = true;
        loop {
            while let Some(done) = self.running.try_join_next_with_id() {
                claim |= self.finished(done);
            }
            if *stop.borrow() {
                break;
            }
            self.fill();
            if claim && self.free() > 0 {
                claim = self.claim(&mut store_failing).await;
                if claim {
                    continue;
                }
            }
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                Some(done) = self.running.join_next_with_id() => claim |= self.finished(done),
                _ = wake.notified() => claim = true,
                _ = poll.tick() => claim = true,
            }
        }
        // Stopping: what waits is left to its lease; what is in flight finishes.
        self.waiting.clear();
        self.turns.clear();
        while let Some(done) = self.running.join_next_with_id().await {
            self.finished(done);
        }
    }

    /// One claim; whether to claim again at once (a full claim that started something: more may
    /// be due).
    async fn claim(&mut self, store_failing: &mut bool) -> bool {
        let s = &self.settings;
        let lease_ends = Instant::now() + s.lease;
        match self.store.claim_due_deliveries(Utc::now(), s.lease, s.per_tenant, s.parallel).await {
            Ok(claimed) => {
                if std::mem::take(store_failing) {
                    tracing::info!("The store answers the webhook worker again.");
                }
                let full = claimed.len() == self.settings.parallel;
                let mut started = 0;
                for delivery in claimed {
                    started += usize::from(self.dispatch(delivery, lease_ends));
                }
                full && started > 0 && self.free() > 0
            }
            Err(e) => {
                if !*store_failing {
                    tracing::warn!(error = %e, "The webhook worker cannot claim deliveries; it keeps trying.");
                    *store_failing = true;
                }
                false
            }
        }
    }

    fn free(&self) -> usize {
        self.settings.parallel.saturating_sub(self.running.len())
    }

    fn may_start(&self, tenant: &TenantId) -> bool {
        self.busy.get(tenant).copied().unwrap_or(0) < self.settings.per_tenant
    }

    /// Starts `delivery` if a slot is free and its tenant is below its share, else keeps it
    /// waiting (or leaves it to its lease when its tenant's line is full); whether it started.
    fn dispatch(&mut self, delivery: Delivery, lease_ends: Instant) -> bool {
        if self.free() > 0 && self.may_start(&delivery.tenant_id) {
            self.launch(delivery);
            return true;
        }
        let settings = &self.settings;
        let tenant = delivery.tenant_id.clone();
        let line = self.waiting.entry(tenant.clone()).or_default();
        if line.is_empty() {
            self.turns.push_back(tenant);
        }
        line.retain(|w| settings.time_left(w.lease_ends));
        if line.len() < 2 * settings.per_tenant {
            line.push_back(Waiting { delivery, lease_ends });
        }
        false
    }

    /// Gives free slots to waiting deliveries, a tenant below its share at a time, in turns;
    /// drops those whose lease no longer leaves time for an attempt.
    fn fill(&mut self) {
        let mut progress = true;
        while progress && self.free() > 0 && !self.turns.is_empty() {
            progress = false;
            for _ in 0..self.turns.len() {
                if self.free() == 0 {
                    break;
                }
                let Some(tenant) = self.turns.pop_front() else { break };
                let may_start = self.may_start(&tenant);
                let settings = &self.settings;
                let Some(line) = self.waiting.get_mut(&tenant) else { continue };
                line.retain(|w| settings.time_left(w.lease_ends));
                let next = if may_start { line.pop_front() } else { None };
                if line.is_empty() {
                    self.waiting.remove(&tenant);
                } else {
                    self.turns.push_back(tenant);
                }
                if let Some(w) = next {
                    self.launch(w.delivery);
                    progress = true;
                }
            }
        }
    }

    fn launch(&mut self, delivery: Delivery) {
        let tenant = delivery.tenant_id.clone();
        let (store, client, settings) = (self.store.clone(), self.client.clone(), self.settings.clone());
        let handle = self.running.spawn(async move {
            attempt(store.as_ref(), &client, &settings.schedule, &delivery, settings.timeout).await;
        });
        self.owners.insert(handle.id(), tenant.clone());
        *self.busy.entry(tenant).or_default() += 1;
    }

    /// Frees the slot of an attempt that ended (the loop's next [`Worker::fill`] hands it on);
    /// whether its tenant has nothing waiting.
    fn finished(&mut self, done: Result<(Id, ()), JoinError>) -> bool {
        let id = match done {
            Ok((id, ())) => id,
            Err(e) => {
                if e.is_panic() {
                    tracing::error!("A webhook attempt panicked; its delivery is tried again after its lease.");
                }
                e.id()
            }
        };
        let Some(tenant) = self.owners.remove(&id) else { return true };
        if let Some(n) = self.busy.get_mut(&tenant) {
            *n -= 1;
            if *n == 0 {
                self.busy.remove(&tenant);
            }
        }
        !self.waiting.contains_key(&tenant)
    }
}

/// What one [`deliver_due_once`] round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundReport {
    pub claimed: usize,
    pub delivered: usize,
    pub retried: usize,
    pub dead: usize,
    /// Claimed but not recorded (webhook gone, store failing); those of a webhook still there are
    /// claimed again after their lease.
    pub unrecorded: usize,
}

/// One claim round, for a scheduled function (Lambda) rather than a long-running process: claims
/// up to `settings.parallel` due deliveries (at most `settings.per_tenant` of one tenant), attempts
/// them all at once, each within `settings.timeout` and before `deadline`, and answers what
/// became of them. Claims nothing when less than a second is left. `settings.lease` must outlast
/// the function's own timeout, so nothing is claimed twice while it runs.
pub async fn deliver_due_once(
    store: Arc<dyn WebhookStore>,
    client: &WebhookClient,
    settings: &DeliverySettings,
    deadline: Instant,
) -> PortResult<RoundReport> {
    settings.check()?;
    let mut report = RoundReport::default();
    let left = deadline.saturating_duration_since(Instant::now());
    if left < Duration::from_secs(1) {
        return Ok(report);
    }
    let claimed =
        store.claim_due_deliveries(Utc::now(), settings.lease, settings.per_tenant, settings.parallel).await?;
    report.claimed = claimed.len();
    let timeout = settings.timeout.min(left);
    let mut running = JoinSet::new();
    for delivery in claimed {
        let (store, client, schedule) = (store.clone(), client.clone(), settings.schedule.clone());
        running.spawn(async move { attempt(store.as_ref(), &client, &schedule, &delivery, timeout).await });
    }
    while let Some(done) = running.join_next().await {
        match done {
            Ok(Attempted::Recorded(AttemptOutcome::Delivered { .. })) => report.delivered += 1,
            Ok(Attempted::Recorded(AttemptOutcome::Retry { .. })) => report.retried += 1,
            Ok(Attempted::Recorded(AttemptOutcome::Dead { .. })) => report.dead += 1,
            Ok(Attempted::WebhookGone | Attempted::StoreFailed) | Err(_) => report.unrecorded += 1,
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_settings_pass_their_check() {
        DeliverySettings::default().check().unwrap();
    }

    #[test]
    fn settings_that_break_a_promise_are_refused() {
        let d = DeliverySettings::default();
        let refused = [
            DeliverySettings { lease: d.timeout * 2 - Duration::from_millis(1), ..d.clone() },
            DeliverySettings { timeout: Duration::ZERO, ..d.clone() },
            DeliverySettings { poll: Duration::ZERO, ..d.clone() },
            DeliverySettings { per_tenant: 0, ..d.clone() },
            DeliverySettings { per_tenant: 4, parallel: 4, ..d.clone() },
            DeliverySettings { parallel: MAX_PARALLEL + 1, ..d.clone() },
        ];
        for s in refused {
            assert!(s.check().is_err(), "{s:?}");
        }
        assert!(DeliverySettings { lease: d.timeout * 2, per_tenant: 1, parallel: 2, ..d }.check().is_ok());
    }
}
