//! A batch of validation requests goes through the store in two batched steps: every record's
//! `validation.started`, then, once the lane validated its records in order, their
//! `validation.finished`. Two revisions of one design in one batch still end where they would
//! one at a time.

use openqq_adapters::{Backends, Durability};
use openqq_core::event::{DesignSubmitted as Submission, Origin};
use openqq_core::*;
use openqq_runtime::kafka::to_event;
use openqq_runtime::{BatchHandler, Consumer};
use openqq_validation::{Validation, DEFAULT_BUDGET};
use serde_json::json;

fn spec() -> DesignSpec {
    serde_json::from_value(json!({
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {"top": {"attributes": {"top": "1"}, "ports": {}, "cells": {}}}},
        "constraints": {"format": "pcf", "text": ""},
    }))
    .unwrap()
}

fn cause(design: &DesignId, revision: u64) -> Origin {
    Origin {
        tenant_id: TenantId::parse("acme").unwrap(),
        design_id: design.clone(),
        revision,
        correlation_id: CorrelationId::parse(format!("corr-{revision}")).unwrap(),
        batch: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_revisions_of_a_design_in_one_batch_start_then_finish_in_order_and_end_at_the_newer() {
    let dir = tempfile::tempdir().unwrap();
    let b = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    let topics = Topics::default();
    let (d, e) = (DesignId::generate(), DesignId::generate());
    let mut records = Vec::new();
    for (offset, (design, revision)) in [(&d, 1), (&e, 1), (&d, 2)].into_iter().enumerate() {
        let cause = cause(design, revision);
        let submitted = Envelope::new(EventKind::DesignSubmitted, &cause, "api", ());
        let change = Change::Submitted { name: None };
        b.store.apply(&cause.tenant_id, design, &submitted.timeline_entry(), &change).await.unwrap();
        let rec = Envelope::new(
            EventKind::ValidationRequested,
            &cause,
            "design-job",
            Submission { spec: spec(), checks: None },
        )
        .to_record();
        records.push(LogRecord {
            topic: topics.of(EventKind::ValidationRequested),
            partition: 1,
            offset: offset as u64,
            timestamp_ms: 0,
            key: rec.key,
            value: rec.value,
            headers: rec.headers,
        });
    }
    let validation = Validation { objects: b.objects.clone(), budget: DEFAULT_BUDGET };
    let consumer = Consumer::new(validation, b.log.clone(), b.store.clone(), topics.clone());
    consumer.handle(to_event(&records)).await.expect("the batch succeeds");

    let acme = TenantId::parse("acme").unwrap();
    let timeline = b.store.timeline(&acme, &d).await.unwrap().expect("the design exists");
    let got: Vec<(EventKind, u64)> = timeline.iter().map(|e| (e.kind, e.revision)).collect();
    use EventKind::*;
    assert_eq!(
        got,
        [
            (DesignSubmitted, 1),
            (DesignSubmitted, 2),
            (ValidationStarted, 1),
            (ValidationStarted, 2),
            (ValidationFinished, 1),
            (ValidationFinished, 2)
        ],
        "the batch's started writes, then its finished writes, each in offset order"
    );
    let view = b.store.get(&acme, &d).await.unwrap().unwrap();
    assert_eq!((view.revision, view.status), (2, DesignStatus::Validating), "revision 1 finishing moved nothing");
    for revision in [1, 2] {
        let report = b.store.report(&acme, &d, Some(revision)).await.unwrap();
        assert_eq!(report.map(|r| r.revision), Some(revision), "each revision keeps its report");
    }
    assert_eq!(b.store.get(&acme, &e).await.unwrap().unwrap().status, DesignStatus::Validating);
    for kind in [ValidationStarted, ValidationFinished] {
        let published: u64 = b.source.end_offsets(&topics.of(kind)).await.unwrap().iter().sum();
        assert_eq!(published, 3, "every record published its {kind}");
    }
}
