//! One conformance suite per port (cargo feature `conformance`, test support only).
//!
//! Each suite's `run` takes the adapter under test and the [`Capabilities`](log::Capabilities)
//! its test declares: what the backend does differently (direct uploads, a Redis-down policy, a
//! delivery order) is a field the suite reads to decide which checks apply, never a second suite
//! or a test file picking check functions. A capability that is off says in its doc which checks
//! it turns off and why, so nothing is skipped silently. The embedded adapters run the suites in
//! this crate's tests; the cloud ones run the same suites against real local servers. Suites
//! panic with a sentence on the first violation.

pub mod limiter;
pub mod log;
pub mod objects;
pub mod store;

/// A name no other run of a suite will use, so suites can share a backend (topics, tenants).
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

/// A DynamoDB client for the local test server at `endpoint`: a fixed region and stand-in
/// credentials, as a local server accepts.
#[cfg(feature = "dynamodb")]
pub fn dynamodb_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}
