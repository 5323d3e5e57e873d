//! The data dir is the owner's alone: files 0600, directories 0700.
//!
//! `openqq up` sets the process umask to 077 before it creates anything, so every file and
//! directory it (or SQLite, for the store's `-wal` and `-shm` siblings) creates is private; the
//! data dir itself is created 0700, and one created by an earlier version has the group and other
//! bits taken off everything in it. Also here: making sure the process may open the files the
//! connection ceiling implies.

use anyhow::{Context, Result};
use std::path::Path;

/// Files kept open besides client connections: the store, the log's segments, Kafka and Redis
/// sockets, webhook deliveries. Generous, since running out is worse than a lower ceiling.
const RESERVED_FILES: u64 = 256;

/// Sets the umask so that what this process creates is readable and writable by its owner only.
#[cfg(unix)]
pub fn owner_only() {
    // SAFETY: umask only swaps the process's file-mode creation mask; it touches no memory and
    // cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

#[cfg(not(unix))]
pub fn owner_only() {}

/// Creates `dir` (0700) if needed and takes the group and other bits off it and everything in
/// it, so a data dir from before this rule is brought in line.
pub fn create_private(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating the data dir {}", dir.display()))?;
        let dir_was_open = std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o077 != 0);
        let tightened = tighten(dir).with_context(|| format!("making the data dir {} private", dir.display()))?;
        let files = tightened - usize::from(dir_was_open);
        // The directory alone (made by someone else, still empty, say) is routine; files are news.
        if files > 0 {
            tracing::warn!(
                data_dir = %dir.display(),
                files,
                "Files in the data dir were readable by others; they are now private to their owner."
            );
        } else if dir_was_open {
            tracing::info!(data_dir = %dir.display(), "The data dir is now private to its owner.");
        }
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir).with_context(|| format!("creating the data dir {}", dir.display()))?;
    Ok(())
}

/// Takes the group and other bits off `path` and, for a directory, everything below it (links
/// are not followed); returns how many entries changed.
#[cfg(unix)]
fn tighten(path: &Path) -> std::io::Result<usize> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(0);
    }
    let mut changed = 0;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o077))?;
        changed += 1;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            changed += tighten(&entry?.path())?;
        }
    }
    Ok(changed)
}

/// Makes sure the process may open `max_connections` sockets plus its own files, raising the
/// soft open-files limit towards the hard one if needed; if even that is too low, says so and
/// names the setting.
pub fn check_open_files(max_connections: usize) -> Result<()> {
    #[cfg(unix)]
    {
        // rlim_t is u64 on Linux and macOS.
        let need: libc::rlim_t = max_connections as libc::rlim_t + RESERVED_FILES;
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit and setrlimit read and write only the struct passed to them.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return Ok(());
        }
        if lim.rlim_cur < need && lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: need.min(lim.rlim_max), rlim_max: lim.rlim_max };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = raised.rlim_cur;
            }
        }
        if lim.rlim_cur < need {
            anyhow::bail!(
                "--max-connections (OPENQQ_MAX_CONNECTIONS) of {max_connections} needs about {need} open files, but this \
                 process may open only {} (`ulimit -n`); lower the setting or raise the limit",
                lim.rlim_cur
            );
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_data_dir_from_before_is_made_private_to_its_owner() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::write(dir.join("store.db"), b"x").unwrap();
        std::fs::write(dir.join("objects/a"), b"x").unwrap();
        for p in [&dir, &dir.join("objects")] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for p in [dir.join("store.db"), dir.join("objects/a")] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        create_private(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("objects")), 0o700);
        assert_eq!(mode(&dir.join("store.db")), 0o600);
        assert_eq!(mode(&dir.join("objects/a")), 0o600);
    }
}
