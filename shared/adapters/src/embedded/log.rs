//! The embedded event log: partitioned topics and consumer-group offsets in one SQLite file.
//!
//! A record's partition is `murmur2(key) mod P`, as Kafka's default partitioner computes it, and
//! its offset is the partition's next offset, assigned inside the publishing transaction. One
//! writer connection appends; a second connection serves reads, so consumers never block
//! producers (WAL mode).
//!
//! Retention ([`Retention`], in `retention.rs`) deletes old records that every consumer group
//! has committed, in small batches in the background, and gives the space back to the file
//! system. Deleting never moves offsets: the next offset of each partition is kept in `starts`
//! once its records are gone, and a read from a deleted range answers the next records kept.

use super::db::{open, sqlite_error, Db, Durability, LOG_PAGE_SIZE};
use super::retention::Compactor;
pub use super::retention::{Compacted, Retention};
use crate::append_signal::AppendSignal;
use async_trait::async_trait;
use openqq_core::partition::partition_for;
use openqq_core::ports::PortResult;
use openqq_core::{EventLog, Failure, LogRecord, LogSource, PortError, Record};
use rusqlite::{params, OptionalExtension};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SCHEMA: &str = "
-- Per connection: after a checkpoint, the WAL file is truncated back to 64 MiB.
PRAGMA journal_size_limit=67108864;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- A rowid table: values can be large (a netlist), and WITHOUT ROWID tables keep whole rows in
-- the index b-tree, which makes every seek walk large payloads.
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    ts_ms INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, headers BLOB NOT NULL,
    UNIQUE (topic, partition, offset));
CREATE TABLE IF NOT EXISTS offsets (
    grp TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL, next INTEGER NOT NULL,
    PRIMARY KEY (grp, topic, partition)) WITHOUT ROWID;
-- The first offset still kept in each partition retention has trimmed; offsets never go back below it.
CREATE TABLE IF NOT EXISTS starts (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, first INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
";

pub struct EmbeddedEventLog {
    writer: Db,
    reader: Db,
    partitions: u32,
    /// Next offset per (topic, partition); the writer's source of truth while the process runs.
    ends: Ends,
    /// Wakes consumers waiting on a topic.
    appended: AppendSignal,
    /// The background retention task, stopped when the log is dropped.
    retention: Option<tokio::task::AbortHandle>,
}

pub(super) type Ends = Arc<Mutex<HashMap<(String, u32), u64>>>;

impl Drop for EmbeddedEventLog {
    fn drop(&mut self) {
        if let Some(task) = self.retention.take() {
            task.abort();
        }
    }
}

impl EmbeddedEventLog {
    /// Opens (or creates) `dir/log.db` with `partitions` partitions per topic. Reopening with a
    /// different partition count is refused: it would move tenants between partitions and break
    /// their order.
    pub fn open(dir: &Path, partitions: u32, durability: Durability) -> PortResult<Self> {
        if partitions == 0 {
            return Err(crate::SettingsError::new("partitions must be at least 1").into());
        }
        let path = dir.join("log.db");
        let writer = open(&path, durability, LOG_PAGE_SIZE, SCHEMA)?;
        let stored: Option<String> = writer
            .query_row("SELECT value FROM meta WHERE key='partitions'", [], |r| r.get(0))
            .optional()
            .map_err(|e| sqlite_error("read meta", e))?;
        match stored.map(|s| s.parse::<u32>()) {
            Some(Ok(p)) if p != partitions => {
                return Err(crate::SettingsError::new(format!(
                    "{} was created with {p} partitions per topic, not {partitions}; use --partitions {p} or a new data dir",
                    path.display()
                ))
                .into())
            }
            Some(Ok(_)) => {}
            _ => {
                writer
                    .execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('partitions', ?1)", [partitions.to_string()])
                    .map_err(|e| sqlite_error("write meta", e))?;
            }
        }
        let mut ends = HashMap::new();
        {
            let mut stmt = writer
                .prepare("SELECT topic, partition, MAX(offset) FROM records GROUP BY topic, partition")
                .map_err(|e| sqlite_error("scan ends", e))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?, r.get::<_, i64>(2)?)))
                .map_err(|e| sqlite_error("scan ends", e))?;
            for row in rows {
                let (t, p, max) = row.map_err(|e| sqlite_error("scan ends", e))?;
                ends.insert((t, p), max as u64 + 1);
            }
            // A partition retention emptied still has its next offset here.
            let mut stmt = writer
                .prepare("SELECT topic, partition, first FROM starts")
                .map_err(|e| sqlite_error("scan starts", e))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?, r.get::<_, i64>(2)?)))
                .map_err(|e| sqlite_error("scan starts", e))?;
            for row in rows {
                let (t, p, first) = row.map_err(|e| sqlite_error("scan starts", e))?;
                let end = ends.entry((t, p)).or_insert(0);
                *end = (*end).max(first as u64);
            }
        }
        let reader = open(&path, durability, LOG_PAGE_SIZE, "")?;
        Ok(Self {
            writer: Db::new(writer),
            reader: Db::new(reader),
            partitions,
            ends: Arc::new(Mutex::new(ends)),
            appended: AppendSignal::default(),
            retention: None,
        })
    }

    /// Opens the log as [`open`](Self::open) does and starts deleting records as `retention`
    /// says, every `retention.every`, on the current tokio runtime.
    pub fn open_with_retention(
        dir: &Path,
        partitions: u32,
        durability: Durability,
        retention: Retention,
    ) -> PortResult<Self> {
        retention.check()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
            PortError::Settings(Failure::new("log retention runs on a tokio runtime; none is running", e))
        })?;
        let mut log = Self::open(dir, partitions, durability)?;
        let compactor = log.compactor();
        if !compactor.reclaims_space()? {
            tracing::warn!(
                path = %dir.join("log.db").display(),
                "The log file predates incremental vacuum: retention frees pages for new records but the file will not shrink (VACUUM it offline to change that)."
            );
        }
        log.retention = Some(runtime.spawn(compactor.run(retention)).abort_handle());
        Ok(log)
    }

    /// One retention pass as of `now_ms` (milliseconds since the epoch); the background task
    /// runs these, tests call it directly.
    pub async fn compact(&self, retention: &Retention, now_ms: i64) -> PortResult<Compacted> {
        self.compactor().pass(retention, now_ms).await
    }

    fn compactor(&self) -> Compactor {
        Compactor { writer: self.writer.clone(), ends: self.ends.clone() }
    }
}

#[async_trait]
impl EventLog for EmbeddedEventLog {
    async fn publish(&self, topic: &str, records: Vec<Record>) -> PortResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        openqq_core::ports::check_record_sizes(&records)?;
        let topic_owned = topic.to_owned();
        let partitions = self.partitions;
        let ends = self.ends.clone();
        self.writer
            .call(move |conn| {
                let ts = chrono::Utc::now().timestamp_millis();
                // The writer connection's mutex serialises publishers, so offsets read from `ends`
                // here stay ours; they are published to `ends` only after the commit, so a failed
                // transaction leaves no gap and no reader sees uncommitted offsets.
                let mut next: HashMap<u32, u64> = HashMap::new();
                let tx = conn.transaction().map_err(|e| sqlite_error("begin", e))?;
                {
                    let mut stmt = tx
                        .prepare_cached("INSERT INTO records(topic, partition, offset, ts_ms, key, value, headers) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                        .map_err(|e| sqlite_error("prepare append", e))?;
                    for r in &records {
                        let p = partition_for(&r.key, partitions);
                        let off = next
                            .entry(p)
                            .or_insert_with(|| ends.lock().unwrap().get(&(topic_owned.clone(), p)).copied().unwrap_or(0));
                        stmt.execute(params![topic_owned, p, *off as i64, ts, r.key, r.value, encode_headers(&r.headers)])
                            .map_err(|e| sqlite_error("append", e))?;
                        *off += 1;
                    }
                }
                tx.commit().map_err(|e| sqlite_error("commit append", e))?;
                let mut ends = ends.lock().unwrap();
                for (p, off) in next {
                    ends.insert((topic_owned.clone(), p), off);
                }
                Ok(())
            })
            .await?;
        self.appended.appended(topic);
        Ok(())
    }
}

#[async_trait]
impl LogSource for EmbeddedEventLog {
    fn partitions(&self, _topic: &str) -> u32 {
        self.partitions
    }

    async fn read(&self, topic: &str, partition: u32, from: u64, max: usize) -> PortResult<Vec<LogRecord>> {
        let end = self.ends.lock().unwrap().get(&(topic.to_owned(), partition)).copied().unwrap_or(0);
        if from >= end || max == 0 {
            return Ok(Vec::new());
        }
        let topic = topic.to_owned();
        self.reader
            .call(move |conn| {
                let mut stmt = conn
                    .prepare_cached("SELECT offset, ts_ms, key, value, headers FROM records WHERE topic=?1 AND partition=?2 AND offset>=?3 AND offset<?4 ORDER BY offset LIMIT ?5")
                    .map_err(|e| sqlite_error("prepare read", e))?;
                let rows = stmt
                    .query_map(params![topic, partition, from as i64, end as i64, max as i64], |r| {
                        Ok(LogRecord {
                            topic: topic.clone(),
                            partition,
                            offset: r.get::<_, i64>(0)? as u64,
                            timestamp_ms: r.get(1)?,
                            key: r.get(2)?,
                            value: r.get(3)?,
                            headers: decode_headers(&r.get::<_, Vec<u8>>(4)?),
                        })
                    })
                    .map_err(|e| sqlite_error("read", e))?;
                rows.collect::<Result<Vec<_>, _>>().map_err(|e| sqlite_error("read", e))
            })
            .await
    }

    async fn end_offsets(&self, topic: &str) -> PortResult<Vec<u64>> {
        let ends = self.ends.lock().unwrap();
        Ok((0..self.partitions).map(|p| ends.get(&(topic.to_owned(), p)).copied().unwrap_or(0)).collect())
    }

    async fn committed(&self, group: &str, topic: &str, partition: u32) -> PortResult<u64> {
        let (group, topic) = (group.to_owned(), topic.to_owned());
        self.reader
            .call(move |conn| {
                conn.query_row(
                    "SELECT next FROM offsets WHERE grp=?1 AND topic=?2 AND partition=?3",
                    params![group, topic, partition],
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .map(|v| v.unwrap_or(0) as u64)
                .map_err(|e| sqlite_error("read offset", e))
            })
            .await
    }

    async fn commit(&self, group: &str, topic: &str, partition: u32, next: u64) -> PortResult<()> {
        let (group, topic) = (group.to_owned(), topic.to_owned());
        self.writer
            .call(move |conn| {
                conn.prepare_cached("INSERT INTO offsets(grp, topic, partition, next) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(grp, topic, partition) DO UPDATE SET next=excluded.next")
                    .and_then(|mut s| s.execute(params![group, topic, partition, next as i64]))
                    .map(|_| ())
                    .map_err(|e| sqlite_error("commit offset", e))
            })
            .await
    }

    async fn wait_for_append(&self, topic: &str, timeout: Duration) {
        self.appended.wait(topic, timeout).await;
    }
}

/// Headers as `[u16 name len][name][u32 value len][value]…`: compact and order-preserving.
fn encode_headers(headers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(headers.iter().map(|(k, v)| 6 + k.len() + v.len()).sum());
    for (k, v) in headers {
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

fn decode_headers(mut b: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while b.len() >= 2 {
        let kl = u16::from_le_bytes([b[0], b[1]]) as usize;
        if b.len() < 2 + kl + 4 {
            break;
        }
        let k = String::from_utf8_lossy(&b[2..2 + kl]).into_owned();
        let vl_at = 2 + kl;
        let vl = u32::from_le_bytes([b[vl_at], b[vl_at + 1], b[vl_at + 2], b[vl_at + 3]]) as usize;
        let v_at = vl_at + 4;
        if b.len() < v_at + vl {
            break;
        }
        out.push((k, b[v_at..v_at + vl].to_vec()));
        b = &b[v_at + vl..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_in_order() {
        let h = vec![("a".to_owned(), vec![1, 2]), ("bb".to_owned(), vec![]), ("c".to_owned(), vec![0xff; 300])];
        assert_eq!(decode_headers(&encode_headers(&h)), h);
        assert!(decode_headers(&[1]).is_empty());
    }

    #[tokio::test]
    async fn reopening_with_another_partition_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap());
        let err = EmbeddedEventLog::open(dir.path(), 8, Durability::Process).err().unwrap();
        assert!(err.to_string().contains("4 partitions"), "{err}");
        assert!(EmbeddedEventLog::open(dir.path(), 4, Durability::Process).is_ok());
    }
}
