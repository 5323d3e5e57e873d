//! Ports: the small traits through which domain code reaches the outside world. Adapters live in
//! `openqq-adapters`; each port has one conformance suite every adapter must pass.
//!
//! All ports share one error type, [`PortError`], whose variants are semantic and classified:
//! [`PortError::is_retriable`] decides whether a consumer batch fails (and is retried) or a
//! record is dead-lettered.

use crate::ids::TenantId;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

pub use crate::error::*;
pub use crate::object::{ObjectRef, MAX_OBJECT_BYTES};
pub use crate::page::Page;
pub use crate::record::{by_topic, check_record_sizes, LogRecord, Record, MAX_RECORD_BYTES};
pub use crate::revision::Applied;

// ---------------------------------------------------------------------------------------------
// Event log

/// Producer side. `publish` returns only once every record is durable; records of one call keep
/// their order within their partition, and a retried call never reorders earlier records.
#[async_trait]
pub trait EventLog: Send + Sync {
    async fn publish(&self, topic: &str, records: Vec<Record>) -> PortResult<()>;
}

/// Consumer side, used by the local event-source-mapping emulator (on AWS the MSK trigger does
/// this). Offsets are "next offset to read"; a group with no commit starts at 0 (TRIM_HORIZON).
#[async_trait]
pub trait LogSource: Send + Sync {
    /// Number of partitions of `topic`.
    fn partitions(&self, topic: &str) -> u32;
    /// Up to `max` records of one partition starting at `from`, in offset order.
    async fn read(&self, topic: &str, partition: u32, from: u64, max: usize) -> PortResult<Vec<LogRecord>>;
    /// The next offset that will be written to each partition (the high-water mark).
    async fn end_offsets(&self, topic: &str) -> PortResult<Vec<u64>>;
    async fn committed(&self, group: &str, topic: &str, partition: u32) -> PortResult<u64>;
    async fn commit(&self, group: &str, topic: &str, partition: u32, next: u64) -> PortResult<()>;
    /// Resolves when something may have been appended to `topic` (or after a short while);
    /// consumers use it to avoid busy polling.
    async fn wait_for_append(&self, topic: &str, timeout: Duration);
    /// Joins consumer group `group` on `topic`: the lease says which partitions this process may
    /// consume. A log only one process reads (the embedded one) leases every partition for good.
    async fn join(&self, _group: &str, _topic: &str) -> PortResult<Arc<dyn Lease>> {
        Ok(Arc::new(WholeTopic))
    }
}

/// The partitions of a topic a consumer-group member holds. Where several processes consume
/// (Kafka), the group divides the partitions among them and moves some when a member joins or
/// leaves; a partition is taken from a member only once its batch in flight has ended, so a
/// batch's commit lands before the next owner reads the committed offset.
pub trait Lease: Send + Sync {
    /// Marks `partition` busy for one batch and returns its assignment epoch, or `None` when
    /// this member does not hold it. The epoch changes each time the partition is assigned
    /// here anew: another member may have moved its committed offset meanwhile.
    fn begin(&self, partition: u32) -> Option<u64>;
    /// The batch that `begin` started on `partition` has ended (committed or not).
    fn end(&self, partition: u32);
    /// Leaves the group, handing the partitions to the other members. Call once no batch is in
    /// flight.
    fn leave(&self) {}
}

/// The lease of a topic with a single consumer process: every partition, always, epoch 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct WholeTopic;

impl Lease for WholeTopic {
    fn begin(&self, _partition: u32) -> Option<u64> {
        Some(0)
    }
    fn end(&self, _partition: u32) {}
}

// ---------------------------------------------------------------------------------------------
// Design store: its roles (`store`)

mod store;
pub use store::*;

// ---------------------------------------------------------------------------------------------
// Rate limiter

/// At most `limit` admissions in any window of length `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub limit: u32,
    pub window: Duration,
}

/// One limiter decision, with what the `RateLimit-*` headers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    /// Admissions still possible in the current window after this decision.
    pub remaining: u32,
    /// Time until the oldest admission in the window expires (a slot frees up).
    pub reset: Duration,
    /// The limiter's clock reading for this decision, in microseconds (server time for Redis).
    pub now_micros: u64,
}

/// What a weighted check counts ([`RateLimiter::check_weighted`]): each meter keeps a log of its
/// own per tenant, so one quota never spends another's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Meter {
    /// Request-body bytes, and the bytes a design names by reference.
    Bytes,
    /// Batch items submitted (`--tenant-batch-items`).
    BatchItems,
}

impl Meter {
    /// The meter's name, as limiter keys and metrics carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Meter::Bytes => "bytes",
            Meter::BatchItems => "batch_items",
        }
    }
}

#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Checks and, if allowed, records one request of `tenant`. Rejections are not recorded.
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision>;

    /// Checks and, if allowed, records `cost` units of `meter` (request-body bytes, say) of
    /// `tenant`, with `quota.limit` counted in those units: admitted only if the units admitted in
    /// the window plus `cost` stay within the limit, so a cost over the limit is never admitted
    /// and a cost of 0 always is. Each meter's log is kept apart from the others' and from
    /// [`check`](Self::check)'s, so requests and each kind of unit are limited independently.
    /// Rejections are not recorded.
    ///
    /// In the decision, `remaining` is the units still free in the window; `reset` is, for an
    /// admission, the time until the oldest entry expires and, for a rejection, the time until
    /// enough units expire for `cost` to fit (the whole window when it never can).
    async fn check_weighted(&self, tenant: &TenantId, meter: Meter, quota: Quota, cost: u32) -> PortResult<Decision>;
}

// ---------------------------------------------------------------------------------------------
// Object store

/// Large payloads (full reports, later netlists and bitstreams) by tenant and content digest.
/// Objects are immutable: storing the same bytes again returns the same reference. A tenant only
/// ever reads its own objects; another tenant's digest is [`PortError::NotFound`], exactly like
/// a digest nobody stored.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Stores `bytes` for `tenant` (at most [`MAX_OBJECT_BYTES`], else [`PortError::Invalid`]);
    /// returns once they are durable.
    async fn put(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef>;
    /// The bytes of `tenant`'s object `digest`, checked against the digest (a stored object that
    /// no longer matches is [`PortError::Corrupt`]). A malformed digest is
    /// [`PortError::Invalid`].
    async fn get(&self, tenant: &TenantId, digest: &str) -> PortResult<Vec<u8>>;
    /// The bytes `tenant`'s objects take (each distinct object once), for the storage quota.
    async fn usage(&self, tenant: &TenantId) -> PortResult<u64>;
    /// Whether `tenant` has object `digest`, and its length; `None` if it has not (another
    /// tenant's object included). A malformed digest is [`PortError::Invalid`].
    async fn stat(&self, tenant: &TenantId, digest: &str) -> PortResult<Option<u64>>;
    /// Keeps bytes a client uploaded through the API: like [`ObjectStore::put`], but until
    /// [`ObjectStore::adopt_upload`] makes them one of `tenant`'s objects they are an upload,
    /// which expires if no submission adopts it.
    async fn put_upload(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef>;
    /// Makes an upload (through the API, or directly to a [`PresignedUploads`] target) part of
    /// `tenant`'s objects, checked against its digest and length: afterwards
    /// [`ObjectStore::stat`] finds it. Adopting what is already stored is a no-op; nothing
    /// uploaded under that digest is [`PortError::NotFound`]; bytes that do not match are
    /// [`PortError::Invalid`].
    async fn adopt_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<()>;
    /// The bytes of an upload, checked against its digest and length, without adopting it: it
    /// stays an upload and expires as one (a batch's `items_ref`, read once and kept as the
    /// batch's items). If `tenant` has that object already, its bytes. Neither is
    /// [`PortError::NotFound`]; bytes that do not match are [`PortError::Invalid`].
    async fn read_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<Vec<u8>>;
    /// Deletes `tenant`'s object `digest` (a design's, once the design is deleted); `false` when
    /// the tenant had no such object. Another tenant's object of the same digest is untouched. A
    /// malformed digest is [`PortError::Invalid`].
    async fn delete(&self, tenant: &TenantId, digest: &str) -> PortResult<bool>;
}

/// A capability of some object stores (S3): clients upload an object themselves, to a presigned
/// target, instead of through the API. A store without it takes uploads through the API only
/// ([`ObjectStore::put_upload`]).
#[async_trait]
pub trait PresignedUploads: Send + Sync {
    /// Where `tenant`'s client may upload exactly `object` itself, valid for `ttl`; the upload
    /// becomes an object once [`ObjectStore::adopt_upload`]ed.
    async fn presign_upload(&self, tenant: &TenantId, object: &ObjectRef, ttl: Duration) -> PortResult<UploadTarget>;
}

/// How a client uploads an object directly: an HTTP `method` to `url` with exactly these
/// `headers`, before `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UploadTarget {
    pub method: String,
    pub url: String,
    pub headers: std::collections::BTreeMap<String, String>,
    pub expires_at: chrono::DateTime<chrono::Utc>,
}
