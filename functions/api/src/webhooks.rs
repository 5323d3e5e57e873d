//! `/v1/webhooks`: a tenant's own webhooks, and what became of their deliveries.
//!
//! - `POST /v1/webhooks` `{url, kinds, description?}` registers one (201); the answer carries the
//!   signing secret, the only time it is shown.
//! - `GET /v1/webhooks`, `GET /v1/webhooks/{id}`, `DELETE /v1/webhooks/{id}` (204; its pending
//!   deliveries go with it).
//! - `POST /v1/webhooks/{id}/rotate` `{overlap_seconds?}`: a new secret; the old one keeps signing
//!   (both signatures are sent) for the overlap, 24 hours unless given, at most 7 days.
//! - `POST /v1/webhooks/{id}/test` queues a `webhook.test` delivery (202).
//! - `GET /v1/webhooks/{id}/deliveries?cursor=&limit=`: newest first, with status, attempts, the
//!   last response code and error.
//!
//! Targets are checked when registered: `https://` or `http://`, and no private, loopback,
//! link-local or metadata address, literal or by name (the delivery worker checks the resolved
//! addresses again when it connects). `openqq up --webhooks-allow-private` lifts the address
//! check for local development.

use crate::body::JsonBody;
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use openqq_core::feed::FeedEntry;
use openqq_core::webhook::signing::format_secret;
use openqq_core::webhook::target::check_target_url;
use openqq_core::webhook::{
    Delivery, DeliveryStatus, WebhookSecret, MAX_DESCRIPTION_CHARS, MAX_WEBHOOKS_PER_TENANT, SUBSCRIBABLE,
};
use openqq_core::{CorrelationId, DesignId, EventKind, PortError, TenantId, Webhook, WebhookId};
use rand::RngCore;
use serde::{Deserialize, Serialize};

/// The longest overlap a rotation may ask for.
pub const MAX_OVERLAP_SECONDS: u64 = 7 * 24 * 3600;
/// The overlap of a rotation that names none.
pub const DEFAULT_OVERLAP_SECONDS: u64 = 24 * 3600;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    pub url: String,
    pub kinds: Vec<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RotateRequest {
    #[serde(default, deserialize_with = "crate::designs::whole_number")]
    pub overlap_seconds: Option<u64>,
}

/// A webhook as the API shows it: never its secret.
#[derive(Debug, Serialize)]
pub struct WebhookView {
    pub id: WebhookId,
    pub url: String,
    pub kinds: Vec<EventKind>,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Until when the secret before the last rotation still signs, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_valid_until: Option<DateTime<Utc>>,
}

impl From<&Webhook> for WebhookView {
    fn from(h: &Webhook) -> Self {
        Self {
            id: h.id,
            url: h.url.clone(),
            kinds: h.kinds.clone(),
            description: h.description.clone(),
            created_at: h.created_at,
            previous_secret_valid_until: h.previous_secret.as_ref().map(|(_, until)| *until),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct DeliveryView {
    pub message_id: String,
    pub seq: u64,
    pub kind: EventKind,
    pub design_id: DesignId,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&Delivery> for DeliveryView {
    fn from(d: &Delivery) -> Self {
        Self {
            message_id: d.message_id(),
            seq: d.entry.seq,
            kind: d.entry.kind,
            design_id: d.entry.design_id.clone(),
            status: d.status,
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error.clone(),
            next_attempt_at: d.next_attempt_at,
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

fn new_secret() -> WebhookSecret {
    let mut key = vec![0u8; 32];
    rand::rng().fill_bytes(&mut key);
    WebhookSecret::from_bytes(key).expect("32 bytes is a valid secret")
}

fn webhook_id(s: &str) -> Result<WebhookId, Problem> {
    WebhookId::parse(s).ok_or_else(not_found)
}

fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such webhook for this tenant")
}

/// The kinds asked for, each once and in the feed's order; unknown kinds are named.
fn kinds(asked: &[String]) -> Result<Vec<EventKind>, Problem> {
    if asked.is_empty() {
        return Err(Problem::invalid_field("kinds", "name at least one event kind"));
    }
    let mut wanted = Vec::new();
    for name in asked {
        let kind = SUBSCRIBABLE.iter().copied().find(|k| k.as_str() == name).ok_or_else(|| {
            let known: Vec<&str> = SUBSCRIBABLE.iter().map(|k| k.as_str()).collect();
            Problem::invalid_field("kinds", format!("{name:?} is not one of {}", known.join(", ")))
        })?;
        wanted.push(kind);
    }
    Ok(SUBSCRIBABLE.iter().copied().filter(|k| wanted.contains(k)).collect())
}

fn validate(state: &AppState, req: CreateRequest) -> Result<(String, Vec<EventKind>, Option<String>), Problem> {
    check_target_url(&req.url, state.webhooks_allow_private)
        .map_err(|e| Problem::invalid_field("url", openqq_core::error::with_causes(&e)))?;
    let description = req.description.map(|d| d.trim().to_owned()).filter(|d| !d.is_empty());
    if let Some(d) = &description {
        if d.chars().count() > MAX_DESCRIPTION_CHARS || d.chars().any(char::is_control) {
            return Err(Problem::invalid_field(
                "description",
                format!("is at most {MAX_DESCRIPTION_CHARS} characters, without control characters"),
            ));
        }
    }
    Ok((req.url, kinds(&req.kinds)?, description))
}

pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    JsonBody(req): JsonBody<CreateRequest>,
) -> Result<Response, Problem> {
    let (url, kinds, description) = validate(&state, req)?;
    let hook = Webhook {
        id: WebhookId::generate(),
        url,
        kinds,
        description,
        created_at: Utc::now(),
        secret: new_secret(),
        previous_secret: None,
    };
    match state.webhooks.create_webhook(&tenant, &hook).await {
        Ok(()) => {}
        Err(PortError::ConditionFailed { .. }) => {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                "too-many-webhooks",
                "Too many webhooks",
                format!("a tenant may register {MAX_WEBHOOKS_PER_TENANT} webhooks; delete one first"),
            ))
        }
        Err(e) => return Err(Problem::from_port(e, "registering the webhook")),
    }
    let mut body = serde_json::to_value(WebhookView::from(&hook)).expect("views serialise");
    body["secret"] = format_secret(&hook.secret).into();
    let location = format!("/v1/webhooks/{}", hook.id);
    Ok((StatusCode::CREATED, [(axum::http::header::LOCATION, location)], Json(body)).into_response())
}

pub async fn list(State(state): State<AppState>, Extension(tenant): Extension<TenantId>) -> Result<Response, Problem> {
    let hooks = state.webhooks.list_webhooks(&tenant).await.map_err(|e| Problem::from_port(e, "listing webhooks"))?;
    let items: Vec<WebhookView> = hooks.iter().map(WebhookView::from).collect();
    Ok(Json(serde_json::json!({ "items": items })).into_response())
}

async fn find(state: &AppState, tenant: &TenantId, id: &str) -> Result<Webhook, Problem> {
    let id = webhook_id(id)?;
    state
        .webhooks
        .get_webhook(tenant, &id)
        .await
        .map_err(|e| Problem::from_port(e, "reading the webhook"))?
        .ok_or_else(not_found)
}

pub async fn get_one(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let hook = find(&state, &tenant, &id).await?;
    Ok(Json(WebhookView::from(&hook)).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let id = webhook_id(&id)?;
    let gone =
        state.webhooks.delete_webhook(&tenant, &id).await.map_err(|e| Problem::from_port(e, "deleting the webhook"))?;
    if gone {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(not_found())
    }
}

pub async fn rotate(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<RotateRequest>,
) -> Result<Response, Problem> {
    let id = webhook_id(&id)?;
    let overlap = req.overlap_seconds.unwrap_or(DEFAULT_OVERLAP_SECONDS);
    if overlap > MAX_OVERLAP_SECONDS {
        return Err(Problem::invalid_field("overlap_seconds", format!("is at most {MAX_OVERLAP_SECONDS}")));
    }
    let until = Utc::now() + chrono::Duration::seconds(overlap as i64);
    let secret = new_secret();
    let hook = state
        .webhooks
        .rotate_webhook_secret(&tenant, &id, &secret, until)
        .await
        .map_err(|e| Problem::from_port(e, "rotating the secret"))?
        .ok_or_else(not_found)?;
    let mut body = serde_json::to_value(WebhookView::from(&hook)).expect("views serialise");
    body["secret"] = format_secret(&secret).into();
    body["previous_valid_until"] = serde_json::to_value(until).expect("times serialise");
    Ok(Json(body).into_response())
}

/// Queues one test delivery: an entry numbered 0 (never a number of the feed) that names no
/// design of the tenant's.
pub async fn test(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let hook = find(&state, &tenant, &id).await?;
    let entry = FeedEntry {
        seq: 0,
        design_id: DesignId::parse("webhook-test").expect("a valid id"),
        kind: hook.kinds[0],
        revision: 0,
        event_id: uuid::Uuid::now_v7(),
        correlation_id: crate::correlation::current().unwrap_or_else(CorrelationId::generate),
        occurred_at: Utc::now(),
        verdict: None,
        elapsed_ms: None,
        batch: None,
    };
    state
        .deliveries
        .queue_delivery(&tenant, &hook.id, &entry)
        .await
        .map_err(|e| Problem::from_port(e, "queueing the test delivery"))?;
    let message_id = hook.id.message_id(entry.seq);
    let location = format!("/v1/webhooks/{}/deliveries", hook.id);
    let body = Json(serde_json::json!({ "message_id": message_id }));
    Ok((StatusCode::ACCEPTED, [(axum::http::header::LOCATION, location)], body).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

pub async fn deliveries(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    q: Result<Query<DeliveriesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let q = crate::designs::query(q)?;
    let limit = q.limit.unwrap_or(20);
    if !(1..=100).contains(&limit) {
        return Err(Problem::invalid_field("limit", "must be between 1 and 100"));
    }
    if q.cursor.as_ref().is_some_and(|c| c.len() > 64) {
        return Err(Problem::invalid_field("cursor", "is not a cursor this API returned"));
    }
    let hook = find(&state, &tenant, &id).await?;
    let page =
        state.deliveries.list_deliveries(&tenant, &hook.id, q.cursor.as_deref(), limit).await.map_err(|e| match e {
            PortError::Invalid { .. } => Problem::invalid_field("cursor", "is not a cursor this API returned"),
            e => Problem::from_port(e, "listing deliveries"),
        })?;
    let items: Vec<DeliveryView> = page.items.iter().map(DeliveryView::from).collect();
    Ok(Json(serde_json::json!({ "items": items, "next": page.next })).into_response())
}
