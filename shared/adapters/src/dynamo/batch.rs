//! `apply_and_append` and `apply_batch` on DynamoDB (docs/DYNAMODB.md, "Writes with their feed
//! entries"): a consumer's writes and their feed entries, read in one request and written in as
//! few transactions as DynamoDB allows.
//!
//! 1. One consistent `BatchGetItem` of everything the ops depend on: per design its item, per op
//!    its applied marker (for a replay also the revision's `design.failed` marker) and its
//!    feed-once item, per tenant its feed head and webhook count. Every value read is a condition
//!    of the write that follows (or, where it decides that nothing is written, a fact that never
//!    becomes false again: a marker is never deleted, a kind's latest revision only grows), so
//!    the read needs no snapshot, and it never fails for meeting a transaction in flight.
//! 2. The ops are planned in order ([`revision::plan`]) over what was read, each op seeing the
//!    writes of the ops before it, and the feed entries are numbered from the head read.
//! 3. The writes go out as one `TransactWriteItems` per group of ops: a design item or a feed
//!    head may appear in a transaction once, so a group writes each design item once (its state
//!    after the group's last op on it, conditional on the write counter and revision read) and
//!    each tenant's head once (from `n` to `n + k` for its `k` new entries, conditional on `n`).
//!    A group closes when the next op would take it past 100 items or about 3.5 MB; the next
//!    group is conditional on the state the previous one left.
//! 4. A group cancelled only for conditions or conflicts lost a race: the ops from that group on
//!    are read and planned again. A group refused otherwise is retried one op at a time, so the
//!    error lands on the op that caused it; a retriable error ends the batch at the group's first
//!    op, which changed nothing.
//!
//! A submission is planned without a read when the store remembers its tenant's feed head and
//! webhooks ([`Memory`]): the design as new, the head as remembered. Every item of that write is
//! conditional on exactly what was assumed (the design, markers and entries new, the head at the
//! remembered number, the webhooks' version), so a wrong guess is a lost race like any other: it
//! costs the refused write, then the read and the write.

use super::apply::{Expr, MAX_REPORT_ITEM_BYTES};
use super::error::classify;
use super::feed::{entry_item, head_write, once_item};
use super::table::{
    applied_sk, design_pk, design_sk, entry_sk, feed_once_sk, feed_pk, key, n, report_sk, s, tenant_pk, Attrs, Item,
    FEED_HEAD_SK, PK, SK, WEBHOOK_COUNT_SK,
};
use super::transact::{back_off, put_new, stored_nanos, transact};
use super::webhooks::{delivery_item, webhook_kinds, webhooks_unchanged};
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use chrono::Utc;
use openqq_core::ports::{feed_entry, ApplyOp, BatchApplied, PortResult, USAGE_ROW_BYTES};
use openqq_core::revision::{self, DesignWrite, HeldDesign, Plan, Writes};
use openqq_core::{Applied, Change, DesignId, DesignStatus, EventKind, NewFeedEntry, PortError, TenantId, WebhookId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Most items of one `TransactWriteItems` (DynamoDB's limit).
pub(crate) const MAX_TRANSACTION_ITEMS: usize = 100;
/// Most keys of one `BatchGetItem` (DynamoDB's limit).
const MAX_READ_KEYS: usize = 100;
/// What a group of writes may weigh: DynamoDB refuses a transaction over 4 MB; this leaves room
/// for keys, names and the estimate's error.
const MAX_TRANSACTION_BYTES: usize = 3 * 1024 * 1024 + 512 * 1024;
/// What one item counts for in the estimate of a transaction's bytes, besides a report's text:
/// every item but a report is well under 1 KB (ids, a few numbers and times, a feed entry as JSON).
const ITEM_BYTES: usize = 2 * 1024;
/// Reads and plans at most this many times in a row when other writers keep winning.
const MAX_ATTEMPTS: u32 = 32;
/// Tenants whose feed head [`Memory`] keeps; past this it starts over.
const MAX_REMEMBERED_TENANTS: usize = 10_000;
/// Designs whose state [`Memory`] keeps; past this it starts over.
const MAX_REMEMBERED_DESIGNS: usize = 100_000;
/// After an unread write of a tenant guessed wrong, this many of the tenant's next writes read
/// first: where other processes write the same tenant (Lambda), what one remembers is often old,
/// and a wrong guess costs a request.
const COOL_DOWN: u32 = 4;

/// A tenant's webhooks and the kinds each wants.
type Hooks = Arc<Vec<(WebhookId, Vec<EventKind>)>>;

/// The applied marker or feed-once item of one design, kind and revision.
type Once = (TenantId, DesignId, EventKind, u64);

/// What the store last knew, so that a write can be made without a read: each tenant's feed head
/// and webhook count with version, its webhooks as listed at that version, and each design's
/// item, as last read or written here. A hint only: every write planned from it is conditional
/// on exactly what it assumed.
#[derive(Default)]
pub(crate) struct Memory {
    feeds: Bounded<TenantId, Feed, MAX_REMEMBERED_TENANTS>,
    hooks: Bounded<TenantId, (u64, Hooks), MAX_REMEMBERED_TENANTS>,
    designs: Bounded<(TenantId, DesignId), Design, MAX_REMEMBERED_DESIGNS>,
    /// Tenants whose next writes read first, and for how many more.
    cooling: Bounded<TenantId, u32, MAX_REMEMBERED_TENANTS>,
}

/// A map of at most `CAP` entries that starts over when a new key would pass it: what
/// [`Memory`] forgets only costs a read.
struct Bounded<K, V, const CAP: usize>(Mutex<HashMap<K, V>>);

impl<K, V, const CAP: usize> Default for Bounded<K, V, CAP> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: std::hash::Hash + Eq, V, const CAP: usize> Bounded<K, V, CAP> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, key: K, value: V) {
        let mut map = self.lock();
        if map.len() >= CAP && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, value);
    }
}

impl Memory {
    fn design(&self, tenant: &TenantId, design: &DesignId) -> Option<Design> {
        self.designs.lock().get(&(tenant.clone(), design.clone())).cloned()
    }

    fn remember_design(&self, key: &(TenantId, DesignId), design: &Design) {
        self.designs.insert(key.clone(), design.clone());
    }

    /// An unread write of `tenant` guessed wrong: its next [`COOL_DOWN`] writes read first.
    fn missed(&self, tenant: &TenantId) {
        self.cooling.insert(tenant.clone(), COOL_DOWN);
    }

    /// Whether this write of `tenant` reads first (counting it against the cool-down).
    fn cooling(&self, tenant: &TenantId) -> bool {
        let mut cooling = self.cooling.lock();
        match cooling.get_mut(tenant) {
            Some(left) if *left > 1 => {
                *left -= 1;
                true
            }
            Some(_) => {
                cooling.remove(tenant);
                true
            }
            None => false,
        }
    }

    fn feed(&self, tenant: &TenantId) -> Option<Feed> {
        self.feeds.lock().get(tenant).copied()
    }

    fn remember(&self, tenant: &TenantId, feed: Feed) {
        self.feeds.insert(tenant.clone(), feed);
    }

    fn hooks(&self, tenant: &TenantId, version: u64) -> Option<Hooks> {
        self.hooks.lock().get(tenant).filter(|(v, _)| *v == version).map(|(_, h)| h.clone())
    }

    fn remember_hooks(&self, tenant: &TenantId, version: u64, list: Hooks) {
        self.hooks.insert(tenant.clone(), (version, list));
    }
}

/// A tenant's feed as read (or remembered): the last number used and the webhook count with its
/// version (`None` before the tenant's first registration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Feed {
    head: u64,
    hooks: Option<(u64, u64)>,
}

/// A design as read, then as the ops planned so far leave it.
#[derive(Debug, Clone, Default)]
struct Design {
    held: Option<HeldDesign>,
    /// The write counter (0 without an item).
    seq: u64,
    /// The highest revision applied of each kind, by kind name.
    latest: HashMap<String, u64>,
}

/// What the ops of one round depend on: read, or assumed for an unread submission, and then
/// moved on by each op planned.
#[derive(Default)]
struct State {
    designs: HashMap<(TenantId, DesignId), Design>,
    /// Applied markers known to exist; every other marker the ops need was read absent.
    markers: HashSet<Once>,
    /// Feed-once items known to exist, with their entries' numbers.
    once: HashMap<Once, u64>,
    feeds: HashMap<TenantId, Feed>,
    /// The webhooks of each tenant that has any.
    hooks: HashMap<TenantId, Hooks>,
}

fn once_of(op: &ApplyOp<'_>, kind: EventKind) -> Once {
    (op.tenant.clone(), op.design.clone(), kind, op.entry.revision)
}

/// The keys an op's plan depends on (design item, markers, feed-once item, feed head, webhook
/// count).
fn keys_of(op: &ApplyOp<'_>) -> Vec<(String, String)> {
    let (t, d, e) = (op.tenant, op.design, op.entry);
    let mut keys = vec![
        (tenant_pk(t), design_sk(d)),
        (design_pk(t, d), applied_sk(e.kind, e.revision)),
        (feed_pk(t), feed_once_sk(d, e.kind, e.revision)),
        (feed_pk(t), FEED_HEAD_SK.to_owned()),
        (tenant_pk(t), WEBHOOK_COUNT_SK.to_owned()),
    ];
    if op.replayed {
        keys.push((design_pk(t, d), applied_sk(EventKind::DesignFailed, e.revision)));
    }
    keys
}

/// How many of `ops` (at least one) one read can cover: the longest prefix whose distinct keys
/// number at most [`MAX_READ_KEYS`].
fn readable(ops: &[ApplyOp<'_>]) -> usize {
    let mut keys = HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        let new: Vec<_> = keys_of(op).into_iter().filter(|k| !keys.contains(k)).collect();
        if keys.len() + new.len() > MAX_READ_KEYS && i > 0 {
            return i;
        }
        keys.extend(new);
    }
    ops.len()
}

/// One consistent `BatchGetItem` of every key `ops` depend on (keys left unprocessed are asked
/// again), as the [`State`] the plan starts from.
async fn read(client: &Client, table: &str, ops: &[ApplyOp<'_>]) -> PortResult<State> {
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut seen = HashSet::new();
    for k in ops.iter().flat_map(keys_of) {
        if seen.insert(k.clone()) {
            keys.push(k);
        }
    }
    let mut wanted = KeysAndAttributes::builder()
        .set_keys(Some(keys.iter().map(|(pk, sk)| key(pk.clone(), sk.clone())).collect()))
        .consistent_read(true)
        .build()
        .expect("keys are set");
    let mut found: HashMap<(String, String), Item> = HashMap::new();
    let mut attempt = 0;
    loop {
        let out = client
            .batch_get_item()
            .request_items(table, wanted.clone())
            .send()
            .await
            .map_err(|e| classify("read for apply", e))?;
        for item in out.responses.and_then(|mut r| r.remove(table)).unwrap_or_default() {
            let (pk, sk) = (item.str_attr(PK)?.to_owned(), item.str_attr(SK)?.to_owned());
            found.insert((pk, sk), item);
        }
        match out.unprocessed_keys.and_then(|mut u| u.remove(table)) {
            Some(rest) if !rest.keys().is_empty() => {
                attempt += 1;
                if attempt == MAX_ATTEMPTS {
                    return Err(PortError::Throttled { retry_after: None });
                }
                wanted = rest;
                back_off(attempt).await;
            }
            _ => break,
        }
    }
    let get = |pk: String, sk: String| found.get(&(pk, sk));
    let mut state = State::default();
    for op in ops {
        let (t, d, e) = (op.tenant, op.design, op.entry);
        if let std::collections::hash_map::Entry::Vacant(slot) = state.designs.entry((t.clone(), d.clone())) {
            slot.insert(get(tenant_pk(t), design_sk(d)).map(parse_design).transpose()?.unwrap_or_default());
        }
        let mut kinds = vec![e.kind];
        if op.replayed {
            kinds.push(EventKind::DesignFailed);
        }
        for kind in kinds {
            if get(design_pk(t, d), applied_sk(kind, e.revision)).is_some() {
                state.markers.insert(once_of(op, kind));
            }
        }
        if let Some(item) = get(feed_pk(t), feed_once_sk(d, e.kind, e.revision)) {
            state.once.insert(once_of(op, e.kind), item.num("seq")?);
        }
        if !state.feeds.contains_key(t) {
            let head = get(feed_pk(t), FEED_HEAD_SK.to_owned()).map(|i| i.num("seq")).transpose()?;
            let hooks = get(tenant_pk(t), WEBHOOK_COUNT_SK.to_owned())
                .map(|i| Ok::<_, PortError>((i.num("hooks")?, i.num("version")?)))
                .transpose()?;
            state.feeds.insert(t.clone(), Feed { head: head.unwrap_or(0), hooks });
        }
    }
    Ok(state)
}

fn parse_design(item: &Item) -> PortResult<Design> {
    let corrupt = super::table::corrupt;
    let status = DesignStatus::parse(item.str_attr("status")?).ok_or_else(|| corrupt("status"))?;
    let mut latest = HashMap::new();
    if let Some(map) = item.get("latest") {
        for (kind, v) in map.as_m().map_err(|_| corrupt("latest"))? {
            let revision = v.as_n().ok().and_then(|n| n.parse().ok()).ok_or_else(|| corrupt("latest"))?;
            latest.insert(kind.clone(), revision);
        }
    }
    Ok(Design { held: Some(HeldDesign { revision: item.num("revision")?, status }), seq: item.num("seq")?, latest })
}

/// The state an unread write of `ops` assumes, when no op is a replay and the store remembers
/// every tenant's feed and webhooks and every design (a submission's design may be unknown: it is
/// assumed new): each design as remembered, each marker and feed entry absent, each head as
/// remembered. `None` when something is not remembered or a tenant is cooling down.
fn assume(memory: &Memory, ops: &[ApplyOp<'_>]) -> Option<State> {
    let mut state = State::default();
    for op in ops {
        if op.replayed {
            return None;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) =
            state.designs.entry((op.tenant.clone(), op.design.clone()))
        {
            slot.insert(match (memory.design(op.tenant, op.design), op.change) {
                (Some(design), _) => design,
                (None, Change::Submitted { .. }) => Design::default(),
                (None, _) => return None,
            });
        }
        if !state.feeds.contains_key(op.tenant) {
            if memory.cooling(op.tenant) {
                return None;
            }
            let feed = memory.feed(op.tenant)?;
            if let Some((_, version)) = feed.hooks.filter(|(count, _)| *count > 0) {
                state.hooks.insert(op.tenant.clone(), memory.hooks(op.tenant, version)?);
            }
            state.feeds.insert(op.tenant.clone(), feed);
        }
    }
    Some(state)
}

/// Lists the webhooks of every tenant of `state` that has any, unless `memory` holds them at the
/// version read.
async fn list_hooks(client: &Client, table: &str, memory: &Memory, state: &mut State) -> PortResult<()> {
    let with_hooks: Vec<(TenantId, u64)> = state
        .feeds
        .iter()
        .filter(|(t, _)| !state.hooks.contains_key(*t))
        .filter_map(|(t, f)| f.hooks.filter(|(count, _)| *count > 0).map(|(_, version)| (t.clone(), version)))
        .collect();
    for (tenant, version) in with_hooks {
        let hooks = match memory.hooks(&tenant, version) {
            Some(hooks) => hooks,
            None => {
                let hooks: Hooks = Arc::new(webhook_kinds(client, table, &tenant).await?);
                memory.remember_hooks(&tenant, version, hooks.clone());
                hooks
            }
        };
        state.hooks.insert(tenant, hooks);
    }
    Ok(())
}

/// What one op does, planned over the state the ops before it left.
struct Planned<'a> {
    outcome: Applied,
    writes: Option<Writes<'a>>,
    /// Its applied marker exists already (a replay that fails again).
    seen: bool,
    /// Its feed entry is new: appended.
    append: bool,
}

fn plan<'a>(state: &State, op: &ApplyOp<'a>) -> PortResult<Planned<'a>> {
    let design = &state.designs[&(op.tenant.clone(), op.design.clone())];
    let kind = op.entry.kind;
    let seen = state.markers.contains(&once_of(op, kind));
    let held = revision::Held { seen, latest_of_kind: design.latest.get(kind.as_str()).copied(), design: design.held };
    let plan = match op.replayed {
        true => {
            let dead_lettered = state.markers.contains(&once_of(op, EventKind::DesignFailed));
            revision::plan_replay(&held, dead_lettered, op.entry, op.change)
        }
        false => revision::plan(&held, op.entry, op.change),
    };
    let outcome = plan.outcome().ok_or(PortError::NotFound)?;
    let append = outcome != Applied::Stale && !state.once.contains_key(&once_of(op, kind));
    let writes = match plan {
        Plan::Apply(writes) => Some(writes),
        _ => None,
    };
    Ok(Planned { outcome, writes, seen, append })
}

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
struct HeadWrite {
    tenant: TenantId,
    base: u64,
    head: u64,
    hooks: Option<(u64, u64)>,
}

/// The ops of one transaction.
#[derive(Default)]
struct Group {
    /// How many ops (the next of the batch on).
    ops: usize,
    outcomes: Vec<Applied>,
    designs: Vec<DesignWrites>,
    heads: Vec<HeadWrite>,
    /// Every other item: markers, timeline entries, reports, feed entries, feed-once items,
    /// deliveries.
    items: Vec<TransactWriteItem>,
    bytes: usize,
    /// Each design the group writes, as the group leaves it.
    after: Vec<((TenantId, DesignId), Design)>,
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
    fn add(&mut self, table: &str, state: &mut State, op: &ApplyOp<'_>, planned: Planned<'_>) -> PortResult<()> {
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
                let mut marker = key(design_pk(tenant, design), applied_sk(entry.kind, entry.revision));
                marker.extend([("item_type".to_owned(), s("applied")), ("seq".to_owned(), n(seq))]);
                self.items.push(put_new(table, marker));
                state.markers.insert(once_of(op, entry.kind));
            }
            let mut timeline = key(design_pk(tenant, design), entry_sk(seq));
            timeline.extend([
                ("item_type".to_owned(), s("entry")),
                ("event_id".to_owned(), s(entry.event_id.to_string())),
                ("kind".to_owned(), s(entry.kind.as_str())),
                ("revision".to_owned(), n(entry.revision)),
                ("correlation_id".to_owned(), s(entry.correlation_id.as_str())),
                ("occurred_at".to_owned(), s(entry.occurred_at.to_rfc3339())),
            ]);
            self.items.push(put_new(table, timeline));
            if let Some(r) = &writes.report {
                let mut report = key(design_pk(tenant, design), report_sk(r.revision));
                report.extend([
                    ("item_type".to_owned(), s("report")),
                    ("revision".to_owned(), n(r.revision)),
                    ("verdict".to_owned(), s(r.verdict.as_str())),
                    ("report".to_owned(), s(r.report.get())),
                ]);
                self.items.push(put_new(table, report));
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
            self.items.push(put_new(table, entry_item(tenant, &numbered)));
            self.items.push(put_new(table, once_item(tenant, feed_once_sk(design, entry.kind, entry.revision), seq)));
            state.once.insert(once_of(op, entry.kind), seq);
            let wanting: Vec<&WebhookId> = state.hooks.get(tenant).map_or_else(Vec::new, |hooks| {
                hooks.iter().filter(|(_, kinds)| kinds.contains(&entry.kind)).map(|(id, _)| id).collect()
            });
            if !wanting.is_empty() {
                let json =
                    serde_json::to_string(&numbered).map_err(|e| PortError::Invalid(format!("feed entry: {e}")))?;
                let due = stored_nanos(Utc::now());
                for id in wanting {
                    self.items.push(put_new(table, delivery_item(tenant, id, seq, &json, due)));
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
    fn into_items(self, table: &str) -> Vec<TransactWriteItem> {
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
struct Grouped {
    groups: Vec<Group>,
    /// The error of the first op that cannot be applied, where planning stopped.
    stop: Option<PortError>,
    /// Every op planned is applied and appended: nothing was decided without a write (what an
    /// unread plan needs, since only a write checks what it assumed).
    all_written: bool,
}

/// Plans `ops` in order over `state` into groups of at most [`MAX_TRANSACTION_ITEMS`] items and
/// [`MAX_TRANSACTION_BYTES`]; stops at the first op that cannot be applied, with its error.
fn group(table: &str, state: &mut State, ops: &[ApplyOp<'_>]) -> Grouped {
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
        if let Err(e) = current.add(table, state, op, planned) {
            done.stop = Some(e);
            done.all_written = false;
            break;
        }
    }
    done.groups.last_mut().expect("there is a group").close(state);
    done
}

/// A report too large for an item, refused before anything is sent.
fn too_large(change: &Change) -> Option<PortError> {
    match change {
        Change::ValidationFinished { report, .. } if report.get().len() > MAX_REPORT_ITEM_BYTES => {
            Some(PortError::Invalid(format!(
                "a report of {} bytes exceeds the {MAX_REPORT_ITEM_BYTES}-byte limit of a DynamoDB item",
                report.get().len()
            )))
        }
        _ => None,
    }
}

/// Applies `ops` in order with their feed entries (`DesignWrites::apply_batch`'s contract): the
/// outcomes of the prefix applied, and the error of the op that stopped the batch, if one did.
pub(crate) async fn apply(client: &Client, table: &str, memory: &Memory, ops: &[ApplyOp<'_>]) -> BatchApplied {
    let mut done = BatchApplied { applied: Vec::with_capacity(ops.len()), error: None };
    let (ops, refused) = match ops.iter().enumerate().find_map(|(i, op)| too_large(op.change).map(|e| (i, e))) {
        Some((i, e)) => (&ops[..i], Some(e)),
        None => (ops, None),
    };
    // Ops before this index go one at a time: their group was refused as a whole.
    let mut one_by_one = 0;
    let mut attempt = 0;
    let mut lost = false;
    'rounds: while done.applied.len() < ops.len() {
        let from = done.applied.len();
        let rest = &ops[from..];
        let round = match from < one_by_one {
            true => &rest[..1],
            false => &rest[..readable(rest)],
        };
        // Unread when the store remembers enough and the plan writes every op (an outcome
        // without a write would rest on what was assumed, unchecked); else read.
        let mut planned = None;
        if !lost {
            if let Some(mut state) = assume(memory, round) {
                if list_hooks(client, table, memory, &mut state).await.is_ok() {
                    let grouped = group(table, &mut state, round);
                    if grouped.all_written {
                        planned = Some(grouped);
                    }
                }
            }
        }
        let guessed = planned.is_some();
        let grouped = match planned {
            Some(grouped) => grouped,
            None => {
                let mut state = match read(client, table, round).await {
                    Ok(state) => state,
                    Err(e) => {
                        done.error = Some(e);
                        return done;
                    }
                };
                for (tenant, feed) in &state.feeds {
                    memory.remember(tenant, *feed);
                }
                for (key, design) in &state.designs {
                    memory.remember_design(key, design);
                }
                if let Err(e) = list_hooks(client, table, memory, &mut state).await {
                    done.error = Some(e);
                    return done;
                }
                group(table, &mut state, round)
            }
        };
        for mut group in grouped.groups {
            let (ops_in_group, outcomes) = (group.ops, group.outcomes.clone());
            let heads: Vec<(TenantId, Feed)> =
                group.heads.iter().map(|h| (h.tenant.clone(), Feed { head: h.head, hooks: h.hooks })).collect();
            let after = std::mem::take(&mut group.after);
            let items = group.into_items(table);
            if items.is_empty() {
                done.applied.extend(outcomes);
                continue;
            }
            match transact(client, "apply", items).await {
                Ok(Ok(())) => {
                    done.applied.extend(outcomes);
                    for (tenant, feed) in &heads {
                        memory.remember(tenant, *feed);
                    }
                    for (key, design) in &after {
                        memory.remember_design(key, design);
                    }
                    attempt = 0;
                    lost = false;
                }
                Ok(Err(_)) => {
                    attempt += 1;
                    if attempt == MAX_ATTEMPTS {
                        done.error = Some(PortError::Unavailable(
                            format!("a design write lost the race to other writers {MAX_ATTEMPTS} times in a row")
                                .into(),
                        ));
                        return done;
                    }
                    tracing::debug!(attempt, "A design write with its feed entry lost a race; reading again.");
                    lost = true;
                    // An unread write that failed guessed wrong: it reads at once, and its
                    // tenants' next writes read first for a while.
                    match guessed {
                        true => heads.iter().for_each(|(tenant, _)| memory.missed(tenant)),
                        false => back_off(attempt).await,
                    }
                    continue 'rounds;
                }
                Err(e) if ops_in_group > 1 && !e.is_retriable() => {
                    one_by_one = done.applied.len() + ops_in_group;
                    continue 'rounds;
                }
                Err(e) => {
                    done.error = Some(e);
                    return done;
                }
            }
        }
        if let Some(e) = grouped.stop {
            done.error = Some(e);
            return done;
        }
    }
    done.error = refused;
    done
}
