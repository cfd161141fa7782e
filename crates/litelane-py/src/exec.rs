//! Running one statement on a connection: binding, stepping, collecting.
//! Runs with the GIL released; only a connection's trace callback (and the
//! user functions SQLite calls) take it (see `functions.rs`).

use std::borrow::Cow;

use litelane::rusqlite::fallible_iterator::FallibleIterator as _;
use litelane::rusqlite::{Connection, Statement};
use litelane::{Error, MultiRowInsert, Result, Value};

use crate::convert::{lookup_param, Params};

/// What one statement (or one `executemany`) produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Result column names, `None` for a statement without result columns.
    pub columns: Option<Vec<String>>,
    /// Declared types of the result columns (`None` for expressions).
    pub decltypes: Vec<Option<String>>,
    /// Every row the statement returned.
    pub rows: Vec<Vec<Value>>,
    /// Rows changed by INSERT/UPDATE/DELETE/REPLACE statements (summed over
    /// an `executemany`); -1 for any other statement, as in `sqlite3`.
    pub rowcount: i64,
    /// `sqlite3_last_insert_rowid` of the connection after the statement.
    pub lastrowid: i64,
    /// True when the statement came to the writer (not a reader).
    pub wrote: bool,
}

fn invalid(message: String) -> Error {
    Error::InvalidInput { message }
}

/// The first word of `sql` after whitespace and comments, as written.
fn leading_word(sql: &str) -> &str {
    // Nearly every statement starts with its keyword: the word is then the
    // run of ASCII letters it begins with, as the loop below finds too.
    let letters = sql.bytes().take_while(u8::is_ascii_alphabetic).count();
    if letters > 0 {
        return &sql[..letters];
    }
    word_after_blanks_and_comments(sql)
}

/// [`leading_word`] the long way: skips whitespace and comments first.
fn word_after_blanks_and_comments(sql: &str) -> &str {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.find('\n').map_or("", |i| &r[i + 1..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else {
            break;
        }
    }
    let end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The first keyword of `sql`, upper-cased, after whitespace and comments.
pub fn leading_keyword(sql: &str) -> String {
    leading_word(sql).to_ascii_uppercase()
}

/// True when `sql` starts with one of `keywords` (upper-case), in any case.
pub fn starts_with_keyword(sql: &str, keywords: &[&str]) -> bool {
    let word = leading_word(sql);
    keywords.iter().any(|k| word.eq_ignore_ascii_case(k))
}

/// True for the statements whose changes `sqlite3` counts in `rowcount`.
pub fn is_dml(sql: &str) -> bool {
    starts_with_keyword(sql, &["INSERT", "UPDATE", "DELETE", "REPLACE"])
}

pub fn bind_params(stmt: &mut Statement<'_>, params: &Params) -> Result<()> {
    let wanted = stmt.parameter_count();
    match params {
        Params::Empty | Params::Positional(_) => {
            let given: &[Value] = match params {
                Params::Positional(v) => v,
                _ => &[],
            };
            if given.len() != wanted {
                return Err(invalid(format!(
                    "Incorrect number of bindings supplied. The current statement uses {wanted}, \
                     and there are {} supplied.",
                    given.len()
                )));
            }
            for (i, v) in given.iter().enumerate() {
                stmt.raw_bind_parameter(i + 1, v)?;
            }
        }
        Params::Named(_) | Params::Lookup(_) => {
            for i in 1..=wanted {
                let name = stmt.parameter_name(i).map(str::to_owned).ok_or_else(|| {
                    invalid(format!(
                        "Binding {i} has no name, but you supplied a dictionary (which has only names)."
                    ))
                })?;
                let v = match params {
                    Params::Named(map) => map.get(&name[1..]).map(Cow::Borrowed),
                    Params::Lookup(mapping) => lookup_param(mapping, &name, i)
                        .map_err(invalid)?
                        .map(Cow::Owned),
                    Params::Empty | Params::Positional(_) => None,
                };
                let v = v.ok_or_else(|| {
                    invalid(format!(
                        "You did not supply a value for binding parameter {name}."
                    ))
                })?;
                stmt.raw_bind_parameter(i, &*v)?;
            }
        }
    }
    Ok(())
}

fn prepare<'c>(conn: &'c Connection, sql: &str) -> Result<litelane::rusqlite::CachedStatement<'c>> {
    let one_at_a_time = || invalid("You can only execute one statement at a time.".into());
    match conn.prepare_cached(sql) {
        Ok(stmt) => Ok(stmt),
        // One statement followed by nothing but blanks and comments (an
        // unclosed `/*` included) is one statement, as in sqlite3; rusqlite
        // refuses any tail, so prepare the statement alone.
        Err(e) => match litelane::split_statements(sql).as_slice() {
            [one] if *one != sql => conn
                .prepare_cached(one)
                .map_err(|e| Error::from_sqlite(e, "")),
            [_, _, ..] => Err(one_at_a_time()),
            _ => Err(match e {
                litelane::rusqlite::Error::MultipleStatement => one_at_a_time(),
                e => Error::from_sqlite(e, ""),
            }),
        },
    }
}

/// Steps a bound statement to the end, collecting its rows. The width is
/// read from each stepped row, never before the first step: `sqlite3_step`
/// re-prepares a statement whose schema changed (an `ALTER TABLE` since it
/// was cached), and only then does it have its new shape.
fn step_all(stmt: &mut Statement<'_>, rows: &mut Vec<Vec<Value>>) -> Result<()> {
    let mut q = stmt.raw_query();
    while let Some(r) = q.next()? {
        let n = r.as_ref().column_count();
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            row.push(value_at(r, i)?);
        }
        rows.push(row);
    }
    Ok(())
}

/// Column `i` of a row. TEXT that is not UTF-8 is an error naming the
/// column and the text, as `sqlite3` reports it.
pub fn value_at(r: &litelane::rusqlite::Row<'_>, i: usize) -> Result<Value> {
    use litelane::rusqlite::types::ValueRef;
    match r.get_ref(i)? {
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => Ok(Value::Text(text.to_owned())),
            Err(_) => Err(Error::Sqlite {
                code: litelane::rusqlite::ffi::SQLITE_ERROR,
                os: None,
                extended_code: litelane::rusqlite::ffi::SQLITE_ERROR,
                message: format!(
                    "Could not decode to UTF-8 column '{}' with text '{}'",
                    r.as_ref().column_name(i).unwrap_or("?"),
                    String::from_utf8_lossy(bytes)
                ),
                context: String::new(),
            }),
        },
        ValueRef::Null => Ok(Value::Null),
        ValueRef::Integer(i) => Ok(Value::Integer(i)),
        ValueRef::Real(f) => Ok(Value::Real(f)),
        ValueRef::Blob(b) => Ok(Value::Blob(b.to_vec())),
    }
}

fn columns_of(stmt: &Statement<'_>) -> Option<Vec<String>> {
    (stmt.column_count() > 0).then(|| stmt.column_names().map(str::to_owned).collect())
}

/// Runs one statement on `conn` (a writer transaction or a reader).
pub fn run(conn: &Connection, sql: &str, params: &Params) -> Result<Outcome> {
    let mut stmt = prepare(conn, sql)?;
    run_prepared(conn, &mut stmt, sql, params)
}

fn run_prepared(
    conn: &Connection,
    stmt: &mut Statement<'_>,
    sql: &str,
    params: &Params,
) -> Result<Outcome> {
    bind_params(stmt, params)?;
    crate::functions::trace(stmt, sql);
    let mut out = Outcome::default();
    step_all(stmt, &mut out.rows)?;
    // The shape after stepping: the one the rows have (see `step_all`).
    out.columns = columns_of(stmt);
    out.decltypes = stmt
        .columns()
        .map(|c| c.decl_type().map(str::to_owned))
        .collect();
    out.rowcount = if is_dml(sql) {
        conn.changes() as i64
    } else {
        -1
    };
    out.lastrowid = conn.last_insert_rowid();
    Ok(out)
}

/// True when `sql` changes the schema (`CREATE`, `DROP`, `ALTER`,
/// `REINDEX`): it is never prepared on a reader first. (A reader that
/// prepared `CREATE INDEX` on an expression of an application function
/// then planned queries without that index: found with a deterministic
/// function in an index, tests/python/test_functions.py.)
fn changes_schema(sql: &str) -> bool {
    starts_with_keyword(sql, &["CREATE", "DROP", "ALTER", "REINDEX"])
}

/// On a reader: runs the statement if it is read-only, or returns `None`
/// (without running anything) if it would write.
pub fn run_if_readonly(conn: &Connection, sql: &str, params: &Params) -> Result<Option<Outcome>> {
    if changes_schema(sql) {
        return Ok(None);
    }
    let mut stmt = prepare(conn, sql)?;
    if !stmt.readonly() {
        return Ok(None);
    }
    run_prepared(conn, &mut stmt, sql, params).map(Some)
}

/// True when `sql` prepares on `conn` as one statement.
pub fn prepares(conn: &Connection, sql: &str) -> bool {
    prepare(conn, sql).is_ok()
}

/// True when `sql` is one read-only statement (prepared on `conn`).
pub fn is_readonly(conn: &Connection, sql: &str) -> Result<bool> {
    Ok(prepare(conn, sql)?.readonly())
}

/// Runs one statement once per parameter set (`executemany`). Statements
/// that return rows are refused, as in `sqlite3`. With `may_pack` (no
/// Python function, aggregate or collation on the engine), a plain `INSERT
/// ... VALUES (?, ...)` runs as multi-row statements, with the same outcome
/// (`crate::pack`).
/// On an error after some sets ran, the rows they changed are stored in
/// `partial` (the failing set's own changes are undone by SQLite).
pub fn run_many(
    conn: &Connection,
    sql: &str,
    sets: &[Params],
    may_pack: bool,
    partial: &std::sync::atomic::AtomicI64,
) -> Result<Outcome> {
    let mut stmt = prepare(conn, sql)?;
    if stmt.column_count() > 0 {
        return Err(invalid(
            "executemany() can only execute DML statements.".into(),
        ));
    }
    if may_pack && crate::functions::no_hooks() {
        if let Some(o) = run_multirow(conn, &stmt, sql, sets)? {
            return Ok(o);
        }
    }
    let dml = is_dml(sql);
    let mut out = Outcome {
        rowcount: if dml { 0 } else { -1 },
        ..Outcome::default()
    };
    let mut sink = Vec::new();
    for params in sets {
        let ran = bind_params(&mut stmt, params).and_then(|()| {
            crate::functions::trace(&stmt, sql);
            step_all(&mut stmt, &mut sink)
        });
        if let Err(e) = ran {
            partial.store(out.rowcount.max(0), std::sync::atomic::Ordering::Relaxed);
            return Err(e);
        }
        if dml {
            out.rowcount += conn.changes() as i64;
        }
    }
    out.lastrowid = conn.last_insert_rowid();
    Ok(out)
}

/// `run_many` as multi-row statements ([`MultiRowInsert`]), if `sql` is a
/// plain one-row `INSERT` (prepared as `stmt`) and every set a sequence of
/// its length; `None` when nothing ran and the sets must run one at a time.
fn run_multirow(
    conn: &Connection,
    stmt: &Statement<'_>,
    sql: &str,
    sets: &[Params],
) -> Result<Option<Outcome>> {
    let Some(insert) = MultiRowInsert::parse(sql) else {
        return Ok(None);
    };
    let n = stmt.parameter_count();
    if insert.columns() != n || (1..=n).any(|i| stmt.parameter_name(i).is_some()) {
        return Ok(None);
    }
    let rows: Option<Vec<&[Value]>> = sets
        .iter()
        .map(|s| match s {
            Params::Positional(v) => Some(v.as_slice()),
            _ => None,
        })
        .collect();
    let Some(rows) = rows else { return Ok(None) };
    Ok(insert.run(conn, sql, &rows)?.map(|changes| Outcome {
        rowcount: changes as i64,
        lastrowid: conn.last_insert_rowid(),
        ..Outcome::default()
    }))
}

/// What a transaction-control statement inside a script means.
fn script_control(sql: &str) -> Option<&'static str> {
    match leading_keyword(sql).as_str() {
        "BEGIN" => Some("BEGIN"),
        "COMMIT" | "END" => Some("COMMIT"),
        "ROLLBACK" => {
            let upper = sql.to_ascii_uppercase();
            // ROLLBACK TO <savepoint> is an ordinary statement here.
            if upper.split_whitespace().any(|w| w == "TO") {
                None
            } else {
                Some("ROLLBACK")
            }
        }
        _ => None,
    }
}

/// Runs every statement of a script in order inside the caller's write
/// transaction. `BEGIN`, `COMMIT` and `END` in the script are skipped (the
/// whole script is one transaction); a bare `ROLLBACK` fails the script, so
/// the caller's transaction rolls back.
pub fn run_script(conn: &Connection, script: &str) -> Result<()> {
    let mut batch = litelane::rusqlite::Batch::new(conn, script);
    while let Some(mut stmt) = batch
        .next()
        .map_err(|e| Error::from_sqlite(e, "in a script"))?
    {
        let text = stmt.expanded_sql().unwrap_or_default();
        match script_control(&text) {
            Some("ROLLBACK") => {
                return Err(Error::User {
                    message: "the script ran ROLLBACK: its changes were rolled back".into(),
                })
            }
            Some(_) => continue,
            None => {
                crate::functions::trace(&stmt, &text);
                let mut sink = Vec::new();
                step_all(&mut stmt, &mut sink).map_err(|e| with_context(e, &text))?;
            }
        }
    }
    Ok(())
}

fn with_context(mut e: Error, sql: &str) -> Error {
    if let Error::Sqlite { context, .. } = &mut e {
        if context.is_empty() {
            *context = format!("running {sql:?}");
        }
    }
    e
}

/// Refuses transaction-control statements where litelane owns the
/// transaction (use the API's commit/rollback instead): an `InvalidInput`
/// error, a `ProgrammingError` in Python.
pub fn refuse_control(sql: &str) -> Result<()> {
    if !starts_with_keyword(sql, &["BEGIN", "COMMIT", "END", "ROLLBACK"]) {
        return Ok(()); // the usual case, decided without allocating
    }
    let kw = leading_keyword(sql);
    let bare_rollback = kw == "ROLLBACK"
        && !sql
            .to_ascii_uppercase()
            .split_whitespace()
            .any(|w| w == "TO");
    if matches!(kw.as_str(), "BEGIN" | "COMMIT" | "END") || bare_rollback {
        return Err(invalid(format!("{kw} is not run as a statement here: litelane owns the transaction (use transaction(), commit() or rollback())")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite_error(context: &str) -> Error {
        Error::Sqlite {
            code: 1,
            extended_code: 1,
            message: "no such table: nope".into(),
            context: context.into(),
            os: Some(std::io::Error::from_raw_os_error(5).into()),
        }
    }

    /// The first word as written, after whitespace and comments; the
    /// shortcut for a statement that starts with its keyword finds what
    /// the long way finds.
    #[test]
    fn leading_word_skips_blanks_and_comments() {
        let cases = [
            ("BEGIN IMMEDIATE", "BEGIN"),
            ("begin", "begin"),
            ("  \n\tCOMMIT", "COMMIT"),
            ("-- note\nINSERT INTO t VALUES (1)", "INSERT"),
            ("/* a */ /* b */select 1", "select"),
            ("/* never closed", ""),
            ("-- only a comment", ""),
            ("", ""),
            ("; begin", ""),
            ("\u{feff}begin", ""),
            ("\u{a0}END", "END"),
            ("Ärger", ""),
            ("x1", "x"),
            ("SELECT", "SELECT"),
        ];
        for (sql, word) in cases {
            assert_eq!(leading_word(sql), word, "{sql:?}");
            assert_eq!(word_after_blanks_and_comments(sql), word, "{sql:?}");
        }
    }

    #[test]
    fn with_context_names_the_statement_only_where_none_is_named() {
        let e = with_context(sqlite_error(""), "SELECT 1");
        let Error::Sqlite {
            message,
            context,
            os,
            ..
        } = e
        else {
            panic!("not an SQLite error: {e:?}")
        };
        assert_eq!(message, "no such table: nope");
        assert_eq!(context, "running \"SELECT 1\"");
        assert!(os.is_some(), "the OS error is kept");
        match with_context(sqlite_error("opening"), "SELECT 1") {
            Error::Sqlite { context, .. } => assert_eq!(context, "opening"),
            e => panic!("not an SQLite error: {e:?}"),
        }
        let user = Error::User {
            message: "no".into(),
        };
        assert!(matches!(
            with_context(user, "SELECT 1"),
            Error::User { message } if message == "no"
        ));
    }
}
