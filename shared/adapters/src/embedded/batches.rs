//! Batches in the embedded store: one row per batch with its counts kept beside it (so reading a
//! batch of 10,000 items reads one row), one row per item. Each call is one transaction; what the
//! rules are is `openqq_core::batch`'s.
//!
//! A batch is kept for the store's batch retention after it was created: reads pass over an older
//! one (`cutoff`: its `created_at` before it), and each creation removes up to [`PURGE_BATCHES`]
//! of them, of any tenant, with their items.

use super::db::{begin_tx, commit_tx, corrupt, sqlite_error, time};
use chrono::Utc;
use openqq_core::batch::{
    BatchItem, BatchState, BatchStatus, BatchView, Counts, Ended, ItemStatus, MaxFailed, NewBatch, NewItem, Released,
    Verdicts,
};
use openqq_core::design::Verdict;
use openqq_core::ports::PortResult;
use openqq_core::{BatchId, DesignId, Page, PortError};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::ops::Range;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS batches (
    tenant TEXT NOT NULL, batch_id TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
    max_failed TEXT, reason TEXT, created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT,
    queued INTEGER NOT NULL, validating INTEGER NOT NULL, ready INTEGER NOT NULL,
    failed INTEGER NOT NULL, rejected INTEGER NOT NULL, cancelled INTEGER NOT NULL,
    pass INTEGER NOT NULL, fail INTEGER NOT NULL, ended INTEGER NOT NULL,
    PRIMARY KEY (tenant, batch_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batch_items (
    tenant TEXT NOT NULL, batch_id TEXT NOT NULL, idx INTEGER NOT NULL, custom_id TEXT,
    design_id TEXT, revision INTEGER, status TEXT NOT NULL, verdict TEXT, reason TEXT,
    ordinal INTEGER, submission TEXT,
    PRIMARY KEY (tenant, batch_id, idx)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_items_by_status ON batch_items (tenant, batch_id, status, idx);
CREATE INDEX IF NOT EXISTS batches_by_creation ON batches (created_at);
";

/// Expired batches each creation removes with their items, at most: more than one, so that
/// removal outpaces creation (a batch holds at most `MAX_BATCH_ITEMS`, so this bounds the work).
const PURGE_BATCHES: i64 = 2;

/// The cutoff that passes over no batch (every `created_at` is at or after it).
pub(super) const ANY_AGE: &str = "";

/// Largest page of batches or items.
pub(super) const MAX_PAGE: usize = 1000;

const VIEW_COLUMNS: &str = "batch_id, name, state, max_failed, reason, created_at, started_at, finished_at, \
     queued, validating, ready, failed, rejected, cancelled, pass, fail";

fn view(r: &Row<'_>) -> rusqlite::Result<BatchView> {
    let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u32);
    let counts =
        Counts { queued: n(8)?, validating: n(9)?, ready: n(10)?, failed: n(11)?, rejected: n(12)?, cancelled: n(13)? };
    let state = BatchState::parse(&r.get::<_, String>(2)?).ok_or_else(|| corrupt("batch state"))?;
    let opt_time = |i: usize, what: &str| -> rusqlite::Result<_> {
        r.get::<_, Option<String>>(i)?.map(|t| time(&t, what)).transpose()
    };
    Ok(BatchView {
        batch_id: BatchId::parse(&r.get::<_, String>(0)?).map_err(|_| corrupt("batch id"))?,
        name: r.get(1)?,
        status: BatchStatus::of(state, &counts),
        counts,
        verdicts: Verdicts { pass: n(14)?, fail: n(15)? },
        max_failed: r.get::<_, Option<String>>(3)?.as_deref().and_then(MaxFailed::from_text),
        reason: r.get(4)?,
        created_at: time(&r.get::<_, String>(5)?, "created_at")?,
        started_at: opt_time(6, "started_at")?,
        finished_at: opt_time(7, "finished_at")?,
    })
}

/// The batch, unless it was created before `cutoff` (RFC 3339; [`ANY_AGE`] for any).
pub(super) fn get(conn: &Connection, tenant: &str, id: &str, cutoff: &str) -> PortResult<Option<BatchView>> {
    conn.prepare_cached(&format!(
        "SELECT {VIEW_COLUMNS} FROM batches WHERE tenant=?1 AND batch_id=?2 AND created_at >= ?3"
    ))
    .and_then(|mut s| s.query_row(params![tenant, id, cutoff], view).optional())
    .map_err(|e| sqlite_error("read batch", e))
}

/// Creates the batch unless the tenant has one of its id (of any age), after removing expired
/// batches ([`purge`]).
pub(super) fn create(
    conn: &mut Connection,
    tenant: &str,
    batch: &NewBatch,
    items: &[NewItem],
    cutoff: &str,
) -> PortResult<bool> {
    let tx = begin_tx(conn)?;
    purge(&tx, cutoff)?;
    if get(&tx, tenant, batch.id.as_str(), ANY_AGE)?.is_some() {
        commit_tx(tx)?;
        return Ok(false);
    }
    let mut counts = Counts::default();
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO batch_items(tenant, batch_id, idx, custom_id, design_id, revision, status, reason, submission) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .map_err(|e| sqlite_error("prepare item insert", e))?;
        for new in items {
            let item = &new.item;
            counts.add(item.status, 1);
            insert
                .execute(params![
                    tenant,
                    batch.id.as_str(),
                    item.index,
                    item.custom_id,
                    item.design_id.as_ref().map(DesignId::as_str),
                    item.revision.map(|r| r as i64),
                    item.status.as_str(),
                    item.reason,
                    new.submission,
                ])
                .map_err(|e| sqlite_error("insert batch item", e))?;
        }
    }
    let finished = counts.is_final().then(|| batch.created_at.to_rfc3339());
    tx.execute(
        "INSERT INTO batches(tenant, batch_id, name, state, max_failed, created_at, finished_at, \
         queued, validating, ready, failed, rejected, cancelled, pass, fail, ended) \
         VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, 0, 0, 0, ?8, 0, 0, 0, 0)",
        params![
            tenant,
            batch.id.as_str(),
            batch.name,
            batch.max_failed.map(MaxFailed::to_text),
            batch.created_at.to_rfc3339(),
            finished,
            counts.queued,
            counts.rejected,
        ],
    )
    .map_err(|e| sqlite_error("insert batch", e))?;
    commit_tx(tx)?;
    Ok(true)
}

/// Removes up to [`PURGE_BATCHES`] batches created before `cutoff`, of any tenant, with their
/// items.
fn purge(tx: &Connection, cutoff: &str) -> PortResult<()> {
    let expired: Vec<(String, String)> = tx
        .prepare_cached("SELECT tenant, batch_id FROM batches WHERE created_at < ?1 ORDER BY created_at LIMIT ?2")
        .and_then(|mut s| s.query_map(params![cutoff, PURGE_BATCHES], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| sqlite_error("find expired batches", e))?;
    for (tenant, id) in expired {
        for table in ["batch_items", "batches"] {
            tx.prepare_cached(&format!("DELETE FROM {table} WHERE tenant=?1 AND batch_id=?2"))
                .and_then(|mut s| s.execute(params![tenant, id]))
                .map_err(|e| sqlite_error("remove an expired batch", e))?;
        }
    }
    Ok(())
}

pub(super) fn list(
    conn: &Connection,
    tenant: &str,
    cursor: Option<&str>,
    limit: usize,
    cutoff: &str,
) -> PortResult<Page<BatchView>> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut items: Vec<BatchView> = conn
        .prepare_cached(&format!(
            "SELECT {VIEW_COLUMNS} FROM batches WHERE tenant=?1 AND (?2 IS NULL OR batch_id < ?2) \
             AND created_at >= ?4 ORDER BY batch_id DESC LIMIT ?3"
        ))
        .and_then(|mut s| s.query_map(params![tenant, cursor, limit as i64 + 1, cutoff], view)?.collect())
        .map_err(|e| sqlite_error("list batches", e))?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|b| b.batch_id.to_string()).unwrap_or_default()
    });
    Ok(Page { items, next })
}

fn item(r: &Row<'_>) -> rusqlite::Result<BatchItem> {
    Ok(BatchItem {
        index: r.get(0)?,
        custom_id: r.get(1)?,
        design_id: r
            .get::<_, Option<String>>(2)?
            .map(|d| DesignId::parse(d).map_err(|_| corrupt("design id")))
            .transpose()?,
        revision: r.get::<_, Option<i64>>(3)?.map(|v| v as u64),
        status: ItemStatus::parse(&r.get::<_, String>(4)?).ok_or_else(|| corrupt("item status"))?,
        verdict: r.get::<_, Option<String>>(5)?.as_deref().and_then(Verdict::parse),
        reason: r.get(6)?,
    })
}

pub(super) fn items(
    conn: &Connection,
    tenant: &str,
    id: &str,
    status: Option<ItemStatus>,
    after: Option<u32>,
    limit: usize,
    cutoff: &str,
) -> PortResult<Option<Page<BatchItem>>> {
    if get(conn, tenant, id, cutoff)?.is_none() {
        return Ok(None);
    }
    let limit = limit.clamp(1, MAX_PAGE);
    let from = after.map_or(0, |a| i64::from(a) + 1);
    let mut page: Vec<BatchItem> = conn
        .prepare_cached(
            "SELECT idx, custom_id, design_id, revision, status, verdict, reason FROM batch_items \
             WHERE tenant=?1 AND batch_id=?2 AND idx >= ?3 AND (?4 IS NULL OR status = ?4) ORDER BY idx LIMIT ?5",
        )
        .and_then(|mut s| {
            s.query_map(params![tenant, id, from, status.map(ItemStatus::as_str), limit as i64 + 1], item)?.collect()
        })
        .map_err(|e| sqlite_error("list batch items", e))?;
    let next = (page.len() > limit).then(|| {
        page.truncate(limit);
        page.last().map(|i| i.index.to_string()).unwrap_or_default()
    });
    Ok(Some(Page { items: page, next }))
}

pub(super) fn release(conn: &mut Connection, tenant: &str, id: &str, indexes: Range<u32>) -> PortResult<Vec<Released>> {
    let tx = begin_tx(conn)?;
    let moved = tx
        .execute(
            "UPDATE batch_items SET status='validating' \
             WHERE tenant=?1 AND batch_id=?2 AND idx >= ?3 AND idx < ?4 AND status='queued'",
            params![tenant, id, indexes.start, indexes.end],
        )
        .map_err(|e| sqlite_error("release batch items", e))?;
    if moved > 0 {
        tx.execute(
            "UPDATE batches SET queued = queued - ?3, validating = validating + ?3, \
             started_at = COALESCE(started_at, ?4) WHERE tenant=?1 AND batch_id=?2",
            params![tenant, id, moved as i64, Utc::now().to_rfc3339()],
        )
        .map_err(|e| sqlite_error("count released items", e))?;
    }
    let released = tx
        .prepare_cached(
            "SELECT idx, design_id, revision, submission FROM batch_items \
             WHERE tenant=?1 AND batch_id=?2 AND idx >= ?3 AND idx < ?4 AND status='validating' ORDER BY idx",
        )
        .and_then(|mut s| {
            s.query_map(params![tenant, id, indexes.start, indexes.end], |r| {
                Ok(Released {
                    index: r.get(0)?,
                    design_id: DesignId::parse(r.get::<_, Option<String>>(1)?.unwrap_or_default())
                        .map_err(|_| corrupt("design id"))?,
                    revision: r.get::<_, Option<i64>>(2)?.unwrap_or(1) as u64,
                    submission: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sqlite_error("read released items", e))?;
    commit_tx(tx)?;
    Ok(released)
}

pub(super) fn end(
    conn: &mut Connection,
    tenant: &str,
    id: &str,
    index: u32,
    status: ItemStatus,
    verdict: Option<Verdict>,
) -> PortResult<Option<Ended>> {
    if !matches!(status, ItemStatus::Ready | ItemStatus::Failed) {
        return Err(PortError::invalid("batch item", format!("an item ends ready or failed, not {}", status.as_str())));
    }
    let tx = begin_tx(conn)?;
    let held: Option<(String, Option<u32>)> = tx
        .prepare_cached("SELECT status, ordinal FROM batch_items WHERE tenant=?1 AND batch_id=?2 AND idx=?3")
        .and_then(|mut s| s.query_row(params![tenant, id, index], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(|e| sqlite_error("read batch item", e))?;
    let Some((held, ordinal)) = held else { return Ok(None) };
    let fresh = held == ItemStatus::Validating.as_str();
    let ordinal = if fresh {
        let ordinal: u32 = tx
            .query_row(
                "UPDATE batches SET ended = ended + 1, validating = validating - 1, \
                 ready = ready + ?3, failed = failed + ?4, pass = pass + ?5, fail = fail + ?6 \
                 WHERE tenant=?1 AND batch_id=?2 RETURNING ended",
                params![
                    tenant,
                    id,
                    (status == ItemStatus::Ready) as i64,
                    (status == ItemStatus::Failed) as i64,
                    (verdict == Some(Verdict::Pass)) as i64,
                    (verdict == Some(Verdict::Fail)) as i64,
                ],
                |r| r.get(0),
            )
            .map_err(|e| sqlite_error("count the ended item", e))?;
        tx.execute(
            "UPDATE batch_items SET status=?4, verdict=?5, ordinal=?6 WHERE tenant=?1 AND batch_id=?2 AND idx=?3",
            params![tenant, id, index, status.as_str(), verdict.map(Verdict::as_str), ordinal],
        )
        .map_err(|e| sqlite_error("end batch item", e))?;
        finish_if_final(&tx, tenant, id)?;
        Some(ordinal)
    } else {
        ordinal
    };
    let batch =
        get(&tx, tenant, id, ANY_AGE)?.ok_or_else(|| PortError::corrupt("batch", "an item of it has no batch"))?;
    commit_tx(tx)?;
    Ok(Some(Ended { ordinal, fresh, batch }))
}

/// Stamps the batch's finish once nothing is open.
fn finish_if_final(tx: &Connection, tenant: &str, id: &str) -> PortResult<()> {
    tx.execute(
        "UPDATE batches SET finished_at = ?3 WHERE tenant=?1 AND batch_id=?2 AND finished_at IS NULL \
         AND queued = 0 AND validating = 0",
        params![tenant, id, Utc::now().to_rfc3339()],
    )
    .map_err(|e| sqlite_error("finish batch", e))?;
    Ok(())
}

pub(super) fn stop(
    conn: &mut Connection,
    tenant: &str,
    id: &str,
    state: BatchState,
    reason: &str,
    cutoff: &str,
) -> PortResult<Option<BatchView>> {
    let tx = begin_tx(conn)?;
    let stopped = tx
        .execute(
            "UPDATE batches SET state=?3, reason=?4, cancelled = cancelled + queued, queued = 0 \
             WHERE tenant=?1 AND batch_id=?2 AND state='running' AND finished_at IS NULL AND created_at >= ?5",
            params![tenant, id, state.as_str(), reason, cutoff],
        )
        .map_err(|e| sqlite_error("stop batch", e))?;
    if stopped > 0 {
        tx.execute(
            "UPDATE batch_items SET status='cancelled' WHERE tenant=?1 AND batch_id=?2 AND status='queued'",
            params![tenant, id],
        )
        .map_err(|e| sqlite_error("cancel queued items", e))?;
        finish_if_final(&tx, tenant, id)?;
    }
    let batch = get(&tx, tenant, id, cutoff)?;
    commit_tx(tx)?;
    Ok(batch)
}

/// What the tenant's unfinished batches created from `cutoff` hold open (queued or validating).
pub(super) fn open_items(conn: &Connection, tenant: &str, cutoff: &str) -> PortResult<u64> {
    conn.prepare_cached(
        "SELECT COALESCE(SUM(queued + validating), 0) FROM batches \
         WHERE tenant=?1 AND finished_at IS NULL AND created_at >= ?2",
    )
    .and_then(|mut s| s.query_row(params![tenant, cutoff], |r| r.get::<_, i64>(0)))
    .map(|n| n.max(0) as u64)
    .map_err(|e| sqlite_error("count open batch items", e))
}
