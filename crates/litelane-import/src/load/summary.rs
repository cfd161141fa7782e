//! What an import did, as data: [`Summary`]. Serialized (serde), it is the
//! object `litelane import --json` prints, key for key and in the same
//! order (see `docs/import.md`, "The JSON summary").

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// What an import did: one file, a resumed file that had already finished,
/// or several files.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Summary {
    /// One file imported.
    File(FileSummary),
    /// `resume` found the import already finished: nothing done.
    AlreadyFinished(AlreadyFinished),
    /// Several files into one table (the `more` sources or a glob
    /// pattern).
    Files(FilesSummary),
}

impl Summary {
    /// Rows inserted by this run (0 for an import already finished).
    pub fn rows_inserted(&self) -> u64 {
        match self {
            Summary::File(s) => s.rows_inserted,
            Summary::AlreadyFinished(_) => 0,
            Summary::Files(s) => s.rows_inserted,
        }
    }

    /// Records rejected by this run.
    pub fn rows_rejected(&self) -> u64 {
        match self {
            Summary::File(s) => s.rows_rejected,
            Summary::AlreadyFinished(_) => 0,
            Summary::Files(s) => s.rows_rejected,
        }
    }

    /// Rows skipped by this run because their key was already stored
    /// (`on_conflict` `ignore`).
    pub fn rows_skipped(&self) -> u64 {
        match self {
            Summary::File(s) => s.rows_skipped,
            Summary::AlreadyFinished(_) => 0,
            Summary::Files(s) => s.rows_skipped,
        }
    }

    /// The table imported into.
    pub fn table(&self) -> &str {
        match self {
            Summary::File(s) => &s.table,
            Summary::AlreadyFinished(s) => &s.table,
            Summary::Files(s) => &s.table,
        }
    }
}

/// A column of the table as the import created or found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ColumnSummary {
    /// The column's name.
    pub name: String,
    /// Its declared type (`INTEGER`, `REAL`, `TEXT`, `BOOLEAN`, `DATE`,
    /// `TIMESTAMP`, `NUMERIC`, or empty for none).
    #[serde(rename = "type")]
    pub ty: String,
}

/// What the sniffer decided about a CSV/TSV file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SniffedSummary {
    /// The field delimiter (one character).
    pub delimiter: String,
    /// The quote character, or `None` for none (TSV).
    pub quote: Option<String>,
    /// The first record (after skipped ones) is a header.
    pub header: bool,
    /// Records skipped before the header (or the data).
    pub skipped_rows: u64,
    /// The first column is a row index (an unnamed header field over
    /// 0, 1, 2, ...), dropped.
    pub index_column: bool,
    /// Why the header was, or was not, taken as one.
    pub header_reason: Option<String>,
    /// The header line ends with a delimiter the data lines lack.
    pub header_trailing_delimiter: bool,
}

/// Counts by name, kept in order; serialized as a JSON object.
pub type Counts = Vec<(String, u64)>;

/// One file imported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSummary {
    /// The table imported into.
    pub table: String,
    /// Rows inserted (or updated by an upsert) by this run.
    pub rows_inserted: u64,
    /// Records rejected by this run.
    pub rows_rejected: u64,
    /// Blank lines skipped in the input.
    pub blank_lines: u64,
    /// Wall-clock time of the run, in seconds.
    pub seconds: f64,
    /// `rows_inserted` per second of `seconds`.
    pub rows_per_sec: f64,
    /// The table's columns the input fills, in the order of the input.
    pub columns: Vec<ColumnSummary>,
    /// The durability profile the import ran with (`safe`, `balanced`,
    /// `fast`).
    pub profile: String,
    /// Rows skipped because their key was already stored (`on_conflict`
    /// `ignore`).
    pub rows_skipped: u64,
    /// The source as given.
    pub source: String,
    /// What the sniffer decided (CSV/TSV files it sniffed; absent
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sniffed: Option<SniffedSummary>,
    /// Per column (in order, only those with any): values that did not
    /// fit the column's type and were stored as written.
    #[serde(serialize_with = "counts")]
    pub kept_as_text: Counts,
    /// Per column (in order, only those with any): each null token met
    /// and how many fields it made NULL.
    #[serde(serialize_with = "nested_counts")]
    pub null_tokens: Vec<(String, Counts)>,
    /// The WAL was copied into the database and truncated afterwards
    /// (`Some(true)`), left as it was because a reader held it
    /// (`Some(false)`), or the database is not in WAL mode (`None`).
    pub wal_truncated: Option<bool>,
}

/// A resumed import that had already finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlreadyFinished {
    /// The table imported into.
    pub table: String,
    /// Always true (tells this shape apart in JSON).
    pub already_finished: bool,
    /// Rows inserted by this run: 0.
    pub rows_inserted: u64,
    /// Rows skipped by this run: 0.
    pub rows_skipped: u64,
    /// Records rejected by this run: 0.
    pub rows_rejected: u64,
    /// Rows the earlier runs inserted.
    pub total_rows_inserted: u64,
    /// Records the earlier runs rejected.
    pub total_rows_rejected: u64,
    /// The source as recorded.
    pub source: String,
    /// The durability profile (`safe`, `balanced`, `fast`).
    pub profile: String,
}

/// Several files into one table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilesSummary {
    /// The table imported into.
    pub table: String,
    /// Each file's summary, in the order imported.
    pub files: Vec<Summary>,
    /// Rows inserted, all files.
    pub rows_inserted: u64,
    /// Rows skipped (key already stored), all files.
    pub rows_skipped: u64,
    /// Records rejected, all files.
    pub rows_rejected: u64,
    /// The durability profile (`safe`, `balanced`, `fast`).
    pub profile: String,
}

fn counts<S: Serializer>(list: &Counts, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(list.len()))?;
    for (k, v) in list {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

struct AsMap<'a>(&'a Counts);

impl Serialize for AsMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        counts(self.0, s)
    }
}

fn nested_counts<S: Serializer>(list: &[(String, Counts)], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(list.len()))?;
    for (k, v) in list {
        map.serialize_entry(k, &AsMap(v))?;
    }
    map.end()
}
