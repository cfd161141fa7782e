//! A statement's outcome as Python gets it: the result tuples, the DB-API
//! description (built once per shape), rows as tuples or dicts.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use litelane::Value;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::{rows_list, to_py};
use crate::exec::Outcome;
use crate::sync::lock;

/// The result of `execute` as the tuple
/// `(columns, rows, rowcount, lastrowid, wrote, decltypes)`.
pub fn outcome_tuple<'py>(py: Python<'py>, o: &Outcome) -> PyResult<Bound<'py, PyTuple>> {
    let columns = match &o.columns {
        Some(c) => PyTuple::new(py, c)?.into_any(),
        None => py.None().into_bound(py),
    };
    (
        columns,
        rows_list(py, &o.rows)?,
        o.rowcount,
        o.lastrowid,
        o.wrote,
        PyTuple::new(py, &o.decltypes)?,
    )
        .into_pyobject(py)
}

/// `cursor.description` per result shape (column names, declared types),
/// built once: a statement run again returns the same tuple. Read and
/// filled with the GIL held; emptied when it grows past 1,024 shapes.
type Shape = (Vec<String>, Vec<Option<String>>);
static DESCRIPTIONS: LazyLock<Mutex<HashMap<Shape, Py<PyTuple>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The DB-API `cursor.description` of a result: one
/// `(name, declared type or None, None, None, None, None, None)` per
/// column; `None` for a statement without result columns. Returns it with
/// the rest of the outcome.
pub fn description<'py>(py: Python<'py>, o: Outcome) -> PyResult<(Bound<'py, PyAny>, Outcome)> {
    let Outcome {
        columns,
        decltypes,
        rows,
        rowcount,
        lastrowid,
        wrote,
    } = o;
    let rest = Outcome {
        columns: None,
        decltypes: Vec::new(),
        rows,
        rowcount,
        lastrowid,
        wrote,
    };
    let Some(columns) = columns else {
        return Ok((py.None().into_bound(py), rest));
    };
    let key = (columns, decltypes);
    let mut cache = lock(&DESCRIPTIONS);
    if let Some(d) = cache.get(&key) {
        return Ok((d.bind(py).clone().into_any(), rest));
    }
    let items = key
        .0
        .iter()
        .zip(&key.1)
        .map(|(name, decl)| {
            (
                name,
                decl,
                py.None(),
                py.None(),
                py.None(),
                py.None(),
                py.None(),
            )
                .into_pyobject(py)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let d = PyTuple::new(py, items)?;
    if cache.len() >= 1024 {
        cache.clear();
    }
    cache.insert(key, d.clone().unbind());
    Ok((d.into_any(), rest))
}

/// The result of a statement as the DB-API layer (`litelane.dbapi`) stores
/// it: `(description, rows, rowcount, lastrowid, wrote)`, the description
/// as `cursor.description` shows it (see `description`).
pub fn dbapi_tuple<'py>(py: Python<'py>, o: Outcome) -> PyResult<Bound<'py, PyTuple>> {
    let (desc, o) = description(py, o)?;
    (
        desc,
        rows_list(py, &o.rows)?,
        o.rowcount,
        o.lastrowid,
        o.wrote,
    )
        .into_pyobject(py)
}

/// `outcome_tuple`, or `dbapi_tuple` when `describe`.
pub fn result_tuple<'py>(
    py: Python<'py>,
    o: Outcome,
    describe: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    if describe {
        dbapi_tuple(py, o)
    } else {
        outcome_tuple(py, &o)
    }
}

/// Rows as tuples, or as dicts keyed by column name.
pub fn rows_out<'py>(py: Python<'py>, o: &Outcome, dicts: bool) -> PyResult<Bound<'py, PyList>> {
    if !dicts {
        return rows_list(py, &o.rows);
    }
    let names: Vec<Bound<'py, PyString>> = o
        .columns
        .iter()
        .flatten()
        .map(|c| PyString::new(py, c))
        .collect();
    let list = PyList::empty(py);
    for r in &o.rows {
        list.append(row_dict(py, &names, r)?)?;
    }
    Ok(list)
}

pub fn row_dict<'py>(
    py: Python<'py>,
    names: &[Bound<'py, PyString>],
    row: &[Value],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (n, v) in names.iter().zip(row) {
        d.set_item(n, to_py(py, v)?)?;
    }
    Ok(d)
}
