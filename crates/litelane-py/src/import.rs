//! `Database.import_file`: the `litelane-import` library called in this
//! process, on the engine the `Database` holds, with the GIL released. The
//! keyword options become its `ImportOptions` directly (each the field of
//! the same name; `null` and `type` are `nulls` and `types_for`); the
//! optional `progress` and `on_reject` callables are its `Progress`, and
//! Ctrl-C stops it as it stops the command.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use litelane_import::{ImportOptions, Progress, Rejected};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::errors::{engine, exc, Class};
use crate::registry::Shared;

/// The keyword options `import_file` takes (besides the callbacks).
const OPTIONS: &[&str] = &[
    "format",
    "no_header",
    "header",
    "delimiter",
    "plan",
    "type",
    "null",
    "no_default_nulls",
    "types",
    "strict",
    "pk",
    "on_conflict",
    "alter",
    "source_column",
    "mode",
    "profile",
    "commit_every",
    "resume",
    "rejects",
    "rejects_table",
    "max_rejects",
    "quiet",
    "json",
];

/// Imports `path` into `table` of the database `sh` holds open, with the
/// keyword `options`; `progress(rows, bytes_read, total_bytes)` is called
/// at most every [`PROGRESS_EVERY`] and once at the end of each file,
/// `on_reject(line, record, reason, raw)` for each rejected record. Returns
/// the summary as a dict (the keys of `litelane import --json`). The GIL is
/// released while the import runs.
pub fn import_file<'py>(
    py: Python<'py>,
    sh: Arc<Shared>,
    path: String,
    table: String,
    options: Option<Bound<'py, PyDict>>,
    progress: Option<Py<PyAny>>,
    on_reject: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let db_path = sh
        .db
        .path()
        .ok_or_else(|| {
            exc(
                py,
                Class::NotSupportedError,
                "import_file needs a database file, not an in-memory database",
            )
        })?
        .to_path_buf();
    let mut opts = ImportOptions::new(path.clone(), db_path);
    opts.table = Some(table);
    if let Some(d) = &options {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            set_option(py, &mut opts, &key, &v)?;
        }
    }
    sh.check_no_open_txn().map_err(|e| engine(py, e))?;
    let caller = Caller::new(progress, on_reject);
    let (result, caller) = run_interruptible(py, &sh.db, opts, caller)?;
    if let Some(e) = caller.failed {
        return Err(e);
    }
    match result {
        Ok(o) => match &o.summary {
            Some(s) => to_py(py, &serde_json::to_value(s).unwrap_or_default()),
            None => Ok(py.None().into_bound(py)),
        },
        Err(e) => Err(import_error(py, &path, e)),
    }
}

/// Sets option `key` to `value`: `False`/`None` leave it unset; a flag
/// option takes `True`; another takes its value as text (`str(value)`, as
/// the command would read it), `null` and `type` a text or a list of them.
fn set_option(
    py: Python<'_>,
    o: &mut ImportOptions,
    key: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let bad = |why: String| exc(py, Class::ProgrammingError, format!("import_file: {why}"));
    if !OPTIONS.contains(&key) {
        return Err(bad(format!(
            "unknown option {key:?} (`litelane import` has no --{}); the options are {}",
            key.replace('_', "-"),
            OPTIONS.join(", ")
        )));
    }
    if value.is_none() || value.is(&*pyo3::types::PyBool::new(py, false)) {
        return Ok(());
    }
    let is_true = value.is(&*pyo3::types::PyBool::new(py, true));
    let flag = |field: &mut bool| -> PyResult<()> {
        if !is_true {
            return Err(bad(format!("{key} takes True or False")));
        }
        *field = true;
        Ok(())
    };
    let texts = || -> PyResult<Vec<String>> {
        if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
            value
                .try_iter()?
                .map(|v| Ok(v?.str()?.to_string()))
                .collect()
        } else {
            Ok(vec![value.str()?.to_string()])
        }
    };
    let text = || -> PyResult<String> {
        if is_true {
            return Err(bad(format!("{key} takes a value, not True")));
        }
        Ok(value.str()?.to_string())
    };
    let parse = |t: String| -> PyResult<u64> {
        t.parse::<u64>()
            .map_err(|_| bad(format!("{key} takes a whole number >= 0, not {t:?}")))
    };
    fn named<T: std::str::FromStr<Err = String>>(py: Python<'_>, t: String) -> PyResult<T> {
        t.parse()
            .map_err(|e: String| exc(py, Class::ProgrammingError, format!("import_file: {e}")))
    }
    match key {
        "no_header" => flag(&mut o.no_header)?,
        "header" => flag(&mut o.header)?,
        "no_default_nulls" => flag(&mut o.no_default_nulls)?,
        "strict" => flag(&mut o.strict)?,
        "alter" => flag(&mut o.alter)?,
        "resume" => flag(&mut o.resume)?,
        // The command's output switches: nothing is printed here anyway.
        "quiet" | "json" => {}
        "format" => o.format = Some(named(py, text()?)?),
        "types" => o.types = Some(named(py, text()?)?),
        "mode" => o.mode = Some(named(py, text()?)?),
        "on_conflict" => o.on_conflict = Some(named(py, text()?)?),
        // The engine's own profile applies (`run_into`); the name is checked.
        "profile" => {
            text()?
                .parse::<litelane::Profile>()
                .map_err(|e| bad(e.to_string()))?;
        }
        "delimiter" => {
            let t = text()?;
            let mut chars = t.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => o.delimiter = Some(c),
                _ => return Err(bad(format!("delimiter takes one character, not {t:?}"))),
            }
        }
        "plan" => o.plan = Some(text()?.into()),
        "rejects" => o.rejects = Some(text()?.into()),
        "pk" => o.pk = Some(text()?),
        "source_column" => o.source_column = Some(text()?),
        "rejects_table" => o.rejects_table = Some(text()?),
        "commit_every" => o.commit_every = Some(parse(text()?)?),
        "max_rejects" => o.max_rejects = Some(parse(text()?)?),
        "null" => o.nulls.extend(texts()?),
        "type" => o.types_for.extend(texts()?),
        _ => unreachable!("every name of OPTIONS is matched"),
    }
    Ok(())
}

/// How often `progress` is called at most while rows flow: 100 ms.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// The import's [`Progress`] in Python: the caller's callables, called
/// with the GIL taken, and the stop flag the caller's thread sets on a
/// signal. A callable that raises stops the import; its exception is kept
/// and raised once the import returns.
struct Caller {
    progress: Option<Py<PyAny>>,
    on_reject: Option<Py<PyAny>>,
    stop: Arc<AtomicBool>,
    total: Option<u64>,
    last: Option<Instant>,
    latest: (u64, u64),
    failed: Option<PyErr>,
}

impl Caller {
    fn new(progress: Option<Py<PyAny>>, on_reject: Option<Py<PyAny>>) -> Caller {
        Caller {
            progress,
            on_reject,
            stop: Arc::new(AtomicBool::new(false)),
            total: None,
            last: None,
            latest: (0, 0),
            failed: None,
        }
    }

    /// Calls `progress` with the latest counts.
    fn tell(&mut self) {
        let Some(cb) = &self.progress else { return };
        let (rows, bytes) = self.latest;
        let total = self.total;
        let r = Python::attach(|py| cb.call1(py, (rows, bytes, total)).map(drop));
        self.keep(r);
    }

    /// Keeps the first exception a callable raised, and stops the import.
    fn keep(&mut self, r: PyResult<()>) {
        if let Err(e) = r {
            if self.failed.is_none() {
                self.failed = Some(e);
            }
            self.stop.store(true, Ordering::SeqCst);
        }
    }
}

impl Progress for Caller {
    fn start(&mut self, total_bytes: Option<u64>) {
        self.total = total_bytes;
        self.latest = (0, 0);
        // The first batch is told at once.
        self.last = None;
    }

    fn rows(&mut self, rows: u64, bytes_read: u64) {
        self.latest = (rows, bytes_read);
        if self.progress.is_some() && self.last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
            self.last = Some(Instant::now());
            self.tell();
        }
    }

    fn finish(&mut self) {
        if !self.stop.load(Ordering::SeqCst) {
            self.tell();
        }
    }

    fn rejected(&mut self, r: &Rejected<'_>) {
        let Some(cb) = &self.on_reject else { return };
        let res = Python::attach(|py| {
            let raw = PyBytes::new(py, r.raw);
            cb.call1(py, (r.line, r.record, r.reason, raw)).map(drop)
        });
        self.keep(res);
    }

    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// How often the caller's thread looks for a signal (Ctrl-C) while an
/// import runs: 50 ms.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

type Ran = (
    Result<litelane_import::Outcome, litelane_import::Error>,
    Caller,
);

/// Runs the import on a thread of its own while the caller's thread, GIL
/// released, looks every [`SIGNAL_CHECK`] for a signal Python must handle.
/// When one raises (`KeyboardInterrupt`), the import is told to stop (as
/// the command's Ctrl-C does: what is committed stays, the batch under way
/// rolls back), it is waited for, and the exception is raised.
fn run_interruptible(
    py: Python<'_>,
    db: &litelane::Database,
    opts: ImportOptions,
    mut caller: Caller,
) -> PyResult<Ran> {
    let stop = Arc::clone(&caller.stop);
    let (done, mut outcome) = mpsc::channel::<Ran>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let result = litelane_import::run_into(db, opts, &mut caller);
            let _ = done.send((result, caller));
        });
        loop {
            // The receiver goes into the GIL-free closure and back.
            let got;
            (outcome, got) = py.detach(move || {
                let got = outcome.recv_timeout(SIGNAL_CHECK);
                (outcome, got)
            });
            match got {
                Ok(o) => return Ok(o),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        stop.store(true, Ordering::SeqCst);
                        py.detach(move || drop(outcome.recv()));
                        return Err(signal);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(exc(
                        py,
                        Class::OperationalError,
                        "the import thread panicked",
                    ))
                }
            }
        }
    })
}

/// A summary (as serde gives it) as Python objects: dicts keep the order
/// of the keys.
fn to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// An import error as a Python exception: an engine error as the engine's
/// class with `sqlite_errorcode`/`sqlite_errorname`, anything else an
/// `OperationalError`; the message names the file and the whole cause.
fn import_error(py: Python<'_>, path: &str, e: litelane_import::Error) -> PyErr {
    let message = format!("litelane import of {path} failed: {e}");
    match e.engine() {
        Some(inner) => {
            let err = engine(py, inner.clone());
            let value = err.value(py);
            let _ = value.setattr("args", (message,));
            err
        }
        None => exc(py, Class::OperationalError, message),
    }
}
