//! The DynamoDB design store against the design-store conformance suite, on a real
//! DynamoDB-compatible server: `OPENQQ_TEST_DYNAMODB_ENDPOINT` (scripts/services/moto.sh prints
//! one). Without it the tests say so and pass without running.
//!
//!   endpoint=$(scripts/services/moto.sh)
//!   OPENQQ_TEST_DYNAMODB_ENDPOINT=$endpoint cargo test -p openqq-adapters --features dynamodb --test dynamo_conformance
#![cfg(feature = "dynamodb")]

use openqq_adapters::conformance;
use openqq_adapters::DynamoDesignStore;
use openqq_core::{
    Applied, Change, CorrelationId, DesignId, DesignReads, DesignWrites, EventKind, StoreRetention, TenantId,
    TimelineEntry,
};

const ENDPOINT_VAR: &str = "OPENQQ_TEST_DYNAMODB_ENDPOINT";

/// A store on a fresh table of the test server, or `None` (with a note) when none is set.
async fn store() -> Option<DynamoDesignStore> {
    let Ok(endpoint) = std::env::var(ENDPOINT_VAR) else {
        eprintln!("{ENDPOINT_VAR} is not set: skipping (scripts/services/moto.sh starts a server)");
        return None;
    };
    let table = conformance::unique("openqq");
    let store = DynamoDesignStore::new(conformance::dynamodb_client(&endpoint), table).unwrap();
    assert!(store.create_table_if_missing().await.unwrap(), "a fresh table is created");
    assert!(!store.create_table_if_missing().await.unwrap(), "and found the second time");
    Some(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dynamodb_store_passes_the_design_store_suite() {
    let Some(store) = store().await else { return };
    conformance::store::run(&store, &conformance::store::Capabilities::default()).await;
}

/// A webhook that wants `design.submitted`, at a receiver named after `name`.
fn submissions_webhook(name: &str) -> openqq_core::Webhook {
    openqq_core::Webhook {
        id: openqq_core::WebhookId::generate(),
        url: format!("https://receiver.example/{name}"),
        kinds: vec![EventKind::DesignSubmitted],
        description: None,
        created_at: chrono::Utc::now(),
        secret: openqq_core::WebhookSecret::from_bytes(vec![5; 32]).unwrap(),
        previous_secret: None,
    }
}

fn entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse("race").unwrap(),
        occurred_at: chrono::Utc::now(),
    }
}

/// A small deterministic generator (xorshift), so a failing sequence reproduces.
struct Draws(u64);

impl Draws {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn random_event(draws: &mut Draws) -> (TimelineEntry, Change) {
    let revision = 1 + draws.below(3);
    let verdict = if draws.below(2) == 0 { openqq_core::Verdict::Pass } else { openqq_core::Verdict::Fail };
    let (kind, change) = match draws.below(6) {
        0 => (EventKind::DesignSubmitted, Change::Submitted { name: Some(format!("n{revision}")) }),
        1 => (EventKind::DesignSubmitted, Change::Submitted { name: None }),
        2 => (EventKind::ValidationStarted, Change::ValidationStarted),
        3 => {
            let report = serde_json::value::RawValue::from_string(format!("{{\"r\":{revision}}}")).unwrap();
            (EventKind::ValidationFinished, Change::ValidationFinished { verdict, report })
        }
        4 => (EventKind::ResultsReady, Change::ResultsReady { verdict }),
        _ => (EventKind::DesignFailed, Change::Failed { reason: format!("r{revision}") }),
    };
    (entry(kind, revision), change)
}

/// Any sequence of events, however out of order, repeated or premature, gets the same outcome
/// from DynamoDB as from the embedded store, and leaves the same design, timeline and reports:
/// both execute the core's one plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dynamodb_store_and_the_embedded_store_agree_on_random_event_sequences() {
    let Some(dynamo) = store().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let embedded =
        openqq_adapters::EmbeddedDesignStore::open(dir.path(), openqq_adapters::Durability::Process).unwrap();
    let t = TenantId::parse(conformance::unique("diff")).unwrap();
    let mut draws = Draws(0x9E37_79B9_7F4A_7C15);
    for sequence in 0..25 {
        let d = DesignId::generate();
        let mut sent: Vec<(TimelineEntry, Change)> = Vec::new();
        for _ in 0..12 {
            // Now and then a re-delivery of an event sent before (the same entry again).
            let (e, c) = match sent.len() {
                n if n > 0 && draws.below(4) == 0 => sent[draws.below(n as u64) as usize].clone(),
                _ => random_event(&mut draws),
            };
            let ours = dynamo.apply(&t, &d, &e, &c).await.map_err(|e| e.label());
            let theirs = embedded.apply(&t, &d, &e, &c).await.map_err(|e| e.label());
            assert_eq!(ours, theirs, "sequence {sequence}: {:?} {} after {sent:?}", e.kind, e.revision);
            sent.push((e, c));
        }
        let strip =
            |v: Option<openqq_core::DesignView>| v.map(|v| (v.name, v.revision, v.status, v.verdict, v.failure_reason));
        assert_eq!(
            strip(dynamo.get(&t, &d).await.unwrap()),
            strip(embedded.get(&t, &d).await.unwrap()),
            "sequence {sequence}"
        );
        let entries = |tl: Option<Vec<TimelineEntry>>| {
            tl.map(|tl| tl.into_iter().map(|e| (e.event_id, e.kind, e.revision)).collect::<Vec<_>>())
        };
        assert_eq!(
            entries(dynamo.timeline(&t, &d).await.unwrap()),
            entries(embedded.timeline(&t, &d).await.unwrap()),
            "sequence {sequence}"
        );
        for revision in [None, Some(1), Some(2), Some(3)] {
            let report =
                |r: Option<openqq_core::StoredReport>| r.map(|r| (r.revision, r.verdict, r.report.get().to_owned()));
            assert_eq!(
                report(dynamo.report(&t, &d, revision).await.unwrap()),
                report(embedded.report(&t, &d, revision).await.unwrap()),
                "sequence {sequence}, report {revision:?}"
            );
        }
    }
    assert_eq!(dynamo.usage(&t).await.unwrap(), embedded.usage(&t).await.unwrap(), "usage counts alike");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_in_any_text_form_of_its_design_id_pages_on_from_that_design() {
    let Some(store) = store().await else { return };
    let t = TenantId::parse(conformance::unique("cursor")).unwrap();
    for _ in 0..3 {
        let d = DesignId::generate();
        store
            .apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &Change::Submitted { name: Some("c".into()) })
            .await
            .unwrap();
    }
    let first = store.list(&t, None, 1).await.unwrap();
    let cursor = first.next.unwrap();
    let canonical = store.list(&t, Some(&cursor), 5).await.unwrap();
    let upper = store.list(&t, Some(&cursor.to_uppercase()), 5).await.unwrap();
    let ids = |p: &openqq_core::Page<openqq_core::DesignView>| {
        p.items.iter().map(|v| v.design_id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&canonical).len(), 2);
    assert_eq!(ids(&upper), ids(&canonical));
    let err = store.list(&t, Some("not a cursor"), 5).await.unwrap_err();
    assert!(!err.is_retriable(), "{err:?}");
}

/// What `openqq up --dynamodb-endpoint` does: the environment's settings, the table created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_an_endpoint_creates_the_table_and_serves_from_it() {
    let Ok(endpoint) = std::env::var(ENDPOINT_VAR) else { return };
    let settings = openqq_adapters::DynamoSettings { table: conformance::unique("connect"), endpoint: Some(endpoint) };
    let store = DynamoDesignStore::connect(&settings).await.unwrap();
    let (t, d) = (TenantId::parse("connect").unwrap(), DesignId::generate());
    let applied = store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &Change::Submitted { name: None }).await;
    assert_eq!(applied.unwrap(), Applied::Applied);
    assert!(!store.create_table_if_missing().await.unwrap(), "the table is there");
    let again = DynamoDesignStore::connect(&settings).await.unwrap();
    assert_eq!(again.get(&t, &d).await.unwrap().unwrap().revision, 1, "a second start finds the same table");
}

/// A table an earlier version created (keys only, no `due` index) gets the index when the store
/// starts on it, and due deliveries are claimed from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_before_the_due_index_gets_it_and_serves_claims() {
    use aws_sdk_dynamodb::types::{AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType};
    use openqq_core::{DeliveryQueue, DesignWrites, NewFeedEntry, WebhookRegistry};
    let Ok(endpoint) = std::env::var(ENDPOINT_VAR) else { return };
    let client = conformance::dynamodb_client(&endpoint);
    let table = conformance::unique("older");
    let mut create = client.create_table().table_name(&table).billing_mode(BillingMode::PayPerRequest);
    for (name, key_type) in [("pk", KeyType::Hash), ("sk", KeyType::Range)] {
        let attribute = AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S);
        create = create
            .attribute_definitions(attribute.build().unwrap())
            .key_schema(KeySchemaElement::builder().attribute_name(name).key_type(key_type).build().unwrap());
    }
    create.send().await.unwrap();

    let store = DynamoDesignStore::new(client.clone(), table.clone()).unwrap();
    assert!(!store.create_table_if_missing().await.unwrap(), "the table was there");
    let described = client.describe_table().table_name(&table).send().await.unwrap();
    let indexes: Vec<_> =
        described.table().unwrap().global_secondary_indexes().iter().filter_map(|i| i.index_name()).collect();
    assert_eq!(indexes, [openqq_adapters::dynamo::table::DUE_INDEX]);

    let t = TenantId::parse(conformance::unique("older")).unwrap();
    let hook = submissions_webhook("older");
    store.create_webhook(&t, &hook).await.unwrap();
    let (d, e) = (DesignId::generate(), entry(EventKind::DesignSubmitted, 1));
    store
        .append_feed(&t, &NewFeedEntry { design_id: &d, entry: &e, verdict: None, elapsed_ms: None, batch: None })
        .await
        .unwrap();
    let claimed = store.claim_due_deliveries(chrono::Utc::now(), std::time::Duration::from_secs(60), 5, 10).await;
    let claimed = claimed.unwrap();
    assert_eq!(claimed.iter().map(|c| (c.webhook_id, c.entry.seq)).collect::<Vec<_>>(), [(hook.id, 1)]);
}

/// A claim reads the due index about a query per tenant, at most `MAX_CLAIM_QUERIES`; one that
/// stops there leaves the tenants after it to the next claim, which goes on from where it
/// stopped: between them every tenant's due delivery is claimed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_reaches_its_query_budget_leaves_the_other_tenants_to_the_next() {
    use openqq_core::{DeliveryQueue, DesignWrites, NewFeedEntry, WebhookRegistry};
    let Some(store) = store().await else { return };
    // With one delivery a tenant taken, a query of two index entries covers two tenants.
    let tenants = 2 * openqq_adapters::dynamo::MAX_CLAIM_QUERIES + 2;
    let prefix = conformance::unique("budget");
    for i in 0..tenants {
        let t = TenantId::parse(format!("{prefix}-{i:03}")).unwrap();
        let hook = submissions_webhook("budget");
        store.create_webhook(&t, &hook).await.unwrap();
        let (d, e) = (DesignId::generate(), entry(EventKind::DesignSubmitted, 1));
        store
            .append_feed(&t, &NewFeedEntry { design_id: &d, entry: &e, verdict: None, elapsed_ms: None, batch: None })
            .await
            .unwrap();
    }
    let now = chrono::Utc::now();
    let lease = std::time::Duration::from_secs(60);
    let first = store.claim_due_deliveries(now, lease, 1, 1000).await.unwrap();
    assert!(first.len() < tenants, "the budget stopped the first claim: {}", first.len());
    let second = store.claim_due_deliveries(now, lease, 1, 1000).await.unwrap();
    let mut all: Vec<String> = first.iter().chain(&second).map(|d| d.tenant_id.to_string()).collect();
    all.sort();
    let expected: Vec<String> = (0..tenants).map(|i| format!("{prefix}-{i:03}")).collect();
    assert_eq!(all, expected, "each tenant's delivery once between the two claims");
}

/// Idempotency keys are purged on DynamoDB by its TTL: the table has TTL on `expires_at`, and a
/// kept response's item carries its expiry there (rounded up to the second), so DynamoDB deletes
/// expired keys without a sweep of ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_carries_its_expiry_in_the_ttl_attribute_the_table_expires_items_by() {
    use openqq_core::{IdempotencyKey, IdempotencyKeys, KeptResponse};
    let Some(store) = store().await else { return };
    let client = conformance::dynamodb_client(&std::env::var(ENDPOINT_VAR).unwrap());
    let ttl = client.describe_time_to_live().table_name(store.table()).send().await.unwrap();
    let spec = ttl.time_to_live_description().expect("the table describes its TTL");
    assert_eq!(spec.attribute_name(), Some("expires_at"), "{spec:?}");
    assert_eq!(spec.time_to_live_status().map(|s| s.as_str()), Some("ENABLED"), "{spec:?}");

    let (t, k) = (TenantId::parse(conformance::unique("idem")).unwrap(), IdempotencyKey::parse("ttl-1").unwrap());
    let fp = [7u8; 32];
    let response = KeptResponse { status: 202, headers: vec![], body: b"{}".to_vec() };
    let keep = std::time::Duration::from_secs(3600);
    let before = chrono::Utc::now().timestamp();
    let minute = std::time::Duration::from_secs(60);
    let claim = openqq_core::KeyClaim { fingerprint: &fp, lease: minute, keep: minute, name: "" };
    store.claim_idempotency_key(&t, &k, &claim).await.unwrap();
    store.complete_idempotency_key(&t, &k, &fp, &response, keep).await.unwrap();
    let after = chrono::Utc::now().timestamp();
    let item = client
        .get_item()
        .table_name(store.table())
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(format!("T#{t}")))
        .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("I#ttl-1".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the key's item");
    let expires: i64 = item["expires_at"].as_n().unwrap().parse().unwrap();
    assert!(
        (before + 3600..=after + 3601).contains(&expires),
        "the completed key expires an hour on ({expires}, now {after})"
    );
}

/// A deleted design's tombstones (the design item, its marker and its specification) carry the
/// TTL attribute: the deletion plus the tombstone retention, so DynamoDB removes them once no
/// record of the design can come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_designs_tombstones_carry_their_expiry_in_the_ttl_attribute() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use openqq_core::{Change, CorrelationId, Deletion, DesignDeletes, DesignId, DesignWrites, EventKind};
    let Some(store) = store().await else { return };
    let keep = std::time::Duration::from_secs(7200);
    let store = store.with_retention(StoreRetention { tombstones: keep, ..Default::default() });
    let client = conformance::dynamodb_client(&std::env::var(ENDPOINT_VAR).unwrap());
    let (t, d) = (TenantId::parse(conformance::unique("tomb")).unwrap(), DesignId::generate());
    let entry = openqq_core::TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind: EventKind::DesignSubmitted,
        revision: 1,
        correlation_id: CorrelationId::parse("corr").unwrap(),
        occurred_at: chrono::Utc::now(),
    };
    store.apply(&t, &d, &entry, &Change::Submitted { name: None }).await.unwrap();
    let deletion = Deletion::now(CorrelationId::parse("corr-delete").unwrap());
    store.delete_design(&t, &d, &deletion).await.unwrap().expect("deleted");
    let expected = deletion.occurred_at.timestamp() + 7200;
    for sk in [format!("D#{d}"), format!("A#{d}"), format!("SPEC#{d}")] {
        let item = client
            .get_item()
            .table_name(store.table())
            .key("pk", AttributeValue::S(format!("T#{t}")))
            .key("sk", AttributeValue::S(sk.clone()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .unwrap_or_else(|| panic!("the tombstone {sk}"));
        let expires: i64 = item["expires_at"].as_n().unwrap().parse().unwrap();
        assert!((expected..=expected + 1).contains(&expires), "{sk} expires at {expires}, not {expected}");
    }
}
