//! The transaction a write's closure sees ([`Tx`]), the writer's view of
//! one caller's write ([`Job`]) and what a one-statement write did
//! ([`Executed`]): what the writer runs, and what the unsafe job reference
//! of `ffi/job_ref.rs` points at, so that neither depends on the writer's
//! machinery (nor on `combine.rs`, which runs jobs of other processes).

use std::cell::Cell;
use std::ops::Deref;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use rusqlite::Connection;

use crate::error::{Context, Error, Result};

/// What a one-statement write did ([`Database::execute`](crate::Database::execute)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// Rows the statement changed (`sqlite3_changes`: rows inserted,
    /// updated or deleted by the statement itself, not by its triggers).
    pub changes: u64,
    /// The rowid of the last row inserted on this handle's writer
    /// connection, right after the statement (`sqlite3_last_insert_rowid`):
    /// the row it inserted into a rowid table, or, when it inserted none,
    /// the handle's previous insert. The same when another process ran the
    /// statement: what this handle's connection would have reported.
    pub last_insert_rowid: i64,
}

/// A write transaction, handed to the closure of [`Database::write`](crate::Database::write).
///
/// It dereferences to the writer's [`rusqlite::Connection`], so everything of
/// rusqlite is available (`execute`, `prepare_cached`, `query_row`...). Do
/// not run `BEGIN`, `COMMIT` or `ROLLBACK` yourself: return `Ok` to commit,
/// `Err` to roll back, and use [`Tx::write`] for a nested transaction.
pub struct Tx<'c> {
    conn: &'c Connection,
    depth: Cell<u32>,
}

impl Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl<'c> Tx<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Tx {
            conn,
            depth: Cell::new(0),
        }
    }

    /// Runs `f` in a nested transaction (a `SAVEPOINT`): `Ok` keeps its
    /// changes in the enclosing transaction, `Err` or a panic undoes only
    /// them. Nests to any depth.
    ///
    /// ```
    /// # let db = litelane::Database::open_in_memory(Default::default()).unwrap();
    /// db.write(|tx| {
    ///     tx.execute("CREATE TABLE t(x)", [])?;
    ///     tx.execute("INSERT INTO t VALUES (1)", [])?;
    ///     let inner: litelane::Result<()> = tx.write(|tx| {
    ///         tx.execute("INSERT INTO t VALUES (2)", [])?;
    ///         Err(litelane::Error::user("changed my mind"))
    ///     });
    ///     assert!(inner.is_err());
    ///     Ok(())
    /// }).unwrap();
    /// let n: i64 = db.read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)).unwrap();
    /// assert_eq!(n, 1);
    /// ```
    pub fn write<T>(&self, f: impl FnOnce(&Tx<'c>) -> Result<T>) -> Result<T> {
        let depth = self.depth.get() + 1;
        let name = format!("litelane_nested_{depth}");
        control(self.conn, &format!("SAVEPOINT {name}"))
            .context(|| format!("opening savepoint {name}"))?;
        self.depth.set(depth);
        let outcome = catch_unwind(AssertUnwindSafe(|| f(self)));
        self.depth.set(depth - 1);
        match outcome {
            Ok(Ok(v)) => {
                control(self.conn, &format!("RELEASE {name}"))
                    .context(|| format!("releasing savepoint {name}"))?;
                Ok(v)
            }
            Ok(Err(e)) => {
                // If the transaction itself is gone, the enclosing write
                // finds out (the writer checks after every job).
                let _ = undo_savepoint(self.conn, &name);
                Err(e)
            }
            Err(panic) => {
                let _ = undo_savepoint(self.conn, &name);
                resume_unwind(panic)
            }
        }
    }
}

/// Runs a transaction-control statement through the statement cache (they
/// run for every write; parsing them each time is measurable).
pub(crate) fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

pub(crate) fn undo_savepoint(conn: &Connection, name: &str) -> rusqlite::Result<()> {
    control(conn, &format!("ROLLBACK TO {name}"))?;
    control(conn, &format!("RELEASE {name}"))
}

/// How a job's closure ended.
pub(crate) enum Ran {
    Ok,
    Err(Error),
    Panicked,
}

/// One caller's write, as the turn holder sees it.
pub(crate) trait Job {
    /// The write's label (for metrics and errors).
    fn label(&self) -> &str;
    /// When the caller asked for the writer.
    fn enqueued(&self) -> Instant;
    /// Runs the caller's closure inside the open transaction.
    fn run(&mut self, tx: &Tx<'_>) -> Ran;
    /// Delivers the outcome of the transaction: `Ok` once committed.
    fn settle(&mut self, verdict: Result<()>);
    /// The statement and parameters of a one-statement write, which another
    /// process may run for it (`combine.rs`); `None` for a closure.
    fn statement(&self) -> Option<(&str, &[crate::Value])> {
        None
    }
    /// Another process ran [`statement`](Job::statement) in its
    /// transaction: its outcome, in place of `run` and `settle`.
    fn ran_elsewhere(&mut self, outcome: Result<Executed>) {
        self.settle(outcome.map(|_| ()));
    }
    /// The transaction this job ran in is about to `COMMIT`.
    fn committing(&mut self) {}
    /// Its transaction committed (counted at `seq` for the shared fsync,
    /// not durable yet). True when the job has its outcome and leaves the
    /// group; another process's statement records what its poster gets if
    /// this process dies before the fsync ends (`combine.rs`).
    fn committed_at(&mut self, _seq: u64) -> bool {
        false
    }
}
