//! A single-row `INSERT ... VALUES (?, ...)` run for many rows as multi-row
//! statements: [`crate::TARGET_PARAMS_PER_STATEMENT`] parameters bound to one
//! `INSERT ... VALUES (?,..),(?,..),...` and stepped once, instead of one
//! bind and step per row (the drop-in's `executemany`).
//!
//! The outcome must be the one of running the statement once per row: the
//! rows before a failing row stay, the failing row's error is raised. So the
//! multi-row statements run inside a savepoint; if any fails, the savepoint
//! is rolled back (undoing every row of them, also those `ON CONFLICT FAIL`
//! keeps) and [`MultiRowInsert::run`] says to run the rows one at a time,
//! which stops at the failing row as before. A failure that ended the whole
//! transaction (`ON CONFLICT ROLLBACK`, a full disk) leaves nothing to run
//! again: its error is the outcome, as it is one row at a time.
//!
//! Rows that run twice call twice any application function that a trigger,
//! default or constraint calls: callers use this only where no application
//! code runs inside statements.

use rusqlite::Connection;

use crate::{Result, Value};

/// The name of the savepoint the multi-row statements run in.
const SAVEPOINT: &str = "\"litelane multi-row insert\"";

/// An `INSERT` whose text ends with one `VALUES` tuple of anonymous `?`
/// placeholders, recognized by [`MultiRowInsert::parse`].
#[derive(Debug, PartialEq)]
pub struct MultiRowInsert<'a> {
    /// The statement's text up to the tuple (`INSERT INTO t(a, b) VALUES`).
    prefix: &'a str,
    /// The number of `?` in the tuple.
    columns: usize,
}

impl<'a> MultiRowInsert<'a> {
    /// Recognizes `INSERT [OR action] INTO name [AS alias] [(columns)] VALUES
    /// (?, ...)` and `REPLACE INTO ...` with only anonymous `?` in the tuple,
    /// nothing after it but blanks and one `;`, and no comment anywhere. Anything
    /// else (upserts, `RETURNING`, `SELECT`, `WITH`, named or numbered
    /// parameters, literals in the tuple) is `None`: it runs one row at a time.
    ///
    /// ```
    /// use litelane::MultiRowInsert;
    /// assert_eq!(MultiRowInsert::parse("INSERT INTO t(a, b) VALUES (?, ?)").unwrap().columns(), 2);
    /// assert!(MultiRowInsert::parse("INSERT INTO t VALUES (?) RETURNING a").is_none());
    /// ```
    pub fn parse(sql: &'a str) -> Option<Self> {
        if sql.contains("--") || sql.contains("/*") {
            return None;
        }
        let mut t = Tokens { rest: sql };
        let first = t.word()?;
        if first.eq_ignore_ascii_case("INSERT") {
            let mut next = t.word()?;
            if next.eq_ignore_ascii_case("OR") {
                let action = t.word()?;
                let known = ["ROLLBACK", "ABORT", "REPLACE", "FAIL", "IGNORE"];
                if !known.iter().any(|k| action.eq_ignore_ascii_case(k)) {
                    return None;
                }
                next = t.word()?;
            }
            if !next.eq_ignore_ascii_case("INTO") {
                return None;
            }
        } else if first.eq_ignore_ascii_case("REPLACE") {
            if !t.word()?.eq_ignore_ascii_case("INTO") {
                return None;
            }
        } else {
            return None;
        }
        t.name()?;
        if t.punct('.') {
            t.name()?;
        }
        let mut word = t.name()?;
        if word.eq_ignore_ascii_case("AS") {
            t.name()?; // the alias
            word = t.name()?;
        }
        if word == "(" {
            loop {
                t.name()?;
                if t.punct(')') {
                    break;
                }
                if !t.punct(',') {
                    return None;
                }
            }
            word = t.name()?;
        }
        if !word.eq_ignore_ascii_case("VALUES") {
            return None;
        }
        let prefix_len = sql.len() - t.rest.len();
        if !t.punct('(') {
            return None;
        }
        let mut columns = 0;
        loop {
            if !t.punct('?') {
                return None;
            }
            // `?NNN` is numbered: not one row of many.
            if t.rest.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            columns += 1;
            if t.punct(')') {
                break;
            }
            if !t.punct(',') {
                return None;
            }
        }
        t.punct(';');
        if !t.rest.trim().is_empty() {
            return None;
        }
        Some(MultiRowInsert {
            prefix: &sql[..prefix_len],
            columns,
        })
    }

    /// The number of `?` in the statement's one `VALUES` tuple: the values of
    /// one row.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Inserts `rows` (each of [`columns`](Self::columns) values) on `conn`,
    /// inside its open transaction: whole multi-row statements first, the rows
    /// left over one at a time with `sql`, the statement as written. Returns the
    /// rows changed (`sqlite3_changes` summed), or `None` when nothing was
    /// changed and the rows must run one at a time: a multi-row statement
    /// failed (and was undone), a row is not [`columns`](Self::columns) long,
    /// there are too few rows to gain, or no transaction is open. An error
    /// means the failure ended the transaction.
    pub fn run(&self, conn: &Connection, sql: &str, rows: &[&[Value]]) -> Result<Option<u64>> {
        let per_statement = (crate::TARGET_PARAMS_PER_STATEMENT / self.columns).max(1);
        if rows.len() < per_statement * 2
            || conn.is_autocommit()
            || rows.iter().any(|r| r.len() != self.columns)
        {
            return Ok(None);
        }
        conn.execute_batch(&format!("SAVEPOINT {SAVEPOINT}"))?;
        match self.insert_all(conn, sql, rows, per_statement) {
            Ok(changes) => {
                conn.execute_batch(&format!("RELEASE {SAVEPOINT}"))?;
                Ok(Some(changes))
            }
            // The failure ended the transaction: nothing left to undo or redo.
            Err(e) if conn.is_autocommit() => Err(e),
            Err(_) => {
                conn.execute_batch(&format!("ROLLBACK TO {SAVEPOINT}; RELEASE {SAVEPOINT}"))?;
                Ok(None)
            }
        }
    }

    /// Inserts `rows`, `per_statement` to a statement, the rest one at a time;
    /// the rows changed.
    fn insert_all(
        &self,
        conn: &Connection,
        sql: &str,
        rows: &[&[Value]],
        per_statement: usize,
    ) -> Result<u64> {
        let mut changes = 0;
        let mut chunks = rows.chunks_exact(per_statement);
        let multi = crate::insert_sql(self.prefix, self.columns, per_statement);
        let mut stmt = conn.prepare_cached(&multi)?;
        for chunk in &mut chunks {
            for (i, v) in chunk.iter().flat_map(|r| r.iter()).enumerate() {
                stmt.raw_bind_parameter(i + 1, v)?;
            }
            stmt.raw_execute()?;
            changes += conn.changes();
        }
        let mut single = conn.prepare_cached(sql)?;
        for row in chunks.remainder() {
            for (i, v) in row.iter().enumerate() {
                single.raw_bind_parameter(i + 1, v)?;
            }
            single.raw_execute()?;
            changes += conn.changes();
        }
        Ok(changes)
    }
}

/// A cursor over SQL text that reads the few tokens [`MultiRowInsert::parse`] needs.
struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    /// A bare word of ASCII letters.
    fn word(&mut self) -> Option<&'a str> {
        self.rest = self.rest.trim_start();
        let end = self
            .rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(self.rest.len());
        (end > 0).then(|| self.take(end))
    }

    /// A name (bare, `"quoted"`, `[bracketed]` or `` `backticked` ``), or
    /// one `(`: what may follow a table name.
    fn name(&mut self) -> Option<&'a str> {
        self.rest = self.rest.trim_start();
        let mut chars = self.rest.char_indices();
        let (_, c) = chars.next()?;
        let end = match c {
            '(' => 1,
            '"' | '`' | '[' => {
                let close = if c == '[' { ']' } else { c };
                let mut end = None;
                let mut it = self.rest.char_indices().skip(1).peekable();
                while let Some((i, ch)) = it.next() {
                    if ch == close {
                        // A doubled quote is one quote character in the name.
                        if close != ']' && it.peek().is_some_and(|&(_, n)| n == close) {
                            it.next();
                            continue;
                        }
                        end = Some(i + 1);
                        break;
                    }
                }
                end?
            }
            c if c.is_alphabetic() || c == '_' => self
                .rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(self.rest.len()),
            _ => return None,
        };
        Some(self.take(end))
    }

    /// Takes `c` if it comes next (after blanks).
    fn punct(&mut self, c: char) -> bool {
        let trimmed = self.rest.trim_start();
        match trimmed.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn take(&mut self, end: usize) -> &'a str {
        let (head, tail) = self.rest.split_at(end);
        self.rest = tail;
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn recognizes_plain_inserts_and_nothing_else() {
        let yes: &[(&str, &str, usize)] = &[
            ("INSERT INTO t VALUES (?)", "INSERT INTO t VALUES", 1),
            (
                "insert into t(a,b)values(?,?);",
                "insert into t(a,b)values",
                2,
            ),
            (
                "INSERT OR IGNORE INTO main.\"we\"\"ird\" AS x ([a b], `c`) VALUES ( ? , ? ) ; ",
                "INSERT OR IGNORE INTO main.\"we\"\"ird\" AS x ([a b], `c`) VALUES",
                2,
            ),
            ("REPLACE INTO t VALUES (?,?,?)", "REPLACE INTO t VALUES", 3),
            (
                "INSERT INTO été(ü) VALUES (?)",
                "INSERT INTO été(ü) VALUES",
                1,
            ),
        ];
        for (sql, prefix, columns) in yes {
            assert_eq!(
                MultiRowInsert::parse(sql),
                Some(MultiRowInsert {
                    prefix,
                    columns: *columns
                }),
                "{sql}"
            );
        }
        let no = [
            "INSERT INTO t SELECT a FROM u UNION VALUES (?)",
            "INSERT INTO t VALUES (?) ON CONFLICT DO NOTHING",
            "INSERT INTO t VALUES (?) RETURNING a",
            "INSERT INTO t VALUES (?1)",
            "INSERT INTO t VALUES (:a)",
            "INSERT INTO t VALUES (?, 1)",
            "INSERT INTO t VALUES (?), (?)",
            "INSERT INTO t VALUES ()",
            "INSERT INTO t DEFAULT VALUES",
            "INSERT INTO t VALUES (?) -- x",
            "INSERT /* c */ INTO t VALUES (?)",
            "INSERT INTO t VALUES (?); INSERT INTO t VALUES (?)",
            "WITH c AS (SELECT 1) INSERT INTO t VALUES (?)",
            "INSERT OR WHATEVER INTO t VALUES (?)",
            "UPDATE t SET a = ? WHERE b IN (VALUES (?))",
            "INSERT INTO \"t VALUES (?)",
            "INSERT INTO t(a, VALUES (?)",
            "INSERT INTO t(a b) VALUES (?)",
            "INSERT INTO t AS VALUES (?)",
            "INSERT INTO t SELECT * FROM (VALUES (?))",
            "",
        ];
        for sql in no {
            assert_eq!(MultiRowInsert::parse(sql), None, "{sql}");
        }
    }

    /// The tables the rows go into: constraints of every conflict kind,
    /// triggers that fail or write, a STRICT table with a CHECK.
    const SCHEMAS: [&str; 4] = [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE, v TEXT NOT NULL)",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE ON CONFLICT FAIL, v TEXT NOT NULL)",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE, v TEXT);
         CREATE TABLE log(k);
         CREATE TRIGGER fail BEFORE INSERT ON t WHEN NEW.v = 'boom'
           BEGIN SELECT RAISE(FAIL, 'boom'); END;
         CREATE TRIGGER skip BEFORE INSERT ON t WHEN NEW.v = 'bad'
           BEGIN SELECT RAISE(IGNORE); END;
         CREATE TRIGGER logged AFTER INSERT ON t BEGIN INSERT INTO log VALUES (NEW.k); END",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT UNIQUE, v TEXT NOT NULL CHECK (v <> 'bad')) STRICT",
    ];

    const VERBS: [&str; 7] = [
        "INSERT",
        "INSERT OR IGNORE",
        "INSERT OR REPLACE",
        "INSERT OR FAIL",
        "INSERT OR ABORT",
        "INSERT OR ROLLBACK",
        "REPLACE",
    ];

    /// What a run left: its error, the rows changed and the last rowid (on
    /// success), whether the transaction is still open, and every table.
    #[derive(Debug, PartialEq)]
    struct After {
        error: Option<String>,
        changes: Option<(u64, i64)>,
        in_transaction: bool,
        tables: Vec<Vec<Value>>,
    }

    fn fresh(schema: &str) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(schema).unwrap();
        // Rows already there, for the conflicts to meet.
        conn.execute_batch("INSERT INTO t(k, v) VALUES (7, 'old'), (500, 'old')")
            .unwrap();
        conn.execute_batch("BEGIN").unwrap();
        conn
    }

    /// Runs `sql` once per row, stopping at the first error.
    fn one_at_a_time(conn: &Connection, sql: &str, rows: &[&[Value]]) -> Result<u64> {
        let mut stmt = conn.prepare(sql)?;
        let mut changes = 0;
        for row in rows {
            for (i, v) in row.iter().enumerate() {
                stmt.raw_bind_parameter(i + 1, v)?;
            }
            stmt.raw_execute()?;
            changes += conn.changes();
        }
        Ok(changes)
    }

    fn after(conn: &Connection, r: Result<u64>) -> After {
        let mut tables = Vec::new();
        for sql in ["SELECT * FROM t ORDER BY id", "SELECT * FROM log"] {
            let Ok(mut stmt) = conn.prepare(sql) else {
                continue;
            };
            let n = stmt.column_count();
            let mut rows = stmt.raw_query();
            while let Some(row) = rows.next().unwrap() {
                tables.push((0..n).map(|i| row.get::<_, Value>(i).unwrap()).collect());
            }
        }
        After {
            changes: r.as_ref().ok().map(|&c| (c, conn.last_insert_rowid())),
            error: r.err().map(|e| e.to_string()),
            in_transaction: !conn.is_autocommit(),
            tables,
        }
    }

    /// A row that breaks a rule of some schema, or of none.
    fn hostile(kind: usize, i: usize) -> Vec<Value> {
        let text = |t: &str| Value::Text(t.into());
        match kind {
            0 => vec![Value::Integer(7), text("key already stored")],
            1 => vec![
                Value::Integer(1000 + i as i64 / 2),
                text("key of an earlier row"),
            ],
            2 => vec![Value::Null, text("no key")],
            3 => vec![text("x"), text("text key")],
            4 => vec![Value::Integer(-1 - i as i64), text("boom")],
            5 => vec![Value::Integer(-1 - i as i64), text("bad")],
            6 => vec![Value::Integer(-1 - i as i64), Value::Null],
            _ => vec![Value::Integer(-1 - i as i64), Value::Blob(vec![0, 1])],
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Multi-row statements (falling back to one row at a time when
        /// `run` says so) leave exactly what one row at a time leaves.
        #[test]
        fn multi_row_leaves_what_one_row_at_a_time_leaves(
            schema in 0..SCHEMAS.len(),
            verb in 0..VERBS.len(),
            n in 0usize..700,
            breaks in proptest::collection::vec((0usize..700, 0usize..8), 0..3),
        ) {
            let sql = format!("{} INTO t(k, v) VALUES (?, ?)", VERBS[verb]);
            let mut rows: Vec<Vec<Value>> = (0..n)
                .map(|i| vec![Value::Integer(1000 + i as i64), Value::Text(format!("v{i}"))])
                .collect();
            for (at, kind) in breaks {
                if n > 0 {
                    rows[at % n] = hostile(kind, at % n);
                }
            }
            let rows: Vec<&[Value]> = rows.iter().map(Vec::as_slice).collect();
            let expected = {
                let conn = fresh(SCHEMAS[schema]);
                let r = one_at_a_time(&conn, &sql, &rows);
                after(&conn, r)
            };
            let conn = fresh(SCHEMAS[schema]);
            let insert = MultiRowInsert::parse(&sql).unwrap();
            let r = match insert.run(&conn, &sql, &rows) {
                Ok(Some(changes)) => Ok(changes),
                Ok(None) => one_at_a_time(&conn, &sql, &rows),
                Err(e) => Err(e),
            };
            prop_assert_eq!(after(&conn, r), expected);
        }
    }

    #[test]
    fn rows_that_all_fit_run_multi_row_and_a_failure_changes_nothing() {
        let sql = "INSERT INTO t(k, v) VALUES (?, ?)";
        let insert = MultiRowInsert::parse(sql).unwrap();
        let values: Vec<[Value; 2]> = (0..1000)
            .map(|i| [Value::Integer(1000 + i), Value::Text(format!("v{i}"))])
            .collect();
        let mut rows: Vec<&[Value]> = values.iter().map(|r| r.as_slice()).collect();
        let conn = fresh(SCHEMAS[0]);
        assert_eq!(insert.run(&conn, sql, &rows).unwrap(), Some(1000));
        assert_eq!(conn.last_insert_rowid(), 1002);

        let conn = fresh(SCHEMAS[1]); // ON CONFLICT FAIL keeps rows a statement wrote
        let dup = [Value::Integer(7), Value::Text("dup".into())];
        rows[900] = &dup;
        let count = |c: &Connection| -> i64 {
            c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(insert.run(&conn, sql, &rows).unwrap(), None);
        assert_eq!(count(&conn), 2, "the savepoint undid every row");
        assert!(!conn.is_autocommit());

        // Too few rows to gain, a short row, no transaction: nothing runs.
        assert_eq!(insert.run(&conn, sql, &rows[..10]).unwrap(), None);
        let short = [Value::Integer(1)];
        rows[5] = &short;
        assert_eq!(insert.run(&conn, sql, &rows).unwrap(), None);
        conn.execute_batch("COMMIT").unwrap();
        rows[5] = rows[6];
        rows[900] = rows[901];
        assert_eq!(insert.run(&conn, sql, &rows).unwrap(), None);
        assert_eq!(count(&conn), 2);
    }
}
