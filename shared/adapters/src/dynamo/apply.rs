//! `apply` on DynamoDB: one consistent read of what [`revision::plan`] needs, the plan, and the
//! plan executed as one `TransactWriteItems` whose conditions hold only if nothing moved since
//! the read. A submission skips the read on its first attempt: it is planned as a new design's
//! first write, which only lands if nothing is held. A lost race (a condition failed, another transaction held an item) reads and plans
//! again, so a replay that raced its original comes out `Duplicate` or `Stale`.

use super::error::{classify, transact_failure, TransactFailure};
use super::table::{applied_sk, design_pk, design_sk, items, key, n, s, tenant_pk, Attrs, Item, PK};
use aws_sdk_dynamodb::types::{AttributeValue, Get, Put, TransactGetItem, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use chrono::Utc;
use openqq_core::ports::{PortResult, USAGE_ROW_BYTES};
use openqq_core::revision::{self, DesignWrite, Held, HeldDesign, Plan, Writes};
use openqq_core::{Applied, Change, DesignId, DesignStatus, EventKind, PortError, TenantId, TimelineEntry};
use std::collections::HashMap;
use std::time::Duration;

/// Largest report one item holds. DynamoDB items are at most 400 KB; reports are capped well
/// below that when written (a capped report stays under 256 KiB), so only a report built some
/// other way is refused.
pub const MAX_REPORT_ITEM_BYTES: usize = 380 * 1024;

/// A report too large for an item, refused before anything is sent.
pub(super) fn too_large(change: &Change) -> Option<PortError> {
    match change {
        Change::ValidationFinished { report, .. } if report.get().len() > MAX_REPORT_ITEM_BYTES => {
            Some(PortError::invalid(
                "report",
                format!(
                    "its {} bytes exceed the {MAX_REPORT_ITEM_BYTES}-byte limit of a DynamoDB item",
                    report.get().len()
                ),
            ))
        }
        _ => None,
    }
}

/// Reads and plans at most this many times when other writers keep winning the race.
const MAX_ATTEMPTS: u32 = 16;

/// The design item's fields the plan and the conditions need.
struct Snapshot {
    held: Held,
    /// For a replay: whether this revision's `design.failed` entry was applied (dead-lettering
    /// failed it), read with the rest.
    dead_lettered: bool,
    /// The design item's write counter (0 without an item): every applied entry bumps it, and
    /// every write conditions on it, so a write lands only on the state it was planned from.
    seq: u64,
}

impl Snapshot {
    /// No design item and no applied marker: what a new design's first write is planned from.
    const NOTHING_HELD: Snapshot = Snapshot {
        held: Held { deleted: false, seen: false, latest_of_kind: None, design: None },
        dead_lettered: false,
        seq: 0,
    };
}

pub(crate) async fn apply(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    entry: &TimelineEntry,
    change: &Change,
    replay: bool,
) -> PortResult<Applied> {
    if let Some(e) = too_large(change) {
        return Err(e);
    }
    for attempt in 0..MAX_ATTEMPTS {
        // A submission nearly always creates its design, so its first attempt is planned as the
        // design's first write without reading: every item of that transaction is conditional on
        // being new, so if anything is held it fails as a lost race and is read and planned again.
        let snapshot = if attempt == 0 && !replay && matches!(change, Change::Submitted { .. }) {
            Snapshot::NOTHING_HELD
        } else {
            read(client, table, tenant, design, entry, replay).await?
        };
        let plan = match replay {
            true => revision::plan_replay(&snapshot.held, snapshot.dead_lettered, entry, change),
            false => revision::plan(&snapshot.held, entry, change),
        };
        let Plan::Apply(writes) = &plan else { return plan.outcome().ok_or(PortError::NotFound) };
        let items = transaction(table, tenant, design, entry, writes, &snapshot);
        match client.transact_write_items().set_transact_items(Some(items)).send().await {
            Ok(_) => return Ok(Applied::Applied),
            Err(e) => match transact_failure(e) {
                TransactFailure::LostRace => {
                    tracing::debug!(%tenant, %design, attempt, "A design write lost a race; reading again.");
                    tokio::time::sleep(Duration::from_millis(u64::from(attempt) * 5)).await;
                }
                TransactFailure::Failed(e) => return Err(e),
            },
        }
    }
    Err(PortError::Unavailable(
        format!("the write of design {design} lost the race to other writers {MAX_ATTEMPTS} times in a row").into(),
    ))
}

/// One consistent read (`TransactGetItems`): the design item and whether this kind and revision
/// was applied; for a replay also whether this revision's `design.failed` entry was.
async fn read(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    entry: &TimelineEntry,
    replay: bool,
) -> PortResult<Snapshot> {
    let get = |pk, sk| {
        let get = Get::builder().table_name(table).set_key(Some(key(pk, sk))).build().expect("table and key are set");
        TransactGetItem::builder().get(get).build()
    };
    let mut request = client
        .transact_get_items()
        .transact_items(get(tenant_pk(tenant), design_sk(design)))
        .transact_items(get(design_pk(tenant, design), applied_sk(entry.kind, entry.revision)));
    if replay {
        request =
            request.transact_items(get(design_pk(tenant, design), applied_sk(EventKind::DesignFailed, entry.revision)));
    }
    let out = request.send().await.map_err(|e| classify("read for apply", e))?;
    let responses = out.responses();
    let design_item = responses.first().and_then(|r| r.item()).filter(|i| !i.is_empty());
    let seen = responses.get(1).and_then(|r| r.item()).is_some_and(|i| !i.is_empty());
    let dead_lettered = replay && responses.get(2).and_then(|r| r.item()).is_some_and(|i| !i.is_empty());
    if let Some(tombstone) = design_item.filter(|i| super::deletes::is_tombstone(i)) {
        let held = Held { deleted: true, seen, latest_of_kind: None, design: None };
        return Ok(Snapshot { held, dead_lettered, seq: tombstone.num("seq")? });
    }
    let Some(item) = design_item else {
        return Ok(Snapshot {
            held: Held { deleted: false, seen, latest_of_kind: None, design: None },
            dead_lettered,
            seq: 0,
        });
    };
    let status = DesignStatus::parse(item.str_attr("status")?).ok_or_else(|| super::table::corrupt("status"))?;
    let latest_of_kind = match item.get("latest").and_then(|l| l.as_m().ok()).and_then(|m| m.get(entry.kind.as_str())) {
        Some(v) => Some(v.as_n().ok().and_then(|n| n.parse().ok()).ok_or_else(|| super::table::corrupt("latest"))?),
        None => None,
    };
    Ok(Snapshot {
        held: Held {
            deleted: false,
            seen,
            latest_of_kind,
            design: Some(HeldDesign { revision: item.num("revision")?, status }),
        },
        dead_lettered,
        seq: item.num("seq")?,
    })
}

/// Builds the expression pieces of one write, naming every attribute through `#` placeholders
/// (`name`, `status` and others are reserved words).
#[derive(Default)]
pub(crate) struct Expr {
    pub(crate) set: Vec<String>,
    pub(crate) remove: Vec<String>,
    pub(crate) add: Vec<String>,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

impl Expr {
    pub(crate) fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{}", attr.replace('.', "_"));
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    pub(crate) fn value(&mut self, v: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), v);
        placeholder
    }

    pub(crate) fn set(&mut self, attr: &str, v: AttributeValue) {
        let (name, value) = (self.name(attr), self.value(v));
        self.set.push(format!("{name} = {value}"));
    }

    pub(crate) fn set_or_remove(&mut self, attr: &str, v: Option<AttributeValue>) {
        match v {
            Some(v) => self.set(attr, v),
            None => {
                let name = self.name(attr);
                self.remove.push(name);
            }
        }
    }

    pub(crate) fn update_expression(&self) -> String {
        let mut parts = Vec::new();
        for (verb, clauses) in [("SET", &self.set), ("REMOVE", &self.remove), ("ADD", &self.add)] {
            if !clauses.is_empty() {
                parts.push(format!("{verb} {}", clauses.join(", ")));
            }
        }
        parts.join(" ")
    }
}

/// The writes of `writes` as transaction items: the design item (inserted or updated on
/// condition of its write counter and revision), the applied marker and the timeline entry (each
/// on condition it is new), and the report (likewise).
fn transaction(
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    entry: &TimelineEntry,
    writes: &Writes<'_>,
    snapshot: &Snapshot,
) -> Vec<TransactWriteItem> {
    let now = Utc::now().to_rfc3339();
    let seq = snapshot.seq + 1;
    let report_bytes = writes.report.as_ref().map_or(0, |r| r.report.get().len() as u64);
    let new = |item: Item| {
        Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .expect("table and item are set")
    };
    let design_write = match (&writes.design, snapshot.held.design) {
        (DesignWrite::Insert { name, revision, status, failure_reason }, _) => {
            let mut item = key(tenant_pk(tenant), design_sk(design));
            item.extend([
                ("item_type".to_owned(), s("design")),
                ("design_id".to_owned(), s(design.as_str())),
                ("name".to_owned(), s(name.unwrap_or(design.as_str()))),
                ("revision".to_owned(), n(*revision)),
                ("status".to_owned(), s(status.as_str())),
                ("updated_at".to_owned(), s(now.clone())),
                ("seq".to_owned(), n(seq)),
                (
                    "latest".to_owned(),
                    AttributeValue::M(HashMap::from([(entry.kind.as_str().to_owned(), n(entry.revision))])),
                ),
                ("usage_bytes".to_owned(), n(2 * USAGE_ROW_BYTES + report_bytes)),
            ]);
            if let Some(reason) = failure_reason {
                item.insert("failure_reason".to_owned(), s(*reason));
            }
            TransactWriteItem::builder().put(new(item)).build()
        }
        (write, held) => {
            let mut e = Expr::default();
            let (seq_name, held_seq) = (e.name("seq"), e.value(n(snapshot.seq)));
            let (rev_name, held_rev) = (e.name("revision"), e.value(n(held.map_or(0, |d| d.revision))));
            let condition = format!("{seq_name} = {held_seq} AND {rev_name} = {held_rev}");
            e.set("seq", n(seq));
            let (latest, kind, rev) = (e.name("latest"), e.name(entry.kind.as_str()), e.value(n(entry.revision)));
            e.set.push(format!("{latest}.{kind} = {rev}"));
            let (usage, delta) = (e.name("usage_bytes"), e.value(n(USAGE_ROW_BYTES + report_bytes)));
            e.add.push(format!("{usage} {delta}"));
            match write {
                DesignWrite::Revise { name, revision, status, failure_reason } => {
                    if let Some(name) = name {
                        e.set("name", s(*name));
                    }
                    e.set("revision", n(*revision));
                    e.set("status", s(status.as_str()));
                    e.set_or_remove("verdict", None);
                    e.set_or_remove("failure_reason", failure_reason.map(s));
                    e.set("updated_at", s(now.clone()));
                }
                DesignWrite::Move { to, verdict, failure_reason, .. } => {
                    e.set("status", s(to.as_str()));
                    if let Some(v) = verdict {
                        e.set("verdict", s(v.as_str()));
                    }
                    e.set_or_remove("failure_reason", failure_reason.map(s));
                    e.set("updated_at", s(now.clone()));
                }
                DesignWrite::Keep | DesignWrite::Insert { .. } => {}
            }
            let update = Update::builder()
                .table_name(table)
                .set_key(Some(key(tenant_pk(tenant), design_sk(design))))
                .update_expression(e.update_expression())
                .condition_expression(condition)
                .set_expression_attribute_names(Some(e.names))
                .set_expression_attribute_values(Some(e.values))
                .build()
                .expect("table, key and expression are set");
            TransactWriteItem::builder().update(update).build()
        }
    };
    let mut items = vec![design_write];
    // Only a replayed record that fails again applies a kind and revision seen before (its
    // revision fails once more): its marker is already there.
    if !snapshot.held.seen {
        items.push(TransactWriteItem::builder().put(new(items::applied_marker(tenant, design, entry, seq))).build());
    }
    items.push(TransactWriteItem::builder().put(new(items::timeline_entry(tenant, design, entry, seq))).build());
    if let Some(r) = &writes.report {
        items.push(TransactWriteItem::builder().put(new(items::report(tenant, design, r))).build());
    }
    items
}
