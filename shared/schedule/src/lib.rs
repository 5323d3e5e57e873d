//! Tenant schedules as a pure domain: a schedule submits a batch of design jobs on a timetable,
//! and this crate says when. It performs no I/O and reads no clock of its own; the API, the store
//! and the runner call it.
//!
//! The modules fit together like this:
//!
//! - [`cron`]: the 5-field cron expression over local wall-clock minutes (Vixie cron's grammar
//!   and day rule), parsed and matched.
//! - [`expression`]: a schedule's [`Expression`], a cron or `rate(N unit)`.
//! - [`config`]: the [`ScheduleConfig`] tenants write in JSON (expression, IANA time zone,
//!   overlap policy, catch-up window, paused, jitter), validated field by field, and the
//!   [`Schedule`] — a configuration plus its id, creation and resumption times.
//! - [`fires`]: nominal fire times as instants — [`next_fires`] for "the next five fire times",
//!   [`fires_between`] for backfill, bounded by a maximum — with daylight saving handled as
//!   Amazon EventBridge Scheduler documents it (a minute that does not exist is skipped, a
//!   minute that happens twice fires once).
//! - [`jitter`]: the deterministic offset added to a nominal time, so runners agree on it.
//! - [`mod@decide`]: the fire decision — from the ledger's watermark, whether a batch is running and
//!   `now`, which fires to submit, skip, buffer or record as missed; keyed by (schedule, nominal
//!   time) so restarts, two runners and clock steps never fire twice.
//! - [`clock`]: the [`Clock`] the runner reads `now` from, with a [`TestClock`] for its tests.
//! - [`error`]: the typed errors, each naming the field and value at fault (for a 422).

pub mod clock;
pub mod config;
pub mod cron;
pub mod decide;
pub mod error;
pub mod expression;
pub mod fires;
pub mod jitter;

pub use clock::{Clock, SystemClock, TestClock};
pub use config::{OverlapPolicy, Schedule, ScheduleConfig, ScheduleConfigInput};
pub use decide::{decide, Decision, Fire, FireKey, FireState, Limits, MissedRange, Outcome};
pub use error::{ConfigError, CronField, DurationProblem, ExpressionError, FieldProblem, RateProblem, TooManyFires};
pub use expression::{Expression, Rate, RateUnit};
pub use fires::{collect_fires_between, fires_between, next_fires, FiresBetween};
pub use jitter::{fire_time, jitter_offset};
