//! Value change dumps (VCD, IEEE 1364 §18) as Icarus Verilog writes them: the signals a dump
//! declares, their changes over time ([`parse`]), and a window of a dump around one time that
//! starts with every signal's value at that point ([`window`]), so a dump cut to a few hundred
//! KiB still draws every signal.
//!
//! A dump is as hostile as the testbench that wrote it (a testbench may write its own), so these
//! are total functions over text: what they do not understand they skip, and they allocate in
//! proportion to the signals declared, never to the changes, except [`parse`], which is meant for
//! a window already cut to size.

use std::collections::HashMap;

/// One declared signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// The dump's identifier code (`!`, `"`, `#`, …); signals connected together share one.
    pub code: String,
    /// The scopes and the name, joined with `.` (`tb.dut.count`), without a bit range.
    pub name: String,
    /// Bits (1 for a scalar; 64 for a real).
    pub width: u32,
    /// `wire`, `reg`, `integer`, `real`, `parameter`, …
    pub kind: String,
}

impl Signal {
    /// How deep in the hierarchy it is: 1 for a signal of the top scope.
    pub fn depth(&self) -> usize {
        self.name.matches('.').count()
    }
}

/// One value change: at `time`, the signal(s) of `code` took `value` (`0`, `1`, `x`, `z` for a
/// scalar, the bits for a vector, the number for a real).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub time: u64,
    pub code: String,
    pub value: String,
}

/// A dump, read whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vcd {
    /// The dump's time unit (`1ps`, `10ns`), when it declares one.
    pub timescale: Option<String>,
    pub signals: Vec<Signal>,
    /// Every change, in the dump's order (time order, for a dump a simulator wrote).
    pub changes: Vec<Change>,
    /// The last time the dump reached (its last `#time`).
    pub end: u64,
}

impl Vcd {
    /// The changes of one signal's code, in order.
    pub fn changes_of<'a>(&'a self, code: &'a str) -> impl Iterator<Item = &'a Change> + 'a {
        self.changes.iter().filter(move |c| c.code == code)
    }

    /// The time of the last change, if any.
    pub fn last_change(&self) -> Option<u64> {
        self.changes.last().map(|c| c.time)
    }
}

/// The whitespace-separated tokens of `text`, each with its byte offset.
fn tokens(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        // Whitespace is ASCII, so both ends are character boundaries.
        Some((start, &text[start..at]))
    })
}

/// The declarations: the timescale, the signals, and where the value changes start.
struct Header {
    timescale: Option<String>,
    signals: Vec<Signal>,
    /// The offset just past `$enddefinitions $end` (the text's end when it has none).
    body: usize,
}

fn header(text: &str) -> Header {
    let mut out = Header { timescale: None, signals: Vec::new(), body: text.len() };
    let mut scopes: Vec<&str> = Vec::new();
    let mut toks = tokens(text);
    // The tokens of one `$keyword … $end` section, without either.
    fn section<'a>(toks: &mut impl Iterator<Item = (usize, &'a str)>) -> (Vec<&'a str>, Option<usize>) {
        let mut words = Vec::new();
        for (at, tok) in toks.by_ref() {
            if tok == "$end" {
                return (words, Some(at + tok.len()));
            }
            words.push(tok);
        }
        (words, None)
    }
    while let Some((_, tok)) = toks.next() {
        let (words, end) = section(&mut toks);
        match tok {
            "$timescale" => out.timescale = Some(words.concat()),
            "$scope" => scopes.push(words.get(1).copied().unwrap_or("?")),
            "$upscope" => {
                scopes.pop();
            }
            "$var" if words.len() >= 4 => {
                let mut name = scopes.clone();
                name.push(words[3]);
                out.signals.push(Signal {
                    code: words[2].to_owned(),
                    name: name.join("."),
                    width: words[1].parse().unwrap_or(1),
                    kind: words[0].to_owned(),
                });
            }
            "$enddefinitions" => {
                out.body = end.unwrap_or(text.len());
                break;
            }
            _ => {}
        }
    }
    out
}

/// What one token of the changes says.
enum Event<'a> {
    Time(u64),
    /// A value change: the token as written before the code (`1`, `b1010`, `r1.5`), and the code.
    Value {
        token: &'a str,
        scalar: bool,
        code: &'a str,
    },
}

/// The times and value changes of a dump's body, in order; other commands are skipped.
fn events(body: &str) -> impl Iterator<Item = (usize, Event<'_>)> {
    let mut toks = tokens(body);
    std::iter::from_fn(move || loop {
        let (at, tok) = toks.next()?;
        let first = tok.as_bytes()[0];
        match first {
            b'#' => {
                if let Ok(t) = tok[1..].parse() {
                    return Some((at, Event::Time(t)));
                }
            }
            b'$' if tok == "$comment" => {
                for (_, t) in toks.by_ref() {
                    if t == "$end" {
                        break;
                    }
                }
            }
            b'b' | b'B' | b'r' | b'R' => {
                let (_, code) = toks.next()?;
                return Some((at, Event::Value { token: tok, scalar: false, code }));
            }
            b'0' | b'1' | b'x' | b'X' | b'z' | b'Z' if tok.len() > 1 => {
                // The value is one ASCII character.
                return Some((at, Event::Value { token: &tok[..1], scalar: true, code: &tok[1..] }));
            }
            _ => {}
        }
    })
}

/// Reads a dump whole: its declarations and every change (for a window, or a small dump).
pub fn parse(text: &str) -> Vcd {
    let head = header(text);
    let mut vcd = Vcd { timescale: head.timescale, signals: head.signals, ..Vcd::default() };
    let mut now = 0;
    for (_, event) in events(&text[head.body..]) {
        match event {
            Event::Time(t) => {
                now = t;
                vcd.end = vcd.end.max(t);
            }
            Event::Value { token, scalar, code } => {
                let value = if scalar { token.to_ascii_lowercase() } else { token[1..].to_owned() };
                vcd.changes.push(Change { time: now, code: code.to_owned(), value });
            }
        }
    }
    vcd
}

/// What a dump says about time, read without keeping its changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    pub timescale: Option<String>,
    /// The last time it reached (its last `#time`).
    pub end: u64,
    /// The time of its last value change.
    pub last_change: u64,
    /// Whether Icarus stopped writing it at its `$dumplimit`.
    pub limited: bool,
}

/// The comment Icarus ends a dump with when it reaches its `$dumplimit`.
const LIMIT_COMMENT: &str = "$comment Dump file limit";

/// [`Summary`] of a dump.
pub fn summary(text: &str) -> Summary {
    let head = header(text);
    let body = &text[head.body..];
    let mut out = Summary { timescale: head.timescale, ..Summary::default() };
    let mut now = 0;
    for (_, event) in events(body) {
        match event {
            Event::Time(t) => {
                now = t;
                out.end = out.end.max(t);
            }
            Event::Value { .. } => out.last_change = now,
        }
    }
    let tail = body.len().saturating_sub(256);
    out.limited = body.is_char_boundary(tail) && body[tail..].contains(LIMIT_COMMENT);
    out
}

/// A dump cut around one time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// A dump in its own right: the declarations, every signal's value at `from`, and the
    /// changes from there up to `to`.
    pub text: String,
    /// The first and last times it covers.
    pub from: u64,
    pub to: u64,
    /// Whether changes of the whole dump were left out.
    pub cut: bool,
}

/// The share of a cut window's room spent before the focus (what led to it).
const BEFORE: (usize, usize) = (3, 4);

/// At most `max_bytes` of the dump `text` around the time `focus` (or its last time, when the
/// focus is past it): the whole dump when it fits; else its declarations, a `$dumpvars` with
/// every signal's value at the window's first time (its own changes included), and the whole times
/// after it as far as they fit,
/// the window starting about three quarters of the room before the focus. `None` when the
/// declarations and values alone do not fit.
pub fn window(text: &str, focus: u64, max_bytes: usize) -> Option<Window> {
    let head = header(text);
    let body = &text[head.body..];
    let times = || events(body).filter_map(|(at, e)| if let Event::Time(t) = e { Some((at, t)) } else { None });
    let (first, last) = (times().next(), times().last());
    if text.len() <= max_bytes {
        let (from, to) = (first.map_or(0, |f| f.1), last.map_or(0, |l| l.1));
        return Some(Window { text: text.to_owned(), from, to, cut: false });
    }
    let declarations = &text[..head.body];
    let room = max_bytes.checked_sub(declarations.len() + 1)?;
    let Some(focus_at) = times().find(|&(_, t)| t >= focus).or(last).map(|(at, _)| at) else {
        // No time at all: the declarations and what fits of the rest.
        let kept = cut_at_line(body, room);
        return Some(Window { text: format!("{declarations}\n{kept}"), from: 0, to: 0, cut: true });
    };
    let target = focus_at.saturating_sub(room * BEFORE.0 / BEFORE.1);
    // Every signal's value at the window's first time (the first `#time` at or after the target;
    // the focus's own is one), its own changes included, kept by code; and where the next time
    // starts.
    let mut values: HashMap<&str, (bool, &str)> = HashMap::new();
    let mut from = None;
    let mut next = body.len();
    for (at, event) in events(body) {
        match event {
            Event::Time(t) => match from {
                Some(first) if t != first => {
                    next = at;
                    break;
                }
                None if at >= target => from = Some(t),
                _ => {}
            },
            Event::Value { token, scalar, code } => {
                values.insert(code, (scalar, token));
            }
        }
    }
    let from = from.unwrap_or(focus);
    let mut values: Vec<_> = values.into_iter().collect();
    values.sort_unstable();
    let mut prefix = format!("#{from}\n$dumpvars\n");
    for (code, (scalar, token)) in values {
        let gap = if scalar { "" } else { " " };
        prefix.push_str(&format!("{token}{gap}{code}\n"));
    }
    prefix.push_str("$end\n");
    let room = room.checked_sub(prefix.len())?;
    // The times after the first, cut before the first `#time` that does not fit (so the last time
    // kept has all its changes).
    let rest = &body[next..];
    let kept = match rest.len() <= room {
        true => rest,
        // `\n` is ASCII: the cut is a character boundary.
        false => rest.as_bytes()[..=room].windows(2).rposition(|w| w == b"\n#").map_or("", |n| &rest[..n + 1]),
    };
    let to = events(kept).filter_map(|(_, e)| if let Event::Time(t) = e { Some(t) } else { None }).last();
    let cut = kept.len() < rest.len() || first.is_some_and(|(_, t)| from > t);
    Some(Window { text: format!("{declarations}\n{prefix}{kept}"), from, to: to.unwrap_or(from), cut })
}

/// The start of `text` up to the last line end within `max` bytes (all of it when it fits).
fn cut_at_line(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    // `\n` is ASCII: the cut is a character boundary.
    text.as_bytes()[..max].iter().rposition(|&b| b == b'\n').map_or("", |n| &text[..n + 1])
}

#[cfg(test)]
#[path = "vcd_tests.rs"]
mod tests;
