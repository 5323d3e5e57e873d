//! Unit and property tests for the JSON scanner: it must accept exactly what serde_json accepts.

use super::quick::{special, Specials};
use super::*;
use proptest::prelude::*;

fn accepts(text: &str) -> bool {
    let mut s = Scanner::new(text);
    s.skip().is_ok() && s.finish().is_ok()
}

fn serde_accepts(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

#[test]
fn well_formed_documents_are_accepted_and_strings_decoded() {
    for text in ["{}", "[]", " {\"a\" : [1, -2.5e3, true, false, null, \"x\\n\\u00e9\\ud83d\\ude00\"]} ", "0", "\"\""] {
        assert!(accepts(text), "{text}");
    }
    let mut s = Scanner::new(r#""a\"b\u00e9\ud83d\ude00""#);
    assert_eq!(s.string().unwrap(), "a\"bé😀");
    let mut s = Scanner::new(r#""plain words that are long enough for the fast path""#);
    assert!(matches!(s.string().unwrap(), Cow::Borrowed("plain words that are long enough for the fast path")));
}

#[test]
fn malformed_documents_are_rejected() {
    for text in [
        "",
        "{",
        "[1,]",
        "{\"a\"}",
        "{\"a\":1,}",
        "01",
        "1.",
        "-",
        "1e",
        "tru",
        "\"\\x\"",
        "\"\\ud800\"",
        "\"a\u{1}\"",
        "[1 2]",
        "{} {}",
        &"[".repeat(200),
    ] {
        assert!(!accepts(text), "{text:?}");
    }
}

#[test]
fn error_lines_count_from_one() {
    let text = "{\n\n  \"a\": ?}";
    let mut s = Scanner::new(text);
    let e = s.skip().unwrap_err();
    assert_eq!(e.line(text), 3);
}

fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

#[test]
fn the_word_mask_marks_exactly_the_special_bytes_whatever_their_neighbours() {
    for c in 0..=255u8 {
        for neighbour in [0u8, 0x01, 0x1F, 0x20, b'"', b'#', b'\\', b']', 0x7F, 0x80, 0xFF] {
            for at in 0..8 {
                let mut bytes = [neighbour; 8];
                bytes[at] = c;
                let marks = special(u64::from_le_bytes(bytes));
                for (i, b) in bytes.iter().enumerate() {
                    assert_eq!(marks >> (8 * i + 7) & 1 == 1, is_special(*b), "{bytes:?} byte {i}");
                }
                assert_eq!(marks & !0x8080_8080_8080_8080, 0);
            }
        }
    }
}

proptest! {
    #[test]
    fn the_block_masks_find_the_next_special_byte_as_a_byte_by_byte_search_does(
        text in proptest::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), Just(1u8), Just(b'a'), Just(0xC3)], 0..300),
        starts in proptest::collection::vec(0usize..320, 1..20),
    ) {
        let mut specials = Specials::new();
        for from in starts.into_iter().filter(|f| *f <= text.len()) {
            let naive = text[from..].iter().position(|c| is_special(*c)).map_or(text.len(), |i| from + i);
            prop_assert_eq!(specials.next(&text, from), naive);
        }
    }


    #[test]
    fn the_scanner_accepts_exactly_what_serde_json_accepts(text in "[\\[\\]{}\":,0-9eE.+\\-a-z\\\\ \n]{0,40}") {
        prop_assert_eq!(accepts(&text), serde_accepts(&text), "{:?}", text);
    }

    #[test]
    fn mangled_real_json_is_judged_like_serde_json(at in 0usize..200, with in "[\\[\\]{}\":,0-9a-z\\\\]{0,3}") {
        let mut text = r#"{"modules": {"top": {"attributes": {"top": "1", "src": "a\\b.v:1"}, "ports": {"clk": {"direction": "input", "bits": [2, "x"]}}, "cells": {}}}, "n": [-1.5e-3, true, null]}"#.to_owned();
        let at = at % text.len();
        text.replace_range(at..at + 1, &with);
        prop_assert_eq!(accepts(&text), serde_accepts(&text), "{:?}", text);
    }
}

/// Found by the `netlist` fuzz target (fuzz/): a net number of ten digits overflowed the scanner's
/// `u32` before it was refused, a panic wherever overflow checks are on.
#[test]
fn a_ten_digit_net_number_is_read_without_overflow() {
    let mut s = Scanner::new("4294967296]");
    assert_eq!(s.small_unsigned(), None);
    let text = include_str!("../../fixtures/fuzz/netlist-ten-digit-bit.json");
    let _ = crate::netlist::parse(text, None);
}

#[test]
fn every_byte_value_at_every_place_of_a_block_is_found_exactly_when_it_is_special() {
    for value in 0..=255u8 {
        for at in 0..128 {
            let mut text = [b'a'; 160];
            text[at] = value;
            let expected = if is_special(value) { at } else { text.len() };
            assert_eq!(Specials::new().next(&text, 0), expected, "byte {value:#04x} at {at}");
        }
    }
}
