//! Transactions and conditional puts as the store's writes send them, and the pause before a
//! lost race is run again.

use super::error::{cancellation_reasons, transact_failure_of, Class, TransactFailure};
use super::table::{Item, PK};
use crate::embedded::webhooks::nanos;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use std::time::Duration;

/// A time as stored in a number attribute: nanoseconds since the epoch, never negative.
pub(crate) fn stored_nanos(t: DateTime<Utc>) -> u64 {
    nanos(t).max(0) as u64
}

/// Sends `items` as one transaction: `Ok(Ok(()))` when it committed, `Ok(Err(reasons))` when it
/// was cancelled only for failed conditions or conflicts (each item's reason), `Err` otherwise.
pub(crate) async fn transact(
    client: &Client,
    op: &str,
    items: Vec<TransactWriteItem>,
) -> PortResult<Result<(), Vec<Option<Class>>>> {
    match client.transact_write_items().set_transact_items(Some(items)).send().await {
        Ok(_) => Ok(Ok(())),
        Err(e) => {
            let reasons = cancellation_reasons(&e);
            match transact_failure_of(op, e) {
                TransactFailure::LostRace => Ok(Err(reasons)),
                TransactFailure::Failed(e) => Err(e),
            }
        }
    }
}

/// A short pause before trying a lost race again, longer each time.
pub(crate) async fn back_off(attempt: u32) {
    let jitter = u64::from(Utc::now().timestamp_subsec_nanos() % 8);
    tokio::time::sleep(Duration::from_millis(u64::from(attempt.min(20)) * 3 + jitter)).await;
}

/// A put of `item` on condition that no item has its key yet.
pub(crate) fn put_new(table: &str, item: Item) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(#pk)")
        .expression_attribute_names("#pk", PK)
        .build()
        .expect("table and item are set");
    TransactWriteItem::builder().put(put).build()
}

/// Deletes every item of partition `pk`: its keys a page at a time, in batches of 25 (what
/// `BatchWriteItem` takes), each batch's unprocessed items sent again.
pub(crate) async fn delete_partition(client: &Client, table: &str, pk: String, operation: &str) -> PortResult<()> {
    use super::error::classify;
    use super::table::{s, SK};
    use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
    loop {
        let out = client
            .query()
            .table_name(table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(pk.clone()))
            .projection_expression("#pk, #sk")
            .consistent_read(true)
            .limit(500)
            .send()
            .await
            .map_err(|e| classify(operation, e))?;
        let keys = out.items.unwrap_or_default();
        if keys.is_empty() {
            return Ok(());
        }
        for chunk in keys.chunks(25) {
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|k| {
                    let delete = DeleteRequest::builder().set_key(Some(k.clone())).build().expect("the key is set");
                    WriteRequest::builder().delete_request(delete).build()
                })
                .collect();
            for attempt in 0..MAX_DELETE_ATTEMPTS {
                let out = client
                    .batch_write_item()
                    .request_items(table, requests)
                    .send()
                    .await
                    .map_err(|e| classify(operation, e))?;
                requests = out.unprocessed_items.and_then(|mut u| u.remove(table)).unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
                back_off(attempt).await;
            }
            if !requests.is_empty() {
                return Err(openqq_core::PortError::Throttled { retry_after: None });
            }
        }
    }
}

/// Sends one batch of deletes at most this many times while DynamoDB leaves some unprocessed.
const MAX_DELETE_ATTEMPTS: u32 = 16;
