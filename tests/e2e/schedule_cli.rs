//! `openqq schedule` through the real binary against `openqq up`: schedules added with each kind
//! of template, listed with their next fire, shown, paused and resumed, fired on request and
//! deleted, each compared with what the API says; a ledger longer than a page (backfilled) read
//! whole and newest first; and every bad input refused with a sentence naming the argument at
//! fault, a refused item with its line in the file, nothing half-created. The server runs with
//! `--api-only`: a fire's batch stays queued, and no test waits on validation.

use crate::batch_cli::{lines, write};
use chrono::{DateTime, SubsecRound, TimeDelta, Timelike, Utc};
use openqq_e2e::{openqq_bin, stdout_of, Client, Server};
use serde_json::{json, Value};
use std::process::{Command, Output};

/// A cron expression that fires on 29 February only: no test run meets one of its fires.
const LEAP_DAY: &str = "0 0 29 2 *";

/// `openqq schedule ARGS` against `server` with `token`.
fn schedule(server: &Server, token: &str, args: &[&str]) -> Output {
    Command::new(openqq_bin())
        .arg("schedule")
        .args(args)
        .args(["--url", &server.url])
        .env("OPENQQ_TOKEN", token)
        .output()
        .expect("openqq schedule runs")
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The id in the heading `add`, `show`, `pause` and `resume` print: `Schedule NAME (ID): STATE`.
fn heading_id(stdout: &str) -> String {
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("Schedule ") && first.contains(" ("), "{stdout}");
    first.rsplit_once(" (").unwrap().1.split_once("): ").unwrap().0.to_owned()
}

/// An API time as the CLI prints it: `2028-02-28 23:00:00`.
fn printed(api_time: &str) -> String {
    api_time.trim_end_matches('Z').replacen('T', " ", 1)
}

fn get(api: &Client, path: &str) -> Value {
    let (status, body) = tokio::runtime::Runtime::new().unwrap().block_on(api.get(path)).unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

#[test]
fn schedules_are_added_listed_shown_paused_resumed_triggered_and_deleted_as_the_api_says() {
    let files = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--api-only"]).unwrap();
    let token = server.token("acme");
    let api = Client::new(&server.url, &token);
    let items = write(files.path(), "nightly.jsonl", &lines("nightly", 2));

    let args = [
        "add",
        "nightly",
        LEAP_DAY,
        "--time-zone",
        "Europe/Berlin",
        "--items",
        items.to_str().unwrap(),
        "--overlap",
        "allow",
        "--catch-up",
        "30m",
        "--jitter",
        "5m",
    ];
    let added = stdout_of(&schedule(&server, &token, &args));
    let nightly = heading_id(&added);
    assert!(added.starts_with(&format!("Schedule nightly ({nightly}): active\n")), "{added}");
    for line in [
        "Expression: 0 0 29 2 * in Europe/Berlin\n",
        "Template: 2 fixed items\n",
        "Overlap allow, catch-up 30m, jitter 5m\n",
        "Next fires (UTC):\n",
    ] {
        assert!(added.contains(line), "{line:?} in:\n{added}");
    }
    // The cron expression as five words, not quoted, is the same expression.
    let morning = ["add", "morning", "0", "6", "29", "2", "*", "--revalidate-prefix", "blink-", "--paused"];
    let morning = stdout_of(&schedule(&server, &token, &morning));
    assert!(morning.contains("): paused\nExpression: 0 6 29 2 * in UTC\n"), "{morning}");
    assert!(morning.contains("Template: revalidate designs named blink-*\n"), "{morning}");
    assert!(morning.contains("Next fires (UTC; paused: none of them runs until it is resumed):\n"), "{morning}");
    let morning = heading_id(&morning);

    // What `show` and `list` print is what the API says.
    let held = get(&api, &format!("/v1/schedules/{nightly}"));
    assert_eq!((held["overlap"].as_str(), held["jitter"].as_str()), (Some("allow"), Some("5m")), "{held}");
    let shown = stdout_of(&schedule(&server, &token, &["show", &nightly]));
    for t in held["next_fires"].as_array().unwrap() {
        assert!(shown.contains(&format!("\n  {}\n", printed(t.as_str().unwrap()))), "{t} in:\n{shown}");
    }
    let json: Value =
        serde_json::from_str(&stdout_of(&schedule(&server, &token, &["show", &nightly, "--json"]))).unwrap();
    assert_eq!(json, held);
    let listed = stdout_of(&schedule(&server, &token, &["list"]));
    let rows: Vec<&str> = listed.lines().collect();
    assert_eq!(rows.len(), 3, "a header and a row per schedule:\n{listed}");
    assert!(rows[0].starts_with("  SCHEDULE_ID ") && rows[0].ends_with("NEXT_FIRE (UTC)      TEMPLATE"), "{listed}");
    let row = rows.iter().find(|r| r.contains(&nightly)).unwrap();
    let next = printed(held["next_fires"][0].as_str().unwrap());
    for cell in ["nightly", LEAP_DAY, "Europe/Berlin", "active", &next, "2 fixed items"] {
        assert!(row.contains(&format!("  {cell}")), "{cell:?} in {row:?}");
    }
    assert!(rows.iter().any(|r| r.contains(&morning) && r.contains("  paused  ")), "{listed}");
    let as_json = stdout_of(&schedule(&server, &token, &["list", "--json"]));
    let as_json: Vec<Value> = as_json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json!(as_json), get(&api, "/v1/schedules")["schedules"]);

    // A paused schedule is said to be paused, by the CLI and the API, until it is resumed.
    let paused = stdout_of(&schedule(&server, &token, &["pause", &nightly]));
    assert!(paused.starts_with(&format!("Schedule nightly ({nightly}): paused\n")), "{paused}");
    assert_eq!(get(&api, &format!("/v1/schedules/{nightly}"))["paused"], true);

    // A fire on request while paused: its batch, then a second fire with its own batch.
    let fired = stdout_of(&schedule(&server, &token, &["trigger", &nightly]));
    let first = fired.lines().next().unwrap();
    assert!(first.starts_with("Fired at ") && first.contains(": submitted, batch "), "{fired}");
    let batch = first.rsplit_once("batch ").unwrap().1.trim_end_matches('.').to_owned();
    assert!(fired.contains(&format!("Follow the batch with: openqq batch status {batch}\n")), "{fired}");
    assert_eq!(get(&api, &format!("/v1/batches/{batch}"))["counts"]["queued"], 2, "the fire submitted the two items");
    let again = stdout_of(&schedule(&server, &token, &["trigger", &nightly]));
    assert!(again.contains(": submitted, batch ") && !again.contains(&batch), "{again}");

    let ledger = get(&api, &format!("/v1/schedules/{nightly}/fires"))["items"].clone();
    let ledger = ledger.as_array().unwrap();
    assert_eq!(ledger.len(), 2, "{ledger:?}");
    let fires = stdout_of(&schedule(&server, &token, &["fires", &nightly]));
    let rows: Vec<&str> = fires.lines().collect();
    assert_eq!(rows.len(), 3, "{fires}");
    assert_eq!(
        rows[0].split_whitespace().collect::<Vec<_>>(),
        ["NOMINAL_TIME", "(UTC)", "FIRED_AT", "(UTC)", "OUTCOME", "BATCH_ID", "REASON"]
    );
    for (row, fire) in rows[1..].iter().zip(ledger) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let nominal = printed(fire["nominal_time"].as_str().unwrap());
        assert_eq!(format!("{} {}", cells[0], cells[1]), nominal, "newest first: {fires}");
        assert_eq!((cells[4], cells[5]), ("submitted", fire["batch_id"].as_str().unwrap()), "{fires}");
    }
    assert_eq!(rows[2].split_whitespace().nth(5), Some(batch.as_str()), "the first fire is the older one");
    let newest = stdout_of(&schedule(&server, &token, &["fires", &nightly, "--limit", "1"]));
    assert_eq!(newest.lines().collect::<Vec<_>>(), rows[..2]);
    let as_json = stdout_of(&schedule(&server, &token, &["fires", &nightly, "--json"]));
    let as_json: Vec<Value> = as_json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(&as_json, ledger);

    let resumed = stdout_of(&schedule(&server, &token, &["resume", &nightly]));
    assert!(resumed.starts_with(&format!("Schedule nightly ({nightly}): active\n")), "{resumed}");
    assert!(resumed.contains("Last batch: "), "a fire on request is the schedule's last batch: {resumed}");

    // Another tenant's schedule is as unknown as one that never was.
    let globex = server.token("globex");
    for args in [
        &["show", &nightly][..],
        &["fires", &nightly],
        &["pause", &nightly],
        &["trigger", &nightly],
        &["delete", &nightly],
    ] {
        let out = schedule(&server, &globex, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let said = stderr_of(&out);
        assert!(
            said.contains(&format!("schedule {nightly} was not found for this token's tenant")),
            "{args:?}: {said}"
        );
    }
    let none = stdout_of(&schedule(&server, &globex, &["list"]));
    assert!(none.starts_with("No schedules. Create one with: openqq schedule add"), "{none}");

    let deleted = stdout_of(&schedule(&server, &token, &["delete", &morning]));
    assert_eq!(deleted, format!("Schedule {morning} was deleted, with its ledger; the batches it submitted stay.\n"));
    let left = get(&api, "/v1/schedules")["schedules"].clone();
    assert_eq!(left.as_array().unwrap().len(), 1, "{left}");
    assert_eq!(left[0]["schedule_id"].as_str(), Some(nightly.as_str()));
    let gone = schedule(&server, &token, &["show", &morning]);
    assert!(stderr_of(&gone).contains("was not found for this token's tenant"), "{}", stderr_of(&gone));
}

/// `t` as the API reads a backfill's bounds.
fn rfc3339(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[test]
fn fires_reads_a_ledger_longer_than_a_page_whole_newest_first_and_backfill_says_what_it_fired() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--api-only"]).unwrap();
    let token = server.token("acme");
    // Every minute, paused (so only backfill fires it), revalidating designs none of which exist:
    // each fire is recorded `empty`, with no batch to submit.
    let args = ["add", "minutely", "* * * * *", "--revalidate-prefix", "nothing-", "--paused"];
    let id = heading_id(&stdout_of(&schedule(&server, &token, &args)));
    let start = (Utc::now() - TimeDelta::days(1)).trunc_subsecs(0).with_second(0).unwrap();
    let minute = |m: i64| start + TimeDelta::minutes(m);
    // Three backfills (at most 50 fires each): 120 fires, more than a page of the ledger (100).
    for (first, last) in [(0, 49), (50, 99), (100, 119)] {
        let (from, to) = (rfc3339(minute(first)), rfc3339(minute(last)));
        let out = stdout_of(&schedule(&server, &token, &["backfill", &id, "--from", &from, "--to", &to]));
        let rows: Vec<&str> = out.lines().skip(1).collect();
        assert_eq!(rows.len() as i64, last - first + 1, "a fire per minute of the range: {out}");
        assert!(rows.iter().all(|r| r.contains("  empty  ")), "every fire is empty: {out}");
        assert!(out.contains(&format!("  {}  ", printed(&from))), "{out}");
    }
    let again = stdout_of(&schedule(
        &server,
        &token,
        &["backfill", &id, "--from", &rfc3339(minute(0)), "--to", &rfc3339(minute(1))],
    ));
    let cells: Vec<Vec<&str>> = again.lines().skip(1).map(|r| r.split_whitespace().collect()).collect();
    assert_eq!(cells.len(), 2, "{again}");
    assert!(cells.iter().all(|c| c[4] == "deduplicated" && c[5] == "(empty)"), "the ledger had them: {again}");

    let fires = stdout_of(&schedule(&server, &token, &["fires", &id]));
    let nominal: Vec<String> =
        fires.lines().skip(1).map(|r| r.split_whitespace().take(2).collect::<Vec<_>>().join(" ")).collect();
    let expected: Vec<String> = (0..120).rev().map(|m| printed(&rfc3339(minute(m)))).collect();
    assert_eq!(nominal, expected, "every fire once, newest first, across the ledger's pages");
    assert!(fires.lines().skip(1).all(|r| r.contains("matched no design")), "each fire's reason: {fires}");
    let some = stdout_of(&schedule(&server, &token, &["fires", &id, "--limit", "101"]));
    assert_eq!(some.lines().skip(1).count(), 101, "a limit past the first page");
    assert_eq!(some.lines().last(), fires.lines().nth(101));

    // A range the API refuses is said with the flag at fault.
    let backwards =
        schedule(&server, &token, &["backfill", &id, "--from", &rfc3339(minute(9)), "--to", &rfc3339(minute(0))]);
    assert_eq!(backwards.status.code(), Some(1));
    let said = stderr_of(&backwards);
    assert!(said.contains("error: the backfill was refused: to: must not be before from (--to)"), "{said}");
}

#[test]
fn bad_input_is_refused_with_the_argument_at_fault_and_nothing_is_half_created() {
    let files = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--api-only"]).unwrap();
    let token = server.token("acme");
    let good = write(files.path(), "good.jsonl", &lines("good", 1));
    let good = good.to_str().unwrap();

    for (args, says) in [
        (vec!["add", "x", "61 * * * *", "--items", good], "expression: "),
        (vec!["add", "x", LEAP_DAY, "--items", good, "--time-zone", "Mars/Olympus"], "(--time-zone)"),
        (vec!["add", "x", LEAP_DAY, "--items", good, "--catch-up", "1y"], "(--catch-up)"),
        (vec!["add", "x", LEAP_DAY, "--items", good, "--jitter", "soon"], "(--jitter)"),
        (vec!["add", " ", LEAP_DAY, "--revalidate-all"], "name: "),
    ] {
        let out = schedule(&server, &token, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let said = stderr_of(&out);
        assert!(said.starts_with("The schedule was refused: ") && said.contains(says), "{args:?}: {said}");
        assert!(said.contains("error: the schedule ") && said.contains(" was not created"), "{said}");
    }
    let out = schedule(&server, &token, &["add", "x", "61 * * * *", "--items", good]);
    assert!(stderr_of(&out).contains("(EXPRESSION)"), "{}", stderr_of(&out));

    // A refused item is named with its line in the file.
    let mut refused = lines("refused", 2);
    refused.insert(1, String::new());
    refused.insert(2, json!({"custom_id": "no-target", "name": "x"}).to_string());
    let file = write(files.path(), "refused.jsonl", &refused);
    let out = schedule(&server, &token, &["add", "x", LEAP_DAY, "--items", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr_of(&out);
    assert!(
        said.starts_with("The schedule was refused: 1 of 3 items are invalid (--items); nothing was created\n"),
        "{said}"
    );
    assert!(
        said.contains("  INDEX  LINE  CUSTOM_ID  REASON\n  1      3     no-target  missing field `target`\n"),
        "{said}"
    );

    // Lines that are not JSON objects are named before anything is sent.
    let file = write(files.path(), "broken.jsonl", &[lines("b", 1)[0].clone(), "not json".into(), "[1]".into()]);
    let out = schedule(&server, &token, &["add", "x", LEAP_DAY, "--items", file.to_str().unwrap()]);
    let said = stderr_of(&out);
    assert!(said.contains("broken.jsonl holds lines that are not items"), "{said}");
    assert!(said.contains("line 2: is not JSON") && said.contains("line 3: is not a JSON object"), "{said}");
    let empty = write(files.path(), "empty.jsonl", &["".into()]);
    let said = stderr_of(&schedule(&server, &token, &["add", "x", LEAP_DAY, "--items", empty.to_str().unwrap()]));
    assert!(said.contains("empty.jsonl holds no items"), "{said}");

    // Usage errors exit 2: no template, two templates, an overlap the API does not know.
    for args in [
        &["add", "x", LEAP_DAY][..],
        &["add", "x", LEAP_DAY, "--revalidate-all", "--items", good],
        &["add", "x", LEAP_DAY, "--revalidate-all", "--overlap", "sometimes"],
    ] {
        assert_eq!(schedule(&server, &token, args).status.code(), Some(2), "{args:?}");
    }
    let said = stderr_of(&schedule(&server, &token, &["show", "../designs"]));
    assert!(said.contains("\"../designs\" is not a schedule id"), "{said}");
    let unknown = "0190bbbb-0000-7000-8000-000000000002";
    let said = stderr_of(&schedule(&server, &token, &["trigger", unknown]));
    assert!(said.contains(&format!("schedule {unknown} was not found for this token's tenant")), "{said}");
    let said = stderr_of(&schedule(&server, "not.a.token", &["list"]));
    assert!(said.contains("answered 401") && said.contains("--token, OPENQQ_TOKEN"), "{said}");

    let listed = stdout_of(&schedule(&server, &token, &["list"]));
    assert!(listed.starts_with("No schedules."), "nothing half-created: {listed}");
}
