//! Steps 2 and 3 of the module doc's algorithm: the ops planned in order into groups, one
//! `TransactWriteItems` each, in which every design item and feed head is written once.

use super::plan::{once_of, plan, Design, Planned, State};
use super::MAX_TRANSACTION_ITEMS;
use crate::dynamo::apply::Expr;
use crate::dynamo::feed::{entry_item, expires_at, expiring, head_write, once_item};
use crate::dynamo::table::{design_sk, feed_once_sk, items, key, n, s, tenant_pk};
use crate::dynamo::transact::{put_new, stored_nanos};
use crate::dynamo::webhooks::{delivery_item, webhooks_unchanged};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use chrono::Utc;
use openqq_core::ports::{feed_entry, ApplyOp, PortResult, USAGE_ROW_BYTES};
use openqq_core::revision::{DesignWrite, HeldDesign};
use openqq_core::{Applied, DesignId, NewFeedEntry, PortError, TenantId, WebhookId};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a group of writes may weigh: DynamoDB refuses a transaction over 4 MB; this leaves room
/// for keys, names and the estimate's error.
const MAX_TRANSACTION_BYTES: usize = 3 * 1024 * 1024 + 512 * 1024;
/// What one item counts for in the estimate of a transaction's bytes, besides a report's text:
/// every item but a report is well under 1 KB (ids, a few numbers and times, a feed entry as JSON).
const ITEM_BYTES: usize = 2 * 1024;

/// The design item's writes in one group: its final state after the group's ops on it.
struct DesignWrites {
    tenant: TenantId,
    design: DesignId,
    /// The write counter and revision the group found (the item's conditions).
    base_seq: u64,
    base_revision: u64,
    /// The group creates the item.
    inserted: bool,
    /// The write counter the group leaves.
    seq: u64,
    /// Attributes set (`Some`) or removed (`None`), the last op's word for each.
    attrs: BTreeMap<&'static str, Option<AttributeValue>>,
    /// `latest.{kind}` of each kind applied.
    latest: BTreeMap<String, u64>,
    /// What the group adds to `usage_bytes`.
    usage: u64,
}

/// A tenant's feed head in one group: from `base` to `head`.
pub(super) struct HeadWrite {
    pub(super) tenant: TenantId,
    base: u64,
    pub(super) head: u64,
    pub(super) hooks: Option<(u64, u64)>,
}

/// The ops of one transaction.
#[derive(Default)]
pub(super) struct Group {
    /// How many ops (the next of the batch on).
    pub(super) ops: usize,
    pub(super) outcomes: Vec<Applied>,
    designs: Vec<DesignWrites>,
    pub(super) heads: Vec<HeadWrite>,
    /// Every other item: markers, timeline entries, reports, feed entries, feed-once items,
    /// deliveries.
    items: Vec<TransactWriteItem>,
    bytes: usize,
    /// Each design the group writes, as the group leaves it.
    pub(super) after: Vec<((TenantId, DesignId), Design)>,
}

impl Group {
    fn len(&self) -> usize {
        self.designs.len() + 2 * self.heads.len() + self.items.len()
    }

    /// The items and bytes `planned` adds to this group.
    fn cost(&self, state: &State, op: &ApplyOp<'_>, planned: &Planned<'_>) -> (usize, usize) {
        let mut items = 0;
        let mut bytes = 0;
        if let Some(writes) = &planned.writes {
            let known = self.designs.iter().any(|d| (&d.tenant, &d.design) == (op.tenant, op.design));
            items += usize::from(!known) + usize::from(!planned.seen) + 1;
            if let Some(r) = &writes.report {
                items += 1;
                bytes += r.report.get().len();
            }
        }
        if planned.append {
            let known = self.heads.iter().any(|h| &h.tenant == op.tenant);
            let deliveries = state
                .hooks
                .get(op.tenant)
                .map_or(0, |hooks| hooks.iter().filter(|(_, kinds)| kinds.contains(&op.entry.kind)).count());
            items += if known { 0 } else { 2 } + 2 + deliveries;
        }
        (items, bytes + items * ITEM_BYTES)
    }

    /// Adds `op`'s writes, planned as `planned`, and moves `state` on past them.
    fn add(
        &mut self,
        table: &str,
        state: &mut State,
        op: &ApplyOp<'_>,
        planned: Planned<'_>,
        keep: Duration,
    ) -> PortResult<()> {
        let (tenant, design, entry) = (op.tenant, op.design, op.entry);
        let now = Utc::now().to_rfc3339();
        let (_, added_bytes) = self.cost(state, op, &planned);
        if let Some(writes) = &planned.writes {
            let held = state.designs.get_mut(&(tenant.clone(), design.clone())).expect("every op's design was read");
            let at = match self.designs.iter().position(|d| (&d.tenant, &d.design) == (tenant, design)) {
                Some(at) => at,
                None => {
                    self.designs.push(DesignWrites {
                        tenant: tenant.clone(),
                        design: design.clone(),
                        base_seq: held.seq,
                        base_revision: held.held.map_or(0, |d| d.revision),
                        inserted: false,
                        seq: held.seq,
                        attrs: BTreeMap::new(),
                        latest: BTreeMap::new(),
                        usage: 0,
                    });
                    self.designs.len() - 1
                }
            };
            let d = &mut self.designs[at];
            let report_bytes = writes.report.as_ref().map_or(0, |r| r.report.get().len() as u64);
            d.usage += USAGE_ROW_BYTES + report_bytes;
            match &writes.design {
                DesignWrite::Insert { name, revision, status, failure_reason } => {
                    d.inserted = true;
                    d.usage += USAGE_ROW_BYTES;
                    d.attrs.insert("item_type", Some(s("design")));
                    d.attrs.insert("design_id", Some(s(design.as_str())));
                    d.attrs.insert("name", Some(s(name.unwrap_or(design.as_str()))));
                    d.attrs.insert("revision", Some(n(*revision)));
                    d.attrs.insert("status", Some(s(status.as_str())));
                    d.attrs.insert("updated_at", Some(s(now.clone())));
                    d.attrs.insert("failure_reason", failure_reason.map(s));
                    held.held = Some(HeldDesign { revision: *revision, status: *status });
                }
                DesignWrite::Revise { name, revision, status, failure_reason } => {
                    if let Some(name) = name {
                        d.attrs.insert("name", Some(s(*name)));
                    }
                    d.attrs.insert("revision", Some(n(*revision)));
                    d.attrs.insert("status", Some(s(status.as_str())));
                    d.attrs.insert("verdict", None);
                    d.attrs.insert("failure_reason", failure_reason.map(s));
                    d.attrs.insert("updated_at", Some(s(now.clone())));
                    held.held = Some(HeldDesign { revision: *revision, status: *status });
                }
                DesignWrite::Move { to, verdict, failure_reason, .. } => {
                    d.attrs.insert("status", Some(s(to.as_str())));
                    if let Some(v) = verdict {
                        d.attrs.insert("verdict", Some(s(v.as_str())));
                    }
                    d.attrs.insert("failure_reason", failure_reason.map(s));
                    d.attrs.insert("updated_at", Some(s(now.clone())));
                    if let Some(h) = held.held.as_mut() {
                        h.status = *to;
                    }
                }
                DesignWrite::Keep => {}
            }
            held.seq += 1;
            d.seq = held.seq;
            d.latest.insert(entry.kind.as_str().to_owned(), entry.revision);
            held.latest.insert(entry.kind.as_str().to_owned(), entry.revision);
            let seq = held.seq;
            // Only a replayed record that fails again applies a kind and revision seen before:
            // its marker is already there.
            if !planned.seen {
                self.items.push(put_new(table, items::applied_marker(tenant, design, entry, seq)));
                state.markers.insert(once_of(op, entry.kind));
            }
            self.items.push(put_new(table, items::timeline_entry(tenant, design, entry, seq)));
            if let Some(r) = &writes.report {
                self.items.push(put_new(table, items::report(tenant, design, r)));
            }
        }
        if planned.append {
            let feed = state.feeds.get_mut(tenant).expect("every op's feed was read");
            let at = match self.heads.iter().position(|h| &h.tenant == tenant) {
                Some(at) => at,
                None => {
                    let head =
                        HeadWrite { tenant: tenant.clone(), base: feed.head, head: feed.head, hooks: feed.hooks };
                    self.heads.push(head);
                    self.heads.len() - 1
                }
            };
            feed.head += 1;
            let seq = feed.head;
            self.heads[at].head = seq;
            let new: NewFeedEntry<'_> = feed_entry(design, entry, op.change);
            let numbered = new.numbered(seq);
            let expires = expires_at(numbered.occurred_at, keep);
            self.items.push(put_new(table, expiring(entry_item(tenant, &numbered), expires)));
            let once = once_item(tenant, feed_once_sk(design, entry.kind, entry.revision), seq);
            self.items.push(put_new(table, expiring(once, expires)));
            state.once.insert(once_of(op, entry.kind), seq);
            let wanting: Vec<&WebhookId> = state.hooks.get(tenant).map_or_else(Vec::new, |hooks| {
                hooks.iter().filter(|(_, kinds)| kinds.contains(&entry.kind)).map(|(id, _)| id).collect()
            });
            if !wanting.is_empty() {
                let json = numbered.to_json()?;
                let due = stored_nanos(Utc::now());
                for id in wanting {
                    self.items.push(put_new(table, expiring(delivery_item(tenant, id, seq, &json, due), expires)));
                }
            }
        }
        self.bytes += added_bytes;
        self.ops += 1;
        self.outcomes.push(planned.outcome);
        Ok(())
    }

    /// Notes how the group leaves each design it writes (once the group is complete).
    fn close(&mut self, state: &State) {
        self.after = self
            .designs
            .iter()
            .map(|d| {
                let key = (d.tenant.clone(), d.design.clone());
                let design = state.designs[&key].clone();
                (key, design)
            })
            .collect();
    }

    /// The group's transaction: each design item and feed head once, then every other item.
    pub(super) fn into_items(self, table: &str) -> Vec<TransactWriteItem> {
        let mut items = Vec::with_capacity(self.len());
        for d in self.designs {
            items.push(design_write(table, d));
        }
        for h in self.heads {
            items.push(head_write(table, &h.tenant, h.base, h.head));
            items.push(webhooks_unchanged(table, &h.tenant, h.hooks));
        }
        items.extend(self.items);
        items
    }
}

/// The design item's write: a `Put` of the whole item on condition it is new, or an `Update` of
/// the attributes the group moved, on condition of the write counter and revision it found.
fn design_write(table: &str, d: DesignWrites) -> TransactWriteItem {
    let key = key(tenant_pk(&d.tenant), design_sk(&d.design));
    if d.inserted {
        let mut item = key;
        item.extend(d.attrs.into_iter().filter_map(|(attr, v)| v.map(|v| (attr.to_owned(), v))));
        item.insert("seq".to_owned(), n(d.seq));
        item.insert("usage_bytes".to_owned(), n(d.usage));
        let latest = d.latest.into_iter().map(|(kind, revision)| (kind, n(revision))).collect();
        item.insert("latest".to_owned(), AttributeValue::M(latest));
        return put_new(table, item);
    }
    let mut e = Expr::default();
    let (seq_name, held_seq) = (e.name("seq"), e.value(n(d.base_seq)));
    let (rev_name, held_rev) = (e.name("revision"), e.value(n(d.base_revision)));
    let condition = format!("{seq_name} = {held_seq} AND {rev_name} = {held_rev}");
    e.set("seq", n(d.seq));
    for (kind, revision) in &d.latest {
        let (latest, kind, revision) = (e.name("latest"), e.name(kind), e.value(n(*revision)));
        e.set.push(format!("{latest}.{kind} = {revision}"));
    }
    let (usage, delta) = (e.name("usage_bytes"), e.value(n(d.usage)));
    e.add.push(format!("{usage} {delta}"));
    for (attr, v) in d.attrs {
        e.set_or_remove(attr, v);
    }
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key))
        .update_expression(e.update_expression())
        .condition_expression(condition)
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .build()
        .expect("table, key and expression are set");
    TransactWriteItem::builder().update(update).build()
}

/// What [`group`] planned.
pub(super) struct Grouped {
    pub(super) groups: Vec<Group>,
    /// The error of the first op that cannot be applied, where planning stopped.
    pub(super) stop: Option<PortError>,
    /// Every op planned is applied and appended: nothing was decided without a write (what an
    /// unread plan needs, since only a write checks what it assumed).
    pub(super) all_written: bool,
}

/// Plans `ops` in order over `state` into groups of at most [`MAX_TRANSACTION_ITEMS`] items and
/// [`MAX_TRANSACTION_BYTES`]; stops at the first op that cannot be applied, with its error.
/// Feed entries (and their markers and deliveries) expire `keep` after they occurred.
pub(super) fn group(table: &str, state: &mut State, ops: &[ApplyOp<'_>], keep: Duration) -> Grouped {
    let mut done = Grouped { groups: vec![Group::default()], stop: None, all_written: true };
    for op in ops {
        let planned = match plan(state, op) {
            Ok(planned) => planned,
            Err(e) => {
                done.stop = Some(e);
                done.all_written = false;
                break;
            }
        };
        done.all_written &= planned.outcome == Applied::Applied && planned.append;
        let current = done.groups.last_mut().expect("there is a group");
        let (items, bytes) = current.cost(state, op, &planned);
        if current.ops > 0
            && (current.len() + items > MAX_TRANSACTION_ITEMS || current.bytes + bytes > MAX_TRANSACTION_BYTES)
        {
            current.close(state);
            done.groups.push(Group::default());
        }
        let current = done.groups.last_mut().expect("there is a group");
        if let Err(e) = current.add(table, state, op, planned, keep) {
            done.stop = Some(e);
            done.all_written = false;
            break;
        }
    }
    done.groups.last_mut().expect("there is a group").close(state);
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::batch::fixtures::{finished, op, ops, submission, Owned};
    use crate::dynamo::batch::plan::Feed;
    use crate::dynamo::table::{deliveries_pk, delivery_sk, feed_pk, feed_sk, FEED_HEAD_SK, WEBHOOK_COUNT_SK};
    use openqq_core::{Change, DesignStatus, EventKind};
    use std::collections::HashMap;
    use std::sync::Arc;

    /// A state in which every design of `ops` is new and every tenant's feed head is at `head`,
    /// without webhooks.
    fn fresh(ops: &[ApplyOp<'_>], head: u64) -> State {
        let mut state = State::default();
        for op in ops {
            state.designs.insert((op.tenant.clone(), op.design.clone()), Design::default());
            state.feeds.insert(op.tenant.clone(), Feed { head, hooks: None });
        }
        state
    }

    /// The key of each item of a transaction.
    fn keys(items: &[TransactWriteItem]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|i| {
                let key = match (i.put(), i.update(), i.condition_check()) {
                    (Some(put), _, _) => put.item(),
                    (_, Some(update), _) => update.key(),
                    (_, _, Some(check)) => check.key(),
                    _ => panic!("a put, an update or a check: {i:?}"),
                };
                (key["pk"].as_s().unwrap().clone(), key["sk"].as_s().unwrap().clone())
            })
            .collect()
    }

    fn count(keys: &[(String, String)], pk: &str, sk: &str) -> usize {
        keys.iter().filter(|(p, s)| (p.as_str(), s.as_str()) == (pk, sk)).count()
    }

    #[test]
    fn a_group_closes_before_the_op_that_would_take_it_past_a_hundred_items() {
        let owned: Vec<Owned> = (0..25).map(|i| submission("acme", &format!("d-{i}"))).collect();
        let ops = ops(&owned);
        let mut state = fresh(&ops, 0);
        let grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        assert!(grouped.stop.is_none() && grouped.all_written);
        // The first op: design, marker, timeline entry, head, webhook check, feed entry, feed-once
        // item (7); each next one 5: 7 + 18 * 5 = 97, and a 20th would make 102.
        let sizes: Vec<(usize, usize)> = grouped.groups.iter().map(|g| (g.ops, g.len())).collect();
        assert_eq!(sizes, [(19, 97), (6, 32)]);
        let outcomes: Vec<Applied> = grouped.groups.iter().flat_map(|g| g.outcomes.clone()).collect();
        assert_eq!(outcomes, [Applied::Applied; 25]);
        let sent: Vec<usize> = grouped.groups.into_iter().map(|g| g.into_items("openqq").len()).collect();
        assert_eq!(sent, [97, 32], "the transaction holds what the group counted");
    }

    #[test]
    fn a_group_takes_ops_up_to_exactly_a_hundred_items() {
        let owned: Vec<Owned> = (0..15).map(|i| submission("acme", &format!("d-{i}"))).collect();
        let ops = ops(&owned);
        let mut state = fresh(&ops, 0);
        let both = [EventKind::DesignSubmitted];
        let hooks = vec![(WebhookId::generate(), both.to_vec()), (WebhookId::generate(), both.to_vec())];
        state.hooks.insert(owned[0].tenant.clone(), Arc::new(hooks));
        let grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        // With two deliveries an op: 9 items for the first, 7 for each next: 9 + 13 * 7 = 100.
        let sizes: Vec<(usize, usize)> = grouped.groups.iter().map(|g| (g.ops, g.len())).collect();
        assert_eq!(sizes, [(14, 100), (1, 9)]);
    }

    #[test]
    fn a_group_writes_each_design_item_and_feed_head_once_moving_the_head_from_n_to_n_plus_k() {
        let owned =
            [submission("acme", "d-1"), op("acme", "d-1", 1, Change::ValidationStarted), submission("acme", "d-2")];
        let ops = ops(&owned);
        let mut state = fresh(&ops, 7);
        let mut grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        assert_eq!(grouped.groups.len(), 1);
        let only = grouped.groups.remove(0);
        let acme = &owned[0].tenant;
        let heads: Vec<(&TenantId, u64, u64)> = only.heads.iter().map(|h| (&h.tenant, h.base, h.head)).collect();
        assert_eq!(heads, [(acme, 7, 10)], "three entries after the seven read");
        assert_eq!(state.feeds[acme].head, 10, "the next group starts where this one leaves the head");
        let after: HashMap<&str, u64> = only.after.iter().map(|((_, d), design)| (d.as_str(), design.seq)).collect();
        assert_eq!(after, [("d-1", 2), ("d-2", 1)].into(), "each design as the group leaves it");
        let items = only.into_items("openqq");
        let keys = keys(&items);
        let (tenant, feed) = ("T#acme".to_owned(), feed_pk(acme));
        assert_eq!(count(&keys, &tenant, "D#d-1"), 1, "{keys:?}");
        assert_eq!(count(&keys, &tenant, "D#d-2"), 1, "{keys:?}");
        assert_eq!(count(&keys, &feed, FEED_HEAD_SK), 1, "{keys:?}");
        assert_eq!(count(&keys, &tenant, WEBHOOK_COUNT_SK), 1, "{keys:?}");
        let entries: Vec<&str> =
            keys.iter().filter(|(p, s)| *p == feed && s.starts_with("F#")).map(|(_, s)| s.as_str()).collect();
        assert_eq!(entries, [feed_sk(8), feed_sk(9), feed_sk(10)]);
        let head = items.iter().find_map(|i| i.update().filter(|u| u.key()["sk"].as_s().unwrap() == FEED_HEAD_SK));
        let values = head.expect("the head read is moved by an update").expression_attribute_values().unwrap();
        assert_eq!((&values[":last"], &values[":next"]), (&n(7), &n(10)));
        let design = items[0].put().expect("a new design is put whole").item();
        assert_eq!((&design["status"], &design["seq"]), (&s("validating"), &n(2)), "after its last op: {design:?}");
    }

    #[test]
    fn a_group_closes_before_the_op_that_would_take_it_past_the_size_limit() {
        let report = 300 * 1024;
        let owned: Vec<Owned> = (0..12).map(|i| op("acme", &format!("d-{i}"), 1, finished(report))).collect();
        let ops = ops(&owned);
        let mut state = fresh(&ops, 0);
        for design in state.designs.values_mut() {
            design.held = Some(HeldDesign { revision: 1, status: DesignStatus::Validating });
            design.seq = 2;
        }
        let grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        assert!(grouped.stop.is_none() && grouped.all_written);
        // The first op: design, marker, timeline entry, report, head, check, entry, once (8
        // items); each next one 6. Eleven weigh 11 reports and 68 items: 3_518_464 bytes.
        let sizes: Vec<(usize, usize, usize)> = grouped.groups.iter().map(|g| (g.ops, g.len(), g.bytes)).collect();
        assert_eq!(sizes, [(11, 68, 11 * report + 68 * ITEM_BYTES), (1, 8, report + 8 * ITEM_BYTES)]);
        assert!(sizes[0].2 + report + 6 * ITEM_BYTES > MAX_TRANSACTION_BYTES, "a twelfth would not fit");
    }

    #[test]
    fn each_webhook_wanting_the_kind_gets_a_delivery_and_the_check_holds_the_version_read() {
        let owned = [submission("acme", "d-1")];
        let ops = ops(&owned);
        let acme = &owned[0].tenant;
        let mut state = fresh(&ops, 0);
        let (wants, other) = (WebhookId::generate(), WebhookId::generate());
        let hooks = vec![(wants, vec![EventKind::DesignSubmitted]), (other, vec![EventKind::ResultsReady])];
        state.hooks.insert(acme.clone(), Arc::new(hooks));
        state.feeds.get_mut(acme).unwrap().hooks = Some((2, 9));
        let mut grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        let only = grouped.groups.remove(0);
        assert_eq!(only.len(), 7 + 1, "one delivery besides the usual items");
        let items = only.into_items("openqq");
        let keys = keys(&items);
        assert_eq!(count(&keys, &deliveries_pk(acme, &wants), &delivery_sk(1)), 1, "{keys:?}");
        assert!(!keys.iter().any(|(p, _)| *p == deliveries_pk(acme, &other)), "{keys:?}");
        let check = items.iter().find_map(|i| i.condition_check()).expect("the webhooks are checked");
        assert_eq!(check.expression_attribute_values().unwrap()[":version"], n(9));
    }

    #[test]
    fn planning_stops_at_the_first_op_that_cannot_be_applied_keeping_the_ops_before_it() {
        let owned =
            [submission("acme", "d-1"), op("acme", "d-2", 1, Change::ValidationStarted), submission("acme", "d-3")];
        let ops = ops(&owned);
        let mut state = fresh(&ops, 0);
        let grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        assert!(matches!(grouped.stop, Some(PortError::NotFound)), "{:?}", grouped.stop);
        assert!(!grouped.all_written);
        let planned: Vec<usize> = grouped.groups.iter().map(|g| g.ops).collect();
        assert_eq!(planned, [1], "the first op only");
        assert_eq!(state.feeds[&owned[0].tenant].head, 1);
    }

    #[test]
    fn an_op_decided_without_a_write_leaves_nothing_to_send_and_the_plan_not_all_written() {
        let owned = [op("acme", "d-1", 1, Change::ValidationStarted)];
        let ops = ops(&owned);
        let mut state = fresh(&ops, 4);
        let once = once_of(&ops[0], EventKind::ValidationStarted);
        state.markers.insert(once.clone());
        state.once.insert(once, 4);
        let mut grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        assert!(grouped.stop.is_none() && !grouped.all_written, "a duplicate rests on what was read");
        let only = grouped.groups.remove(0);
        assert_eq!((only.ops, only.outcomes.as_slice()), (1, &[Applied::Duplicate][..]));
        assert!(only.into_items("openqq").is_empty());
    }

    #[test]
    fn a_design_item_read_is_updated_on_condition_of_the_write_counter_and_revision_found() {
        let owned = [op("acme", "d-1", 3, Change::ValidationStarted)];
        let ops = ops(&owned);
        let mut state = fresh(&ops, 0);
        let design = state.designs.values_mut().next().unwrap();
        design.held = Some(HeldDesign { revision: 3, status: DesignStatus::Submitted });
        design.seq = 5;
        let mut grouped = group("openqq", &mut state, &ops, openqq_core::feed::DEFAULT_FEED_RETENTION);
        let items = grouped.groups.remove(0).into_items("openqq");
        let update = items[0].update().expect("an existing design is updated");
        assert_eq!(update.condition_expression(), Some("#seq = :v0 AND #revision = :v1"));
        let values = update.expression_attribute_values().unwrap();
        assert_eq!((&values[":v0"], &values[":v1"], &values[":v2"]), (&n(5), &n(3), &n(6)), "found 5 at 3; leaves 6");
    }
}
