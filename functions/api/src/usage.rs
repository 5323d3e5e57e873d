//! `GET /v1/usage`: what the caller's tenant spent today (UTC) of its daily budgets (generation
//! tokens, event-log bytes), as the store counts them (every process charges the same counts), and `GET /v1/objects/{digest}`:
//! one of the tenant's stored objects (a generation attempt's Verilog, say), by its SHA-256.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use openqq_core::budget;
use openqq_core::{Budget, ObjectRef, PortError, TenantId};
use serde_json::json;

pub async fn usage(State(state): State<AppState>, Extension(tenant): Extension<TenantId>) -> Result<Response, Problem> {
    let now = chrono::Utc::now();
    let day = budget::day(now);
    let read = |e| Problem::from_port(e, "reading usage");
    let tokens = state.budgets.budget_spent(&tenant, Budget::GenerationTokens, &day).await.map_err(read)?;
    let log_bytes = state.log_bytes.spent(&tenant).await.map_err(read)?;
    let body = json!({
        "day": day,
        "generation_tokens": {"spent": tokens, "limit": state.generation.daily_tokens},
        "log_bytes": {"spent": log_bytes, "limit": state.tenants.limits.log_bytes_per_day},
        "resets_in_seconds": budget::seconds_to_next_day(now),
    });
    Ok(Json(body).into_response())
}

/// Refuses a job that carries `generate` when the tenant's day's budget is spent: 429, with
/// `Retry-After` until the next day. (The synthesis function charges each call atomically; this
/// only spares a job that could not start.)
pub async fn check_generation_budget(state: &AppState, tenant: &TenantId) -> Result<(), Problem> {
    let now = chrono::Utc::now();
    let spent = state
        .budgets
        .budget_spent(tenant, Budget::GenerationTokens, &budget::day(now))
        .await
        .map_err(|e| Problem::from_port(e, "reading the token budget"))?;
    let limit = state.generation.daily_tokens;
    if spent < limit {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "generation-budget-spent",
        "The tenant's generation budget for today is spent",
        format!("{spent} of the {limit} tokens a day were spent; the budget renews at 00:00 UTC"),
    )
    .with_field("generate")
    .retry_after(budget::seconds_to_next_day(now)))
}

pub async fn object(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(digest): Path<String>,
) -> Result<Response, Problem> {
    let not_found = || Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such object");
    if !ObjectRef::well_formed(&digest) {
        return Err(not_found());
    }
    match state.objects.get(&tenant, &digest).await {
        Ok(bytes) => Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()),
        Err(PortError::NotFound) => Err(not_found()),
        Err(e) => Err(Problem::from_port(e, "reading the object")),
    }
}
