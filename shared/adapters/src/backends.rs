//! The set of backends a process runs with, chosen once at start-up.

use crate::embedded::{Durability, EmbeddedDesignStore, EmbeddedEventLog, EmbeddedObjectStore, InProcessRateLimiter};
use openqq_core::ports::PortResult;
use openqq_core::{DesignStore, EventLog, LogSource, ObjectStore, RateLimiter};
use std::path::Path;
use std::sync::Arc;

/// One handle per port. `source` is the consumer side of `log`, used by the local runner.
#[derive(Clone)]
pub struct Backends {
    pub log: Arc<dyn EventLog>,
    pub source: Arc<dyn LogSource>,
    pub store: Arc<dyn DesignStore>,
    /// Large payloads by tenant and digest: full validation reports.
    pub objects: Arc<dyn ObjectStore>,
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
            limiter: Arc::new(InProcessRateLimiter::new()),
        })
    }

    /// The same backends with the event log (both sides) on Kafka; store and limiter stay as
    /// they are. Fails with a clear message on bad settings or unreachable brokers.
    #[cfg(feature = "kafka")]
    pub async fn with_kafka(mut self, settings: crate::kafka::KafkaSettings) -> PortResult<Self> {
        let log = Arc::new(crate::kafka::KafkaEventLog::connect(settings).await?);
        self.log = log.clone();
        self.source = log;
        Ok(self)
    }

    /// The same backends with the design store (designs, timelines, reports, accepted markers,
    /// idempotency keys, usage) on DynamoDB; log, objects and limiter stay as they are.
    /// Against a local endpoint a missing table is created; against AWS it must exist.
    #[cfg(feature = "dynamodb")]
    pub async fn with_dynamodb(mut self, settings: &crate::dynamo::DynamoSettings) -> PortResult<Self> {
        self.store = Arc::new(crate::dynamo::DynamoDesignStore::connect(settings).await?);
        Ok(self)
    }

    /// The same backends with the object store on S3; log, store and limiter stay as they
    /// are. Against a local endpoint a missing bucket is created with its lifecycle rule;
    /// against AWS it must exist.
    #[cfg(feature = "s3")]
    pub async fn with_s3(mut self, settings: &crate::s3::S3Settings) -> PortResult<Self> {
        self.objects = Arc::new(crate::s3::S3ObjectStore::connect(settings).await?);
        Ok(self)
    }
}
