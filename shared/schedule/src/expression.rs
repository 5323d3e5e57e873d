//! A schedule expression: a 5-field [`Cron`] in the schedule's time zone, or `rate(N unit)`, a
//! fixed interval counted from the schedule's creation.
//!
//! Rate expressions are written as EventBridge Scheduler writes them: `rate(1 minute)`,
//! `rate(5 minutes)`, `rate(1 hour)`, `rate(2 days)` — the singular unit for 1 only, the plural
//! otherwise. A day is 24 hours of elapsed time, not a calendar day, so daylight saving never
//! moves a rate schedule.

use crate::cron::Cron;
use crate::error::{ExpressionError, RateProblem};
use chrono::TimeDelta;
use std::fmt;

/// The longest expression accepted, in bytes: a real cron line is far shorter, and the limit keeps
/// error messages (which quote the input) small.
pub const MAX_EXPRESSION_LEN: usize = 256;

/// The longest rate interval, in days: longer intervals are not a timetable anyone can check.
pub const MAX_RATE_DAYS: u32 = 3660;

/// When a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expression {
    Cron(Cron),
    Rate(Rate),
}

/// `rate(N unit)`: every `value` units of elapsed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub value: u32,
    pub unit: RateUnit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    Minute,
    Hour,
    Day,
}

impl RateUnit {
    fn seconds(self) -> i64 {
        match self {
            RateUnit::Minute => 60,
            RateUnit::Hour => 3600,
            RateUnit::Day => 86_400,
        }
    }

    fn word(self, value: u32) -> &'static str {
        match (self, value == 1) {
            (RateUnit::Minute, true) => "minute",
            (RateUnit::Minute, false) => "minutes",
            (RateUnit::Hour, true) => "hour",
            (RateUnit::Hour, false) => "hours",
            (RateUnit::Day, true) => "day",
            (RateUnit::Day, false) => "days",
        }
    }
}

impl Rate {
    /// The interval between two fires.
    pub fn interval(self) -> TimeDelta {
        TimeDelta::seconds(i64::from(self.value) * self.unit.seconds())
    }

    fn parse(text: &str) -> Result<Rate, ExpressionError> {
        let problem = |problem| ExpressionError::Rate { value: text.to_owned(), problem };
        let inner = text
            .get(5..)
            .and_then(|rest| rest.strip_suffix(')'))
            .filter(|inner| !inner.contains(['(', ')']))
            .ok_or_else(|| problem(RateProblem::Syntax))?;
        let parts: Vec<&str> = inner.split_whitespace().collect();
        let [number, unit] = parts[..] else { return Err(problem(RateProblem::Syntax)) };
        if !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(problem(RateProblem::NotANumber { text: number.to_owned() }));
        }
        let value = number.parse::<u64>().unwrap_or(u64::MAX);
        if value == 0 {
            return Err(problem(RateProblem::Zero));
        }
        let (unit, plural) = match unit.to_ascii_lowercase().as_str() {
            "minute" => (RateUnit::Minute, false),
            "minutes" => (RateUnit::Minute, true),
            "hour" => (RateUnit::Hour, false),
            "hours" => (RateUnit::Hour, true),
            "day" => (RateUnit::Day, false),
            "days" => (RateUnit::Day, true),
            _ => return Err(problem(RateProblem::UnknownUnit { unit: unit.to_owned() })),
        };
        let max = i64::from(MAX_RATE_DAYS) * RateUnit::Day.seconds() / unit.seconds();
        if value > max as u64 {
            return Err(problem(RateProblem::TooLong { max_days: MAX_RATE_DAYS }));
        }
        let value = value as u32;
        if plural != (value != 1) {
            return Err(problem(RateProblem::Plurality { value: value.into(), expected: unit.word(value).to_owned() }));
        }
        Ok(Rate { value, unit })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate({} {})", self.value, self.unit.word(self.value))
    }
}

impl Expression {
    /// Parses a cron expression or a rate expression (one starting with `rate(`, any case).
    pub fn parse(text: &str) -> Result<Expression, ExpressionError> {
        if text.len() > MAX_EXPRESSION_LEN {
            return Err(ExpressionError::TooLong { max: MAX_EXPRESSION_LEN });
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(ExpressionError::Empty);
        }
        if text.get(..5).is_some_and(|head| head.eq_ignore_ascii_case("rate(")) {
            return Rate::parse(text).map(Expression::Rate);
        }
        Cron::parse(text).map(Expression::Cron)
    }
}

impl std::str::FromStr for Expression {
    type Err = ExpressionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Expression::parse(s)
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expression::Cron(cron) => cron.fmt(f),
            Expression::Rate(rate) => rate.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_parser_never_panics_on_any_string(text in "\\PC{0,80}|.{0,300}") {
            let _ = Expression::parse(&text);
        }

        #[test]
        fn the_parser_never_panics_on_anything_shaped_like_a_rate(text in "(?i:rate)\\([0-9a-z ()-]{0,30}\\)?.{0,3}") {
            let _ = Expression::parse(&text);
        }
    }

    fn rate_problem(text: &str) -> RateProblem {
        match Expression::parse(text) {
            Err(ExpressionError::Rate { value, problem }) => {
                assert_eq!(value, text.trim());
                problem
            }
            other => panic!("{text}: expected a rate error, got {other:?}"),
        }
    }

    #[test]
    fn rate_expressions_parse_with_singular_for_one_and_plural_otherwise() {
        for (text, value, unit) in [
            ("rate(1 minute)", 1, RateUnit::Minute),
            ("rate(15 minutes)", 15, RateUnit::Minute),
            ("rate(1 hour)", 1, RateUnit::Hour),
            ("rate(6 hours)", 6, RateUnit::Hour),
            ("rate(1 day)", 1, RateUnit::Day),
            ("rate(3 days)", 3, RateUnit::Day),
            ("  RATE( 2  Hours ) ", 2, RateUnit::Hour),
        ] {
            let parsed = Expression::parse(text).unwrap();
            assert_eq!(parsed, Expression::Rate(Rate { value, unit }), "{text}");
        }
    }

    #[test]
    fn a_rate_is_shown_in_its_canonical_spelling() {
        assert_eq!(Expression::parse("RATE( 2  Hours )").unwrap().to_string(), "rate(2 hours)");
        assert_eq!(Expression::parse("rate(1 day)").unwrap().to_string(), "rate(1 day)");
    }

    #[test]
    fn a_day_of_rate_is_24_hours_of_elapsed_time() {
        let Expression::Rate(rate) = Expression::parse("rate(2 days)").unwrap() else { unreachable!() };
        assert_eq!(rate.interval(), TimeDelta::hours(48));
    }

    #[test]
    fn every_bad_rate_says_what_is_wrong() {
        assert_eq!(rate_problem("rate(5)"), RateProblem::Syntax);
        assert_eq!(rate_problem("rate(5 minutes"), RateProblem::Syntax);
        assert_eq!(rate_problem("rate(5 minutes) x"), RateProblem::Syntax);
        assert_eq!(rate_problem("rate((5 minutes))"), RateProblem::Syntax);
        assert_eq!(rate_problem("rate(five minutes)"), RateProblem::NotANumber { text: "five".into() });
        assert_eq!(rate_problem("rate(-5 minutes)"), RateProblem::NotANumber { text: "-5".into() });
        assert_eq!(rate_problem("rate(0 minutes)"), RateProblem::Zero);
        assert_eq!(rate_problem("rate(5 weeks)"), RateProblem::UnknownUnit { unit: "weeks".into() });
        assert_eq!(rate_problem("rate(5 minute)"), RateProblem::Plurality { value: 5, expected: "minutes".into() });
        assert_eq!(rate_problem("rate(1 hours)"), RateProblem::Plurality { value: 1, expected: "hour".into() });
        assert_eq!(rate_problem("rate(3661 days)"), RateProblem::TooLong { max_days: MAX_RATE_DAYS });
        assert_eq!(
            rate_problem("rate(99999999999999999999999 minutes)"),
            RateProblem::TooLong { max_days: MAX_RATE_DAYS }
        );
    }

    #[test]
    fn a_rate_error_reads_as_a_sentence_quoting_the_input() {
        let err = Expression::parse("rate(5 minute)").unwrap_err();
        assert_eq!(err.to_string(), "rate expression `rate(5 minute)`: write `minutes` with the value 5");
    }

    #[test]
    fn empty_and_overlong_expressions_are_refused() {
        assert_eq!(Expression::parse("   "), Err(ExpressionError::Empty));
        let long = "1,".repeat(200) + "1 * * * *";
        assert_eq!(Expression::parse(&long), Err(ExpressionError::TooLong { max: MAX_EXPRESSION_LEN }));
    }
}
