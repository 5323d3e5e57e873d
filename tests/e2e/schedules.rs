//! Schedules under a test clock: fires on time, across a restart, a clock stepped backwards, two
//! runners on one store, overlap `skip` vs `allow`, catch-up after downtime, daylight-saving gaps
//! and repeats, backfill, pause, trigger, and bad input, each asserted through the fire ledger.
//! Most run with `--api-only`: the scheduler runs, the consumers do not, so a fire's batch stays
//! queued (running, for the overlap policy) and no test waits on validation.

use chrono::{DateTime, Utc};
use openqq_api::schedules::ScheduleClock;
use openqq_e2e::{compact_blink_design, App, Client};
use openqq_schedule::TestClock;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A test clock and the scheduler's wake-up: [`Clocked::set`] moves time and wakes it.
#[derive(Clone)]
struct Clocked {
    clock: TestClock,
    wake: Arc<Notify>,
}

impl Clocked {
    fn at(t: DateTime<Utc>) -> Self {
        Clocked { clock: TestClock::new(t), wake: Arc::new(Notify::new()) }
    }

    fn schedule_clock(&self) -> ScheduleClock {
        ScheduleClock { clock: Arc::new(self.clock.clone()), wake: self.wake.clone() }
    }

    fn set(&self, t: DateTime<Utc>) {
        self.clock.set(t);
        self.wake.notify_one();
    }

    fn start(&self, dir: &std::path::Path, args: &[&str]) -> App {
        App::start_with_clock(dir, args, self.schedule_clock()).unwrap()
    }
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

fn template(name: &str) -> Value {
    json!({ "items": [compact_blink_design(name)] })
}

async fn create(c: &Client, body: Value) -> Value {
    let (status, schedule) = c.post("/v1/schedules", &body).await.unwrap();
    assert_eq!(status, 201, "{schedule}");
    schedule
}

async fn patch(c: &Client, id: &str, body: Value) -> (u16, Value) {
    let r =
        c.http.patch(format!("{}/v1/schedules/{id}", c.base)).bearer_auth(&c.token).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The whole ledger, newest first.
async fn ledger(c: &Client, id: &str) -> Vec<Value> {
    let (mut items, mut after) = (Vec::new(), None::<String>);
    loop {
        let cursor = after.as_ref().map(|a| format!("&after={}", a.replace('+', "%2B"))).unwrap_or_default();
        let (status, page) = c.get(&format!("/v1/schedules/{id}/fires?limit=100{cursor}")).await.unwrap();
        assert_eq!(status, 200, "{page}");
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return items,
        }
    }
}

/// Waits until the ledger holds `n` fires, none pending; then checks it stays so for a few of
/// the scheduler's passes, so a test never passes on a fire still to come.
async fn settled(c: &Client, clock: &Clocked, id: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        clock.wake.notify_one();
        let fires = ledger(c, id).await;
        let pending = fires.iter().any(|f| f["outcome"] == "pending");
        if fires.len() >= n && !pending {
            assert_eq!(fires.len(), n, "more fires than expected: {fires:#?}");
            tokio::time::sleep(Duration::from_millis(2500)).await;
            let again = ledger(c, id).await;
            assert_eq!(again, fires, "the ledger moved on after it settled");
            return fires;
        }
        assert!(Instant::now() < deadline, "the ledger did not reach {n} fires: {fires:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn nominals(fires: &[Value]) -> Vec<&str> {
    fires.iter().map(|f| f["nominal_time"].as_str().unwrap()).collect()
}

fn outcomes(fires: &[Value]) -> Vec<&str> {
    fires.iter().map(|f| f["outcome"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_come_on_time_and_each_submits_its_batch_once_which_runs_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-02T09:58:30Z"));
    let app = clock.start(dir.path(), &[]);
    let c = Client::new(&app.url, &app.token("acme"));
    let s = create(&c, json!({"name": "every five", "expression": "*/5 * * * *", "template": template("five")})).await;
    let id = s["schedule_id"].as_str().unwrap();
    assert_eq!(s["next_fires"][0], "2026-03-02T10:00:00Z");
    assert_eq!(s["next_fires"].as_array().unwrap().len(), 5);
    assert_eq!(
        (s["time_zone"].as_str(), s["overlap"].as_str(), s["catch_up"].as_str()),
        (Some("UTC"), Some("skip"), Some("1h"))
    );

    clock.set(utc("2026-03-02T09:59:59Z"));
    assert!(settled(&c, &clock, id, 0).await.is_empty(), "nothing before its time");
    clock.set(utc("2026-03-02T10:00:00.400Z"));
    let fires = settled(&c, &clock, id, 1).await;
    assert_eq!((nominals(&fires), outcomes(&fires)), (vec!["2026-03-02T10:00:00Z"], vec!["submitted"]));
    assert_eq!(fires[0]["fired_at"], "2026-03-02T10:00:00.400Z", "within a second of nominal");
    let batch = fires[0]["batch_id"].as_str().unwrap();
    let finished = c.get_ok(&format!("/v1/batches/{batch}"), Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        finished["counts"]["queued"].as_u64().unwrap()
            + finished["counts"]["validating"].as_u64().unwrap()
            + finished["counts"]["ready"].as_u64().unwrap(),
        1,
        "{finished}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, b) = c.get(&format!("/v1/batches/{batch}")).await.unwrap();
        if b["status"] == "completed" {
            assert_eq!(b["counts"]["ready"], 1, "{b}");
            break;
        }
        assert!(Instant::now() < deadline, "the fire's batch did not complete: {b}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    clock.set(utc("2026-03-02T10:05:00.100Z"));
    let fires = settled(&c, &clock, id, 2).await;
    assert_eq!(outcomes(&fires), ["submitted", "submitted"], "the batch before had ended: no overlap");
    assert_ne!(fires[0]["batch_id"], fires[1]["batch_id"]);
    let (_, s) = c.get(&format!("/v1/schedules/{id}")).await.unwrap();
    assert_eq!(s["next_fires"][0], "2026-03-02T10:10:00Z");
    assert_eq!(s["last_batch_id"], fires[0]["batch_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_the_nominal_time_and_the_fire_fires_it_once_and_a_clock_stepped_back_fires_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-02T09:59:40Z"));
    let id = {
        let app = clock.start(dir.path(), &["--api-only"]);
        let c = Client::new(&app.url, &app.token("acme"));
        let s = create(&c, json!({"name": "ten", "expression": "0 10 * * *", "template": template("ten")})).await;
        s["schedule_id"].as_str().unwrap().to_owned()
    };
    // Down across the fire's nominal time; up again 20 s after it, within the catch-up window.
    clock.clock.set(utc("2026-03-02T10:00:20Z"));
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    let fires = settled(&c, &clock, &id, 1).await;
    assert_eq!((nominals(&fires), outcomes(&fires)), (vec!["2026-03-02T10:00:00Z"], vec!["submitted"]));
    assert_eq!(fires[0]["fired_at"], "2026-03-02T10:00:20Z");
    drop(app);
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    assert_eq!(settled(&c, &clock, &id, 1).await, fires, "a second restart fires nothing again");

    // The clock stepped back across the fire, then forward past it again: no second fire.
    clock.set(utc("2026-03-02T09:58:00Z"));
    settled(&c, &clock, &id, 1).await;
    clock.set(utc("2026-03-02T10:00:30Z"));
    assert_eq!(settled(&c, &clock, &id, 1).await, fires);
    clock.set(utc("2026-03-03T10:00:01Z"));
    let fires = settled(&c, &clock, &id, 2).await;
    assert_eq!(nominals(&fires), ["2026-03-03T10:00:00Z", "2026-03-02T10:00:00Z"]);
    assert_eq!(outcomes(&fires), ["skipped_overlap", "submitted"], "its batch never ran (--api-only): still running");
    let (_, batches) = c.get("/v1/batches").await.unwrap();
    assert_eq!(batches["batches"].as_array().unwrap().len(), 1, "one batch, of the fire that submitted: {batches}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_skip_records_the_fire_skipped_while_the_batch_runs_and_allow_submits_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-02T09:58:00Z"));
    // Without consumers a fire's batch stays queued: still running at the next fire.
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    let skip = create(&c, json!({"name": "skip", "expression": "*/5 * * * *", "template": template("s")})).await;
    let allow = create(
        &c,
        json!({"name": "allow", "expression": "*/5 * * * *", "overlap": "allow", "template": template("a")}),
    )
    .await;
    let (skip, allow) = (skip["schedule_id"].as_str().unwrap(), allow["schedule_id"].as_str().unwrap());
    clock.set(utc("2026-03-02T10:00:01Z"));
    settled(&c, &clock, skip, 1).await;
    settled(&c, &clock, allow, 1).await;
    clock.set(utc("2026-03-02T10:05:01Z"));
    let skipped = settled(&c, &clock, skip, 2).await;
    assert_eq!(outcomes(&skipped), ["skipped_overlap", "submitted"]);
    let running = skipped[1]["batch_id"].as_str().unwrap();
    assert!(skipped[0]["reason"].as_str().unwrap().contains(running), "the reason names the batch: {}", skipped[0]);
    assert!(skipped[0].get("batch_id").is_none());
    let allowed = settled(&c, &clock, allow, 2).await;
    assert_eq!(outcomes(&allowed), ["submitted", "submitted"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_downtime_fires_older_than_the_catch_up_window_are_recorded_missed_and_the_rest_run() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-02T09:55:00Z"));
    let id = {
        let app = clock.start(dir.path(), &["--api-only"]);
        let c = Client::new(&app.url, &app.token("acme"));
        let body =
            json!({"name": "ten min", "expression": "*/10 * * * *", "catch_up": "15m", "template": template("t")});
        create(&c, body).await["schedule_id"].as_str().unwrap().to_owned()
    };
    clock.clock.set(utc("2026-03-02T11:02:00Z"));
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    let fires = settled(&c, &clock, &id, 7).await;
    let got: Vec<(&str, &str)> = nominals(&fires).into_iter().zip(outcomes(&fires)).collect();
    assert_eq!(
        got,
        [
            ("2026-03-02T11:00:00Z", "skipped_overlap"),
            ("2026-03-02T10:50:00Z", "submitted"),
            ("2026-03-02T10:40:00Z", "missed"),
            ("2026-03-02T10:30:00Z", "missed"),
            ("2026-03-02T10:20:00Z", "missed"),
            ("2026-03-02T10:10:00Z", "missed"),
            ("2026-03-02T10:00:00Z", "missed"),
        ]
    );
    assert!(fires[2]["reason"].as_str().unwrap().contains("catch-up window"), "{}", fires[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_clocks_skip_is_not_fired_and_a_minute_they_repeat_fires_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-06T12:00:00Z"));
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    let gap = json!({"name": "gap", "expression": "30 2 * * *", "time_zone": "America/New_York", "overlap": "allow", "template": template("g")});
    let gap = create(&c, gap).await;
    // 02:30 does not exist in New York on 2026-03-08 (clocks spring from 02:00 to 03:00).
    assert_eq!(
        gap["next_fires"].as_array().unwrap()[0..3],
        [json!("2026-03-07T07:30:00Z"), json!("2026-03-09T06:30:00Z"), json!("2026-03-10T06:30:00Z")]
    );
    let gap = gap["schedule_id"].as_str().unwrap();
    for t in ["2026-03-07T07:30:01Z", "2026-03-08T06:30:01Z", "2026-03-08T07:30:01Z", "2026-03-09T06:30:01Z"] {
        clock.set(utc(t));
        clock.wake.notify_one();
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    let fires = settled(&c, &clock, gap, 2).await;
    assert_eq!(nominals(&fires), ["2026-03-09T06:30:00Z", "2026-03-07T07:30:00Z"]);

    // 01:30 happens twice in New York on 2026-11-01 (clocks fall back from 02:00 to 01:00).
    clock.set(utc("2026-10-31T12:00:00Z"));
    let repeat = json!({"name": "repeat", "expression": "30 1 * * *", "time_zone": "America/New_York", "overlap": "allow", "template": template("r")});
    let repeat = create(&c, repeat).await;
    assert_eq!(
        repeat["next_fires"].as_array().unwrap()[0..2],
        [json!("2026-11-01T05:30:00Z"), json!("2026-11-02T06:30:00Z")]
    );
    let repeat = repeat["schedule_id"].as_str().unwrap();
    for t in ["2026-11-01T05:30:01Z", "2026-11-01T06:30:01Z", "2026-11-02T06:30:01Z"] {
        clock.set(utc(t));
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    let fires = settled(&c, &clock, repeat, 2).await;
    assert_eq!(nominals(&fires), ["2026-11-02T06:30:00Z", "2026-11-01T05:30:00Z"], "the repeated 01:30 fired once");
    assert_eq!(outcomes(&fires), ["submitted", "submitted"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_fires_every_nominal_time_in_its_range_once_and_pause_keeps_fires_from_ever_coming_due() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-02T10:30:00Z"));
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    let hourly = create(&c, json!({"name": "hourly", "expression": "0 * * * *", "template": template("h")})).await;
    let hourly = hourly["schedule_id"].as_str().unwrap();
    let range = json!({"from": "2026-03-02T06:00:00Z", "to": "2026-03-02T09:00:00Z"});
    let (status, done) = c.post(&format!("/v1/schedules/{hourly}/backfill"), &range).await.unwrap();
    assert_eq!(status, 202, "{done}");
    let fired: Vec<&str> = done["fires"].as_array().unwrap().iter().map(|f| f["outcome"].as_str().unwrap()).collect();
    assert_eq!(fired, ["submitted"; 4], "{done}");
    let (_, again) = c.post(&format!("/v1/schedules/{hourly}/backfill"), &range).await.unwrap();
    let again: Vec<&str> = again["fires"].as_array().unwrap().iter().map(|f| f["outcome"].as_str().unwrap()).collect();
    assert_eq!(again, ["deduplicated"; 4]);
    let fires = settled(&c, &clock, hourly, 4).await;
    assert_eq!(
        nominals(&fires),
        ["2026-03-02T09:00:00Z", "2026-03-02T08:00:00Z", "2026-03-02T07:00:00Z", "2026-03-02T06:00:00Z"]
    );
    for (body, field) in [
        (json!({"from": "2026-03-02T09:00:00Z", "to": "2026-03-02T06:00:00Z"}), "to"),
        (json!({"from": "2026-03-02T09:00:00Z", "to": "2026-03-02T12:00:00Z"}), "to"),
        (json!({"from": "2026-02-27T00:00:00Z", "to": "2026-03-02T10:00:00Z"}), "to"),
        (json!({"from": "2025-01-01T00:00:00Z", "to": "2025-01-01T01:00:00Z"}), "from"),
    ] {
        let (status, problem) = c.post(&format!("/v1/schedules/{hourly}/backfill"), &body).await.unwrap();
        assert_eq!((status, problem["field"].as_str()), (422, Some(field)), "{body}: {problem}");
    }

    let five = create(
        &c,
        json!({"name": "paused", "expression": "*/5 * * * *", "overlap": "allow", "template": template("p")}),
    )
    .await;
    let five = five["schedule_id"].as_str().unwrap();
    let (status, paused) = patch(&c, five, json!({"paused": true})).await;
    assert_eq!((status, &paused["paused"]), (200, &json!(true)), "{paused}");
    for t in ["2026-03-02T10:35:01Z", "2026-03-02T10:40:01Z"] {
        clock.set(utc(t));
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    assert!(settled(&c, &clock, five, 0).await.is_empty(), "a paused schedule fires nothing");
    clock.set(utc("2026-03-02T10:42:00Z"));
    let (status, resumed) = patch(&c, five, json!({"paused": false})).await;
    assert_eq!((status, &resumed["next_fires"][0]), (200, &json!("2026-03-02T10:45:00Z")), "{resumed}");
    clock.set(utc("2026-03-02T10:45:01Z"));
    let fires = settled(&c, &clock, five, 1).await;
    assert_eq!(nominals(&fires), ["2026-03-02T10:45:00Z"], "the fires while paused never came due");

    let (status, triggered) = c.post(&format!("/v1/schedules/{five}/trigger"), &json!({})).await.unwrap();
    assert_eq!((status, triggered["outcome"].as_str()), (202, Some("submitted")), "{triggered}");
    assert_eq!(triggered["nominal_time"], "2026-03-02T10:45:01Z");
    let (_, twice) = c.post(&format!("/v1/schedules/{five}/trigger"), &json!({})).await.unwrap();
    assert_eq!((twice["outcome"].as_str(), &twice["batch_id"]), (Some("deduplicated"), &triggered["batch_id"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedules_are_clear_422s_and_a_template_matching_nothing_records_an_empty_fire() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clocked::at(utc("2026-03-02T09:58:00Z"));
    let app = clock.start(dir.path(), &["--api-only"]);
    let c = Client::new(&app.url, &app.token("acme"));
    let mut bad_item = compact_blink_design("bad");
    bad_item.as_object_mut().unwrap().remove("constraints");
    for (body, field, says) in [
        (
            json!({"name": "x", "expression": "61 * * * *", "template": template("x")}),
            "expression",
            "minute field `61`",
        ),
        (json!({"name": "x", "expression": "rate(0 minutes)", "template": template("x")}), "expression", "at least 1"),
        (
            json!({"name": "x", "expression": "0 * * * *", "time_zone": "Mars/Olympus", "template": template("x")}),
            "time_zone",
            "Mars/Olympus",
        ),
        (
            json!({"name": "x", "expression": "0 * * * *", "overlap": "sometimes", "template": template("x")}),
            "overlap",
            "sometimes",
        ),
        (
            json!({"name": "x", "expression": "0 * * * *", "catch_up": "1y", "template": template("x")}),
            "catch_up",
            "1y",
        ),
        (
            json!({"name": "x", "expression": "0 * * * *", "template": {"revalidate": "some"}}),
            "template.revalidate",
            "all",
        ),
        (json!({"name": "x", "expression": "0 * * * *", "template": {"items": []}}), "template.items", "1 to"),
        (
            json!({"name": "x", "expression": "0 * * * *", "template": {"items": [bad_item]}}),
            "template.items",
            "index 0",
        ),
        (json!({"name": "x", "expression": "0 * * * *"}), "template", "items"),
        (json!({"expression": "0 * * * *", "template": template("x")}), "name", "required"),
    ] {
        let (status, problem) = c.post("/v1/schedules", &body).await.unwrap();
        assert_eq!((status, problem["field"].as_str()), (422, Some(field)), "{body}: {problem}");
        assert!(problem["detail"].as_str().unwrap().contains(says), "{problem}");
    }
    let (_, listed) = c.get("/v1/schedules").await.unwrap();
    assert_eq!(listed["schedules"], json!([]), "nothing half-created");

    let nothing =
        json!({"name": "none", "expression": "0 10 * * *", "template": {"revalidate": {"name_prefix": "zz-"}}});
    let nothing = create(&c, nothing).await["schedule_id"].as_str().unwrap().to_owned();
    let (status, _) = c.post("/v1/designs", &compact_blink_design("blink-1")).await.unwrap();
    assert_eq!(status, 202);
    let all = create(&c, json!({"name": "all", "expression": "0 10 * * *", "template": {"revalidate": "all"}})).await;
    let all = all["schedule_id"].as_str().unwrap();
    clock.set(utc("2026-03-02T10:00:01Z"));
    let empty = settled(&c, &clock, &nothing, 1).await;
    assert_eq!(outcomes(&empty), ["empty"]);
    assert!(empty[0].get("batch_id").is_none() && empty[0]["reason"].as_str().unwrap().contains("matched no design"));
    let fired = settled(&c, &clock, all, 1).await;
    assert_eq!(outcomes(&fired), ["submitted"]);
    let batch = fired[0]["batch_id"].as_str().unwrap();
    let items = c.get_ok(&format!("/v1/batches/{batch}/items"), Duration::from_secs(5)).await.unwrap();
    let items = items["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one item per design: {items:?}");
    assert_eq!(items[0]["status"], "rejected");
    // Without consumers the design's specification was never kept: the item says so.
    assert!(items[0]["reason"].as_str().unwrap().contains("no specification kept yet"), "{}", items[0]);

    // Another tenant's schedule answers as an unknown one.
    let other = Client::new(&app.url, &app.token("globex"));
    for path in [format!("/v1/schedules/{all}"), format!("/v1/schedules/{all}/fires")] {
        let (status, body) = other.get(&path).await.unwrap();
        assert_eq!((status, body["detail"].as_str()), (404, Some("no such schedule for this tenant")));
    }
    let (status, _) = other.post(&format!("/v1/schedules/{all}/trigger"), &json!({})).await.unwrap();
    assert_eq!(status, 404);
    assert_eq!(patch(&other, all, json!({"paused": true})).await.0, 404);
    let r =
        other.http.delete(format!("{}/v1/schedules/{all}", other.base)).bearer_auth(&other.token).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = c.http.delete(format!("{}/v1/schedules/{all}", c.base)).bearer_auth(&c.token).send().await.unwrap();
    assert_eq!(r.status(), 204);
}

mod runners;
