//! Lane SQLite's side of litelane's cross-process writer queue.
//!
//! Lane SQLite is SQLite itself (the same version the engine bundles),
//! built with `SQLITE_ENABLE_SETLK_TIMEOUT` and a `lane` VFS
//! (`c/lane_vfs.c`) that wraps the `unix` VFS and is the default one. In
//! such a build SQLite asks for the WAL's WRITER lock with a *blocking*
//! lock call before it takes its read snapshot (autocommit writes,
//! `BEGIN IMMEDIATE`/`EXCLUSIVE`, a `BEGIN` whose first statement writes,
//! checkpoints that need the lock), with the connection's busy timeout as
//! the lock timeout. The VFS turns that one lock call into a turn of the
//! engine's queue ([`litelane::xproc::ProcessQueue`]) on the same
//! `<db>-lane` file, so every lane SQLite program, in any language, and
//! every litelane engine process queue in one fair line, asleep in the
//! kernel, and a dead holder's turn passes at once.
//!
//! This crate is the static library the VFS calls: [`acquire`] and
//! [`Turn`] (dropped to end the turn) in Rust, exported to C by a private
//! module. `scripts/build-lane-sqlite` links it into `libsqlite3.so.0` and
//! ships it beside the amalgamation; `docs/lane-sqlite.md` is the guide.

#![deny(unsafe_code)]

mod ffi;

use litelane::xproc::{Degraded, ProcessQueue, ProcessTurn};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The write turn of one database, held until dropped (or until the
/// process dies: the kernel then passes it on).
#[derive(Debug)]
pub struct Turn {
    _turn: ProcessTurn,
}

/// What [`acquire`] got.
#[derive(Debug)]
pub enum Acquired {
    /// The turn: take SQLite's own lock now, and drop the turn after
    /// releasing it.
    Turn(Turn),
    /// The timeout passed before the turn came; the message says who held
    /// it (for `sqlite3_log`).
    TimedOut(String),
    /// This database has no queue: the caller locks as stock SQLite does.
    /// `Some(reason)` the first time this process is told so (to log it
    /// once), `None` after.
    Off(Option<String>),
}

/// Queues by database path, opened once per process; `Err`: the queue is
/// off for that database, and whether that was reported yet.
type Queues = HashMap<PathBuf, Result<ProcessQueue, (Degraded, bool)>>;

/// The queues of this process, with the process id they were opened in:
/// a child of `fork()` inherits the parent's open file descriptions, on
/// which the parent's locks live, so it opens its own.
struct Registry {
    pid: u32,
    queues: Queues,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            pid: std::process::id(),
            queues: HashMap::new(),
        })
    })
}

/// The queue of `db_path`, opened on first use, or why there is none
/// (`Some` the first time only).
fn queue(db_path: &Path) -> Result<ProcessQueue, Option<String>> {
    let mut reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    if reg.pid != pid {
        // Forked: the inherited queues' descriptions are shared with the
        // parent, and their locks with them. Closing them here would not
        // release the parent's locks, but their drop also rings bells and
        // writes records in the parent's name: forget them instead.
        std::mem::forget(std::mem::take(&mut reg.queues));
        reg.pid = pid;
    }
    let entry = reg
        .queues
        .entry(db_path.to_path_buf())
        .or_insert_with(|| ProcessQueue::open_turns_only(db_path).map_err(|d| (d, false)));
    match entry {
        Ok(q) => Ok(q.clone()),
        Err((d, told)) => {
            let first = !*told;
            *told = true;
            Err(first.then(|| d.to_string()))
        }
    }
}

/// The label a lane SQLite turn shows to other processes
/// ([`litelane::xproc::HolderInfo::label`]): `lane SQLite: <program>`.
fn label() -> &'static str {
    static LABEL: OnceLock<String> = OnceLock::new();
    LABEL.get_or_init(|| {
        let name = std::fs::read_to_string("/proc/self/comm")
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| {
                std::env::current_exe()
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            })
            .unwrap_or_else(|| "?".into());
        format!("lane SQLite: {name}")
    })
}

/// Waits at most `timeout` for the write turn of the database at
/// `db_path` (SQLite's full path of the main database file). A zero
/// timeout takes the turn only if it is free now. Turns are granted in
/// arrival order, with the engine's bounded barging: a free turn may be
/// taken out of order by a writer that is running, at most
/// [`litelane::xproc::MAX_BARGED_PER_TICKET`] times between two turns by
/// ticket (docs/concurrency.md, "Bounded barging").
pub fn acquire(db_path: &Path, timeout: Duration) -> Acquired {
    let q = match queue(db_path) {
        Ok(q) => q,
        Err(first) => return Acquired::Off(first),
    };
    let start = Instant::now();
    match q.acquire_barging(label(), timeout) {
        Ok(Some(turn)) => Acquired::Turn(Turn { _turn: turn }),
        Ok(None) => Acquired::TimedOut(busy_message(&q, db_path, start.elapsed())),
        // An I/O error of the lock file for this one turn: lock as stock
        // SQLite does, and say why.
        Err(d) => Acquired::Off(Some(d.to_string())),
    }
}

/// What a timed-out wait says: who held the turn, as the engine says it.
fn busy_message(q: &ProcessQueue, db_path: &Path, waited: Duration) -> String {
    let mut who = Vec::new();
    if let Some(h) = q.holder() {
        who.push(format!("held by process {} ({})", h.pid, h.label));
    }
    who.extend(q.foreign_locks());
    if who.is_empty() {
        who.push("its holder could not be read (the turn may just have ended)".into());
    }
    format!(
        "database is locked: another connection held the write turn of {} for longer than \
         the busy timeout (waited {} ms): {}",
        db_path.display(),
        waited.as_millis(),
        who.join("; ")
    )
}

/// One line on the queue of `db_path`, for `PRAGMA lane`: the lock file
/// in use and who holds the turn, or why there is no queue.
pub fn status(db_path: &Path) -> String {
    match queue(db_path) {
        Ok(q) => match q.holder() {
            Some(h) => format!(
                "on: {} (turn held by process {}, {})",
                q.lock_path().display(),
                h.pid,
                h.label
            ),
            None => format!("on: {}", q.lock_path().display()),
        },
        Err(_) => {
            let reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
            match reg.queues.get(db_path) {
                Some(Err((d, _))) => format!("off: {d}"),
                _ => "off".into(),
            }
        }
    }
}
