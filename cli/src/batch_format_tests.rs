//! How `openqq batch` prints batches, items, a refused batch and its progress.

use super::*;
use serde_json::json;

const ID: &str = "0190aaaa-0000-7000-8000-000000000001";

fn batch(status: &str, counts: [u64; 6]) -> Value {
    let [queued, validating, ready, failed, rejected, cancelled] = counts;
    json!({
        "batch_id": ID, "name": "nightly", "status": status,
        "counts": {"queued": queued, "validating": validating, "ready": ready, "failed": failed,
                   "rejected": rejected, "cancelled": cancelled},
        "verdicts": {"pass": 5, "fail": 1},
        "created_at": "2026-12-02T06:10:00.000000Z", "started_at": "2026-12-02T06:10:00.250Z",
        "finished_at": null,
    })
}

#[test]
fn the_tally_counts_every_item_and_those_no_longer_queued_or_validating_as_done() {
    assert_eq!(Tally::of(&batch("running", [930, 64, 4, 1, 1, 0])), Tally { total: 1000, done: 6 });
    assert_eq!(Tally::of(&json!({})), Tally { total: 0, done: 0 }, "a batch without counts is empty, not a panic");
}

#[test]
fn the_rate_waits_for_a_second_and_an_ended_item_then_follows_the_last_half_minute() {
    let mut rate = Rate::default();
    rate.observe(0.0, 0);
    assert_eq!(rate.per_sec(), None, "one observation has no rate");
    rate.observe(0.5, 10);
    assert_eq!(rate.per_sec(), None, "under a second is too short to say");
    rate.observe(2.0, 20);
    assert_eq!(rate.per_sec(), Some(10.0));
    // Fast at first, slow for the last 40 s: the rate is the slow one.
    for t in 3..=42 {
        rate.observe(t as f64, 20 + (t - 2));
    }
    let r = rate.per_sec().unwrap();
    assert!((r - 1.0).abs() < 0.01, "{r}");
    let mut stalled = Rate::default();
    stalled.observe(0.0, 5);
    stalled.observe(10.0, 5);
    assert_eq!(stalled.per_sec(), None, "nothing ended: no rate, so no ETA");
}

#[test]
fn the_progress_line_says_done_of_total_rate_eta_status_and_what_ended() {
    let b = batch("running", [500, 88, 400, 10, 2, 0]);
    assert_eq!(
        progress_line(&b, Some(23.5)),
        "nightly: 412/1000 items (41%) · 23.5 items/s · ETA 25.0 s · running · 400 ready, 10 failed, 2 rejected"
    );
    assert_eq!(
        progress_line(&batch("queued", [3, 0, 0, 0, 0, 0]), None),
        "nightly: 0/3 items (0%) · — items/s · ETA — · queued"
    );
    let done = progress_line(&batch("completed", [0, 0, 3, 0, 0, 0]), Some(2.0));
    assert!(done.contains("3/3 items (100%)") && done.contains("ETA 0 s"), "{done}");
}

#[test]
fn durations_read_as_seconds_minutes_or_hours() {
    assert_eq!(duration(0.43), "0.4 s");
    assert_eq!(duration(59.94), "59.9 s");
    assert_eq!(duration(245.0), "4 min 05 s");
    assert_eq!(duration(7385.0), "2 h 03 min");
    assert_eq!(duration(-3.0), "0.0 s", "clocks that disagree never print a negative time");
}

#[test]
fn the_status_prints_the_times_the_threshold_the_reason_and_a_row_per_status() {
    let mut b = batch("failed", [0, 0, 6, 3, 0, 91]);
    b["max_failed"] = json!("2%");
    b["reason"] = json!("3 items failed, more than max_failed 2%");
    b["finished_at"] = json!("2026-12-02T06:10:09Z");
    let text = status(&b);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("Batch nightly ({ID}): failed"));
    assert_eq!(lines[1], "Created 2026-12-02 06:10:00, started 2026-12-02 06:10:00, finished 2026-12-02 06:10:09");
    assert_eq!(lines[2], "Fails past 2% failed items");
    assert_eq!(lines[3], "Reason: 3 items failed, more than max_failed 2%");
    assert_eq!(lines[4], "  STATUS      ITEMS");
    assert_eq!(lines[5], "  queued      0");
    assert_eq!(lines[10], "  cancelled   91");
    assert_eq!(lines[11], "  total       100");
    assert_eq!(lines[12], "Verdicts: 5 pass, 1 fail");
    let open = status(&batch("queued", [3, 0, 0, 0, 0, 0]));
    assert!(open.contains("finished —") && !open.contains("Reason") && !open.contains("Fails past"), "{open}");
}

#[test]
fn items_print_one_row_each_with_dashes_for_what_an_item_lacks() {
    let rows = [
        json!({"index": 0, "custom_id": "a", "design_id": "d-0", "revision": 1, "status": "ready", "verdict": "pass"}),
        json!({"index": 1, "status": "rejected", "reason": "name: is required for a new design"}),
    ];
    assert_eq!(
        items(&rows),
        "  INDEX  CUSTOM_ID  DESIGN_ID  STATUS    VERDICT  REASON\n\
         \x20 0      a          d-0        ready     pass\n\
         \x20 1      —          —          rejected  —        name: is required for a new design\n"
    );
}

#[test]
fn the_summary_says_how_long_the_batch_took_and_lists_its_failed_and_rejected_items() {
    let mut b = batch("completed", [0, 0, 28, 1, 1, 0]);
    b["finished_at"] = json!("2026-12-02T06:14:05.5Z");
    let listed = [
        json!({"index": 3, "custom_id": "n-3", "status": "failed", "reason": "the validation function gave up"}),
        json!({"index": 7, "custom_id": "n-7", "status": "rejected", "reason": "target: missing field `device`"}),
    ];
    let text = summary(&b, &listed, 2);
    assert!(text.starts_with(&format!("Batch nightly ({ID}): completed in 4 min 06 s\n")), "{text}");
    assert!(text.contains("  ready       28\n") && text.contains("Verdicts: 5 pass, 1 fail\n"), "{text}");
    assert!(text.contains("Failed or rejected items (2):\n"), "{text}");
    assert!(text.contains("  3      n-3        failed    the validation function gave up\n"), "{text}");
    assert!(text.contains("  7      n-7        rejected  target: missing field `device`\n"), "{text}");

    let many = summary(&b, &listed, 57);
    assert!(many.contains(&format!("(the first 2 of 57; `openqq batch items {ID} --status failed`")), "{many}");
    let clean = summary(&batch("completed", [0, 0, 3, 0, 0, 0]), &[], 0);
    assert!(clean.ends_with("No item failed or was rejected.\n") && !clean.contains(" in "), "{clean}");
}

#[test]
fn a_refused_batch_lists_each_item_with_its_line_in_the_file_and_its_reason() {
    let problem = json!({
        "type": "urn:openqq:problem:invalid-items", "status": 422,
        "detail": "2 of 4 items are invalid, the first at index 1: is not a JSON object: expected value at line 1 column 1; nothing was submitted",
        "errors": [
            {"index": 1, "reason": "is not a JSON object: expected value at line 1 column 1"},
            {"index": 3, "custom_id": "late", "reason": "name: is required for a new design"},
        ],
    });
    let file = "{\"custom_id\": \"a\"}\nnot json\n\n{\"custom_id\": \"b\"}\n{\"custom_id\": \"late\"}\n";
    let lines = item_lines(file);
    assert_eq!(lines, [1, 2, 4, 5], "blank lines are not items");
    let text = refused(&problem, Some(&lines));
    assert!(text.starts_with("The batch was refused: 2 of 4 items are invalid"), "{text}");
    assert!(text.contains("--on-invalid skip"), "{text}");
    assert!(text.contains("  INDEX  LINE  CUSTOM_ID  REASON\n"), "{text}");
    assert!(
        text.contains("  1      2     —          is not a JSON object: expected value at line 1 column 1\n"),
        "{text}"
    );
    assert!(text.contains("  3      5     late       name: is required for a new design\n"), "{text}");
    let bare = refused(&json!({"detail": "the batch needs a name"}), None);
    assert_eq!(bare, "The batch was refused: the batch needs a name\n");
}
