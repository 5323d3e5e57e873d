//! Findings: the tools' errors and warnings as `{severity, file, line, message}`, parsed from their
//! output by pure functions (no tool needed to test them), then bounded for a report.

use serde::{Deserialize, Serialize};

/// How bad a finding is; errors sort first. The validator's severity: a design's report speaks
/// of one kind of severity whether a tool or the validator found it.
pub use openqq_fpga::Severity;

/// One message from a tool, located in a submitted file when the tool said where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    /// A submitted file's name; absent when the tool named none (or named a file of its own).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u32>,
    /// The tool's message, without the location and severity prefix, clipped.
    pub message: String,
}

/// Appended to clipped text.
const ELLIPSIS: &str = "…";

/// `text` cut to at most `max` bytes on a character boundary, ending in `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(ELLIPSIS.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &text[..end])
}

/// At most `max_findings` findings, errors first (then by file and line), repeats dropped,
/// messages clipped to `max_message_bytes`; and how many were left out.
pub fn bound(mut findings: Vec<Finding>, max_findings: usize, max_message_bytes: usize) -> (Vec<Finding>, usize) {
    for finding in &mut findings {
        finding.message = clip(&finding.message, max_message_bytes);
    }
    findings.sort();
    findings.dedup();
    let omitted = findings.len().saturating_sub(max_findings);
    findings.truncate(max_findings);
    (findings, omitted)
}

/// Splits `FILE:LINE: REST` where FILE is one of `files` (a submitted file; the tools' own
/// library files are not the tenant's to fix). A path before the name (`dir/a.v`) is dropped.
fn located<'a>(line: &'a str, files: &[&str]) -> Option<(String, u32, &'a str)> {
    let mut search = 0;
    while let Some(colon) = line[search..].find(':').map(|i| i + search) {
        let file = line[..colon].rsplit('/').next().unwrap_or("");
        let rest = &line[colon + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && files.contains(&file) {
            if let (Ok(number), Some(after)) = (rest[..digits].parse(), rest[digits..].strip_prefix(':')) {
                return Some((file.to_string(), number, after.trim_start()));
            }
        }
        search = colon + 1;
        if search >= line.len() {
            break;
        }
    }
    None
}

/// A location named inside a message (`… at tb.v:3.10-3.15.`), as Yosys words many warnings.
fn mentioned(message: &str, files: &[&str]) -> Option<(String, u32)> {
    for file in files {
        let pattern = format!("{file}:");
        let mut from = 0;
        while let Some(at) = message[from..].find(&pattern).map(|i| i + from) {
            let before_ok = at == 0 || !is_name_byte(message.as_bytes()[at - 1]);
            let rest = &message[at + pattern.len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if before_ok && digits > 0 {
                if let Ok(line) = rest[..digits].parse() {
                    return Some((file.to_string(), line));
                }
            }
            from = at + pattern.len();
        }
    }
    None
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Yosys's errors and warnings: `a.v:12: ERROR: …`, `a.v:3: Warning: …`, `ERROR: …` and
/// `Warning: …` (with a location taken from the message when it names a submitted file).
pub fn parse_yosys_log(log: &str, files: &[&str]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for line in log.lines() {
        let (file, number, rest) = match located(line, files) {
            Some((file, number, rest)) => (Some(file), Some(number), rest),
            // Not a submitted file (Yosys's own library): keep the message, without the place.
            None => match line.find(": ERROR:").or_else(|| line.find(": Warning:")) {
                Some(at) => (None, None, &line[at + 2..]),
                None => (None, None, line.trim_start()),
            },
        };
        let (severity, message) = if let Some(m) = rest.strip_prefix("ERROR:") {
            (Severity::Error, m.trim())
        } else if let Some(m) = rest.strip_prefix("Warning:") {
            (Severity::Warning, m.trim())
        } else {
            continue;
        };
        let (file, number) = match (file, number) {
            (Some(file), Some(number)) => (Some(file), Some(number)),
            _ => mentioned(message, files).map_or((None, None), |(f, n)| (Some(f), Some(n))),
        };
        findings.push(Finding { severity, file, line: number, message: message.to_string() });
    }
    findings
}

/// Icarus Verilog's compile messages: `a.v:12: error: …`, `a.v:12: syntax error`,
/// `a.v:3: warning: …`, `a.v:3: sorry: …` (unsupported, an error), continuation notes
/// (`a.v:3:      : It was declared here …`) and unlocated `error: …` lines.
pub fn parse_iverilog_log(log: &str, files: &[&str]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for line in log.lines() {
        let Some((file, number, rest)) = located(line, files) else {
            if let Some(m) = line.trim_start().strip_prefix("error:") {
                findings.push(Finding { severity: Severity::Error, file: None, line: None, message: m.trim().into() });
            }
            continue;
        };
        let (severity, message) = if let Some(m) = rest.strip_prefix("error:") {
            (Severity::Error, m.trim())
        } else if let Some(m) = rest.strip_prefix("warning:") {
            (Severity::Warning, m.trim())
        } else if let Some(m) = rest.strip_prefix("sorry:") {
            (Severity::Error, m.trim())
        } else if let Some(m) = rest.strip_prefix(':') {
            (Severity::Info, m.trim())
        } else {
            // `syntax error`, `Include file x not found`, …: the compile stops on them.
            (Severity::Error, rest.trim())
        };
        findings.push(Finding { severity, file: Some(file), line: Some(number), message: message.to_string() });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(severity: Severity, file: &str, line: u32, message: &str) -> Finding {
        Finding { severity, file: Some(file.into()), line: Some(line), message: message.into() }
    }

    #[test]
    fn yosys_errors_and_warnings_are_located_in_submitted_files() {
        let log = "broken_synth.v:12: ERROR: syntax error, unexpected ';'\n\
                   design.v:2: Warning: Identifier `\\r' is implicitly declared.\n\
                   Warning: reg '\\q' is assigned in a continuous assignment at design.v:3.10-3.15.\n\
                   Warning: Wire top.\\r is used but has no driver.\n\
                   /usr/bin/../share/yosys/ice40/cells_sim.v:271: Warning: not ours\n\
                   Warnings: 2 unique messages, 2 total\n\
                   ERROR: Module `\\sub' referenced in module `\\top' in cell `\\u' is not part of the design.\n";
        let findings = parse_yosys_log(log, &["broken_synth.v", "design.v"]);
        assert_eq!(findings[0], at(Severity::Error, "broken_synth.v", 12, "syntax error, unexpected ';'"));
        assert_eq!(findings[1], at(Severity::Warning, "design.v", 2, "Identifier `\\r' is implicitly declared."));
        assert_eq!((findings[2].file.as_deref(), findings[2].line), (Some("design.v"), Some(3)));
        assert_eq!((findings[3].file.as_deref(), findings[3].line), (None, None));
        assert_eq!((findings[4].file.as_deref(), findings[4].message.as_str()), (None, "not ours"));
        assert_eq!(findings[5].severity, Severity::Error);
        assert!(findings[5].message.starts_with("Module `\\sub'"));
        assert_eq!(findings.len(), 6);
    }

    #[test]
    fn iverilog_messages_keep_file_line_and_kind() {
        let log = "fifo.v:17: error: Unable to bind wire/reg/memory `read_ptr' in `tb.dut'\n\
                   alu.v:13: syntax error\n\
                   fa.v:16: error: 'wptr' has already been declared in this scope.\n\
                   fa.v:14:      : It was declared here as a variable.\n\
                   tb.v:5: warning: Some modules have no timescale.\n\
                   tb.v:9: sorry: constant selects in always_* processes are not supported.\n\
                   2 error(s) during elaboration.\n\
                   error: Unable to find the root module \"nope\" in the Verilog source.\n\
                   I give up.\n";
        let files = ["fifo.v", "alu.v", "fa.v", "tb.v"];
        let findings = parse_iverilog_log(log, &files);
        assert_eq!(
            findings[0],
            at(Severity::Error, "fifo.v", 17, "Unable to bind wire/reg/memory `read_ptr' in `tb.dut'")
        );
        assert_eq!(findings[1], at(Severity::Error, "alu.v", 13, "syntax error"));
        assert_eq!(findings[3], at(Severity::Info, "fa.v", 14, "It was declared here as a variable."));
        assert_eq!(findings[4].severity, Severity::Warning);
        assert_eq!(findings[5].severity, Severity::Error);
        assert_eq!(findings[6].file, None);
        assert_eq!(findings.len(), 7);
    }

    #[test]
    fn a_path_before_a_submitted_name_is_dropped_and_colons_in_messages_survive() {
        let findings = parse_iverilog_log("/tmp/x/a.v:3: error: x: y\n", &["a.v"]);
        assert_eq!(findings, vec![at(Severity::Error, "a.v", 3, "x: y")]);
    }

    #[test]
    fn bounding_keeps_errors_first_drops_repeats_and_counts_the_rest() {
        let mut many = vec![at(Severity::Warning, "a.v", 1, "w"); 3];
        many.extend((0..5).map(|i| at(Severity::Error, "a.v", i, &"e".repeat(1000))));
        let (kept, omitted) = bound(many, 3, 16);
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(|f| f.severity == Severity::Error && f.message.len() <= 16));
        assert!(kept[0].message.ends_with('…'));
        assert_eq!(omitted, 3);
    }

    #[test]
    fn clipping_respects_character_boundaries() {
        assert_eq!(clip("héllo", 3), "…");
        assert_eq!(clip("héllo", 100), "héllo");
        assert_eq!(clip("abcdefgh", 6), "abc…");
    }
}
