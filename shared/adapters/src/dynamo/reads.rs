//! Reads of the DynamoDB store (all strongly consistent) and the accepted-revision markers.

use super::deletes::{is_tombstone, DELETED_AT};
use super::error::{classify, is_condition_failed};
use super::table::{
    accepted_sk, design_pk, design_sk, key, n, s, tenant_pk, Attrs, Item, ACCEPTED_PREFIX, DESIGN_PREFIX, ENTRY_PREFIX,
    PK, REPORT_PREFIX, SK, TTL,
};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::ports::{PortResult, Usage, MAX_TIMELINE_ENTRIES};
use openqq_core::{
    AcceptedRevision, CorrelationId, DesignId, DesignStatus, DesignView, EventKind, Failure, Page, PortError,
    StoredReport, TenantId, TimelineEntry, Verdict,
};
use serde_json::value::RawValue;

/// Largest page `list` returns, whatever the caller asks (as the embedded store).
pub const MAX_PAGE: usize = 100;

fn time(item: &Item, name: &str) -> PortResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(item.str_attr(name)?)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| super::table::corrupt(name))
}

fn design_view(item: &Item) -> PortResult<DesignView> {
    let corrupt = super::table::corrupt;
    Ok(DesignView {
        design_id: DesignId::parse(item.str_attr("design_id")?).map_err(|_| corrupt("design_id"))?,
        name: item.str_attr("name")?.to_owned(),
        revision: item.num("revision")?,
        status: DesignStatus::parse(item.str_attr("status")?).ok_or_else(|| corrupt("status"))?,
        verdict: item.opt_str("verdict").and_then(Verdict::parse),
        updated_at: time(item, "updated_at")?,
        failure_reason: item.opt_str("failure_reason").map(str::to_owned),
    })
}

fn now_secs() -> u64 {
    Utc::now().timestamp().max(0) as u64
}

/// The marker `item` holds, unless it is a tombstone or past its expiry.
fn live_marker(item: Option<&Item>) -> PortResult<Option<AcceptedRevision>> {
    let now = now_secs();
    let expired = |i: &Item| i.opt_num(TTL).ok().flatten().is_some_and(|at| at <= now);
    item.filter(|i| !is_tombstone(i) && !expired(i)).map(accepted).transpose()
}

fn accepted(item: &Item) -> PortResult<AcceptedRevision> {
    let corrupt = super::table::corrupt;
    Ok(AcceptedRevision {
        design_id: DesignId::parse(item.str_attr("design_id")?).map_err(|_| corrupt("design_id"))?,
        revision: item.num("revision")?,
        name: item.opt_str("name").map(str::to_owned),
        event_id: item.str_attr("event_id")?.parse().map_err(|_| corrupt("event_id"))?,
        correlation_id: CorrelationId::parse(item.str_attr("correlation_id")?)
            .map_err(|_| corrupt("correlation_id"))?,
        accepted_at: time(item, "accepted_at")?,
    })
}

fn timeline_entry(item: &Item) -> PortResult<TimelineEntry> {
    let corrupt = super::table::corrupt;
    Ok(TimelineEntry {
        event_id: item.str_attr("event_id")?.parse().map_err(|_| corrupt("event_id"))?,
        kind: EventKind::parse(item.str_attr("kind")?).ok_or_else(|| corrupt("kind"))?,
        revision: item.num("revision")?,
        correlation_id: CorrelationId::parse(item.str_attr("correlation_id")?)
            .map_err(|_| corrupt("correlation_id"))?,
        occurred_at: time(item, "occurred_at")?,
    })
}

pub(crate) async fn get_item(client: &Client, table: &str, pk: String, sk: String) -> PortResult<Option<Item>> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(key(pk, sk)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| classify("get", e))?;
    Ok(out.item.filter(|i| !i.is_empty()))
}

/// The items of partition `pk` whose sort keys run from `low` to `high` (inclusive), in sort-key
/// order (descending when `newest_first`), at most `limit`; pages through DynamoDB's 1 MB pages.
pub(crate) async fn query(
    client: &Client,
    table: &str,
    pk: String,
    range: (String, String),
    newest_first: bool,
    limit: usize,
) -> PortResult<Vec<Item>> {
    query_filtered(client, table, pk, range, newest_first, limit, None).await
}

/// The filter (as [`each_projected`] takes one) that passes every item but tombstones (of a
/// deleted design, its accepted-revision marker or its kept specification).
const LIVE: (&str, &str) = ("attribute_not_exists(#f)", DELETED_AT);

/// A filter of [`query_filtered`]: an expression with the attribute names and values it uses.
pub(crate) struct Filter {
    expression: &'static str,
    names: Vec<(&'static str, &'static str)>,
    values: Vec<(&'static str, AttributeValue)>,
}

impl Filter {
    /// [`LIVE`]: every item but tombstones.
    fn live() -> Self {
        Self { expression: LIVE.0, names: vec![("#f", LIVE.1)], values: Vec::new() }
    }

    /// Accepted-revision markers that are neither tombstones nor past their expiry at `now`
    /// (epoch seconds; DynamoDB's TTL deletes them some time later). A marker written before
    /// markers expired has no expiry and passes.
    fn live_marker(now: u64) -> Self {
        Self {
            expression: "attribute_not_exists(#f) AND (attribute_not_exists(#x) OR #x > :now)",
            names: vec![("#f", DELETED_AT), ("#x", TTL)],
            values: vec![(":now", n(now))],
        }
    }
}

/// [`query`] of only the items that pass `filter`: `limit` of those, however many were
/// filtered out on the way.
pub(crate) async fn query_filtered(
    client: &Client,
    table: &str,
    pk: String,
    (low, high): (String, String),
    newest_first: bool,
    limit: usize,
    filter: Option<&Filter>,
) -> PortResult<Vec<Item>> {
    let mut items = Vec::new();
    let mut start = None;
    while items.len() < limit {
        let mut request = client.query();
        if let Some(filter) = filter {
            request = request.filter_expression(filter.expression);
            for (name, attribute) in &filter.names {
                request = request.expression_attribute_names(*name, *attribute);
            }
            for (name, value) in &filter.values {
                request = request.expression_attribute_values(*name, value.clone());
            }
        }
        let out = request
            .table_name(table)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :low AND :high")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(pk.clone()))
            .expression_attribute_values(":low", s(low.clone()))
            .expression_attribute_values(":high", s(high.clone()))
            .scan_index_forward(!newest_first)
            .consistent_read(true)
            .limit(i32::try_from(limit - items.len()).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| classify("query", e))?;
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => break,
        }
    }
    items.truncate(limit);
    Ok(items)
}

/// Every sort key starting with `prefix`: from the prefix to the prefix followed by the highest
/// character any key uses.
pub(crate) fn prefix_range(prefix: &str) -> (String, String) {
    (prefix.to_owned(), format!("{prefix}\u{10FFFF}"))
}

pub(crate) async fn get(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
) -> PortResult<Option<DesignView>> {
    let (item, marker) = tokio::try_join!(
        get_item(client, table, tenant_pk(tenant), design_sk(design)),
        get_item(client, table, tenant_pk(tenant), accepted_sk(design)),
    )?;
    let view = item.as_ref().filter(|i| !is_tombstone(i)).map(design_view).transpose()?;
    let marker = live_marker(marker.as_ref())?;
    Ok(AcceptedRevision::overlay(marker.as_ref(), view))
}

pub(crate) async fn list(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    cursor: Option<&str>,
    limit: usize,
) -> PortResult<Page<DesignView>> {
    let limit = limit.clamp(1, MAX_PAGE);
    let cursor = cursor
        .map(DesignId::parse)
        .transpose()
        .map_err(|e| PortError::invalid("cursor", Failure::new("it is not one this listing returned", e)))?;
    let cursor = cursor.as_ref().map(DesignId::as_str);
    // Design ids are UUIDv7, so descending id order is newest first, and the last id of a page
    // is a stable cursor. The range runs up to the cursor; the cursor's own design is dropped.
    let range = |prefix: &str| match cursor {
        Some(c) => (prefix.to_owned(), format!("{prefix}{c}")),
        None => prefix_range(prefix),
    };
    let below = |items: Vec<Item>| items.into_iter().filter(|i| i.opt_str("design_id") != cursor);
    let (live, live_markers) = (Filter::live(), Filter::live_marker(now_secs()));
    let (designs, markers) = tokio::try_join!(
        query_filtered(client, table, tenant_pk(tenant), range(DESIGN_PREFIX), true, limit + 2, Some(&live)),
        query_filtered(client, table, tenant_pk(tenant), range(ACCEPTED_PREFIX), true, limit + 2, Some(&live_markers)),
    )?;
    let designs = below(designs).take(limit + 1).map(|i| design_view(&i)).collect::<PortResult<Vec<_>>>()?;
    let markers = below(markers).take(limit + 1).map(|i| accepted(&i)).collect::<PortResult<Vec<_>>>()?;
    Ok(AcceptedRevision::merge_page(designs, markers, limit))
}

pub(crate) async fn report(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    revision: Option<u64>,
) -> PortResult<Option<StoredReport>> {
    let pk = design_pk(tenant, design);
    let item = match revision {
        Some(r) => get_item(client, table, pk, super::table::report_sk(r)).await?,
        None => query(client, table, pk, prefix_range(REPORT_PREFIX), true, 1).await?.pop(),
    };
    let Some(item) = item else { return Ok(None) };
    let revision = item.num("revision")?;
    Ok(Some(StoredReport {
        revision,
        verdict: Verdict::parse(item.str_attr("verdict")?).ok_or_else(|| super::table::corrupt("verdict"))?,
        report: RawValue::from_string(item.str_attr("report")?.to_owned()).map_err(|e| {
            PortError::corrupt("stored report", Failure::new(format!("revision {revision}'s is not JSON"), e))
        })?,
    }))
}

pub(crate) async fn timeline(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
) -> PortResult<Option<Vec<TimelineEntry>>> {
    let (exists, marker, latest) = tokio::try_join!(
        get_item(client, table, tenant_pk(tenant), design_sk(design)),
        get_item(client, table, tenant_pk(tenant), accepted_sk(design)),
        // The latest entries, newest first, reversed below into applied order.
        query(client, table, design_pk(tenant, design), prefix_range(ENTRY_PREFIX), true, MAX_TIMELINE_ENTRIES),
    )?;
    let marker = live_marker(marker.as_ref())?;
    let applied = match exists.filter(|i| !is_tombstone(i)) {
        None => None,
        Some(_) => {
            let mut entries = latest.iter().map(timeline_entry).collect::<PortResult<Vec<_>>>()?;
            entries.reverse();
            Some(entries)
        }
    };
    Ok(AcceptedRevision::overlay_timeline(marker.as_ref(), applied))
}

/// Counts from the tenant's design items, each of which carries what it and its timeline and
/// reports take (`usage_bytes`, kept by every applied write). Reads only the tenant's partition.
pub(crate) async fn usage(client: &Client, table: &str, tenant: &TenantId) -> PortResult<Usage> {
    let mut usage = Usage::default();
    let range = prefix_range(DESIGN_PREFIX);
    each_projected(client, table, tenant_pk(tenant), range, &["usage_bytes"], Some(LIVE), "usage", |item| {
        usage.designs += 1;
        usage.bytes += item.opt_num("usage_bytes")?.unwrap_or(0);
        Ok(())
    })
    .await?;
    Ok(usage)
}

/// Hands `each` every item of partition `pk` whose sort key is in `range` (inclusive), with only
/// `attributes` read, page after page; with `filter`, only the items that pass it (an expression
/// naming one attribute as `#f`, as in `("attribute_not_exists(#f)", "finished_at")`).
/// Eventually consistent reads: for counts, which may lag a write by a moment.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn each_projected(
    client: &Client,
    table: &str,
    pk: String,
    (low, high): (String, String),
    attributes: &[&str],
    filter: Option<(&str, &str)>,
    operation: &str,
    mut each: impl FnMut(&Item) -> PortResult<()>,
) -> PortResult<()> {
    let projection: Vec<String> = (0..attributes.len()).map(|i| format!("#a{i}")).collect();
    let mut start = None;
    loop {
        let mut request = client
            .query()
            .table_name(table)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :low AND :high")
            .projection_expression(projection.join(", "))
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(pk.clone()))
            .expression_attribute_values(":low", s(low.clone()))
            .expression_attribute_values(":high", s(high.clone()))
            .set_exclusive_start_key(start.take());
        for (name, attribute) in projection.iter().zip(attributes) {
            request = request.expression_attribute_names(name, *attribute);
        }
        if let Some((expression, attribute)) = filter {
            request = request.filter_expression(expression).expression_attribute_names("#f", attribute);
        }
        let out = request.send().await.map_err(|e| classify(operation, e))?;
        for item in out.items() {
            each(item)?;
        }
        match out.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => return Ok(()),
        }
    }
}

/// Keeps the higher of the stored marker and `a`: the write holds only while no marker of this
/// design has a revision at or above `a`'s. A name sent with a lower revision is kept when the
/// higher one has none (the name is only overwritten when given). The marker expires `keep`
/// after `a` was accepted (its TTL attribute; reads pass over it from then on).
pub(crate) async fn record_accepted(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    a: &AcceptedRevision,
    keep: std::time::Duration,
) -> PortResult<()> {
    let expires = (a.accepted_at.timestamp().max(0) as u64).saturating_add(keep.as_secs());
    let mut set = vec!["#t = :t", "#d = :d", "#r = :r", "#e = :e", "#c = :c", "#at = :at", "#x = :x"];
    let mut req = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), accepted_sk(&a.design_id))))
        .condition_expression("attribute_not_exists(#pk) OR #r < :r")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#t", "item_type")
        .expression_attribute_names("#d", "design_id")
        .expression_attribute_names("#r", "revision")
        .expression_attribute_names("#e", "event_id")
        .expression_attribute_names("#c", "correlation_id")
        .expression_attribute_names("#at", "accepted_at")
        .expression_attribute_values(":t", s("accepted"))
        .expression_attribute_values(":d", s(a.design_id.as_str()))
        .expression_attribute_values(":r", n(a.revision))
        .expression_attribute_values(":e", s(a.event_id.to_string()))
        .expression_attribute_values(":c", s(a.correlation_id.as_str()))
        .expression_attribute_values(":at", s(a.accepted_at.to_rfc3339()))
        .expression_attribute_names("#x", TTL)
        .expression_attribute_values(":x", n(expires));
    if let Some(name) = &a.name {
        set.push("#n = :n");
        req = req.expression_attribute_names("#n", "name").expression_attribute_values(":n", s(name.as_str()));
    }
    match req.update_expression(format!("SET {}", set.join(", "))).send().await {
        Ok(_) => Ok(()),
        // A marker at this revision or a higher one is there already.
        Err(e) if is_condition_failed(&e) => Ok(()),
        Err(e) => Err(classify("record accepted revision", e)),
    }
}
