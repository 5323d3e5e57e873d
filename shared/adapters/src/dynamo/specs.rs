//! Kept specifications on DynamoDB: one item per design in the tenant's partition
//! (`SPEC#<design>`), put on condition that no later revision's is there (see
//! `openqq_core::ports::KeptSpecs`). A specification is at most 64 KiB, far inside an item's
//! 400 KB; it is an item of its own rather than an attribute of the design's, so the design
//! item that every stage of a revision rewrites stays small.

use super::error::{classify, is_condition_failed};
use super::table::{key, n, s, tenant_pk, Attrs, PK};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use openqq_core::deletion::object_digests;
use openqq_core::ports::PortResult;
use openqq_core::{DesignId, KeptSpec, TenantId};

/// The attribute of a specification item that holds the digests every kept revision named.
pub(crate) const OBJECTS: &str = "objects";

fn spec_key(tenant: &TenantId, design: &DesignId) -> super::table::Item {
    key(tenant_pk(tenant), format!("SPEC#{design}"))
}

pub(crate) async fn keep(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    spec: &KeptSpec,
) -> PortResult<()> {
    // `objects` gathers what every kept revision named (a string set, added to), so a deleted
    // design's earlier netlists go with it.
    let objects: Vec<String> = object_digests(&spec.submission).into_iter().collect();
    let mut update = "SET #t = :t, #r = :r, #s = :s".to_owned();
    let mut request = client
        .update_item()
        .table_name(table)
        .set_key(Some(spec_key(tenant, design)))
        .condition_expression("attribute_not_exists(#pk) OR #r < :r")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#t", "item_type")
        .expression_attribute_names("#r", "revision")
        .expression_attribute_names("#s", "submission")
        .expression_attribute_values(":t", s("spec"))
        .expression_attribute_values(":r", n(spec.revision))
        .expression_attribute_values(":s", s(spec.submission.as_str()));
    if !objects.is_empty() {
        update.push_str(" ADD #o :o");
        request = request
            .expression_attribute_names("#o", OBJECTS)
            .expression_attribute_values(":o", AttributeValue::Ss(objects));
    }
    let out = request.update_expression(update).send().await;
    match out {
        Ok(_) => Ok(()),
        // The specification of this revision or a later one is kept already.
        Err(e) if is_condition_failed(&e) => Ok(()),
        Err(e) => Err(classify("keep a specification", e)),
    }
}

pub(crate) async fn kept(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
) -> PortResult<Option<KeptSpec>> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(spec_key(tenant, design)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| classify("read a kept specification", e))?;
    // A deleted design's specification is a tombstone.
    let Some(item) = out.item.filter(|i| !super::deletes::is_tombstone(i)) else { return Ok(None) };
    Ok(Some(KeptSpec { revision: item.num("revision")?, submission: item.str_attr("submission")?.to_owned() }))
}
