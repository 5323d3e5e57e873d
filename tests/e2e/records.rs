//! Records the platform cannot process whole (issue 9, findings 1, 2 and 6): an enormous report
//! is capped with the full report kept by reference, and a record the platform gives up on
//! leaves its revision `failed` with the reason, visible to its tenant and no one else.

use openqq_adapters::{Durability, EmbeddedEventLog};
use openqq_core::event::Origin;
use openqq_core::{CorrelationId, DesignId, Envelope, EventKind, EventLog, TenantId, Topics};
use openqq_e2e::noisy::wide_port_design;
use openqq_e2e::{Client, Server};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_with_a_finding_per_bit_is_capped_and_the_full_report_is_served_by_reference() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (status, accepted) = acme.post("/v1/designs", &wide_port_design("wide", 20_000)).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap();
    let design = acme
        .wait_for(id, Duration::from_secs(60), |d| d["status"] != "submitted" && d["status"] != "validating")
        .await
        .unwrap();
    assert_eq!((design["status"].as_str(), design["verdict"].as_str()), (Some("ready"), Some("fail")), "{design}");

    let (status, report) = acme.get(&format!("/v1/designs/{id}/report")).await.unwrap();
    assert_eq!(status, 200);
    let total = report["truncated"]["findings_total"].as_u64().expect("the report says it was capped");
    assert!(total >= 20_000, "{total}");
    assert!(report["findings"].as_array().unwrap().len() < 20_000);
    let digest = report["full_report"]["digest"].as_str().expect("a reference to the full report");
    assert_eq!(digest.len(), 64);

    let (status, full) = acme.get(&format!("/v1/designs/{id}/report/full")).await.unwrap();
    assert_eq!(status, 200, "{full}");
    assert_eq!(full["findings"].as_array().unwrap().len() as u64, total, "every finding");
    assert_eq!((full["revision"].as_u64(), full["verdict"].as_str()), (Some(1), Some("fail")));
    assert!(full.get("truncated").is_none());

    let globex = Client::new(&server.url, &server.token("globex"));
    assert_eq!(globex.get(&format!("/v1/designs/{id}/report/full")).await.unwrap().0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_the_platform_gives_up_on_shows_as_failed_with_its_reason_to_its_tenant_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &["--partitions", "4"]).unwrap();
    server.terminate().unwrap();
    // A submission whose payload no version of the design-job function can read, written to the
    // log while the server is down (the embedded log has one writer at a time).
    let design = DesignId::generate();
    let cause = Origin {
        tenant_id: TenantId::parse("acme").unwrap(),
        design_id: design.clone(),
        revision: 1,
        correlation_id: CorrelationId::parse("corr-broken").unwrap(),
        batch: None,
    };
    let broken = Envelope::new(EventKind::DesignSubmitted, &cause, "api", json!({"spec": {"not": "a design"}}));
    {
        let log = EmbeddedEventLog::open(dir.path(), 4, Durability::Process).unwrap();
        log.publish(&Topics::default().of(EventKind::DesignSubmitted), vec![broken.to_record()]).await.unwrap();
    }
    server.restart().unwrap();

    let acme = Client::new(&server.url, &server.token("acme"));
    let view = acme.wait_for(design.as_str(), Duration::from_secs(30), |d| d["status"] == "failed").await.unwrap();
    assert_eq!(view["revision"], 1);
    let reason = view["failure_reason"].as_str().expect("the reason is shown");
    assert!(reason.contains("design.submitted payload is invalid"), "{reason}");
    let (_, events) = acme.get(&format!("/v1/designs/{design}/events")).await.unwrap();
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"design.failed"), "{events}");

    let globex = Client::new(&server.url, &server.token("globex"));
    assert_eq!(globex.get(&format!("/v1/designs/{design}")).await.unwrap().0, 404);

    // The revision is marked failed before the record is dead-lettered and counted: wait for
    // the count to settle, then it must be exactly one.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let dead = loop {
        let metrics = reqwest::get(server.metrics()).await.unwrap().text().await.unwrap();
        let dead = openqq_e2e::counter_sum(&metrics, "openqq_dead_letters_total", &["function=\"design-job\""]);
        if dead >= 1.0 || std::time::Instant::now() > deadline {
            break dead;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(dead, 1.0, "one dead letter");
}
