//! Layer 3, *convert*: records to rows. The conversion of one record into
//! one row of a [`Batch`] following the [`Plan`], or into a reject
//! ([`Converter`]; NDJSON lines in the private `ndjson` module), and the
//! parser thread that feeds batches to
//! the writer ([`job`]). Uses the *read* and *plan* layers.

use std::collections::HashMap;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value as Json;

use crate::convert::batch::Batch;
use crate::plan::columns::{column_nulls, ColumnPlan, Plan};
use crate::read::json::{has_long_number, has_tiny_exponent, raw_values};
use crate::read::records::Place;
use crate::read::source::Format;
use crate::values::{
    is_big_integer, is_iso_date, is_iso_timestamp, looks_numeric_to_sqlite, parse_bool, parse_int,
    parse_real, underflows, Cell, ColType,
};

pub mod batch;
pub mod job;
mod ndjson;

/// SQLite's default limit on the length of a value or a row
/// (SQLITE_MAX_LENGTH), in bytes: 1,000,000,000.
pub const DEFAULT_MAX_LENGTH: usize = 1_000_000_000;

/// Bytes of a record too long to store kept in its reject (the record
/// stays in the input, at the line the reject names).
pub const RAW_KEPT: usize = 4096;

/// The first [`RAW_KEPT`] bytes of `raw`.
fn cut_raw(raw: &[u8]) -> Vec<u8> {
    raw[..raw.len().min(RAW_KEPT)].to_vec()
}

/// Turns records into rows following a [`Plan`].
pub struct Converter {
    plan: Plan,
    /// Null tokens of each column (the plan's, or the column's own).
    nulls: Vec<Vec<Vec<u8>>>,
    /// The most null tokens any column has.
    null_stride: usize,
    /// The most bytes of text a row may hold (SQLite's length limit).
    max_length: usize,
    /// Space-padded numeric columns: surrounding spaces are dropped.
    trim: Vec<bool>,
    /// NDJSON: key → column, exact names.
    by_name: HashMap<String, usize>,
    /// NDJSON: key → column, ASCII-lowercased names (SQLite's rule).
    by_lower: HashMap<String, usize>,
    /// No two columns have the same key (so a key equal to the expected
    /// column's is that column).
    unique_keys: bool,
    /// NDJSON: column i's key has no character JSON escapes.
    plain_keys: Vec<bool>,
}

impl Converter {
    /// A converter for `plan`.
    pub fn new(plan: Plan) -> Converter {
        let sniffed = plan.sniffed.as_ref();
        let nulls: Vec<Vec<Vec<u8>>> = column_nulls(&plan)
            .into_iter()
            .map(|ts| ts.into_iter().map(String::into_bytes).collect())
            .collect();
        let trim = (0..plan.columns.len())
            .map(|i| {
                sniffed.is_some_and(|s| s.trim.get(plan.columns[i].src).copied().unwrap_or(false))
            })
            .collect();
        let by_name: HashMap<String, usize> = plan
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.key.clone(), i))
            .collect();
        let by_lower = plan
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.key.to_ascii_lowercase(), i))
            .collect();
        let unique_keys = by_name.len() == plan.columns.len();
        let plain_keys = plan
            .columns
            .iter()
            .map(|c| !c.key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20))
            .collect();
        let null_stride = nulls.iter().map(Vec::len).max().unwrap_or(1);
        Converter {
            plan,
            nulls,
            null_stride,
            max_length: DEFAULT_MAX_LENGTH,
            trim,
            by_name,
            by_lower,
            unique_keys,
            plain_keys,
        }
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Adds a CSV/TSV record to `b` as a row, or as a reject.
    pub fn push_csv(&self, b: &mut Batch, rec: &csv::ByteRecord, at: Place, record: u64) {
        if rec.len() != self.plan.fields {
            let reason = format!("expected {} fields, found {}", self.plan.fields, rec.len());
            b.reject(at, record, reason, self.raw_csv(rec));
            return;
        }
        // A field SQLite cannot store is rejected before it is copied.
        if rec.as_slice().len() > self.max_length {
            if let Some((i, f)) = rec
                .iter()
                .enumerate()
                .filter(|(_, f)| f.len() > self.max_length)
                .max_by_key(|(_, f)| f.len())
            {
                let name = self
                    .plan
                    .columns
                    .iter()
                    .find(|c| c.src == i)
                    .map_or_else(|| format!("field {}", i + 1), |c| c.name.clone());
                let reason = self.too_long(f.len(), (f.len(), &name));
                let raw = self.raw_csv_cut(rec);
                b.reject(at, record, reason, raw);
                return;
            }
        }
        let mark = b.mark();
        for (i, col) in self.plan.columns.iter().enumerate() {
            let field = &rec[col.src];
            match self.cell_from_bytes(i, col, field, b) {
                Ok(cell) => b.cells.push(cell),
                Err(reason) => {
                    b.undo_to(mark);
                    b.reject(at, record, reason, self.raw_csv(rec));
                    return;
                }
            }
        }
        self.finish_row_checked(b, mark, at, record, || self.raw_csv_cut(rec));
    }

    /// The start of a CSV record, as written back for the rejects file: the
    /// fields up to [`RAW_KEPT`] bytes.
    fn raw_csv_cut(&self, rec: &csv::ByteRecord) -> Vec<u8> {
        let mut cut = csv::ByteRecord::new();
        let mut left = RAW_KEPT;
        for f in rec.iter() {
            let n = f.len().min(left);
            cut.push_field(&f[..n]);
            left -= n;
        }
        self.raw_csv(&cut)
    }

    fn cell_from_bytes(
        &self,
        i: usize,
        col: &ColumnPlan,
        f: &[u8],
        b: &mut Batch,
    ) -> Result<Cell, String> {
        if let Some(k) = self.nulls[i].iter().position(|n| n.as_slice() == f) {
            b.count_null(i, k, self.null_stride);
            return Ok(Cell::Null);
        }
        // A space-padded numeric column (planned): the spaces are layout of
        // a number; text (a later value that is not one, or the column made
        // TEXT by `--type`) keeps them: `raw` is the field as written.
        let raw = f;
        let f = if self.trim[i] { f.trim_ascii() } else { f };
        match col.ty {
            ColType::Boolean => {
                if let Some(v) = parse_bool(f).or_else(|| parse_int(f)) {
                    return Ok(Cell::Int(v));
                }
            }
            ColType::Date | ColType::Timestamp => {
                if is_iso_date(raw) || is_iso_timestamp(raw) {
                    return text_cell(col, raw, b);
                }
                // A number (`20240105`) is not stored: the column's NUMERIC
                // affinity would make it a number, which SQLite's date
                // functions read as a Julian day ([`rewritten`] says so).
            }
            ColType::Integer => {
                if let Some(v) = parse_int(f) {
                    return Ok(Cell::Int(v));
                }
            }
            ColType::Real => {
                if let Some(v) = parse_int(f) {
                    inexact_in_real(col, v)?;
                }
                if let Some(v) = parse_real(f) {
                    return Ok(Cell::Real(v));
                }
            }
            ColType::Text => return text_cell(col, raw, b),
            ColType::Any | ColType::Numeric => {
                if let Some(v) = parse_int(f) {
                    return Ok(Cell::Int(v));
                }
                if let Some(v) = parse_real(f) {
                    return Ok(Cell::Real(v));
                }
            }
        }
        if col.strict && col.ty != ColType::Any && col.ty != ColType::Numeric {
            return Err(not_a(col, raw));
        }
        if col.ty.converts_text() {
            if let Some(reason) = rewritten(col, raw) {
                return Err(reason);
            }
        }
        if col.ty != ColType::Any {
            b.may_keep_text();
        }
        text_cell(col, raw, b)
    }

    /// The record written back as one CSV/TSV line, for the rejects file.
    fn raw_csv(&self, rec: &csv::ByteRecord) -> Vec<u8> {
        let (delim, quote) = match (&self.plan.sniffed, self.plan.format) {
            (Some(s), _) => (s.delimiter_byte(), s.quote_byte()),
            (None, Format::Tsv) => (b'\t', None),
            _ => (b',', Some(b'"')),
        };
        let mut out = Vec::new();
        for (i, f) in rec.iter().enumerate() {
            if i > 0 {
                out.push(delim);
            }
            // Quoted when it holds the delimiter, the quote or a line break,
            // and a record of one empty field (`""`: unquoted it would be a
            // blank line, which is no record).
            let q = quote.filter(|&q| {
                f.iter()
                    .any(|&c| c == delim || c == q || c == b'\n' || c == b'\r')
                    || (rec.len() == 1 && f.is_empty())
            });
            match q {
                Some(q) => {
                    out.push(q);
                    for &c in f {
                        if c == q {
                            out.push(q);
                        }
                        out.push(c);
                    }
                    out.push(q);
                }
                None => out.extend_from_slice(f),
            }
        }
        out
    }

    /// Adds one NDJSON line to `b` as a row, or as a reject.
    pub fn push_json(&self, b: &mut Batch, raw: &[u8], at: Place, record: u64) {
        if !self.push_json_fast(b, raw, at, record) {
            self.push_json_reference(b, raw, at, record);
        }
    }

    /// [`push_json`](Converter::push_json) through a `serde_json::Value`:
    /// the reference the fast path is tested against, and the path for the
    /// lines it leaves (invalid JSON, non-objects, long digit runs, a
    /// column given twice).
    fn push_json_reference(&self, b: &mut Batch, raw: &[u8], at: Place, record: u64) {
        let obj = match serde_json::from_slice::<Json>(raw) {
            Ok(Json::Object(o)) => o,
            Ok(other) => {
                let what = match other {
                    Json::Array(_) => "an array",
                    Json::String(_) => "a string",
                    Json::Number(_) => "a number",
                    Json::Bool(_) => "a boolean",
                    _ => "null",
                };
                b.reject(
                    at,
                    record,
                    format!("not a JSON object but {what}"),
                    raw.to_vec(),
                );
                return;
            }
            Err(e) => {
                b.reject(at, record, format!("invalid JSON: {e}"), raw.to_vec());
                return;
            }
        };
        let ncols = self.plan.columns.len();
        // Rare lines with a long run of digits or a long negative exponent:
        // the values as written, so that an integer beyond 64 bits keeps its
        // digits and a number below a double's range is seen as one.
        let raws = if has_long_number(raw) || has_tiny_exponent(raw) {
            raw_values(raw)
        } else {
            None
        };
        let mut slots: Vec<Option<(&Json, Option<&str>)>> = vec![None; ncols];
        for (k, v) in &obj {
            match self.column_of(k) {
                Some(i) => {
                    let text = raws.as_ref().and_then(|m| m.get(k)).map(|r| r.get().trim());
                    slots[i] = Some((v, text));
                }
                None => {
                    b.reject(at, record, unknown_key(k), raw.to_vec());
                    return;
                }
            }
        }
        // The map above keeps one value per key: a key given twice, or two
        // spellings of one column, are found on the line itself.
        if let Some(reason) = self.repeated_column(raw) {
            b.reject(at, record, reason, raw.to_vec());
            return;
        }
        // The same inside a nested object: stored as JSON text, it would
        // keep only the last value.
        if memchr::memchr_iter(b'{', raw).nth(1).is_some() {
            if let Some(reason) = nested_repeated_key(raw) {
                b.reject(at, record, reason, raw.to_vec());
                return;
            }
        }
        let mark = b.mark();
        for (col, v) in self.plan.columns.iter().zip(slots) {
            let (v, text) = v.unwrap_or((&Json::Null, None));
            match json_cell(col, JsonRef::from(v), text, b) {
                Ok(c) => b.cells.push(c),
                Err(reason) => {
                    b.undo_to(mark);
                    b.reject(at, record, reason, raw.to_vec());
                    return;
                }
            }
        }
        self.finish_row_checked(b, mark, at, record, || cut_raw(raw));
    }

    /// Ends the row begun at `mark` ([`Batch::finish_row`]), or rejects its
    /// record when its text is longer than SQLite can store in one row
    /// ([`max_length`](Converter::set_max_length)); `raw` gives the start
    /// of the record as read, kept with such a reject.
    pub(super) fn finish_row_checked(
        &self,
        b: &mut Batch,
        mark: (usize, usize),
        at: Place,
        record: u64,
        raw: impl FnOnce() -> Vec<u8>,
    ) {
        let text = b.text.len() - mark.1;
        if text > self.max_length {
            let widest = self
                .plan
                .columns
                .iter()
                .zip(&b.cells[mark.0..])
                .map(|(c, cell)| match cell {
                    Cell::Text(_, n) => (*n as usize, c.name.as_str()),
                    _ => (0, c.name.as_str()),
                })
                .max_by_key(|(n, _)| *n)
                .unwrap_or((0, ""));
            let reason = self.too_long(text, widest);
            b.undo_to(mark);
            b.reject(at, record, reason, raw());
            return;
        }
        b.finish_row(at, record);
    }

    /// Why a record of `bytes` bytes of text is rejected; `widest`: its
    /// longest value's length and column.
    fn too_long(&self, bytes: usize, widest: (usize, &str)) -> String {
        let limit = self.max_length;
        if widest.0 > limit {
            format!(
                "column {:?}: a value of {} bytes, more than SQLite's limit of {} bytes for one \
                 value or row (SQLITE_MAX_LENGTH); the rejects file keeps its first {} bytes",
                widest.1, widest.0, limit, RAW_KEPT
            )
        } else {
            format!(
                "the row's values total {bytes} bytes (the longest, column {:?}, {} bytes), more \
                 than SQLite's limit of {limit} bytes for one row (SQLITE_MAX_LENGTH); the \
                 rejects file keeps its first {RAW_KEPT} bytes",
                widest.1, widest.0
            )
        }
    }

    /// Sets the most bytes of text one row may hold (SQLite's length limit
    /// of the connection; default [`DEFAULT_MAX_LENGTH`]): a record with
    /// more is rejected, not sent to SQLite (which would fail the import).
    pub fn set_max_length(&mut self, bytes: usize) {
        self.max_length = bytes;
    }
}

impl Converter {
    /// The column key `k` names: its exact name, else the same name ignoring
    /// ASCII case.
    fn column_of(&self, k: &str) -> Option<usize> {
        self.by_name
            .get(k)
            .or_else(|| self.by_lower.get(&k.to_ascii_lowercase()))
            .copied()
    }

    /// Why an NDJSON object that gives one column two values (the same key
    /// twice, or two spellings of it such as `id` and `ID`) is rejected:
    /// storing either value would silently drop the other. `None` when each
    /// column has at most one key, or the line is not an object.
    fn repeated_column(&self, raw: &[u8]) -> Option<String> {
        use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Vec<String>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    map.next_value::<IgnoredAny>()?;
                    keys.push(k);
                }
                Ok(keys)
            }
        }
        let keys = serde_json::Deserializer::from_slice(raw)
            .deserialize_map(Keys)
            .ok()?;
        let mut first: Vec<Option<&str>> = vec![None; self.plan.columns.len()];
        for k in &keys {
            let i = self.column_of(k)?;
            if let Some(prev) = first[i] {
                return Some(format!(
                    "column {} is given twice, by keys {} and {}: storing either value would \
                     drop the other",
                    litelane::quote_ident(&self.plan.columns[i].name),
                    serde_json::Value::String(prev.to_string()),
                    serde_json::Value::String(k.clone()),
                ));
            }
            first[i] = Some(k);
        }
        None
    }
}

/// Why an NDJSON object whose nested object gives one key twice
/// (`{"o":{"a":1,"a":2}}`) is rejected: stored as JSON text, it would keep
/// only the last value, as a repeated top-level key would. `None` when no
/// nested object repeats a key (or the line is not an object).
pub fn nested_repeated_key(raw: &[u8]) -> Option<String> {
    use serde::de::Deserializer as _;
    struct Top<'a>(&'a mut Option<(String, String)>);
    impl<'de> Visitor<'de> for Top<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(k) = map.next_key::<String>()? {
                let mut found = None;
                let r = map.next_value_seed(NoRepeat(&mut found));
                if let Some(dup) = found {
                    *self.0 = Some((k, dup));
                }
                r?;
            }
            Ok(())
        }
    }
    let mut found = None;
    let _ = serde_json::Deserializer::from_slice(raw).deserialize_map(Top(&mut found));
    let (top, dup) = found?;
    Some(format!(
        "key {} is given twice inside the value of key {}: storing it would keep only the \
         last of its values",
        Json::String(dup),
        Json::String(top)
    ))
}

/// Reads any JSON value, failing (and naming the key in `.0`) at the first
/// object that gives one key twice.
struct NoRepeat<'a>(&'a mut Option<String>);

impl<'de> DeserializeSeed<'de> for NoRepeat<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoRepeat<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoRepeat(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if !keys.insert(k.clone()) {
                *self.0 = Some(k);
                return Err(de::Error::custom("a key given twice"));
            }
            map.next_value_seed(NoRepeat(&mut *self.0))?;
        }
        Ok(())
    }
}

/// A JSON value read as `serde_json::Value` reads it, except that an object
/// giving one key twice is an error instead of keeping the last value (the
/// line then goes to the reference path, which rejects it naming the key).
pub struct CheckedJson(pub Json);

impl<'de> Deserialize<'de> for CheckedJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CheckedJson, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = CheckedJson;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<CheckedJson, E> {
        Ok(CheckedJson(Json::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<CheckedJson, E> {
        Ok(CheckedJson(Json::Number(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<CheckedJson, E> {
        Ok(CheckedJson(Json::Number(v.into())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<CheckedJson, E> {
        // As `serde_json::Value` does: a number that is not finite is null.
        Ok(CheckedJson(
            serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number),
        ))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<CheckedJson, E> {
        Ok(CheckedJson(Json::String(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<CheckedJson, E> {
        Ok(CheckedJson(Json::String(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<CheckedJson, E> {
        Ok(CheckedJson(Json::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CheckedJson, A::Error> {
        let mut v = Vec::new();
        while let Some(CheckedJson(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(CheckedJson(Json::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CheckedJson, A::Error> {
        let mut m = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(de::Error::custom("a key given twice"));
            }
            let CheckedJson(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(CheckedJson(Json::Object(m)))
    }
}

/// The reason for rejecting a line with key `k`, which names no column.
fn unknown_key(k: &str) -> String {
    format!(
        "key {} is not a column of the table (the columns come from the first records, or \
         from the table when appending)",
        serde_json::Value::String(k.to_string())
    )
}

fn not_a(col: &ColumnPlan, f: &[u8]) -> String {
    let shown: String = String::from_utf8_lossy(f).chars().take(60).collect();
    format!(
        "column {}: {:?} is not {} (strict)",
        litelane::quote_ident(&col.name),
        shown,
        match col.ty {
            ColType::Integer => "an INTEGER",
            ColType::Boolean => "a BOOLEAN (true/false)",
            ColType::Date => "an ISO-8601 DATE",
            ColType::Timestamp => "an ISO-8601 TIMESTAMP",
            _ => "a REAL",
        }
    )
}

/// Why text `f` cannot be stored in the numeric column `col` as written:
/// SQLite's column affinity would turn it into a number (`00123` → 123,
/// `+5`, `1e3`, ` 7`), lose digits (an integer beyond 64 bits becomes a
/// REAL) or make it infinite (`1e309`). `None` when SQLite keeps it as text.
fn rewritten(col: &ColumnPlan, f: &[u8]) -> Option<String> {
    let shown: String = String::from_utf8_lossy(f).chars().take(60).collect();
    let name = litelane::quote_ident(&col.name);
    let ty = col.ty.sql();
    if is_big_integer(f) {
        return Some(format!(
            "column {name}: {shown:?} is an integer beyond 64 bits: the column's {ty} type \
             would store it as a REAL and lose digits (import with --types text to keep it)"
        ));
    }
    if looks_numeric_to_sqlite(f) && matches!(col.ty, ColType::Date | ColType::Timestamp) {
        return Some(date_number(col, &shown));
    }
    if looks_numeric_to_sqlite(f) {
        let trimmed = f.trim_ascii();
        let v = std::str::from_utf8(trimmed)
            .ok()
            .and_then(|s| s.parse::<f64>().ok());
        let what = match v {
            Some(v) if v.is_infinite() => "an infinite REAL".to_string(),
            Some(v) if underflows(trimmed, v) => {
                "0.0: the number is below a double's range, and a nonzero value would become \
                 zero"
                    .to_string()
            }
            _ => "a number, not as written".to_string(),
        };
        return Some(format!(
            "column {name}: {shown:?} is not written as a plain {ty} value, and the column's \
             {ty} type would store it as {what} (import with --types text to keep it)"
        ));
    }
    None
}

/// Why a number is not stored in the DATE or TIMESTAMP column `col`.
fn date_number(col: &ColumnPlan, shown: &str) -> String {
    let ty = col.ty.sql();
    format!(
        "column {}: {shown} is not an ISO-8601 {ty} (YYYY-MM-DD...); the column's {ty} type \
         would store it as a number, which SQLite's date functions read as a Julian day \
         (import with --type {}=TEXT to keep it as written)",
        litelane::quote_ident(&col.name),
        col.name
    )
}

fn text_cell(col: &ColumnPlan, f: &[u8], b: &mut Batch) -> Result<Cell, String> {
    if let Err(e) = std::str::from_utf8(f) {
        return Err(format!(
            "column {}: invalid UTF-8 at byte {} of the field",
            litelane::quote_ident(&col.name),
            e.valid_up_to()
        ));
    }
    if f.len() > u32::MAX as usize / 2 {
        return Err(format!(
            "column {}: field of {} bytes is too large",
            litelane::quote_ident(&col.name),
            f.len()
        ));
    }
    Ok(b.push_text(f))
}

/// One top-level JSON value of a line, borrowed.
#[derive(Debug, Clone, Copy)]
enum JsonRef<'a> {
    Null,
    Bool(bool),
    Number(&'a serde_json::Number),
    String(&'a str),
    /// An array or an object.
    Nested(&'a Json),
}

impl<'a> From<&'a Json> for JsonRef<'a> {
    fn from(v: &'a Json) -> JsonRef<'a> {
        match v {
            Json::Null => JsonRef::Null,
            Json::Bool(x) => JsonRef::Bool(*x),
            Json::Number(n) => JsonRef::Number(n),
            Json::String(s) => JsonRef::String(s),
            nested => JsonRef::Nested(nested),
        }
    }
}

/// One JSON value as a cell of `col`. `text` is the value as written, when
/// the line was read for it ([`has_long_number`]).
fn json_cell(
    col: &ColumnPlan,
    v: JsonRef<'_>,
    text: Option<&str>,
    b: &mut Batch,
) -> Result<Cell, String> {
    let cell = json_value_cell(col, v, text, b)?;
    // Text in a typed column: possibly a value kept as text (the writer
    // looks again; a date in a DATE column is not one).
    if matches!(cell, Cell::Text(..)) && !matches!(col.ty, ColType::Text | ColType::Any) {
        b.may_keep_text();
    }
    Ok(cell)
}

fn json_value_cell(
    col: &ColumnPlan,
    v: JsonRef<'_>,
    text: Option<&str>,
    b: &mut Batch,
) -> Result<Cell, String> {
    let numeric_col = matches!(col.ty, ColType::Integer | ColType::Real);
    if col.strict && !json_fits_strict(col.ty, v) {
        // As for CSV: a strict BOOLEAN, DATE or TIMESTAMP column takes only
        // its own forms (a STRICT table would refuse the rest anyway).
        let shown: String = v.shown().chars().take(60).collect();
        return Err(not_a(col, shown.as_bytes()));
    }
    match v {
        JsonRef::Null => Ok(Cell::Null),
        JsonRef::Bool(x) => {
            if col.ty == ColType::Text {
                Ok(b.push_text(if x { b"true" } else { b"false" }))
            } else {
                Ok(Cell::Int(x as i64))
            }
        }
        JsonRef::Number(n) => json_number_cell(col, n, text, b),
        JsonRef::String(s) => {
            if numeric_col && col.strict {
                let shown: String = s.chars().take(60).collect();
                return Err(strict_fail(col, &format!("{shown:?}")));
            }
            if col.ty.converts_text() {
                if let Some(reason) = rewritten(col, s.as_bytes()) {
                    return Err(reason);
                }
            }
            Ok(b.push_text(s.as_bytes()))
        }
        JsonRef::Nested(nested) => {
            if numeric_col && col.strict {
                return Err(strict_fail(col, "a nested value"));
            }
            // As written when at hand (long numbers keep their digits).
            match text {
                Some(t) => Ok(b.push_text(t.as_bytes())),
                None => Ok(b.push_shown(nested)),
            }
        }
    }
}

/// The reason a value (`what`) is refused by the strict numeric column `col`.
fn strict_fail(col: &ColumnPlan, what: &str) -> String {
    format!(
        "column {}: {what} is not {} (strict)",
        litelane::quote_ident(&col.name),
        if col.ty == ColType::Integer {
            "an INTEGER"
        } else {
            "a REAL"
        }
    )
}

/// A JSON number as a cell of `col` (`text`: as written, when at hand).
fn json_number_cell(
    col: &ColumnPlan,
    n: &serde_json::Number,
    text: Option<&str>,
    b: &mut Batch,
) -> Result<Cell, String> {
    if let Some(t) = text.filter(|t| n.as_f64().is_some_and(|v| underflows(t.as_bytes(), v))) {
        // As a number out of range the other way (`1e309`) makes
        // the line invalid JSON: rejected, whatever the column.
        let shown: String = t.chars().take(60).collect();
        return Err(format!(
            "column {}: {shown} is below a double's range: it would be stored as 0.0, \
             and a nonzero value must not become zero",
            litelane::quote_ident(&col.name)
        ));
    }
    if let Some(t) = text.filter(|t| is_big_integer(t.as_bytes())) {
        // Beyond 64 bits: only text keeps every digit.
        if matches!(col.ty, ColType::Text | ColType::Any) {
            return Ok(b.push_text(t.as_bytes()));
        }
        return Err(rewritten(col, t.as_bytes()).unwrap_or_default());
    }
    if col.ty == ColType::Text {
        // An integer as `Number`'s `Display` writes it (with itoa), without
        // the formatter's machinery.
        let mut digits = itoa::Buffer::new();
        return Ok(match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => b.push_text(digits.format(u).as_bytes()),
            (None, Some(i)) => b.push_text(digits.format(i).as_bytes()),
            _ => b.push_shown(n),
        });
    }
    if matches!(col.ty, ColType::Date | ColType::Timestamp) {
        return Err(date_number(col, &n.to_string()));
    }
    if let (ColType::Real, Some(i)) = (col.ty, n.as_i64()) {
        inexact_in_real(col, i)?;
    }
    match (n.as_i64(), n.as_f64()) {
        (Some(i), _) if col.ty != ColType::Real => Ok(Cell::Int(i)),
        (_, Some(f)) if f.is_finite() => {
            if col.ty == ColType::Integer && col.strict {
                Err(strict_fail(col, &n.to_string()))
            } else {
                Ok(Cell::Real(f))
            }
        }
        _ => Ok(b.push_shown(n)),
    }
}

/// An error when the integer `v` has no exact REAL (a double holds every
/// integer only up to 2^53): storing it in the REAL column `col` would change
/// its digits.
fn inexact_in_real(col: &ColumnPlan, v: i64) -> Result<(), String> {
    if (v as f64) as i128 == i128::from(v) {
        return Ok(());
    }
    Err(format!(
        "column {}: {v} has no exact REAL value (a REAL holds integers exactly only up to \
         2^53 = 9007199254740992; it would be stored as {:?}); import the column as INTEGER or \
         TEXT with --type",
        litelane::quote_ident(&col.name),
        v as f64
    ))
}

/// A JSON value fits a strict column of type `ty`: `true`/`false` or a
/// 64-bit integer for BOOLEAN, an ISO-8601 string for DATE and TIMESTAMP;
/// other types decide in [`json_cell`].
fn json_fits_strict(ty: ColType, v: JsonRef<'_>) -> bool {
    match (ty, v) {
        (_, JsonRef::Null) => true,
        (ColType::Boolean, JsonRef::Bool(_)) => true,
        (ColType::Boolean, JsonRef::Number(n)) => n.as_i64().is_some(),
        (ColType::Date | ColType::Timestamp, JsonRef::String(s)) => {
            is_iso_date(s.as_bytes()) || is_iso_timestamp(s.as_bytes())
        }
        (ColType::Boolean | ColType::Date | ColType::Timestamp, _) => false,
        _ => true,
    }
}

impl JsonRef<'_> {
    /// The value as JSON text, for messages.
    fn shown(self) -> String {
        match self {
            JsonRef::Null => "null".to_string(),
            JsonRef::Bool(x) => x.to_string(),
            JsonRef::Number(n) => n.to_string(),
            JsonRef::String(s) => Json::String(s.to_string()).to_string(),
            JsonRef::Nested(v) => v.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::batch::Kind;

    fn plan(format: Format, strict: bool) -> Plan {
        Plan {
            format,
            header: true,
            fields: 3,
            nulls: vec!["".into(), "NA".into()],
            columns: vec![
                ColumnPlan {
                    name: "id".into(),
                    ty: ColType::Integer,
                    strict,
                    src: 0,
                    key: "id".into(),
                },
                ColumnPlan {
                    name: "x".into(),
                    ty: ColType::Real,
                    strict,
                    src: 1,
                    key: "x".into(),
                },
                ColumnPlan {
                    name: "s".into(),
                    ty: ColType::Text,
                    strict,
                    src: 2,
                    key: "s".into(),
                },
            ],
            commit_every: None,
            rejects_table: None,
            recurring: Default::default(),
            sniffed: None,
        }
    }

    /// A number in a TEXT column is stored as `serde_json` shows it
    /// (integers through itoa, the rest through `Display`).
    #[test]
    fn numbers_in_text_columns_are_stored_as_serde_json_shows_them() {
        let col = &plan(Format::Ndjson, false).columns[2];
        let numbers: Vec<serde_json::Number> = vec![
            0u64.into(),
            1u64.into(),
            u64::MAX.into(),
            (-1i64).into(),
            i64::MIN.into(),
            i64::MAX.into(),
            serde_json::Number::from_f64(1.5).unwrap(),
            serde_json::Number::from_f64(-0.0).unwrap(),
            serde_json::Number::from_f64(1e300).unwrap(),
            serde_json::Number::from_f64(123456789.0).unwrap(),
        ];
        for n in numbers {
            let mut b = Batch::new(1, 1);
            let Ok(Cell::Text(start, len)) = json_number_cell(col, &n, None, &mut b) else {
                panic!("{n}: not stored as text");
            };
            let t = &b.text[start as usize..(start + len) as usize];
            assert_eq!(t, n.to_string().as_bytes(), "{n}");
        }
    }

    fn at(line: u64) -> Place {
        Place {
            line,
            end: line * 10,
        }
    }

    fn rec(fields: &[&[u8]]) -> csv::ByteRecord {
        let mut r = csv::ByteRecord::new();
        fields.iter().for_each(|f| r.push_field(f));
        r
    }

    #[test]
    fn csv_fields_become_typed_cells_nulls_and_rejects() {
        let c = Converter::new(plan(Format::Csv, false));
        let mut b = Batch::new(3, 8);
        c.push_csv(&mut b, &rec(&[b"1", b"2.5", b"a"]), at(2), 1);
        c.push_csv(&mut b, &rec(&[b"NA", b"", b"b"]), at(3), 2);
        c.push_csv(&mut b, &rec(&[b"x", b"y", b"c"]), at(4), 3);
        c.push_csv(&mut b, &rec(&[b"1", b"2"]), at(5), 4);
        c.push_csv(&mut b, &rec(&[b"1", b"2", b"\xff"]), at(6), 5);
        assert_eq!(b.rows, 3);
        assert_eq!(&b.cells[..2], &[Cell::Int(1), Cell::Real(2.5)]);
        assert_eq!(&b.cells[3..5], &[Cell::Null, Cell::Null]);
        // Non-strict: a value that does not fit is kept as text.
        assert!(matches!(b.cells[6], Cell::Text(..)));
        assert_eq!(b.entries[3].kind, Kind::Reject(0));
        assert!(b.rejects[0].reason.contains("expected 3 fields, found 2"));
        assert!(b.rejects[1].reason.contains("invalid UTF-8"));
    }

    #[test]
    fn strict_rejects_values_that_do_not_fit() {
        let c = Converter::new(plan(Format::Csv, true));
        let mut b = Batch::new(3, 8);
        c.push_csv(&mut b, &rec(&[b"x", b"1", b"a"]), at(2), 1);
        c.push_csv(&mut b, &rec(&[b"1", b"1,5", b"a,\"b"]), at(3), 2);
        assert_eq!(b.rows, 0);
        assert!(b.rejects[0].reason.contains("\"x\" is not an INTEGER"));
        assert!(b.rejects[1].reason.contains("is not a REAL"));
        assert_eq!(b.rejects[1].raw, b"1,\"1,5\",\"a,\"\"b\"");
        assert!(b.cells.is_empty() && b.text.is_empty());
    }

    #[test]
    fn json_objects_fill_columns_by_key() {
        let c = Converter::new(plan(Format::Ndjson, false));
        let mut b = Batch::new(3, 8);
        c.push_json(&mut b, br#"{"s":{"a":[1]},"id":5}"#, at(1), 1);
        c.push_json(&mut b, br#"[1,2]"#, at(2), 2);
        c.push_json(&mut b, br#"{"zzz":1}"#, at(3), 3);
        c.push_json(&mut b, br#"{"id":"#, at(4), 4);
        assert_eq!(b.rows, 1);
        assert_eq!(b.cells[0], Cell::Int(5));
        assert_eq!(b.cells[1], Cell::Null);
        assert_eq!(b.text, br#"{"a":[1]}"#);
        assert!(b.rejects[0]
            .reason
            .contains("not a JSON object but an array"));
        assert!(b.rejects[1].reason.contains("\"zzz\" is not a column"));
        assert!(b.rejects[2].reason.contains("invalid JSON"));
    }
    #[test]
    fn integers_a_real_column_cannot_hold_exactly_are_rejected_not_rounded() {
        // 2^53 + 1 and i64::MAX have no exact double; 2^53 and -2^53 do.
        let exact: &[&[u8]] = &[
            b"9007199254740992",
            b"-9007199254740992",
            b"4611686018427387904",
        ];
        let inexact: &[&[u8]] = &[
            b"9007199254740993",
            b"9223372036854775807",
            b"-9007199254740993",
        ];
        for strict in [false, true] {
            for format in [Format::Csv, Format::Ndjson] {
                let c = Converter::new(plan(format, strict));
                let mut b = Batch::new(3, 8);
                for (n, v) in exact.iter().chain(inexact).enumerate() {
                    let v = std::str::from_utf8(v).unwrap();
                    match format {
                        Format::Ndjson => {
                            let line = format!("{{\"id\":1,\"x\":{v},\"s\":\"a\"}}");
                            c.push_json(&mut b, line.as_bytes(), at(n as u64 + 2), n as u64 + 1);
                        }
                        _ => c.push_csv(&mut b, &rec(&[b"1", v.as_bytes(), b"a"]), at(2), 1),
                    }
                }
                let case = format!("{format:?} strict={strict}");
                assert_eq!(b.rows as usize, exact.len(), "{case}");
                for (r, v) in exact.iter().enumerate() {
                    let want: f64 = std::str::from_utf8(v).unwrap().parse().unwrap();
                    assert_eq!(b.cells[r * 3 + 1], Cell::Real(want), "{case}");
                    assert_eq!(
                        want as i128,
                        std::str::from_utf8(v).unwrap().parse::<i128>().unwrap()
                    );
                }
                assert_eq!(b.rejects.len(), inexact.len(), "{case}");
                for (rej, v) in b.rejects.iter().zip(inexact) {
                    let v = std::str::from_utf8(v).unwrap();
                    assert!(
                        rej.reason
                            .contains(&format!("column \"x\": {v} has no exact REAL value")),
                        "{case}: {}",
                        rej.reason
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::convert::batch::Kind;
    use proptest::prelude::*;

    fn one_column(ty: ColType) -> Converter {
        super::type_props::converter(ty, false, &[])
    }

    /// Converts `field` for a column of type `ty`, stores the row in a
    /// column declared `decl` as the import would bind it, and returns
    /// what SQLite kept: `None` for a rejected field, else the stored
    /// value's type and its text.
    fn through_sqlite(ty: ColType, decl: &str, field: &[u8]) -> Option<(String, Vec<u8>)> {
        let conv = one_column(ty);
        let mut b = Batch::new(1, 1);
        let mut rec = csv::ByteRecord::new();
        rec.push_field(field);
        conv.push_csv(&mut b, &rec, Place { line: 2, end: 9 }, 1);
        let Kind::Row(_) = b.entries[0].kind else {
            return None;
        };
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(&format!("CREATE TABLE o(x {decl})"))
            .unwrap();
        let row = crate::convert::batch::RowRef {
            batch: std::sync::Arc::new(b),
            row: 0,
            line: 2,
            record: 1,
        };
        use litelane::BulkRow;
        let v = rusqlite::types::ToSqlOutput::Borrowed(row.value(0));
        c.execute("INSERT INTO o VALUES (?1)", [v]).unwrap();
        Some(
            c.query_row("SELECT typeof(x), CAST(x AS BLOB) FROM o", [], |r| {
                Ok((r.get(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .unwrap(),
        )
    }

    fn decl(ty: ColType) -> &'static str {
        match ty {
            ColType::Integer => "INTEGER",
            ColType::Real => "REAL",
            ColType::Text => "TEXT",
            ColType::Any => "",
            ColType::Numeric => "NUMERIC",
            t => t.sql(),
        }
    }

    const TYPES: [ColType; 8] = ColType::ALL;

    /// A value is stored exactly as written, or as the number it spells, or
    /// rejected: never silently changed by SQLite.
    fn check(ty: ColType, field: &str) -> Result<(), TestCaseError> {
        let Some((stored, text)) = through_sqlite(ty, decl(ty), field.as_bytes()) else {
            // Rejected: only numeric columns reject, and only text that
            // SQLite would have rewritten.
            prop_assert!(ty.converts_text(), "{ty:?} rejected {field:?}");
            prop_assert!(
                looks_numeric_to_sqlite(field.as_bytes()) || is_big_integer(field.as_bytes())
            );
            return Ok(());
        };
        let text = String::from_utf8(text).unwrap();
        if ty == ColType::Boolean {
            if let Some(v) = crate::values::parse_bool(field.as_bytes()) {
                // The one planned conversion: true/false become 1/0.
                prop_assert_eq!((stored.as_str(), text), ("integer", v.to_string()));
                return Ok(());
            }
        }
        let numeric_affinity = matches!(
            ty,
            ColType::Numeric | ColType::Boolean | ColType::Date | ColType::Timestamp
        );
        match stored.as_str() {
            "text" => prop_assert_eq!(&text, field, "{:?}", ty),
            // The integer's digits are the field's; in a NUMERIC column an
            // integral real (`3.0`) is kept by SQLite as the integer 3.
            "integer" if numeric_affinity && text != field => {
                let v: f64 = field.parse().unwrap();
                prop_assert_eq!(v, text.parse::<f64>().unwrap(), "{:?} {:?}", ty, field);
            }
            "integer" => prop_assert_eq!(&text, field, "{:?}", ty),
            "real" => {
                let v: f64 = field.parse().unwrap();
                let back: f64 = text.parse().unwrap();
                prop_assert!(v.is_finite(), "{:?} {:?}", ty, field);
                // SQLite prints reals with 17 significant digits; the value
                // bound is the field's own parse (bit-exactness of that
                // parse is a property in values.rs).
                prop_assert!((back - v).abs() <= v.abs() * 1e-15, "{:?} {:?}", ty, field);
            }
            other => prop_assert!(false, "stored as {other}"),
        }
        Ok(())
    }

    #[test]
    fn edge_values_are_stored_as_written_as_their_number_or_rejected() {
        for field in [
            "3.0",
            "1e3",
            "-0.0",
            "1.50",
            "00123",
            "+5",
            " 7",
            "7 ",
            "1e309",
            "0x10",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775809",
            "",
            "-",
            "1-2",
            "2024-01-05",
            "2024-01-05 10:30:00",
            "2024-02-30",
            "true",
            "FALSE",
            "yes",
            "1.",
            ".5",
            "NaN",
            "inf",
            "١٢",
        ] {
            for ty in TYPES {
                check(ty, field).unwrap_or_else(|e| panic!("{ty:?} {field:?}: {e}"));
            }
        }
    }

    /// The plain scan [`has_long_number`] must agree with.
    fn long_run_plain(raw: &[u8]) -> bool {
        let mut run = 0;
        raw.iter().any(|c| {
            run = if c.is_ascii_digit() { run + 1 } else { 0 };
            run >= crate::read::json::LONG_DIGITS
        })
    }

    #[test]
    fn long_digit_runs_are_found_wherever_they_are() {
        let d19 = "1234567890123456789";
        for (raw, want) in [
            ("", false),
            (d19, true),
            (&d19[1..], false),
            (&format!("x{d19}"), true),
            (&format!("{d19}x"), true),
            (&format!("{{\"a\":{}}}", &d19[1..]), false),
            (&format!("{{\"a\":\"{d19}\"}}"), true),
            (&format!("1.{}", &d19[1..]), false),
            (&format!("0.{d19}"), true),
            (&format!("{}x{}", &d19[1..], &d19[1..]), false),
        ] {
            assert_eq!(has_long_number(raw.as_bytes()), want, "{raw:?}");
            assert_eq!(long_run_plain(raw.as_bytes()), want, "{raw:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn long_digit_runs_are_found_as_by_a_plain_scan(
            raw in "([0-9]{0,25}[^0-9]?){0,6}"
        ) {
            prop_assert_eq!(has_long_number(raw.as_bytes()), long_run_plain(raw.as_bytes()));
        }

        #[test]
        fn a_field_is_stored_as_written_as_its_number_or_rejected(
            field in "[ 0-9+.eE\\x00-]{0,10}|[0-9]{15,30}|\\PC{0,8}"
        ) {
            for ty in TYPES {
                check(ty, &field)?;
            }
        }

        /// An integer of any length comes back with every digit, in the
        /// type inference picks for it.
        #[test]
        fn integers_of_any_length_keep_every_digit(digits in "-?[1-9][0-9]{0,35}") {
            let mut inf = crate::values::Inference::default();
            inf.observe_bytes(digits.as_bytes());
            let ty = inf.decide();
            let (_, text) = through_sqlite(ty, decl(ty), digits.as_bytes()).unwrap();
            prop_assert_eq!(String::from_utf8(text).unwrap(), digits);
        }
    }
}

#[cfg(test)]
#[path = "props.rs"]
mod type_props;
