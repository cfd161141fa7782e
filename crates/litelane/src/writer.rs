//! The single writer: a FIFO queue of turns, transactions, savepoints and
//! group commit.
//!
//! Every write of the process takes a *turn* on the one writer connection.
//! Turns are handed out first come, first served: a thread that finds the
//! writer busy enqueues itself and parks; the thread that finishes its turn
//! unparks exactly the next one (no polling, no sleep-and-retry, so the
//! writer connection never meets `SQLITE_BUSY` from this process).
//!
//! The job runs on the caller's own thread, holding the connection for its
//! turn, so a write closure can borrow from the caller's stack.
//!
//! **Group commit.** The first job of a transaction (the *leader*) runs
//! `BEGIN IMMEDIATE`. When it finishes and other writers are already queued,
//! it does not commit: it hands the open transaction to the next writer, whose
//! job runs inside `SAVEPOINT`. The last job of the group (when the queue is
//! empty, the group is full or has been open for `max_wait`) runs `COMMIT`
//! and wakes every member with the outcome. A failing job rolls back to its
//! savepoint alone; each caller returns only after the commit that contains
//! its work.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ops::Deref;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::connection::Tracer;
use crate::error::{Context, Error, Result};
use crate::metrics::{LongWait, Recorder};
use crate::options::GroupCommit;

static NEXT_WRITER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Id of the writer whose turn this thread holds (0: none).
    static HOLDING: Cell<u64> = const { Cell::new(0) };
}

/// A write transaction, handed to the closure of [`Database::write`](crate::Database::write).
///
/// It dereferences to the writer's [`rusqlite::Connection`], so everything of
/// rusqlite is available (`execute`, `prepare_cached`, `query_row`...). Do
/// not run `BEGIN`, `COMMIT` or `ROLLBACK` yourself: return `Ok` to commit,
/// `Err` to roll back, and use [`Tx::write`] for a nested transaction.
pub struct Tx<'c> {
    conn: &'c Connection,
    depth: Cell<u32>,
}

impl Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl<'c> Tx<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Tx {
            conn,
            depth: Cell::new(0),
        }
    }

    /// Runs `f` in a nested transaction (a `SAVEPOINT`): `Ok` keeps its
    /// changes in the enclosing transaction, `Err` or a panic undoes only
    /// them. Nests to any depth.
    ///
    /// ```
    /// # let db = litelane::Database::open_in_memory(Default::default()).unwrap();
    /// db.write(|tx| {
    ///     tx.execute("CREATE TABLE t(x)", [])?;
    ///     tx.execute("INSERT INTO t VALUES (1)", [])?;
    ///     let inner: litelane::Result<()> = tx.write(|tx| {
    ///         tx.execute("INSERT INTO t VALUES (2)", [])?;
    ///         Err(litelane::Error::user("changed my mind"))
    ///     });
    ///     assert!(inner.is_err());
    ///     Ok(())
    /// }).unwrap();
    /// let n: i64 = db.read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)).unwrap();
    /// assert_eq!(n, 1);
    /// ```
    pub fn write<T>(&self, f: impl FnOnce(&Tx<'c>) -> Result<T>) -> Result<T> {
        let depth = self.depth.get() + 1;
        let name = format!("litelane_nested_{depth}");
        control(self.conn, &format!("SAVEPOINT {name}"))
            .context(|| format!("opening savepoint {name}"))?;
        self.depth.set(depth);
        let outcome = catch_unwind(AssertUnwindSafe(|| f(self)));
        self.depth.set(depth - 1);
        match outcome {
            Ok(Ok(v)) => {
                control(self.conn, &format!("RELEASE {name}"))
                    .context(|| format!("releasing savepoint {name}"))?;
                Ok(v)
            }
            Ok(Err(e)) => {
                undo_savepoint(self.conn, &name);
                Err(e)
            }
            Err(panic) => {
                undo_savepoint(self.conn, &name);
                resume_unwind(panic)
            }
        }
    }
}

/// Runs a transaction-control statement through the statement cache (they
/// run for every write; parsing them each time is measurable).
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

fn undo_savepoint(conn: &Connection, name: &str) {
    // Cannot fail on a live savepoint; if the transaction is already gone
    // there is nothing left to undo.
    let _ = control(conn, &format!("ROLLBACK TO {name}"));
    let _ = control(conn, &format!("RELEASE {name}"));
}

/// The result of one group's commit, awaited by every member.
#[derive(Default)]
struct Outcome {
    result: Mutex<Option<Result<()>>>,
    done: Condvar,
}

impl Outcome {
    fn set(&self, r: Result<()>) {
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.done.notify_all();
    }

    fn wait(&self) -> Result<()> {
        let mut g = self.result.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            g = self.done.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

struct OpenGroup {
    outcome: Arc<Outcome>,
    jobs: usize,
    rows: u64,
    started: Instant,
}

struct Slot {
    conn: Connection,
    group: Option<OpenGroup>,
}

struct Waiter {
    thread: Thread,
    granted: AtomicBool,
    priority: bool,
}

#[derive(Default)]
struct Queue {
    held: bool,
    waiters: VecDeque<Arc<Waiter>>,
    holder_label: String,
}

pub(crate) struct Writer {
    id: u64,
    slot: Mutex<Slot>,
    queue: Mutex<Queue>,
    group: GroupCommit,
    long_wait: Duration,
    recorder: Arc<Recorder>,
    tracer: Arc<Tracer>,
    /// Closed (true) while the WAL is over its limit: only priority turns
    /// (the escalated checkpoint) are granted, writers wait in order.
    gate: Arc<AtomicBool>,
    /// Called after every turn that leaves the writer idle (the checkpointer
    /// uses it to notice idleness).
    idle_hook: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

/// Clears the thread's "holding the writer" mark however the turn ends.
struct HoldingMark;

impl HoldingMark {
    fn set(id: u64) -> HoldingMark {
        HOLDING.with(|h| h.set(id));
        HoldingMark
    }
}

impl Drop for HoldingMark {
    fn drop(&mut self) {
        HOLDING.with(|h| h.set(0));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Writer {
    pub fn new(
        conn: Connection,
        group: GroupCommit,
        long_wait: Duration,
        recorder: Arc<Recorder>,
        tracer: Arc<Tracer>,
        gate: Arc<AtomicBool>,
    ) -> Writer {
        Writer {
            id: NEXT_WRITER_ID.fetch_add(1, Ordering::Relaxed),
            slot: Mutex::new(Slot { conn, group: None }),
            queue: Mutex::new(Queue::default()),
            group,
            long_wait,
            recorder,
            tracer,
            gate,
            idle_hook: Mutex::new(None),
        }
    }

    pub fn set_idle_hook(&self, hook: Box<dyn Fn() + Send + Sync>) {
        *lock(&self.idle_hook) = Some(hook);
    }

    /// Writers waiting for a turn right now.
    pub fn queue_depth(&self) -> usize {
        lock(&self.queue).waiters.len()
    }

    /// Waits for the writer's turn. `priority` puts the caller at the head of
    /// the queue (used by an escalated checkpoint). Returns the time waited.
    fn acquire(&self, label: &str, priority: bool) -> Duration {
        let start = Instant::now();
        let mut q = lock(&self.queue);
        let gated = !priority && self.gate.load(Ordering::Acquire);
        if q.held || gated {
            let me = Arc::new(Waiter {
                thread: thread::current(),
                granted: AtomicBool::new(false),
                priority,
            });
            if priority {
                q.waiters.push_front(Arc::clone(&me));
            } else {
                q.waiters.push_back(Arc::clone(&me));
            }
            drop(q);
            while !me.granted.load(Ordering::Acquire) {
                thread::park();
            }
            q = lock(&self.queue);
        } else {
            q.held = true;
        }
        let previous = std::mem::replace(&mut q.holder_label, label.to_string());
        drop(q);
        let waited = start.elapsed();
        let mut last_sql = lock(&self.tracer.writer_last_sql);
        if !priority {
            self.recorder.record_wait(waited);
            if waited >= self.long_wait {
                self.recorder.record_long_wait(LongWait {
                    waited,
                    waiter_label: label.to_string(),
                    holder_label: previous,
                    holder_sql: last_sql.clone(),
                });
            }
        }
        // From here on the last statement is this turn's own.
        last_sql.clear();
        waited
    }

    /// Ends a turn: the next waiter, if any, gets the writer (while the gate
    /// is closed, only a priority waiter).
    fn release(&self) {
        let mut q = lock(&self.queue);
        let gated = self.gate.load(Ordering::Acquire);
        let next = match q.waiters.front() {
            Some(w) if gated && !w.priority => None,
            _ => q.waiters.pop_front(),
        };
        match next {
            Some(next) => {
                next.granted.store(true, Ordering::Release);
                next.thread.unpark();
            }
            None => {
                q.held = false;
                drop(q);
                if let Some(hook) = lock(&self.idle_hook).as_ref() {
                    hook();
                }
            }
        }
    }

    /// Opens the gate and, if the writer is free, hands it to the first waiter.
    pub fn open_gate(&self) {
        let mut q = lock(&self.queue);
        self.gate.store(false, Ordering::Release);
        if !q.held {
            if let Some(next) = q.waiters.pop_front() {
                q.held = true;
                next.granted.store(true, Ordering::Release);
                next.thread.unpark();
            }
        }
    }

    /// True when the next turn will go to an ordinary writer, which can join
    /// the open group. Never to a priority turn (the escalated checkpoint
    /// must not find a transaction open on the writer) nor past a closed gate.
    fn next_can_join_group(&self) -> bool {
        let q = lock(&self.queue);
        !self.gate.load(Ordering::Acquire) && q.waiters.front().is_some_and(|w| !w.priority)
    }

    fn check_not_reentrant(&self) -> Result<()> {
        if HOLDING.with(|h| h.get()) == self.id {
            return Err(Error::invalid(
                "Database::write called inside a write closure on the same thread; \
                 use tx.write(..) for a nested transaction (savepoint)",
            ));
        }
        Ok(())
    }

    /// Runs `f` with the writer connection during a turn of its own, outside
    /// any transaction (used by checkpoints that must not race a commit).
    pub fn with_turn<T>(
        &self,
        label: &str,
        priority: bool,
        f: impl FnOnce(&Connection) -> T,
    ) -> Result<T> {
        self.check_not_reentrant()?;
        self.acquire(label, priority);
        let slot = lock(&self.slot);
        if slot.group.is_some() {
            // Unreachable by construction (a group is never handed to such a
            // turn); refuse rather than run beside an open transaction.
            drop(slot);
            self.release();
            return Err(Error::invalid(format!(
                "{label}: a write transaction is open on the writer"
            )));
        }
        let _mark = HoldingMark::set(self.id);
        let out = catch_unwind(AssertUnwindSafe(|| f(&slot.conn)));
        drop(slot);
        self.release();
        out.map_err(|p| resume_unwind(p))
    }

    /// Runs one write job; see the module documentation.
    pub fn write<T>(&self, label: &str, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.check_not_reentrant()?;
        self.acquire(label, false);
        let mut slot = lock(&self.slot);
        let mark = HoldingMark::set(self.id);

        let leader = slot.group.is_none();
        let begin = if leader {
            control(&slot.conn, "BEGIN IMMEDIATE")
        } else {
            control(&slot.conn, "SAVEPOINT litelane_job")
        };
        if let Err(e) = begin {
            let e = Error::from_sqlite(
                e,
                if leader {
                    "BEGIN IMMEDIATE"
                } else {
                    "SAVEPOINT litelane_job"
                },
            );
            self.recorder.note_error(&e);
            // A failed SAVEPOINT still leaves the group's earlier jobs to commit.
            self.finish_turn(&mut slot, false);
            drop(mark);
            drop(slot);
            self.release();
            return Err(e);
        }
        if leader {
            slot.group = Some(OpenGroup {
                outcome: Arc::default(),
                jobs: 0,
                rows: 0,
                started: Instant::now(),
            });
        }

        let changes_before = slot.conn.total_changes();
        let outcome = {
            let tx = Tx::new(&slot.conn);
            catch_unwind(AssertUnwindSafe(|| f(&tx)))
        };
        let mut ok = matches!(outcome, Ok(Ok(_)));
        let mut release_error = None;
        if ok && crate::ffi::has_deferred_fk_violations(&slot.conn) {
            // The job would fail at COMMIT on its own: fail it alone now, so it
            // cannot sink the other jobs of its group.
            release_error = Some(Error::Sqlite {
                code: 19,
                extended_code: 787,
                message: "FOREIGN KEY constraint failed (deferred)".into(),
                context: "checking the deferred foreign keys of a write".into(),
            });
            ok = false;
        }
        if ok && !leader {
            if let Err(e) = control(&slot.conn, "RELEASE litelane_job") {
                release_error = Some(Error::from_sqlite(e, "RELEASE litelane_job"));
                ok = false;
            }
        }
        if ok {
            let rows = slot.conn.total_changes() - changes_before;
            let g = slot.group.as_mut().expect("open group");
            g.jobs += 1;
            g.rows += rows;
        } else {
            self.recorder.rollbacks.fetch_add(1, Ordering::Relaxed);
            if leader {
                // Nothing else is in the transaction: undo all of it.
                let _ = control(&slot.conn, "ROLLBACK");
                slot.group = None;
            } else {
                undo_savepoint(&slot.conn, "litelane_job");
            }
        }
        if let Ok(Err(e)) = &outcome {
            self.recorder.note_error(e);
        }

        let wait = self.finish_turn(&mut slot, ok);
        drop(mark);
        drop(slot);
        self.release();

        let committed = match wait {
            Some(o) => o.wait(),
            None => Ok(()),
        };
        match outcome {
            Err(panic) => resume_unwind(panic),
            Ok(Err(e)) => Err(e),
            Ok(Ok(v)) => match release_error {
                Some(e) => {
                    self.recorder.note_error(&e);
                    Err(e)
                }
                None => committed.map(|()| v),
            },
        }
    }

    /// After a job: either keep the group open for the next queued writer, or
    /// commit it. Returns the outcome this caller must wait for (None when
    /// the caller's job failed: it has nothing to wait for).
    fn finish_turn(&self, slot: &mut Slot, job_ok: bool) -> Option<Arc<Outcome>> {
        let g = slot.group.as_ref()?;
        let keep_open = self.group.enabled
            && g.jobs < self.group.max_jobs
            && g.started.elapsed() < self.group.max_wait
            && self.next_can_join_group();
        let outcome = Arc::clone(&g.outcome);
        if !keep_open {
            let g = slot.group.take().expect("open group");
            let result = control(&slot.conn, "COMMIT")
                .context(|| format!("COMMIT of a group of {} write(s)", g.jobs));
            match &result {
                Ok(()) => {
                    self.recorder.record_group(g.jobs);
                    self.recorder
                        .transactions
                        .fetch_add(g.jobs as u64, Ordering::Relaxed);
                    self.recorder
                        .rows_written
                        .fetch_add(g.rows, Ordering::Relaxed);
                }
                Err(e) => {
                    self.recorder.note_error(e);
                    self.recorder
                        .rollbacks
                        .fetch_add(g.jobs as u64, Ordering::Relaxed);
                    if !slot.conn.is_autocommit() {
                        let _ = control(&slot.conn, "ROLLBACK");
                    }
                }
            }
            outcome.set(result);
        }
        job_ok.then_some(outcome)
    }
}
