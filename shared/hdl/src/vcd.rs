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
/// every signal's value at the window's first time, and the changes from there on as far as fits,
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
    // The values before the window's first `#time` (the first at or after the target; the
    // focus's own is one), kept by code.
    let mut values: HashMap<&str, (bool, &str)> = HashMap::new();
    let mut start = (focus_at, focus);
    for (at, event) in events(body) {
        match event {
            Event::Time(t) if at >= target => {
                start = (at, t);
                break;
            }
            Event::Time(_) => {}
            Event::Value { token, scalar, code } => {
                values.insert(code, (scalar, token));
            }
        }
    }
    let (start, from) = start;
    let mut values: Vec<_> = values.into_iter().collect();
    values.sort_unstable();
    let mut prefix = format!("#{from}\n$dumpvars\n");
    for (code, (scalar, token)) in values {
        let gap = if scalar { "" } else { " " };
        prefix.push_str(&format!("{token}{gap}{code}\n"));
    }
    prefix.push_str("$end");
    let room = room.checked_sub(prefix.len())?;
    // The changes after the first `#time` token, cut before the last `#time` that fits (so the
    // last time kept has all its changes), or at a line when a single time's changes do not.
    let token_end = body[start..].find(|c: char| c.is_ascii_whitespace()).map_or(body.len(), |n| start + n);
    let rest = &body[token_end..];
    let kept = match rest.len() <= room {
        true => rest,
        false => match rest.as_bytes()[..room].windows(2).rposition(|w| w == b"\n#") {
            // `\n` is ASCII: the cut is a character boundary.
            Some(n) => &rest[..n + 1],
            None => cut_at_line(rest, room),
        },
    };
    let to = events(kept).filter_map(|(_, e)| if let Event::Time(t) = e { Some(t) } else { None }).last();
    let cut = kept.len() < rest.len() || first.is_some_and(|(at, _)| start > at);
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
mod tests {
    use super::*;

    /// A dump as Icarus writes it: a clock, a counter, a scalar in a sub-scope.
    fn dump(steps: u64) -> String {
        let mut text = String::from(
            "$date today $end\n$version Icarus Verilog $end\n$timescale\n\t1ps\n$end\n$scope module tb $end\n\
             $var reg 1 ! clk $end\n$var wire 8 \" count [7:0] $end\n$scope module dut $end\n\
             $var reg 1 # en $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nbx \"\nx#\n$end\n",
        );
        for i in 1..=steps {
            text.push_str(&format!("#{}\n{}!\n", i * 5000, i % 2));
            if i % 2 == 1 {
                text.push_str(&format!("b{:b} \"\n", (i / 2) % 256));
            }
            if i == 3 {
                text.push_str("1#\n");
            }
        }
        text
    }

    #[test]
    fn a_dump_reads_as_its_timescale_signals_and_changes() {
        let vcd = parse(&dump(4));
        assert_eq!(vcd.timescale.as_deref(), Some("1ps"));
        let names: Vec<_> = vcd.signals.iter().map(|s| (s.name.as_str(), s.width, s.code.as_str())).collect();
        assert_eq!(names, [("tb.clk", 1, "!"), ("tb.count", 8, "\""), ("tb.dut.en", 1, "#")]);
        assert_eq!(vcd.signals[2].depth(), 2);
        assert_eq!(vcd.end, 20000);
        let count: Vec<_> = vcd.changes_of("\"").map(|c| (c.time, c.value.as_str())).collect();
        assert_eq!(count, [(0, "x"), (5000, "0"), (15000, "1")]);
        let en: Vec<_> = vcd.changes_of("#").map(|c| (c.time, c.value.as_str())).collect();
        assert_eq!(en, [(0, "x"), (15000, "1")]);
    }

    #[test]
    fn a_dump_that_fits_is_its_own_window() {
        let text = dump(10);
        let w = window(&text, 20000, 1 << 20).unwrap();
        assert_eq!((w.text.as_str(), w.from, w.to, w.cut), (text.as_str(), 0, 50000, false));
    }

    #[test]
    fn a_cut_window_starts_with_every_value_and_holds_the_focus() {
        let text = dump(5000);
        let focus = 4000 * 5000;
        let w = window(&text, focus, 4096).unwrap();
        assert!(w.text.len() <= 4096, "{}", w.text.len());
        assert!(w.cut);
        assert!(w.from < focus && focus < w.to, "{} {} {}", w.from, focus, w.to);
        let cut = parse(&w.text);
        let whole = parse(&text);
        assert_eq!(cut.signals, whole.signals);
        // At the window's start every signal has the value it had in the whole dump.
        for signal in &whole.signals {
            let before = |v: &Vcd| v.changes_of(&signal.code).filter(|c| c.time <= w.from).last().cloned();
            assert_eq!(before(&cut).map(|c| c.value), before(&whole).map(|c| c.value), "{}", signal.name);
        }
        // And every change after it up to the window's end is the whole dump's.
        let span =
            |v: &Vcd| v.changes.iter().filter(|c| c.time > w.from && c.time <= w.to).cloned().collect::<Vec<_>>();
        assert!(span(&cut) == span(&whole), "the window's changes differ from the whole dump's");
        // About three quarters of it lead to the focus.
        assert!(focus - w.from > 2 * (w.to - focus), "{} {} {}", w.from, focus, w.to);
    }

    #[test]
    fn a_focus_past_the_end_keeps_the_last_changes() {
        let text = dump(5000);
        let w = window(&text, u64::MAX, 4096).unwrap();
        assert_eq!(w.to, 5000 * 5000);
        assert!(w.cut && w.text.len() <= 4096);
    }

    #[test]
    fn declarations_larger_than_the_room_give_no_window() {
        assert_eq!(window(&dump(5000), 0, 200), None);
    }

    #[test]
    fn garbage_reads_as_nothing_without_panicking() {
        let multibyte = format!("$enddefinitions $end\n#1\n1!\n#2\n{}\n#3\n", "\u{e9}".repeat(40));
        for text in [
            "",
            "#",
            "$var",
            "#x\n1",
            "$enddefinitions $end #5 b1",
            "\u{e9}\u{e9} #18446744073709551616 r",
            "$comment #3 $end",
            &multibyte,
        ] {
            let _ = parse(text);
            let _ = window(text, 3, 8);
            let _ = window(text, 3, 1 << 10);
            for max in 0..text.len() {
                let _ = window(text, 2, max);
            }
        }
    }

    /// A dump of `signals` scalars and one vector, changing as `steps` says (signal, value).
    fn random_dump(signals: usize, steps: &[(u16, usize, u8)]) -> String {
        let mut text = String::from("$timescale 1ns $end\n$scope module tb $end\n");
        for i in 0..signals {
            text.push_str(&format!("$var reg 1 s{i} sig{i} $end\n"));
        }
        text.push_str("$var reg 4 v bus [3:0] $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n");
        (0..signals).for_each(|i| text.push_str(&format!("xs{i}\n")));
        text.push_str("bxxxx v\n$end\n");
        let mut now = 0u64;
        for &(gap, signal, value) in steps {
            now += u64::from(gap) + 1;
            text.push_str(&format!("#{now}\n"));
            match signal % (signals + 1) {
                i if i == signals => text.push_str(&format!("b{:b} v\n", value % 16)),
                i => text.push_str(&format!("{}s{i}\n", value % 2)),
            }
        }
        text
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_without_panicking(text in "\\PC{0,200}", focus: u64, max in 0usize..300) {
            let _ = parse(&text);
            let _ = summary(&text);
            let _ = window(&text, focus, max);
        }

        #[test]
        fn a_window_fits_and_agrees_with_the_whole_dump(
            signals in 1usize..6,
            steps in proptest::collection::vec((0u16..50, 0usize..8, 0u8..16), 0..400),
            focus in 0u64..20_000,
            max in 200usize..4000,
        ) {
            let text = random_dump(signals, &steps);
            let Some(w) = window(&text, focus, max) else { return Ok(()) };
            proptest::prop_assert!(w.text.len() <= max);
            let (cut, whole) = (parse(&w.text), parse(&text));
            proptest::prop_assert_eq!(&cut.signals, &whole.signals);
            for signal in &whole.signals {
                let at_from = |v: &Vcd| v.changes_of(&signal.code).filter(|c| c.time <= w.from).last().map(|c| c.value.clone());
                proptest::prop_assert_eq!(at_from(&cut), at_from(&whole), "{} at {}", signal.name, w.from);
            }
            let span = |v: &Vcd| v.changes.iter().filter(|c| c.time > w.from && c.time <= w.to).cloned().collect::<Vec<_>>();
            proptest::prop_assert!(span(&cut) == span(&whole));
        }
    }
}
