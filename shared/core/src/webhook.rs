//! Webhooks as a tenant's own resource, and their deliveries.
//!
//! A tenant registers a [`Webhook`]: a URL, the event kinds it wants and a signing secret. When
//! an event of one of those kinds enters the tenant's feed ([`crate::feed`]), the store queues a
//! [`Delivery`] in the same atomic write, so no delivery is lost to a crash or a timeout. A
//! delivery worker claims due deliveries ([`DeliveryQueue::claim_due_deliveries`]), sends them and
//! records each attempt ([`DeliveryQueue::finish_attempt`]): delivered, retried later on the
//! [`RetrySchedule`], or dead after the last attempt. The id a receiver sees (`webhook-id`) is
//! [`Delivery::message_id`]: the same on every attempt of the same event.

pub mod signing;
pub mod target;

use crate::error::PortResult;
use crate::event::EventKind;
use crate::feed::FeedEntry;
use crate::ids::TenantId;
use crate::page::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;
use uuid::Uuid;

/// Most webhooks one tenant may register.
pub const MAX_WEBHOOKS_PER_TENANT: usize = 10;
/// Longest webhook URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 256;
/// Longest error text kept on a delivery, in bytes.
pub const MAX_DELIVERY_ERROR_BYTES: usize = 512;

/// The kinds a webhook may subscribe to: those a tenant's feed carries.
pub const SUBSCRIBABLE: [EventKind; 13] = [
    EventKind::DesignSubmitted,
    EventKind::GenerationStarted,
    EventKind::GenerationFinished,
    EventKind::SynthesisStarted,
    EventKind::SynthesisFinished,
    EventKind::SimulationFinished,
    EventKind::EquivalenceFinished,
    EventKind::ValidationStarted,
    EventKind::ValidationFinished,
    EventKind::ResultsReady,
    EventKind::DesignFailed,
    EventKind::BatchCompleted,
    EventKind::DesignDeleted,
];

/// A webhook's id: a UUID, written `wh_` and its 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WebhookId(pub Uuid);

impl WebhookId {
    pub fn generate() -> Self {
        Self(Uuid::now_v7())
    }

    /// The `webhook-id` of this webhook's delivery of feed entry `seq`: the same on every
    /// attempt ([`Delivery::message_id`]).
    pub fn message_id(&self, seq: u64) -> String {
        format!("msg_{}_{seq}", self.0.simple())
    }

    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("wh_")?;
        (hex.len() == 32).then(|| Uuid::try_parse(hex).ok().map(Self)).flatten()
    }
}

impl fmt::Display for WebhookId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wh_{}", self.0.simple())
    }
}

impl Serialize for WebhookId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WebhookId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).ok_or_else(|| serde::de::Error::custom("a webhook id is wh_ and 32 hex digits"))
    }
}

/// A signing secret: at least 24 random bytes, written `whsec_<base64>` (Standard Webhooks).
/// `Debug` never prints it; only the API's answer to a creation or a rotation shows it, once.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// Fewest key bytes accepted.
    pub const MIN_BYTES: usize = 24;

    pub fn from_bytes(key: Vec<u8>) -> Result<Self, SecretError> {
        if key.len() < Self::MIN_BYTES || key.len() > 64 {
            return Err(SecretError::Length { bytes: key.len() });
        }
        Ok(Self(key))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Why a webhook secret was refused: its text ([`signing::parse_secret`]) or its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("a webhook secret starts with whsec_")]
    NoPrefix,
    #[error("a webhook secret is whsec_ followed by base64")]
    NotBase64(#[source] base64::DecodeError),
    /// The key is shorter than [`WebhookSecret::MIN_BYTES`] or longer than 64 bytes.
    #[error("a webhook secret holds {min} to 64 bytes", min = WebhookSecret::MIN_BYTES)]
    Length { bytes: usize },
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// A registered webhook, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub id: WebhookId,
    pub url: String,
    /// The kinds it wants, each once, in [`SUBSCRIBABLE`] order.
    pub kinds: Vec<EventKind>,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
    pub secret: WebhookSecret,
    /// The secret before the last rotation and until when it still signs (both signatures are
    /// sent until then).
    pub previous_secret: Option<(WebhookSecret, DateTime<Utc>)>,
}

impl Webhook {
    /// The secrets that sign a delivery at `now`: the current one, and the previous one while its
    /// overlap lasts.
    pub fn signing_secrets(&self, now: DateTime<Utc>) -> Vec<&WebhookSecret> {
        let mut out = vec![&self.secret];
        if let Some((previous, until)) = &self.previous_secret {
            if now < *until {
                out.push(previous);
            }
        }
        out
    }

    pub fn wants(&self, kind: EventKind) -> bool {
        self.kinds.contains(&kind)
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Waiting for its first or next attempt (or being attempted).
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Every attempt failed, or the receiver refused it for good: dead-lettered, kept for the
    /// tenant to see.
    Dead,
}

/// One event to one webhook, with its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub tenant_id: TenantId,
    pub webhook_id: WebhookId,
    /// The event, as the tenant's feed holds it (its `seq` names the delivery within the webhook).
    pub entry: FeedEntry,
    pub status: DeliveryStatus,
    pub attempts: u32,
    /// When the next attempt is due (pending deliveries only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The receiver's last HTTP status, if it answered at all.
    pub last_status_code: Option<u16>,
    /// Why the last attempt failed (at most [`MAX_DELIVERY_ERROR_BYTES`]), without secrets.
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Delivery {
    /// The `webhook-id` a receiver de-duplicates on: the same for every attempt of this event to
    /// this webhook, however often the records behind it were re-read.
    pub fn message_id(&self) -> String {
        self.webhook_id.message_id(self.entry.seq)
    }
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    Delivered {
        status_code: u16,
    },
    /// Failed; try again at `at`.
    Retry {
        at: DateTime<Utc>,
        status_code: Option<u16>,
        error: String,
    },
    /// Failed for good (the last attempt, or a refusal no retry would change).
    Dead {
        status_code: Option<u16>,
        error: String,
    },
}

/// The delays between attempts, with ±`jitter` (a fraction) drawn per attempt. A delivery gets
/// `delays.len() + 1` attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrySchedule {
    pub delays: Vec<Duration>,
    pub jitter: f64,
}

impl Default for RetrySchedule {
    /// 8 attempts over about 13 hours: at once, then after 5 s, 1 min, 5 min, 30 min, 1 h, 3 h
    /// and 8 h.
    fn default() -> Self {
        let s = Duration::from_secs;
        Self { delays: vec![s(5), s(60), s(300), s(1800), s(3600), s(3 * 3600), s(8 * 3600)], jitter: 0.2 }
    }
}

impl RetrySchedule {
    /// The delay after attempt number `attempts` failed, or `None` when it was the last. `unit`
    /// in [0, 1) draws the jitter (a random number; 0.5 means none).
    pub fn after(&self, attempts: u32, unit: f64) -> Option<Duration> {
        let base = *self.delays.get((attempts as usize).checked_sub(1)?)?;
        let factor = 1.0 + self.jitter * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
        Some(base.mul_f64(factor.max(0.0)))
    }

    pub fn attempts(&self) -> u32 {
        self.delays.len() as u32 + 1
    }
}

/// The tenant's webhooks, as its API routes manage them and the delivery worker reads them.
#[async_trait]
pub trait WebhookRegistry: Send + Sync {
    /// Registers `hook` for `tenant`. [`crate::PortError::ConditionFailed`] when the tenant holds
    /// [`MAX_WEBHOOKS_PER_TENANT`] already.
    async fn create_webhook(&self, tenant: &TenantId, hook: &Webhook) -> PortResult<()>;
    /// The tenant's webhooks, oldest first.
    async fn list_webhooks(&self, tenant: &TenantId) -> PortResult<Vec<Webhook>>;
    async fn get_webhook(&self, tenant: &TenantId, id: &WebhookId) -> PortResult<Option<Webhook>>;
    /// Removes the webhook and its deliveries; `false` if the tenant has no such webhook.
    async fn delete_webhook(&self, tenant: &TenantId, id: &WebhookId) -> PortResult<bool>;
    /// Makes `secret` the webhook's secret and keeps the old one signing until `previous_until`;
    /// the updated webhook, or `None` if the tenant has no such webhook.
    async fn rotate_webhook_secret(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        secret: &WebhookSecret,
        previous_until: DateTime<Utc>,
    ) -> PortResult<Option<Webhook>>;
}

/// The deliveries of feed entries to webhooks: queued with the entries (and by the API's test
/// route), claimed and finished by the delivery worker, listed by the API.
#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Queues a delivery of `entry` to one webhook outside the feed (`POST
    /// /v1/webhooks/{id}/test`); `entry.seq` is 0 for a test event. Queuing the same webhook and
    /// seq again changes nothing.
    async fn queue_delivery(&self, tenant: &TenantId, id: &WebhookId, entry: &FeedEntry) -> PortResult<()>;
    /// Claims pending deliveries due at `now` (oldest due first, at most `per_tenant` of one
    /// tenant and `limit` in all, so one tenant's backlog never fills a claim), each until
    /// `now + lease`: another claim skips them meanwhile, and a worker that dies mid-attempt
    /// leaves them to be claimed again after the lease.
    async fn claim_due_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        per_tenant: usize,
        limit: usize,
    ) -> PortResult<Vec<Delivery>>;
    /// Records an attempt of the delivery of `seq` to `id`: one more attempt, its status code and
    /// error, and its new status. A delivery that is gone (its webhook deleted) is ignored.
    async fn finish_attempt(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        seq: u64,
        outcome: &AttemptOutcome,
        now: DateTime<Utc>,
    ) -> PortResult<()>;
    /// The webhook's deliveries, newest first; `cursor` from the previous page's `next`.
    async fn list_deliveries(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        cursor: Option<&str>,
        limit: usize,
    ) -> PortResult<Page<Delivery>>;
}

/// What the delivery worker uses: the queue, and the registry for each delivery's webhook.
pub trait WebhookStore: WebhookRegistry + DeliveryQueue {}

impl<T: WebhookRegistry + DeliveryQueue> WebhookStore for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_id_reads_back_what_it_writes_and_refuses_anything_else() {
        let id = WebhookId::generate();
        assert_eq!(WebhookId::parse(&id.to_string()), Some(id));
        for bad in ["", "wh_", "wh_xyz", &id.0.to_string(), &format!("wh_{}", id.0.hyphenated())] {
            assert_eq!(WebhookId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_schedule_gives_one_delay_per_attempt_but_the_last_within_its_jitter() {
        let s = RetrySchedule::default();
        assert_eq!(s.attempts(), 8);
        assert_eq!(s.after(0, 0.5), None);
        assert_eq!(s.after(1, 0.5), Some(Duration::from_secs(5)));
        assert_eq!(s.after(1, 0.0), Some(Duration::from_secs(4)));
        assert_eq!(s.after(7, 0.5), Some(Duration::from_secs(8 * 3600)));
        assert_eq!(s.after(8, 0.5), None);
    }

    #[test]
    fn the_previous_secret_signs_only_while_its_overlap_lasts() {
        let now = Utc::now();
        let mut hook = Webhook {
            id: WebhookId::generate(),
            url: "https://h.example/x".into(),
            kinds: vec![EventKind::ResultsReady],
            description: None,
            created_at: now,
            secret: WebhookSecret::from_bytes(vec![1; 32]).unwrap(),
            previous_secret: None,
        };
        assert_eq!(hook.signing_secrets(now).len(), 1);
        hook.previous_secret =
            Some((WebhookSecret::from_bytes(vec![2; 32]).unwrap(), now + chrono::Duration::seconds(60)));
        assert_eq!(hook.signing_secrets(now).len(), 2);
        assert_eq!(hook.signing_secrets(now + chrono::Duration::seconds(61)).len(), 1);
        assert!(!format!("{hook:?}").contains(&format!("{:?}", hook.secret.bytes())));
    }
}
