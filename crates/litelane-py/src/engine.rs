//! `Engine`: a Python handle on the process-wide engine of one database
//! file (see `registry.rs`).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use litelane::{CheckpointMode, Error, Value};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::convert::{params_seq, to_params, Params};
use crate::errors::{exc, Class, IntoPy};
use crate::exec::{self, Outcome};
use crate::functions::Hooks;
use crate::options::{build_options, limit_of};
use crate::registry::{open_private, open_shared, release_shared, Shared};
use crate::results::{outcome, rows_out, PyOutcome};
use crate::rows::RowIter;
use crate::sync::{detach_waiting, lock};
use crate::txn::Txn;

/// A handle on the process-wide engine of one database file.
#[pyclass(frozen, module = "litelane._litelane")]
pub struct Engine {
    shared: Mutex<Option<Arc<Shared>>>,
    /// This handle's authorizer, progress handler and trace callback, in
    /// force around every statement it runs.
    hooks: Arc<Hooks>,
    /// How long this handle's writes wait for another process's write turn
    /// (`_set_timeout`, the DB-API connection's `timeout`); `None`: the
    /// engine's `busy_timeout` option.
    wait_timeout: Mutex<Option<Duration>>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let taken = lock(&self.shared).take();
        if let Some(sh) = taken.as_ref().filter(|sh| !sh.stale()) {
            crate::functions::forget(&sh.db, &sh.funcs, &self.hooks);
        }
        release_shared(taken);
    }
}

impl Engine {
    /// [`detach_waiting`] with this handle's timeout.
    fn waiting<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce() -> litelane::Result<T> + Send,
    ) -> PyResult<T> {
        let timeout = *lock(&self.wait_timeout);
        detach_waiting(py, timeout, f)
    }

    /// One statement as a write of its own (`outside`: on the writer outside
    /// any transaction), with this handle's hooks; its [`PyOutcome`].
    fn write_one<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        outside: bool,
    ) -> PyResult<Bound<'py, PyOutcome>> {
        let o = self.write_outcome(py, sql, params, outside)?;
        outcome(py, o)
    }

    /// [`write_one`](Engine::write_one)'s statement as an outcome.
    pub(crate) fn write_outcome(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        outside: bool,
    ) -> PyResult<Outcome> {
        let p = to_params(params)?;
        let sh = self.get(py)?;
        let mut o = self.waiting(py, || {
            sh.check_no_open_txn()?;
            if outside {
                sh.db.write_outside_transaction(&sql, |conn| {
                    self.hooks.around(conn, || exec::run(conn, &sql, &p))
                })
            } else if let Some(done) = self.execute_plain(&sh, &sql, &p) {
                done
            } else {
                sh.write(|tx| self.hooks.around(tx, || exec::run(tx, &sql, &p)))
                    .map(|mut o| {
                        o.wrote = true;
                        o
                    })
            }
        })?;
        o.wrote |= outside;
        Ok(o)
    }

    /// An `INSERT` or `REPLACE` with positional parameters, through the
    /// engine's `execute`, which under `safe` another process may commit in
    /// its transaction (combined commits, docs/concurrency.md): when no
    /// authorizer, trace callback, progress handler, function or collation
    /// of this engine could run in it. `None`: nothing ran; take the general
    /// path (also for a statement `execute` refuses, whose error the general
    /// path reports as `sqlite3` does).
    fn execute_plain(
        &self,
        sh: &Shared,
        sql: &str,
        p: &Params,
    ) -> Option<litelane::Result<Outcome>> {
        let values: &[Value] = match p {
            Params::Empty => &[],
            Params::Positional(v) => v,
            Params::Named(_) | Params::Lookup(_) => return None,
        };
        // A private engine's writer may hold state of its own (pragmas,
        // attached databases): its statements are never posted to run on
        // another process's connection.
        let plain = !sh.private
            && self.hooks.is_empty()
            && sh.funcs.none_installed()
            && exec::starts_with_keyword(sql, &["INSERT", "REPLACE"])
            && !sql.to_ascii_uppercase().contains("RETURNING");
        if !plain {
            return None;
        }
        match sh.execute(sql, values) {
            Err(Error::InvalidInput { .. }) => None,
            Err(e) => Some(Err(e)),
            Ok(done) => Some(Ok(Outcome {
                rowcount: done.changes as i64,
                lastrowid: done.last_insert_rowid,
                // A row not inserted (OR IGNORE) leaves lastrowid as it
                // was: the rowid, if the statement ran in another process,
                // is that process's connection's.
                wrote: done.changes > 0,
                ..Outcome::default()
            })),
        }
    }

    /// Runs `sql` if it only reads (`None` if it would write): on the writer
    /// when it is free (its page cache is warm after this process's writes),
    /// else on a reader.
    fn read_first(&self, sh: &Shared, sql: &str, p: &Params) -> litelane::Result<Option<Outcome>> {
        let run = |c: &litelane::rusqlite::Connection| {
            self.hooks.around(c, || exec::run_if_readonly(c, sql, p))
        };
        sh.read(run)
    }

    /// `execute`'s statement as an outcome (see `execute`).
    pub(crate) fn run_outcome(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        allow_write: bool,
    ) -> PyResult<Option<Outcome>> {
        let p = to_params(params)?;
        let sh = self.get(py)?;
        // INSERT, UPDATE, DELETE and REPLACE always write: no reader needs
        // to look at them first. A read waits for no other process, so it
        // runs without the wait's signal check (`waiting`).
        if !exec::is_dml(&sql) {
            let read = py.detach(|| self.read_first(&sh, &sql, &p)).py_err(py)?;
            if read.is_some() {
                return Ok(read);
            }
        }
        if !allow_write {
            return Ok(None);
        }
        self.waiting(py, || {
            sh.check_no_open_txn()?;
            if let Some(done) = self.execute_plain(&sh, &sql, &p) {
                return done;
            }
            let mut o = sh.write(|tx| self.hooks.around(tx, || exec::run(tx, &sql, &p)))?;
            o.wrote = true;
            Ok(o)
        })
        .map(Some)
    }

    /// `begin(timeout)` with the guard on: the transaction the DB-API
    /// layer opens before a statement.
    pub(crate) fn begin_guarded(&self, py: Python<'_>, timeout: f64) -> PyResult<Txn> {
        self.begin(py, timeout, true)
    }

    pub fn get(&self, py: Python<'_>) -> PyResult<Arc<Shared>> {
        let sh = lock(&self.shared).clone().ok_or_else(|| {
            exc(
                py,
                Class::ProgrammingError,
                "Cannot operate on a closed database.",
            )
        })?;
        if sh.stale() {
            return Err(exc(
                py,
                Class::ProgrammingError,
                format!(
                    "this connection to {} was opened before the process forked; a \
                     connection does not survive fork(): open a new one in the child",
                    sh.display
                ),
            ));
        }
        Ok(sh)
    }
}

/// Opens (or joins, if this process already has it open) the engine of `path`.
///
/// With no `profile`, `readers` or `options`, the caller takes the engine
/// as it is if the file is already open in this process (whatever its
/// options), and otherwise opens it with `default_profile` and, unless the
/// options say, `stock_settings = default_stock`. Asking for options that
/// differ from an open engine's is an error.
#[pyfunction]
#[pyo3(signature = (path, profile = None, readers = None, options = None, default_profile = "balanced", default_stock = false))]
pub fn open(
    py: Python<'_>,
    path: String,
    profile: Option<&str>,
    readers: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
    default_profile: &str,
    default_stock: bool,
) -> PyResult<Engine> {
    let join_any = profile.is_none() && readers.is_none() && options.is_none_or(|o| o.is_empty());
    let stock_given = match options {
        Some(o) => o.contains("stock_settings")?,
        None => false,
    };
    let mut opts = build_options(py, profile.unwrap_or(default_profile), readers, options)?;
    if !stock_given {
        opts.stock_settings = default_stock;
    }
    let shared = py
        .detach(|| open_shared(&path, opts, join_any, stock_given))
        .py_err(py)?;
    Ok(Engine {
        shared: Mutex::new(Some(shared)),
        hooks: Arc::default(),
        wait_timeout: Mutex::new(None),
    })
}

#[pymethods]
impl Engine {
    /// The authorizer, progress handler and trace callback are held here for
    /// SQLite, out of Python's sight: shown to the garbage collector, so a
    /// connection whose callback refers back to it is freed.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        self.hooks.visit(&visit)
    }

    fn __clear__(&self) {
        self.hooks.clear();
    }

    /// Runs one statement outside any transaction: read-only statements on a
    /// reader, others as one write transaction (if `allow_write`; otherwise
    /// returns None without running it). Returns its [`PyOutcome`].
    #[pyo3(signature = (sql, params = None, allow_write = true))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        allow_write: bool,
    ) -> PyResult<Option<Bound<'py, PyOutcome>>> {
        self.run_outcome(py, sql, params, allow_write)?
            .map(|o| outcome(py, o))
            .transpose()
    }

    /// Runs one statement as its own write transaction, without first
    /// checking on a reader whether it writes; the outcome of `execute`.
    #[pyo3(signature = (sql, params = None))]
    fn execute_write<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyOutcome>> {
        self.write_one(py, sql, params, false)
    }

    /// Runs a read-only statement and returns its rows (tuples or dicts);
    /// a statement that writes runs as its own write transaction.
    #[pyo3(signature = (sql, params = None, dicts = false))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        dicts: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        exec::refuse_control(&sql).py_err(py)?;
        let p = to_params(params)?;
        let sh = self.get(py)?;
        let o = self.waiting(py, || -> litelane::Result<Outcome> {
            if let Some(o) = self.read_first(&sh, &sql, &p)? {
                return Ok(o);
            }
            sh.check_no_open_txn()?;
            sh.write(|tx| self.hooks.around(tx, || exec::run(tx, &sql, &p)))
        })?;
        rows_out(py, &o, dicts)
    }

    /// Runs one statement for every parameter set, all in one write
    /// transaction. Returns its outcome (no rows).
    fn executemany<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        seq: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyOutcome>> {
        self.hooks.partial().store(0, Ordering::Relaxed);
        let sets = params_seq(seq)?;
        let sh = self.get(py)?;
        let mut o = self.waiting(py, || {
            sh.check_no_open_txn()?;
            sh.write(|tx| {
                self.hooks.around(tx, || {
                    exec::run_many(
                        tx,
                        &sql,
                        &sets,
                        sh.funcs.none_installed(),
                        self.hooks.partial(),
                    )
                })
            })
        })?;
        o.wrote = true;
        outcome(py, o)
    }

    /// Runs a script of statements as one write transaction (BEGIN/COMMIT in
    /// the script are skipped).
    fn executescript(&self, py: Python<'_>, sql: String) -> PyResult<()> {
        let sh = self.get(py)?;
        self.waiting(py, || {
            sh.check_no_open_txn()?;
            sh.write(|tx| self.hooks.around(tx, || exec::run_script(tx, &sql)))
        })
    }

    /// True when `sql` is one read-only statement.
    fn is_readonly(&self, py: Python<'_>, sql: String) -> PyResult<bool> {
        let sh = self.get(py)?;
        py.detach(|| sh.read(|c| self.hooks.around(c, || exec::is_readonly(c, &sql))))
            .py_err(py)
    }

    /// Streams the rows of a read-only statement from a reader, `batch` rows
    /// at a time (the reader stays leased until the iterator is exhausted or
    /// dropped).
    #[pyo3(signature = (sql, params = None, dicts = false, batch = 512))]
    fn iterate(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        dicts: bool,
        batch: usize,
    ) -> PyResult<RowIter> {
        let p = to_params(params)?;
        let sh = self.get(py)?;
        RowIter::start(sh, Arc::clone(&self.hooks), sql, p, dicts, batch.max(1))
    }

    /// Sets how long, in seconds, this handle's writes outside a
    /// transaction wait for another process's write turn before they fail
    /// with `OperationalError("database is locked: ...")`; `None` (the
    /// default): the engine's `busy_timeout` option (5 s by default). The
    /// DB-API connection passes its `timeout` here. Transactions take
    /// theirs from `begin(timeout)`.
    #[pyo3(name = "_set_timeout", signature = (seconds = None))]
    fn set_timeout(&self, seconds: Option<f64>) {
        *lock(&self.wait_timeout) =
            seconds.map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX));
    }

    /// Starts a write transaction held across calls (see `Txn`). `timeout`
    /// bounds, in seconds, the wait for the writer's turn.
    ///
    /// `guard` (default true) refuses a second transaction from a thread that
    /// already holds one (it would wait for itself); asyncio passes false, as
    /// all its coroutines share one thread and none of them blocks it.
    #[pyo3(signature = (timeout = 5.0, guard = true))]
    fn begin(&self, py: Python<'_>, timeout: f64, guard: bool) -> PyResult<Txn> {
        let sh = self.get(py)?;
        if guard {
            sh.check_no_open_txn().py_err(py)?;
        }
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        Txn::start(py, sh, timeout, guard, Arc::clone(&self.hooks))
    }

    /// Inserts rows (tuples or dicts) into `table` through the engine's bulk
    /// inserter, converting `batch` rows at a time with the GIL held and
    /// inserting with it released. One transaction unless `commit_every`.
    #[pyo3(signature = (table, rows, columns = None, batch = 2048, commit_every = None))]
    fn insert_many<'py>(
        &self,
        py: Python<'py>,
        table: String,
        rows: &Bound<'py, PyAny>,
        columns: Option<Vec<String>>,
        batch: usize,
        commit_every: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let sh = self.get(py)?;
        crate::bulk::insert_many(py, sh, table, rows, columns, batch.max(1), commit_every)
    }

    /// Imports the file `path` into `table` with the `litelane-import`
    /// library, in this process, the GIL released; `options` are its
    /// options by name (see `import::import_file`), `progress` and
    /// `on_reject` optional callables. Returns the summary as a dict.
    #[pyo3(signature = (path, table, options = None, progress = None, on_reject = None))]
    fn import_file<'py>(
        &self,
        py: Python<'py>,
        path: String,
        table: String,
        options: Option<Bound<'py, PyDict>>,
        progress: Option<Py<PyAny>>,
        on_reject: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sh = self.get(py)?;
        crate::import::import_file(py, sh, path, table, options, progress, on_reject)
    }

    /// A snapshot of the engine's metrics; durations in seconds.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::metrics::metrics_dict(py, &self.get(py)?.db.metrics())
    }

    /// Runs one checkpoint now (`passive`, `full`, `restart`, `truncate`).
    #[pyo3(signature = (mode = "passive"))]
    fn checkpoint<'py>(&self, py: Python<'py>, mode: &str) -> PyResult<Bound<'py, PyDict>> {
        let mode: CheckpointMode = mode.parse().py_err(py)?;
        let sh = self.get(py)?;
        let r = py
            .detach(|| {
                sh.check_no_open_txn()?;
                sh.db.checkpoint(mode)
            })
            .py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("mode", r.mode.name())?;
        d.set_item("wal_frames", r.wal_frames)?;
        d.set_item("checkpointed_frames", r.checkpointed_frames)?;
        d.set_item("busy", r.busy)?;
        d.set_item("elapsed", r.elapsed.as_secs_f64())?;
        Ok(d)
    }

    /// `sqlite3`'s `getlimit`: the limit `category` (`SQLITE_LIMIT_*`) in
    /// force (read on a reader; every connection of the engine has the same).
    fn getlimit(&self, py: Python<'_>, category: i32) -> PyResult<i32> {
        let limit = limit_of(py, category)?;
        let sh = self.get(py)?;
        py.detach(|| sh.db.read(|c| Ok(c.limit(limit)?))).py_err(py)
    }

    /// `DataError` when `sql` is longer than `SQLITE_LIMIT_SQL_LENGTH`
    /// bytes (`UnicodeEncodeError` for a lone surrogate), as `sqlite3`
    /// checks every statement.
    fn check_sql_length(&self, py: Python<'_>, sql: &Bound<'_, PyString>) -> PyResult<()> {
        self.get(py)?.check_sql_length(py, &sql.to_cow()?)
    }

    /// `sqlite3`'s `setlimit`: sets the limit `category` to `value` on every
    /// connection of the engine, now and later (a negative `value` changes
    /// nothing), and returns the limit before.
    fn setlimit(&self, py: Python<'_>, category: i32, value: i32) -> PyResult<i32> {
        let limit = limit_of(py, category)?;
        let before = self.getlimit(py, category)?;
        if value >= 0 {
            let sh = self.get(py)?;
            let setup: litelane::Setup = Arc::new(move |c: &mut litelane::rusqlite::Connection| {
                c.set_limit(limit, value).map(|_| ())
            });
            py.detach(|| sh.db.configure(&format!("limit {category}"), setup))
                .py_err(py)?;
            if category == 1 {
                // SQLite caps the value at its compiled maximum: keep what it took.
                let now = self.getlimit(py, category)?;
                sh.sql_length_limit.store(i64::from(now), Ordering::Relaxed);
            }
        }
        Ok(before)
    }

    /// Runs one statement on the writer outside any transaction (`VACUUM`):
    /// returns the outcome of `execute`.
    #[pyo3(signature = (sql, params = None))]
    fn execute_outside_transaction<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyOutcome>> {
        self.write_one(py, sql, params, true)
    }

    /// Copies the database, consistent as of one moment, to a new file at
    /// `dest` (see `litelane::Database::backup`); returns the pages copied.
    fn backup(&self, py: Python<'_>, dest: PathBuf) -> PyResult<u64> {
        let sh = self.get(py)?;
        let r = py.detach(|| sh.db.backup(&dest, |_| {})).py_err(py)?;
        Ok(r.pages)
    }

    /// Replaces the database's content with the database file `src`,
    /// `pages` pages per step (all at once when `pages` <= 0), calling
    /// `progress(status, remaining, total)` after each step as `sqlite3`'s
    /// `backup` does. An exception from `progress` is raised once the copy
    /// is done.
    #[pyo3(signature = (src, pages = -1, progress = None))]
    fn restore(
        &self,
        py: Python<'_>,
        src: PathBuf,
        pages: i64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let sh = self.get(py)?;
        let per_step = if pages <= 0 {
            u32::MAX
        } else {
            u32::try_from(pages).unwrap_or(u32::MAX)
        };
        let mut raised: Option<PyErr> = None;
        let mut report = |p: litelane::BackupProgress| {
            let Some(cb) = progress.as_ref() else { return };
            if raised.is_some() {
                return;
            }
            let remaining = p.pages_total - p.pages_done;
            let status = if remaining == 0 { 101 } else { 0 }; // SQLITE_DONE, SQLITE_OK
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (status, remaining, p.pages_total)) {
                    raised = Some(e);
                }
            });
        };
        let copied = py
            .detach(|| {
                sh.check_no_open_txn()?;
                sh.db.restore_from(&src, per_step, &mut report)
            })
            .py_err(py)?;
        match raised {
            Some(e) => Err(e),
            None => Ok(copied),
        }
    }

    /// A new handle on an engine of its own for this file (same options,
    /// one reader), for a DB-API connection that sets state of its own
    /// (docs/python.md, "Connection state"); this handle is left as it is.
    fn part(&self, py: Python<'_>) -> PyResult<Engine> {
        let sh = self.get(py)?;
        let private = py.detach(|| open_private(&sh)).py_err(py)?;
        Ok(Engine {
            shared: Mutex::new(Some(private)),
            hooks: Arc::default(),
            wait_timeout: Mutex::new(*lock(&self.wait_timeout)),
        })
    }

    /// The rows the last failing `executemany` of this handle (or of a
    /// transaction it began) changed with the sets before the one that
    /// failed; reads it back to 0.
    fn take_partial_changes(&self) -> i64 {
        self.hooks.partial().swap(0, Ordering::Relaxed)
    }

    /// Adds `n` rows to the count [`take_partial_changes`](Engine::take_partial_changes)
    /// returns (sets committed one at a time before the failing one).
    fn _add_partial_changes(&self, n: i64) {
        self.hooks.partial().fetch_add(n, Ordering::Relaxed);
    }

    /// True for an engine of one connection alone (see `part`).
    #[getter]
    fn private(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.get(py)?.private)
    }

    /// Lets go of this handle (the engine closes when its last handle goes).
    fn close(&self, py: Python<'_>) {
        let taken = lock(&self.shared).take();
        if let Some(sh) = taken.as_ref().filter(|sh| !sh.stale()) {
            crate::functions::forget(&sh.db, &sh.funcs, &self.hooks);
        }
        // Dropping the last handle joins the engine's threads: not with the GIL.
        py.detach(move || release_shared(taken));
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.shared).is_none()
    }

    /// The path the database was opened with.
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.get(py)?.display.clone())
    }

    /// The durability profile's name.
    #[getter]
    fn profile(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.get(py)?.db.options().profile.name())
    }

    /// Number of reader connections.
    #[getter]
    fn readers(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.get(py)?.db.options().readers)
    }

    /// Installs the SQL function `name` of `narg` arguments (-1: any) on
    /// every SQLite connection of the engine (`func` None removes it).
    #[pyo3(signature = (name, narg, func, deterministic = false))]
    fn create_function(
        &self,
        py: Python<'_>,
        name: String,
        narg: i32,
        func: Option<Py<PyAny>>,
        deterministic: bool,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::create_function(py, &sh.db, &sh.funcs, name, narg, func, deterministic)
    }

    /// Installs the aggregate (`window` false) or window function `name`
    /// implemented by `aggregate_class` (None removes it).
    #[pyo3(signature = (name, narg, aggregate_class, window = false))]
    fn create_aggregate(
        &self,
        py: Python<'_>,
        name: String,
        narg: i32,
        aggregate_class: Option<Py<PyAny>>,
        window: bool,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::create_aggregate(
            py,
            &sh.db,
            &sh.funcs,
            name,
            narg,
            aggregate_class,
            window,
        )
    }

    /// Installs the collation `name` (`func(a, b)` returns <0, 0 or >0;
    /// None removes it).
    fn create_collation(
        &self,
        py: Python<'_>,
        name: String,
        func: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::create_collation(py, &sh.db, &sh.funcs, name, func)
    }

    /// Sets (None: clears) this handle's authorizer.
    fn set_authorizer(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::set_authorizer(py, &sh.db, &sh.funcs, &self.hooks, callback)
    }

    /// Sets (None, or `n` < 1: clears) this handle's progress handler,
    /// called every `n` SQLite virtual machine instructions.
    fn set_progress_handler(
        &self,
        py: Python<'_>,
        handler: Option<Py<PyAny>>,
        n: i32,
    ) -> PyResult<()> {
        let sh = self.get(py)?;
        crate::functions::set_progress_handler(py, &sh.db, &sh.funcs, &self.hooks, handler, n)
    }

    /// Sets (None: clears) this handle's trace callback.
    fn set_trace_callback(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        self.get(py)?;
        crate::functions::set_trace(&self.hooks, callback);
        Ok(())
    }

    /// True when `other` is a handle on the same engine.
    fn same_engine(&self, py: Python<'_>, other: &Engine) -> PyResult<bool> {
        Ok(Arc::ptr_eq(&self.get(py)?, &other.get(py)?))
    }
}
