//! A schedule's configuration as tenants write it in JSON, and the [`Schedule`] the rest of the
//! crate evaluates.
//!
//! ```json
//! { "expression": "30 2 * * *", "time_zone": "Europe/Berlin", "overlap": "skip",
//!   "catch_up": "1h", "paused": false, "jitter": "5m" }
//! ```
//!
//! Only `expression` is required. `time_zone` is an IANA name (default `"UTC"`); `overlap` is
//! `"skip"` (default), `"buffer_one"` or `"allow"`; `catch_up` and `jitter` are durations written
//! as humantime strings (`"90s"`, `"15m"`, `"1h 30m"`), not numbers of seconds, so a stored schedule
//! reads the way it was written. `catch_up` defaults to one hour and lies between one minute and
//! seven days; `jitter` is absent by default and at most 24 hours (EventBridge Scheduler's largest
//! flexible time window).
//!
//! [`ScheduleConfigInput`] is the JSON shape before validation: decode a request into it and call
//! [`ScheduleConfigInput::validate`] to get a typed [`ConfigError`] naming the field at fault.
//! [`ScheduleConfig`] decodes through the same validation, so a stored schedule can never hold an
//! invalid one.

use crate::error::{ConfigError, DurationProblem};
use crate::expression::Expression;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The catch-up window when none is given.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_secs(3600);
/// The shortest catch-up window: a runner ticks about once a minute.
pub const MIN_CATCH_UP: Duration = Duration::from_secs(60);
/// The longest catch-up window: an outage longer than a week is an incident to look at, not
/// something to replay unattended.
pub const MAX_CATCH_UP: Duration = Duration::from_secs(7 * 86_400);
/// The largest jitter.
pub const MAX_JITTER: Duration = Duration::from_secs(86_400);

/// What to do with a fire while the schedule's previous batch is still running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OverlapPolicy {
    /// Record the fire as skipped and run nothing.
    #[default]
    Skip,
    /// Keep one fire waiting and run it when the batch finishes; skip any further ones.
    BufferOne,
    /// Run every fire, overlapping or not.
    Allow,
}

impl OverlapPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::Skip => "skip",
            OverlapPolicy::BufferOne => "buffer_one",
            OverlapPolicy::Allow => "allow",
        }
    }

    pub fn parse(value: &str) -> Result<OverlapPolicy, ConfigError> {
        match value {
            "skip" => Ok(OverlapPolicy::Skip),
            "buffer_one" => Ok(OverlapPolicy::BufferOne),
            "allow" => Ok(OverlapPolicy::Allow),
            _ => Err(ConfigError::UnknownOverlap { value: value.chars().take(64).collect() }),
        }
    }
}

/// An IANA time zone by its name.
pub fn parse_time_zone(name: &str) -> Result<Tz, ConfigError> {
    name.parse::<Tz>().map_err(|_| ConfigError::UnknownTimeZone { name: name.chars().take(64).collect() })
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ScheduleConfigInput", into = "ScheduleConfigInput")]
pub struct ScheduleConfig {
    /// When the schedule fires.
    pub expression: Expression,
    /// The zone a cron expression is read in; rate expressions ignore it.
    pub time_zone: Tz,
    /// What a fire does while the previous batch is still running.
    pub overlap: OverlapPolicy,
    /// How late a fire may still run; an older one is recorded as missed and not run.
    pub catch_up: Duration,
    /// A paused schedule fires nothing, and the fires while paused are never due.
    pub paused: bool,
    /// Spreads each fire over `[nominal, nominal + jitter)` so many schedules on the same minute
    /// do not submit at once; see [`crate::jitter`].
    pub jitter: Option<Duration>,
}

impl ScheduleConfig {
    /// A configuration with every default: UTC, skip, a one-hour catch-up, running, no jitter.
    pub fn new(expression: Expression) -> ScheduleConfig {
        ScheduleConfig {
            expression,
            time_zone: Tz::UTC,
            overlap: OverlapPolicy::Skip,
            catch_up: DEFAULT_CATCH_UP,
            paused: false,
            jitter: None,
        }
    }
}

/// The JSON shape of a configuration before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleConfigInput {
    pub expression: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
}

impl ScheduleConfigInput {
    /// Checks every field, the first problem found (in field order) being the one reported.
    pub fn validate(&self) -> Result<ScheduleConfig, ConfigError> {
        let expression = Expression::parse(&self.expression)?;
        let time_zone = self.time_zone.as_deref().map(parse_time_zone).transpose()?.unwrap_or(Tz::UTC);
        let overlap = self.overlap.as_deref().map(OverlapPolicy::parse).transpose()?.unwrap_or_default();
        let catch_up = match &self.catch_up {
            Some(text) => duration(text, MIN_CATCH_UP, MAX_CATCH_UP).map_err(ConfigError::CatchUp)?,
            None => DEFAULT_CATCH_UP,
        };
        let jitter = match &self.jitter {
            Some(text) => Some(duration(text, Duration::from_secs(1), MAX_JITTER).map_err(ConfigError::Jitter)?),
            None => None,
        };
        Ok(ScheduleConfig { expression, time_zone, overlap, catch_up, paused: self.paused.unwrap_or(false), jitter })
    }
}

impl TryFrom<ScheduleConfigInput> for ScheduleConfig {
    type Error = ConfigError;
    fn try_from(input: ScheduleConfigInput) -> Result<Self, ConfigError> {
        input.validate()
    }
}

impl From<ScheduleConfig> for ScheduleConfigInput {
    fn from(config: ScheduleConfig) -> Self {
        ScheduleConfigInput {
            expression: config.expression.to_string(),
            time_zone: Some(config.time_zone.name().to_owned()),
            overlap: Some(config.overlap.as_str().to_owned()),
            catch_up: Some(humantime::format_duration(config.catch_up).to_string()),
            paused: Some(config.paused),
            jitter: config.jitter.map(|j| humantime::format_duration(j).to_string()),
        }
    }
}

fn duration(text: &str, min: Duration, max: Duration) -> Result<Duration, DurationProblem> {
    let text_owned = || text.chars().take(64).collect::<String>();
    let value = humantime::parse_duration(text.trim()).map_err(|_| DurationProblem::Syntax { text: text_owned() })?;
    if value < min || value > max {
        return Err(DurationProblem::OutOfRange {
            text: text_owned(),
            min: humantime::format_duration(min).to_string(),
            max: humantime::format_duration(max).to_string(),
        });
    }
    Ok(value)
}

/// A schedule as the decision and the fire times need it: its configuration plus what the store
/// knows about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The store's id for the schedule. With a nominal time it keys the ledger, and it seeds the
    /// jitter so every runner computes the same fire time.
    pub id: String,
    pub config: ScheduleConfig,
    /// When the schedule was created. Only fires strictly after it exist, and a rate expression
    /// counts its intervals from it: `rate(1 hour)` created at 10:17 fires at 11:17, 12:17, …
    /// (unlike EventBridge Scheduler without a start date, creating a schedule does not fire it).
    pub start: DateTime<Utc>,
    /// When the schedule was last unpaused, if ever: fires at or before it were due while it was
    /// paused, and a paused schedule's fires are never due (nothing is recorded for them).
    pub resumed_at: Option<DateTime<Utc>>,
}

impl Schedule {
    pub fn new(id: impl Into<String>, config: ScheduleConfig, start: DateTime<Utc>) -> Schedule {
        Schedule { id: id.into(), config, start, resumed_at: None }
    }

    /// The instant after which fires count: the later of the creation and the last resumption.
    pub fn active_since(&self) -> DateTime<Utc> {
        self.resumed_at.map_or(self.start, |r| r.max(self.start))
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
