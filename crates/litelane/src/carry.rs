//! The cross-process turn between two writes of this process (turn
//! cohorting).
//!
//! Taking the cross-process turn costs a few system calls, and handing it to
//! another process costs that process a kernel wake-up: on a loaded machine,
//! more than the transaction itself. So a process keeps the turn across its
//! own writes for up to a *budget* ([`PROCESS_TURN_BUDGET`](crate::writer::PROCESS_TURN_BUDGET)):
//!
//! * while writers of this process keep queuing, each leader hands it to the
//!   next ([`Carry::put`], [`Carry::take`]);
//! * when the writer goes idle ([`Carry::idle`]), the turn is kept for a
//!   short *linger* (`Options::process_turn_linger`) in case this process
//!   writes again that soon (a single-threaded worker between two
//!   transactions). A reaper thread gives it back when the linger ends. It
//!   lingers only while this process's last idle gap was shorter than the
//!   linger, so a process that writes rarely never makes others wait for it.
//!
//! Unfairness is therefore bounded: a process waits for at most one budget
//! (plus one transaction) of each process ahead of it in the queue, and a
//! linger that is not used costs the next process at most the linger.
//!
//! Under `safe` with shared fsyncs ([`Keep::WhileAlone`]) an idle writer
//! lingers only while no other process has the database open: there a
//! commit's fsync runs after the turn, so that another process commits
//! during it, but a process alone saves taking and giving back the turn on
//! every commit. (Leaders of one process still hand the turn on to each
//! other within the budget.) A process alone keeps the turn with no
//! deadline: its reaper sleeps on the lock file's *wanted* bell, which a
//! writer of another process rings when it has to wait for the turn
//! (`xproc/doorbell.rs`), and gives the turn back at once then. Waking
//! every linger instead cost a thread wake-up per transaction: measured on
//! a single-threaded `safe` worker (4,000 transactions of a lookup and an
//! insert, `perf stat`), 0.8 more futex calls, 0.77 more context switches
//! and 19–32 µs more CPU per transaction. The reaper also looks every
//! [`ALONE_POLL`] whether another process has opened the database, for a
//! writer that rings no bell (one whose lock file is not mapped).
//!
//! The look itself (an `F_OFD_GETLK`) is made once per [`ALONE_POLL`] at
//! most, not once per transaction: an idle writer that found itself alone
//! less than that ago, with the wanted bell unchanged since, keeps the turn
//! without looking again, and no budget applies to a turn kept alone (no
//! other process waits for it, or the bell would have rung).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::unpoisoned::{lock, wait, wait_timeout};
use crate::xproc::ProcessTurn;
#[cfg(target_os = "linux")]
use crate::xproc::WantedBell;

/// How often the reaper of a process alone on the file looks whether
/// another process has opened it, besides the wanted bell: 10 ms.
pub(crate) const ALONE_POLL: Duration = Duration::from_millis(10);

/// True when `look` (when a look found this process alone on the file, and
/// the wanted bell's count read before it) is younger than [`ALONE_POLL`]
/// and the bell still reads `seen_now`: no other process is known to want
/// the turn or to have opened the file since.
#[cfg(target_os = "linux")]
fn still_alone(look: Option<(Instant, u32)>, seen_now: u32) -> bool {
    look.is_some_and(|(at, seen)| seen == seen_now && at.elapsed() < ALONE_POLL)
}

/// The cross-process turn and when this process took it.
pub(crate) struct HeldProcessTurn {
    pub turn: ProcessTurn,
    pub since: Instant,
}

/// How long a kept turn is kept when other processes want it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// For the whole budget: a hand-off to a sleeping process costs more
    /// than the wait it spares (`balanced`, `fast`).
    ForBudget,
    /// Only while no other process has the database open (`safe` with
    /// shared fsyncs: another process commits during this one's fsync).
    WhileAlone,
}

/// Where the turn waits between two leaders of this process.
pub(crate) struct Carry {
    state: Mutex<State>,
    /// Tells the reaper that a linger started or the writer closed.
    wake: Condvar,
    /// How long one process may keep the turn over several writes.
    budget: Duration,
    /// How long an idle writer keeps the turn for its next write (0: never).
    linger: Duration,
    /// Whether a waiting process ends the keeping early.
    keep: Keep,
}

/// When the reaper gives a kept turn back.
#[derive(Default)]
enum Linger {
    /// Never: no linger is running (the turn is in use, or not kept).
    #[default]
    None,
    /// At this instant (a linger of [`Carry::linger`]).
    Until(Instant),
    /// When another process wants the turn: the wanted bell's count is no
    /// longer `seen` (read before this process found itself alone), or
    /// another process has the database open.
    #[cfg(target_os = "linux")]
    UntilWanted { bell: WantedBell, seen: u32 },
}

/// How an idle writer may keep a turn, decided with the system calls it
/// takes before the state is locked again.
enum Keeping {
    /// Give it back now: another process may want it.
    No,
    /// For a linger, while writes come more often than that.
    ForLinger,
    /// Until another process wants it (alone on the file).
    #[cfg(target_os = "linux")]
    UntilWanted(WantedBell, u32),
}

#[derive(Default)]
struct State {
    held: Option<HeldProcessTurn>,
    /// When the reaper gives `held` back.
    linger: Linger,
    /// When the writer last went idle (cleared by the next `take`).
    idle_since: Option<Instant>,
    /// The last gap between the writer going idle and its next write.
    last_gap: Duration,
    /// A reaper thread is running for this carry.
    reaper: bool,
    /// The reaper sleeps with no deadline: a new linger must wake it. (One
    /// with a deadline wakes by itself and then sees a later one.)
    parked: bool,
    /// Times the writer went idle: the reaper parks only after a linger in
    /// which this did not change.
    idles: u64,
    /// The last look that found no other process on the file: when, and
    /// the wanted bell's count read before it.
    alone_at: Option<(Instant, u32)>,
    /// The writer is gone: the reaper ends, nothing is kept.
    closed: bool,
}

impl Carry {
    /// A carry with the given budget, linger and policy (see the module
    /// docs).
    pub fn new(budget: Duration, linger: Duration, keep: Keep) -> Arc<Carry> {
        Arc::new(Carry {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            budget,
            linger,
            keep,
        })
    }

    /// How an idle writer may keep `held`: one `fcntl` under
    /// [`Keep::WhileAlone`] (none when `alone_at`, the last look that found
    /// this process alone, is younger than [`ALONE_POLL`] and the bell has
    /// not rung since), none otherwise; and the look to remember. The
    /// wanted bell is read before the presence check: a writer of a process
    /// that opens the database after the check rings it after that read.
    fn keeping(
        &self,
        held: &HeldProcessTurn,
        alone_at: Option<(Instant, u32)>,
    ) -> (Keeping, Option<(Instant, u32)>) {
        if self.keep == Keep::ForBudget {
            return (Keeping::ForLinger, None);
        }
        #[cfg(target_os = "linux")]
        let bell = held.turn.wanted_bell().map(|b| {
            let seen = b.seen();
            (b, seen)
        });
        #[cfg(target_os = "linux")]
        if let Some((bell, seen)) = &bell {
            if still_alone(alone_at, *seen) {
                return (Keeping::UntilWanted(bell.clone(), *seen), alone_at);
            }
        }
        let looked = Instant::now();
        if held.turn.others_present() {
            return (Keeping::No, None);
        }
        #[cfg(target_os = "linux")]
        if let Some((bell, seen)) = bell {
            return (Keeping::UntilWanted(bell, seen), Some((looked, seen)));
        }
        let _ = (looked, alone_at);
        (Keeping::ForLinger, None)
    }

    /// True when the last look found this process alone on the file less
    /// than [`ALONE_POLL`] ago and the wanted bell of the turn it keeps has
    /// not rung since: no other process is known to have opened the file
    /// (one that did within the poll may not have rung yet).
    pub fn alone_lately(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            let st = self.lock();
            if let Some(bell) = st.held.as_ref().and_then(|h| h.turn.wanted_bell()) {
                return still_alone(st.alone_at, bell.seen());
            }
        }
        false
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The turn for the next leader of this process, if one is kept and
    /// still inside its budget; taking it ends any linger.
    pub fn take(&self) -> Option<HeldProcessTurn> {
        let (kept, expired) = {
            let mut st = self.lock();
            if let Some(idle) = st.idle_since.take() {
                st.last_gap = idle.elapsed();
            }
            st.linger = Linger::None;
            match st.held.take() {
                Some(h) if h.since.elapsed() < self.budget => (Some(h), None),
                other => (None, other),
            }
        };
        drop(expired); // the system call outside the lock
        kept
    }

    /// Keeps the turn for the next leader of this process (the writer is
    /// still busy: someone of this process is queued).
    pub fn put(&self, held: Option<HeldProcessTurn>) {
        let old = std::mem::replace(&mut self.lock().held, held);
        debug_assert!(old.is_none(), "one cross-process turn at a time");
    }

    /// The writer went idle after a turn that was not a write (a read on
    /// the writer's connection handed the turn by a write's leader): a turn
    /// that leader [`put`](Carry::put) for the next writer of this process,
    /// and nobody took, is kept or given back as by [`idle`](Carry::idle);
    /// nothing happens otherwise (a read must not start or end a linger).
    pub fn idle_if_left(self: &Arc<Self>) {
        let left = {
            let st = self.lock();
            st.held.is_some() && matches!(st.linger, Linger::None)
        };
        if left {
            self.idle();
        }
    }

    /// The writer went idle: keep the turn for a linger, or give it back.
    pub fn idle(self: &Arc<Self>) {
        if self.linger.is_zero() {
            drop(self.lock().held.take());
            return;
        }
        let keeping = {
            let mut st = self.lock();
            let alone_at = st.alone_at;
            let decided = st.held.as_ref().map(|h| self.keeping(h, alone_at));
            decided.map(|(keeping, alone_at)| {
                st.alone_at = alone_at;
                keeping
            })
        };
        let now = Instant::now();
        let mut st = self.lock();
        st.idle_since = Some(now);
        st.idles += 1;
        #[cfg(target_os = "linux")]
        if let (Some(Keeping::UntilWanted(..)), Some(h)) = (&keeping, st.held.as_mut()) {
            // Nobody waits for a turn kept alone: its budget starts again.
            h.since = now;
        }
        let young = st
            .held
            .as_ref()
            .is_some_and(|h| h.since.elapsed() + self.linger < self.budget);
        let linger = match keeping {
            _ if !young || st.closed => None,
            Some(Keeping::ForLinger) if st.last_gap < self.linger => {
                Some(Linger::Until(now + self.linger))
            }
            #[cfg(target_os = "linux")]
            Some(Keeping::UntilWanted(bell, seen)) => Some(Linger::UntilWanted { bell, seen }),
            _ => None,
        };
        if let Some(linger) = linger {
            if st.reaper || self.spawn_reaper() {
                st.reaper = true;
                st.linger = linger;
                if std::mem::take(&mut st.parked) {
                    self.wake.notify_one();
                }
                return;
            }
        }
        let given_back = st.held.take();
        drop(st);
        drop(given_back);
    }

    fn spawn_reaper(self: &Arc<Self>) -> bool {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("litelane-turn-linger".into())
            .spawn(move || me.reap())
            .is_ok()
    }

    /// The reaper: gives the turn back when a linger ends. When it finds
    /// nothing to give back (a write took the turn over), it watches for
    /// one more linger, and parks only after a linger in which the writer
    /// never went idle: between the writes of a steady stream,
    /// [`Carry::idle`] then only sets a deadline (no wake-up system call),
    /// and the reaper wakes once a linger instead of once a write.
    fn reap(&self) {
        let mut st = self.lock();
        let mut watching = false;
        let mut idles_seen = st.idles;
        while !st.closed {
            st = match &st.linger {
                Linger::Until(at) if Instant::now() >= *at => {
                    st.linger = Linger::None;
                    watching = false;
                    drop(st.held.take());
                    st
                }
                Linger::Until(at) => {
                    watching = true;
                    let left = at.saturating_duration_since(Instant::now());
                    wait_timeout(&self.wake, st, left)
                }
                #[cfg(target_os = "linux")]
                Linger::UntilWanted { bell, seen } => {
                    let (bell, seen) = (bell.clone(), *seen);
                    drop(st);
                    bell.wait(seen, ALONE_POLL);
                    let mut st = self.lock();
                    let same =
                        matches!(&st.linger, Linger::UntilWanted { seen: s, .. } if *s == seen);
                    if same
                        && (bell.seen() != seen
                            || st.held.as_ref().is_some_and(|h| h.turn.others_present()))
                    {
                        st.linger = Linger::None;
                        drop(st.held.take());
                    }
                    watching = true;
                    st
                }
                Linger::None if watching || st.idles != idles_seen => {
                    watching = false;
                    idles_seen = st.idles;
                    wait_timeout(&self.wake, st, self.linger)
                }
                Linger::None => {
                    st.parked = true;
                    let mut st = wait(&self.wake, st);
                    st.parked = false;
                    st
                }
            };
        }
    }

    /// The writer is closing: give the turn back and end the reaper.
    pub fn close(&self) {
        let given_back = {
            let mut st = self.lock();
            st.closed = true;
            st.linger = Linger::None;
            st.held.take()
        };
        self.wake.notify_all();
        drop(given_back);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xproc::ProcessQueue;

    fn turn(q: &ProcessQueue) -> HeldProcessTurn {
        HeldProcessTurn {
            turn: q
                .acquire("test", crate::xproc::Wait::Forever)
                .expect("turn")
                .expect("turn"),
            since: Instant::now(),
        }
    }

    /// A carry holding a turn of `q` that its writer just left idle.
    fn idle_with_turn(
        q: &ProcessQueue,
        budget: Duration,
        linger: Duration,
        keep: Keep,
    ) -> Arc<Carry> {
        let carry = Carry::new(budget, linger, keep);
        carry.put(Some(turn(q)));
        carry.idle();
        carry
    }

    /// Waits (up to 5 s) until nobody holds `q`'s turn; true if so.
    fn given_back_within_5s(q: &ProcessQueue) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while q.holder().is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        q.holder().is_none()
    }

    fn queue() -> (tempfile::TempDir, ProcessQueue) {
        let dir = tempfile::tempdir().unwrap();
        let q = ProcessQueue::open(&dir.path().join("c.db")).expect("queue");
        (dir, q)
    }

    #[test]
    fn a_linger_gives_the_turn_back_when_it_ends() {
        let (_dir, q) = queue();
        let carry = idle_with_turn(
            &q,
            Duration::from_secs(5),
            Duration::from_millis(20),
            Keep::ForBudget,
        );
        assert!(q.holder().is_some(), "kept during the linger");
        assert!(given_back_within_5s(&q), "given back after the linger");
        assert!(carry.take().is_none());
        carry.close();
    }

    #[test]
    fn a_write_within_the_linger_takes_the_turn_over() {
        let (_dir, q) = queue();
        let carry = idle_with_turn(
            &q,
            Duration::from_secs(10),
            Duration::from_secs(5),
            Keep::ForBudget,
        );
        let held = carry.take().expect("kept for the next write");
        assert!(q.holder().is_some());
        drop(held);
        assert!(q.holder().is_none());
        carry.close();
    }

    #[test]
    fn a_slow_writer_stops_lingering_and_close_gives_back() {
        let (_dir, q) = queue();
        let carry = idle_with_turn(
            &q,
            Duration::from_secs(5),
            Duration::from_millis(10),
            Keep::ForBudget,
        );
        std::thread::sleep(Duration::from_millis(30)); // a gap past the linger
        assert!(carry.take().is_none(), "the reaper gave it back");
        carry.put(Some(turn(&q)));
        carry.idle();
        assert!(
            q.holder().is_none(),
            "after a gap longer than the linger, idle gives the turn back at once"
        );
        // With no linger at all, close still gives back what is held.
        let never = Carry::new(Duration::from_secs(5), Duration::ZERO, Keep::ForBudget);
        never.put(Some(turn(&q)));
        never.close();
        assert!(q.holder().is_none());
        carry.close();
    }

    #[test]
    fn while_alone_an_idle_writer_lingers_and_not_once_another_queue_is_open() {
        let (dir, q) = queue();
        let carry = idle_with_turn(
            &q,
            Duration::from_secs(10),
            Duration::from_secs(5),
            Keep::WhileAlone,
        );
        assert!(q.holder().is_some(), "alone: kept during the linger");
        // Another queue on the same database (another process, in effect).
        let other = ProcessQueue::open(&dir.path().join("c.db")).unwrap();
        assert!(q.others_present() && other.others_present());
        // The write that comes within the linger still takes it over...
        let held = carry.take().expect("taken over within the linger");
        // ...and the leaders of this process hand it on to each other...
        carry.put(Some(held));
        let held = carry.take().expect("handed on within the budget");
        // ...but once the last look that found this process alone is older
        // than ALONE_POLL, an idle writer looks again and gives it back at
        // once.
        carry.put(Some(held));
        std::thread::sleep(ALONE_POLL * 2);
        carry.idle();
        assert!(q.holder().is_none(), "not kept while another is present");
        drop(other);
        assert!(
            !q.others_present(),
            "the other queue's presence ends with it"
        );
        carry.put(Some(turn(&q)));
        carry.idle();
        assert!(q.holder().is_some(), "alone again: kept");
        carry.close();
    }

    /// A process alone keeps the turn past the linger; a writer of another
    /// process that has to wait gets it (its ring of the wanted bell, or at
    /// worst the reaper's poll every [`ALONE_POLL`], ends the keeping), not
    /// at its 5 s timeout. That a ring wakes the reaper at once is
    /// `doorbell::tests::a_ring_wakes_a_listener_and_is_never_missed`.
    #[cfg(target_os = "linux")]
    #[test]
    fn alone_an_idle_writer_keeps_the_turn_until_another_process_wants_it() {
        let (dir, q) = queue();
        let linger = Duration::from_millis(2);
        let carry = idle_with_turn(&q, Duration::from_secs(60), linger, Keep::WhileAlone);
        std::thread::sleep(linger * 20);
        assert!(q.holder().is_some(), "alone: kept past the linger");
        let held = carry.take().expect("taken over by the next write");
        carry.put(Some(held));
        carry.idle();
        assert!(q.holder().is_some(), "kept again");

        let other = ProcessQueue::open(&dir.path().join("c.db")).unwrap();
        let asked = Instant::now();
        let turn = other
            .acquire("other", crate::xproc::Wait::Timeout(Duration::from_secs(5)))
            .unwrap()
            .expect("the turn came");
        let waited = asked.elapsed();
        assert!(
            waited < ALONE_POLL * 50,
            "given back when wanted, not at a timeout: {waited:?}"
        );
        assert!(carry.take().is_none(), "given back");
        drop(turn);
        carry.close();
    }

    /// A process that opens the database and rings no bell (its lock file
    /// is not mapped) is noticed by the reaper's poll within [`ALONE_POLL`]:
    /// the turn kept while alone goes back to the queue.
    #[cfg(target_os = "linux")]
    #[test]
    fn alone_a_kept_turn_goes_back_once_another_process_opens_the_database() {
        let (dir, q) = queue();
        let carry = idle_with_turn(
            &q,
            Duration::from_secs(60),
            Duration::from_millis(2),
            Keep::WhileAlone,
        );
        std::thread::sleep(ALONE_POLL * 2);
        assert!(q.holder().is_some(), "alone: kept");
        let _other = ProcessQueue::open(&dir.path().join("c.db")).unwrap();
        assert!(
            given_back_within_5s(&q),
            "given back once another is present"
        );
        carry.close();
    }

    /// A process alone keeps one turn over writes that span many budgets
    /// (nobody waits for it), and keeps it without a presence check per
    /// write; a ring of the wanted bell still ends the keeping at the next
    /// idle.
    #[cfg(target_os = "linux")]
    #[test]
    fn alone_one_turn_outlasts_the_budget_until_the_bell_rings() {
        let (dir, q) = queue();
        // Long enough that a thread descheduled between two calls on a
        // loaded machine does not outlast it.
        let budget = Duration::from_millis(50);
        let carry = idle_with_turn(&q, budget, Duration::from_millis(1), Keep::WhileAlone);
        let ticket = q.holder().expect("kept").ticket;
        let start = Instant::now();
        while start.elapsed() < budget * 4 {
            let held = carry.take().expect("kept for the next write");
            assert_eq!(held.turn.ticket(), ticket, "the same turn, past its budget");
            std::thread::sleep(Duration::from_millis(2));
            carry.put(Some(held));
            carry.idle();
        }
        // Another process that has to wait rings the bell: the next idle
        // (or the reaper, whichever is first) gives the turn back.
        // (The bell is one word of the lock file, the same through any
        // handle.)
        let other = ProcessQueue::open(&dir.path().join("c.db")).unwrap();
        let held = carry.take().expect("kept");
        held.turn.wanted_bell().expect("mapped").ring();
        carry.put(Some(held));
        carry.idle();
        assert!(q.holder().is_none(), "given back at the idle after a ring");
        drop(other);
        carry.close();
    }

    #[test]
    fn an_exhausted_budget_is_not_carried() {
        let (_dir, q) = queue();
        let carry = Carry::new(
            Duration::from_millis(1),
            Duration::from_secs(5),
            Keep::ForBudget,
        );
        carry.put(Some(HeldProcessTurn {
            turn: q
                .acquire("old", crate::xproc::Wait::Forever)
                .unwrap()
                .unwrap(),
            since: Instant::now() - Duration::from_millis(2),
        }));
        assert!(carry.take().is_none());
        assert!(
            q.holder().is_none(),
            "an expired turn goes back to the queue"
        );
        carry.close();
    }
}
