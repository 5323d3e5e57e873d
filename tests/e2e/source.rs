//! Designs given as HDL source: synthesised with Yosys in the synthesis function's lane, their
//! testbenches run with Icarus Verilog and their reference checked for equivalence, then the
//! netlist validated as any other; each check on the timeline, in the feed and in the report.

use openqq_e2e::hdl::{ready, submit, tools};
use openqq_e2e::{App, Client};
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
