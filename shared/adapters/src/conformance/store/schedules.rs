//! Schedules: created up to the tenant's limit, read, listed, updated only at the version read,
//! deleted with their ledger; each fire recorded once under its nominal time (a second record,
//! or racing ones, get the first back), settled only from the outcome it is in, listed newest
//! first; the runner's due read across tenants and its state saved only at the version read;
//! another tenant's schedule as unknown as one never created.

use super::super::unique;
use super::feed::join_all;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use openqq_core::schedule::{
    FireOutcome, FireRecord, RunnerState, ScheduleId, Settle, StoredSchedule, Template, MAX_SCHEDULES_PER_TENANT,
};
use openqq_core::{BatchId, DesignStore, ObjectRef, PortError, TenantId};
use openqq_schedule::{Expression, ScheduleConfig};

fn tenant() -> TenantId {
    TenantId::parse(unique("sched")).unwrap()
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).unwrap()
}

fn new_schedule(name: &str, next_due: Option<DateTime<Utc>>) -> StoredSchedule {
    let created = Utc::now().with_timezone(&Utc);
    let created = at(created.timestamp());
    StoredSchedule {
        id: ScheduleId::generate(),
        name: name.into(),
        config: ScheduleConfig::new(Expression::parse("30 2 * * *").unwrap()),
        template: Template::Items { items_ref: ObjectRef { digest: "cd".repeat(32), bytes: 40 }, items: 2 },
        created_at: created,
        updated_at: created,
        resumed_at: None,
        state: RunnerState::default(),
        next_due,
        version: 0,
    }
}

fn fire(nominal: DateTime<Utc>, outcome: FireOutcome) -> FireRecord {
    FireRecord {
        nominal_time: nominal,
        fired_at: nominal + TimeDelta::milliseconds(250),
        outcome,
        batch_id: (outcome == FireOutcome::Pending).then(BatchId::generate),
        reason: (outcome == FireOutcome::Missed).then(|| "more than the catch-up window late".to_owned()),
    }
}

pub async fn a_schedule_reads_back_and_changes_only_at_the_version_read<S: DesignStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    let made = new_schedule("nightly", Some(at(2_000_000_000)));
    assert!(store.create_schedule(&t, &made).await.unwrap());
    let read = store.schedule(&t, &made.id).await.unwrap().expect("the schedule reads back");
    assert_eq!(read, made);
    assert!(store.schedule(&other, &made.id).await.unwrap().is_none(), "another tenant's is unknown");

    let mut changed = read.clone();
    changed.name = "weekly".into();
    changed.config = ScheduleConfig::new(Expression::parse("rate(2 hours)").unwrap());
    changed.config.paused = true;
    changed.template = Template::Revalidate(openqq_core::schedule::Revalidate::NamePrefix("blink".into()));
    changed.updated_at = read.updated_at + TimeDelta::seconds(5);
    changed.resumed_at = Some(read.updated_at + TimeDelta::seconds(5));
    changed.next_due = None;
    let after = store.update_schedule(&t, &changed).await.unwrap().expect("the schedule is there");
    assert_eq!(after.version, read.version + 1, "a write moves the version on");
    assert_eq!(StoredSchedule { version: changed.version, ..after.clone() }, changed);
    let stale = store.update_schedule(&t, &changed).await;
    assert!(matches!(stale, Err(PortError::ConditionFailed { .. })), "a write at an old version is refused: {stale:?}");
    assert!(store.update_schedule(&other, &after).await.unwrap().is_none(), "another tenant's is unknown");

    assert!(!store.delete_schedule(&other, &made.id).await.unwrap(), "another tenant cannot delete it");
    assert!(store.delete_schedule(&t, &made.id).await.unwrap());
    assert!(store.schedule(&t, &made.id).await.unwrap().is_none());
    assert!(!store.delete_schedule(&t, &made.id).await.unwrap(), "a second delete finds nothing");
}

pub async fn a_tenant_holds_at_most_the_schedule_limit_and_lists_them_oldest_first<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant();
    let mut made = Vec::new();
    for i in 0..MAX_SCHEDULES_PER_TENANT {
        let schedule = new_schedule(&format!("s{i}"), None);
        assert!(store.create_schedule(&t, &schedule).await.unwrap(), "schedule {i} is within the limit");
        made.push(schedule.id);
    }
    assert!(!store.create_schedule(&t, &new_schedule("one too many", None)).await.unwrap());
    let (mut listed, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let page = store.list_schedules(&t, cursor.as_deref(), 30).await.unwrap();
        assert!(page.items.len() <= 30);
        listed.extend(page.items.into_iter().map(|s| s.id));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(listed, made, "every schedule once, oldest first");
    assert!(store.delete_schedule(&t, &made[0]).await.unwrap());
    assert!(store.create_schedule(&t, &new_schedule("room again", None)).await.unwrap(), "a deletion makes room");
    assert!(store.list_schedules(&tenant(), None, 10).await.unwrap().items.is_empty());
}

pub async fn a_fire_is_recorded_once_and_a_second_record_gets_the_first_back<S: DesignStore + ?Sized>(store: &S) {
    let (t, other) = (tenant(), tenant());
    let schedule = new_schedule("ledger", None);
    store.create_schedule(&t, &schedule).await.unwrap();
    let nominal = at(1_780_000_200);
    let first = fire(nominal, FireOutcome::Pending);
    let recorded = store.record_fire(&t, &schedule.id, &first).await.unwrap();
    assert!(recorded.created);
    assert_eq!(recorded.record, first);
    let second =
        FireRecord { outcome: FireOutcome::SkippedOverlap, batch_id: None, ..fire(nominal, FireOutcome::Missed) };
    let again = store.record_fire(&t, &schedule.id, &second).await.unwrap();
    assert!(!again.created, "the key (schedule, nominal time) is taken");
    assert_eq!(again.record, first, "the first record comes back unchanged");

    // Racing records of one key: exactly one creates it, and every racer reads the same record.
    let racing = at(1_780_000_260);
    let attempts: Vec<FireRecord> = (0..6).map(|_| fire(racing, FireOutcome::Pending)).collect();
    let answers = join_all(attempts.iter().map(|f| store.record_fire(&t, &schedule.id, f)).collect()).await;
    let answers: Vec<_> = answers.into_iter().map(|a| a.expect("a racing record succeeds")).collect();
    assert_eq!(answers.iter().filter(|a| a.created).count(), 1, "{answers:?}");
    let winner = &answers.iter().find(|a| a.created).unwrap().record;
    assert!(answers.iter().all(|a| &a.record == winner), "{answers:?}");

    let unknown = store.record_fire(&other, &schedule.id, &fire(nominal, FireOutcome::Missed)).await;
    assert!(
        matches!(unknown, Err(PortError::NotFound)),
        "no fire for a schedule the tenant does not have: {unknown:?}"
    );
    store.delete_schedule(&t, &schedule.id).await.unwrap();
}

pub async fn a_fire_settles_only_from_the_outcome_it_is_in<S: DesignStore + ?Sized>(store: &S) {
    let t = tenant();
    let schedule = new_schedule("settle", None);
    store.create_schedule(&t, &schedule).await.unwrap();
    let nominal = at(1_780_000_320);
    let pending = fire(nominal, FireOutcome::Pending);
    store.record_fire(&t, &schedule.id, &pending).await.unwrap();
    let submitted = Settle { outcome: FireOutcome::Submitted, batch_id: pending.batch_id.clone(), reason: None };
    let (changed, after) =
        store.settle_fire(&t, &schedule.id, nominal, FireOutcome::Pending, &submitted).await.unwrap().unwrap();
    assert!(changed);
    assert_eq!(
        (after.outcome, &after.batch_id, after.fired_at),
        (FireOutcome::Submitted, &pending.batch_id, pending.fired_at)
    );
    let failed = Settle { outcome: FireOutcome::Failed, batch_id: None, reason: Some("the items are gone".into()) };
    let (changed, kept) =
        store.settle_fire(&t, &schedule.id, nominal, FireOutcome::Pending, &failed).await.unwrap().unwrap();
    assert!(!changed, "a fire no longer pending is left as it is");
    assert_eq!(kept, after);
    let buffered = at(1_780_000_380);
    store.record_fire(&t, &schedule.id, &fire(buffered, FireOutcome::Buffered)).await.unwrap();
    let (changed, now) =
        store.settle_fire(&t, &schedule.id, buffered, FireOutcome::Buffered, &failed).await.unwrap().unwrap();
    assert!(changed);
    assert_eq!(
        (now.outcome, now.batch_id, now.reason.as_deref()),
        (FireOutcome::Failed, None, Some("the items are gone"))
    );
    assert!(store.settle_fire(&t, &schedule.id, at(1), FireOutcome::Pending, &failed).await.unwrap().is_none());
    store.delete_schedule(&t, &schedule.id).await.unwrap();
}

pub async fn fires_are_listed_newest_first_a_page_at_a_time_and_go_with_their_schedule<S: DesignStore + ?Sized>(
    store: &S,
) {
    let (t, other) = (tenant(), tenant());
    let schedule = new_schedule("pages", None);
    store.create_schedule(&t, &schedule).await.unwrap();
    let nominals: Vec<DateTime<Utc>> = (0..7).map(|i| at(1_780_000_000 + 60 * i)).collect();
    for (i, nominal) in nominals.iter().enumerate() {
        let outcome = if i % 2 == 0 { FireOutcome::Missed } else { FireOutcome::SkippedOverlap };
        store.record_fire(&t, &schedule.id, &fire(*nominal, outcome)).await.unwrap();
    }
    let (mut listed, mut before) = (Vec::new(), None);
    loop {
        let page = store.fires(&t, &schedule.id, before, 3).await.unwrap().expect("the schedule is there");
        assert!(page.items.len() <= 3);
        listed.extend(page.items.iter().map(|f| f.nominal_time));
        match page.next {
            Some(next) => {
                before = Some(DateTime::parse_from_rfc3339(&next).expect("the cursor is a time").with_timezone(&Utc))
            }
            None => break,
        }
    }
    let newest_first: Vec<_> = nominals.iter().rev().copied().collect();
    assert_eq!(listed, newest_first);
    let first = store.fires(&t, &schedule.id, None, 1).await.unwrap().unwrap();
    assert_eq!(first.items[0].reason.as_deref(), Some("more than the catch-up window late"));
    assert!(store.fires(&other, &schedule.id, None, 10).await.unwrap().is_none(), "another tenant's is unknown");
    store.delete_schedule(&t, &schedule.id).await.unwrap();
    assert!(store.fires(&t, &schedule.id, None, 10).await.unwrap().is_none());
    store.create_schedule(&t, &StoredSchedule { id: schedule.id.clone(), ..schedule.clone() }).await.unwrap();
    let empty = store.fires(&t, &schedule.id, None, 10).await.unwrap().unwrap();
    assert!(empty.items.is_empty(), "the ledger went with the schedule: {:?}", empty.items);
    store.delete_schedule(&t, &schedule.id).await.unwrap();
}

pub async fn due_schedules_are_found_across_tenants_and_the_runner_saves_only_at_the_version_read<
    S: DesignStore + ?Sized,
>(
    store: &S,
) {
    let (a, b) = (tenant(), tenant());
    // Times of this run only (a store shared with other runs may hold other due schedules).
    let base = at(1_000_000_000 + (uuid::Uuid::now_v7().as_u128() % 100_000_000) as i64);
    let overdue = new_schedule("overdue", Some(base));
    let due_now = new_schedule("due now", Some(base + TimeDelta::milliseconds(500)));
    let later = new_schedule("later", Some(base + TimeDelta::seconds(2)));
    let paused = new_schedule("paused", None);
    store.create_schedule(&a, &overdue).await.unwrap();
    store.create_schedule(&b, &due_now).await.unwrap();
    store.create_schedule(&a, &later).await.unwrap();
    store.create_schedule(&b, &paused).await.unwrap();
    let mine = [&overdue.id, &due_now.id, &later.id, &paused.id];
    let due_at = |now: DateTime<Utc>| async move {
        let due = store.due_schedules(now, 1000).await.unwrap();
        due.into_iter().filter(|d| mine.contains(&&d.schedule.id)).map(|d| (d.tenant, d.schedule)).collect::<Vec<_>>()
    };
    let found = due_at(base + TimeDelta::seconds(1)).await;
    let ids: Vec<_> = found.iter().map(|(t, s)| (t.clone(), s.id.clone())).collect();
    assert_eq!(ids, [(a.clone(), overdue.id.clone()), (b.clone(), due_now.id.clone())], "most overdue first");
    assert_eq!(found[0].1, overdue, "the schedule as stored");

    let state = RunnerState {
        last_handled: Some(base),
        last_batch: Some(BatchId::generate()),
        buffered: Some(base + TimeDelta::minutes(1)),
    };
    let next = Some(base + TimeDelta::hours(1));
    assert!(store.save_runner_state(&a, &overdue.id, overdue.version, &state, next).await.unwrap());
    assert!(
        !store.save_runner_state(&a, &overdue.id, overdue.version, &RunnerState::default(), None).await.unwrap(),
        "a second save at the same version is dropped"
    );
    assert!(!store.save_runner_state(&b, &overdue.id, overdue.version + 1, &state, None).await.unwrap());
    let saved = store.schedule(&a, &overdue.id).await.unwrap().unwrap();
    assert_eq!((saved.state, saved.next_due, saved.version), (state, next, overdue.version + 1));
    let ids: Vec<_> = due_at(base + TimeDelta::seconds(3)).await.into_iter().map(|(_, s)| s.id).collect();
    assert_eq!(ids, [due_now.id.clone(), later.id.clone()], "moved on by its save; a paused one is never due");

    let mut pause = store.schedule(&b, &due_now.id).await.unwrap().unwrap();
    pause.next_due = None;
    store.update_schedule(&b, &pause).await.unwrap().unwrap();
    store.delete_schedule(&a, &later.id).await.unwrap();
    assert!(due_at(base + TimeDelta::seconds(3)).await.is_empty(), "paused or deleted: not due");
    for (t, id) in [(&a, &overdue.id), (&b, &due_now.id), (&b, &paused.id)] {
        store.delete_schedule(t, id).await.unwrap();
    }
}
