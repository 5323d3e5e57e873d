//! Idempotency keys on DynamoDB: one item per (tenant, key) in the tenant's partition with the
//! request's fingerprint, the name its first claim gave, and its state: `pending` while its
//! request is handled (until `lease_until_ms`), `released` when it failed, `done` with the
//! response after. Each has an exact expiry in milliseconds (a window after its claim, or after
//! its completion). Expired items are ignored by every read and overwritten by the next claim;
//! the table's TTL deletes them some time later (DynamoDB deletes within days, so nothing relies
//! on it).

use super::error::{classify, is_condition_failed};
use super::table::{idempotency_sk, key, n, s, tenant_pk, Attrs, Item, PK, TTL};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use openqq_core::ports::PortResult;
use openqq_core::{IdempotencyClaim, IdempotencyKey, KeptResponse, KeyClaim, PortError, TenantId};
use std::time::Duration;

/// Claims tried at most, when each one finds the key changed by another claim meanwhile.
const MAX_CLAIM_ATTEMPTS: u32 = 8;

fn now_ms() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0)
}

fn later(now: u64, d: Duration) -> u64 {
    now.saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The TTL attribute's value for an exact expiry: whole seconds, rounded up.
fn ttl_seconds(expires_at_ms: u64) -> u64 {
    expires_at_ms.div_ceil(1000)
}

fn fingerprint_of(item: &Item) -> Option<&[u8]> {
    item.get("fingerprint").and_then(|v| v.as_b().ok()).map(|b| b.as_ref())
}

/// The end of a pending claim's lease (an item without one was written when `expires_at_ms` was
/// the lease).
fn lease_until(item: &Item) -> PortResult<u64> {
    Ok(item.opt_num("lease_until_ms")?.map_or(item.num("expires_at_ms")?, |l| l))
}

pub(crate) async fn claim(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    k: &IdempotencyKey,
    claim: &KeyClaim<'_>,
) -> PortResult<IdempotencyClaim> {
    for _ in 0..MAX_CLAIM_ATTEMPTS {
        let now = now_ms();
        let pending = |name: &str| {
            let expires = later(now, claim.keep.max(claim.lease));
            let mut item = key(tenant_pk(tenant), idempotency_sk(k.as_str()));
            item.extend([
                ("item_type".to_owned(), s("idempotency")),
                ("fingerprint".to_owned(), AttributeValue::B(Blob::new(claim.fingerprint.to_vec()))),
                ("state".to_owned(), s("pending")),
                ("name".to_owned(), s(name)),
                ("lease_until_ms".to_owned(), n(later(now, claim.lease))),
                ("expires_at_ms".to_owned(), n(expires)),
                (TTL.to_owned(), n(ttl_seconds(expires))),
            ]);
            item
        };
        // Free when absent or past its lifetime.
        let put = client
            .put_item()
            .table_name(table)
            .set_item(Some(pending(claim.name)))
            .condition_expression("attribute_not_exists(#pk) OR #x <= :now")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#x", "expires_at_ms")
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match put {
            Ok(_) => return Ok(IdempotencyClaim::Claimed { name: claim.name.to_owned() }),
            Err(e) if is_condition_failed(&e) => {}
            Err(e) => return Err(classify("claim idempotency key", e)),
        }
        let out = client
            .get_item()
            .table_name(table)
            .set_key(Some(key(tenant_pk(tenant), idempotency_sk(k.as_str()))))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| classify("read idempotency key", e))?;
        let Some(held) = out.item.filter(|i| !i.is_empty()) else { continue };
        let now = now_ms();
        if held.num("expires_at_ms")? <= now {
            continue;
        }
        let same = fingerprint_of(&held) == Some(&claim.fingerprint[..]);
        let state = held.str_attr("state")?;
        let free = state == "released" || (state == "pending" && lease_until(&held)? <= now);
        match (state, free, same) {
            ("done", _, true) => return Ok(IdempotencyClaim::Completed(kept(&held)?)),
            (_, false, true) => return Ok(IdempotencyClaim::InProgress),
            (_, false, false) => return Ok(IdempotencyClaim::Mismatch),
            _ => {}
        }
        // An unfinished claim that no longer holds the key: taken over, on condition that it is
        // still the one just read. The same request again keeps its first name.
        let name = match (same, held.opt_str("name")) {
            (true, Some(name)) => name.to_owned(),
            _ => claim.name.to_owned(),
        };
        let take = client
            .put_item()
            .table_name(table)
            .set_item(Some(pending(&name)))
            .expression_attribute_names("#st", "state")
            .expression_attribute_names("#x", "expires_at_ms")
            .expression_attribute_names("#l", "lease_until_ms")
            .expression_attribute_values(":st", s(state))
            .expression_attribute_values(":x", n(held.num("expires_at_ms")?));
        let take = match held.opt_num("lease_until_ms")? {
            Some(lease) => take
                .condition_expression("#st = :st AND #x = :x AND #l = :l")
                .expression_attribute_values(":l", n(lease)),
            None => take.condition_expression("#st = :st AND #x = :x AND attribute_not_exists(#l)"),
        }
        .send()
        .await;
        match take {
            Ok(_) => return Ok(IdempotencyClaim::Claimed { name }),
            Err(e) if is_condition_failed(&e) => {}
            Err(e) => return Err(classify("claim idempotency key", e)),
        }
    }
    Err(PortError::Unavailable(
        format!("claiming an idempotency key lost the race to other requests {MAX_CLAIM_ATTEMPTS} times in a row")
            .into(),
    ))
}

fn kept(item: &Item) -> PortResult<KeptResponse> {
    let status = item.num("status").ok().and_then(|s| i64::try_from(s).ok());
    let body = item.get("body").and_then(|v| v.as_b().ok()).map(|b| b.as_ref().to_vec()).unwrap_or_default();
    KeptResponse::from_kept(status, item.opt_str("headers"), body)
}

pub(crate) async fn complete(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    k: &IdempotencyKey,
    fingerprint: &[u8; 32],
    response: &KeptResponse,
    ttl: Duration,
) -> PortResult<()> {
    let headers = response.headers_to_keep()?;
    let expires = later(now_ms(), ttl);
    let done = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), idempotency_sk(k.as_str()))))
        .update_expression("SET #st = :done, #status = :status, #h = :h, #b = :b, #x = :x, #ttl = :ttl")
        .condition_expression("#fp = :fp AND #st = :pending")
        .expression_attribute_names("#st", "state")
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#h", "headers")
        .expression_attribute_names("#b", "body")
        .expression_attribute_names("#x", "expires_at_ms")
        .expression_attribute_names("#ttl", TTL)
        .expression_attribute_names("#fp", "fingerprint")
        .expression_attribute_values(":done", s("done"))
        .expression_attribute_values(":pending", s("pending"))
        .expression_attribute_values(":status", n(u64::from(response.status)))
        .expression_attribute_values(":h", s(headers))
        .expression_attribute_values(":b", AttributeValue::B(Blob::new(response.body.clone())))
        .expression_attribute_values(":x", n(expires))
        .expression_attribute_values(":ttl", n(ttl_seconds(expires)))
        .expression_attribute_values(":fp", AttributeValue::B(Blob::new(fingerprint.to_vec())))
        .send()
        .await;
    match done {
        // Not this request's claim any more (its lease ran out and another took it), or done.
        Err(e) if is_condition_failed(&e) => Ok(()),
        Err(e) => Err(classify("complete idempotency key", e)),
        Ok(_) => Ok(()),
    }
}

pub(crate) async fn release(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    k: &IdempotencyKey,
    fingerprint: &[u8; 32],
) -> PortResult<()> {
    // Kept, released: the key is free, and a retry of the same request keeps the claim's name.
    let released = client
        .update_item()
        .table_name(table)
        .set_key(Some(key(tenant_pk(tenant), idempotency_sk(k.as_str()))))
        .update_expression("SET #st = :released")
        .condition_expression("#fp = :fp AND #st = :pending")
        .expression_attribute_names("#st", "state")
        .expression_attribute_names("#fp", "fingerprint")
        .expression_attribute_values(":pending", s("pending"))
        .expression_attribute_values(":released", s("released"))
        .expression_attribute_values(":fp", AttributeValue::B(Blob::new(fingerprint.to_vec())))
        .send()
        .await;
    match released {
        // A completed key, or another request's claim, is kept.
        Err(e) if is_condition_failed(&e) => Ok(()),
        Err(e) => Err(classify("release idempotency key", e)),
        Ok(_) => Ok(()),
    }
}
