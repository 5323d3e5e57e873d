//! `openqq load` against a real `openqq up`: both tenant classes are reported, the compliant
//! ones are never limited, the noisy one is limited and never sees a 5xx.

use openqq_e2e::{openqq_bin, Server};
use serde_json::Value;
use std::process::Command;

#[test]
fn a_short_load_run_reports_both_classes_with_sensible_counts() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--rate-limit", "10/1s"]).unwrap();
    let out = dir.path().join("results.json");
    let status = Command::new(openqq_bin())
        .args(["load", "--url", &server.url, "--data-dir"])
        .arg(dir.path())
        .args([
            "--tenants",
            "3",
            "--noisy",
            "1",
            "--rate",
            "5",
            "--burst-factor",
            "10",
            "--burst-start",
            "1s",
            "--burst-length",
            "2s",
            "--duration",
            "4s",
            "--out",
        ])
        .arg(&out)
        .env_remove("OPENQQ_JWT_SECRET")
        .status()
        .unwrap();
    assert!(status.success());
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (compliant, noisy) = (&doc["classes"]["compliant"], &doc["classes"]["noisy"]);
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"));

    // 3 tenants × 5/s × 4 s; the noisy one adds 9 × 5/s during its 2 s burst.
    assert!((57..=63).contains(&n(&compliant["sent"])), "{compliant}");
    assert!((105..=125).contains(&n(&noisy["sent"])), "{noisy}");
    assert_eq!(
        n(&compliant["sent"]) + n(&noisy["sent"]),
        n(&doc["config"]["scheduled"]),
        "every scheduled request is accounted for"
    );
    assert_eq!(n(&compliant["ok"]), n(&compliant["sent"]), "compliant tenants are never refused: {compliant}");
    assert!(n(&noisy["rate_limited"]) >= 50, "the burst is limited: {noisy}");
    assert_eq!(
        n(&noisy["ok"]) + n(&noisy["rate_limited"]),
        n(&noisy["sent"]),
        "the noisy tenant gets 200 or 429 only: {noisy}"
    );
    assert!(n(&doc["during_burst"]["noisy"]["rate_limited"]) >= 50);
    assert!(compliant["latency_ms"]["p99"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["tenants"].as_array().unwrap().len(), 4);
}

#[test]
fn load_refuses_a_non_loopback_url() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(openqq_bin())
        .args(["load", "--url", "http://10.0.0.1:8080", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}
