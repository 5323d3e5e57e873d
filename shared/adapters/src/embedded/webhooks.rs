//! The tenant's webhooks and their deliveries in the embedded store (the same SQLite file as the
//! designs and the feed).
//!
//! - `webhooks`: one row per tenant and webhook, secrets as bytes.
//! - `deliveries`: one row per (tenant, webhook, seq), the feed entry kept as JSON. A feed append
//!   inserts the deliveries of the webhooks that want its kind in the same transaction as the
//!   entry ([`deliveries_for`]). Pending rows are indexed by tenant and `next_attempt_ns` for
//!   claims, which read each tenant's oldest due and set them to the end of the lease in the same
//!   transaction.
//!
//! Retention: deliveries are at most one per feed entry and webhook (ten webhooks per tenant),
//! kept as the webhook's delivery history, and go with their webhook when it is deleted.

use super::db::{begin_tx, commit_tx, corrupt, sqlite_error, time};
use chrono::{DateTime, Utc};
use openqq_core::ports::PortResult;
use openqq_core::webhook::{
    AttemptOutcome, Delivery, DeliveryStatus, MAX_DELIVERY_ERROR_BYTES, MAX_DESCRIPTION_CHARS, MAX_URL_BYTES,
    MAX_WEBHOOKS_PER_TENANT, SUBSCRIBABLE,
};
use openqq_core::{EventKind, Failure, FeedEntry, Page, PortError, Webhook, WebhookId, WebhookSecret};
use rusqlite::{params, Connection, OptionalExtension};
use std::time::Duration;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS webhooks (
    tenant TEXT NOT NULL, id TEXT NOT NULL, url TEXT NOT NULL, kinds TEXT NOT NULL, description TEXT,
    created_at TEXT NOT NULL, secret BLOB NOT NULL, previous_secret BLOB, previous_until TEXT,
    PRIMARY KEY (tenant, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    tenant TEXT NOT NULL, webhook_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL,
    status TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_ns INTEGER,
    last_status_code INTEGER, last_error TEXT, created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL,
    PRIMARY KEY (tenant, webhook_id, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_pending ON deliveries (tenant, next_attempt_ns, webhook_id, seq)
    WHERE status = 'pending';
";

/// Largest page [`list_deliveries`] returns, whatever the caller asks.
pub const MAX_DELIVERY_PAGE: usize = 100;

/// A time as nanoseconds since the epoch (saturating past the year 2262), the form times that
/// are compared or ordered are stored in.
pub(crate) fn nanos(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(if t.timestamp() < 0 { i64::MIN } else { i64::MAX })
}

pub(crate) fn from_nanos(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

/// `now + lease` in nanoseconds, saturating.
pub(crate) fn lease_end(now: DateTime<Utc>, lease: Duration) -> i64 {
    nanos(now).saturating_add(i64::try_from(lease.as_nanos()).unwrap_or(i64::MAX))
}

/// Refuses a webhook the store should never hold: a URL or description over its limit, or kinds
/// that are empty, repeated or not subscribable. (The API checks these first, with better
/// messages; this keeps the store's own rows bounded whoever calls it.)
pub(crate) fn check_webhook(hook: &Webhook) -> PortResult<()> {
    if hook.url.len() > MAX_URL_BYTES {
        return Err(PortError::invalid("webhook URL", format!("it is at most {MAX_URL_BYTES} bytes")));
    }
    if hook.description.as_ref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS) {
        return Err(PortError::invalid(
            "webhook description",
            format!("it is at most {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let unknown = hook.kinds.iter().any(|k| !SUBSCRIBABLE.contains(k));
    let repeated = hook.kinds.iter().enumerate().any(|(i, k)| hook.kinds[..i].contains(k));
    if hook.kinds.is_empty() || unknown || repeated {
        return Err(PortError::invalid(
            "webhook kinds",
            "a webhook subscribes to one or more feed event kinds, each once",
        ));
    }
    Ok(())
}

/// The kinds as stored: their names, comma-separated.
pub(crate) fn kinds_text(kinds: &[EventKind]) -> String {
    kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(",")
}

pub(crate) fn parse_kinds(text: &str) -> Option<Vec<EventKind>> {
    text.split(',').map(EventKind::parse).collect()
}

/// `error` cut to [`MAX_DELIVERY_ERROR_BYTES`] at a character boundary.
pub(crate) fn truncate_error(error: &str) -> &str {
    if error.len() <= MAX_DELIVERY_ERROR_BYTES {
        return error;
    }
    let mut end = MAX_DELIVERY_ERROR_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

/// What an outcome writes: status, next attempt (ns), status code, error.
pub(crate) fn outcome_fields(outcome: &AttemptOutcome) -> (DeliveryStatus, Option<i64>, Option<u16>, Option<&str>) {
    match outcome {
        AttemptOutcome::Delivered { status_code } => (DeliveryStatus::Delivered, None, Some(*status_code), None),
        AttemptOutcome::Retry { at, status_code, error } => {
            (DeliveryStatus::Pending, Some(nanos(*at)), *status_code, Some(truncate_error(error)))
        }
        AttemptOutcome::Dead { status_code, error } => {
            (DeliveryStatus::Dead, None, *status_code, Some(truncate_error(error)))
        }
    }
}

pub(crate) fn status_text(s: DeliveryStatus) -> &'static str {
    match s {
        DeliveryStatus::Pending => "pending",
        DeliveryStatus::Delivered => "delivered",
        DeliveryStatus::Dead => "dead",
    }
}

pub(crate) fn parse_status(s: &str) -> Option<DeliveryStatus> {
    [DeliveryStatus::Pending, DeliveryStatus::Delivered, DeliveryStatus::Dead]
        .into_iter()
        .find(|x| status_text(*x) == s)
}

/// A cursor of [`list_deliveries`]: the seq of the last delivery of the previous page.
pub(crate) fn parse_delivery_cursor(cursor: Option<&str>) -> PortResult<Option<u64>> {
    cursor
        .map(|c| {
            c.parse::<u64>()
                .map_err(|e| PortError::invalid("delivery cursor", Failure::new(format!("{c:?} is not one"), e)))
        })
        .transpose()
}

/// Queues a delivery of `entry` (just appended to the tenant's feed, inside the appending
/// transaction) to each of the tenant's webhooks that wants its kind.
pub(super) fn queue_for_webhooks(tx: &Connection, tenant: &str, entry: &FeedEntry) -> PortResult<()> {
    let kind = entry.kind.as_str();
    let hooks: Vec<(String, String)> = tx
        .prepare_cached("SELECT id, kinds FROM webhooks WHERE tenant=?1")
        .and_then(|mut s| s.query_map(params![tenant], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| sqlite_error("read webhooks", e))?;
    let wanting: Vec<String> =
        hooks.into_iter().filter(|(_, kinds)| kinds.split(',').any(|k| k == kind)).map(|(id, _)| id).collect();
    if !wanting.is_empty() {
        let json = entry.to_json()?;
        let now = nanos(Utc::now());
        for id in wanting {
            insert_delivery(tx, tenant, &id, entry.seq, &json, now)?;
        }
    }
    Ok(())
}

fn insert_delivery(tx: &Connection, tenant: &str, id: &str, seq: u64, json: &str, now: i64) -> PortResult<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO deliveries(tenant, webhook_id, seq, entry, status, attempts, next_attempt_ns, \
         created_ns, updated_ns) VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5)",
    )
    .and_then(|mut s| s.execute(params![tenant, id, seq as i64, json, now]))
    .map_err(|e| sqlite_error("queue delivery", e))?;
    Ok(())
}

const WEBHOOK_COLUMNS: &str = "id, url, kinds, description, created_at, secret, previous_secret, previous_until";

fn webhook_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Webhook> {
    let secret = |bytes: Vec<u8>| WebhookSecret::from_bytes(bytes).map_err(|_| corrupt("secret"));
    let previous: Option<Vec<u8>> = r.get(6)?;
    let until: Option<String> = r.get(7)?;
    Ok(Webhook {
        id: WebhookId::parse(&r.get::<_, String>(0)?).ok_or_else(|| corrupt("id"))?,
        url: r.get(1)?,
        kinds: parse_kinds(&r.get::<_, String>(2)?).ok_or_else(|| corrupt("kinds"))?,
        description: r.get(3)?,
        created_at: time(&r.get::<_, String>(4)?, "created_at")?,
        secret: secret(r.get(5)?)?,
        previous_secret: match (previous, until) {
            (Some(p), Some(u)) => Some((secret(p)?, time(&u, "previous_until")?)),
            _ => None,
        },
    })
}

pub(super) fn create_webhook(conn: &mut Connection, tenant: &str, hook: &Webhook) -> PortResult<()> {
    check_webhook(hook)?;
    let tx = begin_tx(conn)?;
    let held: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM webhooks WHERE tenant=?1")
        .and_then(|mut s| s.query_row(params![tenant], |r| r.get(0)))
        .map_err(|e| sqlite_error("count webhooks", e))?;
    if held as usize >= MAX_WEBHOOKS_PER_TENANT {
        return Err(PortError::condition_failed(
            "webhook",
            format!("the tenant has {MAX_WEBHOOKS_PER_TENANT} webhooks already, the most it may register"),
        ));
    }
    let previous = hook.previous_secret.as_ref();
    let inserted = tx
        .prepare_cached(&format!(
            "INSERT OR IGNORE INTO webhooks(tenant, {WEBHOOK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        ))
        .and_then(|mut s| {
            s.execute(params![
                tenant,
                hook.id.to_string(),
                hook.url,
                kinds_text(&hook.kinds),
                hook.description,
                hook.created_at.to_rfc3339(),
                hook.secret.bytes(),
                previous.map(|(p, _)| p.bytes()),
                previous.map(|(_, u)| u.to_rfc3339())
            ])
        })
        .map_err(|e| sqlite_error("create webhook", e))?;
    if inserted == 0 {
        return Err(PortError::condition_failed("webhook", format!("the tenant has a webhook {} already", hook.id)));
    }
    commit_tx(tx)
}

pub(super) fn list_webhooks(conn: &Connection, tenant: &str) -> PortResult<Vec<Webhook>> {
    let mut hooks: Vec<Webhook> = conn
        .prepare_cached(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE tenant=?1"))
        .and_then(|mut s| s.query_map(params![tenant], webhook_row)?.collect())
        .map_err(|e| sqlite_error("list webhooks", e))?;
    hooks.sort_by_key(|h| (h.created_at, h.id));
    Ok(hooks)
}

pub(super) fn get_webhook(conn: &Connection, tenant: &str, id: &WebhookId) -> PortResult<Option<Webhook>> {
    conn.prepare_cached(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE tenant=?1 AND id=?2"))
        .and_then(|mut s| s.query_row(params![tenant, id.to_string()], webhook_row).optional())
        .map_err(|e| sqlite_error("get webhook", e))
}

pub(super) fn delete_webhook(conn: &mut Connection, tenant: &str, id: &WebhookId) -> PortResult<bool> {
    let id = id.to_string();
    let tx = begin_tx(conn)?;
    tx.prepare_cached("DELETE FROM deliveries WHERE tenant=?1 AND webhook_id=?2")
        .and_then(|mut s| s.execute(params![tenant, id]))
        .map_err(|e| sqlite_error("delete deliveries", e))?;
    let gone = tx
        .prepare_cached("DELETE FROM webhooks WHERE tenant=?1 AND id=?2")
        .and_then(|mut s| s.execute(params![tenant, id]))
        .map_err(|e| sqlite_error("delete webhook", e))?;
    commit_tx(tx)?;
    Ok(gone > 0)
}

pub(super) fn rotate_secret(
    conn: &mut Connection,
    tenant: &str,
    id: &WebhookId,
    secret: &WebhookSecret,
    previous_until: DateTime<Utc>,
) -> PortResult<Option<Webhook>> {
    let tx = begin_tx(conn)?;
    let changed = tx
        .prepare_cached(
            "UPDATE webhooks SET previous_secret=secret, previous_until=?3, secret=?4 WHERE tenant=?1 AND id=?2",
        )
        .and_then(|mut s| s.execute(params![tenant, id.to_string(), previous_until.to_rfc3339(), secret.bytes()]))
        .map_err(|e| sqlite_error("rotate webhook secret", e))?;
    if changed == 0 {
        return Ok(None);
    }
    let hook = get_webhook(&tx, tenant, id)?;
    commit_tx(tx)?;
    Ok(hook)
}

pub(super) fn queue(conn: &mut Connection, tenant: &str, id: &WebhookId, entry: &FeedEntry) -> PortResult<()> {
    let id = id.to_string();
    let json = entry.to_json()?;
    let tx = begin_tx(conn)?;
    let exists: bool = tx
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM webhooks WHERE tenant=?1 AND id=?2)")
        .and_then(|mut s| s.query_row(params![tenant, id], |r| r.get(0)))
        .map_err(|e| sqlite_error("read webhook", e))?;
    if !exists {
        return Err(PortError::NotFound);
    }
    insert_delivery(&tx, tenant, &id, entry.seq, &json, nanos(Utc::now()))?;
    commit_tx(tx)
}

const DELIVERY_COLUMNS: &str =
    "tenant, webhook_id, entry, status, attempts, next_attempt_ns, last_status_code, last_error, created_ns, updated_ns";

fn delivery_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Delivery> {
    let status: String = r.get(3)?;
    let status = parse_status(&status).ok_or_else(|| corrupt("status"))?;
    let next: Option<i64> = r.get(5)?;
    Ok(Delivery {
        tenant_id: openqq_core::TenantId::parse(r.get::<_, String>(0)?).map_err(|_| corrupt("tenant"))?,
        webhook_id: WebhookId::parse(&r.get::<_, String>(1)?).ok_or_else(|| corrupt("webhook_id"))?,
        entry: serde_json::from_str(&r.get::<_, String>(2)?).map_err(|_| corrupt("entry"))?,
        status,
        attempts: r.get::<_, i64>(4)? as u32,
        next_attempt_at: next.filter(|_| status == DeliveryStatus::Pending).map(from_nanos),
        last_status_code: r.get::<_, Option<i64>>(6)?.map(|c| c as u16),
        last_error: r.get(7)?,
        created_at: from_nanos(r.get(8)?),
        updated_at: from_nanos(r.get(9)?),
    })
}

/// Claims due deliveries: at most `per_tenant` of each tenant (its oldest due) and `limit` in all
/// (oldest due first), each leased until `now + lease`, in one transaction.
pub(super) fn claim(
    conn: &mut Connection,
    now: DateTime<Utc>,
    lease: Duration,
    per_tenant: usize,
    limit: usize,
) -> PortResult<Vec<Delivery>> {
    if per_tenant == 0 || limit == 0 {
        return Ok(Vec::new());
    }
    let (at, until) = (nanos(now), lease_end(now, lease));
    let tx = begin_tx(conn)?;
    // Tenant by tenant (a skip over the pending index: one lookup for the next tenant with
    // pending deliveries, one range read of its oldest due), so a claim costs about a short read
    // per tenant with pending deliveries, however long one tenant's backlog is.
    let mut keys: Vec<(i64, String, String, i64)> = Vec::new();
    // `INDEXED BY`: the primary key also starts with the tenant, but walks delivered and dead
    // rows too, and would sort a tenant's whole backlog to find its oldest.
    let mut after = String::new();
    loop {
        let tenant: Option<String> = tx
            .prepare_cached(
                "SELECT tenant FROM deliveries INDEXED BY deliveries_pending \
                 WHERE status='pending' AND tenant > ?1 ORDER BY tenant LIMIT 1",
            )
            .and_then(|mut s| s.query_row(params![after], |r| r.get(0)).optional())
            .map_err(|e| sqlite_error("find due deliveries", e))?;
        let Some(tenant) = tenant else { break };
        let due: Vec<(i64, String, String, i64)> = tx
            .prepare_cached(
                "SELECT next_attempt_ns, tenant, webhook_id, seq FROM deliveries INDEXED BY deliveries_pending \
                 WHERE status='pending' AND tenant=?1 AND next_attempt_ns <= ?2 \
                 ORDER BY next_attempt_ns, webhook_id, seq LIMIT ?3",
            )
            .and_then(|mut s| {
                let share = per_tenant.min(i64::MAX as usize) as i64;
                s.query_map(params![tenant, at, share], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect()
            })
            .map_err(|e| sqlite_error("find due deliveries", e))?;
        keys.extend(due);
        after = tenant;
    }
    keys.sort();
    keys.truncate(limit);
    let keys = keys.into_iter().map(|(_, tenant, id, seq)| (tenant, id, seq));
    let mut claimed = Vec::new();
    for (tenant, id, seq) in keys {
        tx.prepare_cached("UPDATE deliveries SET next_attempt_ns=?4 WHERE tenant=?1 AND webhook_id=?2 AND seq=?3")
            .and_then(|mut s| s.execute(params![tenant, id, seq, until]))
            .map_err(|e| sqlite_error("claim delivery", e))?;
        let d = tx
            .prepare_cached(&format!(
                "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE tenant=?1 AND webhook_id=?2 AND seq=?3"
            ))
            .and_then(|mut s| s.query_row(params![tenant, id, seq], delivery_row))
            .map_err(|e| sqlite_error("read delivery", e))?;
        claimed.push(d);
    }
    commit_tx(tx)?;
    Ok(claimed)
}

/// Records one attempt of a pending delivery; a delivery that is gone or finished already is left
/// as it is (a late worker whose lease ran out cannot move a finished delivery back).
pub(super) fn finish(
    conn: &Connection,
    tenant: &str,
    id: &WebhookId,
    seq: u64,
    outcome: &AttemptOutcome,
    now: DateTime<Utc>,
) -> PortResult<()> {
    let (status, next, code, error) = outcome_fields(outcome);
    conn.prepare_cached(
        "UPDATE deliveries SET attempts=attempts+1, status=?4, next_attempt_ns=?5, last_status_code=?6, \
         last_error=?7, updated_ns=?8 WHERE tenant=?1 AND webhook_id=?2 AND seq=?3 AND status='pending'",
    )
    .and_then(|mut s| {
        s.execute(params![
            tenant,
            id.to_string(),
            i64::try_from(seq).unwrap_or(i64::MAX),
            status_text(status),
            next,
            code,
            error,
            nanos(now)
        ])
    })
    .map_err(|e| sqlite_error("finish attempt", e))?;
    Ok(())
}

pub(super) fn list_deliveries(
    conn: &Connection,
    tenant: &str,
    id: &WebhookId,
    cursor: Option<&str>,
    limit: usize,
) -> PortResult<Page<Delivery>> {
    let before = parse_delivery_cursor(cursor)?;
    let limit = limit.clamp(1, MAX_DELIVERY_PAGE);
    let mut items: Vec<Delivery> = conn
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE tenant=?1 AND webhook_id=?2 AND (?3 IS NULL OR seq < ?3) \
             ORDER BY seq DESC LIMIT ?4"
        ))
        .and_then(|mut s| {
            let before = before.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
            s.query_map(params![tenant, id.to_string(), before, limit as i64 + 1], delivery_row)?.collect()
        })
        .map_err(|e| sqlite_error("list deliveries", e))?;
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        items.last().map(|d| d.entry.seq.to_string())
    });
    Ok(Page { items, next: next.flatten() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_cut_at_a_character_boundary_within_its_limit() {
        let long = "é".repeat(MAX_DELIVERY_ERROR_BYTES);
        let cut = truncate_error(&long);
        assert!(cut.len() <= MAX_DELIVERY_ERROR_BYTES && cut.len() >= MAX_DELIVERY_ERROR_BYTES - 1, "{}", cut.len());
        assert!(cut.chars().all(|c| c == 'é'));
        let odd = format!("x{long}");
        assert_eq!(truncate_error(&odd).len(), MAX_DELIVERY_ERROR_BYTES - 1);
        assert_eq!(truncate_error("short"), "short");
    }

    #[test]
    fn times_keep_their_nanoseconds_through_storage() {
        let t = Utc::now();
        assert_eq!(from_nanos(nanos(t)), t);
    }
}
