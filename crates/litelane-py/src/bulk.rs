//! `insert_many`: Python rows into the engine's bulk inserter.
//!
//! The inserter runs on a worker thread and holds the writer for one
//! transaction (or one per `commit_every` rows). The calling thread converts
//! `batch` rows at a time with the GIL held and hands each batch over with
//! the GIL released, so other Python threads run while SQLite works.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use litelane::{Error, InsertReport, RowSource, Tx, Value};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::to_value;
use crate::errors::{exc, Class, IntoPy};
use crate::registry::Shared;

/// A batch of rows, or `None`: the caller failed, roll back.
type Batch = Option<Vec<Vec<Value>>>;

/// The rows the inserter pulls: batches from the channel, flattened. The
/// abort message ends the insert with an error, rolling its transaction
/// back.
struct Feed {
    rx: Receiver<Batch>,
    current: std::iter::Peekable<std::vec::IntoIter<Vec<Value>>>,
    aborted: bool,
}

impl Feed {
    /// Receives until a row is at hand, the caller aborts or the channel ends.
    fn fill(&mut self) {
        while !self.aborted && self.current.peek().is_none() {
            match self.rx.recv() {
                Ok(Some(b)) => self.current = b.into_iter().peekable(),
                Ok(None) => self.aborted = true,
                Err(_) => return,
            }
        }
    }
}

impl RowSource for Feed {
    type Row = Vec<Value>;
    fn next_row(&mut self, _tx: &Tx<'_>) -> litelane::Result<Option<Vec<Value>>> {
        self.fill();
        if self.aborted {
            return Err(Error::user("insert_many stopped by its caller"));
        }
        Ok(self.current.next())
    }
    fn is_done(&mut self) -> bool {
        self.fill();
        !self.aborted && self.current.peek().is_none()
    }
}

/// Sends the abort message when dropped without `finish`: however the
/// caller's side ends early, the insert rolls back instead of committing a
/// partial load.
struct Sending {
    tx: Option<SyncSender<Batch>>,
}

impl Sending {
    fn send(&self, py: Python<'_>, rows: Vec<Vec<Value>>) -> bool {
        let tx = self.tx.as_ref().expect("sender");
        py.detach(|| tx.send(Some(rows)).is_ok())
    }
    fn finish(mut self) {
        self.tx = None;
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(None);
        }
    }
}

fn table_columns(py: Python<'_>, sh: &Shared, table: &str) -> PyResult<Vec<String>> {
    let cols = py
        .detach(|| {
            sh.read(|c| {
                let mut stmt = c.prepare("SELECT name FROM pragma_table_info(?1)")?;
                let names = stmt
                    .query_map([table], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(names)
            })
        })
        .py_err(py)?;
    if cols.is_empty() {
        return Err(exc(
            py,
            Class::OperationalError,
            format!("no such table: {table} (insert_many needs an existing table)"),
        ));
    }
    Ok(cols)
}

/// Row `number` (from 1) of `insert_many` as the values of `columns`: a
/// tuple, a dict (a missing key is NULL) or another sequence.
fn convert_row(
    py: Python<'_>,
    row: &Bound<'_, PyAny>,
    columns: &[Bound<'_, PyString>],
    number: u64,
) -> PyResult<Vec<Value>> {
    let width = columns.len();
    let wrong_width = |n: usize| {
        exc(
            py,
            Class::ProgrammingError,
            format!("row {number} has {n} values; {width} columns are being inserted"),
        )
    };
    // The common case first, without any intermediate collection.
    if let Ok(t) = row.cast_exact::<PyTuple>() {
        if t.len() != width {
            return Err(wrong_width(t.len()));
        }
        let mut out = Vec::with_capacity(width);
        for (i, v) in t.iter().enumerate() {
            out.push(to_value(&v, i + 1)?);
        }
        return Ok(out);
    }
    if let Ok(d) = row.cast::<PyDict>() {
        return dict_row(py, d, columns, number);
    }
    if row.is_instance_of::<PyString>() {
        return Err(exc(
            py,
            Class::ProgrammingError,
            format!("row {number}: a string is not a row (expected a tuple or a dict)"),
        ));
    }
    let values: Vec<Bound<'_, PyAny>> = if let Ok(l) = row.cast_exact::<PyList>() {
        l.iter().collect()
    } else {
        row.try_iter()
            .map_err(|_| {
                exc(
                    py,
                    Class::ProgrammingError,
                    format!(
                        "row {number}: expected a tuple or a dict, got {}",
                        row.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ),
                )
            })?
            .collect::<PyResult<_>>()?
    };
    if values.len() != width {
        return Err(wrong_width(values.len()));
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| to_value(v, i + 1))
        .collect()
}

/// A dict row: the values of `columns` (NULL for a key it lacks); a key
/// that is not a column is an error.
fn dict_row(
    py: Python<'_>,
    d: &Bound<'_, PyDict>,
    columns: &[Bound<'_, PyString>],
    number: u64,
) -> PyResult<Vec<Value>> {
    let mut out = Vec::with_capacity(columns.len());
    let mut found = 0;
    for c in columns {
        match d.get_item(c)? {
            Some(v) => {
                found += 1;
                out.push(to_value(&v, out.len() + 1)?);
            }
            None => out.push(Value::Null),
        }
    }
    if found < d.len() {
        let extra = d
            .keys()
            .iter()
            .find(|k| !columns.iter().any(|c| c.as_any().eq(k).unwrap_or(false)))
            .map(|k| k.to_string())
            .unwrap_or_default();
        return Err(exc(
            py,
            Class::ProgrammingError,
            format!("row {number}: key {extra:?} is not one of the columns being inserted"),
        ));
    }
    Ok(out)
}

fn report<'py>(py: Python<'py>, r: &InsertReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("rows", r.rows)?;
    d.set_item("statements", r.statements)?;
    d.set_item("commits", r.commits)?;
    d.set_item("rows_per_statement", r.rows_per_statement)?;
    d.set_item("elapsed", r.elapsed.as_secs_f64())?;
    Ok(d)
}

/// `Connection.insert_many`: inserts `rows` (dicts, or sequences in the
/// order of `columns`) into `table` through the engine's bulk inserter on a
/// thread of its own, `batch` rows per hand-over, committing every
/// `commit_every` rows (default: once). Returns the inserter's report.
pub fn insert_many<'py>(
    py: Python<'py>,
    sh: Arc<Shared>,
    table: String,
    rows: &Bound<'py, PyAny>,
    columns: Option<Vec<String>>,
    batch: usize,
    commit_every: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    sh.check_no_open_txn().py_err(py)?;
    let mut iter = rows.try_iter()?;
    let first = iter.next().transpose()?;
    let columns = match columns {
        Some(c) => c,
        None => columns_of(py, &sh, &table, first.as_ref())?,
    };
    if columns.is_empty() {
        return Err(exc(
            py,
            Class::ProgrammingError,
            "insert_many: no columns to insert",
        ));
    }
    let Some(first) = first else {
        return report(
            py,
            &InsertReport {
                rows: 0,
                statements: 0,
                skipped: 0,
                refused: 0,
                commits: 0,
                rows_per_statement: 0,
                elapsed: Default::default(),
            },
        );
    };
    let names: Vec<Bound<'py, PyString>> = columns.iter().map(|c| PyString::new(py, c)).collect();
    let (tx, rx) = mpsc::sync_channel::<Batch>(4);
    let worker = start_inserter(py, Arc::clone(&sh), table, columns, commit_every, rx)?;
    let sending = Sending { tx: Some(tx) };
    let failure = send_rows(py, first, &mut iter, &names, batch, &sending);
    if failure.is_none() {
        sending.finish();
    } else {
        drop(sending);
    }
    let outcome = py.detach(|| worker.join());
    if let Some(e) = failure {
        return Err(e);
    }
    match outcome {
        Ok(Ok(r)) => report(py, &r),
        Ok(Err(e)) => Err(crate::errors::engine(py, e)),
        Err(_) => Err(crate::errors::engine(
            py,
            Error::user("the insert thread panicked"),
        )),
    }
}

/// The columns when the caller names none: the first row's keys when it
/// is a dict, else the table's columns.
fn columns_of(
    py: Python<'_>,
    sh: &Arc<Shared>,
    table: &str,
    first: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<String>> {
    match first.map(|r| r.cast::<PyDict>()) {
        Some(Ok(d)) => d
            .keys()
            .iter()
            .map(|k| k.extract::<String>())
            .collect::<PyResult<_>>(),
        _ => table_columns(py, sh, table),
    }
}

/// Starts the thread that inserts what `rx` delivers into `table`.
fn start_inserter(
    py: Python<'_>,
    sh: Arc<Shared>,
    table: String,
    columns: Vec<String>,
    commit_every: Option<u64>,
    rx: Receiver<Batch>,
) -> PyResult<std::thread::JoinHandle<litelane::Result<InsertReport>>> {
    std::thread::Builder::new()
        .name("litelane-insert".into())
        .spawn(move || -> litelane::Result<InsertReport> {
            let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
            let mut ins = sh.db.inserter(&table, &cols)?;
            if let Some(n) = commit_every {
                ins = ins.commit_every(n.max(1));
            }
            ins.insert_from(Feed {
                rx,
                current: Vec::new().into_iter().peekable(),
                aborted: false,
            })
        })
        .map_err(|e| {
            exc(
                py,
                Class::OperationalError,
                format!("starting the insert thread: {e}"),
            )
        })
}

/// Converts `first` and the rest of `iter` and sends them in chunks of
/// `batch`; stops early when the inserter stopped (its error is reported
/// by the caller). Returns the error of a row that could not be read or
/// converted (then nothing more is sent).
fn send_rows<'py>(
    py: Python<'py>,
    first: Bound<'py, PyAny>,
    iter: &mut Bound<'py, pyo3::types::PyIterator>,
    names: &[Bound<'py, PyString>],
    batch: usize,
    sending: &Sending,
) -> Option<PyErr> {
    let mut chunk = Vec::with_capacity(batch);
    let mut number = 0u64;
    let mut next = Some(Ok(first));
    while let Some(item) = next {
        number += 1;
        match item.and_then(|r| convert_row(py, &r, names, number)) {
            Ok(v) => chunk.push(v),
            Err(e) => return Some(e),
        }
        if chunk.len() == batch
            && !sending.send(py, std::mem::replace(&mut chunk, Vec::with_capacity(batch)))
        {
            return None; // the inserter stopped: its error is reported below
        }
        next = iter.next();
    }
    if !chunk.is_empty() {
        sending.send(py, chunk);
    }
    None
}
