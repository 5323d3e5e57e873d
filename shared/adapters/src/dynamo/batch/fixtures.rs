//! Ops for the tests of this module's parts: [`ApplyOp`] borrows its ids, entry and change, so
//! a test holds them in an [`Owned`] and borrows the op from it.

use aws_sdk_dynamodb::Client;
use aws_smithy_http_client::test_util::StaticReplayClient;
use openqq_core::ports::ApplyOp;
use openqq_core::{Change, CorrelationId, DesignId, EventKind, TenantId, TimelineEntry, Verdict};
use serde_json::value::RawValue;

pub(super) fn tenant(id: &str) -> TenantId {
    TenantId::parse(id).unwrap()
}

pub(super) fn design(id: &str) -> DesignId {
    DesignId::parse(id).unwrap()
}

/// What an [`ApplyOp`] borrows.
pub(super) struct Owned {
    pub(super) replayed: bool,
    pub(super) tenant: TenantId,
    pub(super) design: DesignId,
    pub(super) entry: TimelineEntry,
    pub(super) change: Change,
}

impl Owned {
    pub(super) fn op(&self) -> ApplyOp<'_> {
        ApplyOp {
            replayed: self.replayed,
            tenant: &self.tenant,
            design: &self.design,
            entry: &self.entry,
            change: &self.change,
        }
    }

    /// The same op, as a record replayed from the dead-letter topic.
    pub(super) fn replayed(self) -> Self {
        Self { replayed: true, ..self }
    }
}

/// An op of design `design_id` of tenant `tenant_id` at `revision`, of the kind `change` writes.
pub(super) fn op(tenant_id: &str, design_id: &str, revision: u64, change: Change) -> Owned {
    let kind = match change {
        Change::Submitted { .. } => EventKind::DesignSubmitted,
        Change::ValidationStarted => EventKind::ValidationStarted,
        Change::ValidationFinished { .. } => EventKind::ValidationFinished,
        Change::ResultsReady { .. } => EventKind::ResultsReady,
        Change::Failed { .. } => EventKind::DesignFailed,
        Change::Checked { verdict: None, .. } => EventKind::SynthesisStarted,
        Change::Checked { .. } => EventKind::SynthesisFinished,
    };
    let entry = TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse("c").unwrap(),
        occurred_at: chrono::Utc::now(),
    };
    Owned { replayed: false, tenant: tenant(tenant_id), design: design(design_id), entry, change }
}

/// The first submission of design `design_id` of tenant `tenant_id`.
pub(super) fn submission(tenant_id: &str, design_id: &str) -> Owned {
    op(tenant_id, design_id, 1, Change::Submitted { name: None })
}

/// A validation report whose JSON text is `bytes` long.
pub(super) fn finished(bytes: usize) -> Change {
    let report = RawValue::from_string(format!("\"{}\"", "a".repeat(bytes - 2))).unwrap();
    Change::ValidationFinished { verdict: Verdict::Pass, report }
}

pub(super) fn ops(owned: &[Owned]) -> Vec<ApplyOp<'_>> {
    owned.iter().map(Owned::op).collect()
}

/// A client with one answer recorded, an empty object (no item found, nothing left over), which
/// counts the requests sent: `actual_requests` holds the one sent, if any.
pub(super) fn client_with_one_answer() -> (Client, StaticReplayClient) {
    crate::dynamo::tests::replaying(vec![crate::dynamo::tests::answer(200, "{}".to_owned())])
}
