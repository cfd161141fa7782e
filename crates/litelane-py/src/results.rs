//! A statement's outcome as Python gets it: the result object, the DB-API
//! description (built once per shape), rows as tuples or dicts.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use litelane::Value;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::{rows_list, to_py};
use crate::exec::Outcome;
use crate::sync::lock;

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

/// What one statement (or one `executemany`) did, as the engine's and a
/// transaction's `execute`, `execute_write`, `execute_outside_transaction`
/// and `executemany` return it to Python.
#[pyclass(frozen, get_all, module = "litelane._litelane", name = "Outcome")]
pub struct PyOutcome {
    /// `cursor.description`: one `(name, declared type or None, None,
    /// None, None, None, None)` per result column (see [`description`]);
    /// `None` for a statement without result columns.
    description: Py<PyAny>,
    /// Every row, as tuples.
    rows: Py<PyList>,
    /// Rows changed (summed over an `executemany`); -1 for a statement
    /// that changes none, as in `sqlite3`.
    rowcount: i64,
    /// `last_insert_rowid` after the statement (None: not known).
    lastrowid: Option<i64>,
    /// True when the statement came to the writer.
    wrote: bool,
}

#[pymethods]
impl PyOutcome {
    /// An outcome made in Python (the DB-API layer's "nothing ran" and its
    /// sum of statements run one at a time).
    #[new]
    #[pyo3(signature = (description = None, rows = None, rowcount = -1, lastrowid = None, wrote = false))]
    fn new(
        py: Python<'_>,
        description: Option<Py<PyAny>>,
        rows: Option<Py<PyList>>,
        rowcount: i64,
        lastrowid: Option<i64>,
        wrote: bool,
    ) -> Self {
        PyOutcome {
            description: description.unwrap_or_else(|| py.None()),
            rows: rows.unwrap_or_else(|| PyList::empty(py).unbind()),
            rowcount,
            lastrowid,
            wrote,
        }
    }

    /// The result column names (the description's first items), or None.
    #[getter]
    fn columns<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.description_item(py, 0)
    }

    /// The result columns' declared types (the description's second
    /// items), or None.
    #[getter]
    fn decltypes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.description_item(py, 1)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Outcome(description={}, rows={}, rowcount={}, lastrowid={:?}, wrote={})",
            self.description.bind(py).repr()?,
            self.rows.bind(py).repr()?,
            self.rowcount,
            self.lastrowid,
            if self.wrote { "True" } else { "False" },
        ))
    }
}

impl PyOutcome {
    /// Item `i` of every column's description, or None without columns.
    fn description_item<'py>(
        &self,
        py: Python<'py>,
        i: usize,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let desc = self.description.bind(py);
        if desc.is_none() {
            return Ok(None);
        }
        let items = desc
            .try_iter()?
            .map(|d| d?.get_item(i))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, items).map(Some)
    }
}

/// A statement's outcome as Python gets it (see [`PyOutcome`]).
pub fn outcome<'py>(py: Python<'py>, o: Outcome) -> PyResult<Bound<'py, PyOutcome>> {
    let (description, o) = description(py, o)?;
    Bound::new(
        py,
        PyOutcome {
            description: description.unbind(),
            rows: rows_list(py, &o.rows)?.unbind(),
            rowcount: o.rowcount,
            lastrowid: Some(o.lastrowid),
            wrote: o.wrote,
        },
    )
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
