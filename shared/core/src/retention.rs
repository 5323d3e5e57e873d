//! How long a design store keeps what it removes by age: one value the stores of every backend
//! take whole ([`StoreRetention::default`] unless the operator says otherwise).

use std::time::Duration;

/// How long a design store keeps feed entries (`--feed-retention`), accepted-revision markers
/// (`--accepted-retention`), batches (`--batch-retention`) and deleted designs' tombstones
/// (`--tombstone-retention`). Idempotency keys carry their own expiry (`--idempotency-window`,
/// set by the API as it keeps each answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreRetention {
    /// Feed entries, with the deliveries of them that ended
    /// ([`crate::feed::DEFAULT_FEED_RETENTION`]).
    pub feed: Duration,
    /// Accepted-revision markers, from their revision's acceptance
    /// ([`crate::accepted::DEFAULT_ACCEPTED_RETENTION`]).
    pub accepted: Duration,
    /// Batches with their items, from their creation ([`crate::batch::DEFAULT_BATCH_RETENTION`]).
    pub batches: Duration,
    /// Deleted designs' tombstones, from the deletion
    /// ([`crate::deletion::DEFAULT_TOMBSTONE_RETENTION`]).
    pub tombstones: Duration,
}

impl Default for StoreRetention {
    fn default() -> Self {
        Self {
            feed: crate::feed::DEFAULT_FEED_RETENTION,
            accepted: crate::accepted::DEFAULT_ACCEPTED_RETENTION,
            batches: crate::batch::DEFAULT_BATCH_RETENTION,
            tombstones: crate::deletion::DEFAULT_TOMBSTONE_RETENTION,
        }
    }
}
