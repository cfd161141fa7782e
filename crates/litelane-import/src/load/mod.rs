//! Layer 4, *load*: the import run from start to end — open the database,
//! prepare (the *plan* layer), start the parser thread (the *convert*
//! layer) and store its batches through the engine's bulk path ([`feed`]),
//! with rejects ([`rejects`]), what the caller is told ([`report`]), what
//! it did ([`summary`]) and runs over several files ([`files`]).
//!
//! One thread reads and parses the input into batches of typed rows
//! ([`records`], [`crate::convert`]); the
//! calling thread stores them ([`feed`]) through the engine's writer, with a
//! bounded channel of batches between the two. Column types are inferred
//! from the first [`SAMPLE_RECORDS`](crate::SAMPLE_RECORDS) records
//! ([`values`](crate::values)). Every record is either stored or rejected
//! ([`rejects`]). By
//! default the whole import is one transaction; with `--commit-every` it
//! commits every N rows and keeps its progress in the database ([`resume`]).
//! Output paths, the per-table lock and reserved names are checked first
//! ([`guard`]). See `docs/import.md`.

mod aside;
pub mod feed;
pub mod files;
pub mod rejects;
pub mod report;
pub mod summary;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use litelane::{quote_ident, Database, Options};

use crate::convert::job::ParseJob;
use crate::convert::Converter;
use crate::error::Error;
use crate::load::feed::Sink;
use crate::load::rejects::Rejects;
use crate::load::report::{self as say, NoteKind, Progress as Caller};
use crate::load::summary::{
    AlreadyFinished, ColumnSummary, Counts, FileSummary, SniffedSummary, Summary,
};
use crate::plan::columns::{self, Plan};
use crate::plan::conflict::{self, OnConflict};
use crate::plan::options::{FileArgs, ImportOptions, Mode, Summaries, Types};
use crate::plan::resume::{self, Progress, ResumePoint};
use crate::plan::{self, sniff, table};
use crate::read::records::{self, RawOwned, Records};
use crate::read::source::{self, Format};
use crate::read::{files as inputs, guard};

/// Batches in flight between the parser and the writer.
const CHANNEL_BATCHES: usize = 4;

/// Exit status: every record stored.
pub const EXIT_OK: i32 = 0;
/// Exit status: the import finished, but some records were rejected.
pub const EXIT_REJECTS: i32 = 3;
/// Exit status: stopped by [`Progress::should_stop`](crate::Progress::should_stop)
/// (the command's Ctrl-C, SIGINT), as shells report an interrupted command.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Everything decided before the rows flow.
struct Prepared {
    table: String,
    plan: Plan,
    records: Records,
    sample: Vec<RawOwned>,
    skip: u64,
    resume: Option<ResumePoint>,
    setup: Vec<String>,
    progress: Option<Progress>,
    rejects: Rejects,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The exit status `litelane import` gives it: [`EXIT_OK`] (every
    /// record stored), [`EXIT_REJECTS`] (finished, some records rejected)
    /// or [`EXIT_INTERRUPTED`] (stopped through
    /// [`Progress::should_stop`](crate::Progress::should_stop); what was
    /// committed stays).
    pub status: i32,
    /// What the import did; serialized, the object `litelane import
    /// --json` prints (see `docs/import.md`). `None` when it was stopped
    /// before it finished.
    pub summary: Option<Summary>,
}

/// Runs the import `options` describes, opening (or creating) the database
/// `options.db` with the import's own engine options (`options.profile`,
/// one reader), telling `progress` how it goes. Several files
/// (`options.more`, or a glob pattern) are imported one after the other
/// into one table. A database that does not exist yet is written aside and
/// linked into place when it is complete (one transaction under `safe` or
/// `balanced`; `docs/import.md`, "A new database is written once"). A bad
/// input, option or table is an [`Error`] of kind
/// [`ErrorKind::Input`](crate::ErrorKind::Input) naming the file and line
/// where known.
pub fn run(options: ImportOptions, progress: &mut dyn Caller) -> Result<Outcome, Error> {
    run_with(options.into(), None, progress)
}

/// [`run`] into a database the caller already holds open: its engine and
/// options apply (`options.profile` is replaced by the engine's profile,
/// which the summary names). `options.db` must be its path: the lock file,
/// the WAL truncation and the path checks use it.
pub fn run_into(
    db: &Database,
    mut options: ImportOptions,
    progress: &mut dyn Caller,
) -> Result<Outcome, Error> {
    options.profile = db.options().profile;
    run_with(options.into(), Some(db), progress)
}

fn run_with(
    mut args: FileArgs,
    shared: Option<&Database>,
    progress: &mut dyn Caller,
) -> Result<Outcome, Error> {
    args.check()?;
    args.nulls = sniff::null_tokens(&args.nulls, args.no_default_nulls);
    if let Some(t) = &args.table {
        args.table = Some(guard::parse_table_flag("--table", t)?);
    }
    if let Some(t) = &args.rejects_table {
        args.rejects_table = Some(guard::parse_table_flag("--rejects-table", t)?);
    }
    if let Some(list) = inputs::several(&args.source, &args.more)? {
        return files::run_all(args, list, shared, progress);
    }
    let sink = Summaries::default();
    args.summaries = Some(sink.clone());
    let status = run_in(args, shared, progress)?;
    let summary = sink.take().pop();
    Ok(Outcome { status, summary })
}

/// The database at `path`, opened with an import's engine options.
fn open_db(path: &Path, profile: litelane::Profile) -> Result<Database, Error> {
    let opts = Options {
        profile,
        readers: 1,
        async_threads: 1,
        ..Options::default()
    };
    Ok(Database::open(path, opts)?)
}

/// One file into the database `shared` holds open (several files in one
/// command: opened, and with `fast` its journal mode restored, once by the
/// caller), or into the database opened here.
fn run_in(
    args: FileArgs,
    shared: Option<&Database>,
    progress: &mut dyn Caller,
) -> Result<i32, Error> {
    let start = Instant::now();
    if args.commit_every == Some(0) {
        return Err(Error::Input("--commit-every must be at least 1".into()));
    }
    if args.resume && args.source == "-" {
        return Err(Error::Input(
            "cannot --resume an import from stdin: there is no way to tell it is the same input"
                .into(),
        ));
    }
    let table = match &args.table {
        Some(t) => t.clone(),
        None if args.source == "-" => {
            return Err(Error::Input(
                "--table is required when reading stdin".into(),
            ))
        }
        None => source::table_stem(&args.source).ok_or_else(|| {
            Error::Input(format!(
                "cannot make a table name from {:?}; give --table",
                args.source
            ))
        })?,
    };
    guard::check_table_name(&table)?;
    if let Some(rt) = &args.rejects_table {
        guard::check_table_name(rt)?;
        if rt.eq_ignore_ascii_case(&table) {
            return Err(Error::Input(format!(
                "--rejects-table {} is the table being imported into; give another name",
                quote_ident(rt)
            )));
        }
    }
    let input = source::open(&args.source)?;
    guard::check_input(&args.source, input.id, &args.db)?;
    if let Some(r) = &args.rejects {
        let mut protected = guard::database_files(&args.db);
        if args.source != "-" {
            protected.push(("the input".to_string(), PathBuf::from(&args.source)));
        }
        if let Some(p) = &args.plan {
            protected.push(("the --plan file".to_string(), p.clone()));
        }
        guard::check_output("--rejects", r, &protected)?;
    }
    guard::check_directory(&args.db)?;
    let _lock = guard::lock(&args.db, &table)?;
    // A database the import creates is written aside (`aside.rs`), without
    // a WAL (the `fast` profile's journal), and linked into place at the end.
    let aside = match shared {
        Some(_) => None,
        None => aside::Aside::for_import(&args, &table)?,
    };
    let owned = match (shared, &aside) {
        (Some(_), _) => None,
        (None, Some(a)) => Some(open_db(a.path(), litelane::Profile::Fast)?),
        (None, None) => Some(open_db(&args.db, args.profile)?),
    };
    let journal_before = match aside {
        Some(_) => None,
        None => journal_mode_to_restore(owned.as_ref()),
    };
    let db = shared.or(owned.as_ref()).expect("opened above");
    let result = import(&args, db, &table, input, aside.is_none(), progress);
    drop(owned);
    if let Some(mode) = journal_before {
        if let Err(e) = restore_journal_mode(&args.db, &mode) {
            return Err(match result {
                Ok(_) => e,
                Err(first) => Error::Input(format!("{first}; and then: {e}")),
            });
        }
    }
    let mut loaded = match result? {
        Imported::Ended(status) => return Ok(status),
        Imported::Loaded(loaded) => loaded,
    };
    if let Some(aside) = &aside {
        loaded.wal = Some(match aside.publish(&args)? {
            true => truncate_wal(&args.db),
            false => WalAfter::Truncated,
        });
    }
    Ok(report(&args, *loaded, start, progress))
}

/// How [`import`] ended.
enum Imported {
    /// Before any row was stored, or stopped: the exit status.
    Ended(i32),
    /// With its rows stored: what remains to report.
    Loaded(Box<Loaded>),
}

/// What an import that stored its rows tells the caller.
struct Loaded {
    plan: Plan,
    table: String,
    display: String,
    rejects_path: Option<String>,
    counts: feed::Counts,
    /// Per column: values kept as written (they did not fit its type).
    kept: Vec<u64>,
    null_counts: feed::NullCounts,
    /// What became of the WAL; `None` until the database written aside is
    /// in place.
    wal: Option<WalAfter>,
}

/// What became of the WAL after an import.
enum WalAfter {
    /// Copied into the database and truncated to 0 bytes.
    Truncated,
    /// The database is not in WAL mode.
    NotWal,
    /// Left as it is, and why (a reader holds it, an error).
    Kept(String),
}

/// Copies the WAL an import grew into the database and truncates it (a
/// TRUNCATE checkpoint), so that a bulk import does not leave a WAL as
/// large as its data. It waits for no reader (a connection of its own with
/// no busy timeout): when one holds the WAL, it is kept and the summary
/// says so. The engine's background checkpointer may be copying the same
/// WAL right after the last commit: busy, it is tried again for a moment.
fn truncate_wal(db: &Path) -> WalAfter {
    let c = match rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(c) => c,
        Err(e) => return WalAfter::Kept(e.to_string()),
    };
    if let Err(e) = c.busy_timeout(std::time::Duration::ZERO) {
        return WalAfter::Kept(e.to_string());
    }
    match c.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)) {
        Ok(m) if m.eq_ignore_ascii_case("wal") => {}
        Ok(_) => return WalAfter::NotWal,
        Err(e) => return WalAfter::Kept(e.to_string()),
    }
    let start = std::time::Instant::now();
    loop {
        let busy = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        });
        let again = start.elapsed() < TRUNCATE_FOR;
        match busy {
            Ok(0) => return WalAfter::Truncated,
            Ok(_) | Err(_) if again => std::thread::sleep(TRUNCATE_STEP),
            Ok(_) => break,
            Err(e) => return WalAfter::Kept(e.to_string()),
        }
    }
    WalAfter::Kept(format!(
        "another connection is reading from it; tried for {} ms",
        TRUNCATE_FOR.as_millis()
    ))
}

/// How long TRUNCATE checkpoints are tried after an import: 1 s.
const TRUNCATE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// The pause between two of them: 2 ms. The engine's background checkpoint
/// of the import's last commits is what usually makes the first one busy;
/// it ends within a step of the moment it finishes (a 50 ms step added up
/// to 50 ms to a 0.4 s import).
const TRUNCATE_STEP: std::time::Duration = std::time::Duration::from_millis(2);

/// Hidden test hook: lowers the length limit an import checks values
/// against (bytes), to test a record too long for SQLite without writing a
/// gigabyte.
const MAX_LENGTH_HOOK: &str = "LITELANE_TEST_MAX_LENGTH";

/// The most bytes of text one row may hold: the database connection's
/// SQLite length limit (SQLITE_LIMIT_LENGTH, 1,000,000,000 by default),
/// or the test hook's lower value.
fn max_length(db: &Database) -> Result<usize, Error> {
    let limit = db.read(|c| {
        c.limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH)
            .map_err(litelane::Error::from)
    })?;
    let limit = usize::try_from(limit).unwrap_or(crate::convert::DEFAULT_MAX_LENGTH);
    let hook = std::env::var(MAX_LENGTH_HOOK)
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    Ok(hook.map_or(limit, |h| h.min(limit)))
}

/// The journal mode a `--profile fast` open of the database replaced (the
/// engine's [`Database::journal_mode_to_restore`]: a file in WAL mode
/// leaves it under `fast`), to put back after the database is closed.
/// `None` for a database the caller holds open (`shared`, restored once by
/// the caller), and for other profiles.
fn journal_mode_to_restore(owned: Option<&Database>) -> Option<String> {
    owned
        .and_then(Database::journal_mode_to_restore)
        .map(str::to_string)
}

/// Puts back the journal mode a `--profile fast` import changed, once the
/// database is closed ([`litelane::restore_journal_mode`]).
fn restore_journal_mode(db: &Path, mode: &str) -> Result<(), Error> {
    let got = litelane::restore_journal_mode(db, mode)?;
    if !got.eq_ignore_ascii_case(mode) {
        return Err(Error::Input(format!(
            "the import is done, but {} could not be put back into journal mode {mode} (it is \
             {got}); run: sqlite3 {} 'PRAGMA journal_mode={mode}'",
            db.display(),
            db.display()
        )));
    }
    Ok(())
}

/// The canonical name of the source, the key of its progress record.
fn source_key(source: &str) -> String {
    if source == "-" {
        return "-".into();
    }
    std::fs::canonicalize(source)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| source.to_string())
}

/// The import proper, on an open database: prepare (fresh or resumed), run
/// the parser thread and the sink, and (when `truncate`) copy the WAL into
/// the database and truncate it. What is left to report is reported by
/// [`report`].
fn import(
    args: &FileArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    truncate: bool,
    caller: &mut dyn Caller,
) -> Result<Imported, Error> {
    let bytes_read = Arc::clone(&input.bytes_read);
    let size = input.size;
    let display = input.display.clone();
    let Some(prepared) = prepare(args, db, table, input, caller)? else {
        return Ok(Imported::Ended(EXIT_OK));
    };
    if caller.should_stop() {
        say::stopped(
            caller,
            "interrupted (Ctrl-C) before any row was written; nothing was committed",
        );
        return Ok(Imported::Ended(EXIT_INTERRUPTED));
    }
    let (table, plan) = (prepared.table, prepared.plan);
    caller.start(size);
    say_sniffed(&plan, caller);
    let rejects_path = prepared.rejects.path().map(|p| p.display().to_string());
    let (parser, rx) = start_parser(ParseJob {
        records: prepared.records,
        sample: prepared.sample,
        converter: converter(db, &plan)?,
        skip: prepared.skip,
        resume: prepared.resume,
        bytes_read,
        size,
        display: display.clone(),
    })?;
    let parts = (prepared.setup, prepared.progress, prepared.rejects);
    let sink = sink(args, db, &table, &plan, parts, caller, &display);
    let loaded = sink.run(rx);
    let Some((counts, kept, null_counts)) = rows_loaded(loaded, parser, caller)? else {
        return Ok(Imported::Ended(EXIT_INTERRUPTED));
    };
    let wal = truncate.then(|| truncate_wal(&args.db));
    Ok(Imported::Loaded(Box::new(Loaded {
        plan,
        table,
        display,
        rejects_path,
        counts,
        kept,
        null_counts,
        wal,
    })))
}

/// Tells the caller what an import that stored its rows did, and returns
/// its exit status.
fn report(args: &FileArgs, loaded: Loaded, start: Instant, caller: &mut dyn Caller) -> i32 {
    let wal = loaded
        .wal
        .expect("the WAL's outcome is known once the database is in place");
    let done = Finished::new(loaded.counts, loaded.kept, loaded.null_counts, wal, start);
    let (plan, table) = (&loaded.plan, &loaded.table);
    let rejects = loaded.rejects_path.as_deref();
    say_finished(args, plan, table, &loaded.display, &done, rejects, caller);
    files::emit(args, Summary::File(summary(args, plan, table, &done)));
    if done.counts.rejected > 0 {
        EXIT_REJECTS
    } else {
        EXIT_OK
    }
}

/// What the sniffer decided (header, preamble, dialect) and why: said
/// before the rows flow, so that a wrong guess can be stopped at once.
fn say_sniffed(plan: &Plan, caller: &mut dyn Caller) {
    if let Some(line) = plan
        .sniffed
        .as_ref()
        .and_then(|s| sniff::summary_line(s, plan.header))
    {
        say::info(caller, NoteKind::Sniffed, &line);
    }
}

/// The converter of `plan`'s values, its values' length capped as the
/// database caps it.
fn converter(db: &Database, plan: &Plan) -> Result<Converter, Error> {
    let mut converter = Converter::new(plan.clone());
    converter.set_max_length(max_length(db)?);
    Ok(converter)
}

/// The end of the rows' flow: the sink's counts once the parser thread is
/// joined, or `None` when the caller stopped the import (said, as an
/// interruption). A load that failed or was stopped does not wait for the
/// parser: it may be blocked reading a pipe whose writer goes on (`tail -f
/// log | litelane import -`), and it ends at its next batch, which nobody
/// receives.
fn rows_loaded(
    loaded: Result<(feed::Counts, Vec<u64>, feed::NullCounts), Error>,
    parser: std::thread::JoinHandle<()>,
    caller: &mut dyn Caller,
) -> Result<Option<(feed::Counts, Vec<u64>, feed::NullCounts)>, Error> {
    let joined = loaded.is_ok().then(|| parser.join());
    caller.finish();
    match loaded {
        Ok(c) if joined.is_some_and(|j| j.is_ok()) => Ok(Some(c)),
        Ok(_) => Err(Error::Input("the parser thread panicked".into())),
        Err(e) if caller.should_stop() => {
            say::stopped(caller, &e.to_string());
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The batches `job` parses, from a thread of their own, through a bounded
/// channel.
type Parsed = std::sync::mpsc::Receiver<Result<crate::convert::batch::Batch, Error>>;

/// Starts the parser thread running `job`.
fn start_parser(job: ParseJob) -> Result<(std::thread::JoinHandle<()>, Parsed), Error> {
    let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL_BATCHES);
    let parser = std::thread::Builder::new()
        .name("litelane-parse".into())
        .spawn(move || job.run(tx))
        .map_err(|e| Error::io("starting the parser thread", e))?;
    Ok((parser, rx))
}

/// Prepares the import of `input` into `table`, fresh or resumed (with the
/// progress recorded in the database, and the statements that migrate an
/// old progress table run first); `None` when a resumed import finds
/// nothing left to do.
fn prepare(
    args: &FileArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    caller: &mut dyn Caller,
) -> Result<Option<Prepared>, Error> {
    let recorded = resume::load(db, table)?;
    let migrate = resume::migrate_sql(db)?;
    let mut prepared = if args.resume {
        match prepare_resume(args, db, table, input, recorded, caller)? {
            Some(p) => p,
            None => return Ok(None),
        }
    } else {
        prepare_fresh(args, db, table, input, recorded)?
    };
    if args.keep_other_progress {
        prepared.rejects.name_source();
    }
    if !migrate.is_empty() {
        prepared.setup.splice(0..0, migrate);
    }
    Ok(Some(prepared))
}

/// Where the rows of `plan` go: the table's columns (and the source's
/// column, `--source-column`), the conflict key and action, the commits,
/// the rejects and the caller to tell.
fn sink<'a>(
    args: &'a FileArgs,
    db: &'a Database,
    table: &str,
    plan: &Plan,
    (setup, progress, rejects): (Vec<String>, Option<Progress>, Rejects),
    caller: &'a mut dyn Caller,
    display: &str,
) -> Sink<'a> {
    let mut columns: Vec<String> = plan.columns.iter().map(|c| c.name.clone()).collect();
    let key: Vec<usize> = plan
        .recurring
        .key
        .iter()
        .filter_map(|k| columns.iter().position(|c| c.eq_ignore_ascii_case(k)))
        .collect();
    let extra = plan.recurring.source_column.as_ref().map(|c| {
        columns.push(c.clone());
        args.source.as_str()
    });
    Sink {
        db,
        table: table.to_string(),
        columns,
        on_conflict: conflict::engine(plan.recurring.on_conflict, &plan.recurring.key),
        key,
        extra,
        commit_every: plan.commit_every,
        setup,
        progress,
        rejects,
        max_rejects: args.max_rejects,
        caller,
        input: display.to_string(),
        rejects_table: plan.rejects_table.clone(),
        source: source_key(&args.source),
        types: plan.columns.iter().map(|c| c.ty).collect(),
    }
}

/// What a finished run stored and how long it took.
struct Finished {
    counts: feed::Counts,
    /// Per column: values kept as written (they did not fit its type).
    kept: Vec<u64>,
    null_counts: feed::NullCounts,
    wal: WalAfter,
    seconds: f64,
    /// Rows stored per second.
    rate: f64,
}

impl Finished {
    /// The run begun at `start`, finished now.
    fn new(
        counts: feed::Counts,
        kept: Vec<u64>,
        null_counts: feed::NullCounts,
        wal: WalAfter,
        start: Instant,
    ) -> Finished {
        let seconds = start.elapsed().as_secs_f64();
        Finished {
            rate: counts.inserted as f64 / seconds.max(1e-9),
            seconds,
            counts,
            kept,
            null_counts,
            wal,
        }
    }
}

/// Tells the caller what a finished run did: kept values, null tokens, the
/// WAL left untruncated, and the rows, rejects and skips.
fn say_finished(
    args: &FileArgs,
    plan: &Plan,
    table: &str,
    display: &str,
    done: &Finished,
    rejects_path: Option<&str>,
    caller: &mut dyn Caller,
) {
    let counts = &done.counts;
    let rejected = match (counts.rejected, rejects_path) {
        (0, _) => String::new(),
        (n, Some(p)) => format!("; {} records rejected (see {p})", group(n)),
        (n, None) => format!("; {} records rejected (reported above)", group(n)),
    };
    let blank = match counts.blank {
        0 => String::new(),
        n => format!("; {} blank lines skipped", group(n)),
    };
    let blank = match counts.skipped {
        0 => blank,
        n => format!("{blank}; {} rows skipped: key already present", group(n)),
    };
    let mut lines = Vec::new();
    lines.extend(kept_line(plan, &done.kept));
    lines.extend(nulls_line(plan, &done.null_counts));
    if let WalAfter::Kept(why) = &done.wal {
        lines.push(format!(
            "the WAL file {}-wal was not truncated ({why}); it is reused, or run \
             `litelane checkpoint {} --mode truncate` when the readers are done",
            args.db.display(),
            args.db.display()
        ));
    }
    lines.push(format!(
        "imported {} rows into {} from {display} in {:.2} s ({} rows/s){rejected}{blank}",
        group(counts.inserted),
        quote_ident(table),
        done.seconds,
        group(done.rate as u64),
    ));
    for line in &lines {
        say::info(caller, NoteKind::Finished, line);
    }
}

/// The summary of a finished run (see `docs/import.md`).
fn summary(args: &FileArgs, plan: &Plan, table: &str, done: &Finished) -> FileSummary {
    let counts = &done.counts;
    FileSummary {
        table: table.to_string(),
        rows_inserted: counts.inserted,
        rows_rejected: counts.rejected,
        blank_lines: counts.blank,
        seconds: done.seconds,
        rows_per_sec: done.rate,
        columns: plan
            .columns
            .iter()
            .map(|c| ColumnSummary {
                name: c.name.clone(),
                ty: c.ty.sql().to_string(),
            })
            .collect(),
        profile: args.profile.name().to_string(),
        rows_skipped: counts.skipped,
        source: args.source.clone(),
        sniffed: plan.sniffed.as_ref().map(|s| SniffedSummary {
            delimiter: s.delimiter.to_string(),
            quote: s.quote.map(|q| q.to_string()),
            header: plan.header,
            skipped_rows: s.skip_rows,
            index_column: s.index_column,
            header_reason: s.header_reason.clone(),
            header_trailing_delimiter: s.header_trailing_delimiter,
        }),
        // Values that did not fit their column's type, stored as written.
        kept_as_text: plan
            .columns
            .iter()
            .zip(&done.kept)
            .filter(|(_, &n)| n > 0)
            .map(|(c, &n)| (c.name.clone(), n))
            .collect(),
        null_tokens: nulls_met(plan, &done.null_counts),
        wal_truncated: match &done.wal {
            WalAfter::Truncated => Some(true),
            WalAfter::NotWal => None,
            WalAfter::Kept(_) => Some(false),
        },
    }
}

/// The summary line for values that did not fit their column's type and
/// were stored as written (text SQLite keeps as text): `None` when there
/// were none.
fn kept_line(plan: &Plan, kept: &[u64]) -> Option<String> {
    let per: Vec<String> = plan
        .columns
        .iter()
        .zip(kept)
        .filter(|(_, &n)| n > 0)
        .map(|(c, &n)| format!("{} {} {}", quote_ident(&c.name), c.ty.sql(), group(n)))
        .collect();
    if per.is_empty() {
        return None;
    }
    let total: u64 = kept.iter().sum();
    Some(format!(
        "{} values did not fit their column's type and were stored as written (text): {} \
         (--strict rejects them instead; `typeof()` finds them)",
        group(total),
        per.join(", ")
    ))
}

/// Per column, each null token met and how many fields it made NULL:
/// `{"col": {"": 3, "NA": 1}}` (columns and tokens never met left out).
fn nulls_met(plan: &Plan, counts: &feed::NullCounts) -> Vec<(String, Counts)> {
    let mut out = Vec::new();
    for (i, (col, tokens)) in plan
        .columns
        .iter()
        .zip(columns::column_nulls(plan))
        .enumerate()
    {
        let met: Counts = tokens
            .iter()
            .enumerate()
            .filter(|(k, _)| counts.get(i, *k) > 0)
            .map(|(k, t)| (t.clone(), counts.get(i, k)))
            .collect();
        if !met.is_empty() {
            out.push((col.name.clone(), met));
        }
    }
    out
}

/// The summary line naming the null tokens stored as NULL, per column:
/// `None` when no field was a null token.
fn nulls_line(plan: &Plan, counts: &feed::NullCounts) -> Option<String> {
    let mut per = Vec::new();
    for (i, (col, tokens)) in plan
        .columns
        .iter()
        .zip(columns::column_nulls(plan))
        .enumerate()
    {
        let met: Vec<String> = tokens
            .iter()
            .enumerate()
            .filter(|(k, _)| counts.get(i, *k) > 0)
            .map(|(k, t)| format!("{t:?} {}", group(counts.get(i, k))))
            .collect();
        if !met.is_empty() {
            per.push(format!(
                "{} {} ({})",
                quote_ident(&col.name),
                col.ty.sql(),
                met.join(", ")
            ));
        }
    }
    (!per.is_empty()).then(|| format!("stored as NULL (null tokens): {}", per.join("; ")))
}

fn absolute(p: &std::path::Path) -> Result<PathBuf, Error> {
    std::path::absolute(p).map_err(|e| Error::io(format!("resolving {}", p.display()), e))
}

/// A new import: read the sniffed layout, the header and a sample (and the
/// existing table), decide the plan in the pure steps of [`plan`], then
/// open the rejects output and collect the statements to run first.
// About 90 lines: three commented stages (read, decide, write), each a few
// calls into `plan`, most of the length their argument lists.
fn prepare_fresh(
    args: &FileArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    recorded: Vec<Progress>,
) -> Result<Prepared, Error> {
    let mode = args.mode.unwrap_or(Mode::Create);
    let types = args.types.unwrap_or(Types::Infer);
    let flags = plan::ColumnFlags {
        overrides: sniff::type_overrides(&args.types_for)?,
        strict: args.strict,
        alter: args.alter,
        source_column: args.source_column.clone(),
    };
    plan::check_interrupted(mode, &recorded)?;
    let mut existing = table::existing(db, table)?;
    plan::check_create(mode, existing.as_ref(), table, &args.db)?;
    let display = input.display.clone();

    // Read: the sniffed (or given) plan of a CSV/TSV file, then the
    // preamble, the header and the sample.
    let fingerprint = input.fingerprint.clone();
    let (sniffed, layout, records, sample) = read_fresh(args, types, input)?;

    // Decide: the input's columns, the key, the table's columns and DDL.
    let inputs = match &sniffed {
        Some(p) => plan::csv_inputs(p, types),
        None => plan::ndjson_inputs(&sample, types, existing.is_some(), &display)?,
    };
    let fields = inputs.fields;
    let key = plan::key_flags(args.pk.as_deref(), args.on_conflict)?;
    let drop_first = mode == Mode::Replace && existing.is_some();
    let (target, appended) = match (existing.as_mut(), mode) {
        (Some(t), Mode::Append) => {
            // Read only when --on-conflict needs the key to be unique.
            let indexes = match !key.names.is_empty() && key.on_conflict != OnConflict::Fail {
                true => conflict::unique_indexes(db, &t.name)?,
                false => Vec::new(),
            };
            let target = plan::append_table(t, layout.format, inputs, &flags, &key, &indexes)?;
            (target, Some(&*t))
        }
        _ => {
            let target = plan::new_table(table, inputs, &flags, &key, drop_first, &display)?;
            (target, None)
        }
    };
    plan::check_key_imported(key.on_conflict, &target.key, &target.columns)?;
    let source_column =
        plan::finish_columns(&target, args.source_column.as_deref(), appended, &display)?;
    let plan = plan::import_plan(
        layout,
        fields,
        &target,
        key.on_conflict,
        sniffed.as_ref(),
        args,
    );

    // Write: the rejects output, the statements, the progress record.
    let rejects = fresh_rejects(args, &display)?;
    let source = source_key(&args.source);
    let mut setup = target.setup;
    setup.extend(source_column);
    setup.extend(plan::bookkeeping_sql(
        args,
        mode,
        &target.table,
        !recorded.is_empty(),
        &source,
    ));
    let progress = plan::progress_record(
        &target.table,
        &source,
        fingerprint,
        &plan,
        rejects.path().map(|p| p.display().to_string()),
        args.commit_every,
    );
    Ok(Prepared {
        table: target.table,
        plan,
        records,
        sample,
        skip: 0,
        resume: None,
        setup,
        progress,
        rejects,
    })
}

/// What a fresh import reads before it decides: the sniffed (or given)
/// plan of a CSV/TSV file, then the preamble, the header and the sample.
/// The format is the given one, else the extension's, else JSON when the
/// content starts as JSON.
fn read_fresh(
    args: &FileArgs,
    types: Types,
    mut input: source::Input,
) -> Result<
    (
        Option<sniff::SniffPlan>,
        plan::Layout,
        Records,
        Vec<RawOwned>,
    ),
    Error,
> {
    let display = input.display.clone();
    let mut format = plan::given_format(args.format, &args.source);
    if args.format.is_none()
        && args.plan.is_none()
        && source::Format::from_name(&args.source).is_none()
        && records::starts_json(&mut input.reader)
            .map_err(|e| Error::io(format!("reading {display}"), e))?
    {
        // No extension to go by, and the content is JSON.
        format = Format::Ndjson;
    }
    let sniffed = sniff::plan_for_import(
        args.plan.as_ref(),
        format,
        args.delimiter,
        args.header,
        args.no_header,
        &args.nulls,
        types == Types::Text,
        &mut input,
        &args.source,
    )?;
    let layout = plan::layout(format, sniffed.as_ref(), args.no_header, &args.nulls);
    let mut records = match &sniffed {
        Some(p) => p.sniffed().records(layout.format, input.reader),
        None => Records::new(layout.format, input.reader),
    };
    plan::read_header(&mut records, &layout, sniffed.as_ref(), &display)?;
    let sample = plan::read_sample(&mut records, &display)?;
    Ok((sniffed, layout, records, sample))
}

/// The rejects output of a fresh import: `--rejects` FILE (started anew,
/// or appended to for the files after the first of a run over several), or
/// stderr.
fn fresh_rejects(args: &FileArgs, display: &str) -> Result<Rejects, Error> {
    let Some(p) = &args.rejects else {
        return Ok(Rejects::stderr(display));
    };
    let p = absolute(p)?;
    let keep = match args.rejects_append {
        true => std::fs::metadata(&p).map_or(0, |m| m.len()),
        false => 0,
    };
    Rejects::file(&p, keep, display)
}

/// `--resume`: the recorded plan, the same file, and where to continue.
/// `None` when the recorded import already finished.
fn prepare_resume(
    args: &FileArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    recorded: Vec<Progress>,
    caller: &mut dyn Caller,
) -> Result<Option<Prepared>, Error> {
    use plan::resumed;
    let display = input.display.clone();
    let rec = resumed::pick_record(
        &recorded,
        &source_key(&args.source),
        &args.source,
        &display,
        &args.db,
        table,
    )?;
    if rec.state == resume::DONE {
        already_finished(args, &rec, caller);
        return Ok(None);
    }
    resumed::check_resume_flags(args, &rec.plan)?;
    resumed::check_fingerprint(&rec, input.fingerprint.as_deref(), &display)?;
    if table::existing(db, &rec.table)?.is_none() {
        return Err(Error::Input(format!(
            "table {} of the interrupted import no longer exists; start over without --resume",
            quote_ident(&rec.table)
        )));
    }
    let (plan, setup) = resumed::resumed_plan(&rec.plan, args);
    let mut records = match &plan.sniffed {
        Some(s) => s.records(plan.format, input.reader),
        None => Records::new(plan.format, input.reader),
    };
    for _ in 0..resumed::records_before_data(&plan) {
        records.next_record(&display)?;
    }
    let given = match &args.rejects {
        Some(p) => Some(absolute(p)?.display().to_string()),
        None => None,
    };
    let target = resumed::rejects_target(given, &rec);
    let rejects = match &target.path {
        Some(p) => {
            let path = Path::new(p);
            if target.recheck {
                let mut protected = guard::database_files(&args.db);
                protected.push(("the input".to_string(), PathBuf::from(&args.source)));
                for f in &args.all_inputs {
                    protected.push((format!("the input {f}"), PathBuf::from(f)));
                }
                guard::check_output("the recorded rejects file", path, &protected)?;
            }
            Rejects::file(path, target.keep, &display)?
        }
        None => Rejects::stderr(&display),
    };
    let mut progress = rec.clone();
    progress.plan = plan.clone();
    Ok(Some(Prepared {
        table: rec.table.clone(),
        plan,
        records,
        sample: Vec::new(),
        skip: rec.records_read,
        resume: resumed::resume_point(&rec),
        setup,
        progress: Some(progress),
        rejects,
    }))
}

/// Says that the recorded import already finished (a note, and its
/// summary).
fn already_finished(args: &FileArgs, rec: &Progress, caller: &mut dyn Caller) {
    say::info(
        caller,
        NoteKind::AlreadyFinished,
        &format!(
            "the import of {} into {} already finished ({} rows); nothing to resume",
            rec.source,
            quote_ident(&rec.table),
            group(rec.rows_inserted)
        ),
    );
    let summary = AlreadyFinished {
        table: rec.table.clone(),
        already_finished: true,
        rows_inserted: 0,
        rows_skipped: 0,
        rows_rejected: 0,
        total_rows_inserted: rec.rows_inserted,
        total_rows_rejected: rec.rows_rejected,
        source: rec.source.clone(),
        profile: args.profile.name().to_string(),
    };
    files::emit(args, Summary::AlreadyFinished(summary));
}

/// `1234567` → `1,234,567`.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn digits_are_grouped_by_thousands() {
        assert_eq!(super::group(0), "0");
        assert_eq!(super::group(999), "999");
        assert_eq!(super::group(1000), "1,000");
        assert_eq!(super::group(1234567), "1,234,567");
    }
}
