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
use std::sync::{Arc, Mutex};

use litelane::quote_ident;

use super::convert::ColumnPlan;
use super::table::Existing;
use super::values::ColType;
use super::{ImportArgs, Mode, EXIT_INTERRUPTED, EXIT_OK};
use crate::error::CliError;

/// Where the per-file JSON summaries of a run over several files go.
#[derive(Debug, Clone, Default)]
pub struct Summaries(Arc<Mutex<Vec<serde_json::Value>>>);

/// Prints a JSON summary on stdout (`--json`), or keeps it for the summary
/// of a run over several files.
pub fn emit(args: &ImportArgs, summary: serde_json::Value) {
    match &args.summaries {
        Some(s) => s.0.lock().unwrap_or_else(|p| p.into_inner()).push(summary),
        None if args.json => println!("{summary}"),
        None => {}
    }
}

/// True when `p` holds a glob metacharacter.
fn is_pattern(p: &str) -> bool {
    p.contains(['*', '?', '['])
}

/// The files of `patterns`, in order: an existing path as it is, a glob
/// pattern as the files it matches, sorted by name (an error when it
/// matches none). A file named twice is imported once.
pub fn expand(patterns: &[String]) -> Result<Vec<String>, CliError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for p in patterns {
        let found: Vec<String> = if p == "-" || !is_pattern(p) || Path::new(p).exists() {
            vec![p.clone()]
        } else {
            let paths = glob::glob(p)
                .map_err(|e| CliError::Input(format!("bad glob pattern {p:?}: {e}")))?;
            let mut v = Vec::new();
            for entry in paths {
                let path = entry.map_err(|e| {
                    CliError::io(format!("expanding {p:?}"), std::io::Error::from(e))
                })?;
                if path.is_file() {
                    v.push(path.display().to_string());
                }
            }
            if v.is_empty() {
                return Err(CliError::Input(format!("no file matches {p:?}")));
            }
            v.sort();
            v
        };
        for f in found {
            let id = std::fs::canonicalize(&f)
                .map(|c| c.display().to_string())
                .unwrap_or_else(|_| f.clone());
            if seen.insert(id) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The files of a run over several files (`None`: one file, imported as
/// before). A glob pattern counts as several, even when it matches one.
pub fn several(args: &ImportArgs) -> Result<Option<Vec<String>>, CliError> {
    let patterns: Vec<String> = std::iter::once(args.source.clone())
        .chain(args.more.iter().cloned())
        .collect();
    let globbed = patterns
        .iter()
        .any(|p| p != "-" && is_pattern(p) && !Path::new(p).exists());
    if args.more.is_empty() && !globbed {
        return Ok(None);
    }
    let files = expand(&patterns)?;
    if files.iter().any(|f| f == "-") {
        return Err(CliError::Input(
            "stdin (-) cannot be one of several files; import it on its own".into(),
        ));
    }
    Ok(Some(files))
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
        quote_ident(super::resume::TABLE)
    );
    if let Ok(mut st) = c.prepare(&sql) {
        if let Ok(rows) = st.query_map([table], |r| r.get::<_, String>(0)) {
            out.extend(rows.flatten());
        }
    }
    out
}

/// Imports `files` into one table, one after the other; prints one summary
/// line per file (stderr) and, with `--json`, one object with the totals
/// and a `files` array of the per-file summaries. Stops at the first file
/// that fails: the files before it stay imported, and the error says so.
pub fn run_all(args: ImportArgs, files: Vec<String>) -> Result<i32, CliError> {
    let Some(table) = args.table.clone() else {
        return Err(CliError::Input(format!(
            "--table is required to import several files ({} given)",
            files.len()
        )));
    };
    // Every file against the database, and --rejects against every file
    // and the database, before the first file is touched.
    super::guard::check_run(
        &files,
        &args.db,
        args.rejects.as_deref(),
        args.plan.as_deref(),
    )?;
    let summaries = Summaries::default();
    // One database open for all the files: one close (and its checkpoint)
    // instead of one per file. With `fast`, the journal mode is restored
    // once, after the last file.
    super::guard::check_directory(&args.db)?;
    let journal_before = if args.profile == litelane::Profile::Fast {
        super::journal_mode(&args.db)
    } else {
        None
    };
    let db = super::open_db(&args)?;
    let result = each_file(&args, &files, &table, &db, &summaries);
    drop(db);
    if let Some(mode) = journal_before {
        if let Err(e) = super::restore_journal_mode(&args.db, &mode) {
            return Err(match result {
                Ok(_) => e,
                Err(first) => CliError::Input(format!("{first}; and then: {e}")),
            });
        }
    }
    result
}

/// The files of [`run_all`], one after the other, into `db`.
fn each_file(
    args: &ImportArgs,
    files: &[String],
    table: &str,
    db: &litelane::Database,
    summaries: &Summaries,
) -> Result<i32, CliError> {
    let recorded = if args.resume {
        recorded_sources(&args.db, table)
    } else {
        HashSet::new()
    };
    let mut status = EXIT_OK;
    let mut done: Vec<&str> = Vec::new();
    for (i, f) in files.iter().enumerate() {
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
        match super::run_in(a, Some(db)) {
            Ok(s) => {
                status = status.max(s);
                if s == EXIT_INTERRUPTED {
                    return Ok(s);
                }
            }
            Err(e) => {
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
                return Err(CliError::Input(format!(
                    "file {} of {} ({f}): {e}{before}{after}",
                    i + 1,
                    files.len()
                )));
            }
        }
        done.push(f);
    }
    let list = std::mem::take(&mut *summaries.0.lock().unwrap_or_else(|p| p.into_inner()));
    let sum = |k: &str| list.iter().filter_map(|s| s[k].as_u64()).sum::<u64>();
    if !args.quiet {
        eprintln!(
            "litelane: {} files into {}: {} rows imported, {} skipped, {} rejected",
            files.len(),
            quote_ident(table),
            sum("rows_inserted"),
            sum("rows_skipped"),
            sum("rows_rejected")
        );
    }
    if args.json {
        let summary = serde_json::json!({
            "table": table,
            "files": list,
            "rows_inserted": sum("rows_inserted"),
            "rows_skipped": sum("rows_skipped"),
            "rows_rejected": sum("rows_rejected"),
            "profile": args.profile.name(),
        });
        println!("{summary}");
    }
    Ok(status)
}

/// The statement that adds `--source-column` NAME (TEXT) to the table,
/// when it lacks it (`table`: the existing table appended to; `None`: a new
/// table). An error when the input has a column of that name.
pub fn source_column_sql(
    table_name: &str,
    name: &str,
    columns: &[ColumnPlan],
    table: Option<&Existing>,
) -> Result<Option<String>, CliError> {
    if name.is_empty() {
        return Err(CliError::Input("--source-column needs a name".into()));
    }
    if columns.iter().any(|c| c.name.eq_ignore_ascii_case(name)) {
        return Err(CliError::Input(format!(
            "--source-column {}: the input has a column of that name; give another",
            quote_ident(name)
        )));
    }
    let present = table.is_some_and(|t| t.column(name).is_some());
    Ok((!present).then(|| super::alter::add_column_sql(table_name, name, ColType::Text, false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_sorted_once_each_and_fail_when_empty() {
        let d = tempfile::tempdir().unwrap();
        for n in ["b.csv", "a.csv", "c.txt", "a[1].csv"] {
            std::fs::write(d.path().join(n), "x\n1\n").unwrap();
        }
        let p = |s: &str| d.path().join(s).display().to_string();
        let got = expand(&[p("*.csv"), p("a.csv")]).unwrap();
        assert_eq!(got, vec![p("a.csv"), p("a[1].csv"), p("b.csv")]);
        // An existing name with metacharacters is that file, not a pattern.
        assert_eq!(expand(&[p("a[1].csv")]).unwrap(), vec![p("a[1].csv")]);
        let e = expand(&[p("*.tsv")]).unwrap_err().to_string();
        assert!(e.contains("no file matches"), "{e}");
        // A missing plain path is passed on (opening it names it).
        assert_eq!(expand(&[p("nope.csv")]).unwrap(), vec![p("nope.csv")]);
    }
}
