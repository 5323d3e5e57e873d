//! A data dir on a file system of its own that a run can fill: a small tmpfs (mounting one
//! needs root), and a filler that writes until no byte is left.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted at a fresh directory, unmounted when dropped.
pub struct Tmpfs {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` when it cannot be mounted (not root).
    pub fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::create_dir(&path).unwrap();
        let options = format!("size={size},mode=0700");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(Self { path, _dir: dir })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Writes zeros to `path` until the file system is full; the bytes written. Any error but a
/// full file system is one.
pub fn fill(path: &Path) -> std::io::Result<u64> {
    let mut f = std::fs::File::create(path)?;
    let chunk = vec![0u8; 64 << 10];
    let mut written = 0;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => return Err(e),
        }
    }
    let _ = f.sync_all();
    Ok(written)
}
