//! Shared SQLite plumbing: opening a database in WAL mode, pools of reader connections, and
//! running blocking calls from async code.

use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::PortError;
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

/// How hard a commit works to survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// WAL with `synchronous=NORMAL`: a committed write survives the process being killed
    /// (`kill -9`), since the WAL is in the operating system's hands before the commit returns;
    /// the last commits before a power loss may be lost.
    #[default]
    Process,
    /// WAL with `synchronous=FULL`: every commit is fsynced, surviving power loss, at the cost of
    /// one fsync per commit.
    Power,
}

/// SQLite page size of the event log: 16 KiB pages keep large values (netlists) on short
/// overflow chains.
pub(crate) const LOG_PAGE_SIZE: u32 = 16384;

/// SQLite page size of the design store: its rows are small, and every page a commit touches is
/// written whole to the WAL, so smaller pages mean fewer bytes per commit.
pub(crate) const STORE_PAGE_SIZE: u32 = 4096;

/// Page cache of a connection that writes (KiB). Reads of pages already in the database file go
/// through the memory map, not the cache, so the cache holds what a connection wrote or read
/// back from the WAL, and keeps it until it is full: a larger cache only grows with the files
/// (at 64 MiB, 28 of the heap's 29 MiB were page caches after 4,320 designs), and 2 MiB
/// measured the same throughput (docs/BENCHMARKS.md, section 12).
const WRITER_CACHE_KIB: u32 = 2048;

/// Page cache of each store reader (KiB); there is one reader per core.
const READER_CACHE_KIB: u32 = 1024;

/// Opens (or creates, with `page_size`) the database at `path` and runs `schema`.
pub(crate) fn open(path: &Path, durability: Durability, page_size: u32, schema: &str) -> Result<Connection, PortError> {
    let conn = Connection::open(path).map_err(|e| sqlite_error(&format!("open {}", path.display()), e))?;
    let sync = match durability {
        Durability::Process => "NORMAL",
        Durability::Power => "FULL",
    };
    conn.execute_batch(&format!(
        // page_size only takes effect on a new file (before WAL is enabled). auto_vacuum too
        // (before WAL writes the header) so the log's retention can give space back. Reads go
        // through a memory map.
        "PRAGMA page_size={page_size}; PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA busy_timeout=5000; \
         PRAGMA foreign_keys=ON; PRAGMA mmap_size=1073741824; PRAGMA cache_size=-{WRITER_CACHE_KIB}; {schema}"
    ))
    .map_err(|e| sqlite_error("initialise schema", e))?;
    Ok(conn)
}

/// The port error for a SQLite failure while doing `what`, classified by SQLite's error code:
/// busy, locked, I/O and disk-full errors are worth retrying, and so is `SQLITE_PROTOCOL` (in WAL
/// mode, a connection that lost the race to start a transaction many times over: contention,
/// as SQLite documents it); constraint, schema and misuse errors are not. The rusqlite error is
/// kept as the cause.
pub(crate) fn sqlite_error(what: &str, e: rusqlite::Error) -> PortError {
    if no_space(&e) {
        // SQLite rolled the statement back: nothing was written, and the file is whole.
        return PortError::storage_full(format!("sqlite: {what}: the data dir's file system is full"), e);
    }
    let retriable = matches!(
        e.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::DatabaseBusy
                | rusqlite::ErrorCode::DatabaseLocked
                | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::FileLockingProtocolFailed
        )
    );
    PortError::backend(format!("sqlite: {what}: {e}"), retriable, e)
}

/// Whether SQLite failed for want of space: a full database file or WAL (`SQLITE_FULL`), or a
/// `-shm` file that could not grow (`SQLITE_IOERR_SHMSIZE`, what opening a database on a full
/// file system answers).
fn no_space(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(failure, _) => {
            failure.code == rusqlite::ErrorCode::DiskFull
                || failure.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE
        }
        _ => false,
    }
}

/// A stored value that does not parse as `what`: the row is corrupt, not the caller's request.
pub(super) fn corrupt(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnType(0, what.to_owned(), rusqlite::types::Type::Text)
}

pub(super) fn time(text: &str, what: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).map_err(|_| corrupt(what))
}

pub(super) fn begin_tx(conn: &mut Connection) -> PortResult<rusqlite::Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| sqlite_error("begin", e))
}

pub(super) fn commit_tx(tx: rusqlite::Transaction<'_>) -> PortResult<()> {
    tx.commit().map_err(|e| sqlite_error("commit", e))
}

/// One connection, or a small pool of them, used from async code. A call takes a free
/// connection for its duration, so a pool of N serves N calls at once; a writer is a pool of one,
/// which also serialises writes in this process. With no connection free, a call waits for one,
/// asynchronously and in turn: only a call that holds a connection occupies a thread.
#[derive(Clone)]
pub(crate) struct Db(Arc<Pool>);

struct Pool {
    free: Mutex<Vec<Connection>>,
    returned: Condvar,
    /// One permit per connection: async calls wait here, not on `returned`, so a burst of calls
    /// queued for the one writer is a queue of tasks rather than of blocked threads (each of
    /// which the runtime would replace with a new one, keeping the pool at the burst's size).
    turns: tokio::sync::Semaphore,
}

/// Gives its connection back to the pool when the call ends, even if the call panicked.
struct Lent<'a> {
    pool: &'a Pool,
    conn: Option<Connection>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(conn);
            self.pool.returned.notify_one();
        }
    }
}

impl Pool {
    fn lend(&self) -> Lent<'_> {
        let mut free = self.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            if let Some(conn) = free.pop() {
                return Lent { pool: self, conn: Some(conn) };
            }
            free = self.returned.wait(free).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Db {
    pub fn new(conn: Connection) -> Self {
        Self::pool(vec![conn])
    }

    /// A pool of `conns` (at least one).
    pub fn pool(conns: Vec<Connection>) -> Self {
        assert!(!conns.is_empty(), "a pool needs a connection");
        let turns = tokio::sync::Semaphore::new(conns.len());
        Self(Arc::new(Pool { free: Mutex::new(conns), returned: Condvar::new(), turns }))
    }

    /// Runs `f` on a free connection from synchronous code (start-up), blocking the thread.
    pub fn call_sync<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, PortError>) -> Result<T, PortError> {
        let mut lent = self.0.lend();
        f(lent.conn.as_mut().expect("a lent connection is present until dropped"))
    }

    pub async fn call<T, F>(&self, f: F) -> Result<T, PortError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, PortError> + Send + 'static,
    {
        // SQLite calls here are short (one small transaction, no fsync by default), so they run
        // in place on the calling worker: handing each to the blocking pool cost more in thread
        // switches than the call itself (measured end to end: 5.1k vs 4.5k events/s).
        // `block_in_place` lets the runtime move this worker's other tasks meanwhile; a
        // current-thread runtime (unit tests) cannot, and simply runs the call. The turn comes
        // first, so the connection below is free (bar a start-up `call_sync`) and the thread
        // handed over is busy for the call alone.
        let _turn = self.0.turns.acquire().await.expect("the pool's semaphore is never closed");
        let run = || {
            let mut lent = self.0.lend();
            f(lent.conn.as_mut().expect("a lent connection is present until dropped"))
        };
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
            _ => run(),
        }
    }
}

/// Publishes SQLite's heap in this process (page caches, prepared statements, schemas) as the
/// gauge `openqq_sqlite_memory_bytes`, so the part of the process's memory that is bounded cache
/// can be told from the rest, and of it the page caches' as `openqq_sqlite_page_cache_bytes`.
/// `openqq up` samples them every few seconds.
pub fn record_sqlite_memory() {
    // SAFETY: sqlite3_memory_used only reads SQLite's own counter, under its own mutex.
    let used = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    metrics::gauge!("openqq_sqlite_memory_bytes").set(used as f64);
    let (mut cache, mut highest) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 writes the two counters it is given and reads SQLite's own. With
    // no page-cache buffer configured, every page-cache page is this "overflow" allocation.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_status64(rusqlite::ffi::SQLITE_STATUS_PAGECACHE_OVERFLOW, &mut cache, &mut highest, 0)
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        metrics::gauge!("openqq_sqlite_page_cache_bytes").set(cache as f64);
    }
}

/// Holds SQLite's heap in this process to the page caches' configured sizes (2 MiB for each of
/// the log's writer and reader and the store's writer, 1 MiB for each of the default number of
/// store readers) plus 1 MiB for statements and schemas, with SQLite's soft heap limit; returns
/// that many bytes. The bundled SQLite is built with `SQLITE_ENABLE_MEMORY_MANAGEMENT`, so every
/// connection's page cache draws on one shared pool bounded in *pages*, not bytes: a log
/// connection (16 KiB pages) that takes pages a store connection (4 KiB) gave back grows the
/// heap though the page count holds (the log's retention did so once per burst, by up to 5 MiB).
/// Above the limit SQLite reuses and frees cached pages before it allocates more (it never fails
/// an allocation for it).
pub fn bound_sqlite_heap() -> u64 {
    let kib = 3 * WRITER_CACHE_KIB as u64 + default_readers() as u64 * READER_CACHE_KIB as u64 + 1024;
    // SAFETY: sqlite3_soft_heap_limit64 only sets SQLite's own limit, under its own mutex.
    unsafe { rusqlite::ffi::sqlite3_soft_heap_limit64((kib * 1024) as i64) };
    kib * 1024
}

/// Reader connections for a pool: one per core, at least two (so one slow read never queues
/// the rest) and at most eight (each connection has its own page cache and memory map).
pub(crate) fn default_readers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8)
}

/// Opens `n` reader connections on `path` (the schema exists already: the writer made it).
/// Readers keep a smaller page cache than the writer: their reads go through the memory map.
pub(crate) fn open_readers(path: &Path, durability: Durability, n: usize) -> Result<Vec<Connection>, PortError> {
    let cache = format!("PRAGMA cache_size=-{READER_CACHE_KIB};");
    (0..n.max(1)).map(|_| open(path, durability, STORE_PAGE_SIZE, &cache)).collect()
}

/// The time `keep` ago, as times are stored: RFC 3339 in UTC, which sorts by time as text (every
/// stored time is written by the same `to_rfc3339`). What was stored before it has expired.
pub(super) fn cutoff(keep: std::time::Duration) -> String {
    let keep = chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX);
    Utc::now().checked_sub_signed(keep).unwrap_or(DateTime::<Utc>::MIN_UTC).to_rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn a_database_that_cannot_grow_is_storage_full_and_worth_retrying() {
        let conn = Connection::open_in_memory().unwrap();
        // A database at its most pages answers SQLITE_FULL, as one on a full disk does.
        conn.execute_batch("PRAGMA max_page_count=8; CREATE TABLE t (v BLOB);").unwrap();
        let full = (0..64)
            .find_map(|_| conn.execute("INSERT INTO t VALUES (zeroblob(4096))", []).err())
            .expect("the database fills");
        let e = sqlite_error("insert", full);
        assert_eq!(e.label(), "storage_full", "{e}");
        assert!(e.is_retriable(), "space may return");
        assert!(e.to_string().contains("file system is full"), "{e}");
        // Opening a database on a full file system fails to grow its `-shm` file instead.
        let shm = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_SHMSIZE), None);
        let e = sqlite_error("initialise schema", shm);
        assert_eq!((e.label(), e.is_retriable()), ("storage_full", true), "{e}");
    }

    fn memory_pool(n: usize) -> Db {
        Db::pool((0..n).map(|_| Connection::open_in_memory().unwrap()).collect())
    }

    /// Runs four calls that each hold their connection for 200 ms; returns how many were in a
    /// call at once at most.
    async fn most_at_once(db: Db) -> usize {
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let calls = (0..4).map(|_| {
            let (db, now, most) = (db.clone(), now.clone(), most.clone());
            tokio::spawn(async move {
                db.call(move |_| {
                    let inside = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(inside, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(200));
                    now.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                })
                .await
            })
        });
        for call in calls.collect::<Vec<_>>() {
            call.await.unwrap().unwrap();
        }
        most.load(Ordering::SeqCst)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_pool_of_readers_serves_calls_at_once_and_a_single_connection_one_at_a_time() {
        assert!(most_at_once(memory_pool(3)).await >= 2, "a pool of three serves calls side by side");
        assert_eq!(most_at_once(memory_pool(1)).await, 1, "one connection serves one call at a time");
    }

    /// Runs `work` on a runtime of one worker and `blocking` blocking threads, in a thread of its
    /// own; `None` when it has not finished within 20 s (a starved runtime never does).
    fn on_one_worker(
        blocking: usize,
        work: impl std::future::Future<Output = usize> + Send + 'static,
    ) -> Option<usize> {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .max_blocking_threads(blocking)
                .enable_all()
                .build()
                .unwrap();
            let _ = done.send(rt.block_on(work));
        });
        finished.recv_timeout(Duration::from_secs(20)).ok()
    }

    #[test]
    fn calls_waiting_for_a_connection_wait_as_tasks_not_threads() {
        // One worker and two blocking threads: were each call queued behind the held connection
        // a blocked thread, the third would find none left to hand the worker's core to, and the
        // task that lets the first call go would never run.
        let ran = on_one_worker(2, async {
            let db = memory_pool(1);
            let (open, gate) = std::sync::mpsc::channel::<()>();
            let held = tokio::spawn({
                let db = db.clone();
                async move { db.call(move |_| Ok(gate.recv().is_ok())).await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let queued: Vec<_> = (0..16)
                .map(|_| {
                    tokio::spawn({
                        let db = db.clone();
                        async move { db.call(|c| Ok(c.is_autocommit())).await }
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(100)).await;
            open.send(()).unwrap();
            let mut ran = usize::from(held.await.unwrap().unwrap());
            for call in queued {
                ran += usize::from(call.await.unwrap().unwrap());
            }
            ran
        });
        assert_eq!(ran, Some(17), "the queued calls do not starve the runtime");
    }

    #[test]
    fn calls_complete_with_the_blocking_pool_at_its_cap() {
        // Three connections, one worker and one blocking thread: most calls' cores find no thread
        // to take them, so their worker takes its core back when the call ends.
        let ran = on_one_worker(1, async {
            let db = memory_pool(3);
            let calls: Vec<_> = (0..32)
                .map(|_| {
                    let db = db.clone();
                    tokio::spawn(async move {
                        db.call(|c| {
                            std::thread::sleep(Duration::from_millis(5));
                            Ok(c.is_autocommit())
                        })
                        .await
                    })
                })
                .collect();
            let mut ran = 0;
            for call in calls {
                ran += usize::from(call.await.unwrap().unwrap());
            }
            ran
        });
        assert_eq!(ran, Some(32), "every call completes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_that_panics_gives_its_connection_back() {
        let db = memory_pool(1);
        let panicked = {
            let db = db.clone();
            tokio::spawn(async move { db.call(|_| -> Result<(), PortError> { panic!("boom") }).await }).await
        };
        assert!(panicked.is_err());
        let answer = tokio::time::timeout(Duration::from_secs(5), db.call(|c| Ok(c.is_autocommit()))).await;
        assert!(answer.expect("the connection came back").unwrap());
    }

    #[test]
    fn a_sqlite_error_keeps_the_rusqlite_error_as_its_source_and_is_classified_by_its_code() {
        let conn = Connection::open_in_memory().unwrap();
        let e = conn.execute("INSERT INTO nowhere VALUES (1)", []).unwrap_err();
        let err = sqlite_error("insert", e);
        assert!(!err.is_retriable(), "a missing table cannot appear on retry: {err}");
        assert!(err.to_string().starts_with("sqlite: insert: no such table"), "{err}");
        let source = std::error::Error::source(&err).expect("the cause is kept");
        assert!(matches!(source.downcast_ref::<rusqlite::Error>(), Some(rusqlite::Error::SqliteFailure(..))));

        let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
        let err = sqlite_error("commit", busy);
        assert!(err.is_retriable(), "a busy database may be free on retry: {err}");
        assert!(std::error::Error::source(&err).and_then(|s| s.downcast_ref::<rusqlite::Error>()).is_some());

        let raced = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_PROTOCOL), None);
        assert!(sqlite_error("begin", raced).is_retriable(), "a lost race for the WAL lock may be won on retry");
    }
}
