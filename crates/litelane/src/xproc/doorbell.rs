//! Doorbells: the next ticket wakes on its own thread when a turn ends.
//!
//! The queue's kernel wait (`F_OFD_SETLKW` on the ticket ahead) has no
//! timeout, so a caller with a busy timeout waits through a helper thread:
//! two more thread wake-ups on every hand-off between processes, the costly
//! part of a short transaction's turn (measured in docs/concurrency.md,
//! "Doorbells").
//!
//! So a waiter first waits on the calling thread, on a *doorbell*: a 32-bit
//! counter per ticket slot (ticket mod [`BELLS`]) in the lock file's first
//! page, mapped shared by every process, slept on with a shared futex that
//! takes a timeout. A holder ending its turn unlocks its ticket byte, then
//! rings its slot (adds one, wakes every sleeper on it). A waiter reads the
//! slot's count *before* it checks the ticket byte, and sleeps only while
//! the count is unchanged, so a ring between the check and the sleep is
//! never missed. Slots are shared by tickets 64 apart: a ring for another
//! ticket only makes a waiter look again.
//!
//! The byte locks stay the truth: a doorbell only says "look again". A
//! holder that dies rings nothing, so a waiter on a doorbell also looks
//! every [`POLL`]; and after [`WINDOW`] it hands its wait to the kernel
//! wait, which wakes at once on a death. A dead holder is therefore noticed
//! within `POLL` (5 ms) early in a wait and at once later.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use crate::ffi::{futex_wait, futex_wake_all, SharedPage};

/// Offset of the first doorbell in the lock file's first page (after the
/// header and the sync counters of `durable.rs`).
const BELLS_AT: usize = 1024;
/// Doorbell slots: ticket `t` rings slot `t % BELLS`.
pub const BELLS: u64 = 64;
/// Offset of the *wanted* bell, after the ticket doorbells: rung by every
/// writer that takes a ticket and has to wait (see [`WantedBell`]).
const WANTED_AT: usize = BELLS_AT + BELLS as usize * 4;
/// Offset of the count of threads sleeping on the wanted bell.
const LISTENERS_AT: usize = WANTED_AT + 4;
/// How often a waiter on a doorbell or on the turn bell looks by itself (a
/// holder that died rang nothing): 5 ms. Every live holder rings, so this
/// only bounds how late a death is noticed early in a wait; each look is a
/// thread wake-up. With 1 ms (until session 23), 8 processes of one-row
/// transactions on 2 cores made 0.39 voluntary context switches per
/// transaction, 0.26 with 5 ms; lane SQLite's `go-8-NORMAL` cell went from
/// 0.60–0.76× stock to 0.81–0.96× (docs/lane-sqlite-bench.md, "Session 23").
pub const POLL: Duration = Duration::from_millis(5);
/// How long a waiter waits on the doorbell, on its own thread, before it
/// hands the wait to the kernel's lock wait (on a helper thread when it has
/// a timeout): 20 ms, longer than a queue of short transactions takes.
pub const WINDOW: Duration = Duration::from_millis(20);

/// The doorbells of one lock file.
pub struct Doorbells {
    page: Arc<SharedPage>,
}

impl Doorbells {
    /// The doorbells in `page`, the lock file's first page, mapped once and
    /// shared with the sync counters ([`super::durable::Counters::on`]).
    pub fn on(page: Arc<SharedPage>) -> Doorbells {
        Doorbells { page }
    }

    fn slot(&self, ticket: u64) -> &std::sync::atomic::AtomicU32 {
        self.page.word32(BELLS_AT + (ticket % BELLS) as usize * 4)
    }

    /// The count of `ticket`'s slot: read it before checking the ticket's
    /// byte, and pass it to [`wait`](Doorbells::wait).
    pub fn seen(&self, ticket: u64) -> u32 {
        self.slot(ticket).load(SeqCst)
    }

    /// Sleeps until `ticket`'s slot rings (its count is no longer `seen`),
    /// for at most `timeout`; may return early.
    pub fn wait(&self, ticket: u64, seen: u32, timeout: Duration) {
        futex_wait(self.slot(ticket), seen, timeout);
    }

    /// Rings `ticket`'s slot: call it after unlocking the ticket's byte.
    pub fn ring(&self, ticket: u64) {
        let slot = self.slot(ticket);
        slot.fetch_add(1, SeqCst);
        futex_wake_all(slot);
    }

    /// The wanted bell of the same page.
    pub fn wanted(&self) -> WantedBell {
        WantedBell {
            page: Arc::clone(&self.page),
        }
    }
}

/// The *wanted* bell: a 32-bit counter in the lock file's first page that
/// every writer rings (adds one, wakes its sleepers) when it takes a ticket
/// and finds the turn held. A process alone on the file keeps its turn
/// between writes with no deadline, and its reaper sleeps on this bell
/// (`carry.rs`): the first writer of another process to want the turn ends
/// that at once, and nobody wakes while the process is alone.
///
/// A ring always advances the count, but makes the system call that wakes
/// sleepers only while a listener count beside it says someone sleeps
/// there: with many processes writing, nobody does, and waiters pay one
/// atomic add. (Sleeper: count listeners up, then sleep while the bell's
/// count is unchanged; ringer: advance the count, then read the listeners.
/// In that order on both sides, a ringer that reads no listener advanced
/// the count before any sleeper's kernel check, which then does not sleep.
/// A process that dies listening leaves the count up: rings then wake no
/// one, at the cost of a system call.)
#[derive(Clone)]
pub struct WantedBell {
    page: Arc<SharedPage>,
}

impl WantedBell {
    fn word(&self) -> &std::sync::atomic::AtomicU32 {
        self.page.word32(WANTED_AT)
    }

    fn listeners(&self) -> &std::sync::atomic::AtomicU32 {
        self.page.word32(LISTENERS_AT)
    }

    /// The count: read it before deciding that nobody wants the turn.
    pub fn seen(&self) -> u32 {
        self.word().load(SeqCst)
    }

    /// Sleeps until the bell rings (its count is no longer `seen`), for at
    /// most `timeout`; may return early.
    pub fn wait(&self, seen: u32, timeout: Duration) {
        self.listeners().fetch_add(1, SeqCst);
        futex_wait(self.word(), seen, timeout);
        self.listeners().fetch_sub(1, SeqCst);
    }

    /// Rings the bell: a writer is waiting for the turn.
    pub fn ring(&self) {
        self.word().fetch_add(1, SeqCst);
        if self.listeners().load(SeqCst) > 0 {
            futex_wake_all(self.word());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn bell() -> (tempfile::TempDir, WantedBell) {
        let (dir, path, _f) = super::super::scratch_lock_file();
        let file = super::super::lock_file::reopen(&path).unwrap();
        let page = Arc::new(SharedPage::map(&file).unwrap());
        (dir, Doorbells::on(page).wanted())
    }

    /// A ring wakes a thread sleeping on the bell at once (its timeout is
    /// 5 s), and a ring with nobody listening still advances the count, so
    /// a sleeper that read the count before it does not sleep.
    #[test]
    fn a_ring_wakes_a_listener_and_is_never_missed() {
        let (_dir, bell) = bell();
        let seen = bell.seen();
        bell.ring(); // nobody listens: the count moves all the same
        assert_ne!(bell.seen(), seen);
        let start = Instant::now();
        bell.wait(seen, Duration::from_secs(5)); // rung already: no sleep
        assert!(start.elapsed() < Duration::from_secs(2));

        let seen = bell.seen();
        let sleeper = {
            let bell = bell.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                bell.wait(seen, Duration::from_secs(5));
                start.elapsed()
            })
        };
        // Ring once the sleeper is counted as listening.
        while bell.listeners().load(SeqCst) == 0 {
            std::thread::yield_now();
        }
        bell.ring();
        let slept = sleeper.join().unwrap();
        assert!(
            slept < Duration::from_secs(2),
            "woken by the ring: {slept:?}"
        );
        assert_eq!(bell.listeners().load(SeqCst), 0, "the sleeper left");
    }
}
