//! A scanner for the common NDJSON line: one object whose values are
//! scalars, read by hand in one pass over the bytes, with no `serde`
//! visitor per key and value.
//!
//! It reads plain tokens itself: strings without escapes, integers and
//! decimals of at most 18 digits and no exponent, `true`, `false`, `null`.
//! Every other token (a string with an escape, a number with an exponent or
//! more digits, an array or object) it hands to `serde_json` as a slice of
//! its own, so that each value is what the `serde_json` parser of the whole
//! line makes of it. Anything it cannot place (a byte out of the grammar, a
//! token `serde_json` refuses, nesting deeper than [`MAX_DEPTH`]) ends the
//! scan with `None`; the caller then undoes the row and reads the line with
//! `serde_json`, which decides.
//!
//! So the scanner never accepts a line `serde_json` refuses: its own
//! grammar is a subset of JSON's, checked token by token, and the tokens it
//! does not know are `serde_json`'s to accept.

use std::borrow::Cow;

use serde_json::{Number, Value as Json};

use super::{Key, Row};
use crate::convert::{CheckedJson, Converter, JsonRef};
use crate::values::EXACT_POWERS_OF_TEN;

/// The deepest array or object nesting the scanner hands to `serde_json` as
/// a slice (levels). `serde_json` refuses documents nested beyond 128
/// levels; a slice starts one level below the line's object, so a deeper
/// value is left to the whole-line parser, which counts from the top.
pub(super) const MAX_DEPTH: usize = 64;

/// Digits of an integer or decimal the scanner converts itself; longer
/// numbers go to `serde_json` (10^18 fits an `i64`).
const MAX_DIGITS: usize = 18;

/// A number read from the line.
enum Num {
    /// An integer written as plain digits (at most 18, no `-0`): its text
    /// is exactly how `serde_json` shows the number.
    Int(i64),
    /// A decimal written as plain digits and a point (at most 18 digits).
    Real(f64),
    /// Any other number; `None`: not finite (null).
    Other(Option<Number>),
}

struct Scan<'a> {
    line: &'a str,
    s: &'a [u8],
    pos: usize,
}

/// Reads `line`, one JSON object, into `row`; `None` when the scanner
/// leaves the line to `serde_json` (the row is then partly filled and must
/// be undone).
pub(super) fn object(line: &str, row: &mut Row<'_, '_>) -> Option<()> {
    let mut sc = Scan {
        line,
        s: line.as_bytes(),
        pos: 0,
    };
    sc.ws();
    sc.eat(b'{')?;
    sc.ws();
    if sc.peek() == Some(b'}') {
        sc.pos += 1;
    } else {
        loop {
            if sc.peek()? != b'"' {
                return None;
            }
            let key = sc.key(row.conv, row.next)?;
            sc.ws();
            sc.eat(b':')?;
            sc.ws();
            match key {
                Key::Column(i) => {
                    row.given(i);
                    sc.value(Some((&mut *row, i)))?;
                }
                Key::Unknown(k) => {
                    sc.value(None)?;
                    row.unknown.get_or_insert(k);
                }
            }
            sc.ws();
            match sc.peek()? {
                b',' => {
                    sc.pos += 1;
                    sc.ws();
                }
                b'}' => {
                    sc.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    sc.ws();
    (sc.pos == sc.s.len()).then_some(())
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.pos += 1)
    }

    /// Skips JSON's whitespace (space, tab, LF, CR: nothing else).
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The token from `start` to the scan position, parsed by `serde_json`.
    fn by_serde<T: serde::de::DeserializeOwned>(&self, start: usize) -> Option<T> {
        serde_json::from_str(&self.line[start..self.pos]).ok()
    }

    /// The key at the position (on its opening quote), as the column it
    /// names. The key of column `next` is matched as bytes when it has
    /// nothing JSON escapes (then the line's token can only be that key).
    fn key(&mut self, conv: &Converter, next: usize) -> Option<Key> {
        if let Some(k) = conv.plain_key(next) {
            let end = self.pos + 1 + k.len();
            if self.s.get(self.pos + 1..end) == Some(k) && self.s.get(end) == Some(&b'"') {
                self.pos = end + 1;
                return Some(Key::Column(next));
            }
        }
        let k = self.string()?;
        Some(conv.key_at(&k, next))
    }

    /// The string at the position (on its opening quote).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.pos;
        let i = special(self.s, start + 1)?;
        match self.s[i] {
            b'"' => {
                self.pos = i + 1;
                return Some(Cow::Borrowed(&self.line[start + 1..i]));
            }
            b'\\' => {}
            // A control character, which JSON allows only escaped.
            _ => return None,
        }
        let mut i = i;
        // An escape: find the closing quote, then let serde_json unescape.
        loop {
            match *self.s.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        self.pos = i + 1;
        self.by_serde::<String>(start).map(Cow::Owned)
    }

    /// Reads the value at the position into column `i` of `row` (`None`:
    /// a key that names no column; the value is still read and checked).
    fn value(&mut self, to: Option<(&mut Row<'_, '_>, usize)>) -> Option<()> {
        let start = self.pos;
        let v = match self.peek()? {
            b'"' => {
                let s = self.string()?;
                if let Some((row, i)) = to {
                    row.put(i, JsonRef::String(&s));
                }
                return Some(());
            }
            b'-' | b'0'..=b'9' => match self.number()? {
                Num::Int(v) => {
                    if let Some((row, i)) = to {
                        row.put_int(i, v, &self.s[start..self.pos]);
                    }
                    return Some(());
                }
                Num::Real(v) => {
                    if let Some((row, i)) = to {
                        row.put_real(i, v);
                    }
                    return Some(());
                }
                Num::Other(Some(n)) => {
                    if let Some((row, i)) = to {
                        row.put(i, JsonRef::Number(&n));
                    }
                    return Some(());
                }
                // A double out of range is null, as in the line's own parse.
                Num::Other(None) => JsonRef::Null,
            },
            b't' => self.word(b"true", JsonRef::Bool(true))?,
            b'f' => self.word(b"false", JsonRef::Bool(false))?,
            b'n' => self.word(b"null", JsonRef::Null)?,
            b'[' | b'{' => {
                let j = self.nested()?;
                if let Some((row, i)) = to {
                    row.put(i, JsonRef::Nested(&j));
                }
                return Some(());
            }
            _ => return None,
        };
        if let Some((row, i)) = to {
            row.put(i, v);
        }
        Some(())
    }

    fn word<T>(&mut self, w: &[u8], v: T) -> Option<T> {
        self.s[self.pos..].starts_with(w).then(|| {
            self.pos += w.len();
            v
        })
    }

    /// A number, converted as `serde_json` converts it: an integer of at
    /// most 18 digits as [`Num::Int`] (`-0` is the double -0.0), a decimal
    /// of at most 18 digits as [`Num::Real`], anything else as its `Number`
    /// (`None`: null, as `serde_json::Value` makes a double that is not
    /// finite).
    fn number(&mut self) -> Option<Num> {
        let start = self.pos;
        let s = self.s;
        let negative = s[start] == b'-';
        let mut i = start + usize::from(negative);
        // Past MAX_DIGITS the mantissa wraps, unused: such numbers go to
        // serde_json.
        let mut mantissa: u64 = 0;
        let whole_start = i;
        let whole = digits(s, &mut i, &mut mantissa);
        let point = i < s.len() && s[i] == b'.';
        let mut scale = 0;
        if point {
            i += 1;
            scale = digits(s, &mut i, &mut mantissa);
        }
        let plain = whole > 0
            && (!point || scale > 0)
            && whole + scale <= MAX_DIGITS
            && !(whole > 1 && s[whole_start] == b'0')
            && !matches!(s.get(i), Some(b'e' | b'E' | b'.' | b'+' | b'-'));
        if !plain {
            return self.serde_number(start);
        }
        self.pos = i;
        Some(if point {
            // A decimal, computed as serde_json computes it (its digits as
            // one integer, made a double, divided by the power of ten): the
            // correctly rounded value when that integer is at most 2^53.
            let v = mantissa as f64 / EXACT_POWERS_OF_TEN[scale];
            Num::Real(if negative { -v } else { v })
        } else if negative && mantissa == 0 {
            Num::Other(Number::from_f64(-0.0))
        } else {
            // At most 18 digits: within an i64.
            let v = mantissa as i64;
            Num::Int(if negative { -v } else { v })
        })
    }

    /// The number at `start`, as far as a number's characters go, parsed
    /// by `serde_json`.
    fn serde_number(&mut self, start: usize) -> Option<Num> {
        let mut i = start;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.s.get(i) {
            i += 1;
        }
        self.pos = i;
        match self.by_serde::<Json>(start)? {
            Json::Number(n) => Some(Num::Other(Some(n))),
            Json::Null => Some(Num::Other(None)),
            _ => None,
        }
    }

    /// The array or object at the position, found by its brackets (strings
    /// skipped) and parsed by `serde_json` as the line's parser reads it.
    fn nested(&mut self) -> Option<Json> {
        let start = self.pos;
        let mut depth = 0usize;
        let mut i = start;
        loop {
            match *self.s.get(i)? {
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return None;
                    }
                }
                b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'"' => {
                    i += 1;
                    loop {
                        match *self.s.get(i)? {
                            b'"' => break,
                            b'\\' => i += 2,
                            _ => i += 1,
                        }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        self.pos = i + 1;
        self.by_serde::<CheckedJson>(start).map(|j| j.0)
    }
}

/// Reads the ASCII digits from `*i` on into `mantissa` (wrapping), moving
/// `*i` past them; returns how many there were.
fn digits(s: &[u8], i: &mut usize, mantissa: &mut u64) -> usize {
    let from = *i;
    while *i < s.len() && s[*i].is_ascii_digit() {
        *mantissa = mantissa
            .wrapping_mul(10)
            .wrapping_add(u64::from(s[*i] - b'0'));
        *i += 1;
    }
    *i - from
}

/// The index of the first byte at or after `from` that ends the plain part
/// of a JSON string: a quote, a backslash or a control character (below
/// 0x20). Eight bytes at a time: in each, a byte equal to `"` or `\\` or
/// below 0x20 sets its high bit in `found` (the lowest such bit is exact; a
/// borrow can only set bits above it).
pub(super) fn special(s: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while let Some(chunk) = s.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let quote = w ^ (ONES * u64::from(b'"'));
        let slash = w ^ (ONES * u64::from(b'\\'));
        let found = (quote.wrapping_sub(ONES) & !quote
            | slash.wrapping_sub(ONES) & !slash
            | w.wrapping_sub(ONES * 0x20) & !w)
            & HIGH;
        if found != 0 {
            return Some(i + found.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    s[i.min(s.len())..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| i + p)
}
