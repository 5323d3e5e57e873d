//! Shared by the validation function's suites: a design materialised on fresh embedded backends,
//! then validated by the validation consumer as the trigger would deliver its record.

// Each suite compiles this module on its own and reads only some of the rig.
#![allow(dead_code)]

use openqq_adapters::{Backends, Durability};
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::*;
use openqq_runtime::kafka::to_event;
use openqq_runtime::{BatchHandler, Consumer};
use openqq_validation::Validation;
use std::time::Duration;

/// The backends, topics and design of one validated design; the data dir lives as long as it.
pub struct Rig {
    pub b: Backends,
    pub topics: Topics,
    pub cause: Origin,
    _dir: tempfile::TempDir,
}

/// Materialises design `name` (tenant `acme`, revision 1) and has the validation consumer
/// validate `spec` within `budget`; the batch must succeed.
pub async fn validated(name: &str, spec: DesignSpec, budget: Duration) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let b = Backends::embedded(dir.path(), 4, Durability::Process).unwrap();
    let topics = Topics::default();
    let cause = Origin {
        tenant_id: TenantId::parse("acme").unwrap(),
        design_id: DesignId::generate(),
        revision: 1,
        correlation_id: CorrelationId::parse(format!("corr-{name}")).unwrap(),
        batch: None,
    };
    let submitted = Envelope::new(EventKind::DesignSubmitted, &cause, "api", ());
    let change = Change::Submitted { name: Some(name.into()) };
    b.store.apply(&cause.tenant_id, &cause.design_id, &submitted.timeline_entry(), &change).await.unwrap();
    let rec =
        Envelope::new(EventKind::ValidationRequested, &cause, "design-job", DesignSubmitted { spec, checks: None })
            .to_record();
    let incoming = LogRecord {
        topic: topics.of(EventKind::ValidationRequested),
        partition: 1,
        offset: 0,
        timestamp_ms: 0,
        key: rec.key,
        value: rec.value,
        headers: rec.headers,
    };
    let validation = Validation { objects: b.objects.clone(), budget };
    let consumer = Consumer::new(validation, b.log.clone(), b.store.clone(), topics.clone());
    consumer
        .handle(to_event(&[incoming]))
        .await
        .expect("the batch succeeds: a spent budget is a verdict, not an error");
    Rig { b, topics, cause, _dir: dir }
}
