//! `litelane import`: load a CSV, TSV or NDJSON file into a table.
//!
//! One thread reads and parses the input into batches of typed rows
//! ([`parse`], [`convert`]); the calling thread stores them ([`sink`]) through
//! the engine's writer, with a bounded channel of batches between the two.
//! Column types are inferred from the first [`SAMPLE_RECORDS`] records
//! ([`values`]). Every record is either stored or rejected ([`rejects`]). By
//! default the whole import is one transaction; with `--commit-every` it
//! commits every N rows and keeps its progress in the database ([`resume`]).
//! See `docs/import.md`.

mod batch;
mod convert;
mod parse;
mod progress;
mod rejects;
mod resume;
mod sink;
mod source;
mod table;
mod values;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use litelane::{quote_ident, Database, Options, Profile};

use convert::{ColumnPlan, Converter, Plan};
use parse::{ParseJob, RawOwned, RawRef, Records};
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
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The file to import (`.csv`, `.tsv`, `.ndjson`/`.jsonl`, optionally
    /// gzipped); `-` reads stdin.
    pub source: String,
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
    #[arg(long)]
    pub no_header: bool,
    /// A field equal to TOKEN is stored as NULL (repeatable; default: the
    /// empty field). `--null ''` adds the empty field to other tokens.
    #[arg(long = "null", value_name = "TOKEN")]
    pub nulls: Vec<String>,
    /// Column types: inferred from the data, or all TEXT.
    #[arg(long, value_enum, default_value_t = Types::Infer)]
    pub types: Types,
    /// Create a STRICT table; values that do not fit their column's type are
    /// rejected instead of stored as they are.
    #[arg(long)]
    pub strict: bool,
    /// Make column COL the primary key of the created table.
    #[arg(long, value_name = "COL")]
    pub pk: Option<String>,
    /// create (fail if the table exists), append, or replace.
    #[arg(long, value_enum, default_value_t = Mode::Create)]
    pub mode: Mode,
    /// Durability profile: safe, balanced or fast.
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
}

/// Everything decided before the rows flow.
struct Prepared {
    table: String,
    plan: Plan,
    records: Records,
    sample: Vec<RawOwned>,
    skip: u64,
    setup: Vec<String>,
    progress: Option<Progress>,
    rejects: Rejects,
}

/// Runs `litelane import`.
pub fn run(args: ImportArgs) -> Result<(), CliError> {
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
    let input = source::open(&args.source)?;
    let opts = Options {
        profile: args.profile,
        readers: 1,
        async_threads: 1,
        ..Options::default()
    };
    let db = Database::open(&args.db, opts)?;
    let recorded = resume::load(&db, &table)?;
    let bytes_read = Arc::clone(&input.bytes_read);
    let size = input.size;
    let display = input.display.clone();
    let prepared = if args.resume {
        match prepare_resume(&args, &db, &table, input, recorded)? {
            Some(p) => p,
            None => return Ok(()),
        }
    } else {
        prepare_fresh(&args, &db, &table, input, recorded)?
    };
    let Prepared {
        table,
        plan,
        records,
        sample,
        skip,
        setup,
        progress,
        rejects,
    } = prepared;

    let bar = Bar::new(!args.quiet, size);
    let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL_BATCHES);
    let job = ParseJob {
        records,
        sample,
        converter: Converter::new(plan.clone()),
        skip,
        bytes_read,
        display: display.clone(),
    };
    let parser = std::thread::Builder::new()
        .name("litelane-parse".into())
        .spawn(move || job.run(tx))
        .map_err(|e| CliError::io("starting the parser thread", e))?;
    let rejects_path = rejects.path().map(|p| p.display().to_string());
    let sink = Sink {
        db: &db,
        table: table.clone(),
        columns: plan.columns.iter().map(|c| c.name.clone()).collect(),
        commit_every: plan.commit_every,
        setup,
        progress,
        rejects,
        max_rejects: args.max_rejects,
        bar: &bar,
        input: display.clone(),
    };
    let result = sink.run(rx);
    let joined = parser.join();
    bar.finish();
    let counts = result?;
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
        eprintln!(
            "litelane: imported {} rows into {} from {display} in {seconds:.2} s ({} rows/s){rejected}",
            group(counts.inserted),
            quote_ident(&table),
            group(rate as u64),
        );
    }
    if args.json {
        let columns: Vec<serde_json::Value> = plan
            .columns
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "type": c.ty.sql()}))
            .collect();
        let summary = serde_json::json!({
            "table": table,
            "rows_inserted": counts.inserted,
            "rows_rejected": counts.rejected,
            "seconds": seconds,
            "rows_per_sec": rate,
            "columns": columns,
            "profile": args.profile.name(),
        });
        println!("{summary}");
    }
    Ok(())
}

fn absolute(p: &std::path::Path) -> Result<PathBuf, CliError> {
    std::path::absolute(p).map_err(|e| CliError::io(format!("resolving {}", p.display()), e))
}

/// A new import: header, sample, types, table statements.
fn prepare_fresh(
    args: &ImportArgs,
    db: &Database,
    table: &str,
    input: source::Input,
    recorded: Option<Progress>,
) -> Result<Prepared, CliError> {
    if let Some(rec) = &recorded {
        if rec.state == resume::RUNNING && args.mode != Mode::Replace {
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
    if args.mode == Mode::Create && existing.is_some() {
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
    let mut records = Records::new(format, input.reader);
    let nulls = if args.nulls.is_empty() {
        vec![String::new()]
    } else {
        args.nulls.clone()
    };

    // The header, and a sample of records to infer from.
    let mut header: Option<Vec<String>> = None;
    if format != Format::Ndjson && !args.no_header {
        match records.next_record(&display)? {
            Some(RawRef::Csv(r, _)) => {
                header = Some(
                    r.iter()
                        .map(|f| String::from_utf8_lossy(f).into_owned())
                        .collect(),
                )
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
            let fields = match (&header, sample.first()) {
                (Some(h), _) => h.len(),
                (None, Some(RawOwned::Csv(r, _))) => r.len(),
                _ => {
                    return Err(CliError::Input(format!(
                        "{display} is empty: no record to count the columns of"
                    )))
                }
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
            let keys = header.unwrap_or_else(|| (1..=fields).map(|i| format!("c{i}")).collect());
            (keys, fields, inf)
        }
        Format::Ndjson => {
            let mut keys: Vec<String> = Vec::new();
            let mut seen: HashSet<String> = HashSet::new();
            let mut by_key: HashMap<String, Inference> = HashMap::new();
            for raw in &sample {
                if let RawOwned::Json(b, _) = raw {
                    if let Ok(serde_json::Value::Object(o)) = serde_json::from_slice(b) {
                        for (k, v) in &o {
                            if seen.insert(k.clone()) {
                                keys.push(k.clone());
                            }
                            by_key.entry(k.clone()).or_default().observe_json(v);
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
    let (table, columns) = match (&existing, args.mode) {
        (Some(t), Mode::Append) => {
            let cols = if format == Format::Ndjson {
                t.columns
                    .iter()
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
                table::match_columns(&table::column_names(Some(keys), fields), t, args.strict)?
            };
            (t.name.clone(), cols)
        }
        _ => {
            let names = table::column_names(Some(keys.clone()), keys.len());
            let mut cols: Vec<ColumnPlan> = names
                .into_iter()
                .zip(keys)
                .enumerate()
                .map(|(i, (name, key))| {
                    let ty = match args.types {
                        Types::Infer => inference[i].decide(),
                        Types::Text => ColType::Text,
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
            let pk = match &args.pk {
                None => None,
                Some(pk) => Some(
                    cols.iter()
                        .position(|c| c.name == *pk)
                        .or_else(|| cols.iter().position(|c| c.name.eq_ignore_ascii_case(pk)))
                        .ok_or_else(|| {
                            CliError::Input(format!(
                                "--pk {}: no such column in {display} (columns: {})",
                                quote_ident(pk),
                                cols.iter()
                                    .map(|c| quote_ident(&c.name))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ))
                        })?,
                ),
            };
            if let Some(i) = pk {
                // An INTEGER PRIMARY KEY takes integers only, STRICT or not.
                if cols[i].ty == ColType::Integer {
                    cols[i].strict = true;
                }
            }
            if args.mode == Mode::Replace && existing.is_some() {
                setup.push(format!("DROP TABLE {}", quote_ident(table)));
            }
            setup.push(table::create_sql(table, &cols, pk, args.strict));
            (table.to_string(), cols)
        }
    };
    if columns.is_empty() {
        return Err(CliError::Input(format!("{display}: no columns to import")));
    }

    let plan = Plan {
        format,
        header: format != Format::Ndjson && !args.no_header,
        fields,
        nulls,
        columns,
        commit_every: args.commit_every,
    };
    let rejects = match &args.rejects {
        Some(p) => Rejects::file(&absolute(p)?, 0, &display)?,
        None => Rejects::stderr(&display),
    };
    let progress = match args.commit_every {
        None => {
            if recorded.is_some() {
                // A finished or replaced import's record no longer applies.
                setup.push(format!(
                    "DELETE FROM {} WHERE table_name = {}",
                    quote_ident(resume::TABLE),
                    sql_string(&table)
                ));
            }
            None
        }
        Some(_) => {
            setup.push(resume::create_sql());
            Some(Progress {
                table: table.clone(),
                source: args.source.clone(),
                fingerprint: input.fingerprint.clone(),
                plan: plan.clone(),
                records_read: 0,
                rows_inserted: 0,
                rows_rejected: 0,
                last_line: 0,
                rejects_file: rejects.path().map(|p| p.display().to_string()),
                rejects_bytes: 0,
                state: resume::RUNNING.into(),
            })
        }
    };
    Ok(Prepared {
        table,
        plan,
        records,
        sample,
        skip: 0,
        setup,
        progress,
        rejects,
    })
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
    recorded: Option<Progress>,
) -> Result<Option<Prepared>, CliError> {
    let rec = recorded.ok_or_else(|| {
        CliError::Input(format!(
            "nothing to resume: {} records no resumable import into {} (only imports run \
             with --commit-every can be resumed)",
            args.db.display(),
            quote_ident(table)
        ))
    })?;
    if rec.state == resume::DONE {
        if !args.quiet {
            eprintln!(
                "litelane: the import of {} into {} already finished ({} rows); nothing to resume",
                rec.source,
                quote_ident(&rec.table),
                group(rec.rows_inserted)
            );
        }
        return Ok(None);
    }
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
    let display = input.display.clone();
    let mut records = Records::new(plan.format, input.reader);
    if plan.header {
        records.next_record(&display)?;
    }
    let rejects_path = match &args.rejects {
        Some(p) => Some(absolute(p)?.display().to_string()),
        None => rec.rejects_file.clone(),
    };
    let rejects = match &rejects_path {
        Some(p) => {
            let keep = if rec.rejects_file.as_deref() == Some(p.as_str()) {
                rec.rejects_bytes
            } else {
                0
            };
            Rejects::file(std::path::Path::new(p), keep, &display)?
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
        setup: Vec::new(),
        progress: Some(progress),
        rejects,
    }))
}
