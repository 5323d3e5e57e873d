//! Two schedulers on one store: each over its own connection to the data dir's store (as two
//! processes would be), passing at the same moments. Each fire is in the ledger once and its
//! batch published once, by whichever runner recorded it.

use super::Clocked;
use chrono::{TimeDelta, TimeZone, Utc};
use openqq_adapters::{Durability, EmbeddedDesignStore};
use openqq_api::schedules::runner::Scheduler;
use openqq_api::AppState;
use openqq_core::schedule::{FireOutcome, RunnerState, ScheduleId, StoredSchedule, Template};
use openqq_core::{DesignStore, EventKind, TenantId};
use openqq_e2e::compact_blink_design;
use openqq_schedule::{Expression, OverlapPolicy, ScheduleConfig};
use std::collections::HashMap;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_on_one_store_record_and_submit_each_fire_once() {
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 3, 2, 9, 59, 30).unwrap();
    let clock = Clocked::at(start);
    let up = openqq_platform::UpArgs::from_args(["--data-dir", &dir.path().display().to_string()]).unwrap();
    let platform = openqq_platform::Platform::build(up.platform).await.unwrap();
    let b = &platform.backends;
    let first: AppState =
        platform.api_state(platform.local_keys().unwrap()).schedule_clock(clock.schedule_clock()).build();
    let other_store: Arc<dyn DesignStore> =
        Arc::new(EmbeddedDesignStore::open(dir.path(), Durability::Process).unwrap());
    let keys = Arc::new(platform.local_keys().unwrap());
    let second = AppState::builder(b.log.clone(), other_store, b.objects.clone(), b.limiter.clone(), keys)
        .topics(platform.topics.clone())
        .schedule_clock(clock.schedule_clock())
        .build();

    let tenant = TenantId::parse("acme").unwrap();
    let line = compact_blink_design("twice").to_string();
    let items_ref = b.objects.put(&tenant, format!("{line}\n").into_bytes()).await.unwrap();
    let mut config = ScheduleConfig::new(Expression::parse("* * * * *").unwrap());
    config.overlap = OverlapPolicy::Allow;
    let schedule = StoredSchedule {
        id: ScheduleId::generate(),
        name: "every minute".into(),
        config,
        template: Template::Items { items_ref, items: 1 },
        created_at: start,
        updated_at: start,
        resumed_at: None,
        state: RunnerState::default(),
        next_due: Some(start + TimeDelta::seconds(30)),
        version: 0,
    };
    assert!(b.store.create_schedule(&tenant, &schedule).await.unwrap());

    let (a, z) = (Scheduler::new(first), Scheduler::new(second));
    for minute in 0..5 {
        clock.clock.set(start + TimeDelta::seconds(31 + 60 * minute));
        // Both pass at once, then once more each (a pass that met the other's write tries again).
        let (x, y) = tokio::join!(a.tick(), z.tick());
        x.unwrap();
        y.unwrap();
        let (x, y) = tokio::join!(a.tick(), z.tick());
        x.unwrap();
        y.unwrap();
    }
    let fires = b.store.fires(&tenant, &schedule.id, None, 100).await.unwrap().unwrap().items;
    assert_eq!(fires.len(), 5, "{fires:#?}");
    assert!(fires.iter().all(|f| f.outcome == FireOutcome::Submitted), "{fires:#?}");
    let minutes: Vec<_> = fires.iter().map(|f| f.nominal_time).collect();
    let expected: Vec<_> = (0..5).rev().map(|m| start + TimeDelta::seconds(30 + 60 * m)).collect();
    assert_eq!(minutes, expected);

    // Every batch.submitted in the log: one per fire, each fire's batch once.
    let topic = platform.topics.of(EventKind::BatchSubmitted);
    let mut published: HashMap<String, usize> = HashMap::new();
    for partition in 0..b.source.partitions(&topic) {
        for record in b.source.read(&topic, partition, 0, 1000).await.unwrap() {
            let env: serde_json::Value = serde_json::from_slice(&record.value).unwrap();
            *published.entry(env["payload"]["batch_id"].as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    let mut batches: Vec<String> = fires.iter().map(|f| f.batch_id.clone().unwrap().to_string()).collect();
    batches.sort();
    let mut seen: Vec<String> = published.keys().cloned().collect();
    seen.sort();
    assert_eq!(seen, batches, "the batches published are the fires' batches");
    assert!(published.values().all(|n| *n == 1), "each batch published once: {published:?}");
}

/// A runner that died between recording a fire and submitting it left the fire `pending` with
/// its batch id: the next runner waits a few seconds (the first may still be submitting), then
/// submits it with that same batch id and settles it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_left_pending_by_a_crash_is_submitted_again_with_its_batch_id() {
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 3, 2, 9, 59, 30).unwrap();
    let clock = Clocked::at(start);
    let up = openqq_platform::UpArgs::from_args(["--data-dir", &dir.path().display().to_string()]).unwrap();
    let platform = openqq_platform::Platform::build(up.platform).await.unwrap();
    let b = &platform.backends;
    let state = platform.api_state(platform.local_keys().unwrap()).schedule_clock(clock.schedule_clock()).build();
    let tenant = TenantId::parse("acme").unwrap();
    let line = compact_blink_design("crash").to_string();
    let items_ref = b.objects.put(&tenant, format!("{line}\n").into_bytes()).await.unwrap();
    let schedule = StoredSchedule {
        id: ScheduleId::generate(),
        name: "daily".into(),
        config: ScheduleConfig::new(Expression::parse("0 10 * * *").unwrap()),
        template: Template::Items { items_ref, items: 1 },
        created_at: start,
        updated_at: start,
        resumed_at: None,
        state: RunnerState::default(),
        next_due: Some(start + TimeDelta::seconds(30)),
        version: 0,
    };
    b.store.create_schedule(&tenant, &schedule).await.unwrap();
    // What the dead runner left: the fire recorded, nothing submitted, the schedule unsaved.
    let nominal = start + TimeDelta::seconds(30);
    let batch = openqq_core::BatchId::generate();
    let pending = openqq_core::schedule::FireRecord {
        nominal_time: nominal,
        fired_at: nominal + TimeDelta::milliseconds(200),
        outcome: FireOutcome::Pending,
        batch_id: Some(batch.clone()),
        reason: None,
    };
    assert!(b.store.record_fire(&tenant, &schedule.id, &pending).await.unwrap().created);

    let runner = Scheduler::new(state);
    clock.clock.set(nominal + TimeDelta::seconds(2));
    runner.tick().await.unwrap();
    let fires = b.store.fires(&tenant, &schedule.id, None, 10).await.unwrap().unwrap().items;
    assert_eq!(
        fires,
        std::slice::from_ref(&pending),
        "too young to be taken over: its runner may still be submitting it"
    );
    assert!(b.store.batch(&tenant, &batch).await.unwrap().is_none());

    clock.clock.set(nominal + TimeDelta::seconds(7));
    runner.tick().await.unwrap();
    let fires = b.store.fires(&tenant, &schedule.id, None, 10).await.unwrap().unwrap().items;
    assert_eq!(fires.len(), 1, "{fires:#?}");
    assert_eq!((fires[0].outcome, &fires[0].batch_id), (FireOutcome::Submitted, &Some(batch.clone())));
    let submitted = b.store.batch(&tenant, &batch).await.unwrap().expect("the batch of the fire's own id");
    assert_eq!(submitted.counts.queued, 1);
    let saved = b.store.schedule(&tenant, &schedule.id).await.unwrap().unwrap();
    assert_eq!((saved.state.last_handled, saved.state.last_batch), (Some(nominal), Some(batch)));
    assert_eq!(saved.next_due, Some(nominal + TimeDelta::days(1)));
}
