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
mod lane;

pub use lane::{Lane, Turn, ALONE_POLL, BUDGET, LINGER};

use litelane::xproc::{Degraded, ProcessQueue};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

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

/// Lanes by database path, opened once per process; `Err`: the queue is
/// off for that database, and whether that was reported yet.
type Queues = HashMap<PathBuf, Result<(Arc<Lane>, usize), (Degraded, bool)>>;

/// The queues of this process, with the process id they were opened in:
/// a child of `fork()` inherits the parent's open file descriptions, on
/// which the parent's locks live, so it opens its own.
struct Registry {
    pid: u32,
    /// [`FORKS`] when `pid` was last checked.
    forks: u64,
    queues: Queues,
}

/// How many times this process image has forked, as the lane VFS counts
/// them (`pthread_atfork`, [`after_fork`]): the registry asks the kernel
/// for its process id only when this moved, not on every write.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Called in the child after a `fork()` (the VFS registers it with
/// `pthread_atfork`): one atomic add, safe in a forked child. The child
/// also closes its copies of the descriptors of turns its parent kept
/// (`lane.rs`, `KEPT_FDS`), through the private FFI module.
pub fn after_fork() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            pid: std::process::id(),
            forks: FORKS.load(Ordering::Relaxed),
            queues: HashMap::new(),
        })
    })
}

/// The lane of `db_path` in this process, opened on first use, or why
/// there is none (`Some` the first time only). A lane found before a
/// `fork()` is not the child's: see [`Lane::of_this_process`].
pub fn lane(db_path: &Path) -> Result<Arc<Lane>, Option<String>> {
    find(db_path, false)
}

/// [`lane`] for a database file the VFS opened, which gives it back with
/// [`forget`] when it closes: the last one closed retires the lane.
pub fn lane_for_file(db_path: &Path) -> Result<Arc<Lane>, Option<String>> {
    find(db_path, true)
}

fn find(db_path: &Path, for_file: bool) -> Result<Arc<Lane>, Option<String>> {
    let mut reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
    let forks = FORKS.load(Ordering::Relaxed);
    if reg.forks != forks {
        reg.forks = forks;
        let pid = std::process::id();
        if reg.pid != pid {
            // Forked: the inherited queues' descriptions are shared with
            // the parent, and their locks with them. Closing them here
            // would not release the parent's locks, but their drop also
            // rings bells and writes records in the parent's name: forget
            // them instead.
            std::mem::forget(std::mem::take(&mut reg.queues));
            reg.pid = pid;
        }
    }
    if !reg.queues.contains_key(db_path) {
        let opened = ProcessQueue::open_turns_only(db_path)
            .map(|q| (Lane::new(q, reg.pid, forks), 0))
            .map_err(|d| (d, false));
        reg.queues.insert(db_path.to_path_buf(), opened);
    }
    let entry = reg.queues.get_mut(db_path).expect("inserted above");
    match entry {
        Ok((lane, files)) => {
            *files += usize::from(for_file);
            Ok(Arc::clone(lane))
        }
        Err((d, told)) => {
            let first = !*told;
            *told = true;
            Err(first.then(|| d.to_string()))
        }
    }
}

/// A database file that had `lane` from [`lane_for_file`] closed. The last
/// one of this process takes the lane out of the registry and retires it
/// ([`Lane::retire`]: a kept turn given back, the lock file removed if no
/// other process has it open). A lane of the parent, in a forked child, is
/// not in the child's registry: nothing happens.
pub fn forget(lane: Arc<Lane>) {
    let retired = {
        let mut reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
        let mut last = None;
        for (path, entry) in reg.queues.iter_mut() {
            if let Ok((l, files)) = entry {
                if Arc::ptr_eq(l, &lane) {
                    *files = files.saturating_sub(1);
                    if *files == 0 {
                        last = Some(path.clone());
                    }
                    break;
                }
            }
        }
        last.and_then(|path| reg.queues.remove(&path))
    };
    if retired.is_some() {
        lane.retire();
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
/// timeout takes the turn only if it is free now. The connections of one
/// process queue in arrival order and take one ticket of the cross-process
/// queue at a time; there turns are granted in arrival order, with the
/// engine's bounded barging: a free turn may be taken out of order by a
/// writer that is running, at most
/// [`litelane::xproc::MAX_BARGED_PER_TICKET`] times between two turns by
/// ticket (docs/concurrency.md, "Bounded barging"). A process alone on the
/// file keeps the turn between its writes until another one wants it
/// (`lane.rs`). An I/O error of the lock file for one turn answers
/// [`Acquired::Off`]: lock as stock SQLite does, and say why.
pub fn acquire(db_path: &Path, timeout: Duration) -> Acquired {
    match lane(db_path) {
        Ok(lane) => acquire_on(&lane, db_path, timeout),
        Err(first) => Acquired::Off(first),
    }
}

/// [`acquire`] on a lane found before with [`lane`] (the VFS keeps one per
/// open database file, which spares it the lookup by path on every write).
pub fn acquire_on(lane: &Arc<Lane>, db_path: &Path, timeout: Duration) -> Acquired {
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
    lane.acquire(label(), deadline, |waited| {
        busy_message(&lane.queue, db_path, waited)
    })
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

/// One line on the queue of `db_path`, for `PRAGMA lane`: `on: <lock
/// file>`, then who holds the turn (", kept between its writes" when this
/// process keeps it idle) and how many writers wait for it, in
/// this process and others (an upper bound: a waiter that died may still
/// be counted), or `off:
/// <why>`. Opens the queue if this process has not yet.
pub fn status(db_path: &Path) -> String {
    match lane(db_path) {
        Ok(lane) => {
            let q = &lane.queue;
            let mut line = format!("on: {}", q.lock_path().display());
            if let Some(h) = q.holder() {
                // Only the keeping process knows that its turn is idle.
                let idle = if lane.kept_idle() && h.pid == std::process::id() {
                    ", kept between its writes"
                } else {
                    ""
                };
                line += &format!("; turn held by process {} ({}{idle})", h.pid, h.label);
            }
            match q.waiting() + lane.waiting_here() {
                0 => {}
                n => line += &format!("; {n} waiting"),
            }
            line
        }
        Err(_) => {
            let reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
            match reg.queues.get(db_path) {
                Some(Err((d, _))) => format!("off: {d}"),
                _ => "off".into(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        std::fs::write(&path, b"").unwrap();
        (dir, path)
    }

    /// The lock file goes with the last database file of the last process
    /// on it, a turn kept between writes given back first.
    #[test]
    fn the_last_file_closed_retires_the_lane_and_its_lock_file() {
        let (_dir, path) = db();
        let lock = litelane::xproc::lock_path_for(&path);
        let (a, b) = (lane_for_file(&path).unwrap(), lane_for_file(&path).unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        // A write: its turn is kept (alone on the file) when it ends.
        let Acquired::Turn(turn) = acquire_on(&a, &path, Duration::from_secs(1)) else {
            panic!("a free turn was not granted");
        };
        drop(turn);
        assert!(a.kept_idle(), "alone: the turn is kept between writes");
        forget(a);
        assert!(lock.exists(), "another file of this process still uses it");
        assert!(b.kept_idle());
        forget(b);
        assert!(
            !lock.exists(),
            "the last file closed and the lock file stayed"
        );
        // The next file opens a lane (and a lock file) again.
        let c = lane_for_file(&path).unwrap();
        assert!(matches!(
            acquire_on(&c, &path, Duration::from_secs(1)),
            Acquired::Turn(_)
        ));
        assert!(lock.exists());
        forget(c);
        assert!(!lock.exists());
    }

    #[test]
    fn a_turn_excludes_the_next_until_dropped_and_a_timeout_names_the_holder() {
        let (_dir, path) = db();
        let Acquired::Turn(turn) = acquire(&path, Duration::from_secs(1)) else {
            panic!("a free turn was not granted");
        };
        assert!(status(&path).contains(&format!("turn held by process {}", std::process::id())));
        // Another thread of this process queues like another process.
        let p2 = path.clone();
        let waiter = std::thread::spawn(move || acquire(&p2, Duration::from_millis(150)));
        match waiter.join().unwrap() {
            Acquired::TimedOut(m) => {
                assert!(m.starts_with("database is locked"), "{m}");
                assert!(
                    m.contains(&format!("held by process {}", std::process::id())),
                    "{m}"
                );
                assert!(m.contains("lane SQLite: "), "{m}");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        // A zero timeout does not wait for a held turn either.
        let start = Instant::now();
        assert!(matches!(
            acquire(&path, Duration::ZERO),
            Acquired::TimedOut(_)
        ));
        assert!(start.elapsed() < Duration::from_millis(500));
        drop(turn);
        assert!(matches!(acquire(&path, Duration::ZERO), Acquired::Turn(_)));
    }

    #[test]
    fn waiters_are_granted_the_turn_in_arrival_order() {
        let (_dir, path) = db();
        let Acquired::Turn(first) = acquire(&path, Duration::from_secs(1)) else {
            panic!("no turn");
        };
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..4u64 {
            let (p, order) = (path.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let Acquired::Turn(t) = acquire(&p, Duration::from_secs(20)) else {
                    panic!("waiter {i} got no turn");
                };
                order.lock().unwrap().push(i);
                std::thread::sleep(Duration::from_millis(5));
                drop(t);
            }));
            // Each waiter holds its ticket before the next arrives.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !status(&path).contains(&format!("; {} waiting", i + 1)) {
                assert!(
                    Instant::now() < deadline,
                    "waiter {i} never queued: {}",
                    status(&path)
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        drop(first);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_process_alone_keeps_the_turn_until_another_queue_wants_it() {
        let (_dir, path) = db();
        let Acquired::Turn(turn) = acquire(&path, Duration::from_secs(1)) else {
            panic!("no turn");
        };
        drop(turn);
        // Kept: still held by this process (and said to be idle), and taken
        // again with no wait.
        let me = format!("turn held by process {}", std::process::id());
        assert!(status(&path).contains(&me), "{}", status(&path));
        assert!(
            status(&path).contains(", kept between its writes)"),
            "{}",
            status(&path)
        );
        assert!(matches!(acquire(&path, Duration::ZERO), Acquired::Turn(_)));
        // Another queue on the file (as another process would open it)
        // wants the turn: the keeper gives it back long before 10 s.
        let other = ProcessQueue::open_turns_only(&path).unwrap();
        let start = Instant::now();
        let got = other
            .acquire(
                "other",
                litelane::xproc::Wait::Barging(Duration::from_secs(10)),
            )
            .unwrap()
            .expect("the kept turn was not given back");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        drop(got);
        // With another queue open, a turn that ends is kept for a linger
        // at most, then given back.
        let Acquired::Turn(turn) = acquire(&path, Duration::from_secs(1)) else {
            panic!("no turn");
        };
        drop(turn);
        std::thread::sleep(LINGER * 40);
        assert!(!status(&path).contains(&me), "{}", status(&path));
    }

    /// A lane of `path` in this process with its own budget and linger.
    fn lane_with_limits(path: &Path, budget: Duration, linger: Duration) -> Arc<Lane> {
        Lane::with_limits(
            ProcessQueue::open_turns_only(path).unwrap(),
            std::process::id(),
            FORKS.load(Ordering::Relaxed),
            budget,
            linger,
        )
    }

    /// A thread taking turns of `lane` in a loop, each held for `hold`,
    /// then a `pause`, until the returned flag is set; it signals on the
    /// returned receiver after each turn and returns how many it had.
    fn writing_in_a_loop(
        lane: &Arc<Lane>,
        hold: Duration,
        pause: Duration,
    ) -> (
        Arc<std::sync::atomic::AtomicBool>,
        std::sync::mpsc::Receiver<()>,
        std::thread::JoinHandle<u64>,
    ) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (turn_tx, turn_rx) = std::sync::mpsc::channel();
        let (l, s) = (lane.clone(), stop.clone());
        let writer = std::thread::spawn(move || {
            let mut turns = 0u64;
            while !s.load(Ordering::Relaxed) {
                let deadline = Instant::now() + Duration::from_secs(20);
                let Acquired::Turn(t) = l.acquire("loop", deadline, |_| String::new()) else {
                    panic!("the looping writer got no turn");
                };
                turns += 1;
                std::thread::sleep(hold);
                drop(t);
                let _ = turn_tx.send(());
                std::thread::sleep(pause);
            }
            turns
        });
        (stop, turn_rx, writer)
    }

    #[test]
    fn a_process_writing_without_pause_gives_the_turn_up_after_its_budget() {
        let (_dir, path) = db();
        let other = ProcessQueue::open_turns_only(&path).unwrap();
        // A linger longer than the test: only the budget ends this
        // process's keeping while the other queue waits.
        let budget = Duration::from_millis(20);
        let lane = lane_with_limits(&path, budget, Duration::from_secs(60));
        let (stop, _turns, writer) =
            writing_in_a_loop(&lane, Duration::ZERO, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        let got = other
            .acquire(
                "other",
                litelane::xproc::Wait::Barging(Duration::from_secs(10)),
            )
            .unwrap()
            .expect("no turn for the other queue");
        let waited = start.elapsed();
        drop(got);
        stop.store(true, Ordering::Relaxed);
        assert!(writer.join().unwrap() > 1);
        // A budget and the last write (5 s: a loaded machine), not the
        // linger (60 s) nor the timeout (10 s).
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    }

    #[test]
    fn a_turn_others_want_is_kept_for_a_budget_in_all_its_last_linger_included() {
        let (_dir, path) = db();
        let other = ProcessQueue::open_turns_only(&path).unwrap();
        // A write every second, a linger of 1.5 s, a budget of 2 s: the
        // linger after the first write ends within the budget, the one
        // after the second would not, so the turn goes at the second
        // write's end (about 1 s), not at the third's (about 2 s).
        let lane = lane_with_limits(&path, Duration::from_secs(2), Duration::from_millis(1500));
        let (stop, turns, writer) =
            writing_in_a_loop(&lane, Duration::ZERO, Duration::from_secs(1));
        turns.recv().unwrap();
        let start = Instant::now();
        let got = other
            .acquire(
                "other",
                litelane::xproc::Wait::Barging(Duration::from_secs(20)),
            )
            .unwrap()
            .expect("no turn for the other queue");
        let waited = start.elapsed();
        drop(got);
        stop.store(true, Ordering::Relaxed);
        assert!(writer.join().unwrap() >= 1);
        assert!(
            waited >= Duration::from_millis(500),
            "the first linger was not kept: {waited:?}"
        );
        assert!(
            waited < Duration::from_millis(1700),
            "kept past its budget by a linger: {waited:?}"
        );
    }

    #[test]
    fn a_thread_writing_in_a_loop_keeps_the_turn_for_a_linger_then_the_head_gets_it() {
        let (_dir, path) = db();
        // A long linger, so that what it decides shows on a loaded machine.
        let linger = Duration::from_millis(300);
        let lane = lane_with_limits(&path, Duration::from_secs(4), linger);
        let (stop, _turns, looping) =
            writing_in_a_loop(&lane, Duration::from_micros(200), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        let deadline = start + Duration::from_secs(10);
        let Acquired::Turn(t) = lane.acquire("head", deadline, |_| String::new()) else {
            panic!("the head got no turn");
        };
        let waited = start.elapsed();
        drop(t);
        stop.store(true, Ordering::Relaxed);
        assert!(looping.join().unwrap() > 1);
        // Not woken at each of the loop's turns (it would have had the
        // turn within a few of them), and not kept waiting past its
        // patience by writers taking the turn ahead of it.
        assert!(
            waited >= linger - Duration::from_millis(50),
            "woken before its patience ended: {waited:?}"
        );
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    }

    #[test]
    fn a_lock_file_it_may_not_trust_turns_the_queue_off_and_is_reported_once() {
        let (dir, path) = db();
        // A lock file with a second hard link is refused (xproc/trust.rs).
        let lane = litelane::xproc::lock_path_for(&std::fs::canonicalize(&path).unwrap());
        std::fs::write(&lane, b"not touched").unwrap();
        std::fs::hard_link(&lane, dir.path().join("other")).unwrap();
        match acquire(&path, Duration::from_millis(10)) {
            Acquired::Off(Some(why)) => assert!(why.contains("link"), "{why}"),
            other => panic!("expected the queue off with its reason, got {other:?}"),
        }
        assert!(matches!(
            acquire(&path, Duration::ZERO),
            Acquired::Off(None)
        ));
        assert!(status(&path).starts_with("off: "), "{}", status(&path));
        assert_eq!(std::fs::read(&lane).unwrap(), b"not touched");
    }
}
