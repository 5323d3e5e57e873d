//! The design store's roles: one trait for each kind of caller, each small enough to read on one
//! screen. A backend implements them all on one struct (so what is atomic stays atomic: an
//! applied event, its feed entry and its deliveries are one write), and [`DesignStore`] names
//! that whole; each caller takes only the roles it uses:
//!
//! | role | who uses it |
//! |---|---|
//! | [`DesignWrites`] | the consumers' runtime (apply, replay, batches), dead-letter replay |
//! | [`DesignReads`] | the API's reads of designs, reports, timelines and usage |
//! | [`AcceptedRevisions`] | the API, once a submission is durable |
//! | [`IdempotencyKeys`] | the API's `Idempotency-Key` handling |
//! | [`crate::feed::FeedReader`] | the API's feed and event stream |
//! | [`crate::webhook::WebhookRegistry`] | the API's webhook routes, the delivery worker |
//! | [`crate::webhook::DeliveryQueue`] | the delivery worker, the API's delivery history |
//! | [`crate::batch::Batches`] | the batch function, the API's batch routes |
//! | [`crate::schedule::Schedules`] | the API's schedule routes, the scheduler |
//! | [`KeptSpecs`] | the design-job function (keeps), the API's revalidations (reads) |
//! | [`crate::deletion::DesignDeletes`] | the API's `DELETE /v1/designs/{id}` |
//!
//! The delivery worker takes both webhook roles as [`crate::webhook::WebhookStore`].
//!
//! A new role (batches, schedules, budgets) is a trait here with the methods one kind of caller
//! needs, added to [`DesignStore`]'s supertraits and implemented by each adapter in a block of
//! its own; docs/ARCHITECTURE.md says more.

use super::{Applied, Failure, Page, PortError, PortResult};
use crate::accepted::AcceptedRevision;
use crate::design::{Change, DesignView, StoredReport};
use crate::event::TimelineEntry;
use crate::feed::{FeedReader, NewFeedEntry};
use crate::ids::{DesignId, IdempotencyKey, TenantId};
use crate::webhook::WebhookStore;
use async_trait::async_trait;
use std::time::Duration;

/// Most timeline entries one [`DesignReads::timeline`] read returns (the latest ones).
pub const MAX_TIMELINE_ENTRIES: usize = 1000;

/// A tenant's share of the design store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Designs the tenant has (each revision of a design counts once, in `bytes`).
    pub designs: u64,
    /// Bytes the tenant's designs take: stored reports in full, plus an estimate per design row
    /// and timeline entry ([`USAGE_ROW_BYTES`]).
    pub bytes: u64,
}

/// What one design row or timeline entry counts for in [`Usage::bytes`]: its columns (ids,
/// timestamps, a name) and its index entries, rounded up.
pub const USAGE_ROW_BYTES: u64 = 256;

/// Applies `entry` and `change` for a record a consumer handles: with
/// [`DesignWrites::apply_replay`] when that record replays a dead letter (its envelope's
/// `replay_of`), else with [`DesignWrites::apply`]. Handlers make every write a record causes
/// through this, so a replayed record may revive its revision at whichever of its writes is
/// still new. Every write that is not stale then enters the tenant's feed ([`crate::feed`]):
/// [`DesignWrites::apply_and_append`].
pub async fn apply_for(
    store: &dyn DesignWrites,
    replayed: bool,
    tenant: &TenantId,
    design: &DesignId,
    entry: &TimelineEntry,
    change: &Change,
) -> PortResult<Applied> {
    store.apply_and_append(replayed, tenant, design, entry, change).await
}

/// One write of a batch ([`DesignWrites::apply_batch`]): exactly what [`apply_for`] takes.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOp<'a> {
    /// The record replays a dead letter: the write follows [`DesignWrites::apply_replay`]'s rule.
    pub replayed: bool,
    pub tenant: &'a TenantId,
    pub design: &'a DesignId,
    pub entry: &'a TimelineEntry,
    pub change: &'a Change,
}

/// What [`DesignWrites::apply_batch`] did: the outcomes of the ops it applied, in order (a prefix
/// of the batch), and the error of the op that stopped it, if one did. The ops after that one
/// were not attempted; the failed op itself changed nothing.
#[derive(Debug, Default)]
pub struct BatchApplied {
    pub applied: Vec<Applied>,
    pub error: Option<PortError>,
}

impl BatchApplied {
    /// Whether every op of a batch of `len` was applied.
    pub fn is_complete(&self, len: usize) -> bool {
        self.error.is_none() && self.applied.len() == len
    }
}

/// The feed entry of a write: `entry` with the verdict (and time taken) `change` carries, if any.
pub fn feed_entry<'a>(design: &'a DesignId, entry: &'a TimelineEntry, change: &Change) -> NewFeedEntry<'a> {
    let (verdict, elapsed_ms) = match change {
        Change::ValidationFinished { verdict, .. } | Change::ResultsReady { verdict } => (Some(*verdict), None),
        Change::Checked { verdict, elapsed_ms } => (*verdict, *elapsed_ms),
        _ => (None, None),
    };
    NewFeedEntry { design_id: design, entry, verdict, elapsed_ms, batch: None }
}

/// The API's record of the revisions it accepted: written once a submission's `design.submitted`
/// is durable, so reads show the design before the consumers materialise it
/// ([`AcceptedRevision::overlay`]).
#[async_trait]
pub trait AcceptedRevisions: Send + Sync {
    /// Records that the API accepted `accepted`. Keeps the highest revision per design; a lower
    /// or equal one changes nothing. Never touches the materialised design or its timeline.
    async fn record_accepted(&self, tenant: &TenantId, accepted: &AcceptedRevision) -> PortResult<()>;

    /// [`record_accepted`](Self::record_accepted) for each marker, in order: what the API's
    /// concurrent submissions write together. Answers each marker on its own, in the order
    /// given: one marker's failure (its tenant's partition throttled, say) is its own, and the
    /// others' answers say whether they were recorded. Adapters that can write several in one
    /// request or transaction override this; where one write carries several markers, its
    /// failure is each of theirs.
    async fn record_accepted_many(&self, accepted: &[(TenantId, AcceptedRevision)]) -> Vec<PortResult<()>> {
        let mut answers = Vec::with_capacity(accepted.len());
        for (tenant, marker) in accepted {
            answers.push(self.record_accepted(tenant, marker).await);
        }
        answers
    }
}

/// What consumers commit: revision-conditional writes of designs, their timelines and the
/// tenant's feed, one by one or a batch at a time, and replays of dead letters.
#[async_trait]
pub trait DesignWrites: Send + Sync {
    /// Atomically records `entry` in the design's timeline and applies `change`, on condition
    /// that no entry of the same kind has a revision ≥ `entry.revision` (`Duplicate` when one
    /// has exactly this revision, `Stale` when only higher ones exist). Status changes apply only
    /// while the design is still at `entry.revision`, so state never goes backwards.
    async fn apply(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied>;
    /// [`DesignWrites::apply`] for a record replayed from the dead-letter topic: the same
    /// conditional write, planned by [`crate::revision::plan_replay`], which may revive the
    /// revision when dead-lettering failed it and moves it on at the same revision. Every other
    /// rule is `apply`'s.
    async fn apply_replay(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied>;
    /// What [`apply_for`] does: [`DesignWrites::apply`] (or, when `replayed`,
    /// [`DesignWrites::apply_replay`]) and, unless the write was stale, the append of its entry to
    /// the tenant's feed ([`feed_entry`]). A duplicate appends too: the first attempt may have
    /// stopped between the write and the append, and the feed keeps one entry per design, kind
    /// and revision. An adapter makes them one atomic write where it can; where it makes two, a
    /// crash between them is repaired when the record is read again.
    async fn apply_and_append(
        &self,
        replayed: bool,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied>;
    /// [`DesignWrites::apply_and_append`] for each op of `ops`, in order: a consumer's writes for
    /// a whole batch of records. Each op has exactly the effects it has alone (its outcome, its
    /// feed entry, its deliveries), and the ops are applied in the order given, so two ops of one
    /// design see each other's writes. The first op that fails changes nothing and ends the
    /// batch: the ops before it stay applied, the ops after it are not attempted
    /// ([`BatchApplied`]). An adapter writes several in one atomic step where it can (one
    /// transaction, fewer conditional requests).
    async fn apply_batch(&self, ops: &[ApplyOp<'_>]) -> BatchApplied;
    /// Appends `new` to the tenant's feed unless the feed holds an entry of the same design, kind
    /// and revision already, and returns the entry's number either way. In the same atomic write
    /// it queues one webhook delivery ([`crate::webhook::Delivery`]) for each of the tenant's
    /// webhooks whose kinds include `new.entry.kind`; an entry already there queues nothing new.
    /// [`apply_and_append`](Self::apply_and_append) does it with its write.
    async fn append_feed(&self, tenant: &TenantId, new: &NewFeedEntry<'_>) -> PortResult<u64>;
}

/// What the API serves: designs, their reports and timelines, and what a tenant holds.
#[async_trait]
pub trait DesignReads: Send + Sync {
    async fn get(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<DesignView>>;
    /// Designs of a tenant, newest first; `limit` is capped by the adapter.
    async fn list(&self, tenant: &TenantId, cursor: Option<&str>, limit: usize) -> PortResult<Page<DesignView>>;
    /// The report of `revision`, or of the latest revision that has one.
    async fn report(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        revision: Option<u64>,
    ) -> PortResult<Option<StoredReport>>;
    /// The design's timeline in the order applied; `None` if the design is unknown to the tenant.
    /// At most the last [`MAX_TIMELINE_ENTRIES`] entries: a design revised thousands of times
    /// would otherwise make one read as large as its whole history.
    async fn timeline(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<Vec<TimelineEntry>>>;
    /// What `tenant` holds in the store, for the storage quota. Adapters answer from indexes
    /// (no scan of other tenants' rows); callers cache the answer briefly.
    async fn usage(&self, tenant: &TenantId) -> PortResult<Usage>;
}

/// A design's latest specification as submitted (the `design.submitted` payload, its large
/// payloads by reference), kept so that the design can be validated again without its client
/// sending it again: a batch item or a schedule's `{"revalidate": …}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSpec {
    /// The revision it was submitted as.
    pub revision: u64,
    /// The `design.submitted` payload's JSON, at most [`crate::design::MAX_DESIGN_RECORD_BYTES`].
    pub submission: String,
}

/// The latest specification of each design ([`KeptSpec`]).
#[async_trait]
pub trait KeptSpecs: Send + Sync {
    /// Keeps `spec` as `design`'s specification unless one of the same or a later revision is
    /// kept already (a re-read record, or one that arrives after a newer revision, changes
    /// nothing), and records the objects it names as the design's (what its deletion removes).
    /// A deleted design keeps nothing. A submission over [`crate::design::MAX_DESIGN_RECORD_BYTES`] is
    /// [`PortError::Invalid`].
    async fn keep_spec(&self, tenant: &TenantId, design: &DesignId, spec: &KeptSpec) -> PortResult<()>;
    /// The specification kept for `design` of `tenant`, if any.
    async fn kept_spec(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<KeptSpec>>;
}

/// Refuses a specification too large to keep.
pub fn check_kept_spec(spec: &KeptSpec) -> PortResult<()> {
    let max = crate::design::MAX_DESIGN_RECORD_BYTES;
    if spec.submission.len() > max {
        return Err(PortError::invalid(
            "kept specification",
            format!("it is {} bytes, over the {max} a design record may take", spec.submission.len()),
        ));
    }
    Ok(())
}

/// What a request claims its `Idempotency-Key` with ([`IdempotencyKeys::claim_idempotency_key`]).
#[derive(Debug, Clone, Copy)]
pub struct KeyClaim<'a> {
    /// The request's fingerprint (SHA-256 of its path and body).
    pub fingerprint: &'a [u8; 32],
    /// How long the claim holds the key unfinished: past it, its handler is taken to have crashed
    /// and a retry may take the key over.
    pub lease: Duration,
    /// How long the key is kept, finished or not (the idempotency window): a claim that never
    /// finished (cut off, or released) keeps its name that long.
    pub keep: Duration,
    /// The name this request gives what it creates (a new design's or batch's id), unless an
    /// earlier claim of the same request has given one ([`IdempotencyClaim::Claimed`]).
    pub name: &'a str,
}

/// `Idempotency-Key`s: a request claims its key, then completes it with its response or releases
/// it.
#[async_trait]
pub trait IdempotencyKeys: Send + Sync {
    /// Claims `key` for a request of `tenant` (`claim` says with what). Keys whose lifetime ended
    /// are ignored (and purged). A fresh claim holds the key for its lease, after which an
    /// unfinished claim (its handler crashed) may be claimed again; a released one may be at once.
    /// A claim taken over by the same request (the same fingerprint) keeps the name the first
    /// claim gave, so a request whose first handling was cut off after it had created something
    /// durable creates the same thing again (a no-op downstream), never a second one. Taken over
    /// by another request (another fingerprint), the key is that request's, with its own name.
    async fn claim_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        claim: &KeyClaim<'_>,
    ) -> PortResult<IdempotencyClaim>;

    /// Keeps `response` for the claim of `key` with `fingerprint`, replayed for `ttl`. A claim
    /// that is no longer this request's (its lease ran out and another took it) is left alone.
    /// A response over [`MAX_KEPT_RESPONSE_BYTES`] is [`PortError::Invalid`].
    async fn complete_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
        response: &KeptResponse,
        ttl: Duration,
    ) -> PortResult<()>;

    /// Gives up an unfinished claim (the request failed in a way worth retrying), so a retry
    /// with the same key is handled anew (with the claim's name, for the same request). A
    /// completed key, or another request's claim, is kept.
    async fn release_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
    ) -> PortResult<()>;
}

/// Every role of the store, as one backend holds them: what the platform builder opens and hands
/// out in narrower handles (an `Arc<dyn DesignStore>` coerces to an `Arc<dyn Role>` of each).
pub trait DesignStore:
    DesignWrites
    + DesignReads
    + AcceptedRevisions
    + IdempotencyKeys
    + FeedReader
    + WebhookStore
    + crate::budget::DailyBudgets
    + crate::batch::Batches
    + crate::schedule::Schedules
    + KeptSpecs
    + crate::deletion::DesignDeletes
{
}

impl<T> DesignStore for T where
    T: DesignWrites
        + DesignReads
        + AcceptedRevisions
        + IdempotencyKeys
        + FeedReader
        + WebhookStore
        + crate::budget::DailyBudgets
        + crate::batch::Batches
        + crate::schedule::Schedules
        + KeptSpecs
        + crate::deletion::DesignDeletes
{
}

/// Largest response kept for an idempotency key (headers and body), in bytes.
pub const MAX_KEPT_RESPONSE_BYTES: usize = 16 * 1024;

/// A response kept for an idempotency key, replayed to a retry of the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptResponse {
    pub status: u16,
    /// Headers worth replaying (`Location`, `Content-Type`), in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl KeptResponse {
    /// Its headers as the JSON a store keeps them in, once the whole response is known to fit:
    /// over [`MAX_KEPT_RESPONSE_BYTES`] it is [`PortError::Invalid`].
    pub fn headers_to_keep(&self) -> PortResult<String> {
        let headers = serde_json::to_string(&self.headers)
            .map_err(|e| PortError::corrupt("kept response", Failure::new("serialising its headers failed", e)))?;
        let size = self.body.len() + headers.len();
        if size > MAX_KEPT_RESPONSE_BYTES {
            return Err(PortError::invalid(
                "kept response",
                format!("its {size} bytes exceed the {MAX_KEPT_RESPONSE_BYTES}-byte limit"),
            ));
        }
        Ok(headers)
    }

    /// The response a store kept: its status, its headers as [`KeptResponse::headers_to_keep`]
    /// wrote them (none when absent) and its body. A status or headers that do not read back
    /// are [`PortError::Corrupt`].
    pub fn from_kept(status: Option<i64>, headers: Option<&str>, body: Vec<u8>) -> PortResult<Self> {
        let status = status
            .and_then(|s| u16::try_from(s).ok())
            .ok_or_else(|| PortError::corrupt("kept response", "its status is missing or not an HTTP status"))?;
        let headers = serde_json::from_str(headers.unwrap_or("[]"))
            .map_err(|e| PortError::corrupt("kept response", Failure::new("its headers are not JSON pairs", e)))?;
        Ok(KeptResponse { status, headers, body })
    }
}

/// The outcome of [`IdempotencyKeys::claim_idempotency_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyClaim {
    /// The key was free, or held by an unfinished claim of the same request: handle the request
    /// (what it creates named `name`), then complete or release the claim.
    Claimed { name: String },
    /// A request with this key and fingerprint is being handled right now.
    InProgress,
    /// The key belongs to a request with another fingerprint (in progress or completed).
    Mismatch,
    /// A request with this key and fingerprint was handled: its response.
    Completed(KeptResponse),
}
