//! `Txn`: a write transaction held across Python calls.
//!
//! The engine's only way to write is `db.write(closure)`: the transaction
//! lives exactly as long as the closure runs. A Python transaction spans many
//! calls (`execute`, `execute`, ..., `commit`), so the closure runs on a
//! worker thread of its own that receives statements over a channel until
//! commit or rollback (the model of sqlx-sqlite's worker). The Python thread
//! sends a command and waits for the reply with the GIL released.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use litelane::{Error, Result};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::convert::to_params;
use crate::engine::{lock, outcome_tuple, params_seq, refuse_control, rows_out, Shared};
use crate::errors::{exc, IntoPy};
use crate::exec::{self, Outcome, Params};

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const ABANDONED: u8 = 2;

const ROLLBACK: &str = "litelane: transaction rolled back by the caller";

enum Cmd {
    Exec(String, Params, Sender<Result<Outcome>>),
    Many(String, Vec<Params>, Sender<Result<Outcome>>),
    Script(String, Sender<Result<Outcome>>),
    Commit(Sender<Result<()>>),
    Rollback(Sender<Result<()>>),
}

/// Decrements the thread's open-transaction count when the transaction ends.
struct OpenMark {
    shared: Arc<Shared>,
    owner: ThreadId,
}

impl Drop for OpenMark {
    fn drop(&mut self) {
        self.shared.mark_closed(self.owner);
    }
}

struct Live {
    tx: Sender<Cmd>,
    _mark: OpenMark,
}

/// A write transaction held across Python calls; statements run on the
/// writer, so the transaction reads its own writes.
#[pyclass(frozen, module = "litelane._litelane")]
pub struct Txn {
    live: Mutex<Option<Live>>,
    state: Arc<AtomicU8>,
    failure: Arc<Mutex<Option<Error>>>,
    timeout: Duration,
    display: String,
}

impl Txn {
    pub fn start(py: Python<'_>, shared: Arc<Shared>, timeout: Duration) -> PyResult<Txn> {
        let (tx, rx) = mpsc::channel::<Cmd>();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let failure = Arc::new(Mutex::new(None));
        let owner = std::thread::current().id();
        shared.mark_open(owner);
        let mark = OpenMark {
            shared: Arc::clone(&shared),
            owner,
        };
        let (st, fail) = (Arc::clone(&state), Arc::clone(&failure));
        let display = shared.display.clone();
        let db = shared.db.clone();
        std::thread::Builder::new()
            .name("litelane-txn".into())
            .spawn(move || worker(db, rx, st, fail))
            .map_err(|e| {
                exc(
                    py,
                    "OperationalError",
                    format!("starting a transaction thread: {e}"),
                )
            })?;
        Ok(Txn {
            live: Mutex::new(Some(Live { tx, _mark: mark })),
            state,
            failure,
            timeout,
            display,
        })
    }

    fn sender(&self, py: Python<'_>) -> PyResult<Sender<Cmd>> {
        lock(&self.live)
            .as_ref()
            .map(|l| l.tx.clone())
            .ok_or_else(|| {
                exc(
                    py,
                    "ProgrammingError",
                    "the transaction is finished (committed or rolled back)",
                )
            })
    }

    /// Sends one statement and waits (GIL released) for its outcome.
    fn call(
        &self,
        py: Python<'_>,
        make: impl FnOnce(Sender<Result<Outcome>>) -> Cmd,
    ) -> PyResult<Outcome> {
        let sender = self.sender(py)?;
        let (rtx, rrx) = mpsc::channel();
        let cmd = make(rtx);
        let res = py.detach(move || {
            if sender.send(cmd).is_err() {
                return Err(self.failed());
            }
            self.wait(&rrx)
        });
        if self.state.load(Ordering::Acquire) == ABANDONED
            || res.as_ref().is_err_and(|_| self.worker_gone())
        {
            lock(&self.live).take();
        }
        res.py_err(py)
    }

    fn worker_gone(&self) -> bool {
        lock(&self.failure).is_some()
    }

    fn failed(&self) -> Error {
        lock(&self.failure)
            .clone()
            .unwrap_or_else(|| Error::user("the transaction's worker thread is gone"))
    }

    /// Waits for a reply. While the transaction is still queued for the
    /// writer, waits at most `timeout`, then gives up its place.
    fn wait<T>(&self, rrx: &Receiver<Result<T>>) -> Result<T> {
        match rrx.recv_timeout(self.timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                if self
                    .state
                    .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Err(Error::user(format!(
                        "database is locked: waited {:.1} s for the writer of {} (another \
                         transaction of this process held it all that time)",
                        self.timeout.as_secs_f64(),
                        self.display
                    )));
                }
                rrx.recv().unwrap_or_else(|_| Err(self.failed()))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.failed()),
        }
    }

    fn finish(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let Some(live) = lock(&self.live).take() else {
            return Ok(());
        };
        // Still waiting in the queue: nothing was done, give up the place.
        if self
            .state
            .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Ok(());
        }
        let (rtx, rrx) = mpsc::channel();
        let cmd = if commit {
            Cmd::Commit(rtx)
        } else {
            Cmd::Rollback(rtx)
        };
        let res = py.detach(move || {
            if live.tx.send(cmd).is_err() {
                return Err(self.failed());
            }
            let r = rrx.recv().unwrap_or_else(|_| Err(self.failed()));
            drop(live);
            r
        });
        res.py_err(py)
    }
}

fn worker(
    db: litelane::Database,
    rx: Receiver<Cmd>,
    state: Arc<AtomicU8>,
    failure: Arc<Mutex<Option<Error>>>,
) {
    let mut end: Option<(bool, Sender<Result<()>>)> = None;
    let rx = &rx;
    let res = db.write(|tx| {
        if state
            .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Error::user(ROLLBACK));
        }
        loop {
            match rx.recv() {
                Ok(Cmd::Exec(sql, params, reply)) => {
                    let _ = reply.send(exec::run(tx, &sql, &params).map(|mut o| {
                        o.wrote = true;
                        o
                    }));
                }
                Ok(Cmd::Many(sql, sets, reply)) => {
                    let _ = reply.send(exec::run_many(tx, &sql, &sets));
                }
                Ok(Cmd::Script(sql, reply)) => {
                    // A failing script undoes only its own statements.
                    let _ = reply.send(
                        tx.write(|tx| exec::run_script(tx, &sql))
                            .map(|_| Outcome::default()),
                    );
                }
                Ok(Cmd::Commit(reply)) => {
                    end = Some((true, reply));
                    return Ok(());
                }
                Ok(Cmd::Rollback(reply)) => {
                    end = Some((false, reply));
                    return Err(Error::user(ROLLBACK));
                }
                Err(_) => return Err(Error::user(ROLLBACK)),
            }
        }
    });
    match end {
        Some((true, reply)) => {
            let _ = reply.send(res);
        }
        Some((false, reply)) => {
            let _ = reply.send(match res {
                Err(Error::User { message }) if message == ROLLBACK => Ok(()),
                Ok(()) => Ok(()),
                Err(e) => Err(e),
            });
        }
        None => {
            let e = match res {
                Err(e) => e,
                Ok(()) => Error::user("the transaction ended"),
            };
            *lock(&failure) = Some(e);
        }
    }
    // `rx` (and the reply senders of any command still queued) drops here,
    // after `failure` is set, so a waiter that sees the channel close finds
    // the reason.
}

#[pymethods]
impl Txn {
    /// Runs one statement in the transaction; returns
    /// `(columns, rows, rowcount, lastrowid, True)`.
    #[pyo3(signature = (sql, params = None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        refuse_control(py, &sql)?;
        let p = to_params(params)?;
        let o = self.call(py, |r| Cmd::Exec(sql, p, r))?;
        outcome_tuple(py, &o)
    }

    /// Runs one statement in the transaction and returns its rows.
    #[pyo3(signature = (sql, params = None, dicts = false))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
        dicts: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        refuse_control(py, &sql)?;
        let p = to_params(params)?;
        let o = self.call(py, |r| Cmd::Exec(sql, p, r))?;
        rows_out(py, &o, dicts)
    }

    /// Runs one statement for every parameter set, in the transaction.
    fn executemany<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        seq: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        refuse_control(py, &sql)?;
        let sets = params_seq(seq)?;
        let o = self.call(py, |r| Cmd::Many(sql, sets, r))?;
        outcome_tuple(py, &o)
    }

    /// Runs a script in the transaction (as a nested savepoint: a failing
    /// script undoes only its own statements).
    fn executescript(&self, py: Python<'_>, sql: String) -> PyResult<()> {
        self.call(py, |r| Cmd::Script(sql, r)).map(|_| ())
    }

    /// Commits; returns after the commit (under `safe`, after the fsync).
    /// A no-op once finished.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.finish(py, true)
    }

    /// Rolls back. A no-op once finished.
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.finish(py, false)
    }

    /// True until commit, rollback, or a failure that ended it.
    #[getter]
    fn active(&self) -> bool {
        lock(&self.live).is_some()
    }
}
