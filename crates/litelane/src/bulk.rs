//! Bulk insert: many rows through one cached multi-row `INSERT`.

use std::time::{Duration, Instant};

use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use crate::error::{Context, Error, Result};
use crate::Database;

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
    /// Rows inserted (all committed).
    pub rows: u64,
    /// Multi-row statements executed.
    pub statements: u64,
    /// Transactions committed.
    pub commits: u64,
    /// Rows bound per full statement.
    pub rows_per_statement: usize,
    /// Wall-clock time of the whole insert.
    pub elapsed: Duration,
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
pub struct Inserter<'a> {
    db: &'a Database,
    table: String,
    prefix: String,
    columns: usize,
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
        let cols: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
        let prefix = format!(
            "INSERT INTO {} ({}) VALUES ",
            quote_ident(table),
            cols.join(",")
        );
        let rows_per_statement =
            (TARGET_PARAMS_PER_STATEMENT / columns.len()).clamp(1, limit / columns.len());
        Ok(Inserter {
            db,
            table: table.to_string(),
            prefix,
            columns: columns.len(),
            rows_per_statement,
            commit_every: None,
            progress: None,
            label: format!("bulk insert into {}", quote_ident(table)),
        })
    }

    /// Rows bound per statement (clamped to SQLite's parameter limit).
    pub fn rows_per_statement(mut self, rows: usize) -> Result<Self> {
        let limit = self.db.max_parameters()?;
        self.rows_per_statement = rows.clamp(1, (limit / self.columns).max(1));
        Ok(self)
    }

    /// Commits every `rows` rows instead of once at the end. `0` = once.
    pub fn commit_every(mut self, rows: u64) -> Self {
        self.commit_every = (rows > 0).then_some(rows);
        self
    }

    /// Calls `f` with the number of rows inserted so far after every
    /// statement (every `rows_per_statement` rows) and at the end.
    pub fn on_progress(mut self, f: impl FnMut(u64) + Send + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Inserts every row of `rows`. If any row fails (wrong number of values,
    /// a constraint...), the transaction in progress rolls back and the error
    /// says which row; batches committed before it (with `commit_every`) stay.
    pub fn insert<I>(mut self, rows: I) -> Result<InsertReport>
    where
        I: IntoIterator,
        I::Item: BulkRow,
    {
        let start = Instant::now();
        let mut rows = rows.into_iter().peekable();
        let mut report = InsertReport {
            rows: 0,
            statements: 0,
            commits: 0,
            rows_per_statement: self.rows_per_statement,
            elapsed: Duration::ZERO,
        };
        let full_sql = insert_sql(&self.prefix, self.columns, self.rows_per_statement);
        let mut buffer: Vec<I::Item> = Vec::with_capacity(self.rows_per_statement);
        while rows.peek().is_some() {
            let batch_limit = self.commit_every.unwrap_or(u64::MAX);
            let (done, stmts) = self.db.write_local(&self.label, |tx| {
                let mut done = 0u64;
                let mut stmts = 0u64;
                let mut full = tx.prepare_cached(&full_sql).context(|| {
                    format!("preparing the insert into {}", quote_ident(&self.table))
                })?;
                while done < batch_limit {
                    let want = (self.rows_per_statement as u64).min(batch_limit - done) as usize;
                    buffer.clear();
                    buffer.extend(rows.by_ref().take(want));
                    if buffer.is_empty() {
                        break;
                    }
                    let first_row = report.rows + done + 1;
                    if buffer.len() == self.rows_per_statement {
                        bind(&mut full, &buffer, first_row, self.columns, &self.table)?;
                        full.raw_execute()
                            .context(|| row_context(&self.table, first_row, buffer.len()))?;
                    } else {
                        let sql = insert_sql(&self.prefix, self.columns, buffer.len());
                        let mut part = tx
                            .prepare(&sql)
                            .context(|| row_context(&self.table, first_row, buffer.len()))?;
                        bind(&mut part, &buffer, first_row, self.columns, &self.table)?;
                        part.raw_execute()
                            .context(|| row_context(&self.table, first_row, buffer.len()))?;
                    }
                    done += buffer.len() as u64;
                    stmts += 1;
                    if let Some(p) = self.progress.as_mut() {
                        p(report.rows + done);
                    }
                }
                Ok((done, stmts))
            })?;
            report.rows += done;
            report.statements += stmts;
            report.commits += 1;
        }
        report.elapsed = start.elapsed();
        Ok(report)
    }
}

fn row_context(table: &str, first_row: u64, n: usize) -> String {
    format!(
        "inserting rows {first_row}..{} into {}",
        first_row + n as u64 - 1,
        quote_ident(table)
    )
}

/// Binds `rows` to consecutive parameters of `stmt`; `first_row` (1-based)
/// numbers them in errors.
fn bind<R: BulkRow>(
    stmt: &mut rusqlite::Statement<'_>,
    rows: &[R],
    first_row: u64,
    columns: usize,
    table: &str,
) -> Result<()> {
    let mut index = 1;
    for (r, row) in rows.iter().enumerate() {
        let row_no = first_row + r as u64;
        if row.len() != columns {
            return Err(Error::invalid(format!(
                "row {row_no} has {} values; the insert into {} has {columns} columns",
                row.len(),
                quote_ident(table),
            )));
        }
        for c in 0..columns {
            stmt.raw_bind_parameter(index, ToSqlOutput::Borrowed(row.value(c)))
                .context(|| format!("binding row {row_no} column {}", c + 1))?;
            index += 1;
        }
    }
    Ok(())
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
}
