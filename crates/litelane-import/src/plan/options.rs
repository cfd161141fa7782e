//! What the caller asks of an import: [`ImportOptions`] (plain data, with
//! defaults), and the enums its fields take. `litelane import` parses its
//! flags into these (one flag per field, same name with dashes).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use litelane::Profile;
use serde::{Deserialize, Serialize};

use crate::load::summary::Summary;
use crate::plan::conflict::OnConflict;
use crate::read::source::Format;

/// Where the summaries of the files of a run go (one per file).
#[derive(Debug, Clone, Default)]
pub(crate) struct Summaries(Arc<Mutex<Vec<Summary>>>);

impl Summaries {
    /// Adds one summary.
    pub fn push(&self, summary: Summary) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(summary);
    }

    /// Takes every summary added so far, in order.
    pub fn take(&self) -> Vec<Summary> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// How column types are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Types {
    /// Each column's type from the data: BOOLEAN, INTEGER, REAL, DATE
    /// (ISO `YYYY-MM-DD`), TIMESTAMP (ISO date and time) or TEXT (NUMERIC
    /// only by `types_for`).
    Infer,
    /// Every column TEXT, values kept as written.
    Text,
}

/// What to do with the target table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Create the table; fail if it exists.
    Create,
    /// Add rows to the table (created if missing), columns matched by name.
    Append,
    /// Drop the table if it exists and create it anew (in the same
    /// transaction as the first rows).
    Replace,
}

/// Parses `name` as one of `choices` (by their lowercase names), or says
/// which names are valid.
fn choose<T: Copy>(what: &str, name: &str, choices: &[(&str, T)]) -> Result<T, String> {
    choices
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            format!("{what} {name:?} is not one of {}", names.join(", "))
        })
}

impl std::str::FromStr for Types {
    type Err = String;
    /// `infer` or `text`.
    fn from_str(s: &str) -> Result<Self, String> {
        choose(
            "types",
            s,
            &[("infer", Types::Infer), ("text", Types::Text)],
        )
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    /// `create`, `append` or `replace`.
    fn from_str(s: &str) -> Result<Self, String> {
        choose(
            "mode",
            s,
            &[
                ("create", Mode::Create),
                ("append", Mode::Append),
                ("replace", Mode::Replace),
            ],
        )
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    /// `csv`, `tsv` or `ndjson`.
    fn from_str(s: &str) -> Result<Self, String> {
        choose(
            "format",
            s,
            &[
                ("csv", Format::Csv),
                ("tsv", Format::Tsv),
                ("ndjson", Format::Ndjson),
            ],
        )
    }
}

impl std::str::FromStr for OnConflict {
    type Err = String;
    /// `fail`, `upsert`, `ignore` or `replace`.
    fn from_str(s: &str) -> Result<Self, String> {
        choose(
            "on_conflict",
            s,
            &[
                ("fail", OnConflict::Fail),
                ("upsert", OnConflict::Upsert),
                ("ignore", OnConflict::Ignore),
                ("replace", OnConflict::Replace),
            ],
        )
    }
}

/// What to import, where, and how: the options of `litelane import`, one
/// field per flag (`--on-conflict` is `on_conflict`). Every field but
/// `source` and `db` has a default that is the command's own: build one
/// with [`ImportOptions::new`] and set what differs.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The file to import (`.csv`, `.tsv`, `.ndjson`/`.jsonl`, optionally
    /// gzipped or zstd-compressed); `-` reads stdin. May be a glob pattern
    /// (`data/*.csv`), expanded by the library, sorted by name. Required.
    pub source: String,
    /// More files or glob patterns, imported into the same table after
    /// `source`, one after the other; columns are matched by name and a
    /// column a file lacks is NULL for its rows (`table` is then required).
    /// Default: none.
    pub more: Vec<String>,
    /// The database file (created if missing). Required; with
    /// [`run_into`](crate::run_into), the path of the database given.
    pub db: PathBuf,
    /// The table. Default: the file name without its extensions.
    pub table: Option<String>,
    /// The input format. Default: from the extension; CSV when unknown.
    pub format: Option<Format>,
    /// The first CSV/TSV record is data; columns are named c1, c2, ...
    /// Default: false (sniffed). Not with `header`.
    pub no_header: bool,
    /// The first CSV/TSV record (after skipped ones) is a header.
    /// Default: false (sniffed). Not with `no_header`.
    pub header: bool,
    /// The CSV field delimiter. Default: sniffed among `,` `;` `|` and tab.
    pub delimiter: Option<char>,
    /// Import with this plan (a file written by `litelane sniff --json`,
    /// maybe edited) instead of sniffing the file. Default: none.
    pub plan: Option<PathBuf>,
    /// Column types for the new table, each `COL=TYPE` (TEXT, INTEGER,
    /// REAL, BOOLEAN, DATE, TIMESTAMP, NUMERIC). Default: none (inferred).
    pub types_for: Vec<String>,
    /// Fields equal to one of these tokens are stored as NULL, in every
    /// column; added to the empty field, which stays NULL unless
    /// `no_default_nulls`. Default: none given: the empty field is NULL and
    /// the sniffer adds NA, N/A, NULL, null, #N/A to the typed columns it
    /// saw them in.
    pub nulls: Vec<String>,
    /// With `nulls`: the empty field is not NULL (stored as empty text, or
    /// rejected in a typed column); only the `nulls` tokens are. Default:
    /// false. Needs `nulls`.
    pub no_default_nulls: bool,
    /// Column types inferred from the data, or all TEXT. Default:
    /// [`Types::Infer`].
    pub types: Option<Types>,
    /// Create a STRICT table; values that do not fit their column's type
    /// are rejected instead of stored as they are. Default: false.
    pub strict: bool,
    /// The key: the primary key of a created table (`COL`, or `COL1,COL2`
    /// for a composite key), and what `on_conflict` matches rows by (an
    /// existing table needs a PRIMARY KEY or UNIQUE index on exactly these
    /// columns). Default: none.
    pub pk: Option<String>,
    /// What a row whose `pk` is already in the table does. Default:
    /// [`OnConflict::Fail`] (rejected, naming its key).
    pub on_conflict: Option<OnConflict>,
    /// Add input columns the existing table lacks (`ALTER TABLE ... ADD
    /// COLUMN`, typed from the data) instead of failing. Default: false.
    pub alter: bool,
    /// Store each row's source file path (as given, after glob expansion)
    /// in this column, added as TEXT when the table lacks it. Default:
    /// none.
    pub source_column: Option<String>,
    /// What to do with the table. Default: [`Mode::Create`] (fail if it
    /// exists).
    pub mode: Option<Mode>,
    /// Durability profile of the database [`run`](crate::run) opens (with
    /// [`run_into`](crate::run_into), the open engine's profile applies
    /// instead). WARNING: a `fast` import that is killed or loses power
    /// mid-transaction can corrupt the whole database; the journal mode the
    /// database had is restored afterwards. Default: `balanced`.
    pub profile: Profile,
    /// Commit every this many rows (at least 1) and record progress, so
    /// that `resume` can continue after a crash. Default: none (one
    /// transaction for everything).
    pub commit_every: Option<u64>,
    /// Continue an interrupted `commit_every` import of the same file.
    /// Default: false.
    pub resume: bool,
    /// Write rejected records to this file (one JSON object per line).
    /// Default: none (each reject goes to [`Progress::rejected`](crate::Progress::rejected) only).
    pub rejects: Option<PathBuf>,
    /// Also insert rejected records into this table (created if missing;
    /// columns target_table, source, line, record, reason, raw) in the same
    /// transaction as the rows. Default: none.
    pub rejects_table: Option<String>,
    /// Stop (committing nothing past the last commit) after more than this
    /// many rejected records. Default: none (no limit).
    pub max_rejects: Option<u64>,
}

impl ImportOptions {
    /// The options of `litelane import SOURCE --db DB` with no other flag:
    /// the table named after the file, the format from the extension,
    /// header, delimiter and types sniffed, mode `create`, profile
    /// `balanced`, one transaction for everything, no rejects file.
    pub fn new(source: impl Into<String>, db: impl Into<PathBuf>) -> Self {
        ImportOptions {
            source: source.into(),
            db: db.into(),
            ..ImportOptions::default()
        }
    }

    /// Options that cannot go together (the command refuses them as it
    /// parses its flags; here for every other caller).
    pub(crate) fn check(&self) -> Result<(), crate::Error> {
        if self.header && self.no_header {
            return Err(crate::Error::Input(
                "header and no_header cannot both be set".into(),
            ));
        }
        if self.no_default_nulls && self.nulls.is_empty() {
            return Err(crate::Error::Input(
                "no_default_nulls needs at least one null token (nulls)".into(),
            ));
        }
        Ok(())
    }
}

/// The options of one file of a run, with what the library sets for each
/// file of a run over several; reads as [`ImportOptions`] through `Deref`.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileArgs {
    /// The caller's options (`source` the one file).
    pub options: ImportOptions,
    /// Set for each file of a run over several files: keep the progress
    /// records of the other files (they say which are done).
    pub keep_other_progress: bool,
    /// Set for the files after the first of a run over several files: the
    /// rejects file is appended to, not started anew.
    pub rejects_append: bool,
    /// Where the summary of this file goes.
    pub summaries: Option<Summaries>,
    /// Set for each file of a run over several files: every file of the
    /// run, which a recorded rejects file must not be either.
    pub all_inputs: Vec<String>,
}

impl From<ImportOptions> for FileArgs {
    fn from(options: ImportOptions) -> Self {
        FileArgs {
            options,
            ..FileArgs::default()
        }
    }
}

impl std::ops::Deref for FileArgs {
    type Target = ImportOptions;
    fn deref(&self) -> &ImportOptions {
        &self.options
    }
}

impl std::ops::DerefMut for FileArgs {
    fn deref_mut(&mut self) -> &mut ImportOptions {
        &mut self.options
    }
}
