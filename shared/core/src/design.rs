//! Designs: what a tenant submits, the status state machine, and what the store keeps.

use crate::event::TimelineEntry;
use crate::ids::DesignId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Longest design name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// The device a design targets, named as nextpnr names it (`hx8k`, package `ct256`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub device: String,
    pub package: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConstraintFormat {
    Pcf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    pub format: ConstraintFormat,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    #[serde(default)]
    pub allow_unconstrained: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<String>,
}

/// One revision of a design, as submitted. The netlist stays raw JSON from the request to the
/// validator: it is checked to be an object, never rebuilt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesignSpec {
    /// Required on the first submission; a revision without one keeps the design's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub target: Target,
    pub netlist: Box<RawValue>,
    pub constraints: Constraints,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitstream_base64: Option<String>,
    #[serde(default)]
    pub options: Options,
}

/// A field that failed validation, named as a JSON pointer-ish path (`target.device`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

fn field_error(field: &str, message: impl Into<String>) -> FieldError {
    FieldError { field: field.to_owned(), message: message.into() }
}

impl DesignSpec {
    /// Checks what the schema cannot: lengths, emptiness, the netlist being an object.
    pub fn check(&self) -> Result<(), FieldError> {
        if let Some(name) = &self.name {
            if name.trim().is_empty() {
                return Err(field_error("name", "must not be empty"));
            }
            if name.chars().count() > MAX_NAME_CHARS {
                return Err(field_error("name", format!("must be at most {MAX_NAME_CHARS} characters")));
            }
        }
        for (field, value) in [("target.device", &self.target.device), ("target.package", &self.target.package)] {
            if value.is_empty() || value.len() > 32 || !value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(field_error(field, "must be 1 to 32 letters, digits or '-'"));
            }
        }
        if !self.netlist.get().trim_start().starts_with('{') {
            return Err(field_error("netlist", "must be a Yosys JSON object (yosys `write_json`)"));
        }
        if let Some(b) = &self.bitstream_base64 {
            use_base64_alphabet(b).map_err(|m| field_error("bitstream_base64", m))?;
        }
        if let Some(top) = &self.options.top {
            if top.is_empty() || top.chars().count() > 256 {
                return Err(field_error("options.top", "must be 1 to 256 characters"));
            }
        }
        Ok(())
    }
}

fn use_base64_alphabet(s: &str) -> Result<(), &'static str> {
    let ok = s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if ok && s.len().is_multiple_of(4) {
        Ok(())
    } else {
        Err("must be standard base64 with padding")
    }
}

/// `submitted → validating → ready | failed`. `ready` means results are available, whatever the
/// verdict; `failed` means the platform could not produce them (the record was dead-lettered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DesignStatus {
    Submitted,
    Validating,
    Ready,
    Failed,
}

impl DesignStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DesignStatus::Submitted => "submitted",
            DesignStatus::Validating => "validating",
            DesignStatus::Ready => "ready",
            DesignStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Submitted, Self::Validating, Self::Ready, Self::Failed].into_iter().find(|v| v.as_str() == s)
    }

    /// Whether a design at this status (same revision) may move to `next`. Within one revision
    /// status only moves forward; a new revision restarts at `submitted`.
    pub fn may_become(self, next: DesignStatus) -> bool {
        use DesignStatus::*;
        matches!((self, next), (Submitted, Validating) | (Submitted | Validating, Ready | Failed))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pass" => Some(Verdict::Pass),
            "fail" => Some(Verdict::Fail),
            _ => None,
        }
    }
}

/// What applying an event does to a design, besides adding its timeline entry. The store applies
/// the entry and the change in one atomic, revision-conditional write.
#[derive(Debug, Clone)]
pub enum Change {
    /// A new revision: revision (and name, if given) recorded, status back to `submitted`.
    Submitted { name: Option<String> },
    /// Validation of this revision began.
    ValidationStarted,
    /// The validator's report for this revision.
    ValidationFinished { verdict: Verdict, report: Box<RawValue> },
    /// Results materialised: the design's revision is done.
    ResultsReady { verdict: Verdict },
    /// The platform gave up on this revision.
    Failed { reason: String },
}

impl Change {
    /// The status this change moves the design to, if the design is still at this revision.
    pub fn status(&self) -> Option<DesignStatus> {
        match self {
            Change::Submitted { .. } => Some(DesignStatus::Submitted),
            Change::ValidationStarted => Some(DesignStatus::Validating),
            Change::ValidationFinished { .. } => None,
            Change::ResultsReady { .. } => Some(DesignStatus::Ready),
            Change::Failed { .. } => Some(DesignStatus::Failed),
        }
    }
}

/// A design as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignView {
    pub design_id: DesignId,
    pub name: String,
    pub revision: u64,
    pub status: DesignStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    pub updated_at: DateTime<Utc>,
    /// Why the platform gave up on this revision; only with status `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
}

/// A stored validation report for one revision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredReport {
    pub revision: u64,
    pub verdict: Verdict,
    pub report: Box<RawValue>,
}

/// A design's timeline, oldest first.
pub type Timeline = Vec<TimelineEntry>;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Result<DesignSpec, serde_json::Error> {
        serde_json::from_value(json)
    }

    fn good() -> serde_json::Value {
        serde_json::json!({
            "name": "blinky", "target": {"device": "hx8k", "package": "ct256"},
            "netlist": {"modules": {}}, "constraints": {"format": "pcf", "text": ""}
        })
    }

    #[test]
    fn a_complete_spec_passes_its_checks() {
        assert_eq!(spec(good()).unwrap().check(), Ok(()));
    }

    #[test]
    fn each_bad_field_is_named_in_the_error() {
        let mut j = good();
        j["name"] = " ".into();
        assert_eq!(spec(j).unwrap().check().unwrap_err().field, "name");
        let mut j = good();
        j["target"]["device"] = "hx8k; rm".into();
        assert_eq!(spec(j).unwrap().check().unwrap_err().field, "target.device");
        let mut j = good();
        j["netlist"] = serde_json::json!([1]);
        assert_eq!(spec(j).unwrap().check().unwrap_err().field, "netlist");
        let mut j = good();
        j["bitstream_base64"] = "!!".into();
        assert_eq!(spec(j).unwrap().check().unwrap_err().field, "bitstream_base64");
        let mut j = good();
        j["constraints"]["format"] = "xdc".into();
        assert!(spec(j).is_err());
    }

    #[test]
    fn the_top_module_is_limited_in_characters_as_its_message_and_the_api_contract_say() {
        let mut j = good();
        j["options"] = serde_json::json!({"top": "\u{e9}".repeat(256)});
        assert_eq!(spec(j).unwrap().check(), Ok(()), "256 characters of two bytes each");
        let mut j = good();
        j["options"] = serde_json::json!({"top": "t".repeat(257)});
        assert_eq!(spec(j).unwrap().check().unwrap_err().field, "options.top");
    }

    #[test]
    fn status_only_moves_forward_within_a_revision() {
        use DesignStatus::*;
        assert!(Submitted.may_become(Validating));
        assert!(Validating.may_become(Ready));
        assert!(Submitted.may_become(Failed));
        assert!(!Ready.may_become(Validating));
        assert!(!Validating.may_become(Submitted));
        assert!(!Ready.may_become(Ready));
    }
}
