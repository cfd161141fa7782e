//! One database's lane in this process: its connections' line for the
//! turn, and the turn kept between writes while this process is alone on
//! the file.
//!
//! **One ticket per process.** The connections of one process (a Go pool,
//! Node workers' threads, a Python program's threads) queue here first, in
//! arrival order, and only the first of them takes a ticket of the
//! cross-process queue: other processes see one writer per process, and a
//! turn that ends in this process goes to the next connection of this
//! process without a system call when nobody else wants it. A writer that
//! is running takes a free turn ahead of the line while its head has been
//! the head for less than a [`LINGER`], and the head, asleep, is not woken
//! at each turn's end while a writer of this process is expected back
//! within a linger: it wakes when its linger ends (`Lane::wake_head`).
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
//! **Keeping it a little while others are there.** Under contention a
//! turn handed to another process costs that process a wake-up, and a
//! single-threaded client writing in a loop wants the turn again within
//! microseconds: stock SQLite lets one connection make 40–69 commits in a
//! row while its rivals sleep in the busy handler, and handing the turn on
//! at every commit made lane 0.5–0.73× stock at 2–16 processes
//! (docs/lane-sqlite-bench.md). So, as the engine's `carry.rs` does for
//! `balanced`, a turn that others want is kept for [`LINGER`] after a write
//! while this process's writes come more often than that, and for
//! [`BUDGET`] in all; then it goes to the next in the queue. The keeper
//! gives a lingering turn back when its linger ends.
//!
//! A child of `fork()` closes its inherited descriptors of kept turns
//! ([`KeptFds::take_all`], called by the FFI module's fork handler): the
//! turn's lock belongs to the open file description, which the child's
//! copy would keep alive after the parent died.

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

/// How long a process may keep the turn over several of its writes while
/// other processes want it, its last [`LINGER`] included: 4 ms. With 8
/// processes writing, a writer then waits about 7 budgets for the others,
/// plus the hand-offs (measured on 2 cores, longest write: 44–53 ms; 52–62
/// ms while a linger could end past the budget; docs/lane-sqlite-bench.md).
pub const BUDGET: Duration = Duration::from_millis(4);

/// How long a process keeps a turn that others want after a write, for
/// its own next write, while its writes come more often than that: 1 ms.
/// Handing the turn to another process costs it a wake-up, and on a busy
/// machine a writer in a loop is often preempted between two writes: with
/// 8 go-sqlite3 processes on 2 cores, 250 µs made 0.55× stock's rows/s
/// (longest wait 41 ms), 500 µs 0.73× (53 ms), 1 ms 0.84× (82 ms; stock's
/// longest 1.2 s) (docs/lane-sqlite-bench.md).
pub const LINGER: Duration = Duration::from_micros(1000);

/// One database's lane in this process.
pub struct Lane {
    pub(crate) queue: ProcessQueue,
    /// The process this lane was opened in, and `FORKS` (`lib.rs`) then.
    pid: u32,
    forks: u64,
    /// [`BUDGET`] and [`LINGER`] (other values in tests).
    budget: Duration,
    linger: Duration,
    state: Mutex<State>,
    /// Wakes the keeper: a turn was kept (when it sleeps on a timer or is
    /// parked).
    kept_one: Condvar,
}

/// A look that found this process alone on the file: when, and the wanted
/// bell's count read before it.
type Look = Option<(Instant, u32)>;

#[derive(Default)]
struct State {
    /// A connection of this process holds the turn (or is taking it).
    busy: bool,
    /// This process's writers waiting, in arrival order.
    line: VecDeque<Waiter>,
    /// When the head of `line` became its head (`None`: nobody waits).
    head_since: Option<Instant>,
    next: u64,
    /// The turn, kept between two writes of this process (alone on the
    /// file, or for a linger).
    kept: Option<Kept>,
    /// Times a turn was kept: a keeper parks only after a poll with none.
    keeps: u64,
    /// What the keeper sleeps on.
    watch: Watch,
    /// A keeper thread runs for this lane.
    keeper: bool,
    /// The last look that found this process alone: when, and the wanted
    /// bell's count read before it.
    alone_at: Look,
    /// The last look that found another process on the file.
    others_at: Option<Instant>,
    /// When this process took the cross-process turn it holds or keeps.
    since: Option<Instant>,
    /// When the last turn of this process ended (cleared by the next
    /// acquire, which measures `last_gap`).
    idle_since: Option<Instant>,
    /// The last pause between a turn's end and the next acquire.
    last_gap: Duration,
    /// The last database file using this lane closed ([`Lane::retire`]):
    /// no turn is kept any more, and the keeper ends.
    retired: bool,
}

/// What the keeper sleeps on.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// Nothing: it runs.
    #[default]
    Awake,
    /// `kept_one`, with no deadline: nothing is kept.
    Parked,
    /// `kept_one`, until a linger ends.
    Timer,
    /// The wanted bell: a turn is kept while alone.
    Bell,
}

/// A writer of this process waiting in line: woken alone, when it becomes
/// the head, and as the head when the turn is free and its linger as the
/// head is over or no writer of this process is expected back soon.
struct Waiter {
    n: u64,
    wake: Arc<Condvar>,
}

/// A turn kept between writes, with the wanted bell's count read before
/// the look that found this process alone.
struct Kept {
    turn: ProcessTurn,
    bell: WantedBell,
    seen: u32,
    /// When a turn kept while others are there is given back (`None`:
    /// kept while alone, until another process wants it).
    until: Option<Instant>,
    /// Its slot in [`KEPT_FDS`].
    slot: usize,
}

/// The write turn of one database, held until dropped; a drop in a child
/// of `fork()` forgets it (the parent's turn is not the child's to end).
pub struct Turn {
    lane: Arc<Lane>,
    turn: Option<ProcessTurn>,
    /// `FORKS` (`lib.rs`) when it was taken.
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
    /// The lane of `queue`, opened in process `pid` after `forks` forks
    /// (as `FORKS` (`lib.rs`) counts them).
    pub fn new(queue: ProcessQueue, pid: u32, forks: u64) -> Arc<Lane> {
        Self::with_limits(queue, pid, forks, BUDGET, LINGER)
    }

    /// False in a child of `fork()` for a lane its parent opened: the
    /// child must find its own ([`crate::lane`]).
    pub fn of_this_process(&self) -> bool {
        self.forks == crate::FORKS.load(Ordering::Relaxed)
    }

    /// A lane whose process keeps a turn others want for `linger` after
    /// each write and `budget` in all.
    pub fn with_limits(
        queue: ProcessQueue,
        pid: u32,
        forks: u64,
        budget: Duration,
        linger: Duration,
    ) -> Arc<Lane> {
        Arc::new(Lane {
            queue,
            pid,
            forks,
            budget,
            linger,
            state: Mutex::new(State::default()),
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
        if let Some(idle) = st.idle_since.take() {
            st.last_gap = start.saturating_duration_since(idle);
        }
        // A writer that finds the turn free takes it, ahead of writers of
        // this process asleep in line, while the head of the line has been
        // the head for less than a linger: a thread that writes in a loop
        // makes several writes without a switch to another thread, as on
        // stock SQLite, and the head sleeps through them (see `wake_head`).
        if st.busy || !self.head_patient(&st, start) {
            let me = st.next;
            st.next += 1;
            let wake = Arc::new(Condvar::new());
            if st.line.is_empty() {
                st.head_since = Some(start);
            }
            st.line.push_back(Waiter {
                n: me,
                wake: Arc::clone(&wake),
            });
            loop {
                let head = st.line.front().map(|w| w.n) == Some(me);
                if head && !st.busy {
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    st.line.retain(|w| w.n != me);
                    if head {
                        self.new_head(&mut st, now);
                    }
                    self.wake_head(&st);
                    drop(st);
                    return Acquired::TimedOut(busy_message(start.elapsed()));
                }
                // The head wakes when its linger as the head ends, to take
                // a turn left free or to stop writers taking it ahead; the
                // others when they become the head.
                let until = match st.head_since.map(|h| h + self.linger) {
                    Some(patience_ends) if head && now < patience_ends => {
                        patience_ends.min(deadline)
                    }
                    _ => deadline,
                };
                st = wake
                    .wait_timeout(st, until - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            st.line.pop_front();
            self.new_head(&mut st, Instant::now());
        }
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
        let got = self.queue.acquire(
            label,
            litelane::xproc::Wait::Barging(deadline.saturating_duration_since(Instant::now())),
        );
        match got {
            Ok(Some(turn)) => {
                lock(&self.state).since = Some(Instant::now());
                Acquired::Turn(Turn {
                    lane: Arc::clone(self),
                    turn: Some(turn),
                    forks,
                })
            }
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

    /// True while this process keeps the turn between two of its writes.
    pub fn kept_idle(&self) -> bool {
        lock(&self.state).kept.is_some()
    }

    /// How many connections of this process wait in line for the turn.
    pub fn waiting_here(&self) -> u64 {
        lock(&self.state).line.len() as u64
    }

    /// True while writers of this process may take a free turn ahead of
    /// the head of the line: there is none, or it has been the head for
    /// less than a linger.
    fn head_patient(&self, st: &State, now: Instant) -> bool {
        match (st.line.front(), st.head_since) {
            (Some(_), Some(since)) => now.saturating_duration_since(since) < self.linger,
            _ => true,
        }
    }

    /// The head of the line left it (it took the turn, or gave up): the
    /// next one, if any, is the head from `now` and is woken to time its
    /// linger as the head.
    fn new_head(&self, st: &mut State, now: Instant) {
        st.head_since = st.line.front().map(|w| {
            w.wake.notify_one();
            now
        });
    }

    /// The turn is free: wakes the head of the line, if any, unless a
    /// writer of this process is expected back within a linger (the last
    /// pause between a turn's end and the next acquire was shorter) and
    /// the head is still within its linger. Then that writer takes the turn without
    /// a switch to another thread, and the head, asleep, is not woken to
    /// find the turn taken again (a wake-up per write, with 16 connections
    /// in one process); it wakes by itself when that linger ends. A
    /// notification is a system call: only when someone waits.
    fn wake_head(&self, st: &State) {
        if st.busy {
            return;
        }
        if let Some(w) = st.line.front() {
            let expected_back = st.last_gap < self.linger;
            if !expected_back || !self.head_patient(st, Instant::now()) {
                w.wake.notify_one();
            }
        }
    }

    fn end_busy(&self) {
        let mut st = lock(&self.state);
        st.busy = false;
        self.wake_head(&st);
    }

    /// Ends a turn of this process. Kept until another process wants it
    /// when this process is alone on the file; kept for [`LINGER`] when
    /// others are there, while this process's turn is younger than
    /// [`BUDGET`] and its writes come more often than [`LINGER`]; given
    /// back otherwise (or when its lock file's first page is not mapped).
    fn end(self: &Arc<Lane>, turn: ProcessTurn) {
        let now = Instant::now();
        let mut st = lock(&self.state);
        st.idle_since = Some(now);
        let others_lately = st
            .others_at
            .is_some_and(|at| now.duration_since(at) < ALONE_POLL);
        let alone = if others_lately {
            None
        } else {
            keeping(&turn, st.alone_at)
        };
        let keep = match alone {
            Some((bell, seen, look)) => {
                st.alone_at = look;
                Some((bell, seen, None))
            }
            None => {
                if !others_lately {
                    st.alone_at = None;
                    st.others_at = Some(now);
                }
                // The linger must end within the budget: a turn is kept
                // for a budget in all, its last linger included.
                let within = st
                    .since
                    .is_some_and(|s| now.duration_since(s) + self.linger <= self.budget)
                    && st.last_gap < self.linger;
                turn.wanted_bell().filter(|_| within).map(|bell| {
                    let seen = bell.seen();
                    (bell, seen, Some(now + self.linger))
                })
            }
        };
        let keep = keep.filter(|_| !st.retired);
        let slot = keep
            .as_ref()
            .and_then(|_| turn.lock_fd())
            .and_then(|fd| KEPT_FDS.put(fd));
        let give_back = match (keep, slot) {
            (Some((bell, seen, until)), Some(slot)) => {
                st.kept = Some(Kept {
                    turn,
                    bell,
                    seen,
                    until,
                    slot,
                });
                st.keeps += 1;
                if !st.keeper {
                    st.keeper = true;
                    self.start_keeper();
                } else if st.watch == Watch::Parked
                    || (st.watch == Watch::Timer
                        && st.kept.as_ref().is_some_and(|k| k.until.is_none()))
                {
                    // A parked keeper, and one on a timer when this turn is
                    // kept while alone (it must watch the bell). One on the
                    // bell sees a turn kept for a linger at the next ring
                    // or look, [`ALONE_POLL`] late at most. A notification
                    // is a system call: never one per write.
                    self.kept_one.notify_one();
                }
                None
            }
            _ => {
                st.since = None;
                Some(turn)
            }
        };
        st.busy = false;
        self.wake_head(&st);
        drop(st);
        drop(give_back);
    }

    /// The last database file of this process that used this lane closed:
    /// gives back a kept turn, ends the keeper (at its next look, within
    /// [`ALONE_POLL`]), and removes the lock file if no other process has
    /// it open, as SQLite removes `-wal` and `-shm` ([`ProcessQueue::retire`]).
    /// The lane takes no turn afterwards (the registry no longer gives it
    /// out: `lib.rs`).
    pub fn retire(&self) {
        let given_back = {
            let mut st = lock(&self.state);
            st.retired = true;
            let kept = st.kept.take();
            if let Some(k) = &kept {
                KEPT_FDS.clear(k.slot);
                st.since = None;
            }
            self.kept_one.notify_all();
            kept
        };
        drop(given_back);
        self.queue.retire();
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

    /// The keeper: gives a kept turn back when its time comes. A turn kept
    /// while alone: when the wanted bell rings or another process opened
    /// the file (looked at every [`ALONE_POLL`]); one kept while others
    /// were there: when its [`LINGER`] ends. It sleeps on the bell only for
    /// a turn kept alone: under contention every process's writers ring it
    /// all the time. It parks after a sleep in which no turn was kept.
    fn keep(&self) {
        let mut last_keeps = u64::MAX;
        let mut bell: Option<WantedBell> = None;
        loop {
            let mut st = lock(&self.state);
            if st.retired {
                st.keeper = false;
                return;
            }
            if st.kept.is_none() && st.keeps == last_keeps {
                st.watch = Watch::Parked;
                while st.kept.is_none() && !st.retired {
                    st = self
                        .kept_one
                        .wait(st)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            last_keeps = st.keeps;
            if let Some(k) = &st.kept {
                bell.get_or_insert_with(|| k.bell.clone());
            }
            let now = Instant::now();
            match st.kept.as_ref().map(|k| (k.until, k.seen)) {
                Some((None, seen)) if bell.is_some() => {
                    st.watch = Watch::Bell;
                    drop(st);
                    if let Some(b) = &bell {
                        b.wait(seen, ALONE_POLL);
                    }
                    st = lock(&self.state);
                }
                kept => {
                    // Kept for a linger: until it ends. None kept, but one
                    // was since the last look: look again in a linger.
                    let nap = match kept {
                        Some((Some(u), _)) => u.saturating_duration_since(now),
                        Some((None, _)) => ALONE_POLL,
                        None => self.linger,
                    };
                    st.watch = Watch::Timer;
                    st = self
                        .kept_one
                        .wait_timeout(st, nap)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
            st.watch = Watch::Awake;
            let now = Instant::now();
            let give_back = st.kept.as_ref().is_some_and(|k| match k.until {
                None => k.bell.seen() != k.seen || self.queue.others_present(),
                Some(u) => u <= now,
            });
            if give_back {
                let k = st.kept.take().expect("checked above");
                st.alone_at = None;
                st.since = None;
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
                crate::ffi::fd::close_inherited(fd);
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
