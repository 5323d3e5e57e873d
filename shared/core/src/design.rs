//! Designs: what a tenant submits, the status state machine, and what the store keeps.

use crate::event::TimelineEntry;
use crate::ids::DesignId;
use crate::object::{ObjectRef, MAX_OBJECT_BYTES};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Longest design name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// The device a design targets: an iCE40 part as nextpnr names it (`hx8k`, package `ct256`) or
/// an ECP5 part as Lattice does (`LFE5U-25F`, package `CABGA256`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub device: String,
    pub package: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConstraintFormat {
    /// iCE40 physical constraints (`set_io`).
    Pcf,
    /// ECP5 Lattice preferences (`LOCATE COMP`, `IOBUF PORT`, `FREQUENCY`).
    Lpf,
}

impl ConstraintFormat {
    /// The name the API gives the format (`pcf`, `lpf`).
    pub fn name(self) -> &'static str {
        match self {
            ConstraintFormat::Pcf => "pcf",
            ConstraintFormat::Lpf => "lpf",
        }
    }
}

/// The constraints file. Its text travels inline, or, once over [`INLINE_PAYLOAD_MAX_BYTES`], as
/// `text_ref` to an object of the tenant (then `text` is empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    pub format: ConstraintFormat,
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_ref: Option<ObjectRef>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    #[serde(default)]
    pub allow_unconstrained: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<String>,
}

/// Largest payload (netlist, constraints text, bitstream) a record carries inline, in bytes as
/// encoded in the record. A larger one is stored once in the object store, keyed by its tenant
/// and SHA-256, and the record carries its [`ObjectRef`] instead. With the three payloads at
/// most this size and the other fields bounded (name, top module, target), every record of a
/// design stays under [`MAX_DESIGN_RECORD_BYTES`], far inside what a Lambda batch (6 MB) or an
/// MSK record (1 MB by default) takes.
pub const INLINE_PAYLOAD_MAX_BYTES: usize = 16 * 1024;

/// What every record about a design stays under once its payloads are by reference.
pub const MAX_DESIGN_RECORD_BYTES: usize = 64 * 1024;

/// The payloads of a specification that may travel by reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `netlist` ↔ `netlist_ref`: the netlist's JSON text, byte for byte as submitted.
    Netlist,
    /// `constraints.text` ↔ `constraints.text_ref`: the constraints file's UTF-8 text.
    Constraints,
    /// `bitstream_base64` ↔ `bitstream_ref`: the bitstream's bytes (decoded, not base64).
    Bitstream,
}

impl Payload {
    /// The field a client or a finding names it by.
    pub fn field(self) -> &'static str {
        match self {
            Payload::Netlist => "netlist",
            Payload::Constraints => "constraints.text",
            Payload::Bitstream => "bitstream_base64",
        }
    }
}

/// One revision of a design, as submitted. The netlist stays raw JSON from the request to the
/// validator: it is checked to be an object, never rebuilt.
///
/// Each large payload is either inline or a reference (`netlist` or `netlist_ref`, and so on):
/// records written before references existed have every payload inline and still read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesignSpec {
    /// Required on the first submission; a revision without one keeps the design's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub target: Target,
    /// The netlist inline, exactly as the client sent it; absent when `netlist_ref` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netlist: Option<Box<RawValue>>,
    /// The netlist as an object of the tenant (its JSON text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netlist_ref: Option<ObjectRef>,
    pub constraints: Constraints,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitstream_base64: Option<String>,
    /// The bitstream as an object of the tenant (its bytes, not base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitstream_ref: Option<ObjectRef>,
    #[serde(default)]
    pub options: Options,
    /// The design as HDL source instead of a netlist: synthesised with Yosys for the target's
    /// family into the netlist that is then validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::hdl::Source>,
    /// Testbenches run against `source` with Icarus Verilog; each reported on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<crate::hdl::Testbench>,
    /// A design `source` must be equivalent to, proven with Yosys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<crate::hdl::Source>,
    /// The design to be written by a model from a prompt, instead of a netlist or source; the
    /// generated source then goes through `tests` and `reference` as given source does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<crate::hdl::Generate>,
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
        self.check_hdl()?;
        match (&self.netlist, &self.netlist_ref) {
            (Some(_), Some(_)) => {
                return Err(field_error("netlist_ref", "give either netlist or netlist_ref, not both"))
            }
            (Some(_), None) | (None, Some(_)) if self.source.is_some() => {
                return Err(field_error("source", "give either a netlist or source, not both"))
            }
            (Some(_), None) | (None, Some(_)) if self.generate.is_some() => {
                return Err(field_error("generate", "give either a netlist or generate, not both"))
            }
            (None, None) if self.source.is_some() || self.generate.is_some() => {}
            (None, None) => return Err(field_error("netlist", "is required (or netlist_ref to an upload, or source)")),
            (Some(netlist), None) if !netlist.get().trim_start().starts_with('{') => {
                return Err(field_error("netlist", "must be a Yosys JSON object (yosys `write_json`)"));
            }
            _ => {}
        }
        if let Some(b) = &self.bitstream_base64 {
            if self.bitstream_ref.is_some() {
                return Err(field_error("bitstream_ref", "give either bitstream_base64 or bitstream_ref, not both"));
            }
            use_base64_alphabet(b).map_err(|m| field_error("bitstream_base64", m))?;
        }
        if self.constraints.text_ref.is_some() && !self.constraints.text.is_empty() {
            return Err(field_error("constraints.text_ref", "give either text or text_ref, not both"));
        }
        for (field, object) in [
            ("netlist_ref", &self.netlist_ref),
            ("bitstream_ref", &self.bitstream_ref),
            ("constraints.text_ref", &self.constraints.text_ref),
        ] {
            if let Some(object) = object {
                check_ref(object).map_err(|e| field_error(field, e.to_string()))?;
            }
        }
        if let Some(top) = &self.options.top {
            if top.is_empty() || top.chars().count() > 256 {
                return Err(field_error("options.top", "must be 1 to 256 characters"));
            }
        }
        Ok(())
    }
}

impl DesignSpec {
    /// The HDL parts: each set well formed, testbenches and a reference only with source, and all
    /// of it within [`crate::hdl::MAX_HDL_BYTES`].
    fn check_hdl(&self) -> Result<(), FieldError> {
        use crate::hdl::{check_set, MAX_HDL_BYTES, MAX_TESTS};
        let to_field = |(field, message): (String, String)| FieldError { field, message };
        if let Some(generate) = &self.generate {
            if self.source.is_some() {
                return Err(field_error("generate", "give either source or generate, not both"));
            }
            generate.check().map_err(to_field)?;
        }
        if self.source.is_none() && self.generate.is_none() {
            if !self.tests.is_empty() {
                return Err(field_error("tests", "testbenches need the design as source (or generate)"));
            }
            if self.reference.is_some() {
                return Err(field_error("reference", "an equivalence check needs the design as source (or generate)"));
            }
            return Ok(());
        }
        if self.tests.len() > MAX_TESTS {
            return Err(field_error("tests", format!("at most {MAX_TESTS} testbenches")));
        }
        let mut bytes = 0;
        if let Some(source) = &self.source {
            bytes += check_set("source", &source.files, &source.top).map_err(to_field)?;
        }
        for (i, test) in self.tests.iter().enumerate() {
            if test.name.trim().is_empty() || test.name.chars().count() > MAX_NAME_CHARS {
                return Err(field_error(
                    &format!("tests[{i}].name"),
                    format!("must be 1 to {MAX_NAME_CHARS} characters"),
                ));
            }
            bytes += check_set(&format!("tests[{i}]"), &test.files, &test.top).map_err(to_field)?;
        }
        if let Some(reference) = &self.reference {
            bytes += check_set("reference", &reference.files, &reference.top).map_err(to_field)?;
        }
        if bytes > MAX_HDL_BYTES {
            return Err(field_error(
                "source",
                format!("the HDL files hold {bytes} bytes together; at most {MAX_HDL_BYTES} are accepted"),
            ));
        }
        Ok(())
    }

    /// The inline payloads over `threshold` bytes as encoded in a record (see
    /// [`INLINE_PAYLOAD_MAX_BYTES`]), which must go to the object store before the specification
    /// is published.
    pub fn outsized(&self, threshold: usize) -> Vec<Payload> {
        let mut out = Vec::new();
        if self.netlist.as_ref().is_some_and(|n| n.get().len() > threshold) {
            out.push(Payload::Netlist);
        }
        if json_string_len(&self.constraints.text) > threshold {
            out.push(Payload::Constraints);
        }
        if self.bitstream_base64.as_deref().is_some_and(|b| json_string_len(b) > threshold) {
            out.push(Payload::Bitstream);
        }
        out
    }

    /// Replaces the inline `payload` with `object`, where it is now stored.
    pub fn refer(&mut self, payload: Payload, object: ObjectRef) {
        match payload {
            Payload::Netlist => {
                self.netlist = None;
                self.netlist_ref = Some(object);
            }
            Payload::Constraints => {
                self.constraints.text = String::new();
                self.constraints.text_ref = Some(object);
            }
            Payload::Bitstream => {
                self.bitstream_base64 = None;
                self.bitstream_ref = Some(object);
            }
        }
    }

    /// Every payload this specification holds by reference.
    pub fn references(&self) -> Vec<(Payload, &ObjectRef)> {
        [
            (Payload::Netlist, self.netlist_ref.as_ref()),
            (Payload::Constraints, self.constraints.text_ref.as_ref()),
            (Payload::Bitstream, self.bitstream_ref.as_ref()),
        ]
        .into_iter()
        .filter_map(|(p, r)| r.map(|r| (p, r)))
        .collect()
    }
}

/// The length of `s` once written as a JSON string, quotes included (as `serde_json` escapes it).
pub fn json_string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// Why a client's reference to a stored object is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ObjectRefError {
    #[error("digest must be a SHA-256 in lower-case hex (64 characters)")]
    Digest,
    #[error("bytes must be between 1 and {max}", max = MAX_OBJECT_BYTES)]
    Bytes,
}

/// A reference a client may give: a well-formed digest and a length the object store takes.
fn check_ref(object: &ObjectRef) -> Result<(), ObjectRefError> {
    if !ObjectRef::well_formed(&object.digest) {
        return Err(ObjectRefError::Digest);
    }
    if object.bytes == 0 || object.bytes > MAX_OBJECT_BYTES as u64 {
        return Err(ObjectRefError::Bytes);
    }
    Ok(())
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
    /// status only moves forward; a new revision restarts at `submitted`. `ready` and `failed`
    /// are final here; the one way out of `failed` at the same revision is a replay of the
    /// dead-lettered record that failed it ([`crate::revision::plan_replay`]).
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
    /// A step of the HDL checks began (no verdict) or ended (its verdict, and how long it took);
    /// the status does not move (a revision given as source stays `submitted` until its netlist's
    /// validation starts).
    Checked { verdict: Option<Verdict>, elapsed_ms: Option<u64> },
}

impl Change {
    /// The status this change moves the design to, if the design is still at this revision.
    pub fn status(&self) -> Option<DesignStatus> {
        match self {
            Change::Submitted { .. } => Some(DesignStatus::Submitted),
            Change::ValidationStarted => Some(DesignStatus::Validating),
            Change::ValidationFinished { .. } | Change::Checked { .. } => None,
            Change::ResultsReady { .. } => Some(DesignStatus::Ready),
            Change::Failed { .. } => Some(DesignStatus::Failed),
        }
    }

    /// The status a replayed record's change revives its revision to, when dead-lettering had
    /// failed it: where the change moves a revision that never failed (a report means validation
    /// started). `None` for a failure, which revives nothing. Only
    /// [`crate::revision::plan_replay`] moves a status out of `failed`; `may_become` never does.
    pub fn revives_to(&self) -> Option<DesignStatus> {
        match self {
            Change::Submitted { .. } | Change::Checked { .. } => Some(DesignStatus::Submitted),
            Change::ValidationStarted | Change::ValidationFinished { .. } => Some(DesignStatus::Validating),
            Change::ResultsReady { .. } => Some(DesignStatus::Ready),
            Change::Failed { .. } => None,
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

    fn digest() -> String {
        "ab".repeat(32)
    }

    #[test]
    fn a_netlist_is_given_inline_or_by_reference_exactly_once() {
        let mut j = good();
        j.as_object_mut().unwrap().remove("netlist");
        assert_eq!(spec(j.clone()).unwrap().check().unwrap_err().field, "netlist", "neither");
        j["netlist_ref"] = serde_json::json!({"digest": digest(), "bytes": 10});
        assert_eq!(spec(j.clone()).unwrap().check(), Ok(()));
        j["netlist"] = serde_json::json!({"modules": {}});
        assert_eq!(spec(j.clone()).unwrap().check().unwrap_err().field, "netlist_ref", "both");
        let mut j = good();
        j.as_object_mut().unwrap().remove("netlist");
        j["netlist_ref"] = serde_json::json!({"digest": "AB".repeat(32), "bytes": 10});
        assert_eq!(spec(j.clone()).unwrap().check().unwrap_err().field, "netlist_ref", "upper-case digest");
        j["netlist_ref"] = serde_json::json!({"digest": digest(), "bytes": MAX_OBJECT_BYTES + 1});
        assert_eq!(spec(j).unwrap().check().unwrap_err().field, "netlist_ref", "over the object limit");
    }

    #[test]
    fn a_record_written_before_references_reads_with_its_payloads_inline() {
        let old = spec(good()).unwrap();
        assert_eq!(old.netlist.as_ref().map(|n| n.get()), Some(r#"{"modules":{}}"#));
        assert!(old.references().is_empty());
        let written = serde_json::to_value(&old).unwrap();
        assert!(written.get("netlist_ref").is_none() && written["constraints"].get("text_ref").is_none());
    }

    #[test]
    fn only_payloads_over_the_threshold_are_outsized_measured_as_encoded() {
        let mut j = good();
        let cells: String = (0..2000).map(|i| format!(r#""c{i}": {{}},"#)).collect();
        j["netlist"] = serde_json::from_str(&format!(r#"{{"modules": {{{}}}}}"#, cells.trim_end_matches(','))).unwrap();
        // 3,000 newlines are 6,000 bytes once escaped; 6,000 control bytes are 36,000.
        j["constraints"]["text"] = "\n".repeat(3000).into();
        j["bitstream_base64"] = "AAAA".repeat(10).into();
        let s = spec(j.clone()).unwrap();
        assert!(s.netlist.as_ref().unwrap().get().len() > INLINE_PAYLOAD_MAX_BYTES);
        assert_eq!(s.outsized(INLINE_PAYLOAD_MAX_BYTES), vec![Payload::Netlist]);
        j["constraints"]["text"] = "\u{1}".repeat(3000).into();
        j["bitstream_base64"] = "AAAA".repeat(INLINE_PAYLOAD_MAX_BYTES / 4).into();
        let s = spec(j).unwrap();
        assert_eq!(
            s.outsized(INLINE_PAYLOAD_MAX_BYTES),
            vec![Payload::Netlist, Payload::Constraints, Payload::Bitstream]
        );
        assert_eq!(spec(good()).unwrap().outsized(INLINE_PAYLOAD_MAX_BYTES), vec![]);
    }

    #[test]
    fn referring_replaces_each_payload_with_its_reference_and_the_spec_stays_valid() {
        let mut j = good();
        j["bitstream_base64"] = "AAAA".into();
        j["constraints"]["text"] = "set_io led A1".into();
        let mut s = spec(j).unwrap();
        for p in [Payload::Netlist, Payload::Constraints, Payload::Bitstream] {
            s.refer(p, ObjectRef { digest: digest(), bytes: 7 });
        }
        assert_eq!(s.check(), Ok(()));
        assert!(s.netlist.is_none() && s.bitstream_base64.is_none() && s.constraints.text.is_empty());
        let kinds: Vec<Payload> = s.references().into_iter().map(|(p, _)| p).collect();
        assert_eq!(kinds, [Payload::Netlist, Payload::Constraints, Payload::Bitstream]);
        let back: DesignSpec = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back.netlist_ref, s.netlist_ref);
        assert_eq!(back.constraints.text_ref, s.constraints.text_ref);
    }

    #[test]
    fn json_string_length_counts_escapes_as_serde_json_writes_them() {
        for s in ["", "plain", "quote \" and \\ slash", "\n\r\t\u{8}\u{c}", "\u{1}\u{1f}", "é€😀", "\u{7f}"] {
            assert_eq!(json_string_len(s), serde_json::to_string(s).unwrap().len(), "{s:?}");
        }
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
