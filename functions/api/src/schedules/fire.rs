//! A fire of a schedule, exactly once: recorded in the ledger first, as `pending` with its batch
//! id chosen up front, then submitted through the batch path with that id, then settled. Only
//! the caller whose record created the ledger entry submits; one that finds a `pending` entry
//! older than [`PENDING_RESUBMIT_AFTER`] (its submitter crashed, or its submission failed for
//! now) submits it again with the same batch id, which the batch store creates once. The
//! scheduler, `POST …/trigger` and `POST …/backfill` all fire through here.
//!
//! What a fire submits is its schedule's template made into batch items and checked as
//! `POST /v1/batches` checks them, with `on_invalid: skip`: a fixed template's items are checked
//! again (each fire's new designs get new ids, and an item that became invalid is rejected, not
//! the whole fire); a re-validation template becomes one `{"revalidate": id}` item per matching
//! design (its latest specification submitted again as its next revision); a design without a
//! kept specification yet (its first revision still on its way) is a rejected item that says
//! so. A template matching no design records the fire as `empty`, with no batch.

use crate::batches::{items, submit_checked, OnInvalid};
use crate::problem::Problem;
use crate::AppState;
use chrono::{DateTime, TimeDelta, Utc};
use openqq_core::batch::MAX_BATCH_ITEMS;
use openqq_core::schedule::{
    FireOutcome, FireRecord, Recorded, Revalidate, Settle, StoredSchedule, Template, PENDING_RESUBMIT_AFTER,
};
use openqq_core::{BatchId, CorrelationId, PortError, TenantId};

/// Why a fire could not be carried through now; it stays `pending` and is submitted again later.
#[derive(Debug, thiserror::Error)]
pub enum FireError {
    #[error("the ledger could not be written: {0}")]
    Store(#[from] PortError),
    #[error("the batch could not be submitted for now: {0}")]
    Unavailable(String),
}

/// Records the fire of `schedule` at `nominal` and submits it, unless the ledger holds that fire
/// already: then its record is returned (`created` false) and, if it is a stale `pending` one,
/// submitted again ([`follow_up`]).
pub async fn fire(
    state: &AppState,
    tenant: &TenantId,
    schedule: &StoredSchedule,
    nominal: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Recorded, FireError> {
    let pending = FireRecord {
        nominal_time: nominal,
        fired_at: now,
        outcome: FireOutcome::Pending,
        batch_id: Some(BatchId::generate()),
        reason: None,
    };
    let recorded = state.schedules.record_fire(tenant, &schedule.id, &pending).await?;
    if !recorded.created {
        let record = follow_up(state, tenant, schedule, recorded.record, now).await?;
        return Ok(Recorded { created: false, record });
    }
    let record = submit(state, tenant, schedule, &recorded.record).await?;
    Ok(Recorded { created: true, record })
}

/// A fire found in the ledger: a `pending` one older than [`PENDING_RESUBMIT_AFTER`] is
/// submitted again with its batch id; any other comes back as it is.
pub async fn follow_up(
    state: &AppState,
    tenant: &TenantId,
    schedule: &StoredSchedule,
    record: FireRecord,
    now: DateTime<Utc>,
) -> Result<FireRecord, FireError> {
    let stale = now.signed_duration_since(record.fired_at)
        >= TimeDelta::from_std(PENDING_RESUBMIT_AFTER).unwrap_or(TimeDelta::MAX);
    if record.outcome != FireOutcome::Pending || !stale {
        return Ok(record);
    }
    tracing::info!(tenant_id = %tenant, schedule_id = %schedule.id, nominal = %record.nominal_time,
        "A pending fire is submitted again with its batch id.");
    submit(state, tenant, schedule, &record).await
}

/// Submits a `pending` fire with its batch id and settles it: `submitted`, `empty`, or `failed`
/// with the reason when it can never be submitted. A failure that may pass leaves it pending.
pub async fn submit(
    state: &AppState,
    tenant: &TenantId,
    schedule: &StoredSchedule,
    pending: &FireRecord,
) -> Result<FireRecord, FireError> {
    let batch_id = pending
        .batch_id
        .clone()
        .ok_or_else(|| FireError::Store(PortError::corrupt("fire", "a pending fire has no batch id")))?;
    let settle = match batch(state, tenant, schedule, pending.nominal_time, &batch_id).await {
        Ok(Some(())) => Settle { outcome: FireOutcome::Submitted, batch_id: Some(batch_id), reason: None },
        Ok(None) => Settle {
            outcome: FireOutcome::Empty,
            batch_id: None,
            reason: Some("the template matched no design, so no batch was submitted".into()),
        },
        Err(p) if p.status.is_server_error() => return Err(FireError::Unavailable(p.detail)),
        Err(p) => Settle { outcome: FireOutcome::Failed, batch_id: None, reason: Some(p.detail) },
    };
    let settled =
        state.schedules.settle_fire(tenant, &schedule.id, pending.nominal_time, FireOutcome::Pending, &settle).await?;
    let (_, record) = settled
        .ok_or_else(|| FireError::Store(PortError::corrupt("fire", "a pending fire is gone from the ledger")))?;
    tracing::info!(tenant_id = %tenant, schedule_id = %schedule.id, nominal = %record.nominal_time,
        outcome = record.outcome.as_str(), batch_id = ?record.batch_id, "A schedule fired.");
    Ok(record)
}

/// The fire's batch through the batch path; `None` when the template matched nothing.
async fn batch(
    state: &AppState,
    tenant: &TenantId,
    schedule: &StoredSchedule,
    nominal: DateTime<Utc>,
    batch_id: &BatchId,
) -> Result<Option<()>, Problem> {
    let lines = template_items(state, tenant, &schedule.template).await?;
    if lines.is_empty() {
        return Ok(None);
    }
    crate::limit::check_batch(state, tenant, lines.len()).await?;
    let checked = items::check_all(state, tenant, &lines, OnInvalid::Skip).await?;
    let corr = CorrelationId::generate();
    let name = format!("{} {}", schedule.name, nominal.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
    submit_checked(state, tenant, &corr, batch_id, name, None, checked).await?;
    Ok(Some(()))
}

/// The template's batch items, one JSON object a line.
async fn template_items(state: &AppState, tenant: &TenantId, template: &Template) -> Result<Vec<String>, Problem> {
    match template {
        Template::Items { items_ref, .. } => {
            let bytes = state.objects.get(tenant, &items_ref.digest).await.map_err(|e| match e {
                PortError::NotFound => Problem::invalid_field("template", "the template's items are no longer stored"),
                e => Problem::from_port(e, "reading the template's items"),
            })?;
            items::ndjson_lines(&bytes)
        }
        Template::Revalidate(which) => {
            let prefix = match which {
                Revalidate::All => "",
                Revalidate::NamePrefix(p) => p.as_str(),
            };
            let mut lines = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let page = state
                    .reads
                    .list(tenant, cursor.as_deref(), 100)
                    .await
                    .map_err(|e| Problem::from_port(e, "listing the designs to re-validate"))?;
                for design in page.items.iter().filter(|d| d.name.starts_with(prefix)) {
                    lines.push(serde_json::json!({ "revalidate": design.design_id }).to_string());
                }
                match page.next {
                    Some(next) if lines.len() < MAX_BATCH_ITEMS => cursor = Some(next),
                    _ => break,
                }
            }
            lines.truncate(MAX_BATCH_ITEMS);
            Ok(lines)
        }
    }
}
