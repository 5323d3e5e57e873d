//! How `openqq schedule` prints schedules, their ledger, a fire on request and a refused schedule,
//! and how it reads an items file.

use super::*;
use serde_json::json;

const ID: &str = "0190bbbb-0000-7000-8000-000000000002";
const BATCH: &str = "0190aaaa-0000-7000-8000-000000000001";

fn schedule(paused: bool, template: Value) -> Value {
    json!({
        "schedule_id": ID, "name": "nightly", "expression": "30 2 * * *", "time_zone": "Europe/Berlin",
        "overlap": "skip", "catch_up": "1h", "paused": paused, "template": template,
        "created_at": "2026-03-02T09:58:30Z", "updated_at": "2026-03-02T10:01:02.250Z",
        "next_fires": ["2026-03-03T01:30:00Z", "2026-03-04T01:30:00Z"],
    })
}

#[test]
fn templates_read_as_what_a_fire_submits() {
    assert_eq!(template(&json!({"items_ref": {"digest": "x", "bytes": 3}, "items": 3})), "3 fixed items");
    assert_eq!(template(&json!({"items": 1})), "1 fixed item");
    assert_eq!(template(&json!({"revalidate": "all"})), "revalidate every design");
    assert_eq!(template(&json!({"revalidate": {"name_prefix": "blink-"}})), "revalidate designs named blink-*");
    assert_eq!(template(&json!(null)), "—", "a template this command does not know is a dash, not a panic");
}

#[test]
fn the_list_has_a_row_per_schedule_with_its_state_and_next_fire_or_says_how_to_add_one() {
    let mut other = schedule(true, json!({"revalidate": "all"}));
    other["name"] = json!("hourly");
    other["expression"] = json!("rate(1 hours)");
    other["time_zone"] = json!("UTC");
    other["next_fires"] = json!([]);
    let text = list(&[schedule(false, json!({"items": 2})), other]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[0],
        "  SCHEDULE_ID                           NAME     EXPRESSION     TIME_ZONE      STATE   NEXT_FIRE (UTC)      TEMPLATE"
    );
    assert_eq!(
        lines[1],
        format!("  {ID}  nightly  30 2 * * *     Europe/Berlin  active  2026-03-03 01:30:00  2 fixed items")
    );
    assert_eq!(
        lines[2],
        format!("  {ID}  hourly   rate(1 hours)  UTC            paused  —                    revalidate every design")
    );
    assert!(list(&[]).starts_with("No schedules. Create one with: openqq schedule add"), "{}", list(&[]));
}

#[test]
fn show_prints_the_timetable_template_policies_times_and_next_fires() {
    let mut s = schedule(false, json!({"revalidate": {"name_prefix": "blink-"}}));
    s["jitter"] = json!("5m");
    s["last_batch_id"] = json!(BATCH);
    assert_eq!(
        show(&s),
        format!(
            "Schedule nightly ({ID}): active\n\
             Expression: 30 2 * * * in Europe/Berlin\n\
             Template: revalidate designs named blink-*\n\
             Overlap skip, catch-up 1h, jitter 5m\n\
             Created 2026-03-02 09:58:30, updated 2026-03-02 10:01:02.250\n\
             Last batch: {BATCH} (openqq batch status {BATCH})\n\
             Next fires (UTC):\n\
             \x20 2026-03-03 01:30:00\n\
             \x20 2026-03-04 01:30:00\n"
        )
    );
    let paused = show(&schedule(true, json!({"items": 1})));
    assert!(paused.starts_with(&format!("Schedule nightly ({ID}): paused\n")), "{paused}");
    assert!(paused.contains("Overlap skip, catch-up 1h, no jitter\n"), "{paused}");
    assert!(paused.contains("Next fires (UTC; paused: none of them runs until it is resumed):\n"), "{paused}");
    assert!(!paused.contains("Last batch"), "{paused}");
}

#[test]
fn the_ledger_prints_a_row_per_fire_with_its_batch_or_reason() {
    let rows = [
        json!({"nominal_time": "2026-03-02T10:45:01.123Z", "fired_at": "2026-03-02T10:45:01.123Z",
               "outcome": "submitted", "batch_id": BATCH}),
        json!({"nominal_time": "2026-03-02T10:40:00Z", "fired_at": "2026-03-02T10:40:00.400Z",
               "outcome": "skipped_overlap"}),
        json!({"nominal_time": "2026-03-02T10:00:00Z", "fired_at": "2026-03-02T10:00:01Z",
               "outcome": "empty", "reason": "the template matched no design"}),
    ];
    assert_eq!(
        fires(&rows),
        format!(
            "  NOMINAL_TIME (UTC)       FIRED_AT (UTC)           OUTCOME          BATCH_ID                              REASON\n\
             \x20 2026-03-02 10:45:01.123  2026-03-02 10:45:01.123  submitted        {BATCH}\n\
             \x20 2026-03-02 10:40:00      2026-03-02 10:40:00.400  skipped_overlap  —\n\
             \x20 2026-03-02 10:00:00      2026-03-02 10:00:01      empty            —                                     the template matched no design\n"
        )
    );
}

#[test]
fn a_fire_on_request_says_what_it_submitted_or_that_the_ledger_had_it() {
    let submitted = json!({"nominal_time": "2026-03-02T10:45:01.5Z", "fired_at": "2026-03-02T10:45:01.5Z",
                           "outcome": "submitted", "batch_id": BATCH});
    assert_eq!(
        fired(&submitted),
        format!(
            "Fired at 2026-03-02 10:45:01.500: submitted, batch {BATCH}.\nFollow the batch with: openqq batch status {BATCH}\n"
        )
    );
    let again = json!({"nominal_time": "2026-03-02T10:45:01.5Z", "outcome": "deduplicated",
                       "recorded_outcome": "submitted", "batch_id": BATCH});
    assert!(
        fired(&again).starts_with(&format!(
            "The ledger already had the fire at 2026-03-02 10:45:01.500 (submitted, batch {BATCH}): nothing more was submitted.\n"
        )),
        "{}",
        fired(&again)
    );
    let empty =
        json!({"nominal_time": "2026-03-02T10:00:00Z", "outcome": "empty", "reason": "the template matched no design"});
    assert_eq!(fired(&empty), "Fired at 2026-03-02 10:00:00: empty: the template matched no design.\n");
}

#[test]
fn an_items_file_is_read_as_json_objects_with_their_lines_or_its_bad_lines_are_named() {
    let (items, lines) = template_items("{\"name\": \"a\"}\n\n  \n{\"name\": \"b\"}\n").unwrap();
    assert_eq!(items, [json!({"name": "a"}), json!({"name": "b"})]);
    assert_eq!(lines, [1, 4], "blank lines are not items");
    let bad = template_items("{\"name\": \"a\"}\nnot json\n[1, 2]\n").unwrap_err();
    assert_eq!(bad, "line 2: is not JSON: expected ident at line 1 column 2\nline 3: is not a JSON object");
    let many = template_items(&"x\n".repeat(25)).unwrap_err();
    assert_eq!(many.lines().count(), 21, "{many}");
    assert!(many.ends_with("\nand 5 more"), "{many}");
}

#[test]
fn a_refused_field_is_said_with_the_argument_that_sets_it() {
    let problem = json!({
        "type": "urn:openqq:problem:invalid-field", "status": 422, "field": "time_zone",
        "detail": "time_zone: unknown time zone `Mars/Olympus`",
    });
    assert_eq!(
        refused(&problem, None).unwrap(),
        "The schedule was refused: time_zone: unknown time zone `Mars/Olympus` (--time-zone)\n"
    );
    let unnamed = json!({"type": "urn:openqq:problem:invalid-field", "field": "limit", "detail": "limit: too big"});
    assert_eq!(refused(&unnamed, None).unwrap(), "The schedule was refused: limit: too big\n");
    for (field, arg) in [("expression", "EXPRESSION"), ("catch_up", "--catch-up"), ("template.items", "--items")] {
        assert_eq!(argument_of(field), Some(arg));
    }
    let other = json!({"type": "urn:openqq:problem:too-many-schedules", "detail": "a tenant may hold 100 schedules"});
    assert_eq!(refused(&other, None), None, "another problem is shown as the API says it");
}

#[test]
fn refused_items_are_listed_with_their_lines_in_the_file() {
    let problem = json!({
        "type": "urn:openqq:problem:invalid-items", "status": 422, "field": "template.items",
        "detail": "2 of 3 items are invalid, the first at index 0: missing field `target`; nothing was submitted (send \"on_invalid\": \"skip\" to submit the rest)",
        "errors": [
            {"index": 0, "reason": "missing field `target`"},
            {"index": 2, "custom_id": "c", "reason": "name: is required for a new design"},
        ],
    });
    let text = refused(&problem, Some(&[2, 3, 5])).unwrap();
    assert_eq!(
        text,
        "The schedule was refused: 2 of 3 items are invalid (--items); nothing was created\n\
         \x20 INDEX  LINE  CUSTOM_ID  REASON\n\
         \x20 0      2     —          missing field `target`\n\
         \x20 2      5     c          name: is required for a new design\n"
    );
    assert!(!text.contains("on_invalid"), "a schedule has no on_invalid to send");
}

#[test]
fn query_values_are_percent_encoded_so_a_cursor_s_plus_survives() {
    assert_eq!(query_value("2026-03-02T10:00:00+00:00"), "2026-03-02T10%3A00%3A00%2B00%3A00");
    assert_eq!(query_value("0190bbbb-0000-7000"), "0190bbbb-0000-7000");
}
