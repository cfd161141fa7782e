//! The fast path of [`Converter::push_json`]: one NDJSON line parsed
//! straight into the cells of a row, without building a `serde_json::Value`
//! or a map per line.
//!
//! A hand scanner ([`scan`]) reads the line first: plain tokens itself,
//! other tokens through `serde_json`. A line it cannot place is read again
//! by `serde_json`'s own parser (so that it accepts and rejects exactly
//! what the reference path, `serde_json::from_slice::<Value>`, does),
//! through a visitor. Both look each key up among the plan's columns
//! (first at the position after the previous key's column: keys usually
//! come in the same order on every line) and convert each value as it is
//! read. Strings without escapes are borrowed from the line; numbers never
//! become text unless their column is TEXT.
//!
//! Lines the fast path does not settle are left to the reference path, which
//! then decides alone, so that every outcome and message stays the
//! reference's: a line that is not valid JSON or not UTF-8 (for its
//! message), not an object, has a run of 19+ digits (a possible integer
//! beyond 64 bits, kept as written) or a negative exponent of 3+ digits (a
//! possible number below a double's range, which must not become 0.0). A line that gives one column twice (a
//! key repeated, or two spellings of it) is rejected by both paths alike:
//! storing either value would drop the other.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value as Json};

use super::{has_long_number, has_tiny_exponent, json_cell, CheckedJson, Converter, JsonRef};
use crate::convert::batch::Batch;
use crate::read::records::Place;
use crate::values::{Cell, ColType};

mod scan;

/// Columns already given on the line (a bit set).
enum Seen {
    Bits(u128),
    Many(Vec<bool>),
}

impl Seen {
    fn new(ncols: usize) -> Seen {
        if ncols <= 128 {
            Seen::Bits(0)
        } else {
            Seen::Many(vec![false; ncols])
        }
    }

    /// Marks column `i`; false when it was already marked.
    fn mark(&mut self, i: usize) -> bool {
        match self {
            Seen::Bits(bits) => {
                let was = *bits & (1u128 << i) != 0;
                *bits |= 1u128 << i;
                !was
            }
            Seen::Many(v) => !std::mem::replace(&mut v[i], true),
        }
    }
}

/// The state of the line being read.
struct Row<'c, 'b> {
    conv: &'c Converter,
    b: &'b mut Batch,
    /// Index in `b.cells` of the row's first cell.
    base: usize,
    seen: Seen,
    /// The column the next key is expected to name.
    next: usize,
    /// The first key that names no column.
    unknown: Option<String>,
    /// A column given twice.
    twice: bool,
    /// The conversion error of the leftmost column that failed.
    error: Option<(usize, String)>,
}

/// What a key names.
enum Key {
    Column(usize),
    Unknown(String),
}

struct KeySeed<'c> {
    conv: &'c Converter,
    next: usize,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, k: &str) -> Result<Key, E> {
        Ok(self.conv.key_at(k, self.next))
    }
}

impl Converter {
    /// The key of column `i` when the plan's keys are unique and it has no
    /// character JSON escapes (quote, backslash, control characters): then
    /// the line's token for it is these bytes between quotes.
    fn plain_key(&self, i: usize) -> Option<&[u8]> {
        let k = self.plan.columns.get(i)?.key.as_bytes();
        (self.unique_keys && self.plain_keys[i]).then_some(k)
    }

    /// The column key `k` names, trying first column `next` (the one after
    /// the previous key's: keys usually come in the same order every line).
    fn key_at(&self, k: &str, next: usize) -> Key {
        if self.unique_keys {
            if let Some(col) = self.plan.columns.get(next) {
                if col.key == k {
                    return Key::Column(next);
                }
            }
        }
        self.column_of(k)
            .map_or_else(|| Key::Unknown(k.to_string()), Key::Column)
    }
}

/// Reads one value into column `i` of the row.
struct CellSeed<'r, 'c, 'b> {
    row: &'r mut Row<'c, 'b>,
    i: usize,
}

impl CellSeed<'_, '_, '_> {
    fn put(self, v: JsonRef<'_>) {
        self.row.put(self.i, v);
    }
}

impl<'c, 'b> Row<'c, 'b> {
    /// An empty row (every column NULL) at the end of `b`.
    fn new(conv: &'c Converter, b: &'b mut Batch) -> Row<'c, 'b> {
        let base = b.cells.len();
        let ncols = conv.plan.columns.len();
        // A key the line lacks is NULL.
        b.cells.resize(base + ncols, Cell::Null);
        Row {
            conv,
            b,
            base,
            seen: Seen::new(ncols),
            next: 0,
            unknown: None,
            twice: false,
            error: None,
        }
    }

    /// Notes that the line gives column `i` (a second time: `twice`).
    fn given(&mut self, i: usize) {
        if !self.seen.mark(i) {
            self.twice = true;
        }
        self.next = i + 1;
    }

    /// [`put`](Row::put) of the integer `v`, written as `token` (plain
    /// digits, which is how `serde_json` shows it), without the general
    /// conversion for the columns where it is plain: the integer itself,
    /// or its digits as text.
    fn put_int(&mut self, i: usize, v: i64, token: &[u8]) {
        let cell = match self.conv.plan.columns[i].ty {
            ColType::Integer | ColType::Numeric | ColType::Any | ColType::Boolean => Cell::Int(v),
            ColType::Text => self.b.push_text(token),
            ColType::Real | ColType::Date | ColType::Timestamp => {
                return self.put(i, JsonRef::Number(&Number::from(v)));
            }
        };
        self.b.cells[self.base + i] = cell;
    }

    /// [`put`](Row::put) of the finite double `v` (a JSON decimal), without
    /// the general conversion for the columns that store it as it is.
    fn put_real(&mut self, i: usize, v: f64) {
        match self.conv.plan.columns[i].ty {
            ColType::Real | ColType::Numeric | ColType::Any => {
                self.b.cells[self.base + i] = Cell::Real(v);
            }
            _ => match Number::from_f64(v) {
                Some(n) => self.put(i, JsonRef::Number(&n)),
                None => self.put(i, JsonRef::Null),
            },
        }
    }

    /// Converts `v` into column `i`, or keeps the error of the leftmost
    /// column that failed.
    fn put(&mut self, i: usize, v: JsonRef<'_>) {
        let col = &self.conv.plan.columns[i];
        match json_cell(col, v, None, self.b) {
            Ok(cell) => self.b.cells[self.base + i] = cell,
            Err(reason) => {
                if self.error.as_ref().is_none_or(|(j, _)| i < *j) {
                    self.error = Some((i, reason));
                }
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for CellSeed<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CellSeed<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.put(JsonRef::Null);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.put(JsonRef::Bool(v));
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.put(JsonRef::Number(&Number::from(v)));
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.put(JsonRef::Number(&Number::from(v)));
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // As `serde_json::Value` does: a number that is not finite is null.
        match Number::from_f64(v) {
            Some(n) => self.put(JsonRef::Number(&n)),
            None => self.put(JsonRef::Null),
        }
        Ok(())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.put(JsonRef::String(v));
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        // An object inside that repeats a key fails the fast path: the
        // reference path rejects the line naming the key.
        let v = CheckedJson::deserialize(de::value::SeqAccessDeserializer::new(seq))?.0;
        self.put(JsonRef::Nested(&v));
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let v = CheckedJson::deserialize(de::value::MapAccessDeserializer::new(map))?.0;
        self.put(JsonRef::Nested(&v));
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &mut Row<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut Row<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key_seed(KeySeed {
            conv: self.conv,
            next: self.next,
        })? {
            match key {
                Key::Column(i) => {
                    self.given(i);
                    map.next_value_seed(CellSeed { row: &mut *self, i })?;
                }
                Key::Unknown(k) => {
                    // Read (and so checked) as the reference path reads it.
                    map.next_value::<Json>()?;
                    self.unknown.get_or_insert(k);
                }
            }
        }
        Ok(())
    }
}

impl Converter {
    /// Adds one NDJSON line to `b` as a row or a reject and returns true;
    /// or returns false, `b` untouched, for a line the reference path must
    /// decide (see the module's comment).
    pub(super) fn push_json_fast(&self, b: &mut Batch, raw: &[u8], at: Place, record: u64) -> bool {
        if raw.iter().find(|c| !c.is_ascii_whitespace()) != Some(&b'{')
            || has_long_number(raw)
            || has_tiny_exponent(raw)
        {
            return false;
        }
        // One UTF-8 check of the whole line, instead of one per string.
        let Ok(line) = std::str::from_utf8(raw) else {
            return false;
        };
        let mark = b.mark();
        // The hand scanner first; what it leaves, serde_json's parser.
        let mut row = Row::new(self, b);
        let mut parsed = scan::object(line, &mut row).is_some();
        if !parsed {
            row.b.undo_to(mark);
            row = Row::new(self, row.b);
            let mut de = serde_json::Deserializer::from_str(line);
            parsed = (&mut row)
                .deserialize(&mut de)
                .and_then(|()| de.end())
                .is_ok();
        }
        let Row {
            b,
            unknown,
            twice,
            error,
            ..
        } = row;
        if !parsed {
            b.undo_to(mark);
            return false;
        }
        if let Some(k) = unknown {
            b.undo_to(mark);
            b.reject(at, record, super::unknown_key(&k), raw.to_vec());
            return true;
        }
        if twice {
            b.undo_to(mark);
            let reason = self
                .repeated_column(raw)
                .unwrap_or_else(|| "a column is given twice".to_string());
            b.reject(at, record, reason, raw.to_vec());
            return true;
        }
        if let Some((_, reason)) = error {
            b.undo_to(mark);
            b.reject(at, record, reason, raw.to_vec());
            return true;
        }
        self.finish_row_checked(b, mark, at, record, || super::cut_raw(raw));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::batch::Kind;
    use crate::plan::columns::{ColumnPlan, Plan};
    use crate::read::source::Format;
    use crate::values::ColType;
    use proptest::prelude::*;

    /// A stored value, comparable (reals by their bits: -0.0 is not 0.0).
    #[derive(Debug, Clone, PartialEq)]
    enum V {
        Null,
        Int(i64),
        Real(u64),
        Text(String),
    }

    fn real(f: f64) -> V {
        V::Real(f.to_bits())
    }

    fn text(s: &str) -> V {
        V::Text(s.to_string())
    }

    fn conv(cols: &[(&str, ColType, bool)]) -> Converter {
        Converter::new(Plan {
            format: Format::Ndjson,
            header: false,
            fields: 0,
            nulls: vec![],
            columns: cols
                .iter()
                .enumerate()
                .map(|(i, &(key, ty, strict))| ColumnPlan {
                    name: key.to_string(),
                    ty,
                    strict,
                    src: i,
                    key: key.to_string(),
                })
                .collect(),
            commit_every: None,
            rejects_table: None,
            recurring: Default::default(),
            sniffed: None,
        })
    }

    /// `id INTEGER, x REAL, s TEXT`, strict or not.
    fn three(strict: bool) -> Converter {
        conv(&[
            ("id", ColType::Integer, strict),
            ("x", ColType::Real, strict),
            ("s", ColType::Text, strict),
        ])
    }

    /// The row's values, or the reject's reason; checks that the batch holds
    /// exactly one entry and nothing of a rejected row.
    fn outcome(b: &Batch) -> Result<Vec<V>, String> {
        assert_eq!(b.entries.len(), 1);
        assert_eq!((b.entries[0].line, b.entries[0].record), (7, 3));
        match b.entries[0].kind {
            Kind::Row(0) => Ok(b
                .cells
                .iter()
                .map(|c| match *c {
                    Cell::Null => V::Null,
                    Cell::Int(i) => V::Int(i),
                    Cell::Real(f) => real(f),
                    Cell::Text(s, n) => V::Text(
                        String::from_utf8(b.text[s as usize..(s + n) as usize].to_vec()).unwrap(),
                    ),
                })
                .collect()),
            Kind::Reject(0) => {
                assert!(b.cells.is_empty() && b.text.is_empty());
                Err(b.rejects[0].reason.clone())
            }
            other => panic!("unexpected entry {other:?}"),
        }
    }

    const AT: Place = Place { line: 7, end: 70 };

    /// What `push_json` makes of `line`, and whether the fast path decided.
    fn through(c: &Converter, line: &[u8]) -> (Result<Vec<V>, String>, bool) {
        let mut b = Batch::new(c.plan.columns.len(), 1);
        let fast = c.push_json_fast(&mut b, line, AT, 3);
        if !fast {
            assert!(b.entries.is_empty() && b.cells.is_empty() && b.text.is_empty());
            c.push_json(&mut b, line, AT, 3);
        }
        // A row not flagged as possibly keeping text keeps none.
        let types: Vec<ColType> = c.plan.columns.iter().map(|c| c.ty).collect();
        if b.rows == 1 {
            assert!(b.may_keep[0] || !b.any_kept(0, &types));
        }
        (outcome(&b), fast)
    }

    /// What the reference path (`serde_json::Value`) makes of `line`.
    fn reference(c: &Converter, line: &[u8]) -> Result<Vec<V>, String> {
        let mut b = Batch::new(c.plan.columns.len(), 1);
        c.push_json_reference(&mut b, line, AT, 3);
        outcome(&b)
    }

    enum Want {
        Row(Vec<V>),
        /// A reject whose reason contains this.
        Reject(&'static str),
    }

    /// Hostile lines: what is stored or why the line is rejected, whether
    /// the fast path decides it, and that the reference path agrees.
    #[test]
    fn hostile_lines_convert_as_the_reference_does() {
        use Want::{Reject, Row};
        use V::{Int, Null};
        let lax = three(false);
        let strict = three(true);
        let deep = format!("{{\"s\":{}{}}}", "[".repeat(200), "]".repeat(200));
        let cases: Vec<(&Converter, &[u8], Want, bool)> = vec![
            (
                &lax,
                br#"{"id":1,"x":2.5,"s":"a"}"#,
                Row(vec![Int(1), real(2.5), text("a")]),
                true,
            ),
            (
                &lax,
                br#"{"s":"a","x":2.5,"id":1}"#,
                Row(vec![Int(1), real(2.5), text("a")]),
                true,
            ),
            (
                &lax,
                b"  {\"id\" : 1 }\t ",
                Row(vec![Int(1), Null, Null]),
                true,
            ),
            (&lax, b"{}", Row(vec![Null, Null, Null]), true),
            (
                &lax,
                br#"{"ID":7,"S":"b"}"#,
                Row(vec![Int(7), Null, text("b")]),
                true,
            ),
            // A key given twice: rejected, not a silent choice.
            (
                &lax,
                br#"{"id":1,"id":2}"#,
                Reject(r#"column "id" is given twice, by keys "id" and "id""#),
                true,
            ),
            // A key given twice inside a nested value: rejected too (the
            // fast path leaves the line to the reference path).
            (
                &lax,
                br#"{"s":{"a":1,"a":2}}"#,
                Reject(r#"key "a" is given twice inside the value of key "s""#),
                false,
            ),
            (
                &lax,
                br#"{"s":[1,{"k":[{"a":1,"b":{"c":2,"c":3}}]}]}"#,
                Reject(r#"key "c" is given twice inside the value of key "s""#),
                false,
            ),
            (
                &lax,
                br#"{"s":{"a":{"a":1},"b":{"a":2}}}"#,
                Row(vec![Null, Null, text(r#"{"a":{"a":1},"b":{"a":2}}"#)]),
                true,
            ),
            // Two spellings of one column: rejected too, naming both keys.
            (
                &lax,
                br#"{"id":1,"ID":2,"id":3}"#,
                Reject(r#"column "id" is given twice, by keys "id" and "ID""#),
                true,
            ),
            // A long number does not hide a repeated key (reference path).
            (
                &lax,
                br#"{"id":1,"ID":123456789012345678901}"#,
                Reject(r#"column "id" is given twice, by keys "id" and "ID""#),
                false,
            ),
            (
                &lax,
                br#"{"id":null,"x":null,"s":null}"#,
                Row(vec![Null, Null, Null]),
                true,
            ),
            (
                &lax,
                br#"{"id":true,"x":false,"s":true}"#,
                Row(vec![Int(1), Int(0), text("true")]),
                true,
            ),
            // Nested values are stored as compact JSON text.
            (
                &lax,
                br#"{"s":{"b":[1, {"c":null}],"a":"\u0041"}}"#,
                Row(vec![Null, Null, text(r#"{"b":[1,{"c":null}],"a":"A"}"#)]),
                true,
            ),
            (
                &lax,
                br#"{"id":[1,2]}"#,
                Row(vec![text("[1,2]"), Null, Null]),
                true,
            ),
            (
                &strict,
                br#"{"id":[1,2]}"#,
                Reject("a nested value is not an INTEGER (strict)"),
                true,
            ),
            (
                &lax,
                deep.as_bytes(),
                Reject("invalid JSON: recursion limit exceeded"),
                false,
            ),
            // Strings: escapes, surrogate pairs, lone surrogates, raw bytes.
            (
                &lax,
                br#"{"s":"a\"b\\c\/d\n\t\u0000"}"#,
                Row(vec![Null, Null, text("a\"b\\c/d\n\t\0")]),
                true,
            ),
            (
                &lax,
                br#"{"s":"\u00e9\ud83d\ude00\u20AC"}"#,
                Row(vec![Null, Null, text("é😀€")]),
                true,
            ),
            (
                &lax,
                "{\"s\":\"é😀\"}".as_bytes(),
                Row(vec![Null, Null, text("é😀")]),
                true,
            ),
            (
                &lax,
                br#"{"s":"\ud800"}"#,
                Reject("invalid JSON: unexpected end of hex escape"),
                false,
            ),
            (&lax, br#"{"s":"\udc00x"}"#, Reject("invalid JSON"), false),
            (&lax, br#"{"s":"\ud83dx"}"#, Reject("invalid JSON"), false),
            (&lax, br#"{"s":"\u12"}"#, Reject("invalid JSON"), false),
            (
                &lax,
                br#"{"s":"\q"}"#,
                Reject("invalid JSON: invalid escape"),
                false,
            ),
            (
                &lax,
                b"{\"s\":\"\xff\"}",
                Reject("invalid JSON: invalid unicode code point"),
                false,
            ),
            (
                &lax,
                b"{\"s\":\"a\tb\"}",
                Reject("invalid JSON: control character"),
                false,
            ),
            (
                &lax,
                br#"{"\u0069d":4}"#,
                Row(vec![Int(4), Null, Null]),
                true,
            ),
            // Numbers.
            (
                &lax,
                br#"{"x":1e309}"#,
                Reject("invalid JSON: number out of range"),
                false,
            ),
            (
                &lax,
                br#"{"x":-0.0}"#,
                Row(vec![Null, real(-0.0), Null]),
                true,
            ),
            (
                &lax,
                br#"{"x":1.0,"id":1.0,"s":1.0}"#,
                Row(vec![real(1.0), real(1.0), text("1.0")]),
                true,
            ),
            (
                &lax,
                br#"{"x":1,"id":1,"s":1}"#,
                Row(vec![Int(1), real(1.0), text("1")]),
                true,
            ),
            (
                &lax,
                br#"{"s":1e2,"x":1E-2}"#,
                Row(vec![Null, real(0.01), text("100.0")]),
                true,
            ),
            // serde_json reads -0 as the double -0.0.
            (
                &lax,
                br#"{"s":-0}"#,
                Row(vec![Null, Null, text("-0.0")]),
                true,
            ),
            (
                &strict,
                br#"{"id":1.5}"#,
                Reject("column \"id\": 1.5 is not an INTEGER (strict)"),
                true,
            ),
            (&lax, br#"{"id":01}"#, Reject("invalid JSON"), false),
            (&lax, br#"{"id":+1}"#, Reject("invalid JSON"), false),
            (&lax, br#"{"id":.5}"#, Reject("invalid JSON"), false),
            (&lax, br#"{"id":NaN}"#, Reject("invalid JSON"), false),
            (
                &lax,
                br#"{"id":9223372036854775807}"#,
                Row(vec![Int(i64::MAX), Null, Null]),
                false,
            ),
            (
                &lax,
                br#"{"id":-9223372036854775808}"#,
                Row(vec![Int(i64::MIN), Null, Null]),
                false,
            ),
            (
                &lax,
                br#"{"id":9223372036854775808}"#,
                Reject("is an integer beyond 64 bits"),
                false,
            ),
            (
                &lax,
                br#"{"s":123456789012345678901234}"#,
                Row(vec![Null, Null, text("123456789012345678901234")]),
                false,
            ),
            (
                &lax,
                br#"{"id":922337203685477580}"#,
                Row(vec![Int(922337203685477580), Null, Null]),
                true,
            ),
            (
                &lax,
                br#"{"x":12345678901234567.5}"#,
                Row(vec![Null, real(12345678901234567.5), Null]),
                true,
            ),
            // Strings SQLite's affinity would rewrite.
            (
                &lax,
                br#"{"id":"00123"}"#,
                Reject("is not written as a plain INTEGER value"),
                true,
            ),
            (
                &lax,
                br#"{"id":"five"}"#,
                Row(vec![text("five"), Null, Null]),
                true,
            ),
            (
                &strict,
                br#"{"id":"five"}"#,
                Reject("column \"id\": \"five\" is not an INTEGER (strict)"),
                true,
            ),
            // The leftmost failing column is named, whatever the key order.
            (
                &strict,
                br#"{"s":1,"x":"a","id":"b"}"#,
                Reject("column \"id\": \"b\""),
                true,
            ),
            // Not objects.
            (
                &lax,
                b"[1,2]",
                Reject("not a JSON object but an array"),
                false,
            ),
            (
                &lax,
                br#""x""#,
                Reject("not a JSON object but a string"),
                false,
            ),
            (&lax, b"3", Reject("not a JSON object but a number"), false),
            (
                &lax,
                b"true",
                Reject("not a JSON object but a boolean"),
                false,
            ),
            (&lax, b"null", Reject("not a JSON object but null"), false),
            // Invalid JSON.
            (
                &lax,
                br#"{"id":1} x"#,
                Reject("invalid JSON: trailing characters at line 1 column 10"),
                false,
            ),
            (
                &lax,
                br#"{"id":1}{"id":2}"#,
                Reject("invalid JSON: trailing characters"),
                false,
            ),
            (
                &lax,
                br#"{"id":1,}"#,
                Reject("invalid JSON: trailing comma"),
                false,
            ),
            (
                &lax,
                br#"{"id":"#,
                Reject("invalid JSON: EOF while parsing a value"),
                false,
            ),
            (
                &lax,
                br#"{id:1}"#,
                Reject("invalid JSON: key must be a string"),
                false,
            ),
            (
                &lax,
                br#"{"id" 1}"#,
                Reject("invalid JSON: expected `:`"),
                false,
            ),
            (&lax, b"{\"id\":1\x00}", Reject("invalid JSON"), false),
            // Unknown keys: named (JSON-quoted), before any conversion error,
            // after the line's validity.
            (
                &lax,
                br#"{"zzz":1,"id":2}"#,
                Reject("key \"zzz\" is not a column"),
                true,
            ),
            (&lax, br#"{"":1}"#, Reject("key \"\" is not a column"), true),
            (
                &lax,
                br#"{"a\"b":1}"#,
                Reject(r#"key "a\"b" is not a column"#),
                true,
            ),
            (
                &lax,
                br#"{"id":"00123","zzz":[1],"yyy":2}"#,
                Reject("key \"zzz\" is not a column"),
                true,
            ),
            (&lax, br#"{"zzz":1,"id":}"#, Reject("invalid JSON"), false),
            (
                &lax,
                br#"{"zzz":"\ud800"}"#,
                Reject("invalid JSON: unexpected end of hex escape"),
                false,
            ),
        ];
        let mut wrong = Vec::new();
        for (i, (c, line, want, fast)) in cases.into_iter().enumerate() {
            let shown = String::from_utf8_lossy(line);
            let (got, was_fast) = through(c, line);
            let ok = match &want {
                Row(v) => got.as_ref() == Ok(v),
                Reject(why) => got.as_ref().is_err_and(|r| r.contains(why)),
            };
            if !ok || was_fast != fast || got != reference(c, line) {
                wrong.push(format!(
                    "case {i}: {shown}: got {got:?}, fast path {was_fast}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// Whether the hand scanner reads `line` itself (else it hands the
    /// line to serde_json's parser).
    fn scanned(c: &Converter, line: &str) -> bool {
        let mut b = Batch::new(c.plan.columns.len(), 1);
        let mut row = Row::new(c, &mut b);
        scan::object(line, &mut row).is_some()
    }

    /// The scanner reads plain lines itself, hands tokens it does not know
    /// to serde_json, and leaves whole lines it cannot place; every line
    /// ends as the reference path's.
    #[test]
    fn the_scanner_reads_or_hands_over_as_it_should() {
        let lax = three(false);
        let strict = three(true);
        let nested = |depth: usize| format!("{{\"s\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let (deepest, too_deep) = (nested(scan::MAX_DEPTH), nested(scan::MAX_DEPTH + 1));
        let (near_limit, over_limit) = (nested(127), nested(128));
        let cases: Vec<(&Converter, &str, bool)> = vec![
            // Read by the scanner alone.
            (&lax, r#"{"id":1,"x":2.5,"s":"a"}"#, true),
            (&lax, " \t{ \"id\" :\r\n-7 , \"x\":-0.125}\n", true),
            (&lax, r#"{"id":-0,"x":-0.0,"s":0}"#, true),
            (
                &lax,
                r#"{"id":123456789012345678,"x":9007199254740992.5}"#,
                true,
            ),
            (&lax, r#"{"x":0.0000000000000000001}"#, true),
            (&lax, r#"{"s":"a\"b\u00e9\n","id":1}"#, true),
            (&lax, r#"{"ID":1,"S":"b","X":null}"#, true),
            (&lax, r#"{"s":true,"x":false,"id":null}"#, true),
            (&lax, r#"{"s":[1,"]}",{"a":"[\"{"}],"id":2}"#, true),
            (&lax, r#"{"x":1e5,"id":1E+2,"s":-2.5e-3}"#, true),
            (
                &lax,
                r#"{"x":90071992547409931.5,"id":12345678901234567}"#,
                true,
            ),
            (&lax, r#"{"zzz":[1,{"b":2}],"id":1}"#, true),
            (&lax, r#"{"a\"b":1}"#, true),
            (&lax, "{}", true),
            (&lax, "{\"s\":\"é😀\"}", true),
            (&strict, r#"{"id":2.5,"x":"1","s":{"a":1}}"#, true),
            (&lax, &deepest, true),
            // Left to serde_json's parser of the whole line.
            (&lax, &too_deep, false),
            (&lax, &near_limit, false),
            (&lax, &over_limit, false),
            (&lax, r#"{"s":{"a":1,"a":2}}"#, false),
            (&lax, r#"{"id":01}"#, false),
            (&lax, r#"{"id":1.}"#, false),
            (&lax, r#"{"id":.5}"#, false),
            (&lax, r#"{"id":-}"#, false),
            (&lax, r#"{"id":+1}"#, false),
            (&lax, r#"{"id":1.5.2}"#, false),
            (&lax, r#"{"id":1e}"#, false),
            (&lax, r#"{"id":1,}"#, false),
            (&lax, r#"{,"id":1}"#, false),
            (&lax, r#"{"id" 1}"#, false),
            (&lax, r#"{"id":1 "x":2}"#, false),
            (&lax, r#"{"id":tru}"#, false),
            (&lax, r#"{"id":truex}"#, false),
            (&lax, r#"{"id":nul}"#, false),
            (&lax, r#"{"id":1}x"#, false),
            (&lax, r#"{"id":1}{"id":2}"#, false),
            (&lax, r#"{"id":1"#, false),
            (&lax, r#"{"s":"abc"#, false),
            (&lax, r#"{"s":"abc\"#, false),
            (&lax, "{\"s\":\"a\tb\"}", false),
            (&lax, "{\"s\":\"a\u{7f}\u{1f}\"}", false),
            (&lax, r#"{"s":"\ud800"}"#, false),
            (&lax, r#"{"s":"\x41"}"#, false),
            (&lax, r#"{"s":[1,2}"#, false),
            (&lax, r#"{"s":[1,2]]}"#, false),
            (&lax, r#"{"s":'a'}"#, false),
            (&lax, "{\"id\":1}\u{0b}", false),
            (&lax, "\u{a0}{\"id\":1}", false),
            (&lax, "[1]", false),
            (&lax, "", false),
        ];
        let mut wrong = Vec::new();
        for (i, (c, line, want)) in cases.into_iter().enumerate() {
            let got = scanned(c, line);
            let (out, _) = through(c, line.as_bytes());
            if got != want || out != reference(c, line.as_bytes()) {
                wrong.push(format!("case {i}: {line:?}: scanned {got}, {out:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn many_columns_and_repeated_keys_among_them() {
        let names: Vec<String> = (0..130).map(|i| format!("c{i}")).collect();
        let cols: Vec<(&str, ColType, bool)> = names
            .iter()
            .map(|n| (n.as_str(), ColType::Integer, false))
            .collect();
        let c = conv(&cols);
        let all: Vec<String> = (0..130).map(|i| format!("\"c{i}\":{i}")).collect();
        let line = format!("{{{}}}", all.join(","));
        let want: Vec<V> = (0..130).map(V::Int).collect();
        assert_eq!(through(&c, line.as_bytes()), (Ok(want.clone()), true));
        let twice = format!("{{{},\"C129\":-1}}", all.join(","));
        let (got, fast) = through(&c, twice.as_bytes());
        assert!(fast);
        let reason = got.expect_err("a repeated column is rejected");
        assert!(reason.contains(r#"by keys "c129" and "C129""#), "{reason}");
        assert_eq!(
            reference(&c, twice.as_bytes()),
            through(&c, twice.as_bytes()).0
        );
    }

    #[test]
    fn repeated_keys_in_the_plan_are_found_as_the_reference_finds_them() {
        // Two columns from one key (not made by sniffing, but a plan file
        // can say so): the map keeps the last column.
        let c = conv(&[("k", ColType::Integer, false), ("k", ColType::Text, false)]);
        assert!(!c.unique_keys);
        let line = br#"{"k":5}"#;
        assert_eq!(through(&c, line), (Ok(vec![V::Null, text("5")]), true));
        assert_eq!(reference(&c, line), through(&c, line).0);
    }

    /// A JSON value as text, each string character escaped as `\uXXXX`
    /// (surrogate pairs beyond the BMP) when `escape` says so.
    fn write(v: &Json, escape: &dyn Fn(usize) -> bool, out: &mut String) {
        match v {
            Json::String(s) => write_str(s, escape, out),
            Json::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if escape(i) { " , " } else { "," });
                    }
                    write(x, escape, out);
                }
                out.push(']');
            }
            Json::Object(o) => {
                out.push('{');
                for (i, (k, x)) in o.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, escape, out);
                    out.push_str(if escape(i) { " : " } else { ":" });
                    write(x, escape, out);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    fn write_str(s: &str, escape: &dyn Fn(usize) -> bool, out: &mut String) {
        out.push('"');
        for (i, ch) in s.chars().enumerate() {
            if escape(i) || ch == '"' || ch == '\\' || (ch as u32) < 0x20 {
                let mut units = [0u16; 2];
                for u in ch.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", u));
                }
            } else {
                out.push(ch);
            }
        }
        out.push('"');
    }

    fn keys() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::sample::select(vec!["id", "x", "s", "n", "Any", "b"]).prop_map(String::from),
            2 => prop::sample::select(vec!["ID", "X", "S", "aNY", "B"]).prop_map(String::from),
            1 => "\\PC{0,4}",
        ]
    }

    fn scalar() -> impl Strategy<Value = Json> {
        prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(Json::from),
            (-1000i64..1000).prop_map(Json::from),
            any::<u64>().prop_map(Json::from),
            any::<f64>().prop_map(Json::from),
            (-1e6f64..1e6).prop_map(Json::from),
            "\\PC{0,8}".prop_map(Json::String),
            "[0-9+. eE-]{0,6}".prop_map(Json::String),
            prop::sample::select(vec!["true", "2024-01-05", "00123", "1e3", "-0.0"])
                .prop_map(|s| Json::String(s.into())),
        ]
    }

    fn value() -> impl Strategy<Value = Json> {
        scalar().prop_recursive(3, 12, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
                prop::collection::vec(("\\PC{0,3}", inner), 0..4)
                    .prop_map(|kv| Json::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn line() -> impl Strategy<Value = (Vec<(String, Json)>, u64)> {
        (prop::collection::vec((keys(), value()), 0..8), any::<u64>())
    }

    fn plans() -> Vec<Converter> {
        let tys = ColType::ALL;
        let names = ["id", "x", "s", "n", "any", "b"];
        let mut out = Vec::new();
        for shift in 0..tys.len() {
            for strict in [false, true] {
                let cols: Vec<(&str, ColType, bool)> = names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (*n, tys[(i + shift) % tys.len()], strict))
                    .collect();
                out.push(conv(&cols));
            }
        }
        out
    }

    /// A JSON number's characters, mostly as JSON writes them, some not.
    fn number_text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "-?(0|[1-9][0-9]{0,19})(\\.[0-9]{1,24})?([eE][+-]?[0-9]{1,3})?",
            1 => "[0-9.eE+-]{1,8}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Numbers as written (long, exact, inexact, with exponents, and
        /// not numbers at all) end in every column type as the reference
        /// path stores or rejects them.
        #[test]
        fn numbers_convert_as_serde_json_reads_them(
            a in number_text(),
            b in number_text(),
            c in number_text(),
        ) {
            let line = format!(r#"{{"id":{a},"x":{b},"s":{c},"n":{a},"any":{b},"b":{c}}}"#);
            for conv in plans() {
                let (got, _) = through(&conv, line.as_bytes());
                prop_assert_eq!(got, reference(&conv, line.as_bytes()), "{}", line);
            }
        }

        /// The eight-bytes-at-a-time search finds the first quote,
        /// backslash or control character, as a byte at a time does.
        #[test]
        fn special_bytes_are_found_where_they_are(
            bytes in prop::collection::vec(
                prop_oneof![4 => 0x20u8..0x7f, 1 => Just(b'"'), 1 => Just(b'\\'), 1 => 0u8..0x20, 1 => 0x7fu8..=0xff],
                0..40,
            ),
            from in 0usize..41,
        ) {
            let from = from.min(bytes.len());
            let want = bytes[from..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .map(|p| from + p);
            prop_assert_eq!(scan::special(&bytes, from), want);
        }

        /// Random objects (and the same lines cut short or with a byte
        /// changed) give the same rows and rejects through `push_json` as
        /// through `serde_json::Value`.
        #[test]
        fn lines_convert_as_through_serde_json_values(
            (fields, seed) in line(),
            cut in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            // Build the text by hand: the object may repeat keys.
            let escape = |i: usize| (seed >> (i % 64)) & 1 == 1 && seed % 3 == 0;
            let mut text = String::from("{");
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                write_str(k, &escape, &mut text);
                text.push(':');
                write(v, &escape, &mut text);
            }
            text.push('}');
            let mut cutoff = text.clone().into_bytes();
            cutoff.truncate(cut.index(text.len() + 1));
            let mut changed = text.clone().into_bytes();
            let at = cut.index(changed.len());
            changed[at] = byte;
            for c in plans() {
                for l in [text.as_bytes(), &cutoff, &changed] {
                    let (got, _) = through(&c, l);
                    prop_assert_eq!(got, reference(&c, l), "{}", String::from_utf8_lossy(l));
                }
            }
        }
    }
}
