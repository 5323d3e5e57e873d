//! The tenant's event feed in the embedded store (the same SQLite file as the designs): one
//! row per tenant and `seq`, unique on (tenant, design, kind, revision). An append takes the
//! writer lock (`BEGIN IMMEDIATE`), so `MAX(seq) + 1` read inside it is the next number without a
//! gap, whichever process appends; in the same transaction it queues the entry's deliveries
//! ([`super::webhooks`]: the outbox).
//!
//! Retention: entries older than the store's feed retention go, and with them the deliveries of
//! theirs that ended (delivered or dead), in the append path: every [`SWEEP_EVERY`]th entry of a
//! tenant removes up to [`SWEEP_MOST`] of that tenant's old ones in the same transaction, in
//! primary-key order, so the cost is bounded and falls on the tenant that grows. The tenant's
//! newest entry is never removed: the next number is `MAX(seq) + 1`. A reader that resumes past
//! removed entries is told so (`openqq_core::feed::resumable`).

use super::db::{begin_tx, commit_tx, corrupt, sqlite_error, time};
use super::webhooks::queue_for_webhooks;
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::{CorrelationId, DesignId, EventKind, FeedEntry, NewFeedEntry, Verdict};
use rusqlite::{params, Connection, OptionalExtension};
use std::time::Duration;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS feed (
    tenant TEXT NOT NULL, seq INTEGER NOT NULL, design_id TEXT NOT NULL, kind TEXT NOT NULL,
    revision INTEGER NOT NULL, event_id TEXT NOT NULL, correlation_id TEXT NOT NULL,
    occurred_at TEXT NOT NULL, verdict TEXT, elapsed_ms INTEGER, batch TEXT,
    PRIMARY KEY (tenant, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS feed_once ON feed (tenant, design_id, kind, revision);
";

const FEED_COLUMNS: &str =
    "seq, design_id, kind, revision, event_id, correlation_id, occurred_at, verdict, elapsed_ms, batch";

fn feed_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FeedEntry> {
    let kind: String = r.get(2)?;
    let verdict: Option<String> = r.get(7)?;
    Ok(FeedEntry {
        seq: r.get::<_, i64>(0)? as u64,
        design_id: DesignId::parse(r.get::<_, String>(1)?).map_err(|_| corrupt("design_id"))?,
        kind: EventKind::parse(&kind).ok_or_else(|| corrupt("kind"))?,
        revision: r.get::<_, i64>(3)? as u64,
        event_id: r.get::<_, String>(4)?.parse().map_err(|_| corrupt("event_id"))?,
        correlation_id: CorrelationId::parse(r.get::<_, String>(5)?).map_err(|_| corrupt("correlation_id"))?,
        occurred_at: time(&r.get::<_, String>(6)?, "occurred_at")?,
        verdict: match verdict {
            Some(v) => Some(Verdict::parse(&v).ok_or_else(|| corrupt("verdict"))?),
            None => None,
        },
        elapsed_ms: r.get::<_, Option<i64>>(8)?.map(|ms| ms.max(0) as u64),
        batch: match r.get::<_, Option<String>>(9)? {
            Some(json) => Some(serde_json::from_str(&json).map_err(|_| corrupt("batch"))?),
            None => None,
        },
    })
}

/// Appends `new` to the tenant's feed (or finds the entry there) and queues its deliveries, in
/// one transaction.
pub(super) fn append(conn: &mut Connection, tenant: &str, new: &NewFeedEntry<'_>, keep: Duration) -> PortResult<u64> {
    let tx = begin_tx(conn)?;
    let seq = append_tx(&tx, tenant, new, keep)?;
    commit_tx(tx)?;
    Ok(seq)
}

/// [`append`] inside a transaction of the caller's, which holds the writer lock (`BEGIN
/// IMMEDIATE`): the design store's `apply_and_append` makes the write and its feed entry one.
/// Entries older than `keep` are swept as it goes ([`sweep`]).
pub(super) fn append_tx(tx: &Connection, tenant: &str, new: &NewFeedEntry<'_>, keep: Duration) -> PortResult<u64> {
    let e = new.entry;
    let (design, kind) = (new.design_id.as_str(), e.kind.as_str());
    let existing: Option<i64> = tx
        .prepare_cached("SELECT seq FROM feed WHERE tenant=?1 AND design_id=?2 AND kind=?3 AND revision=?4")
        .and_then(|mut s| s.query_row(params![tenant, design, kind, e.revision as i64], |r| r.get(0)).optional())
        .map_err(|e| sqlite_error("read feed", e))?;
    if let Some(seq) = existing {
        return Ok(seq as u64);
    }
    let last: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM feed WHERE tenant=?1")
        .and_then(|mut s| s.query_row(params![tenant], |r| r.get(0)))
        .map_err(|e| sqlite_error("read feed", e))?;
    let entry = new.numbered(last as u64 + 1);
    tx.prepare_cached(&format!(
        "INSERT INTO feed(tenant, {FEED_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            tenant,
            entry.seq as i64,
            design,
            kind,
            entry.revision as i64,
            entry.event_id.to_string(),
            entry.correlation_id.as_str(),
            entry.occurred_at.to_rfc3339(),
            entry.verdict.map(Verdict::as_str),
            entry.elapsed_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
            entry.batch.as_ref().map(|b| serde_json::to_string(b).expect("a batch summary serialises"))
        ])
    })
    .map_err(|e| sqlite_error("append feed", e))?;
    queue_for_webhooks(tx, tenant, &entry)?;
    if entry.seq.is_multiple_of(SWEEP_EVERY) {
        let cutoff = chrono::Duration::from_std(keep).ok().and_then(|k| Utc::now().checked_sub_signed(k));
        if let Some(cutoff) = cutoff {
            sweep(tx, tenant, entry.seq, cutoff)?;
        }
    }
    Ok(entry.seq)
}

/// Every this many entries of a tenant, its old entries are swept.
pub const SWEEP_EVERY: u64 = 64;
/// Most entries one sweep removes (more than [`SWEEP_EVERY`], so a sweep keeps up).
pub const SWEEP_MOST: i64 = 256;

/// Removes `tenant`'s entries that occurred before `cutoff`, oldest first, at most
/// [`SWEEP_MOST`], never `newest` or after, and their deliveries that ended. Returns how many
/// entries went.
pub(super) fn sweep(tx: &Connection, tenant: &str, newest: u64, cutoff: DateTime<Utc>) -> PortResult<usize> {
    // Times are stored as RFC 3339 in UTC, which orders as text the way it orders in time.
    let old: Vec<i64> = tx
        .prepare_cached("SELECT seq FROM feed WHERE tenant=?1 AND seq < ?2 AND occurred_at < ?3 ORDER BY seq LIMIT ?4")
        .and_then(|mut s| {
            s.query_map(params![tenant, newest as i64, cutoff.to_rfc3339(), SWEEP_MOST], |r| r.get(0))?.collect()
        })
        .map_err(|e| sqlite_error("read old feed entries", e))?;
    for seq in &old {
        tx.prepare_cached("DELETE FROM feed WHERE tenant=?1 AND seq=?2")
            .and_then(|mut s| s.execute(params![tenant, seq]))
            .map_err(|e| sqlite_error("remove an old feed entry", e))?;
        tx.prepare_cached(
            "DELETE FROM deliveries WHERE tenant=?1 AND webhook_id IN (SELECT id FROM webhooks WHERE tenant=?1) \
             AND seq=?2 AND status IN ('delivered', 'dead')",
        )
        .and_then(|mut s| s.execute(params![tenant, seq]))
        .map_err(|e| sqlite_error("remove an old delivery", e))?;
    }
    Ok(old.len())
}

pub(super) fn read(conn: &Connection, tenant: &str, after: u64, limit: usize) -> PortResult<Vec<FeedEntry>> {
    let limit = limit.min(openqq_core::feed::MAX_FEED_PAGE);
    if limit == 0 {
        return Ok(Vec::new());
    }
    conn.prepare_cached(&format!("SELECT {FEED_COLUMNS} FROM feed WHERE tenant=?1 AND seq > ?2 ORDER BY seq LIMIT ?3"))
        .and_then(|mut s| {
            s.query_map(params![tenant, i64::try_from(after).unwrap_or(i64::MAX), limit as i64], feed_row)?.collect()
        })
        .map_err(|e| sqlite_error("read feed", e))
}

/// The number of the tenant's latest entry (0 before the first), from the primary key.
pub(super) fn head(conn: &Connection, tenant: &str) -> PortResult<u64> {
    conn.prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM feed WHERE tenant=?1")
        .and_then(|mut s| s.query_row(params![tenant], |r| r.get::<_, i64>(0)))
        .map(|seq| seq as u64)
        .map_err(|e| sqlite_error("read feed head", e))
}
