//! Fuzzes schedule expressions and configurations as `POST /v1/schedules` reads them. Text that
//! starts with `{` is a configuration (`ScheduleConfigInput`: expression, IANA time zone, overlap,
//! catch-up and jitter durations), validated and then asked for its next fire times; anything
//! else is an expression (5-field cron or `rate(N unit)`).
//!
//! What must hold: an expression reads back from its own text unchanged; a cron's next matching
//! minute matches it and is not before the start; fire times come strictly in order, after the
//! start, and a bounded range never yields more than its bound.
#![no_main]

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use libfuzzer_sys::fuzz_target;
use openqq_schedule::{fires_between, next_fires, Expression, Schedule, ScheduleConfigInput};

fn start() -> DateTime<Utc> {
    DateTime::from_timestamp(1_796_036_400, 0).expect("a valid instant")
}

fn expression(text: &str) {
    let Ok(expression) = Expression::parse(text) else { return };
    let again = Expression::parse(&expression.to_string()).expect("an expression's own text parses");
    assert_eq!(again, expression, "{text:?} reads back as {}", expression);
    if let Expression::Cron(cron) = &expression {
        let from = NaiveDate::from_ymd_opt(2026, 3, 29).and_then(|d| d.and_hms_opt(1, 30, 17)).expect("a valid time");
        if let Some(next) = cron.next_local(from) {
            assert!(next >= from && cron.matches(next), "{cron} after {from}: {next}");
        }
    }
}

fn config(bytes: &[u8]) {
    let Ok(input) = serde_json::from_slice::<ScheduleConfigInput>(bytes) else { return };
    let Ok(config) = input.validate() else { return };
    let again = ScheduleConfigInput::from(config.clone()).validate().expect("a configuration's own form validates");
    assert_eq!(again, config);
    let schedule = Schedule::new("fuzz", config, start());
    let fires = next_fires(&schedule, start(), 5);
    assert!(fires.windows(2).all(|w| w[0] < w[1]) && fires.iter().all(|f| *f > start()), "{fires:?}");
    let week = fires_between(&schedule, start(), start() + TimeDelta::days(7), 50);
    assert!(week.filter(Result::is_ok).count() <= 50);
}

fuzz_target!(|data: &[u8]| {
    if data.first() == Some(&b'{') {
        config(data);
    } else if let Ok(text) = std::str::from_utf8(data) {
        expression(text);
    }
});
