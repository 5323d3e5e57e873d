use super::*;
use crate::Severity;

fn errors(text: &str) -> Vec<String> {
    let (_, findings) = parse(text, Some("top.lpf"));
    findings.into_iter().filter(|f| f.severity == Severity::Error).map(|f| f.message).collect()
}

fn warnings(text: &str) -> Vec<String> {
    let (_, findings) = parse(text, None);
    findings.into_iter().filter(|f| f.severity == Severity::Warning).map(|f| f.message).collect()
}

#[test]
fn locate_comp_reads_the_port_and_the_site_with_or_without_quotes() {
    let (lpf, findings) = parse("LOCATE COMP \"clk\" SITE \"P6\";\nLOCATE COMP led[0] SITE B2;\n", None);
    assert!(findings.is_empty(), "{findings:?}");
    let got: Vec<(&str, &str, u32)> =
        lpf.locates.iter().map(|l| (l.comp.as_str(), l.site().unwrap(), l.at.line)).collect();
    assert_eq!(got, [("clk", "P6", 1), ("led[0]", "B2", 2)]);
}

#[test]
fn iobuf_port_keeps_its_attributes_in_order() {
    let (lpf, findings) = parse("IOBUF PORT \"clk\" IO_TYPE=LVCMOS33 PULLMODE=UP;", None);
    assert!(findings.is_empty());
    let attrs: Vec<(&str, &str)> = lpf.iobufs[0].attributes().unwrap().into_iter().map(|(k, v, _)| (k, v)).collect();
    assert_eq!(lpf.iobufs[0].port, "clk");
    assert_eq!(attrs, [("IO_TYPE", "LVCMOS33"), ("PULLMODE", "UP")]);
}

#[test]
fn an_iobuf_attribute_without_equals_is_reported_where_it_is() {
    let (lpf, _) = parse("IOBUF PORT \"clk\" IO_TYPE=LVCMOS33 FAST;", None);
    let (message, at) = lpf.iobufs[0].attributes().unwrap_err();
    assert!(message.contains("'FAST'"), "{message}");
    assert_eq!((at.line, at.column), (1, 35));
}

#[test]
fn frequency_takes_port_or_net_and_converts_mhz_khz_and_hz() {
    let text = "FREQUENCY PORT \"clk\" 25 MHZ;\nFREQUENCY NET clk_int 12000 kHz;\nFREQUENCY PORT x 1e6 Hz;";
    let (lpf, findings) = parse(text, None);
    assert!(findings.is_empty(), "{findings:?}");
    let got: Vec<(FrequencyOf, &str, f64)> = lpf.frequencies.iter().map(|f| (f.of, f.name.as_str(), f.mhz)).collect();
    assert_eq!(
        got,
        [(FrequencyOf::Port, "clk", 25.0), (FrequencyOf::Net, "clk_int", 12.0), (FrequencyOf::Port, "x", 1.0)]
    );
}

#[test]
fn comments_with_hash_or_double_slash_are_ignored_even_mid_line() {
    let text = "# a comment\n// another\nLOCATE COMP \"a\" SITE \"B2\"; # trailing\nLOCATE COMP \"b\" SITE \"C3\"; // trailing\n";
    let (lpf, findings) = parse(text, None);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(lpf.locates.len(), 2);
}

#[test]
fn a_statement_may_span_lines_and_a_line_may_hold_several() {
    let (lpf, findings) = parse("LOCATE COMP \"a\"\n  SITE \"B2\"; LOCATE COMP \"b\" SITE \"C3\";", None);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(lpf.locates.iter().map(|l| l.comp.as_str()).collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn sysconfig_and_block_statements_are_accepted() {
    let text = "SYSCONFIG CONFIG_IOVOLTAGE=3.3 COMPRESS_CONFIG=ON;\nBLOCK RESETPATHS;\nBLOCK ASYNCPATHS;\n";
    let (_, findings) = parse(text, None);
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn an_unknown_sysconfig_key_is_an_error_at_its_column() {
    let (_, findings) = parse("SYSCONFIG MCCLK_FREQ=38.8 NOPE=1;", Some("top.lpf"));
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, "LPF_SYNTAX");
    assert_eq!(findings[0].location.line, Some(1));
    assert_eq!(findings[0].location.file.as_deref(), Some("top.lpf"));
    assert!(
        findings[0].message.starts_with("line 1, column 27: unexpected SYSCONFIG key 'NOPE'"),
        "{}",
        findings[0].message
    );
}

#[test]
fn syntax_errors_name_the_line_and_column_of_the_word() {
    let cases = [
        ("LOCATE COMP \"a\" SITE;", "line 1, column 21: expected syntax 'LOCATE COMP"),
        ("\n\nLOCATE PORT \"a\" SITE \"B2\";", "line 3, column 8: expected 'COMP' after 'LOCATE'"),
        ("LOCATE COMP \"a\" AT \"B2\";", "line 1, column 17: expected 'SITE'"),
        ("LOCATE COMP \"a\" SITE \"B2\" extra;", "line 1, column 27: unexpected input following"),
        ("LOCATE COMP \"a SITE \"B2\";", "line 1, column 13: expected '\"' at end of string '\"a'"),
        ("IOBUF \"a\" IO_TYPE=LVCMOS33;", "line 1, column 7: expected 'PORT' after 'IOBUF'"),
        ("IOBUF PORT;", "line 1, column 11: expected syntax 'IOBUF PORT"),
        ("FREQUENCY;", "line 1, column 10: expected PORT or NET"),
        ("FREQUENCY PORT \"clk\";", "line 1, column 21: expected a name, a frequency value and a unit"),
        ("FREQUENCY PORT \"clk\" fast MHZ;", "line 1, column 22: 'fast' is not a frequency value"),
        ("FREQUENCY PORT \"clk\" 25MHZ;", "line 1, column 27: expected a unit"),
        ("FREQUENCY PORT \"clk\" 25 GHZ;", "line 1, column 25: unsupported frequency unit 'GHZ'"),
        ("LOCATE COMP \"a\" SITE \"B2\"", "line 1, column 1: unexpected end of LPF file"),
    ];
    for (text, want) in cases {
        let got = errors(text);
        assert_eq!(got.len(), 1, "{text}: {got:?}");
        assert!(got[0].starts_with(want), "{text}: {} does not start with {want}", got[0]);
    }
}

#[test]
fn a_frequency_with_its_unit_attached_reads_the_number_as_nextpnr_does_but_still_lacks_a_unit() {
    assert_eq!(float_prefix("25MHZ"), Some(25.0));
    assert_eq!(float_prefix("12.5"), Some(12.5));
    assert_eq!(float_prefix("-3e2x"), Some(-300.0));
    assert_eq!(float_prefix("MHZ"), None);
    assert_eq!(float_prefix("1e99"), None);
}

#[test]
fn statements_nextpnr_skips_are_warnings_and_name_the_keyword_when_only_its_case_is_wrong() {
    let got =
        warnings("locate COMP \"a\" SITE \"B2\";\nUSE PRIMARY NET \"clk\";\nBLOCK PATH x;\nFREQUENCY FROM a 1 MHZ;");
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got[0].contains("keywords are case-sensitive: 'LOCATE'"), "{}", got[0]);
    assert!(got[1].contains("'USE'"), "{}", got[1]);
    assert!(got[2].contains("BLOCK"), "{}", got[2]);
    assert!(got[3].contains("FREQUENCY FROM"), "{}", got[3]);
}

#[test]
fn a_malformed_site_is_kept_for_the_checks_which_report_it_only_for_a_real_port() {
    let (lpf, findings) = parse("LOCATE COMP \"a\" SITE \"B2;", None);
    assert!(findings.is_empty());
    assert!(lpf.locates[0].site().is_err());
}

#[test]
fn empty_and_blank_input_parse_to_nothing() {
    for text in ["", "\n\n", "   \t\r\n", ";;;", "# only a comment"] {
        let (lpf, findings) = parse(text, None);
        assert_eq!(lpf, Lpf::default());
        assert!(findings.is_empty(), "{text:?}: {findings:?}");
    }
}

#[test]
fn a_lone_quote_names_the_empty_string_as_in_nextpnr() {
    assert_eq!(strip_quotes("\""), Ok(""));
    assert_eq!(strip_quotes("\"\""), Ok(""));
    assert_eq!(strip_quotes("x\""), Ok("x\""));
}

mod properties {
    use super::super::*;
    use proptest::prelude::*;

    /// Words LPF statements are made of, including every keyword nextpnr-ecp5 reads.
    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("LOCATE".to_owned()),
            Just("COMP".to_owned()),
            Just("SITE".to_owned()),
            Just("IOBUF".to_owned()),
            Just("PORT".to_owned()),
            Just("NET".to_owned()),
            Just("FREQUENCY".to_owned()),
            Just("SYSCONFIG".to_owned()),
            Just("BLOCK".to_owned()),
            Just("MHZ".to_owned()),
            Just(";".to_owned()),
            Just("\"".to_owned()),
            Just("//".to_owned()),
            Just("#".to_owned()),
            "\"?[a-z]{1,4}(\\[[0-9]\\])?\"?",
            "[A-Z_]{1,8}=[A-Z0-9]{0,4}",
            "-?[0-9]{0,3}\\.?[0-9]{0,2}(e[0-9]{1,3})?",
            "\\PC{0,3}",
        ]
    }

    fn lpf_text() -> impl Strategy<Value = String> {
        let line = prop::collection::vec(word(), 0..8).prop_map(|w| w.join(" "));
        prop::collection::vec(line, 0..12).prop_map(|l| l.join("\n"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn lpf_parsing_never_panics_on_arbitrary_text(text in "\\PC*") {
            let _ = parse(&text, None);
        }

        #[test]
        fn every_finding_points_at_a_line_and_column_of_the_text(text in lpf_text()) {
            let (_, findings) = parse(&text, Some("x.lpf"));
            let lines: Vec<&str> = text.split('\n').collect();
            for f in &findings {
                prop_assert_eq!(f.location.file.as_deref(), Some("x.lpf"));
                let line = f.location.line.expect("a line") as usize;
                prop_assert!(line >= 1 && line <= lines.len(), "line {} of {}", line, lines.len());
                let column: usize = f.message
                    .strip_prefix(&format!("line {line}, column "))
                    .and_then(|rest| rest.split(':').next())
                    .and_then(|c| c.parse().ok())
                    .expect("the message starts with the line and column");
                prop_assert!(column >= 1 && column <= lines[line - 1].len() + 1, "column {} of {:?}", column, lines[line - 1]);
            }
        }
    }
}
