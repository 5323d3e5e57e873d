//! The report every caller sees: the JSON the API serves and `openqq validate --format json` prints.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most findings a capped report keeps ([`Report::capped`]). One finding per unconstrained
/// bit of a wide port is normal output, so a hostile netlist can ask for tens of thousands; a
/// client needs the first few hundred to act, and the truncation summary counts the rest by code.
pub const MAX_REPORT_FINDINGS: usize = 500;

/// Upper bound on the JSON of any capped report, whatever the input: a quarter of the event
/// log's 1 MiB record limit, leaving room for the envelope it travels in and for a base64 copy
/// (×4/3) of that envelope.
pub const MAX_CAPPED_REPORT_JSON_BYTES: usize = 256 * 1024;

/// Budget for the findings array of a capped report; the rest of
/// [`MAX_CAPPED_REPORT_JSON_BYTES`] covers the verdict, utilisation rows and the summary.
const FINDINGS_JSON_BUDGET: usize = 224 * 1024;
/// Each finding's message, once JSON-escaped, is clipped to this many bytes.
const MAX_MESSAGE_JSON_BYTES: usize = 512;
/// Each location text (file, port, pin, cell), codes and resource names, once JSON-escaped.
const MAX_NAME_JSON_BYTES: usize = 128;
/// Utilisation rows are one per device resource (about ten); more can only come from a forged report.
const MAX_UTILIZATION_ROWS: usize = 32;
/// Distinct codes named in the truncation summary; findings with further codes count in `other_codes`.
const MAX_SUMMARY_CODES: usize = 64;
/// Names from the input (ports, nets, cells) are shortened to this many bytes where a finding
/// quotes them, so that many findings about one long name cost no more than short ones.
const MAX_QUOTED_NAME_BYTES: usize = 128;
/// Appended to a clipped text.
const ELLIPSIS: &str = "…";

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
    /// Present only on a capped report that left something out: what was cut, so a client knows
    /// the findings it sees are not all of them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub truncated: Option<Truncation>,
}

/// What [`Report::capped`] left out. Serialised as `"truncated"` in the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Findings in the full report.
    pub findings_total: usize,
    /// Findings kept (the first ones, errors before warnings).
    pub findings_kept: usize,
    /// Findings left out, counted by code.
    pub by_code: BTreeMap<String, usize>,
    /// Findings left out whose codes did not fit in `by_code` (only a forged report has that many codes).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub other_codes: usize,
    /// Kept findings whose message or location texts were clipped (ending in `…`).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub texts_clipped: usize,
    /// Utilisation rows left out.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub utilization_dropped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Report {
    /// Builds a report: sorts findings by severity (stable, so checks keep their order) and
    /// derives the verdict from them.
    pub fn new(utilization: Vec<Utilization>, mut findings: Vec<Finding>) -> Self {
        findings.sort_by_key(|f| f.severity);
        let verdict =
            if findings.iter().any(|f| f.severity == Severity::Error) { Verdict::Fail } else { Verdict::Pass };
        Self { verdict, utilization, findings, truncated: None }
    }

    /// The report cut to fit any record: errors before warnings, at most `max_findings` findings
    /// (and fewer if their JSON would pass the byte budget), each text clipped, and a
    /// [`Truncation`] summary when anything was cut. The verdict is the full report's. Its JSON is
    /// never longer than [`MAX_CAPPED_REPORT_JSON_BYTES`]. Returns whether anything was cut.
    pub fn capped(self, max_findings: usize) -> (Report, bool) {
        let Report { verdict, mut utilization, mut findings, truncated: _ } = self;
        findings.sort_by_key(|f| f.severity);
        let findings_total = findings.len();
        let mut summary = Truncation { findings_total, ..Truncation::default() };

        summary.utilization_dropped = utilization.len().saturating_sub(MAX_UTILIZATION_ROWS);
        utilization.truncate(MAX_UTILIZATION_ROWS);
        for u in &mut utilization {
            summary.texts_clipped += usize::from(clip(&mut u.resource, MAX_NAME_JSON_BYTES));
        }

        let mut kept = Vec::with_capacity(findings_total.min(max_findings));
        let mut budget = FINDINGS_JSON_BUDGET;
        let mut dropped = findings.into_iter();
        for mut f in dropped.by_ref() {
            if kept.len() == max_findings {
                count_dropped(&mut summary, f.code);
                break;
            }
            let clipped = clip_finding(&mut f);
            // One byte for the separating comma.
            let size = serde_json::to_vec(&f).map_or(usize::MAX, |v| v.len()).saturating_add(1);
            if size > budget {
                count_dropped(&mut summary, f.code);
                break;
            }
            budget -= size;
            summary.texts_clipped += usize::from(clipped);
            kept.push(f);
        }
        for f in dropped {
            count_dropped(&mut summary, f.code);
        }
        summary.findings_kept = kept.len();

        let cut =
            summary.findings_kept < findings_total || summary.texts_clipped > 0 || summary.utilization_dropped > 0;
        let truncated = cut.then_some(summary);
        (Report { verdict, utilization, findings: kept, truncated }, cut)
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

fn count_dropped(summary: &mut Truncation, mut code: String) {
    clip(&mut code, MAX_NAME_JSON_BYTES);
    if let Some(n) = summary.by_code.get_mut(&code) {
        *n += 1;
    } else if summary.by_code.len() < MAX_SUMMARY_CODES {
        summary.by_code.insert(code, 1);
    } else {
        summary.other_codes += 1;
    }
}

/// Clips every text of a finding; true when any was clipped.
fn clip_finding(f: &mut Finding) -> bool {
    let l = &mut f.location;
    let mut clipped = clip(&mut f.code, MAX_NAME_JSON_BYTES);
    clipped |= clip(&mut f.message, MAX_MESSAGE_JSON_BYTES);
    for text in [&mut l.file, &mut l.port, &mut l.pin, &mut l.cell].into_iter().flatten() {
        clipped |= clip(text, MAX_NAME_JSON_BYTES);
    }
    clipped
}

/// A name as findings quote it: whole when short, else its first bytes and `…`.
pub(crate) fn short_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_QUOTED_NAME_BYTES {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut end = MAX_QUOTED_NAME_BYTES - ELLIPSIS.len();
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{ELLIPSIS}", &name[..end]))
}

/// Bytes `c` takes inside a JSON string as serde_json writes it (at most; control characters
/// other than the short escapes take six).
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' => 2,
        '\u{0}'..='\u{1f}' => 6,
        _ => c.len_utf8(),
    }
}

/// Clips `text` so that its JSON-escaped form (without quotes) is at most `max` bytes, ending a
/// clipped text with `…`. True when it was clipped.
pub(crate) fn clip(text: &mut String, max: usize) -> bool {
    let mut len = 0;
    let mut keep = None;
    for (i, c) in text.char_indices() {
        if keep.is_none() && len + json_len(c) + ELLIPSIS.len() > max {
            keep = Some(i);
        }
        len += json_len(c);
        if len > max {
            text.truncate(keep.unwrap_or(0));
            text.push_str(ELLIPSIS);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod cap_tests;

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
