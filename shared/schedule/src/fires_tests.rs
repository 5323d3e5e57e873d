use super::*;
use crate::config::{parse_time_zone, ScheduleConfig};
use crate::cron::tests::cron_strategy;
use chrono::{NaiveDateTime, TimeZone};
use proptest::prelude::*;

fn schedule(expression: &str, zone: &str, start: DateTime<Utc>) -> Schedule {
    let mut config = ScheduleConfig::new(Expression::parse(expression).unwrap());
    config.time_zone = parse_time_zone(zone).unwrap();
    Schedule::new("s", config, start)
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

/// Fires shown as local wall-clock times with their offset, the way a tenant reads them.
fn local(fires: &[DateTime<Utc>], zone: &str) -> Vec<String> {
    let zone = parse_time_zone(zone).unwrap();
    fires.iter().map(|f| f.with_timezone(&zone).format("%m-%d %H:%M %:z").to_string()).collect()
}

fn between(s: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    collect_fires_between(s, from, to, 10_000).unwrap()
}

/// A creation time well before every fire the tests look at.
fn long_ago() -> DateTime<Utc> {
    utc(2000, 1, 1, 0, 0)
}

#[test]
fn the_next_five_fires_of_a_quarter_hourly_schedule_follow_the_clock() {
    let s = schedule("*/15 * * * *", "UTC", long_ago());
    let fires = next_fires(&s, utc(2026, 5, 4, 10, 7), 5);
    assert_eq!(fires, [(10, 15), (10, 30), (10, 45), (11, 0), (11, 15)].map(|(h, m)| utc(2026, 5, 4, h, m)));
}

#[test]
fn fires_are_strictly_after_the_given_time() {
    let s = schedule("0 * * * *", "UTC", long_ago());
    assert_eq!(next_fires(&s, utc(2026, 5, 4, 10, 0), 1), [utc(2026, 5, 4, 11, 0)]);
}

#[test]
fn working_day_mornings_are_read_in_the_schedules_zone() {
    let s = schedule("0 9 * * MON-FRI", "Europe/Berlin", long_ago());
    // Friday 9 January 2026, noon UTC: next Monday to Wednesday at 09:00 CET (08:00 UTC).
    let fires = next_fires(&s, utc(2026, 1, 9, 12, 0), 3);
    assert_eq!(fires, [utc(2026, 1, 12, 8, 0), utc(2026, 1, 13, 8, 0), utc(2026, 1, 14, 8, 0)]);
}

#[test]
fn a_monthly_schedule_fires_on_the_first_of_each_month() {
    let s = schedule("0 0 1 * *", "UTC", long_ago());
    let fires = next_fires(&s, utc(2026, 1, 15, 0, 0), 3);
    assert_eq!(fires, [utc(2026, 2, 1, 0, 0), utc(2026, 3, 1, 0, 0), utc(2026, 4, 1, 0, 0)]);
}

#[test]
fn nothing_fires_at_or_before_the_schedules_creation() {
    let s = schedule("0 * * * *", "UTC", utc(2026, 5, 4, 10, 0));
    assert_eq!(next_fires(&s, utc(2026, 5, 1, 0, 0), 2), [utc(2026, 5, 4, 11, 0), utc(2026, 5, 4, 12, 0)]);
}

#[test]
fn a_daily_time_in_the_spring_gap_of_new_york_is_skipped_that_day() {
    let s = schedule("30 2 * * *", "America/New_York", long_ago());
    let fires = next_fires(&s, utc(2026, 3, 6, 12, 0), 3);
    assert_eq!(local(&fires, "America/New_York"), ["03-07 02:30 -05:00", "03-09 02:30 -04:00", "03-10 02:30 -04:00"]);
}

#[test]
fn an_hourly_schedule_has_no_two_oclock_on_new_yorks_spring_night() {
    let s = schedule("0 * * * *", "America/New_York", long_ago());
    let fires = between(&s, utc(2026, 3, 8, 5, 0), utc(2026, 3, 8, 8, 0));
    assert_eq!(
        local(&fires, "America/New_York"),
        ["03-08 00:00 -05:00", "03-08 01:00 -05:00", "03-08 03:00 -04:00", "03-08 04:00 -04:00"]
    );
    // In elapsed time nothing is lost: the clock itself skipped the hour.
    assert_eq!(fires, [5, 6, 7, 8].map(|h| utc(2026, 3, 8, h, 0)));
}

#[test]
fn a_repeated_daily_time_in_new_yorks_autumn_fires_once_at_its_first_occurrence() {
    let s = schedule("30 1 * * *", "America/New_York", long_ago());
    let fires = next_fires(&s, utc(2026, 10, 31, 12, 0), 2);
    assert_eq!(local(&fires, "America/New_York"), ["11-01 01:30 -04:00", "11-02 01:30 -05:00"]);
    // And asked from between the two occurrences, the second is not offered either.
    assert_eq!(next_fires(&s, utc(2026, 11, 1, 6, 0), 1), [utc(2026, 11, 2, 6, 30)]);
}

#[test]
fn half_past_two_is_unaffected_by_new_yorks_autumn_change() {
    let s = schedule("30 2 * * *", "America/New_York", long_ago());
    let fires = next_fires(&s, utc(2026, 10, 31, 12, 0), 2);
    assert_eq!(local(&fires, "America/New_York"), ["11-01 02:30 -05:00", "11-02 02:30 -05:00"]);
}

#[test]
fn an_hourly_schedule_fires_once_in_new_yorks_repeated_hour() {
    let s = schedule("0 * * * *", "America/New_York", long_ago());
    let fires = between(&s, utc(2026, 11, 1, 4, 0), utc(2026, 11, 1, 8, 0));
    assert_eq!(
        local(&fires, "America/New_York"),
        ["11-01 00:00 -04:00", "11-01 01:00 -04:00", "11-01 02:00 -05:00", "11-01 03:00 -05:00"]
    );
    assert!(!fires.contains(&utc(2026, 11, 1, 6, 0)), "01:00 EST is the repeat of 01:00 EDT");
}

#[test]
fn a_quarter_hourly_schedule_asked_during_the_repeat_waits_for_the_hour_after_it() {
    let s = schedule("*/15 * * * *", "America/New_York", long_ago());
    // 01:10 EST, in the second pass of the repeated hour: 01:15 and 01:30 have fired (as EDT).
    assert_eq!(next_fires(&s, utc(2026, 11, 1, 6, 10), 1), [utc(2026, 11, 1, 7, 0)]);
    // 01:50 EDT, at the end of the first pass: the next local minute is 02:00 EST.
    assert_eq!(next_fires(&s, utc(2026, 11, 1, 5, 50), 1), [utc(2026, 11, 1, 7, 0)]);
}

#[test]
fn a_daily_time_in_the_spring_gap_of_berlin_is_skipped_that_day() {
    let s = schedule("30 2 * * *", "Europe/Berlin", long_ago());
    let fires = next_fires(&s, utc(2026, 3, 27, 12, 0), 2);
    assert_eq!(local(&fires, "Europe/Berlin"), ["03-28 02:30 +01:00", "03-30 02:30 +02:00"]);
}

#[test]
fn an_hourly_schedule_has_no_two_oclock_on_berlins_spring_night() {
    let s = schedule("0 * * * *", "Europe/Berlin", long_ago());
    let fires = between(&s, utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 2, 0));
    assert_eq!(
        local(&fires, "Europe/Berlin"),
        ["03-29 00:00 +01:00", "03-29 01:00 +01:00", "03-29 03:00 +02:00", "03-29 04:00 +02:00"]
    );
}

#[test]
fn a_repeated_daily_time_in_berlins_autumn_fires_once_at_its_first_occurrence() {
    let s = schedule("30 2 * * *", "Europe/Berlin", long_ago());
    let fires = next_fires(&s, utc(2026, 10, 24, 12, 0), 3);
    assert_eq!(local(&fires, "Europe/Berlin"), ["10-25 02:30 +02:00", "10-26 02:30 +01:00", "10-27 02:30 +01:00"]);
    assert_eq!(fires, [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30), utc(2026, 10, 27, 1, 30)]);
}

#[test]
fn an_hourly_schedule_fires_once_in_berlins_repeated_hour() {
    let s = schedule("0 * * * *", "Europe/Berlin", long_ago());
    let fires = between(&s, utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 3, 0));
    assert_eq!(
        local(&fires, "Europe/Berlin"),
        ["10-25 01:00 +02:00", "10-25 02:00 +02:00", "10-25 03:00 +01:00", "10-25 04:00 +01:00"]
    );
}

#[test]
fn an_hourly_rate_ignores_daylight_saving() {
    let start = Utc.with_ymd_and_hms(2026, 3, 8, 5, 17, 0).unwrap();
    let s = schedule("rate(1 hour)", "America/New_York", start);
    let fires = next_fires(&s, start, 4);
    assert_eq!(fires, [6, 7, 8, 9].map(|h| Utc.with_ymd_and_hms(2026, 3, 8, h, 17, 0).unwrap()));
}

#[test]
fn a_daily_rate_is_24_hours_so_its_local_time_moves_with_daylight_saving() {
    let s = schedule("rate(1 day)", "Europe/Berlin", utc(2026, 10, 24, 10, 0));
    let fires = next_fires(&s, utc(2026, 10, 24, 10, 0), 2);
    assert_eq!(fires, [utc(2026, 10, 25, 10, 0), utc(2026, 10, 26, 10, 0)]);
    assert_eq!(local(&fires, "Europe/Berlin"), ["10-25 11:00 +01:00", "10-26 11:00 +01:00"]);
}

#[test]
fn a_rate_counts_its_intervals_from_the_schedules_creation() {
    let start = Utc.with_ymd_and_hms(2026, 5, 4, 10, 17, 30).unwrap() + TimeDelta::milliseconds(500);
    let s = schedule("rate(5 minutes)", "UTC", start);
    assert_eq!(
        next_fires(&s, utc(2026, 1, 1, 0, 0), 2),
        [start + TimeDelta::minutes(5), start + TimeDelta::minutes(10)]
    );
    let on_a_fire = start + TimeDelta::minutes(10);
    assert_eq!(next_fires(&s, on_a_fire, 1), [start + TimeDelta::minutes(15)]);
    assert_eq!(next_fires(&s, on_a_fire - TimeDelta::nanoseconds(1), 1), [on_a_fire]);
}

#[test]
fn a_range_includes_both_ends() {
    let s = schedule("0 * * * *", "UTC", long_ago());
    let fires = between(&s, utc(2026, 5, 4, 0, 0), utc(2026, 5, 4, 23, 0));
    assert_eq!(fires.len(), 24);
    assert_eq!((fires[0], fires[23]), (utc(2026, 5, 4, 0, 0), utc(2026, 5, 4, 23, 0)));
}

#[test]
fn a_backwards_range_is_empty() {
    let s = schedule("* * * * *", "UTC", long_ago());
    assert_eq!(between(&s, utc(2026, 5, 4, 1, 0), utc(2026, 5, 4, 0, 0)), Vec::<DateTime<Utc>>::new());
}

#[test]
fn a_range_with_more_fires_than_the_maximum_gives_the_maximum_then_an_error() {
    let s = schedule("* * * * *", "UTC", long_ago());
    let (from, to) = (utc(2026, 1, 1, 0, 0), utc(2026, 12, 31, 23, 59));
    let mut fires = fires_between(&s, from, to, 1000);
    assert_eq!(fires.by_ref().take(1000).filter(Result::is_ok).count(), 1000);
    assert_eq!(fires.next(), Some(Err(TooManyFires { max: 1000 })));
    assert_eq!(fires.next(), None);
    assert_eq!(collect_fires_between(&s, from, to, 525_599), Err(TooManyFires { max: 525_599 }));
}

#[test]
fn every_minute_of_a_year_is_525600_fires_and_a_maximum_of_that_many_is_enough() {
    let s = schedule("* * * * *", "UTC", long_ago());
    let fires = collect_fires_between(&s, utc(2026, 1, 1, 0, 0), utc(2026, 12, 31, 23, 59), 525_600).unwrap();
    assert_eq!(fires.len(), 525_600);
}

/// Whether `instant` is a fire by the rule, checked without the search: its wall-clock minute
/// matches and it is that minute's first (or only) occurrence.
fn is_fire_by_definition(cron: &Cron, zone: Tz, instant: DateTime<Utc>) -> bool {
    let wall: NaiveDateTime = instant.with_timezone(&zone).naive_local();
    let first = match zone.from_local_datetime(&wall) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.with_timezone(&Utc),
        LocalResult::None => return false,
    };
    cron.matches(wall) && first == instant
}

fn zone_strategy() -> impl Strategy<Value = &'static str> {
    // Lord Howe moves its clocks by 30 minutes; Kathmandu is 5:45 ahead of UTC.
    prop::sample::select(vec!["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu"])
}

/// Starting points near the 2026 transitions of the zones above, and ordinary days.
fn around_transitions() -> impl Strategy<Value = DateTime<Utc>> {
    let days = prop::sample::select(vec![
        utc(2026, 3, 7, 12, 0),
        utc(2026, 10, 31, 12, 0),
        utc(2026, 3, 28, 12, 0),
        utc(2026, 10, 24, 12, 0),
        utc(2026, 4, 4, 6, 0),
        utc(2026, 10, 3, 6, 0),
        utc(2026, 7, 1, 0, 0),
    ]);
    (days, 0i64..2880).prop_map(|(day, minutes)| day + TimeDelta::minutes(minutes))
}

proptest! {
    #[test]
    fn next_fires_are_strictly_increasing_and_each_one_matches_the_expression(
        text in cron_strategy(),
        zone in zone_strategy(),
        after in around_transitions(),
    ) {
        let Ok(Expression::Cron(cron)) = Expression::parse(&text) else { return Ok(()) };
        let s = schedule(&text, zone, long_ago());
        let tz = s.config.time_zone;
        let fires = next_fires(&s, after, 20);
        prop_assert!(!fires.is_empty());
        let mut previous = after;
        for fire in fires {
            prop_assert!(fire > previous, "{text} in {zone}: {fire} after {previous}");
            prop_assert!(is_fire_by_definition(&cron, tz, fire), "{text} in {zone}: {fire}");
            previous = fire;
        }
    }

    #[test]
    fn no_fire_is_left_out_around_a_transition(
        text in cron_strategy(),
        zone in zone_strategy(),
        from in around_transitions(),
    ) {
        let Ok(Expression::Cron(cron)) = Expression::parse(&text) else { return Ok(()) };
        let s = schedule(&text, zone, long_ago());
        let from = from.with_second(0).unwrap();
        let to = from + TimeDelta::hours(30);
        let found = collect_fires_between(&s, from, to, 2000).unwrap();
        let mut expected = Vec::new();
        let mut t = from;
        while t <= to {
            if is_fire_by_definition(&cron, s.config.time_zone, t) {
                expected.push(t);
            }
            t += TimeDelta::minutes(1);
        }
        prop_assert_eq!(found, expected, "{} in {}", text, zone);
    }

    #[test]
    fn rate_fires_are_whole_intervals_after_the_start(
        value in 1u32..500,
        unit in prop::sample::select(vec!["minute", "hour", "day"]),
        start_secs in 1_700_000_000i64..1_900_000_000,
        offset_secs in 0i64..100_000_000,
    ) {
        let text = if value == 1 { format!("rate(1 {unit})") } else { format!("rate({value} {unit}s)") };
        let start = Utc.timestamp_opt(start_secs, 0).unwrap();
        let s = schedule(&text, "America/New_York", start);
        let after = start + TimeDelta::seconds(offset_secs);
        let Expression::Rate(rate) = s.config.expression else { unreachable!() };
        let fires = next_fires(&s, after, 3);
        prop_assert!(fires[0] > after && fires[0] - rate.interval() <= after);
        for fire in &fires {
            prop_assert_eq!((*fire - start).num_seconds() % rate.interval().num_seconds(), 0);
        }
        prop_assert_eq!(fires[1] - fires[0], rate.interval());
    }
}
