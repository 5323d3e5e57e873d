//! Kept specifications of the embedded store: one row per design with the latest revision's
//! `design.submitted` payload, replaced only by a later revision's (see
//! `openqq_core::ports::KeptSpecs`), and the objects every kept revision named
//! (`spec_objects`), so a deleted design's earlier netlists go with it.

use super::db::sqlite_error;
use openqq_core::deletion::object_digests;
use openqq_core::ports::PortResult;
use openqq_core::KeptSpec;
use rusqlite::{params, Connection, OptionalExtension};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS specs (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, revision INTEGER NOT NULL, submission TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spec_objects (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, digest TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id, digest)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spec_objects_by_digest ON spec_objects (tenant, digest);
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
    // Whichever revision is kept, its objects are the design's: a later revision's replaces the
    // specification, never the record of what the earlier ones named.
    for digest in object_digests(&spec.submission) {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO spec_objects(tenant, design_id, digest) SELECT ?1, ?2, ?3 \
             WHERE NOT EXISTS (SELECT 1 FROM deleted_designs WHERE tenant=?1 AND design_id=?2)",
        )
        .and_then(|mut s| s.execute(params![tenant, design, digest]))
        .map_err(|e| sqlite_error("record a specification's objects", e))?;
    }
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
