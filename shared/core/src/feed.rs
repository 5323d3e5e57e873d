//! A tenant's event feed: every event applied to the tenant's designs, numbered 1, 2, 3… per
//! tenant in the order the store committed them, without gaps. A reader that saw number `n`
//! resumes with the entries after `n` and misses nothing and sees nothing twice; the live stream
//! (`GET /v1/events/stream`, its `Last-Event-ID`), the polling fallback (`GET /v1/events?after=`)
//! and webhook deliveries all read it.
//!
//! Entries are appended by [`crate::ports::apply_for`] after each write a consumer makes (both
//! when it was new and when it was a duplicate, so a record re-read after a crash between the
//! write and the append appends then). The feed holds one entry per design, kind and revision:
//! appending the same triple again returns the entry already there.
//!
//! Retention: entries older than the store's feed retention ([`DEFAULT_FEED_RETENTION`],
//! `--feed-retention`) are removed, never each tenant's newest (it carries the numbering on).
//! Numbers keep their gapless order, so a reader that resumes after `n` and is answered a first
//! entry past `n + 1` knows the entries between were removed ([`resumable`]): it is told so
//! rather than silently missing them.

use crate::batch::BatchSummary;
use crate::error::{Failure, PortError, PortResult};
use crate::event::{EventKind, TimelineEntry};
use crate::ids::{CorrelationId, DesignId, TenantId};
use crate::Verdict;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Most entries one [`FeedReader::read_feed`] returns.
pub const MAX_FEED_PAGE: usize = 500;

/// How long feed entries (and the webhook deliveries of them that ended) are kept by default: 30
/// days, far longer than the event log keeps its records (7), so a record read again always finds
/// the entry it appended.
pub const DEFAULT_FEED_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

/// Whether a reader that saw entry `after` can resume with what [`FeedReader::read_feed`]
/// answered, whose first entry is numbered `first` (none when nothing came after). Numbers have no
/// gaps, so a first entry past `after + 1` means retention removed those between: `Err` with
/// that first number. Reading from the start (`after` 0) always resumes with what is kept.
pub fn resumable(after: u64, first: Option<u64>) -> Result<(), u64> {
    match first {
        Some(first) if after > 0 && first > after + 1 => Err(first),
        _ => Ok(()),
    }
}

/// One applied event as the tenant sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedEntry {
    /// The entry's number in its tenant's feed: 1 for the first, then one more each time.
    pub seq: u64,
    pub design_id: DesignId,
    pub kind: EventKind,
    pub revision: u64,
    /// The id of the event first applied for this design, kind and revision (kept across
    /// re-reads of the record, which carry new event ids).
    pub event_id: Uuid,
    pub correlation_id: CorrelationId,
    pub occurred_at: DateTime<Utc>,
    /// The verdict, on `validation.finished`, `results.ready` and the HDL checks' `*.finished`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verdict: Option<Verdict>,
    /// How long the step took, in milliseconds, on the HDL checks' `*.finished` (a generation's:
    /// every attempt, calls and checks).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub elapsed_ms: Option<u64>,
    /// On `batch.completed`: how the batch ended, its items' counts and verdicts.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub batch: Option<BatchSummary>,
}

impl FeedEntry {
    /// The entry as JSON, as a delivery carries it. A failure is the platform's (the entry is
    /// made of ids, a kind, numbers and a time), so it is [`PortError::Corrupt`].
    pub fn to_json(&self) -> PortResult<String> {
        serde_json::to_string(self)
            .map_err(|e| PortError::corrupt("feed entry", Failure::new("serialising it failed", e)))
    }
}

/// What a consumer appends: the timeline entry it applied and, where the event has them, its
/// verdict and how long its step took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFeedEntry<'a> {
    pub design_id: &'a DesignId,
    pub entry: &'a TimelineEntry,
    pub verdict: Option<Verdict>,
    pub elapsed_ms: Option<u64>,
    /// On `batch.completed`: the batch's summary.
    pub batch: Option<&'a BatchSummary>,
}

impl NewFeedEntry<'_> {
    /// The entry as the feed keeps it, numbered `seq`.
    pub fn numbered(&self, seq: u64) -> FeedEntry {
        let e = self.entry;
        FeedEntry {
            seq,
            design_id: self.design_id.clone(),
            kind: e.kind,
            revision: e.revision,
            event_id: e.event_id,
            correlation_id: e.correlation_id.clone(),
            occurred_at: e.occurred_at,
            verdict: self.verdict,
            elapsed_ms: self.elapsed_ms,
            batch: self.batch.cloned(),
        }
    }
}

/// The tenant's feed as readers see it (the API's `GET /v1/events` and event stream). Entries
/// enter it with the writes that cause them ([`crate::ports::DesignWrites::append_feed`]).
#[async_trait]
pub trait FeedReader: Send + Sync {
    /// The tenant's entries numbered after `after`, oldest first, at most `limit` (capped at
    /// [`MAX_FEED_PAGE`]). Only the tenant's own entries, ever.
    async fn read_feed(&self, tenant: &TenantId, after: u64, limit: usize) -> PortResult<Vec<FeedEntry>>;

    /// The number of the tenant's latest entry (0 while it has none): where a reader that wants
    /// only what comes next starts. Adapters answer from an index, not by paging the feed.
    async fn feed_head(&self, tenant: &TenantId) -> PortResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::resumable;

    #[test]
    fn a_reader_resumes_unless_entries_after_what_it_saw_are_gone() {
        assert_eq!(resumable(0, Some(40)), Ok(()), "from the start: what is kept");
        assert_eq!(resumable(7, Some(8)), Ok(()));
        assert_eq!(resumable(7, None), Ok(()), "nothing new yet");
        assert_eq!(resumable(7, Some(40)), Err(40), "8 to 39 were removed");
    }
}
