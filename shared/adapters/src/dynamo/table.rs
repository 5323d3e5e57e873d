//! The one table: its keys, item types and attribute names, and its definition, which
//! [`create_table_if_missing`] creates against a local endpoint and the deployment template
//! declares the same way (docs/DYNAMODB.md).
//!
//! A partition per tenant, per design, per tenant's feed and per webhook:
//!
//! | item         | `pk`                | `sk`                       |
//! |--------------|---------------------|----------------------------|
//! | design       | `T#{tenant}`        | `D#{design}`               |
//! | accepted     | `T#{tenant}`        | `A#{design}`               |
//! | kept spec    | `T#{tenant}`        | `SPEC#{design}`            |
//! | idempotency  | `T#{tenant}`        | `I#{key}`                  |
//! | webhook      | `T#{tenant}`        | `W#{webhook}`              |
//! | webhook count| `T#{tenant}`        | `WH`                       |
//! | entry        | `T#{tenant}#D#{d}`  | `E#{seq:016}` (applied order) |
//! | applied      | `T#{tenant}#D#{d}`  | `K#{kind}#{revision:020}`  |
//! | report       | `T#{tenant}#D#{d}`  | `R#{revision:020}`         |
//! | feed head    | `T#{tenant}#F`      | `H`                        |
//! | feed entry   | `T#{tenant}#F`      | `F#{seq:020}`              |
//! | feed once    | `T#{tenant}#F`      | `U#{design}#{kind}#{revision:020}` |
//! | delivery     | `T#{tenant}#W#{wh}` | `S#{seq:020}`              |
//!
//! A deleted design's item stays as its tombstone (`deleted_at`, no status): see `deletes.rs`.
//!
//! Tenant, design and webhook ids never contain `#` (see `openqq_core::ids`), so keys cannot
//! collide. Pending deliveries are also in the sparse index [`DUE_INDEX`].

use super::error::classify;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, KeySchemaElement, KeyType, Projection, ProjectionType, ScalarAttributeType,
    TableStatus, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;
use openqq_core::ports::PortResult;
use openqq_core::{DesignId, EventKind, PortError, TenantId, WebhookId};
use std::collections::HashMap;
use std::time::Duration;

pub(crate) const PK: &str = "pk";
pub(crate) const SK: &str = "sk";
/// The TTL attribute (epoch seconds): DynamoDB deletes an item some time after it passes.
/// Reads never rely on the deletion: expiring items carry their exact expiry too.
pub(crate) const TTL: &str = "expires_at";

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn tenant_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}")
}

pub(crate) fn design_pk(tenant: &TenantId, design: &DesignId) -> String {
    format!("T#{tenant}#D#{design}")
}

pub(crate) const DESIGN_PREFIX: &str = "D#";
pub(crate) const ACCEPTED_PREFIX: &str = "A#";
pub(crate) const ENTRY_PREFIX: &str = "E#";
pub(crate) const REPORT_PREFIX: &str = "R#";

pub(crate) fn design_sk(design: &DesignId) -> String {
    format!("{DESIGN_PREFIX}{design}")
}

pub(crate) fn accepted_sk(design: &DesignId) -> String {
    format!("{ACCEPTED_PREFIX}{design}")
}

pub(crate) fn idempotency_sk(key: &str) -> String {
    format!("I#{key}")
}

pub(crate) fn entry_sk(seq: u64) -> String {
    format!("{ENTRY_PREFIX}{seq:016}")
}

pub(crate) fn applied_sk(kind: EventKind, revision: u64) -> String {
    format!("K#{}#{revision:020}", kind.as_str())
}

pub(crate) fn report_sk(revision: u64) -> String {
    format!("{REPORT_PREFIX}{revision:020}")
}

pub(crate) fn feed_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#F")
}

pub(crate) const FEED_HEAD_SK: &str = "H";

pub(crate) fn feed_head_key(tenant: &TenantId) -> Item {
    key(feed_pk(tenant), FEED_HEAD_SK.to_owned())
}
pub(crate) const FEED_PREFIX: &str = "F#";

pub(crate) fn feed_sk(seq: u64) -> String {
    format!("{FEED_PREFIX}{seq:020}")
}

pub(crate) fn feed_once_sk(design: &DesignId, kind: EventKind, revision: u64) -> String {
    format!("U#{design}#{}#{revision:020}", kind.as_str())
}

pub(crate) const WEBHOOK_PREFIX: &str = "W#";
pub(crate) const WEBHOOK_COUNT_SK: &str = "WH";

pub(crate) fn webhook_sk(id: &WebhookId) -> String {
    format!("{WEBHOOK_PREFIX}{id}")
}

pub(crate) fn deliveries_pk(tenant: &TenantId, id: &WebhookId) -> String {
    format!("T#{tenant}#W#{id}")
}

pub(crate) const DELIVERY_PREFIX: &str = "S#";

pub(crate) fn delivery_sk(seq: u64) -> String {
    format!("{DELIVERY_PREFIX}{seq:020}")
}

/// The sparse global secondary index of pending deliveries: one partition ([`DUE_PARTITION`]),
/// sorted by tenant, then due time, so a claim reads each tenant's oldest due deliveries with one
/// short query. Keys only: the due time is in the sort key.
pub const DUE_INDEX: &str = "due";
pub(crate) const DUE_PK: &str = "due_pk";
pub(crate) const DUE_SK: &str = "due_sk";
pub(crate) const DUE_PARTITION: &str = "due";

/// The index sort key of a pending delivery due at `due_ns` (nanoseconds since the epoch).
pub(crate) fn due_sk(tenant: &TenantId, due_ns: u64, id: &WebhookId, seq: u64) -> String {
    format!("{tenant}#{due_ns:020}#{id}#{seq:020}")
}

/// The parts of a [`due_sk`]: tenant, due time, webhook, seq.
pub(crate) fn parse_due_sk(sk: &str) -> Option<(TenantId, u64, WebhookId, u64)> {
    let mut parts = sk.split('#');
    let tenant = TenantId::parse(parts.next()?).ok()?;
    let due = parts.next()?.parse().ok()?;
    let id = WebhookId::parse(parts.next()?)?;
    let seq = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((tenant, due, id, seq))
}

pub(crate) fn key(pk: String, sk: String) -> Item {
    HashMap::from([(PK.to_owned(), AttributeValue::S(pk)), (SK.to_owned(), AttributeValue::S(sk))])
}

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// The items one applied event writes beside the design row, as both the one-event write
/// (`apply.rs`) and the grouped write (`batch/group.rs`) put them: its applied marker (the
/// kind and revision, applied once), its timeline entry numbered `seq`, and its report.
pub(crate) mod items {
    use super::{applied_sk, design_pk, entry_sk, key, n, report_sk, s, Item};
    use openqq_core::revision::ReportWrite;
    use openqq_core::{DesignId, TenantId, TimelineEntry};

    pub(crate) fn applied_marker(tenant: &TenantId, design: &DesignId, entry: &TimelineEntry, seq: u64) -> Item {
        let mut marker = key(design_pk(tenant, design), applied_sk(entry.kind, entry.revision));
        marker.extend([("item_type".to_owned(), s("applied")), ("seq".to_owned(), n(seq))]);
        marker
    }

    pub(crate) fn timeline_entry(tenant: &TenantId, design: &DesignId, entry: &TimelineEntry, seq: u64) -> Item {
        let mut timeline = key(design_pk(tenant, design), entry_sk(seq));
        timeline.extend([
            ("item_type".to_owned(), s("entry")),
            ("event_id".to_owned(), s(entry.event_id.to_string())),
            ("kind".to_owned(), s(entry.kind.as_str())),
            ("revision".to_owned(), n(entry.revision)),
            ("correlation_id".to_owned(), s(entry.correlation_id.as_str())),
            ("occurred_at".to_owned(), s(entry.occurred_at.to_rfc3339())),
        ]);
        timeline
    }

    pub(crate) fn report(tenant: &TenantId, design: &DesignId, r: &ReportWrite<'_>) -> Item {
        let mut report = key(design_pk(tenant, design), report_sk(r.revision));
        report.extend([
            ("item_type".to_owned(), s("report")),
            ("revision".to_owned(), n(r.revision)),
            ("verdict".to_owned(), s(r.verdict.as_str())),
            ("report".to_owned(), s(r.report.get())),
        ]);
        report
    }
}

/// Reading attributes of a stored item; a missing or mistyped attribute is a permanent error
/// naming it (the item was not written by this adapter).
pub(crate) trait Attrs {
    fn str_attr(&self, name: &str) -> PortResult<&str>;
    fn opt_str(&self, name: &str) -> Option<&str>;
    fn num(&self, name: &str) -> PortResult<u64>;
    fn opt_num(&self, name: &str) -> PortResult<Option<u64>>;
}

pub(crate) fn corrupt(attribute: &str) -> PortError {
    PortError::corrupt("stored item", format!("its {attribute} is missing or malformed"))
}

impl Attrs for Item {
    fn str_attr(&self, name: &str) -> PortResult<&str> {
        self.opt_str(name).ok_or_else(|| corrupt(name))
    }

    fn opt_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
    }

    fn num(&self, name: &str) -> PortResult<u64> {
        self.opt_num(name)?.ok_or_else(|| corrupt(name))
    }

    fn opt_num(&self, name: &str) -> PortResult<Option<u64>> {
        match self.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(v) => v.as_n().ok().and_then(|n| n.parse().ok()).map(Some).ok_or_else(|| corrupt(name)),
        }
    }
}

/// The table as [`create_table_if_missing`] creates it and the deployment template declares it
/// (docs/DYNAMODB.md); a test holds template.yaml to this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Definition {
    /// `(attribute, "HASH" | "RANGE")`, partition key first.
    pub key_schema: &'static [(&'static str, &'static str)],
    /// `(attribute, "S" | "N" | "B")` of every attribute a key or index uses.
    pub attributes: &'static [(&'static str, &'static str)],
    /// Names of the global secondary indexes: [`DUE_INDEX`] only (the claims of due deliveries
    /// across tenants); every other read names its partition key.
    pub global_secondary_indexes: &'static [&'static str],
    /// The TTL attribute ([`TTL`]).
    pub ttl_attribute: &'static str,
    /// On demand.
    pub billing_mode: &'static str,
}

/// The one table's definition.
pub const DEFINITION: Definition = Definition {
    key_schema: &[(PK, "HASH"), (SK, "RANGE")],
    attributes: &[(PK, "S"), (SK, "S"), (DUE_PK, "S"), (DUE_SK, "S")],
    global_secondary_indexes: &[DUE_INDEX],
    ttl_attribute: TTL,
    billing_mode: "PAY_PER_REQUEST",
};

/// Whether `name` is a valid DynamoDB table name (3 to 255 of letters, digits, `_`, `-`, `.`).
pub fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Creates `table` (on-demand, keys `pk`/`sk` as strings, the [`DUE_INDEX`], TTL on [`TTL`])
/// unless it exists, and waits until it is active; a table an earlier version created gets the
/// index added. Returns whether it created the table. For local endpoints only: against AWS the
/// deployment template owns the table.
pub(crate) async fn create_table_if_missing(client: &Client, table: &str) -> PortResult<bool> {
    match client.describe_table().table_name(table).send().await {
        Ok(out) => {
            let has_index = out
                .table()
                .map(|t| t.global_secondary_indexes().iter().any(|i| i.index_name() == Some(DUE_INDEX)))
                .unwrap_or(false);
            if !has_index {
                add_due_index(client, table).await?;
            }
            wait_active(client, table).await?;
            return Ok(false);
        }
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => {}
        Err(e) => return Err(classify("describe table", e)),
    }
    let mut request = client.create_table().table_name(table).billing_mode(BillingMode::from(DEFINITION.billing_mode));
    for (name, kind) in DEFINITION.attributes {
        let attribute =
            AttributeDefinition::builder().attribute_name(*name).attribute_type(ScalarAttributeType::from(*kind));
        request = request.attribute_definitions(attribute.build().expect("name and type are set"));
    }
    for (name, kind) in DEFINITION.key_schema {
        let part = KeySchemaElement::builder().attribute_name(*name).key_type(KeyType::from(*kind));
        request = request.key_schema(part.build().expect("name and key type are set"));
    }
    request = request.global_secondary_indexes(due_index());
    let created = request.send().await;
    let created = match created {
        Ok(_) => true,
        // Another process created it meanwhile.
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => false,
        Err(e) => return Err(classify("create table", e)),
    };
    wait_active(client, table).await?;
    if created {
        let ttl = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(DEFINITION.ttl_attribute)
            .build()
            .expect("set");
        client
            .update_time_to_live()
            .table_name(table)
            .time_to_live_specification(ttl)
            .send()
            .await
            .map_err(|e| classify("enable TTL", e))?;
    }
    Ok(created)
}

/// The [`DUE_INDEX`]: `due_pk` (hash) and `due_sk` (range), keys only.
fn due_index() -> GlobalSecondaryIndex {
    let part = |name: &str, kind: KeyType| {
        KeySchemaElement::builder().attribute_name(name).key_type(kind).build().expect("name and key type are set")
    };
    GlobalSecondaryIndex::builder()
        .index_name(DUE_INDEX)
        .key_schema(part(DUE_PK, KeyType::Hash))
        .key_schema(part(DUE_SK, KeyType::Range))
        .projection(Projection::builder().projection_type(ProjectionType::KeysOnly).build())
        .build()
        .expect("name, keys and projection are set")
}

/// Adds the [`DUE_INDEX`] to a table created before it existed, and waits until it is active.
async fn add_due_index(client: &Client, table: &str) -> PortResult<()> {
    let mut request = client.update_table().table_name(table);
    for (name, kind) in DEFINITION.attributes {
        let attribute =
            AttributeDefinition::builder().attribute_name(*name).attribute_type(ScalarAttributeType::from(*kind));
        request = request.attribute_definitions(attribute.build().expect("name and type are set"));
    }
    let index = due_index();
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(DUE_INDEX)
        .set_key_schema(Some(index.key_schema().to_vec()))
        .set_projection(index.projection().cloned())
        .build()
        .expect("name and keys are set");
    request
        .global_secondary_index_updates(GlobalSecondaryIndexUpdate::builder().create(create).build())
        .send()
        .await
        .map_err(|e| classify("add the due index", e))?;
    for _ in 0..600 {
        let out = client.describe_table().table_name(table).send().await.map_err(|e| classify("describe table", e))?;
        let active = out.table().map(|t| t.global_secondary_indexes()).unwrap_or_default().iter().any(|i| {
            i.index_name() == Some(DUE_INDEX)
                && i.index_status().is_none_or(|s| *s == aws_sdk_dynamodb::types::IndexStatus::Active)
        });
        if active {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(PortError::Unavailable(
        format!("the index {DUE_INDEX} of {table} did not become active within a minute").into(),
    ))
}

/// Checks that `table` exists, for AWS, where nothing is ever created: a missing table is a
/// permanent error naming it, before the first request that needs it.
pub(crate) async fn require_table(client: &Client, table: &str) -> PortResult<()> {
    match client.describe_table().table_name(table).send().await {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => {
            Err(PortError::Settings(
                format!(
                    "the DynamoDB table {table} does not exist in this account and region; against AWS it is never \
                     created here (the deployment template declares it, docs/DYNAMODB.md)"
                )
                .into(),
            ))
        }
        Err(e) => Err(classify("describe table", e)),
    }
}

async fn wait_active(client: &Client, table: &str) -> PortResult<()> {
    for _ in 0..600 {
        let out = client.describe_table().table_name(table).send().await.map_err(|e| classify("describe table", e))?;
        if out.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(PortError::Unavailable(format!("the DynamoDB table {table} did not become active within a minute").into()))
}

#[cfg(test)]
mod definition_tests {
    use super::*;

    #[test]
    fn every_word_of_the_definition_is_one_the_sdk_knows() {
        assert!(BillingMode::values().contains(&DEFINITION.billing_mode));
        for (_, kind) in DEFINITION.key_schema {
            assert!(KeyType::values().contains(kind), "{kind}");
        }
        for (_, kind) in DEFINITION.attributes {
            assert!(ScalarAttributeType::values().contains(kind), "{kind}");
        }
    }
}
