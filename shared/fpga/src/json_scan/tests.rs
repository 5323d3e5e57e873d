//! Unit and property tests for the JSON scanner: it must accept exactly what serde_json accepts.

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

proptest! {
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
