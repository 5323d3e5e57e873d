//! `openqq design show --waveform`: a failing testbench's waveform drawn as text. The signals of
//! the testbench's top scope (the first [`MAX_SIGNALS`]) over the dump's window, one column per
//! slice of time: scalars as `_` and `‾` with `/` and `\` at their edges (`x`, `z` as such),
//! vectors as `|` and their value in hex at each change, and a `^` under the first failure.

use crate::design_format::human_time;
use openqq_hdl::vcd::Vcd;
use std::fmt::Write as _;

/// Signals drawn at most; the rest are counted.
pub const MAX_SIGNALS: usize = 16;

/// The dump `vcd` (in units of `timescale`) drawn in `columns` columns, with the failure at
/// `failure` marked.
pub fn draw(vcd: &Vcd, timescale: &str, failure: u64, columns: usize) -> String {
    let columns = columns.max(8);
    let start = vcd.changes.iter().map(|c| c.time).min().unwrap_or(0);
    let end = vcd.end.max(failure).max(start + 1);
    let step = nice((end - start).div_ceil(columns as u64));
    // A round step may need fewer columns than asked for; none is drawn past the dump's end.
    let columns = (((end - start) / step) as usize + 1).min(columns);
    let shown: Vec<_> = vcd.signals.iter().filter(|s| s.depth() == 1).collect();
    let width = shown.iter().take(MAX_SIGNALS).map(|s| label(s).chars().count()).max().unwrap_or(0);
    let mut out = format!(
        "Waveform from {} to {} ({} a column):\n",
        human_time(start, timescale),
        human_time(end, timescale),
        human_time(step, timescale)
    );
    for signal in shown.iter().take(MAX_SIGNALS) {
        // The value at the start of each column: the last change at or before it.
        let mut changes = vcd.changes_of(&signal.code).peekable();
        let mut value: Option<&str> = None;
        let samples: Vec<Option<&str>> = (0..columns as u64)
            .map(|c| {
                let at = start + c * step;
                while let Some(next) = changes.next_if(|ch| ch.time <= at) {
                    value = Some(&next.value);
                }
                value
            })
            .collect();
        let row = match signal.width == 1 && signal.kind != "real" {
            true => scalar(&samples),
            false => vector(&samples, signal.width as usize),
        };
        let _ = writeln!(out, "  {:<width$}  {}", label(signal), row.trim_end());
    }
    if shown.len() > MAX_SIGNALS {
        let _ = writeln!(out, "  (and {} more signals of the top scope)", shown.len() - MAX_SIGNALS);
    }
    let at = (failure.saturating_sub(start) / step).min(columns as u64 - 1) as usize;
    let _ = writeln!(out, "  {:<width$}  {}^ first failure, {}", "", " ".repeat(at), human_time(failure, timescale));
    out
}

/// The smallest of 1, 2 and 5 times a power of ten at least `step` (and at least 1), so each
/// column is a round span of time.
fn nice(step: u64) -> u64 {
    let mut power = 1u64;
    loop {
        for m in [1, 2, 5] {
            match power.checked_mul(m) {
                Some(n) if n >= step => return n,
                Some(_) => {}
                None => return u64::MAX,
            }
        }
        power = match power.checked_mul(10) {
            Some(p) => p,
            None => return u64::MAX,
        };
    }
}

/// The signal's name without its scope, with its bit range when wider than one bit.
fn label(s: &openqq_hdl::vcd::Signal) -> String {
    let name = s.name.rsplit('.').next().unwrap_or(&s.name);
    match s.width {
        w if w > 1 && s.kind != "real" && s.kind != "integer" => format!("{name}[{}:0]", w - 1),
        _ => name.to_owned(),
    }
}

/// A one-bit signal: `_` low, `‾` high, `/` and `\` on the column it rises or falls, `x`, `z`.
fn scalar(samples: &[Option<&str>]) -> String {
    let mut out = String::new();
    let mut before = None;
    for &v in samples {
        out.push(match (before, v) {
            (_, None) => ' ',
            (Some("0"), Some("1")) => '/',
            (Some("1"), Some("0")) => '\\',
            (_, Some("1")) => '‾',
            (_, Some("0")) => '_',
            (_, Some(other)) => other.chars().next().unwrap_or('?'),
        });
        before = v;
    }
    out
}

/// A vector: `|` where its value changes, then the value in hex for as many columns as it lasts.
fn vector(samples: &[Option<&str>], width: usize) -> String {
    let mut out = Vec::with_capacity(samples.len());
    let mut pending: Vec<char> = Vec::new();
    let mut before = None;
    for &v in samples {
        if v != before {
            pending = v.map_or(Vec::new(), |v| hex(v, width).chars().collect());
            pending.reverse();
            out.push('|');
        } else {
            out.push(pending.pop().unwrap_or(' '));
        }
        before = v;
    }
    out.into_iter().collect()
}

/// Bits of a `width`-bit vector as hex (`10` of 8 bits → `02`): the dump leaves out leading bits,
/// which extend as VCD says (`x` and `z` extend themselves, anything else with `0`); a nibble
/// holding `x` or `z` prints as that letter; anything that is not bits (a real) as it is.
fn hex(bits: &str, width: usize) -> String {
    if bits.is_empty() || !bits.chars().all(|c| matches!(c, '0' | '1' | 'x' | 'X' | 'z' | 'Z')) {
        return bits.to_owned();
    }
    let lead = match bits.as_bytes()[0] {
        b @ (b'x' | b'X' | b'z' | b'Z') => b as char,
        _ => '0',
    };
    let width = width.clamp(bits.len(), 4096);
    let full = width.div_ceil(4) * 4;
    let padded = format!("{}{bits}", lead.to_string().repeat(full - bits.len()));
    padded
        .as_bytes()
        .chunks(4)
        .map(|nibble| {
            let text = std::str::from_utf8(nibble).unwrap_or("xxxx").to_ascii_lowercase();
            if text.contains('x') {
                'x'
            } else if text.contains('z') {
                'z'
            } else {
                char::from_digit(u32::from_str_radix(&text, 2).unwrap_or(0), 16).unwrap_or('?')
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "$timescale 1ps $end\n$scope module tb $end\n$var reg 1 ! clk $end\n\
        $var wire 8 \" count [7:0] $end\n$scope module dut $end\n$var reg 1 # en $end\n$upscope $end\n\
        $upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nbx \"\n0#\n$end\n#5000\n1!\nb0 \"\n\
        #10000\n0!\n#15000\n1!\nb10 \"\n#20000\n0!\n";

    #[test]
    fn scalars_draw_edges_and_vectors_their_hex_values_with_the_failure_marked() {
        let vcd = openqq_hdl::vcd::parse(DUMP);
        let drawn = draw(&vcd, "1ps", 15000, 10);
        let lines: Vec<&str> = drawn.lines().collect();
        assert_eq!(lines[0], "Waveform from 0 ps to 20 ns (2 ns a column):");
        assert_eq!(lines[1], "  clk         ___/‾\\__/‾");
        assert_eq!(lines[2], "  count[7:0]  |xx|00  |0", "a value is cut where the columns end");
        assert_eq!(lines[3], "                     ^ first failure, 15 ns");
        assert_eq!(lines.len(), 4, "only the top scope's signals: {drawn}");
    }

    #[test]
    fn columns_are_round_spans_of_time() {
        let spans: Vec<u64> = [0, 1, 3, 626, 2500, 7000, u64::MAX].into_iter().map(nice).collect();
        assert_eq!(spans, [1, 1, 5, 1000, 5000, 10_000, u64::MAX]);
    }

    #[test]
    fn hex_reads_bits_unknowns_and_anything_else() {
        assert_eq!(hex("10", 8), "02");
        assert_eq!(hex("100000010", 9), "102");
        assert_eq!(hex("x0000001", 8), "x1");
        assert_eq!(hex("x", 8), "xx");
        assert_eq!(hex("zzzz", 4), "z");
        assert_eq!(hex("1.5", 64), "1.5");
        assert_eq!(hex("101", 1), "5", "a width narrower than the bits given is the bits'");
    }

    #[test]
    fn an_empty_dump_still_draws_its_marker() {
        let drawn = draw(&Vcd::default(), "1ns", 0, 0);
        assert!(drawn.ends_with("^ first failure, 0 ns\n"), "{drawn}");
    }
}
