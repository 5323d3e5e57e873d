//! The schedule routes: a tenant's schedules of batches (`openqq_schedule` says when they fire,
//! `openqq_core::schedule` how the store keeps them), each fire's record in the ledger, and fires
//! on request (`trigger`, `backfill`). The fires themselves go through [`fire`]; the
//! [`runner::Scheduler`] fires schedules on time.
//!
//! - `POST /v1/schedules` `{name, expression, time_zone?, template, overlap?, catch_up?, paused?,
//!   jitter?}`; `template` is `{"items": [...]}` (a fixed batch, its items checked now as
//!   `POST /v1/batches` checks them, and again at each fire), `{"revalidate": "all"}` or
//!   `{"revalidate": {"name_prefix": P}}`. 201 with the schedule and its next five fire times.
//! - `GET /v1/schedules`, `GET|PATCH|DELETE /v1/schedules/{id}`: PATCH changes the fields it
//!   names; unpausing counts fires only from then on.
//! - `GET /v1/schedules/{id}/fires?after=&limit=`: the ledger, newest first.
//! - `POST /v1/schedules/{id}/trigger`: a fire now (its nominal time is now), whatever the
//!   overlap policy or a pause. `POST /v1/schedules/{id}/backfill {from, to}`: a fire at every
//!   nominal time in the range (at most [`MAX_BACKFILL`], within the ledger's retention, not in
//!   the future). A nominal time the ledger has already is answered `deduplicated` and nothing is
//!   submitted.
//!
//! Another tenant's schedule ids answer exactly like unknown ones.

pub mod fire;
pub mod runner;
mod view;

use crate::body::JsonBody;
use crate::designs::{query, ListQuery};
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use openqq_core::schedule::{FireRecord, RunnerState, ScheduleId, StoredSchedule, FIRE_RETENTION};
use openqq_core::{PortError, TenantId};
use openqq_schedule::{collect_fires_between, Clock, Schedule};
use serde::Deserialize;
use std::sync::Arc;
use tokio::sync::Notify;
use view::{fire_json, schedule_json, CreateRequest};

/// Most fires one backfill asks for.
pub const MAX_BACKFILL: usize = 50;

/// Where the schedule routes and the scheduler read the time, and how the routes wake the
/// scheduler (a created or changed schedule may be due at once). Tests hand in a
/// `openqq_schedule::TestClock` and wake the scheduler after moving it.
#[derive(Clone)]
pub struct ScheduleClock {
    pub clock: Arc<dyn Clock>,
    pub wake: Arc<Notify>,
}

impl Default for ScheduleClock {
    fn default() -> Self {
        ScheduleClock { clock: Arc::new(openqq_schedule::SystemClock), wake: Arc::new(Notify::new()) }
    }
}

fn schedule_id(raw: &str) -> Result<ScheduleId, Problem> {
    ScheduleId::parse(raw).map_err(|_| not_found())
}

fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "no such schedule for this tenant")
}

async fn read(state: &AppState, tenant: &TenantId, id: &ScheduleId) -> Result<StoredSchedule, Problem> {
    state
        .schedules
        .schedule(tenant, id)
        .await
        .map_err(|e| Problem::from_port(e, "reading the schedule"))?
        .ok_or_else(not_found)
}

pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    JsonBody(req): JsonBody<CreateRequest>,
) -> Result<Response, Problem> {
    let now = state.clock.clock.now();
    let (name, config, template) = view::check_create(&state, &tenant, req).await?;
    let created_at = now.trunc_subsecs(0);
    let mut schedule = StoredSchedule {
        id: ScheduleId::generate(),
        name,
        config,
        template,
        created_at,
        updated_at: now,
        resumed_at: None,
        state: RunnerState::default(),
        next_due: None,
        version: 0,
    };
    schedule.next_due = runner::next_due(&schedule, &schedule.state, now);
    let created = state
        .schedules
        .create_schedule(&tenant, &schedule)
        .await
        .map_err(|e| Problem::from_port(e, "creating the schedule"))?;
    if !created {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "too-many-schedules",
            "Too many schedules",
            format!(
                "a tenant may hold {} schedules; delete one first",
                openqq_core::schedule::MAX_SCHEDULES_PER_TENANT
            ),
        ));
    }
    state.clock.wake.notify_one();
    let location = format!("/v1/schedules/{}", schedule.id);
    let body = schedule_json(&schedule, now);
    Ok((StatusCode::CREATED, [(axum::http::header::LOCATION, location)], Json(body)).into_response())
}

pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let (limit, cursor) = query(q)?.page(ScheduleId::parse)?;
    let page = state
        .schedules
        .list_schedules(&tenant, cursor.as_ref().map(ScheduleId::as_str), limit)
        .await
        .map_err(|e| Problem::from_port(e, "listing schedules"))?;
    let now = state.clock.clock.now();
    let items: Vec<_> = page.items.iter().map(|s| schedule_json(s, now)).collect();
    Ok(Json(serde_json::json!({ "schedules": items, "next": page.next })).into_response())
}

pub async fn get_one(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let schedule = read(&state, &tenant, &schedule_id(&id)?).await?;
    Ok(Json(schedule_json(&schedule, state.clock.clock.now())).into_response())
}

/// Changes the fields the body names. A write that meets another (the scheduler saving its
/// state) reads the schedule again and applies the change to it.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    JsonBody(patch): JsonBody<serde_json::Map<String, serde_json::Value>>,
) -> Result<Response, Problem> {
    let id = schedule_id(&id)?;
    for attempt in 0..8 {
        let held = read(&state, &tenant, &id).await?;
        let now = state.clock.clock.now();
        let changed = view::apply_patch(&state, &tenant, &held, &patch, now).await?;
        match state.schedules.update_schedule(&tenant, &changed).await {
            Ok(Some(after)) => {
                state.clock.wake.notify_one();
                return Ok(Json(schedule_json(&after, now)).into_response());
            }
            Ok(None) => return Err(not_found()),
            Err(PortError::ConditionFailed { .. }) if attempt < 7 => continue,
            Err(e) => return Err(Problem::from_port(e, "changing the schedule")),
        }
    }
    Err(Problem::unavailable("the schedule kept changing while it was being changed; retry"))
}

pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let id = schedule_id(&id)?;
    let gone = state
        .schedules
        .delete_schedule(&tenant, &id)
        .await
        .map_err(|e| Problem::from_port(e, "deleting the schedule"))?;
    match gone {
        true => Ok(StatusCode::NO_CONTENT.into_response()),
        false => Err(not_found()),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FiresQuery {
    after: Option<String>,
    limit: Option<usize>,
}

pub async fn fires(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    q: Result<Query<FiresQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let id = schedule_id(&id)?;
    let q = query(q)?;
    let limit = q.limit.unwrap_or(20);
    if !(1..=100).contains(&limit) {
        return Err(Problem::invalid_field("limit", "must be between 1 and 100"));
    }
    let before = match q.after.as_deref().map(DateTime::parse_from_rfc3339).transpose() {
        Ok(b) => b.map(|b| b.with_timezone(&Utc)),
        Err(_) => return Err(Problem::invalid_field("after", "is not a cursor this API returned")),
    };
    let page = state
        .schedules
        .fires(&tenant, &id, before, limit)
        .await
        .map_err(|e| Problem::from_port(e, "reading the schedule's fires"))?
        .ok_or_else(not_found)?;
    let items: Vec<_> = page.items.iter().map(|f| fire_json(f, false)).collect();
    Ok(Json(serde_json::json!({ "items": items, "next": page.next })).into_response())
}

/// Fires the schedule now: its nominal time is now.
pub async fn trigger(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let schedule = read(&state, &tenant, &schedule_id(&id)?).await?;
    let now = state.clock.clock.now();
    let nominal = now.trunc_subsecs(3);
    let fired = fire_one(&state, &tenant, &schedule, nominal, now).await?;
    note_batch(&state, &tenant, &schedule, &fired).await;
    let ledger = [(axum::http::header::LOCATION, format!("/v1/schedules/{}/fires", schedule.id))];
    Ok((StatusCode::ACCEPTED, ledger, Json(fire_json(&fired.0, !fired.1))).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

/// Fires the schedule at every nominal time in `[from, to]`, each recorded.
pub async fn backfill(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<BackfillRequest>,
) -> Result<Response, Problem> {
    let schedule = read(&state, &tenant, &schedule_id(&id)?).await?;
    let now = state.clock.clock.now();
    if req.from > req.to {
        return Err(Problem::invalid_field("to", "must not be before from"));
    }
    if req.to > now {
        return Err(Problem::invalid_field("to", "must not be in the future: the schedule fires those itself"));
    }
    let oldest = now - TimeDelta::from_std(FIRE_RETENTION).unwrap_or(TimeDelta::MAX);
    if req.from < oldest {
        return Err(Problem::invalid_field(
            "from",
            format!("must be within the ledger's {} days", FIRE_RETENTION.as_secs() / 86_400),
        ));
    }
    // A cron timetable exists before the schedule did; a rate one counts from its creation.
    let mut timetable: Schedule = schedule.domain();
    if matches!(timetable.config.expression, openqq_schedule::Expression::Cron(_)) {
        timetable.start = timetable.start.min(req.from - TimeDelta::seconds(1));
    }
    let nominals = collect_fires_between(&timetable, req.from, req.to, MAX_BACKFILL)
        .map_err(|e| Problem::invalid_field("to", e.to_string()))?;
    let mut fires = Vec::with_capacity(nominals.len());
    for nominal in nominals {
        let fired = fire_one(&state, &tenant, &schedule, nominal, now).await?;
        fires.push(fire_json(&fired.0, !fired.1));
    }
    let ledger = [(axum::http::header::LOCATION, format!("/v1/schedules/{}/fires", schedule.id))];
    Ok((StatusCode::ACCEPTED, ledger, Json(serde_json::json!({ "fires": fires }))).into_response())
}

/// One fire through [`fire::fire`]: its record and whether this request made it.
async fn fire_one(
    state: &AppState,
    tenant: &TenantId,
    schedule: &StoredSchedule,
    nominal: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(FireRecord, bool), Problem> {
    match fire::fire(state, tenant, schedule, nominal, now).await {
        Ok(recorded) => Ok((recorded.record, recorded.created)),
        Err(fire::FireError::Store(PortError::NotFound)) => Err(not_found()),
        Err(fire::FireError::Store(e)) => Err(Problem::from_port(e, "recording the fire")),
        Err(fire::FireError::Unavailable(detail)) => Err(Problem::unavailable(format!(
            "the fire is recorded but its batch could not be submitted yet ({detail}); it is submitted again shortly"
        ))),
    }
}

/// A fire on request submitted a batch: the scheduler's overlap policy waits for it too. Best
/// effort: if the scheduler wrote the schedule meanwhile, its own state stands.
async fn note_batch(state: &AppState, tenant: &TenantId, schedule: &StoredSchedule, fired: &(FireRecord, bool)) {
    let (record, created) = fired;
    let Some(batch) = record.batch_id.clone().filter(|_| *created) else { return };
    let st = RunnerState { last_batch: Some(batch), ..schedule.state.clone() };
    let saved = state.schedules.save_runner_state(tenant, &schedule.id, schedule.version, &st, schedule.next_due).await;
    if let Err(e) = saved {
        tracing::warn!(error = %e, tenant_id = %tenant, schedule_id = %schedule.id,
            "A triggered fire's batch could not be noted on the schedule.");
    }
}
