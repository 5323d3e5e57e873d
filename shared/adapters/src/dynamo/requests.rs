//! Counting what the store sends to DynamoDB: every attempt of every call (a retry is another
//! round trip) adds one to [`STORE_REQUESTS_METRIC`](crate::STORE_REQUESTS_METRIC) with
//! `backend="dynamodb"` and `operation` the DynamoDB API called (`TransactWriteItems`,
//! `GetItem`, `Query` …), read from the request's `X-Amz-Target` header just before it is sent.
//! The embedded store counts its port calls under the same metric with `backend="embedded"`, so
//! round trips per design can be compared side by side.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;

/// The interceptor installed on every client the store uses.
#[derive(Debug, Default)]
pub(crate) struct CountRequests;

/// The operation a request calls: DynamoDB's JSON protocol names it in `X-Amz-Target`
/// (`DynamoDB_20120810.GetItem`). A request without one (never sent by the SDK) counts as
/// `unknown` rather than not at all.
pub(crate) fn operation(target: Option<&str>) -> &str {
    match target.and_then(|t| t.rsplit_once('.')) {
        Some((_, op)) if !op.is_empty() && op.len() <= 64 && op.bytes().all(|b| b.is_ascii_alphanumeric()) => op,
        _ => "unknown",
    }
}

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "CountRequests"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let op = operation(context.request().headers().get("x-amz-target")).to_owned();
        metrics::counter!(crate::STORE_REQUESTS_METRIC, "backend" => "dynamodb", "operation" => op).increment(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operation_is_the_last_part_of_the_target_and_anything_else_is_unknown() {
        assert_eq!(operation(Some("DynamoDB_20120810.TransactWriteItems")), "TransactWriteItems");
        assert_eq!(operation(Some("DynamoDB_20120810.GetItem")), "GetItem");
        for odd in [None, Some(""), Some("GetItem"), Some("DynamoDB_20120810."), Some("x.Get Item")] {
            assert_eq!(operation(odd), "unknown", "{odd:?}");
        }
    }
}
