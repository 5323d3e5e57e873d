//! Embedded adapters: durable in a data directory, no server needed.

mod db;
mod limiter;
mod log;
mod notifier;
mod objects;
mod retention;
mod store;

pub use db::Durability;
pub use limiter::InProcessRateLimiter;
pub use log::{Compacted, EmbeddedEventLog, Retention};
pub use notifier::BroadcastNotifier;
pub use objects::EmbeddedObjectStore;
pub use store::EmbeddedDesignStore;
