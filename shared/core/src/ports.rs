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

/// The error underneath a port error: what the adapter caught from its backend (a
/// `rusqlite::Error`, an SDK error, a `redis::RedisError`, an `io::Error` …), kept so the chain
/// reaches it through [`std::error::Error::source`].
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, in words, and the error underneath when the adapter caught one. The words
/// are what the port error shows (in logs and problem details); the cause is its `source`.
#[derive(Debug)]
pub struct Failure {
    message: String,
    cause: Option<Cause>,
}

impl Failure {
    pub fn new(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self { message: message.into(), cause: Some(cause.into()) }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error underneath, when one was caught.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// A failure with words only (a deadline passed, a state nothing raised an error for).
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self { message, cause: None }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The one error type of every port. Its variants are semantic, and each is classified: see
/// [`PortError::is_retriable`]. Where the adapter caught an error from its backend, that error
/// is this one's [`source`](std::error::Error::source); the message keeps its text as well, so
/// a log line that prints only the message still says what happened.
#[derive(Debug)]
pub enum PortError {
    /// The thing asked for does not exist (for this tenant). Permanent.
    NotFound,
    /// A conditional write lost against a newer state (S3's `PreconditionFailed`, DynamoDB's
    /// `ConditionalCheckFailed`). Permanent for that write.
    ConditionFailed(String),
    /// The backend asked us to slow down. Retriable.
    Throttled { retry_after: Option<Duration> },
    /// The backend could not be reached or did not answer in time. Retriable.
    Unavailable(Failure),
    /// The request itself is wrong (too large, malformed). Permanent. What is wrong is the
    /// request, so there is no error underneath to keep.
    Invalid(String),
    /// Anything else the backend reported, with its own classification kept.
    Backend { message: String, retriable: bool, source: Option<Cause> },
    /// A setting the adapter cannot work with (a broker list that is not `HOST:PORT`, a URL it
    /// cannot parse), refused when it was opened or connected: the operator's to fix. Permanent.
    /// Its message is a sentence naming what is wrong; the error underneath, if any, is kept.
    Settings(Failure),
}

impl PortError {
    /// The backend could not be reached or did not answer, because of `cause`.
    pub fn unavailable(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        PortError::Unavailable(Failure::new(message, cause))
    }

    /// Anything else the backend reported (`cause`), retriable or not as the adapter judged it.
    pub fn backend(message: impl Into<String>, retriable: bool, cause: impl Into<Cause>) -> Self {
        PortError::Backend { message: message.into(), retriable, source: Some(cause.into()) }
    }

    /// Like [`backend`](Self::backend) for a failure the adapter detected itself (a checksum
    /// that does not match, a task that did not finish): there is no error underneath.
    pub fn backend_message(message: impl Into<String>, retriable: bool) -> Self {
        PortError::Backend { message: message.into(), retriable, source: None }
    }

    /// Whether trying the same call again may succeed: a consumer fails (and retries) its batch
    /// on a retriable error and dead-letters the record on any other; the API answers 503 to the
    /// first kind and a 4xx or 500 to the rest.
    pub fn is_retriable(&self) -> bool {
        match self {
            PortError::Throttled { .. } | PortError::Unavailable(_) => true,
            PortError::Backend { retriable, .. } => *retriable,
            PortError::NotFound | PortError::ConditionFailed(_) | PortError::Invalid(_) | PortError::Settings(_) => {
                false
            }
        }
    }

    /// `n` errors of this one's kind and message, each keeping this one as its cause: what each
    /// caller of a shared write that failed is answered.
    pub fn copies(self, n: usize) -> Vec<PortError> {
        let shared = Arc::new(self);
        (0..n).map(|_| same_kind(&shared)).collect()
    }

    /// A short, bounded name of the variant: tests compare two adapters' errors by it.
    pub fn label(&self) -> &'static str {
        match self {
            PortError::NotFound => "not_found",
            PortError::ConditionFailed(_) => "condition_failed",
            PortError::Throttled { .. } => "throttled",
            PortError::Unavailable(_) => "unavailable",
            PortError::Invalid(_) => "invalid",
            PortError::Backend { .. } => "backend",
            PortError::Settings(_) => "settings",
        }
    }
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortError::NotFound => f.write_str("not found"),
            PortError::ConditionFailed(message) => write!(f, "condition failed: {message}"),
            PortError::Throttled { .. } => f.write_str("throttled"),
            PortError::Unavailable(failure) => write!(f, "unavailable: {failure}"),
            PortError::Invalid(message) => write!(f, "invalid: {message}"),
            PortError::Backend { message, .. } => f.write_str(message),
            PortError::Settings(failure) => write!(f, "{failure}"),
        }
    }
}

/// Written out rather than derived: an unavailable port's cause sits inside its [`Failure`]
/// (one field, so `PortError::Unavailable("…".into())` reads as it always has), and the chain
/// goes from the port error straight to that cause, with no link in between.
impl std::error::Error for PortError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let cause = match self {
            PortError::Unavailable(failure) | PortError::Settings(failure) => failure.cause(),
            PortError::Backend { source, .. } => source.as_deref(),
            PortError::NotFound
            | PortError::ConditionFailed(_)
            | PortError::Throttled { .. }
            | PortError::Invalid(_) => None,
        };
        cause.map(|e| e as &(dyn std::error::Error + 'static))
    }
}

pub type PortResult<T> = Result<T, PortError>;

/// An error of the same kind and message as `e`, with `e` kept as its cause.
fn same_kind(e: &Arc<PortError>) -> PortError {
    let cause = || Shared(e.clone());
    match e.as_ref() {
        PortError::NotFound => PortError::NotFound,
        PortError::ConditionFailed(m) => PortError::ConditionFailed(m.clone()),
        PortError::Throttled { retry_after } => PortError::Throttled { retry_after: *retry_after },
        PortError::Unavailable(f) => PortError::Unavailable(Failure::new(f.message(), cause())),
        PortError::Invalid(m) => PortError::Invalid(m.clone()),
        PortError::Backend { message, retriable, .. } => {
            PortError::Backend { message: message.clone(), retriable: *retriable, source: Some(Box::new(cause())) }
        }
        PortError::Settings(f) => PortError::Settings(Failure::new(f.message(), cause())),
    }
}

/// The error of a shared write, as the cause of each caller's own error.
#[derive(Debug)]
struct Shared(Arc<PortError>);

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the shared write failed: {}", self.0)
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.0.as_ref())
    }
}

// ---------------------------------------------------------------------------------------------
// Event log

/// Largest record value any event-log adapter accepts: Kafka's default `message.max.bytes`
/// (1 MiB), so what the embedded log accepts, MSK accepts too.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// A record to publish. The key is the tenant id, so a tenant's records share one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: String,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Refuses (permanently) any record over [`MAX_RECORD_BYTES`]; every event-log adapter calls
/// it before writing anything, so a batch is never half-published for size.
pub fn check_record_sizes(records: &[Record]) -> PortResult<()> {
    match records.iter().find(|r| r.value.len() > MAX_RECORD_BYTES) {
        Some(r) => Err(PortError::Invalid(format!(
            "record of {} bytes exceeds the {MAX_RECORD_BYTES}-byte limit",
            r.value.len()
        ))),
        None => Ok(()),
    }
}

/// `items` gathered by topic: one entry per topic, topics in the order they first appear, each
/// topic's items in the order they came. What one append per topic publishes.
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut grouped: Vec<(String, Vec<T>)> = Vec::new();
    for (topic, item) in items {
        match grouped.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, run)) => run.push(item),
            None => grouped.push((topic, vec![item])),
        }
    }
    grouped
}

/// A record as stored in a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: String,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

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

#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Checks and, if allowed, records one request of `tenant`. Rejections are not recorded.
    async fn check(&self, tenant: &TenantId, quota: Quota) -> PortResult<Decision>;

    /// Checks and, if allowed, records `cost` units (request-body bytes, say) of `tenant`, with
    /// `quota.limit` counted in those units: admitted only if the units admitted in the window
    /// plus `cost` stay within the limit, so a cost over the limit is never admitted and a cost
    /// of 0 always is. The weighted log is kept apart from [`check`](Self::check)'s, so requests
    /// and units are limited independently. Rejections are not recorded.
    ///
    /// In the decision, `remaining` is the units still free in the window; `reset` is, for an
    /// admission, the time until the oldest entry expires and, for a rejection, the time until
    /// enough units expire for `cost` to fit (the whole window when it never can).
    async fn check_weighted(&self, tenant: &TenantId, quota: Quota, cost: u32) -> PortResult<Decision>;
}

// ---------------------------------------------------------------------------------------------
// Object store

/// Largest object an object-store adapter accepts, in bytes (a full validation report of the
/// largest netlist the API accepts fits several times over).
pub const MAX_OBJECT_BYTES: usize = 64 * 1024 * 1024;

/// Where an object is: its SHA-256 (lower-case hex) and its length. Serialised as
/// `{"digest": "…", "bytes": n}` wherever a record or a report points at one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectRef {
    pub digest: String,
    pub bytes: u64,
}

impl ObjectRef {
    /// Whether `digest` has the form of a SHA-256 in lower-case hex (64 characters).
    pub fn well_formed(digest: &str) -> bool {
        digest.len() == 64 && digest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

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
    /// no longer matches is a permanent [`PortError::Backend`] error). A malformed digest is
    /// [`PortError::Invalid`].
    async fn get(&self, tenant: &TenantId, digest: &str) -> PortResult<Vec<u8>>;
    /// The bytes `tenant`'s objects take (each distinct object once), for the storage quota.
    async fn usage(&self, tenant: &TenantId) -> PortResult<u64>;
    /// Whether `tenant` has object `digest`, and its length; `None` if it has not (another
    /// tenant's object included). A malformed digest is [`PortError::Invalid`].
    async fn stat(&self, tenant: &TenantId, digest: &str) -> PortResult<Option<u64>>;
    /// Keeps bytes a client uploaded through the API (no direct upload): like [`ObjectStore::put`],
    /// but until [`ObjectStore::adopt_upload`] makes them one of `tenant`'s objects they are an
    /// upload, which expires if no submission adopts it. Stores whose uploads never expire keep
    /// them as objects at once (the default).
    async fn put_upload(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef> {
        self.put(tenant, bytes).await
    }
    /// Where `tenant`'s client may upload exactly `object` itself, valid for `ttl` (a presigned
    /// URL on S3). `None` means this store takes no direct uploads: the API receives the bytes
    /// and [`ObjectStore::put`]s them.
    async fn presign_upload(
        &self,
        _tenant: &TenantId,
        _object: &ObjectRef,
        _ttl: Duration,
    ) -> PortResult<Option<UploadTarget>> {
        Ok(None)
    }
    /// Makes an object the client uploaded directly (see [`ObjectStore::presign_upload`]) part of
    /// `tenant`'s objects, checked against its digest and length: afterwards
    /// [`ObjectStore::stat`] finds it and unadopted uploads may expire. Nothing uploaded under
    /// that digest is [`PortError::NotFound`]; bytes that do not match are [`PortError::Invalid`].
    /// Stores without direct uploads only check that the object is there.
    async fn adopt_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<()> {
        match self.stat(tenant, &object.digest).await? {
            Some(n) if n == object.bytes => Ok(()),
            Some(n) => Err(PortError::Invalid(format!("the object is {n} bytes, not {}", object.bytes))),
            None => Err(PortError::NotFound),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_retriable_or_permanent() {
        assert!(PortError::Unavailable("x".into()).is_retriable());
        assert!(PortError::Throttled { retry_after: None }.is_retriable());
        assert!(!PortError::Invalid("x".into()).is_retriable());
        assert!(!PortError::ConditionFailed("x".into()).is_retriable());
        assert!(PortError::backend_message("m", true).is_retriable());
        assert!(!PortError::backend_message("m", false).is_retriable());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the disk is on fire")]
    struct Underneath;

    fn chain(e: &PortError) -> Vec<String> {
        std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source()).map(ToString::to_string).collect()
    }

    #[test]
    fn an_unavailable_or_backend_error_keeps_its_cause_as_its_source() {
        let unavailable = PortError::unavailable("writing failed", Underneath);
        assert_eq!(chain(&unavailable), ["unavailable: writing failed", "the disk is on fire"]);
        let source = std::error::Error::source(&unavailable).unwrap();
        assert!(source.downcast_ref::<Underneath>().is_some(), "the cause itself, not a copy of its text");

        let backend = PortError::backend("the table is gone", false, Underneath);
        assert_eq!(chain(&backend), ["the table is gone", "the disk is on fire"]);
        assert!(!backend.is_retriable());
    }

    #[test]
    fn an_error_from_words_only_shows_the_same_text_and_has_no_source() {
        let e = PortError::Unavailable("redis did not answer".into());
        assert_eq!(e.to_string(), "unavailable: redis did not answer");
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(PortError::backend_message("checksum", false).to_string(), "checksum");
        assert_eq!(PortError::Invalid("too large".into()).to_string(), "invalid: too large");
        assert_eq!(PortError::ConditionFailed("lost".into()).to_string(), "condition failed: lost");
    }
}
