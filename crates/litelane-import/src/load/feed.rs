//! The writer side of an import: feeds the parser's batches to the engine's
//! [`litelane::Inserter`] as a [`RowSource`], and keeps the import's own
//! records in the inserter's transactions: the DDL in the first one, each
//! rejected record (in the rejects file, and in the rejects table in the
//! same transaction as the rows), and the progress row of a resumable
//! import just before each commit. A row SQLite refuses (a constraint, a
//! type) comes back from the inserter and is rejected with its line; an
//! error or Ctrl-C rolls the transaction in progress back.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use litelane::rusqlite;
use litelane::rusqlite::types::ToSqlOutput;
use litelane::{quote_ident, BulkRow, Database, InsertReport, RowSource, Tx, ValueRef};

use crate::convert::batch::{Batch, Kind, RowRef};
use crate::error::Error;
use crate::load::rejects::Rejects;
use crate::load::report::{Progress as Caller, Rejected};
use crate::plan::resume::{self, Progress};
use crate::values::ColType;

/// Counts of one run of the import.
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
    /// The caller, told of rows and rejects, asked whether to stop.
    pub caller: &'a mut dyn Caller,
    /// The input's name, for messages.
    pub input: String,
    /// `--rejects-table`: rejects are also inserted there, in the same
    /// transaction as the rows.
    pub rejects_table: Option<String>,
    /// The source as recorded in the rejects table.
    pub source: String,
    /// What to do with a row whose key is already stored (`--on-conflict`).
    pub on_conflict: litelane::OnConflict,
    /// Positions in `columns` of the key (`--pk`), to name a row's key when
    /// it is rejected as already present.
    pub key: Vec<usize>,
    /// `--source-column`: this text is bound as the value of the last of
    /// `columns` in every row.
    pub extra: Option<&'a str>,
    /// The type of each column the input fills (`columns` without the
    /// `--source-column`), to count values kept as text.
    pub types: Vec<ColType>,
}

/// How often a waiting writer asks [`Caller::should_stop`].
const POLL: Duration = Duration::from_millis(100);

/// A row of a batch, with the `--source-column` value after its own.
pub struct Row<'a> {
    row: RowRef,
    extra: Option<&'a str>,
}

impl BulkRow for Row<'_> {
    fn len(&self) -> usize {
        self.row.len() + usize::from(self.extra.is_some())
    }

    fn value(&self, i: usize) -> ValueRef<'_> {
        match self.extra {
            Some(v) if i == self.row.len() => ValueRef::Text(v.as_bytes()),
            _ => self.row.value(i),
        }
    }
}

/// The [`RowSource`]: the sink's settings, the read position in the stream
/// of batches, and the counts of the committed transactions and of the one
/// in progress.
struct Feed<'a> {
    sink: Sink<'a>,
    rx: Receiver<Result<Batch, Error>>,
    batch: Option<Arc<Batch>>,
    pos: usize,
    /// Rows handed to the inserter, for the progress bar.
    handed: u64,
    /// What the committed transactions did.
    committed: Counts,
    /// What the transaction in progress did so far.
    open: Counts,
    /// Batch and entry of the last record consumed (resumable imports).
    last: Option<(Arc<Batch>, usize)>,
    /// Transactions committed.
    commits: u64,
    /// Per column, values stored as text that did not fit the column's
    /// type: committed, and in the transaction in progress.
    kept_committed: Vec<i64>,
    kept_open: Vec<i64>,
    /// Some column can hold a value that did not fit its type (not every
    /// column is TEXT or untyped): only then are rows looked at for it.
    typed: bool,
    /// The import's own error, carried through the inserter.
    failure: Option<Error>,
    /// Fields read as NULL by a null token, per column and token
    /// (`column * null_stride + token`), summed over the batches received.
    null_counts: Vec<u64>,
    null_stride: usize,
}

impl Feed<'_> {
    /// Keeps `e` as the import's error; the inserter gets a stand-in.
    fn fail(&mut self, e: Error) -> litelane::Error {
        self.failure = Some(e);
        litelane::Error::user("import stopped")
    }

    /// The transaction in progress committed: its counts join the others,
    /// and the next one goes on from its position.
    fn settle(&mut self) {
        let open = std::mem::take(&mut self.open);
        let c = &mut self.committed;
        c.inserted += open.inserted;
        c.rejected += open.rejected;
        c.skipped += open.skipped;
        (c.record, c.line, c.end, c.hash, c.blank) =
            (open.record, open.line, open.end, open.hash, open.blank);
        self.open = Counts {
            record: c.record,
            line: c.line,
            end: c.end,
            hash: c.hash,
            ..Counts::default()
        };
        self.commits += 1;
        for (c, o) in self.kept_committed.iter_mut().zip(&mut self.kept_open) {
            *c += std::mem::take(o);
        }
    }

    /// The next entry's batch, receiving batches as needed; `None` at the
    /// end of the input.
    fn current(&mut self) -> Result<Option<Arc<Batch>>, Error> {
        loop {
            if self.sink.caller.should_stop() {
                return Err(Error::Input("interrupted (Ctrl-C)".into()));
            }
            match &self.batch {
                Some(b) if self.pos < b.entries.len() => return Ok(Some(Arc::clone(b))),
                Some(b) if b.last => {
                    self.open.blank = b.blank_lines;
                    // Every row handed: the caller sees the final count.
                    self.sink.caller.rows(self.handed, b.bytes_read);
                    return Ok(None);
                }
                _ => {}
            }
            match self.rx.recv_timeout(POLL) {
                Ok(Ok(b)) => {
                    self.sink.caller.rows(self.handed, b.bytes_read);
                    if !b.null_counts.is_empty() {
                        if self.null_counts.is_empty() {
                            self.null_stride = b.null_stride;
                            self.null_counts = vec![0; b.null_counts.len()];
                        }
                        for (t, n) in self.null_counts.iter_mut().zip(&b.null_counts) {
                            *t += n;
                        }
                    }
                    self.batch = Some(Arc::new(b));
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Input(
                        "the parser thread stopped before the end of the input".into(),
                    ))
                }
            }
        }
    }

    fn next(&mut self, tx: &Tx<'_>) -> Result<Option<RowRef>, Error> {
        while let Some(batch) = self.current()? {
            let e = batch.entries[self.pos];
            if self.sink.progress.is_some() {
                // The resume point is recorded with resumable imports only.
                self.last = Some((Arc::clone(&batch), self.pos));
            }
            self.pos += 1;
            self.open.record = e.record;
            self.open.line = e.line;
            self.open.end = e.end;
            match e.kind {
                Kind::Row(row) => {
                    self.handed += 1;
                    let r = RowRef {
                        batch,
                        row,
                        line: e.line,
                        record: e.record,
                    };
                    if self.typed {
                        r.count_kept(&self.sink.types, &mut self.kept_open, true);
                    }
                    return Ok(Some(r));
                }
                Kind::Reject(j) => {
                    let r = &batch.rejects[j as usize];
                    self.reject(tx, e.line, e.record, &r.reason, &r.raw)?;
                }
            }
        }
        Ok(None)
    }

    /// Writes a reject to the rejects file and table; an error past
    /// `--max-rejects`.
    fn reject(
        &mut self,
        tx: &Tx<'_>,
        line: u64,
        record: u64,
        reason: &str,
        raw: &[u8],
    ) -> Result<(), Error> {
        let sink = &mut self.sink;
        let nth = sink.rejects.write(line, record, reason, raw)?;
        sink.caller.rejected(&Rejected {
            input: sink.rejects.input(),
            line,
            record,
            reason,
            raw,
            nth,
            in_file: sink.rejects.path().is_some(),
        });
        if let Some(t) = &sink.rejects_table {
            let sql = format!(
                "INSERT INTO {} (target_table, source, line, record, reason, raw) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                quote_ident(t)
            );
            // The record as read: text when it is UTF-8, else its bytes.
            let raw_value = match std::str::from_utf8(raw) {
                Ok(s) => ValueRef::Text(s.as_bytes()),
                Err(_) => ValueRef::Blob(raw),
            };
            tx.prepare_cached(&sql)
                .and_then(|mut st| {
                    st.execute(rusqlite::params![
                        sink.table,
                        sink.source,
                        line as i64,
                        record as i64,
                        reason,
                        ToSqlOutput::Borrowed(raw_value),
                    ])
                })
                .map_err(|e| {
                    Error::Engine(litelane::Error::from_sqlite(
                        e,
                        format!(
                            "recording the rejected record of {}:{line} in {}",
                            sink.input,
                            quote_ident(t)
                        ),
                    ))
                })?;
        }
        self.open.rejected += 1;
        let base = sink.progress.as_ref().map_or(0, |p| p.rows_rejected);
        let total = base + self.committed.rejected + self.open.rejected;
        match sink.max_rejects {
            Some(max) if total > max => Err(Error::Input(format!(
                "stopped at {}:{line}: record {record} is rejected record number {total}, more \
                 than --max-rejects {max} allows ({reason})",
                sink.input
            ))),
            _ => Ok(()),
        }
    }

    /// The progress row as of the end of the transaction in progress.
    fn save_progress(&mut self, tx: &Tx<'_>, end: bool) -> Result<(), Error> {
        self.sink.rejects.flush()?;
        if let Some((b, i)) = &self.last {
            self.open.hash = Some(b.entry_hash(*i));
        }
        let Some(base) = &self.sink.progress else {
            return Ok(());
        };
        let (c, o) = (&self.committed, &self.open);
        let mut p = base.clone();
        p.records_read = if o.record > 0 {
            o.record
        } else {
            base.records_read
        };
        p.rows_inserted = base.rows_inserted + c.inserted + o.inserted;
        p.rows_rejected = base.rows_rejected + c.rejected + o.rejected;
        p.last_line = o.line.max(base.last_line);
        p.rejects_file = self.sink.rejects.path().map(|p| p.display().to_string());
        p.rejects_bytes = self.sink.rejects.bytes();
        p.state = if end { resume::DONE } else { resume::RUNNING }.to_string();
        if o.hash.is_some() {
            p.resume_end = Some(o.end);
            p.resume_hash = o.hash;
        }
        resume::save(tx, &p).map_err(|e| {
            Error::Engine(litelane::Error::from_sqlite(
                e,
                format!("recording progress in {}", resume::TABLE),
            ))
        })
    }

    /// A PRIMARY KEY or UNIQUE constraint failure on exactly the key's
    /// columns (SQLite names them: `UNIQUE constraint failed: t.a, t.b`), not
    /// on another unique index.
    fn is_key_error(&self, extended_code: i32, message: &str) -> bool {
        if extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            && extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
        {
            return false;
        }
        let Some((_, list)) = message.split_once(": ") else {
            return false;
        };
        let prefix = format!("{}.", self.sink.table);
        let mut failed: Vec<String> = list
            .split(", ")
            .map(|c| c.strip_prefix(&prefix).unwrap_or(c).to_ascii_lowercase())
            .collect();
        let mut key: Vec<String> = self
            .sink
            .key
            .iter()
            .map(|&i| self.sink.columns[i].to_ascii_lowercase())
            .collect();
        failed.sort();
        key.sort();
        failed == key
    }
}

impl<'a> RowSource for Feed<'a> {
    type Row = Row<'a>;

    fn next_row(&mut self, tx: &Tx<'_>) -> litelane::Result<Option<Row<'a>>> {
        match self.next(tx) {
            Ok(row) => Ok(row.map(|row| Row {
                row,
                extra: self.sink.extra,
            })),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn begin(&mut self, tx: &Tx<'_>) -> litelane::Result<()> {
        for sql in std::mem::take(&mut self.sink.setup) {
            tx.execute_batch(&sql).map_err(|e| {
                let shown: String = sql.chars().take(100).collect();
                let more = if shown.len() < sql.len() { "..." } else { "" };
                litelane::Error::from_sqlite(e, format!("running {shown}{more}"))
            })?;
        }
        Ok(())
    }

    fn refused(
        &mut self,
        tx: &Tx<'_>,
        row: &Row<'a>,
        _number: u64,
        error: litelane::Error,
    ) -> litelane::Result<()> {
        let litelane::Error::Sqlite {
            extended_code,
            message,
            ..
        } = &error
        else {
            return Err(error);
        };
        let mut reason = message.clone();
        if !self.sink.key.is_empty() && self.is_key_error(*extended_code, message) {
            reason = format!(
                "key already present: {} ({reason})",
                describe_key(row, &self.sink.columns, &self.sink.key)
            );
        }
        let raw = describe_row(&row.row);
        let r = &row.row;
        if self.typed {
            r.count_kept(&self.sink.types, &mut self.kept_open, false);
        }
        self.reject(tx, r.line, r.record, &reason, &raw)
            .map_err(|e| self.fail(e))
    }

    fn before_commit(
        &mut self,
        tx: &Tx<'_>,
        batch: &InsertReport,
        end: bool,
    ) -> litelane::Result<()> {
        self.open.inserted = batch.rows;
        self.open.skipped = batch.skipped;
        self.save_progress(tx, end).map_err(|e| self.fail(e))
    }

    fn after_commit(&mut self, _batch: &InsertReport) {
        self.settle();
    }
}

impl Sink<'_> {
    /// Stores everything `rx` delivers. Returns this run's counts; on error,
    /// the message says what stays committed.
    pub fn run(
        self,
        rx: Receiver<Result<Batch, Error>>,
    ) -> Result<(Counts, Vec<u64>, NullCounts), Error> {
        let columns: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        let inserter = self
            .db
            .inserter(&self.table, &columns)
            .and_then(|i| i.on_conflict(self.on_conflict.clone()))
            .map_err(Error::Engine)?
            .commit_every(self.commit_every.unwrap_or(0))
            .label(format!("litelane import into {}", quote_ident(&self.table)));
        let ntypes = self.types.len();
        let typed = self
            .types
            .iter()
            .any(|t| !matches!(t, ColType::Text | ColType::Any));
        let mut feed = Feed {
            sink: self,
            rx,
            batch: None,
            pos: 0,
            handed: 0,
            committed: Counts::default(),
            open: Counts::default(),
            last: None,
            commits: 0,
            kept_committed: vec![0; ntypes],
            kept_open: vec![0; ntypes],
            typed,
            failure: None,
            null_counts: Vec::new(),
            null_stride: 0,
        };
        feed.sink.rejects.start()?;
        match inserter.insert_from(&mut feed) {
            Ok(_) => Ok((
                feed.committed,
                feed.kept_committed
                    .iter()
                    .map(|&n| n.max(0) as u64)
                    .collect(),
                NullCounts {
                    counts: std::mem::take(&mut feed.null_counts),
                    stride: feed.null_stride,
                },
            )),
            Err(e) => {
                let e = feed.failure.take().unwrap_or(Error::Engine(e));
                let kept = feed.what_stays(&e);
                Err(Error::Context {
                    message: format!("{e}; {kept}"),
                    source: Box::new(e),
                })
            }
        }
    }
}

impl Feed<'_> {
    /// What the failed import `e` leaves stored, and how to go on: nothing
    /// (rolled back), the rows committed through a line, or, when the last
    /// commit's outcome is unknown, neither.
    fn what_stays(&self, e: &Error) -> String {
        let commits = self.commits;
        let committed = &self.committed;
        let unknown = matches!(e, Error::Engine(x) if x.is_outcome_unknown());
        if unknown {
            // The last batch's commit may or may not be stored: say
            // neither "rolled back" nor "committed".
            let resume = if self.sink.progress.is_some() {
                "run again with --resume, which continues from whatever is stored"
            } else {
                "check what the table holds before running again"
            };
            format!(
                "the last batch may or may not be stored ({} rows were confirmed \
                 committed before it, through line {} of {}); {resume}",
                committed.inserted, committed.line, self.sink.input
            )
        } else if commits == 0 && self.sink.progress.is_none() {
            "nothing was imported (the transaction was rolled back)".to_string()
        } else if commits == 0 {
            "nothing more was committed by this run (its transaction was rolled \
             back); run again with --resume to continue from the last commit"
                .to_string()
        } else {
            format!(
                "{} rows stay committed, through line {} of {}; run again with \
                 --resume to continue from there",
                committed.inserted, committed.line, self.sink.input
            )
        }
    }
}

/// Fields read as NULL because they equal a null token, per column and
/// token: `counts[column * stride + token]` (empty: none).
#[derive(Debug, Default)]
pub struct NullCounts {
    /// The counts.
    pub counts: Vec<u64>,
    /// Tokens per column in `counts`.
    pub stride: usize,
}

impl NullCounts {
    /// How many fields of column `col` were its token number `token`.
    pub fn get(&self, col: usize, token: usize) -> u64 {
        self.counts
            .get(col * self.stride + token)
            .copied()
            .unwrap_or(0)
    }
}

/// A row's key as `"id"=5, "day"='x'`.
fn describe_key(row: &Row<'_>, columns: &[String], key: &[usize]) -> String {
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
