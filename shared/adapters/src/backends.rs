//! The set of backends a process runs with, chosen once at start-up.

use crate::embedded::{Durability, EmbeddedDesignStore, EmbeddedEventLog, EmbeddedObjectStore, InProcessRateLimiter};
use openqq_core::ports::PortResult;
use openqq_core::{DesignStore, EventLog, LogSource, ObjectStore, PresignedUploads, RateLimiter};
use std::path::Path;
use std::sync::Arc;

/// One handle per port. `source` is the consumer side of `log`, used by the local runner. The
/// platform builder (`openqq_platform`) fills each from its settings; [`Backends::embedded`] puts
/// them all in one directory, as tests do.
#[derive(Clone)]
pub struct Backends {
    pub log: Arc<dyn EventLog>,
    pub source: Arc<dyn LogSource>,
    pub store: Arc<dyn DesignStore>,
    /// Large payloads by tenant and digest: full validation reports.
    pub objects: Arc<dyn ObjectStore>,
    /// The object store's direct uploads, when it has them (S3).
    pub presigned: Option<Arc<dyn PresignedUploads>>,
    pub limiter: Arc<dyn RateLimiter>,
}

impl Backends {
    /// Everything embedded, durable in `dir` (created if missing).
    pub fn embedded(dir: &Path, partitions: u32, durability: Durability) -> PortResult<Self> {
        Self::embedded_with(dir, partitions, durability, &crate::embedded::EmbeddedOptions::default())
    }

    /// Everything embedded, with the log's retention and the store's readers as `options` say.
    pub fn embedded_with(
        dir: &Path,
        partitions: u32,
        durability: Durability,
        options: &crate::embedded::EmbeddedOptions,
    ) -> PortResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            openqq_core::PortError::from(crate::SettingsError::caused_by(
                format!("cannot create {}: {e}", dir.display()),
                e,
            ))
        })?;
        let log = Arc::new(match &options.retention {
            Some(retention) => EmbeddedEventLog::open_with_retention(dir, partitions, durability, retention.clone())?,
            None => EmbeddedEventLog::open(dir, partitions, durability)?,
        });
        Ok(Self {
            log: log.clone(),
            source: log,
            store: Arc::new(EmbeddedDesignStore::open_with_readers(dir, durability, options.store_readers())?),
            objects: Arc::new(EmbeddedObjectStore::open(dir)?),
            presigned: None,
            limiter: Arc::new(InProcessRateLimiter::new()),
        })
    }
}
