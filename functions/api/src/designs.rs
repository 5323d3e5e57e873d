//! The design routes. Submissions publish `design.submitted` and answer 202 once the record is
//! durable, then leave an accepted-revision marker so reads show the revision at once (read your
//! writes); every POST honours an `Idempotency-Key` ([`idempotency`]). Reads come from the store
//! and are scoped to the caller's tenant.
//!
//! Design ids in paths and cursors may be written in any RFC 4122 form (`urn:uuid:`, upper case,
//! without hyphens); they are canonicalised to lower-case hyphenated, so each names one design.

pub mod idempotency;

use crate::body::JsonBytes;
use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use openqq_core::budget::log_bytes_of_revision;
use openqq_core::design::{ConstraintFormat, Constraints, Options, Payload, Target, INLINE_PAYLOAD_MAX_BYTES};
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::{
    AcceptedRevision, CorrelationId, DesignId, DesignSpec, Envelope, EventKind, KeptResponse, ObjectRef, PortError,
    TenantId,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Largest client revision number accepted (JSON-safe integer).
pub const MAX_REVISION: u64 = (1 << 53) - 1;

/// `POST /v1/designs` and `POST /v1/designs/{id}/revisions` bodies (the latter with `revision`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    #[serde(default, deserialize_with = "whole_number")]
    pub revision: Option<u64>,
    #[serde(default)]
    pub name: Option<String>,
    pub target: Target,
    /// The netlist inline; or `netlist_ref`, an upload of the tenant ([`crate::uploads`]).
    #[serde(default)]
    pub netlist: Option<Box<RawValue>>,
    #[serde(default)]
    pub netlist_ref: Option<RequestRef>,
    pub constraints: RequestConstraints,
    #[serde(default)]
    pub bitstream_base64: Option<String>,
    #[serde(default)]
    pub bitstream_ref: Option<RequestRef>,
    #[serde(default)]
    pub options: Options,
    /// The design as HDL source instead of a netlist, with its testbenches and reference.
    #[serde(default)]
    pub source: Option<openqq_core::hdl::Source>,
    #[serde(default)]
    pub tests: Vec<openqq_core::hdl::Testbench>,
    #[serde(default)]
    pub reference: Option<openqq_core::hdl::Source>,
    /// The design to be written by a model ([`AppState`]'s generation must be configured).
    #[serde(default)]
    pub generate: Option<openqq_core::hdl::Generate>,
}

/// An upload as a client names it: `{"digest", "bytes"}`, the length a whole number however JSON
/// writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestRef {
    pub digest: String,
    #[serde(deserialize_with = "whole")]
    pub bytes: u64,
}

impl From<RequestRef> for ObjectRef {
    fn from(r: RequestRef) -> Self {
        ObjectRef { digest: r.digest, bytes: r.bytes }
    }
}

/// A required whole number ([`whole_number`]).
pub(crate) fn whole<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    whole_number(d)?.ok_or_else(|| D::Error::custom("expected a whole number"))
}

/// The constraints as a client sends them: always inline (a reference is the API's own doing).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestConstraints {
    pub format: ConstraintFormat,
    pub text: String,
}

/// A whole number however JSON writes it (`2`, `2.0`, `2e0`): JSON does not tell them apart, and
/// neither does the contract (`type: integer`). Fractions and negatives are refused.
pub(crate) fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::{Error, Unexpected};
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else { return Ok(None) };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= MAX_REVISION as f64 => Ok(Some(f as u64)),
        Some(f) => Err(D::Error::invalid_value(Unexpected::Float(f), &"a whole number from 0 to 2^53 - 1")),
        None => Err(D::Error::custom("expected a whole number")),
    }
}

impl SubmitRequest {
    pub(crate) fn into_spec(self, state: &AppState) -> Result<DesignSpec, Problem> {
        let spec = DesignSpec {
            name: self.name,
            target: self.target,
            netlist: self.netlist,
            netlist_ref: self.netlist_ref.map(ObjectRef::from),
            constraints: Constraints { format: self.constraints.format, text: self.constraints.text, text_ref: None },
            bitstream_base64: self.bitstream_base64,
            bitstream_ref: self.bitstream_ref.map(ObjectRef::from),
            options: self.options,
            source: self.source,
            tests: self.tests,
            reference: self.reference,
            generate: self.generate,
        };
        spec.check().map_err(|e| Problem::invalid_field(e.field, e.message))?;
        if spec.generate.is_some() && !state.generation.configured {
            return Err(Problem::generation_not_configured());
        }
        Ok(spec)
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Accepted {
    pub design_id: DesignId,
    pub revision: u64,
    pub status: String,
    pub correlation_id: CorrelationId,
}

/// Publishes one revision and answers what the client is told: 202 with its `Location`. Once
/// the record is durable, the accepted revision is recorded for reads; if that write fails the
/// answer is the store's error (503 to retry), since the design would not read at once.
async fn publish(
    state: &AppState,
    tenant: TenantId,
    design: DesignId,
    revision: u64,
    corr: CorrelationId,
    spec: DesignSpec,
) -> Result<KeptResponse, Problem> {
    state.quota.check(state.reads.as_ref(), state.objects.as_ref(), &tenant, &design).await?;
    let spec = by_reference(state, &tenant, spec).await?;
    let cause =
        Origin { tenant_id: tenant, design_id: design.clone(), revision, correlation_id: corr.clone(), batch: None };
    let name = spec.name.clone();
    let from_source = spec.source.is_some() || spec.generate.is_some();
    let env = Envelope::new(EventKind::DesignSubmitted, &cause, "api", DesignSubmitted { spec, checks: None });
    let record = env.to_record();
    if openqq_core::ports::check_record_sizes(std::slice::from_ref(&record)).is_err() {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "The design is too large",
            "the encoded design exceeds the event log's 1 MiB record limit",
        ));
    }
    let log_bytes = log_bytes_of_revision(record.bytes(), from_source);
    let (kind, doing) = (EventKind::DesignSubmitted, "publishing the design");
    crate::limit::publish_charged(state, &cause.tenant_id, log_bytes, kind, record, doing).await?;
    tracing::info!(tenant_id = %cause.tenant_id, design_id = %design, revision, "The design revision was accepted.");
    let marker = AcceptedRevision {
        design_id: design.clone(),
        revision,
        name,
        event_id: env.event_id,
        correlation_id: corr.clone(),
        accepted_at: env.occurred_at,
    };
    // A 202 promises the design reads at once: without its marker, a new design would be
    // unknown (404, even to its own revisions) until materialised, which a faulty store or a
    // stopped consumer can put off for long. So the client is asked to retry; a revision sent
    // again changes nothing, a new design sent again is a new design (the first shows as well,
    // once materialised).
    state
        .accepted
        .submit((cause.tenant_id.clone(), marker))
        .await
        .map_err(|e| Problem::from_port(e, "recording the accepted revision"))?;
    let body = Accepted { design_id: design.clone(), revision, status: "submitted".into(), correlation_id: corr };
    Ok(KeptResponse {
        status: StatusCode::ACCEPTED.as_u16(),
        headers: vec![
            ("location".into(), format!("/v1/designs/{design}")),
            ("content-type".into(), "application/json".into()),
        ],
        body: serde_json::to_vec(&body).expect("the accepted body serialises"),
    })
}

/// The specification as its records carry it: every upload it names adopted for `tenant`, and
/// every inline payload over [`INLINE_PAYLOAD_MAX_BYTES`] put in the object store and replaced by
/// its reference, so no record carries more than a few tens of kilobytes.
pub(crate) async fn by_reference(
    state: &AppState,
    tenant: &TenantId,
    mut spec: DesignSpec,
) -> Result<DesignSpec, Problem> {
    for (payload, object) in spec.references() {
        let field = match payload {
            Payload::Netlist => "netlist_ref",
            Payload::Bitstream => "bitstream_ref",
            Payload::Constraints => "constraints",
        };
        state.objects.adopt_upload(tenant, object).await.map_err(|e| match e {
            // Like a design of another tenant, another tenant's upload is one that does not exist.
            PortError::NotFound => Problem::new(
                StatusCode::NOT_FOUND,
                "upload-not-found",
                "The referenced upload was not found",
                format!(
                    "{field}: no upload of {} bytes with digest {} for this tenant; upload it first (POST /v1/uploads)",
                    object.bytes, object.digest
                ),
            )
            .with_field(field),
            PortError::Invalid { why, .. } => {
                Problem::invalid_field(field, format!("the upload does not match: {why}"))
            }
            e => Problem::from_port(e, "checking the upload"),
        })?;
    }
    charge_references(state, tenant, &spec).await?;
    for payload in spec.outsized(INLINE_PAYLOAD_MAX_BYTES) {
        let bytes = match payload {
            // The netlist's text moves into the object store's buffer; `refer` drops it anyway.
            Payload::Netlist => {
                spec.netlist.take().map(|n| Box::<str>::from(n).into_boxed_bytes().into_vec()).unwrap_or_default()
            }
            Payload::Constraints => spec.constraints.text.as_bytes().to_vec(),
            Payload::Bitstream => {
                use base64::Engine;
                let text = spec.bitstream_base64.as_deref().unwrap_or_default();
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| Problem::invalid_field("bitstream_base64", format!("is not valid base64: {e}")))?
            }
        };
        let object =
            state.objects.put(tenant, bytes).await.map_err(|e| Problem::from_port(e, "storing a large payload"))?;
        spec.refer(payload, object);
        state.quota.forget(tenant);
    }
    Ok(spec)
}

/// Weighs the uploads `spec` names against `tenant`'s byte quota each time they are used, as a
/// body of their length would be: validating them costs what validating that body would, so a
/// tiny submission naming a 64 MiB upload is not a free way to make the validation function read
/// and check 64 MiB. Uploads longer than half the quota weigh half of it (the rest is room for
/// the body naming them, already weighed): such an upload can be used at most twice per window.
async fn charge_references(state: &AppState, tenant: &TenantId, spec: &DesignSpec) -> Result<(), Problem> {
    let bytes: u64 = spec.references().iter().map(|(_, object)| object.bytes).sum();
    if bytes == 0 {
        return Ok(());
    }
    let quota = state.tenants.limits.bytes;
    let cost = u32::try_from(bytes).unwrap_or(u32::MAX).min(quota.limit / 2).max(1);
    crate::limit::check_bytes(state, tenant, quota, cost).await.map(drop).map_err(|mut p| {
        p.detail = format!(
            "the uploads this design names ({bytes} bytes) are weighed against tenant {tenant}'s byte quota of {} \
             per {:?} each time a design names them (at most half the quota); retry after the Retry-After delay",
            quota.limit, quota.window
        );
        p
    })
}

/// Parses a submission body once, straight into the request (the netlist kept as raw JSON text,
/// checked but never built into a tree). A body that fails is answered exactly as when it was
/// first read whole as JSON and then as a submission: a syntax error anywhere in the body (400)
/// comes before a field's error (422), so the failure path reads the body a second time.
pub fn submission(body: &[u8]) -> Result<SubmitRequest, Problem> {
    crate::body::parse::<SubmitRequest>(body).map_err(|field_error| match crate::body::parse::<Box<RawValue>>(body) {
        Err(syntax_error) => syntax_error,
        Ok(_) => field_error,
    })
}

/// The idempotency fingerprint of a body, taken only when the request sent a key: over the
/// body's JSON text without the whitespace around it, as it always was.
fn fingerprint(key: &Option<openqq_core::IdempotencyKey>, path: &str, body: &[u8]) -> [u8; 32] {
    match key {
        Some(_) => idempotency::fingerprint(path, trim_json_whitespace(body)),
        None => [0; 32],
    }
}

/// `body` without JSON's insignificant whitespace (space, tab, line feed, carriage return) at
/// either end.
fn trim_json_whitespace(body: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let start = body.iter().position(|b| !ws(b)).unwrap_or(body.len());
    let end = body.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    &body[start..end]
}

pub async fn submit(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Extension(corr): Extension<CorrelationId>,
    headers: HeaderMap,
    JsonBytes(body): JsonBytes,
) -> Result<Response, Problem> {
    let key = idempotency::key(&headers)?;
    let req = submission(&body)?;
    if req.revision.is_some_and(|r| r != 1) {
        return Err(Problem::invalid_field(
            "revision",
            "a new design starts at revision 1; post later revisions to /v1/designs/{id}/revisions",
        ));
    }
    if req.name.is_none() {
        return Err(Problem::invalid_field("name", "is required for a new design"));
    }
    let spec = req.into_spec(&state)?;
    if spec.generate.is_some() {
        crate::usage::check_generation_budget(&state, &tenant).await?;
    }
    let fingerprint = fingerprint(&key, "/v1/designs", &body);
    drop(body);
    let fresh = DesignId::generate().to_string();
    let (state, tenant) = (&state, &tenant);
    idempotency::once_naming(&state.idempotency, tenant, key, fingerprint, fresh, |name| async move {
        // The name this request's key holds; one that does not parse was not written here.
        let design = DesignId::parse(name).unwrap_or_else(|_| DesignId::generate());
        publish(state, tenant.clone(), design, 1, corr, spec).await
    })
    .await
}

/// A design id from a path: a UUID in any RFC 4122 text form, canonicalised. Anything else cannot
/// name a design this API handed out.
fn design_id(raw: &str) -> Result<DesignId, Problem> {
    DesignId::parse_uuid(raw).map_err(|_| Problem::design_not_found())
}

pub async fn revise(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Extension(corr): Extension<CorrelationId>,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBytes(body): JsonBytes,
) -> Result<Response, Problem> {
    let design = design_id(&id)?;
    let key = idempotency::key(&headers)?;
    let req = submission(&body)?;
    let revision = req
        .revision
        .ok_or_else(|| Problem::invalid_field("revision", "is required: the client numbers its revisions"))?;
    if !(1..=MAX_REVISION).contains(&revision) {
        return Err(Problem::invalid_field("revision", format!("must be between 1 and {MAX_REVISION}")));
    }
    let spec = req.into_spec(&state)?;
    if spec.generate.is_some() {
        crate::usage::check_generation_budget(&state, &tenant).await?;
    }
    let fingerprint = fingerprint(&key, &format!("/v1/designs/{design}/revisions"), &body);
    drop(body);
    idempotency::once(&state.idempotency, &tenant, key, fingerprint, || async {
        // Only designs the tenant created (accepted or materialised) take revisions; another
        // tenant's design is as unknown as one that never existed.
        let known = state.reads.get(&tenant, &design).await.map_err(|e| Problem::from_port(e, "reading the design"))?;
        if known.is_none() {
            return Err(Problem::design_not_found());
        }
        publish(&state, tenant.clone(), design.clone(), revision, corr, spec).await
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

impl ListQuery {
    /// The page size (20 unless given, 1 to 100) and the cursor, read by `parse`: what every
    /// listing of the tenant's designs, batches or schedules checks alike.
    pub(crate) fn page<T, E>(self, parse: impl Fn(&str) -> Result<T, E>) -> Result<(usize, Option<T>), Problem> {
        let limit = self.limit.unwrap_or(20);
        if !(1..=100).contains(&limit) {
            return Err(Problem::invalid_field("limit", "must be between 1 and 100"));
        }
        let cursor = self
            .cursor
            .as_deref()
            .map(parse)
            .transpose()
            .map_err(|_| Problem::invalid_field("cursor", "is not a cursor this API returned"))?;
        Ok((limit, cursor))
    }
}

pub(crate) fn query<T>(q: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> Result<T, Problem> {
    q.map(|Query(v)| v).map_err(|e| {
        Problem::new(StatusCode::BAD_REQUEST, "invalid-query", "The query string is invalid", e.body_text())
    })
}

pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let (limit, cursor) = query(q)?.page(DesignId::parse_uuid)?;
    let page = state
        .reads
        .list(&tenant, cursor.as_ref().map(DesignId::as_str), limit)
        .await
        .map_err(|e| Problem::from_port(e, "listing designs"))?;
    Ok(Json(serde_json::json!({ "designs": page.items, "next_cursor": page.next })).into_response())
}

pub async fn get_one(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let design = design_id(&id)?;
    let view = state.reads.get(&tenant, &design).await.map_err(|e| Problem::from_port(e, "reading the design"))?;
    view.map(|v| Json(v).into_response()).ok_or_else(Problem::design_not_found)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportQuery {
    pub revision: Option<u64>,
}

/// The stored (capped) report of the design named `id` in the path, at `?revision=` or the latest;
/// 404 when there is none (yet), as for an id the tenant does not have.
/// The answer when a stored report does not decode: the platform's fault, never the caller's.
pub(crate) fn undecodable_report(e: impl Into<openqq_core::Cause>) -> Problem {
    let corrupt = openqq_core::PortError::corrupt("stored report", openqq_core::Failure::new("it does not decode", e));
    Problem::from_port(corrupt, "decoding the report")
}

pub(crate) async fn stored_report(
    state: &AppState,
    tenant: &TenantId,
    id: &str,
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<openqq_core::StoredReport, Problem> {
    let design = design_id(id)?;
    let q = query(q)?;
    let stored = state
        .reads
        .report(tenant, &design, q.revision)
        .await
        .map_err(|e| Problem::from_port(e, "reading the report"))?;
    stored.ok_or_else(|| {
        let detail = match q.revision {
            Some(r) => format!("no report for revision {r} of this design (yet)"),
            None => "no report for this design yet; it appears when validation finishes".to_owned(),
        };
        Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    })
}

pub async fn report(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let stored = stored_report(&state, &tenant, &id, q).await?;
    // The stored report is the validator's JSON object; the response adds the revision it belongs
    // to, spliced into the text rather than parsed into a tree (see `report_body`).
    let body = crate::report_body::splice(stored.report.get(), stored.revision, stored.verdict.as_str())
        .map_err(undecodable_report)?;
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response())
}

pub async fn events(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let design = design_id(&id)?;
    let timeline =
        state.reads.timeline(&tenant, &design).await.map_err(|e| Problem::from_port(e, "reading the timeline"))?;
    timeline
        .map(|events| Json(serde_json::json!({ "events": events })).into_response())
        .ok_or_else(Problem::design_not_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a submission body was read before it was parsed once: whole as JSON, then as a
    /// submission from the text of that value.
    fn read_twice(body: &[u8]) -> Result<SubmitRequest, Problem> {
        let raw: Box<RawValue> = crate::body::parse(body)?;
        crate::body::parse(raw.get().as_bytes())
    }

    fn answer(r: Result<SubmitRequest, Problem>) -> Result<(Option<u64>, String), (StatusCode, String, String)> {
        r.map(|req| (req.revision, req.netlist.map(|n| n.get().to_owned()).unwrap_or_default()))
            .map_err(|p| (p.status, p.field.unwrap_or_default(), p.detail))
    }

    #[test]
    fn a_submission_parsed_once_is_answered_exactly_as_when_it_was_read_twice() {
        let good = r#"{"name":"n","target":{"device":"hx8k","package":"ct256"},"netlist":{"modules":{"a":[1,2]}},"constraints":{"format":"pcf","text":""}}"#;
        let bodies = [
            good.to_owned(),
            format!("  \n{good}\n "),
            format!("{good} trailing"),
            r#"{"revision": "x", "netlist": {"modules": tru"#.to_owned(),
            r#"{"revision": 1.5, "netlist": {}}"#.to_owned(),
            r#"{"target": {"device": 5}}"#.to_owned(),
            r#"{"surprise": 1}"#.to_owned(),
            r#"{"name":"n"}"#.to_owned(),
            "[1, 2]".to_owned(),
            "{".repeat(200) + &"}".repeat(200),
            format!(r#"{{"netlist": {}1{}, "name": 5}}"#, "[".repeat(130), "]".repeat(130)),
            String::new(),
        ];
        for body in &bodies {
            assert_eq!(answer(submission(body.as_bytes())), answer(read_twice(body.as_bytes())), "{body}");
        }
        assert!(submission(good.as_bytes()).is_ok());
    }

    #[test]
    fn the_fingerprint_is_taken_over_the_body_without_its_surrounding_whitespace_and_only_for_a_key() {
        let key = Some(openqq_core::IdempotencyKey::parse("k").unwrap());
        let body = b" \r\n\t{\"a\": 1} \n";
        let raw: Box<RawValue> = serde_json::from_slice(body).unwrap();
        assert_eq!(fingerprint(&key, "/p", body), idempotency::fingerprint("/p", raw.get().as_bytes()));
        assert_eq!(fingerprint(&None, "/p", body), [0; 32], "no key, no hashing");
        assert_eq!(trim_json_whitespace(b"  "), b"");
    }
}
