//! Daily budgets of the embedded store: one row per tenant and budget day with what was spent,
//! charged with one conditional upsert (see `openqq_core::budget`). The table keeps its first
//! name, and its `day` column holds the budget's key (`Budget::key`): the day itself for
//! generation tokens, `log-bytes/<day>` for event-log bytes.

use super::db::sqlite_error;
use openqq_core::ports::PortResult;
use openqq_core::Charge;
use rusqlite::{params, Connection, OptionalExtension};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS token_budgets (
    tenant TEXT NOT NULL, day TEXT NOT NULL, spent INTEGER NOT NULL,
    PRIMARY KEY (tenant, day)) WITHOUT ROWID;
";

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn spent(conn: &Connection, tenant: &str, day: &str) -> PortResult<u64> {
    conn.prepare_cached("SELECT spent FROM token_budgets WHERE tenant=?1 AND day=?2")
        .and_then(|mut s| s.query_row(params![tenant, day], |r| r.get::<_, i64>(0)).optional())
        .map(|n| n.unwrap_or(0).max(0) as u64)
        .map_err(|e| sqlite_error("read tokens spent", e))
}

/// Adds `tokens` when the total stays at or under `limit`, in one statement.
pub(super) fn charge(conn: &Connection, tenant: &str, day: &str, tokens: u64, limit: u64) -> PortResult<Charge> {
    let changed = conn
        .prepare_cached(
            "INSERT INTO token_budgets(tenant, day, spent) SELECT ?1, ?2, ?3 WHERE ?3 <= ?4 \
             ON CONFLICT(tenant, day) DO UPDATE SET spent = spent + excluded.spent \
             WHERE token_budgets.spent + excluded.spent <= ?4",
        )
        .and_then(|mut s| s.execute(params![tenant, day, as_i64(tokens), as_i64(limit)]))
        .map_err(|e| sqlite_error("charge tokens", e))?;
    let spent = spent(conn, tenant, day)?;
    Ok(if changed == 1 { Charge::Charged { spent } } else { Charge::Refused { spent } })
}

pub(super) fn refund(conn: &Connection, tenant: &str, day: &str, tokens: u64) -> PortResult<()> {
    conn.prepare_cached("UPDATE token_budgets SET spent = MAX(spent - ?3, 0) WHERE tenant=?1 AND day=?2")
        .and_then(|mut s| s.execute(params![tenant, day, as_i64(tokens)]))
        .map_err(|e| sqlite_error("refund tokens", e))?;
    Ok(())
}
