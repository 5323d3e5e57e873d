use super::*;
use crate::error::ExpressionError;
use serde_json::json;

fn input(value: serde_json::Value) -> ScheduleConfigInput {
    serde_json::from_value(value).unwrap()
}

#[test]
fn only_the_expression_is_required_and_the_rest_take_their_defaults() {
    let config: ScheduleConfig = serde_json::from_value(json!({ "expression": "0 * * * *" })).unwrap();
    assert_eq!(config, ScheduleConfig::new(Expression::parse("0 * * * *").unwrap()));
    assert_eq!(config.time_zone, Tz::UTC);
    assert_eq!(config.overlap, OverlapPolicy::Skip);
    assert_eq!(config.catch_up, Duration::from_secs(3600));
    assert!(!config.paused);
    assert_eq!(config.jitter, None);
}

#[test]
fn every_field_is_read_from_its_json_name() {
    let config: ScheduleConfig = serde_json::from_value(json!({
        "expression": "30 2 * * MON-FRI",
        "time_zone": "Europe/Berlin",
        "overlap": "buffer_one",
        "catch_up": "1h 30m",
        "paused": true,
        "jitter": "5m",
    }))
    .unwrap();
    assert_eq!(config.time_zone, chrono_tz::Europe::Berlin);
    assert_eq!(config.overlap, OverlapPolicy::BufferOne);
    assert_eq!(config.catch_up, Duration::from_secs(5400));
    assert!(config.paused);
    assert_eq!(config.jitter, Some(Duration::from_secs(300)));
}

#[test]
fn a_configuration_is_written_in_full_and_reads_back_the_same() {
    let mut config = ScheduleConfig::new(Expression::parse("rate(15 minutes)").unwrap());
    config.time_zone = chrono_tz::America::New_York;
    config.overlap = OverlapPolicy::Allow;
    config.jitter = Some(Duration::from_secs(90));
    let written = serde_json::to_value(&config).unwrap();
    assert_eq!(
        written,
        json!({
            "expression": "rate(15 minutes)",
            "time_zone": "America/New_York",
            "overlap": "allow",
            "catch_up": "1h",
            "paused": false,
            "jitter": "1m 30s",
        })
    );
    assert_eq!(serde_json::from_value::<ScheduleConfig>(written).unwrap(), config);
}

#[test]
fn no_jitter_is_left_out_of_the_json() {
    let written = serde_json::to_value(ScheduleConfig::new(Expression::parse("0 0 * * *").unwrap())).unwrap();
    assert_eq!(written.get("jitter"), None);
}

#[test]
fn each_bad_field_is_reported_under_its_json_name() {
    let cases = [
        (json!({ "expression": "61 * * * *" }), "expression"),
        (json!({ "expression": "* * * *", "time_zone": "UTC" }), "expression"),
        (json!({ "expression": "* * * * *", "time_zone": "Mars/Olympus_Mons" }), "time_zone"),
        (json!({ "expression": "* * * * *", "time_zone": "" }), "time_zone"),
        (json!({ "expression": "* * * * *", "overlap": "sometimes" }), "overlap"),
        (json!({ "expression": "* * * * *", "catch_up": "soon" }), "catch_up"),
        (json!({ "expression": "* * * * *", "catch_up": "10s" }), "catch_up"),
        (json!({ "expression": "* * * * *", "catch_up": "8d" }), "catch_up"),
        (json!({ "expression": "* * * * *", "jitter": "0s" }), "jitter"),
        (json!({ "expression": "* * * * *", "jitter": "2days" }), "jitter"),
    ];
    for (value, field) in cases {
        let err = input(value.clone()).validate().unwrap_err();
        assert_eq!(err.field(), field, "{value}: {err}");
    }
}

#[test]
fn an_unknown_time_zone_has_its_own_error() {
    let err = input(json!({ "expression": "0 * * * *", "time_zone": "Europe/Atlantis" })).validate().unwrap_err();
    assert_eq!(err, ConfigError::UnknownTimeZone { name: "Europe/Atlantis".into() });
    assert_eq!(
        err.to_string(),
        "time_zone: `Europe/Atlantis` is not an IANA time zone name (like \"Europe/Berlin\" or \"UTC\")"
    );
}

#[test]
fn an_expression_error_keeps_its_type_for_the_caller() {
    let err = input(json!({ "expression": "0 0 30 2 *" })).validate().unwrap_err();
    assert!(matches!(err, ConfigError::Expression(ExpressionError::NeverFires { .. })), "{err:?}");
}

#[test]
fn a_duration_out_of_range_names_the_range() {
    let err = input(json!({ "expression": "* * * * *", "catch_up": "30s" })).validate().unwrap_err();
    assert_eq!(err.to_string(), "catch_up: `30s` is outside 1m to 7days");
}

#[test]
fn decoding_a_stored_configuration_validates_it_and_says_why_it_failed() {
    let err = serde_json::from_value::<ScheduleConfig>(json!({ "expression": "* * * * *", "overlap": "twice" }))
        .unwrap_err()
        .to_string();
    assert!(err.contains("overlap: `twice` is not one of"), "{err}");
}

#[test]
fn durations_are_strings_not_numbers_of_seconds() {
    assert!(
        serde_json::from_value::<ScheduleConfigInput>(json!({ "expression": "* * * * *", "catch_up": 3600 })).is_err()
    );
}

#[test]
fn a_schedule_is_active_from_its_creation_or_its_last_resumption() {
    use chrono::TimeZone;
    let created = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut schedule = Schedule::new("s", ScheduleConfig::new(Expression::parse("* * * * *").unwrap()), created);
    assert_eq!(schedule.active_since(), created);
    let resumed = Utc.with_ymd_and_hms(2026, 2, 1, 0, 0, 0).unwrap();
    schedule.resumed_at = Some(resumed);
    assert_eq!(schedule.active_since(), resumed);
}
