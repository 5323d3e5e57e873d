//! A small validating JSON reader that borrows from its input, for yosys netlists.
//!
//! `serde_json` into typed structs spent most of the validation time building strings, maps
//! and values we never look at. This reader walks the text once: callers pull the keys they
//! want and [`Scanner::skip`] everything else, still checking it is well-formed JSON (RFC 8259:
//! strings, escapes, numbers, literals, nesting), so broken input is rejected as before.
//! Strings without escapes are borrowed; escaped ones are decoded into a `Cow::Owned`. Strings
//! and skipped values go through the quick paths in [`quick`] first.

use std::borrow::Cow;

use quick::{number_end, plain_string_end, plain_value_end, Specials};

mod quick;

/// Nesting deeper than this is rejected rather than risking the stack (serde_json uses 128).
const MAX_DEPTH: u32 = 128;

/// A syntax or shape error at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanError {
    pub offset: usize,
    pub message: Cow<'static, str>,
}

impl ScanError {
    /// The 1-based line of the error in `text`.
    pub fn line(&self, text: &str) -> u32 {
        let upto = &text.as_bytes()[..self.offset.min(text.len())];
        1 + upto.iter().filter(|b| **b == b'\n').count() as u32
    }
}

pub(crate) type Scan<T> = Result<T, ScanError>;

/// A cursor over JSON text.
pub(crate) struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    depth: u32,
    specials: Specials,
}

impl<'a> Scanner<'a> {
    pub fn new(text: &'a str) -> Self {
        Self { text, pos: 0, depth: 0, specials: Specials::new() }
    }

    pub fn error<T>(&self, message: impl Into<Cow<'static, str>>) -> Scan<T> {
        Err(ScanError { offset: self.pos, message: message.into() })
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next non-whitespace byte, without consuming it.
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        while let Some(c) = b.get(self.pos) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(*c);
            }
            self.pos += 1;
        }
        None
    }

    #[inline]
    fn eat(&mut self, want: u8) -> Scan<()> {
        if self.peek() == Some(want) {
            self.pos += 1;
            Ok(())
        } else {
            self.error(format!("expected `{}`", want as char))
        }
    }

    /// Only whitespace may follow the document.
    pub fn finish(&mut self) -> Scan<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.error("trailing characters after the JSON document"),
        }
    }

    /// A JSON string.
    #[inline]
    pub fn string(&mut self) -> Scan<Cow<'a, str>> {
        match self.plain_string() {
            Some(text) => Ok(Cow::Borrowed(text)),
            None => self.any_string(),
        }
    }

    /// The next value if it is a string without escapes, consumed; `None`, consuming nothing
    /// but whitespace, for anything else.
    #[inline]
    fn plain_string(&mut self) -> Option<&'a str> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let end = plain_string_end(self.bytes(), &mut self.specials, self.pos)?;
        let text = &self.text[self.pos + 1..end - 1];
        self.pos = end;
        Some(text)
    }

    /// A JSON string, escapes decoded; every error is found here.
    fn any_string(&mut self) -> Scan<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.pos;
        let b = self.bytes();
        self.pos = self.specials.next(b, start);
        loop {
            match b.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Borrowed(&self.text[start..self.pos - 1]));
                }
                Some(b'\\') => return self.escaped(start).map(Cow::Owned),
                Some(c) if *c < 0x20 => return self.error("control character in a string"),
                Some(_) => self.pos += 1,
                None => return self.error("unterminated string"),
            }
        }
    }

    /// The rest of a string that contains escapes, decoded.
    fn escaped(&mut self, start: usize) -> Scan<String> {
        let mut out = String::from(&self.text[start..self.pos]);
        let b = self.bytes();
        loop {
            let run = self.pos;
            while b.get(self.pos).is_some_and(|c| *c != b'"' && *c != b'\\' && *c >= 0x20) {
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match b.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = match b.get(self.pos) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            out.push(c);
                            continue;
                        }
                        _ => return self.error("invalid escape in a string"),
                    };
                    self.pos += 1;
                    out.push(c);
                }
                Some(_) => return self.error("control character in a string"),
                None => return self.error("unterminated string"),
            }
        }
    }

    /// After `\u`: four hex digits, or a surrogate pair; lone surrogates are errors, as in
    /// serde_json.
    fn unicode_escape(&mut self) -> Scan<char> {
        let hi = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&hi) {
            if self.bytes().get(self.pos..self.pos + 2) != Some(b"\\u") {
                return self.error("lone leading surrogate in a string");
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return self.error("invalid trailing surrogate in a string");
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        match char::from_u32(code) {
            Some(c) => Ok(c),
            None => self.error("lone trailing surrogate in a string"),
        }
    }

    fn hex4(&mut self) -> Scan<u32> {
        let digits = self.bytes().get(self.pos..self.pos + 4).and_then(|d| std::str::from_utf8(d).ok());
        match digits.and_then(|d| u32::from_str_radix(d, 16).ok().filter(|_| d.bytes().all(|c| c.is_ascii_hexdigit())))
        {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => self.error("invalid \\u escape in a string"),
        }
    }

    /// A JSON number, as its text.
    pub fn number(&mut self) -> Scan<&'a str> {
        self.peek();
        let start = self.pos;
        match number_end(self.bytes(), start) {
            Some(end) => {
                self.pos = end;
                Ok(&self.text[start..end])
            }
            None => self.error("invalid number"),
        }
    }

    /// A number of one to nine digits without sign, fraction or exponent (a net number as
    /// yosys writes it), consumed; `None`, consuming nothing, for anything else, which the
    /// caller reads with [`Scanner::number`].
    #[inline]
    pub fn small_unsigned(&mut self) -> Option<u32> {
        let b = self.bytes();
        let start = self.pos;
        let mut p = start;
        let mut value = 0u32;
        while let Some(d @ b'0'..=b'9') = b.get(p) {
            // A tenth digit is refused before it is added: it would overflow `value`.
            if p - start == 9 {
                return None;
            }
            value = value * 10 + u32::from(d - b'0');
            p += 1;
        }
        let plain = p > start && !(b[start] == b'0' && p - start > 1);
        if !plain || matches!(b.get(p), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.pos = p;
        Some(value)
    }

    /// An object: calls `field` with each key, which must read (or skip) the value.
    pub fn object(&mut self, mut field: impl FnMut(&mut Self, Cow<'a, str>) -> Scan<()>) -> Scan<()> {
        self.nest(b'{', b'}', |s| {
            let key = s.string()?;
            s.eat(b':')?;
            field(s, key)
        })
    }

    /// An array: calls `item` for each element, which must read (or skip) it.
    pub fn array(&mut self, item: impl FnMut(&mut Self) -> Scan<()>) -> Scan<()> {
        self.nest(b'[', b']', item)
    }

    fn nest(&mut self, open: u8, close: u8, mut each: impl FnMut(&mut Self) -> Scan<()>) -> Scan<()> {
        self.eat(open)?;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error("nesting too deep");
        }
        if self.peek() == Some(close) {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            each(self)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.error(format!("expected `,` or `{}`", close as char)),
            }
        }
    }

    /// Skips any value, checking it; returns its text.
    pub fn skip(&mut self) -> Scan<&'a str> {
        self.peek();
        let start = self.pos;
        match plain_value_end(self.bytes(), &mut self.specials, start, MAX_DEPTH.saturating_sub(self.depth)) {
            Some(end) => {
                self.pos = end;
                Ok(&self.text[start..end])
            }
            // Escapes, exponents, deep nesting and every error: checked again, one value at a
            // time, by the reader that says what is wrong and where. Its nested values are not
            // tried on the quick path again, so no byte is read more than twice.
            None => self.skip_checked(),
        }
    }

    /// [`Scanner::skip`] the slow way, with an error for anything that is not JSON.
    fn skip_checked(&mut self) -> Scan<&'a str> {
        let start = self.peek().map(|_| self.pos);
        match self.peek() {
            Some(b'{') => self.object(|s, _| s.skip_checked().map(drop))?,
            Some(b'[') => self.array(|s| s.skip_checked().map(drop))?,
            Some(b'"') => drop(self.string()?),
            Some(b't') => self.literal("true")?,
            Some(b'f') => self.literal("false")?,
            Some(b'n') => self.literal("null")?,
            Some(b'-' | b'0'..=b'9') => drop(self.number()?),
            Some(_) => return self.error("expected a JSON value"),
            None => return self.error("unexpected end of the netlist"),
        }
        Ok(&self.text[start.unwrap_or(self.pos)..self.pos])
    }

    fn literal(&mut self, word: &str) -> Scan<()> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.error("expected a JSON value")
        }
    }

    /// `null`, consumed if it is next: the netlist reader treats it as an empty object.
    pub fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.text[self.pos..].starts_with("null") {
            self.pos += 4;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
