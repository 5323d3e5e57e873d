//! What can be wrong with a schedule a tenant sends, said precisely enough for a 422 answer: the
//! JSON field, the cron field and the offending value. Every variant is permanent — the same input
//! fails the same way — so none is retriable.

use std::fmt;

/// One of the five fields of a cron expression, named as a tenant reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl CronField {
    /// The fields in the order they are written.
    pub const ALL: [CronField; 5] =
        [CronField::Minute, CronField::Hour, CronField::DayOfMonth, CronField::Month, CronField::DayOfWeek];

    pub fn name(self) -> &'static str {
        match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong inside one cron field; each names the part of the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("an empty value (check for a doubled, leading or trailing ',', '-' or '/')")]
    EmptyValue,
    #[error("`{text}` is not a number{names}", names = if *.names { " or a name" } else { "" })]
    NotANumber { text: String, names: bool },
    #[error("{value} is out of range {min}-{max}")]
    OutOfRange { value: u64, min: u32, max: u32 },
    #[error("the range {start}-{end} runs backwards")]
    ReversedRange { start: u32, end: u32 },
    #[error("a step of 0 never advances")]
    ZeroStep,
    #[error("`{text}` is not supported (a 5-field cron takes numbers, names, '*', ',', '-' and '/')")]
    Unsupported { text: String },
}

/// What is wrong with a `rate(N unit)` expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateProblem {
    #[error("expected `rate(N unit)`, e.g. `rate(5 minutes)`")]
    Syntax,
    #[error("`{text}` is not a positive whole number")]
    NotANumber { text: String },
    #[error("the value must be at least 1")]
    Zero,
    #[error("`{unit}` is not a unit (minute, minutes, hour, hours, day, days)")]
    UnknownUnit { unit: String },
    #[error("write `{expected}` with the value {value}")]
    Plurality { value: u64, expected: String },
    #[error("the interval is longer than {max_days} days")]
    TooLong { max_days: u32 },
}

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpressionError {
    #[error("the expression is empty")]
    Empty,
    #[error("the expression is longer than {max} characters")]
    TooLong { max: usize },
    #[error("a cron expression has 5 fields (minute hour day-of-month month day-of-week), found {found}")]
    FieldCount { found: usize },
    #[error("{field} field `{value}`: {problem}")]
    Field { field: CronField, value: String, problem: FieldProblem },
    #[error("day-of-month `{days}` never falls in month `{months}`, so the expression never fires")]
    NeverFires { days: String, months: String },
    #[error("rate expression `{value}`: {problem}")]
    Rate { value: String, problem: RateProblem },
}

/// Why a duration setting (`catch_up`, `jitter`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationProblem {
    #[error("`{text}` is not a duration like \"90s\", \"15m\" or \"1h 30m\"")]
    Syntax { text: String },
    #[error("`{text}` is outside {min} to {max}")]
    OutOfRange { text: String, min: String, max: String },
}

/// Why a schedule's configuration was refused. [`ConfigError::field`] names the JSON field at
/// fault, for the `pointer` of a problem document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("expression: {0}")]
    Expression(#[from] ExpressionError),
    #[error("time_zone: `{name}` is not an IANA time zone name (like \"Europe/Berlin\" or \"UTC\")")]
    UnknownTimeZone { name: String },
    #[error("overlap: `{value}` is not one of \"skip\", \"buffer_one\", \"allow\"")]
    UnknownOverlap { value: String },
    #[error("catch_up: {0}")]
    CatchUp(DurationProblem),
    #[error("jitter: {0}")]
    Jitter(DurationProblem),
}

impl ConfigError {
    /// The JSON field the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            ConfigError::Expression(_) => "expression",
            ConfigError::UnknownTimeZone { .. } => "time_zone",
            ConfigError::UnknownOverlap { .. } => "overlap",
            ConfigError::CatchUp(_) => "catch_up",
            ConfigError::Jitter(_) => "jitter",
        }
    }
}

/// A range of nominal times held more fires than the caller allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("more than {max} fires fall in the range; ask for a shorter range or a larger maximum")]
pub struct TooManyFires {
    /// The maximum the caller gave.
    pub max: usize,
}
