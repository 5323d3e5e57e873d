//! Accepted-revision markers of the embedded store: the latest revision the API accepted per
//! design, overlaid on reads (see `openqq_core::accepted`). One small row per design; the
//! materialised tables are never touched from here.

use super::db::sqlite_error;
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::{AcceptedRevision, CorrelationId, DesignId};
use rusqlite::{params, Connection, OptionalExtension};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS accepted (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, revision INTEGER NOT NULL, name TEXT,
    event_id TEXT NOT NULL, correlation_id TEXT NOT NULL, accepted_at TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id)) WITHOUT ROWID;
";

const COLUMNS: &str = "design_id, revision, name, event_id, correlation_id, accepted_at";

/// Keeps the higher of the stored marker and `a`; a name sent with a lower revision is kept when
/// the higher one has none. A deleted design's marker (a revision that raced its deletion) is not
/// kept: it would show the design again.
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

/// The marker of one design, if the API accepted a revision of it.
pub(super) fn one(conn: &Connection, tenant: &str, design: &str) -> PortResult<Option<AcceptedRevision>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM accepted WHERE tenant=?1 AND design_id=?2"))
        .and_then(|mut s| s.query_row(params![tenant, design], row).optional())
        .map_err(|e| sqlite_error("read accepted revision", e))
}

/// Up to `n` markers of a tenant below `cursor`, newest (highest design id) first.
pub(super) fn page(
    conn: &Connection,
    tenant: &str,
    cursor: Option<&str>,
    n: usize,
) -> PortResult<Vec<AcceptedRevision>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM accepted WHERE tenant=?1 AND (?2 IS NULL OR design_id < ?2) \
         ORDER BY design_id DESC LIMIT ?3"
    ))
    .and_then(|mut s| s.query_map(params![tenant, cursor, n as i64], row)?.collect::<Result<Vec<_>, _>>())
    .map_err(|e| sqlite_error("list accepted revisions", e))
}
