//! Embedded adapters: durable in a data directory, no server needed.

mod accepted;
mod batches;
mod budgets;
mod db;
mod deletes;
pub(crate) mod feed;
mod idempotency;
mod limiter;
mod lock;
mod log;
mod objects;
mod retention;
mod schedules;
mod specs;
mod store;
pub(crate) mod webhooks;

pub use db::{bound_sqlite_heap, record_sqlite_memory, Durability};
pub use limiter::InProcessRateLimiter;
pub use lock::WriterLock;
pub use log::{Compacted, EmbeddedEventLog, Retention};
pub use objects::EmbeddedObjectStore;
pub use store::EmbeddedDesignStore;

/// Settings of the embedded backends beyond their durability.
#[derive(Debug, Clone, Default)]
pub struct EmbeddedOptions {
    /// Deletes old, fully consumed log records in the background; `None` keeps them all.
    pub retention: Option<Retention>,
    /// Reader connections of the design store; `None` is one per core (two to eight).
    pub store_readers: Option<usize>,
}

impl EmbeddedOptions {
    pub fn store_readers(&self) -> usize {
        self.store_readers.unwrap_or_else(db::default_readers)
    }
}
