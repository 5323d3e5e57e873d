//! Batches: many design jobs of one tenant submitted as one request, tracked as a whole.
//!
//! The API checks a batch's items up front, keeps them as one object of the tenant and publishes
//! one `batch.submitted` record. The batch function creates the batch and its items in the store
//! ([`Batches::create_batch`], a no-op when it exists, so a re-read submits nothing twice) and
//! **releases** the first [`BatchLimits::in_flight`] items: each becomes a revision of its design
//! whose events carry the item ([`ItemRef`]) and travel on the batch lane's own topics. When an
//! item's design reaches its end (`results.ready`, or `design.failed`), a `batch.item.ended` record
//! reaches the batch function, which ends the item ([`Batches::end_item`]) and releases the item
//! [`released_by`] its end: the n-th item to end releases item `n + in_flight - 1`. Which item an
//! end releases depends only on its ordinal, which the store keeps with the item, so a re-read end
//! releases the same item again (a no-op once it is on its way) and never another.
//!
//! So a tenant has at most `in_flight` items in the batch lane at once, however large its batch:
//! another tenant's batch on the same partition waits behind at most that many of its items
//! (fairness by a per-tenant window, documented in the README). Once no item is queued or
//! validating, the batch is final and the batch function appends `batch.completed` to the tenant's
//! feed, which keeps one entry per batch, so it is emitted exactly once.

use crate::design::Verdict;
use crate::ids::{DesignId, IdError, TenantId};
use crate::object::ObjectRef;
use crate::page::Page;
use crate::ports::PortResult;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;

/// Most items one batch may hold.
pub const MAX_BATCH_ITEMS: usize = 10_000;

/// How long a store keeps a batch and its items after it was created, unless set otherwise
/// (`--batch-retention`). Past it the batch shows nowhere (reads answer as for a batch the tenant
/// never had, and its open items no longer count against the tenant's quota) and the store
/// removes it. Counted from creation, so that every row can carry its expiry when written; a
/// batch still running then goes too (its items' later ends are ignored), so the retention must
/// be longer than the longest batch.
pub const DEFAULT_BATCH_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Longest `custom_id`, in bytes.
pub const MAX_CUSTOM_ID_BYTES: usize = 128;

/// A batch, named by the API when it accepts one (a UUIDv7, so ids sort by creation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BatchId(String);

impl BatchId {
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().hyphenated().to_string())
    }

    /// A batch id in any RFC 4122 text form, canonicalised (lower case, hyphenated).
    pub fn parse(s: &str) -> Result<Self, IdError> {
        uuid::Uuid::try_parse(s).map(|u| Self(u.hyphenated().to_string())).map_err(|_| IdError::NotUuid)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id under which the batch's own entries (`batch.completed`) sit in the tenant's feed.
    pub fn as_design(&self) -> DesignId {
        DesignId::parse(self.0.clone()).expect("a UUID is a well-formed design id")
    }
}

impl TryFrom<String> for BatchId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(&s)
    }
}

impl From<BatchId> for String {
    fn from(id: BatchId) -> String {
        id.0
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The batch item a design's revision is: in every envelope of it ([`crate::Envelope::batch`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemRef {
    pub batch_id: BatchId,
    /// Its place in the batch, from 0.
    pub index: u32,
}

macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }
    };
}

string_enum!(
    /// Where one item is.
    ItemStatus {
        Queued => "queued",
        Validating => "validating",
        Ready => "ready",
        Failed => "failed",
        Rejected => "rejected",
        Cancelled => "cancelled",
    }
);

impl ItemStatus {
    /// Whether the item is done with (nothing more happens to it).
    pub fn is_final(self) -> bool {
        !matches!(self, ItemStatus::Queued | ItemStatus::Validating)
    }
}

string_enum!(
    /// How a batch ends, as the store keeps it: it runs until every item is final, unless it was
    /// cancelled or failed (past its `max_failed`), which cancels the items still queued.
    BatchState {
        Running => "running",
        Cancelled => "cancelled",
        Failed => "failed",
    }
);

string_enum!(
    /// Where a batch is, as the API shows it ([`BatchStatus::of`]).
    BatchStatus {
        Queued => "queued",
        Running => "running",
        Completed => "completed",
        Cancelling => "cancelling",
        Cancelled => "cancelled",
        Failed => "failed",
    }
);

impl BatchStatus {
    /// The status of a batch in `state` whose items are counted in `counts`.
    pub fn of(state: BatchState, counts: &Counts) -> Self {
        let open = counts.queued + counts.validating > 0;
        match (state, open) {
            (BatchState::Running, true) if counts.queued == counts.total() - counts.rejected => BatchStatus::Queued,
            (BatchState::Running, true) => BatchStatus::Running,
            (BatchState::Running, false) => BatchStatus::Completed,
            (BatchState::Cancelled, true) => BatchStatus::Cancelling,
            (BatchState::Cancelled, false) => BatchStatus::Cancelled,
            // A failed batch still finishes the items on their way; it shows failed at once.
            (BatchState::Failed, _) => BatchStatus::Failed,
        }
    }
}

/// A batch's items by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub queued: u32,
    pub validating: u32,
    pub ready: u32,
    pub failed: u32,
    pub rejected: u32,
    pub cancelled: u32,
}

impl Counts {
    pub fn total(&self) -> u32 {
        self.queued + self.validating + self.ready + self.failed + self.rejected + self.cancelled
    }

    /// Adds one item of `status`.
    pub fn add(&mut self, status: ItemStatus, n: u32) {
        let slot = match status {
            ItemStatus::Queued => &mut self.queued,
            ItemStatus::Validating => &mut self.validating,
            ItemStatus::Ready => &mut self.ready,
            ItemStatus::Failed => &mut self.failed,
            ItemStatus::Rejected => &mut self.rejected,
            ItemStatus::Cancelled => &mut self.cancelled,
        };
        *slot += n;
    }

    /// Whether no item is queued or on its way.
    pub fn is_final(&self) -> bool {
        self.queued + self.validating == 0
    }
}

/// What `batch.completed` says of its batch in the feed, the event stream and webhooks: how it
/// ended, and its items' counts and verdicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSummary {
    pub status: BatchStatus,
    pub counts: Counts,
    pub verdicts: Verdicts,
    /// Why it failed or was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The verdicts of a batch's ready items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    pub pass: u32,
    pub fail: u32,
}

/// How many failed items a batch tolerates: past it, the rest is cancelled and the batch fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxFailed {
    Count(u32),
    /// Of the batch's items that are not rejected, 0 to 100.
    Percent(u8),
}

impl MaxFailed {
    /// Parses `12` or `"12%"`.
    pub fn parse(value: &serde_json::Value) -> Result<Self, String> {
        let bad = || "must be a whole number of items (10) or a percentage (\"10%\")".to_owned();
        match value {
            serde_json::Value::Number(n) => {
                n.as_u64().and_then(|n| u32::try_from(n).ok()).map(MaxFailed::Count).ok_or_else(bad)
            }
            serde_json::Value::String(s) => match s.strip_suffix('%').map(str::parse::<u8>) {
                Some(Ok(p)) if p <= 100 => Ok(MaxFailed::Percent(p)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    /// Whether `counts.failed` is past the threshold.
    pub fn exceeded(self, counts: &Counts) -> bool {
        let failed = u64::from(counts.failed);
        match self {
            MaxFailed::Count(n) => failed > u64::from(n),
            MaxFailed::Percent(p) => failed * 100 > u64::from(p) * u64::from(counts.total() - counts.rejected),
        }
    }

    /// How it is written (`12`, `12%`), as the store keeps it.
    pub fn to_text(self) -> String {
        match self {
            MaxFailed::Count(n) => n.to_string(),
            MaxFailed::Percent(p) => format!("{p}%"),
        }
    }

    pub fn from_text(s: &str) -> Option<Self> {
        match s.strip_suffix('%') {
            Some(p) => p.parse().ok().filter(|p| *p <= 100).map(MaxFailed::Percent),
            None => s.parse().ok().map(MaxFailed::Count),
        }
    }
}

impl Serialize for MaxFailed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MaxFailed::Count(n) => s.serialize_u32(*n),
            MaxFailed::Percent(_) => s.serialize_str(&self.to_text()),
        }
    }
}

impl<'de> Deserialize<'de> for MaxFailed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        MaxFailed::parse(&serde_json::Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A batch as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchView {
    pub batch_id: BatchId,
    pub name: String,
    pub status: BatchStatus,
    pub counts: Counts,
    pub verdicts: Verdicts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed: Option<MaxFailed>,
    /// Why the batch failed or was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// One item as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchItem {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_id: Option<DesignId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    pub status: ItemStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Why it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A batch to create ([`Batches::create_batch`]).
#[derive(Debug, Clone)]
pub struct NewBatch {
    pub id: BatchId,
    pub name: String,
    pub max_failed: Option<MaxFailed>,
    pub created_at: DateTime<Utc>,
}

/// An item to create: `status` queued (with its `submission`) or rejected (with its `reason`).
#[derive(Debug, Clone)]
pub struct NewItem {
    pub item: BatchItem,
    /// What releasing it publishes: the `design.submitted` payload's JSON.
    pub submission: Option<String>,
}

/// An item on its way ([`Batches::release_items`]): what to publish for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub index: u32,
    pub design_id: DesignId,
    pub revision: u64,
    pub submission: String,
}

/// What [`Batches::end_item`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The item's place among the batch's items that ended (from 1): it names the item this end
    /// releases ([`released_by`]). The same on a repeated end.
    pub ordinal: Option<u32>,
    /// Whether this call ended it (false: it had ended, or was cancelled, before).
    pub fresh: bool,
    /// The batch after.
    pub batch: BatchView,
}

/// The item the `ordinal`-th end of a batch releases, with `in_flight` items allowed on their way.
pub fn released_by(ordinal: u32, in_flight: u32) -> u32 {
    ordinal.saturating_add(in_flight).saturating_sub(1)
}

/// The batch lane's limits for one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Items of one batch on their way at once (released, not yet ended).
    pub in_flight: u32,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self { in_flight: 64 }
    }
}

/// `batch.submitted`: a batch the API accepted. Its items are an object of the tenant: one JSON
/// line each ([`StoredItem`]), in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchSubmitted {
    pub batch_id: BatchId,
    pub name: String,
    pub items_ref: ObjectRef,
    pub items: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed: Option<MaxFailed>,
}

/// One line of a batch's items object: the item as the API checked it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_id: Option<DesignId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The `design.submitted` payload (absent for a rejected item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<Box<serde_json::value::RawValue>>,
    /// Why the item was rejected (`on_invalid: skip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

impl StoredItem {
    /// The item to create at `index`.
    pub fn into_new(self, index: u32) -> NewItem {
        let status = if self.rejected.is_some() { ItemStatus::Rejected } else { ItemStatus::Queued };
        NewItem {
            item: BatchItem {
                index,
                custom_id: self.custom_id,
                design_id: self.design_id,
                revision: self.revision,
                status,
                verdict: None,
                reason: self.rejected,
            },
            submission: self.submission.map(|s| s.get().to_owned()),
        }
    }
}

/// The first line of a batch's items object ([`BatchSubmitted::items_ref`]): the batch it is of.
/// Objects are content-addressed per tenant, so without it two batches of the same items would
/// share one object; with it the object is its batch's alone, and goes once the batch is in the
/// store (its items are kept there). An object without it (written before) may be shared, and
/// stays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemsHeader {
    pub batch_id: BatchId,
}

/// A batch's items object: its [`ItemsHeader`], then one JSON line per item, in order.
pub fn items_object(batch_id: &BatchId, items: &[StoredItem]) -> Vec<u8> {
    let mut jsonl = serde_json::to_vec(&ItemsHeader { batch_id: batch_id.clone() }).expect("a header serialises");
    jsonl.push(b'\n');
    for item in items {
        serde_json::to_writer(&mut jsonl, item).expect("a checked item serialises");
        jsonl.push(b'\n');
    }
    jsonl
}

/// What a batch's items object holds ([`items_object`]).
#[derive(Debug)]
pub struct ItemsObject {
    /// The batch its header names; `None` for an object written without one.
    pub batch_id: Option<BatchId>,
    /// Up to `max` items, in order (more means the object holds more than `max`).
    pub items: Vec<StoredItem>,
}

/// Reads a batch's items object, up to `max + 1` items: why not, for an object that is not one.
pub fn read_items_object(text: &str, max: usize) -> Result<ItemsObject, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).peekable();
    let batch_id = lines.peek().and_then(|first| serde_json::from_str::<ItemsHeader>(first).ok()).map(|h| h.batch_id);
    if batch_id.is_some() {
        lines.next();
    }
    let items = lines
        .take(max.saturating_add(1))
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<StoredItem>(line)
                .map_err(|e| format!("item {i} of the batch does not read back: {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(ItemsObject { batch_id, items })
}

/// `batch.item.ended`: the design of a batch item ([`crate::Envelope::batch`]) reached its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchItemEnded {
    pub status: ItemStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// The store's batches: what the batch function writes and the API reads. A store keeps each
/// batch for its retention ([`DEFAULT_BATCH_RETENTION`]) after it was created, and reads pass over
/// an older one.
#[async_trait]
pub trait Batches: Send + Sync {
    /// Creates `batch` with `items` (queued or rejected), unless `tenant` has a batch of that id:
    /// then nothing changes. Whether this call created it.
    async fn create_batch(&self, tenant: &TenantId, batch: &NewBatch, items: &[NewItem]) -> PortResult<bool>;
    async fn batch(&self, tenant: &TenantId, id: &BatchId) -> PortResult<Option<BatchView>>;
    /// The tenant's batches, newest first; `limit` is capped by the adapter.
    async fn list_batches(&self, tenant: &TenantId, cursor: Option<&str>, limit: usize) -> PortResult<Page<BatchView>>;
    /// The items of a batch in order, those with `status` only when given, from the one after
    /// index `after`. `None` for a batch the tenant does not have.
    async fn batch_items(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        status: Option<ItemStatus>,
        after: Option<u32>,
        limit: usize,
    ) -> PortResult<Option<Page<BatchItem>>>;
    /// Moves the items of `indexes` still queued to validating (the batch starts, if this is its
    /// first), and returns every item of `indexes` that is validating, whether this call or an
    /// earlier one released it: what to publish for them.
    async fn release_items(&self, tenant: &TenantId, id: &BatchId, indexes: Range<u32>) -> PortResult<Vec<Released>>;
    /// Ends item `index` as `status` (ready or failed) with `verdict` if it is validating, giving
    /// it the next ordinal; the batch finishes when no item is left open. `None` for an item the
    /// tenant does not have.
    async fn end_item(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        index: u32,
        status: ItemStatus,
        verdict: Option<Verdict>,
    ) -> PortResult<Option<Ended>>;
    /// Stops a running batch: its queued items become cancelled and it takes `state` (cancelled,
    /// or failed) with `reason`; a batch that is not running, or ended, is left as it is. The batch after;
    /// `None` for a batch the tenant does not have.
    async fn stop_batch(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        state: BatchState,
        reason: &str,
    ) -> PortResult<Option<BatchView>>;
    /// The items of the tenant's batches that have not finished which are still open (queued or
    /// validating): what the tenant has waiting in the batch lane, for its quota.
    async fn open_items(&self, tenant: &TenantId) -> PortResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(queued: u32, validating: u32, ready: u32, failed: u32, rejected: u32) -> Counts {
        Counts { queued, validating, ready, failed, rejected, cancelled: 0 }
    }

    #[test]
    fn a_batch_shows_queued_until_an_item_leaves_and_completed_once_none_is_open() {
        assert_eq!(BatchStatus::of(BatchState::Running, &counts(5, 0, 0, 0, 1)), BatchStatus::Queued);
        assert_eq!(BatchStatus::of(BatchState::Running, &counts(4, 1, 0, 0, 1)), BatchStatus::Running);
        assert_eq!(BatchStatus::of(BatchState::Running, &counts(0, 0, 4, 1, 1)), BatchStatus::Completed);
        assert_eq!(BatchStatus::of(BatchState::Cancelled, &counts(0, 2, 1, 0, 0)), BatchStatus::Cancelling);
        assert_eq!(BatchStatus::of(BatchState::Cancelled, &counts(0, 0, 3, 0, 0)), BatchStatus::Cancelled);
        assert_eq!(BatchStatus::of(BatchState::Failed, &counts(0, 1, 0, 3, 0)), BatchStatus::Failed);
    }

    #[test]
    fn max_failed_is_a_count_or_a_percentage_of_the_items_not_rejected() {
        let pct = MaxFailed::parse(&serde_json::json!("10%")).unwrap();
        assert_eq!(pct, MaxFailed::Percent(10));
        assert!(!pct.exceeded(&counts(0, 0, 90, 10, 50)), "10 of 100 is not past 10%");
        assert!(pct.exceeded(&counts(0, 0, 89, 11, 50)));
        let count = MaxFailed::parse(&serde_json::json!(2)).unwrap();
        assert!(!count.exceeded(&counts(0, 0, 0, 2, 0)) && count.exceeded(&counts(0, 0, 0, 3, 0)));
        for bad in [serde_json::json!(-1), serde_json::json!("101%"), serde_json::json!("x"), serde_json::json!(1.5)] {
            assert!(MaxFailed::parse(&bad).is_err(), "{bad}");
        }
        for m in [MaxFailed::Count(3), MaxFailed::Percent(25)] {
            assert_eq!(MaxFailed::from_text(&m.to_text()), Some(m));
            assert_eq!(serde_json::from_value::<MaxFailed>(serde_json::to_value(m).unwrap()).unwrap(), m);
        }
    }

    #[test]
    fn each_end_releases_the_item_one_window_ahead_so_each_item_is_released_once() {
        let in_flight = 4;
        // The first window is released by the batch's submission: items 0..4.
        let released: Vec<u32> = (1..=6).map(|n| released_by(n, in_flight)).collect();
        assert_eq!(released, [4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn an_items_object_names_its_batch_and_reads_back_its_items_in_order() {
        let id = BatchId::generate();
        let item = |custom: &str| StoredItem {
            custom_id: Some(custom.into()),
            design_id: None,
            revision: None,
            submission: None,
            rejected: Some("bad".into()),
        };
        let bytes = items_object(&id, &[item("a"), item("b")]);
        let read = read_items_object(std::str::from_utf8(&bytes).unwrap(), 10).unwrap();
        assert_eq!(read.batch_id, Some(id.clone()));
        let customs: Vec<_> = read.items.iter().map(|i| i.custom_id.as_deref().unwrap()).collect();
        assert_eq!(customs, ["a", "b"]);
        // Two batches of the same items are two objects.
        assert_ne!(bytes, items_object(&BatchId::generate(), &[item("a"), item("b")]));
        // An object without a header (written before) reads as items only; an item is never a header.
        let read = read_items_object("{\"custom_id\":\"a\"}\n\n{}\n", 10).unwrap();
        assert_eq!((read.batch_id, read.items.len()), (None, 2));
        assert_eq!(read_items_object(&"{}\n".repeat(5), 2).unwrap().items.len(), 3, "max + 1 at most");
        assert!(read_items_object("{\"custom_id\": 1}\n", 10).unwrap_err().contains("item 0"));
    }

    #[test]
    fn a_batch_id_is_a_uuid_in_any_form_kept_canonical() {
        let id = BatchId::generate();
        let upper = id.as_str().to_uppercase();
        assert_eq!(BatchId::parse(&upper).unwrap(), id);
        assert!(BatchId::parse("../x").is_err());
        assert_eq!(id.as_design().as_str(), id.as_str());
    }
}
