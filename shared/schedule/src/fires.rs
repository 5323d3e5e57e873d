//! Nominal fire times: when a schedule fires, before jitter, as instants.
//!
//! A cron expression is read on the wall clock of the schedule's zone, and daylight saving is
//! handled the way Amazon EventBridge Scheduler documents it ("Daylight savings time on
//! EventBridge Scheduler" in the Scheduler User Guide's *Schedule types*,
//! <https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html>, and the AWS
//! Knowledge Center's "How can I adjust my Amazon EventBridge schedule for daylight saving?",
//! <https://repost.aws/knowledge-center/eventbridge-scheduler-adjust-dst>):
//!
//! - when clocks spring forward and a local time the expression names does not exist that day,
//!   that invocation is skipped (`30 2 * * *` in `America/New_York` does not fire on
//!   2026-03-08; `0 * * * *` has no 02:00 fire that night);
//! - when clocks fall back and a local time repeats, the schedule runs only once, at its first
//!   occurrence, and does not repeat the invocation (`30 1 * * *` in New York fires at 01:30 EDT on
//!   2026-11-01, not again at 01:30 EST; `0 * * * *` fires at 01:00 EDT and next at 02:00 EST, two
//!   hours later). Every local minute fires at most once, whatever the expression.
//!
//! Rate expressions are absolute intervals from the schedule's start (EventBridge's "days
//! represents a 24-hour duration"), so daylight saving never moves them.
//!
//! Every fire lies strictly after the schedule's start.

use crate::config::Schedule;
use crate::cron::Cron;
use crate::error::TooManyFires;
use crate::expression::{Expression, Rate};
use chrono::{DateTime, LocalResult, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// The next `n` nominal fire times strictly after `after` (and after the schedule's start), in
/// order. Fewer come back only when the calendar runs out. A paused schedule's timetable is
/// still given: pausing decides what runs, not when the schedule would fire.
pub fn next_fires(schedule: &Schedule, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    Fires::after(schedule, after).take(n).collect()
}

/// The nominal fire times in `[from, to]`, both ends included, for backfill and catch-up. At
/// most `max` come back as `Ok`; if the range holds more, the iterator then yields
/// `Err(TooManyFires)` once and stops, so a caller never walks an unbounded range by accident
/// (`* * * * *` over a year is 525,600 fires). An empty range (`from > to`) yields nothing.
pub fn fires_between(schedule: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>, max: usize) -> FiresBetween {
    let before_from = from.checked_sub_signed(TimeDelta::nanoseconds(1)).unwrap_or(from);
    FiresBetween { fires: Fires::after(schedule, before_from), to, max, given: 0, done: from > to }
}

/// [`fires_between`] collected: every fire in `[from, to]`, or the error if there are more than `max`.
pub fn collect_fires_between(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max: usize,
) -> Result<Vec<DateTime<Utc>>, TooManyFires> {
    fires_between(schedule, from, to, max).collect()
}

/// The iterator [`fires_between`] returns.
#[derive(Debug, Clone)]
pub struct FiresBetween {
    fires: Fires,
    to: DateTime<Utc>,
    max: usize,
    given: usize,
    done: bool,
}

impl Iterator for FiresBetween {
    type Item = Result<DateTime<Utc>, TooManyFires>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Some(fire) = self.fires.next().filter(|fire| *fire <= self.to) else {
            self.done = true;
            return None;
        };
        if self.given == self.max {
            self.done = true;
            return Some(Err(TooManyFires { max: self.max }));
        }
        self.given += 1;
        Some(Ok(fire))
    }
}

/// Every nominal fire time strictly after a point, in order, without end (until the calendar's).
#[derive(Debug, Clone)]
pub(crate) struct Fires {
    what: What,
    /// The last instant given (or the starting point): the next fire is strictly after it.
    after: DateTime<Utc>,
}

#[derive(Debug, Clone)]
enum What {
    Cron(Cron, Tz),
    Rate(Rate, DateTime<Utc>),
    Exhausted,
}

impl Fires {
    pub(crate) fn after(schedule: &Schedule, after: DateTime<Utc>) -> Fires {
        let what = match &schedule.config.expression {
            Expression::Cron(cron) => What::Cron(cron.clone(), schedule.config.time_zone),
            Expression::Rate(rate) => What::Rate(*rate, schedule.start),
        };
        Fires { what, after: after.max(schedule.start) }
    }
}

impl Iterator for Fires {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let next = match &self.what {
            What::Cron(cron, zone) => next_cron(cron, *zone, self.after),
            What::Rate(rate, start) => next_rate(*rate, *start, self.after),
            What::Exhausted => None,
        };
        match next {
            Some(fire) => self.after = fire,
            None => self.what = What::Exhausted,
        }
        next
    }
}

/// The first fire of `start + k·interval`, k ≥ 1, strictly after `after`.
fn next_rate(rate: Rate, start: DateTime<Utc>, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let interval = rate.interval().num_seconds();
    // Whole seconds suffice: the interval is whole minutes, so the fraction of a second that
    // `num_seconds` drops never changes which interval `after` falls in.
    let elapsed = (after - start).num_seconds().max(0);
    let k = elapsed / interval + 1;
    start.checked_add_signed(TimeDelta::seconds(k.checked_mul(interval)?))
}

/// The first instant strictly after `after` whose wall-clock minute in `zone` matches: a local
/// minute that does not exist is skipped, and one that happens twice counts at its first
/// occurrence only.
fn next_cron(cron: &Cron, zone: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = after.with_timezone(&zone).naive_local();
    let mut candidate = local.with_second(0)?.with_nanosecond(0)?.checked_add_signed(TimeDelta::minutes(1))?;
    loop {
        let minute = cron.next_local(candidate)?;
        let instant = match zone.from_local_datetime(&minute) {
            LocalResult::Single(t) => Some(t),
            LocalResult::Ambiguous(first, _) => Some(first),
            LocalResult::None => None,
        };
        // The first occurrence of a repeated minute may lie before `after` (which is then in
        // the repeat): that minute has fired already.
        if let Some(t) = instant.map(|t| t.with_timezone(&Utc)).filter(|t| *t > after) {
            return Some(t);
        }
        candidate = minute.checked_add_signed(TimeDelta::minutes(1))?;
    }
}

#[cfg(test)]
#[path = "fires_tests.rs"]
mod tests;
