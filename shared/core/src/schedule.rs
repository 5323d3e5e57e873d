//! Schedules in the store: what a tenant's schedule holds, its fire ledger, and the runner's
//! reads. When a schedule fires and what each fire becomes is `openqq_schedule`'s (pure); this
//! module is what the API, the runner and the store adapters share.
//!
//! **The ledger is the exactly-once guarantee.** Every fire is recorded under the schedule's id
//! and its *nominal* time with a conditional insert ([`Schedules::record_fire`]): a second record
//! of the same key returns the first and changes nothing. Only the caller whose insert created
//! the record acts on it, so two runners, a restart or a clock step never submit a fire twice.
//! A fire to submit is recorded [`FireOutcome::Pending`] with its batch id chosen up front, then
//! submitted with that id (a batch is created once per id), then settled
//! ([`Schedules::settle_fire`]) as submitted: a crash between record and settle leaves a pending
//! fire that a runner submits again with the same batch id once it is
//! [`PENDING_RESUBMIT_AFTER`] old.
//!
//! **What the runner keeps on the schedule** ([`RunnerState`]) is a cache of the ledger: the
//! newest nominal time handled, the last batch submitted (for the overlap policy) and a buffered
//! fire. A runner that dies before saving it decides again from the older state, lists fires it
//! recorded already and gets their first records back. Every write of a schedule moves its
//! `version`, and the runner's save is conditional on the version it read, so of two runners the
//! later save is dropped rather than moving the state backwards.

use crate::batch::BatchId;
use crate::ids::{IdError, TenantId};
use crate::object::ObjectRef;
use crate::page::Page;
use crate::ports::PortResult;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use openqq_schedule::{Schedule, ScheduleConfig};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Most schedules one tenant may hold.
pub const MAX_SCHEDULES_PER_TENANT: usize = 100;

/// How long the ledger keeps a fire. Older records may be deleted (DynamoDB's TTL, the embedded
/// store when it records a newer fire); the schedule's [`RunnerState::last_handled`] still keeps
/// the runner from firing them again.
pub const FIRE_RETENTION: Duration = Duration::from_secs(30 * 86_400);

/// How old a pending fire must be before a runner submits it again: younger, another runner may
/// be submitting it right now.
pub const PENDING_RESUBMIT_AFTER: Duration = Duration::from_secs(5);

/// A schedule, named by the API when it creates one (a UUIDv7).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ScheduleId(String);

impl ScheduleId {
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().hyphenated().to_string())
    }

    /// A schedule id in any RFC 4122 text form, canonicalised (lower case, hyphenated).
    pub fn parse(s: &str) -> Result<Self, IdError> {
        uuid::Uuid::try_parse(s).map(|u| Self(u.hyphenated().to_string())).map_err(|_| IdError::NotUuid)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ScheduleId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(&s)
    }
}

impl From<ScheduleId> for String {
    fn from(id: ScheduleId) -> String {
        id.0
    }
}

impl fmt::Display for ScheduleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a fire submits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Template {
    /// A fixed batch: its items as the tenant sent them, one JSON line each, kept as an object of
    /// the tenant (as a batch's items are) and checked again at each fire, so each fire's new
    /// designs get new ids.
    Items { items_ref: ObjectRef, items: u32 },
    /// A re-validation of the tenant's stored designs: all, or those whose name starts with a
    /// prefix.
    Revalidate(Revalidate),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revalidate {
    All,
    NamePrefix(String),
}

impl Template {
    /// The template as JSON: `{"items_ref": {…}, "items": n}`, `{"revalidate": "all"}` or
    /// `{"revalidate": {"name_prefix": "…"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Template::Items { items_ref, items } => serde_json::json!({ "items_ref": items_ref, "items": items }),
            Template::Revalidate(Revalidate::All) => serde_json::json!({ "revalidate": "all" }),
            Template::Revalidate(Revalidate::NamePrefix(p)) => {
                serde_json::json!({ "revalidate": { "name_prefix": p } })
            }
        }
    }

    /// Reads [`Template::to_json`]'s form back.
    pub fn from_json(value: &serde_json::Value) -> Option<Template> {
        let object = value.as_object()?;
        if let Some(r) = object.get("revalidate") {
            return match r {
                serde_json::Value::String(s) if s == "all" => Some(Template::Revalidate(Revalidate::All)),
                serde_json::Value::Object(o) if o.len() == 1 => {
                    o.get("name_prefix")?.as_str().map(|p| Template::Revalidate(Revalidate::NamePrefix(p.to_owned())))
                }
                _ => None,
            };
        }
        let items_ref = serde_json::from_value(object.get("items_ref")?.clone()).ok()?;
        let items = u32::try_from(object.get("items")?.as_u64()?).ok()?;
        Some(Template::Items { items_ref, items })
    }
}

/// What the runner keeps on a schedule: a cache of its ledger (see the module's doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerState {
    /// The newest nominal time the runner handled in order (not trigger or backfill fires).
    pub last_handled: Option<DateTime<Utc>>,
    /// The batch of the last fire submitted, whose end the overlap policy waits for.
    pub last_batch: Option<BatchId>,
    /// The nominal time of a fire buffered behind that batch (`buffer_one`).
    pub buffered: Option<DateTime<Utc>>,
}

/// A schedule as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchedule {
    pub id: ScheduleId,
    pub name: String,
    pub config: ScheduleConfig,
    pub template: Template,
    /// The schedule's start: only fires after it exist (whole seconds).
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it was last unpaused: fires while paused are never due.
    pub resumed_at: Option<DateTime<Utc>>,
    pub state: RunnerState,
    /// When the runner should look at it next; `None` while paused (never due).
    pub next_due: Option<DateTime<Utc>>,
    /// Moves on with every write; writes of the schedule are conditional on it.
    pub version: u64,
}

impl StoredSchedule {
    /// The schedule as `openqq_schedule` evaluates it.
    pub fn domain(&self) -> Schedule {
        Schedule {
            id: self.id.to_string(),
            config: self.config.clone(),
            start: self.created_at,
            resumed_at: self.resumed_at,
        }
    }
}

macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }
    };
}

string_enum!(
    /// What became of a fire, as the ledger keeps it.
    FireOutcome {
        /// Recorded with its batch id, being submitted (or to be submitted again).
        Pending => "pending",
        /// Its batch was submitted (`batch_id`).
        Submitted => "submitted",
        /// The schedule's previous batch was still running (`skip`, or `buffer_one` with a fire
        /// already waiting).
        SkippedOverlap => "skipped_overlap",
        /// More than the catch-up window late: not run.
        Missed => "missed",
        /// Waiting for the previous batch to end (`buffer_one`).
        Buffered => "buffered",
        /// Could not be submitted (`reason`).
        Failed => "failed",
        /// The template matched no design: nothing to submit.
        Empty => "empty",
    }
);

/// One fire in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireRecord {
    /// With the schedule's id, the ledger's key.
    pub nominal_time: DateTime<Utc>,
    /// When it was first recorded.
    pub fired_at: DateTime<Utc>,
    pub outcome: FireOutcome,
    pub batch_id: Option<BatchId>,
    pub reason: Option<String>,
}

/// What [`Schedules::record_fire`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Whether this call made the record (only then does the caller act on it).
    pub created: bool,
    /// The record under the key: this call's, or the first one's.
    pub record: FireRecord,
}

/// A settling of a fire ([`Schedules::settle_fire`]): its new outcome, batch and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settle {
    pub outcome: FireOutcome,
    pub batch_id: Option<BatchId>,
    pub reason: Option<String>,
}

/// A schedule the runner should look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueSchedule {
    pub tenant: TenantId,
    pub schedule: StoredSchedule,
}

/// The store's schedules: what the API's schedule routes and the scheduler call.
#[async_trait]
pub trait Schedules: Send + Sync {
    /// Creates `schedule` for `tenant`; `false` (and nothing created) when the tenant holds
    /// [`MAX_SCHEDULES_PER_TENANT`] already.
    async fn create_schedule(&self, tenant: &TenantId, schedule: &StoredSchedule) -> PortResult<bool>;
    async fn schedule(&self, tenant: &TenantId, id: &ScheduleId) -> PortResult<Option<StoredSchedule>>;
    /// The tenant's schedules, oldest first; `limit` is capped by the adapter.
    async fn list_schedules(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: usize,
    ) -> PortResult<Page<StoredSchedule>>;
    /// Writes what a tenant sets (`name`, `config`, `template`, `updated_at`, `resumed_at`) and
    /// `next_due` of `schedule`, if the stored version is still `schedule.version`; the schedule
    /// after (its version moved on). `None` for a schedule the tenant does not have;
    /// [`crate::PortError::ConditionFailed`] when it changed since it was read.
    async fn update_schedule(&self, tenant: &TenantId, schedule: &StoredSchedule)
        -> PortResult<Option<StoredSchedule>>;
    /// Deletes the schedule and its ledger; `false` if the tenant has no such schedule.
    async fn delete_schedule(&self, tenant: &TenantId, id: &ScheduleId) -> PortResult<bool>;

    /// Records `fire` of the schedule unless a record of its nominal time exists: then that one
    /// is returned and nothing changes. The schedule must exist.
    async fn record_fire(&self, tenant: &TenantId, id: &ScheduleId, fire: &FireRecord) -> PortResult<Recorded>;
    /// Moves the fire at `nominal` from outcome `from` to `to`, only if it is still `from`; the
    /// record after (changed or not), `None` when there is no such fire.
    async fn settle_fire(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        nominal: DateTime<Utc>,
        from: FireOutcome,
        to: &Settle,
    ) -> PortResult<Option<(bool, FireRecord)>>;
    /// The schedule's fires, newest nominal time first, those before `before` when given. `None`
    /// for a schedule the tenant does not have.
    async fn fires(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> PortResult<Option<Page<FireRecord>>>;

    /// Schedules of every tenant whose `next_due` is at or before `now`, most overdue first, at
    /// most `limit`.
    async fn due_schedules(&self, now: DateTime<Utc>, limit: usize) -> PortResult<Vec<DueSchedule>>;
    /// Saves the runner's `state` and `next_due` if the stored version is still `version`;
    /// whether it did (`false`: another writer came first, or the schedule is gone).
    async fn save_runner_state(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        version: u64,
        state: &RunnerState,
        next_due: Option<DateTime<Utc>>,
    ) -> PortResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_reads_back_as_written() {
        let templates = [
            Template::Items { items_ref: ObjectRef { digest: "ab".repeat(32), bytes: 12 }, items: 3 },
            Template::Revalidate(Revalidate::All),
            Template::Revalidate(Revalidate::NamePrefix("blink-".into())),
        ];
        for t in templates {
            assert_eq!(Template::from_json(&t.to_json()), Some(t.clone()), "{:?}", t.to_json());
        }
        assert_eq!(Template::from_json(&serde_json::json!({"revalidate": "some"})), None);
        assert_eq!(Template::from_json(&serde_json::json!({"revalidate": {"name": "x"}})), None);
    }

    #[test]
    fn outcomes_are_written_in_snake_case() {
        for outcome in FireOutcome::ALL {
            assert_eq!(FireOutcome::parse(outcome.as_str()), Some(*outcome));
            assert_eq!(serde_json::to_value(outcome).unwrap(), serde_json::json!(outcome.as_str()));
        }
    }
}
