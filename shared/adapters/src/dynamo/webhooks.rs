//! Webhooks and their deliveries on DynamoDB (docs/DYNAMODB.md, "Webhooks and deliveries").
//!
//! A webhook is an item `W#{id}` in its tenant's partition; the tenant's `WH` item counts them
//! (`hooks`, at most [`MAX_WEBHOOKS_PER_TENANT`]) and carries a `version` every registration and
//! deletion changes, which a feed append checks (`super::feed`). Deliveries live in their own
//! partition per webhook, `S#{seq}`; a pending one is also in the sparse index
//! [`DUE_INDEX`](super::table::DUE_INDEX), sorted by tenant and due time, which claims read.

use super::apply::Expr;
use super::error::{classify, is_condition_failed, Class};
use super::reads::{get_item, prefix_range, query};
use super::table::{
    deliveries_pk, delivery_sk, due_sk, key, n, parse_due_sk, s, tenant_pk, webhook_sk, Attrs, Item, DELIVERY_PREFIX,
    DUE_INDEX, DUE_PARTITION, DUE_PK, DUE_SK, PK, WEBHOOK_COUNT_SK, WEBHOOK_PREFIX,
};
use super::transact::{back_off, put_new, stored_nanos, transact};
use crate::embedded::webhooks::{
    check_webhook, kinds_text, lease_end, outcome_fields, parse_delivery_cursor, parse_kinds, parse_status,
    status_text, MAX_DELIVERY_PAGE,
};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, ReturnValue, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::webhook::{AttemptOutcome, Delivery, DeliveryStatus, MAX_WEBHOOKS_PER_TENANT};
use openqq_core::{EventKind, FeedEntry, Page, PortError, TenantId, Webhook, WebhookId, WebhookSecret};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

/// Tries at most this many times when a transaction meets another on the same item.
const MAX_ATTEMPTS: u32 = 8;
/// Index queries one claim sends at most (about one per tenant with pending deliveries); a claim
/// that stops there leaves a cursor, and the next one goes on from it.
pub const MAX_CLAIM_QUERIES: usize = 64;

fn corrupt(what: &str) -> PortError {
    super::table::corrupt(what)
}

fn time(item: &Item, name: &str) -> PortResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(item.str_attr(name)?).map(|t| t.with_timezone(&Utc)).map_err(|_| corrupt(name))
}

fn blob(item: &Item, name: &str) -> Option<Vec<u8>> {
    item.get(name).and_then(|v| v.as_b().ok()).map(|b| b.as_ref().to_vec())
}

fn webhook(item: &Item) -> PortResult<Webhook> {
    let secret = |bytes: Option<Vec<u8>>, name| {
        bytes.and_then(|b| WebhookSecret::from_bytes(b).ok()).ok_or_else(|| corrupt(name))
    };
    Ok(Webhook {
        id: WebhookId::parse(item.str_attr("id")?).ok_or_else(|| corrupt("id"))?,
        url: item.str_attr("url")?.to_owned(),
        kinds: parse_kinds(item.str_attr("kinds")?).ok_or_else(|| corrupt("kinds"))?,
        description: item.opt_str("description").map(str::to_owned),
        created_at: time(item, "created_at")?,
        secret: secret(blob(item, "secret"), "secret")?,
        previous_secret: match item.opt_str("previous_until") {
            Some(_) => Some((secret(blob(item, "previous_secret"), "previous_secret")?, time(item, "previous_until")?)),
            None => None,
        },
    })
}

fn delivery(item: &Item) -> PortResult<Delivery> {
    let status = parse_status(item.str_attr("status")?).ok_or_else(|| corrupt("status"))?;
    let at = |ns: u64| DateTime::from_timestamp_nanos(i64::try_from(ns).unwrap_or(i64::MAX));
    Ok(Delivery {
        tenant_id: TenantId::parse(item.str_attr("tenant")?).map_err(|_| corrupt("tenant"))?,
        webhook_id: WebhookId::parse(item.str_attr("webhook_id")?).ok_or_else(|| corrupt("webhook_id"))?,
        entry: serde_json::from_str::<FeedEntry>(item.str_attr("entry")?).map_err(|_| corrupt("entry"))?,
        status,
        attempts: u32::try_from(item.num("attempts")?).map_err(|_| corrupt("attempts"))?,
        next_attempt_at: item.opt_num("next_ns")?.filter(|_| status == DeliveryStatus::Pending).map(at),
        last_status_code: item
            .opt_num("last_status_code")?
            .map(|c| u16::try_from(c).map_err(|_| corrupt("code")))
            .transpose()?,
        last_error: item.opt_str("last_error").map(str::to_owned),
        created_at: at(item.num("created_ns")?),
        updated_at: at(item.num("updated_ns")?),
    })
}

fn count_key(tenant: &TenantId) -> Item {
    key(tenant_pk(tenant), WEBHOOK_COUNT_SK.to_owned())
}

/// The `WH` item's update: `hooks` moved by `delta`, `version` bumped.
fn count_update(table: &str, tenant: &TenantId, delta: i64, condition: Option<&str>) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(count_key(tenant)))
        .update_expression("ADD #hooks :delta, #version :one")
        .expression_attribute_names("#hooks", "hooks")
        .expression_attribute_names("#version", "version")
        .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()))
        .expression_attribute_values(":one", n(1));
    let update = match condition {
        Some(c) => {
            update.condition_expression(c).expression_attribute_values(":max", n(MAX_WEBHOOKS_PER_TENANT as u64))
        }
        None => update,
    };
    TransactWriteItem::builder().update(update.build().expect("table, key and expression are set")).build()
}

pub(crate) async fn create(client: &Client, table: &str, tenant: &TenantId, hook: &Webhook) -> PortResult<()> {
    check_webhook(hook)?;
    let mut item = key(tenant_pk(tenant), webhook_sk(&hook.id));
    item.extend([
        ("item_type".to_owned(), s("webhook")),
        ("id".to_owned(), s(hook.id.to_string())),
        ("url".to_owned(), s(hook.url.clone())),
        ("kinds".to_owned(), s(kinds_text(&hook.kinds))),
        ("created_at".to_owned(), s(hook.created_at.to_rfc3339())),
        ("secret".to_owned(), AttributeValue::B(Blob::new(hook.secret.bytes().to_vec()))),
    ]);
    if let Some(d) = &hook.description {
        item.insert("description".to_owned(), s(d.clone()));
    }
    if let Some((previous, until)) = &hook.previous_secret {
        item.insert("previous_secret".to_owned(), AttributeValue::B(Blob::new(previous.bytes().to_vec())));
        item.insert("previous_until".to_owned(), s(until.to_rfc3339()));
    }
    for attempt in 0..MAX_ATTEMPTS {
        let items = vec![
            count_update(table, tenant, 1, Some("attribute_not_exists(#hooks) OR #hooks < :max")),
            put_new(table, item.clone()),
        ];
        match transact(client, "register a webhook", items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) if reasons.first() == Some(&Some(Class::ConditionFailed)) => {
                return Err(PortError::condition_failed(
                    "webhook",
                    format!("the tenant has {MAX_WEBHOOKS_PER_TENANT} webhooks already, the most it may register"),
                ))
            }
            Err(reasons) if reasons.get(1) == Some(&Some(Class::ConditionFailed)) => {
                return Err(PortError::condition_failed(
                    "webhook",
                    format!("the tenant has a webhook {} already", hook.id),
                ))
            }
            Err(_) => back_off(attempt).await,
        }
    }
    Err(PortError::Unavailable("registering the webhook met other writes every time".to_owned().into()))
}

pub(crate) async fn list(client: &Client, table: &str, tenant: &TenantId) -> PortResult<Vec<Webhook>> {
    let items = query(client, table, tenant_pk(tenant), prefix_range(WEBHOOK_PREFIX), false, 100).await?;
    let mut hooks = items.iter().map(webhook).collect::<PortResult<Vec<_>>>()?;
    hooks.sort_by_key(|h| (h.created_at, h.id));
    Ok(hooks)
}

pub(crate) async fn get(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &WebhookId,
) -> PortResult<Option<Webhook>> {
    get_item(client, table, tenant_pk(tenant), webhook_sk(id)).await?.as_ref().map(webhook).transpose()
}

pub(crate) async fn delete(client: &Client, table: &str, tenant: &TenantId, id: &WebhookId) -> PortResult<bool> {
    let mut existed = None;
    for attempt in 0..MAX_ATTEMPTS {
        let remove = Delete::builder()
            .table_name(table)
            .set_key(Some(key(tenant_pk(tenant), webhook_sk(id))))
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .expect("table and key are set");
        let items = vec![TransactWriteItem::builder().delete(remove).build(), count_update(table, tenant, -1, None)];
        match transact(client, "delete a webhook", items).await? {
            Ok(()) => {
                existed = Some(true);
                break;
            }
            Err(reasons) if reasons.first() == Some(&Some(Class::ConditionFailed)) => {
                existed = Some(false);
                break;
            }
            Err(_) => back_off(attempt).await,
        }
    }
    let Some(existed) = existed else {
        return Err(PortError::Unavailable("deleting the webhook met other writes every time".to_owned().into()));
    };
    // Its deliveries, also when the webhook was gone already: a deletion that stopped between
    // the two steps is finished by the next.
    sweep_deliveries(client, table, tenant, id).await?;
    Ok(existed)
}

/// Deletes every delivery of a webhook.
async fn sweep_deliveries(client: &Client, table: &str, tenant: &TenantId, id: &WebhookId) -> PortResult<()> {
    super::transact::delete_partition(client, table, deliveries_pk(tenant, id), "delete deliveries").await
}

pub(crate) async fn rotate(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &WebhookId,
    secret: &WebhookSecret,
    previous_until: DateTime<Utc>,
) -> PortResult<Option<Webhook>> {
    let out = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), webhook_sk(id))))
        .update_expression("SET #previous = #secret, #until = :until, #secret = :secret")
        .condition_expression("attribute_exists(#pk)")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#previous", "previous_secret")
        .expression_attribute_names("#secret", "secret")
        .expression_attribute_names("#until", "previous_until")
        .expression_attribute_values(":until", s(previous_until.to_rfc3339()))
        .expression_attribute_values(":secret", AttributeValue::B(Blob::new(secret.bytes().to_vec())))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match out {
        Ok(out) => out.attributes.as_ref().map(webhook).transpose(),
        Err(e) if is_condition_failed(&e) => Ok(None),
        Err(e) => Err(classify("rotate a webhook secret", e)),
    }
}

pub(crate) async fn queue(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &WebhookId,
    entry: &FeedEntry,
) -> PortResult<()> {
    let json = entry.to_json()?;
    for attempt in 0..MAX_ATTEMPTS {
        let exists = ConditionCheck::builder()
            .table_name(table)
            .set_key(Some(key(tenant_pk(tenant), webhook_sk(id))))
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .expect("table, key and condition are set");
        let item = delivery_item(tenant, id, entry.seq, &json, stored_nanos(Utc::now()));
        let items = vec![TransactWriteItem::builder().condition_check(exists).build(), put_new(table, item)];
        match transact(client, "queue a delivery", items).await? {
            Ok(()) => return Ok(()),
            Err(reasons) if reasons.first() == Some(&Some(Class::ConditionFailed)) => return Err(PortError::NotFound),
            // Queued already.
            Err(reasons) if reasons.get(1) == Some(&Some(Class::ConditionFailed)) => return Ok(()),
            Err(_) => back_off(attempt).await,
        }
    }
    Err(PortError::Unavailable("queuing the delivery met other writes every time".to_owned().into()))
}

/// A due delivery found in the index.
struct Candidate {
    due: u64,
    tenant: TenantId,
    id: WebhookId,
    seq: u64,
}

/// Claims due deliveries: reads the due index tenant by tenant (each tenant's oldest due first,
/// at most `per_tenant + 1` entries a query), keeps the `limit` oldest of what it found, and
/// leases each with a conditional update on the due time it read (a delivery claimed or finished
/// meanwhile is skipped). `cursor` is where the previous claim stopped at its query budget.
pub(crate) async fn claim(
    client: &Client,
    table: &str,
    cursor: &Mutex<Option<String>>,
    now: DateTime<Utc>,
    lease: Duration,
    per_tenant: usize,
    limit: usize,
) -> PortResult<Vec<Delivery>> {
    if per_tenant == 0 || limit == 0 {
        return Ok(Vec::new());
    }
    let now_ns = stored_nanos(now);
    let until = lease_end(now, lease).max(0) as u64;
    let page = i32::try_from(per_tenant.saturating_add(1)).unwrap_or(i32::MAX).min(1000);
    let mut after = cursor.lock().unwrap_or_else(|p| p.into_inner()).take();
    let (mut found, mut taken, mut done) = (Vec::new(), HashMap::<TenantId, usize>::new(), HashSet::<TenantId>::new());
    let mut queries = 0;
    loop {
        if queries == MAX_CLAIM_QUERIES {
            *cursor.lock().unwrap_or_else(|p| p.into_inner()) = after;
            break;
        }
        queries += 1;
        let mut request = client
            .query()
            .table_name(table)
            .index_name(DUE_INDEX)
            .expression_attribute_names("#pk", DUE_PK)
            .expression_attribute_values(":pk", s(DUE_PARTITION))
            .limit(page);
        request = match &after {
            Some(a) => request
                .key_condition_expression("#pk = :pk AND #sk > :after")
                .expression_attribute_names("#sk", DUE_SK)
                .expression_attribute_values(":after", s(a.clone())),
            None => request.key_condition_expression("#pk = :pk"),
        };
        let out = request.send().await.map_err(|e| classify("query due deliveries", e))?;
        let items = out.items.unwrap_or_default();
        let mut last = None;
        for item in &items {
            let sk = item.str_attr(DUE_SK)?;
            let (tenant, due, id, seq) = parse_due_sk(sk).ok_or_else(|| corrupt(DUE_SK))?;
            let count = taken.entry(tenant.clone()).or_default();
            if done.contains(&tenant) || due > now_ns || *count >= per_tenant {
                done.insert(tenant.clone());
            } else {
                *count += 1;
                found.push(Candidate { due, tenant: tenant.clone(), id, seq });
            }
            last = Some((tenant, sk.to_owned()));
        }
        let more = out.last_evaluated_key.is_some_and(|k| !k.is_empty());
        match last {
            // The rest of a tenant that is done is skipped: the next query starts past it.
            Some((tenant, _)) if done.contains(&tenant) => after = Some(format!("{tenant}#\u{10FFFF}")),
            Some((_, sk)) => after = Some(sk),
            None => break,
        }
        if !more {
            break;
        }
    }
    found.sort_by(|a, b| (a.due, &a.tenant, a.id, a.seq).cmp(&(b.due, &b.tenant, b.id, b.seq)));
    found.truncate(limit);
    let mut leases = tokio::task::JoinSet::new();
    for (i, c) in found.into_iter().enumerate() {
        let (client, table) = (client.clone(), table.to_owned());
        leases.spawn(async move { (i, lease_one(&client, &table, &c, until).await) });
    }
    let mut claimed = Vec::new();
    while let Some(joined) = leases.join_next().await {
        let (i, leased) = joined.map_err(|e| PortError::backend_message(format!("a claim task failed: {e}"), true))?;
        if let Some(d) = leased? {
            claimed.push((i, d));
        }
    }
    // Oldest due first, as found.
    claimed.sort_by_key(|(i, _)| *i);
    Ok(claimed.into_iter().map(|(_, d)| d).collect())
}

/// Leases one delivery until `until` if it is still pending and due when it was read; `None`
/// when another claim or an attempt moved it meanwhile.
async fn lease_one(client: &Client, table: &str, c: &Candidate, until: u64) -> PortResult<Option<Delivery>> {
    let out = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(deliveries_pk(&c.tenant, &c.id), delivery_sk(c.seq))))
        .update_expression("SET #next = :until, #due_sk = :due_sk")
        .condition_expression("#status = :pending AND #next = :due")
        .expression_attribute_names("#next", "next_ns")
        .expression_attribute_names("#due_sk", DUE_SK)
        .expression_attribute_names("#status", "status")
        .expression_attribute_values(":until", n(until))
        .expression_attribute_values(":due_sk", s(due_sk(&c.tenant, until, &c.id, c.seq)))
        .expression_attribute_values(":pending", s("pending"))
        .expression_attribute_values(":due", n(c.due))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match out {
        Ok(out) => out.attributes.as_ref().map(delivery).transpose(),
        Err(e) if is_condition_failed(&e) => Ok(None),
        Err(e) => Err(classify("claim a delivery", e)),
    }
}

pub(crate) async fn finish(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &WebhookId,
    seq: u64,
    outcome: &AttemptOutcome,
    now: DateTime<Utc>,
) -> PortResult<()> {
    let (status, next, code, error) = outcome_fields(outcome);
    let mut e = Expr::default();
    e.set("status", s(status_text(status)));
    e.set("updated_ns", n(stored_nanos(now)));
    let (attempts, one) = (e.name("attempts"), e.value(n(1)));
    e.add.push(format!("{attempts} {one}"));
    let next = next.map(|ns| ns.max(0) as u64);
    e.set_or_remove("next_ns", next.map(n));
    e.set_or_remove(DUE_PK, next.map(|_| s(DUE_PARTITION)));
    e.set_or_remove(DUE_SK, next.map(|ns| s(due_sk(tenant, ns, id, seq))));
    e.set_or_remove("last_status_code", code.map(|c| n(u64::from(c))));
    e.set_or_remove("last_error", error.map(s));
    let (pk, status_name, pending) = (e.name(PK), e.name("status"), e.value(s("pending")));
    let out = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(deliveries_pk(tenant, id), delivery_sk(seq))))
        .update_expression(e.update_expression())
        .condition_expression(format!("attribute_exists({pk}) AND {status_name} = {pending}"))
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .send()
        .await;
    match out {
        Ok(_) => Ok(()),
        // Gone with its webhook, or finished already by an attempt whose lease ran out.
        Err(e) if is_condition_failed(&e) => Ok(()),
        Err(e) => Err(classify("record an attempt", e)),
    }
}

pub(crate) async fn list_deliveries(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &WebhookId,
    cursor: Option<&str>,
    limit: usize,
) -> PortResult<Page<Delivery>> {
    let before = parse_delivery_cursor(cursor)?;
    let limit = limit.clamp(1, MAX_DELIVERY_PAGE);
    let range = match before {
        Some(0) => return Ok(Page { items: Vec::new(), next: None }),
        Some(b) => (DELIVERY_PREFIX.to_owned(), delivery_sk(b - 1)),
        None => prefix_range(DELIVERY_PREFIX),
    };
    let items = query(client, table, deliveries_pk(tenant, id), range, true, limit + 1).await?;
    let mut items = items.iter().map(delivery).collect::<PortResult<Vec<_>>>()?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|d| d.entry.seq.to_string())
    });
    Ok(Page { items, next: next.flatten() })
}

/// The item of a pending delivery of `entry` (as JSON) to webhook `id`, due at `due_ns`.
pub(crate) fn delivery_item(tenant: &TenantId, id: &WebhookId, seq: u64, entry_json: &str, due_ns: u64) -> Item {
    let mut item = key(deliveries_pk(tenant, id), delivery_sk(seq));
    item.extend([
        ("item_type".to_owned(), s("delivery")),
        ("tenant".to_owned(), s(tenant.as_str())),
        ("webhook_id".to_owned(), s(id.to_string())),
        ("seq".to_owned(), n(seq)),
        ("entry".to_owned(), s(entry_json)),
        ("status".to_owned(), s("pending")),
        ("attempts".to_owned(), n(0)),
        ("next_ns".to_owned(), n(due_ns)),
        ("created_ns".to_owned(), n(due_ns)),
        ("updated_ns".to_owned(), n(due_ns)),
        (DUE_PK.to_owned(), s(DUE_PARTITION)),
        (DUE_SK.to_owned(), s(due_sk(tenant, due_ns, id, seq))),
    ]);
    item
}

/// A check that the tenant's webhooks are still the ones read: the count item's `version` is
/// still the one read, or the item is still absent.
pub(crate) fn webhooks_unchanged(table: &str, tenant: &TenantId, hooks: Option<(u64, u64)>) -> TransactWriteItem {
    let check =
        ConditionCheck::builder().table_name(table).set_key(Some(key(tenant_pk(tenant), WEBHOOK_COUNT_SK.to_owned())));
    let check = match hooks {
        Some((_, version)) => check
            .condition_expression("#version = :version")
            .expression_attribute_names("#version", "version")
            .expression_attribute_values(":version", n(version)),
        None => check.condition_expression("attribute_not_exists(#pk)").expression_attribute_names("#pk", PK),
    };
    TransactWriteItem::builder().condition_check(check.build().expect("table, key and condition are set")).build()
}

/// The tenant's webhooks (at most ten) with the kinds each wants, as registered.
pub(crate) async fn webhook_kinds(
    client: &Client,
    table: &str,
    tenant: &TenantId,
) -> PortResult<Vec<(WebhookId, Vec<EventKind>)>> {
    let hooks = query(client, table, tenant_pk(tenant), prefix_range(WEBHOOK_PREFIX), false, 100).await?;
    let mut found = Vec::with_capacity(hooks.len());
    for hook in &hooks {
        let kinds = parse_kinds(hook.str_attr("kinds")?).ok_or_else(|| super::table::corrupt("kinds"))?;
        found.push((WebhookId::parse(hook.str_attr("id")?).ok_or_else(|| super::table::corrupt("id"))?, kinds));
    }
    Ok(found)
}

/// The ids of the tenant's webhooks that want `kind`.
pub(crate) async fn webhooks_wanting(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    kind: EventKind,
) -> PortResult<Vec<WebhookId>> {
    let hooks = webhook_kinds(client, table, tenant).await?;
    Ok(hooks.into_iter().filter(|(_, kinds)| kinds.contains(&kind)).map(|(id, _)| id).collect())
}
