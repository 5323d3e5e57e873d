//! The embedded object store: one file per object, `<data-dir>/objects/<tenant>/<digest>`.
//!
//! A put writes a temporary file in the tenant's directory, syncs it and renames it into place,
//! so a reader sees a whole object or none, and two puts of the same bytes race harmlessly (the
//! content is the name). Files are 0600 and directories 0700: only the platform's own user reads
//! them. The tenant's directory name is its id; tenant ids never begin with a dot
//! (`openqq_core::TENANT_ID_GRAMMAR`), and leading dots are escaped (`%2E`) all the same, so
//! even an id from before the grammar (`.`, `..`) could never name a place outside `objects/`;
//! `%` never occurs in an id, so the mapping is one to one.

use openqq_core::ports::PortResult;
use openqq_core::{ObjectRef, ObjectStore, PortError, TenantId};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct EmbeddedObjectStore {
    /// `<data-dir>/objects`.
    root: PathBuf,
    /// `<data-dir>/uploads`: uploads through the API that no submission has adopted yet.
    uploads: PathBuf,
    /// How long an upload waits for its submission before it is swept.
    upload_ttl: Duration,
}

/// How long an unadopted upload is kept: a day, as the S3 bucket's lifecycle rule keeps them.
pub const UPLOAD_TTL: Duration = Duration::from_secs(24 * 3600);

impl EmbeddedObjectStore {
    /// Opens (or creates) `dir/objects` and `dir/uploads`.
    pub fn open(dir: &Path) -> PortResult<Self> {
        Self::open_with_upload_ttl(dir, UPLOAD_TTL)
    }

    /// [`EmbeddedObjectStore::open`] with unadopted uploads kept for `upload_ttl`.
    pub fn open_with_upload_ttl(dir: &Path, upload_ttl: Duration) -> PortResult<Self> {
        let (root, uploads) = (dir.join("objects"), dir.join("uploads"));
        create_private_dir(&root)?;
        create_private_dir(&uploads)?;
        Ok(Self { root, uploads, upload_ttl })
    }

    fn tenant_dir(&self, tenant: &TenantId) -> PathBuf {
        self.root.join(tenant_dir_name(tenant))
    }

    fn tenant_uploads(&self, tenant: &TenantId) -> PathBuf {
        self.uploads.join(tenant_dir_name(tenant))
    }
}

/// A tenant's directory name: its id with leading dots escaped.
fn tenant_dir_name(tenant: &TenantId) -> String {
    escaped(tenant.as_str())
}

/// `id` with its leading dots escaped as `%2E`.
fn escaped(id: &str) -> String {
    let dots = id.len() - id.trim_start_matches('.').len();
    format!("{}{}", "%2E".repeat(dots), &id[dots..])
}

/// Deletes the uploads in `dir` older than `ttl` (and temporary files left by a crash).
fn sweep(dir: &Path, ttl: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= ttl);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The bytes every file in `dir` takes (0 when there is no such directory).
fn dir_bytes(dir: &Path) -> PortResult<u64> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_error("listing", dir, e)),
    };
    let mut bytes = 0;
    for entry in entries {
        let entry = entry.map_err(|e| io_error("listing", dir, e))?;
        bytes += entry.metadata().map_err(|e| io_error("reading the size of", &entry.path(), e))?.len();
    }
    Ok(bytes)
}

/// The lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> PortError {
    use std::io::ErrorKind::*;
    if matches!(e.kind(), StorageFull | QuotaExceeded) {
        return PortError::storage_full(format!("object store: {what} {}: {e}", path.display()), e);
    }
    // A full disk or a busy file system may clear; a missing permission will not.
    let retriable = !matches!(e.kind(), PermissionDenied | InvalidInput | InvalidData);
    PortError::backend(format!("object store: {what} {}: {e}", path.display()), retriable, e)
}

fn create_private_dir(path: &Path) -> PortResult<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path).map_err(|e| io_error("creating", path, e))
}

fn write_atomically(dir: &Path, digest: &str, bytes: &[u8]) -> PortResult<()> {
    let path = dir.join(digest);
    if path.exists() {
        return Ok(());
    }
    create_private_dir(dir)?;
    let tmp = dir.join(format!(".{digest}.{}.tmp", uuid::Uuid::now_v7().simple()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error("writing", &path, e));
    }
    // The rename is durable once the directory entry is.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[async_trait::async_trait]
impl ObjectStore for EmbeddedObjectStore {
    async fn put(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef> {
        ObjectRef::check_size(bytes.len() as u64)?;
        let dir = self.tenant_dir(tenant);
        tokio::task::spawn_blocking(move || {
            let digest = sha256_hex(&bytes);
            write_atomically(&dir, &digest, &bytes)?;
            Ok(ObjectRef { digest, bytes: bytes.len() as u64 })
        })
        .await
        .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))?
    }

    async fn get(&self, tenant: &TenantId, digest: &str) -> PortResult<Vec<u8>> {
        ObjectRef::check_digest(digest)?;
        let path = self.tenant_dir(tenant).join(digest);
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || {
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PortError::NotFound),
                Err(e) => return Err(io_error("reading", &path, e)),
            };
            if sha256_hex(&bytes) != digest {
                return Err(PortError::corrupt(
                    "stored object",
                    format!("{} does not match its digest", path.display()),
                ));
            }
            Ok(bytes)
        })
        .await
        .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))?
    }

    async fn usage(&self, tenant: &TenantId) -> PortResult<u64> {
        let (dir, uploads) = (self.tenant_dir(tenant), self.tenant_uploads(tenant));
        // Uploads waiting for their submission, and temporary files of puts in progress, count
        // too: they take the space.
        tokio::task::spawn_blocking(move || Ok(dir_bytes(&dir)? + dir_bytes(&uploads)?))
            .await
            .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))?
    }

    async fn put_upload(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef> {
        ObjectRef::check_size(bytes.len() as u64)?;
        let (dir, ttl) = (self.tenant_uploads(tenant), self.upload_ttl);
        tokio::task::spawn_blocking(move || {
            // Each upload sweeps its tenant's expired ones: what a tenant leaves is bounded by
            // what it uploads in a day, which its storage quota bounds.
            sweep(&dir, ttl);
            let digest = sha256_hex(&bytes);
            write_atomically(&dir, &digest, &bytes)?;
            Ok(ObjectRef { digest, bytes: bytes.len() as u64 })
        })
        .await
        .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))?
    }

    async fn adopt_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<()> {
        if let Some(n) = self.stat(tenant, &object.digest).await? {
            return object.check_length(n);
        }
        let (from, dir, object) =
            (self.tenant_uploads(tenant).join(&object.digest), self.tenant_dir(tenant), object.clone());
        tokio::task::spawn_blocking(move || {
            let bytes = match std::fs::read(&from) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PortError::NotFound),
                Err(e) => return Err(io_error("reading", &from, e)),
            };
            if bytes.len() as u64 != object.bytes || sha256_hex(&bytes) != object.digest {
                return Err(PortError::invalid("upload", "its bytes do not match its digest and length"));
            }
            write_atomically(&dir, &object.digest, &bytes)?;
            let _ = std::fs::remove_file(&from);
            Ok(())
        })
        .await
        .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))?
    }

    async fn read_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<Vec<u8>> {
        ObjectRef::check_digest(&object.digest)?;
        let (from, checked) = (self.tenant_uploads(tenant).join(&object.digest), object.clone());
        let upload = tokio::task::spawn_blocking(move || match std::fs::read(&from) {
            Ok(bytes) if bytes.len() as u64 == checked.bytes && sha256_hex(&bytes) == checked.digest => Ok(Some(bytes)),
            Ok(_) => Err(PortError::invalid("upload", "its bytes do not match its digest and length")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("reading", &from, e)),
        })
        .await
        .map_err(|e| PortError::backend(format!("object store task: {e}"), true, e))??;
        match upload {
            Some(bytes) => Ok(bytes),
            None => {
                let bytes = self.get(tenant, &object.digest).await?;
                object.check_length(bytes.len() as u64)?;
                Ok(bytes)
            }
        }
    }

    async fn stat(&self, tenant: &TenantId, digest: &str) -> PortResult<Option<u64>> {
        ObjectRef::check_digest(digest)?;
        let path = self.tenant_dir(tenant).join(digest);
        match std::fs::metadata(&path) {
            Ok(meta) => Ok(Some(meta.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("reading the size of", &path, e)),
        }
    }

    async fn delete(&self, tenant: &TenantId, digest: &str) -> PortResult<bool> {
        ObjectRef::check_digest(digest)?;
        let path = self.tenant_dir(tenant).join(digest);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("deleting", &path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_of_dots_stays_inside_the_objects_directory() {
        // The grammar refuses these as tenant ids; the escaping holds for them all the same.
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedObjectStore::open(dir.path()).unwrap();
        for id in [".", "..", "..a", "a..b", "acme"] {
            let path = store.root.join(escaped(id));
            assert_eq!(path.parent(), Some(store.root.as_path()), "{id} maps to {}", path.display());
            assert!(!path.file_name().unwrap().to_str().unwrap().starts_with('.'), "{id}");
        }
        assert_eq!(escaped(".."), "%2E%2E");
        assert_eq!(store.tenant_dir(&TenantId::parse("a..b").unwrap()), store.root.join("a..b"));
        assert!(TenantId::parse("%2Ea").is_err(), "no tenant id can take an escaped name");
    }

    #[tokio::test]
    async fn objects_are_private_files_named_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedObjectStore::open(dir.path()).unwrap();
        let tenant = TenantId::parse("acme").unwrap();
        let r = store.put(&tenant, b"hello".to_vec()).await.unwrap();
        let path = dir.path().join("objects").join("acme").join(&r.digest);
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
            let d = std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777;
            assert_eq!(d, 0o700);
        }
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
        std::fs::write(&path, b"tampered").unwrap();
        let err = store.get(&tenant, &r.digest).await.unwrap_err();
        assert!(!err.is_retriable(), "a corrupted object is reported, not served: {err}");
    }

    #[tokio::test]
    async fn an_upload_through_the_api_becomes_an_object_only_when_adopted_and_otherwise_expires() {
        let dir = tempfile::tempdir().unwrap();
        let t = TenantId::parse("acme").unwrap();
        let store = EmbeddedObjectStore::open(dir.path()).unwrap();
        let up = store.put_upload(&t, vec![7; 5000]).await.unwrap();
        assert_eq!(store.stat(&t, &up.digest).await.unwrap(), None, "an upload is no object yet");
        assert_eq!(store.usage(&t).await.unwrap(), 5000, "but it takes the tenant's space");
        let other = TenantId::parse("globex").unwrap();
        assert!(matches!(store.adopt_upload(&other, &up).await, Err(PortError::NotFound)), "nobody else adopts it");
        store.adopt_upload(&t, &up).await.unwrap();
        assert_eq!(store.get(&t, &up.digest).await.unwrap(), vec![7; 5000]);
        assert_eq!(store.usage(&t).await.unwrap(), 5000, "adopted, it is counted once");
        store.adopt_upload(&t, &up).await.unwrap();

        // With no time to wait, the next upload sweeps the one no submission adopted.
        let hasty = EmbeddedObjectStore::open_with_upload_ttl(dir.path(), Duration::ZERO).unwrap();
        let forgotten = hasty.put_upload(&t, vec![1; 300]).await.unwrap();
        hasty.put_upload(&t, vec![2; 200]).await.unwrap();
        assert!(matches!(hasty.adopt_upload(&t, &forgotten).await, Err(PortError::NotFound)), "it expired");
        assert_eq!(hasty.usage(&t).await.unwrap(), 5000 + 200);
    }
}
