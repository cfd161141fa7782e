//! The CSV/TSV sniffer: from samples of a file, the dialect (delimiter and
//! quote), the preamble lines to skip, whether the first row is a header,
//! an index column (R's row names), each column's type and the null tokens.
//! The functions here are pure (bytes in, a [`SniffPlan`] out) except
//! [`sniff_input`] and [`read_regions`], which take the samples. The plan is
//! what `litelane sniff` prints and what `litelane import --plan` reads back.
//! See `docs/import.md`, "Sniffing".
//!
//! Its steps, a room each: the dialect (`dialect.rs`), where the records
//! start (`start.rs`), the header and the columns' names (`header.rs`),
//! the columns' types and nulls (`types.rs`), and the plan in words
//! (`report.rs`); `input.rs` takes the samples (and reads a plan file),
//! and [`sniff`], here, runs the steps in order.

mod dialect;
mod header;
mod input;
#[cfg(test)]
mod props;
mod report;
mod start;
#[cfg(test)]
mod tests;
mod types;

pub use dialect::{choose_dialect, records};
pub use input::{load_plan, null_tokens, options, plan_for_import, read_regions, sniff_input};
pub use report::{describe, summary_line};
pub use types::{apply_overrides, type_overrides, ColumnStats};

use dialect::{dialect, modal};
use header::{column_names, decide_header, quotings};
use input::region_records;
use start::find_start;
use types::{infer, sniff_column};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::read::dialect::Sniffed;
use crate::read::source::Format;
use crate::values::ColType;

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
