//! The tenant's event feed on DynamoDB (docs/DYNAMODB.md, "The feed").
//!
//! The feed partition `T#{tenant}#F` holds a head item (`H`, the last number used), one item per
//! entry (`F#{seq}`) and one per design, kind and revision (`U#…`, the entry's number). An append
//! reads the three items it depends on in one consistent `BatchGetItem` (the `U#` item, the head
//! and the tenant's webhook count), then writes in one `TransactWriteItems`: the head moved from `n` to
//! `n + 1` on condition it still says `n`, the entry and the `U#` item on condition they are new,
//! a check that the tenant's webhooks did not change since they were read, and one delivery per
//! webhook that wants the kind. A lost race (another append took `n + 1`, or a webhook came or
//! went) reads and tries again; a repeat finds its `U#` item and answers its number.

use super::error::classify;
use super::reads::{get_item, prefix_range, query};
use super::table::{
    feed_head_key, feed_once_sk, feed_pk, feed_sk, key, n, s, tenant_pk, Attrs, Item, FEED_HEAD_SK, FEED_PREFIX, PK,
    SK, TTL, WEBHOOK_COUNT_SK,
};
use super::transact::{back_off, put_new, stored_nanos, transact};
use super::webhooks::{delivery_item, webhooks_unchanged, webhooks_wanting};
use aws_sdk_dynamodb::types::{KeysAndAttributes, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::feed::MAX_FEED_PAGE;
use openqq_core::ports::PortResult;
use openqq_core::{CorrelationId, DesignId, EventKind, FeedEntry, NewFeedEntry, PortError, TenantId, Verdict};

/// Reads and writes at most this many times when other appends keep taking the next number.
const MAX_APPEND_ATTEMPTS: u32 = 32;

/// The head moved from `last` to `next`: a new head item when `last` is 0 (the tenant's first
/// entry), else an update on condition it still says `last`.
pub(crate) fn head_write(table: &str, tenant: &TenantId, last: u64, next: u64) -> TransactWriteItem {
    if last == 0 {
        let mut head = feed_head_key(tenant);
        head.extend([("item_type".to_owned(), s("feed_head")), ("seq".to_owned(), n(next))]);
        return put_new(table, head);
    }
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(feed_head_key(tenant)))
        .update_expression("SET #seq = :next")
        .condition_expression("#seq = :last")
        .expression_attribute_names("#seq", "seq")
        .expression_attribute_values(":next", n(next))
        .expression_attribute_values(":last", n(last))
        .build()
        .expect("table, key and expression are set");
    TransactWriteItem::builder().update(update).build()
}

/// The item of feed entry `entry` (numbered).
pub(crate) fn entry_item(tenant: &TenantId, entry: &FeedEntry) -> Item {
    let mut item = key(feed_pk(tenant), feed_sk(entry.seq));
    item.extend([
        ("item_type".to_owned(), s("feed_entry")),
        ("seq".to_owned(), n(entry.seq)),
        ("design_id".to_owned(), s(entry.design_id.as_str())),
        ("kind".to_owned(), s(entry.kind.as_str())),
        ("revision".to_owned(), n(entry.revision)),
        ("event_id".to_owned(), s(entry.event_id.to_string())),
        ("correlation_id".to_owned(), s(entry.correlation_id.as_str())),
        ("occurred_at".to_owned(), s(entry.occurred_at.to_rfc3339())),
    ]);
    if let Some(v) = entry.verdict {
        item.insert("verdict".to_owned(), s(v.as_str()));
    }
    if let Some(ms) = entry.elapsed_ms {
        item.insert("elapsed_ms".to_owned(), n(ms));
    }
    if let Some(batch) = &entry.batch {
        item.insert("batch".to_owned(), s(serde_json::to_string(batch).expect("a batch summary serialises")));
    }
    item
}

/// The feed-once item `once` (`U#{design}#{kind}#{revision}`) of the entry numbered `seq`.
pub(crate) fn once_item(tenant: &TenantId, once: String, seq: u64) -> Item {
    let mut marker = key(feed_pk(tenant), once);
    marker.extend([("item_type".to_owned(), s("feed_once")), ("seq".to_owned(), n(seq))]);
    marker
}

/// The TTL attribute's value for an entry that occurred at `at` and is kept for `keep`: epoch
/// seconds, rounded up.
pub(crate) fn expires_at(at: DateTime<Utc>, keep: std::time::Duration) -> u64 {
    let at = u64::try_from(at.timestamp()).unwrap_or(0);
    at.saturating_add(keep.as_secs()).saturating_add(u64::from(keep.subsec_nanos() > 0))
}

/// `item` with the TTL attribute set to `expires`.
pub(crate) fn expiring(mut item: Item, expires: u64) -> Item {
    item.insert(TTL.to_owned(), n(expires));
    item
}

fn feed_entry(item: &Item) -> PortResult<FeedEntry> {
    let corrupt = super::table::corrupt;
    Ok(FeedEntry {
        seq: item.num("seq")?,
        design_id: DesignId::parse(item.str_attr("design_id")?).map_err(|_| corrupt("design_id"))?,
        kind: EventKind::parse(item.str_attr("kind")?).ok_or_else(|| corrupt("kind"))?,
        revision: item.num("revision")?,
        event_id: item.str_attr("event_id")?.parse().map_err(|_| corrupt("event_id"))?,
        correlation_id: CorrelationId::parse(item.str_attr("correlation_id")?)
            .map_err(|_| corrupt("correlation_id"))?,
        occurred_at: DateTime::parse_from_rfc3339(item.str_attr("occurred_at")?)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| corrupt("occurred_at"))?,
        verdict: match item.opt_str("verdict") {
            Some(v) => Some(Verdict::parse(v).ok_or_else(|| corrupt("verdict"))?),
            None => None,
        },
        elapsed_ms: item.opt_num("elapsed_ms")?,
        batch: match item.opt_str("batch") {
            Some(json) => Some(serde_json::from_str(json).map_err(|_| corrupt("batch"))?),
            None => None,
        },
    })
}

/// What an append depends on, read in one `TransactGetItems`.
struct Held {
    /// The number of the entry of this design, kind and revision, if there is one.
    existing: Option<u64>,
    /// The last number used (0 before the first entry).
    head: u64,
    /// The tenant's webhook count and its version (changed by every registration and deletion);
    /// `None` before the tenant's first registration.
    hooks: Option<(u64, u64)>,
}

/// One consistent `BatchGetItem` of the three items. Not a transactional read: every value read
/// is a condition of the write that follows, so a write planned from values that moved
/// meanwhile is cancelled, and a read never fails for meeting a write in flight.
async fn read_held(client: &Client, table: &str, tenant: &TenantId, once: &str) -> PortResult<Held> {
    let (once_key, head_key, hooks_key) = (
        key(feed_pk(tenant), once.to_owned()),
        feed_head_key(tenant),
        key(tenant_pk(tenant), WEBHOOK_COUNT_SK.to_owned()),
    );
    let mut wanted = KeysAndAttributes::builder()
        .set_keys(Some(vec![once_key.clone(), head_key.clone(), hooks_key.clone()]))
        .consistent_read(true)
        .build()
        .expect("keys are set");
    let mut found: Vec<Item> = Vec::new();
    for attempt in 0..MAX_APPEND_ATTEMPTS {
        let out = client
            .batch_get_item()
            .request_items(table, wanted.clone())
            .send()
            .await
            .map_err(|e| classify("read for a feed append", e))?;
        found.extend(out.responses.and_then(|mut r| r.remove(table)).unwrap_or_default());
        match out.unprocessed_keys.and_then(|mut u| u.remove(table)) {
            Some(rest) if !rest.keys().is_empty() => {
                wanted = rest;
                back_off(attempt).await;
            }
            _ => {
                let item = |k: &Item| found.iter().find(|i| i.get(SK) == k.get(SK) && i.get(PK) == k.get(PK));
                let existing = item(&once_key).map(|i| i.num("seq")).transpose()?;
                let head = item(&head_key).map(|i| i.num("seq")).transpose()?.unwrap_or(0);
                let hooks =
                    item(&hooks_key).map(|i| Ok::<_, PortError>((i.num("hooks")?, i.num("version")?))).transpose()?;
                return Ok(Held { existing, head, hooks });
            }
        }
    }
    Err(PortError::Throttled { retry_after: None })
}

/// Appends `new` (see the module documentation). Its entry, feed-once item and deliveries carry
/// the TTL attribute: they expire `keep` after the entry occurred (the head item never does, so
/// numbering goes on).
pub(crate) async fn append(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    new: &NewFeedEntry<'_>,
    keep: std::time::Duration,
) -> PortResult<u64> {
    for attempt in 0..MAX_APPEND_ATTEMPTS {
        match try_append(client, table, tenant, new, keep, Vec::new()).await? {
            Appended::New(seq) | Appended::Existing(seq) => return Ok(seq),
            Appended::LostRace => {
                tracing::debug!(%tenant, attempt, "A feed append lost a race; reading again.");
                back_off(attempt).await;
            }
        }
    }
    Err(PortError::Unavailable(
        format!(
            "the append to the feed of {tenant} lost the race to other appends {MAX_APPEND_ATTEMPTS} times in a row"
        )
        .into(),
    ))
}

/// What one attempt of [`try_append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Appended {
    /// The entry went in, numbered so, with the extra items.
    New(u64),
    /// The feed holds this design, kind and revision's entry already, numbered so: nothing was
    /// written, the extra items neither.
    Existing(u64),
    /// Another write moved something read (or an extra item's condition failed): nothing was
    /// written; read and try again.
    LostRace,
}

/// One attempt of [`append`], whose transaction also writes `extra` (at most 80 items): a write
/// whose feed entry must go in with it, or not at all (a design's deletion and its audit entry).
pub(crate) async fn try_append(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    new: &NewFeedEntry<'_>,
    keep: std::time::Duration,
    extra: Vec<TransactWriteItem>,
) -> PortResult<Appended> {
    let e = new.entry;
    let once = feed_once_sk(new.design_id, e.kind, e.revision);
    let held = read_held(client, table, tenant, &once).await?;
    if let Some(seq) = held.existing {
        return Ok(Appended::Existing(seq));
    }
    let wanting = match held.hooks {
        Some((count, _)) if count > 0 => webhooks_wanting(client, table, tenant, e.kind).await?,
        _ => Vec::new(),
    };
    let seq = held.head + 1;
    let entry = new.numbered(seq);
    let expires = expires_at(entry.occurred_at, keep);
    let mut items = Vec::with_capacity(4 + wanting.len() + extra.len());
    items.push(head_write(table, tenant, held.head, seq));
    items.push(put_new(table, expiring(entry_item(tenant, &entry), expires)));
    items.push(put_new(table, expiring(once_item(tenant, once.clone(), seq), expires)));
    // The webhooks read above are still the tenant's webhooks.
    items.push(webhooks_unchanged(table, tenant, held.hooks));
    if !wanting.is_empty() {
        let json = entry.to_json()?;
        let now = stored_nanos(Utc::now());
        for id in &wanting {
            items.push(put_new(table, expiring(delivery_item(tenant, id, seq, &json, now), expires)));
        }
    }
    items.extend(extra);
    Ok(match transact(client, "append to the feed", items).await? {
        Ok(()) => Appended::New(seq),
        Err(_) => Appended::LostRace,
    })
}

pub(crate) async fn read(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    after: u64,
    limit: usize,
) -> PortResult<Vec<FeedEntry>> {
    let limit = limit.min(MAX_FEED_PAGE);
    if limit == 0 || after == u64::MAX {
        return Ok(Vec::new());
    }
    let range = (feed_sk(after + 1), prefix_range(FEED_PREFIX).1);
    let items = query(client, table, feed_pk(tenant), range, false, limit).await?;
    items.iter().map(feed_entry).collect()
}

/// The number of the tenant's latest entry: its head item's (one `GetItem`).
pub(crate) async fn head(client: &Client, table: &str, tenant: &TenantId) -> PortResult<u64> {
    let item = get_item(client, table, feed_pk(tenant), FEED_HEAD_SK.to_owned()).await?;
    Ok(item.map(|i| i.num("seq")).transpose()?.unwrap_or(0))
}
