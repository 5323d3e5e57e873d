//! The log file `openqq up` keeps beside its data: every `info` (and more severe) line as one JSON
//! object per line, whatever `--log-format` the terminal gets, so `openqq trace` can follow a
//! correlation id through the API and the three consumer functions after the fact.
//!
//! The file is `<data-dir>/logs/openqq.jsonl`. It is capped: once it passes [`MAX_FILE_BYTES`] it
//! becomes `openqq.1.jsonl` (the older ones move up to `openqq.2.jsonl`, `openqq.3.jsonl`, and
//! the oldest is deleted), so however many lines a tenant's flood produces, the logs never hold
//! more than [`MAX_TOTAL_BYTES`] on disk.
//!
//! [`init_logs`](crate::init_logs) installs the file's layer in every process; it writes nothing
//! until [`open`] names the directory (only `openqq up` does: a Lambda function's lines go to
//! CloudWatch).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The live file's name inside the logs directory.
pub const FILE_NAME: &str = "openqq.jsonl";

/// Size at which the live file is rotated: 32 MiB.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Rotated files kept besides the live one.
pub const KEPT_FILES: usize = 3;

/// Most bytes the logs directory holds: the live file and the rotated ones, each at most
/// [`MAX_FILE_BYTES`] plus one line.
pub const MAX_TOTAL_BYTES: u64 = MAX_FILE_BYTES * (KEPT_FILES as u64 + 1);

/// The logs directory of a data dir.
pub fn dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join("logs")
}

/// The files holding the lines, oldest first (rotated ones, then the live one); only those that
/// exist.
pub fn files(logs_dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = (1..=KEPT_FILES).rev().map(|n| rotated(logs_dir, n)).collect();
    all.push(logs_dir.join(FILE_NAME));
    all.into_iter().filter(|p| p.is_file()).collect()
}

fn rotated(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("openqq.{n}.jsonl"))
}

/// A size-capped, rotating file of lines.
pub struct CappedFile {
    dir: PathBuf,
    file: File,
    written: u64,
    max_file_bytes: u64,
}

impl CappedFile {
    /// Opens (appending to) the live file in `dir`, creating `dir`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::with_cap(dir, MAX_FILE_BYTES)
    }

    fn with_cap(dir: &Path, max_file_bytes: u64) -> io::Result<Self> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)?;
        let file = open_private(&dir.join(FILE_NAME))?;
        let written = file.metadata()?.len();
        Ok(Self { dir: dir.to_owned(), file, written, max_file_bytes })
    }

    /// Appends `line` (one whole log line), rotating first when the live file is full.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        if self.written > 0 && self.written + line.len() as u64 > self.max_file_bytes {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.written += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        let _ = std::fs::remove_file(rotated(&self.dir, KEPT_FILES));
        for n in (1..KEPT_FILES).rev() {
            let from = rotated(&self.dir, n);
            if from.exists() {
                std::fs::rename(&from, rotated(&self.dir, n + 1))?;
            }
        }
        std::fs::rename(self.dir.join(FILE_NAME), rotated(&self.dir, 1))?;
        self.file = open_private(&self.dir.join(FILE_NAME))?;
        self.written = 0;
        Ok(())
    }
}

/// Opens `path` for appending, creating it readable by its owner only (lines name tenants,
/// designs and routes).
fn open_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

static FILE: OnceLock<Mutex<Option<CappedFile>>> = OnceLock::new();
static OPEN: AtomicBool = AtomicBool::new(false);

fn slot() -> MutexGuard<'static, Option<CappedFile>> {
    FILE.get_or_init(|| Mutex::new(None)).lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts writing this process's log lines to `<data_dir>/logs/openqq.jsonl`; returns the file's
/// path. A second call moves the lines to the new directory.
pub fn open(data_dir: &Path) -> io::Result<PathBuf> {
    let dir = dir_of(data_dir);
    let file = CappedFile::open(&dir)?;
    *slot() = Some(file);
    OPEN.store(true, Ordering::Release);
    Ok(dir.join(FILE_NAME))
}

/// Whether a log file is open (the layer's filter: without one, lines are not even formatted).
pub(crate) fn is_open() -> bool {
    OPEN.load(Ordering::Acquire)
}

/// The file's layer: JSON lines with the event's fields and every enclosing span's (the
/// correlation id, tenant and design of a request or a record), `info` and up, and nothing at
/// all while no file is open.
pub(crate) fn layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::filter::{filter_fn, LevelFilter};
    use tracing_subscriber::Layer;
    tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(true)
        .with_writer(LineWriter::default)
        .with_filter(LevelFilter::INFO)
        .with_filter(filter_fn(|_| is_open()))
}

/// The writer the layer formats each line into; the whole line is written at once when it drops.
#[derive(Default)]
pub(crate) struct LineWriter(Vec<u8>);

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        if let Some(file) = slot().as_mut() {
            // A full disk or a removed directory must not take the platform down with it.
            let _ = file.write_line(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary one, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("openqq-log-file-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_log_file_rotates_at_its_cap_and_keeps_only_so_many_files() {
        let dir = Scratch::new("rotates");
        let mut file = CappedFile::with_cap(dir.path(), 100).unwrap();
        let line = [b'x'; 39].iter().copied().chain([b'\n']).collect::<Vec<u8>>();
        for _ in 0..40 {
            file.write_line(&line).unwrap();
        }
        let names: Vec<String> =
            files(dir.path()).iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["openqq.3.jsonl", "openqq.2.jsonl", "openqq.1.jsonl", "openqq.jsonl"]);
        let total: u64 = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        assert!(total <= 4 * 100, "{total} bytes on disk");
        for path in files(dir.path()) {
            let len = std::fs::metadata(&path).unwrap().len();
            assert!(len <= 100 && len % 40 == 0, "{} holds {len} bytes: lines are never split", path.display());
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_log_files_and_their_directory_are_private_to_the_owner_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = Scratch::new("private");
        let dir = scratch.path().join("logs");
        let mut file = CappedFile::with_cap(&dir, 10).unwrap();
        file.write_line(b"0123456789\n").unwrap();
        file.write_line(b"0123456789\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        for path in files(&dir) {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
        assert_eq!(files(&dir).len(), 2, "rotated once");
    }

    #[test]
    fn a_reopened_log_file_appends_and_counts_what_it_already_holds() {
        let dir = Scratch::new("reopened");
        CappedFile::with_cap(dir.path(), 100).unwrap().write_line(&[b'a'; 80]).unwrap();
        let mut again = CappedFile::with_cap(dir.path(), 100).unwrap();
        again.write_line(&[b'b'; 30]).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("openqq.1.jsonl")).unwrap().len(), 80);
        assert_eq!(std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len(), 30);
    }
}
