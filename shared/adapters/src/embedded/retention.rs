//! Retention of the embedded log: which records may go, deleting them without stalling
//! publishers, and giving the space back.
//!
//! A record is deleted once it is older than its topic's retention AND every consumer group
//! that has committed on its topic has committed past it. A topic nobody commits on (the
//! dead-letter topic) is trimmed by age alone, usually with a longer retention. Only a prefix of
//! a partition is ever deleted, so the log keeps "first kept offset .. end" with no holes, and
//! the partition's first kept offset is written to `starts` in the same transaction: a reopened
//! log never hands out an offset that was used before.
//!
//! Deletion runs on the writer connection in transactions of at most [`BATCH_RECORDS`] records
//! and [`BATCH_BYTES`] bytes, pausing between them, so a publisher waits for one small batch at
//! most. Space: new log files are created with `auto_vacuum=INCREMENTAL`, and each pass ends
//! with `PRAGMA incremental_vacuum` (a few thousand pages at a time), which truncates the file;
//! the WAL is truncated back to 64 MiB after each checkpoint (`journal_size_limit`). A file
//! created before this (auto_vacuum off) keeps its size: freed pages are reused by new records,
//! so it stops growing, but it shrinks only if an operator runs `VACUUM` on it offline.

use super::db::{sqlite_error, Db};
use super::log::Ends;
use crate::SettingsError;
use openqq_core::ports::PortResult;
use rusqlite::{params, OptionalExtension};
use std::collections::HashMap;
use std::time::Duration;

/// Most records deleted in one transaction.
pub const BATCH_RECORDS: usize = 500;
/// Most record bytes deleted in one transaction (large values free long overflow chains).
pub const BATCH_BYTES: i64 = 16 * 1024 * 1024;
/// Pages given back to the file system per `incremental_vacuum` transaction (64 MiB).
const VACUUM_PAGES: i64 = 4096;
/// Pause between two delete transactions, so waiting publishers get the writer.
const BETWEEN_BATCHES: Duration = Duration::from_millis(5);

/// How long the embedded log keeps records, and how often it looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Records older than this (and committed by every group on their topic) are deleted.
    pub default: Duration,
    /// Topics kept for another duration than `default`, e.g. the dead-letter topic for longer.
    pub per_topic: HashMap<String, Duration>,
    /// Time between two retention passes.
    pub every: Duration,
}

impl Retention {
    /// `days` days on every topic, checked every minute.
    pub fn days(days: u64) -> Self {
        Self { default: Duration::from_secs(days * 86_400), per_topic: HashMap::new(), every: Duration::from_secs(60) }
    }

    fn of(&self, topic: &str) -> Duration {
        self.per_topic.get(topic).copied().unwrap_or(self.default)
    }

    pub(super) fn check(&self) -> Result<(), SettingsError> {
        if self.every.is_zero() {
            return Err(SettingsError::new("the log retention pass interval must be more than zero"));
        }
        Ok(())
    }
}

/// What one retention pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compacted {
    pub records: u64,
    pub bytes: u64,
    /// Pages handed back to the file system.
    pub pages: u64,
}

/// The retention worker: the log's writer connection and its end offsets.
pub(super) struct Compactor {
    pub(super) writer: Db,
    pub(super) ends: Ends,
}

impl Compactor {
    /// Whether the file gives freed pages back (it was created with incremental auto-vacuum).
    pub(super) fn reclaims_space(&self) -> PortResult<bool> {
        self.writer.call_sync(|conn| {
            conn.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0))
                .map(|mode| mode == 2)
                .map_err(|e| sqlite_error("read auto_vacuum", e))
        })
    }

    pub(super) async fn run(self, retention: Retention) {
        // The first pass one period after start, not at once: a start-up that fails right after
        // opening the log then finds this task asleep, and the runtime's shutdown drops it
        // instead of catching it inside a pass (where its next sleep met a stopped timer and
        // panicked).
        let first = tokio::time::Instant::now() + retention.every;
        let mut tick = tokio::time::interval_at(first, retention.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.pass(&retention, chrono::Utc::now().timestamp_millis()).await {
                Ok(done) if done.records > 0 || done.pages > 0 => tracing::info!(
                    records = done.records,
                    bytes = done.bytes,
                    pages = done.pages,
                    "Log retention deleted records past their retention."
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "A log retention pass failed; the next one retries."),
            }
        }
    }

    pub(super) async fn pass(&self, retention: &Retention, now_ms: i64) -> PortResult<Compacted> {
        let mut partitions: Vec<(String, u32)> = self.ends.lock().unwrap().keys().cloned().collect();
        partitions.sort();
        let mut done = Compacted::default();
        for (topic, partition) in partitions {
            let cutoff = now_ms.saturating_sub(retention.of(&topic).as_millis().min(i64::MAX as u128) as i64);
            loop {
                let (records, bytes) = self.delete_batch(&topic, partition, cutoff).await?;
                done.records += records;
                done.bytes += bytes;
                metrics::counter!("openqq_log_retention_records_total").increment(records);
                if records < BATCH_RECORDS as u64 && bytes < BATCH_BYTES as u64 {
                    break;
                }
                tokio::time::sleep(BETWEEN_BATCHES).await;
            }
        }
        loop {
            let pages = self.vacuum_some().await?;
            done.pages += pages;
            if pages < VACUUM_PAGES as u64 {
                break;
            }
            tokio::time::sleep(BETWEEN_BATCHES).await;
        }
        Ok(done)
    }

    /// Deletes one batch of the oldest records of a partition that are older than `cutoff_ms`
    /// and committed by every group on the topic; returns how many records and bytes went.
    async fn delete_batch(&self, topic: &str, partition: u32, cutoff_ms: i64) -> PortResult<(u64, u64)> {
        let topic = topic.to_owned();
        self.writer
            .call(move |conn| {
                let tx = conn.transaction().map_err(|e| sqlite_error("begin retention", e))?;
                let Some(limit) = committed_by_all(&tx, &topic, partition)? else {
                    return Ok((0, 0));
                };
                // The oldest records, stopping at the first one too young, too large for the
                // batch, or not yet committed: only a prefix of the partition is ever deleted.
                let mut last = None;
                let (mut records, mut bytes) = (0u64, 0i64);
                {
                    let mut stmt = tx
                        .prepare_cached("SELECT offset, ts_ms, length(value) + length(headers) FROM records WHERE topic=?1 AND partition=?2 AND offset<?3 ORDER BY offset LIMIT ?4")
                        .map_err(|e| sqlite_error("prepare retention", e))?;
                    let mut rows = stmt
                        .query(params![topic, partition, limit, BATCH_RECORDS as i64])
                        .map_err(|e| sqlite_error("scan for retention", e))?;
                    while let Some(row) = rows.next().map_err(|e| sqlite_error("scan for retention", e))? {
                        let (offset, ts, size): (i64, i64, i64) =
                            (row.get(0).map_err(|e| sqlite_error("scan", e))?, row.get(1).map_err(|e| sqlite_error("scan", e))?, row.get(2).map_err(|e| sqlite_error("scan", e))?);
                        if ts >= cutoff_ms || (records > 0 && bytes + size > BATCH_BYTES) {
                            break;
                        }
                        last = Some(offset);
                        records += 1;
                        bytes += size;
                    }
                }
                let Some(last) = last else { return Ok((0, 0)) };
                tx.prepare_cached("DELETE FROM records WHERE topic=?1 AND partition=?2 AND offset<=?3")
                    .and_then(|mut s| s.execute(params![topic, partition, last]))
                    .map_err(|e| sqlite_error("delete for retention", e))?;
                tx.prepare_cached("INSERT INTO starts(topic, partition, first) VALUES (?1, ?2, ?3) ON CONFLICT(topic, partition) DO UPDATE SET first=MAX(first, excluded.first)")
                    .and_then(|mut s| s.execute(params![topic, partition, last + 1]))
                    .map_err(|e| sqlite_error("record the log start", e))?;
                tx.commit().map_err(|e| sqlite_error("commit retention", e))?;
                Ok((records, bytes as u64))
            })
            .await
    }

    /// Hands up to [`VACUUM_PAGES`] free pages back to the file system; returns how many.
    async fn vacuum_some(&self) -> PortResult<u64> {
        self.writer
            .call(|conn| {
                let mode: i64 =
                    conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map_err(|e| sqlite_error("vacuum", e))?;
                if mode != 2 {
                    return Ok(0);
                }
                let free: i64 =
                    conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).map_err(|e| sqlite_error("vacuum", e))?;
                let pages = free.min(VACUUM_PAGES);
                if pages > 0 {
                    // The pragma frees one page per step (a result row each): step it to the end.
                    let mut stmt = conn
                        .prepare(&format!("PRAGMA incremental_vacuum({pages})"))
                        .map_err(|e| sqlite_error("incremental vacuum", e))?;
                    let mut rows = stmt.query([]).map_err(|e| sqlite_error("incremental vacuum", e))?;
                    while rows.next().map_err(|e| sqlite_error("incremental vacuum", e))?.is_some() {}
                }
                Ok(pages as u64)
            })
            .await
    }
}

/// The offset below which every group that has committed on `topic` has committed in
/// `partition`: `None` when some group committed on the topic but not yet on this partition
/// (it will read it from the start), no limit when no group commits on the topic at all.
fn committed_by_all(tx: &rusqlite::Transaction<'_>, topic: &str, partition: u32) -> PortResult<Option<i64>> {
    let (groups, here, least): (i64, i64, Option<i64>) = tx
        .prepare_cached("SELECT (SELECT COUNT(DISTINCT grp) FROM offsets WHERE topic=?1), COUNT(*), MIN(next) FROM offsets WHERE topic=?1 AND partition=?2")
        .and_then(|mut s| s.query_row(params![topic, partition], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
        .optional()
        .map_err(|e| sqlite_error("read committed offsets", e))?
        .unwrap_or((0, 0, None));
    Ok(match (groups, least) {
        (0, _) => Some(i64::MAX),
        (g, Some(least)) if here == g => Some(least),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::{Durability, EmbeddedEventLog};
    use openqq_core::partition::partition_for;
    use openqq_core::{EventLog, LogSource, Record};

    const DAY_MS: i64 = 86_400_000;

    fn records(key: &str, n: usize, size: usize) -> Vec<Record> {
        (0..n).map(|i| Record { key: key.into(), value: vec![i as u8; size], headers: vec![] }).collect()
    }

    fn now() -> i64 {
        chrono::Utc::now().timestamp_millis()
    }

    async fn offsets(log: &EmbeddedEventLog, topic: &str, partition: u32, from: u64) -> Vec<u64> {
        log.read(topic, partition, from, 10_000).await.unwrap().iter().map(|r| r.offset).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn old_records_every_group_committed_are_deleted_and_offsets_never_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedEventLog::open(dir.path(), 2, Durability::Process).unwrap();
        let p = partition_for("k", 2);
        log.publish("t", records("k", 10, 10)).await.unwrap();
        log.commit("fast", "t", p, 6).await.unwrap();
        log.commit("slow", "t", p, 4).await.unwrap();
        let week = Retention::days(7);
        let done = log.compact(&week, now() + 8 * DAY_MS).await.unwrap();
        assert_eq!(done.records, 4, "only what the slowest group committed goes");
        assert_eq!(
            offsets(&log, "t", p, 0).await,
            (4..10).collect::<Vec<_>>(),
            "a read from a deleted range answers the next records kept"
        );
        log.commit("slow", "t", p, 10).await.unwrap();
        log.commit("fast", "t", p, 10).await.unwrap();
        log.compact(&week, now() + 8 * DAY_MS).await.unwrap();
        assert!(offsets(&log, "t", p, 0).await.is_empty(), "a partition every group has read is emptied");
        drop(log);
        let log = EmbeddedEventLog::open(dir.path(), 2, Durability::Process).unwrap();
        assert_eq!(
            log.end_offsets("t").await.unwrap()[p as usize],
            10,
            "an emptied partition keeps its end across a reopen"
        );
        log.publish("t", records("k", 1, 10)).await.unwrap();
        assert_eq!(offsets(&log, "t", p, 0).await, vec![10], "offsets carry on, never back to 0");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_younger_than_the_retention_stay_even_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap();
        log.publish("t", records("k", 5, 10)).await.unwrap();
        log.commit("g", "t", 0, 5).await.unwrap();
        assert_eq!(log.compact(&Retention::days(7), now() + 6 * DAY_MS).await.unwrap().records, 0);
        assert_eq!(offsets(&log, "t", 0, 0).await.len(), 5);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_that_has_not_committed_on_a_partition_keeps_all_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap();
        let (a, b) = (
            "tenant-a",
            (0..).map(|i| format!("tenant-{i}")).find(|k| partition_for(k, 4) != partition_for("tenant-a", 4)).unwrap(),
        );
        let (pa, pb) = (partition_for(a, 4), partition_for(&b, 4));
        log.publish("t", records(a, 3, 10)).await.unwrap();
        log.publish("t", records(&b, 3, 10)).await.unwrap();
        log.commit("g", "t", pa, 3).await.unwrap();
        log.commit("g", "t", pb, 3).await.unwrap();
        log.commit("late", "t", pa, 3).await.unwrap();
        log.compact(&Retention::days(7), now() + 8 * DAY_MS).await.unwrap();
        assert!(offsets(&log, "t", pa, 0).await.is_empty());
        assert_eq!(offsets(&log, "t", pb, 0).await.len(), 3, "the group `late` has yet to read this partition");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_topic_nobody_consumes_is_trimmed_by_age_with_its_own_retention() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap();
        log.publish("dead-letters", records("k", 3, 10)).await.unwrap();
        let mut retention = Retention::days(7);
        retention.per_topic.insert("dead-letters".into(), Duration::from_secs(30 * 86_400));
        log.compact(&retention, now() + 8 * DAY_MS).await.unwrap();
        assert_eq!(offsets(&log, "dead-letters", 0, 0).await.len(), 3, "dead letters outlive the default retention");
        log.compact(&retention, now() + 31 * DAY_MS).await.unwrap();
        assert!(offsets(&log, "dead-letters", 0, 0).await.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deleting_many_large_records_takes_several_small_batches_and_shrinks_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap();
        for _ in 0..8 {
            log.publish("t", records("k", 100, 64 * 1024)).await.unwrap();
        }
        log.publish("t", records("k", 700, 10)).await.unwrap();
        log.commit("g", "t", 0, 1500).await.unwrap();
        let pages = |dir: &std::path::Path| {
            let c = rusqlite::Connection::open(dir.join("log.db")).unwrap();
            c.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0)).unwrap()
        };
        let before = pages(dir.path());
        let done = log.compact(&Retention::days(7), now() + 8 * DAY_MS).await.unwrap();
        assert_eq!(done.records, 1500, "the pass goes on batch after batch until nothing is left");
        assert!(done.pages > 0);
        let after = pages(dir.path());
        assert!(after * 4 < before, "the file gave its space back ({before} pages before, {after} after)");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_background_task_deletes_without_being_asked() {
        let dir = tempfile::tempdir().unwrap();
        let retention =
            Retention { default: Duration::ZERO, per_topic: HashMap::new(), every: Duration::from_millis(20) };
        let log = EmbeddedEventLog::open_with_retention(dir.path(), 1, Durability::Process, retention).unwrap();
        log.publish("t", records("k", 5, 10)).await.unwrap();
        log.commit("g", "t", 0, 5).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !offsets(&log, "t", 0, 0).await.is_empty() {
            assert!(std::time::Instant::now() < deadline, "retention deleted the committed records within 10 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(log.end_offsets("t").await.unwrap(), vec![5]);
    }
}
