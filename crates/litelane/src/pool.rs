//! The pool of read-only reader connections, and the register of the reads
//! in progress (who pins the WAL, and how to interrupt a read that is too old).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, InterruptHandle};

use crate::configure::Registry;
use crate::error::{Context, Error, Result};
use crate::metrics::Recorder;
use crate::pinned_read::PinnedRead;
use crate::schema_epoch::SchemaEpoch;
use crate::unpoisoned::{lock, wait};

/// What a reader's trace callback keeps: the first statement of each read.
#[derive(Default)]
pub(crate) struct ReaderTrace {
    /// Set when a read begins; the next statement's SQL is kept.
    pub capture: AtomicBool,
    /// The first statement of the current (or last) read.
    pub first_sql: Mutex<String>,
}

/// A reader connection of the pool.
pub(crate) struct Reader {
    conn: Connection,
    index: usize,
    trace: Arc<ReaderTrace>,
    /// The configuration generation applied to `conn` (see `configure.rs`).
    config_seen: u64,
    /// The writer's schema epoch `conn` caught up with (`schema_epoch.rs`).
    schema_seen: u64,
}

impl Reader {
    pub fn new(
        conn: Connection,
        index: usize,
        trace: Arc<ReaderTrace>,
        config_seen: u64,
    ) -> Reader {
        Reader {
            conn,
            index,
            trace,
            config_seen,
            schema_seen: 0,
        }
    }
}

/// A read in progress.
struct Active {
    label: String,
    since: Instant,
    /// Set by [`Pool::interrupt_older_than`].
    interrupted: bool,
}

struct Slot {
    interrupt: InterruptHandle,
    trace: Arc<ReaderTrace>,
    active: Option<Active>,
}

pub(crate) struct Pool {
    idle: Mutex<Vec<Reader>>,
    available: Condvar,
    /// Readers waiting on `available`, changed under the `idle` lock: a
    /// reader going back wakes someone only when someone waits (a
    /// `notify_one` is a system call even with nobody waiting, once per
    /// read).
    waiting: AtomicUsize,
    /// One entry per reader connection, by index.
    slots: Mutex<Vec<Slot>>,
    recorder: Arc<Recorder>,
    config: Arc<Registry>,
    schema: Arc<SchemaEpoch>,
}

/// Puts the connection back and clears its register entry however the read ends.
struct Lease<'p> {
    pool: &'p Pool,
    reader: Option<Reader>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            if !reader.conn.is_autocommit() {
                let _ = reader.conn.execute_batch("ROLLBACK");
            }
            self.pool.slots()[reader.index].active = None;
            let mut idle = lock(&self.pool.idle);
            idle.push(reader);
            let waiting = self.pool.waiting.load(Ordering::Relaxed);
            drop(idle);
            if waiting > 0 {
                self.pool.available.notify_one();
            }
        }
    }
}

/// Runs `BEGIN` or `COMMIT` through the statement cache (once per read:
/// parsing them each time is measurable on short reads).
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl Pool {
    pub fn new(
        readers: Vec<Reader>,
        recorder: Arc<Recorder>,
        config: Arc<Registry>,
        schema: Arc<SchemaEpoch>,
    ) -> Pool {
        let mut slots: Vec<Slot> = Vec::with_capacity(readers.len());
        for (i, r) in readers.iter().enumerate() {
            assert_eq!(r.index, i, "readers are numbered in order");
            slots.push(Slot {
                interrupt: r.conn.get_interrupt_handle(),
                trace: Arc::clone(&r.trace),
                active: None,
            });
        }
        Pool {
            idle: Mutex::new(readers),
            available: Condvar::new(),
            waiting: AtomicUsize::new(0),
            slots: Mutex::new(slots),
            recorder,
            config,
            schema,
        }
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        lock(&self.slots)
    }

    /// Runs `f` on a reader inside one read transaction: every statement of
    /// the call sees the same snapshot. Waits only if every reader is busy.
    pub fn read<T>(&self, label: &str, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.read_in(label, true, f)
    }

    /// [`read`](Pool::read) without `BEGIN`/`COMMIT` around `f`, for an `f`
    /// that runs one statement: in autocommit mode that statement is a read
    /// transaction of its own, one snapshot, and the two extra statements
    /// cost more than a point query itself.
    pub fn read_single<T>(
        &self,
        label: &str,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        self.read_in(label, false, f)
    }

    fn read_in<T>(
        &self,
        label: &str,
        explicit: bool,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        let mut reader = {
            let mut idle = lock(&self.idle);
            loop {
                if let Some(r) = idle.pop() {
                    break r;
                }
                self.waiting.fetch_add(1, Ordering::Relaxed);
                idle = wait(&self.available, idle);
                self.waiting.fetch_sub(1, Ordering::Relaxed);
            }
        };
        // Idle, outside any read: catch up with `Database::configure`.
        self.config
            .sync(&mut reader.conn, &mut reader.config_seen, &|e| {
                self.recorder.note_error(&e)
            });
        if let Err(e) = self.schema.catch_up(&reader.conn, &mut reader.schema_seen) {
            self.recorder
                .note_error(&Error::from_sqlite(e, "reading the writer's new schema"));
        }
        reader.trace.capture.store(true, Ordering::Relaxed);
        self.slots()[reader.index].active = Some(Active {
            label: label.to_string(),
            since: Instant::now(),
            interrupted: false,
        });
        let lease = Lease {
            pool: self,
            reader: Some(reader),
        };
        let reader = lease.reader.as_ref().expect("leased reader");
        let conn = &reader.conn;
        if explicit {
            control(conn, "BEGIN").context(|| "BEGIN (read)".to_string())?;
        }
        let out = catch_unwind(AssertUnwindSafe(|| f(conn)));
        let end = if explicit {
            control(conn, "COMMIT")
        } else {
            Ok(())
        };
        match out {
            Err(panic) => {
                drop(lease);
                resume_unwind(panic)
            }
            Ok(Err(e)) => {
                if matches!(
                    e.sqlite_code(),
                    Some(rusqlite::ffi::SQLITE_CORRUPT | rusqlite::ffi::SQLITE_NOTADB)
                ) {
                    // A page that read corrupt must not stay cached once
                    // the medium reads right again.
                    let _ = conn.execute_batch("ROLLBACK");
                    let _ = conn.release_memory();
                }
                let e = schema_read_error(conn, e);
                let e = self.explain_interrupt(reader.index, e);
                self.recorder.note_error(&e);
                Err(e)
            }
            Ok(Ok(v)) => {
                end.context(|| "COMMIT (read)".to_string())?;
                Ok(v)
            }
        }
    }

    /// An interrupt that litelane caused says why.
    fn explain_interrupt(&self, index: usize, e: Error) -> Error {
        let slots = self.slots();
        let Some(active) = slots[index].active.as_ref().filter(|a| a.interrupted) else {
            return e;
        };
        if e.sqlite_code() != Some(rusqlite::ffi::SQLITE_INTERRUPT) {
            return e;
        }
        Error::Sqlite {
            code: rusqlite::ffi::SQLITE_INTERRUPT,
            os: None,
            extended_code: rusqlite::ffi::SQLITE_INTERRUPT,
            message: format!(
                "read interrupted by litelane after {:.1} s: it held a snapshot longer than \
                 checkpoints.max_read_age while the WAL was over its limit",
                active.since.elapsed().as_secs_f64()
            ),
            context: "a read on an old snapshot".into(),
        }
    }

    /// The oldest read in progress that started before `before`.
    pub fn oldest_read(&self, before: Instant) -> Option<PinnedRead> {
        let slots = self.slots();
        slots
            .iter()
            .filter_map(|s| s.active.as_ref().map(|a| (s, a)))
            .filter(|(_, a)| a.since <= before)
            .min_by_key(|(_, a)| a.since)
            .map(|(s, a)| PinnedRead {
                label: a.label.clone(),
                age: a.since.elapsed(),
                sql: lock(&s.trace.first_sql).clone(),
            })
    }

    /// When the oldest read in progress started.
    pub fn oldest_start(&self) -> Option<Instant> {
        self.slots()
            .iter()
            .filter_map(|s| s.active.as_ref().map(|a| a.since))
            .min()
    }

    /// Interrupts the statements of every read older than `age`; returns how
    /// many reads were interrupted. (SQLite can only interrupt a statement
    /// that is running: a read that holds its snapshot while its closure does
    /// something else keeps it until the closure returns.)
    pub fn interrupt_older_than(&self, age: Duration) -> usize {
        let mut slots = self.slots();
        let mut n = 0;
        for s in slots.iter_mut() {
            if let Some(a) = s.active.as_mut() {
                if a.since.elapsed() >= age {
                    a.interrupted = true;
                    s.interrupt.interrupt();
                    n += 1;
                }
            }
        }
        n
    }
}

/// The messages SQLite gives when a statement names an object its cached
/// schema does not have.
const MISSING_OBJECT: [&str; 4] = [
    "no such table",
    "no such column",
    "no such index",
    "no such trigger",
];

/// A read failed because its statement names an object missing from the
/// connection's cached schema. SQLite then re-reads the schema cookie to
/// see whether that schema is stale, but drops an error of that read
/// (`schemaIsValid`), so an I/O error while loading the schema came back as
/// "no such table". Reads the cookie again (`PRAGMA schema_version`, from
/// the file): an error there is the real one, returned with its codes and
/// what SQLite had answered. If that read works and the table SQLite
/// called missing is in the file, the answer came from a stale schema:
/// `SQLITE_SCHEMA`, saying so. Otherwise the object is really missing: `e`
/// unchanged.
fn schema_read_error(conn: &Connection, e: Error) -> Error {
    let Error::Sqlite {
        code: rusqlite::ffi::SQLITE_ERROR,
        message,
        context,
        ..
    } = &e
    else {
        return e;
    };
    if !MISSING_OBJECT.iter().any(|m| message.starts_with(m)) {
        return e;
    }
    let answered = format!("SQLite answered \"{message}\" from the schema it had cached");
    if let Err(io) = conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0)) {
        return Error::from_sqlite(
            io,
            format!("reading the database schema from the file ({answered}, without this error)"),
        );
    }
    let Some(table) = message.strip_prefix("no such table: ") else {
        return e;
    };
    let (schema, name) = table.split_once('.').unwrap_or(("main", table));
    let sql = format!(
        "SELECT 1 FROM \"{}\".sqlite_schema WHERE type IN ('table', 'view') \
         AND name = ?1 COLLATE NOCASE",
        schema.replace('"', "\"\"")
    );
    let exists = conn.query_row(&sql, [name], |_| Ok(())).is_ok();
    if !exists {
        return e;
    }
    Error::Sqlite {
        code: rusqlite::ffi::SQLITE_SCHEMA,
        os: None,
        extended_code: rusqlite::ffi::SQLITE_SCHEMA,
        message: format!(
            "the database schema changed or could not be re-read: {answered}, but {table} \
             is in the file. Re-reading the schema may have failed with an error SQLite does \
             not report (an I/O error, or a lock during WAL recovery): run the read again, and \
             check the disk if this repeats"
        ),
        context: context.clone(),
    }
}
