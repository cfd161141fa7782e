//! The CSV/TSV sniffer: from samples of a file, the dialect (delimiter and
//! quote), the preamble lines to skip, whether the first row is a header,
//! an index column (R's row names), each column's type and the null tokens.
//! The functions here are pure (bytes in, a [`SniffPlan`] out) except
//! [`sniff_input`] and [`read_regions`], which take the samples. The plan is
//! what `litelane sniff` prints and what `litelane import --plan` reads back.
//! See `docs/import.md`, "Sniffing".

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::read::dialect::{Sniffed, INDEX_COLUMN};
use crate::read::source::{self, Format};
use crate::values::{
    is_iso_date, is_iso_timestamp, parse_bool, parse_int, parse_real, trim_spaces, ColType,
    Inference,
};

/// Delimiters the sniffer chooses among, in order of preference on a tie.
pub const DELIMITERS: [u8; 4] = [b',', b';', b'|', b'\t'];
/// Quote characters the sniffer chooses among. Only `"`: trying `'` too
/// (as DuckDB does) would read a file whose `"` is never closed as
/// `'`-quoted instead of failing on it (see the hostile-input table); a
/// plan can name another quote.
pub const QUOTES: [u8; 1] = [b'"'];
/// Tokens recognised as "missing" besides the empty field.
pub const NULL_CANDIDATES: [&str; 5] = ["NA", "N/A", "NULL", "null", "#N/A"];
/// Bytes read from the start of the input (decoded) to sniff: 4 MiB.
pub const HEAD_BYTES: usize = 4 << 20;
/// Bytes of the head used to choose the dialect: 64 KiB.
pub const DIALECT_BYTES: usize = 64 << 10;
/// Bytes read at each further place of a seekable file (middle, end):
/// 256 KiB.
pub const REGION_BYTES: usize = 256 << 10;
/// Data records of the head that the types are inferred from (as many as
/// the import reads ahead), plus every whole record of the regions.
pub const TYPE_RECORDS: usize = super::SAMPLE_RECORDS;
/// Preamble records the sniffer looks past, at most.
pub const MAX_SKIP: usize = 64;

/// One record's fields (one buffer per record: cheap to keep thousands).
pub type Rec = csv::ByteRecord;

/// A sample of bytes from inside the file.
#[derive(Debug, Clone)]
pub struct Region {
    /// Where it was taken ("middle", "end").
    pub place: String,
    /// Bytes from the first record start after the sampled offset.
    pub bytes: Vec<u8>,
    /// It reaches the end of the file (its last record is whole).
    pub complete: bool,
}

/// What the user fixed on the command line; the rest is sniffed.
#[derive(Debug, Clone)]
pub struct Options {
    /// CSV or TSV (TSV: tab, no quoting, not sniffed).
    pub format: Format,
    /// `--delimiter`.
    pub delimiter: Option<u8>,
    /// `--header` (`Some(true)`) or `--no-header` (`Some(false)`).
    pub header: Option<bool>,
    /// `--null` tokens: then exactly these, in every column.
    pub nulls: Option<Vec<String>>,
    /// `--types text`: every column TEXT, no null token but the empty one.
    pub types_text: bool,
}

/// One column of a [`SniffPlan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SniffColumn {
    /// The column's name (header field, `row_names`, or `cN`).
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: ColType,
    /// Its null tokens when they differ from the plan's `nulls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nulls: Option<Vec<String>>,
    /// Space-padded numbers: stored as their number, without the spaces.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trim: bool,
    /// Null-looking tokens seen in the sample and how often (informative).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens_seen: BTreeMap<String, u64>,
}

/// The plan `litelane sniff` prints and `import --plan` reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SniffPlan {
    /// `csv` or `tsv`.
    pub format: Format,
    /// The field delimiter.
    pub delimiter: char,
    /// The quote character, or null for none.
    pub quote: Option<char>,
    /// The first record after `skip_rows` is a header.
    pub header: bool,
    /// Records before the header (or first data record) that are skipped.
    #[serde(default)]
    pub skip_rows: u64,
    /// The header is one field short: the first field of every record is a
    /// row name, imported as `row_names`.
    #[serde(default)]
    pub index_column: bool,
    /// The header ends with a delimiter the records lack (`name,age,`): it
    /// has one more field, empty, which names no column.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub header_trailing_delimiter: bool,
    /// The records end with a delimiter the header lacks (`a,b` above
    /// `1,2,`): their last field, empty, is a column the header does not
    /// name (named `cN`), not a row name at the start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub records_trailing_delimiter: bool,
    /// Why the first record was taken for a header, or for data (in words;
    /// informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_reason: Option<String>,
    /// Null tokens of every column without its own `nulls`.
    pub nulls: Vec<String>,
    /// The columns, in file order.
    pub columns: Vec<SniffColumn>,
    /// What the sniffer noticed and decided, in words (informative).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Records the types were inferred from, and where they came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<Sampled>,
}

/// Where the sample came from (informative).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampled {
    /// Data records the types were inferred from.
    pub records: u64,
    /// The places they were taken from: `start`, `middle`, `end`.
    pub places: Vec<String>,
}

impl SniffPlan {
    /// The dialect part, as the import plan keeps it.
    pub fn sniffed(&self) -> Sniffed {
        Sniffed {
            delimiter: self.delimiter,
            quote: self.quote,
            skip_rows: self.skip_rows,
            index_column: self.index_column,
            header_trailing_delimiter: self.header_trailing_delimiter,
            records_trailing_delimiter: self.records_trailing_delimiter,
            header_reason: self.header_reason.clone(),
            column_nulls: self.columns.iter().map(|c| c.nulls.clone()).collect(),
            trim: self.columns.iter().map(|c| c.trim).collect(),
        }
    }

    /// The fields the header record has: one per column, less the row-name
    /// column, plus an empty one after a trailing delimiter.
    pub fn header_fields(&self) -> usize {
        self.columns.len()
            - usize::from(self.index_column)
            - usize::from(self.records_trailing_delimiter)
            + usize::from(self.header_trailing_delimiter)
    }

    /// Checks a plan read from a file; the error names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.format == Format::Ndjson {
            return Err("\"format\" must be csv or tsv (NDJSON needs no plan)".into());
        }
        let ok = |c: char| c.is_ascii() && !matches!(c, '\n' | '\r' | '\0');
        if !ok(self.delimiter) {
            return Err(format!(
                "\"delimiter\" {:?} must be one ASCII character other than a line break",
                self.delimiter
            ));
        }
        if let Some(q) = self.quote {
            if !ok(q) || q == self.delimiter {
                return Err(format!(
                    "\"quote\" {q:?} must be one ASCII character, not a line break or the \
                     delimiter"
                ));
            }
        }
        if self.columns.is_empty() {
            return Err("\"columns\" is empty".into());
        }
        if self.index_column && !self.header {
            return Err("\"index_column\" needs \"header\": true".into());
        }
        let layouts = [
            self.index_column,
            self.header_trailing_delimiter,
            self.records_trailing_delimiter,
        ];
        if layouts.iter().filter(|&&b| b).count() > 1 {
            return Err(
                "at most one of \"index_column\", \"header_trailing_delimiter\" and \
                        \"records_trailing_delimiter\" may be true"
                    .into(),
            );
        }
        if (self.header_trailing_delimiter || self.records_trailing_delimiter) && !self.header {
            return Err(
                "a trailing delimiter of the header or the records needs \"header\": true".into(),
            );
        }
        Ok(())
    }
}

/// Splits `bytes` into records with `delimiter` and `quote`, as the import
/// reads them (blank lines skipped; LF, CRLF or CR ends a line). When
/// `complete` is false the last record may be cut and is dropped. At most
/// `limit` records.
pub fn records(
    bytes: &[u8],
    delimiter: u8,
    quote: Option<u8>,
    complete: bool,
    limit: usize,
) -> Vec<Rec> {
    let mut rdr = crate::read::records::csv_reader(delimiter, quote).from_reader(bytes);
    let mut out = Vec::new();
    let mut rec = csv::ByteRecord::new();
    let mut ended = false;
    while out.len() < limit {
        match rdr.read_byte_record(&mut rec) {
            Ok(true) => out.push(rec.clone()),
            Ok(false) => {
                ended = true;
                break;
            }
            Err(_) => break,
        }
    }
    if ended && !complete {
        out.pop();
    }
    out
}

/// The most common field count among `recs` (the larger on a tie), and how
/// many records have it.
fn modal(recs: &[Rec]) -> (usize, usize) {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for r in recs {
        *counts.entry(r.len()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(n, c)| (c, n))
        .unwrap_or((0, 0))
}

/// Chooses the delimiter and quote: the candidate whose records most often
/// share one field count above 1 (then the most fields, then the earlier
/// candidate). A file with one column is read with `,` and `"`.
pub fn choose_dialect(head: &[u8], complete: bool) -> (u8, Option<u8>) {
    let cut = head.len() > DIALECT_BYTES;
    let bytes = &head[..head.len().min(DIALECT_BYTES)];
    let mut best = ((0usize, 0usize), (b',', Some(b'"')));
    for d in DELIMITERS {
        for q in QUOTES {
            let recs = records(bytes, d, Some(q), complete && !cut, 2000);
            let (fields, n) = modal(&recs);
            let score = if fields > 1 { (n, fields) } else { (0, 0) };
            if score > best.0 {
                best = (score, (d, Some(q)));
            }
        }
    }
    best.1
}

/// What the sample showed about one column: its values' types (the
/// import's one inferer, [`Inference`]) and the sniffer's null tokens met.
#[derive(Debug, Clone, Default)]
pub struct ColumnStats {
    inference: Inference,
    tokens: BTreeMap<String, u64>,
}

impl ColumnStats {
    /// Notes one field. `nulls`: the user's tokens (then nothing else is
    /// null), or `None` for the sniffer's (the empty field, and
    /// [`NULL_CANDIDATES`] counted apart).
    pub fn observe(&mut self, f: &[u8], nulls: Option<&[String]>) {
        match nulls {
            Some(ns) => {
                if ns.iter().any(|n| n.as_bytes() == f) {
                    return;
                }
            }
            None => {
                if f.is_empty() {
                    return;
                }
                if let Some(t) = NULL_CANDIDATES.iter().find(|t| t.as_bytes() == f) {
                    *self.tokens.entry((*t).to_string()).or_default() += 1;
                    return;
                }
            }
        }
        self.inference.observe_text(f);
    }

    /// The column's type: BOOLEAN, INTEGER, REAL, DATE, TIMESTAMP when every
    /// non-null value is one, else TEXT (also for a column with no value).
    pub fn decide(&self) -> ColType {
        self.inference.decide()
    }

    /// The value `f` could be data of a column of type `ty` (for telling a
    /// header from data).
    fn fits(ty: ColType, f: &[u8], nulls: Option<&[String]>) -> bool {
        let null = match nulls {
            Some(ns) => ns.iter().any(|n| n.as_bytes() == f),
            None => f.is_empty() || NULL_CANDIDATES.iter().any(|t| t.as_bytes() == f),
        };
        let t = trim_spaces(f);
        null || match ty {
            ColType::Boolean => parse_bool(f).is_some(),
            // Any number fits a numeric column here: `-0.55` above a
            // column of integers is data, not a header (names are not
            // numbers).
            ColType::Integer | ColType::Real => parse_real(t).is_some() || parse_int(t).is_some(),
            ColType::Date => is_iso_date(f),
            ColType::Timestamp => is_iso_date(f) || is_iso_timestamp(f),
            _ => true,
        }
    }
}

/// Types of the columns of `rows` (only rows with `fields` fields count).
fn infer<'a>(
    rows: impl Iterator<Item = &'a Rec>,
    fields: usize,
    nulls: Option<&[String]>,
) -> (Vec<ColumnStats>, u64) {
    let mut stats = vec![ColumnStats::default(); fields];
    let mut n = 0;
    for r in rows.filter(|r| r.len() == fields) {
        n += 1;
        for (s, f) in stats.iter_mut().zip(r.iter()) {
            s.observe(f, nulls);
        }
    }
    (stats, n)
}

/// True when `first` looks like a header above `rows`: some column whose
/// other values all share a type other than TEXT has a value in `first`
/// that does not fit it (DuckDB's rule). When every column is TEXT, there
/// is no telling, and a header is assumed.
fn looks_like_header(first: &Rec, rows: &[Rec], nulls: Option<&[String]>) -> bool {
    let (stats, n) = infer(rows.iter().take(TYPE_RECORDS), first.len(), nulls);
    if n == 0 {
        return true;
    }
    let types: Vec<ColType> = stats.iter().map(ColumnStats::decide).collect();
    if types.iter().all(|t| *t == ColType::Text) {
        return true;
    }
    first
        .iter()
        .zip(&types)
        .any(|(f, t)| *t != ColType::Text && !ColumnStats::fits(*t, f, nulls))
}

/// Which fields of the record starting at byte `start` of `bytes` are
/// quoted (blank lines before it are skipped). The csv reader does not keep
/// this; a header written as quoted strings above unquoted numbers tells a
/// header apart from data.
fn quoting(bytes: &[u8], start: usize, delimiter: u8, quote: u8) -> Vec<bool> {
    let mut i = start;
    while i < bytes.len() && matches!(bytes[i], b'\n' | b'\r') {
        i += 1;
    }
    let mut out = Vec::new();
    loop {
        let quoted = bytes.get(i) == Some(&quote);
        if quoted {
            i += 1;
            while i < bytes.len() {
                if bytes[i] == quote {
                    if bytes.get(i + 1) == Some(&quote) {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
        }
        while i < bytes.len() && !matches!(bytes[i], b'\n' | b'\r') && bytes[i] != delimiter {
            i += 1;
        }
        out.push(quoted);
        if bytes.get(i) == Some(&delimiter) {
            i += 1;
        } else {
            return out;
        }
    }
}

/// A value a data field holds and a name does not: a number, a date, a
/// boolean.
fn is_value(f: &[u8]) -> bool {
    let t = trim_spaces(f);
    parse_real(t).is_some()
        || parse_int(t).is_some()
        || parse_bool(f).is_some()
        || is_iso_date(f)
        || is_iso_timestamp(f)
}

/// Whether `first` is a header above `rows`, and why (in words, for the
/// plan's notes and the import's summary). `quoted`: which fields of
/// `first`, and of the first rows, were quoted (`None`: no quoting). The
/// signals, in order:
///
/// 1. a record alone is a header unless every value in it is a number,
///    date or boolean (a file of one numeric line is data);
/// 2. a value that does not fit its column's type below (a name above
///    numbers, dates or booleans): header (DuckDB's rule);
/// 3. an empty first field above a column with no empty field, the other
///    fields filled: a header over row names (R's `write.csv`), unless they
///    are unquoted values like the rows below (then a row with a missing
///    first value);
/// 4. every field quoted above a numeric column written unquoted: names
///    written as strings (`"1940","1945"` above numbers);
/// 5. every column text: nothing tells, a header is assumed;
/// 6. otherwise data.
fn decide_header(
    first: &Rec,
    rows: &[Rec],
    nulls: Option<&[String]>,
    quoted: Option<(&[bool], &[Vec<bool>])>,
) -> (bool, String) {
    let (stats, n) = infer(rows.iter().take(TYPE_RECORDS), first.len(), nulls);
    if n == 0 {
        return only_record(first);
    }
    let types: Vec<ColType> = stats.iter().map(ColumnStats::decide).collect();
    if let Some((f, t)) = first
        .iter()
        .zip(&types)
        .find(|(f, t)| **t != ColType::Text && !ColumnStats::fits(**t, f, nulls))
    {
        return (
            true,
            format!(
                "the first record does not fit the types below it ({:?} above {} values)",
                String::from_utf8_lossy(f),
                t.sql()
            ),
        );
    }
    let same = |r: &&Rec| r.len() == first.len();
    let quoted_names = quoted.is_some_and(|q| quoted_names(first, rows, &types, q));
    if first.len() > 1
        && first[0].is_empty()
        && first.iter().skip(1).all(|f| !f.is_empty())
        && rows
            .iter()
            .take(TYPE_RECORDS)
            .filter(same)
            .all(|r| !r[0].is_empty())
        && (quoted_names || !first.iter().skip(1).all(is_value))
    {
        return (
            true,
            "the first record's first field is empty above a column with no empty field, \
             the others named: a header over row names (as R's write.csv writes it)"
                .into(),
        );
    }
    if quoted_names {
        return (
            true,
            "the first record is quoted above numbers written without quotes: names written \
             as strings"
                .into(),
        );
    }
    if types.iter().all(|t| *t == ColType::Text) {
        return (
            true,
            "every column is text, so nothing tells a header from data: a header is assumed \
             (--no-header if it is data)"
                .into(),
        );
    }
    (
        false,
        "the first record's values have the same types as the rest, so it is data; columns \
         are named c1, c2, ... (--header if it names them)"
            .into(),
    )
}

/// Header or data when `first` is the only record: data when every field
/// it fills is a value (a number, date, boolean), else a header.
fn only_record(first: &Rec) -> (bool, String) {
    let values = first.iter().filter(|f| !f.is_empty()).collect::<Vec<_>>();
    if !values.is_empty() && values.iter().all(|f| is_value(f)) {
        return (
            false,
            "the only record holds numbers (or dates, booleans), not names: it is data".into(),
        );
    }
    (
        true,
        "the only record holds names: a header with no rows below it".into(),
    )
}

/// Names written as quoted strings above numbers written bare: every field
/// of `first` filled is quoted (`q`, per field), and a numeric column
/// (`types`) has a bare value below (`rq`: which fields of `rows` were
/// quoted).
fn quoted_names(
    first: &Rec,
    rows: &[Rec],
    types: &[ColType],
    (q, rq): (&[bool], &[Vec<bool>]),
) -> bool {
    let all_quoted = first
        .iter()
        .zip(q)
        .all(|(f, &quoted)| quoted || f.is_empty());
    let bare_number_below = types.iter().enumerate().any(|(j, t)| {
        matches!(t, ColType::Integer | ColType::Real)
            && rows
                .iter()
                .zip(rq)
                .filter(|(r, _)| r.len() == first.len())
                .any(|(r, rq)| !r[j].is_empty() && !rq.get(j).copied().unwrap_or(true))
    });
    all_quoted && first.iter().any(|f| !f.is_empty()) && bare_number_below
}

/// The records without their first field (the row names), for checking a
/// short header against the columns it names.
fn shifted(rows: &[Rec]) -> Vec<Rec> {
    rows.iter()
        .take(2000)
        .filter(|r| !r.is_empty())
        .map(|r| r.iter().skip(1).collect())
        .collect()
}

/// Sniffs the plan from the start of the input (`head`, `complete` when it
/// is the whole input) and further `regions` of it: the dialect, where the
/// records start, the header, then each column's type from the sample.
pub fn sniff(
    head: &[u8],
    complete: bool,
    regions: &[Region],
    opts: &Options,
) -> Result<SniffPlan, String> {
    let (delimiter, quote) = dialect(head, complete, opts);
    let recs = records(
        head,
        delimiter,
        quote,
        complete,
        TYPE_RECORDS + MAX_SKIP + 1,
    );
    if recs.is_empty() {
        return Err("no record to sniff: the input is empty".into());
    }
    let user_nulls = opts.nulls.as_deref();
    let mut notes = Vec::new();
    let (fields, _) = modal(&recs[..recs.len().min(2000)]);
    let start = find_start(&recs, fields, opts.header, user_nulls);
    notes.extend(start.skip_note(opts.header));
    let first = start.first_record(&recs, fields);
    let quoted = quote.map(|q| quotings(head, &recs[start.at..], delimiter, q));
    let (header, header_reason) = match opts.header {
        Some(true) => (true, "--header".to_string()),
        Some(false) => (false, "--no-header".to_string()),
        None => start.header_shape(fields).unwrap_or_else(|| {
            decide_header(
                &first,
                &recs[start.at + 1..],
                user_nulls,
                quoted.as_ref().map(|(f, r)| (f.as_slice(), r.as_slice())),
            )
        }),
    };
    notes.extend(start.index_note(fields));
    if opts.header.is_none() {
        notes.push(format!(
            "{}: {header_reason}",
            if header { "header" } else { "no header" }
        ));
    }
    let data_from = if header { start.at + 1 } else { start.at };
    let (region_recs, places) = region_records(regions, delimiter, quote);
    let data = &recs[data_from.min(recs.len())..];
    let head_rows = data.iter().take(TYPE_RECORDS);
    let (stats, n) = infer(head_rows.chain(region_recs.iter()), fields, user_nulls);
    let names = column_names(header.then_some(&first), start.index_column, fields);
    let columns = names
        .into_iter()
        .zip(&stats)
        .map(|(name, s)| sniff_column(name, s, opts, &mut notes))
        .collect();
    Ok(SniffPlan {
        format: if opts.format == Format::Tsv {
            Format::Tsv
        } else {
            Format::Csv
        },
        delimiter: delimiter as char,
        quote: quote.map(|q| q as char),
        header,
        skip_rows: start.at as u64,
        index_column: start.index_column,
        header_trailing_delimiter: start.trailing,
        records_trailing_delimiter: start.records_trailing,
        header_reason: opts.header.is_none().then_some(header_reason),
        nulls: opts.nulls.clone().unwrap_or_else(|| vec![String::new()]),
        columns,
        notes,
        sampled: Some(Sampled { records: n, places }),
    })
}

/// Which fields were quoted: of the first of `recs` and of up to 200
/// records after it (read again from `head`, where each record starts).
fn quotings(head: &[u8], recs: &[Rec], delimiter: u8, q: u8) -> (Vec<bool>, Vec<Vec<bool>>) {
    let at = |r: &Rec| r.position().map_or(usize::MAX, |p| p.byte() as usize);
    let of = |r: &Rec| quoting(head, at(r), delimiter, q);
    let rows: Vec<Vec<bool>> = recs[1..].iter().take(200).map(of).collect();
    (of(&recs[0]), rows)
}

/// The delimiter and quote: TSV's tab and no quote, or the user's
/// delimiter, or what the head shows.
fn dialect(head: &[u8], complete: bool, opts: &Options) -> (u8, Option<u8>) {
    match (opts.format, opts.delimiter) {
        (Format::Tsv, d) => (d.unwrap_or(b'\t'), None),
        (_, Some(d)) => {
            let (_, q) = choose_dialect(head, complete);
            (d, q)
        }
        _ => choose_dialect(head, complete),
    }
}

/// Where the header (or the data) starts, and the header's shape.
struct Start {
    /// Records before it (a preamble).
    at: usize,
    /// The header has one field fewer than the records: row names.
    index_column: bool,
    /// The header ends with a delimiter the records lack.
    trailing: bool,
    /// The records end with a delimiter (an always-empty last field) the
    /// header lacks.
    records_trailing: bool,
}

/// Finds the first record with the modal field count `fields` (or one
/// fewer, for a header over row names; or one more, empty, for a header
/// that ends with a delimiter), skipping at most `MAX_SKIP` records before
/// it; none found: the input starts at once. `header` is the user's
/// `--header`/`--no-header`.
fn find_start(
    recs: &[Rec],
    fields: usize,
    header: Option<bool>,
    user_nulls: Option<&[String]>,
) -> Start {
    let mut start = Start {
        at: 0,
        index_column: false,
        trailing: false,
        records_trailing: false,
    };
    let limit = MAX_SKIP.min(recs.len());
    while start.at < limit {
        let at = start.at;
        let n = recs[at].len();
        if n == fields {
            return start;
        }
        let maybe_header =
            header != Some(false) && recs.get(at + 1).is_some_and(|r| r.len() == fields);
        if maybe_header {
            if records_end_with_delimiter(recs, at, fields, user_nulls) {
                start.records_trailing = true;
                return start;
            }
            if header_ends_with_delimiter(recs, at, fields, user_nulls) {
                start.trailing = true;
                return start;
            }
            if n + 1 == fields
                && !looks_like_header(&recs[at + 1], &recs[at + 2..], user_nulls)
                && looks_like_header(&recs[at], &shifted(&recs[at + 1..]), user_nulls)
            {
                start.index_column = fields > 1;
                return start;
            }
        }
        start.at += 1;
    }
    start.at = 0;
    start
}

/// Every record of the usual width after `recs[at]` ends with an empty
/// field, and `recs[at]` (one field short) is a header once given that
/// field: the records end with a delimiter the header lacks (not row
/// names, which would shift every value one column to the right).
fn records_end_with_delimiter(
    recs: &[Rec],
    at: usize,
    fields: usize,
    user_nulls: Option<&[String]>,
) -> bool {
    if recs[at].len() + 1 != fields
        || fields <= 1
        || !recs[at + 1..]
            .iter()
            .take(2000)
            .filter(|r| r.len() == fields)
            .all(|r| r[fields - 1].is_empty())
    {
        return false;
    }
    let mut padded = recs[at].clone();
    padded.push_field(b"");
    looks_like_header(&padded, &recs[at + 1..], user_nulls)
}

/// `recs[at]` has one field more than the records, empty, and is a header
/// without it: a header that ends with a delimiter the records lack.
fn header_ends_with_delimiter(
    recs: &[Rec],
    at: usize,
    fields: usize,
    user_nulls: Option<&[String]>,
) -> bool {
    let n = recs[at].len();
    if n != fields + 1 || fields == 0 || !recs[at].get(n - 1).is_some_and(|f| f.is_empty()) {
        return false;
    }
    let cut: Rec = recs[at].iter().take(fields).collect();
    looks_like_header(&cut, &recs[at + 1..], user_nulls)
}

impl Start {
    /// The first record as the header would be: without a trailing empty
    /// field, or with the one the records have.
    fn first_record(&self, recs: &[Rec], fields: usize) -> Rec {
        if self.trailing {
            recs[self.at].iter().take(fields).collect()
        } else if self.records_trailing {
            let mut r = recs[self.at].clone();
            r.push_field(b"");
            r
        } else {
            recs[self.at].clone()
        }
    }

    /// The note saying how many records are skipped, when some are
    /// (`header`: the user's `--header`/`--no-header`).
    fn skip_note(&self, header: Option<bool>) -> Option<String> {
        (self.at > 0).then(|| {
            format!(
                "skipping {} record(s) before the {} (they have a different number of fields)",
                self.at,
                if header == Some(false) {
                    "data"
                } else {
                    "header"
                }
            )
        })
    }

    /// The note saying the first field is a row name, when it is.
    fn index_note(&self, fields: usize) -> Option<String> {
        self.index_column.then(|| {
            format!(
                "the header has {} fields and the records {fields}: the first field of each \
                 record is a row name, imported as column {INDEX_COLUMN:?}",
                fields - 1
            )
        })
    }

    /// A header told by the first record's shape alone, and why; `None`
    /// when its values must decide.
    fn header_shape(&self, fields: usize) -> Option<(bool, String)> {
        if self.index_column {
            Some((
                true,
                "the first record has one field fewer than the rest: a header over row names"
                    .to_string(),
            ))
        } else if self.trailing {
            Some((
                true,
                "the first record ends with a delimiter the rest lack: a header".to_string(),
            ))
        } else if self.records_trailing {
            Some((
                true,
                format!(
                    "the first record has one field fewer than the rest, whose last field is \
                     always empty (a delimiter at the end of each line): a header; the last \
                     column is named c{fields}"
                ),
            ))
        } else {
            None
        }
    }
}

/// The records of the further regions, and the places sampled (`start`
/// and each region that held a record).
fn region_records(regions: &[Region], delimiter: u8, quote: Option<u8>) -> (Vec<Rec>, Vec<String>) {
    let mut recs = Vec::new();
    let mut places = vec!["start".to_string()];
    for r in regions {
        let rr = records(&r.bytes, delimiter, quote, r.complete, usize::MAX);
        if !rr.is_empty() {
            places.push(r.place.clone());
        }
        recs.extend(rr);
    }
    (recs, places)
}

/// The columns' names: the header's (after the row names' column), or
/// c1, c2, ... without one; made usable as SQL names.
fn column_names(header: Option<&Rec>, index_column: bool, fields: usize) -> Vec<String> {
    let names: Vec<String> = match header {
        Some(first) => {
            let mut h: Vec<String> = first
                .iter()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect();
            if index_column {
                h.insert(0, INDEX_COLUMN.to_string());
            }
            h
        }
        None => (1..=fields).map(|i| format!("c{i}")).collect(),
    };
    crate::plan::table::column_names(Some(names), fields)
}

/// One column of the plan from what the sample showed of it (`s`): its
/// type, the null tokens it stores as NULL, whether numbers are trimmed;
/// what was decided is said in `notes`.
fn sniff_column(
    name: String,
    s: &ColumnStats,
    opts: &Options,
    notes: &mut Vec<String>,
) -> SniffColumn {
    let ty = if opts.types_text {
        ColType::Text
    } else {
        s.decide()
    };
    let mut nulls = None;
    if opts.nulls.is_none() && !s.tokens.is_empty() {
        let toks = s
            .tokens
            .keys()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        if ty != ColType::Text {
            let mut ns = vec![String::new()];
            ns.extend(s.tokens.keys().cloned());
            notes.push(format!(
                "column {name:?}: {toks} stored as NULL (every other value is {})",
                ty.sql()
            ));
            nulls = Some(ns);
        } else {
            notes.push(format!(
                "column {name:?}: {toks} kept as text (the column holds other text, and NA is \
                 also a code, e.g. Namibia); give --null to store NULL"
            ));
        }
    }
    let trim = s.inference.padded() > 0 && matches!(ty, ColType::Integer | ColType::Real);
    if trim {
        notes.push(format!(
            "column {name:?}: {} space-padded number(s), stored as the number without the \
             spaces",
            s.inference.padded()
        ));
    }
    SniffColumn {
        name,
        ty,
        nulls,
        trim,
        tokens_seen: s.tokens.clone(),
    }
}

/// A reader that fails with the error met while sniffing.
struct Failed(Option<std::io::Error>);

impl Read for Failed {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Err(std::io::Error::other("the input could not be read")),
        }
    }
}

impl BufRead for Failed {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Err(std::io::Error::other("the input could not be read")),
        }
    }
    fn consume(&mut self, _: usize) {}
}

/// Samples the middle and the end of a plain (uncompressed, UTF-8) file
/// longer than `head_len` bytes, each aligned to the line start after the
/// sampled offset. Nothing for stdin, compressed or UTF-16 input.
pub fn read_regions(path: &str, head_len: usize) -> Vec<Region> {
    if path == "-" {
        return Vec::new();
    }
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let Ok(size) = f.metadata().map(|m| m.len()) else {
        return Vec::new();
    };
    let mut magic = [0u8; 4];
    if f.read_exact(&mut magic).is_err()
        || magic.starts_with(&[0x1f, 0x8b])
        || magic == [0x28, 0xb5, 0x2f, 0xfd]
        || magic.starts_with(&[0xff, 0xfe])
        || magic.starts_with(&[0xfe, 0xff])
    {
        return Vec::new();
    }
    let head_len = head_len as u64;
    let mut out = Vec::new();
    let end_at = size.saturating_sub(REGION_BYTES as u64);
    for (place, at) in [("middle", size / 2), ("end", end_at)] {
        if at <= head_len
            || out
                .iter()
                .any(|r: &(String, u64)| r.1 + REGION_BYTES as u64 > at)
        {
            continue;
        }
        out.push((place.to_string(), at));
    }
    out.into_iter()
        .filter_map(|(place, at)| {
            f.seek(SeekFrom::Start(at)).ok()?;
            let mut buf = Vec::new();
            (&mut f)
                .take(REGION_BYTES as u64)
                .read_to_end(&mut buf)
                .ok()?;
            let complete = at + buf.len() as u64 >= size;
            // Align to a record start: after the first line break.
            let nl = memchr::memchr2(b'\n', b'\r', &buf)?;
            let mut s = nl + 1;
            if buf[nl] == b'\r' && buf.get(s) == Some(&b'\n') {
                s += 1;
            }
            Some(Region {
                place,
                bytes: buf[s..].to_vec(),
                complete,
            })
        })
        .collect()
}

/// The null tokens `--null` flags give: none (the defaults apply: the empty
/// field, and the sniffer's per-column tokens) when no flag is given; else
/// the empty field (unless `no_defaults`, `--no-default-nulls`) followed by
/// each flag's token, once each. Giving the result again returns it as it
/// is.
pub fn null_tokens(flags: &[String], no_defaults: bool) -> Vec<String> {
    if flags.is_empty() {
        return Vec::new();
    }
    let mut tokens = if no_defaults {
        Vec::new()
    } else {
        vec![String::new()]
    };
    for f in flags {
        if !tokens.contains(f) {
            tokens.push(f.clone());
        }
    }
    tokens
}

/// The sniffer's options from flags shared by `sniff` and `import`.
pub fn options(
    format: Format,
    delimiter: Option<char>,
    header: bool,
    no_header: bool,
    nulls: &[String],
    types_text: bool,
) -> Result<Options, Error> {
    let delimiter = match delimiter {
        None => None,
        Some(c) if c.is_ascii() && !matches!(c, '\n' | '\r' | '"') => Some(c as u8),
        Some(c) => {
            return Err(Error::Input(format!(
                "--delimiter {c:?}: give one ASCII character other than a line break or '\"'"
            )))
        }
    };
    Ok(Options {
        format,
        delimiter,
        header: if header {
            Some(true)
        } else if no_header {
            Some(false)
        } else {
            None
        },
        nulls: (!nulls.is_empty()).then(|| nulls.to_vec()),
        types_text,
    })
}

/// Opens `path` and sniffs it: the plan, and the input ready to be read
/// from its first byte (the head sampled is put back in front).
pub fn sniff_input(
    input: &mut source::Input,
    path: &str,
    opts: &Options,
) -> Result<SniffPlan, Error> {
    let mut head = Vec::new();
    // A read error (invalid UTF-16, a broken compressed stream) is not
    // reported here: the head read so far is sniffed, and the import meets
    // the error where it is, with its line.
    let (complete, failed) = match (&mut input.reader)
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)
    {
        Ok(_) => match input.reader.fill_buf() {
            Ok(rest) => (head.len() < HEAD_BYTES || rest.is_empty(), None),
            Err(e) => (false, Some(e)),
        },
        Err(e) => (false, Some(e)),
    };
    if head.is_empty() && failed.is_none() {
        return Err(Error::Input(format!(
            "{} is empty: there is no header line to name the columns",
            input.display
        )));
    }
    let fail_msg = failed.as_ref().map(|e| e.to_string());
    let regions = read_regions(path, head.len());
    let plan = sniff(&head, complete, &regions, opts)
        .map_err(|e| Error::Input(format!("{}: {e}", input.display)));
    let rest = std::mem::replace(&mut input.reader, Box::new(std::io::empty()));
    input.reader = match failed {
        None => Box::new(std::io::Cursor::new(head).chain(rest)),
        Some(e) => Box::new(std::io::Cursor::new(head).chain(Failed(Some(e)))),
    };
    match (plan, fail_msg) {
        (Err(_), Some(m)) => Err(Error::Input(format!("reading {}: {m}", input.display))),
        (p, _) => p,
    }
}

/// Reads a plan written by `litelane sniff --json`.
pub fn load_plan(path: &PathBuf) -> Result<SniffPlan, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading the plan {}", path.display()), e))?;
    let plan: SniffPlan = serde_json::from_str(&text).map_err(|e| {
        Error::Input(format!(
            "the plan {} is not a valid plan: {e}",
            path.display()
        ))
    })?;
    plan.validate()
        .map_err(|e| Error::Input(format!("the plan {}: {e}", path.display())))?;
    Ok(plan)
}

/// The plan in words, as `litelane sniff` prints it.
pub fn describe(plan: &SniffPlan, display: &str) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let name = |c: char| match c {
        '\t' => "tab".to_string(),
        c => format!("{c:?}"),
    };
    let _ = writeln!(s, "file:        {display}");
    let _ = writeln!(
        s,
        "dialect:     {} delimiter {}, quote {}",
        match plan.format {
            Format::Tsv => "tsv",
            _ => "csv",
        },
        name(plan.delimiter),
        plan.quote.map_or("none".to_string(), name)
    );
    let _ = writeln!(s, "header:      {}", if plan.header { "yes" } else { "no" });
    let _ = writeln!(s, "skip rows:   {}", plan.skip_rows);
    let _ = writeln!(
        s,
        "index col:   {}",
        if plan.index_column {
            INDEX_COLUMN
        } else {
            "no"
        }
    );
    let _ = writeln!(s, "nulls:       {:?}", plan.nulls);
    if let Some(sm) = &plan.sampled {
        let _ = writeln!(
            s,
            "sampled:     {} records from {}",
            sm.records,
            sm.places.join(", ")
        );
    }
    let _ = writeln!(s, "columns:");
    let width = plan
        .columns
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    for c in &plan.columns {
        let mut extra = String::new();
        if let Some(n) = &c.nulls {
            let _ = write!(extra, "  nulls {n:?}");
        }
        if c.trim {
            extra.push_str("  trim spaces");
        }
        if !c.tokens_seen.is_empty() {
            let _ = write!(extra, "  seen {:?}", c.tokens_seen);
        }
        let line = format!("  {:width$}  {:9}{extra}", c.name, c.ty.sql());
        let _ = writeln!(s, "{}", line.trim_end());
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(s, "notes:");
        for n in &plan.notes {
            let _ = writeln!(s, "  - {n}");
        }
    }
    s
}

/// The plan of a fresh CSV/TSV import: read from `--plan FILE`, or sniffed
/// from `input` (which is then ready to be read from its first byte).
/// `None` for NDJSON.
#[allow(clippy::too_many_arguments)]
pub fn plan_for_import(
    plan_file: Option<&PathBuf>,
    format: Format,
    delimiter: Option<char>,
    header: bool,
    no_header: bool,
    nulls: &[String],
    types_text: bool,
    input: &mut source::Input,
    path: &str,
) -> Result<Option<SniffPlan>, Error> {
    if let Some(p) = plan_file {
        let plan = load_plan(p)?;
        if no_header && plan.header {
            return Err(Error::Input(format!(
                "--no-header contradicts the plan {} (\"header\": true)",
                p.display()
            )));
        }
        return Ok(Some(plan));
    }
    if format == Format::Ndjson {
        return Ok(None);
    }
    let opts = options(format, delimiter, header, no_header, nulls, types_text)?;
    sniff_input(input, path, &opts).map(Some)
}

/// The sniffer's decisions that differ from a plain comma-separated file
/// with a header, in words for the stderr summary; `None` when none do.
pub fn summary_line(s: &Sniffed, header: bool) -> Option<String> {
    let mut parts = Vec::new();
    if s.delimiter != ',' {
        parts.push(format!(
            "fields split on {}",
            if s.delimiter == '\t' {
                "tab".to_string()
            } else {
                format!("{:?}", s.delimiter)
            }
        ));
    }
    if s.skip_rows > 0 {
        parts.push(format!(
            "{} record(s) before the {} skipped",
            s.skip_rows,
            if header { "header" } else { "data" }
        ));
    }
    let reason = s.header_reason.as_deref();
    if !header {
        parts.push(match reason {
            Some(r) => format!("no header line (columns c1, c2, ...): {r}"),
            None => "no header line (columns c1, c2, ...)".into(),
        });
    } else if let Some(r) = reason.filter(|r| {
        // The usual cases (a name above numbers, all text) go unsaid.
        !r.starts_with("the first record does not fit") && !r.starts_with("every column is text")
    }) {
        parts.push(format!("header line: {r}"));
    }
    if s.index_column {
        parts.push(format!(
            "first field of each record imported as {INDEX_COLUMN:?}"
        ));
    }
    let nulls: usize = s.column_nulls.iter().filter(|n| n.is_some()).count();
    if nulls > 0 {
        parts.push(format!(
            "null tokens such as NA applied in {nulls} numeric column(s)"
        ));
    }
    let trimmed = s.trim.iter().filter(|t| **t).count();
    if trimmed > 0 {
        parts.push(format!(
            "spaces around numbers dropped in {trimmed} column(s)"
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "sniffed: {} (see `litelane sniff`; override with flags or --plan)",
            parts.join("; ")
        )
    })
}

/// Parses `--type COL=TYPE` flags.
pub fn type_overrides(flags: &[String]) -> Result<Vec<(String, ColType)>, Error> {
    flags
        .iter()
        .map(|f| {
            let (col, ty) = f.rsplit_once('=').ok_or_else(|| {
                Error::Input(format!(
                    "--type {f:?}: write COLUMN=TYPE, e.g. --type zip=TEXT"
                ))
            })?;
            let t = ColType::parse_name(ty.trim()).ok_or_else(|| {
                Error::Input(format!(
                    "--type {f:?}: unknown type {ty:?} (use TEXT, INTEGER, REAL, BOOLEAN, \
                     DATE, TIMESTAMP or NUMERIC)"
                ))
            })?;
            Ok((col.to_string(), t))
        })
        .collect()
}

/// Applies `--type` overrides to the columns of a new table; an unknown
/// column is an error naming the columns there are.
pub fn apply_overrides(
    cols: &mut [crate::plan::columns::ColumnPlan],
    overrides: &[(String, ColType)],
) -> Result<(), Error> {
    for (name, ty) in overrides {
        let i = cols
            .iter()
            .position(|c| c.name == *name)
            .or_else(|| cols.iter().position(|c| c.name.eq_ignore_ascii_case(name)))
            .ok_or_else(|| {
                Error::Input(format!(
                    "--type {name}=...: no such column (columns: {})",
                    cols.iter()
                        .map(|c| litelane::quote_ident(&c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        cols[i].ty = *ty;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sniffing case: input bytes and options → the expected plan.
    struct Case {
        name: &'static str,
        input: &'static str,
        tsv: bool,
        header: Option<bool>,
        nulls: Option<&'static [&'static str]>,
        delimiter: char,
        quote: Option<char>,
        has_header: bool,
        skip: u64,
        index: bool,
        /// Column names, space-separated.
        names: &'static str,
        /// Column types, space-separated.
        types: &'static str,
        /// `(column, its own null tokens)` to check.
        col_nulls: &'static [(usize, Option<&'static [&'static str]>)],
        /// Columns whose padding is trimmed.
        trim: &'static [usize],
    }

    const BASE: Case = Case {
        name: "",
        input: "",
        tsv: false,
        header: None,
        nulls: None,
        delimiter: ',',
        quote: Some('"'),
        has_header: true,
        skip: 0,
        index: false,
        names: "",
        types: "",
        col_nulls: &[],
        trim: &[],
    };

    fn cases() -> Vec<Case> {
        vec![
            Case { name: "commas with a header", input: "a,b\n1,x\n2,y\n", names: "a b", types: "INTEGER TEXT", ..BASE },
            Case { name: "semicolons", input: "a;b;c\n1;2;3\n4;5;6\n", delimiter: ';', names: "a b c", types: "INTEGER INTEGER INTEGER", ..BASE },
            Case { name: "semicolons with decimal commas", input: "x;y\n1,5;2,25\n3,5;4,75\n6,5;7,75\n", delimiter: ';', names: "x y", types: "TEXT TEXT", ..BASE },
            Case { name: "pipes", input: "id|name\n1|ann\n2|bob\n", delimiter: '|', names: "id name", types: "INTEGER TEXT", ..BASE },
            Case { name: "tabs in a .csv", input: "a\tb\n1\t2.5\n3\t4\n", delimiter: '\t', names: "a b", types: "INTEGER REAL", ..BASE },
            Case { name: "quoted delimiters", input: "name,city\n\"Smith, J\",\"Paris, FR\"\n\"Doe, A\",Rome\n", names: "name city", types: "TEXT TEXT", ..BASE },
            Case { name: "quoted semicolons in a semicolon file", input: "n;t\n1;\"a;b\"\n2;\"c;d;e\"\n3;f\n", delimiter: ';', names: "n t", types: "INTEGER TEXT", ..BASE },
            Case { name: "header-less reals (no column named 0.00)", input: "0.00,-0.55\n1.5,2.5\n3,4\n", has_header: false, names: "c1 c2", types: "REAL REAL", ..BASE },
            Case { name: "header-less integers", input: "1,2\n3,4\n5,6\n", has_header: false, names: "c1 c2", types: "INTEGER INTEGER", ..BASE },
            Case { name: "a real above integers is data, and makes the column REAL", input: "0.00,-0.55\n1.5,2\n", has_header: false, names: "c1 c2", types: "REAL REAL", ..BASE },
            Case { name: "all text: a header is assumed", input: "a,b\nx,y\nz,w\n", names: "a b", types: "TEXT TEXT", ..BASE },
            Case { name: "preamble lines before the header", input: "Table 1: Population by region\nSource: the agency\nregion,pop,share\nnorth,10,0.5\nsouth,20,0.25\n", skip: 2, names: "region pop share", types: "TEXT INTEGER REAL", ..BASE },
            Case { name: "a count line in place of a header", input: "3\n1,2.5\n2,3.5\n3,4.5\n", skip: 1, has_header: false, names: "c1 c2", types: "INTEGER REAL", ..BASE },
            Case { name: "R row names: header one field short", input: "x,y\n\"a\",1,2.5\n\"b\",3,4.5\n\"c\",5,6\n", index: true, names: "row_names x y", types: "TEXT INTEGER REAL", ..BASE },
            Case { name: "R row names after a preamble title", input: "My title\nx,y\nr1,1,2\nr2,3,4\n", skip: 1, index: true, names: "row_names x y", types: "TEXT INTEGER INTEGER", ..BASE },
            Case { name: "a title line is not a row-names header", input: "Title\na,b\n1,2\n3,4\n", skip: 1, names: "a b", types: "INTEGER INTEGER", ..BASE },
            Case { name: "NA in numeric columns becomes NULL", input: "a,b\n1,NA\n2,3.5\nNA,4\n", names: "a b", types: "INTEGER REAL", col_nulls: &[(0, Some(&["", "NA"])), (1, Some(&["", "NA"]))], ..BASE },
            Case { name: "NA as a country code stays text", input: "country,pop\nNA,2.5\nFR,67\nDE,83\n", names: "country pop", types: "TEXT REAL", col_nulls: &[(0, None), (1, None)], ..BASE },
            Case { name: "a column of only NA stays text", input: "a,b\nNA,1\nNA,2\n", names: "a b", types: "TEXT INTEGER", col_nulls: &[(0, None)], ..BASE },
            Case { name: "N/A and NULL tokens", input: "a,b\nN/A,x\n5,NULL\n6,y\n", names: "a b", types: "INTEGER TEXT", col_nulls: &[(0, Some(&["", "N/A"])), (1, None)], ..BASE },
            Case { name: "dates", input: "d,v\n2024-01-05,1\n2024-02-29,2\n", names: "d v", types: "DATE INTEGER", ..BASE },
            Case { name: "a date that does not exist is text", input: "d,v\n2023-02-29,1\n2024-01-05,2\n", names: "d v", types: "TEXT INTEGER", ..BASE },
            Case { name: "timestamps, T or space, zone", input: "t,v\n2024-01-05 10:30:00,1\n2024-01-05T11:00:00.5Z,2\n2024-01-06T00:00+02:00,3\n", names: "t v", types: "TIMESTAMP INTEGER", ..BASE },
            Case { name: "dates and timestamps mixed", input: "t\n2024-01-05\n2024-01-05 10:30\n", names: "t", types: "TIMESTAMP", ..BASE },
            Case { name: "booleans", input: "ok,n\ntrue,1\nFALSE,2\nTrue,3\n", names: "ok n", types: "BOOLEAN INTEGER", ..BASE },
            Case { name: "leading zeros stay text", input: "zip,n\n02134,1\n10001,2\n", names: "zip n", types: "TEXT INTEGER", ..BASE },
            Case { name: "integers past 64 bits stay text", input: "acct,n\n12345678901234567890123,1\n5,2\n", names: "acct n", types: "TEXT INTEGER", ..BASE },
            Case { name: "space-padded numbers are numbers, trimmed", input: "a,b\n .01138,1\n 2.5 ,2\n3,3\n", names: "a b", types: "REAL INTEGER", trim: &[0], ..BASE },
            Case { name: "padding around text stays text", input: "a,b\n x,1\ny ,2\n", names: "a b", types: "TEXT INTEGER", ..BASE },
            Case { name: "TSV: tab, quotes are data", input: "a\tb\n\"x\t1\ny\"\t2\n", tsv: true, delimiter: '\t', quote: None, names: "a b", types: "TEXT INTEGER", ..BASE },
            Case { name: "blank lines are not records", input: "a,b\n\n1,2\n\n3,4\n", names: "a b", types: "INTEGER INTEGER", ..BASE },
            Case { name: "--null given: exactly those, everywhere", input: "a,b\nNA,x\n1,NA\n", nulls: Some(&["NA"]), names: "a b", types: "INTEGER TEXT", col_nulls: &[(0, None), (1, None)], ..BASE },
            Case { name: "--no-header forces data", input: "a,b\nx,y\n", header: Some(false), has_header: false, names: "c1 c2", types: "TEXT TEXT", ..BASE },
            Case { name: "--header forces a header over numbers", input: "2019,2020\n5,6\n7,8\n", header: Some(true), names: "2019 2020", types: "INTEGER INTEGER", ..BASE },
            Case { name: "numeric header names look like data (use --header)", input: "2019,2020\n5,6\n7,8\n", has_header: false, names: "c1 c2", types: "INTEGER INTEGER", ..BASE },
            Case { name: "duplicate header names are renamed", input: "a,A,b\n1,2,3\n", names: "a A_2 b", types: "INTEGER INTEGER INTEGER", ..BASE },
            // Headers as real files write them (issue 22).
            Case { name: "R write.csv: an empty first name over row names, text columns", input: "\"\",\"class\",\"age\",\"sex\",\"survived\"\n\"1\",\"1st class\",\"adult\",\"man\",\"yes\"\n\"2\",\"3rd class\",\"child\",\"woman\",\"no\"\n", names: "c1 class age sex survived", types: "INTEGER TEXT TEXT TEXT TEXT", ..BASE },
            Case { name: "a cross-table whose column names are years, over a text first column", input: "\"\",\"1940\",\"1945\"\n\"Agriculture\",12,15\n\"Industry\",30,28\n", names: "c1 1940 1945", types: "TEXT INTEGER INTEGER", ..BASE },
            Case { name: "years as names, unquoted, over a text first column with an empty corner", input: ",1940,1945\nAgriculture,12,15\nIndustry,30,28\n", has_header: false, names: "c1 c2 c3", types: "TEXT INTEGER INTEGER", ..BASE },
            Case { name: "quoted years above bare numbers are names", input: "\"2019\",\"2020\"\n5,6\n7,8\n", names: "2019 2020", types: "INTEGER INTEGER", ..BASE },
            Case { name: "quoted numbers above quoted numbers are data", input: "\"2019\",\"2020\"\n\"5\",\"6\"\n", has_header: false, names: "c1 c2", types: "INTEGER INTEGER", ..BASE },
            Case { name: "a row missing its first value is data, not a header", input: ",1,2\na,3,4\nb,5,6\n", has_header: false, names: "c1 c2 c3", types: "TEXT INTEGER INTEGER", ..BASE },
            Case { name: "a header ending with a delimiter, after notes", input: "Notes: survey 2024\nSource: agency\nname,age,city,\nalice,30,paris\nbob,25,rome\n", skip: 2, names: "name age city", types: "TEXT INTEGER TEXT", ..BASE },
            Case { name: "a header ending with a delimiter, no notes", input: "name,age,\nalice,30\nbob,25\n", names: "name age", types: "TEXT INTEGER", ..BASE },
            Case { name: "records ending with a delimiter the header lacks are not row names", input: "a,b\n1,2,\n3,4,\n", names: "a b c3", types: "INTEGER INTEGER TEXT", ..BASE },
            Case { name: "R row names are still row names", input: "\"x\",\"y\"\n\"a\",1,\n\"b\",2,5\n", index: true, names: "row_names x y", types: "TEXT INTEGER INTEGER", ..BASE },
            Case { name: "a file of one numeric line is data", input: "1,2.5,3\n", has_header: false, names: "c1 c2 c3", types: "INTEGER REAL INTEGER", ..BASE },
            Case { name: "a file of one line of names is a header", input: "a,b,c\n", names: "a b c", types: "TEXT TEXT TEXT", ..BASE },
            Case { name: "one column", input: "n\n1\n2\n", names: "n", types: "INTEGER", ..BASE },
            Case { name: "CRLF and lone CR line ends", input: "a;b\r\n1;x\r2;y\r", delimiter: ';', names: "a b", types: "INTEGER TEXT", ..BASE },
        ]
    }

    #[test]
    fn the_dialect_header_and_types_table() {
        let cases = cases();
        assert!(cases.len() >= 20);
        for c in cases {
            let opts = Options {
                format: if c.tsv { Format::Tsv } else { Format::Csv },
                delimiter: None,
                header: c.header,
                nulls: c.nulls.map(|n| n.iter().map(|s| s.to_string()).collect()),
                types_text: false,
            };
            let p = sniff(c.input.as_bytes(), true, &[], &opts)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
            let types: Vec<&str> = p.columns.iter().map(|c| c.ty.sql()).collect();
            let got = (p.delimiter, p.quote, p.header, p.skip_rows, p.index_column);
            let want = (c.delimiter, c.quote, c.has_header, c.skip, c.index);
            assert_eq!(
                got, want,
                "{}: (delimiter, quote, header, skip, index)\n{p:#?}",
                c.name
            );
            assert_eq!(names.join(" "), c.names, "{}: names", c.name);
            assert_eq!(types.join(" "), c.types, "{}: types\n{:?}", c.name, p.notes);
            for (i, want) in c.col_nulls {
                let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
                assert_eq!(p.columns[*i].nulls, want, "{}: nulls of column {i}", c.name);
            }
            let trimmed: Vec<usize> = (0..p.columns.len())
                .filter(|&i| p.columns[i].trim)
                .collect();
            assert_eq!(trimmed, c.trim, "{}: trimmed columns", c.name);
            // The plan survives JSON as `import --plan` reads it.
            let back: SniffPlan =
                serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
            assert_eq!(back, p, "{}: JSON round trip", c.name);
        }
    }

    #[test]
    fn types_come_from_the_middle_and_end_of_a_file_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.csv");
        let mut body = String::from("id,v\n");
        let mut i = 0u64;
        while body.len() < 2 * HEAD_BYTES + 2 * REGION_BYTES {
            body.push_str(&format!("{i},{}\n", i % 97));
            i += 1;
        }
        body.push_str(&format!("{i},not a number\n"));
        std::fs::write(&path, &body).unwrap();
        let p = path.to_str().unwrap();
        let mut input = source::open(p).unwrap();
        let opts = options(Format::Csv, None, false, false, &[], false).unwrap();
        let plan = sniff_input(&mut input, p, &opts).unwrap();
        let sampled = plan.sampled.clone().unwrap();
        assert_eq!(sampled.places, ["start", "middle", "end"]);
        assert_eq!(plan.columns[0].ty, ColType::Integer);
        assert_eq!(plan.columns[1].ty, ColType::Text, "the last record is text");
        // The input is whole again: the first record is the header.
        let mut all = Vec::new();
        input.reader.read_to_end(&mut all).unwrap();
        assert_eq!(all, body.as_bytes());
        // Regions start at a record start.
        for r in read_regions(p, HEAD_BYTES) {
            let first = r.bytes.split(|&c| c == b'\n').next().unwrap();
            let s = std::str::from_utf8(first).unwrap();
            let (a, _) = s.split_once(',').unwrap();
            assert!(
                a.parse::<u64>().is_ok(),
                "{} starts mid-record: {s:?}",
                r.place
            );
        }
    }

    #[test]
    fn a_plan_from_a_file_is_checked() {
        let p = sniff(
            b"a,b\n1,2\n",
            true,
            &[],
            &options(Format::Csv, None, false, false, &[], false).unwrap(),
        )
        .unwrap();
        assert!(p.validate().is_ok());
        let mut bad = p.clone();
        bad.delimiter = '\n';
        assert!(bad.validate().unwrap_err().contains("delimiter"));
        let mut bad = p.clone();
        bad.quote = Some(',');
        assert!(bad.validate().unwrap_err().contains("quote"));
        let mut bad = p.clone();
        bad.columns.clear();
        assert!(bad.validate().unwrap_err().contains("columns"));
        assert!(type_overrides(&["a=text".into()]).unwrap()[0].1 == ColType::Text);
        assert!(type_overrides(&["a".into()]).is_err());
        assert!(type_overrides(&["a=uuid".into()])
            .unwrap_err()
            .to_string()
            .contains("uuid"));
    }

    #[test]
    fn zst_names_give_the_format_and_the_table() {
        assert_eq!(
            source::table_stem("data/trips.csv.zst").as_deref(),
            Some("trips")
        );
        assert_eq!(Format::from_name("x.tsv.zst"), Some(Format::Tsv));
        assert_eq!(Format::from_name("x.csv.gz"), Some(Format::Csv));
    }

    #[test]
    fn iso_dates_and_timestamps() {
        /// Asserts that `is` takes each of `ok` and refuses each of `bad`.
        fn check(is: fn(&[u8]) -> bool, ok: &[&str], bad: &[&str]) {
            for s in ok {
                assert!(is(s.as_bytes()), "{s}");
            }
            for s in bad {
                assert!(!is(s.as_bytes()), "{s}");
            }
        }
        check(
            is_iso_date,
            &["2024-01-05", "2000-02-29", "1999-12-31"],
            &[
                "2023-02-29",
                "1900-02-29",
                "2024-13-01",
                "2024-00-10",
                "2024-1-05",
                "20240105",
                "2024-01-05 ",
            ],
        );
        check(
            is_iso_timestamp,
            &[
                "2024-01-05 10:30",
                "2024-01-05T10:30:59",
                "2024-01-05T10:30:59.123Z",
                "2024-01-05 23:59:00-05:00",
            ],
            &[
                "2024-01-05",
                "2024-01-05 24:00",
                "2024-01-05T10:60",
                "2024-01-05T10:30:00.",
                "2024-01-05T10:30Q",
            ],
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn opts() -> Options {
        Options {
            format: Format::Csv,
            delimiter: None,
            header: None,
            nulls: None,
            types_text: false,
        }
    }

    /// A field of column kind `k` from `v`.
    fn value(k: u8, v: i64, word: &str) -> String {
        match k % 4 {
            0 => v.to_string(),
            1 => format!("{}.{}", v, (v.unsigned_abs() % 97)),
            2 => format!("{word}{}", v.unsigned_abs() % 10),
            _ => format!("\"{word}, {v}\""),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Tables of numbers and words (some quoted, holding the
        /// delimiter), written with any of the four delimiters: the sniffer
        /// finds the delimiter, the header when there is one and some column
        /// is numeric, and the column count.
        #[test]
        fn generated_tables_are_sniffed_back(
            d in 0usize..4,
            kinds in proptest::collection::vec(0u8..4, 2..6),
            rows in proptest::collection::vec(proptest::collection::vec(-1000i64..1000, 6), 3..30),
            word in "[a-z]{1,6}",
            with_header in any::<bool>(),
        ) {
            let delim = DELIMITERS[d] as char;
            let mut body = String::new();
            if with_header {
                let names: Vec<String> = (0..kinds.len()).map(|i| format!("col{i}")).collect();
                body.push_str(&names.join(&delim.to_string()));
                body.push('\n');
            }
            for r in &rows {
                let fields: Vec<String> = kinds
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        let f = value(*k, r[i], &word);
                        // Quoted fields hold the delimiter, not only commas.
                        f.replace(", ", &format!("{delim} "))
                    })
                    .collect();
                body.push_str(&fields.join(&delim.to_string()));
                body.push('\n');
            }
            let p = sniff(body.as_bytes(), true, &[], &opts()).unwrap();
            prop_assert_eq!(p.delimiter, delim);
            prop_assert_eq!(p.columns.len(), kinds.len());
            prop_assert_eq!(p.skip_rows, 0);
            let numeric = kinds.iter().any(|k| k % 4 < 2);
            if numeric {
                prop_assert_eq!(p.header, with_header, "{}", body);
            } else {
                // All text: a header is assumed (nothing tells it apart).
                prop_assert!(p.header);
            }
            for (c, k) in p.columns.iter().zip(&kinds) {
                let want = match k % 4 {
                    0 => ColType::Integer,
                    1 => ColType::Real,
                    _ => ColType::Text,
                };
                // A real column whose sampled values all happen to be
                // integral is still REAL ("5.0" is not an integer).
                prop_assert_eq!(c.ty, want, "{}", body);
            }
        }

        /// `is_iso_date` agrees with SQLite: a `YYYY-MM-DD` text is a date
        /// exactly when SQLite's date() gives it back unchanged.
        #[test]
        fn iso_dates_agree_with_sqlite(y in 0u32..10000, m in 0u32..14, d in 0u32..33) {
            let s = format!("{y:04}-{m:02}-{d:02}");
            let c = rusqlite::Connection::open_in_memory().unwrap();
            let back: Option<String> =
                c.query_row("SELECT date(?1)", [&s], |r| r.get(0)).unwrap();
            prop_assert_eq!(is_iso_date(s.as_bytes()), back.as_deref() == Some(s.as_str()), "{}", s);
        }
    }
}
