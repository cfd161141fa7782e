//! The steps of `--resume`, as plain functions: which progress record to
//! continue, whether the flags and the file still agree with it, and what
//! the resumed run starts from (plan, statements, rejects file, the point
//! to continue after, its progress record). `prepare_resume` (in
//! `import`) reads the records, the table and the input, and calls these.

use std::path::Path;

use litelane::quote_ident;

use super::rejects_table_sql;
use crate::error::Error;
use crate::plan::columns::Plan;
use crate::plan::conflict;
use crate::plan::options::{FileArgs, Mode, Types};
use crate::plan::resume::ResumePoint;
use crate::plan::resume::{self, Progress};
use crate::read::source::Format;
use crate::values::ColType;

/// The record of the import to continue: the newest for this source (its
/// canonical name `key`, or `source` as given). None: an error naming the
/// file the interrupted import was reading, or saying there is nothing to
/// resume.
pub fn pick_record(
    recorded: &[Progress],
    key: &str,
    source: &str,
    display: &str,
    db: &Path,
    table: &str,
) -> Result<Progress, Error> {
    if let Some(r) = recorded
        .iter()
        .rev()
        .find(|r| r.source == key || r.source == source)
    {
        return Ok(r.clone());
    }
    if let Some(r) = recorded.iter().find(|r| r.state == resume::RUNNING) {
        return Err(Error::Input(format!(
            "refusing to resume: {display} is not the file the interrupted import into {} was \
             reading ({})",
            quote_ident(&r.table),
            r.source
        )));
    }
    Err(Error::Input(format!(
        "nothing to resume: {} records no resumable import of {display} into {} (only imports \
         run with --commit-every can be resumed)",
        db.display(),
        quote_ident(table)
    )))
}

/// The input must be the file the import was reading: same fingerprint
/// (size and hashes of its start and end). An import from stdin has none
/// and cannot be resumed.
pub fn check_fingerprint(
    rec: &Progress,
    fingerprint: Option<&str>,
    display: &str,
) -> Result<(), Error> {
    match (rec.fingerprint.as_deref(), fingerprint) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (None, _) => Err(Error::Input(format!(
            "the interrupted import into {} read from stdin: it cannot be resumed; \
             start over with --mode replace",
            quote_ident(&rec.table)
        ))),
        _ => Err(Error::Input(format!(
            "refusing to resume: {display} is not the file the interrupted import into {} was \
             reading ({}: its size or content differs)",
            quote_ident(&rec.table),
            rec.source
        ))),
    }
}

/// The recorded plan, with what `--resume` may change: `--commit-every`,
/// and a `--rejects-table` (created if it is not the recorded one). Returns
/// the plan and the statements to run first.
pub(crate) fn resumed_plan(recorded: &Plan, args: &FileArgs) -> (Plan, Vec<String>) {
    let mut plan = recorded.clone();
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
    (plan, setup)
}

/// Records before the data: the skipped preamble and the header line.
pub fn records_before_data(plan: &Plan) -> u64 {
    plan.sniffed.as_ref().map_or(0, |s| s.skip_rows) + u64::from(plan.header)
}

/// Where the resumed run's rejects go.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectsTarget {
    /// The file (`None`: stderr).
    pub path: Option<String>,
    /// Bytes of it to keep: what the recorded run had committed when it is
    /// the recorded file, else 0.
    pub keep: u64,
    /// It is the recorded file, not `--rejects`: check again that it is
    /// not the input or the database (either may have moved since).
    pub recheck: bool,
}

/// `--rejects` (made absolute) when given, else the recorded rejects file.
pub fn rejects_target(given: Option<String>, rec: &Progress) -> RejectsTarget {
    let recheck = given.is_none();
    let path = given.or_else(|| rec.rejects_file.clone());
    let keep = match &path {
        Some(p) if rec.rejects_file.as_deref() == Some(p.as_str()) => rec.rejects_bytes,
        _ => 0,
    };
    RejectsTarget {
        recheck: recheck && path.is_some(),
        path,
        keep,
    }
}

/// The last committed record, to find again before continuing; `None`
/// before the first commit or for a record written by an older litelane.
pub fn resume_point(rec: &Progress) -> Option<ResumePoint> {
    match (rec.resume_end, rec.resume_hash) {
        (Some(end), Some(hash)) if rec.records_read > 0 => Some(ResumePoint {
            record: rec.records_read,
            end,
            hash,
        }),
        _ => None,
    }
}

/// Refuses flags given with `--resume` that contradict the recorded plan
/// (`--resume` always converts as the first run did).
pub(crate) fn check_resume_flags(args: &FileArgs, plan: &Plan) -> Result<(), Error> {
    let mut bad = Vec::new();
    conversion_conflicts(args, plan, &mut bad);
    table_conflicts(args, plan, &mut bad);
    reading_conflicts(args, plan, &mut bad);
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::Input(format!(
        "refusing to resume: these flags contradict the interrupted import's recorded plan, \
         which --resume follows: {}; run again without them (or start over with --mode \
         replace)",
        bad.join(", ")
    )))
}

/// The flags that would convert the values otherwise: format, header,
/// null tokens, types, strictness.
fn conversion_conflicts(args: &FileArgs, plan: &Plan, bad: &mut Vec<String>) {
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
}

/// The flags about the table: mode, key, conflicts, the source's column.
fn table_conflicts(args: &FileArgs, plan: &Plan, bad: &mut Vec<String>) {
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
}

/// The flags that would read the input otherwise: a plan, column types,
/// the delimiter, a header.
fn reading_conflicts(args: &FileArgs, plan: &Plan, bad: &mut Vec<String>) {
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
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Csv => "csv",
        Format::Tsv => "tsv",
        Format::Ndjson => "ndjson",
    }
}

// The steps are tested with the options the command's flags set.
#[cfg(test)]
mod tests;
