//! The embedded design store: designs, their timelines and reports in one SQLite file.
//!
//! `apply` is one transaction: the timeline entry goes in only if no entry of the same kind has
//! a revision at least as high, and the status moves only while the design is still at the
//! entry's revision and only forward. Re-reads and stale revisions are therefore no-ops; a record
//! replayed from the dead-letter topic is planned by the replay rule
//! ([`openqq_core::revision::plan_replay`]). `apply_batch` runs a consumer batch's writes in one
//! transaction, each in a savepoint, so a batch costs one commit however many events it applies.

use super::db::{cutoff, default_readers, open, open_readers, sqlite_error, Db, Durability, STORE_PAGE_SIZE};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use openqq_core::ports::{ApplyOp, BatchApplied, PortResult, Usage, MAX_TIMELINE_ENTRIES, USAGE_ROW_BYTES};
use openqq_core::revision::{self, DesignWrite, Held, HeldDesign, Plan};
use openqq_core::webhook::{AttemptOutcome, Delivery};
use openqq_core::StoreRetention;
use openqq_core::{
    AcceptedRevisions, Applied, Change, DesignId, DesignReads, DesignStatus, DesignView, DesignWrites, Failure,
    IdempotencyKeys, KeyClaim, Page, PortError, StoredReport, TenantId, TimelineEntry, Verdict,
};
use openqq_core::{
    CorrelationId, DeliveryQueue, EventKind, FeedEntry, FeedReader, NewFeedEntry, Webhook, WebhookId, WebhookRegistry,
    WebhookSecret,
};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::value::RawValue;
use std::path::Path;
use std::time::Duration;

use super::{accepted, batches, budgets, deletes, feed, idempotency, schedules, specs, webhooks};
use openqq_core::batch::{BatchItem, BatchState, BatchView, Ended, ItemStatus, NewBatch, NewItem, Released};
use openqq_core::schedule::{
    DueSchedule, FireOutcome, FireRecord, Recorded, RunnerState, ScheduleId, Schedules, Settle, StoredSchedule,
};
use openqq_core::{
    AcceptedRevision, BatchId, Batches, Budget, Charge, DailyBudgets, IdempotencyClaim, IdempotencyKey, KeptResponse,
    KeptSpec, KeptSpecs,
};
use std::ops::Range;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS designs (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, name TEXT NOT NULL, revision INTEGER NOT NULL,
    status TEXT NOT NULL, verdict TEXT, updated_at TEXT NOT NULL, failure_reason TEXT,
    PRIMARY KEY (tenant, design_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timeline (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, design_id TEXT NOT NULL,
    kind TEXT NOT NULL, revision INTEGER NOT NULL, event_id TEXT NOT NULL,
    correlation_id TEXT NOT NULL, occurred_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS timeline_by_kind ON timeline (tenant, design_id, kind, revision);
CREATE TABLE IF NOT EXISTS reports (
    tenant TEXT NOT NULL, design_id TEXT NOT NULL, revision INTEGER NOT NULL,
    verdict TEXT NOT NULL, report TEXT NOT NULL,
    PRIMARY KEY (tenant, design_id, revision)) WITHOUT ROWID;
";

/// Largest page `list` returns, whatever the caller asks.
pub const MAX_PAGE: usize = 100;

/// Largest stored report `report` loads. Reports travel in a log record (1 MiB at most) and are
/// capped well below that when written, so only a row written some other way can exceed this;
/// such a row is refused rather than read into memory whole.
pub const MAX_REPORT_READ_BYTES: i64 = 4 * 1024 * 1024;

pub struct EmbeddedDesignStore {
    /// One connection: writes are serialised anyway (SQLite has one writer).
    writer: Db,
    /// A pool: WAL readers never block each other or the writer, so concurrent GETs each take
    /// a connection instead of queueing behind one.
    reader: Db,
    /// How long what goes by age is kept.
    retention: StoreRetention,
}

impl EmbeddedDesignStore {
    /// Opens (or creates) `dir/store.db` with a reader connection per core.
    pub fn open(dir: &Path, durability: Durability) -> PortResult<Self> {
        Self::open_with_readers(dir, durability, default_readers())
    }

    /// Opens (or creates) `dir/store.db` with `readers` reader connections (at least one).
    pub fn open_with_readers(dir: &Path, durability: Durability, readers: usize) -> PortResult<Self> {
        let path = dir.join("store.db");
        let mut writer = open(&path, durability, STORE_PAGE_SIZE, SCHEMA)?;
        // The API's own tables (accepted-revision markers and idempotency keys), and the feed,
        // webhooks and deliveries.
        writer
            .execute_batch(&format!(
                "{}{}{}{}{}{}{}{}{}",
                deletes::SCHEMA,
                accepted::SCHEMA,
                idempotency::SCHEMA,
                feed::SCHEMA,
                webhooks::SCHEMA,
                budgets::SCHEMA,
                batches::SCHEMA,
                schedules::SCHEMA,
                specs::SCHEMA
            ))
            .map_err(|e| sqlite_error("initialise schema", e))?;
        migrate(&writer)?;
        specs::record_objects_of_earlier_specs(&mut writer)?;
        let readers = open_readers(&path, durability, readers)?;
        Ok(Self { writer: Db::new(writer), reader: Db::pool(readers), retention: StoreRetention::default() })
    }

    /// Keeps what goes by age as `retention` says instead of the defaults: feed entries are
    /// swept as the tenant's feed grows (`feed.rs`); reads pass over older accepted markers and
    /// batches, and writes of markers and creations of batches remove them (`accepted.rs`,
    /// `batches.rs`); each deletion removes older tombstones (`deletes.rs`).
    pub fn with_retention(mut self, retention: StoreRetention) -> Self {
        self.retention = retention;
        self
    }
}

/// Reads what [`revision::plan`] needs inside the transaction, and executes its plan.
fn apply_tx(
    tx: &Connection,
    tenant: &str,
    design: &str,
    entry: &TimelineEntry,
    change: &Change,
    replay: bool,
) -> PortResult<Applied> {
    let kind = entry.kind.as_str();
    let (seen, latest): (bool, Option<i64>) = tx
        .prepare_cached("SELECT COALESCE(MAX(revision = ?4), 0), MAX(revision) FROM timeline WHERE tenant=?1 AND design_id=?2 AND kind=?3")
        .and_then(|mut s| s.query_row(params![tenant, design, kind, entry.revision as i64], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(|e| sqlite_error("read timeline", e))?;
    let current: Option<(u64, String)> = tx
        .prepare_cached("SELECT revision, status FROM designs WHERE tenant=?1 AND design_id=?2")
        .and_then(|mut s| {
            s.query_row(params![tenant, design], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))).optional()
        })
        .map_err(|e| sqlite_error("read design", e))?;
    let held_design = match current {
        Some((revision, status)) => Some(HeldDesign {
            revision,
            status: DesignStatus::parse(&status)
                .ok_or_else(|| PortError::corrupt("stored design", format!("its status {status:?} is not one")))?,
        }),
        None => None,
    };
    // Only a design with no row may have been deleted: its tombstone is read then alone.
    let deleted = held_design.is_none() && deletes::is_deleted(tx, tenant, design)?;
    let held = Held { deleted, seen, latest_of_kind: latest.map(|l| l as u64), design: held_design };
    let planned = match (replay, held_design) {
        (true, Some(d)) => {
            // Whether dead-lettering failed the design's revision: its `design.failed` entry.
            let dead_lettered: bool = tx
                .prepare_cached("SELECT EXISTS(SELECT 1 FROM timeline WHERE tenant=?1 AND design_id=?2 AND kind=?3 AND revision=?4)")
                .and_then(|mut s| {
                    s.query_row(params![tenant, design, EventKind::DesignFailed.as_str(), d.revision as i64], |r| r.get(0))
                })
                .map_err(|e| sqlite_error("read timeline", e))?;
            revision::plan_replay(&held, dead_lettered, entry, change)
        }
        (true, None) => revision::plan_replay(&held, false, entry, change),
        (false, _) => revision::plan(&held, entry, change),
    };
    let writes = match planned {
        Plan::Duplicate => return Ok(Applied::Duplicate),
        Plan::Stale => return Ok(Applied::Stale),
        Plan::NotFound => return Err(PortError::NotFound),
        Plan::Apply(writes) => writes,
    };
    let now = Utc::now().to_rfc3339();
    match writes.design {
        DesignWrite::Insert { name, revision, status, failure_reason } => {
            tx.prepare_cached("INSERT INTO designs(tenant, design_id, name, revision, status, verdict, updated_at, failure_reason) VALUES (?1, ?2, COALESCE(?3, ?2), ?4, ?5, NULL, ?6, ?7)")
                .and_then(|mut s| s.execute(params![tenant, design, name, revision as i64, status.as_str(), now, failure_reason]))
                .map_err(|e| sqlite_error("insert design", e))?;
        }
        DesignWrite::Revise { name, revision, status, failure_reason } => {
            tx.prepare_cached("UPDATE designs SET name=COALESCE(?3, name), revision=?4, status=?5, verdict=NULL, updated_at=?6, failure_reason=?7 WHERE tenant=?1 AND design_id=?2")
                .and_then(|mut s| s.execute(params![tenant, design, name, revision as i64, status.as_str(), now, failure_reason]))
                .map_err(|e| sqlite_error("revise design", e))?;
        }
        DesignWrite::Move { to, verdict, failure_reason, .. } => {
            tx.prepare_cached("UPDATE designs SET status=?3, verdict=COALESCE(?4, verdict), updated_at=?5, failure_reason=?6 WHERE tenant=?1 AND design_id=?2")
                .and_then(|mut s| s.execute(params![tenant, design, to.as_str(), verdict.map(Verdict::as_str), now, failure_reason]))
                .map_err(|e| sqlite_error("update status", e))?;
        }
        DesignWrite::Keep => {}
    }
    if let Some(report) = writes.report {
        tx.prepare_cached(
            "INSERT OR IGNORE INTO reports(tenant, design_id, revision, verdict, report) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![tenant, design, report.revision as i64, report.verdict.as_str(), report.report.get()])
        })
        .map_err(|e| sqlite_error("insert report", e))?;
    }
    tx.prepare_cached("INSERT INTO timeline(tenant, design_id, kind, revision, event_id, correlation_id, occurred_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
        .and_then(|mut s| {
            s.execute(params![
                tenant,
                design,
                kind,
                entry.revision as i64,
                entry.event_id.to_string(),
                entry.correlation_id.as_str(),
                entry.occurred_at.to_rfc3339()
            ])
        })
        .map_err(|e| sqlite_error("insert timeline", e))?;
    Ok(Applied::Applied)
}

fn corrupt(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnType(0, what.to_owned(), rusqlite::types::Type::Text)
}

fn design_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DesignView> {
    let status: String = r.get(3)?;
    let verdict: Option<String> = r.get(4)?;
    let updated: String = r.get(5)?;
    Ok(DesignView {
        design_id: DesignId::parse(r.get::<_, String>(0)?).map_err(|_| corrupt("design_id"))?,
        name: r.get(1)?,
        revision: r.get::<_, i64>(2)? as u64,
        status: DesignStatus::parse(&status).ok_or_else(|| corrupt("status"))?,
        verdict: verdict.as_deref().and_then(Verdict::parse),
        updated_at: DateTime::parse_from_rfc3339(&updated).map_err(|_| corrupt("updated_at"))?.with_timezone(&Utc),
        failure_reason: r.get(6)?,
    })
}

/// Adds the columns later versions added to a data dir an earlier version created.
fn migrate(conn: &rusqlite::Connection) -> PortResult<()> {
    add_column(conn, "designs", "failure_reason", "TEXT")?;
    add_column(conn, "feed", "elapsed_ms", "INTEGER")?;
    add_column(conn, "feed", "batch", "TEXT")?;
    for (column, decl) in idempotency::ADDED_COLUMNS {
        add_column(conn, "idempotency_keys", column, decl)?;
    }
    Ok(())
}

/// Adds `column` to `table` unless the table has it.
fn add_column(conn: &rusqlite::Connection, table: &str, column: &str, decl: &str) -> PortResult<()> {
    let has: bool = conn
        .query_row("SELECT EXISTS(SELECT 1 FROM pragma_table_info(?1) WHERE name=?2)", params![table, column], |r| {
            r.get(0)
        })
        .map_err(|e| sqlite_error("read schema", e))?;
    if !has {
        conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))
            .map_err(|e| sqlite_error("add a column", e))?;
    }
    Ok(())
}

/// Counts one call of the port (one SQLite transaction or read) in
/// [`STORE_REQUESTS_METRIC`](crate::STORE_REQUESTS_METRIC) with `backend="embedded"`, so round
/// trips per design compare with the DynamoDB store's requests under the same metric.
fn count(operation: &'static str) {
    metrics::counter!(crate::STORE_REQUESTS_METRIC, "backend" => "embedded", "operation" => operation).increment(1);
}

/// One write inside the caller's transaction (or savepoint): `apply` (or, with `replay`,
/// `apply_replay`) and, with `append`, unless the write was stale, its feed entry and deliveries.
/// Returns the outcome and whether anything was written (a duplicate or stale write that appends
/// nothing writes nothing of its own).
fn apply_one(conn: &Connection, op: &Owned, append: bool) -> PortResult<(Applied, bool)> {
    let (tenant, design) = (op.tenant.as_str(), &op.design);
    let outcome = apply_tx(conn, tenant, design.as_str(), &op.entry, &op.change, op.replayed)?;
    let append = append && outcome != Applied::Stale;
    if append {
        let new = openqq_core::ports::feed_entry(design, &op.entry, &op.change);
        feed::append_tx(conn, tenant, &new, op.feed_retention)?;
    }
    Ok((outcome, outcome == Applied::Applied || append))
}

/// An op copied out of the caller's borrow, to run on the writer connection.
struct Owned {
    replayed: bool,
    tenant: String,
    design: DesignId,
    entry: TimelineEntry,
    change: Change,
    feed_retention: Duration,
}

impl Owned {
    fn new(op: &ApplyOp<'_>, feed_retention: Duration) -> Self {
        Self {
            replayed: op.replayed,
            tenant: op.tenant.to_string(),
            design: op.design.clone(),
            entry: op.entry.clone(),
            change: op.change.clone(),
            feed_retention,
        }
    }
}

/// Begins a transaction that holds the write lock from the start. IMMEDIATE takes the lock before
/// the revision check, so the check and its write are atomic even when several processes share
/// the file (`openqq up`s on one Kafka cluster); a deferred transaction would fail its upgrade
/// instead.
fn begin_immediate(conn: &mut Connection) -> PortResult<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| sqlite_error("begin", e))
}

/// Applies `ops` in order in one transaction, each in a savepoint: an op that fails is rolled back
/// alone and ends the batch, and what the ops before it wrote is committed.
fn apply_batch_tx(conn: &mut Connection, ops: &[Owned]) -> BatchApplied {
    let mut done = BatchApplied { applied: Vec::with_capacity(ops.len()), error: None };
    let mut tx = match begin_immediate(conn) {
        Ok(tx) => tx,
        Err(e) => return BatchApplied { applied: Vec::new(), error: Some(e) },
    };
    let mut wrote = false;
    for op in ops {
        let one = tx.savepoint().map_err(|e| sqlite_error("savepoint", e)).and_then(|sp| {
            let outcome = apply_one(&sp, op, true)?;
            // Dropping the savepoint unreleased rolls it back: an error above undoes this op only.
            sp.commit().map_err(|e| sqlite_error("release savepoint", e))?;
            Ok(outcome)
        });
        match one {
            Ok((applied, written)) => {
                done.applied.push(applied);
                wrote |= written;
            }
            Err(e) => {
                done.error = Some(e);
                break;
            }
        }
    }
    if wrote {
        if let Err(e) = tx.commit() {
            // Nothing of the batch is written: the first op failed, with the commit's error.
            return BatchApplied { applied: Vec::new(), error: Some(sqlite_error("commit", e)) };
        }
    }
    done
}

impl EmbeddedDesignStore {
    /// `apply` (or, with `replay`, `apply_replay`) in one transaction; with `append`, unless the
    /// write was stale, its feed entry and deliveries in the same transaction (`apply_and_append`).
    async fn apply_as(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
        replay: bool,
        append: bool,
    ) -> PortResult<Applied> {
        let op = Owned::new(&ApplyOp { replayed: replay, tenant, design, entry, change }, self.retention.feed);
        self.writer
            .call(move |conn| {
                let tx = begin_immediate(conn)?;
                let (outcome, wrote) = apply_one(&tx, &op, append)?;
                if wrote {
                    tx.commit().map_err(|e| sqlite_error("commit", e))?;
                }
                Ok(outcome)
            })
            .await
    }
}

#[async_trait]
impl AcceptedRevisions for EmbeddedDesignStore {
    async fn record_accepted(&self, tenant: &TenantId, accepted: &AcceptedRevision) -> PortResult<()> {
        count("record_accepted");
        let (tenant, accepted, keep) = (tenant.to_string(), accepted.clone(), self.retention.accepted);
        self.writer
            .call(move |conn| {
                let tx = begin_immediate(conn)?;
                accepted::record(&tx, &tenant, &accepted)?;
                accepted::purge(&tx, keep)?;
                tx.commit().map_err(|e| sqlite_error("commit", e))
            })
            .await
    }

    /// One transaction for every marker: the one writer commits them together, so its
    /// failure (a full disk, say) is each of theirs.
    async fn record_accepted_many(&self, accepted: &[(TenantId, AcceptedRevision)]) -> Vec<PortResult<()>> {
        if accepted.is_empty() {
            return Vec::new();
        }
        count("record_accepted_many");
        let rows: Vec<(String, AcceptedRevision)> = accepted.iter().map(|(t, a)| (t.to_string(), a.clone())).collect();
        let keep = self.retention.accepted;
        let written = self
            .writer
            .call(move |conn| {
                let tx = begin_immediate(conn)?;
                for (tenant, marker) in &rows {
                    accepted::record(&tx, tenant, marker)?;
                }
                accepted::purge(&tx, keep)?;
                tx.commit().map_err(|e| sqlite_error("commit", e))
            })
            .await;
        match written {
            Ok(()) => accepted.iter().map(|_| Ok(())).collect(),
            Err(e) => e.copies(accepted.len()).into_iter().map(Err).collect(),
        }
    }
}

#[async_trait]
impl DesignWrites for EmbeddedDesignStore {
    async fn apply(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied> {
        count("apply");
        self.apply_as(tenant, design, entry, change, false, false).await
    }

    async fn apply_replay(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied> {
        count("apply");
        self.apply_as(tenant, design, entry, change, true, false).await
    }

    /// The write and its feed entry (with its deliveries) in one transaction: one commit per
    /// applied event instead of two.
    async fn apply_and_append(
        &self,
        replayed: bool,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied> {
        count("apply");
        self.apply_as(tenant, design, entry, change, replayed, true).await
    }

    /// The whole batch in one transaction (one commit), each op in a savepoint.
    async fn apply_batch(&self, ops: &[ApplyOp<'_>]) -> BatchApplied {
        if ops.is_empty() {
            return BatchApplied::default();
        }
        count("apply_batch");
        let ops: Vec<Owned> = ops.iter().map(|op| Owned::new(op, self.retention.feed)).collect();
        self.writer
            .call(move |conn| Ok(apply_batch_tx(conn, &ops)))
            .await
            .unwrap_or_else(|e| BatchApplied { applied: Vec::new(), error: Some(e) })
    }

    async fn append_feed(&self, tenant: &TenantId, new: &NewFeedEntry<'_>) -> PortResult<u64> {
        count("append_feed");
        let (tenant, keep) = (tenant.to_string(), self.retention.feed);
        let (design, entry, verdict, elapsed_ms, batch) =
            (new.design_id.clone(), new.entry.clone(), new.verdict, new.elapsed_ms, new.batch.cloned());
        self.writer
            .call(move |conn| {
                let new =
                    NewFeedEntry { design_id: &design, entry: &entry, verdict, elapsed_ms, batch: batch.as_ref() };
                feed::append(conn, &tenant, &new, keep)
            })
            .await
    }
}

#[async_trait]
impl DesignReads for EmbeddedDesignStore {
    async fn get(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<DesignView>> {
        count("get");
        let (tenant, design) = (tenant.to_string(), design.to_string());
        let cutoff = cutoff(self.retention.accepted);
        self.reader
            .call(move |conn| {
                let view = conn.prepare_cached("SELECT design_id, name, revision, status, verdict, updated_at, failure_reason FROM designs WHERE tenant=?1 AND design_id=?2")
                    .and_then(|mut s| s.query_row(params![tenant, design], design_row).optional())
                    .map_err(|e| sqlite_error("get design", e))?;
                let marker = accepted::one(conn, &tenant, &design, &cutoff)?;
                Ok(AcceptedRevision::overlay(marker.as_ref(), view))
            })
            .await
    }

    async fn list(&self, tenant: &TenantId, cursor: Option<&str>, limit: usize) -> PortResult<Page<DesignView>> {
        count("list");
        let limit = limit.clamp(1, MAX_PAGE);
        let (tenant, cursor) = (tenant.to_string(), cursor.map(str::to_owned));
        let cutoff = cutoff(self.retention.accepted);
        self.reader
            .call(move |conn| {
                // Design ids are UUIDv7, so descending id order is newest first and the last id
                // of a page is a stable cursor.
                let mut stmt = conn
                    .prepare_cached("SELECT design_id, name, revision, status, verdict, updated_at, failure_reason FROM designs WHERE tenant=?1 AND (?2 IS NULL OR design_id < ?2) ORDER BY design_id DESC LIMIT ?3")
                    .map_err(|e| sqlite_error("list", e))?;
                let items = stmt
                    .query_map(params![tenant, cursor, limit as i64 + 1], design_row)
                    .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| sqlite_error("list", e))?;
                // Designs the API accepted but the consumers have not materialised yet are listed
                // too: the first `limit` of both, merged.
                let markers = accepted::page(conn, &tenant, cursor.as_deref(), limit + 1, &cutoff)?;
                Ok(AcceptedRevision::merge_page(items, markers, limit))
            })
            .await
    }

    async fn report(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        revision: Option<u64>,
    ) -> PortResult<Option<StoredReport>> {
        count("report");
        let (tenant, design) = (tenant.to_string(), design.to_string());
        let found = self
            .reader
            .call(move |conn| {
                // First the size, from the row header (octet_length alone reads no content: a
                // statement that also selects the text loads it whole, whatever its size), then
                // the text, only when it is within the read limit.
                let head = conn.prepare_cached("SELECT revision, verdict, octet_length(report) FROM reports WHERE tenant=?1 AND design_id=?2 AND (?3 IS NULL OR revision=?3) ORDER BY revision DESC LIMIT 1")
                    .and_then(|mut s| {
                        s.query_row(params![tenant, design, revision.map(|r| r as i64)], |r| {
                            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
                        })
                        .optional()
                    })
                    .map_err(|e| sqlite_error("get report", e))?;
                let Some((revision, verdict, bytes)) = head else { return Ok(None) };
                let report = if bytes <= MAX_REPORT_READ_BYTES {
                    conn.prepare_cached("SELECT report FROM reports WHERE tenant=?1 AND design_id=?2 AND revision=?3")
                        .and_then(|mut s| s.query_row(params![tenant, design, revision], |r| r.get::<_, String>(0)))
                        .map(Some)
                        .map_err(|e| sqlite_error("get report", e))?
                } else {
                    None
                };
                Ok(Some((revision as u64, verdict, bytes, report)))
            })
            .await?;
        let Some((revision, verdict, bytes, report)) = found else { return Ok(None) };
        let report = report.ok_or_else(|| {
            PortError::corrupt(
                "stored report",
                format!("revision {revision}'s is {bytes} bytes, over the {MAX_REPORT_READ_BYTES}-byte read limit"),
            )
        })?;
        Ok(Some(StoredReport {
            revision,
            verdict: Verdict::parse(&verdict)
                .ok_or_else(|| PortError::corrupt("stored report", format!("its verdict {verdict:?} is not one")))?,
            report: RawValue::from_string(report).map_err(|e| {
                PortError::corrupt("stored report", Failure::new(format!("revision {revision}'s is not JSON"), e))
            })?,
        }))
    }

    async fn timeline(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<Vec<TimelineEntry>>> {
        count("timeline");
        let (tenant, design) = (tenant.to_string(), design.to_string());
        let (t, d) = (tenant.clone(), design.clone());
        let cutoff = cutoff(self.retention.accepted);
        let marker = self.reader.call(move |conn| accepted::one(conn, &t, &d, &cutoff)).await?;
        let applied = self
            .reader
            .call(move |conn| {
                let exists: bool = conn
                    .prepare_cached("SELECT EXISTS(SELECT 1 FROM designs WHERE tenant=?1 AND design_id=?2)")
                    .and_then(|mut s| s.query_row(params![tenant, design], |r| r.get(0)))
                    .map_err(|e| sqlite_error("timeline", e))?;
                if !exists {
                    return Ok(None);
                }
                // The latest entries, newest first, reversed below into applied order.
                let mut stmt = conn
                    .prepare_cached("SELECT event_id, kind, revision, correlation_id, occurred_at FROM timeline WHERE tenant=?1 AND design_id=?2 ORDER BY seq DESC LIMIT ?3")
                    .map_err(|e| sqlite_error("timeline", e))?;
                let mut rows = stmt
                    .query_map(params![tenant, design, MAX_TIMELINE_ENTRIES as i64], |r| {
                        let kind: String = r.get(1)?;
                        let occurred: String = r.get(4)?;
                        Ok(TimelineEntry {
                            event_id: r.get::<_, String>(0)?.parse().map_err(|_| corrupt("event_id"))?,
                            kind: EventKind::parse(&kind).ok_or_else(|| corrupt("kind"))?,
                            revision: r.get::<_, i64>(2)? as u64,
                            correlation_id: CorrelationId::parse(r.get::<_, String>(3)?).map_err(|_| corrupt("correlation_id"))?,
                            occurred_at: DateTime::parse_from_rfc3339(&occurred).map_err(|_| corrupt("occurred_at"))?.with_timezone(&Utc),
                        })
                    })
                    .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| sqlite_error("timeline", e))?;
                rows.reverse();
                Ok(Some(rows))
            })
            .await?;
        Ok(AcceptedRevision::overlay_timeline(marker.as_ref(), applied))
    }

    async fn usage(&self, tenant: &TenantId) -> PortResult<Usage> {
        count("usage");
        let tenant = tenant.to_string();
        self.reader
            .call(move |conn| {
                // Each count walks only this tenant's range of a primary key or index; report
                // sizes come from row headers, so no report is read.
                conn.prepare_cached("SELECT (SELECT COUNT(*) FROM designs WHERE tenant=?1), (SELECT COUNT(*) FROM timeline WHERE tenant=?1), (SELECT COALESCE(SUM(octet_length(report)), 0) FROM reports WHERE tenant=?1)")
                    .and_then(|mut s| {
                        s.query_row(params![tenant], |r| {
                            let (designs, entries, reports): (i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
                            Ok(Usage {
                                designs: designs as u64,
                                bytes: reports as u64 + (designs + entries) as u64 * USAGE_ROW_BYTES,
                            })
                        })
                    })
                    .map_err(|e| sqlite_error("usage", e))
            })
            .await
    }
}

#[async_trait]
impl IdempotencyKeys for EmbeddedDesignStore {
    async fn claim_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        claim: &KeyClaim<'_>,
    ) -> PortResult<IdempotencyClaim> {
        count("claim_idempotency_key");
        let (tenant, key, fingerprint, name) =
            (tenant.to_string(), key.as_str().to_owned(), *claim.fingerprint, claim.name.to_owned());
        let (lease, keep) = (claim.lease, claim.keep);
        self.writer
            .call(move |conn| {
                let claim = KeyClaim { fingerprint: &fingerprint, lease, keep, name: &name };
                idempotency::claim(conn, &tenant, &key, &claim)
            })
            .await
    }

    async fn complete_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
        response: &KeptResponse,
        ttl: Duration,
    ) -> PortResult<()> {
        count("complete_idempotency_key");
        let (tenant, key, fingerprint, response) =
            (tenant.to_string(), key.as_str().to_owned(), *fingerprint, response.clone());
        self.writer.call(move |conn| idempotency::complete(conn, &tenant, &key, &fingerprint, &response, ttl)).await
    }

    async fn release_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
    ) -> PortResult<()> {
        count("release_idempotency_key");
        let (tenant, key, fingerprint) = (tenant.to_string(), key.as_str().to_owned(), *fingerprint);
        self.writer.call(move |conn| idempotency::release(conn, &tenant, &key, &fingerprint)).await
    }
}

#[async_trait]
impl Batches for EmbeddedDesignStore {
    async fn create_batch(&self, tenant: &TenantId, batch: &NewBatch, items: &[NewItem]) -> PortResult<bool> {
        count("create_batch");
        let (tenant, batch, items) = (tenant.to_string(), batch.clone(), items.to_vec());
        let cutoff = cutoff(self.retention.batches);
        self.writer.call(move |conn| batches::create(conn, &tenant, &batch, &items, &cutoff)).await
    }

    async fn batch(&self, tenant: &TenantId, id: &BatchId) -> PortResult<Option<BatchView>> {
        count("batch");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let cutoff = cutoff(self.retention.batches);
        self.reader.call(move |conn| batches::get(conn, &tenant, &id, &cutoff)).await
    }

    async fn list_batches(&self, tenant: &TenantId, cursor: Option<&str>, limit: usize) -> PortResult<Page<BatchView>> {
        count("list_batches");
        let (tenant, cursor) = (tenant.to_string(), cursor.map(str::to_owned));
        let cutoff = cutoff(self.retention.batches);
        self.reader.call(move |conn| batches::list(conn, &tenant, cursor.as_deref(), limit, &cutoff)).await
    }

    async fn batch_items(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        status: Option<ItemStatus>,
        after: Option<u32>,
        limit: usize,
    ) -> PortResult<Option<Page<BatchItem>>> {
        count("batch_items");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let cutoff = cutoff(self.retention.batches);
        self.reader.call(move |conn| batches::items(conn, &tenant, &id, status, after, limit, &cutoff)).await
    }

    async fn release_items(&self, tenant: &TenantId, id: &BatchId, indexes: Range<u32>) -> PortResult<Vec<Released>> {
        count("release_items");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        self.writer.call(move |conn| batches::release(conn, &tenant, &id, indexes)).await
    }

    async fn end_item(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        index: u32,
        status: ItemStatus,
        verdict: Option<Verdict>,
    ) -> PortResult<Option<Ended>> {
        count("end_item");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        self.writer.call(move |conn| batches::end(conn, &tenant, &id, index, status, verdict)).await
    }

    async fn stop_batch(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        state: BatchState,
        reason: &str,
    ) -> PortResult<Option<BatchView>> {
        count("stop_batch");
        let (tenant, id, reason) = (tenant.to_string(), id.to_string(), reason.to_owned());
        let cutoff = cutoff(self.retention.batches);
        self.writer.call(move |conn| batches::stop(conn, &tenant, &id, state, &reason, &cutoff)).await
    }

    async fn open_items(&self, tenant: &TenantId) -> PortResult<u64> {
        count("open_items");
        let tenant = tenant.to_string();
        let cutoff = cutoff(self.retention.batches);
        self.reader.call(move |conn| batches::open_items(conn, &tenant, &cutoff)).await
    }
}

#[async_trait]
impl Schedules for EmbeddedDesignStore {
    async fn create_schedule(&self, tenant: &TenantId, schedule: &StoredSchedule) -> PortResult<bool> {
        count("create_schedule");
        let (tenant, schedule) = (tenant.to_string(), schedule.clone());
        self.writer.call(move |conn| schedules::create(conn, &tenant, &schedule)).await
    }

    async fn schedule(&self, tenant: &TenantId, id: &ScheduleId) -> PortResult<Option<StoredSchedule>> {
        count("schedule");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        self.reader.call(move |conn| schedules::get(conn, &tenant, &id)).await
    }

    async fn list_schedules(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: usize,
    ) -> PortResult<Page<StoredSchedule>> {
        count("list_schedules");
        let (tenant, cursor) = (tenant.to_string(), cursor.map(str::to_owned));
        self.reader.call(move |conn| schedules::list(conn, &tenant, cursor.as_deref(), limit)).await
    }

    async fn update_schedule(
        &self,
        tenant: &TenantId,
        schedule: &StoredSchedule,
    ) -> PortResult<Option<StoredSchedule>> {
        count("update_schedule");
        let (tenant, schedule) = (tenant.to_string(), schedule.clone());
        self.writer.call(move |conn| schedules::update(conn, &tenant, &schedule)).await
    }

    async fn delete_schedule(&self, tenant: &TenantId, id: &ScheduleId) -> PortResult<bool> {
        count("delete_schedule");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        self.writer.call(move |conn| schedules::delete(conn, &tenant, &id)).await
    }

    async fn record_fire(&self, tenant: &TenantId, id: &ScheduleId, fire: &FireRecord) -> PortResult<Recorded> {
        count("record_fire");
        let (tenant, id, fire) = (tenant.to_string(), id.to_string(), fire.clone());
        self.writer.call(move |conn| schedules::record(conn, &tenant, &id, &fire)).await
    }

    async fn settle_fire(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        nominal: DateTime<Utc>,
        from: FireOutcome,
        to: &Settle,
    ) -> PortResult<Option<(bool, FireRecord)>> {
        count("settle_fire");
        let (tenant, id, to) = (tenant.to_string(), id.to_string(), to.clone());
        self.writer.call(move |conn| schedules::settle(conn, &tenant, &id, nominal, from, &to)).await
    }

    async fn fires(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> PortResult<Option<Page<FireRecord>>> {
        count("fires");
        let (tenant, id) = (tenant.to_string(), id.to_string());
        self.reader.call(move |conn| schedules::fires(conn, &tenant, &id, before, limit)).await
    }

    async fn due_schedules(&self, now: DateTime<Utc>, limit: usize) -> PortResult<Vec<DueSchedule>> {
        count("due_schedules");
        self.reader.call(move |conn| schedules::due(conn, now, limit)).await
    }

    async fn save_runner_state(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        version: u64,
        state: &RunnerState,
        next_due: Option<DateTime<Utc>>,
    ) -> PortResult<bool> {
        count("save_runner_state");
        let (tenant, id, state) = (tenant.to_string(), id.to_string(), state.clone());
        self.writer.call(move |conn| schedules::save_state(conn, &tenant, &id, version, &state, next_due)).await
    }
}

#[async_trait]
impl DailyBudgets for EmbeddedDesignStore {
    async fn charge_budget(
        &self,
        tenant: &TenantId,
        budget: Budget,
        day: &str,
        amount: u64,
        limit: u64,
    ) -> PortResult<Charge> {
        count("charge_budget");
        let (tenant, key) = (tenant.to_string(), budget.key(day));
        self.writer.call(move |conn| budgets::charge(conn, &tenant, &key, amount, limit)).await
    }

    async fn refund_budget(&self, tenant: &TenantId, budget: Budget, day: &str, amount: u64) -> PortResult<()> {
        count("refund_budget");
        let (tenant, key) = (tenant.to_string(), budget.key(day));
        self.writer.call(move |conn| budgets::refund(conn, &tenant, &key, amount)).await
    }

    async fn budget_spent(&self, tenant: &TenantId, budget: Budget, day: &str) -> PortResult<u64> {
        count("budget_spent");
        let (tenant, key) = (tenant.to_string(), budget.key(day));
        self.reader.call(move |conn| budgets::spent(conn, &tenant, &key)).await
    }
}

#[async_trait]
impl openqq_core::DesignDeletes for EmbeddedDesignStore {
    async fn delete_design(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        deletion: &openqq_core::Deletion,
    ) -> PortResult<Option<openqq_core::Deleted>> {
        count("delete_design");
        let (tenant, design, deletion) = (tenant.to_string(), design.clone(), deletion.clone());
        let (feed, tombstones) = (self.retention.feed, self.retention.tombstones);
        self.writer
            .call(move |conn| {
                let tx = begin_immediate(conn)?;
                let deleted = deletes::delete_tx(&tx, &tenant, &design, &deletion, feed, tombstones)?;
                if deleted.is_some() {
                    tx.commit().map_err(|e| sqlite_error("commit", e))?;
                }
                Ok(deleted)
            })
            .await
    }
}

#[async_trait]
impl KeptSpecs for EmbeddedDesignStore {
    async fn keep_spec(&self, tenant: &TenantId, design: &DesignId, spec: &KeptSpec) -> PortResult<()> {
        count("keep_spec");
        openqq_core::ports::check_kept_spec(spec)?;
        let (tenant, design, spec) = (tenant.to_string(), design.to_string(), spec.clone());
        self.writer.call(move |conn| specs::keep(conn, &tenant, &design, &spec)).await
    }

    async fn kept_spec(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<KeptSpec>> {
        count("kept_spec");
        let (tenant, design) = (tenant.to_string(), design.to_string());
        self.reader.call(move |conn| specs::kept(conn, &tenant, &design)).await
    }
}

#[async_trait]
impl FeedReader for EmbeddedDesignStore {
    async fn read_feed(&self, tenant: &TenantId, after: u64, limit: usize) -> PortResult<Vec<FeedEntry>> {
        count("read_feed");
        let tenant = tenant.to_string();
        self.reader.call(move |conn| feed::read(conn, &tenant, after, limit)).await
    }

    async fn feed_head(&self, tenant: &TenantId) -> PortResult<u64> {
        count("feed_head");
        let tenant = tenant.to_string();
        self.reader.call(move |conn| feed::head(conn, &tenant)).await
    }
}

#[async_trait]
impl WebhookRegistry for EmbeddedDesignStore {
    async fn create_webhook(&self, tenant: &TenantId, hook: &Webhook) -> PortResult<()> {
        count("create_webhook");
        let (tenant, hook) = (tenant.to_string(), hook.clone());
        self.writer.call(move |conn| webhooks::create_webhook(conn, &tenant, &hook)).await
    }

    async fn list_webhooks(&self, tenant: &TenantId) -> PortResult<Vec<Webhook>> {
        count("list_webhooks");
        let tenant = tenant.to_string();
        self.reader.call(move |conn| webhooks::list_webhooks(conn, &tenant)).await
    }

    async fn get_webhook(&self, tenant: &TenantId, id: &WebhookId) -> PortResult<Option<Webhook>> {
        count("get_webhook");
        let (tenant, id) = (tenant.to_string(), *id);
        self.reader.call(move |conn| webhooks::get_webhook(conn, &tenant, &id)).await
    }

    async fn delete_webhook(&self, tenant: &TenantId, id: &WebhookId) -> PortResult<bool> {
        count("delete_webhook");
        let (tenant, id) = (tenant.to_string(), *id);
        self.writer.call(move |conn| webhooks::delete_webhook(conn, &tenant, &id)).await
    }

    async fn rotate_webhook_secret(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        secret: &WebhookSecret,
        previous_until: DateTime<Utc>,
    ) -> PortResult<Option<Webhook>> {
        count("rotate_webhook_secret");
        let (tenant, id, secret) = (tenant.to_string(), *id, secret.clone());
        self.writer.call(move |conn| webhooks::rotate_secret(conn, &tenant, &id, &secret, previous_until)).await
    }
}

#[async_trait]
impl DeliveryQueue for EmbeddedDesignStore {
    async fn queue_delivery(&self, tenant: &TenantId, id: &WebhookId, entry: &FeedEntry) -> PortResult<()> {
        count("queue_delivery");
        let (tenant, id, entry) = (tenant.to_string(), *id, entry.clone());
        self.writer.call(move |conn| webhooks::queue(conn, &tenant, &id, &entry)).await
    }

    async fn claim_due_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        per_tenant: usize,
        limit: usize,
    ) -> PortResult<Vec<Delivery>> {
        count("claim_due_deliveries");
        self.writer.call(move |conn| webhooks::claim(conn, now, lease, per_tenant, limit)).await
    }

    async fn finish_attempt(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        seq: u64,
        outcome: &AttemptOutcome,
        now: DateTime<Utc>,
    ) -> PortResult<()> {
        count("finish_attempt");
        let (tenant, id, outcome) = (tenant.to_string(), *id, outcome.clone());
        self.writer.call(move |conn| webhooks::finish(conn, &tenant, &id, seq, &outcome, now)).await
    }

    async fn list_deliveries(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        cursor: Option<&str>,
        limit: usize,
    ) -> PortResult<Page<Delivery>> {
        count("list_deliveries");
        let (tenant, id, cursor) = (tenant.to_string(), *id, cursor.map(str::to_owned));
        self.reader.call(move |conn| webhooks::list_deliveries(conn, &tenant, &id, cursor.as_deref(), limit)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting_recorder::Counters;

    #[tokio::test]
    async fn every_port_call_is_counted_by_operation() {
        let counters = Counters::default();
        let _local = metrics::set_default_local_recorder(&counters);
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedDesignStore::open_with_readers(dir.path(), Durability::Process, 1).unwrap();
        let (tenant, design) = (TenantId::parse("acme").unwrap(), DesignId::parse("d-1").unwrap());
        assert!(store.get(&tenant, &design).await.unwrap().is_none());
        assert!(store.timeline(&tenant, &design).await.unwrap().is_none());
        assert!(store.get(&tenant, &design).await.unwrap().is_none());
        let key = |op: &str| format!("{}{{backend=embedded,operation={op}}}", crate::STORE_REQUESTS_METRIC);
        assert_eq!((counters.get(&key("get")), counters.get(&key("timeline"))), (2, 1), "{:?}", counters.all());
        assert_eq!(counters.all().len(), 2, "nothing else counted: {:?}", counters.all());
    }

    fn entry(kind: EventKind) -> TimelineEntry {
        TimelineEntry {
            event_id: uuid::Uuid::now_v7(),
            kind,
            revision: 1,
            correlation_id: CorrelationId::parse("c").unwrap(),
            occurred_at: Utc::now(),
        }
    }

    /// The failing op here fails after its design row and timeline entry were written (its feed
    /// entry is refused), so only its savepoint's rollback keeps those out.
    #[tokio::test]
    async fn a_batch_op_that_fails_half_way_is_rolled_back_alone_and_the_batch_is_one_counted_call() {
        let counters = Counters::default();
        let _local = metrics::set_default_local_recorder(&counters);
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedDesignStore::open_with_readers(dir.path(), Durability::Process, 1).unwrap();
        store
            .writer
            .call_sync(|conn| {
                conn.execute_batch("CREATE TRIGGER refuse AFTER INSERT ON feed WHEN NEW.design_id = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END;")
                    .map_err(|e| sqlite_error("trigger", e))
            })
            .unwrap();
        let tenant = TenantId::parse("acme").unwrap();
        let [kept, refused, after] = ["kept", "refused", "after"].map(|d| DesignId::parse(d).unwrap());
        let (entries, change) =
            ([0, 1, 2].map(|_| entry(EventKind::DesignSubmitted)), Change::Submitted { name: None });
        let ops: Vec<ApplyOp<'_>> = [&kept, &refused, &after]
            .into_iter()
            .zip(&entries)
            .map(|(design, entry)| ApplyOp { replayed: false, tenant: &tenant, design, entry, change: &change })
            .collect();
        let done = store.apply_batch(&ops).await;
        assert_eq!(done.applied, [Applied::Applied]);
        assert!(done.error.expect("the feed entry was refused").to_string().contains("refused"));
        assert!(store.get(&tenant, &kept).await.unwrap().is_some(), "the op before it was committed");
        assert!(store.get(&tenant, &refused).await.unwrap().is_none(), "its design row was rolled back");
        assert!(store.timeline(&tenant, &refused).await.unwrap().is_none());
        assert!(store.get(&tenant, &after).await.unwrap().is_none(), "the op after it was not attempted");
        let key = |op: &str| format!("{}{{backend=embedded,operation={op}}}", crate::STORE_REQUESTS_METRIC);
        assert_eq!(counters.get(&key("apply_batch")), 1, "{:?}", counters.all());
        assert_eq!(counters.get(&key("apply")), 0, "{:?}", counters.all());
    }
}
