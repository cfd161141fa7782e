//! The import's read → convert path with its invariants checked, for the
//! fuzz target (`fuzz/fuzz_targets/import.rs`) and the tests.
//!
//! [`check`] takes arbitrary bytes: the first two choose the format, the
//! dialect, the header, strictness, null tokens and column types; the rest
//! is the file as it would be on disk (gzip, zstd, a byte-order mark and
//! UTF-16 included). It decodes it, sniffs it (CSV/TSV) as the import does,
//! reads every record, converts each into a row or a reject, stores the rows
//! in an in-memory SQLite table declared as the import declares it, and
//! panics when one of these fails:
//!
//! 1. every record the reader returns becomes exactly one row or one reject
//!    (rows + rejects = records, none dropped, none doubled), numbered 1, 2,
//!    3... in input order;
//! 2. the records are the ones the `csv` crate reads from the decoded text
//!    on its own (same count, same fields), and for NDJSON records plus
//!    blank lines are the input's lines: the reader's line counting and its
//!    end-of-input sentinel add, drop and change nothing;
//! 3. record lines (rows and rejects) are within the input's physical
//!    lines and strictly increasing, their end offsets too; an error names
//!    a line of the input;
//! 4. each stored value is the field as written: a NULL is a null token
//!    (or JSON null / a missing key); an INTEGER re-renders to the field's
//!    exact text (or is `true`/`false` → 1/0 in a BOOLEAN column); a REAL
//!    is the field's own parse, bit for bit, and its shortest rendering
//!    parses back to the same bits; TEXT is the field's bytes (for NDJSON:
//!    the string, or the value as JSON text), valid UTF-8, and never text
//!    that SQLite's column affinity would turn into a number;
//! 5. SQLite keeps each row as the converter made it: the same type and
//!    value read back (`-0.0` comes back as `0.0`, and an integral REAL in a
//!    NUMERIC-affinity column as the same number as an INTEGER, both
//!    documented in `docs/import.md`);
//! 6. a rejected CSV/TSV record's `raw` text reads back as the same fields
//!    with the same dialect (nothing of it is lost in the rejects file); an
//!    NDJSON reject keeps the line as it is.
//!
//! No panic and no hang are checked by the fuzzer itself. Decoded input
//! larger than [`MAX_DECODED`] is skipped (a compression bomb would only
//! measure the decompressor).

use std::collections::HashMap;
use std::io::{BufRead, Read};

use serde_json::Value as Json;

use crate::convert::batch::{Batch, Kind, RowRef};
use crate::convert::Converter;
use crate::plan::columns::{ColumnPlan, Plan};
use crate::plan::{sniff, table};
use crate::read::dialect::Sniffed;
use crate::read::json::{has_long_number, raw_values};
use crate::read::records::{self as parse, RawOwned, RawRef, Records};
use crate::read::source::{self, Format};
use crate::values::{
    is_big_integer, looks_numeric_to_sqlite, parse_bool, parse_real, Cell, ColType, Inference,
};

/// Decoded input beyond this many bytes is not checked.
pub const MAX_DECODED: usize = 1 << 20;

/// Rows stored in SQLite and read back per input (the rest are checked
/// against their fields only).
const MAX_STORED_ROWS: usize = 256;

/// The name inputs are given in messages.
const DISPLAY: &str = "fuzz";

/// Column types the second byte of the input picks from.
const TYPES: [ColType; 8] = ColType::ALL;

/// What one input came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Records converted (rows + rejects).
    pub records: u64,
    /// Records stored as rows.
    pub rows: u64,
    /// Records rejected.
    pub rejects: u64,
    /// The error that ended the input early (a clear message), if any.
    pub error: Option<String>,
    /// The input was not checked (decoded to more than [`MAX_DECODED`]).
    pub skipped: bool,
}

/// How the first two bytes of a fuzz input configure the import.
#[derive(Debug, Clone, Copy)]
struct Config {
    /// 0 CSV sniffed, 1 TSV sniffed, 2 CSV/TSV with the format's fixed
    /// dialect (a resumed import with an older plan), 3 NDJSON.
    mode: u8,
    /// `--header` / `--no-header` / neither.
    header: Option<bool>,
    /// `--strict`.
    strict: bool,
    /// `--null '' --null NA --null '\N'` (else sniffed or the empty field).
    user_nulls: bool,
    /// Column types from `seed` instead of inferred/sniffed.
    forced_types: bool,
    /// Mode 2: TSV instead of CSV.
    tsv: bool,
    seed: u8,
}

impl Config {
    fn new(a: u8, seed: u8) -> Config {
        Config {
            mode: a & 3,
            header: match (a >> 2) & 3 {
                1 => Some(true),
                2 => Some(false),
                _ => None,
            },
            strict: a & 0x10 != 0,
            user_nulls: a & 0x20 != 0,
            forced_types: a & 0x40 != 0,
            tsv: a & 0x80 != 0,
            seed,
        }
    }

    fn forced(&self, i: usize) -> ColType {
        let t = TYPES[(self.seed as usize + i * 3) % TYPES.len()];
        // A STRICT table has no NUMERIC type (and the import never makes one).
        if self.strict && t == ColType::Numeric {
            ColType::Real
        } else {
            t
        }
    }

    fn nulls(&self) -> Option<Vec<String>> {
        self.user_nulls
            .then(|| vec![String::new(), "NA".into(), "\\N".into()])
    }
}

/// A reader that fails with the error the decoder met (after the bytes it
/// decoded before it).
struct Failing(Option<std::io::Error>);

impl Read for Failing {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| std::io::Error::other("failed")))
    }
}

impl BufRead for Failing {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| std::io::Error::other("failed")))
    }
    fn consume(&mut self, _: usize) {}
}

/// Physical lines of `text` (LF, CRLF and a lone CR end one; a last line
/// without an ending counts).
fn physical_lines(text: &[u8]) -> u64 {
    let mut n = 0;
    for i in memchr::memchr2_iter(b'\n', b'\r', text) {
        if text[i] == b'\r' || i == 0 || text[i - 1] != b'\r' {
            n += 1;
        }
    }
    n + u64::from(text.last().is_some_and(|c| !matches!(c, b'\n' | b'\r')))
}

/// The line number an error message names (`fuzz:N: ...`), if any.
fn error_line(msg: &str) -> Option<u64> {
    let rest = msg.split_once(&format!("{DISPLAY}:"))?.1;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

struct Run<'a> {
    cfg: Config,
    /// Physical lines of the decoded input.
    lines: u64,
    text: &'a [u8],
    /// Decoding failed part-way: the reader ends with that error.
    read_failed: bool,
    /// Every record the reader returned (header and skipped ones too), for
    /// CSV/TSV: its fields; for NDJSON: the line.
    seen: Vec<Vec<Vec<u8>>>,
    /// Blank lines the reader skipped.
    blank: u64,
    /// The CSV/TSV delimiter and quote the records are read with.
    dialect: (u8, Option<u8>),
    /// The place of the last record read (line, end offset).
    last: (u64, u64),
    /// The input is read as one JSON array (NDJSON mode, `[` first): its
    /// elements may share a line.
    array: bool,
}

/// Runs `data` (two configuration bytes, then the file) through decode →
/// sniff → read → convert → SQLite, and panics with the input's
/// configuration when an invariant (module documentation) fails.
pub fn check(data: &[u8]) -> Outcome {
    let (cfg, file) = match data {
        [a, b, rest @ ..] => (Config::new(*a, *b), rest),
        _ => (Config::new(0, 0), data),
    };
    let mut out = Outcome::default();

    // Decode the whole file (capped), keeping a read error for the reader.
    let decoded = match source::decode(Box::new(std::io::Cursor::new(file.to_vec())), DISPLAY) {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let mut text = Vec::new();
    let failed = decoded
        .take(MAX_DECODED as u64 + 1)
        .read_to_end(&mut text)
        .err();
    if text.len() > MAX_DECODED {
        out.skipped = true;
        return out;
    }
    let lines = physical_lines(&text);
    let input: Box<dyn BufRead + Send> = {
        let head = std::io::Cursor::new(text.clone());
        match &failed {
            None => Box::new(head),
            Some(e) => {
                Box::new(head.chain(Failing(Some(std::io::Error::new(e.kind(), e.to_string())))))
            }
        }
    };
    let mut run = Run {
        cfg,
        lines,
        text: &text,
        read_failed: failed.is_some(),
        seen: Vec::new(),
        blank: 0,
        dialect: (b',', Some(b'"')),
        last: (0, 0),
        array: false,
    };
    if let Err(msg) = run.import(input, &mut out) {
        if let Some(line) = error_line(&msg) {
            assert!(
                line >= 1 && line <= lines.max(1) + 1,
                "{cfg:?}: the error names line {line} of {lines}: {msg}"
            );
        }
        out.error = Some(msg);
    }
    assert_eq!(out.rows + out.rejects, out.records, "{cfg:?}");
    out
}

impl Run<'_> {
    /// The next record, its place checked and its content kept.
    fn next<'r>(&mut self, records: &'r mut Records) -> Result<Option<RawRef<'r>>, String> {
        let r = records.next_record(DISPLAY).map_err(|e| e.to_string())?;
        if let Some(r) = &r {
            self.note(r);
        }
        Ok(r)
    }

    /// Reads, converts and checks every record; `Err`: the message of the
    /// error that ended the input (the records before it are checked).
    fn import(&mut self, input: Box<dyn BufRead + Send>, out: &mut Outcome) -> Result<(), String> {
        let cfg = self.cfg;
        let (format, sniffed) = match cfg.mode {
            0 | 1 => {
                let format = [Format::Csv, Format::Tsv][cfg.mode as usize];
                let opts = sniff::Options {
                    format,
                    delimiter: None,
                    header: cfg.header,
                    nulls: cfg.nulls(),
                    types_text: false,
                };
                let head = &self.text[..self.text.len().min(sniff::HEAD_BYTES)];
                if head.is_empty() {
                    return Err("empty input".into());
                }
                let plan = sniff::sniff(head, !self.read_failed, &[], &opts)?;
                plan.validate()
                    .unwrap_or_else(|e| panic!("{cfg:?}: the sniffed plan is invalid: {e}"));
                (format, Some(plan))
            }
            2 if cfg.tsv => (Format::Tsv, None),
            2 => (Format::Csv, None),
            _ => (Format::Ndjson, None),
        };
        self.array = format == Format::Ndjson && parse::is_json_array(self.text);
        if self.array && !self.read_failed {
            // Valid JSON as a whole: the reader must read it, element by
            // element (checked in `cross_check`).
            if serde_json::from_slice::<Vec<Json>>(self.text).is_ok() {
                let mut records =
                    Records::new(format, Box::new(std::io::Cursor::new(self.text.to_vec())));
                let mut n = 0;
                loop {
                    match records.next_record(DISPLAY) {
                        Ok(Some(_)) => n += 1,
                        Ok(None) => break,
                        Err(e) => {
                            panic!("{cfg:?}: a valid JSON array failed after {n} elements: {e}")
                        }
                    }
                }
            }
        }
        self.dialect = match (&sniffed, format) {
            (Some(p), _) => (p.sniffed().delimiter_byte(), p.sniffed().quote_byte()),
            (None, Format::Tsv) => (b'\t', None),
            _ => (b',', Some(b'"')),
        };
        let mut records = match &sniffed {
            Some(p) => p.sniffed().records(format, input),
            None => Records::new(format, input),
        };
        let result = self.convert_all(format, sniffed.as_ref(), &mut records, out);
        self.blank = records.blank_lines();
        if result.is_ok() && !self.read_failed {
            self.cross_check(format);
        }
        result
    }

    /// The reader's records against an independent reading of the text.
    fn cross_check(&self, format: Format) {
        let cfg = self.cfg;
        if self.array {
            // When the whole text is valid JSON, the records are its
            // elements, in order, each the same value.
            if let Ok(all) = serde_json::from_slice::<Vec<Json>>(self.text) {
                assert_eq!(all.len(), self.seen.len(), "{cfg:?}: JSON array elements");
                for (want, got) in all.iter().zip(&self.seen) {
                    let got: Json = serde_json::from_slice(&got[0])
                        .unwrap_or_else(|e| panic!("{cfg:?}: an element that is not JSON: {e}"));
                    assert_eq!(&got, want, "{cfg:?}: a JSON array element");
                }
            }
            return;
        }
        if format == Format::Ndjson {
            assert_eq!(
                self.seen.len() as u64 + self.blank,
                self.lines,
                "{cfg:?}: NDJSON records + blank lines != lines"
            );
            return;
        }
        let plain: Vec<Vec<Vec<u8>>> =
            sniff::records(self.text, self.dialect.0, self.dialect.1, true, usize::MAX)
                .iter()
                .map(|r| r.iter().map(<[u8]>::to_vec).collect())
                .collect();
        assert_eq!(
            plain.len(),
            self.seen.len(),
            "{cfg:?}: the reader returned {} records, the csv crate reads {}",
            self.seen.len(),
            plain.len()
        );
        assert!(
            plain == self.seen,
            "{cfg:?}: records differ from the csv crate's"
        );
        assert!(self.blank <= self.lines, "{cfg:?}: blank lines");
    }

    /// The plan (as `prepare_fresh` makes it for a new table), then every
    /// record converted and checked.
    // Long: the fuzz target's oracle, compiled only for tests and the
    // `fuzzing` feature, never into the product.
    fn convert_all(
        &mut self,
        format: Format,
        sniffed: Option<&sniff::SniffPlan>,
        records: &mut Records,
        out: &mut Outcome,
    ) -> Result<(), String> {
        let cfg = self.cfg;
        for _ in 0..sniffed.map_or(0, |p| p.skip_rows) {
            self.next(records)?;
        }
        let has_header = match sniffed {
            Some(p) => p.header,
            None => format != Format::Ndjson && cfg.header != Some(false),
        };
        let mut header_len = None;
        if has_header {
            match self.next(records)? {
                Some(RawRef::Csv(r, at)) => {
                    let expected = sniffed.map(|p| p.header_fields());
                    if expected.is_some_and(|e| e != r.len()) {
                        return Err(format!(
                            "{DISPLAY}:{}: the header has other fields",
                            at.line
                        ));
                    }
                    header_len = Some(r.len());
                }
                _ => return Err("empty: no header".into()),
            }
        }
        let mut sample = Vec::new();
        while sample.len() < super::SAMPLE_RECORDS {
            match self.next(records)? {
                Some(r) => sample.push(r.to_owned()),
                None => break,
            }
        }
        let user_nulls = cfg.nulls();
        let nulls = match (&user_nulls, sniffed) {
            (Some(n), _) => n.clone(),
            (None, Some(p)) => p.nulls.clone(),
            (None, None) => vec![String::new()],
        };
        let (keys, fields, inferred): (Vec<String>, usize, Vec<ColType>) = match format {
            Format::Csv | Format::Tsv => {
                let fields = match (header_len, sniffed, sample.first()) {
                    (_, Some(p), _) => p.columns.len(),
                    (Some(h), _, _) => h,
                    (None, None, Some(RawOwned::Csv(r, _))) => r.len(),
                    _ => return Err("empty: no record".into()),
                };
                let mut inf = vec![Inference::default(); fields];
                for raw in &sample {
                    if let RawOwned::Csv(r, _) = raw {
                        if r.len() == fields {
                            for (i, f) in r.iter().enumerate() {
                                if !nulls.iter().any(|n| n.as_bytes() == f) {
                                    inf[i].observe_bytes(f);
                                }
                            }
                        }
                    }
                }
                let types = match sniffed {
                    Some(p) => p.columns.iter().map(|c| c.ty).collect(),
                    None => inf.iter().map(Inference::decide).collect(),
                };
                let keys = (1..=fields).map(|i| format!("c{i}")).collect();
                (keys, fields, types)
            }
            Format::Ndjson => {
                let mut keys: Vec<String> = Vec::new();
                let mut by_key: HashMap<String, Inference> = HashMap::new();
                for raw in &sample {
                    if let RawOwned::Json(b, _) = raw {
                        if let Ok(Json::Object(o)) = serde_json::from_slice(b) {
                            let raws = has_long_number(b).then(|| raw_values(b)).flatten();
                            for (k, v) in &o {
                                if !by_key.contains_key(k) {
                                    keys.push(k.clone());
                                }
                                let text = raws.as_ref().and_then(|m| m.get(k)).map(|r| r.get());
                                by_key.entry(k.clone()).or_default().observe_json(v, text);
                            }
                        }
                    }
                }
                if keys.is_empty() {
                    return Err("no JSON object in the sample".into());
                }
                let types = keys.iter().map(|k| by_key[k].decide()).collect();
                (keys, 0, types)
            }
        };
        let names = table::column_names(Some(keys.clone()), keys.len());
        let columns: Vec<ColumnPlan> = names
            .into_iter()
            .zip(keys)
            .enumerate()
            .map(|(i, (name, key))| {
                let ty = if cfg.forced_types {
                    cfg.forced(i)
                } else {
                    inferred[i]
                };
                ColumnPlan {
                    name,
                    ty,
                    strict: cfg.strict && ty != ColType::Text,
                    src: i,
                    key,
                }
            })
            .collect();
        let plan = Plan {
            format,
            header: has_header,
            fields,
            nulls: nulls.clone(),
            columns: columns.clone(),
            commit_every: None,
            rejects_table: None,
            recurring: Default::default(),
            sniffed: sniffed.map(|p| {
                let mut s = p.sniffed();
                if user_nulls.is_some() {
                    s.column_nulls.clear();
                }
                s
            }),
        };
        let spec = Spec::new(&plan);
        let types: Vec<ColType> = plan.columns.iter().map(|c| c.ty).collect();
        let converter = Converter::new(plan);
        let mut batch = Batch::new(columns.len(), 64);
        let mut record = 0u64;
        let mut step = |this: &mut Self, raw: RawRef<'_>| {
            record += 1;
            let before = batch.entries.len();
            let at = match &raw {
                RawRef::Csv(r, at) => {
                    converter.push_csv(&mut batch, r, *at, record);
                    *at
                }
                RawRef::Json(b, at) => {
                    converter.push_json(&mut batch, b, *at, record);
                    *at
                }
            };
            assert_eq!(
                batch.entries.len(),
                before + 1,
                "{cfg:?}: record {record} became {} entries",
                batch.entries.len() - before
            );
            let e = batch.entries[before];
            assert_eq!(
                (e.record, e.line, e.end),
                (record, at.line, at.end),
                "{cfg:?}"
            );
            out.records += 1;
            match e.kind {
                Kind::Row(r) => {
                    out.rows += 1;
                    // A row said to keep no value as text keeps none.
                    assert!(
                        batch.may_keep[r as usize] || !batch.any_kept(r as usize, &types),
                        "{cfg:?}: record {record} keeps a value as text unflagged"
                    );
                    spec.check_row(&this.cfg, &batch, r as usize, &raw);
                }
                Kind::Reject(j) => {
                    out.rejects += 1;
                    let rej = &batch.rejects[j as usize];
                    assert!(!rej.reason.is_empty(), "{cfg:?}: a reject without a reason");
                    spec.check_reject(&this.cfg, this.dialect, &rej.raw, &rej.reason, &raw);
                }
            }
        };
        for raw in &sample {
            let r = match raw {
                RawOwned::Csv(r, at) => RawRef::Csv(r, *at),
                RawOwned::Json(b, at) => RawRef::Json(b, *at),
            };
            step(self, r);
        }
        let result = loop {
            // `next` borrows the records; the record is converted at once.
            let raw = match records.next_record(DISPLAY) {
                Ok(Some(r)) => r,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e.to_string()),
            };
            let owned = raw.to_owned();
            let r = match &owned {
                RawOwned::Csv(r, at) => RawRef::Csv(r, *at),
                RawOwned::Json(b, at) => RawRef::Json(b, *at),
            };
            self.note(&r);
            step(self, r);
        };
        spec.store(&cfg, &batch);
        result
    }

    /// [`next`](Run::next)'s checks for a record read outside it.
    fn note(&mut self, r: &RawRef<'_>) {
        let (cfg, lines, len) = (self.cfg, self.lines, self.text.len() as u64);
        let at = match r {
            RawRef::Csv(rec, at) => {
                self.seen.push(rec.iter().map(<[u8]>::to_vec).collect());
                *at
            }
            RawRef::Json(b, at) => {
                self.seen.push(vec![b.to_vec()]);
                *at
            }
        };
        // Elements of a JSON array may share a line; NDJSON records and
        // CSV records may not.
        let later = at.line > self.last.0 || (self.array && at.line == self.last.0);
        assert!(
            at.line >= 1 && at.line <= lines && later,
            "{cfg:?}: a record on line {} of {lines}, after line {}",
            at.line,
            self.last.0
        );
        assert!(
            at.end > self.last.1 && at.end <= len + 1,
            "{cfg:?}: record end {} after {} (input of {len} bytes)",
            at.end,
            self.last.1
        );
        self.last = (at.line, at.end);
    }
}

/// What each column of the plan accepts, to check cells against fields.
struct Spec {
    columns: Vec<ColumnPlan>,
    fields: usize,
    strict_table: bool,
    /// Null tokens per column.
    nulls: Vec<Vec<Vec<u8>>>,
    /// Space-padded numeric column per column.
    trim: Vec<bool>,
    /// NDJSON keys → column, exact and ASCII-lowercased.
    by_name: HashMap<String, usize>,
    by_lower: HashMap<String, usize>,
}

impl Spec {
    fn new(plan: &Plan) -> Spec {
        let s = plan.sniffed.as_ref();
        Spec {
            columns: plan.columns.clone(),
            fields: plan.fields,
            strict_table: plan.columns.iter().any(|c| c.strict),
            nulls: plan
                .columns
                .iter()
                .map(|c| {
                    s.and_then(|s: &Sniffed| s.column_nulls.get(c.src).cloned().flatten())
                        .unwrap_or_else(|| plan.nulls.clone())
                        .into_iter()
                        .map(String::into_bytes)
                        .collect()
                })
                .collect(),
            trim: plan
                .columns
                .iter()
                .map(|c| s.is_some_and(|s| s.trim.get(c.src).copied().unwrap_or(false)))
                .collect(),
            by_name: plan
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| (c.key.clone(), i))
                .collect(),
            by_lower: plan
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| (c.key.to_ascii_lowercase(), i))
                .collect(),
        }
    }

    fn check_row(&self, cfg: &Config, b: &Batch, row: usize, raw: &RawRef<'_>) {
        let cells = &b.cells[row * b.ncols..(row + 1) * b.ncols];
        match raw {
            RawRef::Csv(rec, _) => {
                assert_eq!(rec.len(), self.fields, "{cfg:?}: a row of the wrong width");
                for (i, col) in self.columns.iter().enumerate() {
                    self.check_field(cfg, i, col, &rec[col.src], cells[i], &b.text);
                }
            }
            RawRef::Json(line, _) => {
                let Ok(Json::Object(obj)) = serde_json::from_slice::<Json>(line) else {
                    panic!("{cfg:?}: a row from a line that is not a JSON object");
                };
                let raws = has_long_number(line).then(|| raw_values(line)).flatten();
                let mut slots: Vec<Option<(&String, &Json)>> = vec![None; self.columns.len()];
                for (k, v) in &obj {
                    let i = self
                        .by_name
                        .get(k)
                        .or_else(|| self.by_lower.get(&k.to_ascii_lowercase()))
                        .unwrap_or_else(|| panic!("{cfg:?}: a row with the unknown key {k:?}"));
                    slots[*i] = Some((k, v));
                }
                for (i, col) in self.columns.iter().enumerate() {
                    let (v, written) = match slots[i] {
                        None => (&Json::Null, None),
                        Some((k, v)) => (v, raws.as_ref().and_then(|m| m.get(k)).map(|r| r.get())),
                    };
                    check_json(cfg, col, v, written, cells[i], &b.text);
                }
            }
        }
    }

    /// A CSV/TSV field and the cell made of it.
    fn check_field(
        &self,
        cfg: &Config,
        i: usize,
        col: &ColumnPlan,
        f: &[u8],
        cell: Cell,
        text: &[u8],
    ) {
        let shown = String::from_utf8_lossy(f);
        let is_null = self.nulls[i].iter().any(|n| n == f);
        assert_eq!(
            matches!(cell, Cell::Null),
            is_null,
            "{cfg:?}: column {} ({:?}): {shown:?} became {cell:?}",
            col.name,
            col.ty
        );
        let t = if self.trim[i] { f.trim_ascii() } else { f };
        match cell {
            Cell::Null => {}
            Cell::Int(v) => {
                let bool_ok = col.ty == ColType::Boolean && parse_bool(t) == Some(v);
                assert!(
                    v.to_string().as_bytes() == t || bool_ok,
                    "{cfg:?}: {:?} column: {shown:?} stored as the integer {v}",
                    col.ty
                );
            }
            Cell::Real(x) => {
                check_real(cfg, col, t, x);
            }
            Cell::Text(s, n) => {
                let stored = &text[s as usize..(s + n) as usize];
                assert!(
                    stored == f,
                    "{cfg:?}: {:?} column: {shown:?} stored as the text {:?}",
                    col.ty,
                    String::from_utf8_lossy(stored)
                );
                check_text(cfg, col, stored);
            }
        }
    }

    /// A rejected record: its reason, and its `raw` keeps the record.
    fn check_reject(
        &self,
        cfg: &Config,
        dialect: (u8, Option<u8>),
        raw: &[u8],
        reason: &str,
        rec: &RawRef<'_>,
    ) {
        match rec {
            RawRef::Json(line, _) => assert_eq!(raw, *line, "{cfg:?}: {reason}"),
            RawRef::Csv(r, _) => {
                // After a blank line: the csv crate drops a byte-order mark
                // at the very start of its input.
                let back = sniff::records(&[b"\n", raw].concat(), dialect.0, dialect.1, true, 3);
                let want: Vec<&[u8]> = r.iter().collect();
                let got: Vec<Vec<&[u8]>> = back.iter().map(|r| r.iter().collect()).collect();
                assert!(
                    got.len() == 1 && got[0] == want,
                    "{cfg:?}: the rejected record {:?} is written as {:?}, which reads back as {:?}",
                    want.iter().map(|f| String::from_utf8_lossy(f)).collect::<Vec<_>>(),
                    String::from_utf8_lossy(raw),
                    got
                );
            }
        }
    }

    /// Stores the first rows in a table declared as the import declares it
    /// and reads them back.
    fn store(&self, cfg: &Config, b: &Batch) {
        let n = self.columns.len();
        if b.rows == 0 || n == 0 || n > 2000 {
            return;
        }
        let c = rusqlite::Connection::open_in_memory().expect("in-memory database");
        let create = table::create_sql("t", &self.columns, None, self.strict_table);
        c.execute_batch(&create)
            .unwrap_or_else(|e| panic!("{cfg:?}: {create}: {e}"));
        let marks = vec!["?"; n].join(",");
        let mut ins = c
            .prepare(&format!("INSERT INTO t VALUES ({marks})"))
            .expect("insert");
        let batch = std::sync::Arc::new(clone_batch(b));
        let rows = (b.rows as usize).min(MAX_STORED_ROWS);
        for r in 0..rows {
            let row = RowRef {
                batch: std::sync::Arc::clone(&batch),
                row: r as u32,
                line: 0,
                record: 0,
            };
            use litelane::BulkRow;
            let vals = (0..n).map(|i| rusqlite::types::ToSqlOutput::Borrowed(row.value(i)));
            ins.execute(rusqlite::params_from_iter(vals))
                .unwrap_or_else(|e| panic!("{cfg:?}: SQLite refused row {r}: {e}"));
        }
        let mut q = c.prepare("SELECT * FROM t ORDER BY rowid").expect("select");
        let mut got = q.query([]).expect("query");
        let mut r = 0;
        while let Some(row) = got.next().expect("row") {
            for (i, col) in self.columns.iter().enumerate() {
                let v: rusqlite::types::Value = row.get(i).expect("value");
                let cell = b.cells[r * n + i];
                let aff = ColType::from_declared(col.ty.declared(self.strict_table));
                let same = match (cell, &v) {
                    (Cell::Null, rusqlite::types::Value::Null) => true,
                    (Cell::Int(x), rusqlite::types::Value::Integer(y)) => x == *y,
                    (Cell::Int(x), rusqlite::types::Value::Real(y)) => {
                        aff == ColType::Real && x as f64 == *y
                    }
                    (Cell::Real(x), rusqlite::types::Value::Real(y)) => {
                        x.to_bits() == y.to_bits() || (x == 0.0 && *y == 0.0)
                    }
                    (Cell::Real(x), rusqlite::types::Value::Integer(y)) => {
                        matches!(aff, ColType::Numeric | ColType::Integer) && *y as f64 == x
                    }
                    (Cell::Text(s, len), rusqlite::types::Value::Text(t)) => {
                        &b.text[s as usize..(s + len) as usize] == t.as_bytes()
                    }
                    _ => false,
                };
                assert!(
                    same,
                    "{cfg:?}: column {} ({:?}, declared {}): {:?} came back from SQLite as {v:?}",
                    col.name,
                    col.ty,
                    col.ty.declared(self.strict_table),
                    match cell {
                        Cell::Text(s, len) => format!(
                            "{:?}",
                            String::from_utf8_lossy(&b.text[s as usize..(s + len) as usize])
                        ),
                        c => format!("{c:?}"),
                    }
                );
            }
            r += 1;
        }
        assert_eq!(r, rows, "{cfg:?}: rows read back");
    }
}

/// A copy of the parts of `b` a [`RowRef`] reads.
fn clone_batch(b: &Batch) -> Batch {
    Batch {
        ncols: b.ncols,
        cells: b.cells.clone(),
        text: b.text.clone(),
        rows: b.rows,
        may_keep: b.may_keep.clone(),
        ..Batch::default()
    }
}

/// A REAL cell is the field's own parse, bit for bit, and its shortest
/// rendering parses back to it.
fn check_real(cfg: &Config, col: &ColumnPlan, f: &[u8], x: f64) {
    let shown = String::from_utf8_lossy(f);
    assert!(x.is_finite(), "{cfg:?}: {shown:?} stored as {x}");
    assert_eq!(
        parse_real(f).map(f64::to_bits),
        Some(x.to_bits()),
        "{cfg:?}: {:?} column: {shown:?} stored as the real {x:?}",
        col.ty
    );
    let parsed: f64 = shown.parse().expect("a real's field parses");
    assert_eq!(parsed.to_bits(), x.to_bits(), "{cfg:?}: {shown:?}");
    let back: f64 = format!("{x:?}").parse().expect("shortest form parses");
    assert_eq!(back.to_bits(), x.to_bits(), "{cfg:?}: {x:?}");
}

/// Text stored in `col`: valid UTF-8, and never what SQLite's affinity of
/// `col` would turn into a number; strict typed columns hold no text but
/// their own forms.
fn check_text(cfg: &Config, col: &ColumnPlan, t: &[u8]) {
    let shown = String::from_utf8_lossy(t);
    assert!(
        std::str::from_utf8(t).is_ok(),
        "{cfg:?}: invalid UTF-8 stored"
    );
    if col.ty.converts_text() {
        assert!(
            !looks_numeric_to_sqlite(t) && !is_big_integer(t),
            "{cfg:?}: {:?} column: {shown:?} stored as text SQLite turns into a number",
            col.ty
        );
    }
    if col.strict {
        let ok = match col.ty {
            ColType::Date | ColType::Timestamp => {
                crate::values::is_iso_date(t) || crate::values::is_iso_timestamp(t)
            }
            ColType::Integer | ColType::Real | ColType::Boolean => false,
            ColType::Text | ColType::Any | ColType::Numeric => true,
        };
        assert!(
            ok,
            "{cfg:?}: strict {:?} column holds the text {shown:?}",
            col.ty
        );
    }
}

/// An NDJSON value (`written`: its JSON text as written, when the line was
/// read for it) and the cell made of it.
fn check_json(
    cfg: &Config,
    col: &ColumnPlan,
    v: &Json,
    written: Option<&str>,
    cell: Cell,
    text: &[u8],
) {
    let ok = match (cell, v) {
        (Cell::Null, Json::Null) => true,
        (Cell::Int(x), Json::Bool(b)) => col.ty != ColType::Text && x == i64::from(*b),
        (Cell::Int(x), Json::Number(n)) => {
            n.as_i64() == Some(x) && !written.is_some_and(|w| is_big_integer(w.as_bytes()))
        }
        (Cell::Real(x), Json::Number(n)) => {
            x.is_finite()
                && n.as_f64().map(f64::to_bits) == Some(x.to_bits())
                && format!("{x:?}").parse::<f64>().map(f64::to_bits) == Ok(x.to_bits())
        }
        (Cell::Text(s, len), v) => {
            let t = &text[s as usize..(s + len) as usize];
            check_text(cfg, col, t);
            let as_json = v.to_string();
            match v {
                Json::String(s) => t == s.as_bytes(),
                Json::Bool(b) => {
                    col.ty == ColType::Text && t == if *b { &b"true"[..] } else { b"false" }
                }
                Json::Null => false,
                _ => t == as_json.as_bytes() || written.is_some_and(|w| t == w.as_bytes()),
            }
        }
        _ => false,
    };
    assert!(
        ok,
        "{cfg:?}: {:?} column {}: {v} became {cell:?}",
        col.ty, col.name
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The committed seed corpus of the fuzz target.
    fn corpus() -> Vec<(String, Vec<u8>)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/import");
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| {
                let p = e.unwrap().path();
                (p.display().to_string(), std::fs::read(&p).unwrap())
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_seed_corpus_holds_every_invariant_in_every_configuration() {
        let corpus = corpus();
        assert!(corpus.len() >= 30, "{} seeds", corpus.len());
        let mut rows = 0;
        let mut rejects = 0;
        let mut errors = 0;
        for (name, data) in &corpus {
            // The seed's own configuration, then every mode and flag set.
            let file = data.get(2..).unwrap_or(&[]);
            for cfg in std::iter::once(None).chain((0..=255u8).step_by(3).map(Some)) {
                let input = match cfg {
                    None => data.clone(),
                    Some(c) => [&[c, c.wrapping_mul(7)][..], file].concat(),
                };
                let o = std::panic::catch_unwind(|| check(&input))
                    .unwrap_or_else(|_| panic!("{name} with configuration {cfg:?}"));
                rows += o.rows;
                rejects += o.rejects;
                errors += u64::from(o.error.is_some());
            }
        }
        // The corpus reaches every outcome.
        assert!(
            rows > 0 && rejects > 0 && errors > 0,
            "{rows} {rejects} {errors}"
        );
    }

    #[test]
    fn every_record_is_a_row_or_a_reject_on_known_inputs() {
        // (configuration, file) → (records, rows, rejects, error?)
        type Case<'a> = (&'a [u8], &'a [u8], (u64, u64, u64, bool));
        let cases: &[Case] = &[
            (&[0x02, 0], b"a,b\n1,2\n3\n", (2, 1, 1, false)),
            // The quote opens in the sample: the import fails before it starts.
            (&[0x02, 0], b"a,b\n1,2\n\"3,4\n", (0, 0, 0, true)),
            // `b` is in the sample, so it is a column.
            (
                &[0x03, 0],
                b"{\"a\":1}\n[1]\n\n{\"b\":2}\n",
                (3, 2, 1, false),
            ),
            (&[0x00, 0], b"id,x\n1,2\n2,x\n", (2, 2, 0, false)),
            (&[0x52, 0], b"a\n1\nx\n", (2, 1, 1, false)),
        ];
        for (cfg, file, want) in cases {
            let o = check(&[*cfg, *file].concat());
            assert_eq!(
                (o.records, o.rows, o.rejects, o.error.is_some()),
                *want,
                "{:?} {:?}: {:?}",
                cfg,
                String::from_utf8_lossy(file),
                o
            );
        }
    }

    /// Inputs that failed an invariant once (each is also in the corpus).
    #[test]
    fn regressions() {
        let seed = |name: &str| {
            std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../fuzz/corpus/import")
                    .join(name),
            )
            .unwrap()
        };
        // `--type a=ANY` in a new table declared the column `ANY`: NUMERIC
        // affinity outside a STRICT table, so `00123` became 123 and a big
        // integer a REAL. Now declared BLOB: every value as written.
        let o = check(&seed("regress-any-column-numeric-affinity"));
        assert_eq!((o.rows, o.rejects, o.error), (3, 0, None));
        // NDJSON into a strict BOOLEAN column took 2.5 and "x" (a STRICT
        // table then refused the row); now rejected like CSV.
        let o = check(&seed("regress-ndjson-strict-boolean"));
        assert_eq!((o.rows, o.rejects, o.error), (2, 2, None));
        // A sniffed space-padded number column made TEXT (`--type`): its
        // values were stored without their spaces.
        let o = check(&seed("regress-trimmed-text-column"));
        assert_eq!((o.rows, o.rejects, o.error), (2, 0, None));
        // A rejected record of one empty quoted field (`""`) was written to
        // the rejects as an empty line, which reads back as no record.
        let o = check(&seed("regress-reject-of-one-empty-field"));
        assert!(o.rejects > 0, "{o:?}");
        // A byte-order mark at the start of a rejected record (the checker
        // must not read it as the rejects file's own).
        let o = check(&seed("regress-bom-at-line-start"));
        assert!(o.rejects > 0, "{o:?}");
        // Two elements of a JSON array on one line were taken for a line
        // number going backwards.
        let o = check(&seed("regress-json-array-elements-share-a-line"));
        assert!(o.error.is_some(), "{o:?}");
        let o = check(&seed("json-array-basic"));
        assert_eq!((o.rows + o.rejects, o.error.as_deref()), (3, None), "{o:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_bytes_hold_every_invariant(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            check(&data);
        }

        #[test]
        fn random_csv_like_text_holds_every_invariant(
            cfg in any::<u8>(),
            seed in any::<u8>(),
            text in "([a-c0-9 ,;|\t\"\r\n.eE+-]|NA|true|2024-01-05|007|1e309){0,60}"
        ) {
            check(&[&[cfg, seed][..], text.as_bytes()].concat());
        }
    }
}
