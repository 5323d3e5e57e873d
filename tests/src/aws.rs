//! The AWS stand-in the test command starts (moto, serving DynamoDB and S3 on one endpoint), and
//! the `openqq up` flags that put the store and the objects there.

use std::time::{SystemTime, UNIX_EPOCH};

/// The DynamoDB and S3 endpoint to test against, or `None` (with a note naming `test`) when the
/// test command did not start one.
pub fn endpoint(test: &str) -> Option<String> {
    let endpoint = std::env::var("OPENQQ_TEST_DYNAMODB_ENDPOINT").ok().filter(|e| !e.is_empty());
    if endpoint.is_none() {
        eprintln!("skipping {test}: set OPENQQ_TEST_DYNAMODB_ENDPOINT (scripts/services/moto.sh start)");
    }
    endpoint
}

/// A table or bucket name no other test run uses (lower case, at most 63 characters).
pub fn unique_name(what: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let name = format!("openqq-e2e-{what}-{}-{nanos}", std::process::id());
    name.chars().take(63).collect::<String>().to_lowercase()
}

/// The flags that put the store on a new table and the objects in a new bucket at `endpoint`,
/// then `extra`.
pub fn on_aws(endpoint: &str, what: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--dynamodb-table".into(),
        unique_name(what),
        "--dynamodb-endpoint".into(),
        endpoint.into(),
        "--s3-bucket".into(),
        unique_name(what),
        "--s3-endpoint".into(),
        endpoint.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}
