//! `ConnectionBase` and `CursorBase`: the native halves of
//! `litelane.dbapi.Connection` and `litelane.dbapi.Cursor`.
//!
//! The Python classes derive from these. The state every statement reads
//! or changes (the connection's engine, open transaction, transaction mode
//! and counters; the cursor's `description`, `rowcount`, `lastrowid`, rows
//! and position) lives here, so the common cases of `Connection.execute`,
//! `Cursor.execute`, `Cursor.fetchone` and `Connection.commit` run in one
//! call each without Python code: a statement outside any transaction, a
//! statement in the connection's transaction, the implicit `BEGIN` before a
//! DML statement in the legacy transaction mode, plain rows (no converters,
//! row factory or text factory), a commit without a trace callback.
//! Everything else, and every error a check would raise, goes to the Python
//! methods `_execute`, `_fetchone` and `_commit`, which hold the full
//! semantics; a fast path decides before it changes anything, so falling
//! back never runs a statement twice.
//!
//! No borrow of these objects is held across a call into Python code or a
//! release of the GIL: another thread (with `check_same_thread=False`) or an
//! adapter may read them meanwhile.

use std::thread::ThreadId;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::{intern, PyTraverseError, PyVisit};

use crate::convert::rows_list;
use crate::engine::Engine;
use crate::exec::Outcome;
use crate::results::description;
use crate::txn::Txn;

/// `litelane.dbapi._kinds` (statement text -> `(kind, savepoint name)`,
/// filled by the Python classifier) and the class `litelane.dbapi.Cursor`.
static KINDS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static CURSOR_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Called once by `litelane.dbapi` at import: the dict of classified
/// statements the fast path reads (a statement not in it takes the Python
/// path, which classifies it) and the `Cursor` class `Connection.execute`
/// makes.
#[pyfunction]
pub fn register_dbapi(py: Python<'_>, kinds: Bound<'_, PyDict>, cursor: Bound<'_, PyType>) {
    let _ = KINDS.set(py, kinds.unbind());
    let _ = CURSOR_CLASS.set(py, cursor.unbind());
}

/// The connection's state (see the module's documentation); the Python
/// class `Connection` reads and sets the same fields by their Python names.
#[pyclass(subclass, module = "litelane._litelane")]
pub struct ConnectionBase {
    /// The engine handle; None until opened and once closed.
    #[pyo3(get, set, name = "_engine")]
    engine: Py<PyAny>,
    /// The open transaction (a `Txn`), or None.
    #[pyo3(get, set, name = "_txn")]
    txn: Py<PyAny>,
    /// Whether use from another thread than the creator's is refused.
    #[pyo3(get, set, name = "_check_same_thread")]
    check_same_thread: bool,
    /// `threading.get_ident()` of the creating thread (see `set_thread`).
    #[pyo3(get, name = "_thread")]
    thread: u64,
    /// The creating thread, recorded when `_thread` is set.
    owner: Option<ThreadId>,
    /// True, False or `LEGACY_TRANSACTION_CONTROL` (-1).
    #[pyo3(get, set, name = "_autocommit")]
    autocommit: Py<PyAny>,
    /// `""`, `"DEFERRED"`, `"IMMEDIATE"`, `"EXCLUSIVE"` or None.
    #[pyo3(get, set, name = "_isolation_level")]
    isolation_level: Py<PyAny>,
    /// The trace callback, or None.
    #[pyo3(get, set, name = "_trace")]
    trace: Py<PyAny>,
    /// Seconds a transaction waits for the writer (`timeout=`, default 5).
    #[pyo3(get, set, name = "_timeout")]
    timeout: f64,
    /// `detect_types=` (0: none).
    #[pyo3(get, set, name = "_detect_types")]
    detect_types: Py<PyAny>,
    /// The last inserted rowid through this connection.
    #[pyo3(get, set, name = "_lastrowid")]
    lastrowid: Py<PyAny>,
    /// Rows changed through this connection.
    #[pyo3(get, set, name = "_total_changes")]
    total_changes: i64,
    /// The lower-cased name of the savepoint that opened the transaction.
    #[pyo3(get, set, name = "_savepoint_opened")]
    savepoint_opened: Py<PyAny>,
    /// The row factory new cursors start with.
    #[pyo3(get, set)]
    row_factory: Py<PyAny>,
    /// How TEXT values are returned (`str` by default).
    #[pyo3(get, set)]
    text_factory: Py<PyAny>,
}

/// What `execute`'s fast path needs of the connection, copied out of it.
struct ConnView<'py> {
    engine: Bound<'py, Engine>,
    txn: Bound<'py, PyAny>,
    autocommit: Bound<'py, PyAny>,
    legacy_begin: bool,
    /// A DML statement runs as a write of its own (autocommit mode).
    autocommit_dml: bool,
    timeout: f64,
}

/// Held while one call runs on a connection that threads share
/// (`check_same_thread=False`): the connection's `_lock` (a
/// `threading.RLock`, reentrant so that a callback may use the connection
/// again), released on drop. Without it two threads could each open an
/// implicit transaction and one would replace the other's, whose
/// acknowledged writes were then rolled back. `sqlite3` serializes such
/// calls on the SQLite connection's own mutex the same way. A connection
/// kept to its thread takes no lock.
pub(crate) struct Serialized<'py>(Option<Bound<'py, PyAny>>);

impl<'py> Serialized<'py> {
    /// Takes `conn`'s lock if threads may share it (waits with the GIL
    /// released, as `RLock.acquire` does).
    pub(crate) fn enter(conn: &Bound<'py, PyAny>) -> PyResult<Serialized<'py>> {
        let py = conn.py();
        let shared = match conn.cast::<ConnectionBase>() {
            Ok(c) => !c.borrow().check_same_thread,
            Err(_) => return Ok(Serialized(None)),
        };
        if !shared {
            return Ok(Serialized(None));
        }
        let Ok(lock) = conn.getattr(intern!(py, "_lock")) else {
            return Ok(Serialized(None)); // before __init__: its checks raise
        };
        lock.call_method0(intern!(py, "acquire"))?;
        Ok(Serialized(Some(lock)))
    }
}

impl Drop for Serialized<'_> {
    fn drop(&mut self) {
        if let Some(lock) = self.0.take() {
            let py = lock.py();
            if let Err(e) = lock.call_method0(intern!(py, "release")) {
                e.write_unraisable(py, Some(&lock));
            }
        }
    }
}

impl ConnectionBase {
    /// True when the connection may be used here (open, and from its thread
    /// if `check_same_thread`).
    fn usable(&self, py: Python<'_>) -> bool {
        !self.engine.is_none(py)
            && (!self.check_same_thread || self.owner == Some(std::thread::current().id()))
    }
}

#[pymethods]
impl ConnectionBase {
    /// Any arguments are accepted (they are `Connection.__init__`'s).
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(
        py: Python<'_>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> Self {
        ConnectionBase {
            engine: py.None(),
            txn: py.None(),
            check_same_thread: true,
            thread: 0,
            owner: None,
            autocommit: (-1i64).into_pyobject(py).unwrap().into_any().unbind(),
            isolation_level: py.None(),
            trace: py.None(),
            timeout: 5.0,
            detect_types: 0i64.into_pyobject(py).unwrap().into_any().unbind(),
            lastrowid: 0i64.into_pyobject(py).unwrap().into_any().unbind(),
            total_changes: 0,
            savepoint_opened: py.None(),
            row_factory: py.None(),
            text_factory: py.get_type::<PyString>().into_any().unbind(),
        }
    }

    /// Set by `Connection.__init__` to `threading.get_ident()`, on the
    /// creating thread: records that thread too.
    #[setter(_thread)]
    fn set_thread(&mut self, ident: u64) {
        self.thread = ident;
        self.owner = Some(std::thread::current().id());
    }

    /// Runs one statement on a new plain `Cursor` and returns the cursor.
    #[pyo3(signature = (sql, parameters = None, /))]
    fn execute<'py>(
        slf: &Bound<'py, Self>,
        sql: &Bound<'py, PyAny>,
        parameters: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let Some(cls) = CURSOR_CLASS.get(py) else {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "litelane.dbapi is not initialized",
            ));
        };
        let cls = cls.bind(py);
        let cur = cls.call_method1(intern!(py, "__new__"), (cls,))?;
        {
            let row_factory = slf.borrow().row_factory.clone_ref(py);
            let c = cur.cast::<CursorBase>()?;
            let mut c = c.borrow_mut();
            c.connection = slf.clone().into_any().unbind();
            c.row_factory = row_factory;
            c.closed = PyBool::new(py, false).to_owned().into_any().unbind();
        }
        CursorBase::execute(cur.cast::<CursorBase>()?, sql, parameters)
    }

    /// Commits the open transaction (a no-op without one).
    #[pyo3(signature = (_sql = None))]
    fn commit(slf: &Bound<'_, Self>, _sql: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let py = slf.py();
        let _serial = Serialized::enter(slf.as_any())?;
        let txn = {
            let mut c = slf.borrow_mut();
            if _sql.is_some() || !c.usable(py) || !c.trace.is_none(py) {
                None
            } else {
                c.savepoint_opened = py.None();
                Some(std::mem::replace(&mut c.txn, py.None()))
            }
        };
        match txn {
            None => slf
                .call_method1(
                    intern!(py, "_commit"),
                    (_sql.map_or_else(|| intern!(py, "COMMIT").clone().into_any(), Bound::clone),),
                )
                .map(|_| ()),
            Some(t) if t.is_none(py) => Ok(()),
            Some(t) => match t.bind(py).cast::<Txn>() {
                Ok(t) => t.get().finish(py, true),
                Err(_) => t.bind(py).call_method0(intern!(py, "commit")).map(|_| ()),
            },
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for o in [
            &self.engine,
            &self.txn,
            &self.autocommit,
            &self.isolation_level,
            &self.trace,
            &self.detect_types,
            &self.lastrowid,
            &self.savepoint_opened,
            &self.row_factory,
            &self.text_factory,
        ] {
            visit.call(o)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        Python::attach(|py| {
            self.trace = py.None();
            self.row_factory = py.None();
            self.text_factory = py.None();
        });
    }
}

/// The state of a DB-API cursor (see the module's documentation).
#[pyclass(subclass, module = "litelane._litelane")]
pub struct CursorBase {
    /// The `Connection` (None until `Cursor.__init__` ran).
    #[pyo3(get, set)]
    connection: Py<PyAny>,
    /// Applied to each fetched row when not None.
    #[pyo3(get, set)]
    row_factory: Py<PyAny>,
    /// PEP 249 `description` of the last statement (None without columns).
    #[pyo3(get, set)]
    description: Py<PyAny>,
    /// Rows changed by the last INSERT/UPDATE/DELETE/REPLACE; -1 otherwise.
    #[pyo3(get, set)]
    rowcount: i64,
    /// The connection's last inserted rowid after the last statement.
    #[pyo3(get, set)]
    lastrowid: Py<PyAny>,
    /// The rows of the last statement (a sequence of tuples).
    #[pyo3(get, set, name = "_rows")]
    rows: Py<PyAny>,
    /// How many of `rows` were fetched.
    #[pyo3(get, set, name = "_pos")]
    pos: usize,
    /// None until `Cursor.__init__` ran, then False, True once closed.
    #[pyo3(get, set, name = "_closed")]
    closed: Py<PyAny>,
    /// True while user code (adapters, converters, a parameter iterator)
    /// runs for this cursor: using it then is "Recursive use of cursors".
    #[pyo3(get, set, name = "_busy")]
    busy: bool,
    /// Per-column converters under `detect_types`, or None.
    #[pyo3(get, set, name = "_converters")]
    converters: Py<PyAny>,
}

/// Where the fast path runs a statement.
enum Route<'py> {
    /// Outside any transaction: read-only on a reader, else as its own write.
    Auto,
    /// In the connection's open transaction.
    InTxn(Bound<'py, Txn>),
    /// In a transaction opened for it (the implicit `BEGIN`).
    Begin,
    /// A DML statement in autocommit mode: a write of its own.
    Write,
}

#[pymethods]
impl CursorBase {
    /// Any arguments are accepted (they are `Cursor.__init__`'s).
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(
        py: Python<'_>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> Self {
        CursorBase {
            connection: py.None(),
            row_factory: py.None(),
            description: py.None(),
            rowcount: -1,
            lastrowid: py.None(),
            rows: PyTuple::empty(py).into_any().unbind(),
            pos: 0,
            closed: py.None(),
            busy: false,
            converters: py.None(),
        }
    }

    /// Runs one statement (PEP 249 `execute`); returns the cursor.
    #[pyo3(signature = (sql, parameters = None, /))]
    fn execute<'py>(
        slf: &Bound<'py, Self>,
        sql: &Bound<'py, PyAny>,
        parameters: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let params = match parameters {
            Some(p) => p.clone(),
            None => PyTuple::empty(py).into_any(),
        };
        let conn = slf.borrow().connection.clone_ref(py);
        let _serial = Serialized::enter(conn.bind(py))?;
        if fast_execute(slf, sql, &params)? {
            return Ok(slf.clone().into_any());
        }
        slf.call_method1(intern!(py, "_execute"), (sql, params))
    }

    /// The next row, or None when there is none (PEP 249 `fetchone`).
    fn fetchone<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Some(row) = fast_fetchone(slf)? {
            return Ok(row);
        }
        slf.call_method0(intern!(py, "_fetchone"))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for o in [
            &self.connection,
            &self.row_factory,
            &self.description,
            &self.lastrowid,
            &self.rows,
            &self.closed,
            &self.converters,
        ] {
            visit.call(o)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        Python::attach(|py| {
            self.connection = py.None();
            self.row_factory = py.None();
            self.converters = py.None();
            self.rows = PyTuple::empty(py).into_any().unbind();
        });
    }
}

/// The cursor's connection when the cursor and its connection may be used
/// now (initialized, open, not busy, right thread); None sends the caller
/// to the Python path (which raises what is wrong).
fn usable_connection<'py>(slf: &Bound<'py, CursorBase>) -> Option<Bound<'py, ConnectionBase>> {
    let py = slf.py();
    let c = slf.borrow();
    if c.busy || !c.closed.bind(py).is(PyBool::new(py, false)) {
        return None;
    }
    let conn = c.connection.bind(py).cast::<ConnectionBase>().ok()?.clone();
    drop(c);
    conn.borrow().usable(py).then_some(conn)
}

/// What the fast path of `execute` needs of the connection, or None.
fn view<'py>(conn: &Bound<'py, ConnectionBase>) -> Option<ConnView<'py>> {
    let py = conn.py();
    let c = conn.borrow();
    if c.detect_types.bind(py).is_truthy().unwrap_or(true) {
        return None;
    }
    let legacy = c.autocommit.bind(py).eq(-1).unwrap_or(false);
    let legacy_begin = legacy && !c.isolation_level.is_none(py) && c.trace.is_none(py);
    // Autocommit mode: `autocommit=True`, or the legacy mode with
    // `isolation_level=None`.
    let autocommit_dml = c.trace.is_none(py)
        && (c.autocommit.bind(py).is(PyBool::new(py, true))
            || (legacy && c.isolation_level.is_none(py)));
    Some(ConnView {
        engine: c.engine.bind(py).cast::<Engine>().ok()?.clone(),
        txn: c.txn.bind(py).clone(),
        autocommit: c.autocommit.bind(py).clone(),
        legacy_begin,
        autocommit_dml,
        timeout: c.timeout,
    })
}

/// `execute`'s fast path: false (having changed nothing) when the statement
/// must take the Python path.
fn fast_execute(
    slf: &Bound<'_, CursorBase>,
    sql: &Bound<'_, PyAny>,
    params: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let py = slf.py();
    let Ok(text) = sql.cast_exact::<PyString>() else {
        return Ok(false);
    };
    let Some(conn) = usable_connection(slf) else {
        return Ok(false);
    };
    let Some(v) = view(&conn) else {
        return Ok(false);
    };
    let Some(kinds) = KINDS.get(py) else {
        return Ok(false);
    };
    let Some(kind) = kinds.bind(py).get_item(text)? else {
        return Ok(false);
    };
    let dml = match Kind::of(&kind.get_item(0)?)? {
        None => return Ok(false),
        Some(Kind::Dml) => true,
        Some(Kind::Other) => false,
        Some(Kind::Control(control)) => return fast_control(slf, &conn, v, control),
    };
    let Ok(sql) = text.to_cow() else {
        return Ok(false); // a lone surrogate: the Python path reports it
    };
    if sql.contains('\0') {
        return Ok(false);
    }
    v.engine.get().get(py)?.check_sql_length(py, &sql)?;
    let route = if !v.txn.is_none() {
        match v.txn.cast_into::<Txn>() {
            Ok(t) => Route::InTxn(t),
            Err(_) => return Ok(false),
        }
    } else if v.autocommit.is(PyBool::new(py, false)) {
        return Ok(false);
    } else if !dml {
        Route::Auto
    } else if v.legacy_begin {
        Route::Begin
    } else if v.autocommit_dml {
        Route::Write
    } else {
        return Ok(false);
    };
    let sql = sql.into_owned();
    {
        let mut c = slf.borrow_mut();
        c.rows = PyTuple::empty(py).into_any().unbind();
        c.description = py.None();
        c.busy = true; // adapters run user code while parameters bind
    }
    let result = run_route(&conn, v.engine.get(), route, v.timeout, sql, params);
    slf.borrow_mut().busy = false;
    store(slf, &conn, result?)?;
    Ok(true)
}

/// A transaction-control statement the fast path runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Control {
    Begin,
    Commit,
    Rollback,
}

/// The kinds of statement (`_classify`'s first item) the fast path runs.
#[derive(Clone, Copy)]
enum Kind {
    /// `"dml"`: INSERT, UPDATE, DELETE, REPLACE.
    Dml,
    /// `"other"`: any statement without a kind of its own.
    Other,
    /// `"begin"`, `"commit"`, `"rollback"`.
    Control(Control),
}

impl Kind {
    /// The kind `_classify` named, or None for the kinds the Python path
    /// runs. The names are string constants of `litelane.dbapi`, interned
    /// by the interpreter as `intern!` interns them, so identity nearly
    /// always decides; equality is the fallback (a name built at run time).
    fn of(name: &Bound<'_, PyAny>) -> PyResult<Option<Kind>> {
        let py = name.py();
        let kinds = [
            (intern!(py, "dml"), Kind::Dml),
            (intern!(py, "other"), Kind::Other),
            (intern!(py, "begin"), Kind::Control(Control::Begin)),
            (intern!(py, "commit"), Kind::Control(Control::Commit)),
            (intern!(py, "rollback"), Kind::Control(Control::Rollback)),
        ];
        if let Some((_, kind)) = kinds.iter().find(|(n, _)| name.is(n)) {
            return Ok(Some(*kind));
        }
        for (n, kind) in &kinds {
            if name.eq(n)? {
                return Ok(Some(*kind));
            }
        }
        Ok(None)
    }
}

/// `BEGIN`, `COMMIT` and `ROLLBACK` (in any of their spellings) as
/// `Connection._control` runs them, without a trace callback (which must
/// see them) and in the cases that raise nothing before they run: a
/// `BEGIN` with no transaction open outside `autocommit=False`, a
/// `COMMIT` or `ROLLBACK` of the open transaction. False (nothing changed)
/// sends the statement to the Python path.
fn fast_control(
    slf: &Bound<'_, CursorBase>,
    conn: &Bound<'_, ConnectionBase>,
    v: ConnView<'_>,
    control: Control,
) -> PyResult<bool> {
    let py = slf.py();
    if !conn.borrow().trace.is_none(py) {
        return Ok(false);
    }
    let open = match v.txn.cast::<Txn>() {
        Ok(t) => Some(t.clone()),
        Err(_) if v.txn.is_none() => None,
        Err(_) => return Ok(false),
    };
    // The transaction to end, or None to begin one.
    let ending = match (control, open) {
        (Control::Begin, None) if !v.autocommit.is(PyBool::new(py, false)) => None,
        (Control::Commit | Control::Rollback, Some(t)) => Some(t),
        _ => return Ok(false),
    };
    {
        let mut c = slf.borrow_mut();
        c.rows = PyTuple::empty(py).into_any().unbind();
        c.description = py.None();
    }
    match ending {
        None => {
            let t = Bound::new(py, v.engine.get().begin_guarded(py, v.timeout)?)?;
            conn.borrow_mut().txn = t.into_any().unbind();
        }
        Some(t) => {
            {
                let mut c = conn.borrow_mut();
                c.txn = py.None();
                c.savepoint_opened = py.None();
            }
            t.get().finish(py, control == Control::Commit)?;
        }
    }
    let no_result = Outcome {
        rowcount: -1,
        ..Outcome::default()
    };
    store(slf, conn, no_result)?;
    Ok(true)
}

/// Runs the statement where `route` says.
fn run_route(
    conn: &Bound<'_, ConnectionBase>,
    engine: &Engine,
    route: Route<'_>,
    timeout: f64,
    sql: String,
    params: &Bound<'_, PyAny>,
) -> PyResult<Outcome> {
    let py = conn.py();
    let begun_for = matches!(route, Route::Begin).then(|| sql.clone());
    let txn = match route {
        Route::Auto => {
            return engine
                .run_outcome(py, sql, Some(params), true)
                .map(Option::unwrap_or_default)
        }
        Route::Write => return engine.write_outcome(py, sql, Some(params), false),
        Route::InTxn(t) => t,
        Route::Begin => {
            let t = Bound::new(py, engine.begin_guarded(py, timeout)?)?;
            conn.borrow_mut().txn = t.clone().into_any().unbind();
            t
        }
    };
    txn.get()
        .execute_outcome(py, sql, Some(params))
        .or_else(|e| {
            // A failure that ended the transaction ends it for the connection
            // (and one before the statement that began it ran ends it).
            conn.call_method1(intern!(py, "_txn_failed"), (&txn, begun_for))?;
            Err(e)
        })
}

/// Stores a statement's outcome in the cursor and its connection, as
/// `Cursor._set` does.
fn store(
    slf: &Bound<'_, CursorBase>,
    conn: &Bound<'_, ConnectionBase>,
    o: Outcome,
) -> PyResult<()> {
    let py = slf.py();
    let (desc, o) = description(py, o)?;
    let rows = rows_list(py, &o.rows)?;
    let lastrowid = {
        let mut c = conn.borrow_mut();
        if o.wrote {
            c.lastrowid = o.lastrowid.into_pyobject(py)?.into_any().unbind();
        }
        if o.rowcount > 0 {
            c.total_changes += o.rowcount;
        }
        c.lastrowid.clone_ref(py)
    };
    let mut c = slf.borrow_mut();
    c.description = desc.unbind();
    c.rows = rows.into_any().unbind();
    c.pos = 0;
    c.rowcount = o.rowcount;
    c.lastrowid = lastrowid;
    Ok(())
}

/// `fetchone`'s fast path: the next plain row (or None at the end), or
/// `None` (nothing changed) when the Python path must run.
fn fast_fetchone<'py>(slf: &Bound<'py, CursorBase>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = slf.py();
    let Some(conn) = usable_connection(slf) else {
        return Ok(None);
    };
    if !conn
        .borrow()
        .text_factory
        .bind(py)
        .is(py.get_type::<PyString>())
    {
        return Ok(None);
    }
    let mut c = slf.borrow_mut();
    if c.description.is_none(py) || !c.row_factory.is_none(py) || !c.converters.is_none(py) {
        return Ok(None);
    }
    let Ok(rows) = c.rows.bind(py).cast::<PyList>() else {
        return Ok(None);
    };
    if c.pos >= rows.len() {
        return Ok(Some(py.None().into_bound(py)));
    }
    let row = rows.get_item(c.pos)?;
    c.pos += 1;
    Ok(Some(row))
}
