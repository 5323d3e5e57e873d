//! The embedded log's one writer: it assigns offsets from what it appended itself, so a second
//! process appending would take the offsets the first appends next. `openqq up` and
//! `openqq dead-letters replay` hold [`WriterLock`] on `log.lock` in the data dir while they may
//! append; readers (`openqq dead-letters list`) need nothing. The lock is the kernel's advisory
//! file lock, released when its process ends however it ends, so a crash leaves nothing behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

/// Held while this process may append to the embedded log in a data dir.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// The lock of the log in `dir`, or `None` while another process holds it.
    pub fn try_acquire(dir: &Path) -> std::io::Result<Option<Self>> {
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("log.lock"))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_free_again_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let held = WriterLock::try_acquire(dir.path()).unwrap().expect("a free lock is taken");
        // A second open file description is refused while the first holds it (as another
        // process's would be).
        assert!(WriterLock::try_acquire(dir.path()).unwrap().is_none(), "held elsewhere");
        drop(held);
        assert!(WriterLock::try_acquire(dir.path()).unwrap().is_some(), "released when dropped");
    }
}
