//! What the suites of designs given as source or written from a prompt share: the HDL corpus,
//! whether the tools are here, and a job's way to `ready`.

use crate::{needed, on_path, repo_root, Client};
use serde_json::{json, Value};
use std::time::Duration;

/// The topics only designs given as source or written by a model cross.
pub const LANES: [openqq_core::EventKind; 2] =
    [openqq_core::EventKind::SynthesisRequested, openqq_core::EventKind::GenerationRequested];

/// A file of the HDL corpus (`shared/hdl/corpus/DESIGN/NAME`).
pub fn corpus(design: &str, name: &str) -> String {
    std::fs::read_to_string(repo_root().join("shared/hdl/corpus").join(design).join(name)).unwrap()
}

/// The corpus's counter for hx8k/ct256 as source (`variant`: `design.v`, `broken_synth.v`, …),
/// with its testbench when `tests`, and a reference (`reference.v`, `not_equivalent.v`) when
/// given.
pub fn counter_job(variant: &str, tests: bool, reference: Option<&str>) -> Value {
    let mut job = json!({
        "name": "counter",
        "target": {"device": "hx8k", "package": "ct256"},
        "constraints": {"format": "pcf", "text": "set_io clk J3\n"},
        "options": {"allow_unconstrained": true},
        "source": {"files": [{"name": "counter.v", "text": corpus("counter", variant)}], "top": "counter"},
    });
    if tests {
        let tb = json!([{"name": "counts and wraps", "files": [{"name": "tb.v", "text": corpus("counter", "tb.v")}], "top": "tb"}]);
        job["tests"] = tb;
    }
    if let Some(reference) = reference {
        job["reference"] =
            json!({"files": [{"name": "ref.v", "text": corpus("counter", reference)}], "top": "counter"});
    }
    job
}

/// Whether Yosys and Icarus Verilog are installed (the test command installs them): a suite
/// without them is skipped, except under CI, where it fails.
pub fn tools() -> bool {
    let found = ["yosys", "iverilog", "vvp"].iter().all(|t| on_path(t).is_some());
    needed(found.then_some(()), "yosys and iverilog", "scripts/test.sh installs them").is_some()
}

/// Submits `job` (202) and answers its design id.
pub async fn submit(client: &Client, job: &Value) -> String {
    let (status, accepted) = client.post("/v1/designs", job).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    accepted["design_id"].as_str().unwrap().to_owned()
}

/// Waits until design `id` is ready, and answers the design, its report and its timeline's kinds.
pub async fn ready(client: &Client, id: &str) -> (Value, Value, Vec<String>) {
    let design = client.wait_for(id, Duration::from_secs(180), |d| d["status"] == "ready").await.unwrap();
    let (_, report) = client.get(&format!("/v1/designs/{id}/report")).await.unwrap();
    let (_, events) = client.get(&format!("/v1/designs/{id}/events")).await.unwrap();
    let kinds = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap().to_owned()).collect();
    (design, report, kinds)
}

/// [`submit`], then [`ready`].
pub async fn through(client: &Client, job: &Value) -> (Value, Value, Vec<String>) {
    ready(client, &submit(client, job).await).await
}
