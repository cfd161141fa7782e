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
use std::time::{Duration, Instant};

use litelane::{Error, Result};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::{params_seq, to_params, Params};
use crate::errors::{exc, Class, IntoPy};
use crate::exec::{self, Outcome};
use crate::functions::Hooks;
use crate::registry::Shared;
use crate::results::{outcome, rows_out, PyOutcome};
use crate::sync::{detach_waiting, lock};

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const ABANDONED: u8 = 2;

const ROLLBACK: &str = "litelane: transaction rolled back by the caller";
const STATEMENT_ENDED: &str =
    "the transaction was rolled back by a statement of it (ON CONFLICT ROLLBACK, RAISE(ROLLBACK))";

/// What the Python side gets back from a statement.
#[derive(Clone, Copy)]
enum Shape {
    /// `(columns, rows, rowcount, lastrowid, wrote, decltypes)`.
    Outcome,
    /// The rows: tuples, or dicts when true.
    Rows(bool),
    /// Nothing (`None`).
    Unit,
}

/// Where a result goes: a channel the caller waits on (GIL released), or a
/// Python callable `callback(ok, value)` called on the worker thread (asyncio:
/// it schedules the awaiting future's result on its loop, one hop).
enum Reply<T> {
    Chan(Sender<Result<T>>),
    Call(Py<PyAny>, Shape),
}

/// A statement of a transaction, before it knows where its outcome goes.
enum Stmt {
    Exec(String, Params),
    Many(String, Vec<Params>),
    Script(String),
}

impl Stmt {
    fn into_cmd(self, reply: Reply<Outcome>) -> Cmd {
        match self {
            Stmt::Exec(sql, p) => Cmd::Exec(sql, p, reply),
            Stmt::Many(sql, sets) => Cmd::Many(sql, sets, reply),
            Stmt::Script(sql) => Cmd::Script(sql, reply),
        }
    }

    /// Runs it in a transaction held on this thread, with the connection's
    /// hooks in force (functions configured meanwhile are caught up by the
    /// engine before each statement).
    fn run_held(
        self,
        w: &mut litelane::HeldWrite,
        hooks: &Hooks,
        may_pack: bool,
    ) -> Result<Outcome> {
        match self {
            Stmt::Exec(sql, p) => w
                .run(|tx| hooks.around(tx, || exec::run(tx, &sql, &p)))
                .map(|mut o| {
                    o.wrote = true;
                    o
                }),
            Stmt::Many(sql, sets) => w.run(|tx| {
                hooks.around(tx, || {
                    exec::run_many(tx, &sql, &sets, may_pack, hooks.partial())
                })
            }),
            // A failing script undoes only its own statements.
            Stmt::Script(sql) => w
                .run(|tx| tx.write(|tx| hooks.around(tx, || exec::run_script(tx, &sql))))
                .map(|()| Outcome::default()),
        }
    }
}

enum Cmd {
    Exec(String, Params, Reply<Outcome>),
    Many(String, Vec<Params>, Reply<Outcome>),
    Script(String, Reply<Outcome>),
    Commit(Reply<()>),
    Rollback(Reply<()>),
    /// Whether the statement prepares on the transaction's connection
    /// ([`Txn::prepares`]).
    Prepares(String, Sender<Result<bool>>),
}

/// Parameter sets converted per chunk of a pipelined `executemany`.
const CHUNK: usize = 4096;

/// The next [`CHUNK`] parameter sets of `sets`, converted (fewer at the
/// end), and the error that stopped the conversion, if one did: the sets
/// before it are still returned, to run.
fn next_chunk(sets: &mut Bound<'_, pyo3::types::PyIterator>) -> (Vec<Params>, PyResult<()>) {
    let mut chunk = Vec::with_capacity(CHUNK);
    for item in sets.by_ref().take(CHUNK) {
        match item.and_then(|i| to_params(Some(&i))) {
            Ok(p) => chunk.push(p),
            Err(e) => return (chunk, Err(e)),
        }
    }
    (chunk, Ok(()))
}

/// How long a thread waiting for the other side of a transaction (the
/// caller for a result, the worker for the next statement) spins on the
/// channel before it yields, in microseconds (`LITELANE_TXN_SPIN_US`).
/// The other side, running on another CPU, usually answers within it.
const SPIN_US: u64 = 10;

/// How many times it then yields its CPU before it sleeps on the channel
/// (`LITELANE_TXN_YIELDS`): enough for another side queued on this CPU to
/// run, few enough that a niced background job given the CPU by each
/// yield (for a whole time slice) costs little. A statement's round trip
/// is then one handover instead of two sleeps and wake-ups; the measured
/// choice is in docs/python.md, "Report 002's script".
const YIELDS: u32 = 8;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The spin and yields for [`recv_soon`]: no spin on a machine with one
/// CPU, where the other side cannot run while this thread spins.
fn patience() -> (Duration, u32) {
    static P: std::sync::OnceLock<(Duration, u32)> = std::sync::OnceLock::new();
    *P.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let us = if cpus > 1 {
            env_or("LITELANE_TXN_SPIN_US", SPIN_US)
        } else {
            0
        };
        (
            Duration::from_micros(us),
            env_or("LITELANE_TXN_YIELDS", YIELDS),
        )
    })
}

/// Polls `rx`, spinning then yielding ([`patience`]); `None` when nothing
/// came (or the sender is gone: the blocking receive reports that).
fn recv_soon<T>(rx: &Receiver<T>) -> Option<T> {
    let (spin, yields) = patience();
    let poll = || match rx.try_recv() {
        Ok(v) => Some(Some(v)),
        Err(mpsc::TryRecvError::Disconnected) => Some(None),
        Err(mpsc::TryRecvError::Empty) => None,
    };
    if !spin.is_zero() {
        let start = Instant::now();
        loop {
            for _ in 0..32 {
                if let Some(got) = poll() {
                    return got;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= spin {
                break;
            }
        }
    }
    for _ in 0..yields {
        if let Some(got) = poll() {
            return got;
        }
        std::thread::yield_now();
    }
    poll().flatten()
}

/// Calls `callback(ok, value)` with the GIL.
fn call_back(
    cb: Py<PyAny>,
    make: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>>,
) {
    Python::attach(|py| {
        let (ok, value) = match make(py) {
            Ok(v) => (true, v),
            Err(e) => (false, e.into_value(py).into_bound(py).into_any()),
        };
        if let Err(e) = cb.call1(py, (ok, value)) {
            e.write_unraisable(py, None);
        }
    });
}

fn deliver_outcome(reply: Reply<Outcome>, r: Result<Outcome>) {
    match reply {
        Reply::Chan(tx) => {
            let _ = tx.send(r);
        }
        Reply::Call(cb, shape) => call_back(cb, move |py| {
            let o = r.map_err(|e| crate::errors::engine(py, e))?;
            match shape {
                Shape::Outcome => outcome(py, o).map(Bound::into_any),
                Shape::Rows(dicts) => rows_out(py, &o, dicts).map(Bound::into_any),
                Shape::Unit => Ok(py.None().into_bound(py)),
            }
        }),
    }
}

fn deliver_unit(reply: Reply<()>, r: Result<()>) {
    match reply {
        Reply::Chan(tx) => {
            let _ = tx.send(r);
        }
        Reply::Call(cb, _) => call_back(cb, move |py| {
            r.map_err(|e| crate::errors::engine(py, e))?;
            Ok(py.None().into_bound(py))
        }),
    }
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
    _mark: Option<OpenMark>,
}

/// A transaction run on its caller's thread: the writer was free when it
/// began, so each statement runs right there, with no hand-over.
struct Held {
    write: litelane::HeldWrite,
    hooks: Arc<Hooks>,
    _mark: OpenMark,
}

/// A write transaction held across Python calls; statements run on the
/// writer, so the transaction reads its own writes.
#[pyclass(frozen, module = "litelane._litelane")]
pub struct Txn {
    live: Mutex<Option<Live>>,
    /// Set instead of `live` when the transaction runs on its caller's thread.
    held: Mutex<Option<Held>>,
    held_mode: bool,
    state: Arc<AtomicU8>,
    failure: Arc<Mutex<Option<Error>>>,
    timeout: Duration,
    shared: Arc<Shared>,
    owner: ThreadId,
    /// The handle's hooks, which also keep an `executemany`'s partial count.
    hooks: Arc<Hooks>,
}

impl Drop for Txn {
    fn drop(&mut self) {
        if self.shared.stale() {
            // A transaction of the parent, dropped in a forked child: its
            // thread and the writer's state belong to the parent; touching
            // them (a ROLLBACK, a lock) could hang or harm the parent.
            let live = self.live.get_mut().map(Option::take).unwrap_or(None);
            let held = self.held.get_mut().map(Option::take).unwrap_or(None);
            std::mem::forget((live, held));
        }
    }
}

/// How often a transaction whose `timeout` has passed checks again whether
/// another transaction of this process is in the way (10 ms).
const RECHECK: Duration = Duration::from_millis(10);

impl Txn {
    pub fn start(
        py: Python<'_>,
        shared: Arc<Shared>,
        timeout: Duration,
        guard: bool,
        hooks: Arc<Hooks>,
    ) -> PyResult<Txn> {
        let owner = std::thread::current().id();
        if guard {
            // The writer is free: run on this thread. Otherwise queue on a
            // worker thread, which waits at most `timeout` and may join a
            // group commit.
            let db = shared.db.clone();
            let held = detach_waiting(py, Some(timeout), || {
                db.try_hold_writer("python transaction")
            })?;
            if let Some(write) = held {
                shared.mark_open(owner);
                let mark = OpenMark {
                    shared: Arc::clone(&shared),
                    owner,
                };
                return Ok(Txn {
                    live: Mutex::new(None),
                    held: Mutex::new(Some(Held {
                        write,
                        hooks: Arc::clone(&hooks),
                        _mark: mark,
                    })),
                    held_mode: true,
                    state: Arc::new(AtomicU8::new(RUNNING)),
                    failure: Arc::new(Mutex::new(None)),
                    timeout,
                    shared,
                    owner,
                    hooks: Arc::clone(&hooks),
                });
            }
        }
        // Queued on a worker thread.
        let (tx, rx) = mpsc::channel::<Cmd>();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let failure = Arc::new(Mutex::new(None));
        let mark = guard.then(|| {
            shared.mark_open(owner);
            OpenMark {
                shared: Arc::clone(&shared),
                owner,
            }
        });
        let (st, fail) = (Arc::clone(&state), Arc::clone(&failure));
        // The writer has every function installed before this point by the
        // time the transaction's turn starts; those installed later are
        // applied by the worker before each statement.
        let seen = shared.funcs.generation();
        let sh = Arc::clone(&shared);
        let hooks_for_txn = Arc::clone(&hooks);
        crate::workers::run(move || {
            // Its wait for another process's turn ends by the
            // transaction's timeout, as the caller's own would.
            litelane::with_process_wait(Some(timeout), None, || {
                worker(sh, hooks, seen, rx, st, fail)
            })
        })
        .map_err(|e| {
            exc(
                py,
                Class::OperationalError,
                format!("starting a transaction thread: {e}"),
            )
        })?;
        Ok(Txn {
            live: Mutex::new(Some(Live { tx, _mark: mark })),
            held: Mutex::new(None),
            held_mode: false,
            state,
            failure,
            timeout,
            shared,
            owner,
            hooks: hooks_for_txn,
        })
    }

    fn sender(&self, py: Python<'_>) -> PyResult<Sender<Cmd>> {
        lock(&self.live)
            .as_ref()
            .map(|l| l.tx.clone())
            .ok_or_else(|| {
                exc(
                    py,
                    Class::ProgrammingError,
                    "the transaction is finished (committed or rolled back)",
                )
            })
    }

    /// Runs `f` on the held transaction (GIL released), if this one runs on
    /// its caller's thread; a statement that ended the transaction ends it
    /// here too.
    fn held_call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut litelane::HeldWrite, &Hooks) -> Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut held = lock(&self.held);
            let Some(h) = held.as_mut() else {
                return Err(Error::InvalidInput {
                    message: "the transaction is finished (committed or rolled back)".into(),
                });
            };
            let r = f(&mut h.write, &h.hooks);
            if h.write.has_ended() {
                held.take(); // rolled back already: hands the writer on
            }
            r
        })
        .py_err(py)
    }

    /// `executemany` on a transaction held on this thread, as a pipeline:
    /// this thread converts the parameter sets [`CHUNK`] at a time (the GIL
    /// held: adapters and the sets' iterator are Python) while a scoped
    /// thread inserts the previous chunk (GIL released). Rows run in the
    /// order given and stop at the first error, as one `run_many` would; a
    /// set that fails to convert ends it with the sets before it run, as in
    /// `sqlite3`, whose `executemany` binds and steps one set at a time.
    /// Fewer than [`CHUNK`] sets run on this thread, with no second thread.
    fn executemany_pipelined(
        &self,
        py: Python<'_>,
        sql: String,
        seq: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        let mut sets = seq.try_iter()?;
        let (first, mut converted) = next_chunk(&mut sets);
        if first.len() < CHUNK || converted.is_err() {
            let o = self.statement(py, Stmt::Many(sql, first))?;
            return converted.map(|()| o);
        }
        let (to_inserter, chunks) = mpsc::sync_channel::<Vec<Params>>(1);
        std::thread::scope(|s| {
            let inserter = s.spawn(|| self.insert_chunks(&sql, chunks));
            let mut chunk = first;
            loop {
                let sender = to_inserter.clone();
                // Blocks while the inserter is a chunk behind: GIL released.
                let sent = py.detach(move || sender.send(chunk).is_ok());
                if !sent || converted.is_err() {
                    break; // the inserter stopped on an error, or this side did
                }
                let next;
                (next, converted) = next_chunk(&mut sets);
                if next.is_empty() {
                    break;
                }
                chunk = next;
            }
            drop(to_inserter);
            let inserted = py
                .detach(|| inserter.join())
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            // The inserts' error first: it came from an earlier set.
            let o = inserted.py_err(py)?;
            converted.map(|()| o)
        })
    }

    /// The inserting side of [`executemany_pipelined`](Txn::executemany_pipelined):
    /// runs each chunk on the held transaction until the chunks end or one
    /// fails; the outcome of them all.
    fn insert_chunks(&self, sql: &str, chunks: mpsc::Receiver<Vec<Params>>) -> Result<Outcome> {
        let mut held = lock(&self.held);
        let Some(h) = held.as_mut() else {
            return Err(Error::InvalidInput {
                message: "the transaction is finished (committed or rolled back)".into(),
            });
        };
        let mut total: Option<Outcome> = None;
        let mut result = Ok(());
        for sets in chunks {
            let may_pack = self.shared.funcs.none_installed();
            let hooks = &h.hooks;
            match h.write.run(|tx| {
                hooks.around(tx, || {
                    exec::run_many(tx, sql, &sets, may_pack, hooks.partial())
                })
            }) {
                Ok(o) => {
                    if let Some(t) = &mut total {
                        t.rowcount += o.rowcount.max(0);
                        t.lastrowid = o.lastrowid;
                    } else {
                        total = Some(o);
                    }
                }
                Err(e) => {
                    // The chunks before this one count as sets that ran.
                    let before = total.as_ref().map_or(0, |t| t.rowcount.max(0));
                    h.hooks.partial().fetch_add(before, Ordering::Relaxed);
                    result = Err(e);
                    break; // dropping `chunks` stops the converting side
                }
            }
        }
        if h.write.has_ended() {
            held.take(); // rolled back already: hands the writer on
        }
        result.map(|()| total.unwrap_or_default())
    }

    /// The error for a transaction of the parent used in a forked child.
    fn forked(&self, py: Python<'_>) -> PyErr {
        exc(
            py,
            Class::ProgrammingError,
            format!(
                "this transaction on {} was begun before the process forked; it belongs \
                 to the parent: open a new connection in the child",
                self.shared.display
            ),
        )
    }

    /// `execute`'s statement as an outcome.
    pub(crate) fn execute_outcome(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Outcome> {
        exec::refuse_control(&sql).py_err(py)?;
        let p = to_params(params)?;
        self.statement(py, Stmt::Exec(sql, p))
    }

    /// Runs one statement: on the held transaction, or through the worker.
    fn statement(&self, py: Python<'_>, stmt: Stmt) -> PyResult<Outcome> {
        if self.shared.stale() {
            return Err(self.forked(py));
        }
        if self.held_mode {
            let may_pack = self.shared.funcs.none_installed();
            self.held_call(py, move |w, hooks| stmt.run_held(w, hooks, may_pack))
        } else {
            self.call(py, |r| stmt.into_cmd(r))
        }
    }

    /// Sends one statement and waits (GIL released) for its outcome.
    fn call(&self, py: Python<'_>, make: impl FnOnce(Reply<Outcome>) -> Cmd) -> PyResult<Outcome> {
        let sender = self.sender(py)?;
        let (rtx, rrx) = mpsc::channel();
        let cmd = make(Reply::Chan(rtx));
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

    /// Sends a command whose reply is a callback.
    fn post(&self, py: Python<'_>, cmd: Cmd) -> PyResult<()> {
        let sender = self.sender(py)?;
        if let Err(mpsc::SendError(cmd)) = sender.send(cmd) {
            lock(&self.live).take();
            let err = self.failed();
            match cmd {
                Cmd::Exec(_, _, r) | Cmd::Many(_, _, r) | Cmd::Script(_, r) => {
                    deliver_outcome(r, Err(err))
                }
                Cmd::Commit(r) | Cmd::Rollback(r) => deliver_unit(r, Err(err)),
                Cmd::Prepares(_, r) => {
                    let _ = r.send(Err(err));
                }
            }
        }
        Ok(())
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
    /// writer, it gives up its place after `timeout` if another transaction
    /// of this process is open: the wait `sqlite3` reports as "database is
    /// locked". Litelane's own work (a checkpoint taking a turn, a thread's
    /// hand-over) never counts against it, so a single-threaded program
    /// never sees that error, whatever its timeout (the engine's own
    /// `busy_timeout` bounds a wait for another process).
    fn wait<T>(&self, rrx: &Receiver<Result<T>>) -> Result<T> {
        if let Some(r) = recv_soon(rrx) {
            return r;
        }
        let mut wait = self.timeout;
        loop {
            match rrx.recv_timeout(wait) {
                Ok(r) => return r,
                Err(RecvTimeoutError::Disconnected) => return Err(self.failed()),
                Err(RecvTimeoutError::Timeout) => {
                    if self.state.load(Ordering::Acquire) != QUEUED {
                        // Running: the statement itself takes its time.
                        return rrx.recv().unwrap_or_else(|_| Err(self.failed()));
                    }
                    if self.shared.txn_open_elsewhere(self.owner)
                        && self
                            .state
                            .compare_exchange(
                                QUEUED,
                                ABANDONED,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                    {
                        return Err(Error::user(format!(
                            "database is locked: waited {:.1} s for the writer of {} while \
                             another transaction of this process held it or was ahead in its queue",
                            self.timeout.as_secs_f64(),
                            self.shared.display
                        )));
                    }
                    wait = RECHECK;
                }
            }
        }
    }

    pub(crate) fn finish(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        if self.shared.stale() {
            // In a forked child: the parent's transaction is the parent's.
            // Ending it here only lets go of it (see `Drop`).
            if commit {
                return Err(self.forked(py));
            }
            return Ok(());
        }
        if self.held_mode {
            // One release of the GIL for taking the transaction and ending it.
            return py
                .detach(|| {
                    let Some(held) = lock(&self.held).take() else {
                        return Ok(());
                    };
                    // The rest of `held` (this thread's open-transaction
                    // mark) goes after the commit, as before.
                    let Held { write, .. } = held;
                    if commit {
                        write.commit()
                    } else {
                        write.rollback()
                    }
                })
                .py_err(py);
        }
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
            Cmd::Commit(Reply::Chan(rtx))
        } else {
            Cmd::Rollback(Reply::Chan(rtx))
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
    shared: Arc<Shared>,
    hooks: Arc<Hooks>,
    mut seen: u64,
    rx: Receiver<Cmd>,
    state: Arc<AtomicU8>,
    failure: Arc<Mutex<Option<Error>>>,
) {
    let mut end: Option<(bool, Reply<()>)> = None;
    // The reply to a statement that ended the transaction itself (INSERT OR
    // ROLLBACK, RAISE(ROLLBACK)): sent once `failure` is set, so the caller
    // that gets it sees the transaction over.
    let mut ended: Option<(Reply<Outcome>, Result<Outcome>)> = None;
    let rx = &rx;
    let res = shared.db.write_local("python transaction", |tx| {
        if state
            .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Error::user(ROLLBACK));
        }
        loop {
            let next = match recv_soon(rx) {
                Some(cmd) => Ok(cmd),
                None => rx.recv(),
            };
            // Functions and collations created since this transaction began.
            shared.funcs.catch_up(tx, &mut seen);
            let Ok(cmd) = next else {
                return Err(Error::user(ROLLBACK)); // the Txn is gone
            };
            match run_command(tx, &hooks, shared.funcs.none_installed(), cmd) {
                Next::More => {}
                Next::Ended(reply, r) => {
                    ended = Some((reply, r));
                    return Err(Error::user(STATEMENT_ENDED));
                }
                Next::Finish(commit, reply) => {
                    end = Some((commit, reply));
                    return if commit {
                        Ok(())
                    } else {
                        Err(Error::user(ROLLBACK))
                    };
                }
            }
        }
    });
    answer_end(end, res, &failure);
    if let Some((reply, r)) = ended {
        deliver_outcome(reply, r);
    }
    // `rx` (and the reply senders of any command still queued) drops here,
    // after `failure` is set, so a waiter that sees the channel close finds
    // the reason.
}

/// What the worker does after one command.
enum Next {
    /// Waits for the next command.
    More,
    /// A statement ended the transaction itself: its reply, sent once the
    /// failure is recorded.
    Ended(Reply<Outcome>, Result<Outcome>),
    /// Commits (`true`) or rolls back, then answers.
    Finish(bool, Reply<()>),
}

/// Runs one command of the worker's transaction and answers it, unless it
/// ends the transaction.
fn run_command(tx: &litelane::Tx<'_>, hooks: &Hooks, may_pack: bool, cmd: Cmd) -> Next {
    let (reply, r) = match cmd {
        Cmd::Exec(sql, params, reply) => {
            let r = hooks
                .around(tx, || exec::run(tx, &sql, &params))
                .map(|mut o| {
                    o.wrote = true;
                    o
                });
            (reply, r)
        }
        Cmd::Many(sql, sets, reply) => (
            reply,
            hooks.around(tx, || {
                exec::run_many(tx, &sql, &sets, may_pack, hooks.partial())
            }),
        ),
        Cmd::Script(sql, reply) => {
            // A failing script undoes only its own statements.
            let r = hooks
                .around(tx, || tx.write(|tx| exec::run_script(tx, &sql)))
                .map(|_| Outcome::default());
            deliver_outcome(reply, r);
            return Next::More;
        }
        Cmd::Commit(reply) => return Next::Finish(true, reply),
        Cmd::Rollback(reply) => return Next::Finish(false, reply),
        Cmd::Prepares(sql, reply) => {
            let _ = reply.send(Ok(hooks.around(tx, || exec::prepares(tx, &sql))));
            return Next::More;
        }
    };
    if tx.is_autocommit() {
        return Next::Ended(reply, r);
    }
    deliver_outcome(reply, r);
    Next::More
}

/// Answers the commit or rollback that ended the worker's transaction
/// (`res`: how the write ended), or records why it ended without one.
fn answer_end(end: Option<(bool, Reply<()>)>, res: Result<()>, failure: &Mutex<Option<Error>>) {
    match end {
        Some((true, reply)) => deliver_unit(reply, res),
        Some((false, reply)) => deliver_unit(
            reply,
            match res {
                Err(Error::User { message }) if message == ROLLBACK => Ok(()),
                Ok(()) => Ok(()),
                Err(e) => Err(e),
            },
        ),
        None => {
            let e = match res {
                Err(e) => e,
                Ok(()) => Error::user("the transaction ended"),
            };
            *lock(failure) = Some(e);
        }
    }
}

#[pymethods]
impl Txn {
    /// Runs one statement in the transaction; returns its outcome (see
    /// `Engine.execute`).
    #[pyo3(signature = (sql, params = None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyOutcome>> {
        let o = self.execute_outcome(py, sql, params)?;
        outcome(py, o)
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
        exec::refuse_control(&sql).py_err(py)?;
        let p = to_params(params)?;
        let o = self.statement(py, Stmt::Exec(sql, p))?;
        rows_out(py, &o, dicts)
    }

    /// Runs one statement for every parameter set, in the transaction.
    fn executemany<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        seq: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyOutcome>> {
        exec::refuse_control(&sql).py_err(py)?;
        self.hooks.partial().store(0, Ordering::Relaxed);
        let o = if self.held_mode && !self.shared.stale() {
            self.executemany_pipelined(py, sql, seq)?
        } else {
            let sets = params_seq(seq)?;
            self.statement(py, Stmt::Many(sql, sets))?
        };
        outcome(py, o)
    }

    /// Runs a script in the transaction (as a nested savepoint: a failing
    /// script undoes only its own statements).
    fn executescript(&self, py: Python<'_>, sql: String) -> PyResult<()> {
        self.statement(py, Stmt::Script(sql)).map(|_| ())
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

    /// Sends one statement without waiting: `callback(ok, value)` is called
    /// on the transaction's thread with the outcome (`shape="outcome"`),
    /// the rows (`"rows"`, `"dicts"`) or the exception (`ok=False`).
    #[pyo3(signature = (sql, params, shape, callback))]
    fn submit(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<&Bound<'_, PyAny>>,
        shape: &str,
        callback: Py<PyAny>,
    ) -> PyResult<()> {
        exec::refuse_control(&sql).py_err(py)?;
        let shape = match shape {
            "outcome" => Shape::Outcome,
            "rows" => Shape::Rows(false),
            "dicts" => Shape::Rows(true),
            other => {
                return Err(exc(
                    py,
                    Class::ProgrammingError,
                    format!("unknown result shape {other:?}"),
                ))
            }
        };
        let p = to_params(params)?;
        self.post(py, Cmd::Exec(sql, p, Reply::Call(callback, shape)))
    }

    /// `executemany` without waiting; see `submit`.
    fn submit_many(
        &self,
        py: Python<'_>,
        sql: String,
        seq: &Bound<'_, PyAny>,
        callback: Py<PyAny>,
    ) -> PyResult<()> {
        exec::refuse_control(&sql).py_err(py)?;
        let sets = params_seq(seq)?;
        self.post(
            py,
            Cmd::Many(sql, sets, Reply::Call(callback, Shape::Outcome)),
        )
    }

    /// Commit (`commit=True`) or rollback without waiting; `callback(ok,
    /// value)` is called after the commit. Called at once if the transaction
    /// is already finished or never got the writer.
    fn submit_end(&self, py: Python<'_>, commit: bool, callback: Py<PyAny>) -> PyResult<()> {
        let Some(live) = lock(&self.live).take() else {
            callback.call1(py, (true, py.None()))?;
            return Ok(());
        };
        if self
            .state
            .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            callback.call1(py, (true, py.None()))?;
            return Ok(());
        }
        let reply = Reply::Call(callback, Shape::Unit);
        let cmd = if commit {
            Cmd::Commit(reply)
        } else {
            Cmd::Rollback(reply)
        };
        if let Err(mpsc::SendError(Cmd::Commit(r) | Cmd::Rollback(r))) = live.tx.send(cmd) {
            deliver_unit(r, Err(self.failed()));
        }
        // `live` (the sender and the open-transaction mark) drops here; the
        // worker still has the command.
        Ok(())
    }

    /// True when `sql` prepares (one statement) on the transaction's
    /// connection, with the handle's hooks in force: after a statement
    /// failed, whether it failed before it ran (`sqlite3` prepares a
    /// statement before its implicit `BEGIN`, so such a failure leaves no
    /// transaction there). Asked on the worker thread of a transaction that
    /// was queued there.
    fn prepares(&self, py: Python<'_>, sql: String) -> PyResult<bool> {
        if self.shared.stale() {
            return Err(self.forked(py));
        }
        if !self.held_mode {
            let sender = self.sender(py)?;
            let (rtx, rrx) = mpsc::channel();
            return py
                .detach(move || {
                    if sender.send(Cmd::Prepares(sql, rtx)).is_err() {
                        return Err(self.failed());
                    }
                    self.wait(&rrx)
                })
                .py_err(py);
        }
        self.held_call(py, move |w, hooks| {
            w.run(|tx| Ok(hooks.around(tx, || exec::prepares(tx, &sql))))
        })
    }

    /// True until commit, rollback, or a failure that ended it.
    #[getter]
    fn active(&self, py: Python<'_>) -> bool {
        if self.held_mode {
            return py.detach(|| lock(&self.held).is_some());
        }
        lock(&self.live).is_some()
    }
}
