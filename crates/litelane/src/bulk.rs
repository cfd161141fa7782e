//! Bulk insert: many rows through one cached multi-row `INSERT`.

use std::time::{Duration, Instant};

use rusqlite::types::{Value, ValueRef};

use crate::error::{Context, Error, Result};
use crate::ffi::BulkStatement;
use crate::{Database, Tx};

/// Bound parameters per multi-row statement that litelane aims for, unless
/// the table is so wide that one row exceeds it. Measured with
/// `cargo bench -p litelane --bench rows_per_statement` (see
/// docs/performance.md): gains flatten out past a few hundred parameters and
/// very long statements cost more to prepare than they save.
pub const TARGET_PARAMS_PER_STATEMENT: usize = 256;

/// One row for an [`Inserter`]: a fixed number of values read by index.
///
/// Implemented for `Vec`, arrays and slices of [`Value`] or [`ValueRef`].
/// Implement it for your own struct to insert without any allocation per
/// value:
///
/// ```
/// use litelane::{BulkRow, ValueRef};
/// struct Point { x: i64, label: String }
/// impl BulkRow for Point {
///     fn len(&self) -> usize { 2 }
///     fn value(&self, i: usize) -> ValueRef<'_> {
///         match i { 0 => ValueRef::Integer(self.x), _ => ValueRef::Text(self.label.as_bytes()) }
///     }
/// }
/// ```
pub trait BulkRow {
    /// Number of values in the row.
    fn len(&self) -> usize;
    /// The value of column `i` (0-based, `i < len()`).
    fn value(&self, i: usize) -> ValueRef<'_>;
    /// True when the row has no values.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A value that can be read as a [`ValueRef`] without copying.
pub trait AsValueRef {
    /// Borrows the value.
    fn as_value_ref(&self) -> ValueRef<'_>;
}

impl AsValueRef for Value {
    fn as_value_ref(&self) -> ValueRef<'_> {
        ValueRef::from(self)
    }
}

impl AsValueRef for ValueRef<'_> {
    fn as_value_ref(&self) -> ValueRef<'_> {
        *self
    }
}

impl<V: AsValueRef> BulkRow for Vec<V> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        self[i].as_value_ref()
    }
}

impl<V: AsValueRef, const N: usize> BulkRow for [V; N] {
    fn len(&self) -> usize {
        N
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        self[i].as_value_ref()
    }
}

impl<V: AsValueRef> BulkRow for &[V] {
    fn len(&self) -> usize {
        <[V]>::len(self)
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        self[i].as_value_ref()
    }
}

/// What an insert did.
#[derive(Debug, Clone, PartialEq)]
pub struct InsertReport {
    /// Rows stored: inserted, or updated by [`OnConflict::Update`] (all
    /// committed).
    pub rows: u64,
    /// Rows [`OnConflict::Ignore`] skipped because their key was already
    /// stored.
    pub skipped: u64,
    /// Rows SQLite refused (a constraint or a type) that the source took back
    /// through [`RowSource::refused`] instead of ending the insert.
    pub refused: u64,
    /// Multi-row statements executed (a statement retried row by row counts
    /// once).
    pub statements: u64,
    /// Transactions committed.
    pub commits: u64,
    /// Rows bound per full statement.
    pub rows_per_statement: usize,
    /// Wall-clock time of the whole insert.
    pub elapsed: Duration,
}

impl InsertReport {
    fn new(rows_per_statement: usize) -> Self {
        InsertReport {
            rows: 0,
            skipped: 0,
            refused: 0,
            statements: 0,
            commits: 0,
            rows_per_statement,
            elapsed: Duration::ZERO,
        }
    }

    fn add(&mut self, batch: &InsertReport) {
        self.rows += batch.rows;
        self.skipped += batch.skipped;
        self.refused += batch.refused;
        self.statements += batch.statements;
        self.commits += batch.commits;
    }
}

/// Double-quotes an SQL identifier (doubling any `"` inside), so any name,
/// however hostile, is only ever a name.
///
/// ```
/// assert_eq!(litelane::quote_ident("a\"b"), "\"a\"\"b\"");
/// ```
pub fn quote_ident(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('"');
    for ch in name.chars() {
        if ch == '"' {
            s.push('"');
        }
        s.push(ch);
    }
    s.push('"');
    s
}

/// Appends `rows` groups of `columns` placeholders to `prefix`:
/// `insert_sql("INSERT INTO \"t\" (\"a\",\"b\") VALUES ", 2, 2)` is
/// `INSERT INTO "t" ("a","b") VALUES (?,?),(?,?)`. Quote the names in
/// `prefix` with [`quote_ident`].
pub fn insert_sql(prefix: &str, columns: usize, rows: usize) -> String {
    let mut group = String::with_capacity(columns * 2 + 2);
    group.push('(');
    for c in 0..columns {
        group.push_str(if c == 0 { "?" } else { ",?" });
    }
    group.push(')');
    let mut sql = String::with_capacity(prefix.len() + rows * (group.len() + 1));
    sql.push_str(prefix);
    for r in 0..rows {
        if r > 0 {
            sql.push(',');
        }
        sql.push_str(&group);
    }
    sql
}

/// What an [`Inserter`] does with a row whose key (a `PRIMARY KEY` or
/// `UNIQUE` constraint) is already in the table. Key columns are names,
/// quoted by the inserter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnConflict {
    /// The row is refused with SQLite's constraint error (the default): the
    /// insert ends, or the source takes the row back
    /// ([`RowSource::refused`]).
    #[default]
    Fail,
    /// The stored row stays and the new one is skipped
    /// (`ON CONFLICT (key) DO NOTHING`, counted in
    /// [`InsertReport::skipped`]). An empty key means any constraint.
    Ignore(Vec<String>),
    /// The stored rows that conflict are deleted and the new one inserted
    /// (`INSERT OR REPLACE`).
    Replace,
    /// The stored row's other columns take the new row's values
    /// (`ON CONFLICT (key) DO UPDATE SET c = excluded.c, ...`).
    Update(Vec<String>),
}

impl OnConflict {
    /// The statement's start and the clause after its rows, for `table` and
    /// its `columns`.
    fn statement(&self, table: &str, columns: &[&str]) -> Result<(String, String)> {
        let verb = match self {
            OnConflict::Replace => "INSERT OR REPLACE",
            _ => "INSERT",
        };
        let quoted: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
        let prefix = format!(
            "{verb} INTO {} ({}) VALUES ",
            quote_ident(table),
            quoted.join(",")
        );
        let target = |key: &[String]| {
            let names: Vec<String> = key.iter().map(|k| quote_ident(k)).collect();
            format!("({})", names.join(","))
        };
        let suffix = match self {
            OnConflict::Fail | OnConflict::Replace => String::new(),
            OnConflict::Ignore(key) if key.is_empty() => " ON CONFLICT DO NOTHING".to_string(),
            OnConflict::Ignore(key) => format!(" ON CONFLICT {} DO NOTHING", target(key)),
            OnConflict::Update(key) if key.is_empty() => {
                return Err(Error::invalid(format!(
                    "bulk insert into {}: an update on conflict needs the key's columns",
                    quote_ident(table)
                )))
            }
            OnConflict::Update(key) => {
                let is_key = |c: &&str| key.iter().any(|k| k.eq_ignore_ascii_case(c));
                let mut set: Vec<String> = columns
                    .iter()
                    .filter(|c| !is_key(c))
                    .map(|c| format!("{0}=excluded.{0}", quote_ident(c)))
                    .collect();
                if set.is_empty() {
                    // Only key columns: the stored row already holds the values.
                    set = key
                        .iter()
                        .map(|c| format!("{0}=excluded.{0}", quote_ident(c)))
                        .collect();
                }
                format!(
                    " ON CONFLICT {} DO UPDATE SET {}",
                    target(key),
                    set.join(",")
                )
            }
        };
        Ok((prefix, suffix))
    }
}

/// Where an [`Inserter`] takes its rows from, with hooks inside each of its
/// transactions: the full form of [`Inserter::insert`], for loaders that
/// keep their own bookkeeping in the same transactions as the rows (a
/// progress record, a table of rejected rows), take refused rows back, or
/// must stop and roll back.
///
/// Every method runs on the writer, inside the transaction in progress,
/// except [`is_done`](RowSource::is_done), which runs between transactions.
/// An error from any of them rolls that transaction back and ends the insert
/// with the error; transactions committed before it stay.
pub trait RowSource {
    /// The rows.
    type Row: BulkRow;

    /// The next row, or `None` at the end of the input. An error aborts the
    /// insert (see the trait's documentation).
    fn next_row(&mut self, tx: &Tx<'_>) -> Result<Option<Self::Row>>;

    /// Runs at the start of every transaction, before its first row.
    /// Default: nothing.
    fn begin(&mut self, tx: &Tx<'_>) -> Result<()> {
        let _ = tx;
        Ok(())
    }

    /// SQLite refused `row` (row `number` of the input, from 1) with a
    /// constraint or type error: [`Error::Sqlite`] with its codes and
    /// message. Return `Ok` to skip it (the insert goes on, and the row is
    /// counted in [`InsertReport::refused`]) or an error to end the insert.
    /// A multi-row statement that fails this way is retried one row at a
    /// time, so only the refused rows come here. Default: the error.
    fn refused(&mut self, tx: &Tx<'_>, row: &Self::Row, number: u64, error: Error) -> Result<()> {
        let _ = (tx, row, number);
        Err(error)
    }

    /// Runs last in every transaction, just before its `COMMIT`: `batch` is
    /// what the transaction did, and `end` is true when
    /// [`next_row`](RowSource::next_row) returned `None` in it. The place for
    /// a progress record that must commit with the rows. Default: nothing.
    fn before_commit(&mut self, tx: &Tx<'_>, batch: &InsertReport, end: bool) -> Result<()> {
        let _ = (tx, batch, end);
        Ok(())
    }

    /// Runs after each transaction committed, outside it, with what it did.
    /// Default: nothing.
    fn after_commit(&mut self, batch: &InsertReport) {
        let _ = batch;
    }

    /// Asked before every transaction: true when the source knows it has no
    /// more rows, so that no transaction is begun for nothing. Default:
    /// false (the insert always runs at least one transaction, and after a
    /// full [`commit_every`](Inserter::commit_every) batch one more, which
    /// may find no rows).
    fn is_done(&mut self) -> bool {
        false
    }
}

impl<S: RowSource + ?Sized> RowSource for &mut S {
    type Row = S::Row;
    fn next_row(&mut self, tx: &Tx<'_>) -> Result<Option<S::Row>> {
        (**self).next_row(tx)
    }
    fn begin(&mut self, tx: &Tx<'_>) -> Result<()> {
        (**self).begin(tx)
    }
    fn refused(&mut self, tx: &Tx<'_>, row: &S::Row, number: u64, error: Error) -> Result<()> {
        (**self).refused(tx, row, number, error)
    }
    fn before_commit(&mut self, tx: &Tx<'_>, batch: &InsertReport, end: bool) -> Result<()> {
        (**self).before_commit(tx, batch, end)
    }
    fn after_commit(&mut self, batch: &InsertReport) {
        (**self).after_commit(batch)
    }
    fn is_done(&mut self) -> bool {
        (**self).is_done()
    }
}

/// [`RowSource`] of a plain iterator: no hooks.
struct Rows<I: Iterator>(std::iter::Peekable<I>);

impl<I> RowSource for Rows<I>
where
    I: Iterator,
    I::Item: BulkRow,
{
    type Row = I::Item;
    fn next_row(&mut self, _tx: &Tx<'_>) -> Result<Option<I::Item>> {
        Ok(self.0.next())
    }
    fn is_done(&mut self) -> bool {
        self.0.peek().is_none()
    }
}

/// Callback for progress: total rows inserted so far.
type ProgressFn<'a> = Box<dyn FnMut(u64) + Send + 'a>;

/// Inserts many rows into `table(columns...)`; made by
/// [`Database::inserter`].
///
/// Rows are bound to one cached multi-row `INSERT` (as many rows per
/// statement as fit [`TARGET_PARAMS_PER_STATEMENT`], never past SQLite's
/// parameter limit). By default everything is one transaction; with
/// [`commit_every`](Inserter::commit_every) it commits every N rows, each
/// batch taking its own turn on the writer so other writers are not starved.
///
/// ```
/// use litelane::{Database, Value};
/// let db = Database::open_in_memory(Default::default()).unwrap();
/// db.write(|tx| Ok(tx.execute("CREATE TABLE t(id INTEGER, name TEXT)", [])?)).unwrap();
/// let rows = (0..1000).map(|i| vec![Value::Integer(i), Value::Text(format!("n{i}"))]);
/// let report = db.inserter("t", &["id", "name"]).unwrap().insert(rows).unwrap();
/// assert_eq!(report.rows, 1000);
/// ```
///
/// Rows can come from another thread through a channel: pass the
/// `Receiver` (it is an iterator that ends when the senders are dropped).
/// A loader that needs more (its own records in the same transactions,
/// refused rows taken back, an abort) implements [`RowSource`] and calls
/// [`insert_from`](Inserter::insert_from).
pub struct Inserter<'a> {
    db: &'a Database,
    table: String,
    columns: Vec<String>,
    prefix: String,
    suffix: String,
    /// The conflict clause can skip rows ([`OnConflict::Ignore`]).
    skips: bool,
    rows_per_statement: usize,
    commit_every: Option<u64>,
    progress: Option<ProgressFn<'a>>,
    label: String,
}

impl<'a> Inserter<'a> {
    pub(crate) fn new(db: &'a Database, table: &str, columns: &[&str]) -> Result<Self> {
        if columns.is_empty() {
            return Err(Error::invalid(format!(
                "bulk insert into {}: no columns given",
                quote_ident(table)
            )));
        }
        let limit = db.max_parameters()?;
        if columns.len() > limit {
            return Err(Error::invalid(format!(
                "bulk insert into {}: {} columns exceed SQLite's limit of {limit} parameters per statement",
                quote_ident(table),
                columns.len()
            )));
        }
        let (prefix, suffix) = OnConflict::Fail.statement(table, columns)?;
        let rows_per_statement =
            (TARGET_PARAMS_PER_STATEMENT / columns.len()).clamp(1, limit / columns.len());
        Ok(Inserter {
            db,
            table: table.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            prefix,
            suffix,
            skips: false,
            rows_per_statement,
            commit_every: None,
            progress: None,
            label: format!("bulk insert into {}", quote_ident(table)),
        })
    }

    /// Rows bound per statement (clamped to SQLite's parameter limit).
    pub fn rows_per_statement(mut self, rows: usize) -> Result<Self> {
        let limit = self.db.max_parameters()?;
        let width = self.columns.len();
        self.rows_per_statement = rows.clamp(1, (limit / width).max(1));
        Ok(self)
    }

    /// Commits every `rows` rows instead of once at the end. `0` = once.
    pub fn commit_every(mut self, rows: u64) -> Self {
        self.commit_every = (rows > 0).then_some(rows);
        self
    }

    /// What to do with a row whose key is already stored (default:
    /// [`OnConflict::Fail`]). Fails when [`OnConflict::Update`] names no key.
    pub fn on_conflict(mut self, on: OnConflict) -> Result<Self> {
        let columns: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        (self.prefix, self.suffix) = on.statement(&self.table, &columns)?;
        self.skips = matches!(on, OnConflict::Ignore(_));
        Ok(self)
    }

    /// The label of the insert's writes in the writer's metrics and long-wait
    /// reports (default: `bulk insert into "table"`).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Calls `f` after every statement (every `rows_per_statement` rows)
    /// with the number of rows taken from the input so far (stored, skipped
    /// or refused).
    pub fn on_progress(mut self, f: impl FnMut(u64) + Send + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Inserts every row of `rows`. If any row fails (wrong number of values,
    /// a constraint...), the transaction in progress rolls back and the error
    /// says which row; batches committed before it (with `commit_every`) stay.
    /// Runs no transaction at all for no rows.
    pub fn insert<I>(self, rows: I) -> Result<InsertReport>
    where
        I: IntoIterator,
        I::Item: BulkRow,
    {
        self.insert_from(Rows(rows.into_iter().peekable()))
    }

    /// Inserts every row `source` gives, calling its hooks in each
    /// transaction (see [`RowSource`]).
    pub fn insert_from<S: RowSource>(mut self, mut source: S) -> Result<InsertReport> {
        let start = Instant::now();
        let mut report = InsertReport::new(self.rows_per_statement);
        let mut buffer: Vec<S::Row> = Vec::with_capacity(self.rows_per_statement);
        let label = std::mem::take(&mut self.label);
        while !source.is_done() {
            let (batch, end) = self.db.write_local(&label, |tx| {
                self.transaction(
                    tx,
                    &mut source,
                    &mut buffer,
                    report.rows + report.skipped + report.refused,
                )
            })?;
            source.after_commit(&batch);
            report.add(&batch);
            if end {
                break;
            }
        }
        report.elapsed = start.elapsed();
        Ok(report)
    }

    /// One transaction: rows until `commit_every` rows or the end of the
    /// source; `before` rows came in earlier transactions. Returns what it
    /// did and whether the source ended.
    fn transaction<S: RowSource>(
        &mut self,
        tx: &Tx<'_>,
        source: &mut S,
        buffer: &mut Vec<S::Row>,
        before: u64,
    ) -> Result<(InsertReport, bool)> {
        let mut batch = InsertReport::new(self.rows_per_statement);
        batch.commits = 1;
        source.begin(tx)?;
        let limit = self.commit_every.unwrap_or(u64::MAX);
        let mut full = self.prepare(tx, self.rows_per_statement)?;
        let mut part: Option<(usize, BulkStatement<'_>)> = None;
        let mut pulled = 0u64;
        let mut end = false;
        while pulled < limit && !end {
            let want = (self.rows_per_statement as u64).min(limit - pulled) as usize;
            buffer.clear();
            while buffer.len() < want {
                match source.next_row(tx)? {
                    Some(row) => buffer.push(row),
                    None => {
                        end = true;
                        break;
                    }
                }
            }
            if buffer.is_empty() {
                break;
            }
            let first = before + pulled + 1;
            pulled += buffer.len() as u64;
            let stmt = if buffer.len() == self.rows_per_statement {
                &mut full
            } else {
                if part.as_ref().is_none_or(|(n, _)| *n != buffer.len()) {
                    part = Some((buffer.len(), self.prepare(tx, buffer.len())?));
                }
                &mut part.as_mut().expect("prepared above").1
            };
            self.execute(tx, stmt, buffer, first, source, &mut batch)?;
            if let Some(p) = self.progress.as_mut() {
                p(before + pulled);
            }
        }
        drop((full, part));
        source.before_commit(tx, &batch, end)?;
        Ok((batch, end))
    }

    /// Compiles the statement for `rows` rows.
    fn prepare<'c>(&self, tx: &'c Tx<'_>, rows: usize) -> Result<BulkStatement<'c>> {
        BulkStatement::prepare(tx, &self.sql(rows))
            .context(|| format!("preparing the insert into {}", quote_ident(&self.table)))
    }

    /// Runs one statement over `rows` (numbered from `first`); when SQLite
    /// refuses it for a row's sake, runs the rows one at a time and hands the
    /// refused ones to the source.
    fn execute<S: RowSource>(
        &self,
        tx: &Tx<'_>,
        stmt: &mut BulkStatement<'_>,
        rows: &[S::Row],
        first: u64,
        source: &mut S,
        batch: &mut InsertReport,
    ) -> Result<()> {
        batch.statements += 1;
        check_widths(rows, first, self.columns.len(), &self.table)?;
        match stmt.execute(values(rows)) {
            Ok(changed) => {
                batch.count(rows.len(), changed, self.skips);
                Ok(())
            }
            Err(e) if is_row_error(&e) => {
                let mut single = self.prepare(tx, 1)?;
                for (i, row) in rows.iter().enumerate() {
                    let number = first + i as u64;
                    match single.execute(values(std::slice::from_ref(row))) {
                        Ok(changed) => batch.count(1, changed, self.skips),
                        Err(e) if is_row_error(&e) => {
                            let e = Error::from_sqlite(e, row_context(&self.table, number, 1));
                            source.refused(tx, row, number, e)?;
                            batch.refused += 1;
                        }
                        Err(e) => {
                            return Err(Error::from_sqlite(e, row_context(&self.table, number, 1)))
                        }
                    }
                }
                Ok(())
            }
            Err(e) => Err(Error::from_sqlite(
                e,
                row_context(&self.table, first, rows.len()),
            )),
        }
    }

    /// The statement for `rows` rows, with its conflict clause.
    fn sql(&self, rows: usize) -> String {
        let mut sql = insert_sql(&self.prefix, self.columns.len(), rows);
        sql.push_str(&self.suffix);
        sql
    }
}

impl InsertReport {
    /// Counts a statement that stored `rows` rows, of which SQLite reports
    /// `changed` inserted; with `skips` (only [`OnConflict::Ignore`] can
    /// leave a row out without an error) the others were skipped. Otherwise
    /// every row is stored: `changed` is not used, since SQLite does not
    /// count rows that an `INSTEAD OF` trigger takes (a view).
    fn count(&mut self, rows: usize, changed: usize, skips: bool) {
        let stored = if skips { changed.min(rows) } else { rows };
        self.rows += stored as u64;
        self.skipped += (rows - stored) as u64;
    }
}

/// A constraint or datatype error: the row is bad, not the database.
fn is_row_error(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ConstraintViolation | rusqlite::ErrorCode::TypeMismatch)
    )
}

fn row_context(table: &str, first_row: u64, n: usize) -> String {
    if n == 1 {
        return format!("inserting row {first_row} into {}", quote_ident(table));
    }
    format!(
        "inserting rows {first_row}..{} into {}",
        first_row + n as u64 - 1,
        quote_ident(table)
    )
}

/// Every value of `rows`, row after row.
fn values<R: BulkRow>(rows: &[R]) -> impl Iterator<Item = ValueRef<'_>> {
    rows.iter()
        .flat_map(|r| (0..r.len()).map(move |c| r.value(c)))
}

/// An error naming the first of `rows` (numbered from `first_row`) whose
/// width is not `columns`.
fn check_widths<R: BulkRow>(rows: &[R], first_row: u64, columns: usize, table: &str) -> Result<()> {
    match rows.iter().position(|r| r.len() != columns) {
        None => Ok(()),
        Some(r) => Err(Error::invalid(format!(
            "row {} has {} values; the insert into {} has {columns} columns",
            first_row + r as u64,
            rows[r].len(),
            quote_ident(table),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_with_inner_quotes_doubled() {
        assert_eq!(quote_ident("plain"), "\"plain\"");
        assert_eq!(
            quote_ident("\"; DROP TABLE x; --"),
            "\"\"\"; DROP TABLE x; --\""
        );
        assert_eq!(quote_ident(""), "\"\"");
    }

    #[test]
    fn insert_sql_has_one_placeholder_group_per_row() {
        assert_eq!(
            insert_sql("INSERT INTO \"t\" (\"a\",\"b\") VALUES ", 2, 3),
            "INSERT INTO \"t\" (\"a\",\"b\") VALUES (?,?),(?,?),(?,?)"
        );
    }

    #[test]
    fn conflict_statements_quote_every_name() {
        let cols = ["id", "a\"b", "c"];
        let key = vec!["id".to_string()];
        let start = "INSERT INTO \"t x\" (\"id\",\"a\"\"b\",\"c\") VALUES ";
        let cases = [
            (OnConflict::Fail, start.to_string(), ""),
            (OnConflict::Ignore(vec![]), start.to_string(), " ON CONFLICT DO NOTHING"),
            (
                OnConflict::Ignore(key.clone()),
                start.to_string(),
                " ON CONFLICT (\"id\") DO NOTHING",
            ),
            (
                OnConflict::Update(key.clone()),
                start.to_string(),
                " ON CONFLICT (\"id\") DO UPDATE SET \"a\"\"b\"=excluded.\"a\"\"b\",\"c\"=excluded.\"c\"",
            ),
            (
                OnConflict::Replace,
                start.replace("INSERT INTO", "INSERT OR REPLACE INTO"),
                "",
            ),
        ];
        for (on, prefix, suffix) in cases {
            let (p, s) = on.statement("t x", &cols).unwrap();
            assert_eq!(
                (p.as_str(), s.as_str()),
                (prefix.as_str(), suffix),
                "{on:?}"
            );
        }
        // Only key columns: the update sets the key to itself.
        let (_, s) = OnConflict::Update(key.clone())
            .statement("t", &["id"])
            .unwrap();
        assert_eq!(
            s,
            " ON CONFLICT (\"id\") DO UPDATE SET \"id\"=excluded.\"id\""
        );
        // A key with a hostile name is only ever a name.
        let evil = vec!["k\"); DROP TABLE t; --".to_string()];
        let (_, s) = OnConflict::Ignore(evil).statement("t", &["x"]).unwrap();
        assert_eq!(s, " ON CONFLICT (\"k\"\"); DROP TABLE t; --\") DO NOTHING");
        assert!(OnConflict::Update(vec![]).statement("t", &["x"]).is_err());
    }
}
