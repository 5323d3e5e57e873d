//! Step 1 of the module doc's algorithm: the keys each op depends on, how many ops one
//! `BatchGetItem` covers, and the read itself; or, for an unread write, the state assumed from
//! [`Memory`] instead. Either way, the webhooks of the tenants that have any.

use super::memory::Memory;
use super::plan::{once_of, Design, Feed, Hooks, State};
use super::MAX_ATTEMPTS;
use crate::dynamo::error::classify;
use crate::dynamo::table::{
    applied_sk, design_pk, design_sk, feed_once_sk, feed_pk, key, tenant_pk, Attrs, Item, FEED_HEAD_SK, PK, SK,
    WEBHOOK_COUNT_SK,
};
use crate::dynamo::transact::back_off;
use crate::dynamo::webhooks::webhook_kinds;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use aws_sdk_dynamodb::Client;
use openqq_core::ports::{ApplyOp, PortResult};
use openqq_core::revision::HeldDesign;
use openqq_core::{Change, DesignStatus, EventKind, PortError, TenantId};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Most keys of one `BatchGetItem` (DynamoDB's limit).
const MAX_READ_KEYS: usize = 100;

/// The keys an op's plan depends on (design item, markers, feed-once item, feed head, webhook
/// count).
pub(super) fn keys_of(op: &ApplyOp<'_>) -> Vec<(String, String)> {
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
pub(super) fn readable(ops: &[ApplyOp<'_>]) -> usize {
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
pub(super) async fn read(client: &Client, table: &str, ops: &[ApplyOp<'_>]) -> PortResult<State> {
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
    let corrupt = crate::dynamo::table::corrupt;
    if crate::dynamo::deletes::is_tombstone(item) {
        return Ok(Design { held: None, seq: item.num("seq")?, latest: HashMap::new(), deleted: true });
    }
    let status = DesignStatus::parse(item.str_attr("status")?).ok_or_else(|| corrupt("status"))?;
    let mut latest = HashMap::new();
    if let Some(map) = item.get("latest") {
        for (kind, v) in map.as_m().map_err(|_| corrupt("latest"))? {
            let revision = v.as_n().ok().and_then(|n| n.parse().ok()).ok_or_else(|| corrupt("latest"))?;
            latest.insert(kind.clone(), revision);
        }
    }
    let held = Some(HeldDesign { revision: item.num("revision")?, status });
    Ok(Design { held, seq: item.num("seq")?, latest, deleted: false })
}

/// The state an unread write of `ops` assumes, when no op is a replay and the store remembers
/// every tenant's feed and webhooks and every design (a submission's design may be unknown: it is
/// assumed new): each design as remembered, each marker and feed entry absent, each head as
/// remembered. `None` when something is not remembered or a tenant is cooling down.
pub(super) fn assume(memory: &Memory, ops: &[ApplyOp<'_>]) -> Option<State> {
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
pub(super) async fn list_hooks(client: &Client, table: &str, memory: &Memory, state: &mut State) -> PortResult<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::batch::fixtures::{client_with_one_answer, op, ops, submission, tenant, Owned};
    use crate::dynamo::table::{n, s};
    use aws_sdk_dynamodb::types::AttributeValue;
    use openqq_core::WebhookId;

    #[test]
    fn an_op_depends_on_five_keys_and_a_replay_also_on_its_revisions_design_failed_marker() {
        let started = op("acme", "d-1", 2, Change::ValidationStarted);
        let (t, d) = (started.tenant.clone(), started.design.clone());
        let expected = vec![
            ("T#acme".to_owned(), "D#d-1".to_owned()),
            (design_pk(&t, &d), applied_sk(EventKind::ValidationStarted, 2)),
            (feed_pk(&t), feed_once_sk(&d, EventKind::ValidationStarted, 2)),
            (feed_pk(&t), FEED_HEAD_SK.to_owned()),
            ("T#acme".to_owned(), WEBHOOK_COUNT_SK.to_owned()),
        ];
        assert_eq!(keys_of(&started.op()), expected);
        let replayed = started.replayed();
        let keys = keys_of(&replayed.op());
        assert_eq!(keys[..5], expected[..]);
        assert_eq!(keys[5..], [(design_pk(&t, &d), applied_sk(EventKind::DesignFailed, 2))]);
    }

    #[test]
    fn one_read_covers_the_longest_prefix_of_ops_whose_distinct_keys_number_at_most_a_hundred() {
        // One tenant: its feed head and webhook count count once; each design adds three keys.
        let submissions: Vec<Owned> = (0..40).map(|i| submission("acme", &format!("d-{i}"))).collect();
        let one_tenant = ops(&submissions);
        assert_eq!(readable(&one_tenant), 32, "5 + 31 * 3 = 98 keys; a 33rd op would make 101");
        assert_eq!(readable(&one_tenant[..10]), 10, "all that fit");
        // A tenant each: five keys an op.
        let many_tenants: Vec<Owned> = (0..40).map(|i| submission(&format!("t-{i}"), "d-1")).collect();
        assert_eq!(readable(&ops(&many_tenants)), 20);
        // Two tenants, sixteen designs each: 2 * (5 + 15 * 3) = 100 keys, all one read takes.
        let mut two_tenants: Vec<Owned> = Vec::new();
        for (t, designs) in [("acme", 0..16), ("other", 0..16), ("acme", 16..32)] {
            two_tenants.extend(designs.map(|i| submission(t, &format!("d-{i}"))));
        }
        assert_eq!(readable(&ops(&two_tenants)), 32, "exactly a hundred keys fit");
    }

    #[test]
    fn ops_on_keys_already_counted_add_nothing_to_the_read() {
        let again = submission("acme", "d-1");
        let ops: Vec<ApplyOp<'_>> = (0..150).map(|_| again.op()).collect();
        assert_eq!(readable(&ops), 150);
    }

    #[test]
    fn a_design_item_is_parsed_with_its_write_counter_and_the_latest_revision_of_each_kind() {
        let mut item = key("T#acme".to_owned(), "D#d-1".to_owned());
        let latest = [("design.submitted".to_owned(), n(2)), ("validation.started".to_owned(), n(1))];
        item.extend([
            ("status".to_owned(), s("validating")),
            ("revision".to_owned(), n(2)),
            ("seq".to_owned(), n(5)),
            ("latest".to_owned(), AttributeValue::M(latest.into())),
        ]);
        let design = parse_design(&item).unwrap();
        assert_eq!(design.held, Some(HeldDesign { revision: 2, status: DesignStatus::Validating }));
        assert_eq!(design.seq, 5);
        assert_eq!(design.latest, [("design.submitted".to_owned(), 2), ("validation.started".to_owned(), 1)].into());
        item.remove("latest");
        assert!(parse_design(&item).unwrap().latest.is_empty(), "an item written before `latest` existed");
        item.insert("status".to_owned(), s("lost"));
        assert!(parse_design(&item).is_err(), "an unknown status is corrupt, not guessed");
    }

    #[test]
    fn a_submission_is_planned_unread_from_the_remembered_head_with_its_design_new() {
        let memory = Memory::default();
        let op = submission("acme", "d-1");
        let round = [op.op()];
        assert!(assume(&memory, &round).is_none(), "nothing remembered: read");
        memory.remember(&op.tenant, Feed { head: 7, hooks: None });
        let state = assume(&memory, &round).expect("the head is remembered");
        let design = &state.designs[&(op.tenant.clone(), op.design.clone())];
        assert!(design.held.is_none() && design.seq == 0 && design.latest.is_empty(), "{design:?}");
        assert_eq!(state.feeds[&op.tenant], Feed { head: 7, hooks: None });
        assert!(state.markers.is_empty() && state.once.is_empty() && state.hooks.is_empty());
    }

    #[test]
    fn only_a_submission_assumes_a_design_not_remembered() {
        let memory = Memory::default();
        let op = op("acme", "d-1", 1, Change::ValidationStarted);
        memory.remember(&op.tenant, Feed { head: 1, hooks: None });
        assert!(assume(&memory, &[op.op()]).is_none(), "a design that may not exist is read");
        let held = HeldDesign { revision: 1, status: DesignStatus::Submitted };
        let key = (op.tenant.clone(), op.design.clone());
        memory.remember_design(&key, &Design { held: Some(held), seq: 1, latest: HashMap::new(), deleted: false });
        let state = assume(&memory, &[op.op()]).expect("the design is remembered");
        assert_eq!((state.designs[&key].held, state.designs[&key].seq), (Some(held), 1));
    }

    #[test]
    fn a_replay_or_a_tenant_cooling_down_is_always_read() {
        let memory = Memory::default();
        let op = submission("acme", "d-1");
        memory.remember(&op.tenant, Feed { head: 1, hooks: None });
        let replayed = submission("acme", "d-1").replayed();
        assert!(assume(&memory, &[replayed.op()]).is_none(), "a replay reads its design.failed marker");
        assert!(assume(&memory, &[op.op()]).is_some());
        memory.missed(&op.tenant);
        assert!(assume(&memory, &[op.op()]).is_none());
        let other = submission("other", "d-1");
        memory.remember(&other.tenant, Feed { head: 1, hooks: None });
        assert!(assume(&memory, &[other.op(), op.op()]).is_none(), "one tenant cooling down reads the round");
    }

    #[test]
    fn a_tenant_with_webhooks_is_assumed_only_with_them_remembered_at_the_version_counted() {
        let memory = Memory::default();
        let op = submission("acme", "d-1");
        memory.remember(&op.tenant, Feed { head: 3, hooks: Some((1, 5)) });
        assert!(assume(&memory, &[op.op()]).is_none(), "webhooks never listed");
        let listed: Hooks = Arc::new(vec![(WebhookId::generate(), vec![EventKind::DesignSubmitted])]);
        memory.remember_hooks(&op.tenant, 4, listed.clone());
        assert!(assume(&memory, &[op.op()]).is_none(), "listed at an older version");
        memory.remember_hooks(&op.tenant, 5, listed.clone());
        let state = assume(&memory, &[op.op()]).expect("listed at the version counted");
        assert!(Arc::ptr_eq(&state.hooks[&op.tenant], &listed));
        // Webhooks registered and all deleted again: nothing to list.
        let other = submission("other", "d-1");
        memory.remember(&other.tenant, Feed { head: 3, hooks: Some((0, 6)) });
        let state = assume(&memory, &[other.op()]).expect("no webhook to remember");
        assert!(state.hooks.is_empty());
    }

    #[tokio::test]
    async fn webhooks_remembered_at_the_version_read_are_taken_without_a_request() {
        let (client, replay) = client_with_one_answer();
        let memory = Memory::default();
        let (acme, other, none) = (tenant("acme"), tenant("other"), tenant("none"));
        let listed: Hooks = Arc::new(vec![(WebhookId::generate(), vec![EventKind::DesignSubmitted])]);
        memory.remember_hooks(&acme, 5, listed.clone());
        let mut state = State::default();
        state.feeds.insert(acme.clone(), Feed { head: 3, hooks: Some((1, 5)) });
        state.feeds.insert(other.clone(), Feed { head: 3, hooks: Some((0, 2)) });
        state.feeds.insert(none.clone(), Feed { head: 3, hooks: None });
        list_hooks(&client, "openqq", &memory, &mut state).await.unwrap();
        assert_eq!(replay.actual_requests().count(), 0);
        assert!(Arc::ptr_eq(&state.hooks[&acme], &listed));
        assert_eq!(state.hooks.len(), 1, "a tenant without webhooks has none listed");
        // At a version not remembered, the webhooks are listed (the answer holds none) and
        // remembered at that version.
        state.feeds.insert(acme.clone(), Feed { head: 3, hooks: Some((1, 6)) });
        state.hooks.clear();
        list_hooks(&client, "openqq", &memory, &mut state).await.unwrap();
        assert_eq!(replay.actual_requests().count(), 1);
        assert!(state.hooks[&acme].is_empty());
        assert!(memory.hooks(&acme, 6).is_some_and(|h| Arc::ptr_eq(&h, &state.hooks[&acme])));
    }
}
