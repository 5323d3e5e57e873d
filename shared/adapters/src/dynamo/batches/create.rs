//! Creating a batch: its submissions, then its items, then its row, which alone makes the batch
//! exist (every read and move starts from it). A create cut short leaves rows no call reads, and
//! a re-run writes what is missing.
//!
//! Submissions never change, so `BatchWriteItem` rewrites them harmlessly. Item rows do change
//! (a released item is validating), so each is put only where none is: a create that overlaps
//! another of the same batch (a re-read batch record) cannot put a released item back to queued
//! behind its counters. Those puts go 100 to a transaction, the `BatchWriteItem` of conditional
//! puts.
//!
//! Every row carries the TTL attribute: the batch's creation plus the store's batch retention.

use super::{batch_sk, count_of, get_batch, item_sk, items_pk, submission_sk, ENDED, FAIL, PASS};
use crate::dynamo::error::{classify, is_condition_failed, Class};
use crate::dynamo::feed::{expires_at, expiring};
use crate::dynamo::table::{key, n, s, tenant_pk, Item, PK};
use crate::dynamo::transact::{put_new, transact};
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use chrono::Utc;
use openqq_core::batch::{BatchItem, BatchState, Counts, ItemStatus, NewBatch, NewItem};
use openqq_core::ports::PortResult;
use openqq_core::{PortError, TenantId};
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinSet;

/// Puts of one `BatchWriteItem`, DynamoDB's most.
const WRITE_BATCH: usize = 25;
/// Puts of one transaction, DynamoDB's most; an item row is small (a custom id of at most 128
/// bytes, a rejection's reason), so 100 nearly always stay inside [`TRANSACTION_BYTES`].
const TRANSACTION_PUTS: usize = 100;
/// Bytes of one transaction's rows at most: DynamoDB's 4 MB, with room to spare.
const TRANSACTION_BYTES: usize = 3 << 20;
/// Requests of one create in flight at once: 10,000 items are 400 submission writes and 100
/// transactions, a few seconds one after another.
const IN_FLIGHT: usize = 4;
const MAX_ATTEMPTS: u32 = 8;

pub(super) async fn create(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    batch: &NewBatch,
    items: &[NewItem],
    keep: Duration,
) -> PortResult<bool> {
    if get_batch(client, table, tenant, &batch.id).await?.is_some() {
        return Ok(false);
    }
    // Every row expires with the batch, `keep` after its creation.
    let expires = expires_at(batch.created_at, keep);
    let pk = items_pk(tenant, &batch.id);
    let submissions: Vec<WriteRequest> = items
        .iter()
        .filter_map(|new| Some(submission_put(&pk, new.item.index, new.submission.as_deref()?, expires)))
        .collect();
    in_parallel(
        submissions
            .chunks(WRITE_BATCH)
            .map(|chunk| write_submissions(client.clone(), table.to_owned(), chunk.to_vec())),
    )
    .await?;
    let rows: Vec<Item> = items.iter().map(|new| expiring(item_row(&pk, &new.item), expires)).collect();
    in_parallel(transactions(rows).into_iter().map(|group| put_items(client.clone(), table.to_owned(), group))).await?;
    let put = client
        .put_item()
        .table_name(table)
        .set_item(Some(expiring(batch_row(tenant, batch, items), expires)))
        .condition_expression("attribute_not_exists(#pk)")
        .expression_attribute_names("#pk", PK)
        .send()
        .await;
    match put {
        Ok(_) => Ok(true),
        // Another create of the same batch finished first, with the same items.
        Err(e) if is_condition_failed(&e) => Ok(false),
        Err(e) => Err(classify("create batch", e)),
    }
}

fn batch_row(tenant: &TenantId, batch: &NewBatch, items: &[NewItem]) -> Item {
    let mut counts = Counts::default();
    for new in items {
        counts.add(new.item.status, 1);
    }
    let created_at = batch.created_at.to_rfc3339();
    let mut row = key(tenant_pk(tenant), batch_sk(&batch.id));
    row.extend([
        ("item_type".to_owned(), s("batch")),
        ("batch_id".to_owned(), s(batch.id.as_str())),
        ("name".to_owned(), s(batch.name.as_str())),
        ("state".to_owned(), s(BatchState::Running.as_str())),
        ("created_at".to_owned(), s(created_at.as_str())),
        (PASS.to_owned(), n(0)),
        (FAIL.to_owned(), n(0)),
        (ENDED.to_owned(), n(0)),
    ]);
    for status in ItemStatus::ALL {
        row.insert(status.as_str().to_owned(), n(u64::from(count_of(&counts, *status))));
    }
    if let Some(max) = batch.max_failed {
        row.insert("max_failed".to_owned(), s(max.to_text()));
    }
    if counts.is_final() {
        // Nothing to wait for: every item was rejected, or there are none.
        row.insert("finished_at".to_owned(), s(created_at));
    }
    row
}

pub(super) fn item_row(pk: &str, item: &BatchItem) -> Item {
    let mut row = key(pk.to_owned(), item_sk(item.index));
    row.extend([
        ("item_type".to_owned(), s("batch_item")),
        ("index".to_owned(), n(u64::from(item.index))),
        ("status".to_owned(), s(item.status.as_str())),
    ]);
    let optional = [
        ("custom_id", item.custom_id.clone().map(s)),
        ("design_id", item.design_id.as_ref().map(|d| s(d.as_str()))),
        ("revision", item.revision.map(n)),
        ("verdict", item.verdict.map(|v| s(v.as_str()))),
        ("reason", item.reason.clone().map(s)),
    ];
    row.extend(optional.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value?))));
    row
}

fn submission_put(pk: &str, index: u32, submission: &str, expires: u64) -> WriteRequest {
    let mut row = expiring(key(pk.to_owned(), submission_sk(index)), expires);
    row.extend([
        ("item_type".to_owned(), s("batch_submission")),
        ("index".to_owned(), n(u64::from(index))),
        ("submission".to_owned(), s(submission)),
    ]);
    let put = PutRequest::builder().set_item(Some(row)).build().expect("the item is set");
    WriteRequest::builder().put_request(put).build()
}

/// `rows` in groups of at most [`TRANSACTION_PUTS`] and about [`TRANSACTION_BYTES`], in order.
pub(super) fn transactions(rows: Vec<Item>) -> Vec<Vec<Item>> {
    let bytes_of = |row: &Item| row.iter().map(|(name, value)| name.len() + value.as_s().map_or(16, String::len)).sum();
    let mut groups = Vec::new();
    let (mut group, mut bytes): (Vec<Item>, usize) = (Vec::new(), 0);
    for row in rows {
        let size: usize = bytes_of(&row);
        if !group.is_empty() && (group.len() == TRANSACTION_PUTS || bytes + size > TRANSACTION_BYTES) {
            groups.push(std::mem::take(&mut group));
            bytes = 0;
        }
        bytes += size;
        group.push(row);
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups
}

/// Runs `calls`, [`IN_FLIGHT`] at a time, until one fails (the rest are then dropped).
async fn in_parallel<F>(calls: impl Iterator<Item = F>) -> PortResult<()>
where
    F: Future<Output = PortResult<()>> + Send + 'static,
{
    let mut calls = calls;
    let mut running = JoinSet::new();
    loop {
        while running.len() < IN_FLIGHT {
            let Some(call) = calls.next() else { break };
            running.spawn(call);
        }
        match running.join_next().await {
            None => return Ok(()),
            Some(Ok(done)) => done?,
            Some(Err(e)) => {
                return Err(PortError::backend(format!("a write of a batch's items did not finish: {e}"), true, e))
            }
        }
    }
}

/// A longer pause each time DynamoDB leaves writes unprocessed (it is throttling them).
async fn pause(attempt: u32) {
    let jitter = u64::from(Utc::now().timestamp_subsec_nanos() % 16);
    tokio::time::sleep(Duration::from_millis((20 << attempt.min(6)) + jitter)).await;
}

async fn write_submissions(client: Client, table: String, mut requests: Vec<WriteRequest>) -> PortResult<()> {
    for attempt in 0..MAX_ATTEMPTS {
        let out = client
            .batch_write_item()
            .request_items(&table, requests)
            .send()
            .await
            .map_err(|e| classify("write batch submissions", e))?;
        requests = out.unprocessed_items.and_then(|mut u| u.remove(&table)).unwrap_or_default();
        if requests.is_empty() {
            return Ok(());
        }
        pause(attempt).await;
    }
    Err(PortError::Throttled { retry_after: None })
}

/// Puts `rows` where none is, in one transaction; a row that is there already (an earlier or a
/// concurrent create of the batch wrote it, and it may have moved on since) is kept as it is.
pub(super) async fn put_items(client: Client, table: String, mut rows: Vec<Item>) -> PortResult<()> {
    for attempt in 0..MAX_ATTEMPTS {
        let puts = rows.iter().map(|row| put_new(&table, row.clone())).collect();
        let reasons = match transact(&client, "create batch items", puts).await? {
            Ok(()) => return Ok(()),
            Err(reasons) => reasons,
        };
        if reasons.len() == rows.len() {
            rows = rows
                .into_iter()
                .zip(reasons)
                .filter(|(_, reason)| *reason != Some(Class::ConditionFailed))
                .map(|(row, _)| row)
                .collect();
            if rows.is_empty() {
                return Ok(());
            }
        } else {
            // No reason per put to tell which rows are there: one put each.
            return put_each(&client, &table, rows).await;
        }
        pause(attempt).await;
    }
    Err(PortError::Unavailable(
        format!("the items of a batch met other writes {MAX_ATTEMPTS} times in a row while being created").into(),
    ))
}

async fn put_each(client: &Client, table: &str, rows: Vec<Item>) -> PortResult<()> {
    for row in rows {
        let put = client
            .put_item()
            .table_name(table)
            .set_item(Some(row))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .send()
            .await;
        match put {
            Ok(_) => {}
            Err(e) if is_condition_failed(&e) => {}
            Err(e) => return Err(classify("create batch item", e)),
        }
    }
    Ok(())
}
