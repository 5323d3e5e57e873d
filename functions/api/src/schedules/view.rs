//! Schedules as requests write them and responses show them: the create and PATCH bodies checked
//! field by field (a 422 names the field at fault), the template's items checked as a batch's,
//! and the JSON of a schedule (with its next five fire times) and of a fire.

use crate::batches::{items, OnInvalid};
use crate::problem::Problem;
use crate::AppState;
use chrono::{DateTime, SecondsFormat, Utc};
use openqq_core::batch::MAX_BATCH_ITEMS;
use openqq_core::schedule::{FireRecord, Revalidate, StoredSchedule, Template};
use openqq_core::TenantId;
use openqq_schedule::{next_fires, ConfigError, ScheduleConfig, ScheduleConfigInput};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Longest schedule name, and longest name prefix, in bytes.
const MAX_NAME_BYTES: usize = 200;

/// How many fire times a schedule's response shows.
const NEXT_FIRES: usize = 5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    name: Option<String>,
    expression: Option<String>,
    time_zone: Option<String>,
    template: Option<Value>,
    overlap: Option<String>,
    catch_up: Option<String>,
    paused: Option<bool>,
    jitter: Option<String>,
}

fn config_problem(e: ConfigError) -> Problem {
    let field = e.field();
    let text = e.to_string();
    let detail = text.strip_prefix(&format!("{field}: ")).unwrap_or(&text).to_owned();
    Problem::invalid_field(field, detail)
}

fn name(name: Option<&str>) -> Result<String, Problem> {
    match name {
        Some(n) if !n.trim().is_empty() && n.len() <= MAX_NAME_BYTES => Ok(n.to_owned()),
        _ => Err(Problem::invalid_field("name", format!("is required: 1 to {MAX_NAME_BYTES} bytes"))),
    }
}

/// A create request checked: its name, configuration and template (items kept as an object).
pub(super) async fn check_create(
    state: &AppState,
    tenant: &TenantId,
    req: CreateRequest,
) -> Result<(String, ScheduleConfig, Template), Problem> {
    let name = name(req.name.as_deref())?;
    let Some(expression) = req.expression else {
        return Err(Problem::invalid_field("expression", "is required: a 5-field cron or rate(N unit)"));
    };
    let input = ScheduleConfigInput {
        expression,
        time_zone: req.time_zone,
        overlap: req.overlap,
        catch_up: req.catch_up,
        paused: req.paused,
        jitter: req.jitter,
    };
    let config = input.validate().map_err(config_problem)?;
    let template = template(state, tenant, req.template.as_ref()).await?;
    Ok((name, config, template))
}

/// The template a request gives; a fixed batch's items are checked as `POST /v1/batches` checks
/// them (refused whole, naming each bad item) and kept as an object of the tenant.
async fn template(state: &AppState, tenant: &TenantId, value: Option<&Value>) -> Result<Template, Problem> {
    const SHAPES: &str =
        "must be {\"items\": [...]}, {\"revalidate\": \"all\"} or {\"revalidate\": {\"name_prefix\": \"…\"}}";
    let Some(Value::Object(object)) = value else { return Err(Problem::invalid_field("template", SHAPES)) };
    match (object.len(), object.get("items"), object.get("revalidate")) {
        (1, Some(Value::Array(list)), None) => {
            if list.is_empty() || list.len() > MAX_BATCH_ITEMS {
                return Err(Problem::invalid_field(
                    "template.items",
                    format!("a batch holds 1 to {MAX_BATCH_ITEMS} items; found {}", list.len()),
                ));
            }
            let lines: Vec<String> = list.iter().map(Value::to_string).collect();
            items::check_all(state, tenant, &lines, OnInvalid::Reject)
                .await
                .map_err(|p| p.with_field("template.items"))?;
            let mut jsonl = lines.join("\n").into_bytes();
            jsonl.push(b'\n');
            let items_ref = state
                .objects
                .put(tenant, jsonl)
                .await
                .map_err(|e| Problem::from_port(e, "keeping the template's items"))?;
            state.quota.forget(tenant);
            Ok(Template::Items { items_ref, items: lines.len() as u32 })
        }
        (1, None, Some(which)) => match which {
            Value::String(all) if all == "all" => Ok(Template::Revalidate(Revalidate::All)),
            Value::Object(o) => match (o.len(), o.get("name_prefix")) {
                (1, Some(Value::String(p))) if !p.is_empty() && p.len() <= MAX_NAME_BYTES => {
                    Ok(Template::Revalidate(Revalidate::NamePrefix(p.clone())))
                }
                _ => Err(revalidate_problem()),
            },
            _ => Err(revalidate_problem()),
        },
        _ => Err(Problem::invalid_field("template", SHAPES)),
    }
}

fn revalidate_problem() -> Problem {
    Problem::invalid_field(
        "template.revalidate",
        format!("must be \"all\" or {{\"name_prefix\": P}} with P of 1 to {MAX_NAME_BYTES} bytes"),
    )
}

fn optional_text(field: &str, value: &Value) -> Result<Option<String>, Problem> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(Problem::invalid_field(field, "must be a string (or null for the default)")),
    }
}

/// `held` with the PATCH body's fields applied and checked. Unpausing sets the resumption time
/// (fires while paused never become due); any change has the scheduler look at it at once.
pub(super) async fn apply_patch(
    state: &AppState,
    tenant: &TenantId,
    held: &StoredSchedule,
    patch: &Map<String, Value>,
    now: DateTime<Utc>,
) -> Result<StoredSchedule, Problem> {
    let mut input = ScheduleConfigInput::from(held.config.clone());
    let mut changed = held.clone();
    for (field, value) in patch {
        match field.as_str() {
            "name" => changed.name = name(value.as_str())?,
            "expression" => {
                input.expression = value
                    .as_str()
                    .ok_or_else(|| Problem::invalid_field("expression", "must be a string"))?
                    .to_owned()
            }
            "time_zone" => input.time_zone = optional_text("time_zone", value)?,
            "overlap" => input.overlap = optional_text("overlap", value)?,
            "catch_up" => input.catch_up = optional_text("catch_up", value)?,
            "jitter" => input.jitter = optional_text("jitter", value)?,
            "paused" => {
                input.paused = Some(value.as_bool().ok_or_else(|| Problem::invalid_field("paused", "must be true or false"))?)
            }
            "template" => changed.template = template(state, tenant, Some(value)).await?,
            other => {
                return Err(Problem::invalid_field(
                    other.to_owned(),
                    "is not a field of a schedule (name, expression, time_zone, template, overlap, catch_up, paused, jitter)",
                ))
            }
        }
    }
    changed.config = input.validate().map_err(config_problem)?;
    if held.config.paused && !changed.config.paused {
        changed.resumed_at = Some(now);
    }
    changed.updated_at = now;
    changed.next_due = (!changed.config.paused).then_some(now);
    Ok(changed)
}

fn instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A schedule as responses show it.
pub(super) fn schedule_json(s: &StoredSchedule, now: DateTime<Utc>) -> Value {
    let input = ScheduleConfigInput::from(s.config.clone());
    let domain = s.domain();
    let next: Vec<String> = next_fires(&domain, now, NEXT_FIRES).into_iter().map(instant).collect();
    let mut body = json!({
        "schedule_id": s.id,
        "name": s.name,
        "expression": input.expression,
        "time_zone": input.time_zone,
        "overlap": input.overlap,
        "catch_up": input.catch_up,
        "paused": s.config.paused,
        "template": s.template.to_json(),
        "created_at": instant(s.created_at),
        "updated_at": instant(s.updated_at),
        "next_fires": next,
    });
    if let Some(j) = input.jitter {
        body["jitter"] = json!(j);
    }
    if let Some(b) = &s.state.last_batch {
        body["last_batch_id"] = json!(b);
    }
    body
}

/// A fire as responses show it; `deduplicated` when a request asked for a fire the ledger had.
pub(super) fn fire_json(f: &FireRecord, deduplicated: bool) -> Value {
    let mut body = json!({
        "nominal_time": instant(f.nominal_time),
        "fired_at": instant(f.fired_at),
        "outcome": if deduplicated { "deduplicated" } else { f.outcome.as_str() },
    });
    if let Some(b) = &f.batch_id {
        body["batch_id"] = json!(b);
    }
    if let Some(r) = &f.reason {
        body["reason"] = json!(r);
    }
    if deduplicated {
        body["recorded_outcome"] = json!(f.outcome.as_str());
    }
    body
}
