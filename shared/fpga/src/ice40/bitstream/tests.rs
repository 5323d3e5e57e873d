//! Unit tests for the bitstream parser, on bitstreams built here the way icepack writes them.

use super::*;

/// Writes a bitstream of zeroed banks with icepack's command sequence (for the dies without
/// UltraPlus-style uneven banks), with a correct CRC.
fn build(cram: (u32, u32), bram: Option<(u32, u32)>) -> Vec<u8> {
    let mut out = vec![0xFF, 0x00, b'h', b'i', 0x00, 0x00, 0xFF, 0x7E, 0xAA, 0x99, 0x7E, 0x51, 0x00, 0x01, 0x05];
    let crc_from = out.len();
    let push16 = |out: &mut Vec<u8>, cmd: u8, v: u32| out.extend([cmd, (v >> 8) as u8, v as u8]);
    push16(&mut out, 0x92, 0x20);
    push16(&mut out, 0x62, cram.0 - 1);
    push16(&mut out, 0x72, cram.1);
    push16(&mut out, 0x82, 0);
    for bank in 0..4u8 {
        out.extend([0x11, bank, 0x01, 0x01]);
        out.extend(std::iter::repeat_n(0u8, (cram.0 * cram.1 / 8) as usize + 2));
    }
    if let Some((w, h)) = bram {
        push16(&mut out, 0x62, w - 1);
        push16(&mut out, 0x72, 128);
        for bank in 0..4u8 {
            out.extend([0x11, bank]);
            for offset in (0..h).step_by(128) {
                push16(&mut out, 0x82, offset);
                out.extend([0x01, 0x03]);
                out.extend(std::iter::repeat_n(0u8, (w * 128 / 8) as usize + 2));
            }
        }
    }
    out.push(0x22);
    let crc = out[crc_from..].iter().fold(0xFFFF, |crc, b| crc16_update(crc, *b));
    out.extend(crc.to_be_bytes());
    out.extend([0x01, 0x06, 0x00]);
    out
}

fn hx8k() -> Vec<u8> {
    build((872, 272), Some((128, 256)))
}

fn error_code(bytes: &[u8]) -> &'static str {
    parse(bytes).expect_err("the bitstream should be rejected").code
}

#[test]
fn crc16_matches_the_ccitt_false_check_value() {
    let crc = b"123456789".iter().fold(0xFFFF, |crc, b| crc16_update(crc, *b));
    assert_eq!(crc, 0x29B1);
}

#[test]
fn a_well_formed_hx8k_bitstream_is_detected_as_the_8k_die() {
    let bits = parse(&hx8k()).unwrap();
    assert_eq!(bits.die, "8k");
    assert_eq!(bits.crc_checks, 1);
    assert_eq!(bits.comments, vec!["hi".to_owned()]);
    assert_eq!(bits.trailing_bytes, 1);
    assert!(check(&hx8k(), Some("8k"), None).is_empty());
}

#[test]
fn an_lp384_bitstream_without_block_ram_is_detected_as_the_384_die() {
    assert_eq!(parse(&build((182, 80), None)).unwrap().die, "384");
}

#[test]
fn a_bitstream_for_another_die_is_a_device_mismatch() {
    let findings = check(&build((332, 144), Some((64, 256))), Some("8k"), Some("a.bin"));
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, "BITSTREAM_DEVICE_MISMATCH");
    assert_eq!(findings[0].location.file.as_deref(), Some("a.bin"));
}

#[test]
fn every_truncation_is_reported_as_truncated_or_malformed_never_accepted() {
    let full = build((182, 80), None);
    for len in 0..full.len() - 1 {
        let code = error_code(&full[..len]);
        let expected = if len < 11 { "BITSTREAM_MALFORMED" } else { "BITSTREAM_TRUNCATED" };
        assert_eq!(code, expected, "truncated to {len} bytes");
    }
}

#[test]
fn a_missing_sync_word_is_malformed() {
    let mut bits = hx8k();
    bits[9] = 0x98;
    assert_eq!(error_code(&bits), "BITSTREAM_MALFORMED");
}

#[test]
fn four_ff_bytes_before_the_sync_word_are_malformed_like_icepack_says() {
    let mut bits = vec![0xFF; 4];
    bits.extend(hx8k());
    assert_eq!(error_code(&bits), "BITSTREAM_MALFORMED");
}

#[test]
fn a_flipped_data_bit_fails_the_crc() {
    let mut bits = hx8k();
    bits[5000] ^= 0x10;
    let err = parse(&bits).unwrap_err();
    assert_eq!(err.code, "BITSTREAM_CRC_MISMATCH");
    assert!(err.offset > 5000);
}

#[test]
fn an_unknown_opcode_is_an_unknown_command() {
    let mut bits = hx8k();
    bits[11] = 0x31;
    assert_eq!(error_code(&bits), "BITSTREAM_UNKNOWN_COMMAND");
}

#[test]
fn an_unknown_opcode_zero_subcommand_is_an_unknown_command() {
    let mut bits = hx8k();
    bits[14] = 0x08;
    assert_eq!(error_code(&bits), "BITSTREAM_UNKNOWN_COMMAND");
}

#[test]
fn a_bank_width_of_no_known_die_is_a_size_mismatch() {
    let mut bits = hx8k();
    // The CRAM width command is the second after the CRC reset: 92 00 20, then 62 03 67.
    assert_eq!(&bits[18..21], &[0x62, 0x03, 0x67]);
    bits[20] = 0x68;
    assert_eq!(error_code(&bits), "BITSTREAM_SIZE_MISMATCH");
}

#[test]
fn a_non_zero_end_token_after_bank_data_is_malformed() {
    let mut bits = build((182, 80), None);
    let first_end_token = 15 + 12 + 4 + 182 * 80 / 8;
    assert_eq!(&bits[first_end_token..first_end_token + 2], &[0, 0]);
    bits[first_end_token] = 1;
    assert_eq!(error_code(&bits), "BITSTREAM_MALFORMED");
}

#[test]
fn a_bitstream_without_a_crc_check_passes_with_a_warning() {
    let mut bits = build((182, 80), None);
    let n = bits.len();
    bits.drain(n - 6..n - 3);
    let findings = check(&bits, Some("384"), None);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].severity, crate::report::Severity::Warning);
}

#[test]
fn arbitrary_garbage_is_rejected_without_panicking() {
    for seed in 0u32..200 {
        let junk: Vec<u8> = (0..seed * 7).map(|i| (i.wrapping_mul(2_654_435_761) >> (seed % 24)) as u8).collect();
        assert!(parse(&junk).is_err());
    }
}
