//! The report every caller sees: the JSON the API serves and `openqq validate --format json` prints.

use serde::{Deserialize, Serialize};

/// Overall verdict: `fail` exactly when there is at least one error finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// Severity, ordered so that sorting puts errors first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// Where a finding points. Every field is optional; absent ones are omitted from JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cell: Option<String>,
}

/// One thing the validator noticed. `code` is part of the client contract: never rename one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    pub code: String,
    pub message: String,
    pub location: Location,
}

impl Finding {
    pub fn error(code: &str, message: impl Into<String>, location: Location) -> Self {
        Self { severity: Severity::Error, code: code.to_owned(), message: message.into(), location }
    }
    pub fn warning(code: &str, message: impl Into<String>, location: Location) -> Self {
        Self { severity: Severity::Warning, code: code.to_owned(), message: message.into(), location }
    }
}

/// Resource use after packing, named as nextpnr-ice40 names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Utilization {
    pub resource: String,
    pub used: u32,
    pub available: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub verdict: Verdict,
    pub utilization: Vec<Utilization>,
    pub findings: Vec<Finding>,
}

impl Report {
    /// Builds a report: sorts findings by severity (stable, so checks keep their order) and
    /// derives the verdict from them.
    pub fn new(utilization: Vec<Utilization>, mut findings: Vec<Finding>) -> Self {
        findings.sort_by_key(|f| f.severity);
        let verdict = if findings.iter().any(|f| f.severity == Severity::Error) { Verdict::Fail } else { Verdict::Pass };
        Self { verdict, utilization, findings }
    }

    pub fn has_errors(&self) -> bool {
        self.verdict == Verdict::Fail
    }
}
