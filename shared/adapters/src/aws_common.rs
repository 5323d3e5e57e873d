//! What the DynamoDB and S3 adapters share about talking to AWS (or a local server that speaks
//! its protocols): the region and credentials a local endpoint gets when the environment names
//! none, and the text of an SDK error with its causes.

use std::error::Error as StdError;

/// The region a local endpoint is addressed in when the environment names none.
pub(crate) const LOCAL_REGION: &str = "us-east-1";

/// Whether the environment names AWS credentials or where to find them.
pub(crate) fn credentials_in_environment() -> bool {
    [
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// `e` and each of its sources, joined with ": ".
pub(crate) fn error_chain(e: &dyn StdError) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}
