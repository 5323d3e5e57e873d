//! Read-your-writes after a 202.
//!
//! The API never applies a revision itself: the log is the record, and the design-job function
//! applies revisions in log order. So that a client can read what it was just told was accepted,
//! the API also leaves an [`AcceptedRevision`] marker in the store once the publish is durable.
//! Reads overlay the latest marker on what the consumers materialised: a marker newer than the
//! materialised revision shows that revision as `submitted`; an older one changes nothing. The
//! functions here decide that, so every store adapter shows the same thing. A store keeps a
//! marker for a retention after its revision was accepted ([`DEFAULT_ACCEPTED_RETENTION`]) and
//! reads pass over an older one.

use crate::design::{DesignStatus, DesignView};
use crate::event::{EventKind, TimelineEntry};
use crate::ids::{CorrelationId, DesignId};
use crate::page::Page;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// How long a store keeps a marker after its revision was accepted, unless set otherwise
/// (`--accepted-retention`): as long as the embedded log keeps the record by default. A marker
/// is redundant once its revision is applied; one older than this whose revision was never
/// applied stops showing, since the record behind it has been given up on.
pub const DEFAULT_ACCEPTED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A revision the API accepted (its `design.submitted` is durable in the log) that the
/// consumers may not have materialised yet. A store keeps the highest revision per design.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedRevision {
    pub design_id: DesignId,
    pub revision: u64,
    /// The latest name sent with an accepted revision of this design (up to `revision`), if any.
    pub name: Option<String>,
    /// The `design.submitted` event published for this revision: the timeline entry the
    /// design-job function will record for it.
    pub event_id: uuid::Uuid,
    pub correlation_id: CorrelationId,
    /// When the event was published (its `occurred_at`).
    pub accepted_at: DateTime<Utc>,
}

impl AcceptedRevision {
    /// What a read of one design shows: the materialised design, unless this marker is newer.
    pub fn overlay(marker: Option<&AcceptedRevision>, materialised: Option<DesignView>) -> Option<DesignView> {
        let Some(m) = marker else { return materialised };
        match materialised {
            Some(view) if view.revision >= m.revision => Some(view),
            Some(mut view) => {
                view.revision = m.revision;
                view.status = DesignStatus::Submitted;
                view.verdict = None;
                view.failure_reason = None;
                view.updated_at = m.accepted_at;
                if let Some(name) = &m.name {
                    view.name = name.clone();
                }
                Some(view)
            }
            None => Some(DesignView {
                design_id: m.design_id.clone(),
                name: m.name.clone().unwrap_or_else(|| m.design_id.to_string()),
                revision: m.revision,
                status: DesignStatus::Submitted,
                verdict: None,
                updated_at: m.accepted_at,
                failure_reason: None,
            }),
        }
    }

    /// What a timeline read shows: the applied entries, then this marker's `design.submitted`
    /// entry while no `design.submitted` of this revision or a later one has been applied.
    pub fn overlay_timeline(
        marker: Option<&AcceptedRevision>,
        timeline: Option<Vec<TimelineEntry>>,
    ) -> Option<Vec<TimelineEntry>> {
        let Some(m) = marker else { return timeline };
        let mut entries = timeline.unwrap_or_default();
        let applied = entries.iter().any(|e| e.kind == EventKind::DesignSubmitted && e.revision >= m.revision);
        if !applied {
            entries.push(TimelineEntry {
                event_id: m.event_id,
                kind: EventKind::DesignSubmitted,
                revision: m.revision,
                correlation_id: m.correlation_id.clone(),
                occurred_at: m.accepted_at,
            });
        }
        Some(entries)
    }

    /// One page of a listing from a page of materialised designs and a page of markers, each
    /// newest first (descending design id) from the same cursor and each up to `limit + 1` long:
    /// the first `limit` designs of their union, overlaid, and the cursor after them.
    pub fn merge_page(designs: Vec<DesignView>, markers: Vec<AcceptedRevision>, limit: usize) -> Page<DesignView> {
        let mut designs = designs.into_iter().peekable();
        let mut markers = markers.into_iter().peekable();
        let mut items = Vec::with_capacity(limit + 1);
        while items.len() <= limit {
            let view = match (designs.peek(), markers.peek()) {
                (None, None) => break,
                (Some(_), None) => designs.next(),
                (None, Some(_)) => Self::overlay(markers.next().as_ref(), None),
                (Some(d), Some(m)) => match d.design_id.cmp(&m.design_id) {
                    std::cmp::Ordering::Greater => designs.next(),
                    std::cmp::Ordering::Less => Self::overlay(markers.next().as_ref(), None),
                    std::cmp::Ordering::Equal => Self::overlay(markers.next().as_ref(), designs.next()),
                },
            };
            items.extend(view);
        }
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|d| d.design_id.to_string())
        } else {
            None
        };
        Page { items, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Verdict;

    fn marker(id: &str, revision: u64, name: Option<&str>) -> AcceptedRevision {
        AcceptedRevision {
            design_id: DesignId::parse(id).unwrap(),
            revision,
            name: name.map(str::to_owned),
            event_id: uuid::Uuid::now_v7(),
            correlation_id: CorrelationId::parse("c").unwrap(),
            accepted_at: Utc::now(),
        }
    }

    fn view(id: &str, revision: u64, status: DesignStatus) -> DesignView {
        DesignView {
            design_id: DesignId::parse(id).unwrap(),
            name: "old".into(),
            revision,
            status,
            verdict: Some(Verdict::Pass),
            updated_at: Utc::now(),
            failure_reason: None,
        }
    }

    #[test]
    fn a_marker_alone_shows_its_revision_as_submitted() {
        let v = AcceptedRevision::overlay(Some(&marker("d", 1, Some("blink"))), None).unwrap();
        assert_eq!((v.name.as_str(), v.revision, v.status, v.verdict), ("blink", 1, DesignStatus::Submitted, None));
    }

    #[test]
    fn a_newer_marker_shows_its_revision_and_an_older_one_changes_nothing() {
        let ready = view("d", 2, DesignStatus::Ready);
        let v = AcceptedRevision::overlay(Some(&marker("d", 3, None)), Some(ready.clone())).unwrap();
        assert_eq!((v.name.as_str(), v.revision, v.status, v.verdict), ("old", 3, DesignStatus::Submitted, None));
        assert_eq!(AcceptedRevision::overlay(Some(&marker("d", 2, Some("x"))), Some(ready.clone())), Some(ready));
    }

    #[test]
    fn a_timeline_shows_the_accepted_entry_until_it_is_applied() {
        let m = marker("d", 1, None);
        let shown = AcceptedRevision::overlay_timeline(Some(&m), None).unwrap();
        assert_eq!((shown.len(), shown[0].event_id, shown[0].kind), (1, m.event_id, EventKind::DesignSubmitted));
        let applied = AcceptedRevision::overlay_timeline(Some(&m), Some(shown.clone())).unwrap();
        assert_eq!(applied, shown, "once applied, the entry is not shown twice");
        assert_eq!(AcceptedRevision::overlay_timeline(None, None), None);
    }

    #[test]
    fn a_merged_page_interleaves_designs_and_markers_newest_first() {
        let designs = vec![view("d5", 1, DesignStatus::Ready), view("d3", 1, DesignStatus::Ready)];
        let markers = vec![marker("d4", 1, None), marker("d3", 2, None), marker("d1", 1, None)];
        let page = AcceptedRevision::merge_page(designs, markers, 3);
        let ids: Vec<&str> = page.items.iter().map(|v| v.design_id.as_str()).collect();
        assert_eq!(ids, ["d5", "d4", "d3"]);
        assert_eq!(page.items[2].revision, 2);
        assert_eq!(page.next.as_deref(), Some("d3"));
        let last = AcceptedRevision::merge_page(vec![], vec![marker("d1", 1, None)], 3);
        assert_eq!((last.items.len(), last.next), (1, None));
    }
}
