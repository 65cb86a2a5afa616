//! The strict JSON reader the compiled parsers share (g-stream records, event messages): it reads
//! text without backslashes and answers None for anything it does not accept, so its caller can
//! hand that input to the Python decoder, whose answer stands.

pub(crate) const MAX_DEPTH: usize = 32;

/// A JSON value as far as the fast path reads it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Val<'a> {
    Str(&'a str),
    /// a non-negative integer literal that fits in u64
    Int(u64),
    Null,
    /// an object: its byte range, braces included
    Obj(usize, usize),
    /// an array: its number of elements
    Arr(usize),
    /// any other valid value (negative or huge integer, true/false)
    Other,
}

/// A strict JSON reader over a line without backslashes: None for anything it does not accept.
pub(crate) struct Json<'a> {
    pub(crate) text: &'a str,
    pub(crate) s: &'a [u8],
    pub(crate) i: usize,
}

impl<'a> Json<'a> {
    pub(crate) fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    pub(crate) fn byte(&mut self, b: u8) -> Option<()> {
        (self.s.get(self.i) == Some(&b)).then(|| self.i += 1)
    }
    /// A string's content (no escapes: the line has no backslash; no control characters).
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        self.byte(b'"')?;
        let a = self.i;
        loop {
            let b = *self.s.get(self.i)?;
            if b == b'"' {
                break;
            }
            if b < 0x20 {
                return None;
            }
            self.i += 1;
        }
        self.i += 1;
        self.text.get(a..self.i - 1)
    }
    /// An integer literal (`-?(0|[1-9][0-9]*)`, at most 20 digits); fractions and exponents are
    /// declined (their range checks differ between decoders).
    pub(crate) fn number(&mut self) -> Option<Val<'a>> {
        let neg = self.byte(b'-').is_some();
        let a = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        let digits = &self.s[a..self.i];
        if digits.is_empty() || digits.len() > 20 || (digits.len() > 1 && digits[0] == b'0') {
            return None;
        }
        if matches!(self.s.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        if neg {
            return Some(Val::Other);
        }
        let mut v: u64 = 0;
        for &d in digits {
            let Some(next) = v.checked_mul(10).and_then(|x| x.checked_add((d - b'0') as u64)) else {
                return Some(Val::Other); // beyond u64
            };
            v = next;
        }
        Some(Val::Int(v))
    }
    pub(crate) fn word(&mut self, w: &[u8]) -> Option<()> {
        if self.s[self.i..].starts_with(w) {
            self.i += w.len();
            return Some(());
        }
        None
    }
    pub(crate) fn value(&mut self, depth: usize) -> Option<Val<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        match *self.s.get(self.i)? {
            b'"' => self.string().map(Val::Str),
            b'{' => {
                let a = self.i;
                self.object(depth + 1, |_, _| Some(()))?;
                Some(Val::Obj(a, self.i))
            }
            b'[' => {
                let mut n = 0;
                self.array(depth + 1, |_| {
                    n += 1;
                    Some(())
                })?;
                Some(Val::Arr(n))
            }
            b't' => self.word(b"true").map(|_| Val::Other),
            b'f' => self.word(b"false").map(|_| Val::Other),
            b'n' => self.word(b"null").map(|_| Val::Null),
            _ => self.number(),
        }
    }
    /// `open` item (`,` item)* `close`, whitespace around the items skipped; `each` reads an item.
    fn sequence(&mut self, open: u8, close: u8, mut each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.byte(open)?;
        self.ws();
        if self.byte(close).is_some() {
            return Some(());
        }
        loop {
            self.ws();
            each(self)?;
            self.ws();
            if self.byte(b',').is_none() {
                return self.byte(close);
            }
        }
    }
    /// An array at `self.i`; `item(value)` sees each element in order.
    pub(crate) fn array(&mut self, depth: usize, mut item: impl FnMut(Val<'a>) -> Option<()>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.sequence(b'[', b']', |j| item(j.value(depth)?))
    }
    /// An object at `self.i`; `member(reader, key)` reads each member's value itself.
    pub(crate) fn members(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.sequence(b'{', b'}', |j| {
            let key = j.string()?;
            j.ws();
            j.byte(b':')?;
            j.ws();
            member(j, key)
        })
    }
    /// An object at `self.i`; `field(key, value)` sees each member in order.
    pub(crate) fn object(&mut self, depth: usize, mut field: impl FnMut(&'a str, Val<'a>) -> Option<()>) -> Option<()> {
        self.members(|j, key| {
            let v = j.value(depth)?;
            field(key, v)
        })
    }
}
