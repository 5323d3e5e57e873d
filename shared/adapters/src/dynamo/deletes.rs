//! Deleting a design on DynamoDB (see `openqq_core::deletion`).
//!
//! The design item becomes the tombstone: the same key, only ids, the revision, the write counter
//! moved on, and `deleted_at`. So a deletion costs the hot path nothing: every write of a design
//! reads (or conditions on) its design item anyway, and a tombstone there plans as stale
//! (`apply`, `apply_batch`), fails a first write's "no item yet" condition, and fails every
//! update's write-counter condition. Reads treat a tombstone as no design.
//!
//! The tombstones carry the TTL attribute: the deletion plus the tombstone retention.
//!
//! One transaction puts the tombstone (on condition the design did not move since it was read),
//! replaces the accepted-revision marker and the kept specification with tombstones of their
//! own (the key and `deleted_at`: nothing the tenant submitted), and appends the
//! `design.deleted` feed entry with its deliveries. Then the design's own partition (timeline,
//! applied markers, reports: any number of items) is deleted a page at a time; a deletion cut off
//! there is finished by the next `DELETE` of the design, which answers 404 as for any deleted
//! design.

use super::feed::{expires_at, expiring, try_append, Appended};
use super::reads::{each_projected, get_item, prefix_range};
use super::specs::OBJECTS;
use super::table::{accepted_sk, design_pk, design_sk, key, n, s, tenant_pk, Attrs, Item, REPORT_PREFIX, SK};
use super::transact::{back_off, delete_partition};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use openqq_core::deletion::{object_digests, own_full_report, Deleted, Deletion};
use openqq_core::ports::PortResult;
use openqq_core::{DesignId, EventKind, NewFeedEntry, PortError, TenantId, TimelineEntry};
use std::collections::BTreeSet;
use std::time::Duration;

/// The attribute that makes a design item a tombstone.
pub(crate) const DELETED_AT: &str = "deleted_at";

/// The sort-key prefix of kept specifications (`SPEC#{design}`).
const SPEC_PREFIX: &str = "SPEC#";

/// Reads and writes at most this many times when the design keeps moving meanwhile.
const MAX_ATTEMPTS: u32 = 16;

/// The digests a specification item's `objects` set holds (every kept revision's).
fn named_objects(item: &Item) -> Vec<String> {
    item.get(OBJECTS).and_then(|v| v.as_ss().ok()).cloned().unwrap_or_default()
}

/// Whether a design item is a tombstone.
pub(crate) fn is_tombstone(item: &Item) -> bool {
    item.contains_key(DELETED_AT)
}

pub(crate) async fn delete(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    deletion: &Deletion,
    (feed_retention, tombstone_retention): (Duration, Duration),
) -> PortResult<Option<Deleted>> {
    // The tombstones expire together, `tombstone_retention` after the deletion.
    let expires = expires_at(deletion.occurred_at, tombstone_retention);
    for attempt in 0..MAX_ATTEMPTS {
        let Some(item) = get_item(client, table, tenant_pk(tenant), design_sk(design)).await? else {
            return Ok(None);
        };
        if is_tombstone(&item) {
            delete_partition(client, table, design_pk(tenant, design), "delete a design's items").await?;
            return Ok(None);
        }
        let (revision, seq) = (item.num("revision")?, item.num("seq")?);
        let objects = only_its_objects(client, table, tenant, design).await?;
        let entry = TimelineEntry {
            event_id: deletion.event_id,
            kind: EventKind::DesignDeleted,
            revision,
            correlation_id: deletion.correlation_id.clone(),
            occurred_at: deletion.occurred_at,
        };
        let new = NewFeedEntry { design_id: design, entry: &entry, verdict: None, elapsed_ms: None, batch: None };
        let extra = removal(table, tenant, design, deletion, (revision, seq), expires);
        match try_append(client, table, tenant, &new, feed_retention, extra).await? {
            Appended::New(entry_seq) => {
                delete_partition(client, table, design_pk(tenant, design), "delete a design's items").await?;
                return Ok(Some(Deleted { revision, seq: entry_seq, objects }));
            }
            // A write of the design, or another append, came between: read again.
            Appended::LostRace | Appended::Existing(_) => back_off(attempt).await,
        }
    }
    Err(PortError::Unavailable(
        format!("the deletion of design {design} lost the race to other writers {MAX_ATTEMPTS} times in a row").into(),
    ))
}

/// The tombstone in place of the design item (at the `revision` and write counter `seq` read, on
/// condition of that counter), and tombstones in place of the accepted-revision marker and the
/// kept specification; all three carry the TTL attribute `expires`.
fn removal(
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
    deletion: &Deletion,
    (revision, seq): (u64, u64),
    expires: u64,
) -> Vec<TransactWriteItem> {
    let mut tombstone = expiring(key(tenant_pk(tenant), design_sk(design)), expires);
    tombstone.extend([
        ("item_type".to_owned(), s("deleted_design")),
        ("design_id".to_owned(), s(design.as_str())),
        ("revision".to_owned(), n(revision)),
        ("seq".to_owned(), n(seq + 1)),
        (DELETED_AT.to_owned(), s(deletion.occurred_at.to_rfc3339())),
        ("correlation_id".to_owned(), s(deletion.correlation_id.as_str())),
    ]);
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(tombstone))
        .condition_expression("#seq = :seq AND attribute_not_exists(#deleted)")
        .expression_attribute_names("#seq", "seq")
        .expression_attribute_names("#deleted", DELETED_AT)
        .expression_attribute_values(":seq", n(seq))
        .build()
        .expect("table and item are set");
    // The marker and the specification give way to tombstones of their own: with no revision,
    // they fail the conditions of a late marker or specification (a revision that raced the
    // deletion), which would otherwise show the design again or keep what it submitted.
    let gone = |sk: String, item_type: &str| {
        let mut item = expiring(key(tenant_pk(tenant), sk), expires);
        item.extend([
            ("item_type".to_owned(), s(item_type)),
            (DELETED_AT.to_owned(), s(deletion.occurred_at.to_rfc3339())),
        ]);
        let put = Put::builder().table_name(table).set_item(Some(item)).build().expect("table and item are set");
        TransactWriteItem::builder().put(put).build()
    };
    vec![
        TransactWriteItem::builder().put(put).build(),
        gone(accepted_sk(design), "deleted_marker"),
        gone(format!("{SPEC_PREFIX}{design}"), "deleted_spec"),
    ]
}

/// The objects the design's kept specifications (every revision's) and its reports' full reports
/// name that no other design's kept specifications name: one query of the design's reports, one
/// read of its specification, one query of the tenant's specifications.
async fn only_its_objects(
    client: &Client,
    table: &str,
    tenant: &TenantId,
    design: &DesignId,
) -> PortResult<BTreeSet<String>> {
    let mut objects = BTreeSet::new();
    let range = prefix_range(REPORT_PREFIX);
    each_projected(client, table, design_pk(tenant, design), range, &["report"], None, "read reports", |item| {
        objects.extend(own_full_report(item.opt_str("report").unwrap_or_default(), design));
        Ok(())
    })
    .await?;
    let own = format!("{SPEC_PREFIX}{design}");
    if let Some(spec) = get_item(client, table, tenant_pk(tenant), own.clone()).await? {
        objects.extend(object_digests(spec.opt_str("submission").unwrap_or_default()));
        objects.extend(named_objects(&spec));
    }
    if objects.is_empty() {
        return Ok(objects);
    }
    // Each other specification is looked at as it arrives, so memory holds one page at a time.
    let range = prefix_range(SPEC_PREFIX);
    let attributes = [SK, "submission", OBJECTS];
    each_projected(client, table, tenant_pk(tenant), range, &attributes, None, "read kept specifications", |item| {
        if item.opt_str(SK) == Some(own.as_str()) {
            return Ok(());
        }
        for digest in named_objects(item) {
            objects.remove(&digest);
        }
        // A specification kept before `objects` was recorded names its objects only in its text.
        let text = item.opt_str("submission").unwrap_or_default();
        if objects.iter().any(|d| text.contains(d.as_str())) {
            for digest in object_digests(text) {
                objects.remove(&digest);
            }
        }
        Ok(())
    })
    .await?;
    Ok(objects)
}
