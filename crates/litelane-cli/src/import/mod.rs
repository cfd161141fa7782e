//! `litelane import`: load a CSV, TSV or NDJSON file into a table.
//!
//! One thread reads and parses the input into batches of typed rows
//! ([`parse`], [`convert`]); the calling thread stores them ([`sink`]) through
//! the engine's writer, with a bounded channel of batches between the two.
//! Column types are inferred from the first [`SAMPLE_RECORDS`] records
//! ([`values`]). Every record is either stored or rejected ([`rejects`]). By
//! default the whole import is one transaction; with `--commit-every` it
//! commits every N rows and keeps its progress in the database ([`resume`]).
//! Output paths, the per-table lock and reserved names are checked first
//! ([`guard`]). See `docs/import.md`.

mod alter;
mod batch;
mod conflict;
mod convert;
mod dialect;
mod files;
#[doc(hidden)]
pub mod fuzzing;
mod guard;
mod parse;
mod progress;
mod rejects;
mod resume;
mod sink;
pub mod sniff;
mod source;
mod table;
mod values;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use litelane::{quote_ident, Database, Options, Profile};

use conflict::OnConflict;
use convert::{ColumnPlan, Converter, Plan};
use parse::{ParseJob, RawOwned, RawRef, Records, ResumePoint};
use progress::{group, Bar};
use rejects::Rejects;
use resume::Progress;
use sink::Sink;
use source::Format;
use values::{ColType, Inference};

use crate::error::CliError;

/// Records read ahead to decide the column types (and, for NDJSON, the
/// columns). Values after them that do not fit their column's type are
/// stored as they are (or rejected with `--strict`).
pub const SAMPLE_RECORDS: usize = 10_000;

/// Batches in flight between the parser and the writer.
const CHANNEL_BATCHES: usize = 4;

/// How column types are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Types {
    /// INTEGER, REAL or TEXT per column, from the data.
    Infer,
    /// Every column TEXT, values kept as written.
    Text,
}

/// What to do with the target table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Create the table; fail if it exists.
    Create,
    /// Add rows to the table (created if missing), columns matched by name.
    Append,
    /// Drop the table if it exists and create it anew (in the same
    /// transaction as the first rows).
    Replace,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse::<Profile>().map_err(|e| e.to_string())
}

/// Arguments of `litelane import`.
#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
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
    pub format: Option<Format>,
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
    /// A field equal to TOKEN is stored as NULL (repeatable; default: the
    /// empty field). `--null ''` adds the empty field to other tokens.
    #[arg(long = "null", value_name = "TOKEN")]
    pub nulls: Vec<String>,
    /// Column types: inferred from the data, or all TEXT [default: infer].
    #[arg(long, value_enum)]
    pub types: Option<Types>,
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
    pub on_conflict: Option<OnConflict>,
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
    pub mode: Option<Mode>,
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
    #[arg(long)]
    pub quiet: bool,
    /// Print one JSON summary object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Set for each file of a run over several files: keep the progress
    /// records of the other files (they say which are done).
    #[arg(skip)]
    pub keep_other_progress: bool,
    /// Set for the files after the first of a run over several files: the
    /// rejects file is appended to, not started anew.
    #[arg(skip)]
    pub rejects_append: bool,
    /// Set for each file of a run over several files: the JSON summary goes
    /// here instead of stdout.
    #[arg(skip)]
    pub summaries: Option<files::Summaries>,
}

/// Exit status: every record stored.
pub const EXIT_OK: i32 = 0;
/// Exit status: the import finished, but some records were rejected.
pub const EXIT_REJECTS: i32 = 3;
/// Exit status: interrupted by Ctrl-C (SIGINT), as shells report it.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Set by the Ctrl-C handler.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

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

/// Runs `litelane import`; returns the exit status ([`EXIT_OK`],
/// [`EXIT_REJECTS`] or [`EXIT_INTERRUPTED`]); an error is status 1.
pub fn run(args: ImportArgs) -> Result<i32, CliError> {
    if let Some(list) = files::several(&args)? {
        return files::run_all(args, list);
    }
    run_one(args)
}

/// One file.
fn run_one(args: ImportArgs) -> Result<i32, CliError> {
    let start = Instant::now();
    if args.commit_every == Some(0) {
        return Err(CliError::Input("--commit-every must be at least 1".into()));
    }
    if args.resume && args.source == "-" {
        return Err(CliError::Input(
            "cannot --resume an import from stdin: there is no way to tell it is the same input"
                .into(),
        ));
    }
    let table = match &args.table {
        Some(t) => t.clone(),
        None if args.source == "-" => {
            return Err(CliError::Input(
                "--table is required when reading stdin".into(),
            ))
        }
        None => source::table_stem(&args.source).ok_or_else(|| {
            CliError::Input(format!(
                "cannot make a table name from {:?}; give --table",
                args.source
            ))
        })?,
    };
    guard::check_table_name(&table)?;
    if let Some(rt) = &args.rejects_table {
        guard::check_table_name(rt)?;
        if rt.eq_ignore_ascii_case(&table) {
            return Err(CliError::Input(format!(
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
        guard::check_output("--rejects", r, &protected)?;
    }
    guard::check_directory(&args.db)?;
    let _lock = guard::lock(&args.db, &table)?;
    let journal_before = if args.profile == Profile::Fast {
        journal_mode(&args.db)
    } else {
        None
    };
    // Ctrl-C stops the import at the next record, keeping what is committed.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));

    let opts = Options {
        profile: args.profile,
        readers: 1,
        async_threads: 1,
        ..Options::default()
    };
    let db = Database::open(&args.db, opts)?;
    let result = import(&args, &db, &table, input, start);
    drop(db);
    if let Some(mode) = journal_before {
        if let Err(e) = restore_journal_mode(&args.db, &mode) {
            return Err(match result {
                Ok(_) => e,
                Err(first) => CliError::Input(format!("{first}; and then: {e}")),
            });
        }
    }
    result
}

/// The journal mode of an existing database file, read without changing it.
fn journal_mode(db: &Path) -> Option<String> {
    if !db.is_file() || std::fs::metadata(db).ok()?.len() == 0 {
        return None;
    }
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()?;
    c.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
        .ok()
}

/// Puts back the journal mode a `--profile fast` import changed.
fn restore_journal_mode(db: &Path, mode: &str) -> Result<(), CliError> {
    let c = rusqlite::Connection::open(db)?;
    let now: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if now.eq_ignore_ascii_case(mode) {
        return Ok(());
    }
    let got: String = c.query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get(0))?;
    if !got.eq_ignore_ascii_case(mode) {
        return Err(CliError::Input(format!(
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
/// the parser thread and the sink, and report. Returns the exit status.
fn import(
    args: &ImportArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    start: Instant,
) -> Result<i32, CliError> {
    let recorded = resume::load(db, table)?;
    let migrate = resume::migrate_sql(db)?;
    let bytes_read = Arc::clone(&input.bytes_read);
    let size = input.size;
    let display = input.display.clone();
    let prepared = if args.resume {
        match prepare_resume(args, db, table, input, recorded)? {
            Some(p) => p,
            None => return Ok(EXIT_OK),
        }
    } else {
        prepare_fresh(args, db, table, input, recorded)?
    };
    let Prepared {
        table,
        plan,
        records,
        sample,
        skip,
        resume: point,
        mut setup,
        progress,
        mut rejects,
    } = prepared;
    if args.keep_other_progress {
        rejects.name_source();
    }
    if !migrate.is_empty() {
        setup.splice(0..0, migrate);
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!(
            "litelane: interrupted (Ctrl-C) before any row was written; nothing was committed"
        );
        return Ok(EXIT_INTERRUPTED);
    }

    let bar = Bar::new(!args.quiet, size);
    let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL_BATCHES);
    let job = ParseJob {
        records,
        sample,
        converter: Converter::new(plan.clone()),
        skip,
        resume: point,
        bytes_read,
        size,
        display: display.clone(),
    };
    let parser = std::thread::Builder::new()
        .name("litelane-parse".into())
        .spawn(move || job.run(tx))
        .map_err(|e| CliError::io("starting the parser thread", e))?;
    let rejects_path = rejects.path().map(|p| p.display().to_string());
    let mut columns: Vec<String> = plan.columns.iter().map(|c| c.name.clone()).collect();
    let key: Vec<usize> = plan
        .recurring
        .key
        .iter()
        .filter_map(|k| columns.iter().position(|c| c.eq_ignore_ascii_case(k)))
        .collect();
    let extra = plan.recurring.source_column.as_ref().map(|c| {
        columns.push(c.clone());
        args.source.clone()
    });
    let statement = conflict::statement(
        &table,
        &columns,
        &plan.recurring.key,
        plan.recurring.on_conflict,
    );
    let sink = Sink {
        db,
        table: table.clone(),
        columns,
        statement,
        key,
        extra,
        commit_every: plan.commit_every,
        setup,
        progress,
        rejects,
        max_rejects: args.max_rejects,
        bar: &bar,
        input: display.clone(),
        interrupted: &INTERRUPTED,
        rejects_table: plan.rejects_table.clone(),
        source: source_key(&args.source),
    };
    let result = sink.run(rx);
    let joined = parser.join();
    bar.finish();
    let counts = match result {
        Ok(c) => c,
        Err(e) if INTERRUPTED.load(Ordering::SeqCst) => {
            eprintln!("litelane: {e}");
            return Ok(EXIT_INTERRUPTED);
        }
        Err(e) => return Err(e),
    };
    if joined.is_err() {
        return Err(CliError::Input("the parser thread panicked".into()));
    }

    let seconds = start.elapsed().as_secs_f64();
    let rate = counts.inserted as f64 / seconds.max(1e-9);
    if !args.quiet {
        let rejected = match (counts.rejected, &rejects_path) {
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
        if let Some(line) = plan
            .sniffed
            .as_ref()
            .and_then(|s| sniff::summary_line(s, plan.header))
        {
            eprintln!("litelane: {line}");
        }
        eprintln!(
            "litelane: imported {} rows into {} from {display} in {seconds:.2} s ({} rows/s){rejected}{blank}",
            group(counts.inserted),
            quote_ident(&table),
            group(rate as u64),
        );
    }
    if args.json || args.summaries.is_some() {
        let columns: Vec<serde_json::Value> = plan
            .columns
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "type": c.ty.sql()}))
            .collect();
        let mut summary = serde_json::json!({
            "table": table,
            "rows_inserted": counts.inserted,
            "rows_rejected": counts.rejected,
            "blank_lines": counts.blank,
            "seconds": seconds,
            "rows_per_sec": rate,
            "columns": columns,
            "profile": args.profile.name(),
            "rows_skipped": counts.skipped,
            "source": args.source,
        });
        if let Some(s) = &plan.sniffed {
            summary["sniffed"] = sniff::summary_json(s, plan.header);
        }
        files::emit(args, summary);
    }
    Ok(if counts.rejected > 0 {
        EXIT_REJECTS
    } else {
        EXIT_OK
    })
}

fn absolute(p: &std::path::Path) -> Result<PathBuf, CliError> {
    std::path::absolute(p).map_err(|e| CliError::io(format!("resolving {}", p.display()), e))
}

/// A new import: header, sample, types, table statements.
fn prepare_fresh(
    args: &ImportArgs,
    db: &Database,
    table: &str,
    mut input: source::Input,
    recorded: Vec<Progress>,
) -> Result<Prepared, CliError> {
    let mode = args.mode.unwrap_or(Mode::Create);
    let overrides = sniff::type_overrides(&args.types_for)?;
    let types = args.types.unwrap_or(Types::Infer);
    if let Some(rec) = recorded.iter().find(|r| r.state == resume::RUNNING) {
        if mode != Mode::Replace {
            return Err(CliError::Input(format!(
                "an import of {} into {} was interrupted after line {} ({} rows committed); \
                 continue it with --resume, or start over with --mode replace",
                rec.source,
                quote_ident(&rec.table),
                rec.last_line,
                rec.rows_inserted
            )));
        }
    }
    let existing = table::existing(db, table)?;
    if mode == Mode::Create && existing.is_some() {
        return Err(CliError::Input(format!(
            "table {} already exists in {}; use --mode append to add rows or --mode replace \
             to recreate it",
            quote_ident(table),
            args.db.display()
        )));
    }
    let format = args
        .format
        .or_else(|| Format::from_name(&args.source))
        .unwrap_or(Format::Csv);
    let display = input.display.clone();
    // CSV/TSV: the sniffed (or given) plan: dialect, skipped lines, header,
    // index column, types, null tokens.
    let sniffed = sniff::plan_for_import(
        args.plan.as_ref(),
        format,
        args.delimiter,
        args.header,
        args.no_header,
        &args.nulls,
        args.types == Some(Types::Text),
        &mut input,
        &args.source,
    )?;
    let format = sniffed.as_ref().map_or(format, |p| p.format);
    let mut records = match &sniffed {
        Some(p) => p.sniffed().records(format, input.reader),
        None => Records::new(format, input.reader),
    };
    let nulls = match (&sniffed, args.nulls.is_empty()) {
        (_, false) => args.nulls.clone(),
        (Some(p), true) => p.nulls.clone(),
        (None, true) => vec![String::new()],
    };
    let has_header = sniffed.as_ref().map_or(!args.no_header, |p| p.header);
    for _ in 0..sniffed.as_ref().map_or(0, |p| p.skip_rows) {
        records.next_record(&display)?;
    }

    // The header, and a sample of records to infer from.
    let mut header: Option<Vec<String>> = None;
    if format != Format::Ndjson && has_header {
        match records.next_record(&display)? {
            Some(RawRef::Csv(r, at)) => {
                let names = header_names(r, at.line, &display)?;
                header = Some(match &sniffed {
                    Some(p) => sniffed_names(p, names.len(), at.line, &display)?,
                    None => names,
                })
            }
            _ => {
                return Err(CliError::Input(format!(
                    "{display} is empty: there is no header line to name the columns"
                )))
            }
        }
    }
    let mut sample = Vec::new();
    while sample.len() < SAMPLE_RECORDS {
        match records.next_record(&display)? {
            Some(r) => sample.push(r.to_owned()),
            None => break,
        }
    }

    // Input columns (keys) and what the sample says about them.
    let (keys, fields, inference) = match format {
        Format::Csv | Format::Tsv => {
            let fields = match (&header, sample.first(), &sniffed) {
                (Some(h), _, _) => h.len(),
                (None, _, Some(p)) => p.columns.len(),
                (None, Some(RawOwned::Csv(r, _)), _) => r.len(),
                _ => {
                    return Err(CliError::Input(format!(
                        "{display} is empty: no record to count the columns of"
                    )))
                }
            };
            let mut inf = vec![Inference::default(); fields];
            for raw in sample.iter().filter(|_| sniffed.is_none()) {
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
            let keys = header.unwrap_or_else(|| match &sniffed {
                Some(p) => p.columns.iter().map(|c| c.name.clone()).collect(),
                None => (1..=fields).map(|i| format!("c{i}")).collect(),
            });
            (keys, fields, inf)
        }
        Format::Ndjson => {
            let mut keys: Vec<String> = Vec::new();
            let mut seen: HashSet<String> = HashSet::new();
            let mut by_key: HashMap<String, Inference> = HashMap::new();
            for raw in &sample {
                if let RawOwned::Json(b, _) = raw {
                    if let Ok(serde_json::Value::Object(o)) = serde_json::from_slice(b) {
                        let raws = if convert::has_long_number(b) {
                            convert::raw_values(b)
                        } else {
                            None
                        };
                        for (k, v) in &o {
                            if seen.insert(k.clone()) {
                                keys.push(k.clone());
                            }
                            let text = raws.as_ref().and_then(|m| m.get(k)).map(|r| r.get());
                            by_key.entry(k.clone()).or_default().observe_json(v, text);
                        }
                    }
                }
            }
            if keys.is_empty() && existing.is_none() {
                return Err(CliError::Input(format!(
                    "{display}: no JSON object among the first {} records to take the columns from",
                    sample.len()
                )));
            }
            let inf = keys.iter().map(|k| by_key[k]).collect();
            (keys, 0, inf)
        }
    };

    let mut setup = Vec::new();
    let key_names = match &args.pk {
        Some(pk) => conflict::parse_key(pk)?,
        None => Vec::new(),
    };
    let on_conflict = args.on_conflict.unwrap_or_default();
    if on_conflict != OnConflict::Fail && key_names.is_empty() {
        return Err(CliError::Input(format!(
            "--on-conflict {} needs --pk COL[,COL]: the key that tells a row already present",
            on_conflict.name()
        )));
    }
    let mut key = Vec::new();
    let mut existing = existing;
    // The type each input column would get in a new table (for --alter).
    let decided: Vec<ColType> = (0..keys.len())
        .map(|i| match (types, &sniffed) {
            (Types::Text, _) => ColType::Text,
            (Types::Infer, Some(p)) => p.columns.get(i).map_or(ColType::Text, |c| c.ty),
            (Types::Infer, None) => inference.get(i).map_or(ColType::Text, Inference::decide),
        })
        .collect();
    let (table, columns) = match (existing.as_mut(), mode) {
        (Some(t), Mode::Append) => {
            let cols = if format == Format::Ndjson {
                if args.alter {
                    setup.extend(alter::add_missing(&keys, &decided, t, true)?);
                }
                t.columns
                    .iter()
                    .filter(|c| {
                        !args
                            .source_column
                            .as_ref()
                            .is_some_and(|s| s.eq_ignore_ascii_case(&c.name))
                    })
                    .enumerate()
                    .map(|(i, c)| {
                        let ty = ColType::from_declared(&c.declared);
                        ColumnPlan {
                            name: c.name.clone(),
                            ty,
                            strict: (args.strict || t.strict || c.rowid_alias)
                                && matches!(ty, ColType::Integer | ColType::Real),
                            src: i,
                            key: c.name.clone(),
                        }
                    })
                    .collect()
            } else {
                let names = table::column_names(Some(keys), fields);
                setup.extend(alter::add_missing(&names, &decided, t, args.alter)?);
                table::match_columns(&names, t, args.strict)?
            };
            if !overrides.is_empty() {
                return Err(CliError::Input(format!(
                    "--type applies to a new table; {} exists and its columns keep their types",
                    quote_ident(&t.name)
                )));
            }
            if !key_names.is_empty() {
                key = if on_conflict == OnConflict::Fail {
                    conflict::spell_key(t, &key_names)?
                } else {
                    conflict::check_existing_key(db, t, &key_names, on_conflict)?
                };
            }
            (t.name.clone(), cols)
        }
        _ => {
            let names = table::column_names(Some(keys.clone()), keys.len());
            let mut cols: Vec<ColumnPlan> = names
                .into_iter()
                .zip(keys)
                .enumerate()
                .map(|(i, (name, key))| {
                    let ty = match (types, &sniffed) {
                        (Types::Infer, Some(p)) => p.columns[i].ty,
                        (Types::Infer, None) => inference[i].decide(),
                        (Types::Text, _) => ColType::Text,
                    };
                    ColumnPlan {
                        name,
                        ty,
                        strict: args.strict && ty != ColType::Text,
                        src: i,
                        key,
                    }
                })
                .collect();
            sniff::apply_overrides(&mut cols, &overrides)?;
            for c in cols.iter_mut() {
                c.strict = args.strict && c.ty != ColType::Text;
            }
            let pk = conflict::key_positions(&cols, &key_names, &display)?;
            conflict::mark_key_strict(&mut cols, &pk);
            key = pk.iter().map(|&i| cols[i].name.clone()).collect();
            if mode == Mode::Replace && existing.is_some() {
                setup.push(format!("DROP TABLE {}", quote_ident(table)));
            }
            setup.push(conflict::create_sql(table, &cols, &pk, args.strict));
            (table.to_string(), cols)
        }
    };
    if on_conflict != OnConflict::Fail {
        if let Some(k) = key
            .iter()
            .find(|k| !columns.iter().any(|c| c.name.eq_ignore_ascii_case(k)))
        {
            return Err(CliError::Input(format!(
                "--pk {}: the input has no such column, so its rows cannot be matched to \
                 the stored ones",
                quote_ident(k)
            )));
        }
    }
    if let Some(sc) = &args.source_column {
        let table_cols = match (&existing, mode) {
            (Some(t), Mode::Append) => Some(t),
            _ => None,
        };
        setup.extend(files::source_column_sql(&table, sc, &columns, table_cols)?);
    }
    if columns.is_empty() {
        return Err(CliError::Input(format!("{display}: no columns to import")));
    }

    let plan = Plan {
        format,
        header: format != Format::Ndjson && has_header,
        fields,
        nulls,
        columns,
        commit_every: args.commit_every,
        rejects_table: args.rejects_table.clone(),
        recurring: conflict::Recurring {
            key,
            on_conflict,
            source_column: args.source_column.clone(),
        },
        sniffed: sniffed.as_ref().map(|p| {
            let mut s = p.sniffed();
            if !args.nulls.is_empty() {
                s.column_nulls.clear();
            }
            s
        }),
    };
    if let Some(rt) = &args.rejects_table {
        setup.push(rejects_table_sql(rt));
        if mode == Mode::Replace {
            // The replaced table's rejects go with it.
            setup.push(format!(
                "DELETE FROM {} WHERE target_table = {}",
                quote_ident(rt),
                sql_string(&table)
            ));
        }
    }
    let rejects = match &args.rejects {
        Some(p) => {
            let p = absolute(p)?;
            let keep = match args.rejects_append {
                true => std::fs::metadata(&p).map_or(0, |m| m.len()),
                false => 0,
            };
            Rejects::file(&p, keep, &display)?
        }
        None => Rejects::stderr(&display),
    };
    if args.commit_every.is_some() {
        setup.push(resume::create_sql());
    }
    if !recorded.is_empty() {
        // Finished or replaced imports' records no longer apply; in a run
        // over several files, those of the other files still do.
        let same_source = if args.keep_other_progress && mode != Mode::Replace {
            format!(" AND source = {}", sql_string(&source_key(&args.source)))
        } else {
            String::new()
        };
        setup.push(format!(
            "DELETE FROM {} WHERE table_name = {}{same_source}",
            quote_ident(resume::TABLE),
            sql_string(&table)
        ));
    }
    let progress = match args.commit_every {
        None => None,
        Some(_) => Some(Progress {
            table: table.clone(),
            source: source_key(&args.source),
            fingerprint: input.fingerprint.clone(),
            plan: plan.clone(),
            records_read: 0,
            rows_inserted: 0,
            rows_rejected: 0,
            last_line: 0,
            rejects_file: rejects.path().map(|p| p.display().to_string()),
            rejects_bytes: 0,
            state: resume::RUNNING.into(),
            resume_end: None,
            resume_hash: None,
        }),
    };
    Ok(Prepared {
        table,
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

/// `CREATE TABLE IF NOT EXISTS` of a `--rejects-table`.
fn rejects_table_sql(name: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (target_table TEXT NOT NULL, source TEXT NOT NULL, \
         line INTEGER NOT NULL, record INTEGER NOT NULL, reason TEXT NOT NULL, raw)",
        quote_ident(name)
    )
}

/// An SQL string literal.
fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `--resume`: the recorded plan, the same file, and where to continue.
/// `None` when the recorded import already finished.
fn prepare_resume(
    args: &ImportArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    recorded: Vec<Progress>,
) -> Result<Option<Prepared>, CliError> {
    let key = source_key(&args.source);
    let rec = match recorded
        .iter()
        .rev()
        .find(|r| r.source == key || r.source == args.source)
    {
        Some(r) => r.clone(),
        None => {
            if let Some(r) = recorded.iter().find(|r| r.state == resume::RUNNING) {
                return Err(CliError::Input(format!(
                    "refusing to resume: {} is not the file the interrupted import into {} was \
                     reading ({})",
                    input.display,
                    quote_ident(&r.table),
                    r.source
                )));
            }
            return Err(CliError::Input(format!(
                "nothing to resume: {} records no resumable import of {} into {} (only imports \
                 run with --commit-every can be resumed)",
                args.db.display(),
                input.display,
                quote_ident(table)
            )));
        }
    };
    if rec.state == resume::DONE {
        if !args.quiet {
            eprintln!(
                "litelane: the import of {} into {} already finished ({} rows); nothing to resume",
                rec.source,
                quote_ident(&rec.table),
                group(rec.rows_inserted)
            );
        }
        if args.json || args.summaries.is_some() {
            let summary = serde_json::json!({
                "table": rec.table,
                "already_finished": true,
                "rows_inserted": 0,
                "rows_skipped": 0,
                "rows_rejected": 0,
                "total_rows_inserted": rec.rows_inserted,
                "total_rows_rejected": rec.rows_rejected,
                "source": rec.source,
                "profile": args.profile.name(),
            });
            files::emit(args, summary);
        }
        return Ok(None);
    }
    check_resume_flags(args, &rec.plan)?;
    match (&rec.fingerprint, &input.fingerprint) {
        (Some(a), Some(b)) if a == b => {}
        (None, _) => {
            return Err(CliError::Input(format!(
                "the interrupted import into {} read from stdin: it cannot be resumed; \
                 start over with --mode replace",
                quote_ident(&rec.table)
            )))
        }
        _ => {
            return Err(CliError::Input(format!(
                "refusing to resume: {} is not the file the interrupted import into {} was \
                 reading ({}: its size or content differs)",
                input.display,
                quote_ident(&rec.table),
                rec.source
            )))
        }
    }
    if table::existing(db, &rec.table)?.is_none() {
        return Err(CliError::Input(format!(
            "table {} of the interrupted import no longer exists; start over without --resume",
            quote_ident(&rec.table)
        )));
    }
    let mut plan = rec.plan.clone();
    if args.commit_every.is_some() {
        plan.commit_every = args.commit_every;
    }
    let mut setup = Vec::new();
    if let Some(rt) = &args.rejects_table {
        if plan.rejects_table.as_deref() != Some(rt.as_str()) {
            setup.push(rejects_table_sql(rt));
            plan.rejects_table = Some(rt.clone());
        }
    }
    let display = input.display.clone();
    let mut records = match &plan.sniffed {
        Some(s) => s.records(plan.format, input.reader),
        None => Records::new(plan.format, input.reader),
    };
    for _ in 0..plan.sniffed.as_ref().map_or(0, |s| s.skip_rows) {
        records.next_record(&display)?;
    }
    if plan.header {
        records.next_record(&display)?;
    }
    let rejects_path = match &args.rejects {
        Some(p) => Some(absolute(p)?.display().to_string()),
        None => rec.rejects_file.clone(),
    };
    let rejects = match &rejects_path {
        Some(p) => {
            let path = Path::new(p);
            if args.rejects.is_none() {
                // The recorded rejects file: still check it is not the input
                // or the database (either may have moved since).
                let mut protected = guard::database_files(&args.db);
                protected.push(("the input".to_string(), PathBuf::from(&args.source)));
                guard::check_output("the recorded rejects file", path, &protected)?;
            }
            let keep = if rec.rejects_file.as_deref() == Some(p.as_str()) {
                rec.rejects_bytes
            } else {
                0
            };
            Rejects::file(path, keep, &display)?
        }
        None => Rejects::stderr(&display),
    };
    let point = match (rec.resume_end, rec.resume_hash) {
        (Some(end), Some(hash)) if rec.records_read > 0 => Some(ResumePoint {
            record: rec.records_read,
            end,
            hash,
        }),
        _ => None,
    };
    let mut progress = rec.clone();
    progress.plan = plan.clone();
    Ok(Some(Prepared {
        table: rec.table.clone(),
        plan,
        records,
        sample: Vec::new(),
        skip: rec.records_read,
        resume: point,
        setup,
        progress: Some(progress),
        rejects,
    }))
}

/// Refuses flags given with `--resume` that contradict the recorded plan
/// (`--resume` always converts as the first run did).
fn check_resume_flags(args: &ImportArgs, plan: &Plan) -> Result<(), CliError> {
    let mut bad = Vec::new();
    if let Some(f) = args.format {
        if f != plan.format {
            bad.push(format!(
                "--format {} (the import is reading {})",
                format_name(f),
                format_name(plan.format)
            ));
        }
    }
    if args.no_header && plan.header {
        bad.push("--no-header (the import read a header line)".to_string());
    }
    if !args.nulls.is_empty() && args.nulls != plan.nulls {
        bad.push(format!(
            "--null {:?} (the import's null tokens are {:?})",
            args.nulls, plan.nulls
        ));
    }
    if args.types == Some(Types::Text) && plan.columns.iter().any(|c| c.ty != ColType::Text) {
        bad.push("--types text (the import's columns are typed)".to_string());
    }
    if args.strict
        && plan
            .columns
            .iter()
            .any(|c| !c.strict && matches!(c.ty, ColType::Integer | ColType::Real))
    {
        bad.push("--strict (the import was not strict)".to_string());
    }
    if let Some(m) = args.mode {
        bad.push(format!(
            "--mode {} (a resumed import appends to its table)",
            match m {
                Mode::Create => "create",
                Mode::Append => "append",
                Mode::Replace => "replace",
            }
        ));
    }
    if let Some(pk) = &args.pk {
        let same = conflict::parse_key(pk).is_ok_and(|k| {
            k.len() == plan.recurring.key.len()
                && k.iter()
                    .zip(&plan.recurring.key)
                    .all(|(a, b)| a.eq_ignore_ascii_case(b))
        });
        if !same {
            bad.push(format!("--pk {pk} (the table already exists)"));
        }
    }
    if let Some(on) = args.on_conflict {
        if on != plan.recurring.on_conflict {
            bad.push(format!(
                "--on-conflict {} (the import's is {})",
                on.name(),
                plan.recurring.on_conflict.name()
            ));
        }
    }
    if let Some(sc) = &args.source_column {
        if plan.recurring.source_column.as_deref() != Some(sc.as_str()) {
            bad.push(format!("--source-column {sc} (not the import's)"));
        }
    }
    if args.plan.is_some() {
        bad.push("--plan (the import's plan is recorded)".to_string());
    }
    if !args.types_for.is_empty() {
        bad.push("--type (the table already exists)".to_string());
    }
    let recorded_delim = plan.sniffed.as_ref().map_or(
        if plan.format == Format::Tsv {
            '\t'
        } else {
            ','
        },
        |s| s.delimiter,
    );
    if let Some(d) = args.delimiter.filter(|d| *d != recorded_delim) {
        bad.push(format!(
            "--delimiter {d:?} (the import splits on {recorded_delim:?})"
        ));
    }
    if args.header && !plan.header {
        bad.push("--header (the import read no header line)".to_string());
    }
    if bad.is_empty() {
        return Ok(());
    }
    Err(CliError::Input(format!(
        "refusing to resume: these flags contradict the interrupted import's recorded plan, \
         which --resume follows: {}; run again without them (or start over with --mode \
         replace)",
        bad.join(", ")
    )))
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Csv => "csv",
        Format::Tsv => "tsv",
        Format::Ndjson => "ndjson",
    }
}

/// The column names of a sniffed or given plan, once the header read has
/// the number of fields the plan expects (one fewer with an index column).
fn sniffed_names(
    p: &sniff::SniffPlan,
    found: usize,
    line: u64,
    display: &str,
) -> Result<Vec<String>, CliError> {
    let expected = p.columns.len() - usize::from(p.index_column);
    if found != expected {
        return Err(CliError::Input(format!(
            "{display}:{line}: the header has {found} fields, but the plan expects {expected}              (columns {}{})",
            p.columns.len(),
            if p.index_column {
                ", the first a row name"
            } else {
                ""
            }
        )));
    }
    Ok(p.columns.iter().map(|c| c.name.clone()).collect())
}

/// The header's fields as column names: refused, naming the line and the
/// column, when one holds a NUL byte (binary data, or UTF-16 without its
/// byte-order mark) or is not valid UTF-8 (as data fields are).
fn header_names(r: &csv::ByteRecord, line: u64, display: &str) -> Result<Vec<String>, CliError> {
    let mut out = Vec::with_capacity(r.len());
    for (i, f) in r.iter().enumerate() {
        if let Some(at) = f.iter().position(|&c| c == 0) {
            return Err(CliError::Input(format!(
                "{display}:{line}: the header is not text: column {} holds a NUL byte at byte {at} \
                 of its name (is the file binary, still compressed, or UTF-16 without a \
                 byte-order mark?)",
                i + 1
            )));
        }
        match std::str::from_utf8(f) {
            Ok(s) => out.push(s.to_string()),
            Err(e) => {
                return Err(CliError::Input(format!(
                    "{display}:{line}: the header is not valid UTF-8: column {} has an invalid \
                     byte at byte {} of its name (convert the file to UTF-8, e.g. with iconv)",
                    i + 1,
                    e.valid_up_to()
                )))
            }
        }
    }
    Ok(out)
}
