//! Schedules in the embedded store: a row per schedule (with the runner's state and `next_due`,
//! which a partial index keeps for the runner's due read) and a row per fire, keyed by the
//! schedule and the nominal time, so recording a fire is one `INSERT … ON CONFLICT DO NOTHING`.
//! Instants the runner compares (nominal times, `next_due`) are nanoseconds since the epoch.

use super::db::{begin_tx, commit_tx, corrupt, sqlite_error, time};
use chrono::{DateTime, TimeDelta, Utc};
use openqq_core::ports::PortResult;
use openqq_core::schedule::{
    DueSchedule, FireOutcome, FireRecord, Recorded, RunnerState, ScheduleId, Settle, StoredSchedule, Template,
    FIRE_RETENTION, MAX_SCHEDULES_PER_TENANT,
};
use openqq_core::{BatchId, Page, PortError, TenantId};
use openqq_schedule::ScheduleConfig;
use rusqlite::{params, Connection, OptionalExtension, Row};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS schedules (
    tenant TEXT NOT NULL, schedule_id TEXT NOT NULL, name TEXT NOT NULL, config TEXT NOT NULL,
    template TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, resumed_at TEXT,
    last_handled INTEGER, last_batch TEXT, buffered INTEGER, next_due INTEGER,
    version INTEGER NOT NULL,
    PRIMARY KEY (tenant, schedule_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_due) WHERE next_due IS NOT NULL;
CREATE TABLE IF NOT EXISTS schedule_fires (
    tenant TEXT NOT NULL, schedule_id TEXT NOT NULL, nominal INTEGER NOT NULL,
    fired_at INTEGER NOT NULL, outcome TEXT NOT NULL, batch_id TEXT, reason TEXT,
    PRIMARY KEY (tenant, schedule_id, nominal)) WITHOUT ROWID;
";

/// Largest page of schedules or fires.
pub(super) const MAX_PAGE: usize = 100;

/// An instant as stored: nanoseconds since the epoch (instants past 2262 are kept as the last).
fn ns(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

fn instant(n: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(n)
}

const COLUMNS: &str = "schedule_id, name, config, template, created_at, updated_at, resumed_at, \
     last_handled, last_batch, buffered, next_due, version";

fn schedule(r: &Row<'_>) -> rusqlite::Result<StoredSchedule> {
    schedule_at(r, 0)
}

fn config_json(config: &ScheduleConfig) -> PortResult<String> {
    serde_json::to_string(config).map_err(|e| PortError::corrupt("schedule configuration", e.to_string()))
}

pub(super) fn get(conn: &Connection, tenant: &str, id: &str) -> PortResult<Option<StoredSchedule>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM schedules WHERE tenant=?1 AND schedule_id=?2"))
        .and_then(|mut s| s.query_row(params![tenant, id], schedule).optional())
        .map_err(|e| sqlite_error("read schedule", e))
}

pub(super) fn create(conn: &mut Connection, tenant: &str, s: &StoredSchedule) -> PortResult<bool> {
    let tx = begin_tx(conn)?;
    let held: i64 = tx
        .query_row("SELECT COUNT(*) FROM schedules WHERE tenant=?1", params![tenant], |r| r.get(0))
        .map_err(|e| sqlite_error("count schedules", e))?;
    if held as usize >= MAX_SCHEDULES_PER_TENANT {
        return Ok(false);
    }
    tx.execute(
        &format!(
            "INSERT INTO schedules(tenant, {COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        ),
        params![
            tenant,
            s.id.as_str(),
            s.name,
            config_json(&s.config)?,
            s.template.to_json().to_string(),
            s.created_at.to_rfc3339(),
            s.updated_at.to_rfc3339(),
            s.resumed_at.map(|t| t.to_rfc3339()),
            s.state.last_handled.map(ns),
            s.state.last_batch.as_ref().map(BatchId::as_str),
            s.state.buffered.map(ns),
            s.next_due.map(ns),
            s.version as i64,
        ],
    )
    .map_err(|e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => {
            PortError::condition_failed("schedule", format!("the tenant has a schedule {} already", s.id))
        }
        _ => sqlite_error("insert schedule", e),
    })?;
    commit_tx(tx)?;
    Ok(true)
}

pub(super) fn list(
    conn: &Connection,
    tenant: &str,
    cursor: Option<&str>,
    limit: usize,
) -> PortResult<Page<StoredSchedule>> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut items: Vec<StoredSchedule> = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM schedules WHERE tenant=?1 AND (?2 IS NULL OR schedule_id > ?2) \
             ORDER BY schedule_id LIMIT ?3"
        ))
        .and_then(|mut s| s.query_map(params![tenant, cursor, limit as i64 + 1], schedule)?.collect())
        .map_err(|e| sqlite_error("list schedules", e))?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|s| s.id.to_string()).unwrap_or_default()
    });
    Ok(Page { items, next })
}

pub(super) fn update(conn: &mut Connection, tenant: &str, s: &StoredSchedule) -> PortResult<Option<StoredSchedule>> {
    let tx = begin_tx(conn)?;
    let Some(held) = get(&tx, tenant, s.id.as_str())? else { return Ok(None) };
    if held.version != s.version {
        return Err(PortError::condition_failed("schedule", "it changed since it was read"));
    }
    tx.execute(
        "UPDATE schedules SET name=?3, config=?4, template=?5, updated_at=?6, resumed_at=?7, next_due=?8, \
         version=version + 1 WHERE tenant=?1 AND schedule_id=?2",
        params![
            tenant,
            s.id.as_str(),
            s.name,
            config_json(&s.config)?,
            s.template.to_json().to_string(),
            s.updated_at.to_rfc3339(),
            s.resumed_at.map(|t| t.to_rfc3339()),
            s.next_due.map(ns),
        ],
    )
    .map_err(|e| sqlite_error("update schedule", e))?;
    let after = get(&tx, tenant, s.id.as_str())?;
    commit_tx(tx)?;
    Ok(after)
}

pub(super) fn delete(conn: &mut Connection, tenant: &str, id: &str) -> PortResult<bool> {
    let tx = begin_tx(conn)?;
    let deleted = tx
        .execute("DELETE FROM schedules WHERE tenant=?1 AND schedule_id=?2", params![tenant, id])
        .map_err(|e| sqlite_error("delete schedule", e))?;
    tx.execute("DELETE FROM schedule_fires WHERE tenant=?1 AND schedule_id=?2", params![tenant, id])
        .map_err(|e| sqlite_error("delete schedule fires", e))?;
    commit_tx(tx)?;
    Ok(deleted > 0)
}

const FIRE_COLUMNS: &str = "nominal, fired_at, outcome, batch_id, reason";

fn fire(r: &Row<'_>) -> rusqlite::Result<FireRecord> {
    Ok(FireRecord {
        nominal_time: instant(r.get(0)?),
        fired_at: instant(r.get(1)?),
        outcome: FireOutcome::parse(&r.get::<_, String>(2)?).ok_or_else(|| corrupt("fire outcome"))?,
        batch_id: r
            .get::<_, Option<String>>(3)?
            .map(|b| BatchId::parse(&b).map_err(|_| corrupt("batch id")))
            .transpose()?,
        reason: r.get(4)?,
    })
}

fn get_fire(conn: &Connection, tenant: &str, id: &str, nominal: i64) -> PortResult<Option<FireRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {FIRE_COLUMNS} FROM schedule_fires WHERE tenant=?1 AND schedule_id=?2 AND nominal=?3"
    ))
    .and_then(|mut s| s.query_row(params![tenant, id, nominal], fire).optional())
    .map_err(|e| sqlite_error("read fire", e))
}

pub(super) fn record(conn: &mut Connection, tenant: &str, id: &str, f: &FireRecord) -> PortResult<Recorded> {
    let tx = begin_tx(conn)?;
    if get(&tx, tenant, id)?.is_none() {
        return Err(PortError::NotFound);
    }
    let nominal = ns(f.nominal_time);
    let created = tx
        .execute(
            "INSERT INTO schedule_fires(tenant, schedule_id, nominal, fired_at, outcome, batch_id, reason) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
            params![
                tenant,
                id,
                nominal,
                ns(f.fired_at),
                f.outcome.as_str(),
                f.batch_id.as_ref().map(BatchId::as_str),
                f.reason
            ],
        )
        .map_err(|e| sqlite_error("record fire", e))?
        == 1;
    if created {
        // The ledger keeps FIRE_RETENTION of fires; older ones go as newer ones come.
        let horizon = f.fired_at - TimeDelta::from_std(FIRE_RETENTION).unwrap_or(TimeDelta::MAX);
        tx.execute(
            "DELETE FROM schedule_fires WHERE tenant=?1 AND schedule_id=?2 AND nominal < ?3",
            params![tenant, id, ns(horizon)],
        )
        .map_err(|e| sqlite_error("expire fires", e))?;
    }
    let record = get_fire(&tx, tenant, id, nominal)?
        .ok_or_else(|| PortError::corrupt("fire", "a recorded fire does not read back"))?;
    commit_tx(tx)?;
    Ok(Recorded { created, record })
}

pub(super) fn settle(
    conn: &mut Connection,
    tenant: &str,
    id: &str,
    nominal: DateTime<Utc>,
    from: FireOutcome,
    to: &Settle,
) -> PortResult<Option<(bool, FireRecord)>> {
    let tx = begin_tx(conn)?;
    let changed = tx
        .execute(
            "UPDATE schedule_fires SET outcome=?5, batch_id=?6, reason=?7 \
             WHERE tenant=?1 AND schedule_id=?2 AND nominal=?3 AND outcome=?4",
            params![
                tenant,
                id,
                ns(nominal),
                from.as_str(),
                to.outcome.as_str(),
                to.batch_id.as_ref().map(BatchId::as_str),
                to.reason
            ],
        )
        .map_err(|e| sqlite_error("settle fire", e))?
        == 1;
    let after = get_fire(&tx, tenant, id, ns(nominal))?;
    commit_tx(tx)?;
    Ok(after.map(|f| (changed, f)))
}

pub(super) fn fires(
    conn: &Connection,
    tenant: &str,
    id: &str,
    before: Option<DateTime<Utc>>,
    limit: usize,
) -> PortResult<Option<Page<FireRecord>>> {
    if get(conn, tenant, id)?.is_none() {
        return Ok(None);
    }
    let limit = limit.clamp(1, MAX_PAGE);
    let mut items: Vec<FireRecord> = conn
        .prepare_cached(&format!(
            "SELECT {FIRE_COLUMNS} FROM schedule_fires WHERE tenant=?1 AND schedule_id=?2 \
             AND (?3 IS NULL OR nominal < ?3) ORDER BY nominal DESC LIMIT ?4"
        ))
        .and_then(|mut s| s.query_map(params![tenant, id, before.map(ns), limit as i64 + 1], fire)?.collect())
        .map_err(|e| sqlite_error("list fires", e))?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|f| f.nominal_time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)).unwrap_or_default()
    });
    Ok(Some(Page { items, next }))
}

pub(super) fn due(conn: &Connection, now: DateTime<Utc>, limit: usize) -> PortResult<Vec<DueSchedule>> {
    conn.prepare_cached(&format!(
        "SELECT tenant, {COLUMNS} FROM schedules WHERE next_due IS NOT NULL AND next_due <= ?1 \
         ORDER BY next_due LIMIT ?2"
    ))
    .and_then(|mut s| {
        s.query_map(params![ns(now), limit.clamp(1, MAX_PAGE * 10) as i64], |r| {
            let tenant = TenantId::parse(r.get::<_, String>(0)?).map_err(|_| corrupt("tenant id"))?;
            // The schedule's columns follow the tenant's.
            let schedule = schedule_at(r, 1)?;
            Ok(DueSchedule { tenant, schedule })
        })?
        .collect()
    })
    .map_err(|e| sqlite_error("read due schedules", e))
}

/// [`schedule`] for a row whose schedule columns start at `offset`.
fn schedule_at(r: &Row<'_>, offset: usize) -> rusqlite::Result<StoredSchedule> {
    let config: ScheduleConfig =
        serde_json::from_str(&r.get::<_, String>(offset + 2)?).map_err(|_| corrupt("schedule configuration"))?;
    let template = serde_json::from_str(&r.get::<_, String>(offset + 3)?)
        .ok()
        .and_then(|v| Template::from_json(&v))
        .ok_or_else(|| corrupt("schedule template"))?;
    let last_batch =
        r.get::<_, Option<String>>(offset + 8)?.map(|b| BatchId::parse(&b).map_err(|_| corrupt("batch id")));
    Ok(StoredSchedule {
        id: ScheduleId::parse(&r.get::<_, String>(offset)?).map_err(|_| corrupt("schedule id"))?,
        name: r.get(offset + 1)?,
        config,
        template,
        created_at: time(&r.get::<_, String>(offset + 4)?, "created_at")?,
        updated_at: time(&r.get::<_, String>(offset + 5)?, "updated_at")?,
        resumed_at: r.get::<_, Option<String>>(offset + 6)?.map(|t| time(&t, "resumed_at")).transpose()?,
        state: RunnerState {
            last_handled: r.get::<_, Option<i64>>(offset + 7)?.map(instant),
            last_batch: last_batch.transpose()?,
            buffered: r.get::<_, Option<i64>>(offset + 9)?.map(instant),
        },
        next_due: r.get::<_, Option<i64>>(offset + 10)?.map(instant),
        version: r.get::<_, i64>(offset + 11)?.max(0) as u64,
    })
}

pub(super) fn save_state(
    conn: &mut Connection,
    tenant: &str,
    id: &str,
    version: u64,
    state: &RunnerState,
    next_due: Option<DateTime<Utc>>,
) -> PortResult<bool> {
    let saved = conn
        .prepare_cached(
            "UPDATE schedules SET last_handled=?4, last_batch=?5, buffered=?6, next_due=?7, version=version + 1 \
             WHERE tenant=?1 AND schedule_id=?2 AND version=?3",
        )
        .and_then(|mut s| {
            s.execute(params![
                tenant,
                id,
                version as i64,
                state.last_handled.map(ns),
                state.last_batch.as_ref().map(BatchId::as_str),
                state.buffered.map(ns),
                next_due.map(ns),
            ])
        })
        .map_err(|e| sqlite_error("save runner state", e))?;
    Ok(saved == 1)
}
