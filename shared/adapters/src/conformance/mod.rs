//! One conformance suite per port. Each suite is a plain async function taking the adapter under
//! test; the embedded adapters run them in this crate's tests, and cloud adapters run the same
//! functions against real local servers. Suites panic with a sentence on the first violation.

pub mod limiter;
pub mod log;
pub mod objects;
pub mod store;

/// A name no other run of a suite will use, so suites can share a backend (topics, tenants).
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}
