//! What the caller asks of an import: the options of `litelane import`,
//! also the library's [`ImportArgs`].

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use litelane::Profile;
use serde::{Deserialize, Serialize};

use crate::plan::conflict::OnConflict;
use crate::read::source::Format;

/// Where the JSON summaries of the files of a run go (one per file).
#[derive(Debug, Clone, Default)]
pub struct Summaries(Arc<Mutex<Vec<serde_json::Value>>>);

impl Summaries {
    /// Adds one summary.
    pub fn push(&self, summary: serde_json::Value) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(summary);
    }

    /// Takes every summary added so far, in order.
    pub fn take(&self) -> Vec<serde_json::Value> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// How column types are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Types {
    /// Each column's type from the data: BOOLEAN, INTEGER, REAL, DATE
    /// (ISO `YYYY-MM-DD`), TIMESTAMP (ISO date and time) or TEXT (NUMERIC
    /// only by --type).
    Infer,
    /// Every column TEXT, values kept as written.
    Text,
}

/// What to do with the target table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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

#[cfg(feature = "clap")]
fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse::<Profile>().map_err(|e| e.to_string())
}

/// Arguments of `litelane import`.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ImportArgs {
    /// The file to import (`.csv`, `.tsv`, `.ndjson`/`.jsonl`, optionally
    /// gzipped); `-` reads stdin. May be a glob pattern (`'data/*.csv'`),
    /// expanded by litelane itself, sorted by name.
    pub source: String,
    /// More files or glob patterns, imported into the same table after
    /// SOURCE, one after the other; columns are matched by name and a column
    /// a file lacks is NULL for its rows (--table is required).
    #[cfg_attr(feature = "clap", arg(value_name = "MORE"))]
    pub more: Vec<String>,
    /// The database file (created if missing).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DB"))]
    pub db: PathBuf,
    /// The table (default: the file name without extensions).
    #[cfg_attr(feature = "clap", arg(long, value_name = "T"))]
    pub table: Option<String>,
    /// The input format (default: from the extension; CSV when unknown).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub format: Option<Format>,
    /// The first CSV/TSV line is data; columns are named c1, c2, ...
    /// (default: sniffed).
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "header"))]
    pub no_header: bool,
    /// The first CSV/TSV record (after skipped ones) is a header (default:
    /// sniffed).
    #[cfg_attr(feature = "clap", arg(long))]
    pub header: bool,
    /// The CSV field delimiter (default: sniffed among , ; | and tab).
    #[cfg_attr(feature = "clap", arg(long, value_name = "CHAR"))]
    pub delimiter: Option<char>,
    /// Import with this plan (from `litelane sniff --json`, maybe edited)
    /// instead of sniffing the file.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub plan: Option<PathBuf>,
    /// Give column COL type TYPE (TEXT, INTEGER, REAL, BOOLEAN, DATE,
    /// TIMESTAMP, NUMERIC) in the new table (repeatable).
    #[cfg_attr(feature = "clap", arg(long = "type", value_name = "COL=TYPE"))]
    pub types_for: Vec<String>,
    /// A field equal to TOKEN is stored as NULL, in every column
    /// (repeatable). Added to the default, the empty field, which stays NULL
    /// (`--no-default-nulls` removes it). Without `--null`, the empty field
    /// is NULL and the sniffer adds NA, N/A, NULL, null, #N/A to the typed
    /// columns it saw them in.
    #[cfg_attr(feature = "clap", arg(long = "null", value_name = "TOKEN"))]
    pub nulls: Vec<String>,
    /// With --null: the empty field is not NULL (stored as empty text, or
    /// rejected in a typed column); only the --null tokens are.
    #[cfg_attr(feature = "clap", arg(long, requires = "nulls"))]
    pub no_default_nulls: bool,
    /// Column types: inferred from the data (BOOLEAN, INTEGER, REAL, DATE,
    /// TIMESTAMP or TEXT per column; --type sets one, NUMERIC included), or
    /// all TEXT [default: infer].
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub types: Option<Types>,
    /// Create a STRICT table; values that do not fit their column's type are
    /// rejected instead of stored as they are.
    #[cfg_attr(feature = "clap", arg(long))]
    pub strict: bool,
    /// The key: the primary key of a created table (COL, or COL1,COL2 for a
    /// composite key), and what `--on-conflict` matches rows by (an existing
    /// table needs a PRIMARY KEY or UNIQUE index on exactly these columns).
    #[cfg_attr(feature = "clap", arg(long, value_name = "COL[,COL]"))]
    pub pk: Option<String>,
    /// What a row whose --pk is already in the table does: fail (rejected,
    /// naming its key), upsert (its imported columns updated, the others
    /// kept), ignore (skipped and counted), replace (the stored row deleted
    /// and the new one inserted: delete triggers and cascades fire)
    /// [default: fail].
    #[cfg_attr(feature = "clap", arg(long, value_enum, value_name = "HOW"))]
    pub on_conflict: Option<OnConflict>,
    /// Add input columns the existing table lacks (ALTER TABLE ... ADD
    /// COLUMN, typed from the data like a new table) instead of failing.
    #[cfg_attr(feature = "clap", arg(long))]
    pub alter: bool,
    /// Store each row's source file path (as given, after glob expansion) in
    /// column NAME, added as TEXT when the table lacks it.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub source_column: Option<String>,
    /// create (fail if the table exists), append, or replace [default:
    /// create].
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub mode: Option<Mode>,
    /// Durability profile: safe, balanced or fast. WARNING: a `fast` import
    /// that is killed or loses power mid-transaction can corrupt the whole
    /// database, including tables that existed before; use it only on a
    /// database you can rebuild. The journal mode the database had is
    /// restored afterwards.
    #[cfg_attr(feature = "clap", arg(long, default_value = "balanced", value_parser = parse_profile))]
    pub profile: Profile,
    /// Commit every N rows and record progress, so that `--resume` can
    /// continue after a crash (default: one transaction for everything).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub commit_every: Option<u64>,
    /// Continue an interrupted `--commit-every` import of the same file.
    #[cfg_attr(feature = "clap", arg(long))]
    pub resume: bool,
    /// Write rejected records to FILE (one JSON object per line).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub rejects: Option<PathBuf>,
    /// Also insert rejected records into table NAME (created if missing;
    /// columns target_table, source, line, record, reason, raw) in the same
    /// transaction as the rows, so it always agrees with them.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub rejects_table: Option<String>,
    /// Stop (committing nothing past the last commit) after more than N
    /// rejected records (default: no limit).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub max_rejects: Option<u64>,
    /// No progress bar and no summary on stderr.
    #[cfg_attr(feature = "clap", arg(long, short = 'q'))]
    pub quiet: bool,
    // Read by the command only: the library returns the summary in every
    // `Outcome` and prints nothing on stdout.
    /// Print one JSON summary object on stdout.
    #[cfg_attr(feature = "clap", arg(long))]
    pub json: bool,
    /// Set for each file of a run over several files: keep the progress
    /// records of the other files (they say which are done).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub keep_other_progress: bool,
    /// Set for the files after the first of a run over several files: the
    /// rejects file is appended to, not started anew.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub rejects_append: bool,
    /// Set for each file of a run over several files: the JSON summary goes
    /// here instead of stdout.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub summaries: Option<Summaries>,
    /// Set for each file of a run over several files: every file of the
    /// run, which a recorded rejects file must not be either.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub all_inputs: Vec<String>,
    /// Set to true (by another thread, or a Ctrl-C handler) to stop the
    /// import at the next record, keeping what is committed; the import
    /// then returns [`EXIT_INTERRUPTED`](crate::EXIT_INTERRUPTED). Default:
    /// none (the import cannot be stopped).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub interrupt: Option<Arc<AtomicBool>>,
}

impl ImportArgs {
    /// The options of `litelane import SOURCE --db DB` with no other flag:
    /// the table named after the file, the format from the extension,
    /// header, delimiter and types sniffed, mode `create`, profile
    /// `balanced`, one transaction for everything, rejects on stderr, a
    /// progress bar and summary on stderr (set `quiet` for none).
    pub fn new(source: impl Into<String>, db: impl Into<PathBuf>) -> Self {
        ImportArgs {
            source: source.into(),
            db: db.into(),
            ..ImportArgs::default()
        }
    }
}
