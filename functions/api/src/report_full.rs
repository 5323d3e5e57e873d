//! `GET /v1/designs/{id}/report/full`: the whole validation report of a revision.
//!
//! The report `GET …/report` serves is capped so that it fits in an event; when the cap cut
//! something, it says so under `truncated` and points at the full report, kept in the object
//! store, as `full_report: {digest, bytes}`. This route follows that pointer (only ever within
//! the caller's tenant) and serves the object as it was stored, with the revision spliced in
//! (never parsing it whole). A report that was not capped is its own full report.

use crate::designs::ReportQuery;
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use openqq_core::{ObjectRef, PortError, TenantId};
use serde::Deserialize;

/// The two fields of a stored report this route reads.
#[derive(Deserialize)]
struct Pointer {
    full_report: Option<ObjectRef>,
    truncated: Option<serde::de::IgnoredAny>,
}

pub async fn full_report(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let stored = crate::designs::stored_report(&state, &tenant, &id, q).await?;
    let pointer: Pointer = serde_json::from_str(stored.report.get()).map_err(crate::designs::undecodable_report)?;
    let gone = || {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            format!("the full report of revision {} is not kept", stored.revision),
        )
    };
    let report = match (pointer.full_report, pointer.truncated) {
        (None, None) => stored.report.get().as_bytes().to_vec(),
        // Capped, but the full report could not be kept (over the object size limit).
        (None, Some(_)) => return Err(gone()),
        (Some(full), _) => match state.objects.get(&tenant, &full.digest).await {
            Ok(bytes) => bytes,
            Err(PortError::NotFound) => return Err(gone()),
            Err(e) => return Err(Problem::from_port(e, "reading the full report")),
        },
    };
    let body = with_revision(stored.revision, &report).ok_or_else(|| {
        Problem::from_port(PortError::corrupt("stored report", "it is not a JSON object"), "reading the full report")
    })?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `report` (a JSON object as the validator wrote it) with `"revision"` as its first member,
/// spliced in without parsing the report, which may be large.
fn with_revision(revision: u64, report: &[u8]) -> Option<Vec<u8>> {
    let start = report.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = report.get(start..)?.strip_prefix(b"{")?;
    let empty = rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
    let mut body = format!("{{\"revision\":{revision}{}", if empty { "" } else { "," }).into_bytes();
    body.extend_from_slice(rest);
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::with_revision;

    #[test]
    fn the_revision_is_spliced_into_a_report_without_parsing_it() {
        let body = with_revision(3, br#" {"verdict":"pass","findings":[]}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v, serde_json::json!({"revision": 3, "verdict": "pass", "findings": []}));
        let empty: serde_json::Value = serde_json::from_slice(&with_revision(1, b"{ }").unwrap()).unwrap();
        assert_eq!(empty, serde_json::json!({"revision": 1}));
        assert!(with_revision(1, b"[1]").is_none());
    }
}
