//! Deleting a design in the embedded store (see `openqq_core::deletion`): one transaction
//! removes the design's rows (design, timeline, reports, accepted-revision marker, kept
//! specification), records its tombstone and appends its `design.deleted` feed entry with that
//! entry's deliveries. The tombstone is a row of `deleted_designs`: `apply` reads it only when
//! no design row is there, so a deleted design costs the hot path nothing.

use super::db::{cutoff, sqlite_error};
use super::feed;
use openqq_core::deletion::{object_digests, own_full_report, Deleted, Deletion};
use openqq_core::ports::PortResult;
use openqq_core::{DesignId, EventKind, NewFeedEntry, TimelineEntry};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::BTreeSet;
use std::time::Duration;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS deleted_designs (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, revision INTEGER NOT NULL, deleted_at TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deleted_designs_by_time ON deleted_designs (deleted_at);
";

/// Expired tombstones each deletion removes at most: more than one, so that removal outpaces
/// deletion.
const PURGE_TOMBSTONES: i64 = 64;

/// Whether `tenant` deleted `design`.
pub(super) fn is_deleted(conn: &Connection, tenant: &str, design: &str) -> PortResult<bool> {
    conn.prepare_cached("SELECT EXISTS(SELECT 1 FROM deleted_designs WHERE tenant=?1 AND design_id=?2)")
        .and_then(|mut s| s.query_row(params![tenant, design], |r| r.get(0)))
        .map_err(|e| sqlite_error("read tombstone", e))
}

/// Deletes `design` inside the caller's transaction, which holds the writer lock.
pub(super) fn delete_tx(
    tx: &Connection,
    tenant: &str,
    design: &DesignId,
    deletion: &Deletion,
    feed_retention: Duration,
    tombstone_retention: Duration,
) -> PortResult<Option<Deleted>> {
    let id = design.as_str();
    let revision: Option<i64> = tx
        .prepare_cached("SELECT revision FROM designs WHERE tenant=?1 AND design_id=?2")
        .and_then(|mut s| s.query_row(params![tenant, id], |r| r.get(0)).optional())
        .map_err(|e| sqlite_error("read design", e))?;
    let Some(revision) = revision else { return Ok(None) };
    let objects = only_its_objects(tx, tenant, design)?;
    for table in ["designs", "timeline", "reports", "accepted", "specs", "spec_objects"] {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE tenant=?1 AND design_id=?2"))
            .and_then(|mut s| s.execute(params![tenant, id]))
            .map_err(|e| sqlite_error(&format!("delete from {table}"), e))?;
    }
    // Tombstones past their retention, of any tenant, go as designs are deleted (before this one's is written).
    tx.prepare_cached(
        "DELETE FROM deleted_designs WHERE (tenant, design_id) IN \
         (SELECT tenant, design_id FROM deleted_designs WHERE deleted_at < ?1 ORDER BY deleted_at LIMIT ?2)",
    )
    .and_then(|mut s| s.execute(params![cutoff(tombstone_retention), PURGE_TOMBSTONES]))
    .map_err(|e| sqlite_error("purge tombstones", e))?;
    tx.prepare_cached(
        "INSERT OR IGNORE INTO deleted_designs(tenant, design_id, revision, deleted_at, correlation_id) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![tenant, id, revision, deletion.occurred_at.to_rfc3339(), deletion.correlation_id.as_str()])
    })
    .map_err(|e| sqlite_error("record tombstone", e))?;
    let entry = TimelineEntry {
        event_id: deletion.event_id,
        kind: EventKind::DesignDeleted,
        revision: revision as u64,
        correlation_id: deletion.correlation_id.clone(),
        occurred_at: deletion.occurred_at,
    };
    let new = NewFeedEntry { design_id: design, entry: &entry, verdict: None, elapsed_ms: None, batch: None };
    let seq = feed::append_tx(tx, tenant, &new, feed_retention)?;
    Ok(Some(Deleted { revision: revision as u64, seq, objects }))
}

/// The objects the design's kept specifications (every revision's) and its reports' full reports
/// name that no other design's kept specifications name: index lookups only, so a tenant with
/// many large specifications holds the writer no longer than one with few (specifications kept
/// before `spec_objects` existed were recorded there when the store was opened, see
/// [`specs::record_objects_of_earlier_specs`](super::specs::record_objects_of_earlier_specs)).
fn only_its_objects(tx: &Connection, tenant: &str, design: &DesignId) -> PortResult<BTreeSet<String>> {
    let id = design.as_str();
    let texts = |sql: &str, what: &str| -> PortResult<Vec<String>> {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.query_map(params![tenant, id], |r| r.get(0))?.collect())
            .map_err(|e| sqlite_error(what, e))
    };
    let mut objects = BTreeSet::new();
    let own = texts("SELECT submission FROM specs WHERE tenant=?1 AND design_id=?2", "read kept specification")?;
    for text in &own {
        objects.extend(object_digests(text));
    }
    for report in texts("SELECT report FROM reports WHERE tenant=?1 AND design_id=?2", "read reports")? {
        objects.extend(own_full_report(&report, design));
    }
    objects.extend(texts("SELECT digest FROM spec_objects WHERE tenant=?1 AND design_id=?2", "read objects")?);
    if objects.is_empty() {
        return Ok(objects);
    }
    let mut named_elsewhere = tx
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM spec_objects WHERE tenant=?1 AND digest=?2 AND design_id<>?3)")
        .map_err(|e| sqlite_error("read objects", e))?;
    let mut shared = Vec::new();
    for digest in &objects {
        let named: bool = named_elsewhere
            .query_row(params![tenant, digest, id], |r| r.get(0))
            .map_err(|e| sqlite_error("read objects", e))?;
        if named {
            shared.push(digest.clone());
        }
    }
    for digest in shared {
        objects.remove(&digest);
    }
    Ok(objects)
}
