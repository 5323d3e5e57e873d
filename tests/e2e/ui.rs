//! The web UI in a real browser: `openqq up --dev-tokens --webhooks-allow-private` and Debian's
//! Chromium driven by playwright-core (tests/ui/drive.mjs), as a person would use it: mint a
//! token, submit a design from files, watch its timeline reach `results.ready` without a reload,
//! read its report (a known finding with its location, utilisation bars), register a webhook to a
//! receiver on 127.0.0.1 and see its test delivery. axe-core checks the page at each stage (no
//! serious or critical violation); one run is at a phone-sized viewport. Designs given as HDL
//! (tests/ui/checks.mjs): a failing testbench's checks, source files and waveform drawn around
//! its first failure, and a design written by a model with a row per attempt. Batches
//! (tests/ui/batches.mjs): one followed live to its end, its items read a page at a time and
//! filtered, another cancelled from its row. Schedules (tests/ui/schedules.mjs): listed with their
//! next fires, a ledger read a page at a time, one paused, resumed and fired from its row and its
//! fire's batch opened. Screenshots go to `<target dir>/ui-screenshots` (or
//! `OPENQQ_UI_SCREENSHOTS`).
//!
//! Needs `chromium` (Debian's package) and `npm ci` in tests/ui: the test script installs both;
//! elsewhere the browser tests skip when either is missing ([`openqq_e2e::needed`]).

use crate::webhooks::{next, receiver, signed_by, OK};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_e2e::hdl::{ready, submit};
use openqq_e2e::{needed, on_path, openqq_bin, repo_root, Client, Server};
use openqq_generation::test_server::{Reply, Step, TestServer, TestServerOptions};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// The Chromium binary: `OPENQQ_UI_CHROMIUM`, else Debian's (the browser itself, not its
/// wrapper script), else `chromium` on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OPENQQ_UI_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let debian = PathBuf::from("/usr/lib/chromium/chromium");
    if debian.is_file() {
        return Some(debian);
    }
    on_path("chromium")
}

/// What the browser tests need, or `None` to skip: Chromium, node and the driver's packages.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let chromium = needed(chromium(), "chromium", "apt-get install chromium; scripts/test.sh installs it")?;
    let node = needed(on_path("node"), "node", "apt-get install nodejs npm; scripts/test.sh installs it")?;
    let driver = repo_root().join("tests/ui");
    needed(
        driver.join("node_modules/playwright-core/package.json").is_file().then_some(()),
        "the UI driver's packages",
        "npm ci in tests/ui; scripts/test.sh runs it",
    )?;
    Some((chromium, node))
}

/// Where screenshots go; the viewport's old ones are removed first.
fn screenshots(viewport: &str) -> PathBuf {
    let dir = std::env::var_os("OPENQQ_UI_SCREENSHOTS").map(PathBuf::from).unwrap_or_else(|| {
        let bin = openqq_bin();
        let target = bin.parent().and_then(|p| p.parent()).expect("openqq lives in <target>/<profile>");
        target.join("ui-screenshots")
    });
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&format!("{viewport}-")) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    dir
}

/// What the driver submits besides the blink netlist.
struct Submission {
    pcf: PathBuf,
    /// How many findings the report has, when more than a capped report keeps.
    findings_total: Option<usize>,
    /// Whether a second design follows with a bitstream (lp384 in qn32, one bit flipped).
    with_bitstream: bool,
}

impl Submission {
    /// The pin constraints name a pin the package lacks: the report has a known finding.
    fn known_finding() -> Self {
        Self {
            pcf: repo_root().join("shared/fpga/fixtures/bad/cases/pin_not_in_package.pcf"),
            findings_total: None,
            with_bitstream: false,
        }
    }

    /// The same, and 600 constraints of ports the design lacks (a warning each): more findings
    /// than a capped report keeps. Written into `dir`.
    fn too_many_findings(dir: &std::path::Path) -> Self {
        let mut pcf = std::fs::read_to_string(Self::known_finding().pcf).unwrap();
        for i in 1..=600 {
            pcf.push_str(&format!("set_io ghost{i} A1\n"));
        }
        let path = dir.join("many.pcf");
        std::fs::write(&path, pcf).unwrap();
        Self { pcf: path, findings_total: Some(601), with_bitstream: false }
    }
}

/// The driver's command for `server`, `viewport` and `tenant`, and where its screenshots go; the
/// scenario's own variables are added by the caller.
fn driver(server: &Server, viewport: &str, tenant: &str) -> (Command, PathBuf) {
    let (chromium, node) = browser().expect("checked by the caller");
    let out = screenshots(viewport);
    let mut cmd = Command::new(node);
    cmd.arg("drive.mjs")
        .current_dir(repo_root().join("tests/ui"))
        .env("OPENQQ_UI_URL", &server.url)
        .env("OPENQQ_UI_CHROMIUM", chromium)
        .env("OPENQQ_UI_OUT", &out)
        .env("OPENQQ_UI_TENANT", tenant)
        .env("OPENQQ_UI_VIEWPORT", viewport);
    (cmd, out)
}

/// Runs the driver and answers its summary; the run's failure fails the test, with what the
/// driver said.
async fn run_driver(mut cmd: Command, viewport: &str, out: PathBuf) -> Value {
    let output = tokio::task::spawn_blocking(move || cmd.output()).await.unwrap().expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("the driver printed no summary.\nstdout: {stdout}\nstderr: {stderr}"));
    assert!(
        output.status.success() && summary["ok"] == true,
        "the UI did not do what a person expects ({viewport}): {}\nsteps done: {}\nscreenshots in {}\n{stderr}",
        summary["error"].as_str().unwrap_or("(no error reported)"),
        summary["steps"],
        out.display()
    );
    summary
}

/// Runs the driver's submission scenario against `server` and answers its summary.
async fn drive(server: &Server, viewport: &str, tenant: &str, submission: Submission, hook_url: Option<&str>) -> Value {
    let fixtures = repo_root().join("shared/fpga/fixtures/bad");
    let (mut cmd, out) = driver(server, viewport, tenant);
    cmd.env("OPENQQ_UI_NETLIST", fixtures.join("netlists/blink.json"))
        .env("OPENQQ_UI_PCF", &submission.pcf)
        .env("OPENQQ_UI_FINDINGS_TOTAL", submission.findings_total.map(|n| n.to_string()).unwrap_or_default())
        // The bitstream has one bit flipped: only a bitstream that reached the validator fails its CRC.
        .env(
            "OPENQQ_UI_BITSTREAM",
            if submission.with_bitstream { fixtures.join("cases/flipped_bit.bin") } else { "".into() },
        )
        .env("OPENQQ_UI_BIT_NETLIST", fixtures.join("netlists/tiny.json"))
        .env("OPENQQ_UI_BIT_PCF", fixtures.join("cases/tiny.pcf"))
        .env("OPENQQ_UI_BIT_TARGET", "lp384/qn32")
        .env("OPENQQ_UI_BIT_FINDING", "BITSTREAM_CRC_MISMATCH")
        .env("OPENQQ_UI_FINDING", "PIN_NOT_IN_PACKAGE")
        .env("OPENQQ_UI_HOOK_URL", hook_url.unwrap_or(""));
    run_driver(cmd, viewport, out).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_mints_a_token_submits_designs_follows_them_live_to_their_reports_and_sees_a_webhook_test_delivered() {
    if browser().is_none() {
        return;
    }
    let (hook_url, mut hooks) = receiver(vec![], OK).await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--dev-tokens", "--webhooks-allow-private"]).unwrap();
    let submission = Submission { with_bitstream: true, ..Submission::known_finding() };
    let summary = drive(&server, "desktop", "ui-desktop", submission, Some(&hook_url)).await;
    eprintln!("{summary}");
    assert_eq!(summary["finding"][1], "PIN_NOT_IN_PACKAGE");
    assert!(
        summary["finding"][3].as_str().unwrap().contains("line 1"),
        "the finding's location: {}",
        summary["finding"]
    );
    // The receiver got the test delivery, signed with the secret the page showed once.
    let secret = summary["webhook_secret"].as_str().unwrap();
    let key = B64.decode(secret.trim_start_matches("whsec_")).expect("the secret is base64");
    let delivery = next(&mut hooks, std::time::Duration::from_secs(10)).await;
    assert!(signed_by(&delivery, &key), "the delivery is signed with the secret the page showed");
    // What the page submitted is the tenant's design, as the API tells it.
    let api = Client::new(&server.url, &server.token("ui-desktop"));
    let (_, list) = api.get("/v1/designs").await.unwrap();
    let names: Vec<&str> = list["designs"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ui-bitstream", "ui-desktop"], "newest first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_works_in_a_phone_sized_window_and_loads_every_finding_of_a_capped_report() {
    if browser().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--dev-tokens"]).unwrap();
    let files = tempfile::tempdir().unwrap();
    let submission = Submission::too_many_findings(files.path());
    let summary = drive(&server, "phone", "ui-phone", submission, None).await;
    assert_eq!(summary["timeline"].as_array().unwrap().last().unwrap(), "results.ready");
}

/// A counter for the model to write, with the corpus's testbench: the scripted model answers
/// code that does not synthesise first, then the corpus's design once told what failed.
fn generated_counter(name: &str) -> Value {
    let tb = openqq_e2e::hdl::corpus("counter", "tb.v");
    serde_json::json!({
        "name": name,
        "target": {"device": "hx8k", "package": "ct256"},
        "constraints": {"format": "pcf", "text": "set_io clk J3\n"},
        "options": {"allow_unconstrained": true},
        "generate": {"prompt": "Top module: counter. An 8-bit up-counter with synchronous reset and enable.",
                     "top": "counter", "max_attempts": 3},
        "tests": [{"name": "counts and wraps", "files": [{"name": "tb.v", "text": tb}], "top": "tb"}],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_reads_a_failing_testbench_s_checks_source_and_waveform_and_a_generated_design_s_attempts() {
    if browser().is_none() || !openqq_e2e::hdl::tools() {
        return;
    }
    let mut options = TestServerOptions::new(repo_root().join("shared/hdl/corpus"));
    options.default = Step::new(Reply::BrokenThenFixed);
    let model = TestServer::start(options).await.expect("the model server starts");
    let model_url = format!("http://{}/v1", model.addr());
    let dir = tempfile::tempdir().unwrap();
    let args = ["--dev-tokens", "--generation-url", &model_url, "--generation-model", "stub"];
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let tenant = "ui-checks";
    let api = Client::new(&server.url, &server.token(tenant));
    let mut failing = crate::source::failing_counter_job();
    failing["name"] = "ui-failing-testbench".into();
    let failing_id = submit(&api, &failing).await;
    let generated_id = submit(&api, &generated_counter("ui-generated")).await;
    let (_, report, _) = ready(&api, &failing_id).await;
    let failure = report["checks"]["simulation"][0]["waveform"]["first_failure_time"].clone();
    assert_eq!(failure, 20_000, "{report}");
    ready(&api, &generated_id).await;

    let (mut cmd, out) = driver(&server, "desktop", tenant);
    cmd.env("OPENQQ_UI_SCENARIO", "checks")
        .env("OPENQQ_UI_SOURCE_DESIGN", "ui-failing-testbench")
        .env("OPENQQ_UI_FAILURE_TIME", failure.to_string())
        .env("OPENQQ_UI_GENERATED_DESIGN", "ui-generated");
    let summary = run_driver(cmd, "desktop", out).await;
    eprintln!("{summary}");
    let waveform = &summary["waveform"];
    let signals: Vec<&str> = waveform["signals"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for signal in ["tb.clk", "tb.rst", "tb.en", "tb.count"] {
        assert!(signals.contains(&signal), "{signal} drawn: {waveform}");
    }
    assert_eq!(waveform["values"]["tb.count"], "02", "the counter's value at the failure: {waveform}");
    assert_eq!(summary["source_file"].as_str().unwrap().split_whitespace().next(), Some("counter.v"));
    let attempts = summary["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{summary}");
    assert_eq!((&attempts[0]["failed"], &attempts[1]["failed"]), (&Value::from("synthesis"), &Value::from("")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_follows_a_batch_live_to_its_end_reads_its_items_a_page_at_a_time_and_cancels_another() {
    if browser().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // One item of a batch at a time, so a batch runs long enough to be seen moving and cancelled.
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--dev-tokens", "--batch-in-flight", "1"]).unwrap();
    let files = tempfile::tempdir().unwrap();
    let mut followed = crate::batch_cli::lines("ui", 100);
    followed.push(serde_json::json!({"custom_id": "ui-no-target", "name": "x"}).to_string());
    let followed = crate::batch_cli::write(files.path(), "followed.jsonl", &followed);
    let cancelled =
        crate::batch_cli::write(files.path(), "cancelled.jsonl", &crate::batch_cli::lines("ui-cancel", 400));
    let tenant = "ui-batches";
    let (mut cmd, out) = driver(&server, "desktop", tenant);
    cmd.env("OPENQQ_UI_SCENARIO", "batches")
        .env("OPENQQ_UI_BATCH_FILE", &followed)
        .env("OPENQQ_UI_CANCEL_FILE", &cancelled);
    let summary = run_driver(cmd, "desktop", out).await;
    eprintln!("{summary}");

    // The page showed what the API says.
    let api = Client::new(&server.url, &server.token(tenant));
    let (_, listed) = api.get("/v1/batches").await.unwrap();
    let batch = |name: &str| {
        listed["batches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {listed}"))
    };
    let done = batch("ui-batch");
    assert_eq!(done["status"], "completed");
    assert_eq!(summary["batch"]["counts"], done["counts"], "{summary}");
    assert_eq!(
        done["counts"],
        serde_json::json!({"queued": 0, "validating": 0, "ready": 100, "failed": 0, "rejected": 1, "cancelled": 0})
    );
    assert_eq!(summary["batch"]["verdicts"], "99 pass, 1 fail");
    assert_eq!(summary["batch"]["words"], "101 of 101 done: 100 ready, 1 rejected");
    assert!(summary["seen"].as_array().unwrap().iter().any(|s| s["done"].as_u64() < s["total"].as_u64()));
    let pages: Vec<Vec<u64>> = serde_json::from_value(summary["pages"].clone()).unwrap();
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [20, 20, 20, 20, 20, 1], "{pages:?}");
    assert_eq!(pages.concat(), (0..101).collect::<Vec<u64>>(), "every item once, in order");
    let rejected = &summary["rejected"];
    assert_eq!(rejected.as_array().unwrap().len(), 1, "{rejected}");
    assert_eq!((&rejected[0]["index"], &rejected[0]["custom_id"]), (&Value::from(100), &Value::from("ui-no-target")));
    assert_eq!(rejected[0]["reason"], "missing field `target`");

    let stopped = batch("ui-cancel");
    assert_eq!(stopped["status"], "cancelled", "{stopped}");
    assert_eq!(summary["cancelled"]["counts"], stopped["counts"], "{summary}");
    assert!(stopped["counts"]["cancelled"].as_u64().unwrap() > 0, "{stopped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_reads_schedules_with_their_next_fires_pages_through_a_ledger_and_pauses_resumes_and_fires_one() {
    if browser().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The consumers do not run: a fire's batch stays queued, and nothing here waits on validation.
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--dev-tokens", "--api-only"]).unwrap();
    let tenant = "ui-schedules";
    let api = Client::new(&server.url, &server.token(tenant));
    // Fires on 29 February only: nothing fires on its own while the page is open.
    let nightly = serde_json::json!({"name": "ui-nightly", "expression": "0 0 29 2 *", "time_zone": "Europe/Berlin",
        "template": {"items": [openqq_e2e::compact_blink_design("ui-nightly")]}});
    let (status, nightly) = api.post("/v1/schedules", &nightly).await.unwrap();
    assert_eq!(status, 201, "{nightly}");
    // Paused, so only the backfill fires it: 25 fires a day ago, each `empty` (no design matches).
    let minutely = serde_json::json!({"name": "ui-minutely", "expression": "* * * * *", "paused": true,
        "template": {"revalidate": {"name_prefix": "nothing-"}}});
    let (status, minutely) = api.post("/v1/schedules", &minutely).await.unwrap();
    assert_eq!(status, 201, "{minutely}");
    let start = (chrono::Utc::now() - chrono::TimeDelta::days(1)).format("%Y-%m-%dT%H:%M:00Z").to_string();
    let start: chrono::DateTime<chrono::Utc> = start.parse().unwrap();
    let range = serde_json::json!({"from": start, "to": start + chrono::TimeDelta::minutes(24)});
    let backfill = format!("/v1/schedules/{}/backfill", minutely["schedule_id"].as_str().unwrap());
    let (status, done) = api.post(&backfill, &range).await.unwrap();
    assert_eq!((status, done["fires"].as_array().map(Vec::len)), (202, Some(25)), "{done}");

    let (mut cmd, out) = driver(&server, "desktop", tenant);
    cmd.env("OPENQQ_UI_SCENARIO", "schedules")
        .env("OPENQQ_UI_SCHEDULES", "2")
        .env("OPENQQ_UI_PAGED_SCHEDULE", "ui-minutely")
        .env("OPENQQ_UI_FIRED_SCHEDULE", "ui-nightly");
    let summary = run_driver(cmd, "desktop", out).await;
    eprintln!("{summary}");

    // The page showed what the API says.
    let seen = |name: &str| {
        summary["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {summary}"))
    };
    let read = |path: String| {
        let api = api.clone();
        async move { api.get_ok(&path, std::time::Duration::from_secs(5)).await.unwrap() }
    };
    let nightly = nightly["schedule_id"].as_str().unwrap();
    let (shown, held) = (seen("ui-nightly"), read(format!("/v1/schedules/{nightly}")).await);
    assert_eq!(
        (&shown["expression"], &shown["time_zone"], &shown["next_fires"]),
        (&held["expression"], &held["time_zone"], &held["next_fires"])
    );
    assert_eq!(
        (shown["state"].as_str(), held["paused"].as_bool()),
        (Some("active"), Some(false)),
        "paused and resumed"
    );
    assert_eq!(summary["states"], serde_json::json!(["paused", "active"]));
    let shown = seen("ui-minutely");
    assert_eq!(
        (shown["expression"].as_str(), shown["time_zone"].as_str(), shown["state"].as_str()),
        (Some("* * * * *"), Some("UTC"), Some("paused"))
    );
    let next: Vec<chrono::DateTime<chrono::Utc>> = serde_json::from_value(shown["next_fires"].clone()).unwrap();
    assert!(next.windows(2).all(|w| w[1] - w[0] == chrono::TimeDelta::minutes(1)), "a minute apart: {next:?}");

    let pages: Vec<Vec<String>> = serde_json::from_value(summary["fire_pages"].clone()).unwrap();
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [20, 5], "{pages:?}");
    let ledger = read(format!("/v1/schedules/{}/fires?limit=100", minutely["schedule_id"].as_str().unwrap())).await;
    let nominal: Vec<&str> =
        ledger["items"].as_array().unwrap().iter().map(|f| f["nominal_time"].as_str().unwrap()).collect();
    assert_eq!(pages.concat(), nominal, "every fire once, newest first");

    let fires = read(format!("/v1/schedules/{nightly}/fires")).await;
    let fires = fires["items"].as_array().unwrap();
    assert_eq!(fires.len(), 1, "one fire, on request: {fires:?}");
    assert_eq!((&fires[0]["outcome"], &fires[0]["batch_id"]), (&Value::from("submitted"), &summary["fired"]["batch"]));
    let said = summary["fired_status"].as_str().unwrap();
    assert!(said.contains(fires[0]["batch_id"].as_str().unwrap()), "the page named the fire's batch: {said}");
}

async fn fetch(url: &str) -> reqwest::Response {
    reqwest::get(url).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_files_are_served_with_a_strict_policy_and_the_device_list_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let page = fetch(&format!("{}/", server.url)).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(page.text().await.unwrap().contains("/ui/app.js"));
    let script = fetch(&format!("{}/ui/app.js", server.url)).await;
    assert_eq!(
        (script.status().as_u16(), script.headers()["content-type"].to_str().unwrap()),
        (200, "text/javascript; charset=utf-8")
    );
    assert_eq!(fetch(&format!("{}/ui/secret.txt", server.url)).await.status(), 404);
    let targets: Value = fetch(&format!("{}/v1/targets", server.url)).await.json().await.unwrap();
    let hx8k = targets["devices"].as_array().unwrap().iter().find(|d| d["device"] == "hx8k").expect("hx8k is offered");
    assert!(hx8k["packages"].as_array().unwrap().iter().any(|p| p == "ct256"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn development_tokens_are_minted_only_under_dev_tokens_and_speak_for_their_tenant() {
    let http = reqwest::Client::new();
    let mint = |url: String, body: Value| {
        let http = http.clone();
        async move { http.post(format!("{url}/v1/dev/tokens")).json(&body).send().await.unwrap() }
    };
    let dir = tempfile::tempdir().unwrap();
    let plain = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    assert_eq!(mint(plain.url.clone(), serde_json::json!({"tenant_id": "acme"})).await.status(), 404);
    assert_eq!(http.get(format!("{}/v1/dev/tokens", plain.url)).send().await.unwrap().status(), 404);
    drop(plain);

    let dir = tempfile::tempdir().unwrap();
    let dev = Server::start(dir.path(), "127.0.0.1:0", &["--dev-tokens"]).unwrap();
    let offered: Value = http.get(format!("{}/v1/dev/tokens", dev.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(offered["enabled"], true);
    let resp = mint(dev.url.clone(), serde_json::json!({"tenant_id": "acme"})).await;
    assert_eq!(resp.status(), 200);
    let token = resp.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
    let acme = Client::new(&dev.url, &token);
    let id = acme.submit_correlated(&openqq_e2e::blink_design("minted"), "ui-minted").await.unwrap();
    let (status, _) = acme.get(&format!("/v1/designs/{id}")).await.unwrap();
    assert_eq!(status, 200, "the minted token reads its tenant's design");
    let other = Client::new(&dev.url, &dev.token("globex"));
    assert_eq!(other.get(&format!("/v1/designs/{id}")).await.unwrap().0, 404, "and only its tenant's");
    let bad = mint(dev.url.clone(), serde_json::json!({"tenant_id": "no spaces allowed"})).await;
    assert_eq!(bad.status(), 422);
    let extra = mint(dev.url.clone(), serde_json::json!({"tenant_id": "acme", "admin": true})).await;
    assert_eq!(extra.status(), 422);
    // A page elsewhere whose name resolves here (DNS rebinding), or a page of another origin on
    // this machine, mints nothing.
    let port = dev.url.rsplit(':').next().unwrap().to_owned();
    for (host, origin) in [
        (format!("attacker.example:{port}"), None),
        (format!("127.0.0.1:{port}"), Some("http://attacker.example".to_owned())),
        (format!("127.0.0.1:{port}"), Some("http://127.0.0.1:1".to_owned())),
    ] {
        let mut req = http.post(format!("{}/v1/dev/tokens", dev.url)).header("host", &host);
        if let Some(origin) = &origin {
            req = req.header("origin", origin);
        }
        let resp = req.json(&serde_json::json!({"tenant_id": "globex"})).send().await.unwrap();
        assert_eq!(resp.status(), 403, "Host {host}, Origin {origin:?}");
        let problem: Value = resp.json().await.unwrap();
        assert_eq!(problem["type"], "urn:openqq:problem:dev-tokens-loopback-only");
        assert!(problem.get("token").is_none());
    }
    let same_origin = http
        .post(format!("{}/v1/dev/tokens", dev.url))
        .header("origin", dev.url.as_str())
        .json(&serde_json::json!({"tenant_id": "acme"}));
    assert_eq!(same_origin.send().await.unwrap().status(), 200, "the server's own page mints");
}

#[test]
fn openqq_up_refuses_dev_tokens_on_an_address_other_than_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let started = Server::start(dir.path(), "0.0.0.0:0", &["--dev-tokens"]);
    assert!(started.is_err(), "openqq up started with --dev-tokens on 0.0.0.0");
}
