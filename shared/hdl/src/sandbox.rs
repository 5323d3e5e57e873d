//! One tool run on hostile input, bounded: a fresh work directory holding only the submitted
//! files, an empty environment, resource limits set in the child before `exec`, a wall-clock
//! timeout that kills the whole process group, and a cap on the output read.
//!
//! The limits (`setrlimit` in `pre_exec`, so they bind the tool and everything it starts):
//! `RLIMIT_CPU` (then `SIGXCPU`/`SIGKILL`), `RLIMIT_AS` (allocations fail), `RLIMIT_FSIZE`
//! (writes past it fail with `SIGXFSZ`), `RLIMIT_NOFILE` 256, `RLIMIT_CORE` 0. The tool's
//! process group is killed when the run ends for any reason, so nothing it started outlives it.
//! This bounds what a source can make a tool *use*; what a source can make a tool *open* is
//! bounded by [`crate::precheck`].

use crate::error::HdlError;
use crate::limits::Limits;
use crate::source::SourceFile;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The tool exited with this status.
    Exited(i32),
    /// The tool was killed by this signal (`SIGXCPU`, `SIGXFSZ`, `SIGSEGV` on a failed
    /// allocation, …) without the sandbox asking.
    Signalled(i32),
    /// The wall-clock limit passed; the group was killed.
    TimedOut,
    /// The output passed its cap; the group was killed.
    OutputExceeded,
}

/// What a run produced.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) ending: Ending,
    /// Stdout and stderr together, in the order the chunks arrived, at most the output cap.
    pub(crate) output: String,
    pub(crate) elapsed: Duration,
}

/// The directories searched for the tools: the platform's `PATH` (read once per run, before the
/// tool's own environment is cleared).
pub(crate) fn find_tool(tool: &'static str) -> Result<PathBuf, HdlError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
        .ok_or(HdlError::ToolMissing { tool })
}

/// A fresh work directory (mode 0700, removed when dropped).
pub(crate) fn work_dir(tool: &'static str) -> Result<tempfile::TempDir, HdlError> {
    tempfile::Builder::new().prefix("openqq-hdl-").tempdir().map_err(|source| HdlError::Io { tool, source })
}

/// Writes the submitted files into `dir`, never over an existing file.
pub(crate) fn write_files(dir: &Path, files: &[SourceFile], tool: &'static str) -> Result<(), HdlError> {
    for file in files {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(&file.name))
            .map_err(|source| HdlError::Io { tool, source })?;
        out.write_all(file.text.as_bytes()).map_err(|source| HdlError::Io { tool, source })?;
    }
    Ok(())
}

/// Reads at most `max` bytes of a file a tool wrote; `None` when it does not exist.
pub(crate) fn read_capped(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The type `setrlimit` takes its resource as (glibc names it; musl and others use an int).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

fn set_limit(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: setrlimit only reads the struct we pass; it is async-signal-safe, as pre_exec needs.
    if unsafe { libc::setrlimit(resource, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: kill has no memory effects; the group is the one the child leads.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Runs `tool` with `args` in `dir` under `limits` and collects how it ended and what it printed.
pub(crate) fn run<S: AsRef<OsStr>>(
    tool: &'static str,
    args: &[S],
    dir: &Path,
    limits: &Limits,
) -> Result<Outcome, HdlError> {
    let program = find_tool(tool)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("TMPDIR", dir)
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let (cpu, memory, fsize) = (limits.cpu_seconds, limits.memory_bytes, limits.max_written_file_bytes);
    // SAFETY: the closure runs between fork and exec and calls only setrlimit.
    unsafe {
        command.pre_exec(move || {
            set_limit(libc::RLIMIT_CPU, cpu, cpu.saturating_add(1))?;
            set_limit(libc::RLIMIT_AS, memory, memory)?;
            set_limit(libc::RLIMIT_FSIZE, fsize, fsize)?;
            set_limit(libc::RLIMIT_NOFILE, 256, 256)?;
            set_limit(libc::RLIMIT_CORE, 0, 0)
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| HdlError::Io { tool, source })?;
    let pgid = child.id() as i32;

    let output = Arc::new(Mutex::new(Vec::new()));
    let exceeded = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();
    let streams: [Option<Box<dyn Read + Send>>; 2] = [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
    ];
    let mut readers = 0;
    for mut stream in streams.into_iter().flatten() {
        let (output, exceeded, done_tx, max) =
            (output.clone(), exceeded.clone(), done_tx.clone(), limits.max_output_bytes);
        readers += 1;
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = stream.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
                let room = max.saturating_sub(out.len());
                out.extend_from_slice(&chunk[..n.min(room)]);
                if n > room {
                    exceeded.store(true, Ordering::SeqCst);
                    break;
                }
            }
            let _ = done_tx.send(());
        });
    }
    drop(done_tx);

    let deadline = started + limits.timeout;
    let ending = loop {
        if exceeded.load(Ordering::SeqCst) {
            kill_group(pgid);
            let _ = child.wait();
            break Ending::OutputExceeded;
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                kill_group(pgid);
                break match (status.code(), status.signal()) {
                    (Some(code), _) => Ending::Exited(code),
                    (None, Some(signal)) => Ending::Signalled(signal),
                    (None, None) => Ending::Signalled(0),
                };
            }
            Ok(None) if Instant::now() >= deadline => {
                kill_group(pgid);
                let _ = child.wait();
                break Ending::TimedOut;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(source) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(HdlError::Io { tool, source });
            }
        }
    };
    // The readers end when the pipes close; a process that left the group could hold them open,
    // so wait only a little, then leave the readers to finish on their own.
    let grace = Instant::now() + Duration::from_millis(500);
    for _ in 0..readers {
        if done_rx.recv_timeout(grace.saturating_duration_since(Instant::now())).is_err() {
            break;
        }
    }
    let ending = if exceeded.load(Ordering::SeqCst) { Ending::OutputExceeded } else { ending };
    let bytes = std::mem::take(&mut *output.lock().unwrap_or_else(|e| e.into_inner()));
    let outcome = Outcome { ending, output: String::from_utf8_lossy(&bytes).into_owned(), elapsed: started.elapsed() };
    tracing::debug!(tool, ending = ?outcome.ending, elapsed_ms = outcome.elapsed.as_millis() as u64, "Tool run ended.");
    Ok(outcome)
}
