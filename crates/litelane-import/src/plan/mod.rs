//! Layer 2, *plan*: what the import will do, decided before a row is
//! written — the sniffed dialect, header and column types ([`sniff`]), the
//! target table as it exists ([`table`]) and as it will be ([`columns`],
//! [`alter`], [`conflict`]), the caller's options ([`options`]) and the
//! progress record of a resumable import ([`resume`], [`resumed`]). Uses
//! the *read* layer only (and the shared [`values`](crate::values)).
//!
//! The plan of an import is decided in small steps that take plain data and
//! return plain data (or an error that names what is wrong and where):
//! the flags, the sniffed layout, the header record, the sample of records,
//! the existing table's columns and unique indexes (read beforehand) go in;
//! column names and types, the statements to run before the rows
//! (`CREATE`, `ALTER`, `DROP`, progress bookkeeping) and the progress record
//! come out. `prepare_fresh` and `prepare_resume` (in the parent module) do
//! the reading and call these in order, the way ripgrep's `HiArgs` is
//! assembled from its low-level arguments by one small constructor per
//! concern. Only [`read_header`] and [`read_sample`] read (from an already
//! open [`Records`]); nothing here opens a file or touches the database.

use std::path::Path;

use litelane::quote_ident;

use crate::error::Error;
use crate::plan::columns::{ColumnPlan, Plan};
use crate::plan::conflict::{OnConflict, Recurring};
use crate::plan::options::{FileArgs, Mode, Types};
use crate::plan::resume::Progress;
use crate::plan::sniff::SniffPlan;
use crate::plan::table::Existing;
use crate::read::records::{RawOwned, RawRef, Records};
use crate::read::source::Format;
use crate::values::ColType;

pub mod alter;
pub mod columns;
pub mod conflict;
mod json_sample;
pub mod options;
pub mod resume;
pub mod sniff;
pub mod table;

/// Records read ahead to decide the column types (and, for NDJSON, the
/// columns). Values after them that do not fit their column's type are
/// stored as they are (or rejected with `--strict`).
pub const SAMPLE_RECORDS: usize = 10_000;

/// Refuses a fresh import over one that was interrupted (a progress record
/// still `running` for the table), unless `--mode replace` starts over.
pub fn check_interrupted(mode: Mode, recorded: &[Progress]) -> Result<(), Error> {
    match recorded.iter().find(|r| r.state == resume::RUNNING) {
        Some(rec) if mode != Mode::Replace => Err(Error::Input(format!(
            "an import of {} into {} was interrupted after line {} ({} rows committed); \
             continue it with --resume, or start over with --mode replace",
            rec.source,
            quote_ident(&rec.table),
            rec.last_line,
            rec.rows_inserted
        ))),
        _ => Ok(()),
    }
}

/// Refuses `--mode create` (the default) when the table exists.
pub fn check_create(
    mode: Mode,
    existing: Option<&Existing>,
    table: &str,
    db: &Path,
) -> Result<(), Error> {
    if mode == Mode::Create && existing.is_some() {
        return Err(Error::Input(format!(
            "table {} already exists in {}; use --mode append to add rows or --mode replace \
             to recreate it",
            quote_ident(table),
            db.display()
        )));
    }
    Ok(())
}

/// The format before sniffing: `--format`, else from the source's name,
/// else CSV.
pub fn given_format(format: Option<Format>, source: &str) -> Format {
    format
        .or_else(|| Format::from_name(source))
        .unwrap_or(Format::Csv)
}

/// How the input is laid out, once sniffed (or read from `--plan`).
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The format (a plan's own format wins over the given one).
    pub format: Format,
    /// A CSV/TSV header record follows the skipped ones (never for NDJSON).
    pub header: bool,
    /// Records skipped before the header (or the first data record).
    pub skip_rows: u64,
    /// Null tokens: `--null` when given, else the plan's, else the empty
    /// field.
    pub nulls: Vec<String>,
}

/// The layout from the given format, the sniffed plan (`None`: NDJSON),
/// `--no-header` and the `--null` tokens.
pub fn layout(
    format: Format,
    sniffed: Option<&SniffPlan>,
    no_header: bool,
    null_flags: &[String],
) -> Layout {
    let format = sniffed.map_or(format, |p| p.format);
    let nulls = match (sniffed, null_flags.is_empty()) {
        (_, false) => null_flags.to_vec(),
        (Some(p), true) => p.nulls.clone(),
        (None, true) => vec![String::new()],
    };
    let has_header = sniffed.map_or(!no_header, |p| p.header);
    Layout {
        format,
        header: format != Format::Ndjson && has_header,
        skip_rows: sniffed.map_or(0, |p| p.skip_rows),
        nulls,
    }
}

/// Reads the start of the input: skips the layout's preamble records and
/// checks the header record, if any, against the plan ([`header`]).
/// Returns the header's fields (`None`: no header line).
pub fn read_header(
    records: &mut Records,
    layout: &Layout,
    sniffed: Option<&SniffPlan>,
    display: &str,
) -> Result<Option<Vec<String>>, Error> {
    for _ in 0..layout.skip_rows {
        records.next_record(display)?;
    }
    match (layout.header, sniffed) {
        (true, Some(p)) => {
            let first = match records.next_record(display)? {
                Some(RawRef::Csv(r, at)) => Some((r, at.line)),
                _ => None,
            };
            header(first, p, display).map(Some)
        }
        _ => Ok(None),
    }
}

/// Reads up to [`SAMPLE_RECORDS`] records (after the header) for inference.
pub fn read_sample(records: &mut Records, display: &str) -> Result<Vec<RawOwned>, Error> {
    let mut sample = Vec::new();
    while sample.len() < SAMPLE_RECORDS {
        match records.next_owned(display)? {
            Some(r) => sample.push(r),
            None => break,
        }
    }
    Ok(sample)
}

/// The header record (`None`: the input ended before it) and the line it is
/// on, checked: text ([`header_names`]) with as many fields as the plan
/// expects ([`sniffed_names`]). Returns the header's own fields (the table's
/// columns are named by the plan, which may have been edited).
pub fn header(
    first: Option<(&csv::ByteRecord, u64)>,
    plan: &SniffPlan,
    display: &str,
) -> Result<Vec<String>, Error> {
    let Some((r, line)) = first else {
        return Err(Error::Input(format!(
            "{display} is empty: there is no header line to name the columns"
        )));
    };
    let names = header_names(r, line, display)?;
    sniffed_names(plan, names.len(), line, display)?;
    Ok(names)
}

/// The column names of a sniffed or given plan, once the header read has
/// the number of fields the plan expects (one fewer with an index column).
pub fn sniffed_names(
    p: &SniffPlan,
    found: usize,
    line: u64,
    display: &str,
) -> Result<Vec<String>, Error> {
    let expected = p.header_fields();
    if found != expected {
        return Err(Error::at(
            display,
            line,
            format!(
                "the header has {found} fields, but the plan expects {expected} \
             (columns {}{})",
                p.columns.len(),
                if p.index_column {
                    ", the first a row name"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(p.columns.iter().map(|c| c.name.clone()).collect())
}

/// The header's fields as column names: refused, naming the line and the
/// column, when one holds a NUL byte (binary data, or UTF-16 without its
/// byte-order mark) or is not valid UTF-8 (as data fields are).
pub fn header_names(r: &csv::ByteRecord, line: u64, display: &str) -> Result<Vec<String>, Error> {
    let mut out = Vec::with_capacity(r.len());
    for (i, f) in r.iter().enumerate() {
        if let Some(at) = f.iter().position(|&c| c == 0) {
            return Err(Error::at(
                display,
                line,
                format!(
                    "the header is not text: column {} holds a NUL byte at byte {at} \
                 of its name (is the file binary, still compressed, or UTF-16 without a \
                 byte-order mark?)",
                    i + 1
                ),
            ));
        }
        match std::str::from_utf8(f) {
            Ok(s) => out.push(s.to_string()),
            Err(e) => {
                return Err(Error::at(
                    display,
                    line,
                    format!(
                        "the header is not valid UTF-8: column {} has an invalid \
                     byte at byte {} of its name (convert the file to UTF-8, e.g. with iconv)",
                        i + 1,
                        e.valid_up_to()
                    ),
                ))
            }
        }
    }
    Ok(out)
}

/// The input's columns and the type each would get in a new table.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// Each column's header name or NDJSON key, in input order.
    pub keys: Vec<String>,
    /// Fields every CSV/TSV record must have (0 for NDJSON).
    pub fields: usize,
    /// The type of each column (same order as `keys`).
    pub types: Vec<ColType>,
}

/// CSV/TSV columns: the plan's names and types (`--types text`: all TEXT).
/// The sniffer inferred the types from its samples (start, middle and end
/// of the file), which include the import's own sample.
pub fn csv_inputs(plan: &SniffPlan, types: Types) -> Inputs {
    Inputs {
        keys: plan.columns.iter().map(|c| c.name.clone()).collect(),
        fields: plan.columns.len(),
        types: plan
            .columns
            .iter()
            .map(|c| match types {
                Types::Text => ColType::Text,
                Types::Infer => c.ty,
            })
            .collect(),
    }
}

/// NDJSON columns: every key of the objects in the sample, in order of first
/// appearance, typed from their values (lines that are not objects are left
/// to the import to reject). No key at all is an error unless `table_exists`
/// (its columns are then the plan).
pub fn ndjson_inputs(
    sample: &[RawOwned],
    types: Types,
    table_exists: bool,
    display: &str,
) -> Result<Inputs, Error> {
    let mut columns = json_sample::Columns::default();
    for raw in sample {
        if let RawOwned::Json(b, _) = raw {
            columns.add(b);
        }
    }
    let json_sample::Columns { keys, seen, .. } = columns;
    if keys.is_empty() && !table_exists {
        return Err(Error::Input(format!(
            "{display}: no JSON object among the first {} records to take the columns from",
            sample.len()
        )));
    }
    let types = seen
        .iter()
        .map(|inference| match types {
            Types::Text => ColType::Text,
            Types::Infer => inference.decide(),
        })
        .collect();
    Ok(Inputs {
        keys,
        fields: 0,
        types,
    })
}

/// `--pk` and `--on-conflict`.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyFlags {
    /// The key's column names as given (empty: no `--pk`).
    pub names: Vec<String>,
    /// What a row whose key is present does.
    pub on_conflict: OnConflict,
}

/// Parses `--pk` and checks that an `--on-conflict` other than `fail` has a
/// key to match rows by.
pub fn key_flags(pk: Option<&str>, on_conflict: Option<OnConflict>) -> Result<KeyFlags, Error> {
    let names = match pk {
        Some(pk) => conflict::parse_key(pk)?,
        None => Vec::new(),
    };
    let on_conflict = on_conflict.unwrap_or_default();
    if on_conflict != OnConflict::Fail && names.is_empty() {
        return Err(Error::Input(format!(
            "--on-conflict {} needs --pk COL[,COL]: the key that tells a row already present",
            on_conflict.name()
        )));
    }
    Ok(KeyFlags { names, on_conflict })
}

/// The target table's side of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct TablePlan {
    /// The table's name (as stored, for an existing table).
    pub table: String,
    /// The columns the input fills, in insert order.
    pub columns: Vec<ColumnPlan>,
    /// The key columns as the table spells them (empty: no `--pk`).
    pub key: Vec<String>,
    /// Statements to run first: `DROP TABLE` and `CREATE TABLE`, or
    /// `ALTER TABLE ... ADD COLUMN`.
    pub setup: Vec<String>,
}

/// What the flags say about the table's columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnFlags {
    /// `--type COL=TYPE`, parsed.
    pub overrides: Vec<(String, ColType)>,
    /// `--strict`.
    pub strict: bool,
    /// `--alter`.
    pub alter: bool,
    /// `--source-column`.
    pub source_column: Option<String>,
}

/// A new table named `table`: the inputs' names made unique and never
/// empty ([`table::column_names`]), their types with `--type` applied, the
/// key's columns found (exact name first, then ignoring ASCII case), and
/// the `CREATE TABLE` (after a `DROP TABLE` when `replace` finds the table
/// there).
pub fn new_table(
    table: &str,
    inputs: Inputs,
    flags: &ColumnFlags,
    key: &KeyFlags,
    drop_first: bool,
    display: &str,
) -> Result<TablePlan, Error> {
    let names = table::column_names(Some(inputs.keys.clone()), inputs.keys.len());
    let mut cols: Vec<ColumnPlan> = names
        .into_iter()
        .zip(inputs.keys)
        .zip(inputs.types)
        .enumerate()
        .map(|(i, ((name, key), ty))| ColumnPlan {
            name,
            ty,
            strict: false,
            src: i,
            key,
        })
        .collect();
    sniff::apply_overrides(&mut cols, &flags.overrides)?;
    for c in cols.iter_mut() {
        c.strict = flags.strict && c.ty != ColType::Text;
    }
    let pk = conflict::key_positions(&cols, &key.names, display)?;
    conflict::mark_key_strict(&mut cols, &pk);
    let mut setup = Vec::new();
    if drop_first {
        setup.push(format!("DROP TABLE {}", quote_ident(table)));
    }
    setup.push(conflict::create_sql(table, &cols, &pk, flags.strict));
    Ok(TablePlan {
        table: table.to_string(),
        key: pk.iter().map(|&i| cols[i].name.clone()).collect(),
        columns: cols,
        setup,
    })
}

/// Appending to the existing table `t` (whose unique indexes are
/// `indexes`): CSV/TSV columns matched by name, ignoring ASCII case (an
/// input column the table lacks is an error, or with `--alter` added to
/// `t` and to the setup); NDJSON fills every column of the table but the
/// `--source-column` (a key the table lacks is ignored, or added with
/// `--alter`). Each column keeps its declared type; `--type` is refused.
/// The key is the table's spelling of `--pk`; with an `--on-conflict` other
/// than `fail`, it must be the table's primary key or a unique index.
pub fn append_table(
    t: &mut Existing,
    format: Format,
    inputs: Inputs,
    flags: &ColumnFlags,
    key: &KeyFlags,
    indexes: &[Vec<Option<String>>],
) -> Result<TablePlan, Error> {
    let mut setup = Vec::new();
    table::check_not_generated(&inputs.keys, t)?;
    let columns = if format == Format::Ndjson {
        if flags.alter {
            setup.extend(alter::add_missing(&inputs.keys, &inputs.types, t, true)?);
        }
        t.columns
            .iter()
            .filter(|c| {
                !flags
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
                    strict: (flags.strict || t.strict || c.rowid_alias)
                        && matches!(ty, ColType::Integer | ColType::Real),
                    src: i,
                    key: c.name.clone(),
                }
            })
            .collect()
    } else {
        let names = table::column_names(Some(inputs.keys), inputs.fields);
        setup.extend(alter::add_missing(&names, &inputs.types, t, flags.alter)?);
        table::match_columns(&names, t, flags.strict)?
    };
    if !flags.overrides.is_empty() {
        return Err(Error::Input(format!(
            "--type applies to a new table; {} exists and its columns keep their types",
            quote_ident(&t.name)
        )));
    }
    let key = match (key.names.is_empty(), key.on_conflict) {
        (true, _) => Vec::new(),
        (false, OnConflict::Fail) => conflict::spell_key(t, &key.names)?,
        (false, on) => conflict::existing_key(t, &key.names, on, indexes)?,
    };
    Ok(TablePlan {
        table: t.name.clone(),
        columns,
        key,
        setup,
    })
}

/// With an `--on-conflict` other than `fail`, every key column must be
/// among the imported ones: rows are matched to the stored ones by it.
pub fn check_key_imported(
    on_conflict: OnConflict,
    key: &[String],
    columns: &[ColumnPlan],
) -> Result<(), Error> {
    if on_conflict == OnConflict::Fail {
        return Ok(());
    }
    match key
        .iter()
        .find(|k| !columns.iter().any(|c| c.name.eq_ignore_ascii_case(k)))
    {
        Some(k) => Err(Error::Input(format!(
            "--pk {}: the input has no such column, so its rows cannot be matched to \
             the stored ones",
            quote_ident(k)
        ))),
        None => Ok(()),
    }
}

/// The `--source-column` statement, if the table needs one
/// ([`alter::source_column_sql`]), after checking there is something to
/// import at all. `appended`: the existing table appended to.
pub fn finish_columns(
    plan: &TablePlan,
    source_column: Option<&str>,
    appended: Option<&Existing>,
    display: &str,
) -> Result<Option<String>, Error> {
    let sql = match source_column {
        Some(sc) => alter::source_column_sql(&plan.table, sc, &plan.columns, appended)?,
        None => None,
    };
    if plan.columns.is_empty() {
        return Err(Error::Input(format!("{display}: no columns to import")));
    }
    // The table's columns once the import has made or altered it.
    let added = plan
        .setup
        .iter()
        .filter(|s| s.starts_with("ALTER TABLE"))
        .count();
    let total = match appended {
        Some(t) => t.columns.len() + added,
        None => plan.columns.len(),
    } + usize::from(sql.is_some());
    if total > MAX_COLUMNS {
        return Err(Error::Input(format!(
            "{display}: the table would have {total} columns, and SQLite allows at most \
             {MAX_COLUMNS} in a table; import a subset of the columns (e.g. cut the file with \
             `cut -d, -f1-{MAX_COLUMNS}`) or split them over several tables"
        )));
    }
    Ok(sql)
}

/// The most columns a table may have: SQLite's `SQLITE_MAX_COLUMN` as the
/// bundled SQLite is built (its default, 2000).
pub const MAX_COLUMNS: usize = 2000;

/// The plan the converter (and a later `--resume`) follows.
pub(crate) fn import_plan(
    layout: Layout,
    fields: usize,
    table: &TablePlan,
    on_conflict: OnConflict,
    sniffed: Option<&SniffPlan>,
    args: &FileArgs,
) -> Plan {
    Plan {
        format: layout.format,
        header: layout.header,
        fields,
        nulls: layout.nulls,
        columns: table.columns.clone(),
        commit_every: args.commit_every,
        rejects_table: args.rejects_table.clone(),
        recurring: Recurring {
            key: table.key.clone(),
            on_conflict,
            source_column: args.source_column.clone(),
        },
        sniffed: sniffed.map(|p| {
            let mut s = p.sniffed();
            // `--null` tokens apply to every column.
            if !args.nulls.is_empty() {
                s.column_nulls.clear();
            }
            s
        }),
    }
}

/// The bookkeeping statements of a fresh import into `table`: the
/// `--rejects-table` (and, with `--mode replace`, the removal of the
/// replaced table's rejects), the progress table with `--commit-every`,
/// and the removal of progress records that no longer apply (`recorded`:
/// the table has some; `source`: this input's canonical path, the key of
/// its progress record).
pub(crate) fn bookkeeping_sql(
    args: &FileArgs,
    mode: Mode,
    table: &str,
    recorded: bool,
    source: &str,
) -> Vec<String> {
    let mut sql = Vec::new();
    if let Some(rt) = &args.rejects_table {
        sql.push(rejects_table_sql(rt));
        if mode == Mode::Replace {
            // The replaced table's rejects go with it.
            sql.push(format!(
                "DELETE FROM {} WHERE target_table = {}",
                quote_ident(rt),
                sql_string(table)
            ));
        }
    }
    if args.commit_every.is_some() {
        sql.push(resume::create_sql());
    }
    if recorded {
        // Finished or replaced imports' records no longer apply; in a run
        // over several files, those of the other files still do.
        let same_source = if args.keep_other_progress && mode != Mode::Replace {
            format!(" AND source = {}", sql_string(source))
        } else {
            String::new()
        };
        sql.push(format!(
            "DELETE FROM {} WHERE table_name = {}{same_source}",
            quote_ident(resume::TABLE),
            sql_string(table)
        ));
    }
    sql
}

/// The progress record a `--commit-every` import starts with (`None`
/// without it): keyed by the table and the source's canonical name, with
/// the input's fingerprint (to refuse resuming from another file), the plan,
/// the rejects file, nothing counted yet and state `running`.
pub fn progress_record(
    table: &str,
    source: &str,
    fingerprint: Option<String>,
    plan: &Plan,
    rejects_file: Option<String>,
    commit_every: Option<u64>,
) -> Option<Progress> {
    commit_every?;
    Some(Progress {
        table: table.to_string(),
        source: source.to_string(),
        fingerprint,
        plan: plan.clone(),
        records_read: 0,
        rows_inserted: 0,
        rows_rejected: 0,
        last_line: 0,
        rejects_file,
        rejects_bytes: 0,
        state: resume::RUNNING.into(),
        resume_end: None,
        resume_hash: None,
    })
}

/// `CREATE TABLE IF NOT EXISTS` of a `--rejects-table`.
pub fn rejects_table_sql(name: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (target_table TEXT NOT NULL, source TEXT NOT NULL, \
         line INTEGER NOT NULL, record INTEGER NOT NULL, reason TEXT NOT NULL, raw)",
        quote_ident(name)
    )
}

/// An SQL string literal.
pub fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub mod resumed;

// The steps are tested with the options the command's flags set.
#[cfg(test)]
mod tests;
