//! SQLite's heap is held to the page caches' configured sizes ([`bound_sqlite_heap`]). The
//! bundled SQLite shares one page pool among all connections, bounded in pages rather than bytes,
//! so a connection with 16 KiB pages (the log's) that takes the pages a connection with 4 KiB
//! pages (the store's) last used grows the heap well past both caches; SQLite's soft heap limit
//! holds it. One test in a process of its own: the limit and the heap are the process's.

use openqq_adapters::embedded::bound_sqlite_heap;
use rusqlite::{ffi, Connection};

const MIB: i64 = 1 << 20;

/// A database of `page_size` pages with a 2 MiB page cache, read through the cache (no memory
/// map), holding a table of `mib` MiB.
fn database(dir: &std::path::Path, name: &str, page_size: u32, mib: usize) -> Connection {
    let conn = Connection::open(dir.join(name)).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size={page_size}; PRAGMA journal_mode=WAL; PRAGMA mmap_size=0; PRAGMA cache_size=-2048;
         CREATE TABLE t (v BLOB);"
    ))
    .unwrap();
    conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
         INSERT INTO t SELECT randomblob(1000) FROM n",
        [mib * 1024],
    )
    .unwrap();
    conn
}

fn heap() -> i64 {
    // SAFETY: reads SQLite's own counter.
    unsafe { ffi::sqlite3_memory_used() }
}

/// Reads both tables through, the small pages' first, and returns the largest heap seen.
fn read_both(small: &Connection, large: &Connection) -> i64 {
    let mut most = heap();
    for _ in 0..3 {
        for conn in [small, large] {
            let _: i64 = conn.query_row("SELECT sum(length(v)) FROM t", [], |r| r.get(0)).unwrap();
            most = most.max(heap());
        }
    }
    most
}

#[test]
fn the_soft_heap_limit_holds_page_caches_of_mixed_page_sizes_to_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let small = database(dir.path(), "small.db", 4096, 4);
    let large = database(dir.path(), "large.db", 16384, 16);
    // Two 2 MiB caches, yet the 16 KiB pages take the pool's page count: far more bytes.
    let unbounded = read_both(&small, &large);
    assert!(unbounded > 6 * MIB, "without a limit the caches hold {unbounded} bytes");

    // SAFETY: sets SQLite's own limit.
    unsafe { ffi::sqlite3_soft_heap_limit64(5 * MIB) };
    let bounded = read_both(&small, &large);
    assert!(bounded <= 5 * MIB + MIB / 2, "with a 5 MiB limit the heap reached {bounded} bytes");

    // The platform's limit: the page caches it configures, plus 1 MiB.
    let readers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8) as u64;
    let limit = bound_sqlite_heap();
    assert_eq!(limit, (3 * 2 + readers + 1) << 20);
    // SAFETY: a negative argument only reads the limit.
    assert_eq!(unsafe { ffi::sqlite3_soft_heap_limit64(-1) }, limit as i64);
}
