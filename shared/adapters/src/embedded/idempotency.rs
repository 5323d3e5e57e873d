//! Idempotency keys of the embedded store: one row per (tenant, key) with the request's
//! fingerprint, `pending` while its request is handled and `done` with the response after, and an
//! expiry (the lease while pending, the replay window once done). Expired rows are ignored, and
//! purged a few at a time by each claim.

use super::db::sqlite_error;
use openqq_core::ports::PortResult;
use openqq_core::{IdempotencyClaim, KeptResponse};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::time::Duration;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant TEXT NOT NULL, key TEXT NOT NULL, fingerprint BLOB NOT NULL, state TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL, status INTEGER, headers TEXT, body BLOB,
    PRIMARY KEY (tenant, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_keys_by_expiry ON idempotency_keys (expires_at_ms);
";

/// Expired rows one claim deletes at most, so a claim's cost stays bounded however many keys
/// expired at once.
const PURGE_BATCH: i64 = 64;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn later(now: i64, d: Duration) -> i64 {
    now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

type Row = (Vec<u8>, String, Option<i64>, Option<String>, Option<Vec<u8>>);

pub(super) fn claim(
    conn: &mut Connection,
    tenant: &str,
    key: &str,
    fingerprint: &[u8; 32],
    lease: Duration,
) -> PortResult<IdempotencyClaim> {
    let now = now_ms();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| sqlite_error("begin", e))?;
    tx.prepare_cached(
        "DELETE FROM idempotency_keys WHERE (tenant, key) IN \
         (SELECT tenant, key FROM idempotency_keys WHERE expires_at_ms <= ?1 ORDER BY expires_at_ms LIMIT ?2)",
    )
    .and_then(|mut s| s.execute(params![now, PURGE_BATCH]))
    .map_err(|e| sqlite_error("purge idempotency keys", e))?;
    let found: Option<Row> = tx
        .prepare_cached(
            "SELECT fingerprint, state, status, headers, body FROM idempotency_keys \
             WHERE tenant=?1 AND key=?2 AND expires_at_ms > ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![tenant, key, now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                .optional()
        })
        .map_err(|e| sqlite_error("read idempotency key", e))?;
    let outcome = match found {
        None => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO idempotency_keys(tenant, key, fingerprint, state, expires_at_ms) \
                 VALUES (?1, ?2, ?3, 'pending', ?4)",
            )
            .and_then(|mut s| s.execute(params![tenant, key, &fingerprint[..], later(now, lease)]))
            .map_err(|e| sqlite_error("claim idempotency key", e))?;
            IdempotencyClaim::Claimed
        }
        Some((fp, _, _, _, _)) if fp != fingerprint[..] => IdempotencyClaim::Mismatch,
        Some((_, state, _, _, _)) if state == "pending" => IdempotencyClaim::InProgress,
        Some((_, _, status, headers, body)) => {
            IdempotencyClaim::Completed(KeptResponse::from_kept(status, headers.as_deref(), body.unwrap_or_default())?)
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

pub(super) fn release(conn: &Connection, tenant: &str, key: &str, fingerprint: &[u8; 32]) -> PortResult<()> {
    conn.prepare_cached(
        "DELETE FROM idempotency_keys WHERE tenant=?1 AND key=?2 AND fingerprint=?3 AND state='pending'",
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
        let done = KeptResponse { status: 202, headers: vec![], body: b"{}".to_vec() };
        for i in 0..10 {
            let key = format!("k{i}");
            claim(&mut conn, "other", &key, &[1; 32], Duration::from_secs(60)).unwrap();
            complete(&conn, "other", &key, &[1; 32], &done, Duration::ZERO).unwrap();
        }
        claim(&mut conn, "live", "k", &[2; 32], Duration::from_secs(60)).unwrap();
        let rows: i64 = conn.query_row("SELECT COUNT(*) FROM idempotency_keys", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1, "only the live claim is left");
    }
}
