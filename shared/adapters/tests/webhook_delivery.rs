//! The delivery worker against a design store and receivers on 127.0.0.1: deliveries queued by
//! the feed arrive signed and are recorded; failures are retried on the schedule and end dead
//! after the last attempt; one tenant's hung endpoint does not delay another tenant; a worker
//! that dies mid-attempt leaves its delivery to be claimed again after the lease, with the same
//! `webhook-id`.
//!
//! Every case runs on the embedded store (`embedded::`) and, with cargo feature `dynamodb` and
//! `OPENQQ_TEST_DYNAMODB_ENDPOINT` set (scripts/services/moto.sh prints one), on the DynamoDB
//! store (`dynamodb::`), as the results function runs it on Lambda:
//!
//!   OPENQQ_TEST_DYNAMODB_ENDPOINT=$(scripts/services/moto.sh) \
//!     cargo test -p openqq-adapters --features dynamodb --test webhook_delivery

mod webhook_support;

use chrono::Utc;
use openqq_adapters::webhook::{deliver_due_once, DeliverySettings, DeliveryWorker, RoundReport, WebhookClient};
use openqq_adapters::{Durability, EmbeddedDesignStore};
use openqq_core::webhook::{Delivery, DeliveryStatus, RetrySchedule, Webhook, WebhookId, WebhookStore};
use openqq_core::DesignStore;
use openqq_core::{CorrelationId, DesignId, EventKind, NewFeedEntry, TenantId, TimelineEntry, WebhookSecret};
use std::sync::Arc;
use std::time::{Duration, Instant};
use webhook_support::{receiver, verify, Answer, Receiver};

/// How long a test waits for what must happen.
const WAIT: Duration = Duration::from_secs(20);

struct Fixture {
    _dir: Option<tempfile::TempDir>,
    store: Arc<dyn DesignStore>,
}

impl Fixture {
    fn embedded() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap());
        Self { _dir: Some(dir), store }
    }

    /// A fresh table on the test server, or `None` (with a note) when none is set.
    #[cfg(feature = "dynamodb")]
    async fn dynamodb() -> Option<Self> {
        const ENDPOINT_VAR: &str = "OPENQQ_TEST_DYNAMODB_ENDPOINT";
        let Ok(endpoint) = std::env::var(ENDPOINT_VAR) else {
            eprintln!("{ENDPOINT_VAR} is not set: skipping (scripts/services/moto.sh starts a server)");
            return None;
        };
        let table = openqq_adapters::conformance::unique("openqq-webhooks");
        let client = openqq_adapters::conformance::dynamodb_client(&endpoint);
        let store = openqq_adapters::DynamoDesignStore::new(client, table).unwrap();
        store.create_table_if_missing().await.unwrap();
        Some(Self { _dir: None, store: Arc::new(store) })
    }

    fn webhooks(&self) -> Arc<dyn WebhookStore> {
        self.store.clone()
    }

    /// Registers a webhook of `tenant` for `results.ready` at `url`, signing with `secret`.
    async fn register(&self, tenant: &TenantId, url: &str, secret: &WebhookSecret) -> WebhookId {
        let hook = Webhook {
            id: WebhookId::generate(),
            url: url.to_owned(),
            kinds: vec![EventKind::ResultsReady],
            description: None,
            created_at: Utc::now(),
            secret: secret.clone(),
            previous_secret: None,
        };
        self.store.create_webhook(tenant, &hook).await.unwrap();
        hook.id
    }

    /// Appends a `results.ready` of a new design to `tenant`'s feed (queueing a delivery to each
    /// of its webhooks); its number.
    async fn append(&self, tenant: &TenantId) -> u64 {
        let entry = TimelineEntry {
            event_id: uuid::Uuid::now_v7(),
            kind: EventKind::ResultsReady,
            revision: 1,
            correlation_id: CorrelationId::parse("corr-webhook").unwrap(),
            occurred_at: Utc::now(),
        };
        let design = DesignId::generate();
        self.store
            .append_feed(
                tenant,
                &NewFeedEntry { design_id: &design, entry: &entry, verdict: None, elapsed_ms: None, batch: None },
            )
            .await
            .unwrap()
    }

    async fn delivery(&self, tenant: &TenantId, id: &WebhookId, seq: u64) -> Delivery {
        let page = self.store.list_deliveries(tenant, id, None, 100).await.unwrap();
        page.items.into_iter().find(|d| d.entry.seq == seq).expect("the delivery is listed")
    }

    /// The delivery once it is no longer pending.
    async fn settled(&self, tenant: &TenantId, id: &WebhookId, seq: u64) -> Delivery {
        let deadline = Instant::now() + WAIT;
        loop {
            let d = self.delivery(tenant, id, seq).await;
            if d.status != DeliveryStatus::Pending {
                return d;
            }
            assert!(Instant::now() < deadline, "the delivery settled within {WAIT:?}: {d:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Each case as a test on every store: `embedded::<case>` and `dynamodb::<case>`.
macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Fixture::embedded()).await;
                }
            )*
        }

        #[cfg(feature = "dynamodb")]
        mod dynamodb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(f) = super::Fixture::dynamodb().await else { return };
                    super::$case(f).await;
                }
            )*
        }
    };
}

on_every_store!(
    a_queued_delivery_arrives_signed_by_both_secrets_during_a_rotation_and_is_recorded_delivered,
    a_receiver_failing_twice_gets_the_delivery_on_the_third_attempt_with_the_same_id,
    a_delivery_failing_every_attempt_is_dead_after_the_last_with_its_status_code,
    a_receiver_refusing_with_a_4xx_gets_one_attempt_and_the_delivery_is_dead,
    a_webhook_at_a_private_address_is_dead_unsent_when_private_targets_are_not_allowed,
    a_hung_endpoint_holds_only_its_tenants_share_and_another_tenants_deliveries_arrive_meanwhile,
    a_worker_dropped_mid_attempt_leaves_the_delivery_to_be_claimed_after_the_lease_with_the_same_id,
    a_stopped_worker_finishes_and_records_the_attempt_in_flight,
    one_round_attempts_what_is_due_and_reports_what_became_of_it,
    a_backlog_larger_than_the_tenants_share_is_delivered_without_any_delivery_sitting_out_a_lease,
);

fn tenant(name: &str) -> TenantId {
    TenantId::parse(name).unwrap()
}

fn secret(fill: u8) -> WebhookSecret {
    WebhookSecret::from_bytes(vec![fill; 32]).unwrap()
}

/// Quick settings for a test: short timeout, lease and delays; receivers on 127.0.0.1.
fn settings() -> DeliverySettings {
    DeliverySettings {
        timeout: Duration::from_secs(2),
        lease: Duration::from_secs(4),
        per_tenant: 2,
        parallel: 4,
        poll: Duration::from_millis(50),
        schedule: RetrySchedule { delays: vec![Duration::from_millis(100), Duration::from_millis(100)], jitter: 0.0 },
        allow_private: true,
    }
}

async fn next(hooks: &mut Receiver) -> webhook_support::Received {
    hooks.next(WAIT).await.expect("the receiver got a request")
}

async fn a_queued_delivery_arrives_signed_by_both_secrets_during_a_rotation_and_is_recorded_delivered(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|_| Answer::Status(204)).await;
    let (old, new) = (secret(1), secret(2));
    let id = f.register(&acme, &hooks.url, &old).await;
    let until = Utc::now() + chrono::Duration::hours(1);
    f.store.rotate_webhook_secret(&acme, &id, &new, until).await.unwrap().expect("the webhook is there");
    let worker = DeliveryWorker::start(f.webhooks(), settings()).unwrap();
    let seq = f.append(&acme).await;
    worker.wake();

    let got = next(&mut hooks).await;
    verify(new.bytes(), &got).expect("the new secret verifies");
    verify(old.bytes(), &got).expect("the old secret verifies during the overlap");
    assert!(verify(secret(3).bytes(), &got).is_err(), "no other secret does");
    let delivered = f.settled(&acme, &id, seq).await;
    assert_eq!(got.header("webhook-id"), delivered.message_id());
    let body = got.json();
    assert_eq!(body["type"], "results.ready");
    assert_eq!((body["data"]["tenant_id"].as_str(), body["data"]["seq"].as_u64()), (Some("acme"), Some(seq)));
    assert_eq!(
        (delivered.status, delivered.attempts, delivered.last_status_code),
        (DeliveryStatus::Delivered, 1, Some(204))
    );
    worker.stop().await;
}

async fn a_receiver_failing_twice_gets_the_delivery_on_the_third_attempt_with_the_same_id(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|n| Answer::Status(if n < 2 { 500 } else { 200 })).await;
    let id = f.register(&acme, &hooks.url, &secret(1)).await;
    let seq = f.append(&acme).await;
    let worker = DeliveryWorker::start(f.webhooks(), settings()).unwrap();

    let ids: Vec<String> = [next(&mut hooks).await, next(&mut hooks).await, next(&mut hooks).await]
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    let delivered = f.settled(&acme, &id, seq).await;
    assert_eq!(ids, vec![delivered.message_id(); 3], "every attempt carries the same webhook-id");
    assert_eq!(
        (delivered.status, delivered.attempts, delivered.last_status_code),
        (DeliveryStatus::Delivered, 3, Some(200))
    );
    worker.stop().await;
}

async fn a_delivery_failing_every_attempt_is_dead_after_the_last_with_its_status_code(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|_| Answer::Status(503)).await;
    let id = f.register(&acme, &hooks.url, &secret(1)).await;
    let seq = f.append(&acme).await;
    let s = settings();
    let attempts = s.schedule.attempts();
    let worker = DeliveryWorker::start(f.webhooks(), s).unwrap();

    let dead = f.settled(&acme, &id, seq).await;
    assert_eq!((dead.status, dead.attempts, dead.last_status_code), (DeliveryStatus::Dead, attempts, Some(503)));
    assert!(dead.last_error.as_deref().is_some_and(|e| e.contains("503")), "{dead:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut got = 0;
    while hooks.next(Duration::from_millis(10)).await.is_some() {
        got += 1;
    }
    assert_eq!(got, attempts as usize, "one request per attempt, none after the last");
    worker.stop().await;
}

async fn a_receiver_refusing_with_a_4xx_gets_one_attempt_and_the_delivery_is_dead(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|_| Answer::Status(404)).await;
    let id = f.register(&acme, &hooks.url, &secret(1)).await;
    let seq = f.append(&acme).await;
    let worker = DeliveryWorker::start(f.webhooks(), settings()).unwrap();

    let dead = f.settled(&acme, &id, seq).await;
    assert_eq!((dead.status, dead.attempts, dead.last_status_code), (DeliveryStatus::Dead, 1, Some(404)));
    next(&mut hooks).await;
    assert!(hooks.next(Duration::from_millis(500)).await.is_none(), "no second attempt");
    worker.stop().await;
}

async fn a_webhook_at_a_private_address_is_dead_unsent_when_private_targets_are_not_allowed(f: Fixture) {
    let acme = tenant("acme");
    let hooks = receiver(|_| Answer::Status(204)).await;
    let id = f.register(&acme, &hooks.url, &secret(1)).await;
    let seq = f.append(&acme).await;
    let worker = DeliveryWorker::start(f.webhooks(), DeliverySettings { allow_private: false, ..settings() }).unwrap();

    let dead = f.settled(&acme, &id, seq).await;
    assert_eq!((dead.status, dead.attempts, dead.last_status_code), (DeliveryStatus::Dead, 1, None));
    assert!(dead.last_error.as_deref().is_some_and(|e| e.contains("not a public address")), "{dead:?}");
    assert_eq!(hooks.taken(), 0, "nothing was sent");
    worker.stop().await;
}

/// Tenant `slow`'s endpoint takes every request and answers none, so each of its attempts holds
/// a slot for the whole timeout; its backlog is older than `fast`'s and larger than all the slots
/// there are. `fast`'s deliveries must all arrive well within one timeout: had they waited
/// behind the hung attempts, the first of them could not arrive before a whole timeout. (The
/// timeout is long, 20 s, so that a store as slow as moto's DynamoDB under a loaded machine
/// still shows the difference: 7.7 s was seen there against a 10 s timeout.)
async fn a_hung_endpoint_holds_only_its_tenants_share_and_another_tenants_deliveries_arrive_meanwhile(f: Fixture) {
    let (slow, fast) = (tenant("slow"), tenant("fast"));
    let hung = receiver(|_| Answer::Hang).await;
    let mut quick = receiver(|_| Answer::Status(204)).await;
    f.register(&slow, &hung.url, &secret(1)).await;
    f.register(&fast, &quick.url, &secret(2)).await;
    let s = DeliverySettings { timeout: Duration::from_secs(20), lease: Duration::from_secs(40), ..settings() };
    for _ in 0..3 * s.parallel {
        f.append(&slow).await;
    }
    let fast_count = 2 * s.parallel;
    for _ in 0..fast_count {
        f.append(&fast).await;
    }
    let (timeout, per_tenant) = (s.timeout, s.per_tenant);
    let started = Instant::now();
    let worker = DeliveryWorker::start(f.webhooks(), s).unwrap();

    for _ in 0..fast_count {
        next(&mut quick).await;
    }
    let ratio = started.elapsed().as_secs_f64() / timeout.as_secs_f64();
    assert!(ratio < 0.75, "the other tenant's deliveries took {ratio:.2} of the hung endpoint's timeout");
    assert!(hung.taken() <= per_tenant, "the hung endpoint holds {} attempts, its share is {per_tenant}", hung.taken());
    assert!(hung.taken() > 0, "the hung endpoint was being attempted meanwhile");
    drop(worker);
}

async fn a_worker_dropped_mid_attempt_leaves_the_delivery_to_be_claimed_after_the_lease_with_the_same_id(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|n| if n == 0 { Answer::Hang } else { Answer::Status(204) }).await;
    let id = f.register(&acme, &hooks.url, &secret(1)).await;
    let seq = f.append(&acme).await;
    let s = settings();
    let lease = s.lease;

    let first_worker = DeliveryWorker::start(f.webhooks(), s.clone()).unwrap();
    let first = next(&mut hooks).await;
    drop(first_worker);
    let second_worker = DeliveryWorker::start(f.webhooks(), s).unwrap();
    let second = next(&mut hooks).await;

    assert_eq!(first.header("webhook-id"), second.header("webhook-id"));
    assert!(second.at - first.at >= lease - Duration::from_millis(250), "claimed again only after the lease");
    let delivered = f.settled(&acme, &id, seq).await;
    assert_eq!(first.header("webhook-id"), delivered.message_id());
    assert_eq!(
        (delivered.status, delivered.attempts),
        (DeliveryStatus::Delivered, 1),
        "the lost attempt was never recorded"
    );
    second_worker.stop().await;
}

async fn a_stopped_worker_finishes_and_records_the_attempt_in_flight(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|_| Answer::Late { after: Duration::from_millis(500), status: 204 }).await;
    let id = f.register(&acme, &hooks.url, &secret(1)).await;
    let seq = f.append(&acme).await;
    let worker = DeliveryWorker::start(f.webhooks(), settings()).unwrap();
    next(&mut hooks).await;
    worker.stop().await;
    let delivered = f.delivery(&acme, &id, seq).await;
    assert_eq!((delivered.status, delivered.attempts), (DeliveryStatus::Delivered, 1), "recorded before stop returned");
}

async fn one_round_attempts_what_is_due_and_reports_what_became_of_it(f: Fixture) {
    let (ok, failing) = (tenant("ok"), tenant("failing"));
    let mut good = receiver(|_| Answer::Status(200)).await;
    let mut bad = receiver(|_| Answer::Status(500)).await;
    f.register(&ok, &good.url, &secret(1)).await;
    let bad_id = f.register(&failing, &bad.url, &secret(2)).await;
    f.append(&ok).await;
    let bad_seq = f.append(&failing).await;
    let s = DeliverySettings {
        schedule: RetrySchedule { delays: vec![Duration::from_secs(3600)], jitter: 0.0 },
        ..settings()
    };
    let client = WebhookClient::new(true).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);

    let report = deliver_due_once(f.webhooks(), &client, &s, deadline).await.unwrap();
    assert_eq!(report, RoundReport { claimed: 2, delivered: 1, retried: 1, dead: 0, unrecorded: 0 });
    assert!(good.next(WAIT).await.is_some() && bad.next(WAIT).await.is_some());
    let retried = f.delivery(&failing, &bad_id, bad_seq).await;
    assert_eq!((retried.status, retried.attempts, retried.last_status_code), (DeliveryStatus::Pending, 1, Some(500)));
    let again = deliver_due_once(f.webhooks(), &client, &s, deadline).await.unwrap();
    assert_eq!(again, RoundReport::default(), "nothing is due until the retry's time");
}

/// One tenant's backlog, many times its share, drains through the worker: what a claim brings
/// beyond the tenant's free slots waits in the worker rather than being leased and left, so no
/// delivery sits out a lease.
async fn a_backlog_larger_than_the_tenants_share_is_delivered_without_any_delivery_sitting_out_a_lease(f: Fixture) {
    let acme = tenant("acme");
    let mut hooks = receiver(|_| Answer::Status(204)).await;
    f.register(&acme, &hooks.url, &secret(1)).await;
    // A long lease, so that one sat out cannot hide in a slow run: a claimed delivery waits in
    // the worker only while its lease leaves time for an attempt (1.5 timeouts), which with a
    // 10 s lease was 2.5 s, and the store beside the other suites can be slower than that.
    let s = DeliverySettings { timeout: Duration::from_secs(5), lease: Duration::from_secs(60), ..settings() };
    let backlog = 20 * s.per_tenant;
    for _ in 0..backlog {
        f.append(&acme).await;
    }
    let lease = s.lease;
    let started = Instant::now();
    let worker = DeliveryWorker::start(f.webhooks(), s).unwrap();
    let mut ids = std::collections::HashSet::new();
    while ids.len() < backlog {
        let got = hooks.next(2 * lease).await.expect("the backlog keeps arriving");
        ids.insert(got.header("webhook-id").to_owned());
    }
    assert!(started.elapsed() < lease, "the backlog took {:?}, a lease is {lease:?}", started.elapsed());
    worker.stop().await;
}
