//! The writer side of an import: binds rows to one cached multi-row
//! `INSERT`, writes rejects, and commits once (atomic) or every N rows
//! together with the progress row.
//!
//! It runs its own transactions through [`Database::write_labeled`] rather
//! than [`litelane::Inserter`], for three things the inserter cannot do: write
//! the progress row inside the transaction of each batch, roll the
//! transaction back when the import must stop (too many rejects, a read
//! error: the inserter can only end its input, which commits), and retry a
//! statement that broke a constraint row by row, so the one bad row is
//! rejected with its line instead of failing the import. It binds the same
//! way: [`litelane::BulkRow`] values borrowed from the batch, as many rows per
//! statement as fit [`litelane::TARGET_PARAMS_PER_STATEMENT`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use litelane::rusqlite::types::ToSqlOutput;
use litelane::rusqlite::{self, ErrorCode};
use litelane::{quote_ident, BulkRow, Database, Tx};

use super::batch::{Batch, Kind, RowRef};
use super::progress::Bar;
use super::rejects::Rejects;
use super::resume::{self, Progress};
use crate::error::CliError;

/// Counts of one run of the sink.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Rows stored.
    pub inserted: u64,
    /// Records rejected.
    pub rejected: u64,
    /// Number of the last record consumed (0: none).
    pub record: u64,
    /// Line of the last record consumed.
    pub line: u64,
    /// Byte offset just after the last record consumed.
    pub end: u64,
    /// Hash of the last record consumed ([`Batch::entry_hash`]).
    pub hash: Option<u64>,
    /// Blank lines skipped in the input (known at its end).
    pub blank: u64,
    /// Rows skipped because their key was already present
    /// (`--on-conflict ignore`).
    pub skipped: u64,
}

/// Where rows go and how.
pub struct Sink<'a> {
    /// The database.
    pub db: &'a Database,
    /// The target table.
    pub table: String,
    /// Its columns, in the order of the row values.
    pub columns: Vec<String>,
    /// Commit every this many rows (`None`: once, at the end).
    pub commit_every: Option<u64>,
    /// Statements run at the start of the first transaction (DDL).
    pub setup: Vec<String>,
    /// The progress row to keep up to date (resumable imports), as it was
    /// before this run.
    pub progress: Option<Progress>,
    /// The rejects sink.
    pub rejects: Rejects,
    /// Stop after more rejects than this (counting those of a resumed run).
    pub max_rejects: Option<u64>,
    /// The progress bar.
    pub bar: &'a Bar,
    /// The input's name, for messages.
    pub input: String,
    /// Set by the Ctrl-C handler: stop, keeping what is committed.
    pub interrupted: &'a AtomicBool,
    /// `--rejects-table`: rejects are also inserted there, in the same
    /// transaction as the rows.
    pub rejects_table: Option<String>,
    /// The source as recorded in the rejects table.
    pub source: String,
    /// The statement's start (`INSERT [OR REPLACE] INTO "t" (...) VALUES `)
    /// and what follows its rows (an upsert clause), from
    /// [`super::conflict::statement`].
    pub statement: (String, String),
    /// Positions in `columns` of the key (`--pk`), to name a row's key when
    /// it is rejected as already present.
    pub key: Vec<usize>,
    /// `--source-column`: this text is bound as the value of the last of
    /// `columns` in every row.
    pub extra: Option<String>,
}

/// How often a waiting writer looks at [`Sink::interrupted`].
const POLL: Duration = Duration::from_millis(100);

/// Read position in the stream of batches.
struct Cursor {
    rx: Receiver<Result<Batch, CliError>>,
    batch: Option<Arc<Batch>>,
    pos: usize,
}

fn bind(
    stmt: &mut rusqlite::Statement<'_>,
    rows: &[RowRef],
    extra: Option<&str>,
) -> rusqlite::Result<()> {
    let mut index = 1;
    for row in rows {
        for c in 0..row.len() {
            stmt.raw_bind_parameter(index, ToSqlOutput::Borrowed(row.value(c)))?;
            index += 1;
        }
        if let Some(v) = extra {
            stmt.raw_bind_parameter(index, v)?;
            index += 1;
        }
    }
    Ok(())
}

/// A constraint or datatype error: the row is bad, not the database.
fn is_row_error(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ConstraintViolation | ErrorCode::TypeMismatch)
    )
}

impl Sink<'_> {
    /// Stores everything `rx` delivers. Returns this run's counts; on error,
    /// the message says what stays committed.
    pub fn run(mut self, rx: Receiver<Result<Batch, CliError>>) -> Result<Counts, CliError> {
        let ncols = self.columns.len();
        let max_params = self.db.max_parameters()?;
        if ncols > max_params {
            return Err(CliError::Input(format!(
                "{ncols} columns exceed SQLite's limit of {max_params} parameters per statement"
            )));
        }
        let per_stmt =
            (litelane::TARGET_PARAMS_PER_STATEMENT / ncols).clamp(1, (max_params / ncols).max(1));
        let prefix = self.statement.0.clone();
        let label = format!("litelane import into {}", quote_ident(&self.table));
        let mut cursor = Cursor {
            rx,
            batch: None,
            pos: 0,
        };
        self.rejects.start()?;
        let mut committed = Counts::default();
        let mut commits = 0u64;
        loop {
            let mut counts = Counts {
                record: committed.record,
                line: committed.line,
                end: committed.end,
                hash: committed.hash,
                ..Counts::default()
            };
            let mut failure: Option<CliError> = None;
            let outcome = self.db.write_labeled(&label, |tx| {
                self.transaction(tx, &mut cursor, &prefix, per_stmt, &committed, &mut counts)
                    .map_err(|e| {
                        failure = Some(e);
                        litelane::Error::user("import stopped")
                    })
            });
            match outcome {
                Ok(ended) => {
                    committed.inserted += counts.inserted;
                    committed.rejected += counts.rejected;
                    committed.record = counts.record;
                    committed.line = counts.line;
                    committed.end = counts.end;
                    committed.hash = counts.hash;
                    committed.blank = counts.blank;
                    committed.skipped += counts.skipped;
                    commits += 1;
                    if ended {
                        return Ok(committed);
                    }
                }
                Err(e) => {
                    let e = failure.unwrap_or(CliError::Engine(e));
                    let resumable = self.progress.is_some();
                    let kept = if commits == 0 && !resumable {
                        "nothing was imported (the transaction was rolled back)".to_string()
                    } else if commits == 0 {
                        "nothing more was committed by this run (its transaction was rolled \
                         back); run again with --resume to continue from the last commit"
                            .to_string()
                    } else {
                        format!(
                            "{} rows stay committed, through line {} of {}; run again with \
                             --resume to continue from there",
                            committed.inserted, committed.line, self.input
                        )
                    };
                    return Err(CliError::Input(format!("{e}; {kept}")));
                }
            }
        }
    }

    /// One transaction: rows until `commit_every` rows or the end of the
    /// input. Returns true at the end of the input.
    fn transaction(
        &mut self,
        tx: &Tx<'_>,
        cursor: &mut Cursor,
        prefix: &str,
        per_stmt: usize,
        committed: &Counts,
        counts: &mut Counts,
    ) -> Result<bool, CliError> {
        for sql in std::mem::take(&mut self.setup) {
            tx.execute_batch(&sql).map_err(|e| {
                let shown: String = sql.chars().take(100).collect();
                let more = if shown.len() < sql.len() { "..." } else { "" };
                CliError::Engine(litelane::Error::from_sqlite(
                    e,
                    format!("running {shown}{more}"),
                ))
            })?;
        }
        let full_sql = self.sql(prefix, per_stmt);
        let mut full = tx.prepare_cached(&full_sql).map_err(|e| {
            CliError::Engine(litelane::Error::from_sqlite(
                e,
                format!("preparing the insert into {}", quote_ident(&self.table)),
            ))
        })?;
        let mut pending: Vec<RowRef> = Vec::with_capacity(per_stmt);
        let mut rows_here = 0u64;
        let mut last: Option<(Arc<Batch>, usize)> = None;
        let ended = loop {
            if self.interrupted.load(Ordering::Relaxed) {
                return Err(CliError::Input("interrupted (Ctrl-C)".into()));
            }
            let batch = match &cursor.batch {
                Some(b) if cursor.pos < b.entries.len() => Arc::clone(b),
                Some(b) if b.last => {
                    counts.blank = b.blank_lines;
                    break true;
                }
                _ => match cursor.rx.recv_timeout(POLL) {
                    Ok(Ok(b)) => {
                        self.bar
                            .update(committed.inserted + counts.inserted, b.bytes_read);
                        cursor.batch = Some(Arc::new(b));
                        cursor.pos = 0;
                        continue;
                    }
                    Ok(Err(e)) => return Err(e),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(CliError::Input(
                            "the parser thread stopped before the end of the input".into(),
                        ))
                    }
                },
            };
            let e = batch.entries[cursor.pos];
            if self.progress.is_some() {
                // The resume point is recorded with resumable imports only.
                last = Some((Arc::clone(&batch), cursor.pos));
            }
            cursor.pos += 1;
            match e.kind {
                Kind::Row(row) => {
                    pending.push(RowRef {
                        batch,
                        row,
                        line: e.line,
                        record: e.record,
                    });
                    rows_here += 1;
                    if pending.len() == per_stmt {
                        self.execute(tx, &mut full, &pending, prefix, committed, counts)?;
                        pending.clear();
                    }
                }
                Kind::Reject(j) => {
                    let r = &batch.rejects[j as usize];
                    self.reject(tx, e.line, e.record, &r.reason, &r.raw, committed, counts)?;
                }
            }
            counts.record = e.record;
            counts.line = e.line;
            counts.end = e.end;
            if self.commit_every.is_some_and(|n| rows_here >= n) {
                break false;
            }
        };
        if !pending.is_empty() {
            let sql = self.sql(prefix, pending.len());
            let mut part = tx.prepare_cached(&sql).map_err(|e| {
                CliError::Engine(litelane::Error::from_sqlite(
                    e,
                    format!("preparing the insert into {}", quote_ident(&self.table)),
                ))
            })?;
            self.execute(tx, &mut part, &pending, prefix, committed, counts)?;
        }
        self.rejects.flush()?;
        if let Some((b, i)) = &last {
            counts.hash = Some(b.entry_hash(*i));
        }
        if let Some(base) = &self.progress {
            let mut p = base.clone();
            p.records_read = if counts.record > 0 {
                counts.record
            } else {
                base.records_read
            };
            p.rows_inserted = base.rows_inserted + committed.inserted + counts.inserted;
            p.rows_rejected = base.rows_rejected + committed.rejected + counts.rejected;
            p.last_line = counts.line.max(base.last_line);
            p.rejects_file = self.rejects.path().map(|p| p.display().to_string());
            p.rejects_bytes = self.rejects.bytes();
            p.state = if ended { resume::DONE } else { resume::RUNNING }.to_string();
            if counts.hash.is_some() {
                p.resume_end = Some(counts.end);
                p.resume_hash = counts.hash;
            }
            resume::save(tx, &p).map_err(|e| {
                CliError::Engine(litelane::Error::from_sqlite(
                    e,
                    format!("recording progress in {}", resume::TABLE),
                ))
            })?;
        }
        Ok(ended)
    }

    /// Runs one multi-row statement; when it breaks a constraint, inserts its
    /// rows one by one and rejects the ones that fail.
    fn execute(
        &mut self,
        tx: &Tx<'_>,
        stmt: &mut rusqlite::Statement<'_>,
        rows: &[RowRef],
        prefix: &str,
        committed: &Counts,
        counts: &mut Counts,
    ) -> Result<(), CliError> {
        let extra = self.extra.clone();
        bind(stmt, rows, extra.as_deref()).map_err(|e| self.row_error(e, rows))?;
        match stmt.raw_execute() {
            Ok(changed) => {
                self.count(counts, rows.len(), changed);
                Ok(())
            }
            Err(e) if is_row_error(&e) => {
                let one = self.sql(prefix, 1);
                let mut single = tx
                    .prepare_cached(&one)
                    .map_err(|e| self.row_error(e, rows))?;
                for row in rows {
                    let row = std::slice::from_ref(row);
                    bind(&mut single, row, extra.as_deref()).map_err(|e| self.row_error(e, row))?;
                    match single.raw_execute() {
                        Ok(changed) => self.count(counts, 1, changed),
                        Err(e) if is_row_error(&e) => {
                            let mut reason = match &e {
                                rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
                                other => other.to_string(),
                            };
                            if !self.key.is_empty() && self.is_key_error(&e) {
                                reason = format!(
                                    "key already present: {} ({reason})",
                                    describe_key(&row[0], &self.columns, &self.key)
                                );
                            }
                            let raw = describe_row(&row[0]);
                            self.reject(
                                tx,
                                row[0].line,
                                row[0].record,
                                &reason,
                                &raw,
                                committed,
                                counts,
                            )?;
                        }
                        Err(e) => return Err(self.row_error(e, row)),
                    }
                }
                Ok(())
            }
            Err(e) => Err(self.row_error(e, rows)),
        }
    }

    /// A PRIMARY KEY or UNIQUE constraint failure on exactly the key's
    /// columns (SQLite names them: `UNIQUE constraint failed: t.a, t.b`), not
    /// on another unique index.
    fn is_key_error(&self, e: &rusqlite::Error) -> bool {
        let rusqlite::Error::SqliteFailure(f, Some(msg)) = e else {
            return false;
        };
        if f.extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            && f.extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
        {
            return false;
        }
        let Some((_, list)) = msg.split_once(": ") else {
            return false;
        };
        let prefix = format!("{}.", self.table);
        let mut failed: Vec<String> = list
            .split(", ")
            .map(|c| c.strip_prefix(&prefix).unwrap_or(c).to_ascii_lowercase())
            .collect();
        let mut key: Vec<String> = self
            .key
            .iter()
            .map(|&i| self.columns[i].to_ascii_lowercase())
            .collect();
        failed.sort();
        key.sort();
        failed == key
    }

    /// The insert statement for `rows` rows, with the conflict clause.
    fn sql(&self, prefix: &str, rows: usize) -> String {
        let mut sql = litelane::insert_sql(prefix, self.columns.len(), rows);
        sql.push_str(&self.statement.1);
        sql
    }

    /// Counts `rows` rows a statement stored, of which SQLite reports
    /// `changed` inserted or updated: with `DO NOTHING`, the others were
    /// skipped because their key was already present.
    fn count(&self, counts: &mut Counts, rows: usize, changed: usize) {
        let changed = changed.min(rows);
        if self.statement.1.ends_with("DO NOTHING") {
            counts.inserted += changed as u64;
            counts.skipped += (rows - changed) as u64;
        } else {
            counts.inserted += rows as u64;
        }
    }

    /// An error from SQLite while storing `rows`, with their input lines.
    fn row_error(&self, e: rusqlite::Error, rows: &[RowRef]) -> CliError {
        let first = rows.first().map_or(0, |r| r.line);
        let last = rows.last().map_or(0, |r| r.line);
        let lines = if last != first {
            format!("{first}-{last}")
        } else {
            first.to_string()
        };
        CliError::Engine(litelane::Error::from_sqlite(
            e,
            format!(
                "inserting the records of {}:{lines} into {}",
                self.input,
                quote_ident(&self.table)
            ),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn reject(
        &mut self,
        tx: &Tx<'_>,
        line: u64,
        record: u64,
        reason: &str,
        raw: &[u8],
        committed: &Counts,
        counts: &mut Counts,
    ) -> Result<(), CliError> {
        self.rejects.write(line, record, reason, raw)?;
        if let Some(t) = &self.rejects_table {
            let sql = format!(
                "INSERT INTO {} (target_table, source, line, record, reason, raw) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                quote_ident(t)
            );
            // The record as read: text when it is UTF-8, else its bytes.
            let raw_value = match std::str::from_utf8(raw) {
                Ok(s) => litelane::ValueRef::Text(s.as_bytes()),
                Err(_) => litelane::ValueRef::Blob(raw),
            };
            tx.prepare_cached(&sql)
                .and_then(|mut st| {
                    st.execute(rusqlite::params![
                        self.table,
                        self.source,
                        line as i64,
                        record as i64,
                        reason,
                        ToSqlOutput::Borrowed(raw_value),
                    ])
                })
                .map_err(|e| {
                    CliError::Engine(litelane::Error::from_sqlite(
                        e,
                        format!(
                            "recording the rejected record of {}:{line} in {}",
                            self.input,
                            quote_ident(t)
                        ),
                    ))
                })?;
        }
        counts.rejected += 1;
        let base = self.progress.as_ref().map_or(0, |p| p.rows_rejected);
        let total = base + committed.rejected + counts.rejected;
        match self.max_rejects {
            Some(max) if total > max => Err(CliError::Input(format!(
                "stopped at {}:{line}: record {record} is rejected record number {total}, more \
                 than --max-rejects {max} allows ({reason})",
                self.input
            ))),
            _ => Ok(()),
        }
    }
}

/// A row's key as `"id"=5, "day"='x'`.
fn describe_key(row: &RowRef, columns: &[String], key: &[usize]) -> String {
    use litelane::ValueRef;
    key.iter()
        .filter(|&&i| i < row.len())
        .map(|&i| {
            let v = match row.value(i) {
                ValueRef::Null => "NULL".to_string(),
                ValueRef::Integer(v) => v.to_string(),
                ValueRef::Real(v) => v.to_string(),
                ValueRef::Text(t) | ValueRef::Blob(t) => {
                    format!("'{}'", String::from_utf8_lossy(t).replace('\'', "''"))
                }
            };
            format!("{}={v}", quote_ident(&columns[i]))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row that SQLite refused, as JSON of its values (the record as read is
/// no longer at hand once converted).
fn describe_row(row: &RowRef) -> Vec<u8> {
    use litelane::ValueRef;
    let vals: Vec<serde_json::Value> = (0..row.len())
        .map(|i| match row.value(i) {
            ValueRef::Null => serde_json::Value::Null,
            ValueRef::Integer(v) => v.into(),
            ValueRef::Real(v) => v.into(),
            ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into(),
        })
        .collect();
    serde_json::Value::Array(vals).to_string().into_bytes()
}
