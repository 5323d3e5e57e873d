//! The domain core of OpenQQuantify: what an event is, what a design is, and the ports through
//! which the functions reach storage, the log, the limiter and notifications.
//!
//! Nothing here performs I/O. The modules fit together like this:
//!
//! - [`ids`]: tenant, design and correlation identifiers, validated once at the edge.
//! - [`event`]: the [`Envelope`] every record carries, the event [`EventKind`]s, their payloads,
//!   the record headers, and the dead-letter record.
//! - [`design`]: the design specification tenants submit and the status state machine
//!   (`submitted → validating → ready | failed`).
//! - [`batch`]: batches of design jobs, tracked as a whole, and the window that keeps one
//!   tenant's batch from holding the batch lane.
//! - [`budget`]: generation token budgets per tenant and UTC day, charged atomically in the store.
//! - [`hdl`]: designs as HDL source, with testbenches and a reference, and their shape checks.
//! - [`accepted`]: read-your-writes after a 202: how a revision the API accepted shows in reads
//!   before the consumers materialise it.
//! - [`partition`]: the stable tenant → partition mapping (Kafka's murmur2, so the embedded log
//!   and a Kafka cluster agree).
//! - [`revision`]: the revision rules (duplicate, stale, status moves, which report is kept) as
//!   one pure function from what a store holds to the writes it must make atomically.
//! - [`schedule`]: tenants' schedules as the store keeps them, their fire ledger (the
//!   exactly-once guarantee of a fire) and the scheduler's reads; the timetable itself is
//!   `openqq_schedule`'s.
//! - [`deletion`]: deleting a design: when it may be, the tombstone that keeps it deleted, and
//!   which of its objects go with it.
//! - [`feed`]: a tenant's events in the order applied, numbered without gaps, to resume from.
//! - [`webhook`]: webhooks a tenant registers, and their durable deliveries.
//! - [`ports`]: the traits adapters implement ([`EventLog`], [`LogSource`], [`DesignStore`],
//!   [`RateLimiter`], [`ObjectStore`]) and the one [`PortError`] they return, each
//!   variant classified retriable or permanent.

pub mod accepted;
pub mod batch;
pub mod budget;
pub mod deletion;
pub mod design;
pub mod error;
pub mod event;
pub mod feed;
pub mod generation;
pub mod hdl;
pub mod ids;
pub mod object;
pub mod page;
pub mod partition;
pub mod ports;
pub mod record;
pub mod retention;
pub mod revision;
pub mod schedule;
pub mod webhook;

pub use accepted::AcceptedRevision;
pub use batch::{BatchId, Batches, ItemRef};
pub use budget::{Budget, Charge, DailyBudgets};
pub use deletion::{Deleted, Deletion, DesignDeletes};
pub use design::{Change, DesignSpec, DesignStatus, DesignView, StoredReport, Verdict};
pub use event::{DeadLetter, DeadLetterError, Envelope, EventKind, TimelineEntry, Topics};
pub use feed::{FeedEntry, FeedReader, NewFeedEntry};
pub use ids::{CorrelationId, DesignId, IdError, IdempotencyKey, TenantId, TENANT_ID_GRAMMAR};
pub use ports::{
    AcceptedRevisions, Applied, Cause, Decision, DesignReads, DesignStore, DesignWrites, EventLog, Failure,
    IdempotencyClaim, IdempotencyKeys, KeptResponse, KeptSpec, KeptSpecs, KeyClaim, Lease, LogRecord, LogSource, Meter,
    ObjectRef, ObjectStore, Page, PortError, PresignedUploads, Quota, RateLimiter, Record, UploadTarget, WholeTopic,
};
pub use retention::StoreRetention;
pub use schedule::{ScheduleId, Schedules};
pub use webhook::{DeliveryQueue, Webhook, WebhookId, WebhookRegistry, WebhookSecret, WebhookStore};
