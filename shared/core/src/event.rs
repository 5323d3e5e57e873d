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
    /// On a record re-published from the dead-letter topic (`openqq dead-letters replay`): the
    /// dead letter's id (its dead-letter-topic `partition:offset`). Its store writes then follow
    /// the replay rule ([`crate::revision::plan_replay`]).
    pub const REPLAY_OF: &str = "replay-of";
    /// On a record a consumer put back at the end of its topic because its tenant had used its
    /// share of the batch (`openqq_runtime`'s `share`): how many times it was.
    pub const DEFERRED: &str = "deferred";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "design.submitted")]
    DesignSubmitted,
    #[serde(rename = "validation.requested")]
    ValidationRequested,
    /// A revision given as HDL source, for the synthesis function (its own lane: synthesis and
    /// simulation take seconds, netlist validation milliseconds).
    #[serde(rename = "synthesis.requested")]
    SynthesisRequested,
    /// A revision to be written by a model, for the generation function (a lane of its own: a
    /// model call takes seconds, and a tenant's burst of them must not hold up source jobs).
    #[serde(rename = "generation.requested")]
    GenerationRequested,
    /// The generation function took the revision up. Timeline (and feed) only, as the kinds below.
    #[serde(rename = "generation.started")]
    GenerationStarted,
    /// The repair loop ended: its verdict is the last attempt's checks'.
    #[serde(rename = "generation.finished")]
    GenerationFinished,
    /// The synthesis function took the revision up. This and the three kinds after it are
    /// timeline (and feed) entries only: no topic carries them.
    #[serde(rename = "synthesis.started")]
    SynthesisStarted,
    /// Yosys ended, with a netlist or the reason there is none.
    #[serde(rename = "synthesis.finished")]
    SynthesisFinished,
    /// The revision's testbenches ran.
    #[serde(rename = "simulation.finished")]
    SimulationFinished,
    /// The revision was checked against its reference.
    #[serde(rename = "equivalence.finished")]
    EquivalenceFinished,
    #[serde(rename = "validation.started")]
    ValidationStarted,
    #[serde(rename = "validation.finished")]
    ValidationFinished,
    #[serde(rename = "results.ready")]
    ResultsReady,
    /// A batch was accepted: its items, for the batch function to fan out (topic `batch.submitted`).
    #[serde(rename = "batch.submitted")]
    BatchSubmitted,
    /// A batch item's design reached its end (ready, or failed): for the batch function, which
    /// counts it and releases the next item (topic `batch.item.ended`).
    #[serde(rename = "batch.item.ended")]
    BatchItemEnded,
    /// Every item of a batch is final. A feed entry only (its design id is the batch's id).
    #[serde(rename = "batch.completed")]
    BatchCompleted,
    /// The platform gave up on a revision (one of its records was dead-lettered). A timeline
    /// entry only: no topic carries it, so it is not in [`EventKind::ALL`].
    #[serde(rename = "design.failed")]
    DesignFailed,
    /// The tenant deleted the design (`DELETE /v1/designs/{id}`): the audit entry of its
    /// deletion. A feed entry only; its revision is the design's when it was deleted.
    #[serde(rename = "design.deleted")]
    DesignDeleted,
}

impl EventKind {
    /// Every kind published on a topic (one topic each); see [`Topics::all`].
    pub const ALL: [EventKind; 9] = [
        EventKind::DesignSubmitted,
        EventKind::ValidationRequested,
        EventKind::SynthesisRequested,
        EventKind::GenerationRequested,
        EventKind::ValidationStarted,
        EventKind::ValidationFinished,
        EventKind::ResultsReady,
        EventKind::BatchSubmitted,
        EventKind::BatchItemEnded,
    ];

    /// The kinds whose topics have a twin in the batch lane ([`Topics::lane`]): every kind a
    /// design's revision travels through.
    pub const LANED: [EventKind; 7] = [
        EventKind::DesignSubmitted,
        EventKind::ValidationRequested,
        EventKind::SynthesisRequested,
        EventKind::GenerationRequested,
        EventKind::ValidationStarted,
        EventKind::ValidationFinished,
        EventKind::ResultsReady,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::DesignSubmitted => "design.submitted",
            EventKind::ValidationRequested => "validation.requested",
            EventKind::SynthesisRequested => "synthesis.requested",
            EventKind::GenerationRequested => "generation.requested",
            EventKind::GenerationStarted => "generation.started",
            EventKind::GenerationFinished => "generation.finished",
            EventKind::SynthesisStarted => "synthesis.started",
            EventKind::SynthesisFinished => "synthesis.finished",
            EventKind::SimulationFinished => "simulation.finished",
            EventKind::EquivalenceFinished => "equivalence.finished",
            EventKind::ValidationStarted => "validation.started",
            EventKind::ValidationFinished => "validation.finished",
            EventKind::ResultsReady => "results.ready",
            EventKind::DesignFailed => "design.failed",
            EventKind::DesignDeleted => "design.deleted",
            EventKind::BatchSubmitted => "batch.submitted",
            EventKind::BatchItemEnded => "batch.item.ended",
            EventKind::BatchCompleted => "batch.completed",
        }
    }

    /// The kinds that are timeline entries only, never on a topic.
    pub const TIMELINE_ONLY: [EventKind; 9] = [
        EventKind::GenerationStarted,
        EventKind::GenerationFinished,
        EventKind::SynthesisStarted,
        EventKind::SynthesisFinished,
        EventKind::SimulationFinished,
        EventKind::EquivalenceFinished,
        EventKind::DesignFailed,
        EventKind::BatchCompleted,
        EventKind::DesignDeleted,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().chain(Self::TIMELINE_ONLY).find(|k| k.as_str() == s)
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
    /// Batch items travel on the interactive topics instead of the batch lane's
    /// ([`Topics::lane`]): only for measuring what the lane is worth (`--batch-lane off`).
    pub shared_lane: bool,
}

impl Topics {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into(), shared_lane: false }
    }
    pub fn of(&self, kind: EventKind) -> String {
        format!("{}{}", self.prefix, kind.as_str())
    }
    /// The topic of `kind` in the batch lane (`batch.design.submitted`, …) when `batch`, else its
    /// own: batch items travel on topics of their own, with consumers of their own, so
    /// interactive designs never queue behind them.
    pub fn lane(&self, kind: EventKind, batch: bool) -> String {
        match batch && !self.shared_lane && EventKind::LANED.contains(&kind) {
            true => format!("{}batch.{}", self.prefix, kind.as_str()),
            false => self.of(kind),
        }
    }
    pub fn dead_letter(&self) -> String {
        format!("{}dead-letter", self.prefix)
    }
    /// Every topic the platform writes, for adapters that create topics at start.
    pub fn all(&self) -> Vec<String> {
        let mut all: Vec<String> = EventKind::ALL.iter().map(|k| self.of(*k)).collect();
        all.extend(EventKind::LANED.iter().map(|k| self.lane(*k, true)));
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
    /// The batch item this revision is, if it is one ([`Origin::batch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<crate::batch::ItemRef>,
    /// The dead letter this record replays, read from its [`headers::REPLAY_OF`] header by the
    /// consumer that decoded it; never part of the record's body, never carried to the events it
    /// causes.
    #[serde(skip)]
    pub replay_of: Option<String>,
}

/// What a consumer knows about the request that caused an event; copied into every event it
/// produces, so one correlation id follows a design through all four functions.
#[derive(Debug, Clone)]
pub struct Origin {
    pub tenant_id: TenantId,
    pub design_id: DesignId,
    pub revision: u64,
    pub correlation_id: CorrelationId,
    /// The batch item the design's revision is, if it is one: every event it causes stays in the
    /// batch lane ([`Topics::lane`]) and its end reaches the batch.
    pub batch: Option<crate::batch::ItemRef>,
}

impl<P> Envelope<P> {
    /// A new event with a fresh UUIDv7 id, stamped now.
    pub fn new(kind: EventKind, cause: &Origin, producer: &str, payload: P) -> Self {
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
            batch: cause.batch.clone(),
            replay_of: None,
        }
    }

    pub fn cause(&self) -> Origin {
        Origin {
            tenant_id: self.tenant_id.clone(),
            design_id: self.design_id.clone(),
            revision: self.revision,
            correlation_id: self.correlation_id.clone(),
            batch: self.batch.clone(),
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
    pub fn to_record(&self) -> crate::record::Record {
        crate::record::Record {
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
            batch: self.batch,
            replay_of: self.replay_of,
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
/// (the log is the record of what was submitted), its large payloads by reference
/// ([`crate::design::INLINE_PAYLOAD_MAX_BYTES`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesignSubmitted {
    pub spec: DesignSpec,
    /// On `validation.requested` of a revision given as source: what its HDL checks found (the
    /// synthesis function's). Validation adds them to the report, and any that failed fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<crate::hdl::HdlChecks>,
}

pub type ValidationRequested = DesignSubmitted;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ValidationStarted {}

/// `validation.finished`: the verdict and, up to [`crate::design::INLINE_PAYLOAD_MAX_BYTES`], the
/// validator's report as the API serves it. A larger report is only in the store (the validation
/// function writes it there with this event; the results function needs only the verdict), so
/// the record stays small. Records of earlier versions may carry a `report_ref` to a copy in the
/// object store; it is ignored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationFinished {
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Box<RawValue>>,
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

/// Header names of a dead-letter record. Its key and value are the original record's, byte for
/// byte (so a dead letter is never larger than what it replaces, and replaying it is a copy); what
/// happened travels in these headers, beside the original headers.
pub mod dead_letter_headers {
    /// Every metadata header starts with this; original headers never do.
    pub const PREFIX: &str = "dead-letter-";
    pub const REASON: &str = "dead-letter-reason";
    pub const FUNCTION: &str = "dead-letter-function";
    pub const SOURCE_TOPIC: &str = "dead-letter-source-topic";
    pub const SOURCE_PARTITION: &str = "dead-letter-source-partition";
    pub const SOURCE_OFFSET: &str = "dead-letter-source-offset";
    /// RFC 3339.
    pub const AT: &str = "dead-letter-at";
    /// The original `event-kind` header (the dead letter's own `event-kind` is `dead-letter`).
    pub const SOURCE_EVENT_KIND: &str = "dead-letter-source-event-kind";
    /// How many original headers were left out for size ([`super::MAX_DEAD_LETTER_HEADER_BYTES`]).
    pub const HEADERS_DROPPED: &str = "dead-letter-headers-dropped";
    /// The length of an original value over the record limit, which the dead letter cannot carry
    /// (only a producer outside the platform can write one); the dead letter's value is empty.
    pub const VALUE_OMITTED: &str = "dead-letter-value-omitted";
    /// The `event-kind` header value of every dead letter.
    pub const KIND: &str = "dead-letter";
}

/// Longest reason a dead letter (and a failed design) carries, in bytes; longer ones are clipped.
pub const MAX_DEAD_LETTER_REASON_BYTES: usize = 1024;

/// Most bytes of original headers (names and values) a dead letter keeps; the rest are counted in
/// `dead-letter-headers-dropped`. Together with the metadata this stays far inside the slack the
/// Kafka adapter allows above [`crate::record::MAX_RECORD_BYTES`] for key and headers, so any
/// record the log accepted can be dead-lettered.
pub const MAX_DEAD_LETTER_HEADER_BYTES: usize = 16 * 1024;

/// A record that can never succeed, as written to the dead-letter topic: the original key, value
/// and headers, unchanged, plus why and where it came from. An operator replays it after a fix by
/// publishing `key`, `value` and `headers` to `source_topic` again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub source_topic: String,
    pub source_partition: u32,
    pub source_offset: u64,
    /// The function that gave up on the record.
    pub function: String,
    /// Why, at most [`MAX_DEAD_LETTER_REASON_BYTES`] once written.
    pub reason: String,
    pub dead_lettered_at: DateTime<Utc>,
    /// The original key.
    pub key: String,
    /// The original value (empty when the trigger delivered none that could be decoded).
    pub value: Vec<u8>,
    /// The original headers, `correlation-id` and `event-kind` among them.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Why a record could not be read back as a dead letter.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeadLetterError {
    #[error("the record is not a dead letter (its event-kind header is not `dead-letter`)")]
    NotADeadLetter,
    #[error("the dead letter's {0} header is missing or malformed")]
    Header(&'static str),
}

impl DeadLetter {
    /// The original record's correlation id, if it had one.
    pub fn correlation_id(&self) -> Option<&str> {
        self.header(headers::CORRELATION_ID)
    }

    /// The original record's event kind header, if it had one.
    pub fn event_kind(&self) -> Option<&str> {
        self.header(headers::EVENT_KIND)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The record to publish on the dead-letter topic: the original key and value, the original
    /// headers (within [`MAX_DEAD_LETTER_HEADER_BYTES`]; `event-kind` moved to
    /// `dead-letter-source-event-kind`), the metadata headers, and `event-kind: dead-letter`.
    pub fn to_record(&self) -> crate::record::Record {
        use dead_letter_headers as h;
        let mut out: Vec<(String, Vec<u8>)> = vec![(headers::EVENT_KIND.to_owned(), h::KIND.as_bytes().to_vec())];
        let mut budget = MAX_DEAD_LETTER_HEADER_BYTES;
        let mut dropped = 0usize;
        for (name, value) in &self.headers {
            let name = match name.as_str() {
                headers::EVENT_KIND => h::SOURCE_EVENT_KIND,
                // Never let an original header pass for metadata.
                n if n.starts_with(h::PREFIX) => {
                    dropped += 1;
                    continue;
                }
                n => n,
            };
            let size = name.len() + value.len();
            if size > budget {
                dropped += 1;
                continue;
            }
            budget -= size;
            out.push((name.to_owned(), value.clone()));
        }
        let mut meta = |name: &str, value: String| out.push((name.to_owned(), value.into_bytes()));
        meta(h::REASON, clip(&self.reason, MAX_DEAD_LETTER_REASON_BYTES).into_owned());
        meta(h::FUNCTION, clip(&self.function, 256).into_owned());
        meta(h::SOURCE_TOPIC, clip(&self.source_topic, 256).into_owned());
        meta(h::SOURCE_PARTITION, self.source_partition.to_string());
        meta(h::SOURCE_OFFSET, self.source_offset.to_string());
        meta(h::AT, self.dead_lettered_at.to_rfc3339());
        if dropped > 0 {
            meta(h::HEADERS_DROPPED, dropped.to_string());
        }
        let value = if self.value.len() > crate::record::MAX_RECORD_BYTES {
            meta(h::VALUE_OMITTED, self.value.len().to_string());
            Vec::new()
        } else {
            self.value.clone()
        };
        crate::record::Record { key: self.key.clone(), value, headers: out }
    }

    /// Reads a record of the dead-letter topic back (what an operator's replay tool does).
    pub fn from_record(record: &crate::record::LogRecord) -> Result<Self, DeadLetterError> {
        use dead_letter_headers as h;
        let get = |name: &'static str| {
            record
                .headers
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .ok_or(DeadLetterError::Header(name))
        };
        if get(headers::EVENT_KIND) != Ok(h::KIND) {
            return Err(DeadLetterError::NotADeadLetter);
        }
        let mut original = Vec::new();
        for (name, value) in &record.headers {
            match name.as_str() {
                headers::EVENT_KIND => {}
                h::SOURCE_EVENT_KIND => original.push((headers::EVENT_KIND.to_owned(), value.clone())),
                n if n.starts_with(h::PREFIX) => {}
                _ => original.push((name.clone(), value.clone())),
            }
        }
        Ok(Self {
            source_topic: get(h::SOURCE_TOPIC)?.to_owned(),
            source_partition: get(h::SOURCE_PARTITION)?
                .parse()
                .map_err(|_| DeadLetterError::Header(h::SOURCE_PARTITION))?,
            source_offset: get(h::SOURCE_OFFSET)?.parse().map_err(|_| DeadLetterError::Header(h::SOURCE_OFFSET))?,
            function: get(h::FUNCTION)?.to_owned(),
            reason: get(h::REASON)?.to_owned(),
            dead_lettered_at: DateTime::parse_from_rfc3339(get(h::AT)?)
                .map_err(|_| DeadLetterError::Header(h::AT))?
                .with_timezone(&Utc),
            key: record.key.clone(),
            value: record.value.clone(),
            headers: original,
        })
    }
}

/// `text` cut to at most `max` bytes on a character boundary, ending in `…` when cut.
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    const ELLIPSIS: &str = "…";
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(ELLIPSIS.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{ELLIPSIS}", &text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause() -> Origin {
        Origin {
            tenant_id: TenantId::parse("acme").unwrap(),
            design_id: DesignId::parse("d1").unwrap(),
            revision: 3,
            correlation_id: CorrelationId::parse("c-1").unwrap(),
            batch: None,
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

    fn letter(value: Vec<u8>, reason: &str) -> DeadLetter {
        let original = Envelope::new(EventKind::DesignSubmitted, &cause(), "api", ()).to_record();
        DeadLetter {
            source_topic: "design.submitted".into(),
            source_partition: 3,
            source_offset: 17,
            function: "design-job".into(),
            reason: reason.into(),
            dead_lettered_at: Utc::now(),
            key: original.key,
            value,
            headers: original.headers,
        }
    }

    fn stored(rec: crate::record::Record) -> crate::record::LogRecord {
        crate::record::LogRecord {
            topic: "dead-letter".into(),
            partition: 0,
            offset: 0,
            timestamp_ms: 0,
            key: rec.key,
            value: rec.value,
            headers: rec.headers,
        }
    }

    #[test]
    fn a_dead_letter_of_a_record_at_the_size_limit_is_no_larger_than_the_record() {
        let value = vec![b'x'; crate::record::MAX_RECORD_BYTES];
        let rec = letter(value.clone(), "boom").to_record();
        assert_eq!(rec.value, value, "the value is the original bytes, not an inflated copy");
        assert_eq!(rec.key, "acme");
        crate::record::check_record_sizes(std::slice::from_ref(&rec)).expect("the log accepts it");
        let header_bytes: usize = rec.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(header_bytes < 4 * 1024, "metadata stays small ({header_bytes} bytes)");
    }

    #[test]
    fn a_dead_letter_reads_back_with_its_original_headers_and_metadata() {
        let original = letter(b"{\"a\":1}".to_vec(), "the payload is invalid");
        let rec = original.to_record();
        let kind = rec.headers.iter().find(|(k, _)| k == headers::EVENT_KIND).map(|(_, v)| v.as_slice());
        assert_eq!(kind, Some(&b"dead-letter"[..]), "routable as a dead letter before decoding");
        let back = DeadLetter::from_record(&stored(rec)).unwrap();
        let mut expected = original.clone();
        expected.dead_lettered_at = back.dead_lettered_at;
        assert_eq!(back, expected);
        assert_eq!(back.correlation_id(), Some("c-1"));
        assert_eq!(back.event_kind(), Some("design.submitted"), "the original event-kind is kept");
        let envelope = Envelope::new(EventKind::ResultsReady, &cause(), "t", ()).to_record();
        assert_eq!(DeadLetter::from_record(&stored(envelope)).unwrap_err(), DeadLetterError::NotADeadLetter);
    }

    #[test]
    fn a_value_over_the_record_limit_is_left_out_so_the_dead_letter_still_fits() {
        let rec = letter(vec![b'x'; crate::record::MAX_RECORD_BYTES + 1], "too big").to_record();
        assert!(rec.value.is_empty());
        crate::record::check_record_sizes(std::slice::from_ref(&rec)).expect("the log accepts it");
        let omitted = rec.headers.iter().find(|(k, _)| k == dead_letter_headers::VALUE_OMITTED).map(|(_, v)| v.clone());
        assert_eq!(omitted, Some((crate::record::MAX_RECORD_BYTES + 1).to_string().into_bytes()));
    }

    #[test]
    fn a_long_reason_is_clipped_on_a_character_boundary() {
        let reason = "é".repeat(5_000);
        let rec = letter(Vec::new(), &reason).to_record();
        let back = DeadLetter::from_record(&stored(rec)).unwrap();
        assert!(back.reason.len() <= MAX_DEAD_LETTER_REASON_BYTES, "{}", back.reason.len());
        assert!(back.reason.ends_with('…'));
    }

    #[test]
    fn a_design_record_with_every_payload_at_the_inline_threshold_stays_under_the_record_bound() {
        use crate::design::{json_string_len, INLINE_PAYLOAD_MAX_BYTES, MAX_DESIGN_RECORD_BYTES, MAX_NAME_CHARS};
        let at = INLINE_PAYLOAD_MAX_BYTES;
        let netlist = format!(r#"{{"modules": {{"top": "{}"}}}}"#, "n".repeat(at - 24));
        assert!(netlist.len() <= at);
        // Control characters cost six bytes each once escaped: the worst case per character.
        let spec = serde_json::json!({
            "name": "\u{1}".repeat(MAX_NAME_CHARS),
            "target": {"device": "d".repeat(32), "package": "p".repeat(32)},
            "netlist": serde_json::from_str::<serde_json::Value>(&netlist).unwrap(),
            "constraints": {"format": "pcf", "text": "\u{1}".repeat((at - 2) / 6)},
            "bitstream_base64": "A".repeat((at - 2) / 4 * 4),
            "options": {"allow_unconstrained": true, "top": "\u{1}".repeat(256)},
        });
        let spec: DesignSpec = serde_json::from_value(spec).unwrap();
        assert_eq!(spec.check(), Ok(()));
        assert!(spec.outsized(at).is_empty(), "every payload is at most at the threshold");
        assert!(json_string_len(&spec.constraints.text) <= at);
        let record =
            Envelope::new(EventKind::DesignSubmitted, &cause(), "design-job", DesignSubmitted { spec, checks: None })
                .to_record();
        assert!(record.value.len() < MAX_DESIGN_RECORD_BYTES, "{} bytes", record.value.len());
    }

    #[test]
    fn validation_finished_records_of_earlier_versions_read() {
        let inline = serde_json::json!({"verdict": "pass", "report": {"findings": []}});
        let finished: ValidationFinished = serde_json::from_value(inline).unwrap();
        assert_eq!(finished.report.map(|r| r.get().to_owned()).as_deref(), Some(r#"{"findings":[]}"#));
        let digest = "a".repeat(64);
        let by_reference = serde_json::json!({"verdict": "fail", "report_ref": {"digest": digest, "bytes": 20_000}});
        let finished: ValidationFinished = serde_json::from_value(by_reference).unwrap();
        assert_eq!((finished.verdict, finished.report.is_none()), (Verdict::Fail, true));
    }

    #[test]
    fn design_failed_is_a_timeline_kind_without_a_topic() {
        assert_eq!(EventKind::parse("design.failed"), Some(EventKind::DesignFailed));
        assert!(!Topics::default().all().iter().any(|t| t == "design.failed"));
    }

    #[test]
    fn uuid_v7_event_ids_sort_by_creation() {
        let a = Envelope::new(EventKind::ValidationStarted, &cause(), "t", ());
        let b = Envelope::new(EventKind::ValidationStarted, &cause(), "t", ());
        assert_eq!(a.event_id.get_version_num(), 7);
        assert!(a.event_id < b.event_id);
    }
}
