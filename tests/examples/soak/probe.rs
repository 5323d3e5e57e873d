//! What the soak samples, and from where: the server process through `/proc`, its data dir
//! through the file system and read-only SQLite connections, its `/metrics` page.

use openqq_e2e::counter_sum;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// One sampled series: its CSV column and its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    RssMib,
    AnonMib,
    FileMib,
    SqliteHeapMib,
    RestMib,
    Fds,
    Threads,
    LogDbMib,
    StoreDbMib,
    ObjectsMib,
    ObjectFiles,
    UploadsMib,
    OtherMib,
    LogRecords,
    LogRecordMib,
    LogRetained,
    FeedRows,
    DeliveryRows,
    IdempotencyRows,
    AcceptedRows,
    BatchItemRows,
    DesignRows,
    TombstoneRows,
    LagRecords,
    LagMax,
    P50Ms,
    P99Ms,
    Accepted,
    Ready,
    Bursts,
}

impl Col {
    pub const ALL: [Col; 30] = [
        Col::RssMib,
        Col::AnonMib,
        Col::FileMib,
        Col::SqliteHeapMib,
        Col::RestMib,
        Col::Fds,
        Col::Threads,
        Col::LogDbMib,
        Col::StoreDbMib,
        Col::ObjectsMib,
        Col::ObjectFiles,
        Col::UploadsMib,
        Col::OtherMib,
        Col::LogRecords,
        Col::LogRecordMib,
        Col::LogRetained,
        Col::FeedRows,
        Col::DeliveryRows,
        Col::IdempotencyRows,
        Col::AcceptedRows,
        Col::BatchItemRows,
        Col::DesignRows,
        Col::TombstoneRows,
        Col::LagRecords,
        Col::LagMax,
        Col::P50Ms,
        Col::P99Ms,
        Col::Accepted,
        Col::Ready,
        Col::Bursts,
    ];

    /// The CSV header (and the plot script's key).
    pub fn name(self) -> &'static str {
        match self {
            Col::RssMib => "rss_mib",
            Col::AnonMib => "anon_mib",
            Col::FileMib => "file_mib",
            Col::SqliteHeapMib => "sqlite_heap_mib",
            Col::RestMib => "anon_rest_mib",
            Col::Fds => "fds",
            Col::Threads => "threads",
            Col::LogDbMib => "log_db_mib",
            Col::StoreDbMib => "store_db_mib",
            Col::ObjectsMib => "objects_mib",
            Col::ObjectFiles => "object_files",
            Col::UploadsMib => "uploads_mib",
            Col::OtherMib => "other_mib",
            Col::LogRecords => "log_records",
            Col::LogRecordMib => "log_record_mib",
            Col::LogRetained => "log_retention_removed",
            Col::FeedRows => "feed_rows",
            Col::DeliveryRows => "delivery_rows",
            Col::IdempotencyRows => "idempotency_rows",
            Col::AcceptedRows => "accepted_rows",
            Col::BatchItemRows => "batch_item_rows",
            Col::DesignRows => "design_rows",
            Col::TombstoneRows => "tombstone_rows",
            Col::LagRecords => "lag_records",
            Col::LagMax => "lag_max_partition",
            Col::P50Ms => "p50_ms",
            Col::P99Ms => "p99_ms",
            Col::Accepted => "accepted",
            Col::Ready => "ready_in_window",
            Col::Bursts => "bursts",
        }
    }
}

/// One sample: seconds since the run started, and a value per [`Col`] (NaN where unknown).
#[derive(Debug, Clone)]
pub struct Sample {
    pub at_s: f64,
    pub values: [f64; Col::ALL.len()],
}

impl Sample {
    pub fn get(&self, c: Col) -> f64 {
        self.values[c as usize]
    }

    fn set(&mut self, c: Col, v: f64) {
        self.values[c as usize] = v;
    }
}

/// The server under the soak: its process id and data dir, and read-only connections to its
/// two databases (opened once the files exist).
pub struct Probe {
    pid: u32,
    dir: PathBuf,
    log: Option<Connection>,
    store: Option<Connection>,
}

const MIB: f64 = 1048576.0;

impl Probe {
    /// The `openqq up` process serving `dir` (found by its command line: the harness keeps the
    /// child to itself).
    pub fn find(dir: &Path) -> Probe {
        let want = dir.to_string_lossy().into_owned();
        let pid = std::fs::read_dir("/proc")
            .expect("/proc is readable")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                args.get(1) == Some(&&b"up"[..])
                    && args.windows(2).any(|w| w[0] == b"--data-dir" && w[1] == want.as_bytes())
            })
            .expect("the openqq up process serving the soak's data dir");
        Probe { pid, dir: dir.to_owned(), log: None, store: None }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Everything but the client-side figures (latency, accepted), which the caller fills in.
    pub fn sample(&mut self, at_s: f64, metrics: &str) -> Sample {
        let mut s = Sample { at_s, values: [f64::NAN; Col::ALL.len()] };
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let field = |name: &str| status_field(&status, name);
        let sqlite = gauge(metrics, "openqq_sqlite_memory_bytes") / MIB;
        let anon = field("RssAnon:") / 1024.0;
        s.set(Col::RssMib, field("VmRSS:") / 1024.0);
        s.set(Col::AnonMib, anon);
        s.set(Col::FileMib, field("RssFile:") / 1024.0);
        s.set(Col::SqliteHeapMib, sqlite);
        s.set(Col::RestMib, anon - sqlite);
        s.set(Col::Threads, field("Threads:"));
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid)).map(|d| d.count() as f64);
        s.set(Col::Fds, fds.unwrap_or(f64::NAN));

        let files = DirBytes::walk(&self.dir);
        s.set(Col::LogDbMib, files.log as f64 / MIB);
        s.set(Col::StoreDbMib, files.store as f64 / MIB);
        s.set(Col::ObjectsMib, files.objects as f64 / MIB);
        s.set(Col::ObjectFiles, files.object_files as f64);
        s.set(Col::UploadsMib, files.uploads as f64 / MIB);
        s.set(Col::OtherMib, files.other as f64 / MIB);

        let lag = lag(metrics);
        s.set(Col::LagRecords, lag.0);
        s.set(Col::LagMax, lag.1);
        s.set(Col::LogRetained, gauge(metrics, "openqq_log_retention_records_total").max(0.0));

        if let Some(log) = open(&mut self.log, &self.dir.join("log.db")) {
            let (records, bytes) = log
                .query_row("SELECT COUNT(*), COALESCE(SUM(length(value) + length(headers)), 0) FROM records", [], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
                })
                .unwrap_or((-1, -1));
            s.set(Col::LogRecords, records as f64);
            s.set(Col::LogRecordMib, bytes as f64 / MIB);
        }
        if let Some(store) = open(&mut self.store, &self.dir.join("store.db")) {
            let count = |table: &str| {
                store
                    .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get::<_, i64>(0))
                    .map_or(f64::NAN, |n| n as f64)
            };
            s.set(Col::FeedRows, count("feed"));
            s.set(Col::DeliveryRows, count("deliveries"));
            s.set(Col::IdempotencyRows, count("idempotency_keys"));
            s.set(Col::AcceptedRows, count("accepted"));
            s.set(Col::BatchItemRows, count("batch_items"));
            s.set(Col::DesignRows, count("designs"));
            s.set(Col::TombstoneRows, count("deleted_designs"));
        }
        s
    }

    /// The log's records per topic: (topic, records, bytes of values and headers).
    pub fn topics(&mut self) -> Vec<(String, i64, i64)> {
        let Some(log) = open(&mut self.log, &self.dir.join("log.db")) else { return Vec::new() };
        let Ok(mut q) = log.prepare(
            "SELECT topic, COUNT(*), COALESCE(SUM(length(value) + length(headers)), 0) FROM records GROUP BY topic ORDER BY topic",
        ) else {
            return Vec::new();
        };
        let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)));
        rows.map(|rows| rows.filter_map(Result::ok).collect()).unwrap_or_default()
    }
}

/// A read-only connection to `path`, opened on first use.
fn open<'a>(slot: &'a mut Option<Connection>, path: &Path) -> Option<&'a Connection> {
    if slot.is_none() && path.exists() {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .ok()?;
        conn.busy_timeout(std::time::Duration::from_secs(2)).ok()?;
        *slot = Some(conn);
    }
    slot.as_ref()
}

/// A `/proc/<pid>/status` field's number (kB for memory), NaN where missing.
fn status_field(status: &str, field: &str) -> f64 {
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// An unlabelled gauge or counter's value, NaN when absent.
fn gauge(metrics: &str, name: &str) -> f64 {
    let prefix = format!("{name} ");
    metrics.lines().find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok()).unwrap_or(f64::NAN)
}

/// Consumer lag: the sum over every function and partition, and the largest one partition has.
fn lag(metrics: &str) -> (f64, f64) {
    let max = metrics
        .lines()
        .filter(|l| l.starts_with("openqq_consumer_lag_records{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    // `+ 0.0`: an empty sum is -0.0.
    (counter_sum(metrics, "openqq_consumer_lag_records", &[]) + 0.0, max)
}

/// The data dir's bytes, grouped: each database with its `-wal` and `-shm`, the object store,
/// uploads not yet adopted, everything else (the secret, the lock).
#[derive(Debug, Default)]
struct DirBytes {
    log: u64,
    store: u64,
    objects: u64,
    object_files: u64,
    uploads: u64,
    other: u64,
}

impl DirBytes {
    fn walk(dir: &Path) -> DirBytes {
        let mut d = DirBytes::default();
        let mut stack = vec![dir.to_owned()];
        while let Some(p) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&p) else { continue };
            for e in entries.flatten() {
                let Ok(meta) = e.metadata() else { continue };
                if meta.is_dir() {
                    stack.push(e.path());
                    continue;
                }
                let rel = e.path().strip_prefix(dir).map(Path::to_owned).unwrap_or_default();
                let top = rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned());
                let bytes = meta.len();
                match top.as_deref().unwrap_or_default() {
                    n if n.starts_with("log.db") => d.log += bytes,
                    n if n.starts_with("store.db") => d.store += bytes,
                    "objects" => {
                        d.objects += bytes;
                        d.object_files += 1;
                    }
                    "uploads" => d.uploads += bytes,
                    _ => d.other += bytes,
                }
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_summed_over_series_and_its_largest_partition_kept() {
        let m = "openqq_consumer_lag_records{function=\"a\",partition=\"0\"} 3\n\
                 openqq_consumer_lag_records{function=\"b\",partition=\"1\"} 5\n";
        assert_eq!(lag(m), (8.0, 5.0));
    }
}
