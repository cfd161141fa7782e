//! One database's lane in this process: its connections' line for the
//! turn, and the turn kept between writes while this process is alone on
//! the file.
//!
//! **One ticket per process.** The connections of one process (a Go pool,
//! Node workers' threads, a Python program's threads) queue here first, in
//! arrival order, and only the first of them takes a ticket of the
//! cross-process queue: other processes see one writer per process, and a
//! turn that ends in this process goes to the next connection of this
//! process without a system call when nobody else wants it.
//!
//! **Keeping the turn while alone.** Taking and giving back the
//! cross-process turn costs two `fcntl` per write (about 3.3 µs of a 30 µs
//! one-row write here: docs/lane-sqlite-bench.md, "Diagnosis" 2). A process
//! alone on the file keeps the turn after SQLite's unlock, as the engine's
//! `carry.rs` does for a process alone: SQLite's own WRITER lock is
//! released as usual (a stock SQLite process, outside the queue, is not
//! held up), only the queue's turn stays. It is given back
//!
//! * at the next write's end when another process has opened the file
//!   since the last look (one `F_OFD_GETLK` per [`ALONE_POLL`] at most);
//! * at once when a writer of another process has to wait for the turn: it
//!   rings the lock file's *wanted* bell, on which this lane's keeper
//!   thread sleeps;
//! * within [`ALONE_POLL`] when another process opens the file without
//!   ringing (the keeper looks then too).
//!
//! A child of `fork()` closes its inherited descriptors of kept turns
//! ([`KeptFds::close_in_child`]): the turn's lock belongs to the open file
//! description, which the child's copy would keep alive after the parent
//! died.

use crate::Acquired;
use litelane::xproc::{ProcessQueue, ProcessTurn, WantedBell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How often a keeper looks whether another process opened the file
/// without ringing the wanted bell, and how long a look that found this
/// process alone is trusted at a write's end: 10 ms (the engine's
/// `carry::ALONE_POLL`).
pub const ALONE_POLL: Duration = Duration::from_millis(10);

/// One database's lane in this process.
pub struct Lane {
    pub(crate) queue: ProcessQueue,
    /// The process this lane was opened in.
    pid: u32,
    state: Mutex<State>,
    /// Wakes this process's writers waiting in line.
    line_moved: Condvar,
    /// Wakes a parked keeper: a turn was kept.
    kept_one: Condvar,
}

/// A look that found this process alone on the file: when, and the wanted
/// bell's count read before it.
type Look = Option<(Instant, u32)>;

#[derive(Default)]
struct State {
    /// A connection of this process holds the turn (or is taking it).
    busy: bool,
    /// The numbers of this process's writers waiting, in arrival order.
    line: VecDeque<u64>,
    next: u64,
    /// The turn, kept between writes while this process is alone.
    kept: Option<Kept>,
    /// Times a turn was kept: a keeper parks only after a poll with none.
    keeps: u64,
    /// The keeper sleeps on `kept_one`.
    parked: bool,
    /// A keeper thread runs for this lane.
    keeper: bool,
    /// The last look that found this process alone: when, and the wanted
    /// bell's count read before it.
    alone_at: Look,
}

/// A turn kept between writes, with the wanted bell's count read before
/// the look that found this process alone.
struct Kept {
    turn: ProcessTurn,
    bell: WantedBell,
    seen: u32,
    /// Its slot in [`KEPT_FDS`].
    slot: usize,
}

/// The write turn of one database, held until dropped; a drop in a child
/// of `fork()` forgets it (the parent's turn is not the child's to end).
pub struct Turn {
    lane: Arc<Lane>,
    turn: Option<ProcessTurn>,
    /// [`crate::FORKS`] when it was taken.
    forks: u64,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("turn", &self.turn).finish()
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Lane {
    pub fn new(queue: ProcessQueue, pid: u32) -> Arc<Lane> {
        Arc::new(Lane {
            queue,
            pid,
            state: Mutex::new(State::default()),
            line_moved: Condvar::new(),
            kept_one: Condvar::new(),
        })
    }

    /// Waits until `deadline` at most for the turn: first for this
    /// process's writers ahead, then, unless this process kept the turn,
    /// for the cross-process queue.
    pub fn acquire(
        self: &Arc<Lane>,
        label: &str,
        deadline: Instant,
        busy_message: impl FnOnce(Duration) -> String,
    ) -> Acquired {
        let start = Instant::now();
        let mut st = lock(&self.state);
        let me = st.next;
        st.next += 1;
        st.line.push_back(me);
        while st.busy || st.line.front() != Some(&me) {
            let now = Instant::now();
            if now >= deadline {
                st.line.retain(|&n| n != me);
                drop(st);
                // The head may have changed.
                self.line_moved.notify_all();
                return Acquired::TimedOut(busy_message(start.elapsed()));
            }
            st = self
                .line_moved
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        st.line.pop_front();
        st.busy = true;
        let forks = crate::FORKS.load(Ordering::Relaxed);
        if let Some(k) = st.kept.take() {
            KEPT_FDS.clear(k.slot);
            return Acquired::Turn(Turn {
                lane: Arc::clone(self),
                turn: Some(k.turn),
                forks,
            });
        }
        drop(st);
        let got = self
            .queue
            .acquire_barging(label, deadline.saturating_duration_since(Instant::now()));
        match got {
            Ok(Some(turn)) => Acquired::Turn(Turn {
                lane: Arc::clone(self),
                turn: Some(turn),
                forks,
            }),
            Ok(None) => {
                self.end_busy();
                Acquired::TimedOut(busy_message(start.elapsed()))
            }
            Err(d) => {
                self.end_busy();
                Acquired::Off(Some(d.to_string()))
            }
        }
    }

    /// How many connections of this process wait in line for the turn.
    pub fn waiting_here(&self) -> u64 {
        lock(&self.state).line.len() as u64
    }

    fn end_busy(&self) {
        let mut st = lock(&self.state);
        st.busy = false;
        let waiters = !st.line.is_empty();
        drop(st);
        if waiters {
            self.line_moved.notify_all();
        }
    }

    /// Ends a turn of this process: kept when this process is alone on
    /// the file (and its bell is mapped), given back otherwise.
    fn end(self: &Arc<Lane>, turn: ProcessTurn) {
        let mut st = lock(&self.state);
        let give_back = match keeping(&turn, st.alone_at) {
            Some((bell, seen, look)) => {
                st.alone_at = look;
                match turn.lock_fd().and_then(|fd| KEPT_FDS.put(fd)) {
                    Some(slot) => {
                        st.kept = Some(Kept {
                            turn,
                            bell,
                            seen,
                            slot,
                        });
                        st.keeps += 1;
                        if !st.keeper {
                            st.keeper = true;
                            self.start_keeper();
                        } else if st.parked {
                            self.kept_one.notify_one();
                        }
                        None
                    }
                    None => Some(turn),
                }
            }
            None => {
                st.alone_at = None;
                Some(turn)
            }
        };
        st.busy = false;
        // Condvar notifications are system calls even with nobody waiting.
        let waiters = !st.line.is_empty();
        drop(st);
        if waiters {
            self.line_moved.notify_all();
        }
        drop(give_back);
    }

    fn start_keeper(self: &Arc<Lane>) {
        let lane = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("litelane-lane-keeper".into())
            .spawn(move || lane.keep());
        if spawned.is_err() {
            // No thread: nobody would give a kept turn back when another
            // process wants it, so give it back now and keep none.
            let mut st = lock(&self.state);
            st.keeper = false;
            if let Some(k) = st.kept.take() {
                KEPT_FDS.clear(k.slot);
                drop(st);
                drop(k.turn);
            }
        }
    }

    /// The keeper: sleeps on the wanted bell while a turn is kept, and
    /// gives it back when the bell rings or another process opened the
    /// file; parks after a poll in which no turn was kept.
    fn keep(&self) {
        let mut last_keeps = u64::MAX;
        let mut bell: Option<WantedBell> = None;
        loop {
            let mut st = lock(&self.state);
            if st.kept.is_none() && st.keeps == last_keeps {
                st.parked = true;
                while st.kept.is_none() {
                    st = self
                        .kept_one
                        .wait(st)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                st.parked = false;
            }
            last_keeps = st.keeps;
            if let Some(k) = &st.kept {
                bell.get_or_insert_with(|| k.bell.clone());
            }
            // The count a ring after the last keep decision changes: the
            // kept turn's own, or the count now when none is kept (a turn
            // kept later read its count after this read).
            let seen = st
                .kept
                .as_ref()
                .map(|k| k.seen)
                .or_else(|| bell.as_ref().map(WantedBell::seen));
            drop(st);
            match (&bell, seen) {
                (Some(b), Some(seen)) => b.wait(seen, ALONE_POLL),
                _ => std::thread::sleep(ALONE_POLL),
            }
            let mut st = lock(&self.state);
            let wanted = st
                .kept
                .as_ref()
                .is_some_and(|k| k.bell.seen() != k.seen || self.queue.others_present());
            if wanted {
                let k = st.kept.take().expect("checked above");
                st.alone_at = None;
                KEPT_FDS.clear(k.slot);
                drop(st);
                drop(k.turn);
            }
        }
    }
}

/// Whether a turn that ends may be kept: `Some((bell, count, look))` when
/// this process is alone on the file — `look` the last look that found it
/// so (made now unless `alone_at` is younger than [`ALONE_POLL`] and the
/// bell has not rung since); `None` to give it back. The bell's count is
/// read before the look: a writer of a process that opens the file after
/// the look rings it after that read.
fn keeping(turn: &ProcessTurn, alone_at: Look) -> Option<(WantedBell, u32, Look)> {
    let bell = turn.wanted_bell()?;
    let seen = bell.seen();
    if alone_at.is_some_and(|(at, s)| s == seen && at.elapsed() < ALONE_POLL) {
        return Some((bell, seen, alone_at));
    }
    let looked = Instant::now();
    if turn.others_present() {
        return None;
    }
    Some((bell, seen, Some((looked, seen))))
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        // Taken before a fork and dropped in the child: the turn is the
        // parent's to end. The child closes its copy of the descriptor
        // (the lock stays with the parent's) and forgets the rest.
        if self.forks != crate::FORKS.load(Ordering::Relaxed) && std::process::id() != self.lane.pid
        {
            if let Some(fd) = turn.lock_fd() {
                crate::ffi::close_inherited(fd);
            }
            std::mem::forget(turn);
            return;
        }
        self.lane.end(turn);
    }
}

/// The descriptors of kept turns, for a child of `fork()` to close
/// (async-signal-safe: atomics only). At most [`KeptFds::SLOTS`] turns are
/// kept at once in a process; more are given back at their end.
pub struct KeptFds([AtomicI32; KeptFds::SLOTS]);

/// The process's kept turns' descriptors.
pub static KEPT_FDS: KeptFds = KeptFds([const { AtomicI32::new(-1) }; KeptFds::SLOTS]);

impl KeptFds {
    /// How many turns a process may keep at once: 64 databases.
    pub const SLOTS: usize = 64;

    fn put(&self, fd: i32) -> Option<usize> {
        self.0.iter().position(|s| {
            s.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        })
    }

    fn clear(&self, slot: usize) {
        self.0[slot].store(-1, Ordering::SeqCst);
    }

    /// Empties every slot and returns the descriptors that were in them
    /// (for the child of a `fork()` to close).
    pub fn take_all(&self) -> impl Iterator<Item = i32> + '_ {
        self.0
            .iter()
            .map(|s| s.swap(-1, Ordering::SeqCst))
            .filter(|&fd| fd >= 0)
    }
}
