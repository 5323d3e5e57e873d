//! Designs written by a model from a prompt: the synthesis function asks an OpenAI-compatible
//! server (the scripted test server, answering from the HDL corpus) for Verilog, runs the checks
//! on it and repairs with the latest failure; each attempt is in the report, the loop's start
//! and end on the timeline.

use openqq_e2e::hdl::{corpus, through, tools};
use openqq_e2e::{repo_root, App, Client};
use openqq_generation::test_server::{Reply, Step, TestServer, TestServerOptions};
use serde_json::{json, Value};

const KEY: &str = "sk-e2e-never-shown-0123456789";

async fn model(script: Vec<Step>, default: Reply) -> TestServer {
    let mut options = TestServerOptions::new(repo_root().join("shared/hdl/corpus"));
    options.script = script;
    options.default = Step::new(default);
    options.api_key = Some(KEY.to_owned());
    TestServer::start(options).await.expect("the model server starts")
}

fn platform(dir: &std::path::Path, model: &TestServer) -> App {
    let url = format!("http://{}/v1", model.addr());
    App::start(dir, &["--generation-url", &url, "--generation-model", "stub", "--generation-api-key", KEY]).unwrap()
}

/// A counter to be written by the model, with the corpus's testbench and reference.
fn counter_prompt(max_attempts: u32) -> Value {
    let corpus = |name: &str| corpus("counter", name);
    json!({
        "name": "generated counter",
        "target": {"device": "hx8k", "package": "ct256"},
        "constraints": {"format": "pcf", "text": "set_io clk J3\n"},
        "options": {"allow_unconstrained": true},
        "generate": {"prompt": "Top module: counter. An 8-bit up-counter with synchronous reset and enable.",
                     "top": "counter", "max_attempts": max_attempts},
        "tests": [{"name": "counts and wraps", "files": [{"name": "tb.v", "text": corpus("tb.v")}], "top": "tb"}],
        "reference": {"files": [{"name": "ref.v", "text": corpus("reference.v")}], "top": "counter"},
    })
}

fn attempts(report: &Value) -> Vec<(Option<String>, u64)> {
    report["checks"]["generation"]["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts in {report}"))
        .iter()
        .map(|a| (a["failed"].as_str().map(str::to_owned), a["completion_tokens"].as_u64().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_becomes_a_checked_design_and_a_broken_first_attempt_is_repaired_in_the_second() {
    if !tools() {
        return;
    }
    let model = model(vec![Step::new(Reply::Correct)], Reply::BrokenThenFixed).await;
    let dir = tempfile::tempdir().unwrap();
    let server = platform(dir.path(), &model);
    let acme = Client::new(&server.url, &server.token("acme"));

    let (design, report, kinds) = through(&acme, &counter_prompt(3)).await;
    assert_eq!(design["verdict"], "pass", "{report}");
    assert_eq!(
        kinds,
        [
            "design.submitted",
            "generation.started",
            "generation.finished",
            "synthesis.finished",
            "simulation.finished",
            "equivalence.finished",
            "validation.started",
            "validation.finished",
            "results.ready"
        ]
    );
    let generation = &report["checks"]["generation"];
    assert_eq!(generation["stopped"], "passed", "{generation}");
    assert_eq!(attempts(&report).len(), 1);
    let hdl = &generation["attempts"][0]["hdl"];
    assert!(hdl["digest"].as_str().is_some_and(|d| d.len() == 64) && hdl["bytes"].as_u64().unwrap() > 0, "{hdl}");
    assert_eq!(report["checks"]["equivalence"]["verdict"], "equivalent");

    // The next request is answered with code that does not synthesise, then fixed once told why.
    let (design, report, _) = through(&acme, &counter_prompt(3)).await;
    assert_eq!(design["verdict"], "pass", "{report}");
    let tried = attempts(&report);
    assert_eq!(tried.iter().map(|(f, _)| f.as_deref()).collect::<Vec<_>>(), [Some("synthesis"), None], "{report}");
    assert!(tried.iter().all(|(_, tokens)| *tokens > 0), "each attempt's tokens are recorded: {tried:?}");
    let messages = &report["checks"]["generation"]["attempts"][0]["messages"];
    assert!(messages[0].as_str().unwrap().starts_with("generated.v:12:"), "the model is told where: {messages}");
    let stats = model.stats();
    assert_eq!(stats.with_feedback, 1, "only the repair carried feedback: {stats:?}");
    assert!(!serde_json::to_string(&report).unwrap().contains(KEY), "the key is never in a response");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_gives_up_at_max_attempts_and_stops_early_on_a_repeated_failure() {
    if !tools() {
        return;
    }
    let model = model(vec![Step::new(Reply::BrokenSynth), Step::new(Reply::NotEquivalent)], Reply::NotEquivalent).await;
    let dir = tempfile::tempdir().unwrap();
    let server = platform(dir.path(), &model);
    let acme = Client::new(&server.url, &server.token("acme"));

    let (design, report, kinds) = through(&acme, &counter_prompt(2)).await;
    assert_eq!(design["verdict"], "fail");
    assert_eq!(report["checks"]["generation"]["stopped"], "max_attempts", "{report}");
    let failed: Vec<_> = attempts(&report).into_iter().map(|(f, _)| f).collect();
    assert_eq!(failed, [Some("synthesis".to_owned()), Some("testbench".to_owned())]);
    assert!(kinds.contains(&"generation.finished".to_owned()));

    // The default answer fails the testbench the same way every time: the second attempt repeats
    // the first's failure, and the loop stops there rather than spend the fifth.
    let (design, report, _) = through(&acme, &counter_prompt(5)).await;
    assert_eq!(design["verdict"], "fail");
    assert_eq!(report["checks"]["generation"]["stopped"], "repeated_error", "{report}");
    assert_eq!(attempts(&report).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_a_prompt_is_refused_at_once_with_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (status, problem) = acme.post("/v1/designs", &counter_prompt(1)).await.unwrap();
    assert_eq!((status, &problem["field"]), (422, &json!("generate")), "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("--generation-url"), "{problem}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_charged_to_the_tenants_day_and_a_spent_budget_stops_jobs() {
    if !tools() {
        return;
    }
    let model = model(Vec::new(), Reply::Correct).await;
    let url = format!("http://{}/v1", model.addr());
    let with_budget = |dir: &std::path::Path, daily: &str| {
        let args = ["--generation-url", &url, "--generation-model", "stub", "--generation-api-key", KEY];
        App::start(dir, &[&args[..], &["--generation-daily-tokens", daily]].concat()).unwrap()
    };

    // What a job used is what the tenant's day shows, and nothing of another tenant's.
    let dir = tempfile::tempdir().unwrap();
    let server = with_budget(dir.path(), "1000000");
    let acme = Client::new(&server.url, &server.token("acme"));
    let (_, report, _) = through(&acme, &counter_prompt(1)).await;
    let attempt = &report["checks"]["generation"]["attempts"][0];
    let used = attempt["prompt_tokens"].as_u64().unwrap() + attempt["completion_tokens"].as_u64().unwrap();
    assert!(used > 0, "{attempt}");
    let (status, usage) = acme.get("/v1/usage").await.unwrap();
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["generation_tokens"], json!({"spent": used, "limit": 1_000_000}), "{usage}");
    let globex = Client::new(&server.url, &server.token("globex"));
    assert_eq!(globex.get("/v1/usage").await.unwrap().1["generation_tokens"]["spent"], 0);
    // The attempt's Verilog is the tenant's to read, and no one else's.
    let digest = attempt["hdl"]["digest"].as_str().unwrap();
    let hdl =
        acme.http.get(format!("{}/v1/objects/{digest}", server.url)).bearer_auth(&acme.token).send().await.unwrap();
    assert_eq!(hdl.status().as_u16(), 200);
    assert!(hdl.text().await.unwrap().contains("module counter"));
    assert_eq!(globex.get(&format!("/v1/objects/{digest}")).await.unwrap().0, 404);
    drop(server);

    // A budget smaller than one call's reservation: the job is taken, and stops before calling.
    let dir = tempfile::tempdir().unwrap();
    let server = with_budget(dir.path(), "2000");
    let acme = Client::new(&server.url, &server.token("acme"));
    let calls = model.stats().requests;
    let (design, report, _) = through(&acme, &counter_prompt(3)).await;
    assert_eq!(design["verdict"], "fail");
    assert_eq!(report["checks"]["generation"]["stopped"], "budget_spent", "{report}");
    assert_eq!(model.stats().requests, calls, "the model was not called");
    drop(server);

    // A spent budget refuses new jobs at the door until the next day.
    let dir = tempfile::tempdir().unwrap();
    let server = with_budget(dir.path(), "0");
    let acme = Client::new(&server.url, &server.token("acme"));
    let resp = acme
        .http
        .post(format!("{}/v1/designs", server.url))
        .bearer_auth(&acme.token)
        .json(&counter_prompt(1))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    let wait: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let problem: Value = resp.json().await.unwrap();
    assert_eq!(problem["type"], "urn:openqq:problem:generation-budget-spent", "{problem}");
}
