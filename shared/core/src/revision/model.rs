//! What the revision tests share: an entry and a report to apply, and one design in a store that
//! executes exactly what the plans say, as the store adapters do.

use super::*;
use crate::event::EventKind;
use crate::ids::CorrelationId;
use chrono::Utc;
use std::collections::BTreeMap;

pub(super) const DESIGN_ID: &str = "d-1";

pub(super) fn entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse("c").unwrap(),
        occurred_at: Utc::now(),
    }
}

pub(super) fn report(verdict: Verdict) -> Box<RawValue> {
    RawValue::from_string(format!("{{\"verdict\":\"{}\"}}", verdict.as_str())).unwrap()
}

/// A design row as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub name: String,
    pub revision: u64,
    pub status: DesignStatus,
    pub verdict: Option<Verdict>,
    pub failure_reason: Option<String>,
}

/// One design in a store that does exactly what the plans say.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Model {
    pub row: Option<Row>,
    pub timeline: Vec<(EventKind, u64)>,
    pub reports: BTreeMap<u64, String>,
}

impl Model {
    pub fn held(&self, kind: EventKind, revision: u64) -> Held {
        let of_kind = || self.timeline.iter().filter(|(k, _)| *k == kind).map(|(_, r)| *r);
        Held {
            deleted: false,
            seen: of_kind().any(|r| r == revision),
            latest_of_kind: of_kind().max(),
            design: self.row.as_ref().map(|r| HeldDesign { revision: r.revision, status: r.status }),
        }
    }

    /// What a store reads for `dead_lettered`: a `design.failed` entry of the design's revision.
    pub fn dead_lettered(&self) -> bool {
        self.row.as_ref().is_some_and(|row| self.timeline.contains(&(EventKind::DesignFailed, row.revision)))
    }

    /// Plans the event (`plan`, or `plan_replay` for a replayed record) and executes the plan.
    pub fn apply(&mut self, kind: EventKind, revision: u64, change: &Change, replay: bool) -> Option<Applied> {
        let e = entry(kind, revision);
        let held = self.held(kind, revision);
        let plan = if replay { plan_replay(&held, self.dead_lettered(), &e, change) } else { plan(&held, &e, change) };
        if let Plan::Apply(w) = &plan {
            self.execute(w, kind, revision);
        }
        plan.outcome()
    }

    fn execute(&mut self, w: &Writes<'_>, kind: EventKind, revision: u64) {
        match (&w.design, &mut self.row) {
            (DesignWrite::Insert { name, revision, status, failure_reason }, row) => {
                assert!(row.is_none(), "insert over an existing row");
                *row = Some(Row {
                    name: name.unwrap_or(DESIGN_ID).to_owned(),
                    revision: *revision,
                    status: *status,
                    verdict: None,
                    failure_reason: failure_reason.map(str::to_owned),
                });
            }
            (DesignWrite::Revise { name, revision, status, failure_reason }, Some(row)) => {
                if let Some(name) = name {
                    row.name = (*name).to_owned();
                }
                (row.revision, row.status, row.verdict) = (*revision, *status, None);
                row.failure_reason = failure_reason.map(str::to_owned);
            }
            (DesignWrite::Move { from, to, verdict, failure_reason }, Some(row)) => {
                assert_eq!(row.status, *from);
                row.status = *to;
                row.verdict = verdict.or(row.verdict);
                row.failure_reason = failure_reason.map(str::to_owned);
            }
            (DesignWrite::Keep, _) => {}
            (write, None) => panic!("{write:?} without a row"),
        }
        if let Some(r) = &w.report {
            self.reports.entry(r.revision).or_insert_with(|| r.report.get().to_owned());
        }
        self.timeline.push((kind, revision));
    }
}
