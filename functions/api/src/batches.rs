//! The batch routes: `POST /v1/batches` checks every item up front, keeps the items as one object
//! of the tenant and publishes one `batch.submitted` record (the batch function fans it out, see
//! `openqq_core::batch`); the reads page through batches and their items; cancel stops what has
//! not started; retry submits a finished batch's failed items once more, as a new batch. Batch
//! items do not take the tenant's request rate (one request is one admission): they are weighed
//! against a quota of their own, items per window and items open at once ([`crate::limit::check_batch`]).

pub mod items;

use crate::designs::{query, ListQuery};
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use openqq_core::batch::{
    BatchItemEnded, BatchState, BatchSubmitted, BatchView, ItemRef, ItemStatus, MaxFailed, NewBatch, MAX_BATCH_ITEMS,
};
use openqq_core::budget;
use openqq_core::event::Origin;
use openqq_core::{BatchId, CorrelationId, Envelope, EventKind, KeptResponse, TenantId};
use serde::Deserialize;

/// A batch body: `application/json` (`{name, items, …}`) or `application/x-ndjson` (one item a
/// line; the other fields in the query string).
pub struct BatchBody {
    ndjson: bool,
    bytes: axum::body::Bytes,
}

impl FromRequest<AppState> for BatchBody {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Problem> {
        let media = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|ct| {
            let m = ct.split(';').next()?.trim().to_ascii_lowercase();
            Some(m)
        });
        let ndjson = match media.as_deref() {
            Some("application/json") => false,
            Some("application/x-ndjson") => true,
            _ => {
                return Err(Problem::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported-media-type",
                    "Unsupported media type",
                    "send a batch as application/json ({\"name\", \"items\": [...]}) or application/x-ndjson (one item a line)",
                ))
            }
        };
        let bytes = crate::body::read_all(req.into_body(), state.max_body_bytes).await?;
        Ok(BatchBody { ndjson, bytes })
    }
}

/// What a batch request says besides its items (the JSON body's fields, or an NDJSON body's
/// query string).
#[derive(Debug, Default)]
pub struct BatchOptions {
    pub name: Option<String>,
    /// `reject` (the default): a batch with an invalid item is refused whole; `skip`: accepted,
    /// with those items `rejected`.
    pub on_invalid: OnInvalid,
    pub max_failed: Option<MaxFailed>,
    /// Items as an upload of the tenant holding JSON lines (`POST /v1/uploads`), for large batches.
    pub items_ref: Option<crate::designs::RequestRef>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnInvalid {
    #[default]
    Reject,
    Skip,
}

/// The JSON body: the options and the items inline.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonBatch {
    name: Option<String>,
    #[serde(default)]
    on_invalid: OnInvalid,
    max_failed: Option<MaxFailed>,
    items_ref: Option<crate::designs::RequestRef>,
    #[serde(default)]
    items: Option<Vec<Box<serde_json::value::RawValue>>>,
}

/// Longest batch name, in bytes.
const MAX_NAME_BYTES: usize = 200;

pub async fn submit(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Extension(corr): Extension<CorrelationId>,
    headers: HeaderMap,
    query_options: Result<Query<BatchOptionsQuery>, axum::extract::rejection::QueryRejection>,
    body: BatchBody,
) -> Result<Response, Problem> {
    let key = crate::designs::idempotency::key(&headers)?;
    let (options, lines) = if body.ndjson {
        let q = query(query_options)?;
        (q.into_options()?, items::ndjson_lines(&body.bytes)?)
    } else {
        let batch: JsonBatch = crate::body::parse(&body.bytes)?;
        let items = batch.items.unwrap_or_default().into_iter().map(|i| i.get().to_owned()).collect();
        let options = BatchOptions {
            name: batch.name,
            on_invalid: batch.on_invalid,
            max_failed: batch.max_failed,
            items_ref: batch.items_ref,
        };
        (options, items)
    };
    let name = options.name.clone().unwrap_or_default();
    if name.trim().is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Problem::invalid_field("name", format!("is required: 1 to {MAX_NAME_BYTES} bytes")));
    }
    let lines = match (&options.items_ref, lines.is_empty()) {
        (Some(_), false) => {
            return Err(Problem::invalid_field("items_ref", "give the items inline or by reference, not both"))
        }
        (Some(r), true) => items::referenced(&state, &tenant, r).await?,
        (None, _) => lines,
    };
    if lines.is_empty() {
        return Err(Problem::invalid_field("items", "a batch needs at least one item"));
    }
    if lines.len() > MAX_BATCH_ITEMS {
        return Err(Problem::invalid_field(
            "items",
            format!("{} items: a batch holds at most {MAX_BATCH_ITEMS}; split it", lines.len()),
        ));
    }
    let fingerprint = match &key {
        Some(_) => crate::designs::idempotency::fingerprint("/v1/batches", &body.bytes),
        None => [0; 32],
    };
    drop(body);
    let fresh = BatchId::generate().to_string();
    let (state, tenant) = (&state, &tenant);
    crate::designs::idempotency::once_naming(&state.idempotency, tenant, key, fingerprint, fresh, |id| async move {
        crate::limit::check_batch(state, tenant, lines.len()).await?;
        let checked = items::check_all(state, tenant, &lines, options.on_invalid).await.map_err(|mut p| {
            if p.slug == "invalid-items" {
                p.detail += "; on_invalid=skip (a field of a JSON body, a query parameter with JSON lines) \
                             submits the valid items and reports these rejected";
            }
            p
        })?;
        let batch = Naming { id: named(&id), name, max_failed: options.max_failed, retry_of: None };
        accept(state, tenant.clone(), corr, batch, checked).await
    })
    .await
}

/// The batch id an idempotency key's claim holds ([`crate::designs::idempotency::once_naming`]);
/// one that does not parse was not written here.
fn named(id: &str) -> BatchId {
    BatchId::parse(id).unwrap_or_else(|_| BatchId::generate())
}

/// What [`accept`] submits: the batch's id (its key's name), name and threshold, and the batch it
/// retries.
struct Naming<'a> {
    id: BatchId,
    name: String,
    max_failed: Option<MaxFailed>,
    retry_of: Option<&'a BatchId>,
}

/// Keeps the checked items as an object, publishes `batch.submitted`, and creates the batch for
/// reads: [`submit_checked`], answered 202 (naming the batch it retries, for a retry).
async fn accept(
    state: &AppState,
    tenant: TenantId,
    corr: CorrelationId,
    batch: Naming<'_>,
    checked: Vec<openqq_core::batch::StoredItem>,
) -> Result<KeptResponse, Problem> {
    let Naming { id: batch_id, name, max_failed, retry_of } = batch;
    let accepted = submit_checked(state, &tenant, &corr, &batch_id, name, max_failed, checked).await?;
    let mut body = serde_json::json!({
        "batch_id": batch_id, "items": accepted.items, "rejected": accepted.rejected, "correlation_id": corr,
    });
    if let Some(original) = retry_of {
        body["retry_of"] = serde_json::json!(original);
    }
    Ok(KeptResponse {
        status: StatusCode::ACCEPTED.as_u16(),
        headers: vec![
            ("location".into(), format!("/v1/batches/{batch_id}")),
            ("content-type".into(), "application/json".into()),
        ],
        body: serde_json::to_vec(&body).expect("the accepted body serialises"),
    })
}

/// What [`submit_checked`] accepted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accepted {
    pub items: u32,
    pub rejected: usize,
}

/// The one path by which a batch enters the platform, once its items are checked: keeps the items
/// as an object, publishes `batch.submitted`, and creates the batch for reads (the batch function
/// creates it too, if this did not). `POST /v1/batches` and a schedule's fire
/// ([`crate::schedules`]) both call it; the caller names the batch, so a fire submitted again
/// after a crash names the same batch, which is created once.
pub(crate) async fn submit_checked(
    state: &AppState,
    tenant: &TenantId,
    corr: &CorrelationId,
    batch_id: &BatchId,
    name: String,
    max_failed: Option<MaxFailed>,
    checked: Vec<openqq_core::batch::StoredItem>,
) -> Result<Accepted, Problem> {
    let jsonl = openqq_core::batch::items_object(batch_id, &checked);
    let items_ref =
        state.objects.put(tenant, jsonl).await.map_err(|e| Problem::from_port(e, "keeping the batch's items"))?;
    state.quota.forget(tenant);
    let total = checked.len() as u32;
    let rejected = checked.iter().filter(|i| i.rejected.is_some()).count();
    let payload = BatchSubmitted {
        batch_id: batch_id.clone(),
        name: name.clone(),
        items_ref: items_ref.clone(),
        items: total,
        max_failed,
    };
    let cause = origin(tenant, batch_id, corr, None);
    let env = Envelope::new(EventKind::BatchSubmitted, &cause, "api", payload);
    let record = env.to_record();
    let items_log_bytes: u64 =
        checked.iter().filter_map(|i| i.submission.as_ref()).map(|s| budget::log_bytes_of_payload(s.get())).sum();
    // The batch's own records: this one, its `batch.completed`.
    let log_bytes = items_log_bytes + 2 * record.bytes() as u64;
    let (kind, doing) = (EventKind::BatchSubmitted, "publishing the batch");
    crate::limit::publish_charged(state, tenant, log_bytes, kind, record, doing).await?;
    tracing::info!(tenant_id = %tenant, batch_id = %batch_id, items = total, rejected, "A batch was accepted.");
    let new = NewBatch { id: batch_id.clone(), name, max_failed, created_at: env.occurred_at };
    let items: Vec<_> = checked.into_iter().enumerate().map(|(i, item)| item.into_new(i as u32)).collect();
    match state.batches.create_batch(tenant, &new, &items).await {
        // Its items are in the store: the object has served (the batch function reads it only for
        // a batch it does not find).
        Ok(_) => forget_items(state, tenant, batch_id, &items_ref.digest).await,
        Err(e) => tracing::warn!(error = %e, tenant_id = %tenant, batch_id = %batch_id,
            "The batch could not be recorded for reads; it shows once the batch function creates it."),
    }
    Ok(Accepted { items: total, rejected })
}

/// Deletes a batch's items object once the batch is in the store; one left behind (logged) costs
/// only its bytes.
async fn forget_items(state: &AppState, tenant: &TenantId, batch_id: &BatchId, digest: &str) {
    match state.objects.delete(tenant, digest).await {
        Ok(_) => state.quota.forget(tenant),
        Err(e) => tracing::warn!(error = %e, tenant_id = %tenant, batch_id = %batch_id,
            "A batch's items object could not be deleted once the batch was created; it is left behind."),
    }
}

/// Whom a batch's own events are about: the batch (its id as the design id), revision 1.
fn origin(tenant: &TenantId, batch: &BatchId, corr: &CorrelationId, item: Option<ItemRef>) -> Origin {
    Origin {
        tenant_id: tenant.clone(),
        design_id: batch.as_design(),
        revision: 1,
        correlation_id: corr.clone(),
        batch: item,
    }
}

/// An NDJSON body's options, from the query string.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchOptionsQuery {
    name: Option<String>,
    on_invalid: Option<OnInvalid>,
    max_failed: Option<String>,
}

impl BatchOptionsQuery {
    fn into_options(self) -> Result<BatchOptions, Problem> {
        let max_failed = match self.max_failed {
            None => None,
            Some(m) => {
                let value = match m.parse::<u64>() {
                    Ok(n) => serde_json::json!(n),
                    Err(_) => serde_json::json!(m),
                };
                Some(MaxFailed::parse(&value).map_err(|e| Problem::invalid_field("max_failed", e))?)
            }
        };
        Ok(BatchOptions {
            name: self.name,
            on_invalid: self.on_invalid.unwrap_or_default(),
            max_failed,
            items_ref: None,
        })
    }
}

fn batch_id(raw: &str) -> Result<BatchId, Problem> {
    BatchId::parse(raw).map_err(|_| batch_not_found())
}

fn batch_not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such batch for this tenant")
}

pub async fn get_one(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let view = read_batch(&state, &tenant, &batch_id(&id)?).await?;
    Ok(Json(view).into_response())
}

/// The tenant's batch `id`; another tenant's is as unknown as one never created.
async fn read_batch(state: &AppState, tenant: &TenantId, id: &BatchId) -> Result<BatchView, Problem> {
    let view = state.batches.batch(tenant, id).await.map_err(|e| Problem::from_port(e, "reading the batch"))?;
    view.ok_or_else(batch_not_found)
}

pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let (limit, cursor) = query(q)?.page(BatchId::parse)?;
    let page = state
        .batches
        .list_batches(&tenant, cursor.as_ref().map(BatchId::as_str), limit)
        .await
        .map_err(|e| Problem::from_port(e, "listing batches"))?;
    Ok(Json(serde_json::json!({ "batches": page.items, "next": page.next })).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemsQuery {
    status: Option<String>,
    after: Option<u32>,
    limit: Option<usize>,
}

pub async fn items(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    q: Result<Query<ItemsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let id = batch_id(&id)?;
    let q = query(q)?;
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(ItemStatus::parse(s).ok_or_else(|| {
            let known: Vec<&str> = ItemStatus::ALL.iter().map(|s| s.as_str()).collect();
            Problem::invalid_field("status", format!("must be one of {}", known.join(", ")))
        })?),
    };
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(Problem::invalid_field("limit", "must be between 1 and 1000"));
    }
    let page = state
        .batches
        .batch_items(&tenant, &id, status, q.after, limit)
        .await
        .map_err(|e| Problem::from_port(e, "listing the batch's items"))?
        .ok_or_else(batch_not_found)?;
    Ok(Json(serde_json::json!({ "items": page.items, "next": page.next })).into_response())
}

/// Stops the items not yet started; finished work stays readable. The batch function is told,
/// so the batch completes once the items on their way end (at once when none is).
pub async fn cancel(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Extension(corr): Extension<CorrelationId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let id = batch_id(&id)?;
    let view = state
        .batches
        .stop_batch(&tenant, &id, BatchState::Cancelled, "cancelled by the tenant")
        .await
        .map_err(|e| Problem::from_port(e, "cancelling the batch"))?
        .ok_or_else(batch_not_found)?;
    let cause = origin(&tenant, &id, &corr, Some(ItemRef { batch_id: id.clone(), index: 0 }));
    let nudge = BatchItemEnded { status: ItemStatus::Cancelled, verdict: None };
    let env = Envelope::new(EventKind::BatchItemEnded, &cause, "api", nudge);
    state
        .log
        .publish(&state.topics.of(EventKind::BatchItemEnded), vec![env.to_record()])
        .await
        .map_err(|e| Problem::from_port(e, "telling the batch function"))?;
    Ok(Json(view).into_response())
}

/// Most failed items one retry reads, page by page.
const RETRY_PAGE: usize = 1000;

/// Submits the failed items of a finished batch once more, as a new batch named after it: each
/// failed item becomes `{"revalidate": its design}` with its `custom_id`, so the design's latest
/// specification is submitted again as its next revision. A batch is retried once: asking again
/// answers the retry that was made (for as long as idempotency keys are kept), whatever
/// `Idempotency-Key` the request sends.
pub async fn retry(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Extension(corr): Extension<CorrelationId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let id = batch_id(&id)?;
    let view = read_batch(&state, &tenant, &id).await?;
    if view.finished_at.is_none() {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "batch-running",
            "The batch is still running",
            format!("batch {id} has items on their way; retry its failed items once it has finished"),
        ));
    }
    if view.counts.failed == 0 {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "nothing-to-retry",
            "The batch has no failed items",
            format!("batch {id} finished without a failed item, so there is nothing to retry"),
        ));
    }
    let key = openqq_core::IdempotencyKey::parse(&format!("batch-retry:{id}")).expect("a batch id makes a valid key");
    let fingerprint = crate::designs::idempotency::fingerprint("/v1/batches/retry", id.as_str().as_bytes());
    let fresh = BatchId::generate().to_string();
    let (state, tenant) = (&state, &tenant);
    crate::designs::idempotency::once_naming(
        &state.idempotency,
        tenant,
        Some(key),
        fingerprint,
        fresh,
        |new| async move {
            let mut lines = Vec::new();
            let mut after = None;
            loop {
                let page = state
                    .batches
                    .batch_items(tenant, &id, Some(ItemStatus::Failed), after, RETRY_PAGE)
                    .await
                    .map_err(|e| Problem::from_port(e, "reading the failed items"))?
                    .ok_or_else(batch_not_found)?;
                for item in &page.items {
                    let mut line = serde_json::json!({ "revalidate": item.design_id });
                    if let Some(custom_id) = &item.custom_id {
                        line["custom_id"] = serde_json::json!(custom_id);
                    }
                    lines.push(line.to_string());
                }
                match (page.next, page.items.last()) {
                    (Some(_), Some(last)) => after = Some(last.index),
                    _ => break,
                }
            }
            crate::limit::check_batch(state, tenant, lines.len()).await?;
            let checked = items::check_all(state, tenant, &lines, OnInvalid::Skip).await?;
            let mut name = format!("{} (retry)", view.name);
            if name.len() > MAX_NAME_BYTES {
                name = format!("retry of {id}");
            }
            let batch = Naming { id: named(&new), name, max_failed: view.max_failed, retry_of: Some(&id) };
            accept(state, tenant.clone(), corr, batch, checked).await
        },
    )
    .await
}
