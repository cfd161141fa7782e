//! Python values <-> SQLite values.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use litelane::Value;
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMapping, PySequence, PyString, PyTuple,
};

use crate::errors::{exc, Class};

static ADAPT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ADAPT_REGISTERED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Set once an adapter is registered for `int`, `float`, `str`, `bytes` or
/// `bytearray`: from then on values of those types go through their
/// adapters too, as in `sqlite3` (until then they bind directly, the fast path).
static BASE_TYPES_ADAPTED: AtomicBool = AtomicBool::new(false);

/// Called by `register_adapter` for an adapter of a type that binds directly.
#[pyfunction]
pub fn set_base_types_adapted() {
    BASE_TYPES_ADAPTED.store(true, Ordering::Relaxed);
}

/// Converts one Python value. `position` (1-based) names the parameter in
/// errors. Types other than None/int/float/str/bytes/bytearray/memoryview
/// go through `litelane._adapt.adapt` (registered adapters, `__conform__`,
/// the default date/datetime adapters).
pub fn to_value(obj: &Bound<'_, PyAny>, position: usize) -> PyResult<Value> {
    if BASE_TYPES_ADAPTED.load(Ordering::Relaxed) && !obj.is_none() {
        let py = obj.py();
        let registered = ADAPT_REGISTERED.import(py, "litelane._adapt", "adapt_registered")?;
        let adapted = registered.call1((obj,))?;
        if !adapted.is(obj) {
            return to_value_direct(&adapted, position);
        }
    }
    to_value_direct(obj, position)
}

fn to_value_direct(obj: &Bound<'_, PyAny>, position: usize) -> PyResult<Value> {
    match primitive(obj)? {
        Some(v) => Ok(v),
        None => {
            let py = obj.py();
            let adapt = ADAPT.import(py, "litelane._adapt", "adapt")?;
            let adapted = adapt.call1((obj, position))?;
            primitive(&adapted)?.ok_or_else(|| {
                exc(py, Class::ProgrammingError,
                    format!(
                        "Error binding parameter {position}: the adapter returned an unsupported type"
                    ),
                )
            })
        }
    }
}

fn primitive(obj: &Bound<'_, PyAny>) -> PyResult<Option<Value>> {
    if obj.is_none() {
        return Ok(Some(Value::Null));
    }
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return Ok(Some(Value::Text(s.to_cow()?.into_owned())));
    }
    if obj.is_instance_of::<PyInt>() {
        return match obj.extract::<i64>() {
            Ok(i) => Ok(Some(Value::Integer(i))),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Err(
                PyOverflowError::new_err("Python int too large to convert to SQLite INTEGER"),
            ),
            Err(e) => Err(e),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Some(Value::Real(f.value())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Value::Text(s.to_cow()?.into_owned())));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Some(Value::Blob(b.as_bytes().to_vec())));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Some(Value::Blob(b.to_vec())));
    }
    if obj.get_type().name()?.to_cow()? == "memoryview" {
        if !obj.getattr("c_contiguous")?.is_truthy()? {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "memoryview: underlying buffer is not C-contiguous",
            ));
        }
        let bytes = obj.call_method0("tobytes")?;
        return Ok(Some(Value::Blob(
            bytes.cast::<PyBytes>()?.as_bytes().to_vec(),
        )));
    }
    Ok(None)
}

/// Parameters of one statement, converted from Python while the GIL was held.
#[derive(Debug, Clone)]
pub enum Params {
    /// No parameters given (`execute(sql)`).
    Empty,
    /// A sequence: bound by position (`?`, `?NNN`).
    Positional(Vec<Value>),
    /// A mapping: bound by name (`:name`, `@name`, `$name`), key without the
    /// prefix character.
    Named(HashMap<String, Value>),
    /// A mapping that is not exactly a `dict` (a subclass, or any other
    /// mapping): each name is looked up when the statement binds, with the
    /// GIL taken for it, so `__getitem__` and `__missing__` apply as in
    /// `sqlite3`.
    Lookup(std::sync::Arc<pyo3::Py<pyo3::PyAny>>),
}

/// The value bound to parameter `name` (`:name`, `@name`...) from a mapping
/// given as [`Params::Lookup`]: `mapping[name]` without the prefix,
/// converted; `Ok(None)` when the mapping has no such key (`LookupError`).
/// Other exceptions come back as their message.
pub fn lookup_param(
    mapping: &Py<PyAny>,
    name: &str,
    index: usize,
) -> Result<Option<Value>, String> {
    Python::attach(|py| {
        let key = name.get(1..).unwrap_or_default();
        match mapping.bind(py).get_item(key) {
            Ok(v) => to_value(&v, index).map(Some).map_err(|e| e.to_string()),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyLookupError>(py) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    })
}

/// Converts the parameters of one statement: `None`, a sequence (by
/// position) or a mapping (by name).
pub fn to_params(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Params> {
    let Some(obj) = obj else {
        return Ok(Params::Empty);
    };
    if obj.is_none() {
        return Ok(Params::Empty);
    }
    if let Ok(t) = obj.cast_exact::<PyTuple>() {
        let mut v = Vec::with_capacity(t.len());
        for (i, item) in t.iter().enumerate() {
            v.push(to_value(&item, i + 1)?);
        }
        return Ok(Params::Positional(v));
    }
    if let Ok(l) = obj.cast_exact::<PyList>() {
        // By index, as the list's length was when binding began: an adapter
        // that shortens the list then gets IndexError, as in sqlite3.
        let n = l.len();
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            v.push(to_value(&l.get_item(i)?, i + 1)?);
        }
        return Ok(Params::Positional(v));
    }
    if let Ok(d) = obj.cast_exact::<PyDict>() {
        let mut m = HashMap::with_capacity(d.len());
        for (i, (k, v)) in d.iter().enumerate() {
            let key: String = k.extract().map_err(|_| {
                exc(
                    obj.py(),
                    Class::ProgrammingError,
                    "parameter names must be strings",
                )
            })?;
            m.insert(key, to_value(&v, i + 1)?);
        }
        return Ok(Params::Named(m));
    }
    if obj.is_instance_of::<PyDict>() || obj.cast::<PyMapping>().is_ok() {
        // A dict subclass or another mapping: each name the statement uses
        // is looked up when it binds (`__getitem__`, `__missing__`), as
        // `sqlite3` does with `PyObject_GetItem`.
        return Ok(Params::Lookup(std::sync::Arc::new(obj.clone().unbind())));
    }
    if let Ok(seq) = obj.cast::<PySequence>() {
        if !obj.is_instance_of::<PyString>() {
            let mut v = Vec::new();
            for (i, item) in seq.try_iter()?.enumerate() {
                v.push(to_value(&item?, i + 1)?);
            }
            return Ok(Params::Positional(v));
        }
    }
    // Any other object with `__len__` and `__getitem__` is a sequence to
    // `sqlite3` (PySequence_Check), registered with `collections.abc` or not;
    // an error from its `__len__` or `__getitem__` is raised as it is.
    if !obj.is_instance_of::<PyString>() && obj.hasattr("__len__")? && obj.hasattr("__getitem__")? {
        let n = obj.len()?;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            v.push(to_value(&obj.get_item(i)?, i + 1)?);
        }
        return Ok(Params::Positional(v));
    }
    Err(exc(
        obj.py(),
        Class::ProgrammingError,
        "parameters are of unsupported type",
    ))
}

/// One SQLite value as a Python object.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Integer(i) => i.into_pyobject(py)?.into_any(),
        Value::Real(f) => f.into_pyobject(py)?.into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
        Value::Blob(b) => PyBytes::new(py, b).into_any(),
    })
}

/// One row as a tuple.
pub fn row_tuple<'py>(py: Python<'py>, row: &[Value]) -> PyResult<Bound<'py, PyTuple>> {
    let items = row
        .iter()
        .map(|v| to_py(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// Rows as a list of tuples.
pub fn rows_list<'py>(py: Python<'py>, rows: &[Vec<Value>]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for r in rows {
        list.append(row_tuple(py, r)?)?;
    }
    Ok(list)
}

/// Converts an iterable of parameter sets.
pub fn params_seq(seq: &Bound<'_, PyAny>) -> PyResult<Vec<Params>> {
    let mut sets = Vec::new();
    for item in seq.try_iter()? {
        sets.push(to_params(Some(&item?))?);
    }
    Ok(sets)
}
