//! A forward-only JSON reader for the proxy's hot path: the few shapes a streamed chunk takes,
//! read without a deserializer.
//!
//! It is deliberately partial. Every method answers `None` the moment the input is anything it
//! does not read with certainty — a key with an escape or a non-ASCII byte, a value nested past
//! [`MAX_DEPTH`], malformed JSON of any kind — and its callers then hand the whole input to
//! serde_json, whose answer (the value, or the error) stands. So the fast reader only has to be
//! right where it answers; where it answers, it accepts exactly what serde_json accepts and
//! captures exactly the raw text serde_json's `RawValue` would (the differential property of
//! `fuzz/src/harness.rs`, `chat_chunk`, holds the two equal).

/// Nesting past this in a skipped value: left to serde_json.
pub(crate) const MAX_DEPTH: u32 = 64;

/// A cursor over JSON bytes.
pub(crate) struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Scan { b, i: 0 }
    }

    /// Skips JSON whitespace; the next byte, if any.
    #[inline]
    pub(crate) fn ws(&mut self) -> Option<u8> {
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(c);
            }
            self.i += 1;
        }
        None
    }

    /// True when only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.ws().is_none()
    }

    /// Whitespace, then `c`.
    #[inline]
    pub(crate) fn eat(&mut self, c: u8) -> Option<()> {
        (self.ws()? == c).then(|| self.i += 1)
    }

    /// After an object's `{` or an array's `[`: `Some(true)` when it is empty (its `close`, `}`
    /// or `]`, read).
    pub(crate) fn empty(&mut self, close: u8) -> Option<bool> {
        if self.ws()? == close {
            self.i += 1;
            return Some(true);
        }
        Some(false)
    }

    /// An object, `{` to `}`: `member` reads each plain key's value, the cursor at it (any
    /// other key: `None`, left to serde_json).
    #[inline]
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.empty(b'}')? {
            return Some(());
        }
        loop {
            let key = self.key()?;
            member(self, key)?;
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// After a member's value: `Some(true)` on `,` (another member follows), `Some(false)` on
    /// the closing `close`.
    #[inline]
    pub(crate) fn more(&mut self, close: u8) -> Option<bool> {
        let c = self.ws()?;
        self.i += 1;
        match c {
            b',' => Some(true),
            c if c == close => Some(false),
            _ => None,
        }
    }

    /// A member's key and its `:`. Only plain keys: printable ASCII without escapes (every key
    /// the APIs define); any other key is left to serde_json.
    #[inline]
    pub(crate) fn key(&mut self) -> Option<&'a [u8]> {
        if self.ws()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        // A plain key ends at the first special byte, and that byte is its closing quote.
        let j = start + first_special(self.b.get(start..)?, true)?;
        if self.b[j] != b'"' {
            return None;
        }
        self.i = j + 1;
        self.eat(b':')?;
        Some(&self.b[start..j])
    }

    /// True (and the literal read) when the next value is `null`.
    #[inline]
    pub(crate) fn null(&mut self) -> Option<bool> {
        if self.ws()? == b'n' {
            self.lit(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// The next value's raw text, as serde_json's `RawValue` holds it (no surrounding
    /// whitespace; valid UTF-8, which serde_json checks of a borrowed raw value).
    #[inline]
    pub(crate) fn raw(&mut self) -> Option<&'a str> {
        self.ws()?;
        let start = self.i;
        self.skip(0)?;
        std::str::from_utf8(&self.b[start..self.i]).ok()
    }

    /// [`Scan::raw`] as serde_json reads an `Option<&RawValue>`: `null` is `None`.
    #[inline]
    pub(crate) fn opt_raw(&mut self) -> Option<Option<&'a str>> {
        let r = self.raw()?;
        Some((r != "null").then_some(r))
    }

    /// A value read as serde_json reads an `Option<u64>`: `null`, or a non-negative integer
    /// that fits. Anything else (a float, a negative, an overflow) is left to serde_json.
    pub(crate) fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        let mut v: u64 = 0;
        let start = self.i;
        while let Some(&c @ b'0'..=b'9') = self.b.get(self.i) {
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        if matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(Some(v))
    }

    /// Skips one value, validated as serde_json validates a value it ignores.
    pub(crate) fn skip(&mut self, depth: u32) -> Option<()> {
        match self.ws()? {
            b'"' => {
                self.i += 1;
                self.string()
            }
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                if self.empty(b'}')? {
                    return Some(());
                }
                loop {
                    self.eat(b'"')?;
                    self.string()?;
                    self.eat(b':')?;
                    self.skip(depth + 1)?;
                    if !self.more(b'}')? {
                        return Some(());
                    }
                }
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                if self.empty(b']')? {
                    return Some(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if !self.more(b']')? {
                        return Some(());
                    }
                }
            }
            b'n' => self.lit(b"null"),
            b't' => self.lit(b"true"),
            b'f' => self.lit(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn lit(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// The rest of a string after its opening quote: no control byte, escapes well formed (a
    /// `\u` escape needs four hex digits, not a valid code point: serde_json does not check
    /// one it ignores or keeps raw). Bytes ≥ 0x80 pass unchecked here, as they do in
    /// serde_json's ignored strings.
    #[inline]
    fn string(&mut self) -> Option<()> {
        loop {
            let rest = self.b.get(self.i..)?;
            let at = first_special(rest, false)?;
            if rest[at] < 0x20 {
                return None;
            }
            self.i += at + 1;
            if rest[at] == b'"' {
                return Some(());
            }
            let e = *self.b.get(self.i)?;
            self.i += 1;
            match e {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                b'u' => {
                    let hex = self.b.get(self.i..self.i + 4)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.i += 4;
                }
                _ => return None,
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        match *self.b.get(self.i)? {
            b'0' => {
                self.i += 1;
                if matches!(self.b.get(self.i), Some(b'0'..=b'9')) {
                    return None;
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            self.digits_at_least_one()?;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digits_at_least_one()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.b.get(self.i), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn digits_at_least_one(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }
}

/// The index of the first byte of `b` that ends a plain run inside a JSON string: `"`, `\\` or
/// a control byte, and with `ascii_only` also any byte ≥ 0x80. Eight bytes at a time: strings
/// here are short (keys, ids, one token of text), where a call into a vectorized search costs
/// more than it saves.
#[inline]
fn first_special(b: &[u8], ascii_only: bool) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte that is zero (exact up to the first such byte, which is all
    // that is read: borrows only run upward).
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let mut i = 0;
    while let Some(w) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(w.try_into().ok()?);
        let mut hit = zero(w ^ (LO * u64::from(b'"')))
            | zero(w ^ (LO * u64::from(b'\\')))
            | (w.wrapping_sub(LO * 0x20) & !w & HI);
        if ascii_only {
            hit |= w & HI;
        }
        if hit != 0 {
            return Some(i + hit.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20 || (ascii_only && c >= 0x80))
        .map(|p| i + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skips(s: &str) -> bool {
        let mut sc = Scan::new(s.as_bytes());
        sc.skip(0).is_some() && sc.at_end()
    }

    #[test]
    fn accepts_what_serde_json_accepts_and_refuses_the_rest() {
        for s in [
            "null",
            " true ",
            "false",
            "0",
            "-0",
            "12.5e-3",
            "1E+9",
            r#""a\n\u00e9\"""#,
            r#"{"a":[1,{"b":null}],"c":"d"}"#,
            "[ ]",
            "{ }",
            "\"\u{e9}\"",
        ] {
            assert!(skips(s), "{s}");
            assert!(serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok());
        }
        for s in [
            "nul",
            "01",
            "-",
            "1.",
            "1e",
            ".5",
            "+1",
            r#""\x""#,
            r#""\u00g0""#,
            "\"a\u{1}\"",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\"}",
            "{a:1}",
            "[1 2]",
            "\"open",
        ] {
            assert!(!skips(s), "{s}");
            assert!(serde_json::from_str::<serde::de::IgnoredAny>(s).is_err());
        }
    }

    #[test]
    fn the_first_special_byte_at_every_offset() {
        for special in [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff] {
            for len in 0..40 {
                for at in 0..=len {
                    let mut b = vec![b'a'; len];
                    // Bytes that look like the specials to a careless bit trick, around the one.
                    for (k, c) in b.iter_mut().enumerate() {
                        *c = [b'a', 0x20, 0x21, 0x7f, b'#', b']', 0x5d][k % 7];
                    }
                    if at < len {
                        b[at] = special;
                    }
                    let want = |ascii: bool| {
                        b.iter().position(|&c| {
                            c == b'"' || c == b'\\' || c < 0x20 || (ascii && c >= 0x80)
                        })
                    };
                    assert_eq!(first_special(&b, true), want(true), "{b:?}");
                    assert_eq!(first_special(&b, false), want(false), "{b:?}");
                }
            }
        }
    }

    #[test]
    fn integers_as_serde_json_reads_an_option_u64() {
        let read = |s: &str| Scan::new(s.as_bytes()).opt_u64();
        assert_eq!(read("null"), Some(None));
        assert_eq!(read("42"), Some(Some(42)));
        assert_eq!(read("18446744073709551615"), Some(Some(u64::MAX)));
        for left in ["18446744073709551616", "-1", "1.0", "1e3", "01", "\"1\""] {
            assert_eq!(read(left), None, "{left}");
        }
    }
}
