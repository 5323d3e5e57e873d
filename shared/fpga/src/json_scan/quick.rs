//! The scanner's quick paths: where the special bytes of a string are, found a block at a time,
//! and where a value ends when it is the common kind (no escapes, shallow nesting), found in one
//! loop. Each answers `None` for anything else, and the [`Scanner`](super::Scanner) then reads
//! it the checked way, so these never decide what an error says.

/// Where the quotes, backslashes and control characters are, 64 bytes of text at a time: one
/// mask per block, found without a branch per byte and kept while the scanner is in the block,
/// so finding the end of a string costs a shift and a count of trailing zeros rather than a
/// loop whose length the processor cannot guess.
pub(super) struct Specials {
    /// Where the block `mask` describes starts (a multiple of 64), or `usize::MAX` for none.
    block: usize,
    /// Bit `i` is set when byte `block + i` is `"`, `\` or below 0x20.
    mask: u64,
}

impl Specials {
    pub fn new() -> Self {
        Self { block: usize::MAX, mask: 0 }
    }

    /// The first position at or after `from` that holds a special byte, or `b.len()`.
    #[inline]
    pub fn next(&mut self, b: &[u8], mut from: usize) -> usize {
        loop {
            let base = from & !63;
            if base != self.block {
                if base >= b.len() {
                    return b.len();
                }
                self.mask = block_mask(b, base);
                self.block = base;
            }
            let rest = self.mask >> (from - base);
            if rest != 0 {
                return from + rest.trailing_zeros() as usize;
            }
            from = base + 64;
        }
    }
}

/// The special bytes of the (up to) 64 bytes from `base`, one bit each.
fn block_mask(b: &[u8], base: usize) -> u64 {
    match b.get(base..base + 64) {
        Some(block) => full_block_mask(block),
        None => b[base..]
            .iter()
            .enumerate()
            .fold(0, |mask, (i, c)| mask | u64::from(*c == b'"' || *c == b'\\' || *c < 0x20) << i),
    }
}

/// [`block_mask`] of 64 bytes, sixteen at a time with SSE2 (part of every x86-64 processor):
/// three byte compares and one `pmovmskb` per sixteen bytes, where the word-at-a-time version
/// took a dozen arithmetic steps per eight. The netlist reader spends about a tenth of its
/// time here on large netlists.
#[cfg(target_arch = "x86_64")]
fn full_block_mask(block: &[u8]) -> u64 {
    assert!(block.len() >= 64);
    // SAFETY: SSE2 is part of the x86-64 architecture, so every processor this runs on has it.
    unsafe { sse2_block_mask(block) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn sse2_block_mask(block: &[u8]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let below_space = _mm_set1_epi8(0x1F);
    let mut mask = 0u64;
    for chunk in block[..64].chunks_exact(16) {
        // SAFETY: `chunk` is sixteen bytes; `loadu` takes any alignment.
        let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>()) };
        // A byte is below 0x20 where the unsigned maximum of it and 0x1F is 0x1F.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, below_space), below_space);
        let special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control);
        mask = mask >> 16 | u64::from(_mm_movemask_epi8(special) as u16) << 48;
    }
    mask
}

/// [`block_mask`] of 64 bytes, a word of eight at a time.
#[cfg(not(target_arch = "x86_64"))]
fn full_block_mask(block: &[u8]) -> u64 {
    block.chunks_exact(8).take(8).enumerate().fold(0, |mask, (i, w)| {
        let high_bits = special(u64::from_le_bytes(w.try_into().unwrap_or_default()));
        // Gathers the eight high bits into the top byte, byte 0's lowest.
        mask | (high_bits.wrapping_mul(0x0002_0408_1020_4081) >> 56) << (8 * i)
    })
}

/// Where the string opening at `b[start]` (a quote) ends, just past its closing quote, if it
/// has no escapes and no control characters; `None` otherwise.
#[inline]
pub(super) fn plain_string_end(b: &[u8], specials: &mut Specials, start: usize) -> Option<usize> {
    let end = specials.next(b, start + 1);
    (b.get(end) == Some(&b'"')).then_some(end + 1)
}

/// Where the JSON number starting at `b[start]` ends, or `None` if it is not one.
pub(super) fn number_end(b: &[u8], start: usize) -> Option<usize> {
    let digits = |pos: &mut usize| {
        let from = *pos;
        while b.get(*pos).is_some_and(u8::is_ascii_digit) {
            *pos += 1;
        }
        *pos - from
    };
    let mut p = start;
    if b.get(p) == Some(&b'-') {
        p += 1;
    }
    let int = digits(&mut p);
    let ok = int > 0
        && !(int > 1 && b[p - int] == b'0')
        && (b.get(p) != Some(&b'.') || {
            p += 1;
            digits(&mut p) > 0
        })
        && (!matches!(b.get(p), Some(b'e' | b'E')) || {
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            digits(&mut p) > 0
        });
    ok.then_some(p)
}

/// How deep the quick path nests before it hands the value to the checked reader.
const PLAIN_DEPTH: u32 = 64;

/// Where the JSON value starting at `b[start]` ends, for the common case, in one loop without
/// recursion or building anything: strings without escapes, numbers, literals, and objects and
/// arrays nested at most `max_depth` (and [`PLAIN_DEPTH`]) deep. `None` for anything else,
/// valid or not, which the caller then reads the checked way; `Some` only for valid JSON.
pub(super) fn plain_value_end(b: &[u8], specials: &mut Specials, start: usize, max_depth: u32) -> Option<usize> {
    let ws = |p: &mut usize| {
        while matches!(b.get(*p), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            *p += 1;
        }
    };
    // A key and its colon, at `p` (whitespace first); returns where its value starts.
    let key = |specials: &mut Specials, mut p: usize| {
        ws(&mut p);
        if b.get(p) != Some(&b'"') {
            return None;
        }
        p = plain_string_end(b, specials, p)?;
        ws(&mut p);
        (b.get(p) == Some(&b':')).then_some(p + 1)
    };
    let max_depth = max_depth.min(PLAIN_DEPTH);
    let mut p = start;
    // Bit `i` is set when the container at depth `i + 1` (counting from the innermost) is an
    // object.
    let mut objects: u64 = 0;
    let mut depth = 0;
    loop {
        ws(&mut p);
        match *b.get(p)? {
            open @ (b'{' | b'[') => {
                depth += 1;
                if depth > max_depth {
                    return None;
                }
                let object = open == b'{';
                objects = objects << 1 | u64::from(object);
                p += 1;
                ws(&mut p);
                if b.get(p) != Some(if object { &b'}' } else { &b']' }) {
                    if object {
                        p = key(specials, p)?;
                    }
                    continue;
                }
                p += 1;
                depth -= 1;
                objects >>= 1;
            }
            b'"' => p = plain_string_end(b, specials, p)?,
            b'-' | b'0'..=b'9' => p = number_end(b, p)?,
            c => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    b'n' => b"null",
                    _ => return None,
                };
                if !b[p..].starts_with(word) {
                    return None;
                }
                p += word.len();
            }
        }
        // After a value: a comma and the next one, or the end of one or more containers.
        loop {
            if depth == 0 {
                return Some(p);
            }
            ws(&mut p);
            let object = objects & 1 == 1;
            match *b.get(p)? {
                b',' => {
                    p += 1;
                    if object {
                        p = key(specials, p)?;
                    }
                    break;
                }
                b'}' if object => {}
                b']' if !object => {}
                _ => return None,
            }
            p += 1;
            depth -= 1;
            objects >>= 1;
        }
    }
}

/// The high bit of every byte of `w` that is `"`, `\` or below 0x20, and no other bit. Exact
/// for every byte: no sum carries from one byte into the next.
#[inline]
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(super) fn special(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = ONES * 0x7F;
    // A byte's high bit is set in `(x & 0x7F) + k | x` unless the byte is below 0x80 - k:
    // with k = 0x7F unless it is zero (after the XOR, unless it is that character), with
    // k = 0x60 unless it is below 0x20. A byte is special where any of the three is clear.
    let not_zero = |x: u64| (x & LOW7).wrapping_add(LOW7) | x;
    let not_control = (w & LOW7).wrapping_add(ONES * 0x60) | w;
    !(not_zero(w ^ (ONES * b'"' as u64)) & not_zero(w ^ (ONES * b'\\' as u64)) & not_control) & !LOW7
}
