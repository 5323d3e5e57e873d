//! A record of the generation lane read again (after a crash, or a retriable failure elsewhere
//! in its partition) once validation took its revision up costs no model call, no tokens and no
//! tool run; read again before that, it runs again (its first run may have ended before its
//! `validation.requested` was published). The real consumers on the embedded backends.

use async_trait::async_trait;
use openqq_adapters::{Backends, Durability};
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::generation::{Generated, GenerationBackend, GenerationError, GenerationRequest, Usage};
use openqq_core::*;
use openqq_runtime::{BatchHandler, Consumer};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Answers the corpus's counter, counting calls.
struct Counter(AtomicU64);

#[async_trait]
impl GenerationBackend for Counter {
    async fn generate(&self, _: &GenerationRequest) -> Result<Generated, GenerationError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/hdl/corpus/counter/design.v");
        Ok(Generated {
            verilog: std::fs::read_to_string(corpus).unwrap(),
            pcf: None,
            top: "counter".into(),
            usage: Usage { prompt_tokens: 100, completion_tokens: 200 },
            duration: Duration::from_millis(1),
        })
    }
}

fn tools() -> bool {
    let found = std::process::Command::new("yosys").arg("-V").output().is_ok();
    assert!(found || std::env::var_os("CI").is_none(), "yosys is needed (scripts/test.sh installs it)");
    found
}

struct Rig {
    b: Backends,
    topics: Topics,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn consumer<H: openqq_runtime::RecordHandler + 'static>(&self, handler: H) -> Consumer<H> {
        Consumer::new(handler, self.b.log.clone(), self.b.store.clone(), self.topics.clone())
    }

    /// Every record on `kind`'s topic.
    async fn records(&self, kind: EventKind) -> Vec<LogRecord> {
        let mut out = Vec::new();
        for p in 0..4 {
            out.extend(self.b.source.read(&self.topics.of(kind), p, 0, 100).await.unwrap());
        }
        out
    }

    async fn handle(&self, handler: &dyn BatchHandler, kind: EventKind) {
        handler.handle_records(&self.records(kind).await).await.expect("the batch succeeds");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reread_after_validation_took_the_revision_up_calls_no_model_and_charges_no_tokens() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig {
        b: Backends::embedded(dir.path(), 4, Durability::Process).unwrap(),
        topics: Topics::default(),
        _dir: dir,
    };
    let model = Arc::new(Counter(AtomicU64::new(0)));
    let generation = rig.consumer(openqq_synthesis::Generation(openqq_synthesis::Synthesis {
        objects: rig.b.objects.clone(),
        budget: openqq_synthesis::Budget::default(),
        generation: model.clone(),
        max_attempts: 3,
        budgets: rig.b.store.clone(),
        designs: rig.b.store.clone(),
        tokens: openqq_synthesis::repair::TokenLimits { daily: 1_000_000, per_job: 100_000 },
        share: Some(openqq_synthesis::GENERATION_SHARE),
    }));
    let design_job = rig.consumer(openqq_design_job::DesignJob::new(rig.b.store.clone()));
    let validation =
        rig.consumer(openqq_validation::Validation { budget: Duration::from_secs(5), objects: rig.b.objects.clone() });
    let acme = TenantId::parse("acme").unwrap();
    let spec: DesignSpec = serde_json::from_value(serde_json::json!({
        "name": "generated counter",
        "target": {"device": "hx8k", "package": "ct256"},
        "constraints": {"format": "pcf", "text": "set_io clk J3\n"},
        "options": {"allow_unconstrained": true},
        "generate": {"prompt": "Top module: counter.", "top": "counter"},
    }))
    .unwrap();
    let origin = Origin {
        tenant_id: acme.clone(),
        design_id: DesignId::parse("gen-1").unwrap(),
        revision: 1,
        correlation_id: CorrelationId::parse("reread").unwrap(),
        batch: None,
    };
    let submitted = Envelope::new(EventKind::DesignSubmitted, &origin, "api", DesignSubmitted { spec, checks: None });
    rig.b.log.publish(&rig.topics.of(EventKind::DesignSubmitted), vec![submitted.to_record()]).await.unwrap();
    rig.handle(&design_job, EventKind::DesignSubmitted).await;

    rig.handle(&generation, EventKind::GenerationRequested).await;
    assert_eq!(model.0.load(Ordering::SeqCst), 1);
    let spent = rig
        .b
        .store
        .budget_spent(&acme, budget::Budget::GenerationTokens, &budget::day(chrono::Utc::now()))
        .await
        .unwrap();
    assert_eq!(spent, 300, "the attempt's tokens");
    // Read again before validation took it up: it runs again (its event may never have left).
    rig.handle(&generation, EventKind::GenerationRequested).await;
    assert_eq!(model.0.load(Ordering::SeqCst), 2);
    assert_eq!(rig.records(EventKind::ValidationRequested).await.len(), 2);

    rig.handle(&validation, EventKind::ValidationRequested).await;
    let design = rig.b.store.get(&acme, &origin.design_id).await.unwrap().unwrap();
    assert_ne!(design.status, DesignStatus::Submitted, "validation took the revision up");
    // Read again now: nothing runs, nothing is charged, nothing is published.
    rig.handle(&generation, EventKind::GenerationRequested).await;
    assert_eq!(model.0.load(Ordering::SeqCst), 2, "no model call");
    let after = rig
        .b
        .store
        .budget_spent(&acme, budget::Budget::GenerationTokens, &budget::day(chrono::Utc::now()))
        .await
        .unwrap();
    assert_eq!(after, 600, "no tokens charged again");
    assert_eq!(rig.records(EventKind::ValidationRequested).await.len(), 2, "no second request");
}
