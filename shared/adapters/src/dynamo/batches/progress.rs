//! Items on their way and back: released (queued → validating), ended (validating → ready or
//! failed, with the next ordinal), cancelled by a stop (queued → cancelled). Each item's move is
//! conditional on the status it leaves and is in one transaction with the batch row's counters it
//! changes, so no race between calls makes the counts drift; the finish is stamped by whichever
//! call reads the batch with nothing open once its own move is written.

use super::{
    batch_sk, count, design_of, get_batch, index_of, index_range, item_rows, item_sk, items_pk, status_of, view,
    RowUpdate, ENDED, FAIL, ITEM_PREFIX, PASS, SUBMISSION_PREFIX,
};
use crate::dynamo::error::{classify, is_condition_failed, Class};
use crate::dynamo::reads::{get_item, prefix_range, query};
use crate::dynamo::table::{corrupt, key, n, s, tenant_pk, Attrs, Item};
use crate::dynamo::transact::{back_off, transact};
use aws_sdk_dynamodb::types::ReturnValue;
use aws_sdk_dynamodb::Client;
use chrono::Utc;
use openqq_core::batch::{BatchId, BatchState, BatchView, Ended, ItemStatus, Released};
use openqq_core::ports::PortResult;
use openqq_core::{PortError, TenantId, Verdict};
use std::collections::HashMap;
use std::ops::Range;

/// Items moved by one transaction, beside the batch row (DynamoDB allows 100 actions).
const GROUP: usize = 99;
const MAX_ATTEMPTS: u32 = 16;
/// Ends of one batch's items race for its next ordinal, one winner a round: as many rounds as a
/// window has items on their way may be lost.
const MAX_END_ATTEMPTS: u32 = 96;

/// A move of items from one status to another, with its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Move {
    /// Queued → validating, only while the batch runs; the first starts the batch.
    Release,
    /// Queued → cancelled, once the batch is stopped.
    Cancel,
}

#[derive(Debug, PartialEq, Eq)]
enum Moved {
    All,
    /// The batch row refused: it is not running (a release), or not there.
    Refused,
    /// An item was not where it was read (another call moved it): read again.
    Raced,
}

fn lost(what: &str, attempts: u32) -> PortError {
    PortError::Unavailable(format!("{what} lost the race to other writers {attempts} times in a row").into())
}

fn batch_key(tenant: &TenantId, id: &BatchId) -> Item {
    key(tenant_pk(tenant), batch_sk(id))
}

/// Moves the items of `indexes` (each read as queued), a group per transaction.
async fn move_items(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &BatchId,
    indexes: &[u32],
    how: Move,
) -> PortResult<Moved> {
    let (to, op) = match how {
        Move::Release => (ItemStatus::Validating, "release batch items"),
        Move::Cancel => (ItemStatus::Cancelled, "cancel batch items"),
    };
    let pk = items_pk(tenant, id);
    let mut outcome = Moved::All;
    for group in indexes.chunks(GROUP) {
        let k = group.len() as i64;
        let mut batch = RowUpdate::default().add(ItemStatus::Queued.as_str(), -k).add(to.as_str(), k);
        batch = match how {
            Move::Release => batch
                .set_if_absent("started_at", s(Utc::now().to_rfc3339()))
                .when("state", s(BatchState::Running.as_str())),
            Move::Cancel => batch.when_present(),
        };
        let mut actions = vec![batch.in_transaction(table, batch_key(tenant, id))];
        actions.extend(group.iter().map(|&index| {
            RowUpdate::default()
                .set("status", s(to.as_str()))
                .when("status", s(ItemStatus::Queued.as_str()))
                .in_transaction(table, key(pk.clone(), item_sk(index)))
        }));
        let Err(reasons) = transact(client, op, actions).await? else { continue };
        match reasons.first() {
            Some(Some(Class::ConditionFailed)) => return Ok(Moved::Refused),
            Some(_) => outcome = Moved::Raced,
            // No reasons given: whether the batch refused is read.
            None => match get_batch(client, table, tenant, id).await? {
                Some(row) if how == Move::Cancel || row.opt_str("state") == Some(BatchState::Running.as_str()) => {
                    outcome = Moved::Raced
                }
                _ => return Ok(Moved::Refused),
            },
        }
    }
    Ok(outcome)
}

fn indexes_with(rows: &[Item], status: ItemStatus) -> PortResult<Vec<u32>> {
    let mut indexes = Vec::new();
    for row in rows {
        if status_of(row)? == status {
            indexes.push(index_of(row)?);
        }
    }
    Ok(indexes)
}

pub(super) async fn release(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &BatchId,
    indexes: Range<u32>,
) -> PortResult<Vec<Released>> {
    let Some(range) = index_range(ITEM_PREFIX, &indexes) else { return Ok(Vec::new()) };
    let (pk, want) = (items_pk(tenant, id), indexes.len());
    let mut attempt = 0;
    // The rows of the range once none is left to move: what is validating is the answer.
    let rows = loop {
        let rows = item_rows(client, table, &pk, range.clone(), None, want).await?;
        let queued = indexes_with(&rows, ItemStatus::Queued)?;
        if queued.is_empty() {
            break rows;
        }
        match move_items(client, table, tenant, id, &queued, Move::Release).await? {
            // Read again: what is validating now.
            Moved::All => {}
            // Stopped (its queued items are or are being cancelled), or no batch: none leaves.
            Moved::Refused => break item_rows(client, table, &pk, range.clone(), None, want).await?,
            Moved::Raced if attempt < MAX_ATTEMPTS => {
                tracing::debug!(%tenant, batch_id = %id, attempt, "A release of batch items lost a race; reading again.");
                back_off(attempt).await;
            }
            Moved::Raced => return Err(lost("a release of batch items", MAX_ATTEMPTS)),
        }
        attempt += 1;
    };
    let mut validating = Vec::new();
    for row in &rows {
        if status_of(row)? == ItemStatus::Validating {
            validating.push(row);
        }
    }
    let (Some(first), Some(last)) = (validating.first(), validating.last()) else { return Ok(Vec::new()) };
    let (first, last) = (index_of(first)?, index_of(last)?);
    let within = index_range(SUBMISSION_PREFIX, &(first..last.saturating_add(1))).unwrap_or_default();
    let span = (last - first) as usize + 1;
    let mut submissions: HashMap<u32, String> = HashMap::new();
    for row in query(client, table, pk, within, false, span).await? {
        submissions.insert(index_of(&row)?, row.str_attr("submission")?.to_owned());
    }
    validating
        .into_iter()
        .map(|row| {
            let index = index_of(row)?;
            Ok(Released {
                index,
                design_id: design_of(row)?.ok_or_else(|| corrupt("design_id"))?,
                revision: row.opt_num("revision")?.unwrap_or(1),
                submission: submissions.remove(&index).unwrap_or_default(),
            })
        })
        .collect()
}

/// The batch row as it is, its finish stamped if nothing is open and none is yet.
async fn finish_if_final(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &BatchId,
) -> PortResult<Option<BatchView>> {
    let Some(row) = get_batch(client, table, tenant, id).await? else { return Ok(None) };
    let batch = view(&row)?;
    if !batch.counts.is_final() || batch.finished_at.is_some() {
        return Ok(Some(batch));
    }
    let stamp = RowUpdate::default()
        .set("finished_at", s(Utc::now().to_rfc3339()))
        .when(ItemStatus::Queued.as_str(), n(0))
        .when(ItemStatus::Validating.as_str(), n(0))
        .when_absent("finished_at")
        .request(client, table, batch_key(tenant, id))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match stamp {
        Ok(out) => out.attributes.as_ref().map(view).transpose(),
        // Another call stamped it first.
        Err(e) if is_condition_failed(&e) => get_batch(client, table, tenant, id).await?.as_ref().map(view).transpose(),
        Err(e) => Err(classify("finish batch", e)),
    }
}

fn orphan() -> PortError {
    PortError::corrupt("batch", "an item of it has no batch")
}

pub(super) async fn end(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &BatchId,
    index: u32,
    status: ItemStatus,
    verdict: Option<Verdict>,
) -> PortResult<Option<Ended>> {
    if !matches!(status, ItemStatus::Ready | ItemStatus::Failed) {
        return Err(PortError::invalid("batch item", format!("an item ends ready or failed, not {}", status.as_str())));
    }
    let item_key = key(items_pk(tenant, id), item_sk(index));
    for attempt in 0..MAX_END_ATTEMPTS {
        let (item, batch) = tokio::try_join!(
            get_item(client, table, items_pk(tenant, id), item_sk(index)),
            get_batch(client, table, tenant, id),
        )?;
        let Some(item) = item else { return Ok(None) };
        let batch = batch.ok_or_else(orphan)?;
        if status_of(&item)? != ItemStatus::Validating {
            let ordinal =
                item.opt_num("ordinal")?.map(|o| u32::try_from(o).map_err(|_| corrupt("ordinal"))).transpose()?;
            return Ok(Some(Ended { ordinal, fresh: false, batch: view(&batch)? }));
        }
        let ended = count(&batch, ENDED)?;
        let ordinal = ended.checked_add(1).ok_or_else(|| corrupt(ENDED))?;
        let mut item_update = RowUpdate::default()
            .set("status", s(status.as_str()))
            .set("ordinal", n(u64::from(ordinal)))
            .when("status", s(ItemStatus::Validating.as_str()));
        if let Some(verdict) = verdict {
            item_update = item_update.set("verdict", s(verdict.as_str()));
        }
        // Conditional on `ended` as read: of racing ends, one takes each ordinal.
        let batch_update = RowUpdate::default()
            .set(ENDED, n(u64::from(ordinal)))
            .add(ItemStatus::Validating.as_str(), -1)
            .add(status.as_str(), 1)
            .add(PASS, i64::from(verdict == Some(Verdict::Pass)))
            .add(FAIL, i64::from(verdict == Some(Verdict::Fail)))
            .when(ENDED, n(u64::from(ended)));
        let actions = vec![
            item_update.in_transaction(table, item_key.clone()),
            batch_update.in_transaction(table, batch_key(tenant, id)),
        ];
        match transact(client, "end a batch item", actions).await? {
            Ok(()) => {
                let batch = finish_if_final(client, table, tenant, id).await?.ok_or_else(orphan)?;
                return Ok(Some(Ended { ordinal: Some(ordinal), fresh: true, batch }));
            }
            Err(_) => {
                tracing::debug!(%tenant, batch_id = %id, index, attempt, "An end of a batch item lost a race; reading again.");
                back_off(attempt).await;
            }
        }
    }
    Err(lost("an end of a batch item", MAX_END_ATTEMPTS))
}

pub(super) async fn stop(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &BatchId,
    state: BatchState,
    reason: &str,
) -> PortResult<Option<BatchView>> {
    // The state first: from then on no release is written, so the queued items read below are
    // all there will be.
    let stopped = RowUpdate::default()
        .set("state", s(state.as_str()))
        .set("reason", s(reason))
        .when("state", s(BatchState::Running.as_str()))
        // A batch that ended is left as it ended.
        .when_absent("finished_at")
        .request(client, table, batch_key(tenant, id))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    let row = match stopped {
        Ok(out) => out.attributes.unwrap_or_default(),
        // Not running: left as it is, but for what a stop cut short left queued.
        Err(e) if is_condition_failed(&e) => match get_batch(client, table, tenant, id).await? {
            Some(row) => row,
            None => return Ok(None),
        },
        Err(e) => return Err(classify("stop batch", e)),
    };
    if count(&row, ItemStatus::Queued.as_str())? > 0 {
        cancel_queued(client, table, tenant, id).await?;
    }
    finish_if_final(client, table, tenant, id).await
}

async fn cancel_queued(client: &Client, table: &str, tenant: &TenantId, id: &BatchId) -> PortResult<()> {
    let pk = items_pk(tenant, id);
    for attempt in 0..MAX_ATTEMPTS {
        let queued = item_rows(client, table, &pk, prefix_range(ITEM_PREFIX), Some(ItemStatus::Queued), usize::MAX);
        let queued = indexes_with(&queued.await?, ItemStatus::Queued)?;
        if queued.is_empty() {
            return Ok(());
        }
        match move_items(client, table, tenant, id, &queued, Move::Cancel).await? {
            Moved::All | Moved::Refused => return Ok(()),
            Moved::Raced => {
                tracing::debug!(%tenant, batch_id = %id, attempt, "A cancellation of batch items lost a race; reading again.");
                back_off(attempt).await;
            }
        }
    }
    Err(lost("a cancellation of batch items", MAX_ATTEMPTS))
}
