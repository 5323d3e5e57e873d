//! The design-job consumer driven by an AWS-shaped MSK event: several partitions, base64 values,
//! headers as signed bytes or absent, one undecodable record, and a store that is down.

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_adapters::{Backends, Durability};
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::ports::{ApplyOp, BatchApplied, PortResult};
use openqq_core::*;
use openqq_design_job::DesignJob;
use openqq_runtime::kafka::parse_event;
use openqq_runtime::{BatchHandler, Consumer};
use serde_json::json;
use std::sync::Arc;

fn submitted(tenant: &str, rev: u64) -> Record {
    let cause = Origin {
        tenant_id: TenantId::parse(tenant).unwrap(),
        design_id: DesignId::parse(format!("d-{tenant}")).unwrap(),
        revision: rev,
        correlation_id: CorrelationId::parse(format!("corr-{tenant}")).unwrap(),
        batch: None,
    };
    let spec: DesignSpec = serde_json::from_value(json!({
        "name": "n", "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {}}, "constraints": {"format": "pcf", "text": ""}
    }))
    .unwrap();
    Envelope::new(EventKind::DesignSubmitted, &cause, "api", DesignSubmitted { spec, checks: None }).to_record()
}

fn wire(r: &Record, partition: i64, offset: i64, with_headers: bool) -> serde_json::Value {
    let mut v = json!({
        "topic": "design.submitted", "partition": partition, "offset": offset,
        "timestamp": 1764420000000i64, "timestampType": "CREATE_TIME",
        "key": B64.encode(&r.key), "value": B64.encode(&r.value),
    });
    if with_headers {
        let headers: Vec<_> =
            r.headers.iter().map(|(k, val)| json!({ k: val.iter().map(|b| *b as i8).collect::<Vec<_>>() })).collect();
        v["headers"] = json!(headers);
    }
    v
}

fn event() -> serde_json::Value {
    let mut garbage = wire(&submitted("globex", 1), 3, 8, true);
    garbage["value"] = json!(B64.encode(b"{\"not\": \"an envelope\"}"));
    json!({
        "eventSource": "aws:kafka",
        "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/openqq/abcd",
        "bootstrapServers": "b-1.example:9098",
        "records": {
            "design.submitted-0": [wire(&submitted("acme", 1), 0, 4, true), wire(&submitted("acme", 2), 0, 5, false)],
            "design.submitted-3": [wire(&submitted("globex", 1), 3, 7, true), garbage],
        }
    })
}

#[tokio::test]
async fn a_multi_partition_aws_event_is_applied_and_an_undecodable_record_is_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let b = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    let topics = Topics::default();
    let consumer = Consumer::new(DesignJob::new(b.store.clone()), b.log.clone(), b.store.clone(), topics.clone());
    consumer.handle(parse_event(event()).unwrap()).await.expect("the batch succeeds");

    let acme =
        b.store.get(&TenantId::parse("acme").unwrap(), &DesignId::parse("d-acme").unwrap()).await.unwrap().unwrap();
    assert_eq!(acme.revision, 2, "both records of partition 0 applied, in order (the second had no headers)");
    assert!(b
        .store
        .get(&TenantId::parse("globex").unwrap(), &DesignId::parse("d-globex").unwrap())
        .await
        .unwrap()
        .is_some());

    let requested: u64 = b.source.end_offsets(&topics.of(EventKind::ValidationRequested)).await.unwrap().iter().sum();
    assert_eq!(requested, 3, "one validation.requested per applied submission");
    let mut letters = Vec::new();
    for p in 0..4 {
        letters.extend(b.source.read(&topics.dead_letter(), p, 0, 10).await.unwrap());
    }
    assert_eq!(letters.len(), 1, "only the undecodable record is dead-lettered");
    let letter = DeadLetter::from_record(&letters[0]).unwrap();
    assert_eq!((letter.source_partition, letter.source_offset), (3, 8));
    assert!(letter.reason.contains("not a valid envelope"), "{}", letter.reason);
    assert_eq!(letter.correlation_id(), Some("corr-globex"), "read from the signed-byte headers");
    assert_eq!(letter.value, b"{\"not\": \"an envelope\"}", "the original bytes, unchanged");

    // Re-delivering the same event applies nothing twice.
    consumer.handle(parse_event(event()).unwrap()).await.unwrap();
    let timeline = b
        .store
        .timeline(&TenantId::parse("acme").unwrap(), &DesignId::parse("d-acme").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(timeline.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![1, 2]);
}

/// A store whose backend is down: every write the consumer makes fails as unreachable.
struct DownStore;

fn down() -> PortError {
    PortError::Unavailable("connection refused".into())
}

#[async_trait]
impl DesignWrites for DownStore {
    async fn apply(&self, _: &TenantId, _: &DesignId, _: &TimelineEntry, _: &Change) -> PortResult<Applied> {
        Err(down())
    }
    async fn apply_replay(&self, _: &TenantId, _: &DesignId, _: &TimelineEntry, _: &Change) -> PortResult<Applied> {
        Err(down())
    }
    async fn apply_and_append(
        &self,
        _: bool,
        _: &TenantId,
        _: &DesignId,
        _: &TimelineEntry,
        _: &Change,
    ) -> PortResult<Applied> {
        Err(down())
    }
    async fn apply_batch(&self, _: &[ApplyOp<'_>]) -> BatchApplied {
        BatchApplied { applied: Vec::new(), error: Some(down()) }
    }
    async fn append_feed(&self, _: &TenantId, _: &openqq_core::NewFeedEntry<'_>) -> PortResult<u64> {
        Err(down())
    }
}

#[tokio::test]
async fn a_retriable_store_error_fails_every_partition_at_its_first_record_and_dead_letters_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    let topics = Topics::default();
    let store: Arc<dyn DesignWrites> = Arc::new(DownStore);
    let consumer = Consumer::new(DesignJob::new(b.store.clone()), b.log.clone(), store, topics.clone());
    let event = parse_event(event()).unwrap();
    let mut first: Vec<(u32, u64)> = Vec::new();
    for r in openqq_runtime::kafka::records(&event) {
        if !first.iter().any(|(p, _)| *p == r.partition) {
            first.push((r.partition, r.offset));
        }
    }
    first.sort();
    let err = consumer.handle(event).await.expect_err("the batch fails so it is retried");
    let at: Vec<(u32, u64)> = err.0.iter().map(|e| (e.partition, e.offset)).collect();
    assert_eq!(at, first, "each partition stops at its first record");
    assert_eq!(at[0], (0, 4));
    let letters: u64 = b.source.end_offsets(&topics.dead_letter()).await.unwrap().iter().sum();
    assert_eq!(letters, 0);
}
