//! ECP5 bitstream checks, on the format Project Trellis documents and reads (`libtrellis`
//! `Bitstream::read_bit` and `deserialise_chip`).
//!
//! A `.bit` file may open with a header (`0xFF 0x00`, then NUL-terminated text, then `0xFF`);
//! the configuration data starts after the preamble `FF FF BD B3` and is a stream of commands,
//! each an opcode byte with three parameter bytes and, for some, a payload. We walk that stream
//! as Trellis does and check: the preamble is there; every command is one Trellis knows; the
//! `VERIFY_ID` IDCODE is the chosen part's; frames come after it, no more of them than the part
//! has; every CRC-16 the stream asks for matches; nothing is cut off; and `ISC_PROGRAM_DONE`
//! ends the configuration. What the frames configure is not checked.
//!
//! Codes: `BITSTREAM_HEADER_INVALID`, `BITSTREAM_PREAMBLE_MISSING`, `BITSTREAM_COMMAND_UNKNOWN`,
//! `BITSTREAM_TRUNCATED`, `BITSTREAM_DEVICE_MISMATCH`, `BITSTREAM_NO_IDCODE`,
//! `BITSTREAM_FRAME_COUNT`, `BITSTREAM_CRC_MISMATCH`, `BITSTREAM_NO_DONE` (a warning).

use super::device::{self, Device};
use crate::report::{Finding, Location};

const PREAMBLE: [u8; 4] = [0xFF, 0xFF, 0xBD, 0xB3];

const DUMMY: u8 = 0xFF;
const LSC_RESET_CRC: u8 = 0x3B;
const VERIFY_ID: u8 = 0xE2;
const LSC_PROG_CNTRL0: u8 = 0x22;
const ISC_PROGRAM_DONE: u8 = 0x5E;
const ISC_PROGRAM_SECURITY: u8 = 0xCE;
const ISC_PROGRAM_USERCODE: u8 = 0xC2;
const LSC_WRITE_COMP_DIC: u8 = 0x02;
const LSC_INIT_ADDRESS: u8 = 0x46;
const LSC_PROG_INCR_CMP: u8 = 0xB8;
const LSC_PROG_INCR_RTI: u8 = 0x82;
const LSC_EBR_ADDRESS: u8 = 0xF6;
const LSC_EBR_WRITE: u8 = 0xB2;
const SPI_MODE: u8 = 0x79;
const JUMP: u8 = 0x7E;

/// Why the walk stopped: a finding's code and message.
type Stop = (&'static str, String);

/// Reads the stream as Trellis's reader does, keeping its CRC-16 (polynomial 0x8005, initial 0,
/// over every byte read except dummy opcodes).
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    crc: u16,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, Stop> {
        let Some(&b) = self.data.get(self.pos) else {
            return Err((
                "BITSTREAM_TRUNCATED",
                format!("the bitstream ends in the middle of a command (at byte {})", self.pos),
            ));
        };
        self.pos += 1;
        for i in (0..8).rev() {
            let flag = self.crc >> 15;
            self.crc = (self.crc << 1) | u16::from((b >> i) & 1);
            if flag != 0 {
                self.crc ^= 0x8005;
            }
        }
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), Stop> {
        for _ in 0..n {
            self.byte()?;
        }
        Ok(())
    }

    fn u32(&mut self) -> Result<u32, Stop> {
        let mut v = 0u32;
        for _ in 0..4 {
            v = (v << 8) | u32::from(self.byte()?);
        }
        Ok(v)
    }

    /// Compares the CRC so far with the next two bytes, then restarts it.
    fn check_crc(&mut self) -> Result<(), Stop> {
        let mut crc = self.crc;
        for _ in 0..16 {
            let flag = crc >> 15;
            crc <<= 1;
            if flag != 0 {
                crc ^= 0x8005;
            }
        }
        let at = self.pos;
        let expected = (u16::from(self.byte()?) << 8) | u16::from(self.byte()?);
        if crc != expected {
            return Err((
                "BITSTREAM_CRC_MISMATCH",
                format!("the CRC-16 at byte {at} is 0x{expected:04x} but the data before it gives 0x{crc:04x}: the bitstream is corrupted"),
            ));
        }
        self.crc = 0;
        Ok(())
    }

    /// Skips `count` bytes of compressed frame data (Trellis's prefix code: `0` a zero byte,
    /// `100xxx`/`101xxx` a one-hot or dictionary byte, `11xxxxxxxx` a literal), byte-aligned.
    fn skip_compressed(&mut self, count: usize) -> Result<(), Stop> {
        let (mut buffer, mut bits) = (0u32, 0u32);
        let mut take = |r: &mut Self, n: u32| -> Result<u32, Stop> {
            while bits < n {
                buffer = (buffer << 8) | u32::from(r.byte()?);
                bits += 8;
            }
            bits -= n;
            let v = (buffer >> bits) & ((1 << n) - 1);
            buffer &= (1 << bits) - 1;
            Ok(v)
        };
        for _ in 0..count {
            if take(self, 1)? == 1 {
                if take(self, 1)? == 1 {
                    take(self, 8)?;
                } else {
                    take(self, 4)?;
                }
            }
        }
        Ok(())
    }
}

/// The part an IDCODE belongs to, for messages.
fn part_of(idcode: u32) -> Option<&'static str> {
    device::devices().iter().find(|d| d.idcode == idcode).map(|d| d.name)
}

/// Checks an ECP5 bitstream for `device`.
pub fn check(bytes: &[u8], device: &Device, file: Option<&str>) -> Vec<Finding> {
    let at = || Location { file: file.map(str::to_owned), ..Location::default() };
    let mut findings = Vec::new();
    match walk(bytes, device) {
        Ok(done) => {
            if !done {
                findings.push(Finding::warning(
                    "BITSTREAM_NO_DONE",
                    "the bitstream has no ISC_PROGRAM_DONE command, so the part would not leave configuration: is it cut short?",
                    at(),
                ));
            }
        }
        Err((code, message)) => findings.push(Finding::error(code, message, at())),
    }
    findings
}

/// Walks the command stream; `Ok(true)` when it holds `ISC_PROGRAM_DONE`.
fn walk(bytes: &[u8], device: &Device) -> Result<bool, Stop> {
    if bytes.starts_with(&[0xFF, 0x00]) {
        // The header's text ends at the first 0xFF after it.
        if !bytes[2..].contains(&0xFF) {
            return Err(("BITSTREAM_HEADER_INVALID", "the .bit header never ends (no 0xFF after its text)".to_owned()));
        }
    } else if !bytes.starts_with(&[0xFF]) {
        return Err((
            "BITSTREAM_HEADER_INVALID",
            "an ECP5 bitstream starts with 0xFF 0x00 (a .bit header) or with 0xFF padding before its preamble"
                .to_owned(),
        ));
    }
    let Some(start) = bytes.windows(PREAMBLE.len()).position(|w| w == PREAMBLE) else {
        return Err(("BITSTREAM_PREAMBLE_MISSING", "no ECP5 preamble (FF FF BD B3) in the bitstream".to_owned()));
    };
    let mut r = Reader { data: bytes, pos: start + PREAMBLE.len(), crc: 0 };
    let mut identified = false;
    let mut compressed = false;
    let mut done = false;
    while r.pos < bytes.len() {
        let at = r.pos;
        let cmd = bytes[at];
        r.pos += 1;
        if cmd == DUMMY {
            continue;
        }
        r.pos -= 1;
        r.byte()?;
        match cmd {
            LSC_RESET_CRC => {
                r.skip(3)?;
                r.crc = 0;
            }
            VERIFY_ID => {
                r.skip(3)?;
                let id = r.u32()?;
                if id != device.idcode {
                    let whose = part_of(id).map_or("no ECP5 part".to_owned(), |p| format!("the {p}"));
                    return Err((
                        "BITSTREAM_DEVICE_MISMATCH",
                        format!(
                            "the bitstream's IDCODE is 0x{id:08x} ({whose}) but the target is the {} (0x{:08x})",
                            device.name, device.idcode
                        ),
                    ));
                }
                identified = true;
            }
            LSC_PROG_CNTRL0 => {
                r.skip(3)?;
                r.u32()?;
            }
            ISC_PROGRAM_DONE => {
                r.skip(3)?;
                done = true;
            }
            ISC_PROGRAM_SECURITY | LSC_INIT_ADDRESS => r.skip(3)?,
            ISC_PROGRAM_USERCODE | LSC_WRITE_COMP_DIC => {
                let check = r.byte()? & 0x80 != 0;
                r.skip(2)?;
                r.skip(if cmd == ISC_PROGRAM_USERCODE { 4 } else { 8 })?;
                compressed |= cmd == LSC_WRITE_COMP_DIC;
                if check {
                    r.check_crc()?;
                }
            }
            LSC_PROG_INCR_RTI | LSC_PROG_INCR_CMP => {
                if !identified {
                    return Err((
                        "BITSTREAM_NO_IDCODE",
                        format!("configuration frames start at byte {at} before any VERIFY_ID names the part"),
                    ));
                }
                if cmd == LSC_PROG_INCR_CMP && !compressed {
                    return Err((
                        "BITSTREAM_COMMAND_UNKNOWN",
                        format!("compressed frames start at byte {at} before the compression dictionary"),
                    ));
                }
                let p0 = r.byte()?;
                let count = (usize::from(r.byte()?) << 8) | usize::from(r.byte()?);
                if count > device.frames as usize {
                    return Err((
                        "BITSTREAM_FRAME_COUNT",
                        format!(
                            "the bitstream writes {count} configuration frames; the {} has {}",
                            device.name, device.frames
                        ),
                    ));
                }
                let check = p0 & 0x80 != 0;
                let every_frame = check && p0 & 0x40 == 0;
                let dummies = usize::from(p0 & 0x0F);
                let mut frame = device.frame_bytes as usize;
                if cmd == LSC_PROG_INCR_CMP {
                    frame += 7 - ((frame - 1) % 8);
                }
                for i in 0..count {
                    if cmd == LSC_PROG_INCR_CMP {
                        r.skip_compressed(frame)?;
                    } else {
                        r.skip(frame)?;
                    }
                    if every_frame || (check && i + 1 == count) {
                        r.check_crc()?;
                    }
                    r.skip(dummies)?;
                }
            }
            LSC_EBR_ADDRESS | JUMP => {
                r.skip(3)?;
                r.u32()?;
            }
            LSC_EBR_WRITE => {
                r.byte()?;
                let count = (usize::from(r.byte()?) << 8) | usize::from(r.byte()?);
                r.skip(count * 9)?;
                r.check_crc()?;
            }
            SPI_MODE => r.skip(3)?,
            other => {
                return Err((
                    "BITSTREAM_COMMAND_UNKNOWN",
                    format!("byte {at} holds 0x{other:02x}, which is no ECP5 configuration command Trellis knows"),
                ))
            }
        }
    }
    if !identified {
        return Err(("BITSTREAM_NO_IDCODE", "the bitstream never names its part (no VERIFY_ID command)".to_owned()));
    }
    Ok(done)
}

#[cfg(test)]
mod tests;
