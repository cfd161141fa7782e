//! User-defined SQL functions, aggregates, window functions and collations,
//! and the authorizer, progress handler and trace callback of
//! `litelane.dbapi` connections.
//!
//! An engine runs a Python connection's statements on several SQLite
//! connections (its writer and every reader of its pool), so each of these
//! must be in force on all of them:
//!
//! * **Functions, aggregates, window functions, collations** are engine-wide
//!   (every Python connection to the file sees them): each is recorded with
//!   `Database::configure` under its SQL name, which installs it on every
//!   SQLite connection of the engine, now and later. A transaction held
//!   across calls (`Txn`) installs those added since it began before each of
//!   its statements.
//! * **Authorizer, progress handler, trace callback** belong to one Python
//!   connection, as in `sqlite3`. Each engine handle keeps its own
//!   ([`Hooks`]); around every statement run for it, [`Hooks::around`]
//!   makes them the current ones on the thread that runs the statement. One
//!   dispatcher per engine, installed on every SQLite connection the first
//!   time a connection sets an authorizer (or a progress handler), calls the
//!   current connection's callback, or allows (continues) when there is
//!   none. Statements prepared under an authorizer are dropped from the
//!   statement cache after they ran, so a statement is never reused under
//!   an authorizer other than the one that authorized it.
//!
//! Callbacks run on the thread that runs the statement, which holds no GIL:
//! each takes it (`Python::attach`). Every wait for the engine in this crate
//! releases the GIL (`py.detach`), so this never deadlocks. Recording a
//! setup (`Database::configure`) never waits for a connection and runs no
//! Python, so it is called with the GIL held.

use std::cell::RefCell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use litelane::rusqlite::ffi;
use litelane::rusqlite::functions::{Aggregate, Context, FunctionFlags, WindowAggregate};
use litelane::rusqlite::hooks::{AuthAction, AuthContext, Authorization, TransactionOperation};
use litelane::rusqlite::types::ValueRef;
use litelane::rusqlite::{Connection, Statement};
use litelane::{Database, Value};
use pyo3::exceptions::{PyBufferError, PyMemoryError, PyOverflowError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyFloat, PyInt, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::errors::{exc, Class};
use crate::sync::lock;

/// `sqlite3.enable_callback_tracebacks`: print (through
/// `sys.unraisablehook`) the exceptions raised in callbacks.
static TRACEBACKS: AtomicBool = AtomicBool::new(false);

/// Turns the printing of callback exceptions on or off (default off).
#[pyfunction]
pub fn enable_callback_tracebacks(flag: bool) {
    TRACEBACKS.store(flag, Ordering::Relaxed);
}

/// An exception raised in a callback: shown through `sys.unraisablehook`
/// when tracebacks are enabled, dropped otherwise (as in `sqlite3`).
fn report(py: Python<'_>, err: PyErr, callable: &Py<PyAny>) {
    if TRACEBACKS.load(Ordering::Relaxed) {
        err.write_unraisable(py, Some(callable.bind(py)));
    }
}

/// An SQLite error with `sqlite3`'s message for a failed callback.
fn failure(message: &str) -> litelane::rusqlite::Error {
    litelane::rusqlite::Error::SqliteFailure(
        ffi::Error::new(ffi::SQLITE_ERROR),
        Some(message.to_string()),
    )
}

/// `string or blob too big`: what `sqlite3` reports for an int result that
/// does not fit in 64 bits.
fn too_big() -> litelane::rusqlite::Error {
    litelane::rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_TOOBIG), None)
}

/// The arguments of a call as a Python tuple (INTEGER -> int, REAL ->
/// float, TEXT -> str, BLOB -> bytes, NULL -> None).
fn args_tuple<'py>(py: Python<'py>, ctx: &Context<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let mut items: Vec<Bound<'py, PyAny>> = Vec::with_capacity(ctx.len());
    for i in 0..ctx.len() {
        items.push(match ctx.get_raw(i) {
            ValueRef::Null => py.None().into_bound(py),
            ValueRef::Integer(v) => v.into_pyobject(py)?.into_any(),
            ValueRef::Real(v) => PyFloat::new(py, v).into_any(),
            ValueRef::Text(t) => PyString::new(py, &String::from_utf8_lossy(t)).into_any(),
            ValueRef::Blob(b) => PyBytes::new(py, b).into_any(),
        });
    }
    PyTuple::new(py, items)
}

/// A callback's return value as an SQLite value: None, int (and bool),
/// float, str, bytes, bytearray, a C-contiguous memoryview. Otherwise the
/// exception `sqlite3` reports for it (an `OverflowError` for an int beyond
/// 64 bits).
fn result_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let py = obj.py();
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if obj.is_instance_of::<PyInt>() {
        return match obj.extract::<i64>() {
            Ok(v) => Ok(Value::Integer(v)),
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => Err(PyOverflowError::new_err(
                "Python int too large to convert to SQLite INTEGER",
            )),
            Err(e) => Err(e),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Real(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::Text(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Blob(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Value::Blob(b.to_vec()));
    }
    let type_name = obj.get_type().name()?.to_cow()?.into_owned();
    if type_name == "memoryview" {
        if !obj.getattr("c_contiguous")?.is_truthy()? {
            return Err(PyBufferError::new_err(
                "memoryview: underlying buffer is not C-contiguous",
            ));
        }
        let bytes = obj.call_method0("tobytes")?;
        return Ok(Value::Blob(bytes.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    Err(exc(
        py,
        Class::ProgrammingError,
        format!("User-defined functions cannot return '{type_name}' values to SQLite"),
    ))
}

/// The outcome of a Python call made for SQLite: the value, or the error
/// `sqlite3` reports: `message` for an exception or an unusable value,
/// "string or blob too big" for an int beyond 64 bits, out of memory for a
/// `MemoryError`. The exception goes to [`report`] with `callable`.
fn outcome(
    py: Python<'_>,
    called: PyResult<Bound<'_, PyAny>>,
    callable: &Py<PyAny>,
    message: &str,
) -> litelane::rusqlite::Result<Value> {
    let e = match called.and_then(|v| result_value(&v)) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let err = if e.is_instance_of::<PyOverflowError>(py) {
        too_big()
    } else if e.is_instance_of::<PyMemoryError>(py) {
        litelane::rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_NOMEM), None)
    } else {
        failure(message)
    };
    report(py, e, callable);
    Err(err)
}

/// Installs something on one SQLite connection (needs only `&Connection`,
/// so a transaction held across calls can install it on the writer too).
type Install = Arc<dyn Fn(&Connection) -> litelane::rusqlite::Result<()> + Send + Sync>;

/// Function flags: UTF-8, innocuous (see docs/python.md: litelane runs with
/// `trusted_schema=OFF`, and `sqlite3` with it on, so a user function must
/// be marked innocuous to be usable in views, triggers, indexes and
/// generated columns as it is with `sqlite3`), and deterministic if asked.
fn flags(deterministic: bool) -> FunctionFlags {
    let mut f = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS;
    if deterministic {
        f |= FunctionFlags::SQLITE_DETERMINISTIC;
    }
    f
}

fn scalar(name: String, narg: i32, func: Arc<Py<PyAny>>, deterministic: bool) -> Install {
    Arc::new(move |conn: &Connection| {
        let func = Arc::clone(&func);
        conn.create_scalar_function(name.as_str(), narg, flags(deterministic), move |ctx| {
            Python::attach(|py| {
                let called = args_tuple(py, ctx).and_then(|args| func.bind(py).call1(args));
                outcome(py, called, &func, "user-defined function raised exception")
            })
        })
    })
}

/// An aggregate (or window function) class: one instance per group, made at
/// the group's first row.
struct PyAggregate {
    class: Arc<Py<PyAny>>,
}

/// The instance of one group (`None` if `__init__` failed).
type Instance = std::panic::AssertUnwindSafe<Py<PyAny>>;

fn method_message(method: &str, what: &str) -> String {
    format!("user-defined aggregate's '{method}' method {what}")
}

impl PyAggregate {
    /// Calls `instance.method(*args)`; a missing method or an exception
    /// gives `sqlite3`'s message for it.
    fn call<'py>(
        &self,
        py: Python<'py>,
        instance: &Py<PyAny>,
        method: &str,
        args: Option<&Context<'_>>,
    ) -> litelane::rusqlite::Result<Bound<'py, PyAny>> {
        let bound = match instance.bind(py).getattr(method) {
            Ok(m) => m,
            Err(e) => {
                report(py, e, &self.class);
                return Err(failure(&method_message(method, "not defined")));
            }
        };
        let called = match args {
            Some(ctx) => args_tuple(py, ctx).and_then(|a| bound.call1(a)),
            None => bound.call0(),
        };
        called.map_err(|e| {
            report(py, e, &self.class);
            failure(&method_message(method, "raised error"))
        })
    }

    fn value_of(&self, instance: &Py<PyAny>, method: &str) -> litelane::rusqlite::Result<Value> {
        Python::attach(|py| {
            let bound = match instance.bind(py).getattr(method) {
                Ok(m) => m,
                Err(e) => {
                    report(py, e, &self.class);
                    return Err(failure(&method_message(method, "not defined")));
                }
            };
            outcome(
                py,
                bound.call0(),
                &self.class,
                &method_message(method, "raised error"),
            )
        })
    }
}

impl Aggregate<Instance, Value> for PyAggregate {
    fn init(&self, _ctx: &mut Context<'_>) -> litelane::rusqlite::Result<Instance> {
        Python::attach(|py| match self.class.bind(py).call0() {
            Ok(i) => Ok(std::panic::AssertUnwindSafe(i.unbind())),
            Err(e) => {
                report(py, e, &self.class);
                Err(failure(&method_message("__init__", "raised error")))
            }
        })
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Instance) -> litelane::rusqlite::Result<()> {
        Python::attach(|py| self.call(py, &acc.0, "step", Some(ctx)).map(|_| ()))
    }

    fn finalize(
        &self,
        _ctx: &mut Context<'_>,
        acc: Option<Instance>,
    ) -> litelane::rusqlite::Result<Value> {
        // No row: `sqlite3` returns NULL without making an instance.
        match acc {
            None => Ok(Value::Null),
            Some(i) => self.value_of(&i.0, "finalize"),
        }
    }
}

impl WindowAggregate<Instance, Value> for PyAggregate {
    fn value(&self, acc: Option<&mut Instance>) -> litelane::rusqlite::Result<Value> {
        match acc {
            None => Ok(Value::Null),
            Some(i) => self.value_of(&i.0, "value"),
        }
    }

    fn inverse(&self, ctx: &mut Context<'_>, acc: &mut Instance) -> litelane::rusqlite::Result<()> {
        Python::attach(|py| self.call(py, &acc.0, "inverse", Some(ctx)).map(|_| ()))
    }
}

fn aggregate(name: String, narg: i32, class: Arc<Py<PyAny>>, window: bool) -> Install {
    Arc::new(move |conn: &Connection| {
        let aggr = PyAggregate {
            class: Arc::clone(&class),
        };
        if window {
            conn.create_window_function(name.as_str(), narg, flags(false), aggr)
        } else {
            conn.create_aggregate_function(name.as_str(), narg, flags(false), aggr)
        }
    })
}

fn removal(name: String, narg: i32) -> Install {
    Arc::new(move |conn: &Connection| conn.remove_function(name.as_str(), narg))
}

fn collation(name: String, func: Option<Arc<Py<PyAny>>>) -> Install {
    Arc::new(move |conn: &Connection| {
        let Some(func) = func.clone() else {
            return conn.remove_collation(name.as_str());
        };
        conn.create_collation(name.as_str(), move |a: &str, b: &str| {
            // An exception or a result that is not an int compares equal.
            Python::attach(|py| match func.bind(py).call1((a, b)) {
                Ok(r) => match (r.lt(0), r.gt(0)) {
                    (Ok(true), _) if r.is_instance_of::<PyInt>() => CmpOrdering::Less,
                    (_, Ok(true)) if r.is_instance_of::<PyInt>() => CmpOrdering::Greater,
                    _ => CmpOrdering::Equal,
                },
                Err(e) => {
                    report(py, e, &func);
                    CmpOrdering::Equal
                }
            })
        })
    })
}

/// What a function or collation was made from: its kind and the Python
/// object. The same again under the same key is not installed again
/// (programs register the same functions on every new connection).
struct Origin {
    kind: &'static str,
    object: Py<PyAny>,
}

/// The newest install of one key, numbered.
struct Logged {
    key: String,
    generation: u64,
    install: Install,
    origin: Option<Origin>,
}

/// What the engine-wide part of this module keeps per engine.
#[derive(Default)]
pub struct EngineState {
    /// The newest install of each key, numbered; a held transaction applies
    /// to the writer those numbered after the one it last applied.
    log: Mutex<Vec<Logged>>,
    generation: AtomicU64,
    /// The authorizer dispatcher is installed (once, then for good).
    authorizer_dispatch: AtomicBool,
    /// Progress handlers per engine handle, and the opcode interval the
    /// installed dispatcher runs at (the smallest asked for).
    progress: Mutex<(BTreeMap<u64, i32>, Option<i32>)>,
}

impl EngineState {
    /// True while no Python function, aggregate or collation was ever
    /// installed on this engine: SQLite then runs no Python code of its own
    /// accord, and running a statement twice is unobservable but for its
    /// changes (`crate::pack`).
    pub fn none_installed(&self) -> bool {
        self.generation() == 0
    }

    /// The number of the newest install.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Applies to `conn` (the writer, inside a held transaction) the
    /// installs numbered after `*seen`.
    pub fn catch_up(&self, conn: &Connection, seen: &mut u64) {
        if self.generation() == *seen {
            return;
        }
        let log = lock(&self.log);
        for entry in log.iter().filter(|e| e.generation > *seen) {
            // It worked on every other connection; a failure here leaves
            // the function missing, and its use says so.
            let _ = (entry.install)(conn);
        }
        *seen = self.generation();
    }

    /// Records `install` for every SQLite connection of `db` under `key`,
    /// unless the same `origin` is already installed under it.
    fn record(
        &self,
        db: &Database,
        key: String,
        origin: Option<Origin>,
        install: Install,
    ) -> litelane::Result<()> {
        let mut log = lock(&self.log);
        let same = |e: &Logged| match (&e.origin, &origin) {
            (Some(a), Some(b)) => a.kind == b.kind && a.object.as_ptr() == b.object.as_ptr(),
            _ => false,
        };
        if log.iter().any(|e| e.key == key && same(e)) {
            return Ok(());
        }
        let setup = Arc::clone(&install);
        db.configure(&key, Arc::new(move |conn: &mut Connection| setup(conn)))?;
        log.retain(|e| e.key != key);
        let generation = self.generation() + 1;
        log.push(Logged {
            key,
            generation,
            install,
            origin,
        });
        self.generation.store(generation, Ordering::Release);
        Ok(())
    }
}

/// True while no authorizer, progress handler or trace callback is in
/// force on this thread (`crate::pack`).
pub fn no_hooks() -> bool {
    current().is_none()
}

/// The key of a function in the engine's configuration: SQLite keeps one
/// function per (case-insensitive name, argument count).
fn function_key(name: &str, narg: i32) -> String {
    format!("python function {}/{narg}", name.to_lowercase())
}

/// `create_function`: `func` None removes the function.
pub fn create_function(
    py: Python<'_>,
    db: &Database,
    state: &EngineState,
    name: String,
    narg: i32,
    func: Option<Py<PyAny>>,
    deterministic: bool,
) -> PyResult<()> {
    let key = function_key(&name, narg);
    let origin = func.as_ref().map(|f| Origin {
        kind: if deterministic {
            "deterministic function"
        } else {
            "function"
        },
        object: f.clone_ref(py),
    });
    let install = match func {
        Some(f) => scalar(name, narg, Arc::new(f), deterministic),
        None => removal(name, narg),
    };
    state
        .record(db, key, origin, install)
        .map_err(|_| exc(py, Class::OperationalError, "Error creating function"))
}

/// `create_aggregate` (`window` false) and `create_window_function`.
pub fn create_aggregate(
    py: Python<'_>,
    db: &Database,
    state: &EngineState,
    name: String,
    narg: i32,
    class: Option<Py<PyAny>>,
    window: bool,
) -> PyResult<()> {
    let key = function_key(&name, narg);
    let origin = class.as_ref().map(|c| Origin {
        kind: if window {
            "window function"
        } else {
            "aggregate"
        },
        object: c.clone_ref(py),
    });
    let install = match class {
        Some(c) => aggregate(name, narg, Arc::new(c), window),
        None => removal(name, narg),
    };
    state
        .record(db, key, origin, install)
        .map_err(|e| match (window, e) {
            // sqlite3: SQLite's text for the code, as a ProgrammingError.
            (true, litelane::Error::Sqlite { code, .. }) => {
                exc(py, Class::ProgrammingError, ffi::code_to_str(code))
            }
            (true, e) => exc(py, Class::ProgrammingError, e.to_string()),
            (false, _) => exc(py, Class::OperationalError, "Error creating aggregate"),
        })
}

/// `create_collation`: `func` None removes the collation.
pub fn create_collation(
    py: Python<'_>,
    db: &Database,
    state: &EngineState,
    name: String,
    func: Option<Py<PyAny>>,
) -> PyResult<()> {
    if let Some(f) = &func {
        if !f.bind(py).is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "parameter must be callable",
            ));
        }
    }
    let key = format!("python collation {}", name.to_lowercase());
    let origin = func.as_ref().map(|f| Origin {
        kind: "collation",
        object: f.clone_ref(py),
    });
    let install = collation(name, func.map(Arc::new));
    state
        .record(db, key, origin, install)
        .map_err(|e| crate::errors::engine(py, e))
}

// --- per-connection hooks ---------------------------------------------------

/// A progress handler and its interval (in SQLite virtual machine opcodes).
struct Progress {
    handler: Arc<Py<PyAny>>,
    every: u64,
    /// Opcodes run since the handler was last called.
    count: AtomicU64,
}

/// The hooks in force for the statement running on this thread.
#[derive(Default)]
struct Current {
    authorizer: Option<Arc<Py<PyAny>>>,
    progress: Option<Progress>,
    trace: Option<Arc<Py<PyAny>>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Current>>> = const { RefCell::new(None) };
}

/// Restores the previous hooks of the thread however the statement ends.
struct Restore(Option<Arc<Current>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let prev = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

fn current() -> Option<Arc<Current>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Numbers engine handles for the engine's table of progress intervals.
static NEXT_HOOKS: AtomicU64 = AtomicU64::new(1);

/// The authorizer, progress handler and trace callback of one engine handle
/// (one `litelane.dbapi` connection).
pub struct Hooks {
    id: u64,
    authorizer: Mutex<Option<Arc<Py<PyAny>>>>,
    progress: Mutex<Option<(Arc<Py<PyAny>>, u64)>>,
    trace: Mutex<Option<Arc<Py<PyAny>>>>,
    /// True when any of them is set (the common case, none, costs one load).
    any: AtomicBool,
    /// Rows changed by the parameter sets an `executemany` of this handle
    /// ran before the set that failed (see [`Hooks::partial`]).
    partial: std::sync::atomic::AtomicI64,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            id: NEXT_HOOKS.fetch_add(1, Ordering::Relaxed),
            authorizer: Mutex::default(),
            progress: Mutex::default(),
            trace: Mutex::default(),
            any: AtomicBool::new(false),
            partial: std::sync::atomic::AtomicI64::new(0),
        }
    }
}

impl Hooks {
    /// The count of rows an `executemany` of this handle changed before the
    /// parameter set that failed, kept for its caller (the DB-API layer adds
    /// them to `total_changes`, as `sqlite3` counts them). Reset at the start
    /// of each `executemany`, written where one fails.
    pub fn partial(&self) -> &std::sync::atomic::AtomicI64 {
        &self.partial
    }

    /// True while no authorizer, progress handler or trace callback is set.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    fn update_any(&self) {
        let any = lock(&self.authorizer).is_some()
            || lock(&self.progress).is_some()
            || lock(&self.trace).is_some();
        self.any.store(any, Ordering::Release);
    }

    /// Shows the garbage collector the callbacks these hooks hold, so that a
    /// connection whose callback refers back to it is collected
    /// (`Engine.__traverse__`). A hook locked elsewhere right now is left
    /// out: the collector must not wait, and a reference it is not shown
    /// only keeps its object alive.
    pub fn visit(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(cb) = self.authorizer.try_lock() {
            visit.call(cb.as_deref())?;
        }
        if let Ok(p) = self.progress.try_lock() {
            visit.call(p.as_ref().map(|(handler, _)| &**handler))?;
        }
        if let Ok(cb) = self.trace.try_lock() {
            visit.call(cb.as_deref())?;
        }
        Ok(())
    }

    /// Drops every callback (`Engine.__clear__`, which breaks the cycle the
    /// collector found).
    pub fn clear(&self) {
        let dropped = (
            lock(&self.authorizer).take(),
            lock(&self.progress).take(),
            lock(&self.trace).take(),
        );
        self.update_any();
        drop(dropped);
    }

    /// Runs `f` (one or more statements on `conn`, on this thread) with
    /// these hooks in force.
    pub fn around<T>(&self, conn: &Connection, f: impl FnOnce() -> T) -> T {
        if !self.any.load(Ordering::Acquire) {
            if current().is_none() {
                return f();
            }
            // Nested inside another handle's statement (a callback that runs
            // SQL): this one has no hooks.
            let _restore = Restore(CURRENT.with(|c| c.borrow_mut().take()));
            return f();
        }
        let now = Current {
            authorizer: lock(&self.authorizer).clone(),
            progress: lock(&self.progress)
                .as_ref()
                .map(|(handler, every)| Progress {
                    handler: Arc::clone(handler),
                    every: *every,
                    count: AtomicU64::new(0),
                }),
            trace: lock(&self.trace).clone(),
        };
        let authorizing = now.authorizer.is_some();
        if authorizing {
            // Cached statements were prepared without this authorizer.
            conn.flush_prepared_statement_cache();
        }
        let prev = CURRENT.with(|c| c.borrow_mut().replace(Arc::new(now)));
        let restore = Restore(prev);
        let out = f();
        drop(restore);
        if authorizing {
            // ...and those prepared now must not serve anyone else.
            conn.flush_prepared_statement_cache();
        }
        out
    }
}

/// Calls the current trace callback, if any, with the statement about to
/// run: its SQL with the bound values, as `sqlite3` shows it. If SQLite
/// cannot expand it (longer than `SQLITE_LIMIT_LENGTH`), the callback gets
/// `sql`, the text as written, and, as in `sqlite3`, a `DataError` is
/// reported as unraisable when callback tracebacks are on.
pub fn trace(stmt: &Statement<'_>, sql: &str) {
    let Some(cur) = current() else { return };
    let Some(cb) = cur.trace.as_ref() else { return };
    let expanded = stmt.expanded_sql();
    Python::attach(|py| {
        let sql = match expanded {
            Some(sql) => sql,
            None => {
                let message = "Expanded SQL string exceeds the maximum string length";
                report(py, exc(py, Class::DataError, message), cb);
                sql.to_string()
            }
        };
        if let Err(e) = cb.bind(py).call1((sql,)) {
            report(py, e, cb);
        }
    });
}

/// `set_trace_callback` for one handle.
pub fn set_trace(hooks: &Hooks, cb: Option<Py<PyAny>>) {
    *lock(&hooks.trace) = cb.map(Arc::new);
    hooks.update_any();
}

/// `sqlite3`'s action code and arguments for an authorizer request.
// Long by nature: one flat arm per authorizer action SQLite defines.
fn action_args<'a>(a: &AuthAction<'a>) -> (i32, Option<&'a str>, Option<&'a str>) {
    use AuthAction::*;
    fn op(o: &TransactionOperation) -> Option<&'static str> {
        match o {
            TransactionOperation::Begin => Some("BEGIN"),
            TransactionOperation::Release => Some("RELEASE"),
            TransactionOperation::Rollback => Some("ROLLBACK"),
            _ => None,
        }
    }
    match *a {
        Unknown { code, arg1, arg2 } => (code, arg1, arg2),
        CreateIndex {
            index_name,
            table_name,
        } => (ffi::SQLITE_CREATE_INDEX, Some(index_name), Some(table_name)),
        CreateTable { table_name } => (ffi::SQLITE_CREATE_TABLE, Some(table_name), None),
        CreateTempIndex {
            index_name,
            table_name,
        } => (
            ffi::SQLITE_CREATE_TEMP_INDEX,
            Some(index_name),
            Some(table_name),
        ),
        CreateTempTable { table_name } => (ffi::SQLITE_CREATE_TEMP_TABLE, Some(table_name), None),
        CreateTempTrigger {
            trigger_name,
            table_name,
        } => (
            ffi::SQLITE_CREATE_TEMP_TRIGGER,
            Some(trigger_name),
            Some(table_name),
        ),
        CreateTempView { view_name } => (ffi::SQLITE_CREATE_TEMP_VIEW, Some(view_name), None),
        CreateTrigger {
            trigger_name,
            table_name,
        } => (
            ffi::SQLITE_CREATE_TRIGGER,
            Some(trigger_name),
            Some(table_name),
        ),
        CreateView { view_name } => (ffi::SQLITE_CREATE_VIEW, Some(view_name), None),
        Delete { table_name } => (ffi::SQLITE_DELETE, Some(table_name), None),
        DropIndex {
            index_name,
            table_name,
        } => (ffi::SQLITE_DROP_INDEX, Some(index_name), Some(table_name)),
        DropTable { table_name } => (ffi::SQLITE_DROP_TABLE, Some(table_name), None),
        DropTempIndex {
            index_name,
            table_name,
        } => (
            ffi::SQLITE_DROP_TEMP_INDEX,
            Some(index_name),
            Some(table_name),
        ),
        DropTempTable { table_name } => (ffi::SQLITE_DROP_TEMP_TABLE, Some(table_name), None),
        DropTempTrigger {
            trigger_name,
            table_name,
        } => (
            ffi::SQLITE_DROP_TEMP_TRIGGER,
            Some(trigger_name),
            Some(table_name),
        ),
        DropTempView { view_name } => (ffi::SQLITE_DROP_TEMP_VIEW, Some(view_name), None),
        DropTrigger {
            trigger_name,
            table_name,
        } => (
            ffi::SQLITE_DROP_TRIGGER,
            Some(trigger_name),
            Some(table_name),
        ),
        DropView { view_name } => (ffi::SQLITE_DROP_VIEW, Some(view_name), None),
        Insert { table_name } => (ffi::SQLITE_INSERT, Some(table_name), None),
        Pragma {
            pragma_name,
            pragma_value,
        } => (ffi::SQLITE_PRAGMA, Some(pragma_name), pragma_value),
        Read {
            table_name,
            column_name,
        } => (ffi::SQLITE_READ, Some(table_name), Some(column_name)),
        Select => (ffi::SQLITE_SELECT, None, None),
        Transaction { ref operation } => (ffi::SQLITE_TRANSACTION, op(operation), None),
        Update {
            table_name,
            column_name,
        } => (ffi::SQLITE_UPDATE, Some(table_name), Some(column_name)),
        Attach { filename } => (ffi::SQLITE_ATTACH, Some(filename), None),
        Detach { database_name } => (ffi::SQLITE_DETACH, Some(database_name), None),
        AlterTable {
            database_name,
            table_name,
        } => (
            ffi::SQLITE_ALTER_TABLE,
            Some(database_name),
            Some(table_name),
        ),
        Reindex { index_name } => (ffi::SQLITE_REINDEX, Some(index_name), None),
        Analyze { table_name } => (ffi::SQLITE_ANALYZE, Some(table_name), None),
        CreateVtable {
            table_name,
            module_name,
        } => (
            ffi::SQLITE_CREATE_VTABLE,
            Some(table_name),
            Some(module_name),
        ),
        DropVtable {
            table_name,
            module_name,
        } => (ffi::SQLITE_DROP_VTABLE, Some(table_name), Some(module_name)),
        Function { function_name } => (ffi::SQLITE_FUNCTION, None, Some(function_name)),
        Savepoint {
            ref operation,
            savepoint_name,
        } => (ffi::SQLITE_SAVEPOINT, op(operation), Some(savepoint_name)),
        Recursive => (ffi::SQLITE_RECURSIVE, None, None),
        // AuthAction is non-exhaustive: a code rusqlite learns later.
        _ => (-1, None, None),
    }
}

/// The engine-wide authorizer: the current handle's callback, or allow.
fn dispatch_authorizer(ctx: AuthContext<'_>) -> Authorization {
    let Some(cur) = current() else {
        return Authorization::Allow;
    };
    let Some(cb) = cur.authorizer.as_ref() else {
        return Authorization::Allow;
    };
    let (code, arg1, arg2) = action_args(&ctx.action);
    Python::attach(|py| {
        match cb
            .bind(py)
            .call1((code, arg1, arg2, ctx.database_name, ctx.accessor))
        {
            // Anything but SQLITE_OK or SQLITE_IGNORE denies.
            Ok(r) => match r.extract::<i64>() {
                Ok(v) if v == i64::from(ffi::SQLITE_OK) => Authorization::Allow,
                Ok(v) if v == i64::from(ffi::SQLITE_IGNORE) => Authorization::Ignore,
                _ => Authorization::Deny,
            },
            Err(e) => {
                report(py, e, cb);
                Authorization::Deny
            }
        }
    })
}

/// `set_authorizer` for one handle; the first one installs the dispatcher on
/// every SQLite connection of the engine.
pub fn set_authorizer(
    py: Python<'_>,
    db: &Database,
    state: &EngineState,
    hooks: &Hooks,
    cb: Option<Py<PyAny>>,
) -> PyResult<()> {
    if cb.is_some() && !state.authorizer_dispatch.load(Ordering::Acquire) {
        db.configure(
            "python authorizer",
            Arc::new(|conn: &mut Connection| conn.authorizer(Some(dispatch_authorizer))),
        )
        .map_err(|e| crate::errors::engine(py, e))?;
        state.authorizer_dispatch.store(true, Ordering::Release);
    }
    *lock(&hooks.authorizer) = cb.map(Arc::new);
    hooks.update_any();
    Ok(())
}

/// The engine-wide progress handler, called every `every` opcodes: counts
/// for the current handle and calls its handler at its own interval. True
/// (a truthy result or an exception) interrupts the statement.
fn dispatch_progress(every: u64) -> bool {
    let Some(cur) = current() else { return false };
    let Some(p) = cur.progress.as_ref() else {
        return false;
    };
    let total = p.count.fetch_add(every, Ordering::Relaxed) + every;
    if total < p.every {
        return false;
    }
    p.count.store(0, Ordering::Relaxed);
    Python::attach(
        |py| match p.handler.bind(py).call0().and_then(|r| r.is_truthy()) {
            Ok(stop) => stop,
            Err(e) => {
                report(py, e, &p.handler);
                true
            }
        },
    )
}

/// `set_progress_handler` for one handle (`handler` None, or `n` < 1,
/// removes it). The dispatcher on every SQLite connection of the engine
/// runs at the smallest interval any handle asked for (none when no handle
/// has a handler).
pub fn set_progress_handler(
    py: Python<'_>,
    db: &Database,
    state: &EngineState,
    hooks: &Hooks,
    handler: Option<Py<PyAny>>,
    n: i32,
) -> PyResult<()> {
    let handler = handler.filter(|_| n >= 1);
    progress_interval(db, state, hooks.id, handler.as_ref().map(|_| n))
        .map_err(|e| crate::errors::engine(py, e))?;
    *lock(&hooks.progress) = handler.map(|h| (Arc::new(h), n as u64));
    hooks.update_any();
    Ok(())
}

/// Records handle `id`'s interval (None: it has no progress handler) and
/// moves the dispatcher to the smallest interval left (removes it when no
/// handle has one).
fn progress_interval(
    db: &Database,
    state: &EngineState,
    id: u64,
    n: Option<i32>,
) -> litelane::Result<()> {
    let mut progress = lock(&state.progress);
    match n {
        Some(n) => progress.0.insert(id, n),
        None => progress.0.remove(&id),
    };
    let want = progress.0.values().min().copied();
    if want != progress.1 {
        let setup: litelane::Setup = match want {
            Some(every) => Arc::new(move |conn: &mut Connection| {
                conn.progress_handler(every, Some(move || dispatch_progress(every as u64)))
            }),
            None => {
                Arc::new(|conn: &mut Connection| conn.progress_handler(0, None::<fn() -> bool>))
            }
        };
        db.configure("python progress handler", setup)?;
        progress.1 = want;
    }
    Ok(())
}

/// Forgets a handle's progress interval when the handle goes.
pub fn forget(db: &Database, state: &EngineState, hooks: &Hooks) {
    // Only the dispatcher's interval depends on it: on failure it stays.
    let _ = progress_interval(db, state, hooks.id, None);
}
