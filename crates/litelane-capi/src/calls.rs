//! What each C function does, on Rust types: the `ffi` module converts
//! C's arguments, calls these, and converts back. A failure is recorded
//! for `litelane_errmsg()` (`errors`) and returned as its status.

use crate::codes::{LITELANE_ERROR, LITELANE_INTERRUPTED, LITELANE_MISUSE};
use crate::errors::{engine, fail};
use crate::handles::{self, Cell, Handle, Prepared, Rows};
use litelane::rusqlite::types::ValueRef;
use litelane::rusqlite::{self, params_from_iter};
use litelane::{CheckpointMode, CheckpointReport, Database, Options, Profile, Value};
use std::ffi::{c_int, CString};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A failed call: its status, already recorded for `litelane_errmsg()`.
pub(crate) type Status = c_int;

/// One statement and its parameters.
pub(crate) struct Statement {
    pub sql: String,
    pub params: Vec<Value>,
}

/// What a statement that writes did (`sqlite3_changes`, the last rowid).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Done {
    pub changes: u64,
    pub last_insert_rowid: i64,
}

/// How to open a database (the C struct's fields that were given).
pub(crate) struct OpenOptions {
    pub profile: Option<String>,
    /// `None`: the profile's default (5 s).
    pub busy_timeout: Option<Duration>,
    /// `None`: the default (the number of cores, at least 2).
    pub readers: Option<usize>,
}

fn misuse(message: impl AsRef<str>) -> Status {
    fail(LITELANE_MISUSE, message)
}

pub(crate) fn open(path: &str, o: OpenOptions) -> Result<u64, Status> {
    let profile = match o.profile.as_deref() {
        None => Profile::default(),
        Some("safe") => Profile::Safe,
        Some("balanced") => Profile::Balanced,
        Some("fast") => Profile::Fast,
        Some(other) => {
            return Err(misuse(format!(
                "litelane_open: unknown profile '{other}' (safe, balanced or fast)"
            )))
        }
    };
    let mut opts = Options::with_profile(profile);
    if let Some(t) = o.busy_timeout {
        opts.busy_timeout = t;
    }
    if let Some(n) = o.readers {
        opts.readers = n;
    }
    let db = if path == ":memory:" {
        Database::open_in_memory(opts)
    } else {
        Database::open(path, opts)
    };
    match db {
        Ok(db) => Ok(handles::insert(Handle::Db(db))),
        Err(e) => Err(engine(&e, &format!("opening {path}"))),
    }
}

pub(crate) fn close(id: u64) -> Result<(), Status> {
    handles::remove(id, "a database", |h| matches!(h, Handle::Db(_)))
        .map(drop)
        .map_err(|m| misuse(format!("litelane_close: {m}")))
}

fn run_one(conn: &rusqlite::Connection, s: &Statement) -> rusqlite::Result<Done> {
    let mut stmt = conn.prepare_cached(&s.sql)?;
    let changes = stmt.execute(params_from_iter(s.params.iter()))?;
    Ok(Done {
        changes: changes as u64,
        last_insert_rowid: conn.last_insert_rowid(),
    })
}

/// Runs `stmts` in one write transaction of the engine's queue (group
/// committed with other writers): all committed, or none.
pub(crate) fn write(id: u64, stmts: Vec<Statement>) -> Result<Vec<Done>, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_write: {m}")))?;
    let n = stmts.len();
    let out = db.write(|tx| {
        stmts
            .iter()
            .enumerate()
            .map(|(i, s)| {
                run_one(tx, s).map_err(|e| {
                    litelane::Error::from_sqlite(e, format!("statement {} of {n}", i + 1))
                })
            })
            .collect::<litelane::Result<Vec<Done>>>()
    });
    out.map_err(|e| engine(&e, "litelane_write"))
}

pub(crate) fn begin(id: u64, label: &str) -> Result<u64, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_begin: {m}")))?;
    match db.hold_writer(label) {
        Ok(held) => Ok(handles::insert(Handle::Tx(Arc::new(Mutex::new(Some(
            held,
        )))))),
        Err(e) => Err(engine(&e, "litelane_begin")),
    }
}

fn with_tx<T>(
    id: u64,
    what: &str,
    f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
) -> Result<T, Status> {
    let tx = handles::tx(id).map_err(|m| misuse(format!("{what}: {m}")))?;
    let mut held = tx.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(held) = held.as_mut() else {
        return Err(misuse(format!("{what}: the transaction has ended")));
    };
    held.run(|t| f(t).map_err(|e| litelane::Error::from_sqlite(e, what.to_string())))
        .map_err(|e| engine(&e, ""))
}

pub(crate) fn tx_execute(id: u64, s: &Statement) -> Result<Done, Status> {
    with_tx(id, "litelane_tx_execute", |conn| run_one(conn, s))
}

pub(crate) fn tx_query(id: u64, s: &Statement) -> Result<u64, Status> {
    let rows = with_tx(id, "litelane_tx_query", |conn| collect(conn, s))?;
    Ok(handles::insert(Handle::Rows(Arc::new(Mutex::new(rows)))))
}

/// Commits (`commit`) or rolls back the transaction and frees its handle.
pub(crate) fn end(id: u64, commit: bool) -> Result<(), Status> {
    let what = if commit {
        "litelane_commit"
    } else {
        "litelane_rollback"
    };
    let h = handles::remove(id, "a transaction", |h| matches!(h, Handle::Tx(_)))
        .map_err(|m| misuse(format!("{what}: {m}")))?;
    let Handle::Tx(tx) = h else {
        unreachable!("checked by remove")
    };
    let held = tx
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some(held) = held else {
        return Err(misuse(format!("{what}: the transaction has ended")));
    };
    let out = if commit {
        held.commit()
    } else {
        held.rollback()
    };
    out.map_err(|e| engine(&e, what))
}

fn collect(conn: &rusqlite::Connection, s: &Statement) -> rusqlite::Result<Rows> {
    let mut stmt = conn.prepare_cached(&s.sql)?;
    let names = stmt
        .column_names()
        .map(|n| CString::new(n.split('\0').next().unwrap_or_default()).unwrap_or_default())
        .collect::<Vec<_>>();
    let width = names.len();
    let mut out = Vec::new();
    let mut rows = stmt.query(params_from_iter(s.params.iter()))?;
    while let Some(r) = rows.next()? {
        let mut row = Vec::with_capacity(width);
        for i in 0..width {
            row.push(match r.get_ref(i)? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(v) => Cell::Integer(v),
                ValueRef::Real(v) => Cell::Real(v),
                ValueRef::Text(t) => {
                    let mut v = Vec::with_capacity(t.len() + 1);
                    v.extend_from_slice(t);
                    v.push(0);
                    Cell::Text(v)
                }
                ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
            });
        }
        out.push(row);
    }
    Ok(Rows {
        names,
        rows: out,
        at: None,
        stepped: 0,
    })
}

/// Runs a read on the reader pool and keeps its rows for stepping.
pub(crate) fn query(id: u64, s: &Statement) -> Result<u64, Status> {
    read_rows(id, s, "litelane_query")
}

/// Runs `s` on a reader of database `id` for the C function `what`.
fn read_rows(id: u64, s: &Statement, what: &str) -> Result<u64, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("{what}: {m}")))?;
    match db.read(|conn| collect(conn, s).map_err(|e| litelane::Error::from_sqlite(e, what))) {
        Ok(rows) => Ok(handles::insert(Handle::Rows(Arc::new(Mutex::new(rows))))),
        Err(e) => Err(engine(&e, "")),
    }
}

/// Prepares `sql` on a reader of database `id`: it must be one statement
/// that reads (`sqlite3_stmt_readonly`); the statement stays in the
/// readers' statement caches, and the handle keeps its text and its number
/// of parameters.
pub(crate) fn prepare(id: u64, sql: &str) -> Result<u64, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_prepare: {m}")))?;
    let checked = db.read(|conn| {
        let stmt = conn
            .prepare_cached(sql)
            .map_err(|e| litelane::Error::from_sqlite(e, "litelane_prepare"))?;
        Ok((stmt.readonly(), stmt.parameter_count()))
    });
    match checked {
        Ok((true, params)) => Ok(handles::insert(Handle::Stmt(Arc::new(Prepared {
            db: id,
            sql: sql.to_string(),
            params,
        })))),
        Ok((false, _)) => Err(misuse(
            "litelane_prepare: the statement writes: prepared statements read (on the \
             reader pool); write with litelane_write or in a transaction",
        )),
        Err(e) => Err(engine(&e, "")),
    }
}

/// Runs the prepared statement `id` with `params` on a reader of its
/// database: a result handle, as [`query`].
pub(crate) fn stmt_query(id: u64, params: Vec<Value>) -> Result<u64, Status> {
    let p = handles::stmt(id).map_err(|m| misuse(format!("litelane_stmt_query: {m}")))?;
    if params.len() != p.params {
        return Err(misuse(format!(
            "litelane_stmt_query: the statement takes {} parameters and {} were given",
            p.params,
            params.len()
        )));
    }
    handles::db(p.db)
        .map_err(|_| misuse("litelane_stmt_query: the statement's database is closed"))?;
    let s = Statement {
        sql: p.sql.clone(),
        params,
    };
    read_rows(p.db, &s, "litelane_stmt_query")
}

/// Frees the prepared statement `id`.
pub(crate) fn stmt_free(id: u64) -> Result<(), Status> {
    handles::remove(id, "a statement", |h| matches!(h, Handle::Stmt(_)))
        .map(drop)
        .map_err(|m| misuse(format!("litelane_stmt_free: {m}")))
}

pub(crate) fn rows_free(id: u64) -> Result<(), Status> {
    handles::remove(id, "a result", |h| matches!(h, Handle::Rows(_)))
        .map(drop)
        .map_err(|m| misuse(format!("litelane_rows_free: {m}")))
}

pub(crate) fn checkpoint(id: u64, mode: c_int) -> Result<CheckpointReport, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_checkpoint: {m}")))?;
    let mode = match mode {
        0 => CheckpointMode::Passive,
        1 => CheckpointMode::Full,
        2 => CheckpointMode::Restart,
        3 => CheckpointMode::Truncate,
        other => {
            return Err(misuse(format!(
            "litelane_checkpoint: unknown mode {other} (LITELANE_CHECKPOINT_PASSIVE .. _TRUNCATE)"
        )))
        }
    };
    db.checkpoint(mode)
        .map_err(|e| engine(&e, "litelane_checkpoint"))
}

/// A panic caught at the boundary: recorded as an internal error.
pub(crate) fn panicked(what: &str) -> Status {
    fail(
        LITELANE_ERROR,
        format!("{what}: internal error (a panic in litelane); the handle may still be used"),
    )
}

pub(crate) fn metrics(id: u64) -> Result<litelane::Metrics, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_metrics: {m}")))?;
    Ok(db.metrics())
}

/// Copies the database to `dest` while it stays in use (a new file, or an
/// empty one), calling `progress(pages done, pages in all)` after each step.
pub(crate) fn backup(
    id: u64,
    dest: &str,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<litelane::BackupReport, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_backup: {m}")))?;
    db.backup(dest, |p| progress(p.pages_done, p.pages_total))
        .map_err(|e| engine(&e, &format!("litelane_backup to {dest}")))
}

/// Inserts `rows` into `table(columns)` through the engine's bulk inserter
/// (one transaction; multi-row statements).
pub(crate) fn insert(
    id: u64,
    table: &str,
    columns: &[&str],
    rows: Vec<Vec<Value>>,
) -> Result<litelane::InsertReport, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_insert: {m}")))?;
    db.inserter(table, columns)
        .and_then(|ins| ins.label("C bulk insert").insert(rows))
        .map_err(|e| engine(&e, "litelane_insert"))
}

/// What `litelane_import` asks (the C options struct's fields, read).
pub(crate) struct ImportArgs {
    pub source: String,
    pub table: Option<String>,
    pub format: Option<String>,
    pub mode: Option<String>,
    /// `LITELANE_IMPORT_HEADER_SNIFF`, `_HEADER` or `_NO_HEADER`.
    pub header: c_int,
    /// A Unicode code point; 0: sniffed.
    pub delimiter: u32,
    pub strict: bool,
    pub types_for: Vec<String>,
    /// 0: one transaction.
    pub commit_every: u64,
    pub resume: bool,
}

/// What an import tells the caller while it runs: the counts of the file
/// under way, and a rejected record when that is the news.
pub(crate) struct ImportEvent<'a> {
    /// Rows handed to SQLite so far in this file.
    pub rows: u64,
    /// Bytes of the file read so far.
    pub bytes_read: u64,
    /// The file's size, when known.
    pub total_bytes: Option<u64>,
    /// `(line, record, reason)` of a rejected record.
    pub rejected: Option<(u64, u64, &'a str)>,
}

/// The caller's side of an import: told each event, true to stop.
pub(crate) type Tell<'f> = dyn FnMut(&ImportEvent<'_>) -> bool + 'f;

/// How an import ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImportEnd {
    Done,
    Rejects,
    Interrupted,
}

/// What `litelane_import` reports.
pub(crate) struct Imported {
    pub end: ImportEnd,
    pub rows_inserted: u64,
    pub rows_rejected: u64,
    /// The table imported into; empty when interrupted before it was known.
    pub table: String,
    pub elapsed: Duration,
}

/// The import's `Progress`, handing each event to the C side's function;
/// the function returning true stops the import at the next record.
struct Relay<'f> {
    tell: &'f mut Tell<'f>,
    total: Option<u64>,
    latest: (u64, u64),
    stop: bool,
    stopped_note: Option<String>,
}

impl Relay<'_> {
    /// Tells the caller the latest counts (and a reject); once it said
    /// stop, it is told nothing more.
    fn tell(&mut self, rejected: Option<(u64, u64, &str)>) {
        if !self.stop {
            let (rows, bytes_read) = self.latest;
            self.stop = (self.tell)(&ImportEvent {
                rows,
                bytes_read,
                total_bytes: self.total,
                rejected,
            });
        }
    }
}

impl litelane_import::Progress for Relay<'_> {
    fn start(&mut self, total_bytes: Option<u64>) {
        self.total = total_bytes;
        self.latest = (0, 0);
    }

    fn rows(&mut self, rows: u64, bytes_read: u64) {
        self.latest = (rows, bytes_read);
        self.tell(None);
    }

    fn rejected(&mut self, r: &litelane_import::Rejected<'_>) {
        self.tell(Some((r.line, r.record, r.reason)));
    }

    fn note(&mut self, note: &litelane_import::Note<'_>) {
        if note.kind == litelane_import::NoteKind::Stopped {
            self.stopped_note = Some(note.text.to_string());
        }
    }

    fn should_stop(&self) -> bool {
        self.stop
    }
}

/// Parses `name` as one of `T`'s names (`FromStr`), or says it is misuse.
fn named<T: std::str::FromStr<Err = String>>(
    what: &str,
    name: Option<&str>,
) -> Result<Option<T>, Status> {
    name.map(|n| n.parse::<T>())
        .transpose()
        .map_err(|e| misuse(format!("litelane_import: {what}: {e}")))
}

/// Imports a CSV/TSV/NDJSON file into a table of database `id` through
/// `litelane_import::run_into` (the handle's engine). `tell` gets each
/// event with the file's size (when known) and the latest (rows, bytes).
pub(crate) fn import(id: u64, a: ImportArgs, tell: &mut Tell<'_>) -> Result<Imported, Status> {
    let db = handles::db(id).map_err(|m| misuse(format!("litelane_import: {m}")))?;
    let Some(path) = db.path().map(std::path::Path::to_path_buf) else {
        return Err(misuse(
            "litelane_import: the database is in memory; an import needs a database file",
        ));
    };
    let mut o = litelane_import::ImportOptions::new(a.source.clone(), path);
    o.table = a.table.clone();
    o.format = named("format", a.format.as_deref())?;
    o.mode = named("mode", a.mode.as_deref())?;
    match a.header {
        0 => {}
        1 => o.header = true,
        2 => o.no_header = true,
        h => {
            return Err(misuse(format!(
                "litelane_import: header {h} is not LITELANE_IMPORT_HEADER_SNIFF, _HEADER or _NO_HEADER"
            )))
        }
    }
    if a.delimiter != 0 {
        match char::from_u32(a.delimiter) {
            Some(c) => o.delimiter = Some(c),
            None => {
                return Err(misuse(format!(
                    "litelane_import: delimiter {:#x} is not a character",
                    a.delimiter
                )))
            }
        }
    }
    o.strict = a.strict;
    o.types_for = a.types_for;
    o.commit_every = (a.commit_every > 0).then_some(a.commit_every);
    o.resume = a.resume;
    let start = std::time::Instant::now();
    let mut relay = Relay {
        tell,
        total: None,
        latest: (0, 0),
        stop: false,
        stopped_note: None,
    };
    let outcome = litelane_import::run_into(&db, o, &mut relay)
        .map_err(|e| crate::errors::import(&e, &a.source))?;
    let elapsed = start.elapsed();
    if outcome.status == litelane_import::EXIT_INTERRUPTED {
        // The library words it for its command (Ctrl-C, `--resume`).
        let why = relay
            .stopped_note
            .map(|n| {
                n.replace("interrupted (Ctrl-C) ", "")
                    .replace("interrupted (Ctrl-C); ", "")
                    .replace("--resume", "opts->resume")
            })
            .unwrap_or_else(|| "nothing past the last commit was kept".into());
        fail(
            LITELANE_INTERRUPTED,
            format!(
                "litelane_import of {}: stopped by the progress callback: {why}",
                a.source
            ),
        );
        return Ok(Imported {
            end: ImportEnd::Interrupted,
            rows_inserted: 0,
            rows_rejected: 0,
            table: outcome
                .summary
                .as_ref()
                .map(|s| s.table().to_string())
                .or(a.table)
                .unwrap_or_default(),
            elapsed,
        });
    }
    let Some(summary) = outcome.summary else {
        return Err(fail(
            LITELANE_ERROR,
            format!(
                "litelane_import of {}: finished without a summary",
                a.source
            ),
        ));
    };
    let end = if outcome.status == litelane_import::EXIT_REJECTS {
        ImportEnd::Rejects
    } else {
        ImportEnd::Done
    };
    Ok(Imported {
        end,
        rows_inserted: summary.rows_inserted(),
        rows_rejected: summary.rows_rejected(),
        table: summary.table().to_string(),
        elapsed,
    })
}
