//! Property tests: the PCF and bitstream parsers are total (never panic) and keep their promises
//! on generated input.

use openqq_fpga::{bitstream, pcf, Severity};
use proptest::prelude::*;

/// A real lp384 bitstream made by nextpnr-ice40 and icepack (see `fixtures/bad/generate.sh`).
const GOOD_BIN: &[u8] = include_bytes!("../fixtures/bad/cases/good_lp384_bitstream.bin");

/// Words PCF lines are made of, including every keyword and option nextpnr knows.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("set_io".to_owned()),
        Just("set_frequency".to_owned()),
        Just("-nowarn".to_owned()),
        Just("-pullup".to_owned()),
        Just("-pullup_resistor".to_owned()),
        Just("yes".to_owned()),
        Just("10K".to_owned()),
        Just("#".to_owned()),
        "[a-z]{1,4}(\\[[0-9]\\])?",
        "[A-T][0-9]{1,2}",
        "-?[0-9]{0,3}\\.?[0-9]{0,2}(e[0-9]{1,3})?",
        "\\PC{0,3}",
    ]
}

fn pcf_text() -> impl Strategy<Value = String> {
    let line = prop::collection::vec(word(), 0..6).prop_map(|w| w.join(" "));
    prop::collection::vec(line, 0..12).prop_map(|l| l.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn pcf_parsing_never_panics_on_arbitrary_text(text in "\\PC*") {
        let _ = pcf::parse(&text, None);
    }

    #[test]
    fn pcf_findings_point_at_existing_lines(text in pcf_text()) {
        let (_, findings) = pcf::parse(&text, Some("x.pcf"));
        let lines = text.lines().count() as u32;
        for f in findings {
            let line = f.location.line.expect("every PCF finding has a line");
            prop_assert!((1..=lines).contains(&line), "line {line} of {lines}");
            prop_assert_eq!(f.location.file.as_deref(), Some("x.pcf"));
        }
    }

    #[test]
    fn well_formed_set_io_lines_parse_back_exactly(
        entries in prop::collection::vec(("[a-z][a-z0-9_]{0,6}(\\[[0-9]{1,2}\\])?", "[A-T][0-9]{1,2}|[0-9]{1,3}", any::<bool>()), 0..10)
    ) {
        let text: String = entries
            .iter()
            .map(|(port, pin, nowarn)| format!("set_io {}{port} {pin} # note\n", if *nowarn { "-nowarn " } else { "" }))
            .collect();
        let (parsed, findings) = pcf::parse(&text, None);
        prop_assert!(findings.is_empty());
        prop_assert_eq!(parsed.ios.len(), entries.len());
        for (io, (port, pin, nowarn)) in parsed.ios.iter().zip(&entries) {
            prop_assert_eq!((&io.port, &io.pin, io.nowarn), (port, pin, *nowarn));
        }
    }

    #[test]
    fn bitstream_parsing_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = bitstream::check(&bytes, Some("8k"), None);
    }

    #[test]
    fn bitstream_parsing_never_panics_after_the_sync_word(tail in prop::collection::vec(any::<u8>(), 0..2048)) {
        let mut bytes = vec![0xFF, 0x00, 0x00, 0xFF, 0x7E, 0xAA, 0x99, 0x7E];
        bytes.extend(tail);
        let _ = bitstream::parse(&bytes);
    }

    #[test]
    fn any_single_byte_change_in_the_crc_covered_part_is_caught_or_harmless(index in 12usize..GOOD_BIN.len() - 1, value in any::<u8>()) {
        let mut bytes = GOOD_BIN.to_vec();
        bytes[index] = value;
        if let Ok(bits) = bitstream::parse(&bytes) {
            // Every byte from the CRC reset on is covered by the check, so a changed file can
            // only pass if the change turned the check command itself into something else.
            prop_assert_eq!(bits.die, "384");
            prop_assert!(value == GOOD_BIN[index] || bits.crc_checks == 0, "byte {index} set to {value:#04x} passed the CRC");
        }
    }

    #[test]
    fn every_truncation_of_a_good_bitstream_is_an_error(len in 0usize..GOOD_BIN.len() - 1) {
        let findings = bitstream::check(&GOOD_BIN[..len], Some("384"), None);
        prop_assert!(findings.iter().any(|f| f.severity == Severity::Error));
    }
}

#[test]
fn the_good_fixture_bitstream_passes_for_its_own_die() {
    assert!(bitstream::check(GOOD_BIN, Some("384"), None).is_empty());
}
