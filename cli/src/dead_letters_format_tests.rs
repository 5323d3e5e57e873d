//! Parsing and printing of `openqq dead-letters`, and the record a replay publishes.

use super::*;
use openqq_core::event::Origin;
use openqq_core::{CorrelationId, DesignId, EventKind};

fn cause() -> Origin {
    Origin {
        tenant_id: TenantId::parse("acme").unwrap(),
        design_id: DesignId::parse("d-1").unwrap(),
        revision: 4,
        correlation_id: CorrelationId::parse("corr-9").unwrap(),
        batch: None,
    }
}

fn letter_with(value: Vec<u8>, function: &str, reason: &str, headers: Vec<(String, Vec<u8>)>) -> DeadLetter {
    DeadLetter {
        source_topic: "validation.requested".into(),
        source_partition: 2,
        source_offset: 17,
        function: function.into(),
        reason: reason.into(),
        dead_lettered_at: "2026-11-30T14:00:05Z".parse().unwrap(),
        key: "acme".into(),
        value,
        headers,
    }
}

fn envelope_letter(payload: serde_json::Value, reason: &str) -> DeadLetter {
    let original = Envelope::new(EventKind::ValidationRequested, &cause(), "design-job", payload).to_record();
    letter_with(original.value, "validation", reason, original.headers)
}

fn stored(letter: &DeadLetter, partition: u32, offset: u64) -> LogRecord {
    let rec = letter.to_record();
    LogRecord {
        topic: "dead-letter".into(),
        partition,
        offset,
        timestamp_ms: 0,
        key: rec.key,
        value: rec.value,
        headers: rec.headers,
    }
}

fn read(letter: &DeadLetter) -> Letter {
    Letter::read(&stored(letter, 5, 3))
}

#[test]
fn a_dead_letter_id_is_partition_and_offset_and_anything_else_is_refused_with_the_form() {
    assert_eq!("3:17".parse::<LetterId>(), Ok(LetterId { partition: 3, offset: 17 }));
    assert_eq!(LetterId { partition: 3, offset: 17 }.to_string(), "3:17");
    for bad in ["3", "", "a:1", "1:-1", "1:2:3", "99999999999:1"] {
        let e = bad.parse::<LetterId>().unwrap_err();
        assert!(e.to_string().contains("PARTITION:OFFSET"), "{bad:?}: {e}");
    }
}

#[test]
fn a_bad_tenant_or_an_unknown_function_is_refused_naming_the_flag() {
    let e = Filter::parse(Some("no spaces allowed"), None).unwrap_err();
    assert!(e.to_string().starts_with("--tenant"), "{e}");
    let e = Filter::parse(None, Some("api")).unwrap_err();
    assert!(e.to_string().contains("design-job, validation, results"), "{e}");
    assert!(Filter::parse(Some("acme"), Some("results")).is_ok());
}

#[test]
fn filters_admit_by_the_envelopes_tenant_and_the_function_that_gave_up() {
    let letter = read(&envelope_letter(serde_json::json!({}), "boom"));
    assert!(Filter::default().admits(&letter));
    assert!(Filter::parse(Some("acme"), Some("validation")).unwrap().admits(&letter));
    assert!(!Filter::parse(Some("globex"), None).unwrap().admits(&letter));
    assert!(!Filter::parse(None, Some("results")).unwrap().admits(&letter));
    let undecodable = read(&letter_with(b"{not json".to_vec(), "design-job", "bad", vec![]));
    assert!(Filter::parse(Some("acme"), None).unwrap().admits(&undecodable), "the key names the tenant");
}

#[test]
fn a_list_line_says_where_it_came_from_who_gave_up_what_it_names_when_and_why_on_one_line() {
    let reason = format!("the netlist object is missing\nsecond line {}", "x".repeat(200));
    let line = read(&envelope_letter(serde_json::json!({}), &reason)).line();
    for part in ["5:3", "validation.requested/2@17", "validation", "acme", "d-1", " 4 ", "2026-11-30T14:00:05Z"] {
        assert!(line.contains(part), "{part:?} in {line}");
    }
    assert!(line.contains("missing\\nsecond line"), "line breaks are escaped: {line}");
    assert!(line.ends_with('…') && !line.contains(&"x".repeat(100)), "the reason is clipped: {line}");
    assert!(!line.contains('\n'));
    let heading = heading();
    let columns: Vec<&str> = heading.split_whitespace().collect();
    assert_eq!(columns, ["ID", "SOURCE", "FUNCTION", "TENANT", "DESIGN", "REV", "KIND", "DEAD-LETTERED", "REASON"]);
    let at = |text: &str, word: &str| text.find(word).unwrap();
    assert_eq!(at(&heading, "DEAD-LETTERED"), at(&line, "2026-11-30"), "columns line up");
}

#[test]
fn a_list_line_of_a_value_that_is_no_envelope_shows_its_key_and_original_kind() {
    let headers = vec![("event-kind".to_owned(), b"design.submitted".to_vec())];
    let line = read(&letter_with(b"{not json".to_vec(), "design-job", "undecodable", headers)).line();
    assert!(line.contains("acme") && line.contains("design.submitted") && line.contains(" - "), "{line}");
}

#[test]
fn a_record_that_is_no_dead_letter_is_listed_as_unreadable() {
    let envelope = Envelope::new(EventKind::ResultsReady, &cause(), "results", ()).to_record();
    let record = LogRecord {
        topic: "dead-letter".into(),
        partition: 0,
        offset: 9,
        timestamp_ms: 0,
        key: envelope.key,
        value: envelope.value,
        headers: envelope.headers,
    };
    let line = Letter::read(&record).line();
    assert!(line.starts_with("0:9") && line.contains("unreadable"), "{line}");
}

#[test]
fn show_prints_everything_but_a_huge_payload_which_it_clips_and_measures() {
    let big = "n".repeat(50_000);
    let letter = read(&envelope_letter(serde_json::json!({ "netlist": big }), "the whole reason, unclipped"));
    let text = show(&letter, "dead-letter");
    for part in [
        "dead letter 5:3",
        "validation.requested partition 2 offset 17",
        "function:      validation",
        "reason:        the whole reason, unclipped",
        "correlation-id: corr-9",
        "event-kind: validation.requested",
        "design_id:      d-1",
        "revision:       4",
        "the first 2048 shown",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
    assert!(text.len() < 4 * SHOW_PAYLOAD_BYTES, "the payload is not dumped: {} bytes", text.len());
}

#[test]
fn show_prints_binary_header_values_as_hex() {
    let headers = vec![("blob".to_owned(), vec![0u8, 255, 10])];
    let text = show(&read(&letter_with(b"{}".to_vec(), "results", "r", headers)), "dead-letter");
    assert!(text.contains("blob: 0x00ff0a"), "{text}");
}

#[test]
fn a_replay_is_the_original_record_with_a_header_naming_its_dead_letter() {
    let letter = envelope_letter(serde_json::json!({"spec": 1}), "boom");
    let topics = vec!["design.submitted".to_owned(), "validation.requested".to_owned()];
    let (topic, record) = replay_record(&read(&letter), &topics).unwrap();
    assert_eq!(topic, "validation.requested");
    assert_eq!((record.key.as_str(), &record.value), ("acme", &letter.value), "original key and value");
    let mut expected = letter.headers.clone();
    expected.push(("replay-of".into(), b"5:3".to_vec()));
    assert_eq!(record.headers, expected, "original headers, then replay-of; no dead-letter metadata");
}

#[test]
fn replaying_a_replay_names_only_the_newest_dead_letter() {
    let mut letter = envelope_letter(serde_json::json!({}), "again");
    letter.headers.push(("replay-of".into(), b"1:1".to_vec()));
    let (_, record) = replay_record(&read(&letter), &["validation.requested".to_owned()]).unwrap();
    let replays: Vec<&[u8]> = record.headers.iter().filter(|(k, _)| k == "replay-of").map(|(_, v)| &v[..]).collect();
    assert_eq!(replays, vec![&b"5:3"[..]]);
}

#[test]
fn a_dead_letter_from_an_unknown_topic_or_without_its_value_is_not_replayed() {
    let letter = envelope_letter(serde_json::json!({}), "boom");
    let e = replay_record(&read(&letter), &["design.submitted".to_owned()]).unwrap_err();
    assert!(matches!(e, ReplayError::UnknownTopic { .. }) && e.to_string().contains("--topic-prefix"), "{e}");
    let huge = letter_with(vec![b'x'; openqq_core::ports::MAX_RECORD_BYTES + 1], "validation", "big", vec![]);
    let e = replay_record(&read(&huge), &["validation.requested".to_owned()]).unwrap_err();
    assert!(matches!(e, ReplayError::ValueOmitted { .. }), "{e}");
    assert!(show(&read(&huge), "dead-letter").contains("left out"), "show says so too");
}
