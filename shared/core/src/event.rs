//! Events: the envelope every record carries, the kinds, their payloads and the record headers.

use crate::design::{DesignSpec, DesignStatus, Verdict};
use crate::ids::{CorrelationId, DesignId, TenantId};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use uuid::Uuid;

/// Version of the envelope and payload schemas this build writes and understands.
pub const SCHEMA_VERSION: u16 = 1;

/// Header names; the same names travel as Kafka headers so consumers can route and log before
/// decoding a body.
pub mod headers {
    pub const CORRELATION_ID: &str = "correlation-id";
    pub const EVENT_KIND: &str = "event-kind";
    pub const SCHEMA_VERSION: &str = "schema-version";
    pub const EVENT_ID: &str = "event-id";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "design.submitted")]
    DesignSubmitted,
    #[serde(rename = "validation.requested")]
    ValidationRequested,
    #[serde(rename = "validation.started")]
    ValidationStarted,
    #[serde(rename = "validation.finished")]
    ValidationFinished,
    #[serde(rename = "results.ready")]
    ResultsReady,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [
        EventKind::DesignSubmitted,
        EventKind::ValidationRequested,
        EventKind::ValidationStarted,
        EventKind::ValidationFinished,
        EventKind::ResultsReady,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::DesignSubmitted => "design.submitted",
            EventKind::ValidationRequested => "validation.requested",
            EventKind::ValidationStarted => "validation.started",
            EventKind::ValidationFinished => "validation.finished",
            EventKind::ResultsReady => "results.ready",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Topic names, one per event kind plus the dead-letter topic, all under an optional prefix
/// (so several environments can share one cluster).
#[derive(Debug, Clone, Default)]
pub struct Topics {
    pub prefix: String,
}

impl Topics {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into() }
    }
    pub fn of(&self, kind: EventKind) -> String {
        format!("{}{}", self.prefix, kind.as_str())
    }
    pub fn dead_letter(&self) -> String {
        format!("{}dead-letter", self.prefix)
    }
    /// Every topic the platform writes, for adapters that create topics at start.
    pub fn all(&self) -> Vec<String> {
        let mut all: Vec<String> = EventKind::ALL.iter().map(|k| self.of(*k)).collect();
        all.push(self.dead_letter());
        all
    }
}

/// The envelope every record carries. `P` is the payload: typed when producing, a raw JSON
/// value when first decoding (so routing never parses a netlist twice).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<P = Box<RawValue>> {
    pub event_id: Uuid,
    pub kind: EventKind,
    pub schema_version: u16,
    pub tenant_id: TenantId,
    pub design_id: DesignId,
    pub revision: u64,
    pub correlation_id: CorrelationId,
    pub occurred_at: DateTime<Utc>,
    /// The function that wrote the record (`api`, `design-job`, `validation`, `results`).
    pub producer: String,
    pub payload: P,
}

/// What a consumer knows about the request that caused an event; copied into every event it
/// produces, so one correlation id follows a design through all four functions.
#[derive(Debug, Clone)]
pub struct Cause {
    pub tenant_id: TenantId,
    pub design_id: DesignId,
    pub revision: u64,
    pub correlation_id: CorrelationId,
}

impl<P> Envelope<P> {
    /// A new event with a fresh UUIDv7 id, stamped now.
    pub fn new(kind: EventKind, cause: &Cause, producer: &str, payload: P) -> Self {
        Self {
            event_id: Uuid::now_v7(),
            kind,
            schema_version: SCHEMA_VERSION,
            tenant_id: cause.tenant_id.clone(),
            design_id: cause.design_id.clone(),
            revision: cause.revision,
            correlation_id: cause.correlation_id.clone(),
            occurred_at: Utc::now(),
            producer: producer.to_owned(),
            payload,
        }
    }

    pub fn cause(&self) -> Cause {
        Cause {
            tenant_id: self.tenant_id.clone(),
            design_id: self.design_id.clone(),
            revision: self.revision,
            correlation_id: self.correlation_id.clone(),
        }
    }

    /// The entry this event makes in its design's timeline.
    pub fn timeline_entry(&self) -> TimelineEntry {
        TimelineEntry {
            event_id: self.event_id,
            kind: self.kind,
            revision: self.revision,
            correlation_id: self.correlation_id.clone(),
            occurred_at: self.occurred_at,
        }
    }
}

impl<P: Serialize> Envelope<P> {
    /// Serialises the envelope into a log record keyed by tenant, with the routing headers.
    pub fn to_record(&self) -> crate::ports::Record {
        crate::ports::Record {
            key: self.tenant_id.to_string(),
            value: serde_json::to_vec(self).expect("envelopes always serialise"),
            headers: vec![
                (headers::CORRELATION_ID.into(), self.correlation_id.as_str().as_bytes().to_vec()),
                (headers::EVENT_KIND.into(), self.kind.as_str().as_bytes().to_vec()),
                (headers::SCHEMA_VERSION.into(), self.schema_version.to_string().into_bytes()),
                (headers::EVENT_ID.into(), self.event_id.to_string().into_bytes()),
            ],
        }
    }
}

/// Why a record could not even be decoded; always permanent.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the record is not a valid envelope: {0}")]
    Envelope(serde_json::Error),
    #[error("schema version {0} is not supported (this build reads {SCHEMA_VERSION})")]
    SchemaVersion(u16),
    #[error("the {kind} payload is invalid: {source}")]
    Payload { kind: EventKind, source: serde_json::Error },
    #[error("expected a {expected} event, got {got}")]
    UnexpectedKind { expected: EventKind, got: EventKind },
}

impl Envelope {
    /// Decodes the envelope, leaving the payload raw.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env: Envelope = serde_json::from_slice(bytes).map_err(DecodeError::Envelope)?;
        if env.schema_version != SCHEMA_VERSION {
            return Err(DecodeError::SchemaVersion(env.schema_version));
        }
        Ok(env)
    }

    /// Decodes the payload as `T`, checking the kind first.
    ///
    /// Consumers that know their payload type use [`Envelope::decode_as`], which reads a record
    /// in one pass; this two-step path is what classifies a failure precisely.
    pub fn typed<T: DeserializeOwned>(self, expected: EventKind) -> Result<Envelope<T>, DecodeError> {
        if self.kind != expected {
            return Err(DecodeError::UnexpectedKind { expected, got: self.kind });
        }
        let payload = serde_json::from_str(self.payload.get())
            .map_err(|source| DecodeError::Payload { kind: self.kind, source })?;
        Ok(Envelope {
            event_id: self.event_id,
            kind: self.kind,
            schema_version: self.schema_version,
            tenant_id: self.tenant_id,
            design_id: self.design_id,
            revision: self.revision,
            correlation_id: self.correlation_id,
            occurred_at: self.occurred_at,
            producer: self.producer,
            payload,
        })
    }
}

impl<T: DeserializeOwned> Envelope<T> {
    /// Decodes a record whose payload should be a `T` of kind `expected`, in one pass over the
    /// bytes (a netlist inside is scanned once). On failure, the error says which part is wrong.
    pub fn decode_as(bytes: &[u8], expected: EventKind) -> Result<Self, DecodeError> {
        match serde_json::from_slice::<Envelope<T>>(bytes) {
            Ok(env) if env.schema_version == SCHEMA_VERSION && env.kind == expected => Ok(env),
            _ => Envelope::decode(bytes)?.typed(expected),
        }
    }
}

/// `design.submitted` and `validation.requested`: the whole specification travels with the event
/// (the log is the record of what was submitted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesignSubmitted {
    pub spec: DesignSpec,
}

pub type ValidationRequested = DesignSubmitted;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ValidationStarted {}

/// `validation.finished`: the validator's report, as the API serves it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationFinished {
    pub verdict: Verdict,
    pub report: Box<RawValue>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultsReady {
    pub status: DesignStatus,
    pub verdict: Verdict,
}

/// One line of a design's timeline: an event as it was applied, in the order applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub event_id: Uuid,
    pub kind: EventKind,
    pub revision: u64,
    pub correlation_id: CorrelationId,
    pub occurred_at: DateTime<Utc>,
}

/// A record that can never succeed, with the reason, written to the dead-letter topic.
/// The original bytes are kept (base64) so an operator can replay it after a fix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeadLetter {
    pub source_topic: String,
    pub source_partition: u32,
    pub source_offset: u64,
    /// The function that gave up on the record.
    pub function: String,
    pub reason: String,
    pub correlation_id: Option<String>,
    pub key_base64: Option<String>,
    pub value_base64: Option<String>,
    pub dead_lettered_at: DateTime<Utc>,
}

impl DeadLetter {
    pub fn to_record(&self, key: &str) -> crate::ports::Record {
        let mut headers = vec![(headers::EVENT_KIND.to_owned(), b"dead-letter".to_vec())];
        if let Some(c) = &self.correlation_id {
            headers.push((headers::CORRELATION_ID.to_owned(), c.as_bytes().to_vec()));
        }
        crate::ports::Record { key: key.to_owned(), value: serde_json::to_vec(self).expect("serialises"), headers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause() -> Cause {
        Cause {
            tenant_id: TenantId::parse("acme").unwrap(),
            design_id: DesignId::parse("d1").unwrap(),
            revision: 3,
            correlation_id: CorrelationId::parse("c-1").unwrap(),
        }
    }

    #[test]
    fn an_envelope_round_trips_through_a_record_with_its_headers() {
        let env = Envelope::new(EventKind::ValidationStarted, &cause(), "validation", ValidationStarted {});
        let rec = env.to_record();
        assert_eq!(rec.key, "acme");
        assert!(rec.headers.iter().any(|(k, v)| k == headers::EVENT_KIND && v == b"validation.started"));
        let back =
            Envelope::decode(&rec.value).unwrap().typed::<ValidationStarted>(EventKind::ValidationStarted).unwrap();
        assert_eq!(back.event_id, env.event_id);
        assert_eq!(back.revision, 3);
        assert_eq!(back.correlation_id.as_str(), "c-1");
    }

    #[test]
    fn decoding_refuses_an_unknown_schema_version_and_a_wrong_kind() {
        let env = Envelope::new(EventKind::ValidationStarted, &cause(), "validation", ValidationStarted {});
        let mut v: serde_json::Value = serde_json::from_slice(&env.to_record().value).unwrap();
        v["schema_version"] = 99.into();
        assert!(matches!(Envelope::decode(v.to_string().as_bytes()), Err(DecodeError::SchemaVersion(99))));
        let ok = Envelope::decode(&env.to_record().value).unwrap();
        assert!(matches!(ok.typed::<ResultsReady>(EventKind::ResultsReady), Err(DecodeError::UnexpectedKind { .. })));
        assert!(matches!(Envelope::decode(b"{not json"), Err(DecodeError::Envelope(_))));
    }

    #[test]
    fn one_pass_decoding_agrees_with_the_two_step_path_and_explains_failures() {
        let env = Envelope::new(EventKind::ValidationStarted, &cause(), "validation", ValidationStarted {});
        let bytes = env.to_record().value;
        let one = Envelope::<ValidationStarted>::decode_as(&bytes, EventKind::ValidationStarted).unwrap();
        assert_eq!(one.event_id, env.event_id);
        let wrong = Envelope::<ResultsReady>::decode_as(&bytes, EventKind::ResultsReady).unwrap_err();
        assert!(matches!(wrong, DecodeError::UnexpectedKind { .. }), "{wrong}");
    }

    #[test]
    fn uuid_v7_event_ids_sort_by_creation() {
        let a = Envelope::new(EventKind::ValidationStarted, &cause(), "t", ());
        let b = Envelope::new(EventKind::ValidationStarted, &cause(), "t", ());
        assert_eq!(a.event_id.get_version_num(), 7);
        assert!(a.event_id < b.event_id);
    }
}
