//! `RowIter`: the rows of one read-only statement, streamed from a reader
//! thread in batches.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use litelane::{Error, Value};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{row_tuple, Params};
use crate::errors::{exc, Class};
use crate::exec;
use crate::functions::Hooks;
use crate::registry::Shared;
use crate::results::row_dict;
use crate::sync::lock;

enum Msg {
    Columns(Vec<String>),
    Rows(Vec<Vec<Value>>),
    Failed(Error),
}

/// Rows of one read-only statement, streamed from a reader thread.
#[pyclass(module = "litelane._litelane")]
pub struct RowIter {
    rx: Mutex<Option<Receiver<Msg>>>,
    buf: VecDeque<Vec<Value>>,
    names: Option<Vec<Py<PyString>>>,
    dicts: bool,
}

impl RowIter {
    pub(crate) fn start(
        sh: Arc<Shared>,
        hooks: Arc<Hooks>,
        sql: String,
        params: Params,
        dicts: bool,
        batch: usize,
    ) -> PyResult<RowIter> {
        let (tx, rx) = mpsc::sync_channel::<Msg>(2);
        let spawned = std::thread::Builder::new()
            .name("litelane-iter".into())
            .spawn(move || stream(sh, hooks, sql, params, batch, tx));
        if let Err(e) = spawned {
            return Python::attach(|py| {
                Err(exc(
                    py,
                    Class::OperationalError,
                    format!("starting a reader thread: {e}"),
                ))
            });
        }
        Ok(RowIter {
            rx: Mutex::new(Some(rx)),
            buf: VecDeque::new(),
            names: None,
            dicts,
        })
    }
}

fn names_of(stmt: &litelane::rusqlite::Statement<'_>) -> Vec<String> {
    stmt.column_names().map(str::to_owned).collect()
}

fn stream(
    sh: Arc<Shared>,
    hooks: Arc<Hooks>,
    sql: String,
    params: Params,
    batch: usize,
    tx: SyncSender<Msg>,
) {
    let res = sh.db.read(|conn| {
        hooks.around(conn, || {
            let mut stmt = conn.prepare(&sql).map_err(|e| Error::from_sqlite(e, ""))?;
            if !stmt.readonly() {
                return Err(Error::InvalidInput {
                    message: "iterate() streams read-only statements; run writes with execute()"
                        .into(),
                });
            }
            exec::bind_params(&mut stmt, &params)?;
            crate::functions::trace(&stmt, &sql);
            let mut rows = stmt.raw_query();
            let mut chunk = Vec::with_capacity(batch);
            // The names are sent after the first step, when a statement whose
            // schema changed since it was prepared has been re-prepared.
            let mut named = false;
            while let Some(r) = rows.next()? {
                if !named {
                    named = true;
                    if tx.send(Msg::Columns(names_of(r.as_ref()))).is_err() {
                        return Ok(());
                    }
                }
                let n = r.as_ref().column_count();
                let mut row = Vec::with_capacity(n);
                for i in 0..n {
                    row.push(exec::value_at(r, i)?);
                }
                chunk.push(row);
                if chunk.len() == batch && tx.send(Msg::Rows(std::mem::take(&mut chunk))).is_err() {
                    return Ok(()); // the iterator was dropped
                }
            }
            drop(rows);
            if !named && tx.send(Msg::Columns(names_of(&stmt))).is_err() {
                return Ok(());
            }
            if !chunk.is_empty() {
                let _ = tx.send(Msg::Rows(chunk));
            }
            Ok(())
        })
    });
    if let Err(e) = res {
        let _ = tx.send(Msg::Failed(e));
    }
}

#[pymethods]
impl RowIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            if let Some(row) = self.buf.pop_front() {
                return Ok(Some(if self.dicts {
                    let names: Vec<Bound<'py, PyString>> = self
                        .names
                        .iter()
                        .flatten()
                        .map(|n| n.bind(py).clone())
                        .collect();
                    row_dict(py, &names, &row)?.into_any()
                } else {
                    row_tuple(py, &row)?.into_any()
                }));
            }
            let Some(rx) = lock(&self.rx).take() else {
                return Ok(None);
            };
            let (rx, msg) = py.detach(move || {
                let msg = rx.recv();
                (rx, msg)
            });
            *lock(&self.rx) = Some(rx);
            match msg {
                Ok(Msg::Columns(c)) => {
                    self.names = Some(c.iter().map(|s| PyString::new(py, s).unbind()).collect());
                }
                Ok(Msg::Rows(rows)) => self.buf.extend(rows),
                Ok(Msg::Failed(e)) => {
                    lock(&self.rx).take();
                    return Err(crate::errors::engine(py, e));
                }
                Err(_) => {
                    lock(&self.rx).take();
                    return Ok(None);
                }
            }
        }
    }

    /// Result column names (available once the first row, or the end, was read).
    #[getter]
    fn columns(&self, py: Python<'_>) -> Option<Vec<Py<PyString>>> {
        self.names
            .as_ref()
            .map(|v| v.iter().map(|n| n.clone_ref(py)).collect())
    }

    /// Stops the stream and frees the reader.
    fn close(&mut self) {
        lock(&self.rx).take();
        self.buf.clear();
    }
}
