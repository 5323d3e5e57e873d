use super::*;
use crate::config::ScheduleConfig;
use crate::expression::Expression;
use crate::fires::collect_fires_between;
use crate::jitter::jitter_offset;
use chrono::TimeZone;
use std::collections::BTreeMap;
use std::time::Duration;
use Outcome::*;

fn utc(d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, d, h, mi, 0).unwrap()
}

fn schedule(expression: &str, overlap: OverlapPolicy) -> Schedule {
    let mut config = ScheduleConfig::new(Expression::parse(expression).unwrap());
    config.overlap = overlap;
    Schedule::new("sched-1", config, utc(1, 0, 0))
}

fn hourly() -> Schedule {
    schedule("0 * * * *", OverlapPolicy::Skip)
}

fn handled(last: DateTime<Utc>) -> FireState {
    FireState { last_handled: Some(last), ..FireState::default() }
}

fn outcomes(decision: &Decision) -> Vec<(DateTime<Utc>, Outcome)> {
    decision.fires.iter().map(|f| (f.nominal, f.outcome)).collect()
}

fn limits() -> Limits {
    Limits::default()
}

#[test]
fn a_fire_whose_time_has_come_is_submitted() {
    let decision = decide(&hourly(), &handled(utc(4, 9, 0)), utc(4, 10, 0) + TimeDelta::seconds(5), limits());
    assert_eq!(outcomes(&decision), [(utc(4, 10, 0), Submit)]);
    assert_eq!(decision.handled_through(), Some(utc(4, 10, 0)));
    assert!(!decision.more_due);
}

#[test]
fn a_fire_is_due_at_exactly_its_time_and_not_a_moment_before() {
    let state = handled(utc(4, 9, 0));
    assert!(decide(&hourly(), &state, utc(4, 10, 0) - TimeDelta::nanoseconds(1), limits()).is_empty());
    assert_eq!(outcomes(&decide(&hourly(), &state, utc(4, 10, 0), limits())), [(utc(4, 10, 0), Submit)]);
}

#[test]
fn a_new_schedule_counts_only_fires_after_its_creation() {
    let mut s = hourly();
    s.start = utc(4, 10, 0);
    let fresh = FireState::default();
    assert!(decide(&s, &fresh, utc(4, 10, 30), limits()).is_empty(), "created on the 10:00 fire itself");
    assert_eq!(outcomes(&decide(&s, &fresh, utc(4, 11, 0), limits())), [(utc(4, 11, 0), Submit)]);
}

#[test]
fn a_runner_restarted_after_a_nominal_time_still_fires_it_within_the_window() {
    // The ledger's last entry is 09:00; the runner was down from 09:59 to 10:20.
    let decision = decide(&hourly(), &handled(utc(4, 9, 0)), utc(4, 10, 20), limits());
    assert_eq!(outcomes(&decision), [(utc(4, 10, 0), Submit)]);
}

#[test]
fn a_runner_restarted_after_recording_finds_nothing_new() {
    let first = decide(&hourly(), &handled(utc(4, 9, 0)), utc(4, 10, 0), limits());
    let after_restart = decide(&hourly(), &handled(first.handled_through().unwrap()), utc(4, 10, 1), limits());
    assert!(after_restart.is_empty());
}

#[test]
fn a_clock_stepped_backwards_yields_nothing_new() {
    let state = handled(utc(4, 10, 0));
    for now in [utc(4, 9, 30), utc(3, 10, 0), utc(4, 10, 0), utc(4, 10, 59)] {
        assert!(decide(&hourly(), &state, now, limits()).is_empty(), "now {now}");
    }
}

/// A ledger as the store will keep it: one entry per (schedule, nominal time), inserted only if
/// absent; the insert that succeeds is the one allowed to act.
#[derive(Default)]
struct Ledger(BTreeMap<FireKey, Outcome>);

impl Ledger {
    fn record(&mut self, key: FireKey, outcome: Outcome) -> bool {
        if self.0.contains_key(&key) {
            return false;
        }
        self.0.insert(key, outcome);
        true
    }

    fn last_handled(&self) -> Option<DateTime<Utc>> {
        self.0.keys().map(|k| k.nominal).max()
    }
}

#[test]
fn two_runners_compute_the_same_fires_and_the_ledger_lets_only_one_submit_each() {
    let mut s = schedule("*/15 * * * *", OverlapPolicy::Allow);
    s.config.jitter = Some(Duration::from_secs(120));
    let state = handled(utc(4, 9, 0));
    let now = utc(4, 10, 5);
    let a = decide(&s, &state, now, limits());
    let b = decide(&s.clone(), &state.clone(), now, limits());
    assert_eq!(a, b);
    assert!(!a.fires.is_empty());

    let mut ledger = Ledger::default();
    let mut submitted = Vec::new();
    for (runner, decision) in [("a", &a), ("b", &b)] {
        for fire in &decision.fires {
            if ledger.record(fire.key(&s), fire.outcome) && fire.outcome == Submit {
                submitted.push((runner, fire.nominal));
            }
        }
    }
    assert!(submitted.iter().all(|(runner, _)| *runner == "a"));
    assert_eq!(submitted.len(), a.fires.iter().filter(|f| f.outcome == Submit).count());
    // Runner b, deciding again from the ledger, has nothing left.
    assert!(decide(&s, &handled(ledger.last_handled().unwrap()), now, limits()).is_empty());
}

#[test]
fn while_a_batch_runs_skip_skips_allow_submits_and_buffer_one_buffers() {
    let running = FireState { last_handled: Some(utc(4, 9, 0)), running: true, buffered: None };
    let now = utc(4, 10, 1);
    let outcome = |policy| outcomes(&decide(&schedule("0 * * * *", policy), &running, now, limits()));
    assert_eq!(outcome(OverlapPolicy::Skip), [(utc(4, 10, 0), SkippedOverlap)]);
    assert_eq!(outcome(OverlapPolicy::Allow), [(utc(4, 10, 0), Submit)]);
    assert_eq!(outcome(OverlapPolicy::BufferOne), [(utc(4, 10, 0), Buffered)]);
}

#[test]
fn buffer_one_skips_a_fire_when_one_is_already_waiting() {
    let state = FireState { last_handled: Some(utc(4, 9, 0)), running: true, buffered: Some(utc(4, 9, 0)) };
    let decision = decide(&schedule("0 * * * *", OverlapPolicy::BufferOne), &state, utc(4, 10, 1), limits());
    assert_eq!(outcomes(&decision), [(utc(4, 10, 0), SkippedOverlap)]);
    assert_eq!(decision.released, None, "its batch is still running");
}

#[test]
fn fires_caught_up_together_follow_the_overlap_policy_after_the_first_submits() {
    let state = handled(utc(4, 9, 0));
    let now = utc(4, 9, 46);
    let outcome = |policy| outcomes(&decide(&schedule("*/15 * * * *", policy), &state, now, limits()));
    let times = [utc(4, 9, 15), utc(4, 9, 30), utc(4, 9, 45)];
    assert_eq!(
        outcome(OverlapPolicy::Skip),
        [(times[0], Submit), (times[1], SkippedOverlap), (times[2], SkippedOverlap)]
    );
    assert_eq!(outcome(OverlapPolicy::Allow), [(times[0], Submit), (times[1], Submit), (times[2], Submit)]);
    assert_eq!(
        outcome(OverlapPolicy::BufferOne),
        [(times[0], Submit), (times[1], Buffered), (times[2], SkippedOverlap)]
    );
}

#[test]
fn a_buffered_fire_is_released_when_its_batch_finishes_and_counts_as_running() {
    let s = schedule("*/15 * * * *", OverlapPolicy::BufferOne);
    let state = FireState { last_handled: Some(utc(4, 10, 15)), running: false, buffered: Some(utc(4, 10, 0)) };
    let decision = decide(&s, &state, utc(4, 10, 31), limits());
    assert_eq!(decision.released, Some(Fire { nominal: utc(4, 10, 0), at: utc(4, 10, 0), outcome: Submit }));
    assert_eq!(outcomes(&decision), [(utc(4, 10, 30), Buffered)]);
}

#[test]
fn a_buffered_fire_released_after_the_window_is_missed() {
    let s = schedule("0 * * * *", OverlapPolicy::BufferOne);
    let state = FireState { last_handled: Some(utc(4, 9, 0)), running: false, buffered: Some(utc(4, 8, 0)) };
    let decision = decide(&s, &state, utc(4, 10, 0), limits());
    assert_eq!(decision.released.map(|f| f.outcome), Some(Missed));
    assert_eq!(outcomes(&decision), [(utc(4, 10, 0), Submit)], "nothing is running");
}

#[test]
fn fires_older_than_the_catch_up_window_are_missed_after_downtime() {
    // Down from 00:30 to 05:30 with a one-hour window.
    let decision = decide(&hourly(), &handled(utc(4, 0, 0)), utc(4, 5, 30), limits());
    assert_eq!(
        outcomes(&decision),
        [
            (utc(4, 1, 0), Missed),
            (utc(4, 2, 0), Missed),
            (utc(4, 3, 0), Missed),
            (utc(4, 4, 0), Missed),
            (utc(4, 5, 0), Submit)
        ]
    );
    assert_eq!(decision.missed_range, None);
}

#[test]
fn a_fire_exactly_as_late_as_the_window_still_runs() {
    let decision = decide(&hourly(), &handled(utc(4, 9, 0)), utc(4, 11, 0), limits());
    assert_eq!(outcomes(&decision), [(utc(4, 10, 0), Submit), (utc(4, 11, 0), SkippedOverlap)]);
}

#[test]
fn a_year_down_is_summarised_as_one_missed_range_plus_the_last_few() {
    let s = schedule("* * * * *", OverlapPolicy::Skip);
    let last = Utc.with_ymd_and_hms(2025, 5, 1, 0, 0, 0).unwrap();
    let mut s = s;
    s.start = last - TimeDelta::days(1);
    let now = utc(4, 12, 0);
    let decision = decide(&s, &handled(last), now, limits());
    let window_start = now - TimeDelta::hours(1);
    let range = decision.missed_range.expect("a range");
    assert_eq!(range, MissedRange { after: last, through: window_start - TimeDelta::minutes(11) });
    let missed: Vec<_> = decision.fires.iter().filter(|f| f.outcome == Missed).map(|f| f.nominal).collect();
    assert_eq!(missed, (1..=10).rev().map(|m| window_start - TimeDelta::minutes(m)).collect::<Vec<_>>());
    // Then the window [11:00, 12:00]: the first submitted, the other 60 skipped as overlapping.
    let rest: Vec<_> = decision.fires[10..].iter().map(|f| f.outcome).collect();
    assert_eq!(rest.len(), 61);
    assert_eq!(rest[0], Submit);
    assert!(rest[1..].iter().all(|o| *o == SkippedOverlap));
    assert_eq!(decision.handled_through(), Some(now));
}

#[test]
fn with_no_missed_fires_listed_the_range_covers_them_all() {
    let decision = decide(&hourly(), &handled(utc(4, 0, 0)), utc(4, 5, 30), Limits { max_fires: 100, max_missed: 0 });
    assert_eq!(decision.missed_range, Some(MissedRange { after: utc(4, 0, 0), through: utc(4, 4, 0) }));
    assert_eq!(outcomes(&decision), [(utc(4, 5, 0), Submit)]);
}

#[test]
fn more_fires_than_the_limit_are_handed_out_over_several_decisions_without_repeats() {
    let mut s = schedule("* * * * *", OverlapPolicy::Allow);
    s.config.catch_up = Duration::from_secs(7 * 86_400);
    let now = utc(4, 12, 0);
    let mut state = handled(now - TimeDelta::hours(5));
    let mut seen = Vec::new();
    let mut decisions = 0;
    loop {
        let decision = decide(&s, &state, now, Limits { max_fires: 100, max_missed: 10 });
        assert!(decision.fires.len() <= 100);
        seen.extend(decision.fires.iter().map(|f| (f.nominal, f.outcome)));
        decisions += 1;
        match decision.handled_through() {
            Some(through) if decision.more_due => state = handled(through),
            _ => break,
        }
    }
    assert_eq!(decisions, 3);
    let expected = collect_fires_between(&s, now - TimeDelta::minutes(299), now, 1000).unwrap();
    assert_eq!(seen, expected.into_iter().map(|t| (t, Submit)).collect::<Vec<_>>());
}

#[test]
fn a_paused_schedule_fires_nothing_and_records_nothing() {
    let mut s = schedule("0 * * * *", OverlapPolicy::BufferOne);
    s.config.paused = true;
    let state = FireState { last_handled: Some(utc(4, 9, 0)), running: false, buffered: Some(utc(4, 9, 0)) };
    assert_eq!(decide(&s, &state, utc(4, 12, 0), limits()), Decision::default());
}

#[test]
fn fires_that_fell_while_paused_never_become_due_after_resuming() {
    let mut s = hourly();
    s.resumed_at = Some(utc(4, 10, 30));
    let state = handled(utc(4, 9, 0));
    assert!(decide(&s, &state, utc(4, 10, 31), limits()).is_empty(), "10:00 fell while paused");
    assert_eq!(outcomes(&decide(&s, &state, utc(4, 11, 0), limits())), [(utc(4, 11, 0), Submit)]);
}

#[test]
fn a_jittered_fire_runs_at_its_deterministic_offset_and_not_before() {
    let mut s = hourly();
    s.config.jitter = Some(Duration::from_secs(600));
    let offset = TimeDelta::from_std(jitter_offset("sched-1", utc(4, 10, 0), Duration::from_secs(600))).unwrap();
    assert!(offset > TimeDelta::zero() && offset < TimeDelta::minutes(10));
    let state = handled(utc(4, 9, 0));
    let at = utc(4, 10, 0) + offset;
    assert!(decide(&s, &state, at - TimeDelta::nanoseconds(1), limits()).is_empty());
    let decision = decide(&s, &state, at, limits());
    assert_eq!(decision.fires, [Fire { nominal: utc(4, 10, 0), at, outcome: Submit }]);
}

#[test]
fn a_jittered_fire_waits_for_the_one_before_it() {
    // Offsets of up to a day on a quarter-hourly schedule: a later fire's time may come first.
    let mut s = schedule("*/15 * * * *", OverlapPolicy::Allow);
    s.config.jitter = Some(Duration::from_secs(86_400));
    s.config.catch_up = Duration::from_secs(7 * 86_400);
    let state = handled(utc(4, 0, 0));
    let now = utc(4, 12, 0);
    let decision = decide(&s, &state, now, limits());
    let first_waiting = crate::fires::next_fires(&s, decision.handled_through().unwrap_or(utc(4, 0, 0)), 1)[0];
    assert!(crate::jitter::fire_time(&s, first_waiting) > now, "the decision stopped at a fire not yet due");
    assert!(decision.fires.iter().all(|f| f.at <= now));
    assert!(decision.fires.windows(2).all(|w| w[0].nominal < w[1].nominal));
}

#[test]
fn a_missed_range_and_fires_are_recorded_under_nominal_times() {
    let decision = decide(&hourly(), &handled(utc(4, 0, 0)), utc(4, 5, 30), Limits { max_fires: 100, max_missed: 1 });
    let range = decision.missed_range.unwrap();
    assert_eq!((range.after, range.through), (utc(4, 0, 0), utc(4, 3, 0)));
    let key = decision.fires[0].key(&hourly());
    assert_eq!(key, FireKey { schedule_id: "sched-1".into(), nominal: utc(4, 4, 0) });
}
