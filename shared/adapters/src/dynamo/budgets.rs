//! Daily budgets on DynamoDB: one item per tenant and budget day in the tenant's partition
//! (`B#<key>`, the budget's key: `B#2026-12-02` for generation tokens, `B#log-bytes/2026-12-02`
//! for event-log bytes), its `spent` raised by an `ADD` conditional on the limit, so concurrent
//! charges from any number of functions never pass it together (see `openqq_core::budget`).

use super::error::{classify, is_condition_failed};
use super::table::{key, n, tenant_pk, Attrs};
use aws_sdk_dynamodb::Client;
use openqq_core::ports::PortResult;
use openqq_core::{Charge, TenantId};

fn budget_key(tenant: &TenantId, day: &str) -> super::table::Item {
    key(tenant_pk(tenant), format!("B#{day}"))
}

pub(crate) async fn spent(client: &Client, table: &str, tenant: &TenantId, day: &str) -> PortResult<u64> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(budget_key(tenant, day)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| classify("read tokens spent", e))?;
    Ok(match out.item {
        Some(item) => item.opt_num("spent")?.unwrap_or(0),
        None => 0,
    })
}

pub(crate) async fn charge(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    day: &str,
    tokens: u64,
    limit: u64,
) -> PortResult<Charge> {
    let Some(room) = limit.checked_sub(tokens) else {
        return Ok(Charge::Refused { spent: spent(client, table, tenant, day).await? });
    };
    let out = client
        .update_item()
        .table_name(table)
        .set_key(Some(budget_key(tenant, day)))
        .update_expression("ADD #spent :n SET #type = :type")
        .condition_expression("attribute_not_exists(#spent) OR #spent <= :room")
        .expression_attribute_names("#spent", "spent")
        .expression_attribute_names("#type", "item_type")
        .expression_attribute_values(":n", n(tokens))
        .expression_attribute_values(":room", n(room))
        .expression_attribute_values(":type", super::table::s("token_budget"))
        // All of the item: a charge of nothing (what syncing a count that did not grow sends)
        // changes no attribute, and the updated ones alone could leave `spent` out.
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
        .send()
        .await;
    match out {
        Ok(out) => Ok(Charge::Charged { spent: out.attributes.unwrap_or_default().num("spent")? }),
        Err(e) if is_condition_failed(&e) => Ok(Charge::Refused { spent: spent(client, table, tenant, day).await? }),
        Err(e) => Err(classify("charge tokens", e)),
    }
}

pub(crate) async fn refund(client: &Client, table: &str, tenant: &TenantId, day: &str, tokens: u64) -> PortResult<()> {
    // Subtract when there is that much; otherwise the total goes to zero (never below).
    let subtract = client
        .update_item()
        .table_name(table)
        .set_key(Some(budget_key(tenant, day)))
        .update_expression("SET #spent = #spent - :n")
        .condition_expression("#spent >= :n")
        .expression_attribute_names("#spent", "spent")
        .expression_attribute_values(":n", n(tokens))
        .send()
        .await;
    match subtract {
        Ok(_) => Ok(()),
        Err(e) if is_condition_failed(&e) => {
            let zero = client
                .update_item()
                .table_name(table)
                .set_key(Some(budget_key(tenant, day)))
                .update_expression("SET #spent = :zero")
                .condition_expression("#spent < :n")
                .expression_attribute_names("#spent", "spent")
                .expression_attribute_values(":n", n(tokens))
                .expression_attribute_values(":zero", n(0))
                .send()
                .await;
            match zero {
                Ok(_) => Ok(()),
                // Absent (nothing was charged), or charged meanwhile so the subtraction would
                // now fit: try the whole refund once more.
                Err(e) if is_condition_failed(&e) => {
                    if spent(client, table, tenant, day).await? >= tokens {
                        Box::pin(refund(client, table, tenant, day, tokens)).await
                    } else {
                        Ok(())
                    }
                }
                Err(e) => Err(classify("refund tokens", e)),
            }
        }
        Err(e) => Err(classify("refund tokens", e)),
    }
}
