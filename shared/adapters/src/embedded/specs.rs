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
CREATE TABLE IF NOT EXISTS spec_objects_recorded (done INTEGER NOT NULL);
";

/// Records in `spec_objects` the objects of every specification kept before that table was
/// written with each one (their text is then the only record of what they name), once per data
/// dir: afterwards a deletion finds every design naming an object by index, never by reading
/// the tenant's specifications. Idempotent; one transaction.
pub(super) fn record_objects_of_earlier_specs(conn: &mut Connection) -> PortResult<()> {
    let tx = conn.transaction().map_err(|e| sqlite_error("begin", e))?;
    let done: bool = tx
        .query_row("SELECT EXISTS(SELECT 1 FROM spec_objects_recorded)", [], |r| r.get(0))
        .map_err(|e| sqlite_error("read schema", e))?;
    if !done {
        let mut rows = Vec::new();
        {
            let mut specs = tx
                .prepare("SELECT tenant, design_id, submission FROM specs")
                .map_err(|e| sqlite_error("read kept specifications", e))?;
            let mut read = specs.query([]).map_err(|e| sqlite_error("read kept specifications", e))?;
            while let Some(row) = read.next().map_err(|e| sqlite_error("read kept specifications", e))? {
                let text: String = row.get(2).map_err(|e| sqlite_error("read kept specifications", e))?;
                let (tenant, design): (String, String) = (
                    row.get(0).map_err(|e| sqlite_error("read kept specifications", e))?,
                    row.get(1).map_err(|e| sqlite_error("read kept specifications", e))?,
                );
                rows.extend(object_digests(&text).into_iter().map(|d| (tenant.clone(), design.clone(), d)));
            }
        }
        for (tenant, design, digest) in rows {
            tx.prepare_cached("INSERT OR IGNORE INTO spec_objects(tenant, design_id, digest) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![tenant, design, digest]))
                .map_err(|e| sqlite_error("record a specification's objects", e))?;
        }
        tx.execute("INSERT INTO spec_objects_recorded(done) VALUES (1)", [])
            .map_err(|e| sqlite_error("record a specification's objects", e))?;
    }
    tx.commit().map_err(|e| sqlite_error("commit", e))
}

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
