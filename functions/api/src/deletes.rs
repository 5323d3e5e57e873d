//! `DELETE /v1/designs/{id}`: a tenant deletes one of its designs (`openqq_core::deletion`).
//!
//! - 204 once the design, its rows and the objects only it named are gone; a `design.deleted`
//!   entry entered the tenant's feed (so `GET /v1/events` and webhooks see it), carrying the
//!   request's correlation id, and the log line `A design was deleted.` names the token's tenant
//!   and subject: the audit record, found from either by the correlation id.
//! - 404 for a design the tenant does not have: never had, deleted already, or another
//!   tenant's (exactly as `GET` answers).
//! - 409 `design-in-flight` (with `Retry-After`) while its latest revision is `submitted` or
//!   `validating`: once it is `ready` or `failed` it may go, and every object its records name
//!   is known.
//!
//! A revision that raced the deletion (accepted just before it) is discarded: the store's
//! tombstone makes every later write for the design a no-op.

use crate::auth::Subject;
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use openqq_core::deletion::{deletable, Deletion};
use openqq_core::{CorrelationId, DesignId, TenantId};

/// Designs deleted, by tenant.
pub const DELETED_METRIC: &str = "openqq_designs_deleted_total";
/// Objects of deleted designs the object store failed to delete (left behind; see
/// docs/OPERATIONS.md), by tenant.
pub const OBJECTS_LEFT_METRIC: &str = "openqq_deleted_design_objects_left_total";

/// How long a client asked to wait for a revision in flight, in seconds: validation takes
/// seconds.
pub const IN_FLIGHT_RETRY_SECS: u64 = 5;

pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Extension(corr): Extension<CorrelationId>,
    subject: Option<Extension<Subject>>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let design = DesignId::parse_uuid(&id).map_err(|_| Problem::design_not_found())?;
    let view = state.reads.get(&tenant, &design).await.map_err(|e| Problem::from_port(e, "reading the design"))?;
    let view = view.ok_or_else(Problem::design_not_found)?;
    if let Err(flight) = deletable(&view) {
        let detail = format!(
            "revision {} is {}: a design may be deleted once its latest revision is ready or failed",
            flight.revision,
            flight.status.as_str()
        );
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "design-in-flight",
            "The design has a revision in flight",
            detail,
        )
        .retry_after(IN_FLIGHT_RETRY_SECS));
    }
    let deletion = Deletion::now(corr.clone());
    let deleted = state
        .deletes
        .delete_design(&tenant, &design, &deletion)
        .await
        .map_err(|e| Problem::from_port(e, "deleting the design"))?
        .ok_or_else(Problem::design_not_found)?;
    let tenant_label = openqq_telemetry::tenant_label(tenant.as_str());
    let (mut removed, mut left) = (0usize, 0u64);
    for digest in &deleted.objects {
        match state.objects.delete(&tenant, digest).await {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) => {
                left += 1;
                tracing::warn!(tenant_id = %tenant, design_id = %design, digest = %digest, error = %e,
                    "An object of a deleted design could not be deleted and was left behind.");
            }
        }
    }
    if left > 0 {
        metrics::counter!(OBJECTS_LEFT_METRIC, "tenant" => tenant_label.clone()).increment(left);
    }
    metrics::counter!(DELETED_METRIC, "tenant" => tenant_label).increment(1);
    let subject = subject.map(|Extension(s)| s).unwrap_or_default();
    tracing::info!(
        audit = "design.deleted",
        tenant_id = %tenant,
        subject = subject.as_str(),
        design_id = %design,
        revision = deleted.revision,
        feed_seq = deleted.seq,
        objects_deleted = removed,
        objects_left = left,
        correlation_id = %corr,
        "A design was deleted."
    );
    Ok(StatusCode::NO_CONTENT.into_response())
}
