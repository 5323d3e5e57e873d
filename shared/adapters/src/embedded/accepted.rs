//! Accepted-revision markers of the embedded store: the latest revision the API accepted per
//! design, overlaid on reads (see `openqq_core::accepted`). One small row per design; the
//! materialised tables are never touched from here. A marker is kept for the store's retention
//! after its revision was accepted: reads pass over an older one, and each write removes up to
//! [`PURGE_BATCH`] of them, so the table holds about a retention's worth of accepted designs.

use super::db::{cutoff, sqlite_error};
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::{AcceptedRevision, CorrelationId, DesignId};
use rusqlite::{params, Connection, OptionalExtension};
use std::time::Duration;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS accepted (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, revision INTEGER NOT NULL, name TEXT,
    event_id TEXT NOT NULL, correlation_id TEXT NOT NULL, accepted_at TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS accepted_by_time ON accepted (accepted_at);
";

/// Expired markers each write removes, at most: more than one, so that removal outpaces
/// acceptance.
const PURGE_BATCH: i64 = 64;

const COLUMNS: &str = "design_id, revision, name, event_id, correlation_id, accepted_at";

/// Keeps the higher of the stored marker and `a`; a name sent with a lower revision is kept when
/// the higher one has none. A deleted design's marker (a revision that raced its deletion) is not
/// kept: it would show the design again. The caller [`purge`]s once per write.
pub(super) fn record(conn: &Connection, tenant: &str, a: &AcceptedRevision) -> PortResult<()> {
    conn.prepare_cached(
        "INSERT INTO accepted(tenant, design_id, revision, name, event_id, correlation_id, accepted_at) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
         WHERE NOT EXISTS (SELECT 1 FROM deleted_designs WHERE tenant=?1 AND design_id=?2) \
         ON CONFLICT(tenant, design_id) DO UPDATE SET revision=excluded.revision, \
         name=COALESCE(excluded.name, accepted.name), event_id=excluded.event_id, \
         correlation_id=excluded.correlation_id, accepted_at=excluded.accepted_at \
         WHERE excluded.revision > accepted.revision",
    )
    .and_then(|mut s| {
        s.execute(params![
            tenant,
            a.design_id.as_str(),
            a.revision as i64,
            a.name,
            a.event_id.to_string(),
            a.correlation_id.as_str(),
            a.accepted_at.to_rfc3339()
        ])
    })
    .map_err(|e| sqlite_error("record accepted revision", e))?;
    Ok(())
}

/// Removes up to [`PURGE_BATCH`] markers older than `keep`, of any tenant: once in each write of
/// markers, however many it records.
pub(super) fn purge(conn: &Connection, keep: Duration) -> PortResult<()> {
    conn.prepare_cached(
        "DELETE FROM accepted WHERE (tenant, design_id) IN \
         (SELECT tenant, design_id FROM accepted WHERE accepted_at < ?1 ORDER BY accepted_at LIMIT ?2)",
    )
    .and_then(|mut s| s.execute(params![cutoff(keep), PURGE_BATCH]))
    .map_err(|e| sqlite_error("purge accepted revisions", e))?;
    Ok(())
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AcceptedRevision> {
    let corrupt = |what: &str| rusqlite::Error::InvalidColumnType(0, what.to_owned(), rusqlite::types::Type::Text);
    let accepted_at: String = r.get(5)?;
    Ok(AcceptedRevision {
        design_id: DesignId::parse(r.get::<_, String>(0)?).map_err(|_| corrupt("design_id"))?,
        revision: r.get::<_, i64>(1)? as u64,
        name: r.get(2)?,
        event_id: r.get::<_, String>(3)?.parse().map_err(|_| corrupt("event_id"))?,
        correlation_id: CorrelationId::parse(r.get::<_, String>(4)?).map_err(|_| corrupt("correlation_id"))?,
        accepted_at: DateTime::parse_from_rfc3339(&accepted_at)
            .map_err(|_| corrupt("accepted_at"))?
            .with_timezone(&Utc),
    })
}

/// The marker of one design, if the API accepted a revision of it after `cutoff`.
pub(super) fn one(conn: &Connection, tenant: &str, design: &str, cutoff: &str) -> PortResult<Option<AcceptedRevision>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM accepted WHERE tenant=?1 AND design_id=?2 AND accepted_at >= ?3"
    ))
    .and_then(|mut s| s.query_row(params![tenant, design, cutoff], row).optional())
    .map_err(|e| sqlite_error("read accepted revision", e))
}

/// Up to `n` markers of a tenant below `cursor` accepted after `cutoff`, newest (highest design
/// id) first.
pub(super) fn page(
    conn: &Connection,
    tenant: &str,
    cursor: Option<&str>,
    n: usize,
    cutoff: &str,
) -> PortResult<Vec<AcceptedRevision>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM accepted WHERE tenant=?1 AND (?2 IS NULL OR design_id < ?2) AND accepted_at >= ?4 \
         ORDER BY design_id DESC LIMIT ?3"
    ))
    .and_then(|mut s| s.query_map(params![tenant, cursor, n as i64, cutoff], row)?.collect::<Result<Vec<_>, _>>())
    .map_err(|e| sqlite_error("list accepted revisions", e))
}
