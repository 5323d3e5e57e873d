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
        let verdict =
            if findings.iter().any(|f| f.severity == Severity::Error) { Verdict::Fail } else { Verdict::Pass };
        Self { verdict, utilization, findings }
    }

    pub fn has_errors(&self) -> bool {
        self.verdict == Verdict::Fail
    }

    /// The human format `openqq validate` prints: a utilisation table, then one line per finding.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        if !self.utilization.is_empty() {
            let width = self.utilization.iter().map(|u| u.resource.len()).max().unwrap_or(8).max(8);
            let _ = writeln!(out, "{:<width$}  {:>6} / {:<6}  use", "resource", "used", "avail");
            for u in &self.utilization {
                let pct = if u.available == 0 {
                    "n/a".to_owned()
                } else {
                    format!("{}%", u64::from(u.used) * 100 / u64::from(u.available))
                };
                let _ = writeln!(out, "{:<width$}  {:>6} / {:<6}  {pct}", u.resource, u.used, u.available);
            }
            out.push('\n');
        }
        for f in &self.findings {
            let sev = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "info",
            };
            let l = &f.location;
            let mut place: Vec<String> = Vec::new();
            if let Some(file) = &l.file {
                place.push(match l.line {
                    Some(n) => format!("{file}:{n}"),
                    None => file.clone(),
                });
            } else if let Some(n) = l.line {
                place.push(format!("line {n}"));
            }
            for (k, v) in [("port", &l.port), ("pin", &l.pin), ("cell", &l.cell)] {
                if let Some(v) = v {
                    place.push(format!("{k} {v}"));
                }
            }
            let place = if place.is_empty() { String::new() } else { format!(" ({})", place.join(", ")) };
            let _ = writeln!(out, "{sev}[{}]{place}: {}", f.code, f.message);
        }
        let errors = self.findings.iter().filter(|f| f.severity == Severity::Error).count();
        let warnings = self.findings.iter().filter(|f| f.severity == Severity::Warning).count();
        let verdict = if self.has_errors() { "FAIL" } else { "PASS" };
        let _ = writeln!(out, "{verdict}: {errors} error(s), {warnings} warning(s)");
        out
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn the_text_report_shows_the_table_findings_and_verdict() {
        let r = Report::new(
            vec![Utilization { resource: "ICESTORM_LC".into(), used: 30, available: 384 }],
            vec![Finding::warning(
                "CELL_TYPE_UNKNOWN",
                "odd cell",
                Location { cell: Some("m".into()), ..Location::default() },
            )],
        );
        let text = r.to_text();
        assert!(text.contains("ICESTORM_LC"), "{text}");
        assert!(text.contains("30 / 384"), "{text}");
        assert!(text.contains("warning[CELL_TYPE_UNKNOWN] (cell m): odd cell"), "{text}");
        assert!(text.ends_with("PASS: 0 error(s), 1 warning(s)\n"), "{text}");
    }
}
