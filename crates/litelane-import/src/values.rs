//! Column types, type inference, and turning one field into one SQLite value.
//!
//! A field becomes a [`Cell`]: NULL, an integer, a real, or a span of text in
//! the batch's text buffer. Numbers are parsed on the parser thread, so the
//! writer only binds.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The type a column is stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ColType {
    /// Canonical integers (`0`, `-12`, no leading zeros, fits 64 bits).
    Integer,
    /// Finite decimal numbers (`1.5`, `-2e3`, integers too).
    Real,
    /// Anything, kept as written.
    Text,
    /// A column of an existing table with BLOB affinity (declared BLOB or
    /// no type): each value is stored as what it looks like, and SQLite
    /// changes nothing.
    Any,
    /// A column of an existing table with NUMERIC affinity (NUMERIC,
    /// DECIMAL, BOOLEAN, DATE...): numbers are stored as numbers; text that
    /// SQLite would turn into a number is rejected.
    Numeric,
    /// `true`/`false` (any case) stored as 1/0, declared `BOOLEAN`
    /// (NUMERIC affinity; `INTEGER` in a STRICT table).
    Boolean,
    /// An ISO-8601 date (`2024-01-05`), stored as written (TEXT), declared
    /// `DATE` (NUMERIC affinity, which keeps such text as text; `TEXT` in a
    /// STRICT table).
    Date,
    /// An ISO-8601 date and time (`2024-01-05 10:30:00`, `T`, fractions and
    /// a zone allowed), stored as written, declared `TIMESTAMP` (`TEXT` in a
    /// STRICT table).
    Timestamp,
}

impl ColType {
    /// Every type, in declaration order.
    pub const ALL: [ColType; 8] = [
        ColType::Integer,
        ColType::Real,
        ColType::Text,
        ColType::Any,
        ColType::Numeric,
        ColType::Boolean,
        ColType::Date,
        ColType::Timestamp,
    ];
}

impl ColType {
    /// The type name used in `CREATE TABLE` and in the summary.
    pub fn sql(self) -> &'static str {
        match self {
            ColType::Integer => "INTEGER",
            ColType::Real => "REAL",
            ColType::Text => "TEXT",
            ColType::Any => "ANY",
            ColType::Numeric => "NUMERIC",
            ColType::Boolean => "BOOLEAN",
            ColType::Date => "DATE",
            ColType::Timestamp => "TIMESTAMP",
        }
    }

    /// The declared type in `CREATE TABLE`: [`sql`](ColType::sql), except
    /// that a STRICT table allows only INTEGER, REAL, TEXT, BLOB and ANY,
    /// and that ANY outside a STRICT table is declared BLOB: there `ANY`
    /// has NUMERIC affinity, which would turn `00123` into 123
    /// (<https://sqlite.org/stricttables.html>, section 3).
    pub fn declared(self, strict: bool) -> &'static str {
        match (self, strict) {
            (ColType::Boolean, true) => "INTEGER",
            (ColType::Date | ColType::Timestamp, true) => "TEXT",
            (ColType::Any, false) => "BLOB",
            (t, _) => t.sql(),
        }
    }

    /// Parses a type name as `--type` and plans take it (any case).
    pub fn parse_name(s: &str) -> Option<ColType> {
        Some(match s.to_ascii_uppercase().as_str() {
            "INTEGER" | "INT" => ColType::Integer,
            "REAL" | "DOUBLE" | "FLOAT" => ColType::Real,
            "TEXT" => ColType::Text,
            "BOOLEAN" | "BOOL" => ColType::Boolean,
            "DATE" => ColType::Date,
            "TIMESTAMP" | "DATETIME" => ColType::Timestamp,
            "NUMERIC" => ColType::Numeric,
            "ANY" => ColType::Any,
            _ => return None,
        })
    }

    /// The type of an existing column from its declared type, following
    /// SQLite's affinity rules (<https://sqlite.org/datatype3.html>).
    pub fn from_declared(decl: &str) -> ColType {
        let d = decl.to_ascii_uppercase();
        if d.contains("INT") {
            ColType::Integer
        } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
            ColType::Text
        } else if d.contains("BLOB") || d.trim().is_empty() {
            ColType::Any
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            ColType::Real
        } else {
            ColType::Numeric
        }
    }

    /// SQLite converts text bound to a column of this type when the text
    /// looks like a number ([`looks_numeric_to_sqlite`]).
    pub fn converts_text(self) -> bool {
        !matches!(self, ColType::Text | ColType::Any)
    }
}

/// One value of a parsed row. Text is a span of the batch's text buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text: `(start, len)` in the batch's text buffer.
    Text(u32, u32),
}

/// Parses a canonical integer: optional `-`, digits, no leading zero (except
/// `0` itself), no `-0`, within `i64`. `007` is not an integer here: it stays
/// text so that zip codes and identifiers keep their zeros.
pub fn parse_int(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || neg) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        v = if neg {
            v.checked_mul(10)?.checked_sub(d)?
        } else {
            v.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(v)
}

/// Parses a finite decimal number (`1.5`, `-.5`, `3`, `6.02e23`). Words such
/// as `inf` or `NaN` and surrounding spaces are not numbers.
pub fn parse_real(b: &[u8]) -> Option<f64> {
    plain_decimal(b).or_else(|| parse_real_general(b))
}

/// Exact powers of ten as doubles: `10^0` to `10^22` (`5^22` < 2^53).
pub(crate) const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The common case of [`parse_real`], without the general parser: a sign,
/// digits and a decimal point (`-73.880364`, `27.6`, `.5`), no exponent,
/// the digits' value within a double's 53-bit mantissa, at most 22 of them
/// after the point, no leading zero before another digit. Then the
/// digits as an integer and the power of ten are both exact doubles, and
/// one IEEE division rounds their quotient correctly (Clinger's fast
/// path), which is the same double as the general parse. `None` leaves
/// the field to [`parse_real_general`]: it is not the simple case, whether
/// or not it is a number.
fn plain_decimal(b: &[u8]) -> Option<f64> {
    let (negative, body) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if body.len() > 1 && body[0] == b'0' && body[1].is_ascii_digit() {
        return None;
    }
    // The digits as one integer; more than fit a u64 leave the field to the
    // general parser (leading zeros add nothing).
    let mut mantissa: u64 = 0;
    let mut digits = |from: usize| -> Option<usize> {
        let mut i = from;
        while let Some(d) = body
            .get(i)
            .and_then(|c| c.checked_sub(b'0'))
            .filter(|d| *d < 10)
        {
            mantissa = mantissa.checked_mul(10)?.checked_add(u64::from(d))?;
            i += 1;
        }
        Some(i)
    };
    let whole = digits(0)?;
    let (end, scale) = match body.get(whole) {
        Some(b'.') => {
            let end = digits(whole + 1)?;
            (end, end - whole - 1)
        }
        _ => (whole, 0),
    };
    if end != body.len()
        || whole + scale == 0
        || mantissa > 1 << 53
        || scale >= EXACT_POWERS_OF_TEN.len()
    {
        return None;
    }
    let v = mantissa as f64 / EXACT_POWERS_OF_TEN[scale];
    Some(if negative { -v } else { v })
}

/// [`parse_real`] for every input: the text checked for the characters of a
/// number, then the standard library's parse.
fn parse_real_general(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b.len() > 512 || is_big_integer(b) {
        return None;
    }
    let mut digit = false;
    for &c in b {
        match c {
            b'0'..=b'9' => digit = true,
            b'+' | b'-' | b'.' | b'e' | b'E' => {}
            _ => return None,
        }
    }
    if !digit {
        return None;
    }
    // A leading zero before another digit (`007`, `01.5`) marks a code, not
    // a number: keep it as text.
    let unsigned = b
        .strip_prefix(b"-")
        .or_else(|| b.strip_prefix(b"+"))
        .unwrap_or(b);
    if unsigned.len() > 1 && unsigned[0] == b'0' && unsigned[1].is_ascii_digit() {
        return None;
    }
    // Only ASCII got here.
    let s = std::str::from_utf8(b).ok()?;
    s.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && !underflows(b, *f))
}

/// True when the number written `b` is not zero but parsed to `v` = ±0.0: it
/// is below a double's range (`1e-400`), and storing `v` would turn a
/// nonzero value into zero.
pub fn underflows(b: &[u8], v: f64) -> bool {
    if v != 0.0 {
        return false;
    }
    let mantissa = match b.iter().position(|&c| c == b'e' || c == b'E') {
        Some(i) => &b[..i],
        None => b,
    };
    mantissa.iter().any(|&c| (b'1'..=b'9').contains(&c))
}

/// `true`/`false` in any case: `Some(1)`/`Some(0)`.
pub fn parse_bool(b: &[u8]) -> Option<i64> {
    if b.eq_ignore_ascii_case(b"true") {
        Some(1)
    } else if b.eq_ignore_ascii_case(b"false") {
        Some(0)
    } else {
        None
    }
}

fn digits(b: &[u8], n: usize) -> Option<u32> {
    if b.len() < n || !b[..n].iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b[..n].iter().fold(0, |v, &c| v * 10 + (c - b'0') as u32))
}

/// An ISO-8601 calendar date `YYYY-MM-DD` that exists (leap years checked).
pub fn is_iso_date(b: &[u8]) -> bool {
    b.len() == 10 && iso_date_prefix(b)
}

fn iso_date_prefix(b: &[u8]) -> bool {
    let (Some(y), Some(m), Some(d)) = (
        digits(b, 4),
        b.get(5..).and_then(|r| digits(r, 2)),
        b.get(8..).and_then(|r| digits(r, 2)),
    ) else {
        return false;
    };
    if b[4] != b'-' || b[7] != b'-' || !(1..=12).contains(&m) || d == 0 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    d <= days[m as usize - 1]
}

/// An ISO-8601 date and time as SQLite's date functions read it:
/// `YYYY-MM-DD`, `T` or a space, `HH:MM`, optionally `:SS` and a fraction,
/// optionally `Z` or `±HH:MM`.
pub fn is_iso_timestamp(b: &[u8]) -> bool {
    if b.len() < 16 || !iso_date_prefix(b) || !matches!(b[10], b'T' | b' ') {
        return false;
    }
    let t = &b[11..];
    let (Some(h), Some(mi)) = (digits(t, 2), t.get(3..).and_then(|r| digits(r, 2))) else {
        return false;
    };
    if t[2] != b':' || h > 23 || mi > 59 {
        return false;
    }
    let mut r = &t[5..];
    if r.first() == Some(&b':') {
        match digits(&r[1..], 2) {
            Some(s) if s <= 59 => r = &r[3..],
            _ => return false,
        }
        if r.first() == Some(&b'.') {
            let n = r[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return false;
            }
            r = &r[1 + n..];
        }
    }
    match r {
        [] | [b'Z'] => true,
        [b'+' | b'-', rest @ ..] => {
            rest.len() == 5
                && rest[2] == b':'
                && digits(rest, 2).is_some_and(|v| v <= 14)
                && digits(&rest[3..], 2).is_some_and(|v| v <= 59)
        }
        _ => false,
    }
}

/// An integer as written: an optional sign and one or more ASCII digits,
/// nothing else (of any length: `123456789012345678901234` is one).
pub fn is_integer_literal(b: &[u8]) -> bool {
    let digits = match b.first() {
        Some(b'-' | b'+') => &b[1..],
        _ => b,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// An integer literal ([`is_integer_literal`]) too large for 64 bits: as a
/// REAL it would lose digits.
pub fn is_big_integer(b: &[u8]) -> bool {
    // Under 19 digits always fits (i64::MAX has 19).
    b.len() >= 19
        && is_integer_literal(b)
        && std::str::from_utf8(b).is_ok_and(|s| s.parse::<i64>().is_err())
}

/// Whitespace as SQLite's numeric conversion skips it.
fn is_sqlite_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// True when SQLite's INTEGER, REAL or NUMERIC column affinity would store
/// this text as a number instead of as written: surrounding whitespace, an
/// optional sign, digits with an optional decimal point (at least one
/// digit), and an optional exponent (`e`, optional sign, digits), as in
/// <https://sqlite.org/datatype3.html> ("well-formed integer or real
/// literal"), read up to the first NUL byte as SQLite does; checked against
/// SQLite itself in the tests.
pub fn looks_numeric_to_sqlite(b: &[u8]) -> bool {
    // SQLite reads the text only up to a NUL byte: `7\0abc` would become 7.
    let b = match memchr::memchr(0, b) {
        Some(n) => &b[..n],
        None => b,
    };
    let mut i = 0;
    let mut j = b.len();
    while i < j && is_sqlite_space(b[i]) {
        i += 1;
    }
    while j > i && is_sqlite_space(b[j - 1]) {
        j -= 1;
    }
    let s = &b[i..j];
    let mut k = 0;
    if matches!(s.first(), Some(b'+' | b'-')) {
        k = 1;
    }
    let mut digits = 0;
    while k < s.len() && s[k].is_ascii_digit() {
        k += 1;
        digits += 1;
    }
    if k < s.len() && s[k] == b'.' {
        k += 1;
        while k < s.len() && s[k].is_ascii_digit() {
            k += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return false;
    }
    if k < s.len() && (s[k] == b'e' || s[k] == b'E') {
        k += 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let mut exp = 0;
        while k < s.len() && s[k].is_ascii_digit() {
            k += 1;
            exp += 1;
        }
        if exp == 0 {
            return false;
        }
    }
    k == s.len()
}

/// What type inference notes of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// `null` (not noted).
    Null,
    /// `true` or `false`.
    Bool,
    /// A number that is an `i64`.
    Integer,
    /// Any other number.
    Float,
    /// A string, an array or an object.
    Other,
}

impl JsonKind {
    /// The kind of `v`.
    pub fn of(v: &Json) -> JsonKind {
        match v {
            Json::Null => JsonKind::Null,
            Json::Bool(_) => JsonKind::Bool,
            Json::Number(n) if n.as_i64().is_some() => JsonKind::Integer,
            Json::Number(_) => JsonKind::Float,
            _ => JsonKind::Other,
        }
    }
}

/// What a sample showed about one column's values, and the type it
/// decides: the one type inferer of the import. The sniffer notes CSV/TSV
/// fields with [`observe_text`](Self::observe_text) (every type, spaces
/// around numbers allowed); NDJSON values go through
/// [`observe_json`](Self::observe_json) (numbers or text only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Inference {
    non_null: u64,
    not_bool: bool,
    not_int: bool,
    not_real: bool,
    not_date: bool,
    not_ts: bool,
    padded: u64,
}

/// `f` without its leading and trailing ASCII spaces.
pub fn trim_spaces(f: &[u8]) -> &[u8] {
    let s = f.iter().position(|&c| c != b' ').unwrap_or(f.len());
    let e = f.iter().rposition(|&c| c != b' ').map_or(s, |e| e + 1);
    &f[s..e]
}

impl Inference {
    /// Notes one non-null CSV/TSV field: a boolean, date or timestamp as
    /// written, a number also with spaces around it (counted as padded).
    pub fn observe_text(&mut self, f: &[u8]) {
        self.non_null += 1;
        let t = trim_spaces(f);
        let padded = t.len() != f.len() && !t.is_empty();
        // Each "not" is final once set: a type already ruled out is not
        // tested again (the padded count still needs `real`).
        if !self.not_bool {
            self.not_bool = parse_bool(f).is_none();
        }
        if !self.not_date || !self.not_ts {
            let date = is_iso_date(f);
            self.not_date |= !date;
            self.not_ts |= !(date || is_iso_timestamp(f));
        }
        if !self.not_int {
            let int = parse_int(t).is_some();
            self.not_int = !int || (t.len() != f.len() && !padded);
        }
        if !self.not_real || padded {
            let real = parse_real(t).is_some();
            self.not_real |= !real || (t.len() != f.len() && !padded);
            if padded && real {
                self.padded += 1;
            }
        }
    }

    /// Notes one non-null text field as a number or text only (INTEGER,
    /// REAL or TEXT; no spaces allowed). Only tests and the fuzzing
    /// checker use it.
    pub fn observe_bytes(&mut self, b: &[u8]) {
        self.non_null += 1;
        self.not_bool = true;
        self.not_date = true;
        self.not_ts = true;
        self.not_int |= parse_int(b).is_none();
        self.not_real |= parse_real(b).is_none();
    }

    /// Notes one JSON value (null is ignored); `text` is the value as
    /// written, when the line was read for it. A JSON column is INTEGER,
    /// REAL or TEXT (a boolean counts as an integer).
    pub fn observe_json(&mut self, v: &Json, text: Option<&str>) {
        self.observe_kind(JsonKind::of(v), text);
    }

    /// [`observe_json`](Self::observe_json) of a value of kind `kind`.
    pub fn observe_kind(&mut self, kind: JsonKind, text: Option<&str>) {
        if kind == JsonKind::Null {
            return;
        }
        self.non_null += 1;
        self.not_bool = true;
        self.not_date = true;
        self.not_ts = true;
        match kind {
            JsonKind::Null | JsonKind::Bool | JsonKind::Integer => {}
            JsonKind::Float => {
                self.not_int = true;
                // An integer beyond 64 bits keeps its digits only as text.
                if text.is_some_and(|t| is_big_integer(t.as_bytes())) {
                    self.not_real = true;
                }
            }
            JsonKind::Other => {
                self.not_int = true;
                self.not_real = true;
            }
        }
    }

    /// Numbers seen with spaces around them (by
    /// [`observe_text`](Self::observe_text)).
    pub fn padded(&self) -> u64 {
        self.padded
    }

    /// The type decided: BOOLEAN, INTEGER, REAL, DATE, TIMESTAMP when
    /// every value noted was one (in that order of preference), else TEXT
    /// (also for a column with no value).
    pub fn decide(&self) -> ColType {
        if self.non_null == 0 {
            ColType::Text
        } else if !self.not_bool {
            ColType::Boolean
        } else if !self.not_int {
            ColType::Integer
        } else if !self.not_real {
            ColType::Real
        } else if !self.not_date {
            ColType::Date
        } else if !self.not_ts {
            ColType::Timestamp
        } else {
            ColType::Text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_must_be_canonical_and_fit() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-42"), Some(-42));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_int(b"9223372036854775808"), None);
        for bad in [&b"007"[..], b"-0", b"+1", b"", b"-", b"1.0", b" 1", b"1e3"] {
            assert_eq!(parse_int(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn reals_are_finite_numbers_only() {
        assert_eq!(parse_real(b"1.5"), Some(1.5));
        assert_eq!(parse_real(b"-2e3"), Some(-2000.0));
        assert_eq!(parse_real(b"3"), Some(3.0));
        assert_eq!(parse_real(b"0.25"), Some(0.25));
        // Below a double's range: not zero, so not a REAL (it would be 0.0).
        assert_eq!(parse_real(b"0e-400"), Some(0.0));
        assert_eq!(parse_real(b"4.9e-324"), Some(4.9e-324));
        for bad in [
            &b"1e-400"[..],
            b"-1e-400",
            b"0.0001e-330",
            b"2e-324",
            b"inf",
            b"NaN",
            b"1e999",
            b".",
            b"1,5",
            b" 1",
            b"e",
            b"007",
            b"-01.5",
        ] {
            assert_eq!(parse_real(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// Where the fast path stops: each field, whether the fast path takes
    /// it, and the double both paths must give (or `None`).
    #[test]
    fn the_fast_path_takes_plain_decimals_and_leaves_the_rest() {
        let cases: [(&str, bool, Option<f64>); 29] = [
            ("-73.880364", true, Some(-73.880364)),
            ("27.6", true, Some(27.6)),
            ("0.1", true, Some(0.1)),
            (".5", true, Some(0.5)),
            ("5.", true, Some(5.0)),
            ("+5", true, Some(5.0)),
            ("-0.0", true, Some(-0.0)),
            ("0.0000000000000000000001", true, Some(1e-22)),
            // 2^53 is exact; one more is not, and 23 places are not either.
            ("9007199254740992", true, Some(9007199254740992.0)),
            ("9007199254740993", false, Some(9007199254740992.0)),
            ("0.00000000000000000000001", false, Some(1e-23)),
            ("1e5", false, Some(100000.0)),
            (
                "12345678901234567890.5",
                false,
                Some(12345678901234567890.5),
            ),
            ("007", false, None),
            ("-01.5", false, None),
            (".", false, None),
            ("1.2.3", false, None),
            ("--5", false, None),
            ("", false, None),
            ("-", false, None),
            ("+", false, None),
            ("-.", false, None),
            ("+.5", true, Some(0.5)),
            (" 1.5", false, None),
            ("1.5 ", false, None),
            ("1_0", false, None),
            ("\u{663}.5", false, None),
            ("1.5\0", false, None),
            ("0x1F", false, None),
        ];
        for (text, fast, want) in cases {
            let b = text.as_bytes();
            assert_eq!(plain_decimal(b).is_some(), fast, "{text}: fast path");
            assert_eq!(
                parse_real(b).map(f64::to_bits),
                want.map(f64::to_bits),
                "{text}"
            );
            assert_eq!(
                parse_real_general(b).map(f64::to_bits),
                want.map(f64::to_bits),
                "{text}: general"
            );
        }
    }

    #[test]
    fn inference_picks_the_narrowest_type_that_fits_every_value() {
        let decide = |vals: &[&str]| {
            let mut i = Inference::default();
            vals.iter().for_each(|v| i.observe_bytes(v.as_bytes()));
            i.decide()
        };
        assert_eq!(decide(&["1", "2", "-3"]), ColType::Integer);
        assert_eq!(decide(&["1", "2.5"]), ColType::Real);
        assert_eq!(decide(&["1", "x"]), ColType::Text);
        assert_eq!(decide(&["007", "1"]), ColType::Text);
        assert_eq!(decide(&[]), ColType::Text);
    }

    #[test]
    fn declared_types_map_by_affinity() {
        assert_eq!(ColType::from_declared("bigint"), ColType::Integer);
        assert_eq!(ColType::from_declared("VARCHAR(10)"), ColType::Text);
        assert_eq!(ColType::from_declared("double precision"), ColType::Real);
        assert_eq!(ColType::from_declared(""), ColType::Any);
        assert_eq!(ColType::from_declared("NUMERIC"), ColType::Numeric);
        assert_eq!(ColType::from_declared("blob"), ColType::Any);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// What SQLite itself does with `text` bound to a column declared
    /// `decl`: true when it stores a number instead of the text.
    fn sqlite_converts(c: &rusqlite::Connection, decl: &str, text: &str) -> bool {
        c.execute_batch(&format!("DROP TABLE IF EXISTS o; CREATE TABLE o(x {decl})"))
            .unwrap();
        c.execute("INSERT INTO o VALUES (?1)", [text]).unwrap();
        let ty: String = c
            .query_row("SELECT typeof(x) FROM o", [], |r| r.get(0))
            .unwrap();
        ty != "text"
    }

    #[test]
    fn looks_numeric_agrees_with_sqlite_on_edge_cases() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        for text in [
            "1.",
            ".5",
            ".",
            "1e",
            "1e+",
            "+",
            "-",
            " 1 ",
            "1e5 ",
            "\t7\n",
            "0x10",
            "1_000",
            "\u{661}",
            "\u{a0}7",
            "1e999",
            "-1e309",
            "--1",
            "+-1",
            "1..2",
            "1.e5",
            ".e5",
            "00123",
            "+5",
            "1e3",
            " 7",
            "7 ",
            "\x0b7\x0c",
            "9223372036854775808",
            "1,5",
            "inf",
            "NaN",
            "",
            " ",
            "e5",
            "5e-",
            "0.0",
            "-0",
            "1e0000000000000000000005",
        ] {
            for decl in ["INTEGER", "REAL", "NUMERIC"] {
                assert_eq!(
                    sqlite_converts(&c, decl, text),
                    looks_numeric_to_sqlite(text.as_bytes()),
                    "{text:?} in a {decl} column"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn every_i64_in_decimal_parses_back_exactly(v in any::<i64>()) {
            prop_assert_eq!(parse_int(v.to_string().as_bytes()), Some(v));
            let mut inf = Inference::default();
            inf.observe_bytes(v.to_string().as_bytes());
            prop_assert_eq!(inf.decide(), ColType::Integer);
        }

        /// Skipping the tests of types already ruled out changes nothing:
        /// after every value, the inference is what testing every type of
        /// every value (the code before the skip, kept here) gives.
        #[test]
        fn inference_that_skips_ruled_out_types_decides_as_testing_all(
            values in proptest::collection::vec(
                prop_oneof![
                    Just("12"), Just(" 12 "), Just("1.5"), Just(" 1.5"), Just("-0.5 "),
                    Just("true"), Just("FALSE"), Just("2024-01-05"), Just("2024-01-05 10:00:00"),
                    Just("2024-01-05T10:00:00Z"), Just("card"), Just("007"), Just(" x "),
                    Just("  "), Just("1e5"),
                ].prop_map(String::from)
                .boxed()
                .prop_union("[ 0-9.eTtrufals:-]{0,12}".boxed()),
                0..12,
            )
        ) {
            let mut skip = Inference::default();
            let mut all = Inference::default();
            for v in &values {
                let f = v.as_bytes();
                skip.observe_text(f);
                all.non_null += 1;
                let t = trim_spaces(f);
                let padded = t.len() != f.len() && !t.is_empty();
                all.not_bool |= parse_bool(f).is_none();
                all.not_date |= !is_iso_date(f);
                all.not_ts |= !(is_iso_date(f) || is_iso_timestamp(f));
                let int = parse_int(t).is_some();
                let real = parse_real(t).is_some();
                all.not_int |= !int || (t.len() != f.len() && !padded);
                all.not_real |= !real || (t.len() != f.len() && !padded);
                if padded && real {
                    all.padded += 1;
                }
                prop_assert_eq!(format!("{skip:?}"), format!("{all:?}"), "after {:?}", v);
                prop_assert_eq!(skip.decide(), all.decide());
            }
        }

        /// The fast path gives the general parse's double, bit for bit, or
        /// leaves the field to it.
        #[test]
        fn plain_decimals_parse_as_the_general_parser_does(
            text in "[+-]?[0-9]{0,21}(\\.[0-9]{0,24})?|[+-]?0*[0-9]{0,3}\\.?[0-9]{0,3}|[0-9.+-]{0,8}"
        ) {
            let general = parse_real_general(text.as_bytes()).map(f64::to_bits);
            if let Some(fast) = plain_decimal(text.as_bytes()) {
                prop_assert_eq!(Some(fast.to_bits()), general, "{}", text);
            }
            prop_assert_eq!(parse_real(text.as_bytes()).map(f64::to_bits), general, "{}", text);
        }

        #[test]
        fn every_finite_double_round_trips_to_the_last_bit(
            v in any::<f64>().prop_filter("finite", |v| v.is_finite())
        ) {
            for text in [format!("{v:e}"), format!("{v:E}"), format!("{v:?}")] {
                let got = parse_real(text.as_bytes());
                prop_assert_eq!(got.map(f64::to_bits), Some(v.to_bits()), "{}", text);
            }
        }

        #[test]
        fn integers_of_any_length_are_never_typed_real(digits in "[1-9][0-9]{0,40}") {
            let mut inf = Inference::default();
            inf.observe_bytes(digits.as_bytes());
            let fits = digits.parse::<i64>().is_ok();
            prop_assert_eq!(
                inf.decide(),
                if fits { ColType::Integer } else { ColType::Text }
            );
            prop_assert_eq!(is_big_integer(digits.as_bytes()), !fits);
        }

        #[test]
        fn looks_numeric_agrees_with_sqlite(
            text in "[ \t\n\r0-9+.eE-]{0,8}|[0-9a-fxA-F +.-]{0,6}|.{0,6}"
        ) {
            let c = rusqlite::Connection::open_in_memory().unwrap();
            let mine = looks_numeric_to_sqlite(text.as_bytes());
            for decl in ["INTEGER", "REAL", "NUMERIC"] {
                prop_assert_eq!(
                    sqlite_converts(&c, decl, &text),
                    mine,
                    "{:?} in a {} column",
                    text,
                    decl
                );
            }
        }
    }
}
