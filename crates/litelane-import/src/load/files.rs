//! Several files in one command: paths and glob patterns (expanded here,
//! sorted, so no shell is needed), imported one after the other into one
//! table, columns matched by name (a column a file lacks is NULL for its
//! rows; a column the table lacks is added), with `--source-column`
//! holding each row's file. Each file is its own import: its own
//! transaction (or `--commit-every` commits) and its own progress record
//! (keyed by table and file), so `--resume` with the same list skips the
//! files that finished, continues the one that was interrupted and starts
//! the others.

use std::collections::HashSet;
use std::path::Path;

use litelane::quote_ident;

use super::report::{self as say, NoteKind, Progress as Caller};
use super::summary::{FilesSummary, Summary};
use super::{Outcome, EXIT_INTERRUPTED, EXIT_OK};
use crate::error::Error;
use crate::plan::options::{FileArgs, Mode, Summaries};

/// Keeps a summary for the caller (one file) or for the summary of a run
/// over several files.
pub(crate) fn emit(args: &FileArgs, summary: Summary) {
    if let Some(s) = &args.summaries {
        s.push(summary);
    }
}

/// Sources of `table` with a progress record in `db` (read-only; none when
/// the database or the progress table does not exist).
fn recorded_sources(db: &Path, table: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    if !db.is_file() {
        return out;
    }
    let Ok(c) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return out;
    };
    let sql = format!(
        "SELECT source FROM {} WHERE table_name = ?1 COLLATE NOCASE",
        quote_ident(crate::plan::resume::TABLE)
    );
    if let Ok(mut st) = c.prepare(&sql) {
        if let Ok(rows) = st.query_map([table], |r| r.get::<_, String>(0)) {
            out.extend(rows.flatten());
        }
    }
    out
}

/// Imports `files` into one table, one after the other; tells `caller` the
/// account of each file and the totals, and returns one summary with the
/// totals and each file's. Stops at the first file that fails: the files
/// before it stay imported, and the error says so.
pub(crate) fn run_all(
    args: FileArgs,
    files: Vec<String>,
    shared: Option<&litelane::Database>,
    caller: &mut dyn Caller,
) -> Result<Outcome, Error> {
    let Some(table) = args.table.clone() else {
        return Err(Error::Input(format!(
            "--table is required to import several files ({} given)",
            files.len()
        )));
    };
    // Every file against the database, and --rejects against every file
    // and the database, before the first file is touched.
    crate::read::guard::check_run(
        &files,
        &args.db,
        args.rejects.as_deref(),
        args.plan.as_deref(),
    )?;
    let summaries = Summaries::default();
    // One database open for all the files: one close (and its checkpoint)
    // instead of one per file. With `fast`, the journal mode is restored
    // once, after the last file.
    crate::read::guard::check_directory(&args.db)?;
    let owned = match shared {
        Some(_) => None,
        None => Some(super::open_db(&args.db, args.profile)?),
    };
    let journal_before = super::journal_mode_to_restore(owned.as_ref());
    let db = shared.or(owned.as_ref()).expect("opened above");
    let result = each_file(&args, &files, &table, db, &summaries, caller);
    drop(owned);
    if let Some(mode) = journal_before {
        if let Err(e) = super::restore_journal_mode(&args.db, &mode) {
            return Err(match result {
                Ok(_) => e,
                Err(first) => Error::Input(format!("{first}; and then: {e}")),
            });
        }
    }
    result
}

/// The arguments of the import of file `i` of `files`: after the first, a
/// file appends (adding columns it has), unless it is resumed (`--resume`
/// with its progress in `recorded`).
fn file_args(
    args: &FileArgs,
    files: &[String],
    i: usize,
    summaries: &Summaries,
    recorded: &HashSet<String>,
) -> FileArgs {
    let f = &files[i];
    let mut a = args.clone();
    a.source = f.clone();
    a.more.clear();
    a.keep_other_progress = true;
    a.summaries = Some(summaries.clone());
    a.rejects_append = i > 0;
    a.all_inputs = files.to_vec();
    if args.resume {
        // A file with a progress record is resumed (or reported done);
        // one without, after the first, was not reached: started anew.
        let key = super::source_key(f);
        if i > 0 && !recorded.contains(&key) && !recorded.contains(f) {
            a.resume = false;
            a.mode = Some(Mode::Append);
            a.alter = true;
        }
    } else if i > 0 {
        a.mode = Some(Mode::Append);
        a.alter = true;
    }
    a
}

/// The error of file `i` of `files`, saying which files before it stay
/// imported (`done`) and how many after it were not read.
fn file_failed(files: &[String], i: usize, done: &[&str], e: Error) -> Error {
    let before = if done.is_empty() {
        String::new()
    } else {
        format!("; the files before it stay imported ({})", done.join(", "))
    };
    let left = files.len() - i - 1;
    let after = if left > 0 {
        format!("; {left} file(s) after it were not read")
    } else {
        String::new()
    };
    Error::Context {
        message: format!(
            "file {} of {} ({}): {e}{before}{after}",
            i + 1,
            files.len(),
            files[i]
        ),
        source: Box::new(e),
    }
}

/// The totals of `n` files into `table` (told to `caller`) and the
/// summary with each file's.
fn totals(
    args: &FileArgs,
    n: usize,
    table: &str,
    summaries: &Summaries,
    caller: &mut dyn Caller,
) -> FilesSummary {
    let list = summaries.take();
    let inserted = list.iter().map(Summary::rows_inserted).sum();
    let skipped = list.iter().map(Summary::rows_skipped).sum();
    let rejected = list.iter().map(Summary::rows_rejected).sum();
    say::info(
        caller,
        NoteKind::Totals,
        &format!(
            "{n} files into {}: {inserted} rows imported, {skipped} skipped, {rejected} rejected",
            quote_ident(table),
        ),
    );
    FilesSummary {
        table: table.to_string(),
        files: list,
        rows_inserted: inserted,
        rows_skipped: skipped,
        rows_rejected: rejected,
        profile: args.profile.name().to_string(),
    }
}

/// The files of [`run_all`], one after the other, into `db`.
fn each_file(
    args: &FileArgs,
    files: &[String],
    table: &str,
    db: &litelane::Database,
    summaries: &Summaries,
    caller: &mut dyn Caller,
) -> Result<Outcome, Error> {
    let recorded = if args.resume {
        recorded_sources(&args.db, table)
    } else {
        HashSet::new()
    };
    let mut status = EXIT_OK;
    let mut done: Vec<&str> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let a = file_args(args, files, i, summaries, &recorded);
        match super::run_in(a, Some(db), caller) {
            Ok(s) => {
                status = status.max(s);
                if s == EXIT_INTERRUPTED {
                    return Ok(Outcome {
                        status: s,
                        summary: None,
                    });
                }
            }
            Err(e) => return Err(file_failed(files, i, &done, e)),
        }
        done.push(f);
    }
    let summary = totals(args, files.len(), table, summaries, caller);
    Ok(Outcome {
        status,
        summary: Some(Summary::Files(summary)),
    })
}
