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
