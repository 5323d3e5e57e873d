//! LPF (Lattice preference file) parser, following nextpnr-ecp5's reader statement for statement.
//!
//! The parser is total: every input yields an [`Lpf`] plus findings, never a panic. Where
//! nextpnr stops with an error (or aborts on an uncaught exception, as it does for
//! `FREQUENCY PORT "clk" 25MHZ;`, whose unit is missing, or a frequency that is not a number) we
//! report `LPF_SYNTAX`, at the line and column of the offending word (columns count bytes from 1);
//! where it prints a warning, or silently skips a statement it does not know, we report a warning
//! (`LPF_IGNORED_STATEMENT`). Checks that need the design or the package (unknown ports, pins,
//! `IO_TYPE` values) live in `constraints`.
//!
//! The grammar nextpnr accepts: text after `#` or `//` is a comment; statements end with `;` and
//! may span lines (nextpnr joins the lines without a separator, so a word broken across lines
//! becomes one word); words are split on whitespace; a word starting with `"` must end with one,
//! and loses both; keywords are case-sensitive.
//!
//! ```text
//! LOCATE COMP "port" SITE "pin";
//! IOBUF PORT "port" KEY=VALUE ...;
//! FREQUENCY PORT|NET "name" VALUE MHZ|KHZ|HZ;
//! SYSCONFIG KEY=VALUE ...;
//! BLOCK ASYNCPATHS|RESETPATHS;
//! ```

use crate::report::{Finding, Location};

/// A parsed LPF file: the statements that survived parsing, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lpf {
    pub locates: Vec<Locate>,
    pub iobufs: Vec<Iobuf>,
    pub frequencies: Vec<Frequency>,
}

/// Where a word starts: 1-based line and byte column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct At {
    pub line: u32,
    pub column: u32,
}

/// One `LOCATE COMP … SITE …;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locate {
    pub at: At,
    /// The component (a top-level port bit as nextpnr names its IO cell: `clk`, `led[0]`),
    /// quotes removed.
    pub comp: String,
    /// The site word as written: nextpnr removes its quotes only once it has found the
    /// component, so a malformed one matters only for a port the design has ([`Locate::site`]).
    pub site_word: String,
    pub site_at: At,
}

impl Locate {
    /// The site (package pin) without its quotes, or the syntax error nextpnr gives for it.
    pub fn site(&self) -> Result<&str, String> {
        strip_quotes(&self.site_word)
    }
}

/// One `IOBUF PORT … KEY=VALUE …;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iobuf {
    pub at: At,
    pub port: String,
    /// The attribute words as written, each with where it starts; nextpnr reads them (and
    /// rejects one without `=`) only for a port the design has ([`Iobuf::attributes`]).
    pub words: Vec<(String, At)>,
}

impl Iobuf {
    /// The attributes as (key, value, where), or the first word without `=`.
    pub fn attributes(&self) -> Result<Vec<Attribute<'_>>, (String, At)> {
        self.words
            .iter()
            .map(|(w, at)| match w.split_once('=') {
                Some((k, v)) => Ok((k, v, *at)),
                None => Err((
                    format!("'{w}' is not KEY=VALUE (expected syntax 'IOBUF PORT <port name> <attr>=<value>...')"),
                    *at,
                )),
            })
            .collect()
    }
}

/// One `KEY=VALUE` of an `IOBUF`, with where it starts.
pub type Attribute<'a> = (&'a str, &'a str, At);

/// What a `FREQUENCY` statement constrains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrequencyOf {
    Port,
    Net,
}

/// One `FREQUENCY PORT|NET … VALUE UNIT;`.
#[derive(Debug, Clone, PartialEq)]
pub struct Frequency {
    pub at: At,
    pub of: FrequencyOf,
    pub name: String,
    /// In MHz, converted from the unit as nextpnr does.
    pub mhz: f64,
}

/// The `IOBUF` attributes nextpnr-ecp5 knows; others draw a warning.
pub const IOBUF_KEYS: &[&str] = &[
    "IO_TYPE",
    "BANK",
    "BANK_VCC",
    "VREF",
    "PULLMODE",
    "DRIVE",
    "SLEWRATE",
    "CLAMP",
    "OPENDRAIN",
    "DIFFRESISTOR",
    "DIFFDRIVE",
    "HYSTERESIS",
    "TERMINATION",
];

/// The `SYSCONFIG` keys nextpnr-ecp5 accepts; any other is an error.
const SYSCONFIG_KEYS: &[&str] = &[
    "SLAVE_SPI_PORT",
    "MASTER_SPI_PORT",
    "SLAVE_PARALLEL_PORT",
    "BACKGROUND_RECONFIG",
    "DONE_EX",
    "DONE_OD",
    "DONE_PULL",
    "MCCLK_FREQ",
    "TRANSFR",
    "CONFIG_IOVOLTAGE",
    "CONFIG_SECURE",
    "WAKE_UP",
    "COMPRESS_CONFIG",
    "CONFIG_MODE",
    "INBUF",
];

/// The statement text joined across lines, with where each joined piece came from.
struct Joined {
    text: String,
    /// (offset in `text`, line, byte column of that offset in its line), one per piece.
    pieces: Vec<(usize, u32, u32)>,
}

impl Joined {
    fn at(&self, offset: usize) -> At {
        let i = self.pieces.partition_point(|p| p.0 <= offset).saturating_sub(1);
        match self.pieces.get(i) {
            Some(&(start, line, column)) => {
                At { line, column: column.saturating_add(u32::try_from(offset - start).unwrap_or(u32::MAX)) }
            }
            None => At::default(),
        }
    }
}

/// Parses LPF text. Findings carry `file` (when given) and the 1-based line; messages give the
/// column too.
pub fn parse(text: &str, file: Option<&str>) -> (Lpf, Vec<Finding>) {
    // Pass 1: comments out, blank lines skipped, the rest joined as nextpnr joins them.
    let mut joined = Joined { text: String::new(), pieces: Vec::new() };
    for (index, raw) in text.split('\n').enumerate() {
        let line = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let mut code = raw;
        if let Some(i) = code.find('#') {
            code = &code[..i];
        }
        if let Some(i) = code.find("//") {
            code = &code[..i];
        }
        if code.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n')) {
            continue;
        }
        joined.pieces.push((joined.text.len(), line, 1));
        joined.text.push_str(code);
    }
    // Pass 2: statements up to each `;`.
    let mut lpf = Lpf::default();
    let mut findings = Vec::new();
    let mut start = 0;
    let bytes = joined.text.as_bytes();
    for (semi, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b';') {
        let words = split_words(&joined.text[start..semi], start, &joined);
        statement(&words, joined.at(semi), &mut lpf, &mut findings, file);
        start = semi + 1;
    }
    if let Some(first) = joined.text[start..].find(|c: char| !matches!(c, ' ' | '\t' | '\r' | '\n')) {
        let at = joined.at(start + first);
        findings.push(syntax(
            "unexpected end of LPF file: the statement starting here has no closing ';'".to_owned(),
            at,
            file,
        ));
    }
    (lpf, findings)
}

/// The words of one statement, each with where it starts.
fn split_words<'s>(command: &'s str, offset: usize, joined: &Joined) -> Vec<(&'s str, At)> {
    let mut words = Vec::new();
    let mut word_start = None;
    for (i, c) in command.char_indices() {
        if is_c_space(c) {
            if let Some(s) = word_start.take() {
                words.push((&command[s..i], joined.at(offset + s)));
            }
        } else if word_start.is_none() {
            word_start = Some(i);
        }
    }
    if let Some(s) = word_start {
        words.push((&command[s..], joined.at(offset + s)));
    }
    words
}

/// Whitespace as C's `isspace` sees it (what `std::stringstream >>` splits on).
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
}

fn location(at: At, file: Option<&str>) -> Location {
    Location { file: file.map(str::to_owned), line: Some(at.line), ..Location::default() }
}

fn syntax(message: String, at: At, file: Option<&str>) -> Finding {
    Finding::error("LPF_SYNTAX", format!("line {}, column {}: {message}", at.line, at.column), location(at, file))
}

fn ignored(message: String, at: At, file: Option<&str>) -> Finding {
    Finding::warning(
        "LPF_IGNORED_STATEMENT",
        format!("line {}, column {}: {message}", at.line, at.column),
        location(at, file),
    )
}

/// A word without its surrounding quotes, as nextpnr's `strip_quotes` reads it.
pub(crate) fn strip_quotes(word: &str) -> Result<&str, String> {
    match word.strip_prefix('"') {
        None => Ok(word),
        Some(rest) => match rest.strip_suffix('"') {
            Some(inner) => Ok(inner),
            // nextpnr: a lone `"` is its own closing quote, and the name is empty.
            None if rest.is_empty() => Ok(""),
            None => Err(format!("expected '\"' at end of string '{word}'")),
        },
    }
}

/// Reads one statement's words (`end` is where its `;` is).
fn statement(words: &[(&str, At)], end: At, lpf: &mut Lpf, findings: &mut Vec<Finding>, file: Option<&str>) {
    if let Err((message, at)) = read_statement(words, end, lpf, findings, file) {
        findings.push(syntax(message, at, file));
    }
}

/// [`statement`]: `Err` is a syntax error and where it is; warnings go to `findings`.
fn read_statement(
    words: &[(&str, At)],
    end: At,
    lpf: &mut Lpf,
    findings: &mut Vec<Finding>,
    file: Option<&str>,
) -> Result<(), (String, At)> {
    let Some(&(verb, verb_at)) = words.first() else { return Ok(()) };
    let word = |i: usize| words.get(i).map(|w| w.0);
    let at = |i: usize| words.get(i).map_or(end, |w| w.1);
    let fail = |message: String, at: At| Err((message, at));
    match verb {
        "BLOCK" => {
            if words.len() != 2 || !matches!(word(1), Some("ASYNCPATHS" | "RESETPATHS")) {
                findings.push(ignored(
                    "nextpnr ignores this BLOCK statement (it knows BLOCK ASYNCPATHS and BLOCK RESETPATHS)".to_owned(),
                    verb_at,
                    file,
                ));
            }
        }
        "SYSCONFIG" => {
            for &(setting, setting_at) in &words[1..] {
                match setting.split_once('=') {
                    None => {
                        return fail(
                            format!("'{setting}' is not KEY=VALUE (expected syntax 'SYSCONFIG <attr>=<value>...')"),
                            setting_at,
                        )
                    }
                    Some((key, _)) if !SYSCONFIG_KEYS.contains(&key) => {
                        return fail(
                            format!(
                                "unexpected SYSCONFIG key '{key}' (nextpnr-ecp5 knows {})",
                                SYSCONFIG_KEYS.join(", ")
                            ),
                            setting_at,
                        )
                    }
                    Some(_) => {}
                }
            }
        }
        "FREQUENCY" => {
            let Some(kind) = word(1) else {
                return fail("expected PORT or NET after FREQUENCY".to_owned(), end);
            };
            let of = match kind {
                "PORT" => FrequencyOf::Port,
                "NET" => FrequencyOf::Net,
                _ => {
                    findings.push(ignored(
                        format!("nextpnr ignores 'FREQUENCY {kind}' (it knows FREQUENCY PORT and FREQUENCY NET)"),
                        at(1),
                        file,
                    ));
                    return Ok(());
                }
            };
            if words.len() < 4 {
                return fail(
                    format!("expected a name, a frequency value and a unit after 'FREQUENCY {kind}'"),
                    at(words.len()),
                );
            }
            let name = match strip_quotes(words[2].0) {
                Ok(name) => name,
                Err(message) => return fail(message, at(2)),
            };
            let Some(value) = float_prefix(words[3].0) else {
                return fail(format!("'{}' is not a frequency value", words[3].0), at(3));
            };
            let Some(unit) = word(4) else {
                return fail(
                    format!("expected a unit (MHZ, KHZ or HZ) after '{}', separated by a space", words[3].0),
                    end,
                );
            };
            let mhz = match unit.to_ascii_uppercase().as_str() {
                "MHZ" => value,
                "KHZ" => value / 1.0e3,
                "HZ" => value / 1.0e6,
                _ => return fail(format!("unsupported frequency unit '{unit}' (MHZ, KHZ or HZ)"), at(4)),
            };
            lpf.frequencies.push(Frequency { at: verb_at, of, name: name.to_owned(), mhz });
        }
        "LOCATE" => {
            if words.len() < 5 {
                return fail("expected syntax 'LOCATE COMP <port name> SITE <pin>'".to_owned(), at(words.len()));
            }
            if words[1].0 != "COMP" {
                return fail(format!("expected 'COMP' after 'LOCATE', found '{}'", words[1].0), at(1));
            }
            let comp = match strip_quotes(words[2].0) {
                Ok(comp) => comp,
                Err(message) => return fail(message, at(2)),
            };
            if words[3].0 != "SITE" {
                return fail(format!("expected 'SITE' after 'LOCATE COMP {comp}', found '{}'", words[3].0), at(3));
            }
            if words.len() > 5 {
                return fail("unexpected input following the LOCATE clause".to_owned(), at(5));
            }
            lpf.locates.push(Locate {
                at: verb_at,
                comp: comp.to_owned(),
                site_word: words[4].0.to_owned(),
                site_at: words[4].1,
            });
        }
        "IOBUF" => {
            if words.len() < 3 {
                return fail("expected syntax 'IOBUF PORT <port name> <attr>=<value>...'".to_owned(), at(words.len()));
            }
            if words[1].0 != "PORT" {
                return fail(format!("expected 'PORT' after 'IOBUF', found '{}'", words[1].0), at(1));
            }
            let port = match strip_quotes(words[2].0) {
                Ok(port) => port,
                Err(message) => return fail(message, at(2)),
            };
            let words = words[3..].iter().map(|&(w, at)| (w.to_owned(), at)).collect();
            lpf.iobufs.push(Iobuf { at: verb_at, port: port.to_owned(), words });
        }
        other => {
            let known = ["BLOCK", "SYSCONFIG", "FREQUENCY", "LOCATE", "IOBUF"];
            let hint = match known.iter().find(|k| k.eq_ignore_ascii_case(other)) {
                Some(k) => format!(" (keywords are case-sensitive: '{k}')"),
                None => " (it reads LOCATE, IOBUF, FREQUENCY, SYSCONFIG and BLOCK)".to_owned(),
            };
            findings.push(ignored(format!("nextpnr-ecp5 ignores the '{other}' statement{hint}"), verb_at, file));
        }
    }
    Ok(())
}

/// The number at the start of a word, as C++'s `std::stof` reads it (`25MHZ` is 25), or `None`
/// where `stof` throws (no number at all, or one out of `float` range).
fn float_prefix(word: &str) -> Option<f64> {
    let b = word.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let lower = word[i..].to_ascii_lowercase();
    if lower.starts_with("inf") || lower.starts_with("nan") {
        return None; // a frequency of inf or nan is no frequency
    }
    let digits_from = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - digits_from;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let f = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        digits += i - f;
    }
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let e = j;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if j > e {
            i = j;
        }
    }
    let value: f64 = word[..i].parse().ok()?;
    (value.abs() <= f64::from(f32::MAX)).then_some(value)
}

#[cfg(test)]
mod tests;
