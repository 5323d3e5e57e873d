//! The 5-field cron expression (minute hour day-of-month month day-of-week) over local wall-clock
//! time. Time zones and daylight saving are not this module's business: it answers "does this
//! local minute match" and "which is the next local minute that matches"; [`crate::fires`] turns
//! local minutes into instants.
//!
//! The grammar is Vixie cron's: `*`, numbers, lists `1,2`, ranges `1-5`, steps `*/15` and
//! `1-30/5`, and month and day names (`JAN`…`DEC`, `SUN`…`SAT`, any case). Day-of-week 0 and 7
//! are both Sunday. One addition, common elsewhere: `N/S` means `N-max/S` (EventBridge's `0/15`).
//! Not supported: `?`, `L`, `W` and `#` from other dialects (refused by name), and macros like
//! `@daily`.
//!
//! Days follow Vixie cron exactly: when the day-of-month or the day-of-week field *begins with*
//! `*`, a day must match both fields (so in effect the other one); when neither does, a day
//! matches if either field matches. So `0 0 1,15 * MON` fires on the 1st, the 15th and every
//! Monday, while `0 0 */2 * MON` fires only on Mondays that fall on an odd day of the month.

use crate::error::{CronField, ExpressionError, FieldProblem};
use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use std::fmt;

/// A parsed cron expression: one bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    /// Bits 1 to 31.
    days: u64,
    /// Bits 1 to 12.
    months: u64,
    /// Bits 0 to 6, Sunday = 0 (a 7 in the text is folded onto 0).
    weekdays: u64,
    /// The day-of-month field begins with `*`: Vixie's rule for combining the day fields.
    day_star: bool,
    /// The day-of-week field begins with `*`.
    weekday_star: bool,
    /// The five fields joined by single spaces, as the schedule is shown and stored.
    text: String,
}

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

struct Spec {
    min: u32,
    max: u32,
    /// Names for the values from `min` on, for the month and day-of-week fields.
    names: Option<&'static [&'static str]>,
}

fn spec(field: CronField) -> Spec {
    match field {
        CronField::Minute => Spec { min: 0, max: 59, names: None },
        CronField::Hour => Spec { min: 0, max: 23, names: None },
        CronField::DayOfMonth => Spec { min: 1, max: 31, names: None },
        CronField::Month => Spec { min: 1, max: 12, names: Some(&MONTHS) },
        CronField::DayOfWeek => Spec { min: 0, max: 7, names: Some(&WEEKDAYS) },
    }
}

impl Cron {
    /// Parses the five fields, whitespace-separated.
    pub fn parse(text: &str) -> Result<Cron, ExpressionError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.is_empty() {
            return Err(ExpressionError::Empty);
        }
        if fields.len() != 5 {
            return Err(ExpressionError::FieldCount { found: fields.len() });
        }
        let mut bits = [0u64; 5];
        for (i, field) in CronField::ALL.into_iter().enumerate() {
            bits[i] = parse_field(field, fields[i])?;
        }
        let weekdays = (bits[4] | (bits[4] >> 7)) & 0x7f;
        let cron = Cron {
            minutes: bits[0],
            hours: bits[1],
            days: bits[2],
            months: bits[3],
            weekdays,
            day_star: fields[2].starts_with('*'),
            weekday_star: fields[4].starts_with('*'),
            text: fields.join(" "),
        };
        if !cron.fires_on_some_day() {
            return Err(ExpressionError::NeverFires { days: fields[2].to_owned(), months: fields[3].to_owned() });
        }
        Ok(cron)
    }

    /// Whether the expression matches this local minute (seconds must be zero).
    pub fn matches(&self, t: NaiveDateTime) -> bool {
        t.second() == 0
            && t.nanosecond() == 0
            && self.months & (1 << t.month()) != 0
            && self.day_matches(t.date())
            && self.hours & (1 << t.hour()) != 0
            && self.minutes & (1 << t.minute()) != 0
    }

    /// The first local minute at or after `from` that matches, or `None` past chrono's calendar.
    /// The search never runs more than 401 years ahead: the Gregorian calendar repeats every 400
    /// years and [`Cron::parse`] refused expressions with no day in a whole cycle.
    pub fn next_local(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let aligned = from.with_second(0)?.with_nanosecond(0)?;
        let from = if aligned == from { aligned } else { aligned.checked_add_signed(chrono::TimeDelta::minutes(1))? };
        let (mut date, mut hour, mut minute) = (from.date(), from.hour(), from.minute());
        let horizon = date.year().saturating_add(401);
        loop {
            if date.year() > horizon {
                return None;
            }
            if self.months & (1 << date.month()) == 0 {
                let (y, m) = if date.month() == 12 { (date.year() + 1, 1) } else { (date.year(), date.month() + 1) };
                date = NaiveDate::from_ymd_opt(y, m, 1)?;
                (hour, minute) = (0, 0);
                continue;
            }
            if !self.day_matches(date) {
                date = date.succ_opt()?;
                (hour, minute) = (0, 0);
                continue;
            }
            match next_bit(self.hours, hour) {
                None => {
                    date = date.succ_opt()?;
                    (hour, minute) = (0, 0);
                    continue;
                }
                Some(h) if h != hour => (hour, minute) = (h, 0),
                Some(_) => {}
            }
            match next_bit(self.minutes, minute) {
                Some(m) => return date.and_hms_opt(hour, m, 0),
                None if hour == 23 => {
                    date = date.succ_opt()?;
                    (hour, minute) = (0, 0);
                }
                None => (hour, minute) = (hour + 1, 0),
            }
        }
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let by_day = self.days & (1 << date.day()) != 0;
        let by_weekday = self.weekdays & (1 << date.weekday().num_days_from_sunday()) != 0;
        if self.day_star || self.weekday_star {
            by_day && by_weekday
        } else {
            by_day || by_weekday
        }
    }

    /// Some day of one 400-year Gregorian cycle matches the day and month fields (`30 2` never
    /// does: February has no 30th).
    fn fires_on_some_day(&self) -> bool {
        (2000..2400).any(|year| {
            (1..=12u32).filter(|m| self.months & (1 << m) != 0).any(|month| {
                (1..=31u32).filter_map(|d| NaiveDate::from_ymd_opt(year, month, d)).any(|d| self.day_matches(d))
            })
        })
    }
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The lowest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    let rest = mask.checked_shr(from)?;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

fn parse_field(field: CronField, text: &str) -> Result<u64, ExpressionError> {
    let spec = spec(field);
    text.split(',')
        .try_fold(0u64, |bits, item| Ok(bits | parse_item(&spec, item)?))
        .map_err(|problem| ExpressionError::Field { field, value: text.to_owned(), problem })
}

fn parse_item(spec: &Spec, item: &str) -> Result<u64, FieldProblem> {
    if item.is_empty() {
        return Err(FieldProblem::EmptyValue);
    }
    if let Some(bad) = unsupported(item) {
        return Err(FieldProblem::Unsupported { text: bad.to_owned() });
    }
    let (range, step) = match item.split_once('/') {
        Some((range, text)) => (range, Some(step(text, spec.max)?)),
        None => (item, None),
    };
    let (low, high) = if range == "*" {
        (spec.min, spec.max)
    } else if let Some((start, end)) = range.split_once('-') {
        let (start, end) = (value(spec, start)?, value(spec, end)?);
        if start > end {
            return Err(FieldProblem::ReversedRange { start, end });
        }
        (start, end)
    } else {
        let v = value(spec, range)?;
        if step.is_some() {
            (v, spec.max)
        } else {
            (v, v)
        }
    };
    Ok((low..=high).step_by(step.unwrap_or(1) as usize).fold(0, |bits, v| bits | 1 << v))
}

/// The part of an item that belongs to other cron dialects (Quartz, EventBridge), if any.
fn unsupported(item: &str) -> Option<&str> {
    if item.contains(['?', '#', '@']) {
        return Some(item);
    }
    let upper = item.to_ascii_uppercase();
    let special = upper == "L" || upper == "LW" || {
        let body = upper.trim_end_matches(['L', 'W']);
        body.len() < upper.len() && !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit())
    };
    special.then_some(item)
}

/// A number or, for months and weekdays, a three-letter name.
fn value(spec: &Spec, text: &str) -> Result<u32, FieldProblem> {
    if let Some(names) = spec.names {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
            // Month names count from 1 and weekday names from 0, as each field's minimum does.
            return Ok(spec.min + i as u32);
        }
    }
    number(text, spec.min, spec.max).map_err(|problem| match problem {
        FieldProblem::NotANumber { text, .. } => FieldProblem::NotANumber { text, names: spec.names.is_some() },
        other => other,
    })
}

fn number(text: &str, min: u32, max: u32) -> Result<u32, FieldProblem> {
    if text.is_empty() {
        return Err(FieldProblem::EmptyValue);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FieldProblem::NotANumber { text: text.to_owned(), names: false });
    }
    // Too many digits for u64 is out of range all the same.
    let value = text.parse::<u64>().unwrap_or(u64::MAX);
    if value < u64::from(min) || value > u64::from(max) {
        return Err(FieldProblem::OutOfRange { value, min, max });
    }
    Ok(value as u32)
}

/// A step: a number from 1 to the field's maximum.
fn step(text: &str, max: u32) -> Result<u32, FieldProblem> {
    match number(text, 0, max) {
        Ok(0) => Err(FieldProblem::ZeroStep),
        Err(FieldProblem::OutOfRange { value, .. }) => Err(FieldProblem::OutOfRange { value, min: 1, max }),
        other => other,
    }
}

#[cfg(test)]
#[path = "cron_tests.rs"]
pub(crate) mod tests;
