//! The local JWT secret: `OPENQQ_JWT_SECRET` if set, else `<data-dir>/jwt-secret`, created on
//! first use with owner-only permissions. Never printed or logged.

use anyhow::{Context, Result};
use std::path::Path;

pub const ENV: &str = "OPENQQ_JWT_SECRET";

pub fn load_or_create(data_dir: &Path) -> Result<Vec<u8>> {
    if let Ok(s) = std::env::var(ENV) {
        return Ok(s.into_bytes());
    }
    let path = data_dir.join("jwt-secret");
    if let Ok(s) = std::fs::read_to_string(&path) {
        return Ok(s.trim().as_bytes().to_vec());
    }
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating the data dir {}", data_dir.display()))?;
    let secret: String = (0..32).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
    write_private(&path, &secret).with_context(|| format!("writing {}", path.display()))?;
    Ok(secret.into_bytes())
}

#[cfg(unix)]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(contents.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    std::fs::write(path, contents)
}
