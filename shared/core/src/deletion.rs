//! Deleting a design (`DELETE /v1/designs/{id}`): what may be deleted, what a deletion removes,
//! and the store role that does it.
//!
//! A design may be deleted once its latest accepted revision has ended (`ready` or `failed`):
//! while a revision is in flight the API answers 409 and the client retries, so every object
//! the design's records name is known when it goes ([`deletable`]). A deletion is one atomic
//! write of the store: the design row becomes a **tombstone** (ids and the time, nothing the
//! tenant submitted), its timeline, reports, applied markers, accepted-revision marker and kept
//! specification go, and a `design.deleted` entry enters the tenant's feed (with its webhook
//! deliveries): the audit record, with the correlation id of the request that deleted it. The
//! tombstone makes every later write for the design a no-op ([`crate::revision::plan`], rule 0),
//! so a record read again or a dead letter replayed afterwards never brings the design back.
//! Its feed entries stay (the feed numbers without gaps) until the feed's retention removes them,
//! and the tombstone stays for its own ([`DEFAULT_TOMBSTONE_RETENTION`]).
//!
//! The store answers the objects the design's kept specifications (every revision's: the store
//! records what each one named) name that no other design's kept specifications name, and its
//! reports' full reports ([`own_full_report`]) ([`Deleted::objects`]); the caller removes
//! those from the object store. Objects are content-addressed per tenant, so two designs may
//! share one: an object another design still names stays. A full report names its design inside
//! (and its pointer says so), so no other design's report is the same object; a full report kept
//! before reports named their design might be, and stays.

use crate::design::{DesignStatus, DesignView};
use crate::error::PortResult;
use crate::ids::{CorrelationId, DesignId, TenantId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::time::Duration;
use uuid::Uuid;

/// How long a store keeps a deleted design's tombstone, unless set otherwise
/// (`--tombstone-retention`). The tombstone is what makes a record of the design read again (the
/// log re-read after a crash, a dead letter replayed) a no-op; once no such record can come back,
/// it has served. So keep it at or above the log's and the dead letters' retention.
pub const DEFAULT_TOMBSTONE_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The audit facts of a deletion: they become its `design.deleted` feed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// The feed entry's event id.
    pub event_id: Uuid,
    /// The request's correlation id.
    pub correlation_id: CorrelationId,
    pub occurred_at: DateTime<Utc>,
}

impl Deletion {
    /// A deletion now, under `correlation_id`.
    pub fn now(correlation_id: CorrelationId) -> Self {
        Self { event_id: Uuid::now_v7(), correlation_id, occurred_at: Utc::now() }
    }
}

/// What a deletion removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// The design's revision when it was deleted (its `design.deleted` entry's).
    pub revision: u64,
    /// The number of its `design.deleted` entry in the tenant's feed.
    pub seq: u64,
    /// Digests of the objects only this design named: the caller deletes them from the object
    /// store.
    pub objects: BTreeSet<String>,
}

/// Why a design may not be deleted yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// The revision still in flight.
    pub revision: u64,
    pub status: DesignStatus,
}

/// Whether the design `view` shows (the latest accepted revision overlaid on the stored design)
/// may be deleted now: only once that revision has ended, `ready` or `failed`.
pub fn deletable(view: &DesignView) -> Result<(), InFlight> {
    match view.status {
        DesignStatus::Ready | DesignStatus::Failed => Ok(()),
        status => Err(InFlight { revision: view.revision, status }),
    }
}

/// The store role that deletes designs (the API's `DELETE /v1/designs/{id}`).
#[async_trait]
pub trait DesignDeletes: Send + Sync {
    /// Deletes `design` of `tenant` as the module documentation says, in one atomic write, and
    /// appends its `design.deleted` entry (made from `deletion`) to the tenant's feed. `None`
    /// when the tenant has no such design (never had one, deleted it already, or it is another
    /// tenant's). The caller has checked [`deletable`]; a revision that raced the deletion is
    /// discarded by the tombstone.
    async fn delete_design(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        deletion: &Deletion,
    ) -> PortResult<Option<Deleted>>;
}

/// The object digests `json` names: every JSON object with a `digest` of 64 lower-case hex
/// digits beside a numeric `bytes` (an [`crate::ObjectRef`], wherever it sits: a netlist, a
/// source file, a full report). Text that is not JSON names none.
pub fn object_digests(json: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(json) {
        collect(&value, &mut found);
    }
    found
}

fn collect(value: &serde_json::Value, found: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let (Some(serde_json::Value::String(digest)), Some(serde_json::Value::Number(_))) =
                (map.get("digest"), map.get("bytes"))
            {
                if crate::ObjectRef::well_formed(digest) {
                    found.insert(digest.clone());
                }
            }
            map.values().for_each(|v| collect(v, found));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, found)),
        _ => {}
    }
}

/// The object of the full report `report` (a stored report's JSON) points at, if that object is
/// `design`'s alone: its pointer names the design (`"full_report": {"digest", "bytes",
/// "design_id"}`), as every full report kept since they name their design does.
pub fn own_full_report(report: &str, design: &DesignId) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Pointer {
        full_report: Option<FullReport>,
    }
    #[derive(serde::Deserialize)]
    struct FullReport {
        digest: String,
        design_id: Option<String>,
    }
    let full = serde_json::from_str::<Pointer>(report).ok()?.full_report?;
    (full.design_id.as_deref() == Some(design.as_str()) && crate::ObjectRef::well_formed(&full.digest))
        .then_some(full.digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_digests_of_every_object_reference_are_found_wherever_they_sit() {
        let json = format!(
            r#"{{"spec": {{"netlist_ref": {{"digest": "{A}", "bytes": 20000}}, "name": "x"}},
                "files": [{{"path": "top.v", "object": {{"digest": "{B}", "bytes": 3}}}}],
                "full_report": {{"digest": "{A}", "bytes": 7}}}}"#
        );
        assert_eq!(object_digests(&json), BTreeSet::from([A.to_owned(), B.to_owned()]));
    }

    #[test]
    fn what_only_looks_like_a_reference_is_not_one() {
        let upper = A.to_uppercase();
        let json = format!(
            r#"{{"a": {{"digest": "{A}"}}, "b": {{"digest": "{upper}", "bytes": 1}},
                "c": {{"digest": "abc", "bytes": 1}}, "d": {{"digest": "{A}", "bytes": "1"}}}}"#
        );
        assert!(object_digests(&json).is_empty(), "{:?}", object_digests(&json));
        assert!(object_digests("not json").is_empty());
    }

    #[test]
    fn a_full_report_is_the_designs_own_only_when_its_pointer_names_the_design() {
        let d = DesignId::generate();
        let named =
            |who: &str| format!(r#"{{"verdict": "fail", "full_report": {{"digest": "{A}", "bytes": 7{who}}}}}"#);
        let mine = named(&format!(r#", "design_id": "{d}""#));
        assert_eq!(own_full_report(&mine, &d), Some(A.to_owned()));
        let other = named(&format!(r#", "design_id": "{}""#, DesignId::generate()));
        assert_eq!(own_full_report(&other, &d), None, "another design's");
        assert_eq!(own_full_report(&named(""), &d), None, "kept before reports named their design");
        assert_eq!(own_full_report(r#"{"verdict": "pass"}"#, &d), None, "not capped: no object");
        assert_eq!(own_full_report("not json", &d), None);
    }

    #[test]
    fn only_a_design_whose_latest_revision_ended_may_be_deleted() {
        let view = |status| DesignView {
            design_id: DesignId::generate(),
            name: "n".into(),
            revision: 3,
            status,
            verdict: None,
            updated_at: Utc::now(),
            failure_reason: None,
        };
        assert_eq!(deletable(&view(DesignStatus::Ready)), Ok(()));
        assert_eq!(deletable(&view(DesignStatus::Failed)), Ok(()));
        assert_eq!(
            deletable(&view(DesignStatus::Validating)),
            Err(InFlight { revision: 3, status: DesignStatus::Validating })
        );
        assert!(deletable(&view(DesignStatus::Submitted)).is_err());
    }
}
