//! `inv_25f_compressed.bit` is an inverter placed and routed for the LFE5U-25F in CABGA256 by
//! nextpnr-ecp5 and packed by Trellis's `ecppack --compress` (a `.bit` header, the compression
//! dictionary, compressed frames, USERCODE and DONE).

use super::*;
use crate::ecp5::device::device;

const GOOD: &[u8] = include_bytes!("inv_25f_compressed.bit");

fn codes(bytes: &[u8], part: &str) -> Vec<String> {
    check(bytes, device(part).unwrap(), Some("top.bit")).into_iter().map(|f| f.code).collect()
}

#[test]
fn a_bitstream_from_ecppack_passes_for_its_own_part() {
    assert_eq!(codes(GOOD, "LFE5U-25F"), Vec::<String>::new());
}

#[test]
fn a_bitstream_for_another_part_names_both_idcodes() {
    let findings = check(GOOD, device("LFE5U-45F").unwrap(), None);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, "BITSTREAM_DEVICE_MISMATCH");
    assert!(findings[0].message.contains("0x41111043 (the LFE5U-25F)"), "{}", findings[0].message);
    assert!(findings[0].message.contains("LFE5U-45F (0x41112043)"), "{}", findings[0].message);
}

#[test]
fn a_truncated_bitstream_is_reported() {
    for cut in [GOOD.len() / 2, GOOD.len() - 40, 60] {
        let got = codes(&GOOD[..cut], "LFE5U-25F");
        assert!(got == ["BITSTREAM_TRUNCATED"] || got == ["BITSTREAM_NO_DONE"], "cut at {cut}: {got:?}");
    }
}

#[test]
fn a_bitstream_cut_at_a_command_boundary_before_done_is_a_warning() {
    // The stream ends with ISC_PROGRAM_DONE (5E 00 00 00) and dummy bytes.
    let done = GOOD.windows(4).rposition(|w| w == [0x5E, 0, 0, 0]).expect("ecppack writes DONE");
    assert_eq!(codes(&GOOD[..done], "LFE5U-25F"), ["BITSTREAM_NO_DONE"]);
}

#[test]
fn a_flipped_bit_in_the_frames_fails_the_crc() {
    let mut bad = GOOD.to_vec();
    let middle = bad.len() / 2;
    bad[middle] ^= 0x10;
    let got = codes(&bad, "LFE5U-25F");
    // A flipped bit in compressed data may also change how many bytes the frame takes.
    assert!(
        got == ["BITSTREAM_CRC_MISMATCH"] || got == ["BITSTREAM_TRUNCATED"] || got == ["BITSTREAM_COMMAND_UNKNOWN"],
        "{got:?}"
    );
}

#[test]
fn a_missing_preamble_or_a_foreign_file_is_reported() {
    let mut no_preamble = GOOD.to_vec();
    let at = no_preamble.windows(4).position(|w| w == PREAMBLE).unwrap();
    no_preamble[at + 2] = 0;
    assert_eq!(codes(&no_preamble, "LFE5U-25F"), ["BITSTREAM_PREAMBLE_MISSING"]);
    assert_eq!(codes(b"PK\x03\x04 a zip file", "LFE5U-25F"), ["BITSTREAM_HEADER_INVALID"]);
    assert_eq!(codes(b"\xFF\x00never ending header", "LFE5U-25F"), ["BITSTREAM_HEADER_INVALID"]);
}

#[test]
fn frames_before_the_idcode_and_unknown_commands_are_errors() {
    let frames_first = [0xFF, 0xFF, 0xBD, 0xB3, 0x82, 0x91, 0x00, 0x01];
    assert_eq!(codes(&frames_first, "LFE5U-25F"), ["BITSTREAM_NO_IDCODE"]);
    let unknown = [0xFF, 0xFF, 0xBD, 0xB3, 0xE2, 0, 0, 0, 0x41, 0x11, 0x10, 0x43, 0x99, 0, 0, 0];
    assert_eq!(codes(&unknown, "LFE5U-25F"), ["BITSTREAM_COMMAND_UNKNOWN"]);
    let no_id = [0xFF, 0xFF, 0xBD, 0xB3, 0xFF, 0xFF];
    assert_eq!(codes(&no_id, "LFE5U-25F"), ["BITSTREAM_NO_IDCODE"]);
}

#[test]
fn more_frames_than_the_part_has_is_an_error() {
    let mut stream = vec![0xFF, 0xFF, 0xBD, 0xB3, 0xE2, 0, 0, 0, 0x41, 0x11, 0x10, 0x43];
    stream.extend([0x82, 0x91, 0xFF, 0xFF]);
    assert_eq!(codes(&stream, "LFE5U-25F"), ["BITSTREAM_FRAME_COUNT"]);
}
