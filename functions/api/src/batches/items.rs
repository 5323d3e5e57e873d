//! A batch's items, checked up front: each is a new design (the body of `POST /v1/designs`), a new
//! revision of one of the tenant's designs (`design_id` and `revision` beside that body), or
//! `{revalidate: design_id}` (the design's latest specification, kept by the design-job
//! function, as its next revision); each may carry a `custom_id`, unique in the batch. What is checked
//! is what `POST /v1/designs` checks, so a batch item is refused exactly when a single submission
//! would be, with its index and reason.

use super::OnInvalid;
use crate::designs::{RequestRef, SubmitRequest};
use crate::problem::Problem;
use crate::AppState;
use axum::http::StatusCode;
use openqq_core::batch::{StoredItem, MAX_BATCH_ITEMS, MAX_CUSTOM_ID_BYTES};
use openqq_core::event::DesignSubmitted;
use openqq_core::{DesignId, ObjectRef, PortError, TenantId};
use serde_json::value::RawValue;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

/// How many refused items a problem document lists.
const MAX_LISTED_ERRORS: usize = 100;

/// The lines of an NDJSON body, blank lines skipped.
pub fn ndjson_lines(bytes: &[u8]) -> Result<Vec<String>, Problem> {
    let text = std::str::from_utf8(bytes).map_err(|_| Problem::bad_request("the NDJSON body is not UTF-8"))?;
    Ok(text.lines().filter(|l| !l.trim().is_empty()).take(MAX_BATCH_ITEMS + 1).map(str::to_owned).collect())
}

/// The lines of an uploaded JSON-lines file of the tenant (`items_ref`).
pub(super) async fn referenced(state: &AppState, tenant: &TenantId, r: &RequestRef) -> Result<Vec<String>, Problem> {
    let object = ObjectRef { digest: r.digest.clone(), bytes: r.bytes };
    let not_found = || {
        Problem::new(
            StatusCode::NOT_FOUND,
            "upload-not-found",
            "The referenced upload was not found",
            format!("items_ref: no upload of {} bytes with digest {} for this tenant", r.bytes, r.digest),
        )
        .with_field("items_ref")
    };
    // Read, not adopted: the checked items are kept with the batch, and the upload expires as
    // uploads do (a day), so a tenant's batches leave no objects behind.
    let bytes = state.objects.read_upload(tenant, &object).await.map_err(|e| match e {
        PortError::NotFound => not_found(),
        PortError::Invalid { why, .. } => {
            Problem::invalid_field("items_ref", format!("the upload does not match: {why}"))
        }
        e => Problem::from_port(e, "reading the items"),
    })?;
    ndjson_lines(&bytes).map_err(|_| Problem::invalid_field("items_ref", "the upload is not UTF-8 JSON lines"))
}

/// One refused item.
#[derive(Debug, serde::Serialize)]
struct ItemError {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    custom_id: Option<String>,
    reason: String,
}

/// Checks every item; a batch with a refused item is refused whole (422 naming each, up to
/// [`MAX_LISTED_ERRORS`]), unless `on_invalid` is `skip`: then those items are kept `rejected`.
pub(crate) async fn check_all(
    state: &AppState,
    tenant: &TenantId,
    lines: &[String],
    on_invalid: OnInvalid,
) -> Result<Vec<StoredItem>, Problem> {
    let mut seen = HashSet::new();
    let mut revisions = HashMap::new();
    let mut errors = Vec::new();
    let mut checked = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        let (custom_id, mut outcome) = check(state, tenant, line, &mut seen).await;
        // One revision of a design is one item: a second (two revalidations of one design, say)
        // would be a duplicate of the first.
        let submits = match &outcome {
            Ok(StoredItem { design_id: Some(design), revision: Some(revision), .. }) => {
                Some((design.clone(), *revision))
            }
            _ => None,
        };
        if let Some((design, revision)) = submits {
            match revisions.entry((design.clone(), revision)) {
                Entry::Occupied(earlier) => {
                    outcome = Err(format!(
                        "design {design} revision {revision} is submitted by an earlier item (index {})",
                        earlier.get()
                    ))
                }
                Entry::Vacant(v) => {
                    v.insert(index);
                }
            }
        }
        match outcome {
            Ok(item) => checked.push(StoredItem { custom_id, ..item }),
            Err(reason) => {
                let rejected = StoredItem {
                    custom_id: custom_id.clone(),
                    design_id: None,
                    revision: None,
                    submission: None,
                    rejected: Some(reason.clone()),
                };
                checked.push(rejected);
                errors.push(ItemError { index, custom_id, reason });
            }
        }
    }
    if errors.is_empty() || on_invalid == OnInvalid::Skip {
        return Ok(checked);
    }
    let first = &errors[0];
    let detail = format!(
        "{} of {} items are invalid, the first at index {}: {}; nothing was submitted",
        errors.len(),
        lines.len(),
        first.index,
        first.reason
    );
    errors.truncate(MAX_LISTED_ERRORS);
    Err(Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-items", "Items of the batch are invalid", detail)
        .with_field("items")
        .with_errors(serde_json::to_value(&errors).expect("item errors serialise")))
}

/// One item: its `custom_id` (when it has a usable one), and the item or why it is refused.
async fn check(
    state: &AppState,
    tenant: &TenantId,
    line: &str,
    seen: &mut HashSet<String>,
) -> (Option<String>, Result<StoredItem, String>) {
    let mut object = match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line) {
        Ok(o) => o,
        Err(e) => return (None, Err(format!("is not a JSON object: {e}"))),
    };
    let custom_id = match object.remove("custom_id") {
        None => None,
        Some(serde_json::Value::String(c)) if !c.is_empty() && c.len() <= MAX_CUSTOM_ID_BYTES => Some(c),
        Some(_) => return (None, Err(format!("custom_id: must be a string of 1 to {MAX_CUSTOM_ID_BYTES} bytes"))),
    };
    if let Some(c) = &custom_id {
        if !seen.insert(c.clone()) {
            return (custom_id.clone(), Err(format!("custom_id: {c:?} is used by an earlier item of the batch")));
        }
    }
    (custom_id.clone(), item(state, tenant, object).await)
}

async fn item(
    state: &AppState,
    tenant: &TenantId,
    mut object: serde_json::Map<String, serde_json::Value>,
) -> Result<StoredItem, String> {
    if let Some(target) = object.remove("revalidate") {
        return revalidation(state, tenant, target, object).await;
    }
    let design = match object.remove("design_id") {
        None => None,
        Some(serde_json::Value::String(d)) => {
            Some(DesignId::parse_uuid(&d).map_err(|_| format!("design_id: {d:?} is not a design id"))?)
        }
        Some(_) => return Err("design_id: must be a string".into()),
    };
    let req: SubmitRequest = serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| e.to_string())?;
    let revision = match (&design, req.revision) {
        (None, None | Some(1)) => 1,
        (None, Some(_)) => return Err("revision: a new design starts at revision 1".into()),
        (Some(_), Some(r)) if (1..=crate::designs::MAX_REVISION).contains(&r) => r,
        (Some(_), _) => return Err("revision: a new revision of a design needs its number (1 or more)".into()),
    };
    if design.is_none() && req.name.is_none() {
        return Err("name: is required for a new design".into());
    }
    let design = match design {
        Some(d) => {
            let known = state.reads.get(tenant, &d).await.map_err(|e| format!("the design could not be read: {e}"))?;
            // Another tenant's design is as unknown as one that never existed.
            known.ok_or_else(|| format!("design_id: no design {d} for this tenant"))?;
            d
        }
        None => DesignId::generate(),
    };
    let spec = req.into_spec(state).map_err(|p| p.detail)?;
    stored(state, tenant, design, revision, spec).await
}

/// `{"revalidate": design_id}`: the design's latest specification as submitted (kept by the
/// design-job function) submitted again as its next revision, so it is validated again with
/// the validator and device data of today. Checked as a submission of that specification would
/// be (generation configured, its uploads still there and weighed against the byte quota).
async fn revalidation(
    state: &AppState,
    tenant: &TenantId,
    target: serde_json::Value,
    rest: serde_json::Map<String, serde_json::Value>,
) -> Result<StoredItem, String> {
    if let Some(field) = rest.keys().next() {
        return Err(format!("{field}: an item that revalidates a design takes no other fields (only custom_id)"));
    }
    let serde_json::Value::String(id) = target else {
        return Err("revalidate: must be the id of one of the tenant's designs".into());
    };
    let design = DesignId::parse_uuid(&id).map_err(|_| format!("revalidate: {id:?} is not a design id"))?;
    let read = |e: PortError| format!("revalidate: the design could not be read: {e}");
    // Another tenant's design is as unknown as one that never existed.
    let view = state
        .reads
        .get(tenant, &design)
        .await
        .map_err(read)?
        .ok_or_else(|| format!("revalidate: no design {design} for this tenant"))?;
    let kept = state.specs.kept_spec(tenant, &design).await.map_err(read)?.ok_or_else(|| {
        format!(
            "revalidate: design {design} has no specification kept yet (its revision {} is still on its way); \
             retry once it is, or submit the specification again as a revision",
            view.revision
        )
    })?;
    let submitted: DesignSubmitted = serde_json::from_str(&kept.submission)
        .map_err(|e| format!("revalidate: the kept specification of design {design} does not read: {e}"))?;
    let mut spec = submitted.spec;
    // The design keeps its name.
    spec.name = None;
    if spec.generate.is_some() && !state.generation.configured {
        return Err(crate::problem::Problem::generation_not_configured().detail);
    }
    let revision = view.revision.max(kept.revision) + 1;
    if revision > crate::designs::MAX_REVISION {
        return Err(format!("revalidate: design {design} is at its last revision ({})", view.revision));
    }
    stored(state, tenant, design, revision, spec).await
}

/// An item that submits `spec` as `revision` of `design`, its payloads by reference.
async fn stored(
    state: &AppState,
    tenant: &TenantId,
    design: DesignId,
    revision: u64,
    spec: openqq_core::DesignSpec,
) -> Result<StoredItem, String> {
    let spec = crate::designs::by_reference(state, tenant, spec).await.map_err(|p| p.detail)?;
    let submission =
        serde_json::to_string(&DesignSubmitted { spec, checks: None }).expect("a specification serialises");
    Ok(StoredItem {
        custom_id: None,
        design_id: Some(design),
        revision: Some(revision),
        submission: Some(RawValue::from_string(submission).expect("serde_json writes JSON")),
        rejected: None,
    })
}
