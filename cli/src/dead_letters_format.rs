//! What `openqq dead-letters` reads and prints, without I/O: dead-letter ids, filters, one
//! line per dead letter for `list`, the whole of one for `show`, and the record `replay`
//! publishes.

use openqq_core::event::{clip, dead_letter_headers, headers};
use openqq_core::{DeadLetter, Envelope, LogRecord, Record, TenantId};
use std::fmt::Write as _;

/// The functions that dead-letter records, as `--function` accepts them.
pub const FUNCTIONS: [&str; 3] = ["design-job", "validation", "results"];

/// Longest reason `list` prints, in bytes (`show` prints it whole).
pub const LIST_REASON_BYTES: usize = 80;

/// Most payload bytes `show` prints of a decoded envelope; the rest is counted, not printed.
pub const SHOW_PAYLOAD_BYTES: usize = 2048;

/// Most bytes of one header value `show` prints.
pub const SHOW_HEADER_BYTES: usize = 256;

/// A dead letter's id: where it is in the dead-letter topic, `PARTITION:OFFSET`. Stable for as
/// long as the record is kept (offsets never move), and the same on every process reading the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LetterId {
    pub partition: u32,
    pub offset: u64,
}

impl std::fmt::Display for LetterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.partition, self.offset)
    }
}

/// An argument that cannot be used, with the sentence saying why.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgError {
    Id(String),
    Tenant { value: String, reason: String },
    Function(String),
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::Id(value) => write!(
                f,
                "a dead letter id is PARTITION:OFFSET as `openqq dead-letters list` prints it (such as 3:17), not {value:?}"
            ),
            ArgError::Tenant { value, reason } => write!(f, "--tenant {value:?} is not a tenant id: {reason}"),
            ArgError::Function(value) => write!(
                f,
                "--function {value:?} is not a function that dead-letters records; use one of {}",
                FUNCTIONS.join(", ")
            ),
        }
    }
}

impl std::error::Error for ArgError {}

impl std::str::FromStr for LetterId {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let bad = || ArgError::Id(clip(s, 64).into_owned());
        let (p, o) = s.trim().split_once(':').ok_or_else(bad)?;
        Ok(Self { partition: p.parse().map_err(|_| bad())?, offset: o.parse().map_err(|_| bad())? })
    }
}

/// `--tenant` and `--function`, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub tenant: Option<TenantId>,
    pub function: Option<String>,
}

impl Filter {
    pub fn parse(tenant: Option<&str>, function: Option<&str>) -> Result<Self, ArgError> {
        let tenant = tenant
            .map(|t| {
                TenantId::parse(t)
                    .map_err(|e| ArgError::Tenant { value: clip(t, 64).into_owned(), reason: e.to_string() })
            })
            .transpose()?;
        let function = function
            .map(|f| FUNCTIONS.contains(&f).then(|| f.to_owned()).ok_or_else(|| ArgError::Function(clip(f, 64).into())))
            .transpose()?;
        Ok(Self { tenant, function })
    }

    /// Whether `letter` passes. Its tenant is the one its envelope names, else its key (every
    /// record is keyed by tenant).
    pub fn admits(&self, letter: &Letter) -> bool {
        let tenant_ok = self.tenant.as_ref().is_none_or(|t| letter.tenant() == Some(t.as_str()));
        let function_ok = self.function.as_ref().is_none_or(|f| letter.dead.as_ref().is_ok_and(|d| &d.function == f));
        tenant_ok && function_ok
    }
}

/// The envelope fields a listing shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub tenant: String,
    pub design: String,
    pub revision: u64,
    pub kind: String,
}

/// One record of the dead-letter topic, read back.
#[derive(Debug)]
pub struct Letter {
    pub id: LetterId,
    /// The dead letter, or why the record is not one.
    pub dead: Result<DeadLetter, openqq_core::DeadLetterError>,
    /// What its original envelope names, when it decodes.
    pub named: Option<Named>,
    /// The length of an original value the dead letter could not carry (`dead-letter-value-omitted`).
    pub value_omitted: Option<u64>,
}

impl Letter {
    pub fn read(record: &LogRecord) -> Self {
        let dead = DeadLetter::from_record(record);
        let named = dead.as_ref().ok().and_then(|d| Envelope::decode(&d.value).ok()).map(|env| Named {
            tenant: env.tenant_id.to_string(),
            design: env.design_id.to_string(),
            revision: env.revision,
            kind: env.kind.to_string(),
        });
        let value_omitted = record
            .headers
            .iter()
            .find(|(k, _)| k == dead_letter_headers::VALUE_OMITTED)
            .map(|(_, v)| std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()).unwrap_or(0));
        Self { id: LetterId { partition: record.partition, offset: record.offset }, dead, named, value_omitted }
    }

    fn tenant(&self) -> Option<&str> {
        match (&self.named, &self.dead) {
            (Some(n), _) => Some(&n.tenant),
            (None, Ok(d)) if !d.key.is_empty() => Some(&d.key),
            _ => None,
        }
    }

    /// Its line in `list`.
    pub fn line(&self) -> String {
        let Ok(d) = &self.dead else {
            let e = self.dead.as_ref().err().map(ToString::to_string).unwrap_or_default();
            return format!("{:<9} unreadable: {e}", self.id.to_string());
        };
        let source = format!("{}/{}@{}", d.source_topic, d.source_partition, d.source_offset);
        let (tenant, design, revision, kind) = match &self.named {
            Some(n) => (n.tenant.as_str(), n.design.as_str(), n.revision.to_string(), n.kind.as_str()),
            None => (d.key.as_str(), "-", "-".to_owned(), d.event_kind().unwrap_or("-")),
        };
        let reason = one_line(&d.reason);
        format!(
            "{:<9} {:<30} {:<11} {:<16} {:<38} {:>4} {:<20} {} {}",
            self.id.to_string(),
            source,
            d.function,
            tenant,
            design,
            revision,
            kind,
            d.dead_lettered_at.format("%Y-%m-%dT%H:%M:%SZ"),
            clip(&reason, LIST_REASON_BYTES)
        )
    }
}

/// The heading `list` prints above its lines.
pub fn heading() -> String {
    format!(
        "{:<9} {:<30} {:<11} {:<16} {:<38} {:>4} {:<20} {:<20} REASON",
        "ID", "SOURCE", "FUNCTION", "TENANT", "DESIGN", "REV", "KIND", "DEAD-LETTERED"
    )
}

/// `text` on one line: line breaks and other control characters escaped.
fn one_line(text: &str) -> String {
    text.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

/// A header value as `show` prints it: text when it is printable UTF-8, else its bytes in hex.
fn printable(value: &[u8]) -> String {
    let shown = &value[..value.len().min(SHOW_HEADER_BYTES)];
    let more = if value.len() > shown.len() { format!(" … ({} bytes)", value.len()) } else { String::new() };
    match std::str::from_utf8(shown) {
        Ok(text) if !text.chars().any(char::is_control) => format!("{text}{more}"),
        _ => format!("0x{}{more}", shown.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// Everything `show` prints about `letter`.
pub fn show(letter: &Letter, topic: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "dead letter {} (topic {topic}, partition {}, offset {})",
        letter.id, letter.id.partition, letter.id.offset
    );
    let d = match &letter.dead {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(out, "unreadable: {e}");
            return out;
        }
    };
    let _ =
        writeln!(out, "source:        {} partition {} offset {}", d.source_topic, d.source_partition, d.source_offset);
    let _ = writeln!(out, "function:      {}", d.function);
    let _ = writeln!(out, "dead-lettered: {}", d.dead_lettered_at.to_rfc3339());
    let _ = writeln!(out, "reason:        {}", d.reason);
    let _ = writeln!(out, "key:           {}", d.key);
    let _ = writeln!(out, "headers:");
    for (name, value) in &d.headers {
        let _ = writeln!(out, "  {name}: {}", printable(value));
    }
    match Envelope::decode(&d.value) {
        Ok(env) => {
            let _ = writeln!(out, "envelope:");
            let _ = writeln!(out, "  event_id:       {}", env.event_id);
            let _ = writeln!(out, "  kind:           {}", env.kind);
            let _ = writeln!(out, "  schema_version: {}", env.schema_version);
            let _ = writeln!(out, "  tenant_id:      {}", env.tenant_id);
            let _ = writeln!(out, "  design_id:      {}", env.design_id);
            let _ = writeln!(out, "  revision:       {}", env.revision);
            let _ = writeln!(out, "  correlation_id: {}", env.correlation_id);
            let _ = writeln!(out, "  occurred_at:    {}", env.occurred_at.to_rfc3339());
            let _ = writeln!(out, "  producer:       {}", env.producer);
            let payload = env.payload.get();
            let _ = match payload.len() > SHOW_PAYLOAD_BYTES {
                true => writeln!(
                    out,
                    "  payload ({} bytes, the first {} shown): {}",
                    payload.len(),
                    SHOW_PAYLOAD_BYTES,
                    clip(payload, SHOW_PAYLOAD_BYTES)
                ),
                false => writeln!(out, "  payload:        {payload}"),
            };
        }
        Err(_) if d.value.is_empty() => {
            let _ = match letter.value_omitted {
                Some(bytes) => writeln!(out, "value:         left out ({bytes} bytes, over the record limit)"),
                None => writeln!(out, "value:         empty"),
            };
        }
        Err(e) => {
            let _ = writeln!(out, "value:         {} bytes, not an envelope: {e}", d.value.len());
            let preview = String::from_utf8_lossy(&d.value[..d.value.len().min(SHOW_HEADER_BYTES)]).into_owned();
            let _ = writeln!(out, "  starts:      {}", one_line(&preview));
        }
    }
    out
}

/// Why a dead letter cannot be replayed.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplayError {
    Unreadable(LetterId, String),
    ValueOmitted { id: LetterId, bytes: u64 },
    UnknownTopic { id: LetterId, topic: String, known: String },
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Unreadable(id, e) => write!(f, "dead letter {id} is not readable as a dead letter: {e}"),
            ReplayError::ValueOmitted { id, bytes } => write!(
                f,
                "dead letter {id} cannot be replayed: its original value ({bytes} bytes) was over the record limit and was left out"
            ),
            ReplayError::UnknownTopic { id, topic, known } => write!(
                f,
                "dead letter {id} came from topic {topic:?}, which is not one of this platform's topics ({known}); check --topic-prefix"
            ),
        }
    }
}

impl std::error::Error for ReplayError {}

/// The record `replay` publishes for `letter` and the topic it goes to: the original key (so it
/// lands on its tenant's partition), value and headers, with `replay-of` naming the dead letter
/// (replacing the one a replayed record carried). `topics` are those a replay may go to.
pub fn replay_record(letter: &Letter, topics: &[String]) -> Result<(String, Record), ReplayError> {
    let d = letter.dead.as_ref().map_err(|e| ReplayError::Unreadable(letter.id, e.to_string()))?;
    if let Some(bytes) = letter.value_omitted {
        return Err(ReplayError::ValueOmitted { id: letter.id, bytes });
    }
    if !topics.contains(&d.source_topic) {
        return Err(ReplayError::UnknownTopic {
            id: letter.id,
            topic: clip(&d.source_topic, 256).into_owned(),
            known: topics.join(", "),
        });
    }
    let mut headers: Vec<(String, Vec<u8>)> =
        d.headers.iter().filter(|(k, _)| k != headers::REPLAY_OF).cloned().collect();
    headers.push((headers::REPLAY_OF.to_owned(), letter.id.to_string().into_bytes()));
    Ok((d.source_topic.clone(), Record { key: d.key.clone(), value: d.value.clone(), headers }))
}

#[cfg(test)]
#[path = "dead_letters_format_tests.rs"]
mod tests;
