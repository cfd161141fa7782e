//! `litelane import`: the flags ([`ImportFlags`], parsed by clap) become the
//! library's [`ImportOptions`]; this module installs the Ctrl-C handler,
//! draws the progress bar and says on stderr what the library reports
//! ([`Stderr`], its [`Progress`]), and prints the `--json` summary.

mod bar;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use litelane::Profile;
use litelane_import::{
    ImportOptions, Note, NoteKind, NoteLevel, Progress, Rejected, EXIT_INTERRUPTED,
};

use crate::error::CliError;
use bar::Bar;

/// Rejects shown on stderr per input when there is no rejects file.
pub const STDERR_LIMIT: u64 = 20;

/// Arguments of `litelane import` (each the [`ImportOptions`] field of the
/// same name, with `--quiet` and `--json` for the command itself).
#[derive(Debug, Clone, clap::Args)]
pub struct ImportFlags {
    /// The file to import (`.csv`, `.tsv`, `.ndjson`/`.jsonl`, optionally
    /// gzipped); `-` reads stdin. May be a glob pattern (`'data/*.csv'`),
    /// expanded by litelane itself, sorted by name.
    pub source: String,
    /// More files or glob patterns, imported into the same table after
    /// SOURCE, one after the other; columns are matched by name and a column
    /// a file lacks is NULL for its rows (--table is required).
    #[arg(value_name = "MORE")]
    pub more: Vec<String>,
    /// The database file (created if missing).
    #[arg(long, value_name = "DB")]
    pub db: PathBuf,
    /// The table (default: the file name without extensions).
    #[arg(long, value_name = "T")]
    pub table: Option<String>,
    /// The input format (default: from the extension; CSV when unknown).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// The first CSV/TSV line is data; columns are named c1, c2, ...
    /// (default: sniffed).
    #[arg(long, conflicts_with = "header")]
    pub no_header: bool,
    /// The first CSV/TSV record (after skipped ones) is a header (default:
    /// sniffed).
    #[arg(long)]
    pub header: bool,
    /// The CSV field delimiter (default: sniffed among , ; | and tab).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<char>,
    /// Import with this plan (from `litelane sniff --json`, maybe edited)
    /// instead of sniffing the file.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Give column COL type TYPE (TEXT, INTEGER, REAL, BOOLEAN, DATE,
    /// TIMESTAMP, NUMERIC) in the new table (repeatable).
    #[arg(long = "type", value_name = "COL=TYPE")]
    pub types_for: Vec<String>,
    /// A field equal to TOKEN is stored as NULL, in every column
    /// (repeatable). Added to the default, the empty field, which stays NULL
    /// (`--no-default-nulls` removes it). Without `--null`, the empty field
    /// is NULL and the sniffer adds NA, N/A, NULL, null, #N/A to the typed
    /// columns it saw them in.
    #[arg(long = "null", value_name = "TOKEN")]
    pub nulls: Vec<String>,
    /// With --null: the empty field is not NULL (stored as empty text, or
    /// rejected in a typed column); only the --null tokens are.
    #[arg(long, requires = "nulls")]
    pub no_default_nulls: bool,
    /// Column types: inferred from the data (BOOLEAN, INTEGER, REAL, DATE,
    /// TIMESTAMP or TEXT per column; --type sets one, NUMERIC included), or
    /// all TEXT [default: infer].
    #[arg(long, value_enum)]
    pub types: Option<TypesArg>,
    /// Create a STRICT table; values that do not fit their column's type are
    /// rejected instead of stored as they are.
    #[arg(long)]
    pub strict: bool,
    /// The key: the primary key of a created table (COL, or COL1,COL2 for a
    /// composite key), and what `--on-conflict` matches rows by (an existing
    /// table needs a PRIMARY KEY or UNIQUE index on exactly these columns).
    #[arg(long, value_name = "COL[,COL]")]
    pub pk: Option<String>,
    /// What a row whose --pk is already in the table does: fail (rejected,
    /// naming its key), upsert (its imported columns updated, the others
    /// kept), ignore (skipped and counted), replace (the stored row deleted
    /// and the new one inserted: delete triggers and cascades fire)
    /// [default: fail].
    #[arg(long, value_enum, value_name = "HOW")]
    pub on_conflict: Option<OnConflictArg>,
    /// Add input columns the existing table lacks (ALTER TABLE ... ADD
    /// COLUMN, typed from the data like a new table) instead of failing.
    #[arg(long)]
    pub alter: bool,
    /// Store each row's source file path (as given, after glob expansion) in
    /// column NAME, added as TEXT when the table lacks it.
    #[arg(long, value_name = "NAME")]
    pub source_column: Option<String>,
    /// create (fail if the table exists), append, or replace [default:
    /// create].
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Durability profile: safe, balanced or fast. WARNING: a `fast` import
    /// that is killed or loses power mid-transaction can corrupt the whole
    /// database, including tables that existed before; use it only on a
    /// database you can rebuild. The journal mode the database had is
    /// restored afterwards.
    #[arg(long, default_value = "balanced", value_parser = parse_profile)]
    pub profile: Profile,
    /// Commit every N rows and record progress, so that `--resume` can
    /// continue after a crash (default: one transaction for everything).
    #[arg(long, value_name = "N")]
    pub commit_every: Option<u64>,
    /// Continue an interrupted `--commit-every` import of the same file.
    #[arg(long)]
    pub resume: bool,
    /// Write rejected records to FILE (one JSON object per line).
    #[arg(long, value_name = "FILE")]
    pub rejects: Option<PathBuf>,
    /// Also insert rejected records into table NAME (created if missing;
    /// columns target_table, source, line, record, reason, raw) in the same
    /// transaction as the rows, so it always agrees with them.
    #[arg(long, value_name = "NAME")]
    pub rejects_table: Option<String>,
    /// Stop (committing nothing past the last commit) after more than N
    /// rejected records (default: no limit).
    #[arg(long, value_name = "N")]
    pub max_rejects: Option<u64>,
    /// No progress bar and no summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print one JSON summary object on stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse::<Profile>().map_err(|e| e.to_string())
}

/// Declares a clap value enum mirroring a library enum, with its
/// conversion (the library's enums carry no clap derive).
macro_rules! value_enum {
    ($(#[$m:meta])* $name:ident => $lib:ty { $($(#[$vm:meta])* $v:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl From<$name> for $lib {
            fn from(v: $name) -> $lib {
                match v { $($name::$v => <$lib>::$v),+ }
            }
        }
    };
}

value_enum! {
    /// An input format.
    FormatArg => litelane_import::Format {
        /// Comma-separated values (RFC 4180 quoting).
        Csv,
        /// Tab-separated values (no quoting: `"` is an ordinary character).
        Tsv,
        /// One JSON object per line.
        Ndjson,
    }
}

value_enum! {
    /// How column types are chosen.
    TypesArg => litelane_import::Types {
        /// Each column's type from the data: BOOLEAN, INTEGER, REAL, DATE
        /// (ISO `YYYY-MM-DD`), TIMESTAMP (ISO date and time) or TEXT (NUMERIC
        /// only by --type).
        Infer,
        /// Every column TEXT, values kept as written.
        Text,
    }
}

value_enum! {
    /// What to do with the target table.
    ModeArg => litelane_import::Mode {
        /// Create the table; fail if it exists.
        Create,
        /// Add rows to the table (created if missing), columns matched by name.
        Append,
        /// Drop the table if it exists and create it anew (in the same
        /// transaction as the first rows).
        Replace,
    }
}

value_enum! {
    /// What a row whose key is already in the table does.
    OnConflictArg => litelane_import::OnConflict {
        /// The row is rejected, naming its key (the default).
        Fail,
        /// The stored row's imported columns are updated from the row; its
        /// other columns are kept (`ON CONFLICT (key) DO UPDATE`).
        Upsert,
        /// The row is skipped and counted (`ON CONFLICT (key) DO NOTHING`).
        Ignore,
        /// The stored row is deleted and the new one inserted (`INSERT OR
        /// REPLACE`): delete triggers and foreign-key cascades fire, and the
        /// columns the input lacks take their defaults.
        Replace,
    }
}

impl ImportFlags {
    /// The library's options these flags ask for.
    pub fn options(&self) -> ImportOptions {
        ImportOptions {
            source: self.source.clone(),
            more: self.more.clone(),
            db: self.db.clone(),
            table: self.table.clone(),
            format: self.format.map(Into::into),
            no_header: self.no_header,
            header: self.header,
            delimiter: self.delimiter,
            plan: self.plan.clone(),
            types_for: self.types_for.clone(),
            nulls: self.nulls.clone(),
            no_default_nulls: self.no_default_nulls,
            types: self.types.map(Into::into),
            strict: self.strict,
            pk: self.pk.clone(),
            on_conflict: self.on_conflict.map(Into::into),
            alter: self.alter,
            source_column: self.source_column.clone(),
            mode: self.mode.map(Into::into),
            profile: self.profile,
            commit_every: self.commit_every,
            resume: self.resume,
            rejects: self.rejects.clone(),
            rejects_table: self.rejects_table.clone(),
            max_rejects: self.max_rejects,
        }
    }
}

/// Ctrl-C during an import. Once rows are being written, the first one
/// stops the import at the next record (what is committed stays, the
/// transaction in progress is rolled back). Before that (the input's first
/// records still being read to name and type the columns), and at a second
/// Ctrl-C, the command exits at once with status 130: a read of a pipe
/// whose writer goes on (`tail -f app.log | litelane import -`) would
/// otherwise keep it waiting, and SQLite discards an uncommitted
/// transaction as it does after a crash.
#[derive(Clone, Default)]
struct Interrupt {
    /// Ctrl-C was pressed.
    asked: Arc<AtomicBool>,
    /// Rows are being written (the library called [`Progress::start`]).
    writing: Arc<AtomicBool>,
}

impl Interrupt {
    fn on_ctrl_c(&self) {
        let again = self.asked.swap(true, Ordering::SeqCst);
        let why = if !self.writing.load(Ordering::SeqCst) {
            "interrupted (Ctrl-C) before any row was written; nothing was committed"
        } else if again {
            "interrupted again (Ctrl-C): stopped at once; the transaction in progress is \
             discarded, what was committed stays"
        } else {
            return;
        };
        eprintln!("litelane: {why}");
        std::process::exit(EXIT_INTERRUPTED);
    }
}

/// The command's side of an import: a progress bar on a terminal, the
/// library's notes and rejects as `litelane: ...` lines on stderr
/// (`--quiet` keeps only rejects and interruptions), and Ctrl-C.
pub struct Stderr {
    quiet: bool,
    bar: Option<Bar>,
    /// The sniffer's line, held until the account of the run when no bar
    /// shows (said at once otherwise, so a wrong guess can be stopped).
    sniffed: Option<String>,
    interrupt: Interrupt,
}

impl Stderr {
    /// Reports on stderr (`quiet`: no bar, no account of the run), and
    /// takes Ctrl-C over (see [`Interrupt`]).
    fn new(quiet: bool) -> Stderr {
        let interrupt = Interrupt::default();
        let handler = interrupt.clone();
        let _ = ctrlc::set_handler(move || handler.on_ctrl_c());
        Stderr {
            quiet,
            bar: None,
            sniffed: None,
            interrupt,
        }
    }

    fn bar_visible(&self) -> bool {
        self.bar.as_ref().is_some_and(Bar::visible)
    }
}

impl Progress for Stderr {
    fn start(&mut self, total_bytes: Option<u64>) {
        self.interrupt.writing.store(true, Ordering::SeqCst);
        self.bar = Some(Bar::new(!self.quiet, total_bytes));
    }

    fn rows(&mut self, rows: u64, bytes_read: u64) {
        if let Some(bar) = &self.bar {
            bar.update(rows, bytes_read);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }

    fn rejected(&mut self, r: &Rejected<'_>) {
        if r.in_file {
            return;
        }
        if r.nth <= STDERR_LIMIT {
            eprintln!(
                "litelane: {}:{}: record {} rejected: {}",
                r.input, r.line, r.record, r.reason
            );
        } else if r.nth == STDERR_LIMIT + 1 {
            eprintln!(
                "litelane: more records rejected; not shown (use --rejects FILE to keep them all)"
            );
        }
    }

    fn note(&mut self, note: &Note<'_>) {
        if self.quiet && note.level == NoteLevel::Info {
            return;
        }
        if note.kind == NoteKind::Sniffed && !self.bar_visible() {
            self.sniffed = Some(note.text.to_string());
            return;
        }
        if note.kind == NoteKind::Finished {
            if let Some(line) = self.sniffed.take() {
                eprintln!("litelane: {line}");
            }
        }
        eprintln!("litelane: {}", note.text);
    }

    fn should_stop(&self) -> bool {
        self.interrupt.asked.load(Ordering::Relaxed)
    }
}

/// Runs `litelane import`; returns the exit status (0 every record stored,
/// 3 some rejected, 130 interrupted); an error is status 1.
pub fn run(flags: ImportFlags) -> Result<i32, CliError> {
    let mut stderr = Stderr::new(flags.quiet);
    let outcome = litelane_import::run(flags.options(), &mut stderr)?;
    if let (true, Some(summary)) = (flags.json, &outcome.summary) {
        if outcome.status != EXIT_INTERRUPTED {
            println!("{}", json(summary));
        }
    }
    Ok(outcome.status)
}

/// A summary as the one-line JSON `--json` prints.
pub fn json(summary: &litelane_import::Summary) -> String {
    serde_json::to_string(summary).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
