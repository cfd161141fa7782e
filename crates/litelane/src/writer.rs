//! The single writer: turns from the [queue](crate::queue), transactions,
//! savepoints and group commit by flat combining.
//!
//! Every write of the process takes a *turn* on the one writer connection,
//! first come, first served (see `queue.rs` for the rules). A write is a turn
//! plus a transaction, as in GRDB's `DatabaseWriter`:
//!
//! **Group commit by flat combining.** The thread that holds the turn runs
//! its own job first (`BEGIN IMMEDIATE`, the closure), then takes the jobs of
//! the writers queued behind it, in order, and runs each one's closure
//! itself, inside `SAVEPOINT litelane_job`, while their owners sleep. When no
//! job is queued (or the group is full, or has been open for `max_wait`), it
//! runs one `COMMIT` and wakes each owner with its own outcome. A whole
//! group costs one commit and no thread hand-off per job. Jobs that must run
//! on their own thread ([`Database::write_local`](crate::Database::write_local),
//! checkpoints) get a turn of their own and never run inside someone else's
//! transaction.
//!
//! **Exact outcomes.** After every job the combiner asks SQLite whether the
//! transaction still exists. If a statement ended it (`INSERT OR ROLLBACK`,
//! `RAISE(ROLLBACK)`, an I/O error, a full disk, an interrupt), every write
//! of the group that was waiting for the commit is told
//! [`Error::RolledBack`] (retryable, naming the write during which it ended
//! and the cause), and the next job starts a fresh transaction. A caller is
//! told `Ok` exactly when its work is committed. A `COMMIT` run by a closure
//! itself is refused by a commit hook (it would commit other callers' work
//! behind their backs).

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{ffi as codes, Connection};

use crate::carry::{Carry, HeldProcessTurn, Keep};
use crate::combine::{self, RemoteJob, StatementJob};
use crate::configure::Registry;
use crate::connection::Tracer;
use crate::durability_plan::{SharedSync, SHARED_SYNC_WRITER_SYNCHRONOUS};
use crate::error::{Context, Error, OsError, Result};
use crate::ffi::{enter_with_job, JobRef};
use crate::metrics::{LongWait, Recorder};
use crate::options::GroupCommit;
use crate::queue::{
    enter_owned, try_enter_owned, Claimed, Entered, Guarded, HoldsTurn, Kind, OwnedTurn, Queue,
    Released, Turn,
};
use crate::schema_epoch::{schema_version, SchemaEpoch};
use crate::tx::{control, undo_savepoint, Job, Ran, Tx};
use crate::unpoisoned::lock;
use crate::wal_space::WalSpace;
use crate::xproc::{CountedCommit, ProcessQueue, ProcessTurn};

static NEXT_WRITER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Id of the writer whose turn this thread holds (0: none).
    static HOLDING: Cell<u64> = const { Cell::new(0) };
    /// The wait for another process's turn asked by this thread's caller
    /// ([`with_process_wait`]); `None`: `Options::busy_timeout`, never
    /// interrupted.
    static CALLER_WAIT: std::cell::RefCell<Option<CallerWait>> = const { std::cell::RefCell::new(None) };
}

/// Asked every 50 ms or so while a write waits for another process's turn:
/// `false` abandons the wait (see [`with_process_wait`]).
pub type KeepWaiting = Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Clone)]
struct CallerWait {
    timeout: Option<Duration>,
    keep_waiting: Option<KeepWaiting>,
}

/// Restores the caller's wait of the enclosing [`with_process_wait`] on
/// drop (also when `f` panics).
struct CallerWaitScope(Option<CallerWait>);

impl Drop for CallerWaitScope {
    fn drop(&mut self) {
        let previous = self.0.take();
        CALLER_WAIT.with(|w| *w.borrow_mut() = previous);
    }
}

/// Runs `f` with the waits of its writes, on this thread, for another
/// process's write turn (the cross-process queue: autocommit statements,
/// transactions, statements posted for another process to commit) bounded
/// by `timeout` instead of `Options::busy_timeout` (`None`: the option's;
/// at least 100 ms),
/// and abandoned as soon as `keep_waiting`, asked about every 50 ms while
/// such a wait lasts, returns `false`: the write then fails with
/// `SQLITE_INTERRUPT` and nothing of it happens. For a binding that must
/// honour a per-call timeout and deliver signals (Python's Ctrl-C) while a
/// write waits. Only the waits of a write led by this thread are bounded
/// this way: a write that joins the transaction of another thread of this
/// process waits as that thread does.
pub fn with_process_wait<T>(
    timeout: Option<Duration>,
    keep_waiting: Option<KeepWaiting>,
    f: impl FnOnce() -> T,
) -> T {
    let wait = CallerWait {
        timeout,
        keep_waiting,
    };
    let previous = CALLER_WAIT.with(|w| w.borrow_mut().replace(wait));
    let _scope = CallerWaitScope(previous);
    f()
}

/// The shortest wait a caller's timeout ([`with_process_wait`]) gives
/// another process's turn: 100 ms. A process that kept the turn while idle
/// (`carry.rs`) gives it back within milliseconds of a waiter's arrival; a
/// timeout of 0 (Python's `timeout=0`) must not fail on that, which is
/// litelane's own doing, not another writer's.
pub const MIN_PROCESS_WAIT: Duration = Duration::from_millis(100);

/// The caller's wait for this thread: its timeout (at least
/// [`MIN_PROCESS_WAIT`]; or `default`) and its `keep_waiting`.
fn caller_wait(default: Duration) -> (Duration, Option<KeepWaiting>) {
    CALLER_WAIT.with(|w| match &*w.borrow() {
        Some(c) => (
            c.timeout.map_or(default, |t| t.max(MIN_PROCESS_WAIT)),
            c.keep_waiting.clone(),
        ),
        None => (default, None),
    })
}

/// The writer's queue, shared with the checkpointer (which closes its gate).
pub(crate) type WriterQueue = Queue<JobRef>;

/// A write transaction held by its caller across calls, on the caller's own
/// thread: made by [`Database::try_hold_writer`](crate::Database::try_hold_writer)
/// when the writer is free, so a transaction of several statements costs no
/// hand-over to another thread. It holds the writer's turn (and the
/// cross-process turn) until [`commit`](HeldWrite::commit),
/// [`rollback`](HeldWrite::rollback) or drop (which rolls back); other
/// writers queue behind it meanwhile, and it never runs their jobs.
pub struct HeldWrite {
    writer: Arc<Writer>,
    turn: Option<OwnedTurn<JobRef>>,
    process_turn: Option<HeldProcessTurn>,
    label: String,
    /// Set when a statement ended the transaction itself (`INSERT OR
    /// ROLLBACK`, `RAISE(ROLLBACK)`, an I/O error): what `commit` reports.
    ended: Option<Error>,
}

impl HeldWrite {
    /// Runs `f` inside the transaction. `Err` from `f` leaves the
    /// transaction open (undo a statement yourself with [`Tx::write`]); a
    /// statement that ends the transaction makes every later call and
    /// [`commit`](HeldWrite::commit) fail with [`Error::RolledBack`].
    pub fn run<T>(&mut self, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        if let Some(e) = &self.ended {
            return Err(e.clone());
        }
        if self.turn.is_none() {
            return Err(Error::invalid("the transaction is finished"));
        }
        let writer = Arc::clone(&self.writer);
        let mut slot = writer
            .slot
            .enter(self.turn.as_ref().expect("checked above"));
        // Functions and collations configured since the last statement.
        writer.catch_up(&mut slot);
        let mark = HoldingMark::set(writer.id);
        let out = catch_unwind(AssertUnwindSafe(|| f(&Tx::new(&slot.conn))));
        drop(mark);
        if slot.conn.is_autocommit() {
            let cause = match &out {
                Ok(Err(e)) => e.clone(),
                _ => Error::invalid(
                    "a statement of the transaction ended it (INSERT OR ROLLBACK, \
                     RAISE(ROLLBACK), ROLLBACK, or an error SQLite answers with a rollback)",
                ),
            };
            writer.recorder.rollbacks.fetch_add(1, Ordering::Relaxed);
            self.ended = Some(Error::RolledBack {
                by: self.label.clone(),
                cause: Box::new(cause),
                retryable: false,
            });
        }
        drop(slot);
        out.unwrap_or_else(|p| resume_unwind(p))
    }

    /// True once a statement ended the transaction (see [`run`](HeldWrite::run)).
    pub fn has_ended(&self) -> bool {
        self.ended.is_some()
    }

    /// Commits (under `safe`, after the fsync) and hands the writer on.
    pub fn commit(mut self) -> Result<()> {
        self.finish(true)
    }

    /// Rolls back and hands the writer on.
    pub fn rollback(mut self) -> Result<()> {
        self.finish(false)
    }

    fn finish(&mut self, commit: bool) -> Result<()> {
        let Some(turn) = self.turn.take() else {
            return Ok(());
        };
        let writer = Arc::clone(&self.writer);
        let mut to_sync = None;
        let result = {
            let mut slot = writer.slot.enter(&turn);
            if commit && self.ended.is_none() {
                writer.reserve_wal(&mut slot);
            }
            let conn = &slot.conn;
            let result = match self.ended.take() {
                Some(e) if commit => Err(e),
                Some(_) => Ok(()),
                None if !commit => control(conn, "ROLLBACK").context(|| "ROLLBACK".into()),
                None if crate::ffi::has_deferred_fk_violations(conn) => Err(deferred_fk_error()),
                None => writer
                    .commit_now(conn, &|| format!("{:?}", self.label))
                    .map(|counted| to_sync = counted),
            };
            if let Err(e) = &result {
                writer.recorder.note_error(e);
                writer.recorder.record_failed_commit(e, 1);
            }
            if !conn.is_autocommit() {
                let _ = control(conn, "ROLLBACK");
            }
            debug_assert!(
                conn.is_autocommit(),
                "a held write ends with no transaction open"
            );
            result
        };
        writer.carry.put(self.process_turn.take());
        writer.released(turn.release());
        let result = result.and_then(|()| {
            let durable = writer.make_durable(to_sync, &|| format!("{:?}", self.label));
            if let Err(e) = &durable {
                writer.recorder.note_error(e);
                writer.recorder.record_failed_commit(e, 1);
            }
            durable
        });
        if result.is_ok() && commit {
            writer.recorder.record_group(1);
            writer.recorder.transactions.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

impl Drop for HeldWrite {
    fn drop(&mut self) {
        let _ = self.finish(false);
    }
}

/// A job's closure and, once run, its result.
struct JobCell<'l, F, T> {
    label: &'l str,
    enqueued: Instant,
    f: Option<F>,
    out: Option<std::thread::Result<Result<T>>>,
    verdict: Option<Result<()>>,
}

impl<'l, F, T> JobCell<'l, F, T>
where
    F: FnOnce(&Tx<'_>) -> Result<T>,
{
    fn new(label: &'l str, f: F) -> Self {
        JobCell {
            label,
            enqueued: Instant::now(),
            f: Some(f),
            out: None,
            verdict: None,
        }
    }

    /// What the caller is told: its own error or panic first; otherwise its
    /// value exactly when the transaction committed.
    fn finish(self) -> Result<T> {
        match (self.out, self.verdict) {
            (Some(Err(panic)), _) => resume_unwind(panic),
            (Some(Ok(Err(e))), _) => Err(e),
            (Some(Ok(Ok(v))), Some(Ok(()))) => Ok(v),
            (_, Some(Err(e))) => Err(e),
            (Some(Ok(Ok(_))), None) | (None, None) | (None, Some(Ok(()))) => Err(Error::invalid(
                "the writer ended this write's turn without an outcome (internal error; nothing was committed)",
            )),
        }
    }
}

impl<F, T> Job for JobCell<'_, F, T>
where
    F: FnOnce(&Tx<'_>) -> Result<T>,
{
    fn label(&self) -> &str {
        self.label
    }

    fn enqueued(&self) -> Instant {
        self.enqueued
    }

    fn run(&mut self, tx: &Tx<'_>) -> Ran {
        let Some(f) = self.f.take() else {
            return Ran::Err(Error::invalid("a write job ran twice (internal error)"));
        };
        let out = catch_unwind(AssertUnwindSafe(|| f(tx)));
        let ran = match &out {
            Ok(Ok(_)) => Ran::Ok,
            Ok(Err(e)) => Ran::Err(e.clone()),
            Err(_) => Ran::Panicked,
        };
        self.out = Some(out);
        ran
    }

    fn settle(&mut self, verdict: Result<()>) {
        debug_assert!(self.verdict.is_none(), "a job settled twice");
        self.verdict = Some(verdict);
    }
}

/// A job in the group being run: the turn holder's own, or one claimed from
/// the queue (whose owner wakes when this is dropped).
enum Member<'a> {
    Own(&'a mut (dyn Job + 'a)),
    Claimed(Claimed<JobRef>),
    /// A statement another process posted (`combine.rs`).
    Remote(Box<RemoteJob>),
}

impl Member<'_> {
    fn job(&mut self) -> &mut dyn Job {
        match self {
            Member::Own(j) => &mut **j,
            Member::Claimed(c) => c.job.get(),
            Member::Remote(r) => &mut **r,
        }
    }

    /// Settles the job and, for a claimed one, wakes its owner.
    fn settle(mut self, verdict: Result<()>) {
        self.job().settle(verdict);
    }
}

/// The writers of the open transaction whose work awaits the commit.
struct Group<'a> {
    members: Vec<Member<'a>>,
    rows: u64,
    started: Instant,
}

impl<'a> Group<'a> {
    /// Adds a member whose work is now part of the transaction (it changed
    /// the rows counted since `changes_before`), to be told at the commit.
    fn keep(&mut self, conn: &Connection, changes_before: u64, member: Member<'a>) {
        self.rows += conn.total_changes() - changes_before;
        self.members.push(member);
    }

    /// Tells every member that the transaction ended without committing.
    fn roll_back_all(&mut self, by: &str, cause: &Error) {
        for m in self.members.drain(..) {
            m.settle(Err(Error::RolledBack {
                by: by.to_string(),
                cause: Box::new(cause.clone()),
                retryable: true,
            }));
        }
    }
}

/// How long a turn holder under `safe` waits for the next statements of
/// processes whose last ones are still on their way back to them (250 µs,
/// about one WAL fsync here), to commit them with its own
/// (`Writer::run_posted`).
const COMBINE_GATHER: Duration = Duration::from_micros(250);

/// How long the cross-process turn may be handed from one leader of this
/// process to the next while writers of this process keep queuing (5 ms).
/// Past it the turn goes back to the cross-process queue, so the order among
/// processes holds between budgets; within one, a busy process saves the
/// queue's system calls on every group.
pub(crate) const PROCESS_TURN_BUDGET: Duration = Duration::from_millis(5);

/// How the turn among processes came for a write.
enum TurnFor {
    /// The turn (`None`: no cross-process queue).
    Turn(Option<ProcessTurn>),
    /// Another process ran the write's statement in its own commit: the
    /// write has its outcome.
    RanElsewhere,
}

/// The writer connection and what the turn holder keeps between turns.
struct Slot {
    conn: Connection,
    /// The label of the last job that ran (the "holder" of a long wait).
    last_label: String,
    /// The next job's long wait is already recorded (it waited for another
    /// process, and that process was named).
    wait_attributed: bool,
    /// The configuration generation applied to `conn` (see `configure.rs`).
    config_seen: u64,
    /// The WAL file's space ahead of the frames (None: not a file).
    wal_space: Option<WalSpace>,
}

pub(crate) struct Writer {
    id: u64,
    queue: Arc<WriterQueue>,
    /// The connection and what goes with it: entered only with a turn of
    /// `queue`.
    slot: Guarded<Slot>,
    group: GroupCommit,
    long_wait: Duration,
    /// How long to wait for another process's turn (`Options::busy_timeout`).
    busy_timeout: Duration,
    /// The writers of other processes on the same file (None: off).
    process_queue: Option<ProcessQueue>,
    /// The cross-process turn between two writes of this process.
    carry: Arc<Carry>,
    /// Whether the database file is still the one at its path.
    moved: MovedCheck,
    /// `safe` with the cross-process queue: the writer commits with
    /// `synchronous=NORMAL` and makes each commit durable after its turn,
    /// sharing the WAL's fsync with other threads and processes
    /// (`xproc/durable.rs`). The WAL file's path, for messages (the sync
    /// itself goes through the `syncer` connection's VFS).
    shared_sync: Option<PathBuf>,
    /// Under `shared_sync`: a connection of the writer's own whose handle on
    /// the WAL makes commits durable after the turn is handed on, while the
    /// writer's connection already runs the next turn.
    syncer: Option<Mutex<Connection>>,
    recorder: Arc<Recorder>,
    tracer: Arc<Tracer>,
    config: Arc<Registry>,
    /// Moves when this writer changes the schema (`schema_epoch.rs`).
    schema: Arc<SchemaEpoch>,
    /// True only while the writer runs its own `COMMIT` or statements
    /// outside a transaction ([`Writer::outside_transaction`]); the commit
    /// hook refuses every other commit.
    committing: Arc<AtomicBool>,
    /// Set by the commit hook when it let a commit through: whether
    /// [`Writer::outside_transaction`]'s statements committed anything.
    committed: Arc<AtomicBool>,
    /// Called after every turn that leaves the writer idle (the checkpointer
    /// uses it to notice idleness).
    idle_hook: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// The database file, for messages.
    db_path: String,
    /// Set once a commit's outcome was unknown (a failed fsync): why the
    /// writer takes no more writes. Cleared only by reopening (a new
    /// writer).
    stopped: Mutex<Option<String>>,
}

/// Marks the thread as holding the writer's turn; clears the mark however
/// the turn ends.
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

/// How long a check that the database file is still the one at its path
/// stays good for: 1 ms. The check (`SQLITE_FCNTL_HAS_MOVED`) is a `stat`
/// of the path, about 1.3 µs, 7% of a one-row transaction; commits closer
/// together than this share one. A file moved within 1 ms of the last check
/// can still take a commit, as one moved between any check and its `COMMIT`
/// always could.
pub(crate) const MOVED_RECHECK: Duration = Duration::from_millis(1);

/// When the database file was last found where it was opened.
#[derive(Default)]
struct MovedCheck(Mutex<Option<Instant>>);

impl MovedCheck {
    /// True when the file has moved; looks only when the last look is older
    /// than [`MOVED_RECHECK`].
    fn has_moved(&self, conn: &Connection) -> bool {
        let mut last = lock(&self.0);
        if last.is_some_and(|t| t.elapsed() < MOVED_RECHECK) {
            return false;
        }
        let moved = file_has_moved(conn);
        *last = (!moved).then(Instant::now);
        moved
    }
}

/// True when the database file is no longer the one at its path (deleted,
/// renamed or replaced: `SQLITE_FCNTL_HAS_MOVED`). A VFS without the control
/// (in-memory) never moves.
fn file_has_moved(conn: &Connection) -> bool {
    let mut moved: std::ffi::c_int = 0;
    conn.file_control(
        Some(rusqlite::MAIN_DB),
        rusqlite::FileControl::HasMoved(&mut moved),
    )
    .is_ok()
        && moved != 0
}

/// Rolls back a transaction that a failed `ROLLBACK` left open, so that what
/// it holds is never committed by a later turn.
fn end_stale_transaction(conn: &Connection) -> Result<()> {
    if conn.is_autocommit() {
        return Ok(());
    }
    control(conn, "ROLLBACK")
        .context(|| "rolling back a transaction an earlier failure left open on the writer".into())
}

/// The WAL space of a file database (see `wal_space.rs`), sized from the
/// connection's page size and `journal_size_limit` (no limit: 64 MiB).
fn wal_space_of(conn: &Connection) -> Option<WalSpace> {
    let path = conn.path().filter(|p| !p.is_empty())?;
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).ok()?;
    let limit: i64 = conn
        .query_row("PRAGMA journal_size_limit", [], |r| r.get(0))
        .ok()?;
    let limit = u64::try_from(limit).unwrap_or(64 * 1024 * 1024);
    Some(WalSpace::new(path, u64::try_from(page_size).ok()?, limit))
}

/// For a writer the plan puts under shared sync ([`SharedSync::On`]):
/// switches it to the plan's `synchronous` for shared sync
/// ([`SHARED_SYNC_WRITER_SYNCHRONOUS`], `NORMAL`) and returns its WAL file,
/// which the writer then syncs after each commit (see
/// `Writer::shared_sync`). `None` (nothing changed) for a connection
/// without a file.
fn shared_sync_of(conn: &Connection) -> Result<Option<PathBuf>> {
    let Some(path) = conn.path().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    control(
        conn,
        &format!(
            "PRAGMA synchronous = {}",
            SHARED_SYNC_WRITER_SYNCHRONOUS.level()
        ),
    )
    .context(|| "synchronous=NORMAL (the writer syncs after its turn)".into())?;
    Ok(Some(PathBuf::from(format!("{path}-wal"))))
}

/// `conn` with its handle on the WAL open: a read opens it (SQLite opens
/// a connection's WAL at its first read transaction).
fn open_wal(conn: Connection) -> Result<Connection> {
    conn.query_row("PRAGMA schema_version", [], |_| Ok(()))
        .context(|| "opening the WAL for the syncer connection".into())?;
    Ok(conn)
}

/// How an error names the commit of a group of `jobs` writes.
fn group_label(jobs: usize) -> String {
    format!("a group of {jobs} write(s)")
}

fn deferred_fk_error() -> Error {
    Error::Sqlite {
        code: codes::SQLITE_CONSTRAINT,
        os: None,
        extended_code: codes::SQLITE_CONSTRAINT_FOREIGNKEY,
        message: "FOREIGN KEY constraint failed (deferred)".into(),
        context: "checking the deferred foreign keys of a write".into(),
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Gives back a lingering cross-process turn and ends its reaper.
        self.carry.close();
    }
}

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut conn: Connection,
        queue: Arc<WriterQueue>,
        group: GroupCommit,
        long_wait: Duration,
        busy_timeout: Duration,
        process_queue: Option<ProcessQueue>,
        process_turn_linger: Duration,
        recorder: Arc<Recorder>,
        tracer: Arc<Tracer>,
        config: Arc<Registry>,
        config_seen: u64,
        schema: Arc<SchemaEpoch>,
        shared_sync: SharedSync,
        open_syncer: impl FnOnce() -> Result<Connection>,
    ) -> Result<Writer> {
        let committing = Arc::new(AtomicBool::new(false));
        let committed = Arc::new(AtomicBool::new(false));
        let (ours, seen) = (Arc::clone(&committing), Arc::clone(&committed));
        // Returning true turns the COMMIT into a rollback.
        conn.commit_hook(Some(move || {
            let allowed = ours.load(Ordering::Acquire);
            if allowed {
                seen.store(true, Ordering::Release);
            }
            !allowed
        }))
        .context(|| "installing the writer's commit hook".into())?;
        let wal_space = wal_space_of(&conn);
        let db_path = conn.path().unwrap_or_default().to_string();
        // The plan decided (`durability_plan.rs`); the queue must be open.
        let shared_sync = match (&process_queue, shared_sync) {
            (Some(_), SharedSync::On) => shared_sync_of(&conn)?,
            _ => None,
        };
        let syncer = match shared_sync {
            Some(_) => Some(Mutex::new(open_wal(open_syncer()?)?)),
            None => None,
        };
        // Under `shared_sync` another process commits while this one syncs,
        // so an idle writer hands the turn on while others are present: it
        // keeps the turn (`carry.rs`) only while alone. Otherwise a process
        // keeps it for a budget.
        let keep = match shared_sync {
            Some(_) => Keep::WhileAlone,
            None => Keep::ForBudget,
        };
        Ok(Writer {
            id: NEXT_WRITER_ID.fetch_add(1, Ordering::Relaxed),
            slot: Guarded::new(
                &queue,
                Slot {
                    conn,
                    last_label: String::new(),
                    wait_attributed: false,
                    config_seen,
                    wal_space,
                },
            ),
            queue,
            group,
            long_wait,
            busy_timeout,
            process_queue,
            carry: Carry::new(PROCESS_TURN_BUDGET, process_turn_linger, keep),
            moved: MovedCheck::default(),
            shared_sync,
            syncer,
            recorder,
            tracer,
            config,
            schema,
            committing,
            committed,
            idle_hook: Mutex::new(None),
            db_path,
            stopped: Mutex::new(None),
        })
    }

    pub fn set_idle_hook(&self, hook: Box<dyn Fn() + Send + Sync>) {
        *lock(&self.idle_hook) = Some(hook);
    }

    /// Writers waiting for a turn right now.
    pub fn queue_depth(&self) -> usize {
        self.queue.depth()
    }

    fn check_not_reentrant(&self) -> Result<()> {
        if HOLDING.with(|h| h.get()) == self.id {
            return Err(Error::invalid(
                "a write was started on a thread that is already inside a write of this \
                 database, which would wait for itself: in Rust, a `Database::write` inside a \
                 write closure (use `tx.write(..)` for a nested transaction); in Python, a \
                 function or callback that writes through the connection whose statement \
                 called it",
            ));
        }
        Ok(())
    }

    /// Ends a turn. If the writer went idle, a cross-process turn kept for
    /// the next leader goes back to the queue, and the idle hook is told.
    fn release(&self, turn: Turn<'_, JobRef>) {
        self.released(turn.release());
    }

    fn released(&self, how: Released) {
        if how == Released::Idle {
            self.carry.idle();
            if let Some(hook) = lock(&self.idle_hook).as_ref() {
                hook();
            }
        }
    }

    /// Runs `f` on the writer's connection, in a read transaction of its
    /// own, if the writer's turn is free right now (nobody holds it or waits
    /// for it, the gate is open); `None` otherwise, with nothing done. The
    /// writer's page cache is warm after the process's own writes, where a
    /// reader's is reset whenever the WAL changed (see `Database::read`).
    pub(crate) fn try_read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T>,
        one_statement: bool,
    ) -> Option<Result<T>> {
        let turn = try_enter_owned(&self.queue)?;
        let out = self.read_in_turn(&turn, f, one_statement);
        // Not `released`: a read is not write activity, so it must not
        // postpone the checkpointer's idle checkpoint (its idle hook), nor
        // end or start the linger of the cross-process turn.
        let _ = turn.release();
        Some(out)
    }

    /// [`try_read`](Writer::try_read) with `one_statement`, waiting for the
    /// writer's turn in the queue (in arrival order, like a write) when it
    /// is taken: for a handle whose every statement must run on the
    /// writer's connection (state set on that connection alone).
    pub(crate) fn read_waiting<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.check_not_reentrant()?;
        let Entered::Turn(turn) = self.queue.enter(Kind::Turn, None) else {
            unreachable!("only job waiters are run by others");
        };
        let out = self.read_in_turn(&turn, f, true);
        // Not `released`: not write activity (see `try_read`). But this
        // turn may have come from a write's leader, who left the turn among
        // processes for the next writer of this process; with nobody queued
        // now, it is kept or given back as after that write.
        if turn.release() == Released::Idle {
            self.carry.idle_if_left();
        }
        out
    }

    /// `f` on the writer's connection during `turn`: a snapshot of its own
    /// for one statement, else in `BEGIN` ... `COMMIT`.
    fn read_in_turn<T>(
        &self,
        turn: &impl HoldsTurn,
        f: impl FnOnce(&Connection) -> Result<T>,
        one_statement: bool,
    ) -> Result<T> {
        let out = {
            let mut slot = self.slot.enter(turn);
            self.catch_up(&mut slot);
            let conn = &slot.conn;
            let mark = HoldingMark::set(self.id);
            // One statement is a snapshot of its own: no BEGIN around it. A
            // statement that writes after all fails on the commit hook,
            // which refuses every commit but the writer's own.
            let out = end_stale_transaction(conn)
                .and_then(|()| match one_statement {
                    true => Ok(()),
                    false => control(conn, "BEGIN").context(|| "BEGIN (read on the writer)".into()),
                })
                .map(|()| catch_unwind(AssertUnwindSafe(|| f(conn))));
            drop(mark);
            if !conn.is_autocommit() {
                // A read leaves nothing to commit; COMMIT ends the snapshot
                // (ROLLBACK if a statement of `f` wrote after all).
                if control(conn, "COMMIT").is_err() {
                    let _ = control(conn, "ROLLBACK");
                }
            }
            out
        };
        match out {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(e) => Err(e),
        }
    }

    /// Starts a [`HeldWrite`] on the calling thread if the writer's turn is
    /// free right now (`None` otherwise: nothing was done).
    pub(crate) fn try_hold(self: &Arc<Self>, label: &str) -> Result<Option<HeldWrite>> {
        self.check_not_reentrant()?;
        let start = Instant::now();
        let Some(turn) = try_enter_owned(&self.queue) else {
            return Ok(None);
        };
        self.hold_turn(turn, label, start).map(Some)
    }

    /// Starts a [`HeldWrite`] on the calling thread, waiting for the
    /// writer's turn in arrival order as [`Database::write_local`] does.
    pub(crate) fn hold(self: &Arc<Self>, label: &str) -> Result<HeldWrite> {
        self.check_not_reentrant()?;
        let start = Instant::now();
        let turn = enter_owned(&self.queue);
        self.hold_turn(turn, label, start)
    }

    /// Begins the held transaction in `turn`: the cross-process turn, the
    /// configuration, `BEGIN IMMEDIATE`.
    fn hold_turn(
        self: &Arc<Self>,
        turn: OwnedTurn<JobRef>,
        label: &str,
        start: Instant,
    ) -> Result<HeldWrite> {
        if let Err(e) = self.check_writable() {
            self.released(turn.release());
            return Err(e);
        }
        let carried = self.carry.take();
        let process_turn = match carried {
            Some(held) => Some(held),
            None => match self.process_turn(label) {
                Ok(t) => t.map(|turn| HeldProcessTurn {
                    turn,
                    since: Instant::now(),
                }),
                Err(e) => {
                    self.recorder.note_error(&e);
                    self.released(turn.release());
                    return Err(e);
                }
            },
        };
        let begun = {
            let mut slot = self.slot.enter(&turn);
            self.catch_up(&mut slot);
            self.start_labeled(&mut slot, label, start);
            end_stale_transaction(&slot.conn).and_then(|()| {
                control(&slot.conn, "BEGIN IMMEDIATE").context(|| "BEGIN IMMEDIATE".into())
            })
        };
        let held = HeldWrite {
            writer: Arc::clone(self),
            turn: Some(turn),
            process_turn,
            label: label.to_string(),
            ended: None,
        };
        match begun {
            Ok(()) => Ok(held),
            Err(e) => {
                self.recorder.note_error(&e);
                drop(held); // releases the turns
                Err(e)
            }
        }
    }

    /// Before each job (and each turn of its own), with no statement
    /// running: applies what `Database::configure` recorded since the writer
    /// last looked, so a job queued after a `configure` always runs with it.
    fn catch_up(&self, slot: &mut Slot) {
        let Slot {
            conn, config_seen, ..
        } = slot;
        self.config
            .sync(conn, config_seen, &|e| self.recorder.note_error(&e));
    }

    /// Brings the configuration up to date, records how long a job waited
    /// and, for a long wait, who held the writer; from here on the last
    /// statement traced is this job's own.
    fn start_job(&self, slot: &mut Slot, job: &dyn Job) {
        self.catch_up(slot);
        self.start_labeled(slot, job.label(), job.enqueued());
    }

    fn start_labeled(&self, slot: &mut Slot, label: &str, enqueued: Instant) {
        let waited = enqueued.elapsed();
        self.recorder.record_wait(waited);
        let mut last_sql = lock(&self.tracer.writer_last_sql);
        if waited >= self.long_wait && !std::mem::take(&mut slot.wait_attributed) {
            self.recorder.record_long_wait(LongWait {
                waited,
                waiter_label: label.to_string(),
                holder_label: slot.last_label.clone(),
                holder_sql: last_sql.clone(),
            });
        }
        last_sql.clear();
        self.tracer.writer_capture.store(true, Ordering::Relaxed);
        slot.last_label.clear();
        slot.last_label.push_str(label);
    }

    /// Runs `f` with the writer connection during a turn of its own, outside
    /// any transaction (checkpoints, backups). `priority` goes ahead of
    /// every queued writer and past a closed gate.
    pub fn with_turn<T>(
        &self,
        label: &str,
        priority: bool,
        f: impl FnOnce(&mut Connection) -> T,
    ) -> Result<T> {
        self.check_not_reentrant()?;
        let start = Instant::now();
        let kind = if priority { Kind::Priority } else { Kind::Turn };
        let Entered::Turn(turn) = self.queue.enter(kind, None) else {
            unreachable!("only job waiters are run by others");
        };
        let mut slot = self.slot.enter(&turn);
        self.catch_up(&mut slot);
        if !priority {
            self.recorder.record_wait(start.elapsed());
        }
        slot.last_label.clear();
        slot.last_label.push_str(label);
        if let Err(e) = end_stale_transaction(&slot.conn) {
            drop(slot);
            self.release(turn);
            return Err(e);
        }
        let mark = HoldingMark::set(self.id);
        let out = catch_unwind(AssertUnwindSafe(|| f(&mut slot.conn)));
        drop(mark);
        if !slot.conn.is_autocommit() {
            let _ = control(&slot.conn, "ROLLBACK");
        }
        // `f` may have changed the schema (`VACUUM`, a restore).
        self.schema.writer_at(schema_version(&slot.conn));
        drop(slot);
        self.release(turn);
        out.map_err(|p| resume_unwind(p))
    }

    /// [`Writer::with_turn`], ahead of queued writers, also holding the turn
    /// among processes, for which it waits at most `wait`: no litelane
    /// writer of any process is in a transaction while `f` runs. `None`,
    /// with `f` not run, when the turn among processes did not come in time.
    /// With it, how long the writer's turn was held (writers of this
    /// process waited that long): from the moment it was granted, through
    /// the wait for the turn among processes and `f`.
    pub fn with_every_turn<T>(
        &self,
        label: &str,
        wait: Duration,
        f: impl FnOnce(&mut Connection) -> T,
    ) -> Result<(Option<T>, Duration)> {
        self.with_turn(label, true, |conn| {
            let granted = Instant::now();
            let held = match (self.carry.take(), &self.process_queue) {
                (Some(held), _) => Some(held),
                (None, None) => None,
                (None, Some(q)) => match q.acquire(label, crate::xproc::Wait::Timeout(wait)) {
                    Ok(Some(turn)) => Some(HeldProcessTurn {
                        turn,
                        since: Instant::now(),
                    }),
                    Ok(None) | Err(_) => return (None, granted.elapsed()),
                },
            };
            let out = f(conn);
            self.carry.put(held);
            (Some(out), granted.elapsed())
        })
    }

    /// Runs `f` on the writer's connection outside any transaction, in a
    /// turn of its own taken in arrival order (`priority`: ahead of every
    /// queued writer, as [`Writer::with_turn`]): each statement `f` runs
    /// commits on its own (the commit hook lets it), and under shared sync
    /// what it committed is made durable before this returns
    /// ([`Database::write_outside_transaction`](crate::Database::write_outside_transaction),
    /// [`Database::restore_from`](crate::Database::restore_from)).
    /// It does not take the turn among processes: a statement that changes
    /// only the connection (`PRAGMA foreign_keys`) must not wait for another
    /// process's transaction, and one that writes waits for SQLite's write
    /// lock as any SQLite connection does (the busy timeout). Refused, as
    /// any write, once the writer stopped ([`Writer::check_writable`]); a
    /// failed sync stops it ([`Writer::settle_outside`]).
    pub(crate) fn outside_transaction<T>(
        &self,
        label: &str,
        priority: bool,
        f: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        self.check_writable()?;
        self.settle_outside(self.outside_turn(label, priority, f))
    }

    /// [`Writer::outside_transaction`]'s turn and its sync.
    fn outside_turn<T>(
        &self,
        label: &str,
        priority: bool,
        f: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let (out, counted) = self.with_turn(label, priority, |conn| {
            self.committed.store(false, Ordering::Release);
            self.committing.store(true, Ordering::Release);
            let version = crate::ffi::data_version(conn);
            let out = catch_unwind(AssertUnwindSafe(|| f(conn)));
            self.committing.store(false, Ordering::Release);
            // A commit is counted once its COMMIT returned, with or without
            // the turn among processes: a shared fsync that starts after the
            // count covers it. Only when something committed (a connection
            // `PRAGMA` commits nothing and costs no fsync): the commit hook
            // saw it, or the file changed without one (`VACUUM` commits
            // below the hook).
            let wrote = self.committed.load(Ordering::Acquire)
                || version.is_none()
                || crate::ffi::data_version(conn) != version;
            let counted = match (&self.shared_sync, &self.process_queue) {
                (Some(_), Some(q)) if wrote => Some(q.count_commit()),
                _ => None,
            };
            (out.unwrap_or_else(|p| resume_unwind(p)), counted)
        })?;
        let value = out?;
        self.make_durable(counted, &|| label.to_string())?;
        Ok(value)
    }

    /// Runs one write job whose closure may run on the turn holder's thread
    /// (group commit by flat combining); see the module documentation.
    pub fn write<T, F>(&self, label: &str, f: F) -> Result<T>
    where
        F: FnOnce(&Tx<'_>) -> Result<T> + Send,
        T: Send,
    {
        self.check_not_reentrant()?;
        let mut cell = JobCell::new(label, f);
        match enter_with_job(&self.queue, &mut cell) {
            Entered::Turn(turn) => self.lead(turn, &mut cell),
            Entered::Done => {}
        }
        cell.finish()
    }

    /// Runs one statement that writes as a write job of its own; when it
    /// has to wait for another process's turn, it is posted for that
    /// process to run (see `combine.rs`).
    pub fn execute(&self, sql: &str, params: &[crate::Value]) -> Result<crate::Executed> {
        self.check_not_reentrant()?;
        let mut job = StatementJob::new("", sql, params);
        match enter_with_job(&self.queue, &mut job) {
            Entered::Turn(turn) => self.lead(turn, &mut job),
            Entered::Done => {}
        }
        job.finish()
    }

    /// Runs one write job on the calling thread, in a turn of its own (it is
    /// never run by another thread, so `f` need not be `Send`); writers
    /// queued behind it may still join its transaction.
    pub fn write_local<T>(&self, label: &str, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.check_not_reentrant()?;
        let mut cell = JobCell::new(label, f);
        let Entered::Turn(turn) = self.queue.enter(Kind::Turn, None) else {
            unreachable!("only job waiters are run by others");
        };
        self.lead(turn, &mut cell);
        cell.finish()
    }

    /// Holds the turn: runs `own`, then the jobs queued behind it, commits,
    /// settles every job and hands the turn on.
    fn lead(&self, mut turn: Turn<'_, JobRef>, own: &mut dyn Job) {
        let Some((mut slot, process_turn)) = self.begin_turn(&turn, own) else {
            self.release(turn);
            return;
        };
        let mark = HoldingMark::set(self.id);
        let (mut group, ran) = self.run_group(&mut turn, &mut slot, own);
        if let Some(held) = &process_turn {
            self.run_posted(&held.turn, &mut slot, &mut group, ran);
        }
        let to_sync = group.and_then(|g| {
            self.reserve_wal(&mut slot);
            self.commit(&slot.conn, g)
        });
        drop(mark);
        debug_assert!(
            slot.conn.is_autocommit(),
            "a turn ends with no transaction open"
        );
        drop(slot);
        // A process alone on the file (no other queue open: one
        // `F_OFD_GETLK`) makes the group durable before it hands this
        // process's turn on: the writers that queued meanwhile then form
        // one larger group for the next fsync, where handing the turn on
        // first let the next leader commit a few of them during this fsync
        // and sync them in one of their own (more, smaller fsyncs, and more
        // CPU: docs/concurrency.md). With another process there, that one
        // may commit during this fsync, so the turn is handed on first.
        let sync_in_turn = to_sync.is_some()
            && process_turn
                .as_ref()
                .is_some_and(|held| !held.turn.others_present());
        // The next leader of this process may take the cross-process turn
        // over (no system call); if nobody of this process is waiting, it
        // goes back to the queue at once.
        self.carry.put(process_turn);
        let to_sync = match to_sync {
            Some((g, counted)) if sync_in_turn => {
                self.settle_durable(g, counted);
                None
            }
            after_the_turn => after_the_turn,
        };
        self.release(turn);
        if let Some((g, counted)) = to_sync {
            self.settle_durable(g, counted);
        }
    }

    /// The writer's connection and the turn among processes for a turn
    /// that begins with `own`: handed on by the previous leader of this
    /// process if it is young enough, or taken from the queue, and held
    /// for the whole turn (every group it commits). `None` when `own`
    /// already has its outcome: the database is not writable, the turn
    /// among processes could not be had, or another process ran `own`.
    fn begin_turn(
        &self,
        turn: &Turn<'_, JobRef>,
        own: &mut dyn Job,
    ) -> Option<(MutexGuard<'_, Slot>, Option<HeldProcessTurn>)> {
        if let Err(e) = self.check_writable() {
            own.settle(Err(e));
            return None;
        }
        let carried = self.carry.take();
        let fresh = carried.is_none();
        let mut slot = self.slot.enter(turn);
        let process_turn = match carried {
            Some(held) => Some(held),
            None => match self.process_turn_for(&slot, own) {
                Ok(TurnFor::Turn(t)) => t.map(|turn| HeldProcessTurn {
                    turn,
                    since: Instant::now(),
                }),
                Ok(TurnFor::RanElsewhere) => return None,
                Err(e) => {
                    self.recorder.note_error(&e);
                    own.settle(Err(e));
                    return None;
                }
            },
        };
        slot.wait_attributed = fresh
            && process_turn
                .as_ref()
                .is_some_and(|held| held.turn.waited() >= self.long_wait);
        Some((slot, process_turn))
    }

    /// Runs `own` and then, while group commit is on and the group has
    /// room (`max_jobs`, `max_wait`), the jobs queued behind it, all in one
    /// transaction: the group to commit (`None` when nothing is left to
    /// commit) and how many jobs ran.
    fn run_group<'a>(
        &self,
        turn: &mut Turn<'_, JobRef>,
        slot: &mut Slot,
        own: &'a mut dyn Job,
    ) -> (Option<Group<'a>>, usize) {
        let mut group: Option<Group<'a>> = None;
        let mut next = Some(Member::Own(own));
        let mut ran = 0usize;
        while let Some(member) = next.take() {
            ran += 1;
            let go_on = self.run_member(slot, &mut group, member);
            let room = match &group {
                Some(g) => {
                    g.members.len() < self.group.max_jobs
                        && g.started.elapsed() < self.group.max_wait
                }
                None => ran < self.group.max_jobs,
            };
            if go_on && self.group.enabled && room {
                next = turn.claim_next().map(Member::Claimed);
            }
        }
        (group, ran)
    }

    /// The turn among processes for `own`: as [`process_turn`](Writer::process_turn),
    /// except that a one-statement write is first posted for the process
    /// holding the turn to run (`combine.rs`), which may end it
    /// ([`TurnFor::RanElsewhere`]: `own` has its outcome).
    fn process_turn_for(&self, slot: &Slot, own: &mut dyn Job) -> Result<TurnFor> {
        #[cfg(target_os = "linux")]
        if let Some(q) = &self.process_queue {
            // Only where each commit is synced (`safe`): there one fsync
            // for many processes pays; without it, handing the turn to a
            // process that keeps it for a while (turn cohorting) costs
            // fewer wake-ups than posting (docs/concurrency.md).
            let may_post =
                self.shared_sync.is_some() && self.config.is_empty() && q.others_present();
            let posted = match own.statement() {
                Some((sql, params))
                    if may_post
                        && combine::may_run_elsewhere(sql)
                        && combine::is_plain(&slot.conn, q.stock_settings()) =>
                {
                    q.post(sql, params)
                }
                _ => None,
            };
            if let Some(posted) = posted {
                return self.wait_posted(q, &slot.conn, own, posted);
            }
        }
        let _ = slot;
        self.process_turn(own.label()).map(TurnFor::Turn)
    }

    /// Waits for the turn or for the outcome of `own`'s posted statement,
    /// up to `busy_timeout` in all. `conn`: the writer's connection, which
    /// reports the outcome's last rowid as if it had run the statement.
    #[cfg(target_os = "linux")]
    fn wait_posted(
        &self,
        q: &ProcessQueue,
        conn: &Connection,
        own: &mut dyn Job,
        mut posted: crate::xproc::Posted,
    ) -> Result<TurnFor> {
        use crate::xproc::{Acquired, Awaited, NoTurn, Patience, Policy};
        let start = Instant::now();
        let (timeout, keep_waiting) = caller_wait(self.busy_timeout);
        let ask = || keep_waiting.as_ref().is_none_or(|k| k());
        let patience = Patience::new(Some(start + timeout), &ask);
        let stopped = |why: NoTurn| match why {
            NoTurn::TimedOut => self.busy_error(q, timeout),
            NoTurn::Cancelled => self.interrupted_error(),
        };
        // A holder of the turn usually takes it at once: no ticket then.
        match q.wait_if_turn_held(&mut posted, &patience) {
            Awaited::Ended(outcome) => return Ok(self.ran_elsewhere(conn, own, outcome)),
            Awaited::Posted => {}
            Awaited::Stopped(why) => {
                if posted.withdraw() {
                    return Err(stopped(why));
                }
            }
        }
        loop {
            match q.acquire_as(own.label(), Policy::Watching(&patience, &mut posted)) {
                Ok(Acquired::Ended(outcome)) => return Ok(self.ran_elsewhere(conn, own, outcome)),
                Ok(Acquired::Turn(t)) => {
                    if posted.withdraw() {
                        return Ok(TurnFor::Turn(Some(t))); // nobody ran it: ours
                    }
                    // A leader committed it and is making it durable: the
                    // turn is not ours to use.
                }
                Ok(Acquired::InFlight) => {}
                Ok(Acquired::Stopped(why)) => {
                    if posted.withdraw() {
                        return Err(stopped(why));
                    }
                }
                Err(degraded) => {
                    self.recorder.note_process_queue_off(degraded.to_string());
                    if posted.withdraw() {
                        return Ok(TurnFor::Turn(None));
                    }
                }
            }
            // A leader has it: wait for its outcome. An interruption
            // cannot take back a statement another process is committing:
            // only the timeout ends this wait.
            let always = || true;
            let outcome_patience = Patience::new(Some(start + timeout), &always);
            match q.wait_for_outcome(&mut posted, &outcome_patience) {
                Awaited::Ended(outcome) => return Ok(self.ran_elsewhere(conn, own, outcome)),
                Awaited::Posted if start.elapsed() < timeout => {} // its leader died
                Awaited::Posted | Awaited::Stopped(_) => {
                    if posted.withdraw() {
                        return Err(self.busy_error(q, timeout));
                    }
                    let message = format!(
                        "the process committing this statement gave no outcome within \
                         the timeout ({timeout:?})"
                    );
                    let outcome = crate::xproc::JobOutcome::Unknown { message };
                    return Ok(self.ran_elsewhere(conn, own, outcome));
                }
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn ran_elsewhere(
        &self,
        conn: &Connection,
        own: &mut dyn Job,
        outcome: crate::xproc::JobOutcome,
    ) -> TurnFor {
        let durable_at = match &outcome {
            crate::xproc::JobOutcome::Done { durable_at, .. } => *durable_at,
            _ => 0,
        };
        let mut result = combine::from_remote(outcome, &self.db_path, conn);
        if durable_at > 0 && result.is_ok() {
            // Committed by another process, not yet durable: as for a
            // commit of our own, wait for the shared fsync that covers it.
            let counted = CountedCommit::counted_elsewhere(durable_at);
            let what = || "a statement committed by another process".to_string();
            if let Err(e) = self.make_durable(Some(counted), &what) {
                result = Err(e);
            }
        }
        match &result {
            Ok(_) => {
                self.recorder
                    .combined_elsewhere
                    .fetch_add(1, Ordering::Relaxed);
                self.recorder.transactions.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.recorder.record_failed_commit(e, 1),
        }
        own.ran_elsewhere(result);
        TurnFor::RanElsewhere
    }

    /// Runs, in this turn's transaction, the statements other processes
    /// posted (`combine.rs`), while the group has room. While statements of
    /// other processes are on their way back (their outcomes were just
    /// written, or another turn is committing them), it waits for their
    /// next posts for up to [`COMBINE_GATHER`]: the fsync those posters
    /// would otherwise each wait for is shared by more commits. Only with
    /// `process_turn` held: nobody else commits meanwhile.
    fn run_posted<'a>(
        &self,
        process_turn: &ProcessTurn,
        slot: &mut Slot,
        group: &mut Option<Group<'a>>,
        ran: usize,
    ) {
        #[cfg(target_os = "linux")]
        if let Some(q) = &self.process_queue {
            let mut room = self.group.max_jobs.saturating_sub(ran);
            let coming =
                |s: crate::xproc::JobStates| s.claimed + s.committing + s.committed + s.ended;
            if room == 0
                || self.shared_sync.is_none() // no weaker commit for a `safe` poster
                || !self.config.is_empty()
                || !(q.jobs_waiting() || coming(q.job_states()) > 0)
                || !combine::is_plain(&slot.conn, q.stock_settings())
            {
                return;
            }
            let deadline = Instant::now() + COMBINE_GATHER;
            loop {
                let seen = q.posts_seen();
                for taken in q.take_jobs(room) {
                    room -= 1;
                    let job = RemoteJob::new(taken, Arc::clone(&self.recorder));
                    self.run_member(slot, group, Member::Remote(Box::new(job)));
                }
                let now = Instant::now();
                if room == 0 || now >= deadline || coming(q.job_states()) == 0 {
                    break;
                }
                q.wait_for_posts(seen, deadline - now);
            }
        }
        let _ = (process_turn, slot, group, ran);
    }

    /// The error of a write that waited `timeout` for another process's
    /// turn: `SQLITE_BUSY`, its message (all that Python shows) naming the
    /// holder's pid and label, or the lock on the lock file that no writer
    /// holds.
    fn busy_error(&self, q: &ProcessQueue, timeout: Duration) -> Error {
        let mut who = Vec::new();
        if let Some(h) = q.holder() {
            who.push(format!("held by process {} ({})", h.pid, h.label));
        }
        who.extend(q.foreign_locks());
        if who.is_empty() {
            who.push("its holder could not be read (the turn may just have ended)".into());
        }
        Error::Sqlite {
            code: codes::SQLITE_BUSY,
            os: None,
            extended_code: codes::SQLITE_BUSY,
            message: format!(
                "database is locked: another process held the write turn of {} for longer \
                 than the timeout ({timeout:?}): {}",
                self.db_path,
                who.join("; ")
            ),
            context: format!(
                "waiting for the cross-process turn ({})",
                q.lock_path().display()
            ),
        }
    }

    /// The error of a write whose caller abandoned its wait for another
    /// process's turn ([`with_process_wait`]'s `keep_waiting`).
    fn interrupted_error(&self) -> Error {
        Error::Sqlite {
            code: codes::SQLITE_INTERRUPT,
            os: None,
            extended_code: codes::SQLITE_INTERRUPT,
            message: "interrupted".into(),
            context: format!(
                "waiting for another process's write turn on {} (nothing was written)",
                self.db_path
            ),
        }
    }

    /// Waits for the turn among the litelane processes writing to this file
    /// (when the cross-process queue is on), up to the caller's timeout
    /// ([`with_process_wait`]; `busy_timeout` by default). A wait of
    /// `long_wait` or more is recorded with the holder's pid, label and SQL.
    fn process_turn(&self, label: &str) -> Result<Option<ProcessTurn>> {
        let Some(q) = &self.process_queue else {
            return Ok(None);
        };
        let describe = |h: &crate::xproc::HolderInfo| format!("process {}: {}", h.pid, h.label);
        let (timeout, keep_waiting) = caller_wait(self.busy_timeout);
        let ask = || keep_waiting.as_ref().is_none_or(|k| k());
        let patience = crate::xproc::Patience::new(Some(Instant::now() + timeout), &ask);
        let policy = crate::xproc::Policy::Barging(&patience);
        match q
            .acquire_as(label, policy)
            .map(crate::xproc::Acquired::into_turn)
        {
            Ok(Ok(t)) => {
                self.recorder.process_turns.fetch_add(1, Ordering::Relaxed);
                if t.ticket() == crate::xproc::OUT_OF_ORDER {
                    self.recorder
                        .turns_out_of_order
                        .fetch_add(1, Ordering::Relaxed);
                }
                if t.waited() >= self.long_wait {
                    // Who held the turn this one waited for (read only when
                    // it matters: it costs a read of the lock file).
                    let holder = q.turn_before(t.ticket());
                    self.recorder.record_long_wait(LongWait {
                        waited: t.waited(),
                        waiter_label: label.to_string(),
                        holder_label: holder.as_ref().map(describe).unwrap_or_default(),
                        holder_sql: holder.map(|h| h.sql).unwrap_or_default(),
                    });
                }
                Ok(Some(t))
            }
            Ok(Err(crate::xproc::NoTurn::TimedOut)) => Err(self.busy_error(q, timeout)),
            Ok(Err(crate::xproc::NoTurn::Cancelled)) => Err(self.interrupted_error()),
            Err(degraded) => {
                // An I/O error on the lock file: go on without the queue
                // (SQLite's own locks still keep the file consistent).
                self.recorder.note_process_queue_off(degraded.to_string());
                Ok(None)
            }
        }
    }

    /// Runs one job inside the group's transaction (opening one if needed).
    /// Returns false when the turn should stop taking jobs (the transaction
    /// could not even begin).
    fn run_member<'a>(
        &self,
        slot: &mut Slot,
        group: &mut Option<Group<'a>>,
        mut member: Member<'a>,
    ) -> bool {
        self.start_job(slot, member.job());
        let conn = &slot.conn;
        let leader = group.is_none();
        if let Err((e, go_on)) = self.open_member(conn, group, member.job().label()) {
            member.settle(Err(e));
            return go_on;
        }
        let changes_before = conn.total_changes();
        let failure = self.run_job(conn, &mut member);
        let label = member.job().label().to_string();
        if conn.is_autocommit() {
            self.transaction_ended(group, member, label, failure);
            return true;
        }
        match failure {
            None if !leader => match control(conn, "RELEASE litelane_job") {
                Ok(()) => group
                    .as_mut()
                    .expect("open group")
                    .keep(conn, changes_before, member),
                Err(e) => {
                    let e = Error::from_sqlite(e, "RELEASE litelane_job");
                    self.abort_group(conn, group, &label, &e);
                    member.settle(Err(e));
                }
            },
            None => group
                .as_mut()
                .expect("open group")
                .keep(conn, changes_before, member),
            Some(e) => {
                self.recorder.rollbacks.fetch_add(1, Ordering::Relaxed);
                let undone = if leader {
                    // Nothing else is in the transaction: undo all of it.
                    *group = None;
                    control(conn, "ROLLBACK")
                } else {
                    undo_savepoint(conn, "litelane_job")
                };
                if let Err(undo) = undone {
                    // The job's changes may still be in the transaction:
                    // never commit it.
                    let undo = Error::from_sqlite(undo, "undoing a failed write");
                    self.abort_group(conn, group, &label, &undo);
                }
                member.settle(Err(e));
            }
        }
        true
    }

    /// Opens a member's part of the group's transaction: `BEGIN IMMEDIATE`
    /// for the first (the leader, which starts the group), a savepoint for
    /// the others. `Err((error, go_on))` when it could not: the member is
    /// to be told `error`, and the group goes on when `go_on`.
    fn open_member(
        &self,
        conn: &Connection,
        group: &mut Option<Group<'_>>,
        label: &str,
    ) -> std::result::Result<(), (Error, bool)> {
        if group.is_none() {
            let begun = end_stale_transaction(conn).and_then(|()| {
                control(conn, "BEGIN IMMEDIATE").context(|| "BEGIN IMMEDIATE".into())
            });
            if let Err(e) = begun {
                self.recorder.note_error(&e);
                return Err((e, false));
            }
            *group = Some(Group {
                members: Vec::new(),
                rows: 0,
                started: Instant::now(),
            });
        } else if let Err(e) = control(conn, "SAVEPOINT litelane_job") {
            let e = Error::from_sqlite(e, "SAVEPOINT litelane_job");
            self.recorder.note_error(&e);
            if conn.is_autocommit() {
                let g = group.as_mut().expect("open group");
                g.roll_back_all(label, &e);
                *group = None;
            }
            return Err((e, true));
        }
        Ok(())
    }

    /// Runs a member's closure: its error, if it failed, panicked, or left
    /// deferred foreign-key violations (which would fail at `COMMIT`: it
    /// fails alone now, so it cannot sink the other jobs of its group).
    fn run_job(&self, conn: &Connection, member: &mut Member<'_>) -> Option<Error> {
        match member.job().run(&Tx::new(conn)) {
            Ran::Ok if crate::ffi::has_deferred_fk_violations(conn) => Some(deferred_fk_error()),
            Ran::Ok => None,
            Ran::Err(e) => {
                self.recorder.note_error(&e);
                Some(e)
            }
            Ran::Panicked => Some(Error::user("the write closure panicked")),
        }
    }

    /// A statement of the member labelled `label` ended the whole
    /// transaction: every member of the group is told it was rolled back,
    /// and this one that it was the cause.
    fn transaction_ended(
        &self,
        group: &mut Option<Group<'_>>,
        member: Member<'_>,
        label: String,
        failure: Option<Error>,
    ) {
        self.recorder.rollbacks.fetch_add(1, Ordering::Relaxed);
        let cause = failure.unwrap_or_else(|| {
            Error::invalid(
                "a statement of the write ended the transaction (INSERT OR ROLLBACK, \
                 RAISE(ROLLBACK), ROLLBACK, or an error SQLite answers with a rollback) \
                 and the closure returned Ok",
            )
        });
        let mut g = group.take().expect("open group");
        self.recorder
            .rollbacks
            .fetch_add(g.members.len() as u64, Ordering::Relaxed);
        g.roll_back_all(&label, &cause);
        member.settle(Err(Error::RolledBack {
            by: label,
            cause: Box::new(cause),
            retryable: false,
        }));
    }

    /// Rolls the whole transaction back and tells every member so.
    fn abort_group(
        &self,
        conn: &Connection,
        group: &mut Option<Group<'_>>,
        by: &str,
        cause: &Error,
    ) {
        self.recorder.note_error(cause);
        if !conn.is_autocommit() {
            let _ = control(conn, "ROLLBACK");
        }
        if let Some(mut g) = group.take() {
            self.recorder
                .rollbacks
                .fetch_add(g.members.len() as u64, Ordering::Relaxed);
            g.roll_back_all(by, cause);
        }
    }

    /// Before a `COMMIT`, inside the transaction (so under SQLite's WAL write
    /// lock): keeps the WAL file allocated ahead of its frames.
    fn reserve_wal(&self, slot: &mut Slot) {
        if let Some(space) = &mut slot.wal_space {
            if !slot.conn.is_autocommit() {
                space.before_commit(self.recorder.wal_pages.load(Ordering::Relaxed));
            }
        }
    }

    /// Runs the `COMMIT` of `what` (the writer's own, past its commit hook):
    /// every commit of the writer goes through here. Under `shared_sync`
    /// the commit is not durable yet: it is counted, and the caller hands
    /// the turns on and then calls [`Writer::make_durable`] with it.
    /// `what` describes the commit for an error; it runs only when one is
    /// reported (not on the path of every commit).
    fn commit_now(
        &self,
        conn: &Connection,
        what: &dyn Fn() -> String,
    ) -> Result<Option<CountedCommit>> {
        if self.moved.has_moved(conn) {
            // Committing would acknowledge writes into a file nobody can
            // open again.
            return Err(Error::Io {
                context: format!("COMMIT of {}", what()),
                message: format!(
                    "the database file {} was moved, deleted or replaced while open; nothing \
                     was committed: reopen the database",
                    self.db_path
                ),
                os: None,
            });
        }
        // Read inside the transaction: cheaper than after it (a read of its own).
        let version = schema_version(conn);
        self.committing.store(true, Ordering::Release);
        let r = control(conn, "COMMIT").context(|| format!("COMMIT of {}", what()));
        self.committing.store(false, Ordering::Release);
        if r.is_ok() {
            self.schema.writer_at(version);
        }
        match r {
            Ok(()) => Ok(match (&self.shared_sync, &self.process_queue) {
                (Some(_), Some(q)) => Some(q.count_commit()),
                _ => None,
            }),
            // SQLite synced inside the COMMIT (`synchronous=FULL`, or a
            // rollback journal) and the sync failed: the transaction is not
            // published in this process, but its frames (commit marker
            // included) or pages may be on the disk, and a crash can bring
            // it back. Not "failed": unknown.
            Err(e) if e.is_sync_failure() => Err(self.stop_on(self.unknown_from_commit(conn, e))),
            Err(e) => Err(e),
        }
    }

    /// After an [`Error::OutcomeUnknown`]: the writer takes no more writes.
    /// Returns the error.
    fn stop_on(&self, e: Error) -> Error {
        if let Error::OutcomeUnknown { file, .. } = &e {
            self.stop_writes(format!(
                "an earlier commit's outcome is unknown (the fsync of {file} failed)"
            ));
        }
        e
    }

    /// [`Error::OutcomeUnknown`] for `e`, an [`Error::Sqlite`] whose sync of
    /// `file` failed; `explain` turns SQLite's message into the cause. Any
    /// other error comes back as it is.
    fn unknown(&self, e: Error, file: String, explain: impl FnOnce(String) -> String) -> Error {
        let Error::Sqlite {
            code,
            extended_code,
            message,
            context,
            os,
        } = e
        else {
            return e;
        };
        Error::OutcomeUnknown {
            path: self.db_path.clone(),
            file,
            code,
            extended_code,
            cause: explain(message),
            context,
            os,
        }
    }

    /// [`Error::OutcomeUnknown`] for an SQLite error of a `COMMIT` whose
    /// sync failed (`e` is an [`Error::Sqlite`]).
    fn unknown_from_commit(&self, conn: &Connection, e: Error) -> Error {
        let wal = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .is_ok_and(|m| m.eq_ignore_ascii_case("wal"));
        let file = match wal {
            true => format!("{}-wal", self.db_path),
            false => format!("{} (or its journal)", self.db_path),
        };
        self.unknown(e, file, |message| {
            format!(
                "{message}; SQLite did not publish the transaction in this process, but \
                 what it wrote may be on the disk and come back after a crash"
            )
        })
    }

    /// For a write outside the writer's transactions
    /// ([`Database::write_outside_transaction`](crate::Database::write_outside_transaction)):
    /// an fsync failure of a statement that committed on its own (a
    /// `VACUUM` under `synchronous=FULL`) is an [`Error::OutcomeUnknown`]
    /// and stops the writer, as at a `COMMIT`.
    fn settle_outside<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(e) if e.is_sync_failure() => {
                let file = format!("{}-wal (or its journal)", self.db_path);
                self.stop_writes(format!(
                    "an earlier write's outcome is unknown (the fsync of {file} failed)"
                ));
                Err(self.unknown(e, file, |message| message))
            }
            r => r,
        }
    }

    /// Marks the writer as taking no more writes (see [`Writer::check_writable`]).
    fn stop_writes(&self, reason: String) {
        let mut stopped = lock(&self.stopped);
        if stopped.is_none() {
            *stopped = Some(reason);
        }
    }

    /// Refuses a write, before it does anything, once a commit's outcome was
    /// unknown: on this handle ([`Writer::stop_writes`]), or in any process
    /// of the cross-process queue (the failure mark of its lock file, see
    /// `xproc/durable.rs`: no commit after it could be confirmed).
    pub(crate) fn check_writable(&self) -> Result<()> {
        let mark = self.process_queue.as_ref().and_then(|q| {
            let at = q.sync_failed_at()?;
            Some((at, q.lock_path().display().to_string()))
        });
        if let Some((at, _)) = &mark {
            self.stop_writes(format!(
                "an fsync of {}-wal failed (at commit {at}), in this or another process",
                self.db_path
            ));
        }
        let Some(reason) = lock(&self.stopped).clone() else {
            return Ok(());
        };
        let reason = match mark {
            None => reason,
            Some((_, lock_file)) => format!(
                "{reason}; the failure is recorded in {lock_file} for every process using the \
                 database, and no commit can be confirmed durable until the disk and the \
                 database are checked (litelane doctor --integrity) and that lock file is \
                 removed while no process has the database open"
            ),
        };
        Err(Error::WritesStopped {
            path: self.db_path.clone(),
            reason,
        })
    }

    /// Makes a commit counted by [`Writer::commit_now`] durable, after the
    /// caller handed the turns on: the next writer of any thread or process
    /// commits while this one syncs, and one fsync covers every commit
    /// counted before it began. The sync goes through the syncer
    /// connection's handle on the WAL, never the writer's connection, which
    /// the next turn is using.
    fn make_durable(&self, commit: Option<CountedCommit>, what: &dyn Fn() -> String) -> Result<()> {
        let (Some(commit), Some(wal), Some(q), Some(syncer)) =
            (commit, &self.shared_sync, &self.process_queue, &self.syncer)
        else {
            return Ok(());
        };
        let mut sync = || crate::ffi::sync_journal(&lock(syncer));
        let (error, failed_at) = match q.make_durable(commit, self.carry.alone_lately(), &mut sync)
        {
            Ok(ran) => {
                let counter = match ran {
                    true => &self.recorder.wal_syncs,
                    false => &self.recorder.syncs_shared,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(crate::xproc::NotDurable::SyncFailed { error, failed_at }) => (error, failed_at),
        };
        let cause = match &error {
            Some(e) => format!(
                "{e}; the commit is written and visible, and may or may not survive a power loss"
            ),
            None => format!(
                "an fsync of it failed earlier (at commit {failed_at} counted in {}), here or in \
                 another process: this commit is visible, but no commit since then can be \
                 confirmed durable; check the disk, then remove that lock file while no process \
                 has the database open",
                q.lock_path().display()
            ),
        };
        Err(self.stop_on(Error::OutcomeUnknown {
            path: self.db_path.clone(),
            file: wal.display().to_string(),
            code: codes::SQLITE_IOERR,
            extended_code: codes::SQLITE_IOERR_FSYNC,
            cause,
            context: format!("making {} durable after its COMMIT", what()),
            os: error.map(OsError::from),
        }))
    }

    /// Commits the group. A failed commit settles every member at once; a
    /// commit still to be made durable is returned, to be settled by
    /// [`Writer::settle_durable`] once the turns are handed on.
    fn commit<'a>(
        &self,
        conn: &Connection,
        mut g: Group<'a>,
    ) -> Option<(Group<'a>, CountedCommit)> {
        let jobs = g.members.len();
        for m in &mut g.members {
            m.job().committing();
        }
        match self.commit_now(conn, &|| group_label(jobs)) {
            Ok(Some(counted)) => {
                if let Some(seq) = counted.seq() {
                    // Other processes' statements: what their posters get
                    // if this process dies before its fsync ends.
                    g.members.retain_mut(|m| !m.job().committed_at(seq));
                }
                Some((g, counted))
            }
            Ok(None) => {
                self.settle_group(conn, &mut g, Ok(()));
                None
            }
            Err(e) => {
                self.settle_group(conn, &mut g, Err(e));
                None
            }
        }
    }

    /// Makes a committed group durable, then settles its members.
    fn settle_durable(&self, mut g: Group<'_>, counted: CountedCommit) {
        let jobs = g.members.len();
        let result = self.make_durable(Some(counted), &|| group_label(jobs));
        if let Err(e) = &result {
            self.recorder.note_error(e);
        }
        self.settle_group_outcome(&mut g, result);
    }

    /// Settles every member of a group with the outcome of its `COMMIT`,
    /// rolling back what a failed one left open.
    fn settle_group(&self, conn: &Connection, g: &mut Group<'_>, result: Result<()>) {
        if let Err(e) = &result {
            self.recorder.note_error(e);
            if !conn.is_autocommit() {
                let _ = control(conn, "ROLLBACK");
            }
        }
        self.settle_group_outcome(g, result);
    }

    /// Records the group's outcome and tells every member.
    fn settle_group_outcome(&self, g: &mut Group<'_>, result: Result<()>) {
        let jobs = g.members.len();
        match result {
            Ok(()) => {
                self.recorder.record_group(jobs);
                self.recorder
                    .transactions
                    .fetch_add(jobs as u64, Ordering::Relaxed);
                self.recorder
                    .rows_written
                    .fetch_add(g.rows, Ordering::Relaxed);
                for m in g.members.drain(..) {
                    m.settle(Ok(()));
                }
            }
            Err(e) => {
                self.recorder.record_failed_commit(&e, jobs as u64);
                for m in g.members.drain(..) {
                    m.settle(Err(e.clone()));
                }
            }
        }
    }
}
