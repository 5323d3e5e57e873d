//! Batches on DynamoDB (`openqq_core::batch`): what the rules are is the core's, and the embedded
//! store's behaviour is the reference; this module only lays them out in the one table.
//!
//! | item | `pk` | `sk` | written by |
//! |---|---|---|---|
//! | batch | `T#{tenant}` | `BATCH#{batch}` | `create_batch` (conditional put), then only transactions |
//! | batch item | `T#{tenant}#BATCH#{batch}` | `I#{index:010}` | `create_batch` (conditional puts), then only transactions |
//! | submission | `T#{tenant}#BATCH#{batch}` | `P#{index:010}` | `create_batch` (plain puts), never changed |
//!
//! The batch row keeps the counts beside it (a counter per item status, the verdicts, `ended`:
//! the ordinals handed out), so reading a batch of 10,000 items reads one row, and every change
//! of an item's status is **one transaction with the counters it moves**: counts never drift,
//! whatever calls race. A submission (up to a design record, 64 KiB) has a row of its own so that paging
//! items reads small rows only; it is written once and read when its item is released.
//!
//! - `create`: submissions, then items, then the batch row, so a create cut short leaves no
//!   batch (and a re-run writes what is missing).
//! - `progress`: release, end (optimistic on `ended`), stop, and stamping a finished batch.
//! - `update`: one row's update built clause by clause, as a transaction's action or on its own.
//!
//! Every row of a batch carries the TTL attribute, its creation plus the batch retention, and
//! reads pass over a batch created before the retention (DynamoDB deletes expired rows some time
//! later, in no order, so nothing relies on it).
//!
//! Batches sort by id (UUIDv7), so the tenant's batches newest first are one descending `Query` of
//! the `BATCH#` prefix; items sort by their zero-padded index. No index of the table is needed.

mod create;
mod progress;
#[cfg(test)]
mod tests;
mod update;

use super::error::classify;
use super::reads::{each_projected, get_item, prefix_range, query};
use super::table::{corrupt, s, tenant_pk, Attrs, Item, PK, SK};
use super::DynamoDesignStore;
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::batch::{
    BatchId, BatchItem, BatchState, BatchStatus, BatchView, Batches, Counts, Ended, ItemStatus, MaxFailed, NewBatch,
    NewItem, Released, Verdicts,
};
use openqq_core::ports::PortResult;
use openqq_core::{DesignId, Failure, Page, PortError, TenantId, Verdict};
use std::ops::Range;
use update::RowUpdate;

/// Largest page of batches or items, whatever the caller asks (as the embedded store).
const MAX_BATCH_PAGE: usize = 1000;

const BATCH_PREFIX: &str = "BATCH#";
const ITEM_PREFIX: &str = "I#";
const SUBMISSION_PREFIX: &str = "P#";

/// The counters of the batch row, one per item status (named as the status) and these.
const PASS: &str = "pass";
const FAIL: &str = "fail";
const ENDED: &str = "ended";

fn batch_sk(id: &BatchId) -> String {
    format!("{BATCH_PREFIX}{id}")
}

fn items_pk(tenant: &TenantId, id: &BatchId) -> String {
    format!("T#{tenant}#{BATCH_PREFIX}{id}")
}

/// Zero-padded to the ten digits of `u32::MAX`, so string order is index order.
fn item_sk(index: u32) -> String {
    format!("{ITEM_PREFIX}{index:010}")
}

fn submission_sk(index: u32) -> String {
    format!("{SUBMISSION_PREFIX}{index:010}")
}

/// The sort keys of `indexes` under `prefix`, inclusive, for a `BETWEEN`; `None` when empty.
fn index_range(prefix: &str, indexes: &Range<u32>) -> Option<(String, String)> {
    let last = indexes.end.checked_sub(1).filter(|last| *last >= indexes.start)?;
    Some((format!("{prefix}{:010}", indexes.start), format!("{prefix}{last:010}")))
}

async fn get_batch(client: &Client, table: &str, tenant: &TenantId, id: &BatchId) -> PortResult<Option<Item>> {
    get_item(client, table, tenant_pk(tenant), batch_sk(id)).await
}

fn count(item: &Item, name: &str) -> PortResult<u32> {
    u32::try_from(item.num(name)?).map_err(|_| corrupt(name))
}

fn opt_time(item: &Item, name: &str) -> PortResult<Option<DateTime<Utc>>> {
    item.opt_str(name)
        .map(|t| DateTime::parse_from_rfc3339(t).map(|t| t.with_timezone(&Utc)).map_err(|_| corrupt(name)))
        .transpose()
}

/// The count of items of `status` (each has a counter of the batch row named as it).
fn count_of(counts: &Counts, status: ItemStatus) -> u32 {
    match status {
        ItemStatus::Queued => counts.queued,
        ItemStatus::Validating => counts.validating,
        ItemStatus::Ready => counts.ready,
        ItemStatus::Failed => counts.failed,
        ItemStatus::Rejected => counts.rejected,
        ItemStatus::Cancelled => counts.cancelled,
    }
}

fn counts(item: &Item) -> PortResult<Counts> {
    let c = |status: ItemStatus| count(item, status.as_str());
    Ok(Counts {
        queued: c(ItemStatus::Queued)?,
        validating: c(ItemStatus::Validating)?,
        ready: c(ItemStatus::Ready)?,
        failed: c(ItemStatus::Failed)?,
        rejected: c(ItemStatus::Rejected)?,
        cancelled: c(ItemStatus::Cancelled)?,
    })
}

/// A batch row as the API shows it.
fn view(item: &Item) -> PortResult<BatchView> {
    let counts = counts(item)?;
    let state = BatchState::parse(item.str_attr("state")?).ok_or_else(|| corrupt("state"))?;
    Ok(BatchView {
        batch_id: BatchId::parse(item.str_attr("batch_id")?).map_err(|_| corrupt("batch_id"))?,
        name: item.str_attr("name")?.to_owned(),
        status: BatchStatus::of(state, &counts),
        counts,
        verdicts: Verdicts { pass: count(item, PASS)?, fail: count(item, FAIL)? },
        max_failed: item.opt_str("max_failed").and_then(MaxFailed::from_text),
        reason: item.opt_str("reason").map(str::to_owned),
        created_at: opt_time(item, "created_at")?.ok_or_else(|| corrupt("created_at"))?,
        started_at: opt_time(item, "started_at")?,
        finished_at: opt_time(item, "finished_at")?,
    })
}

fn index_of(item: &Item) -> PortResult<u32> {
    count(item, "index")
}

fn status_of(item: &Item) -> PortResult<ItemStatus> {
    ItemStatus::parse(item.str_attr("status")?).ok_or_else(|| corrupt("status"))
}

fn design_of(item: &Item) -> PortResult<Option<DesignId>> {
    item.opt_str("design_id").map(|d| DesignId::parse(d).map_err(|_| corrupt("design_id"))).transpose()
}

/// An item row as the API shows it.
fn batch_item(item: &Item) -> PortResult<BatchItem> {
    Ok(BatchItem {
        index: index_of(item)?,
        custom_id: item.opt_str("custom_id").map(str::to_owned),
        design_id: design_of(item)?,
        revision: item.opt_num("revision")?,
        status: status_of(item)?,
        verdict: item.opt_str("verdict").and_then(Verdict::parse),
        reason: item.opt_str("reason").map(str::to_owned),
    })
}

/// The item rows of a batch from index `from` on, in index order, those with `status` only when
/// given, until `want` are read. A filter is applied after DynamoDB reads, so a filtered query
/// reads whole pages (the rows are small) rather than `want` rows at a time; the cursor is the
/// last index kept, so rows read past it cost nothing but their read.
async fn item_rows(
    client: &Client,
    table: &str,
    pk: &str,
    (low, high): (String, String),
    status: Option<ItemStatus>,
    want: usize,
) -> PortResult<Vec<Item>> {
    let mut rows = Vec::new();
    let mut start = None;
    while rows.len() < want {
        let mut request = client
            .query()
            .table_name(table)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :low AND :high")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":low", s(low.clone()))
            .expression_attribute_values(":high", s(high.clone()))
            .consistent_read(true)
            .set_exclusive_start_key(start.take());
        request = match status {
            Some(status) => request
                .filter_expression("#status = :status")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":status", s(status.as_str())),
            None => request.limit(i32::try_from(want - rows.len()).unwrap_or(i32::MAX)),
        };
        let out = request.send().await.map_err(|e| classify("query batch items", e))?;
        rows.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => break,
        }
    }
    rows.truncate(want);
    Ok(rows)
}

async fn items_page(
    store: &DynamoDesignStore,
    tenant: &TenantId,
    id: &BatchId,
    status: Option<ItemStatus>,
    after: Option<u32>,
    limit: usize,
) -> PortResult<Option<Page<BatchItem>>> {
    let (client, table) = (&store.client, store.table.as_str());
    let limit = limit.clamp(1, MAX_BATCH_PAGE);
    let Some(from) = after.map_or(Some(0), |a| a.checked_add(1)) else {
        // Nothing comes after the last index there can be.
        return Ok(store.batch(tenant, id).await?.map(|_| Page { items: Vec::new(), next: None }));
    };
    let range = (item_sk(from), format!("{ITEM_PREFIX}\u{10FFFF}"));
    let pk = items_pk(tenant, id);
    let (batch, rows) =
        tokio::try_join!(store.batch(tenant, id), item_rows(client, table, &pk, range, status, limit + 1))?;
    if batch.is_none() {
        return Ok(None);
    }
    let mut items = rows.iter().map(batch_item).collect::<PortResult<Vec<_>>>()?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|i| i.index.to_string()).unwrap_or_default()
    });
    Ok(Some(Page { items, next }))
}

/// Whether a batch created at `created_at` is past the retention `keep`.
fn expired(created_at: DateTime<Utc>, keep: std::time::Duration) -> bool {
    chrono::Duration::from_std(keep).is_ok_and(|keep| created_at < Utc::now() - keep)
}

/// The batch row's view, unless the batch is past the retention `keep`.
fn live_view(row: &Item, keep: std::time::Duration) -> PortResult<Option<BatchView>> {
    let view = view(row)?;
    Ok((!expired(view.created_at, keep)).then_some(view))
}

/// The tenant's batches newest first. Ids sort by creation, so batches past the retention are the
/// listing's tail: passing over them leaves a short last page.
async fn list(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    cursor: Option<&str>,
    limit: usize,
    keep: std::time::Duration,
) -> PortResult<Page<BatchView>> {
    let limit = limit.clamp(1, MAX_BATCH_PAGE);
    let cursor = cursor
        .map(BatchId::parse)
        .transpose()
        .map_err(|e| PortError::invalid("cursor", Failure::new("it is not one this listing returned", e)))?;
    // The range runs up to the cursor's own row (inclusive), which is dropped.
    let range = match &cursor {
        Some(c) => (BATCH_PREFIX.to_owned(), batch_sk(c)),
        None => prefix_range(BATCH_PREFIX),
    };
    let rows = query(client, table, tenant_pk(tenant), range, true, limit + 2).await?;
    let cursor = cursor.as_ref().map(BatchId::as_str);
    let mut items = Vec::new();
    for row in rows.iter().filter(|row| row.opt_str("batch_id") != cursor).take(limit + 1) {
        items.extend(live_view(row, keep)?);
    }
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|b| b.batch_id.to_string()).unwrap_or_default()
    });
    Ok(Page { items, next })
}

#[async_trait]
impl Batches for DynamoDesignStore {
    async fn create_batch(&self, tenant: &TenantId, batch: &NewBatch, items: &[NewItem]) -> PortResult<bool> {
        create::create(&self.client, &self.table, tenant, batch, items, self.retention.batches).await
    }

    async fn batch(&self, tenant: &TenantId, id: &BatchId) -> PortResult<Option<BatchView>> {
        match get_batch(&self.client, &self.table, tenant, id).await? {
            Some(row) => live_view(&row, self.retention.batches),
            None => Ok(None),
        }
    }

    async fn list_batches(&self, tenant: &TenantId, cursor: Option<&str>, limit: usize) -> PortResult<Page<BatchView>> {
        list(&self.client, &self.table, tenant, cursor, limit, self.retention.batches).await
    }

    async fn batch_items(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        status: Option<ItemStatus>,
        after: Option<u32>,
        limit: usize,
    ) -> PortResult<Option<Page<BatchItem>>> {
        items_page(self, tenant, id, status, after, limit).await
    }

    async fn release_items(&self, tenant: &TenantId, id: &BatchId, indexes: Range<u32>) -> PortResult<Vec<Released>> {
        progress::release(&self.client, &self.table, tenant, id, indexes).await
    }

    async fn end_item(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        index: u32,
        status: ItemStatus,
        verdict: Option<Verdict>,
    ) -> PortResult<Option<Ended>> {
        progress::end(&self.client, &self.table, tenant, id, index, status, verdict).await
    }

    async fn stop_batch(
        &self,
        tenant: &TenantId,
        id: &BatchId,
        state: BatchState,
        reason: &str,
    ) -> PortResult<Option<BatchView>> {
        if self.batch(tenant, id).await?.is_none() {
            return Ok(None);
        }
        progress::stop(&self.client, &self.table, tenant, id, state, reason).await
    }

    async fn open_items(&self, tenant: &TenantId) -> PortResult<u64> {
        open_items(&self.client, &self.table, tenant, self.retention.batches).await
    }
}

/// The open items of the tenant's unfinished batches: the tenant's batch items (`BATCH#`) without
/// `finished_at` created within the retention `keep`, reading only their two counters and
/// creation. Its read cost grows with the tenant's batches kept (about 300 bytes a batch); it runs
/// once per batch submitted.
async fn open_items(client: &Client, table: &str, tenant: &TenantId, keep: std::time::Duration) -> PortResult<u64> {
    let mut open = 0u64;
    let unfinished = ("attribute_not_exists(#f)", "finished_at");
    let range = prefix_range(BATCH_PREFIX);
    let counters = ["queued", "validating", "created_at"];
    each_projected(
        client,
        table,
        tenant_pk(tenant),
        range,
        &counters,
        Some(unfinished),
        "count open batch items",
        |item| {
            if opt_time(item, "created_at")?.is_some_and(|at| expired(at, keep)) {
                return Ok(());
            }
            open += item.opt_num("queued")?.unwrap_or(0) + item.opt_num("validating")?.unwrap_or(0);
            Ok(())
        },
    )
    .await?;
    Ok(open)
}
