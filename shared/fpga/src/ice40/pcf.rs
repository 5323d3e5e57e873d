//! PCF (physical constraints) parser, following nextpnr-ice40 0.4 line for line.
//!
//! The parser is total: every input yields a [`Pcf`] plus findings, never a panic. Where
//! nextpnr stops with an error (or crashes on an uncaught exception, as it does for
//! `set_io -pullup` with no value or `set_frequency clk abc`) we report `PCF_SYNTAX`; where it
//! only prints a warning we report `PCF_IGNORED_OPTION`. Checks that need the device or the
//! netlist (unknown ports, pins, resistor support) live in `constraints`.
//!
//! The grammar nextpnr accepts: text after `#` is a comment; words are split on whitespace;
//! commands are case-sensitive.
//!
//! ```text
//! set_io [-nowarn] [-pullup yes|no|1|0] [-pullup_resistor 3P3K|6P8K|10K|100K] PORT PIN
//! set_frequency NET MHZ
//! ```

use crate::report::{Finding, Location};

/// A parsed PCF file: the constraints that survived parsing, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pcf {
    pub ios: Vec<SetIo>,
    pub frequencies: Vec<SetFrequency>,
}

/// One `set_io` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetIo {
    /// 1-based line number, for finding locations.
    pub line: u32,
    /// Top-level port bit as nextpnr names it (`clk`, `led[0]`).
    pub port: String,
    /// Package pin name, case-sensitive as in nextpnr (`J3`, `35`).
    pub pin: String,
    /// `-nowarn`: silences the warning for a port the design does not have.
    pub nowarn: bool,
    /// `-pullup yes|no`, when given.
    pub pullup: Option<bool>,
    /// `-pullup_resistor`, when given with a valid value; only UltraPlus parts accept it.
    pub pullup_resistor: Option<PullupResistor>,
}

/// The pull-up strengths of the iCE40 UltraPlus IO (`-pullup_resistor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullupResistor {
    R3k3,
    R6k8,
    R10k,
    R100k,
}

impl PullupResistor {
    fn parse(word: &str) -> Option<Self> {
        match word {
            "3P3K" => Some(Self::R3k3),
            "6P8K" => Some(Self::R6k8),
            "10K" => Some(Self::R10k),
            "100K" => Some(Self::R100k),
            _ => None,
        }
    }
}

/// One `set_frequency` line.
#[derive(Debug, Clone, PartialEq)]
pub struct SetFrequency {
    pub line: u32,
    pub net: String,
    /// Frequency in MHz, as `std::stof` reads it (a numeric prefix: `12MHz` is 12).
    pub mhz: f64,
}

/// Parses PCF text. Findings carry `file` (when given) and the 1-based line.
pub fn parse(text: &str, file: Option<&str>) -> (Pcf, Vec<Finding>) {
    let mut pcf = Pcf::default();
    let mut findings = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let code = raw.split('#').next().unwrap_or("");
        let words: Vec<&str> = code.split(is_c_space).filter(|w| !w.is_empty()).collect();
        let at = |port: Option<&str>| Location {
            file: file.map(str::to_owned),
            line: Some(line),
            port: port.map(str::to_owned),
            ..Location::default()
        };
        match words.first().copied() {
            None => {}
            Some("set_io") => match parse_set_io(&words, line) {
                Ok((io, warnings)) => {
                    findings.extend(
                        warnings.into_iter().map(|w| Finding::warning("PCF_IGNORED_OPTION", w, at(Some(&io.port)))),
                    );
                    pcf.ios.push(io);
                }
                Err(message) => findings.push(Finding::error("PCF_SYNTAX", message, at(None))),
            },
            Some("set_frequency") => match parse_set_frequency(&words, line) {
                Ok(freq) => pcf.frequencies.push(freq),
                Err(message) => findings.push(Finding::error("PCF_SYNTAX", message, at(None))),
            },
            Some(other) => findings.push(Finding::error(
                "PCF_SYNTAX",
                format!("unsupported PCF command '{other}' (nextpnr-ice40 knows set_io and set_frequency)"),
                at(None),
            )),
        }
    }
    (pcf, findings)
}

/// Whitespace as C's `isspace` sees it (what `std::istream >>` splits on): ASCII only, with
/// vertical tab, unlike `char::is_ascii_whitespace`.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
}

/// Parses `set_io` words; `Ok` carries the warnings nextpnr would print for the line.
fn parse_set_io(words: &[&str], line: u32) -> Result<(SetIo, Vec<String>), String> {
    let mut warnings = Vec::new();
    let (mut nowarn, mut pullup, mut pullup_resistor) = (false, None, None);
    let mut i = 1;
    while let Some(setting) = words.get(i).filter(|w| w.starts_with('-')) {
        match *setting {
            "-pullup" => {
                i += 1;
                pullup = Some(match words.get(i).copied() {
                    Some("yes" | "1") => true,
                    Some("no" | "0") => false,
                    Some(value) => {
                        return Err(format!("invalid value '{value}' for -pullup (expected yes, no, 1 or 0)"))
                    }
                    None => return Err("-pullup needs a value (yes, no, 1 or 0)".to_owned()),
                });
            }
            "-pullup_resistor" => {
                i += 1;
                let value = words.get(i).ok_or("-pullup_resistor needs a value (3P3K, 6P8K, 10K or 100K)")?;
                pullup_resistor = Some(PullupResistor::parse(value).ok_or_else(|| {
                    format!("invalid value '{value}' for -pullup_resistor (expected 3P3K, 6P8K, 10K or 100K)")
                })?);
            }
            "-nowarn" => nowarn = true,
            "--warn-no-port" => {}
            other => warnings.push(format!("nextpnr ignores the PCF setting '{other}' on line {line}")),
        }
        i += 1;
    }
    let (Some(port), Some(pin)) = (words.get(i), words.get(i + 1)) else {
        return Err("expected PCF syntax 'set_io [options] port pin'".to_owned());
    };
    if words.len() > i + 2 {
        warnings.push(format!("nextpnr ignores the trailing words after the pin on line {line}"));
    }
    let io = SetIo { line, port: (*port).to_owned(), pin: (*pin).to_owned(), nowarn, pullup, pullup_resistor };
    Ok((io, warnings))
}

fn parse_set_frequency(words: &[&str], line: u32) -> Result<SetFrequency, String> {
    let (Some(net), Some(value)) = (words.get(1), words.get(2)) else {
        return Err("expected PCF syntax 'set_frequency net frequency'".to_owned());
    };
    let mhz = stof_prefix(value).ok_or_else(|| format!("'{value}' is not a frequency in MHz"))?;
    Ok(SetFrequency { line, net: (*net).to_owned(), mhz })
}

/// Reads a number the way C++ `std::stof` does: the longest numeric prefix, `None` when there is
/// none or when the value does not fit a `float` (stof throws, and nextpnr aborts, on both).
fn stof_prefix(word: &str) -> Option<f64> {
    let bytes = word.as_bytes();
    let mut end = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let lower = word[end..].to_ascii_lowercase();
    if lower.starts_with("inf") || lower.starts_with("nan") {
        return Some(if lower.starts_with("nan") { f64::NAN } else { f64::INFINITY });
    }
    let digits_from = end;
    while bytes.get(end).is_some_and(u8::is_ascii_digit) {
        end += 1;
    }
    let mut has_digits = end > digits_from;
    if bytes.get(end) == Some(&b'.') {
        end += 1;
        let frac_from = end;
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        has_digits |= end > frac_from;
    }
    if !has_digits {
        return None;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut exp_end = end + 1 + usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let exp_from = exp_end;
        while bytes.get(exp_end).is_some_and(u8::is_ascii_digit) {
            exp_end += 1;
        }
        if exp_end > exp_from {
            end = exp_end;
        }
    }
    let value: f64 = word[..end].parse().ok()?;
    let magnitude = value.abs();
    let fits_float = magnitude == 0.0 || (f64::from(f32::MIN_POSITIVE)..=f64::from(f32::MAX)).contains(&magnitude);
    fits_float.then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Severity;

    fn codes(text: &str) -> Vec<(Severity, String)> {
        parse(text, None).1.into_iter().map(|f| (f.severity, f.code)).collect()
    }

    #[test]
    fn a_plain_set_io_line_yields_port_pin_and_line() {
        let (pcf, findings) = parse("# header\n\nset_io led[0] B5 # trailing comment\n", Some("top.pcf"));
        assert!(findings.is_empty());
        assert_eq!(pcf.ios.len(), 1);
        let io = &pcf.ios[0];
        assert_eq!((io.port.as_str(), io.pin.as_str(), io.line, io.nowarn), ("led[0]", "B5", 3, false));
    }

    #[test]
    fn options_before_the_port_are_read() {
        let (pcf, findings) = parse("set_io -nowarn -pullup yes -pullup_resistor 10K btn 35", None);
        assert!(findings.is_empty());
        let io = &pcf.ios[0];
        assert!(io.nowarn);
        assert_eq!(io.pullup, Some(true));
        assert_eq!(io.pullup_resistor, Some(PullupResistor::R10k));
        assert_eq!(io.pin, "35");
    }

    #[test]
    fn pullup_accepts_one_and_zero_like_nextpnr() {
        let (pcf, _) = parse("set_io -pullup 0 a A1\nset_io -pullup 1 b A2", None);
        assert_eq!(pcf.ios.iter().map(|io| io.pullup).collect::<Vec<_>>(), vec![Some(false), Some(true)]);
    }

    #[test]
    fn a_bad_pullup_value_is_a_syntax_error_on_its_line() {
        let (_, findings) = parse("\nset_io -pullup maybe clk J3", Some("x.pcf"));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].code, "PCF_SYNTAX");
        assert_eq!(findings[0].location.line, Some(2));
        assert_eq!(findings[0].location.file.as_deref(), Some("x.pcf"));
    }

    #[test]
    fn a_pullup_without_a_value_is_a_syntax_error() {
        assert_eq!(codes("set_io -pullup"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
    }

    #[test]
    fn a_bad_pullup_resistor_value_is_a_syntax_error() {
        assert_eq!(codes("set_io -pullup_resistor 5K clk 35"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
    }

    #[test]
    fn an_unknown_option_is_a_warning_and_the_constraint_still_counts() {
        let (pcf, findings) = parse("set_io -bogus clk J3", None);
        assert_eq!(findings.len(), 1);
        assert_eq!((findings[0].severity, findings[0].code.as_str()), (Severity::Warning, "PCF_IGNORED_OPTION"));
        assert_eq!(pcf.ios[0].port, "clk");
    }

    #[test]
    fn trailing_words_after_the_pin_are_a_warning() {
        assert_eq!(codes("set_io clk J3 -pullup yes"), vec![(Severity::Warning, "PCF_IGNORED_OPTION".to_owned())]);
    }

    #[test]
    fn a_set_io_without_a_pin_is_a_syntax_error() {
        assert_eq!(codes("set_io -nowarn clk"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
    }

    #[test]
    fn commands_are_case_sensitive_and_unknown_ones_are_errors() {
        assert_eq!(codes("SET_IO clk J3"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
        assert_eq!(codes("set_location clk J3"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
    }

    #[test]
    fn tabs_and_crlf_line_endings_are_whitespace() {
        let (pcf, findings) = parse("set_io\tclk\tJ3\r\nset_io btn A2\r\n", None);
        assert!(findings.is_empty());
        assert_eq!(pcf.ios[0].pin, "J3");
        assert_eq!(pcf.ios[1].line, 2);
    }

    #[test]
    fn set_frequency_reads_a_numeric_prefix_like_stof() {
        let (pcf, findings) = parse("set_frequency clk 12MHz\nset_frequency pll 48.5", None);
        assert!(findings.is_empty());
        assert_eq!(pcf.frequencies.iter().map(|f| f.mhz).collect::<Vec<_>>(), vec![12.0, 48.5]);
    }

    #[test]
    fn set_frequency_without_a_number_is_a_syntax_error() {
        assert_eq!(codes("set_frequency clk abc"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
        assert_eq!(codes("set_frequency clk"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
        assert_eq!(codes("set_frequency clk 1e99"), vec![(Severity::Error, "PCF_SYNTAX".to_owned())]);
    }

    #[test]
    fn stof_prefix_matches_the_c_library_on_edge_cases() {
        assert_eq!(stof_prefix("-5"), Some(-5.0));
        assert_eq!(stof_prefix(".5x"), Some(0.5));
        assert_eq!(stof_prefix("1e"), Some(1.0));
        assert_eq!(stof_prefix("0"), Some(0.0));
        assert_eq!(stof_prefix("."), None);
        assert_eq!(stof_prefix("-"), None);
        assert!(stof_prefix("inf").is_some_and(f64::is_infinite));
    }
}
