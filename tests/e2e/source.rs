//! Designs given as HDL source: synthesised with Yosys in the synthesis function's lane, their
//! testbenches run with Icarus Verilog and their reference checked for equivalence, then the
//! netlist validated as any other; each check on the timeline, in the feed and in the report. A
//! failing testbench keeps its waveform, and `openqq design show` prints it all.

use openqq_e2e::hdl::{ready, submit, tools};
use openqq_e2e::{openqq_bin, stdout_of, App, Client, Server};
use serde_json::{json, Value};

/// The counter as source with its testbench and, when given, a reference.
fn counter_job(variant: &str, reference: Option<&str>) -> Value {
    openqq_e2e::hdl::counter_job(variant, true, reference)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_given_as_source_is_synthesised_simulated_proven_and_validated_with_each_check_on_its_timeline() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let id = submit(&acme, &counter_job("design.v", Some("reference.v"))).await;
    let (design, report, kinds) = ready(&acme, &id).await;
    assert_eq!(design["verdict"], "pass", "{report}");
    assert_eq!(
        kinds,
        [
            "design.submitted",
            "synthesis.started",
            "synthesis.finished",
            "simulation.finished",
            "equivalence.finished",
            "validation.started",
            "validation.finished",
            "results.ready"
        ]
    );
    let checks = &report["checks"];
    assert_eq!(checks["synthesis"]["verdict"], "ok", "{checks}");
    assert_eq!(checks["synthesis"]["family"], "ice40");
    assert_eq!(checks["simulation"][0]["testbench"], "counts and wraps");
    assert_eq!(checks["simulation"][0]["verdict"], "pass", "{checks}");
    assert_eq!(checks["equivalence"]["verdict"], "equivalent", "{checks}");
    assert_eq!(checks["equivalence"]["sequential"], true);
    // The synthesised netlist was validated: real utilisation of the part.
    let lc = report["utilization"].as_array().unwrap().iter().find(|u| u["resource"] == "ICESTORM_LC").unwrap();
    assert!(lc["used"].as_u64().unwrap() > 0, "{lc}");
    // The checks' entries are in the tenant's feed with their verdicts.
    let (_, feed) = acme.get("/v1/events").await.unwrap();
    let simulated = feed["items"].as_array().unwrap().iter().find(|e| e["kind"] == "simulation.finished").unwrap();
    assert_eq!((&simulated["design_id"], &simulated["verdict"]), (&json!(id), &json!("pass")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_does_not_synthesise_or_differs_from_its_reference_fails_with_where_and_why() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));

    let broken = submit(&acme, &counter_job("broken_synth.v", Some("reference.v"))).await;
    let wrong = submit(&acme, &counter_job("design.v", Some("not_equivalent.v"))).await;

    let (design, report, kinds) = ready(&acme, &broken).await;
    assert_eq!(design["verdict"], "fail");
    let synthesis = &report["checks"]["synthesis"];
    assert_eq!(synthesis["verdict"], "error", "{report}");
    let finding = &synthesis["findings"][0];
    assert_eq!((&finding["file"], &finding["line"]), (&json!("counter.v"), &json!(12)), "{synthesis}");
    assert_eq!(report["checks"]["simulation"][0]["verdict"], "skipped");
    assert_eq!(report["checks"]["equivalence"]["verdict"], "skipped");
    assert!(report["findings"].as_array().unwrap().iter().any(|f| f["code"] == "SYNTHESIS_FAILED"), "{report}");
    assert!(!kinds.contains(&"simulation.finished".to_owned()), "nothing simulated: {kinds:?}");

    let (design, report, kinds) = ready(&acme, &wrong).await;
    assert_eq!(design["verdict"], "fail");
    let equivalence = &report["checks"]["equivalence"];
    assert_eq!(equivalence["verdict"], "not_equivalent", "{report}");
    assert!(!equivalence["counterexample"]["steps"].as_array().unwrap().is_empty(), "{equivalence}");
    assert_eq!(report["checks"]["simulation"][0]["verdict"], "pass", "its own testbench still passes");
    assert!(kinds.contains(&"equivalence.finished".to_owned()));
    let (_, feed) = acme.get("/v1/events").await.unwrap();
    let proven = feed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "equivalence.finished" && e["design_id"] == json!(wrong))
        .unwrap();
    assert_eq!(proven["verdict"], "fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_testbench_reaching_for_the_machine_is_refused_and_bad_shapes_are_refused_at_the_door() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));

    let mut job = counter_job("design.v", None);
    job["tests"][0]["files"][0]["text"] =
        json!("module tb; initial begin $system(\"cat /etc/passwd\"); $finish; end endmodule\n");
    let id = submit(&acme, &job).await;
    let (design, report, _) = ready(&acme, &id).await;
    assert_eq!(design["verdict"], "fail");
    let test = &report["checks"]["simulation"][0];
    assert_eq!(test["verdict"], "refused", "{report}");
    assert!(test["reason"].as_str().unwrap().contains("$system"), "{test}");

    let mut cases = Vec::new();
    let mut without_source = counter_job("design.v", None);
    without_source.as_object_mut().unwrap().remove("source");
    cases.push((without_source, "tests"));
    let mut escaping = counter_job("design.v", None);
    escaping["source"]["files"][0]["name"] = json!("../counter.v");
    cases.push((escaping, "source.files[0].name"));
    let mut huge = counter_job("design.v", None);
    huge["source"]["files"][0]["text"] = json!("x".repeat(41 * 1024));
    cases.push((huge, "source"));
    let mut both = counter_job("design.v", None);
    both["netlist"] = json!({"modules": {}});
    cases.push((both, "source"));
    for (job, field) in cases {
        let (status, problem) = acme.post("/v1/designs", &job).await.unwrap();
        assert_eq!((status, &problem["field"]), (422, &json!(field)), "{problem}");
    }
}

/// One of the client's tenant's objects: status and bytes.
async fn object(client: &Client, digest: &str) -> (u16, Vec<u8>) {
    let url = format!("{}/v1/objects/{digest}", client.base);
    let resp = client.http.get(url).bearer_auth(&client.token).send().await.unwrap();
    (resp.status().as_u16(), resp.bytes().await.unwrap().to_vec())
}

/// The counter counting by two: it synthesises, and its testbench's first check after reset
/// fails at 20 ns (`count is 2, expected 1`).
pub fn failing_counter_job() -> Value {
    let mut job = counter_job("design.v", None);
    let text = job["source"]["files"][0]["text"].as_str().unwrap().replace("count + 8'd1", "count + 8'd2");
    job["source"]["files"][0]["text"] = json!(text);
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_testbench_keeps_its_waveform_around_the_first_failure_and_the_source_is_kept_for_the_tenant() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let job = failing_counter_job();
    let id = submit(&acme, &job).await;
    let (design, report, _) = ready(&acme, &id).await;
    assert_eq!(design["verdict"], "fail");
    let test = &report["checks"]["simulation"][0];
    assert_eq!(test["verdict"], "fail", "{report}");
    let waveform = &test["waveform"];
    assert_eq!((&waveform["first_failure_time"], &waveform["timescale"]), (&json!(20_000), &json!("1ps")), "{test}");
    assert!(waveform["from"].as_u64().unwrap() <= 20_000 && 20_000 <= waveform["to"].as_u64().unwrap(), "{test}");
    // The dump is an object of the tenant, and only of the tenant.
    let digest = waveform["ref"]["digest"].as_str().unwrap_or_else(|| panic!("no ref: {waveform}"));
    let (status, vcd) = object(&acme, digest).await;
    assert_eq!(status, 200);
    let other = Client::new(&server.url, &server.token("globex"));
    assert_eq!(object(&other, digest).await.0, 404);
    let vcd = String::from_utf8(vcd).unwrap();
    assert!(vcd.contains("$scope module tb $end") && vcd.contains(" count [7:0] $end"), "{vcd}");
    assert_eq!(waveform["bytes"], vcd.len());
    // The files the checks read are kept too, as given.
    let source = &report["checks"]["source"];
    assert_eq!((&source["top"], &source["files"][0]["name"]), (&json!("counter"), &json!("counter.v")), "{source}");
    let (_, text) = object(&acme, source["files"][0]["digest"].as_str().unwrap()).await;
    assert_eq!(text, job["source"]["files"][0]["text"].as_str().unwrap().as_bytes());
    assert_eq!(source["tests"][0]["files"][0]["name"], "tb.v");

    // A passing testbench keeps no waveform.
    let passing = submit(&acme, &counter_job("design.v", None)).await;
    let (_, report, _) = ready(&acme, &passing).await;
    assert_eq!(report["checks"]["simulation"][0]["verdict"], "pass");
    assert!(report["checks"]["simulation"][0].get("waveform").is_none(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openqq_design_show_prints_the_files_and_each_check_and_draws_a_failing_testbench_s_waveform() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let token = server.token("acme");
    let acme = Client::new(&server.url, &token);
    let id = submit(&acme, &failing_counter_job()).await;
    let (_, report, _) = ready(&acme, &id).await;
    let show = |args: &[&str], token: &str| {
        std::process::Command::new(openqq_bin())
            .args(["design", "show", &id, "--url", &server.url])
            .args(args)
            .env("OPENQQ_TOKEN", token)
            .output()
            .expect("openqq design show runs")
    };

    let text = stdout_of(&show(&[], &token));
    assert!(text.starts_with(&format!("Design counter ({id}): revision 1, ready, verdict fail\n")), "{text}");
    for part in [
        "design (top counter)",
        "counter.v",
        "testbench counts and wraps (top tb)",
        "synthesis                   ok",
        "testbench counts and wraps  fail",
        "Testbench counts and wraps first failed at 20 ns (20000 × 1ps): ERROR: tb.v:18: count is 2, expected 1",
    ] {
        assert!(text.contains(part), "{part:?} in:\n{text}");
    }
    let digest = report["checks"]["simulation"][0]["waveform"]["ref"]["digest"].as_str().unwrap();
    assert!(text.contains(&format!("  waveform: {digest}")), "{text}");

    let drawn = stdout_of(&show(&["--waveform"], &token));
    let wave = drawn.split("Waveform from").nth(1).unwrap_or_else(|| panic!("no waveform drawn:\n{drawn}"));
    for signal in ["  clk ", "  count[7:0] ", "  rst ", "  en "] {
        assert!(wave.contains(signal), "{signal:?} in:\n{drawn}");
    }
    assert!(wave.contains("^ first failure, 20 ns"), "{drawn}");

    let json: Value = serde_json::from_str(&stdout_of(&show(&["--json"], &token))).unwrap();
    assert_eq!(json["report"]["checks"], report["checks"]);

    let other = show(&[], &server.token("globex"));
    assert!(!other.status.success());
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(said.contains(&format!("design {id} was not found for this token's tenant")), "{said}");
}
