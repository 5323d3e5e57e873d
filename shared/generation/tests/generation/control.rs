//! Scripting the server over HTTP, and the `openqq-model-stub` binary.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use openqq_core::generation::GenerationBackend;
use openqq_generation::test_server::Stats;
use openqq_generation::{OpenAiBackend, OpenAiSettings};

use crate::helpers::{counter, spawn, write_designs, COUNTER};

#[tokio::test]
async fn the_control_endpoints_script_replies_and_report_stats() {
    let app = spawn(|_| {}).await;
    let control = format!("http://{}/control", app.server.addr());
    let http = reqwest::Client::new();
    let queued = http
        .post(format!("{control}/script"))
        .header("content-type", "application/json")
        .body(r#"[{"kind":"server_error","status":502}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(queued.status(), 204);
    let backend = app.backend(|s| s.max_retries = 0);
    assert_eq!(backend.generate(&counter()).await.unwrap_err().label(), "unavailable");

    let refused = http
        .put(format!("{control}/refuse-response-format"))
        .header("content-type", "application/json")
        .body("true")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 204);
    assert_eq!(backend.generate(&counter()).await.unwrap().verilog, COUNTER);
    assert!(!backend.uses_structured_output());

    let stats: Stats =
        serde_json::from_slice(&http.get(format!("{control}/stats")).send().await.unwrap().bytes().await.unwrap())
            .unwrap();
    assert_eq!((stats.requests, stats.structured), (3, 2));
    assert_eq!(stats.by_design.get("counter"), Some(&2));
}

#[tokio::test]
async fn the_model_stub_prints_its_address_when_ready_and_answers_there() {
    let designs = tempfile::tempdir().unwrap();
    write_designs(designs.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_openqq-model-stub"))
        .arg("--designs")
        .arg(designs.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base_url = line.trim().to_owned();
    assert!(base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"), "{base_url}");

    let backend = OpenAiBackend::new(OpenAiSettings::new(base_url, "stub-model")).unwrap();
    let result = backend.generate(&counter()).await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(result.unwrap().verilog, COUNTER);
}
