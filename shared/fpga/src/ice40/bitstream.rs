//! iCE40 `.bin` bitstream parser, following icepack's reader (`FpgaConfig::read_bits`).
//!
//! Layout: an optional comment block (`FF 00`, zero-terminated strings, `00 FF`), the sync word
//! `7E AA 99 7E`, then commands up to *wakeup*. A command byte's high nibble is the opcode and
//! its low nibble the payload length in bytes (big-endian). Opcode 0 takes its sub-command from
//! the payload: 1 = CRAM data, 3 = BRAM data, 5 = CRC reset, 6 = wakeup. The others: 1 bank
//! number, 2 CRC check, 5 oscillator range, 6 bank width − 1, 7 bank height, 8 bank offset,
//! 9 warm boot / no-sleep flags. A data command is followed by width × height / 8 bytes and two
//! zero bytes. The CRC is CRC-16/CCITT (polynomial 0x1021, MSB first) over every byte since the
//! last reset, payloads included, so after a correct check command the register reads zero.
//!
//! Besides icepack's own errors we check the bank geometry against the known dies and the die
//! against the device the design targets, which icepack cannot know.

use std::ops::ControlFlow;

use crate::report::{Finding, Location};

/// CRAM bank geometry of each die, as (die, bank width, bank heights, full CRAM height). The UP5K
/// writes its odd banks shorter; icepack detects the die from the widest bank and the tallest
/// offset + height.
const DIES: &[(&str, u32, &[u32], u32)] = &[
    ("384", 182, &[80], 80),
    ("1k", 332, &[144], 144),
    ("8k", 872, &[272], 272),
    ("5k", 692, &[336, 176], 336),
    ("u4k", 692, &[176], 176),
    ("lm4k", 656, &[176], 176),
];

/// BRAM bank widths icepack writes (the UP5K's odd banks are half as wide); chunks are 128 rows.
const BRAM_WIDTHS: &[u32] = &[64, 80, 128, 160];
const BRAM_CHUNK_HEIGHT: u32 = 128;
const SYNC_WORD: u32 = 0x7EAA_997E;

/// What a well-formed bitstream told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitstream {
    /// Comment strings from the `FF 00 … 00 FF` block (icepack copies the `.asc` comment here).
    pub comments: Vec<String>,
    /// Die name as the chip database spells it (`8k`), detected from the CRAM geometry.
    pub die: &'static str,
    /// How many CRC check commands passed.
    pub crc_checks: u32,
    /// Bytes after the wakeup command (icepack writes one padding byte).
    pub trailing_bytes: usize,
}

/// Why a bitstream was rejected: a finding code, the byte offset and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitstreamError {
    pub code: &'static str,
    pub offset: usize,
    pub message: String,
}

/// Checks a bitstream and, when `expected_die` is given, that it was built for that die.
pub fn check(bytes: &[u8], expected_die: Option<&str>, file: Option<&str>) -> Vec<Finding> {
    let at = || Location { file: file.map(str::to_owned), ..Location::default() };
    match parse(bytes) {
        Err(e) => vec![Finding::error(e.code, format!("{} (at byte {})", e.message, e.offset), at())],
        Ok(bits) => {
            let mut findings = Vec::new();
            if let Some(expected) = expected_die.filter(|d| *d != bits.die) {
                findings.push(Finding::error(
                    "BITSTREAM_DEVICE_MISMATCH",
                    format!(
                        "the bitstream configures an iCE40 {} die, but the design targets the {expected} die",
                        bits.die
                    ),
                    at(),
                ));
            }
            if bits.crc_checks == 0 {
                findings.push(Finding::warning(
                    "BITSTREAM_CRC_MISMATCH",
                    "the bitstream never checks its CRC, so corruption would go unnoticed",
                    at(),
                ));
            }
            if bits.trailing_bytes > 1 {
                findings.push(Finding::warning(
                    "BITSTREAM_SIZE_MISMATCH",
                    format!("{} bytes follow the wakeup command and are ignored", bits.trailing_bytes),
                    at(),
                ));
            }
            findings
        }
    }
}

/// A cursor over the bytes that keeps icepack's running CRC.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    crc: u16,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, BitstreamError> {
        let byte = *self.bytes.get(self.pos).ok_or_else(|| {
            self.err("BITSTREAM_TRUNCATED", "the bitstream ends before its wakeup command".to_owned())
        })?;
        self.pos += 1;
        self.crc = crc16_update(self.crc, byte);
        Ok(byte)
    }

    fn err(&self, code: &'static str, message: String) -> BitstreamError {
        BitstreamError { code, offset: self.pos, message }
    }
}

/// One step of CRC-16/CCITT (poly 0x1021, MSB first), as icepack computes it.
pub fn crc16_update(mut crc: u16, byte: u8) -> u16 {
    for i in (0..8).rev() {
        let feedback = ((crc >> 15) ^ u16::from(byte >> i)) & 1 != 0;
        crc = (crc << 1) ^ if feedback { 0x1021 } else { 0 };
    }
    crc
}

/// Parses a bitstream up to its wakeup command.
pub fn parse(bytes: &[u8]) -> Result<Bitstream, BitstreamError> {
    let mut r = Reader { bytes, pos: 0, crc: 0 };
    skip_to_sync_word(&mut r)?;
    let comments = comments(&bytes[..r.pos - 4]);
    let mut config = Config::default();
    while config.command(&mut r)?.is_continue() {}
    let (cram_width, cram_height) = (config.cram_width, config.cram_height);
    let die = DIES.iter().find(|(_, w, _, h)| *w == cram_width && *h == cram_height).map(|(die, ..)| *die).ok_or_else(
        || {
            r.err(
                "BITSTREAM_SIZE_MISMATCH",
                format!("the CRAM is {cram_width}×{cram_height} bits, which matches no iCE40 die"),
            )
        },
    )?;
    Ok(Bitstream { comments, die, crc_checks: config.crc_checks, trailing_bytes: bytes.len() - r.pos })
}

/// Reads up to and including the sync word; icepack rejects four FF bytes before it.
fn skip_to_sync_word(r: &mut Reader<'_>) -> Result<(), BitstreamError> {
    let mut window = 0u32;
    loop {
        let byte = r.byte().map_err(|_| r.err("BITSTREAM_MALFORMED", "no sync word 7E AA 99 7E found".to_owned()))?;
        window = (window << 8) | u32::from(byte);
        if window == 0xFFFF_FFFF {
            return Err(r.err(
                "BITSTREAM_MALFORMED",
                "four FF bytes before the sync word 7E AA 99 7E (icepack rejects this)".to_owned(),
            ));
        }
        if window == SYNC_WORD {
            return Ok(());
        }
    }
}

/// The registers the commands set, and what the data banks so far add up to.
#[derive(Default)]
struct Config {
    bank: u32,
    width: u32,
    height: u32,
    offset: u32,
    /// The widest CRAM bank and the tallest offset + height, which identify the die.
    cram_width: u32,
    cram_height: u32,
    crc_checks: u32,
}

impl Config {
    /// Reads and runs one command; breaks at wakeup.
    fn command(&mut self, r: &mut Reader<'_>) -> Result<ControlFlow<()>, BitstreamError> {
        let start = r.pos;
        let command = r.byte()?;
        let mut payload = 0u32;
        for _ in 0..(command & 0x0F) {
            payload = (payload << 8) | u32::from(r.byte()?);
        }
        let at = |code, message: String| BitstreamError { code, offset: start, message };
        match command >> 4 {
            0x0 => return self.control(r, command, payload, start),
            0x1 => self.bank = payload,
            0x2 => {
                if r.crc != 0 {
                    return Err(at(
                        "BITSTREAM_CRC_MISMATCH",
                        format!("CRC check failed: stored {payload:04X} does not match the data"),
                    ));
                }
                self.crc_checks += 1;
            }
            0x5 if payload > 2 => return Err(at("BITSTREAM_MALFORMED", format!("unknown oscillator range {payload}"))),
            0x5 => {}
            0x6 => self.width = payload.wrapping_add(1),
            0x7 => self.height = payload,
            0x8 => self.offset = payload,
            0x9 if !matches!(payload, 0 | 1 | 32 | 33) => {
                return Err(at("BITSTREAM_MALFORMED", format!("unknown warm boot / no-sleep flags {payload:X}")));
            }
            0x9 => {}
            _ => return Err(at("BITSTREAM_UNKNOWN_COMMAND", format!("unknown command {command:02X}"))),
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Opcode 0, whose payload is the sub-command: bank data, CRC reset or wakeup.
    fn control(
        &mut self,
        r: &mut Reader<'_>,
        command: u8,
        payload: u32,
        start: usize,
    ) -> Result<ControlFlow<()>, BitstreamError> {
        match payload {
            1 | 3 => self.data(r, payload == 1, start)?,
            5 => r.crc = 0xFFFF,
            6 => return Ok(ControlFlow::Break(())),
            other => {
                return Err(BitstreamError {
                    code: "BITSTREAM_UNKNOWN_COMMAND",
                    offset: start,
                    message: format!("unknown command {command:02X} with payload {other:X}"),
                })
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// A CRAM or BRAM data command: checks the bank, skips its data and the two zero bytes that
    /// end it, and widens the CRAM seen so far.
    fn data(&mut self, r: &mut Reader<'_>, cram: bool, start: usize) -> Result<(), BitstreamError> {
        let (bank, width, height) = (self.bank, self.width, self.height);
        let at = |code, message: String| BitstreamError { code, offset: start, message };
        check_geometry(cram, width, height).map_err(|m| at("BITSTREAM_SIZE_MISMATCH", m))?;
        if bank > 3 {
            return Err(at("BITSTREAM_MALFORMED", format!("data for bank {bank}; iCE40 dies have banks 0 to 3")));
        }
        let len = (u64::from(width) * u64::from(height) / 8) as usize;
        if r.bytes.len() - r.pos < len + 2 {
            return Err(at("BITSTREAM_TRUNCATED", format!("the bitstream ends inside the data of bank {bank}")));
        }
        for _ in 0..len {
            r.byte()?;
        }
        let end = u16::from_be_bytes([r.byte()?, r.byte()?]);
        if end != 0 {
            return Err(
                r.err("BITSTREAM_MALFORMED", format!("expected 00 00 after the data of bank {bank}, found {end:04X}"))
            );
        }
        if cram {
            self.cram_width = self.cram_width.max(width);
            self.cram_height = self.cram_height.max(self.offset.saturating_add(height));
        }
        Ok(())
    }
}

/// Rejects a data command whose bank size belongs to no iCE40 die: its data length would be
/// wrong, and icepack would misread everything after it.
fn check_geometry(cram: bool, width: u32, height: u32) -> Result<(), String> {
    let known = if cram {
        DIES.iter().any(|(_, w, heights, _)| *w == width && heights.contains(&height))
    } else {
        BRAM_WIDTHS.contains(&width) && height == BRAM_CHUNK_HEIGHT
    };
    let kind = if cram { "CRAM" } else { "BRAM" };
    if known {
        Ok(())
    } else {
        Err(format!("a {kind} bank of {width}×{height} bits matches no iCE40 die"))
    }
}

/// The zero-terminated strings of a leading `FF 00 … 00 FF` block, lossily decoded.
fn comments(prefix: &[u8]) -> Vec<String> {
    let Some(body) = prefix.strip_prefix(&[0xFF, 0x00]) else { return Vec::new() };
    let body = body.strip_suffix(&[0x00, 0xFF]).unwrap_or(body);
    body.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
}

#[cfg(test)]
mod tests;
