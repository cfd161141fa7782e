//! The writer's queue of turns, with no SQLite in it.
//!
//! One thread at a time holds the *turn*; the others wait asleep on a
//! condition variable of their own, in arrival order, and are woken exactly
//! once: either because the turn is now theirs ([`Entered::Turn`]) or because
//! the turn holder ran their job for them ([`Entered::Done`], flat combining).
//!
//! The rules, each enforced here rather than by the callers:
//! - **FIFO.** Waiters are served in arrival order, except [`Kind::Priority`],
//!   which goes to the head of the queue.
//! - **One holder.** A [`Turn`] is the only proof of holding the turn; it
//!   releases in `Drop`, so no path can forget to hand it on.
//! - **Combining only of jobs.** [`Turn::claim_next`] hands the holder the
//!   next waiter only if it is a [`Kind::Job`] at the head of the queue and
//!   the gate is open. A plain turn (a checkpoint, a job that must run on its
//!   own thread) is never run by someone else and never inherits anything:
//!   it gets a turn of its own.
//! - **The gate.** While the gate is closed (the WAL is over its limit), only
//!   [`Kind::Priority`] waiters are granted the turn; everyone else keeps
//!   their place until [`Queue::open_gate`].
//! - **No stranded waiter.** A claimed job is completed when its [`Claimed`]
//!   is dropped, however the holder's work on it ended.

use std::collections::VecDeque;

#[cfg(litelane_loom)]
use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(litelane_loom))]
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// What a waiter asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A write job the turn holder may run on the waiter's behalf.
    Job,
    /// A turn the waiter must run itself: a job that is not `Send`, a
    /// checkpoint, a backup step.
    Turn,
    /// A turn that goes ahead of every waiter and past a closed gate (the
    /// escalated checkpoint).
    Priority,
}

/// The queue. `J` is what a [`Kind::Job`] waiter hands to the turn holder.
pub(crate) struct Queue<J> {
    state: Mutex<State<J>>,
}

struct State<J> {
    held: bool,
    gate_closed: bool,
    waiters: VecDeque<Arc<Waiter<J>>>,
}

struct Waiter<J> {
    kind: Kind,
    inner: Mutex<Slot<J>>,
    wake: Condvar,
}

struct Slot<J> {
    status: Status,
    job: Option<J>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Waiting,
    /// Taken out of the queue by the turn holder, which is running the job.
    Claimed,
    /// The turn is the waiter's.
    Granted,
    /// The turn holder finished the waiter's job.
    Done,
}

/// How [`Queue::enter`] returned.
pub(crate) enum Entered<'q, J> {
    /// The caller holds the turn.
    Turn(Turn<'q, J>),
    /// The caller's job was run by the turn holder and is complete.
    Done,
}

/// Proof of holding the turn. Dropping it hands the turn to the next waiter
/// the rules allow, or leaves the queue idle.
pub(crate) struct Turn<'q, J> {
    queue: &'q Queue<J>,
    released: bool,
}

/// A turn taken without waiting and held across calls (a transaction run on
/// its caller's thread between calls): the queue is reached through an
/// `Arc`, so the turn borrows nothing. Dropping it hands the turn on, as
/// [`Turn`] does. It never claims waiters' jobs.
pub(crate) struct OwnedTurn<J> {
    queue: std::sync::Arc<Queue<J>>,
    released: bool,
}

/// Proof of holding a queue's turn, for [`Guarded::enter`].
pub(crate) trait HoldsTurn {
    /// The address of the queue whose turn this is (its identity).
    fn queue_id(&self) -> usize;
}

impl<J> HoldsTurn for Turn<'_, J> {
    fn queue_id(&self) -> usize {
        std::ptr::from_ref(self.queue) as usize
    }
}

impl<J> HoldsTurn for OwnedTurn<J> {
    fn queue_id(&self) -> usize {
        std::sync::Arc::as_ptr(&self.queue) as usize
    }
}

/// A value that only the holder of a queue's turn may use (the writer's
/// connection): [`enter`](Guarded::enter) takes a turn of that queue as
/// proof and asserts it is one. The mutex inside is therefore never
/// contended; it makes the value `Sync` without `unsafe`.
pub(crate) struct Guarded<T> {
    /// The identity of the queue whose turn is asked for.
    queue_id: usize,
    value: std::sync::Mutex<T>,
}

impl<T> Guarded<T> {
    /// Guards `value` by the turn of `queue`.
    pub fn new<J>(queue: &std::sync::Arc<Queue<J>>, value: T) -> Guarded<T> {
        Guarded {
            queue_id: std::sync::Arc::as_ptr(queue) as usize,
            value: std::sync::Mutex::new(value),
        }
    }

    /// The value, for the holder of `turn`. Panics if `turn` is a turn of
    /// another queue.
    pub fn enter(&self, turn: &impl HoldsTurn) -> std::sync::MutexGuard<'_, T> {
        assert_eq!(
            turn.queue_id(),
            self.queue_id,
            "a guarded value entered with another queue's turn"
        );
        crate::unpoisoned::lock(&self.value)
    }
}

/// A job taken from the queue by the turn holder. Its owner stays asleep
/// until this is dropped, which wakes it with [`Entered::Done`].
pub(crate) struct Claimed<J> {
    waiter: Arc<Waiter<J>>,
    /// The owner's job.
    pub job: J,
}

/// Whether releasing a turn left the queue idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The turn went to a waiter.
    HandedOn,
    /// Nobody (allowed) was waiting: the writer is free.
    Idle,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<J> Waiter<J> {
    fn set(&self, status: Status) {
        {
            let mut slot = lock(&self.inner);
            debug_assert!(
                matches!(
                    (slot.status, status),
                    (Status::Waiting, Status::Granted) | (Status::Claimed, Status::Done)
                ),
                "waiter moved from {:?} to {:?}",
                slot.status,
                status
            );
            slot.status = status;
            if status == Status::Granted {
                // The owner runs its job itself; nobody else may hold it.
                slot.job = None;
            }
        }
        // Woken once the lock is let go, so that the owner does not wake
        // only to sleep again on this lock. It cannot miss the wake: it
        // reads the status under the lock and sleeps in the same step.
        self.wake.notify_one();
    }
}

impl<J> Default for Queue<J> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(State {
                held: false,
                gate_closed: false,
                waiters: VecDeque::new(),
            }),
        }
    }
}

impl<J> Queue<J> {
    /// Waits for the turn, or for the turn holder to run `job` (only for
    /// [`Kind::Job`], which must carry one). A caller that finds the turn
    /// free takes it at once, without waiting.
    pub fn enter(&self, kind: Kind, job: Option<J>) -> Entered<'_, J> {
        debug_assert_eq!(
            kind == Kind::Job,
            job.is_some(),
            "a job waiter carries its job"
        );
        let mut state = lock(&self.state);
        let blocked = state.gate_closed && kind != Kind::Priority;
        if !state.held && !blocked {
            debug_assert!(
                state.waiters.is_empty() || kind == Kind::Priority,
                "a free, open queue has no waiters"
            );
            state.held = true;
            return Entered::Turn(self.turn());
        }
        let me = Arc::new(Waiter {
            kind,
            inner: Mutex::new(Slot {
                status: Status::Waiting,
                job,
            }),
            wake: Condvar::new(),
        });
        if kind == Kind::Priority {
            state.waiters.push_front(Arc::clone(&me));
        } else {
            state.waiters.push_back(Arc::clone(&me));
        }
        drop(state);
        let mut slot = lock(&me.inner);
        loop {
            match slot.status {
                Status::Granted => return Entered::Turn(self.turn()),
                Status::Done => return Entered::Done,
                Status::Waiting | Status::Claimed => {
                    slot = me.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    fn turn(&self) -> Turn<'_, J> {
        Turn {
            queue: self,
            released: false,
        }
    }

    /// Hands the turn to the next waiter the rules allow, or leaves the
    /// queue idle. Only a turn's holder calls it.
    fn release_held(&self) -> Released {
        let mut state = lock(&self.state);
        debug_assert!(state.held, "releasing a turn nobody holds");
        let next = match state.waiters.front() {
            Some(w) if state.gate_closed && w.kind != Kind::Priority => None,
            Some(_) => state.waiters.pop_front(),
            None => None,
        };
        match next {
            Some(next) => {
                // `held` stays set: the turn is `next`'s from here, and it
                // is woken after the queue's lock is let go.
                drop(state);
                next.set(Status::Granted);
                Released::HandedOn
            }
            None => {
                state.held = false;
                Released::Idle
            }
        }
    }

    /// Closes the gate: from now on only [`Kind::Priority`] waiters are
    /// granted the turn. The current holder keeps it.
    pub fn close_gate(&self) {
        lock(&self.state).gate_closed = true;
    }

    /// Opens the gate and, if nobody holds the turn, grants it to the first
    /// waiter.
    pub fn open_gate(&self) {
        let mut state = lock(&self.state);
        state.gate_closed = false;
        if !state.held {
            if let Some(next) = state.waiters.pop_front() {
                state.held = true;
                drop(state);
                next.set(Status::Granted);
            }
        }
    }

    /// True while the gate is closed.
    #[cfg(test)]
    pub fn gate_closed(&self) -> bool {
        lock(&self.state).gate_closed
    }

    /// Waiters right now.
    pub fn depth(&self) -> usize {
        lock(&self.state).waiters.len()
    }
}

impl<J> Turn<'_, J> {
    /// Takes the next waiter's job, if the next waiter is a [`Kind::Job`]
    /// and the gate is open; the holder then runs it and drops the
    /// [`Claimed`] to wake its owner.
    pub fn claim_next(&mut self) -> Option<Claimed<J>> {
        let mut state = lock(&self.queue.state);
        if state.gate_closed || state.waiters.front()?.kind != Kind::Job {
            return None;
        }
        let waiter = state.waiters.pop_front()?;
        drop(state);
        let job = {
            let mut slot = lock(&waiter.inner);
            debug_assert_eq!(slot.status, Status::Waiting);
            // The owner keeps sleeping: only Done or Granted wake it.
            slot.status = Status::Claimed;
            slot.job.take().expect("a job waiter carries its job")
        };
        Some(Claimed { waiter, job })
    }

    /// Gives up the turn now and says whether the writer went idle.
    pub fn release(mut self) -> Released {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Released {
        debug_assert!(!self.released);
        self.released = true;
        self.queue.release_held()
    }
}

/// Takes the turn of `queue` if it is free and the gate is open, without
/// waiting: `None` when someone holds it or waits for it.
pub(crate) fn try_enter_owned<J>(queue: &std::sync::Arc<Queue<J>>) -> Option<OwnedTurn<J>> {
    let mut state = lock(&queue.state);
    if state.held || state.gate_closed {
        return None;
    }
    debug_assert!(
        state.waiters.is_empty(),
        "a free, open queue has no waiters"
    );
    state.held = true;
    Some(OwnedTurn {
        queue: std::sync::Arc::clone(queue),
        released: false,
    })
}

/// Waits for the turn of `queue` as a [`Kind::Turn`] waiter (in arrival
/// order, run by the waiter itself) and returns it held across calls.
pub(crate) fn enter_owned<J>(queue: &std::sync::Arc<Queue<J>>) -> OwnedTurn<J> {
    match queue.enter(Kind::Turn, None) {
        Entered::Turn(mut turn) => {
            // The turn now belongs to the owned handle, which releases it.
            turn.released = true;
            OwnedTurn {
                queue: std::sync::Arc::clone(queue),
                released: false,
            }
        }
        Entered::Done => unreachable!("a turn waiter carries no job to be done for it"),
    }
}

impl<J> OwnedTurn<J> {
    /// Gives up the turn now and says whether the writer went idle.
    pub fn release(mut self) -> Released {
        self.released = true;
        self.queue.release_held()
    }
}

impl<J> Drop for OwnedTurn<J> {
    fn drop(&mut self) {
        if !self.released {
            self.released = true;
            self.queue.release_held();
        }
    }
}

impl<J> Drop for Turn<'_, J> {
    fn drop(&mut self) {
        if !self.released {
            self.release_inner();
        }
    }
}

impl<J> Drop for Claimed<J> {
    fn drop(&mut self) {
        self.waiter.set(Status::Done);
    }
}

#[cfg(all(test, not(litelane_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;
    use std::time::Duration;

    fn wait_for_depth<J>(q: &Queue<J>, n: usize) {
        while q.depth() < n {
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_guarded_value_is_entered_only_with_a_turn_of_its_own_queue() {
        let q: Arc<Queue<u32>> = Arc::default();
        let other: Arc<Queue<u32>> = Arc::default();
        let guarded = Guarded::new(&q, 7u32);
        let Entered::Turn(t) = q.enter(Kind::Turn, None) else {
            panic!("a free queue must grant the turn");
        };
        *guarded.enter(&t) += 1;
        drop(t);
        let owned = try_enter_owned(&q).expect("free again");
        assert_eq!(*guarded.enter(&owned), 8, "an owned turn enters too");
        drop(owned);
        let Entered::Turn(foreign) = other.enter(Kind::Turn, None) else {
            panic!("a free queue must grant the turn");
        };
        let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(guarded.enter(&foreign));
        }));
        assert!(wrong.is_err(), "another queue's turn is refused");
    }

    #[test]
    fn a_free_queue_grants_at_once_and_goes_idle_on_release() {
        let q: Queue<u32> = Queue::default();
        let Entered::Turn(t) = q.enter(Kind::Job, Some(1)) else {
            panic!("a free queue must grant the turn");
        };
        assert_eq!(t.release(), Released::Idle);
        assert_eq!(q.depth(), 0);
    }

    #[test]
    fn waiters_are_served_in_arrival_order_and_priority_goes_first() {
        let q: Arc<Queue<u32>> = Arc::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let Entered::Turn(holder) = q.enter(Kind::Turn, None) else {
            unreachable!()
        };
        let mut handles = Vec::new();
        for (i, kind) in [
            (1, Kind::Turn),
            (2, Kind::Turn),
            (3, Kind::Turn),
            (0, Kind::Priority),
        ] {
            let (q2, order) = (Arc::clone(&q), Arc::clone(&order));
            let depth = q.depth();
            handles.push(thread::spawn(move || {
                let Entered::Turn(_t) = q2.enter(kind, None) else {
                    unreachable!()
                };
                lock(&order).push(i);
            }));
            wait_for_depth(&q, depth + 1);
        }
        drop(holder);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*lock(&order), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_holder_claims_only_jobs_at_the_head_and_never_a_plain_turn() {
        let q: Arc<Queue<u32>> = Arc::default();
        let Entered::Turn(mut holder) = q.enter(Kind::Turn, None) else {
            unreachable!()
        };
        let spawn = |kind: Kind, job: Option<u32>| {
            let q2 = Arc::clone(&q);
            let depth = q.depth();
            let h = thread::spawn(move || matches!(q2.enter(kind, job), Entered::Done));
            wait_for_depth(&q, depth + 1);
            h
        };
        let a = spawn(Kind::Job, Some(10));
        let b = spawn(Kind::Job, Some(11));
        let c = spawn(Kind::Turn, None);
        let d = spawn(Kind::Job, Some(12));
        let first = holder.claim_next().expect("a job at the head");
        assert_eq!(first.job, 10);
        let second = holder.claim_next().expect("a second job at the head");
        assert_eq!(second.job, 11);
        assert!(
            holder.claim_next().is_none(),
            "a plain turn is never claimed"
        );
        drop((first, second));
        assert!(a.join().unwrap(), "a claimed job's owner is told Done");
        assert!(b.join().unwrap());
        drop(holder);
        assert!(!c.join().unwrap(), "the plain turn gets a turn of its own");
        assert!(!d.join().unwrap(), "the job after it is granted a turn too");
    }

    #[test]
    fn a_closed_gate_admits_only_priority_and_opening_it_grants_the_first_waiter() {
        let q: Arc<Queue<u32>> = Arc::default();
        q.close_gate();
        let granted = Arc::new(AtomicUsize::new(0));
        let job = {
            let (q, granted) = (Arc::clone(&q), Arc::clone(&granted));
            thread::spawn(move || {
                let Entered::Turn(_t) = q.enter(Kind::Job, Some(1)) else {
                    unreachable!()
                };
                granted.fetch_add(1, Ordering::SeqCst);
            })
        };
        wait_for_depth(&q, 1);
        let Entered::Turn(mut p) = q.enter(Kind::Priority, None) else {
            unreachable!()
        };
        assert!(q.gate_closed());
        assert!(
            p.claim_next().is_none(),
            "nothing is claimed past a closed gate"
        );
        assert_eq!(p.release(), Released::Idle, "the job stays behind the gate");
        thread::sleep(Duration::from_millis(20));
        assert_eq!(granted.load(Ordering::SeqCst), 0);
        q.open_gate();
        job.join().unwrap();
        assert_eq!(granted.load(Ordering::SeqCst), 1);
    }
}

/// Model checks: run with
/// `RUSTFLAGS="--cfg litelane_loom" cargo test -p litelane --lib --release queue::model`.
#[cfg(all(test, litelane_loom))]
mod model {
    use super::*;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    /// Runs `jobs` through the queue from separate threads; returns how many
    /// jobs ran and checks that at most one thread held the turn at a time.
    fn run_jobs(kinds: &'static [Kind]) {
        loom::model(move || {
            let q: Arc<Queue<usize>> = Arc::new(Queue::default());
            let inside = Arc::new(AtomicUsize::new(0));
            let ran = Arc::new(AtomicUsize::new(0));
            let handles: Vec<_> = kinds
                .iter()
                .enumerate()
                .map(|(i, &kind)| {
                    let (q, inside, ran) = (Arc::clone(&q), Arc::clone(&inside), Arc::clone(&ran));
                    thread::spawn(move || {
                        let job = (kind == Kind::Job).then_some(i);
                        match q.enter(kind, job) {
                            Entered::Turn(mut t) => {
                                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                                ran.fetch_add(1, Ordering::SeqCst);
                                while let Some(c) = t.claim_next() {
                                    assert_ne!(c.job, i);
                                    ran.fetch_add(1, Ordering::SeqCst);
                                    drop(c);
                                }
                                inside.fetch_sub(1, Ordering::SeqCst);
                                drop(t);
                            }
                            Entered::Done => {
                                assert_eq!(kind, Kind::Job, "only jobs are run by others")
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(
                ran.load(Ordering::SeqCst),
                kinds.len(),
                "every job ran exactly once"
            );
            assert_eq!(q.depth(), 0);
        });
    }

    #[test]
    fn loom_jobs_are_combined_or_granted_exactly_once() {
        run_jobs(&[Kind::Job, Kind::Job, Kind::Job]);
    }

    #[test]
    fn loom_plain_turns_and_jobs_mix_without_deadlock() {
        run_jobs(&[Kind::Job, Kind::Turn, Kind::Job]);
    }

    #[test]
    fn loom_priority_turns_pass_a_closed_gate_and_others_resume_when_it_opens() {
        loom::model(|| {
            let q: Arc<Queue<usize>> = Arc::new(Queue::default());
            let writes = Arc::new(AtomicUsize::new(0));
            let writer = {
                let (q, writes) = (Arc::clone(&q), Arc::clone(&writes));
                thread::spawn(move || {
                    if let Entered::Turn(t) = q.enter(Kind::Job, Some(1)) {
                        // A writer may hold the turn only while the gate is open
                        // or while it was already holding it when the gate closed.
                        writes.fetch_add(1, Ordering::SeqCst);
                        drop(t);
                    }
                })
            };
            let checkpointer = {
                let q = Arc::clone(&q);
                thread::spawn(move || {
                    q.close_gate();
                    let Entered::Turn(t) = q.enter(Kind::Priority, None) else {
                        unreachable!()
                    };
                    drop(t);
                    q.open_gate();
                })
            };
            checkpointer.join().unwrap();
            writer.join().unwrap();
            assert_eq!(
                writes.load(Ordering::SeqCst),
                1,
                "the writer was not lost behind the gate"
            );
            assert!(!q.gate_closed());
        });
    }
}
