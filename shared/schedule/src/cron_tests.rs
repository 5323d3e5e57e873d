use super::*;
use chrono::{NaiveDate, TimeDelta};
use proptest::prelude::*;

fn cron(text: &str) -> Cron {
    Cron::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(y, mo, d).unwrap().and_hms_opt(h, mi, 0).unwrap()
}

/// The minutes of one hour the expression's minute field allows.
fn minutes(minute_field: &str) -> Vec<u32> {
    let c = cron(&format!("{minute_field} * * * *"));
    (0..60).filter(|m| c.matches(at(2026, 1, 5, 0, *m))).collect()
}

/// The days of January 2026 (which starts on a Thursday) the day fields allow.
fn january_days(day_fields: &str) -> Vec<u32> {
    let c = cron(&format!("0 0 {day_fields}"));
    (1..=31).filter(|d| c.matches(at(2026, 1, *d, 0, 0))).collect()
}

fn field_problem(text: &str) -> (CronField, String, FieldProblem) {
    match Cron::parse(text) {
        Err(ExpressionError::Field { field, value, problem }) => (field, value, problem),
        other => panic!("{text}: expected a field error, got {other:?}"),
    }
}

#[test]
fn a_star_allows_every_value() {
    assert_eq!(minutes("*"), (0..60).collect::<Vec<_>>());
}

#[test]
fn lists_ranges_and_steps_allow_what_they_say() {
    assert_eq!(minutes("1,2,59"), vec![1, 2, 59]);
    assert_eq!(minutes("10-13"), vec![10, 11, 12, 13]);
    assert_eq!(minutes("*/15"), vec![0, 15, 30, 45]);
    assert_eq!(minutes("1-30/5"), vec![1, 6, 11, 16, 21, 26]);
    assert_eq!(minutes("0/20"), vec![0, 20, 40]);
    assert_eq!(minutes("50/4,3"), vec![3, 50, 54, 58]);
    assert_eq!(minutes("5-5"), vec![5]);
    assert_eq!(minutes("*/59"), vec![0, 59]);
}

#[test]
fn month_and_day_names_are_read_in_any_case() {
    let c = cron("0 0 * jan,Mar-may MON-fri");
    assert!(c.matches(at(2026, 1, 5, 0, 0)), "Monday 5 January");
    assert!(!c.matches(at(2026, 1, 4, 0, 0)), "Sunday 4 January");
    assert!(!c.matches(at(2026, 2, 2, 0, 0)), "a Monday in February");
    assert!(c.matches(at(2026, 5, 1, 0, 0)), "Friday 1 May");
}

#[test]
fn day_of_week_zero_and_seven_are_both_sunday() {
    let sunday = at(2026, 1, 4, 0, 0);
    assert!(cron("0 0 * * 0").matches(sunday));
    assert!(cron("0 0 * * 7").matches(sunday));
    assert!(cron("0 0 * * SUN").matches(sunday));
    assert_eq!(january_days("* * 5-7"), vec![2, 3, 4, 9, 10, 11, 16, 17, 18, 23, 24, 25, 30, 31]);
    assert_eq!(january_days("* * 0-7"), (1..=31).collect::<Vec<_>>());
}

#[test]
fn when_both_day_fields_are_restricted_either_one_matching_is_enough() {
    // The 1st, the 15th and every Monday (5, 12, 19, 26).
    assert_eq!(january_days("1,15 * MON"), vec![1, 5, 12, 15, 19, 26]);
}

#[test]
fn a_day_field_beginning_with_a_star_makes_both_day_fields_required_as_vixie_cron_does() {
    // `*/2` is odd days; with it starting with `*`, a day must also be a Monday.
    assert_eq!(january_days("*/2 * MON"), vec![5, 19]);
    assert_eq!(january_days("13 * *"), vec![13]);
    assert_eq!(january_days("* * FRI"), vec![2, 9, 16, 23, 30]);
}

#[test]
fn hours_and_months_restrict_as_written() {
    let c = cron("30 2 * 3 *");
    assert!(c.matches(at(2026, 3, 8, 2, 30)));
    assert!(!c.matches(at(2026, 3, 8, 3, 30)));
    assert!(!c.matches(at(2026, 4, 8, 2, 30)));
}

#[test]
fn a_minute_with_seconds_never_matches() {
    let c = cron("* * * * *");
    assert!(!c.matches(at(2026, 1, 1, 0, 0).with_second(1).unwrap()));
}

#[test]
fn the_expression_is_shown_with_single_spaces() {
    assert_eq!(cron("  */5\t1  * *   MON ").to_string(), "*/5 1 * * MON");
}

#[test]
fn the_next_local_minute_is_found_across_hours_days_months_and_years() {
    let c = cron("15 3 * * *");
    assert_eq!(c.next_local(at(2026, 1, 1, 3, 15)), Some(at(2026, 1, 1, 3, 15)), "at or after");
    assert_eq!(c.next_local(at(2026, 1, 1, 3, 16)), Some(at(2026, 1, 2, 3, 15)));
    assert_eq!(c.next_local(at(2026, 12, 31, 23, 59)), Some(at(2027, 1, 1, 3, 15)));
    let seconds = at(2026, 1, 1, 3, 14).with_second(30).unwrap();
    assert_eq!(c.next_local(seconds), Some(at(2026, 1, 1, 3, 15)), "rounds up to the next minute");
    assert_eq!(cron("0 0 1 * *").next_local(at(2026, 1, 31, 12, 0)), Some(at(2026, 2, 1, 0, 0)));
    assert_eq!(cron("59 23 31 12 *").next_local(at(2026, 1, 1, 0, 0)), Some(at(2026, 12, 31, 23, 59)));
}

#[test]
fn february_29th_is_found_past_a_century_year_that_is_not_leap() {
    assert_eq!(cron("0 0 29 2 *").next_local(at(2097, 3, 1, 0, 0)), Some(at(2104, 2, 29, 0, 0)));
}

#[test]
fn the_wrong_number_of_fields_is_refused_with_the_count() {
    assert_eq!(Cron::parse("* * * *"), Err(ExpressionError::FieldCount { found: 4 }));
    assert_eq!(Cron::parse("0 12 * * ? *"), Err(ExpressionError::FieldCount { found: 6 }));
    assert_eq!(Cron::parse(""), Err(ExpressionError::Empty));
}

#[test]
fn empty_values_are_refused() {
    for (text, value) in [("1,,2 * * * *", "1,,2"), ("1- * * * *", "1-"), ("*/ * * * *", "*/"), (", * * * *", ",")] {
        assert_eq!(field_problem(text), (CronField::Minute, value.into(), FieldProblem::EmptyValue), "{text}");
    }
}

#[test]
fn words_that_are_not_numbers_or_names_are_refused() {
    let words = |text: &str, names: bool| FieldProblem::NotANumber { text: text.into(), names };
    assert_eq!(field_problem("x * * * *").2, words("x", false));
    assert_eq!(field_problem("* * * MON *"), (CronField::Month, "MON".into(), words("MON", true)));
    assert_eq!(field_problem("* * * * JAN"), (CronField::DayOfWeek, "JAN".into(), words("JAN", true)));
    assert_eq!(field_problem("* * * * MONDAY").2, words("MONDAY", true));
    assert_eq!(field_problem("* -1 * * *").2, FieldProblem::EmptyValue);
    assert_eq!(field_problem("*/x * * * *").2, words("x", false));
}

#[test]
fn values_out_of_each_fields_range_are_refused_with_the_range() {
    let out = |value, min, max| FieldProblem::OutOfRange { value, min, max };
    assert_eq!(field_problem("60 * * * *"), (CronField::Minute, "60".into(), out(60, 0, 59)));
    assert_eq!(field_problem("* 24 * * *"), (CronField::Hour, "24".into(), out(24, 0, 23)));
    assert_eq!(field_problem("* * 0 * *"), (CronField::DayOfMonth, "0".into(), out(0, 1, 31)));
    assert_eq!(field_problem("* * 32 * *").2, out(32, 1, 31));
    assert_eq!(field_problem("* * * 13 *"), (CronField::Month, "13".into(), out(13, 1, 12)));
    assert_eq!(field_problem("* * * * 8"), (CronField::DayOfWeek, "8".into(), out(8, 0, 7)));
    assert_eq!(field_problem("99999999999999999999999 * * * *").2, out(u64::MAX, 0, 59));
    assert_eq!(field_problem("*/60 * * * *").2, out(60, 1, 59));
}

#[test]
fn backward_ranges_and_zero_steps_are_refused() {
    assert_eq!(field_problem("* * * * FRI-MON").2, FieldProblem::ReversedRange { start: 5, end: 1 });
    assert_eq!(field_problem("30-10 * * * *").2, FieldProblem::ReversedRange { start: 30, end: 10 });
    assert_eq!(field_problem("*/0 * * * *").2, FieldProblem::ZeroStep);
}

#[test]
fn other_dialects_syntax_is_refused_by_name() {
    for (text, bad) in
        [("0 0 ? * MON", "?"), ("0 0 L * *", "L"), ("0 0 15W * *", "15W"), ("0 0 * * 5#2", "5#2"), ("0 0 * * 5L", "5L")]
    {
        assert_eq!(field_problem(text).2, FieldProblem::Unsupported { text: bad.into() }, "{text}");
    }
    assert_eq!(Cron::parse("@daily"), Err(ExpressionError::FieldCount { found: 1 }));
}

#[test]
fn a_day_that_never_comes_is_refused() {
    assert_eq!(Cron::parse("0 0 30 2 *"), Err(ExpressionError::NeverFires { days: "30".into(), months: "2".into() }));
    assert!(Cron::parse("0 0 31 APR,JUN,SEP,NOV *").is_err());
    assert!(Cron::parse("0 0 29 2 *").is_ok(), "leap years have it");
    assert!(Cron::parse("0 0 30 2 MON").is_ok(), "every Monday of February, by the either-day rule");
}

#[test]
fn errors_read_as_sentences_naming_field_and_value() {
    let message = |text: &str| Cron::parse(text).unwrap_err().to_string();
    assert_eq!(message("0,61 * * * *"), "minute field `0,61`: 61 is out of range 0-59");
    assert_eq!(message("* * * * MON-XYZ"), "day-of-week field `MON-XYZ`: `XYZ` is not a number or a name");
    assert_eq!(message("* 5-1 * * *"), "hour field `5-1`: the range 5-1 runs backwards");
    assert_eq!(
        message("* * * *"),
        "a cron expression has 5 fields (minute hour day-of-month month day-of-week), found 4"
    );
}

/// A valid field for `field`, built from its grammar.
fn field_strategy(min: u32, max: u32) -> impl Strategy<Value = String> {
    let value = min..=max;
    prop_oneof![
        Just("*".to_owned()),
        (1..=max).prop_map(|s| format!("*/{s}")),
        value.clone().prop_map(|v| v.to_string()),
        (value.clone(), value.clone()).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        (value.clone(), value.clone(), 1..=max).prop_map(|(a, b, s)| format!("{}-{}/{s}", a.min(b), a.max(b))),
        (value.clone(), value).prop_map(|(a, b)| format!("{a},{b}")),
    ]
}

pub(crate) fn cron_strategy() -> impl Strategy<Value = String> {
    (field_strategy(0, 59), field_strategy(0, 23), field_strategy(1, 31), field_strategy(1, 12), field_strategy(0, 7))
        .prop_map(|(a, b, c, d, e)| format!("{a} {b} {c} {d} {e}"))
}

proptest! {
    #[test]
    fn the_parser_never_panics_on_any_string(text in ".{0,60}") {
        let _ = Cron::parse(&text);
    }

    #[test]
    fn the_parser_never_panics_on_strings_of_cron_characters(text in "[0-9A-Za-z*,/?#@ -]{0,40}") {
        let _ = Cron::parse(&text);
    }

    #[test]
    fn the_next_local_minute_matches_and_none_before_it_does(
        text in cron_strategy(),
        day in 0u32..3000,
        minute in 0u32..1440,
    ) {
        let Ok(c) = Cron::parse(&text) else { return Ok(()) };
        let from = at(2020, 1, 1, 0, 0) + TimeDelta::days(day.into()) + TimeDelta::minutes(minute.into());
        let next = c.next_local(from).expect("a valid expression fires within 401 years");
        prop_assert!(next >= from);
        prop_assert!(c.matches(next), "{text}: {next}");
        // Walk the minutes in between when there are few enough of them.
        if next - from <= TimeDelta::days(2) {
            let mut t = from;
            while t < next {
                prop_assert!(!c.matches(t), "{text}: {t} matches before {next}");
                t += TimeDelta::minutes(1);
            }
        }
    }
}
