//! Idempotency keys of the embedded store: one row per (tenant, key) with the request's
//! fingerprint, the name its first claim gave, and its state: `pending` while its request is
//! handled (until `lease_until_ms`), `released` when it failed, `done` with the response after.
//! A row expires (`expires_at_ms`) a window after its claim, or after its completion; expired rows
//! are ignored, and purged a few at a time by each claim.

use super::db::sqlite_error;
use openqq_core::ports::PortResult;
use openqq_core::{IdempotencyClaim, KeptResponse, KeyClaim};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::time::Duration;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant TEXT NOT NULL, key TEXT NOT NULL, fingerprint BLOB NOT NULL, state TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL, status INTEGER, headers TEXT, body BLOB,
    PRIMARY KEY (tenant, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_keys_by_expiry ON idempotency_keys (expires_at_ms);
";

/// Columns added since the table was first created (`migrate` adds them to an older one): the
/// end of a pending claim's lease (a row without one was written when `expires_at_ms` was the
/// lease) and the name the first claim gave.
pub(super) const ADDED_COLUMNS: [(&str, &str); 2] = [("lease_until_ms", "INTEGER"), ("name", "TEXT")];

/// Expired rows one claim deletes at most, so a claim's cost stays bounded however many keys
/// expired at once.
const PURGE_BATCH: i64 = 64;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn later(now: i64, d: Duration) -> i64 {
    now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A live row: fingerprint, state, lease end, name, and the kept response.
struct Held {
    fingerprint: Vec<u8>,
    state: String,
    lease_until: i64,
    name: Option<String>,
    status: Option<i64>,
    headers: Option<String>,
    body: Option<Vec<u8>>,
}

pub(super) fn claim(
    conn: &mut Connection,
    tenant: &str,
    key: &str,
    claim: &KeyClaim<'_>,
) -> PortResult<IdempotencyClaim> {
    let now = now_ms();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| sqlite_error("begin", e))?;
    tx.prepare_cached(
        "DELETE FROM idempotency_keys WHERE (tenant, key) IN \
         (SELECT tenant, key FROM idempotency_keys WHERE expires_at_ms <= ?1 ORDER BY expires_at_ms LIMIT ?2)",
    )
    .and_then(|mut s| s.execute(params![now, PURGE_BATCH]))
    .map_err(|e| sqlite_error("purge idempotency keys", e))?;
    let found: Option<Held> = tx
        .prepare_cached(
            "SELECT fingerprint, state, COALESCE(lease_until_ms, expires_at_ms), name, status, headers, body \
             FROM idempotency_keys WHERE tenant=?1 AND key=?2 AND expires_at_ms > ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![tenant, key, now], |r| {
                Ok(Held {
                    fingerprint: r.get(0)?,
                    state: r.get(1)?,
                    lease_until: r.get(2)?,
                    name: r.get(3)?,
                    status: r.get(4)?,
                    headers: r.get(5)?,
                    body: r.get(6)?,
                })
            })
            .optional()
        })
        .map_err(|e| sqlite_error("read idempotency key", e))?;
    let same = |held: &Held| held.fingerprint == claim.fingerprint[..];
    // An unfinished claim no longer holds the key once released or past its lease.
    let free = |held: &Held| held.state == "released" || (held.state == "pending" && held.lease_until <= now);
    let outcome = match found {
        Some(held) if held.state == "done" && same(&held) => IdempotencyClaim::Completed(KeptResponse::from_kept(
            held.status,
            held.headers.as_deref(),
            held.body.unwrap_or_default(),
        )?),
        Some(held) if !free(&held) => match same(&held) {
            true => IdempotencyClaim::InProgress,
            false => IdempotencyClaim::Mismatch,
        },
        found => {
            // The same request again keeps its first name; anything else starts afresh.
            let name = match found {
                Some(held) if same(&held) => held.name.unwrap_or_else(|| claim.name.to_owned()),
                _ => claim.name.to_owned(),
            };
            tx.prepare_cached(
                "INSERT OR REPLACE INTO idempotency_keys(tenant, key, fingerprint, state, expires_at_ms, \
                 lease_until_ms, name) VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    tenant,
                    key,
                    &claim.fingerprint[..],
                    later(now, claim.keep.max(claim.lease)),
                    later(now, claim.lease),
                    name
                ])
            })
            .map_err(|e| sqlite_error("claim idempotency key", e))?;
            IdempotencyClaim::Claimed { name }
        }
    };
    tx.commit().map_err(|e| sqlite_error("commit", e))?;
    Ok(outcome)
}

pub(super) fn complete(
    conn: &Connection,
    tenant: &str,
    key: &str,
    fingerprint: &[u8; 32],
    response: &KeptResponse,
    ttl: Duration,
) -> PortResult<()> {
    let headers = response.headers_to_keep()?;
    conn.prepare_cached(
        "UPDATE idempotency_keys SET state='done', status=?4, headers=?5, body=?6, expires_at_ms=?7 \
         WHERE tenant=?1 AND key=?2 AND fingerprint=?3 AND state='pending'",
    )
    .and_then(|mut s| {
        s.execute(params![
            tenant,
            key,
            &fingerprint[..],
            response.status as i64,
            headers,
            response.body,
            later(now_ms(), ttl)
        ])
    })
    .map_err(|e| sqlite_error("complete idempotency key", e))?;
    Ok(())
}

/// Marks the request's pending claim released: the key is free, and the row keeps the claim's
/// name for a retry of the same request until it expires.
pub(super) fn release(conn: &Connection, tenant: &str, key: &str, fingerprint: &[u8; 32]) -> PortResult<()> {
    conn.prepare_cached(
        "UPDATE idempotency_keys SET state='released' \
         WHERE tenant=?1 AND key=?2 AND fingerprint=?3 AND state='pending'",
    )
    .and_then(|mut s| s.execute(params![tenant, key, &fingerprint[..]]))
    .map_err(|e| sqlite_error("release idempotency key", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_purges_expired_keys_of_every_tenant() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        for (column, kind) in ADDED_COLUMNS {
            conn.execute_batch(&format!("ALTER TABLE idempotency_keys ADD COLUMN {column} {kind}")).unwrap();
        }
        let done = KeptResponse { status: 202, headers: vec![], body: b"{}".to_vec() };
        let held = |fingerprint| KeyClaim {
            fingerprint,
            lease: Duration::from_secs(60),
            keep: Duration::from_secs(60),
            name: "n",
        };
        for i in 0..10 {
            let key = format!("k{i}");
            claim(&mut conn, "other", &key, &held(&[1; 32])).unwrap();
            complete(&conn, "other", &key, &[1; 32], &done, Duration::ZERO).unwrap();
        }
        claim(&mut conn, "live", "k", &held(&[2; 32])).unwrap();
        let rows: i64 = conn.query_row("SELECT COUNT(*) FROM idempotency_keys", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1, "only the live claim is left");
    }
}
