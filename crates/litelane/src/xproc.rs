//! The cross-process writer queue: one fair, crash-safe queue of write turns
//! shared by every process that opens the same database file.
//!
//! SQLite itself lets one writer in at a time and makes the others retry
//! (`busy_timeout`): a sleeping retry loop with no order and no bound. This
//! module gives the processes a queue instead, kept in a small *lock file*
//! beside the database (`<db>-lane`), made only of byte-range
//! open-file-description locks (`F_OFD_SETLKW`, Linux 3.15+) and a header
//! with two counters:
//!
//! * **Tickets.** A writer takes the next ticket `t` (a counter in the
//!   header, updated while holding a lock on byte 0 of the file — a few
//!   microseconds), and write-locks its own *ticket byte* `BASE + t` in the
//!   same critical section. It keeps that lock for as long as it waits and
//!   holds the turn. Ticket bytes are never reused (`t` is a 62-bit counter).
//! * **Turns in ticket order.** Ticket `t` holds the turn once every ticket
//!   below `t` is *finished* (released, or its process died). The header's
//!   `floor` is the ticket of the last turn taken: every ticket below it is
//!   finished. The waiter walks down from `k = t - 1`: if `k < floor` it has
//!   the turn; if ticket `k`'s byte is still write-locked it sleeps in the
//!   kernel (`F_OFD_SETLKW` for a read lock on that byte) until the lock goes
//!   away — released or dropped by the kernel when its process died — then
//!   goes on with `k - 1`. Only a ticket's own process can hold its byte, and
//!   it holds it from before anyone can see the ticket until it is finished,
//!   so "the byte is free" means "the ticket is finished".
//! * **Crash release.** The kernel drops every lock of an open file
//!   description when its last descriptor closes, which includes the death
//!   of the process (SIGKILL, panic=abort, OOM kill). A dead holder's
//!   successor wakes at once; a dead waiter is stepped over by the next
//!   waiter's walk. There is no lease and no timeout.
//! * **Doorbells.** For its first 20 ms a waiter sleeps on a shared futex
//!   that the ticket ahead rings when it ends its turn, on its own thread
//!   and with a timeout, instead of in the kernel's lock wait (which has no
//!   timeout, so a timed wait would need a helper thread): see
//!   `xproc/doorbell.rs`. The byte locks stay the truth; the doorbell only
//!   says when to look at them.
//!
//! The module holds no SQLite code: the engine takes a turn before
//! `BEGIN IMMEDIATE` of each group and drops it after `COMMIT`. See
//! `docs/concurrency.md`, "Across processes", for the proof sketch, the
//! failure modes and what other systems would need.
//!
//! No `unsafe` here: the locks go through [`nix::fcntl::fcntl`].

#![deny(unsafe_code)]

use crate::unpoisoned::lock;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use layout::Record;

/// The suffix of the lock file, appended to the database file's name:
/// `app.db` → `app.db-lane`.
pub const LOCK_FILE_SUFFIX: &str = "-lane";

/// Why the cross-process queue is off for a database. The engine then falls
/// back to SQLite's busy timeout between processes (today's behaviour) and
/// shows this in its metrics; it is never a reason to fail an open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    /// The lock file the queue would use (`<db>-lane`).
    pub lock_path: PathBuf,
    /// What went wrong, in words (the OS error, or what was wrong with the
    /// file).
    pub reason: String,
}

impl fmt::Display for Degraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cross-process writer queue off ({}): {}; writers of other processes \
             meet through SQLite's busy timeout instead",
            self.lock_path.display(),
            self.reason
        )
    }
}

impl std::error::Error for Degraded {}

/// Who holds the cross-process turn right now (see [`ProcessQueue::holder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderInfo {
    /// Process id of the holder.
    pub pid: u32,
    /// The holder's ticket (tickets are granted in increasing order).
    pub ticket: u64,
    /// The label the holder passed to [`ProcessQueue::acquire`], at most
    /// [`MAX_LABEL_BYTES`] bytes.
    pub label: String,
    /// The statement the holder last reported with [`ProcessTurn::set_sql`]
    /// (`""` if none), at most [`MAX_SQL_BYTES`] bytes.
    pub sql: String,
    /// When the holder's turn began (wall clock).
    pub since: SystemTime,
}

/// Longest label kept in the lock file, in bytes (longer ones are cut at a
/// character boundary).
pub const MAX_LABEL_BYTES: usize = 120;
/// Longest SQL text kept in the lock file, in bytes (longer ones are cut at
/// a character boundary).
pub const MAX_SQL_BYTES: usize = 360;

/// The path of the lock file for the database at `db_path`.
pub fn lock_path_for(db_path: &Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push(LOCK_FILE_SUFFIX);
    PathBuf::from(name)
}

/// A failed fsync of the WAL recorded in the lock file of the database at
/// `db_path` (see `xproc/durable.rs`): the lock file's path and the commit
/// count at which it failed. While it is there, every litelane process
/// refuses writes to the database (`Error::WritesStopped`). `None`: no lock
/// file, not a litelane lock file, no failure recorded, or not Linux.
/// Reads only: creates, locks and changes nothing.
pub fn recorded_sync_failure(db_path: &Path) -> Option<(PathBuf, u64)> {
    let resolved = std::fs::canonicalize(db_path).unwrap_or_else(|_| db_path.to_path_buf());
    let lock_path = lock_path_for(&resolved);
    let at = lock_file::read_failed_at(&lock_path)?;
    Some((lock_path, at))
}

/// A handle on the cross-process queue of one database. Cheap to clone; safe
/// to use from any thread (each turn uses its own open file description, so
/// turns of two threads of one process also queue in order).
#[derive(Clone)]
pub struct ProcessQueue {
    shared: Arc<Shared>,
}

struct Shared {
    lock_path: PathBuf,
    /// The lock file [`ProcessQueue::open`] judged: every reopen must find
    /// this one at `lock_path` (see `xproc/trust.rs`).
    id: lock_file::FileId,
    /// Open file descriptions not in use by a turn, kept for the next turns.
    idle: Mutex<Vec<File>>,
    pid: u32,
    /// The shared sync counters (`None`: not mapped; commits sync alone).
    #[cfg(target_os = "linux")]
    counters: Option<durable::Counters>,
    /// The doorbells (`None`: not mapped; waiters use the kernel wait only).
    #[cfg(target_os = "linux")]
    bells: Option<doorbell::Doorbells>,
    /// The words of bounded barging (`None`: not mapped; turns are taken
    /// by ticket only).
    #[cfg(target_os = "linux")]
    barging: Option<barge::Barging>,
    /// The job slots of combined commits (`None`: not mapped; every write
    /// takes its own turn).
    #[cfg(target_os = "linux")]
    jobs: Option<Arc<jobs::Jobs>>,
    /// The open file description that read-locks the presence byte for as
    /// long as this queue is open (`None`: no presence lock could be taken;
    /// others then always seem present).
    presence: Option<File>,
}

/// A kernel wait handed to the waiter thread.
type WaitJob = Box<dyn FnOnce() + Send>;

/// How many idle open file descriptions a queue keeps.
const MAX_IDLE_FILES: usize = 8;

/// How often a wait asks its caller whether to keep waiting
/// ([`Patience`]): 50 ms.
pub(crate) const ASK_EVERY: Duration = Duration::from_millis(50);

/// What a wait blocked by a lock on the lock file that no litelane writer
/// holds says about it.
pub(crate) const FOREIGN: &str = "a process that is not a litelane writer may hold a lock on it \
     (any user who can read the lock file can read-lock it)";

/// How long [`ProcessQueue::open`] waits for the header mutex of an
/// existing lock file before it gives up on the queue: 2 s. Writers hold it
/// for microseconds; a lock held longer is not a writer's (see
/// [`ProcessQueue::open_waiting`]).
pub const OPEN_WAIT: Duration = Duration::from_secs(2);

/// Why a wait for the turn ended without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoTurn {
    /// The caller's deadline came.
    TimedOut,
    /// The caller's `keep_waiting` said to stop (a signal in Python).
    Cancelled,
}

/// How long a wait for the turn may last, and whom to ask whether to go on:
/// every wait of the queue (the header mutex, the turn byte, a ticket, a
/// posted statement's outcome) checks it at least every
/// [`doorbell::POLL`]-sized step, and asks `keep_waiting` at most every
/// [`ASK_EVERY`].
pub(crate) struct Patience<'a> {
    until: Option<Instant>,
    keep_waiting: &'a dyn Fn() -> bool,
    next_ask: std::cell::Cell<Instant>,
}

impl<'a> Patience<'a> {
    /// Until `until` (`None`: no deadline), asking `keep_waiting`.
    pub(crate) fn new(until: Option<Instant>, keep_waiting: &'a dyn Fn() -> bool) -> Patience<'a> {
        Patience {
            until,
            keep_waiting,
            next_ask: std::cell::Cell::new(Instant::now() + ASK_EVERY),
        }
    }

    /// Why to stop waiting now, if the deadline came or the caller says so.
    pub(crate) fn check(&self) -> Result<(), NoTurn> {
        let now = Instant::now();
        if self.until.is_some_and(|u| now >= u) {
            return Err(NoTurn::TimedOut);
        }
        if now >= self.next_ask.get() {
            self.next_ask.set(now + ASK_EVERY);
            if !(self.keep_waiting)() {
                return Err(NoTurn::Cancelled);
            }
        }
        Ok(())
    }

    /// The deadline, if any.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// How long the next sleep may last: `step`, cut to the deadline and
    /// to the next time the caller is asked.
    pub(crate) fn nap(&self, step: Duration) -> Duration {
        let now = Instant::now();
        let mut nap = step.min(self.next_ask.get().saturating_duration_since(now));
        if let Some(u) = self.until {
            nap = nap.min(u.saturating_duration_since(now));
        }
        nap
    }
}

/// Why a step of the queue's algorithm stopped: an I/O error of the lock
/// file (the caller goes on without the queue), or the caller's patience.
#[derive(Debug)]
pub(crate) enum Stop {
    Failed(String),
    No(NoTurn),
}

impl From<String> for Stop {
    fn from(e: String) -> Stop {
        Stop::Failed(e)
    }
}

impl From<NoTurn> for Stop {
    fn from(n: NoTurn) -> Stop {
        Stop::No(n)
    }
}

/// How [`ProcessQueue::acquire`] waits for the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// In ticket order, for as long as the turns ahead last; there is no
    /// timeout. The thread sleeps in the kernel while it waits (no
    /// polling) and wakes when the turn before it ends, whether by drop or
    /// by the death of its process.
    Forever,
    /// In ticket order, giving up after the duration (`Ok(None)`): a holder
    /// that hangs (stopped, in a debugger, deadlocked) is not released by
    /// the kernel; the engine then reports it like SQLite's busy timeout
    /// would. When the turn is free it is taken on the calling thread;
    /// otherwise the wait runs on a helper thread, which after a timeout
    /// stays queued until the turns ahead end, then steps aside at once
    /// without taking the turn: a holder hung for good costs one sleeping
    /// thread and one file descriptor per timed-out call.
    Timeout(Duration),
    /// As [`Wait::Timeout`], first trying for up to [`BARGE_WINDOW`] (6 ms)
    /// to take the turn out of order the moment it is free, while no ticket
    /// whose turn has come is waiting for it: bounded barging, see
    /// `xproc/barge.rs`. Such a turn has no ticket ([`OUT_OF_ORDER`]).
    /// While tickets wait, at most [`MAX_BARGED_PER_TICKET`] turns go out
    /// of order between two turns by ticket (plus one per writer that had
    /// already looked), and a ticket whose turn has come is overtaken by at
    /// most one turn of each other writer (the bound, and its model check,
    /// in `xproc/barge.rs`).
    ///
    /// This is the engine's way to the turn: with more processes than
    /// cores, the next ticket's process is often asleep, and the turn would
    /// stay idle until it runs (docs/concurrency.md, "Bounded barging").
    Barging(Duration),
}

/// How the engine waits for the turn ([`ProcessQueue::acquire_as`]): a
/// [`Wait`] with the caller's [`Patience`] (its deadline, and whom to ask
/// whether to go on), or the wait of a process that posted its statement.
pub(crate) enum Policy<'a, 'p> {
    /// [`Wait::Forever`]: nothing to ask, no deadline.
    Forever,
    /// [`Wait::Timeout`], while the patience lasts.
    Tickets(&'a Patience<'p>),
    /// [`Wait::Barging`], while the patience lasts.
    Barging(&'a Patience<'p>),
    /// In ticket order on the doorbells only, while the patience lasts, and
    /// until another process ran the posted job (`xproc/jobs.rs`).
    #[cfg(target_os = "linux")]
    Watching(&'a Patience<'p>, &'a mut Posted),
}

/// How [`ProcessQueue::acquire_as`] ended.
pub(crate) enum Acquired {
    /// The turn is ours; a posted job is still ours to withdraw or wait for.
    Turn(ProcessTurn),
    /// Another process ran the posted job in its commit: its outcome. The
    /// ticket taken for the turn is finished.
    #[cfg(target_os = "linux")]
    Ended(JobOutcome),
    /// A live leader has the posted job: the ticket is finished (the turn
    /// is not needed); wait with [`ProcessQueue::wait_for_outcome`].
    #[cfg(target_os = "linux")]
    InFlight,
    /// Nothing came while the caller's patience lasted.
    Stopped(NoTurn),
}

impl Acquired {
    /// The turn, or why it did not come: all a wait that watches no posted
    /// job can end with.
    pub(crate) fn into_turn(self) -> Result<ProcessTurn, NoTurn> {
        match self {
            Acquired::Turn(turn) => Ok(turn),
            Acquired::Stopped(why) => Err(why),
            #[cfg(target_os = "linux")]
            Acquired::Ended(_) | Acquired::InFlight => {
                unreachable!("only a wait that watches a posted job ends with it")
            }
        }
    }
}

impl From<Result<ProcessTurn, NoTurn>> for Acquired {
    fn from(got: Result<ProcessTurn, NoTurn>) -> Acquired {
        match got {
            Ok(turn) => Acquired::Turn(turn),
            Err(why) => Acquired::Stopped(why),
        }
    }
}

impl fmt::Debug for ProcessQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessQueue")
            .field("lock_path", &self.shared.lock_path)
            .finish()
    }
}

/// The cross-process write turn, held until dropped (RAII). While it lives,
/// no other holder of a [`ProcessTurn`] on the same database, in any
/// process, holds one. Dropping it (or the death of the process) passes the
/// turn to the next ticket. `Send`: it may be dropped on another thread than
/// the one that acquired it.
pub struct ProcessTurn {
    shared: Arc<Shared>,
    file: Option<File>,
    ticket: u64,
    waited: Duration,
    label: String,
    since: SystemTime,
}

impl fmt::Debug for ProcessTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessTurn")
            .field("ticket", &self.ticket)
            .field("waited", &self.waited)
            .finish()
    }
}

impl ProcessTurn {
    /// This turn's ticket. Turns taken by ticket are granted in strictly
    /// increasing ticket order, and tickets are taken in arrival order. A
    /// turn taken out of order ([`Wait::Barging`]) has no
    /// ticket: [`OUT_OF_ORDER`] (0; tickets start at 1).
    pub fn ticket(&self) -> u64 {
        self.ticket
    }

    /// How long [`ProcessQueue::acquire`] waited for this turn.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// True when another queue on this database is open, in this process
    /// or another (see [`ProcessQueue::others_present`]).
    pub fn others_present(&self) -> bool {
        self.shared.others_present()
    }

    /// The bell that writers of every process ring when they have to wait
    /// for the turn (`None`: the lock file's first page is not mapped).
    #[cfg(target_os = "linux")]
    pub fn wanted_bell(&self) -> Option<doorbell::WantedBell> {
        self.shared.bells.as_ref().map(|b| b.wanted())
    }

    /// The descriptor whose open file description holds this turn's locks
    /// (`None` once the turn has ended). A child of `fork()` that inherited
    /// it may close it (and only close it: OFD locks are the description's,
    /// so the parent keeps them) so that the turn does not outlive the
    /// parent in the child.
    #[cfg(unix)]
    pub fn lock_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.file.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Records `sql` as the statement this turn is running, for
    /// [`ProcessQueue::holder`] in other processes. One `pwrite` of 512
    /// bytes; errors are ignored (it is only information).
    pub fn set_sql(&self, sql: &str) {
        if let Some(file) = &self.file {
            let rec = Record {
                ticket: self.ticket,
                state: layout::STATE_HOLDING,
                pid: self.shared.pid,
                since: self.since,
                label: self.label.clone(),
                sql: sql.to_string(),
            };
            self.shared.write_record(file, &rec);
        }
    }
}

/// How many times [`open_present`] opens a lock file that was removed
/// before this process announced itself on it: 100.
const PRESENCE_ATTEMPTS: u32 = 100;

/// Opens the lock file of `db_path` at `lock_path` (creating it if there
/// is none) and announces this queue on it through an open file
/// description of its own, returned third, which lives as long as the
/// queue: from then on no process removes the file (the last queue of a
/// file removes it, see `Drop for Shared`). A file removed between the
/// open and the announcement (or being removed: its presence byte is
/// write-locked, 1 ms apart) is opened again. The third is `None` when no
/// presence lock can be taken (no open-file-description locks): others
/// then always seem present, and the file is never removed.
fn open_present(
    db_path: &Path,
    lock_path: &Path,
) -> Result<(File, lock_file::FileId, Option<File>), String> {
    for _ in 0..PRESENCE_ATTEMPTS {
        let file = lock_file::open_lock_file(db_path, lock_path)?;
        let id = lock_file::file_id(&file)?;
        let announced = lock_file::reopen_same(lock_path, id)
            .map_err(io::Error::other)
            .and_then(|p| lock_file::announce_presence(&p).map(|on| on.then_some(p)));
        match announced {
            Ok(Some(presence)) if lock_file::is_at(lock_path, id) => {
                return Ok((file, id, Some(presence)))
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            Ok(Some(_)) => {}
            Err(_) if !lock_file::is_at(lock_path, id) => {}
            Err(_) => return Ok((file, id, None)),
        }
    }
    Err(format!(
        "the lock file was removed by other processes {PRESENCE_ATTEMPTS} times while this \
         one opened it"
    ))
}

impl Shared {
    /// Removes the lock file if no other queue (of any process) has it
    /// open, as SQLite removes `-wal` and `-shm` when its last connection
    /// closes: only in the process that opened this queue (a forked child
    /// shares its parent's open file descriptions, and with them its
    /// presence), and never while a failed fsync is marked in it (what
    /// other processes must learn: `durable.rs`). Afterwards this queue no
    /// longer counts as present: it must take no more turns.
    fn remove_lock_file_if_last(&self) -> bool {
        if std::process::id() != self.pid {
            return false;
        }
        #[cfg(target_os = "linux")]
        if self
            .counters
            .as_ref()
            .is_some_and(|c| c.failed_at().is_some())
        {
            return false;
        }
        self.presence
            .as_ref()
            .is_some_and(|p| lock_file::remove_if_last(p, &self.lock_path, self.id))
    }
}

impl Drop for Shared {
    /// The last queue of the file in any process removes the lock file
    /// ([`Shared::remove_lock_file_if_last`]).
    fn drop(&mut self) {
        self.remove_lock_file_if_last();
    }
}

impl Drop for ProcessTurn {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(j) = &self.shared.jobs {
            j.turn_ended(self.ticket);
        }
        if let Some(file) = self.file.take() {
            // Unlocking the turn byte, then our ticket byte (if we have a
            // ticket), passes the turn. If that fails, closing the file
            // (the last reference to its open file description) drops the
            // locks anyway.
            let by_ticket = self.ticket != OUT_OF_ORDER;
            if lock_file::unlock_turn_byte(&file).is_ok()
                && (!by_ticket || lock_file::unlock_ticket(&file, self.ticket).is_ok())
            {
                self.shared.put_idle(file);
            } else {
                drop(file); // closing it drops the locks
            }
            // Only once the bytes are free: a waiter that wakes looks at them.
            if by_ticket {
                self.shared.ring(self.ticket);
            }
            self.shared.ring_turn();
        }
    }
}

/// How long [`Wait::Barging`] tries to take a free turn
/// out of order before it takes a ticket: 6 ms, about three rounds of 16
/// single-threaded `safe` writers on 2 cores (a turn there is ~110 µs), so
/// that a writer gets chances to take a free turn before it queues. 2 ms
/// gave 8–32% fewer interactive commits at 16 processes
/// (docs/concurrency.md, "Bounded barging").
pub const BARGE_WINDOW: Duration = Duration::from_millis(6);

/// At most this many turns are taken out of order, while tickets wait,
/// between two turns taken by ticket (plus one for each writer that had
/// already looked; `xproc/barge.rs`).
pub const MAX_BARGED_PER_TICKET: u32 = 4;

/// The ticket of a turn taken out of order, without a ticket
/// ([`Wait::Barging`]); tickets start at 1.
pub const OUT_OF_ORDER: u64 = 0;

/// Cuts `s` to at most `max` bytes at a character boundary.
/// `s` cut to at most `max` bytes, at a character boundary.
pub(crate) fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl ProcessQueue {
    /// Opens (creating if needed) the queue of the database at `db_path`:
    /// the lock file `<db_path>-lane` (see [`lock_path_for`]; symbolic links
    /// to the database are resolved first). A new lock file gets read and
    /// write for the owner, and for the group and others only when they may
    /// write the database (`0o644` → `0o600`, `0o664` → `0o660`, `0o666` →
    /// `0o666`; not narrowed by the umask), and, when created by root, the
    /// database's owner and group. A database that does not exist yet counts
    /// as this process's, mode `0o644`.
    ///
    /// An existing lock file is used only when whoever can write it can
    /// write the database: it belongs to the database's owner or to this
    /// process's effective user (any owner when everyone may write the
    /// database), its group and other write bits are no wider than the
    /// database's, it is group-writable only with the database's group, and
    /// it has one hard link (docs/concurrency.md, "Who can do what: the lock
    /// file's trust").
    ///
    /// Fails with [`Degraded`] — the caller goes on without the queue — when
    /// the lock file cannot be created or opened for writing (read-only
    /// directory or file system, permissions), is a symbolic link or not a
    /// regular file, breaks one of the rules above (the reason names its
    /// owner, group and mode and the rule), holds something else than a
    /// litelane queue, when the platform or file system has no
    /// open-file-description locks, or on any other I/O error. A file it
    /// refuses is never written, truncated or chmod-ed.
    pub fn open(db_path: &Path) -> Result<ProcessQueue, Degraded> {
        Self::open_waiting(db_path, OPEN_WAIT)
    }

    /// [`open`](ProcessQueue::open), waiting at most `wait` for the lock
    /// file's header mutex ([`OPEN_WAIT`], 2 s, for `open`): when it stays
    /// locked longer (by a process that is not a litelane writer, or one
    /// stopped in its few microseconds under it) the queue is not opened
    /// ([`Degraded`]).
    pub fn open_waiting(db_path: &Path, wait: Duration) -> Result<ProcessQueue, Degraded> {
        Self::open_with(db_path, wait, true)
    }

    /// [`open`](ProcessQueue::open) for a process that only takes turns:
    /// it never runs the one-statement writes other processes post
    /// (combined commits) and never announces its turns as able to
    /// (so posters queue for the turn at once instead of waiting for it to
    /// take their job). Lane SQLite (`crates/litelane-sqlite`) opens its
    /// queues this way: its turns are SQLite's own transactions.
    pub fn open_turns_only(db_path: &Path) -> Result<ProcessQueue, Degraded> {
        Self::open_with(db_path, OPEN_WAIT, false)
    }

    fn open_with(
        db_path: &Path,
        wait: Duration,
        take_jobs: bool,
    ) -> Result<ProcessQueue, Degraded> {
        // Like SQLite's own `-wal` and `-shm`, the lock file goes beside the
        // file a symbolic link points to, so that every path to one
        // database meets in one queue.
        let resolved = std::fs::canonicalize(db_path).unwrap_or_else(|_| db_path.to_path_buf());
        let db_path = resolved.as_path();
        let lock_path = lock_path_for(db_path);
        let degraded = |reason: String| Degraded {
            lock_path: lock_path.clone(),
            reason,
        };
        let (file, id, presence) = open_present(db_path, &lock_path).map_err(degraded)?;
        lock_file::initialize(&file, wait).map_err(degraded)?;
        // Mapped through an open file description of its own, which no lock
        // is ever taken on: a mapping keeps its description alive after the
        // descriptor is closed, and with it every OFD lock of that
        // description (a turn's file is closed to drop its ticket).
        #[cfg(target_os = "linux")]
        let page = lock_file::reopen_same(&lock_path, id)
            .and_then(|f| crate::ffi::SharedPage::map(&f).map_err(|e| e.to_string()))
            .map(Arc::new)
            .ok();
        let (counters, bells, barging, jobs) = match page {
            Some(p) => (
                Some(durable::Counters::on(Arc::clone(&p))),
                Some(doorbell::Doorbells::on(Arc::clone(&p))),
                Some(barge::Barging::on(Arc::clone(&p), take_jobs)),
                // Lock bytes through a description of their own; none when
                // the file could not grow to hold the slots.
                (take_jobs && p.len() >= crate::ffi::SharedPage::LEN)
                    .then(|| lock_file::reopen_same(&lock_path, id).ok())
                    .flatten()
                    .map(|f| Arc::new(jobs::Jobs::on(p, f))),
            ),
            None => (None, None, None, None),
        };
        Ok(ProcessQueue {
            shared: Arc::new(Shared {
                lock_path,
                id,
                idle: Mutex::new(vec![file]),
                pid: std::process::id(),
                #[cfg(target_os = "linux")]
                counters,
                #[cfg(target_os = "linux")]
                bells,
                #[cfg(target_os = "linux")]
                barging,
                #[cfg(target_os = "linux")]
                jobs,
                presence,
            }),
        })
    }

    /// The lock file this queue uses.
    pub fn lock_path(&self) -> &Path {
        &self.shared.lock_path
    }

    /// For a queue that will take no more turns (its holder closed the last
    /// database file that used it) but may live on a little (a thread still
    /// holds it): removes the lock file now if no other queue of any process
    /// has it open, as closing the last handle on the queue does. Returns
    /// whether it removed it. Afterwards this queue no longer counts as
    /// present to others: take no turn on it.
    pub fn retire(&self) -> bool {
        self.shared.remove_lock_file_if_last()
    }

    /// Why combined commits are unavailable on this queue (`None`: they
    /// are available): the lock file could not grow to hold the job slots,
    /// or its first page could not be mapped.
    pub fn combining_off(&self) -> Option<String> {
        let path = self.shared.lock_path.display();
        #[cfg(target_os = "linux")]
        return match (&self.shared.jobs, &self.shared.bells) {
            (Some(_), _) => None,
            (None, None) => Some(format!(
                "{path} could not be mapped: commits sync alone, and one-statement writes \
                 wait for the turn instead of being committed by another process"
            )),
            (None, Some(_)) => Some(format!(
                "{path} could not grow to {} KiB (is the disk full?): only its first page is \
                 mapped, and one-statement writes wait for the turn instead of being \
                 committed by another process",
                crate::ffi::SharedPage::LEN / 1024
            )),
        };
        #[cfg(not(target_os = "linux"))]
        Some(format!("{path}: combined commits need Linux"))
    }

    /// Waits for the cross-process turn as `wait` says, and returns it: the
    /// turn ends when the [`ProcessTurn`] is dropped. `Ok(None)` when the
    /// turn did not come in the time `wait` gives (never for
    /// [`Wait::Forever`]).
    ///
    /// Turns are granted in ticket order, and tickets are taken in arrival
    /// order (arrivals within the few microseconds of one ticket's critical
    /// section may swap); [`Wait::Barging`] may first take a free turn out
    /// of order. `label` (at most [`MAX_LABEL_BYTES`] bytes kept) is shown
    /// to other processes by [`ProcessQueue::holder`].
    ///
    /// Fails with [`Degraded`] only on an I/O error of the lock file (the
    /// caller then goes on without the queue for this turn); the failed
    /// ticket is stepped over by the waiters behind it.
    pub fn acquire(&self, label: &str, wait: Wait) -> Result<Option<ProcessTurn>, Degraded> {
        let always = || true;
        let until = match wait {
            Wait::Forever => None,
            Wait::Timeout(timeout) | Wait::Barging(timeout) => Some(Instant::now() + timeout),
        };
        let patience = Patience::new(until, &always);
        let policy = match wait {
            Wait::Forever => Policy::Forever,
            Wait::Timeout(_) => Policy::Tickets(&patience),
            Wait::Barging(_) => Policy::Barging(&patience),
        };
        Ok(self.acquire_as(label, policy)?.into_turn().ok())
    }

    /// [`acquire`](ProcessQueue::acquire) for the engine: waits as `policy`
    /// says, for as long as its [`Patience`] lasts (a deadline, and a
    /// caller to ask whether to go on), and, for a process that posted its
    /// statement ([`Policy::Watching`]), until another process ran it.
    pub(crate) fn acquire_as(
        &self,
        label: &str,
        policy: Policy<'_, '_>,
    ) -> Result<Acquired, Degraded> {
        let start = Instant::now();
        let label = clip(label, MAX_LABEL_BYTES).to_string();
        match policy {
            Policy::Forever => self.wait_untimed(label, start).map(Acquired::Turn),
            Policy::Tickets(patience) => self
                .wait_by_ticket(label, start, patience)
                .map(Acquired::from),
            Policy::Barging(patience) => match self.barge_first(&label, start, patience)? {
                Some(got) => Ok(Acquired::from(got)),
                None => self
                    .wait_by_ticket(label, start, patience)
                    .map(Acquired::from),
            },
            #[cfg(target_os = "linux")]
            Policy::Watching(patience, posted) => {
                self.wait_watching(label, start, patience, posted)
            }
        }
    }

    /// [`Wait::Forever`]: the kernel waits run on this thread (untimed,
    /// they need no helper).
    fn wait_untimed(&self, label: String, start: Instant) -> Result<ProcessTurn, Degraded> {
        let always = || true;
        let forever = Patience::new(None, &always);
        let file = self.shared.take_idle().map_err(|e| self.degraded(e))?;
        let failed = |stop: Stop| match stop {
            Stop::Failed(e) => self.degraded(e),
            Stop::No(_) => self.degraded("an untimed wait for the turn ended".into()),
        };
        // On any error `file` is dropped (closed) on return: any lock it
        // still held, our ticket byte included, goes with it.
        let (ticket, since) = match self.shared.start(&file, &label, &forever) {
            Ok(lock_file::Start::Granted(t, since)) => (t, since),
            Ok(lock_file::Start::Wait(pending)) => {
                let window = start + doorbell_window();
                match self.shared.wait_on_bell(&file, pending, window, &forever) {
                    Ok(Waited::Granted(t, since)) => (t, since),
                    Ok(Waited::Pending(p)) => {
                        match lock_file::finish(&file, p, &|| true, &forever).map_err(failed)? {
                            Some(got) => got,
                            None => {
                                return Err(self.degraded("an open gate refused the turn".into()))
                            }
                        }
                    }
                    Err(e) => return Err(failed(e)),
                }
            }
            Err(e) => return Err(failed(e)),
        };
        match self.granted(file, ticket, start, label, since, &forever)? {
            Ok(turn) => Ok(turn),
            Err(_) => Err(self.degraded("an untimed wait for the turn byte ended".into())),
        }
    }

    /// [`Wait::Barging`]'s first step: tries for up to [`BARGE_WINDOW`]
    /// (6 ms) to take the turn out of order the moment it is free, while no
    /// ticket whose turn has come is waiting for it: bounded barging, see
    /// `xproc/barge.rs`. Such a turn has no ticket ([`OUT_OF_ORDER`]).
    /// `Ok(None)`: not taken, take a ticket.
    fn barge_first(
        &self,
        label: &str,
        start: Instant,
        patience: &Patience<'_>,
    ) -> Result<Option<Result<ProcessTurn, NoTurn>>, Degraded> {
        #[cfg(target_os = "linux")]
        if self.shared.barging.is_some() {
            let file = self.shared.take_idle().map_err(|e| self.degraded(e))?;
            let window = patience
                .until()
                .map_or(start + BARGE_WINDOW, |u| u.min(start + BARGE_WINDOW));
            match self.shared.barge(&file, window, patience) {
                Ok(true) => {
                    let since = SystemTime::now();
                    let record = Record {
                        ticket: OUT_OF_ORDER,
                        state: layout::STATE_HOLDING,
                        pid: self.shared.pid,
                        since,
                        label: label.to_string(),
                        sql: String::new(),
                    };
                    self.shared.write_record(&file, &record);
                    let turn = self.turn(file, OUT_OF_ORDER, start, label.to_string(), since);
                    return Ok(Some(Ok(turn)));
                }
                Ok(false) => self.shared.put_idle(file),
                Err(Stop::Failed(e)) => return Err(self.degraded(e)),
                Err(Stop::No(why)) => {
                    self.shared.put_idle(file);
                    return Ok(Some(Err(why)));
                }
            }
            if let Err(why) = patience.check() {
                return Ok(Some(Err(why)));
            }
        }
        let _ = (label, start, patience);
        Ok(None)
    }

    /// [`Wait::Timeout`]: a ticket, then its turn, while `patience` lasts,
    /// the wait counted from `start`. When the turn is free it is taken on
    /// the calling thread; otherwise the wait runs first on the doorbell of
    /// the ticket ahead, then on a helper thread (the kernel's lock wait
    /// has no timeout). After a timeout that thread stays queued until the
    /// turns ahead end, then steps aside at once without taking the turn;
    /// so a holder hung for good (stopped, in a debugger, deadlocked: the
    /// kernel does not release it) costs one sleeping thread and one file
    /// descriptor per timed-out call.
    fn wait_by_ticket(
        &self,
        label: String,
        start: Instant,
        patience: &Patience<'_>,
    ) -> Result<Result<ProcessTurn, NoTurn>, Degraded> {
        let file = self.shared.take_idle().map_err(|e| self.degraded(e))?;
        // On any error `file` is dropped (closed) on return: any lock it
        // still held, our ticket byte included, goes with it.
        let pending = match self.shared.start(&file, &label, patience) {
            Ok(lock_file::Start::Granted(t, since)) => {
                return self.granted(file, t, start, label, since, patience)
            }
            Ok(lock_file::Start::Wait(pending)) => pending,
            Err(Stop::Failed(e)) => return Err(self.degraded(e)),
            Err(Stop::No(why)) => return Ok(Err(why)),
        };
        // First on this thread, on the doorbell, for up to its window.
        let window = start + doorbell_window();
        let bell_until = patience.until().map_or(window, |u| u.min(window));
        let pending = match self
            .shared
            .wait_on_bell(&file, pending, bell_until, patience)
        {
            Ok(Waited::Granted(t, since)) => {
                return self.granted(file, t, start, label, since, patience)
            }
            Ok(Waited::Pending(p)) => match patience.check() {
                Ok(()) => p,
                Err(why) => {
                    self.give_up(file, p.ticket());
                    return Ok(Err(why));
                }
            },
            Err(Stop::Failed(e)) => return Err(self.degraded(e)),
            // The walk kept the pending ticket's file: closing it finishes
            // the ticket (the ring is for the waiter behind it).
            Err(Stop::No(why)) => {
                drop(file);
                return Ok(Err(why));
            }
        };
        // Then in the kernel, on a helper thread, while the caller waits.
        match self.wait_on_helper(file, pending, patience)? {
            Ok((file, ticket, since)) => self.granted(file, ticket, start, label, since, patience),
            Err(why) => Ok(Err(why)),
        }
    }

    /// Gives up a pending ticket: closing its file finishes the ticket, and
    /// the ring tells a waiter behind it at once.
    fn give_up(&self, file: File, ticket: u64) {
        drop(file);
        self.shared.ring(ticket);
    }

    /// The kernel's wait for a pending ticket's turn, which has no timeout,
    /// on a helper thread, while `patience` lasts: the ticket's file, the
    /// ticket and when its turn began, or why the caller stopped first (the
    /// helper then steps aside when the turn comes, without taking it).
    fn wait_on_helper(
        &self,
        file: File,
        pending: lock_file::Pending,
        patience: &Patience<'_>,
    ) -> Result<Result<(File, u64, SystemTime), NoTurn>, Degraded> {
        let state = Arc::new(Mutex::new(Helper::Waiting));
        let answer = self.start_helper(file, pending, &state)?;
        let (got, file) = match self.await_helper(&answer, &state, patience)? {
            Ok(message) => message,
            Err(why) => return Ok(Err(why)),
        };
        match got {
            Ok(Some((ticket, since))) => Ok(Ok((file, ticket, since))),
            Ok(None) => Err(self.degraded("the gate refused before the timeout".into())),
            Err(Stop::Failed(e)) => Err(self.degraded(e)),
            Err(Stop::No(why)) => Ok(Err(why)),
        }
    }

    /// Starts the helper thread that finishes the wait of `pending`, and
    /// returns where its answer will come: the outcome of the wait, with
    /// the ticket's file. Its gate lets it take the turn only while the
    /// caller has not given up (`state`).
    fn start_helper(
        &self,
        file: File,
        pending: lock_file::Pending,
        state: &Arc<Mutex<Helper>>,
    ) -> Result<mpsc::Receiver<HelperAnswer>, Degraded> {
        let (tx, rx) = mpsc::channel();
        let state = Arc::clone(state);
        let helper = self.shared.run_wait(Box::new(move || {
            let gate = || {
                let mut s = lock(&state);
                if *s == Helper::Abandoned {
                    return false;
                }
                *s = Helper::Granted;
                true
            };
            // No deadline of its own: it stops once the caller gave up
            // (a mutex held by someone else is polled, not slept on).
            let abandoned = || *lock(&state) != Helper::Abandoned;
            let patience = Patience::new(None, &abandoned);
            let r = lock_file::finish(&file, pending, &gate, &patience);
            // If the caller is gone, `file` is closed with the
            // message, and our ticket with it.
            let _ = tx.send((r, file));
        }));
        match helper {
            Ok(()) => Ok(rx),
            // The closure (with `file`) is dropped: the ticket goes with it.
            Err(e) => Err(self.degraded(format!("cannot start a waiting thread: {e}"))),
        }
    }

    /// Waits for the helper's answer while `patience` lasts; when it ends
    /// first, tells the helper to step aside, unless it was granted just
    /// then (its answer is then on its way, and taken).
    fn await_helper(
        &self,
        answer: &mpsc::Receiver<HelperAnswer>,
        state: &Mutex<Helper>,
        patience: &Patience<'_>,
    ) -> Result<Result<HelperAnswer, NoTurn>, Degraded> {
        let died = || self.degraded("the waiting thread died".into());
        loop {
            let why = match patience.check() {
                Ok(()) => match answer.recv_timeout(patience.nap(ASK_EVERY)) {
                    Ok(m) => return Ok(Ok(m)),
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Err(died()),
                },
                Err(why) => why,
            };
            let mut s = lock(state);
            if *s != Helper::Granted {
                *s = Helper::Abandoned;
                return Ok(Err(why));
            }
            drop(s);
            // Granted just as we gave up: the message is on its way.
            return answer.recv().map(Ok).map_err(|_| died());
        }
    }

    /// A ticket's turn has come: takes the turn byte, waiting while
    /// `patience` lasts for a turn taken out of order to end, and returns
    /// the turn. `Ok(Err(why))` when `patience` ended first; the ticket is
    /// then finished (its file closed, the next ticket rung).
    fn granted(
        &self,
        file: File,
        ticket: u64,
        start: Instant,
        label: String,
        since: SystemTime,
        patience: &Patience<'_>,
    ) -> Result<Result<ProcessTurn, NoTurn>, Degraded> {
        match self.shared.take_turn_byte(&file, ticket, patience) {
            Ok(()) => Ok(Ok(self.turn(file, ticket, start, label, since))),
            Err(stop) => {
                drop(file); // closing it finishes the ticket
                self.shared.ring(ticket);
                match stop {
                    Stop::Failed(e) => Err(self.degraded(e)),
                    Stop::No(why) => Ok(Err(why)),
                }
            }
        }
    }

    fn turn(
        &self,
        file: File,
        ticket: u64,
        start: Instant,
        label: String,
        since: SystemTime,
    ) -> ProcessTurn {
        #[cfg(target_os = "linux")]
        if let Some(j) = &self.shared.jobs {
            j.turn_taken(ticket);
        }
        ProcessTurn {
            shared: Arc::clone(&self.shared),
            file: Some(file),
            ticket,
            waited: start.elapsed(),
            label,
            since,
        }
    }

    /// Who holds the turn right now, in any process (`None` when nobody
    /// does, or the holder's record cannot be read — it is also overwritten
    /// once 64 more tickets have been taken behind it).
    pub fn holder(&self) -> Option<HolderInfo> {
        let file = self.shared.take_idle().ok()?;
        let out = self.shared.holder(&file);
        self.shared.put_idle(file);
        out
    }

    /// Who held the turn granted just before `ticket` (the turn a waiter
    /// with that ticket waited for), from the lock file's records: for
    /// attributing a long wait after the fact. `None` when the record is gone
    /// (64 or more tickets later) or unreadable.
    pub fn turn_before(&self, ticket: u64) -> Option<HolderInfo> {
        let file = self.shared.take_idle().ok()?;
        let out = lock_file::record_of(&file, ticket.checked_sub(1)?);
        self.shared.put_idle(file);
        out
    }

    /// The locks on the lock file that no litelane writer takes, as
    /// sentences for an error: a read lock on the header mutex (byte 0) or
    /// on the turn byte (1), which writers only ever write-lock. Empty when
    /// there are none or they cannot be queried.
    pub fn foreign_locks(&self) -> Vec<String> {
        let Ok(file) = self.shared.take_idle() else {
            return Vec::new();
        };
        let out = [
            (layout::MUTEX_BYTE, "header mutex"),
            (layout::TURN_BYTE, "turn byte"),
        ]
        .into_iter()
        .filter(|&(byte, _)| lock_file::read_locked(&file, byte).unwrap_or(false))
        .map(|(byte, what)| {
            format!(
                "byte {byte} (the {what}) of {} is read-locked by a process that is not a \
                     litelane writer",
                self.shared.lock_path.display()
            )
        })
        .collect();
        self.shared.put_idle(file);
        out
    }

    /// True when another queue on this database is open, in this process or
    /// another: one `F_OFD_GETLK` on the presence byte of the lock file,
    /// which every open queue read-locks until it is dropped or its process
    /// dies. True as well when that cannot be known (no lock file, an
    /// error).
    pub fn others_present(&self) -> bool {
        self.shared.others_present()
    }

    /// How many tickets were taken after the current (or last) turn: the
    /// writers queued behind it in every process, plus any that died while
    /// waiting and were not stepped over yet (so an upper bound). `0` when
    /// the header cannot be read.
    pub fn queued(&self) -> u64 {
        let Ok(file) = self.shared.take_idle() else {
            return 0;
        };
        let out = lock_file::queued(&file);
        self.shared.put_idle(file);
        out
    }

    /// How many writers wait for the turn, in every process: the tickets
    /// queued behind the current turn ([`queued`](ProcessQueue::queued),
    /// an upper bound), plus the ticket whose turn has come while it waits
    /// for a turn taken out of order to end.
    pub fn waiting(&self) -> u64 {
        #[cfg(target_os = "linux")]
        let head = self
            .shared
            .barging
            .as_ref()
            .is_some_and(|b| b.head_waiting());
        #[cfg(not(target_os = "linux"))]
        let head = false;
        self.queued() + u64::from(head)
    }

    fn degraded(&self, reason: String) -> Degraded {
        Degraded {
            lock_path: self.shared.lock_path.clone(),
            reason,
        }
    }
}

/// Where the helper thread of a timed wait stands
/// ([`ProcessQueue::wait_on_helper`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Helper {
    /// Still waiting for the turn.
    Waiting,
    /// Its gate let it take the turn: the caller takes its answer.
    Granted,
    /// The caller gave up: the helper steps aside when the turn comes.
    Abandoned,
}

/// What the helper thread sends back: how the kernel's wait ended, and the
/// ticket's file.
type HelperAnswer = (Result<Option<(u64, SystemTime)>, Stop>, File);

/// How a wait on the doorbell ended.
enum Waited {
    /// The turn is ours: the ticket and when the turn began.
    Granted(u64, SystemTime),
    /// Still waiting (the window ended, or there are no doorbells): go on
    /// with the kernel wait.
    Pending(lock_file::Pending),
}

/// The doorbell window (0 where there are none).
fn doorbell_window() -> Duration {
    #[cfg(target_os = "linux")]
    return doorbell::WINDOW;
    #[cfg(not(target_os = "linux"))]
    Duration::ZERO
}

impl Shared {
    /// Waits for a pending ticket's turn on the calling thread, on the
    /// doorbell of the ticket ahead, until `until` (see `xproc/doorbell.rs`).
    fn wait_on_bell(
        &self,
        file: &File,
        pending: lock_file::Pending,
        until: Instant,
        patience: &Patience<'_>,
    ) -> Result<Waited, Stop> {
        self.wait_on_bell_watching(file, pending, until, &mut |_| false, patience)
    }

    /// [`wait_on_bell`](Shared::wait_on_bell), also stopping (pending) as
    /// soon as `watch`, asked with the ticket about to be slept on before
    /// each sleep, says so.
    fn wait_on_bell_watching(
        &self,
        file: &File,
        pending: lock_file::Pending,
        until: Instant,
        watch: &mut dyn FnMut(u64) -> bool,
        patience: &Patience<'_>,
    ) -> Result<Waited, Stop> {
        #[cfg(target_os = "linux")]
        if let Some(bells) = &self.bells {
            return lock_file::finish_on_bell(file, pending, bells, until, watch, patience);
        }
        let _ = (file, until, watch, patience);
        Ok(Waited::Pending(pending))
    }

    /// Takes a ticket ([`lock_file::start`]); one that has to wait rings the
    /// wanted bell, which ends a turn kept by a process that was alone.
    fn start(
        &self,
        file: &File,
        label: &str,
        patience: &Patience<'_>,
    ) -> Result<lock_file::Start, Stop> {
        let started = lock_file::start(file, self.pid, label, patience);
        #[cfg(target_os = "linux")]
        if let (Ok(lock_file::Start::Wait(_)), Some(bells)) = (&started, &self.bells) {
            bells.wanted().ring();
        }
        started
    }

    fn others_present(&self) -> bool {
        self.presence
            .as_ref()
            .is_none_or(|f| lock_file::others_present(f).unwrap_or(true))
    }

    /// Rings the doorbell of a ticket whose byte was just unlocked.
    fn ring(&self, ticket: u64) {
        #[cfg(target_os = "linux")]
        if let Some(bells) = &self.bells {
            bells.ring(ticket);
        }
        let _ = ticket;
    }

    /// Rings the turn bell: the turn byte was just unlocked.
    fn ring_turn(&self) {
        #[cfg(target_os = "linux")]
        if let Some(b) = &self.barging {
            b.ring();
        }
    }

    /// Rings the wanted bell: a turn kept by a process that was alone
    /// (`carry.rs`) is given back.
    #[cfg(target_os = "linux")]
    fn want(&self) {
        if let Some(bells) = &self.bells {
            bells.wanted().ring();
        }
    }

    /// Writes a turn's record: to the ticket's slot of the lock file, or,
    /// for a turn taken out of order, to the barging record of the first
    /// page. Errors are ignored (it is only information).
    fn write_record(&self, file: &File, record: &Record) {
        #[cfg(target_os = "linux")]
        if record.ticket == OUT_OF_ORDER {
            if let Some(b) = &self.barging {
                b.write_record(&layout::encode_record(record));
            }
            return;
        }
        let _ = lock_file::write_record(file, record);
    }

    /// Who holds the turn (see [`ProcessQueue::holder`]).
    fn holder(&self, file: &File) -> Option<HolderInfo> {
        #[cfg(target_os = "linux")]
        if let Some(b) = &self.barging {
            if !lock_file::turn_byte_locked(file).ok()? {
                return None;
            }
            if b.held_out_of_order() {
                let mut bytes = [0u8; layout::RECORD_LEN];
                b.read_record(&mut bytes);
                let r = layout::decode_record(&bytes)?;
                return (r.ticket == OUT_OF_ORDER && r.state == layout::STATE_HOLDING).then_some(
                    HolderInfo {
                        pid: r.pid,
                        ticket: OUT_OF_ORDER,
                        label: r.label,
                        sql: r.sql,
                        since: r.since,
                    },
                );
            }
        }
        lock_file::holder(file)
    }

    /// Tries to take the turn out of order through `file`, each time a turn
    /// ends and every [`doorbell::POLL`], until `until`, while no ticket
    /// whose turn has come waits for it (`xproc/barge.rs`). `Ok(false)`:
    /// not taken (take a ticket).
    #[cfg(target_os = "linux")]
    fn barge(&self, file: &File, until: Instant, patience: &Patience<'_>) -> Result<bool, Stop> {
        let Some(b) = &self.barging else {
            return Ok(false);
        };
        let (mut wanted, mut moving) = (false, true);
        loop {
            let seen = b.seen();
            let waiting = self.tickets_waiting();
            if !b.head_waiting()
                && (!waiting || b.barged() < MAX_BARGED_PER_TICKET)
                && lock_file::lock_turn_byte_now(file)
                    .map_err(|e| lock_file::ctx("cannot lock the turn byte", e))?
            {
                if waiting {
                    b.count_barged();
                }
                b.note_holder(OUT_OF_ORDER);
                return Ok(true);
            }
            if !wanted {
                self.want();
                wanted = true;
            }
            let now = Instant::now();
            if now >= until {
                return Ok(false);
            }
            patience.check()?;
            moving = b.wait(
                seen,
                patience.nap((until - now).min(doorbell::POLL)),
                moving,
            );
        }
    }

    /// Takes the turn byte for `ticket`, whose turn has come: at once when
    /// it is free, else announced as the head (nobody barges from then on)
    /// and waiting, while `patience` lasts, for the turn taken out of order
    /// that holds it (or a lock on it that is not a writer's).
    #[cfg(target_os = "linux")]
    fn take_turn_byte(
        &self,
        file: &File,
        ticket: u64,
        patience: &Patience<'_>,
    ) -> Result<(), Stop> {
        let try_now = || {
            lock_file::lock_turn_byte_now(file)
                .map_err(|e| lock_file::ctx("cannot lock the turn byte", e))
        };
        let barging = self.barging.as_ref();
        // Taken: no ticket below ours is live, so an announced head left in
        // the page is a dead one's; clearing it lets writers barge again.
        let taken = |b: &barge::Barging| {
            b.clear_head();
            b.reset_barged();
            b.note_holder(ticket);
        };
        if try_now()? {
            barging.inspect(|b| taken(b));
            return Ok(());
        }
        barging.inspect(|b| b.announce(ticket));
        self.want();
        let mut moving = true;
        let got: Result<(), Stop> = loop {
            let seen = barging.map(|b| b.seen());
            match try_now() {
                Ok(false) => {}
                Ok(true) => break Ok(()),
                Err(e) => break Err(e.into()),
            }
            if let Err(why) = patience.check() {
                break Err(why.into());
            }
            let nap = patience.nap(doorbell::POLL);
            // Without the shared page (no barging in this process, but
            // maybe in others) poll.
            match (barging, seen) {
                (Some(b), Some(seen)) => moving = b.wait(seen, nap, moving),
                _ => std::thread::sleep(nap),
            }
        };
        if let Some(b) = barging {
            match got {
                Ok(()) => taken(b),
                _ => b.withdraw(ticket),
            }
        }
        got
    }

    /// True when tickets may be waiting: the header in the mapped page has
    /// tickets after the last one granted (dead ones count until a walk
    /// steps over them), or cannot be read whole (a read racing a write).
    #[cfg(target_os = "linux")]
    fn tickets_waiting(&self) -> bool {
        let Some(b) = &self.barging else {
            return true;
        };
        let mut bytes = [0u8; layout::HEADER_LEN];
        b.read_header(&mut bytes);
        match layout::decode_header(&bytes) {
            layout::HeaderBytes::Valid(h) => h.next > h.floor + 1,
            _ => true,
        }
    }

    /// Elsewhere: no turn byte (no queue at all).
    #[cfg(not(target_os = "linux"))]
    fn take_turn_byte(&self, _: &File, _: u64, _: &Patience<'_>) -> Result<(), Stop> {
        Ok(())
    }

    /// Runs `job` (a kernel wait, which has no timeout) on a thread of its
    /// own, so that its caller can give up. One thread per wait, started
    /// only after the doorbell window (20 ms) has passed: the waits of
    /// several threads of this process (several connections, each with a
    /// ticket of its own) reach here in any order, and one thread running
    /// them one after another would leave an earlier ticket's wait queued
    /// behind a later one that waits for it: every caller then timed out
    /// (seen with a pool of 16 connections in one Go process on lane
    /// SQLite).
    fn run_wait(&self, job: WaitJob) -> Result<(), String> {
        std::thread::Builder::new()
            .name("litelane-xproc-wait".into())
            .spawn(job)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn take_idle(&self) -> Result<File, String> {
        let pooled = lock(&self.idle).pop();
        match pooled {
            Some(f) => Ok(f),
            None => lock_file::reopen_same(&self.lock_path, self.id),
        }
    }

    fn put_idle(&self, file: File) {
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE_FILES {
            idle.push(file);
        }
    }
}

#[cfg(target_os = "linux")]
mod barge;
#[cfg(target_os = "linux")]
mod doorbell;
#[cfg(target_os = "linux")]
mod durable;
#[cfg(target_os = "linux")]
mod jobs;
mod layout;
#[cfg(target_os = "linux")]
mod lock_file;
#[cfg(not(target_os = "linux"))]
#[path = "xproc/lock_file_elsewhere.rs"]
mod lock_file;
#[cfg(target_os = "linux")]
mod spin;
#[cfg(target_os = "linux")]
mod trust;
#[cfg(target_os = "linux")]
pub use doorbell::WantedBell;
#[cfg(target_os = "linux")]
pub use jobs::JobStates;
#[cfg(target_os = "linux")]
pub(crate) use jobs::{Outcome as JobOutcome, Posted, Taken};

/// How [`ProcessQueue::wait_for_outcome`] ended.
#[cfg(target_os = "linux")]
pub(crate) enum Awaited {
    /// The job's outcome.
    Ended(JobOutcome),
    /// Its leader died before committing it: it is posted again; wait for
    /// the turn ([`Policy::Watching`]) again.
    Posted,
    /// Nothing while the caller's patience lasted.
    Stopped(NoTurn),
}

#[cfg(target_os = "linux")]
impl ProcessQueue {
    /// Posts a one-statement write for whichever process holds the turn to
    /// run in its transaction (see `xproc/jobs.rs`): `None` when there are
    /// no job slots, no free slot, or the statement and its parameters do
    /// not fit in one (4 KiB).
    pub(crate) fn post(&self, sql: &str, params: &[crate::Value]) -> Option<Posted> {
        self.shared.jobs.as_ref()?.post(sql, params)
    }

    /// Says whether this process's connections run with SQLite's stock
    /// settings (`Options::stock_settings`): its one-statement writes are
    /// then combined only with those of processes that say the same.
    pub(crate) fn set_stock_settings(&self, on: bool) {
        if let Some(jobs) = &self.shared.jobs {
            jobs.set_stock_settings(on);
        }
    }

    /// What [`set_stock_settings`](ProcessQueue::set_stock_settings) said
    /// (false without job slots).
    pub(crate) fn stock_settings(&self) -> bool {
        self.shared
            .jobs
            .as_ref()
            .is_some_and(|j| j.stock_settings())
    }

    /// How many job slots are in each state (all zero without job slots).
    pub fn job_states(&self) -> JobStates {
        self.shared
            .jobs
            .as_ref()
            .map(|j| j.states())
            .unwrap_or_default()
    }

    /// True when some job is posted and waiting (a read of the slots'
    /// state words, no system call).
    pub(crate) fn jobs_waiting(&self) -> bool {
        self.shared.jobs.as_ref().is_some_and(|j| j.any_posted())
    }

    /// Waits, up to `timeout`, for a post after the caller's last look at
    /// the slots ([`posts_seen`](ProcessQueue::posts_seen), read before it).
    pub(crate) fn wait_for_posts(&self, seen: u32, timeout: Duration) {
        if let Some(j) = &self.shared.jobs {
            j.wait_for_posts(seen, timeout);
        }
    }

    /// The count of posts so far (see [`wait_for_posts`](ProcessQueue::wait_for_posts)).
    pub(crate) fn posts_seen(&self) -> u32 {
        self.shared.jobs.as_ref().map_or(0, |j| j.posts_seen())
    }

    /// Takes up to `max` posted jobs for the caller, who holds the turn, to
    /// run in its transaction before its `COMMIT`.
    pub(crate) fn take_jobs(&self, max: usize) -> Vec<Taken> {
        match &self.shared.jobs {
            Some(jobs) if max > 0 => jobs.take(max),
            _ => Vec::new(),
        }
    }

    /// [`Policy::Watching`]: waits, while `patience` lasts, for the turn
    /// or for another process to run `posted`, whichever comes first (as
    /// [`Wait::Timeout`] otherwise, on the doorbells only). A job a leader
    /// could not run is freed on the way: the caller runs it in its turn.
    fn wait_watching(
        &self,
        label: String,
        start: Instant,
        patience: &Patience<'_>,
        posted: &mut Posted,
    ) -> Result<Acquired, Degraded> {
        let turn = Acquired::from;
        let file = self.shared.take_idle().map_err(|e| self.degraded(e))?;
        let pending = match self.shared.start(&file, &label, patience) {
            Ok(lock_file::Start::Granted(t, since)) => {
                return self
                    .granted(file, t, start, label, since, patience)
                    .map(turn)
            }
            Ok(lock_file::Start::Wait(pending)) => pending,
            Err(Stop::Failed(e)) => return Err(self.degraded(e)),
            Err(Stop::No(why)) => return Ok(Acquired::Stopped(why)),
        };
        let mut stop = None;
        let mut watch = |k: u64| {
            posted.sleeping_on(k);
            match posted.progress() {
                jobs::Progress::Ended(o) => stop = Some(Acquired::Ended(o)),
                jobs::Progress::InFlight => stop = Some(Acquired::InFlight),
                jobs::Progress::Waiting | jobs::Progress::Refused => {}
            }
            stop.is_some()
        };
        // The doorbells' wait, for as long as the caller waits.
        let until = patience
            .until()
            .unwrap_or_else(|| start + Duration::from_secs(86_400));
        let waited = self
            .shared
            .wait_on_bell_watching(&file, pending, until, &mut watch, patience);
        let finished = |ticket: u64, file: File| {
            // Unlocking finishes the ticket; the ring tells the waiter
            // behind it at once.
            if lock_file::unlock_ticket(&file, ticket).is_ok() {
                self.shared.put_idle(file);
            } else {
                drop(file); // closing it drops the lock
            }
            self.shared.ring(ticket);
        };
        match waited {
            Ok(Waited::Granted(t, since)) => self
                .granted(file, t, start, label, since, patience)
                .map(turn),
            Ok(Waited::Pending(p)) => {
                finished(p.ticket(), file);
                Ok(stop.unwrap_or(Acquired::Stopped(NoTurn::TimedOut)))
            }
            Err(Stop::Failed(e)) => Err(self.degraded(e)),
            Err(Stop::No(why)) => {
                drop(file); // closing it finishes the ticket
                Ok(Acquired::Stopped(why))
            }
        }
    }

    /// Waits, while `patience` lasts, for the outcome of `posted`, which a leader
    /// has (after the caller's turn came while that leader was making its
    /// commit durable), or [`Awaited::Stopped`] when `patience` ends first.
    pub(crate) fn wait_for_outcome(&self, posted: &mut Posted, patience: &Patience<'_>) -> Awaited {
        self.wait_for_taker(posted, patience, Duration::ZERO)
    }

    /// When a turn seems held, waits up to `jobs::UNTAKEN_WAIT` for its
    /// holder to take `posted`, and then for the outcome, while `patience` lasts:
    /// a poster whose job is taken never queues for the turn.
    /// [`Awaited::Posted`] when nobody took it (queue for the turn then).
    pub(crate) fn wait_if_turn_held(
        &self,
        posted: &mut Posted,
        patience: &Patience<'_>,
    ) -> Awaited {
        match &self.shared.jobs {
            Some(j) if j.turn_held() => self.wait_for_taker(posted, patience, jobs::UNTAKEN_WAIT),
            _ => Awaited::Posted,
        }
    }

    /// Waits for the outcome of `posted`, up to `timeout`, giving up early
    /// ([`Awaited::Posted`]) once it has been untaken for `untaken_for`.
    fn wait_for_taker(
        &self,
        posted: &mut Posted,
        patience: &Patience<'_>,
        untaken_for: Duration,
    ) -> Awaited {
        let start = Instant::now();
        // A doorbell of our own to sleep on: the one of a ticket long past.
        let bell = u64::from(self.shared.pid);
        let mut untaken_since = start;
        loop {
            let seen = self.shared.bells.as_ref().map(|b| b.seen(bell));
            posted.sleeping_on(bell);
            match posted.progress() {
                jobs::Progress::Ended(o) => return Awaited::Ended(o),
                jobs::Progress::Refused => return Awaited::Posted,
                jobs::Progress::Waiting if untaken_since.elapsed() >= untaken_for => {
                    return Awaited::Posted
                }
                jobs::Progress::Waiting => {}
                jobs::Progress::InFlight => untaken_since = Instant::now(),
            }
            if let Err(why) = patience.check() {
                return Awaited::Stopped(why);
            }
            // Look again at least every `UNTAKEN_WAIT` (1 ms): the giving
            // up above is timed in that unit.
            let nap = patience.nap(jobs::UNTAKEN_WAIT);
            match (&self.shared.bells, seen) {
                (Some(b), Some(seen)) => b.wait(bell, seen, nap),
                _ => std::thread::sleep(nap),
            }
        }
    }
}
/// Why a commit could not be confirmed durable (see
/// [`ProcessQueue::make_durable`]).
#[derive(Debug)]
pub enum NotDurable {
    /// An `fdatasync` of the WAL that covered this commit, or one before it,
    /// failed (in this process or another): the commit is visible now, and
    /// may or may not survive a power loss.
    SyncFailed {
        /// The failure, when it was this process's own fsync.
        error: Option<std::io::Error>,
        /// The commit count at which an fsync failed (0 when the commit
        /// synced alone, without the shared counters).
        failed_at: u64,
    },
}

/// A commit made with `synchronous=NORMAL`, counted for the shared fsync
/// ([`ProcessQueue::count_commit`]) and not yet known durable.
#[derive(Debug, Clone, Copy)]
#[must_use = "a counted commit is durable only once make_durable returned Ok"]
pub struct CountedCommit {
    /// Its place in the shared count (`None`: the counters are not mapped;
    /// the commit syncs alone).
    seq: Option<u64>,
}

impl CountedCommit {
    /// Its place in the shared count (`None`: not counted; it syncs alone).
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }

    /// A commit that another process counted at `seq` (a combined commit,
    /// `xproc/jobs.rs`): made durable by [`ProcessQueue::make_durable`] as
    /// one of this process's own.
    pub(crate) fn counted_elsewhere(seq: u64) -> CountedCommit {
        CountedCommit { seq: Some(seq) }
    }
}

impl ProcessQueue {
    /// The commit count at which an fsync of the WAL failed, in any process
    /// using this lock file (`None`: never, or no shared counters). Once
    /// set it stays until the lock file is removed (see `xproc/durable.rs`).
    pub fn sync_failed_at(&self) -> Option<u64> {
        #[cfg(target_os = "linux")]
        if let Some(counters) = &self.shared.counters {
            return counters.failed_at();
        }
        None
    }

    /// Counts a commit that the calling thread has just made with
    /// `synchronous=NORMAL`, while it still holds the writer's turn: an
    /// fsync that starts after this covers it. Then hand the turns on, and
    /// call [`make_durable`](ProcessQueue::make_durable).
    pub fn count_commit(&self) -> CountedCommit {
        #[cfg(target_os = "linux")]
        if let Some(counters) = &self.shared.counters {
            return CountedCommit {
                seq: Some(counters.count()),
            };
        }
        CountedCommit { seq: None }
    }

    /// Makes a counted commit durable, sharing one `fdatasync` of the WAL
    /// with the commits that other threads and processes counted meanwhile
    /// (see `xproc/durable.rs`). Call it after handing the turns on, so that
    /// the next writer commits while this one syncs. `sync` flushes the WAL
    /// file (an `fdatasync` of it flushes what every process wrote); it is
    /// called at most twice, and as the fallback when the lock file cannot
    /// be used.
    ///
    /// `alone`: this process found itself alone on the file lately (no
    /// other process to share a sync with; a wrong `true` costs only an
    /// fsync that could have been shared).
    ///
    /// `Ok(true)`: this call ran the fsync; `Ok(false)`: one that another
    /// call (of any process) ran after this commit covered it.
    pub fn make_durable(
        &self,
        commit: CountedCommit,
        alone: bool,
        sync: &mut dyn FnMut() -> std::io::Result<()>,
    ) -> Result<bool, NotDurable> {
        #[cfg(target_os = "linux")]
        if let (Some(counters), Some(seq)) = (&self.shared.counters, commit.seq) {
            if let Ok(file) = self.shared.take_idle() {
                let out = counters.wait_durable(&file, alone, seq, &mut *sync);
                self.shared.put_idle(file);
                if let Ok(out) = out {
                    return out;
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (commit, alone);
        sync().map(|()| true).map_err(|e| NotDurable::SyncFailed {
            error: Some(e),
            failed_at: 0,
        })
    }
}

#[cfg(test)]
mod model;

/// `path` opened for reading and writing, created if needed (tests).
#[cfg(all(test, target_os = "linux"))]
fn scratch_file(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

/// A new, initialized lock file in a temporary directory (for the tests of
/// the modules that map it): the directory, the file's path, and an open
/// description of it.
#[cfg(all(test, target_os = "linux"))]
fn scratch_lock_file() -> (tempfile::TempDir, PathBuf, File) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db-lane");
    let f = scratch_file(&path);
    lock_file::initialize(&f, OPEN_WAIT).unwrap();
    (dir, path, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head that died announced (its word left in the page) stops
    /// barging only until the next turn taken by ticket, which clears it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_dead_heads_announcement_is_cleared_by_the_next_ticket_turn() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let q = ProcessQueue::open(&db).unwrap();
        let wait = Duration::from_secs(5);
        let b = q.shared.barging.as_ref().expect("the page is mapped");
        b.announce(999); // a head that died waiting for the turn byte
        let t = q
            .acquire("no barging", Wait::Barging(wait))
            .unwrap()
            .unwrap();
        assert_ne!(
            t.ticket(),
            OUT_OF_ORDER,
            "no barging past an announced head"
        );
        drop(t);
        assert!(!b.head_waiting(), "the ticket's turn cleared it");
        let t = q
            .acquire("barging again", Wait::Barging(wait))
            .unwrap()
            .unwrap();
        assert_eq!(t.ticket(), OUT_OF_ORDER);
    }

    /// A writer that takes a ticket and has to wait rings the wanted bell
    /// (which ends a turn kept by a process alone, `carry.rs`); one that
    /// finds the turn free rings nothing.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_writer_that_has_to_wait_rings_the_wanted_bell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let q = ProcessQueue::open(&path).unwrap();
        let other = ProcessQueue::open(&path).unwrap();
        let free = other.acquire("free", Wait::Forever).unwrap().unwrap();
        let bell = free.wanted_bell().expect("the first page is mapped");
        let seen = bell.seen();
        drop(free);
        let held = q.acquire("holder", Wait::Forever).unwrap().unwrap();
        assert_eq!(bell.seen(), seen, "a free turn rings nothing");
        let waited = other
            .acquire("waiter", Wait::Timeout(Duration::from_millis(30)))
            .unwrap();
        assert!(waited.is_none(), "the turn is held");
        assert_ne!(bell.seen(), seen, "the waiter rang");
        drop(held);
    }

    /// A lock file is mapped whole when it holds the job slots, by its
    /// first page alone when it could not grow (combined commits off), and
    /// not at all below that: never past its end (`SIGBUS`).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_mapping_never_reaches_past_the_file() {
        use crate::ffi::SharedPage;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db-lane");
        let file = super::scratch_file(&path);
        for (size, mapped) in [
            (100, None),
            (SharedPage::MIN_LEN, Some(SharedPage::MIN_LEN)),
            (SharedPage::LEN - 1, Some(SharedPage::MIN_LEN)),
            (SharedPage::LEN, Some(SharedPage::LEN)),
        ] {
            file.set_len(size as u64).unwrap();
            let page = SharedPage::map(&file);
            assert_eq!(
                page.as_ref().ok().map(SharedPage::len),
                mapped,
                "{size} bytes"
            );
        }
        let short = {
            file.set_len(SharedPage::MIN_LEN as u64).unwrap();
            SharedPage::map(&file).unwrap()
        };
        let past = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            short
                .word32(SharedPage::MIN_LEN)
                .load(std::sync::atomic::Ordering::SeqCst)
        }));
        assert!(past.is_err(), "a word past the mapping was handed out");
    }

    #[test]
    fn lock_path_appends_the_suffix() {
        assert_eq!(
            lock_path_for(Path::new("/data/app.db")),
            PathBuf::from("/data/app.db-lane")
        );
    }
}
