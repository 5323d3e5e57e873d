//! Schedules on DynamoDB (`openqq_core::schedule`, docs/DYNAMODB.md "Schedules"):
//!
//! | item | `pk` | `sk` | written by |
//! |---|---|---|---|
//! | schedule | `T#{tenant}` | `SCHED#{schedule}` | create (with the count), then updates conditional on `version` |
//! | schedule count | `T#{tenant}` | `SCHEDCOUNT` | create and delete, in their transactions |
//! | fire | `T#{tenant}#SCHED#{schedule}` | `F#{nominal_ns:020}` | a conditional put (the ledger's key), then settles conditional on its outcome |
//!
//! A schedule with a `next_due` is also in the sparse [`DUE_INDEX`] under the partition
//! [`SCHEDULE_DUE_PARTITION`] (the webhook deliveries' index, another partition of it), sorted
//! by `{next_due_ns:020}#{tenant}#{schedule}`, so the runner's due read is one query across
//! tenants; the index holds keys only and lags the table, so each schedule found is read again
//! (strongly consistent) and skipped if it is not due after all. Fires carry the TTL attribute,
//! [`FIRE_RETENTION`] after they were recorded.

use super::apply::Expr;
use super::error::{classify, is_condition_failed, Class};
use super::reads::{get_item, prefix_range, query};
use super::table::{key, n, s, tenant_pk, Attrs, Item, DUE_INDEX, DUE_PK, DUE_SK, PK, SK, TTL};
use super::transact::{back_off, put_new, stored_nanos, transact};
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, ReturnValue, TransactWriteItem, Update, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::schedule::{
    DueSchedule, FireOutcome, FireRecord, Recorded, RunnerState, ScheduleId, Settle, StoredSchedule, Template,
    FIRE_RETENTION, MAX_SCHEDULES_PER_TENANT,
};
use openqq_core::{BatchId, Page, PortError, TenantId};
use openqq_schedule::ScheduleConfig;

/// The due index's partition of schedules.
pub(crate) const SCHEDULE_DUE_PARTITION: &str = "schedules";
const SCHEDULE_PREFIX: &str = "SCHED#";
const COUNT_SK: &str = "SCHEDCOUNT";
const FIRE_PREFIX: &str = "F#";
/// Largest page of schedules or fires.
const MAX_PAGE: usize = 100;
/// Tries at most this many times when a transaction meets another on the same item.
const MAX_ATTEMPTS: u32 = 8;

fn schedule_sk(id: &ScheduleId) -> String {
    format!("{SCHEDULE_PREFIX}{id}")
}

fn fires_pk(tenant: &TenantId, id: &ScheduleId) -> String {
    format!("T#{tenant}#{SCHEDULE_PREFIX}{id}")
}

fn fire_sk(nominal_ns: u64) -> String {
    format!("{FIRE_PREFIX}{nominal_ns:020}")
}

fn due_sk(next_due_ns: u64, tenant: &TenantId, id: &ScheduleId) -> String {
    format!("{next_due_ns:020}#{tenant}#{id}")
}

fn parse_due_sk(sk: &str) -> Option<(TenantId, ScheduleId)> {
    let mut parts = sk.split('#');
    let _due = parts.next()?;
    let tenant = TenantId::parse(parts.next()?).ok()?;
    let id = ScheduleId::parse(parts.next()?).ok()?;
    parts.next().is_none().then_some((tenant, id))
}

fn corrupt(what: &str) -> PortError {
    super::table::corrupt(what)
}

fn instant(ns: u64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(i64::try_from(ns).unwrap_or(i64::MAX))
}

fn time(item: &Item, name: &str) -> PortResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(item.str_attr(name)?).map(|t| t.with_timezone(&Utc)).map_err(|_| corrupt(name))
}

fn schedule(item: &Item) -> PortResult<StoredSchedule> {
    let config: ScheduleConfig = serde_json::from_str(item.str_attr("config")?).map_err(|_| corrupt("config"))?;
    let template = serde_json::from_str(item.str_attr("template")?)
        .ok()
        .and_then(|v| Template::from_json(&v))
        .ok_or_else(|| corrupt("template"))?;
    Ok(StoredSchedule {
        id: ScheduleId::parse(item.str_attr("id")?).map_err(|_| corrupt("id"))?,
        name: item.str_attr("name")?.to_owned(),
        config,
        template,
        created_at: time(item, "created_at")?,
        updated_at: time(item, "updated_at")?,
        resumed_at: item.opt_str("resumed_at").map(|_| time(item, "resumed_at")).transpose()?,
        state: RunnerState {
            last_handled: item.opt_num("last_handled_ns")?.map(instant),
            last_batch: item
                .opt_str("last_batch")
                .map(|b| BatchId::parse(b).map_err(|_| corrupt("last_batch")))
                .transpose()?,
            buffered: item.opt_num("buffered_ns")?.map(instant),
        },
        next_due: item.opt_num("next_due_ns")?.map(instant),
        version: item.num("version")?,
    })
}

fn config_json(config: &ScheduleConfig) -> PortResult<String> {
    serde_json::to_string(config).map_err(|e| PortError::corrupt("schedule configuration", e.to_string()))
}

/// The attributes of what a tenant sets and of `next_due` (with its index keys), as an update.
fn set_config(e: &mut Expr, tenant: &TenantId, s: &StoredSchedule) -> PortResult<()> {
    e.set("name", super::table::s(s.name.clone()));
    e.set("config", super::table::s(config_json(&s.config)?));
    e.set("template", super::table::s(s.template.to_json().to_string()));
    e.set("updated_at", super::table::s(s.updated_at.to_rfc3339()));
    e.set_or_remove("resumed_at", s.resumed_at.map(|t| super::table::s(t.to_rfc3339())));
    set_next_due(e, tenant, &s.id, s.next_due);
    Ok(())
}

fn set_next_due(e: &mut Expr, tenant: &TenantId, id: &ScheduleId, next_due: Option<DateTime<Utc>>) {
    let due = next_due.map(stored_nanos);
    e.set_or_remove("next_due_ns", due.map(n));
    e.set_or_remove(DUE_PK, due.map(|_| s(SCHEDULE_DUE_PARTITION)));
    e.set_or_remove(DUE_SK, due.map(|ns| s(due_sk(ns, tenant, id))));
}

fn schedule_item(tenant: &TenantId, sc: &StoredSchedule) -> PortResult<Item> {
    let mut item = key(tenant_pk(tenant), schedule_sk(&sc.id));
    item.extend([
        ("item_type".to_owned(), s("schedule")),
        ("id".to_owned(), s(sc.id.to_string())),
        ("name".to_owned(), s(sc.name.clone())),
        ("config".to_owned(), s(config_json(&sc.config)?)),
        ("template".to_owned(), s(sc.template.to_json().to_string())),
        ("created_at".to_owned(), s(sc.created_at.to_rfc3339())),
        ("updated_at".to_owned(), s(sc.updated_at.to_rfc3339())),
        ("version".to_owned(), n(sc.version)),
    ]);
    let optional = [
        ("resumed_at", sc.resumed_at.map(|t| s(t.to_rfc3339()))),
        ("last_handled_ns", sc.state.last_handled.map(|t| n(stored_nanos(t)))),
        ("last_batch", sc.state.last_batch.as_ref().map(|b| s(b.to_string()))),
        ("buffered_ns", sc.state.buffered.map(|t| n(stored_nanos(t)))),
        ("next_due_ns", sc.next_due.map(|t| n(stored_nanos(t)))),
        (DUE_PK, sc.next_due.map(|_| s(SCHEDULE_DUE_PARTITION))),
        (DUE_SK, sc.next_due.map(|t| s(due_sk(stored_nanos(t), tenant, &sc.id)))),
    ];
    item.extend(optional.into_iter().filter_map(|(name, v)| Some((name.to_owned(), v?))));
    Ok(item)
}

fn count_update(table: &str, tenant: &TenantId, delta: i64, limited: bool) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), COUNT_SK.to_owned())))
        .update_expression("ADD #count :delta")
        .expression_attribute_names("#count", "schedules")
        .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()));
    let update = match limited {
        true => update
            .condition_expression("attribute_not_exists(#count) OR #count < :max")
            .expression_attribute_values(":max", n(MAX_SCHEDULES_PER_TENANT as u64)),
        false => update,
    };
    TransactWriteItem::builder().update(update.build().expect("table, key and expression are set")).build()
}

pub(crate) async fn create(client: &Client, table: &str, tenant: &TenantId, sc: &StoredSchedule) -> PortResult<bool> {
    let item = schedule_item(tenant, sc)?;
    for attempt in 0..MAX_ATTEMPTS {
        let items = vec![count_update(table, tenant, 1, true), put_new(table, item.clone())];
        match transact(client, "create a schedule", items).await? {
            Ok(()) => return Ok(true),
            Err(reasons) if reasons.first() == Some(&Some(Class::ConditionFailed)) => return Ok(false),
            Err(reasons) if reasons.get(1) == Some(&Some(Class::ConditionFailed)) => {
                return Err(PortError::condition_failed(
                    "schedule",
                    format!("the tenant has a schedule {} already", sc.id),
                ))
            }
            Err(_) => back_off(attempt).await,
        }
    }
    Err(PortError::Unavailable("creating the schedule met other writes every time".to_owned().into()))
}

pub(crate) async fn get(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &ScheduleId,
) -> PortResult<Option<StoredSchedule>> {
    get_item(client, table, tenant_pk(tenant), schedule_sk(id)).await?.as_ref().map(schedule).transpose()
}

pub(crate) async fn list(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    cursor: Option<&str>,
    limit: usize,
) -> PortResult<Page<StoredSchedule>> {
    let limit = limit.clamp(1, MAX_PAGE);
    let (low, high) = prefix_range(SCHEDULE_PREFIX);
    let low = cursor.map_or(low, |c| format!("{SCHEDULE_PREFIX}{c}"));
    let items = query(client, table, tenant_pk(tenant), (low, high), false, limit + 2).await?;
    let mut schedules = items.iter().map(schedule).collect::<PortResult<Vec<_>>>()?;
    // The range starts at the cursor itself: it was on the page before.
    schedules.retain(|sc| cursor != Some(sc.id.as_str()));
    let next = (schedules.len() > limit).then(|| {
        schedules.truncate(limit);
        schedules.last().map(|sc| sc.id.to_string()).unwrap_or_default()
    });
    Ok(Page { items: schedules, next })
}

pub(crate) async fn update(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    sc: &StoredSchedule,
) -> PortResult<Option<StoredSchedule>> {
    let mut e = Expr::default();
    set_config(&mut e, tenant, sc)?;
    let version = e.name("version");
    let one = e.value(n(1));
    e.add.push(format!("{version} {one}"));
    let expected = e.value(n(sc.version));
    let condition = format!("attribute_exists({}) AND {version} = {expected}", e.name(PK));
    let sent = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), schedule_sk(&sc.id))))
        .update_expression(e.update_expression())
        .condition_expression(condition)
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match sent {
        Ok(out) => out.attributes.as_ref().map(schedule).transpose(),
        Err(err) if is_condition_failed(&err) => match get(client, table, tenant, &sc.id).await? {
            None => Ok(None),
            Some(_) => Err(PortError::condition_failed("schedule", "it changed since it was read")),
        },
        Err(err) => Err(classify("update a schedule", err)),
    }
}

pub(crate) async fn delete(client: &Client, table: &str, tenant: &TenantId, id: &ScheduleId) -> PortResult<bool> {
    let mut existed = None;
    for attempt in 0..MAX_ATTEMPTS {
        let remove = Delete::builder()
            .table_name(table)
            .set_key(Some(key(tenant_pk(tenant), schedule_sk(id))))
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .expect("table and key are set");
        let items = vec![TransactWriteItem::builder().delete(remove).build(), count_update(table, tenant, -1, false)];
        match transact(client, "delete a schedule", items).await? {
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
        return Err(PortError::Unavailable("deleting the schedule met other writes every time".to_owned().into()));
    };
    // Its ledger, also when the schedule was gone already: a deletion that stopped between the
    // two steps is finished by the next.
    sweep_fires(client, table, tenant, id).await?;
    Ok(existed)
}

async fn sweep_fires(client: &Client, table: &str, tenant: &TenantId, id: &ScheduleId) -> PortResult<()> {
    loop {
        let items = query(client, table, fires_pk(tenant, id), prefix_range(FIRE_PREFIX), false, 25).await?;
        if items.is_empty() {
            return Ok(());
        }
        let mut requests: Vec<WriteRequest> = items
            .iter()
            .filter_map(|item| {
                let (pk, sk) = (item.get(PK)?.clone(), item.get(SK)?.clone());
                let key = [(PK.to_owned(), pk), (SK.to_owned(), sk)].into_iter().collect();
                let delete = DeleteRequest::builder().set_key(Some(key)).build().ok()?;
                Some(WriteRequest::builder().delete_request(delete).build())
            })
            .collect();
        // Unprocessed deletes (throttling) are sent again until none is left.
        for attempt in 0..MAX_ATTEMPTS {
            let out = client
                .batch_write_item()
                .request_items(table, std::mem::take(&mut requests))
                .send()
                .await
                .map_err(|e| classify("delete fires", e))?;
            requests = out.unprocessed_items.and_then(|mut u| u.remove(table)).unwrap_or_default();
            if requests.is_empty() {
                break;
            }
            back_off(attempt).await;
        }
    }
}

fn fire(item: &Item) -> PortResult<FireRecord> {
    Ok(FireRecord {
        nominal_time: instant(item.num("nominal_ns")?),
        fired_at: instant(item.num("fired_ns")?),
        outcome: FireOutcome::parse(item.str_attr("outcome")?).ok_or_else(|| corrupt("outcome"))?,
        batch_id: item.opt_str("batch_id").map(|b| BatchId::parse(b).map_err(|_| corrupt("batch_id"))).transpose()?,
        reason: item.opt_str("reason").map(str::to_owned),
    })
}

fn fire_item(tenant: &TenantId, id: &ScheduleId, f: &FireRecord) -> Item {
    let nominal = stored_nanos(f.nominal_time);
    let expires = f.fired_at.timestamp().max(0) as u64 + FIRE_RETENTION.as_secs();
    let mut item = key(fires_pk(tenant, id), fire_sk(nominal));
    item.extend([
        ("item_type".to_owned(), s("fire")),
        ("nominal_ns".to_owned(), n(nominal)),
        ("fired_ns".to_owned(), n(stored_nanos(f.fired_at))),
        ("outcome".to_owned(), s(f.outcome.as_str())),
        (TTL.to_owned(), n(expires)),
    ]);
    if let Some(b) = &f.batch_id {
        item.insert("batch_id".to_owned(), s(b.to_string()));
    }
    if let Some(r) = &f.reason {
        item.insert("reason".to_owned(), s(r.clone()));
    }
    item
}

async fn get_fire(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &ScheduleId,
    nominal_ns: u64,
) -> PortResult<Option<FireRecord>> {
    get_item(client, table, fires_pk(tenant, id), fire_sk(nominal_ns)).await?.as_ref().map(fire).transpose()
}

/// The put of the fire on condition that its key is new, beside a check that the schedule
/// exists: one transaction.
pub(crate) async fn record(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &ScheduleId,
    f: &FireRecord,
) -> PortResult<Recorded> {
    let nominal = stored_nanos(f.nominal_time);
    for attempt in 0..MAX_ATTEMPTS {
        let exists = ConditionCheck::builder()
            .table_name(table)
            .set_key(Some(key(tenant_pk(tenant), schedule_sk(id))))
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .expect("table, key and condition are set");
        let items = vec![
            TransactWriteItem::builder().condition_check(exists).build(),
            put_new(table, fire_item(tenant, id, f)),
        ];
        match transact(client, "record a fire", items).await? {
            Ok(()) => {
                let record = FireRecord { nominal_time: instant(nominal), ..f.clone() };
                return Ok(Recorded { created: true, record });
            }
            Err(reasons) if reasons.first() == Some(&Some(Class::ConditionFailed)) => return Err(PortError::NotFound),
            Err(reasons) if reasons.get(1) == Some(&Some(Class::ConditionFailed)) => {
                if let Some(record) = get_fire(client, table, tenant, id, nominal).await? {
                    return Ok(Recorded { created: false, record });
                }
                // Deleted meanwhile (the schedule's deletion): try again, which answers as it is now.
                back_off(attempt).await;
            }
            Err(_) => back_off(attempt).await,
        }
    }
    Err(PortError::Unavailable("recording the fire met other writes every time".to_owned().into()))
}

pub(crate) async fn settle(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &ScheduleId,
    nominal: DateTime<Utc>,
    from: FireOutcome,
    to: &Settle,
) -> PortResult<Option<(bool, FireRecord)>> {
    let nominal = stored_nanos(nominal);
    let mut e = Expr::default();
    e.set("outcome", s(to.outcome.as_str()));
    e.set_or_remove("batch_id", to.batch_id.as_ref().map(|b| s(b.to_string())));
    e.set_or_remove("reason", to.reason.as_ref().map(|r| s(r.clone())));
    let (outcome, expected) = (e.name("outcome"), e.value(s(from.as_str())));
    let sent = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(fires_pk(tenant, id), fire_sk(nominal))))
        .update_expression(e.update_expression())
        .condition_expression(format!("{outcome} = {expected}"))
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    match sent {
        Ok(out) => out.attributes.as_ref().map(fire).transpose().map(|f| f.map(|f| (true, f))),
        Err(err) if is_condition_failed(&err) => {
            Ok(get_fire(client, table, tenant, id, nominal).await?.map(|f| (false, f)))
        }
        Err(err) => Err(classify("settle a fire", err)),
    }
}

pub(crate) async fn fires(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &ScheduleId,
    before: Option<DateTime<Utc>>,
    limit: usize,
) -> PortResult<Option<Page<FireRecord>>> {
    if get(client, table, tenant, id).await?.is_none() {
        return Ok(None);
    }
    let limit = limit.clamp(1, MAX_PAGE);
    let high = match before.map(stored_nanos) {
        Some(0) => return Ok(Some(Page { items: Vec::new(), next: None })),
        Some(b) => fire_sk(b - 1),
        None => prefix_range(FIRE_PREFIX).1,
    };
    let items = query(client, table, fires_pk(tenant, id), (FIRE_PREFIX.to_owned(), high), true, limit + 1).await?;
    let mut items = items.iter().map(fire).collect::<PortResult<Vec<_>>>()?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|f| f.nominal_time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)).unwrap_or_default()
    });
    Ok(Some(Page { items, next }))
}

pub(crate) async fn due(
    client: &Client,
    table: &str,
    now: DateTime<Utc>,
    limit: usize,
) -> PortResult<Vec<DueSchedule>> {
    let limit = limit.clamp(1, MAX_PAGE * 10);
    let out = client
        .query()
        .table_name(table)
        .index_name(DUE_INDEX)
        .key_condition_expression("#pk = :pk AND #sk <= :now")
        .expression_attribute_names("#pk", DUE_PK)
        .expression_attribute_names("#sk", DUE_SK)
        .expression_attribute_values(":pk", s(SCHEDULE_DUE_PARTITION))
        .expression_attribute_values(":now", s(format!("{:020}#\u{10FFFF}", stored_nanos(now))))
        .limit(i32::try_from(limit).unwrap_or(i32::MAX))
        .send()
        .await
        .map_err(|e| classify("query due schedules", e))?;
    let mut reads = tokio::task::JoinSet::new();
    for (i, item) in out.items().iter().enumerate() {
        let (tenant, id) = parse_due_sk(item.str_attr(DUE_SK)?).ok_or_else(|| corrupt(DUE_SK))?;
        let (client, table) = (client.clone(), table.to_owned());
        reads.spawn(async move { (i, get(&client, &table, &tenant, &id).await.map(|sc| sc.map(|sc| (tenant, sc)))) });
    }
    let mut found = Vec::new();
    while let Some(joined) = reads.join_next().await {
        let (i, read) = joined.map_err(|e| PortError::backend_message(format!("a read task failed: {e}"), true))?;
        // The index lags the table: a schedule deleted or moved on since is skipped.
        if let Some((tenant, schedule)) = read?.filter(|(_, sc)| sc.next_due.is_some_and(|d| d <= now)) {
            found.push((i, DueSchedule { tenant, schedule }));
        }
    }
    found.sort_by_key(|(i, _)| *i);
    Ok(found.into_iter().map(|(_, d)| d).collect())
}

pub(crate) async fn save_state(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    id: &ScheduleId,
    version: u64,
    state: &RunnerState,
    next_due: Option<DateTime<Utc>>,
) -> PortResult<bool> {
    let mut e = Expr::default();
    e.set_or_remove("last_handled_ns", state.last_handled.map(|t| n(stored_nanos(t))));
    e.set_or_remove("last_batch", state.last_batch.as_ref().map(|b| s(b.to_string())));
    e.set_or_remove("buffered_ns", state.buffered.map(|t| n(stored_nanos(t))));
    set_next_due(&mut e, tenant, id, next_due);
    let name = e.name("version");
    let one = e.value(n(1));
    e.add.push(format!("{name} {one}"));
    let expected = e.value(n(version));
    let sent = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), schedule_sk(id))))
        .update_expression(e.update_expression())
        .condition_expression(format!("{name} = {expected}"))
        .set_expression_attribute_names(Some(e.names))
        .set_expression_attribute_values(Some(e.values))
        .send()
        .await;
    match sent {
        Ok(_) => Ok(true),
        Err(err) if is_condition_failed(&err) => Ok(false),
        Err(err) => Err(classify("save a schedule's runner state", err)),
    }
}
