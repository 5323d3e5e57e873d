//! Kept specifications of the embedded store: one row per design with the latest revision's
//! `design.submitted` payload, replaced only by a later revision's (see
//! `openqq_core::ports::KeptSpecs`).

use super::db::sqlite_error;
use openqq_core::ports::PortResult;
use openqq_core::KeptSpec;
use rusqlite::{params, Connection, OptionalExtension};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS specs (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, revision INTEGER NOT NULL, submission TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id)) WITHOUT ROWID;
";

/// Keeps `spec` unless a spec of the same or a later revision is kept, or the design was
/// deleted, in one statement.
pub(super) fn keep(conn: &Connection, tenant: &str, design: &str, spec: &KeptSpec) -> PortResult<()> {
    conn.prepare_cached(
        "INSERT INTO specs(tenant, design_id, revision, submission) SELECT ?1, ?2, ?3, ?4 \
         WHERE NOT EXISTS (SELECT 1 FROM deleted_designs WHERE tenant=?1 AND design_id=?2) \
         ON CONFLICT(tenant, design_id) DO UPDATE SET revision=excluded.revision, submission=excluded.submission \
         WHERE excluded.revision > specs.revision",
    )
    .and_then(|mut s| s.execute(params![tenant, design, spec.revision as i64, spec.submission]))
    .map_err(|e| sqlite_error("keep a specification", e))?;
    Ok(())
}

pub(super) fn kept(conn: &Connection, tenant: &str, design: &str) -> PortResult<Option<KeptSpec>> {
    conn.prepare_cached("SELECT revision, submission FROM specs WHERE tenant=?1 AND design_id=?2")
        .and_then(|mut s| {
            s.query_row(params![tenant, design], |r| {
                Ok(KeptSpec { revision: r.get::<_, i64>(0)? as u64, submission: r.get(1)? })
            })
            .optional()
        })
        .map_err(|e| sqlite_error("read a kept specification", e))
}
