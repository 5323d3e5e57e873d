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
//! 2. The ops are planned in order ([`revision::plan`](openqq_core::revision::plan)) over what
//!    was read, each op seeing the writes of the ops before it, and the feed entries are numbered
//!    from the head read.
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
//!
//! The parts: `read` (step 1, or what an unread write assumes instead), `plan` (the state the ops
//! are planned over and one op's plan), `group` (steps 2 and 3), `memory` ([`Memory`]); this
//! module runs the rounds and step 4 ([`apply`]).

mod group;
mod memory;
mod plan;
mod read;

#[cfg(test)]
mod fixtures;

pub(crate) use memory::Memory;

use super::apply::too_large;
use super::transact::{back_off, transact};
use aws_sdk_dynamodb::Client;
use group::group;
use openqq_core::ports::{ApplyOp, BatchApplied};
use openqq_core::{PortError, TenantId};
use plan::Feed;
use read::{assume, list_hooks, read, readable};
use std::time::Duration;

/// Most items of one `TransactWriteItems` (DynamoDB's limit).
pub(crate) const MAX_TRANSACTION_ITEMS: usize = 100;
/// Reads and plans at most this many times in a row when other writers keep winning.
const MAX_ATTEMPTS: u32 = 32;

/// Applies `ops` in order with their feed entries (`DesignWrites::apply_batch`'s contract): the
/// outcomes of the prefix applied, and the error of the op that stopped the batch, if one did.
/// Feed entries expire `keep` after they occurred.
pub(crate) async fn apply(
    client: &Client,
    table: &str,
    memory: &Memory,
    ops: &[ApplyOp<'_>],
    keep: Duration,
) -> BatchApplied {
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
                    let grouped = group(table, &mut state, round, keep);
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
                group(table, &mut state, round, keep)
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

#[cfg(test)]
mod tests {
    use super::fixtures::{client_with_one_answer, finished, op, ops, submission};
    use super::*;
    use crate::dynamo::apply::MAX_REPORT_ITEM_BYTES;
    use openqq_core::Change;

    #[test]
    fn a_report_over_the_item_limit_is_too_large_and_one_at_the_limit_is_not() {
        let over = too_large(&finished(MAX_REPORT_ITEM_BYTES + 1));
        let Some(e @ PortError::Invalid { what: "report", .. }) = over else { panic!("refused as invalid: {over:?}") };
        let message = e.to_string();
        assert!(message.contains(&format!("{} bytes", MAX_REPORT_ITEM_BYTES + 1)), "{message}");
        assert!(too_large(&finished(MAX_REPORT_ITEM_BYTES)).is_none());
        assert!(too_large(&Change::Submitted { name: None }).is_none(), "only a report can be too large");
    }

    #[tokio::test]
    async fn a_batch_that_starts_with_a_report_too_large_is_refused_before_any_request() {
        let (client, replay) = client_with_one_answer();
        let owned = [op("acme", "d-1", 1, finished(MAX_REPORT_ITEM_BYTES + 1)), submission("acme", "d-2")];
        let done =
            apply(&client, "openqq", &Memory::default(), &ops(&owned), openqq_core::feed::DEFAULT_FEED_RETENTION).await;
        assert!(done.applied.is_empty(), "nothing after the refused op is attempted: {:?}", done.applied);
        assert!(matches!(done.error, Some(PortError::Invalid { .. })), "{:?}", done.error);
        assert_eq!(replay.actual_requests().count(), 0);
    }
}
