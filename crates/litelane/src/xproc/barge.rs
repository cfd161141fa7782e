//! Bounded barging: a writer that arrives while the turn is free takes it at
//! once, out of ticket order, instead of waiting for the next ticket's
//! process to wake up and take it.
//!
//! **Why.** A strict ticket order hands each turn to a process that is
//! asleep. With more processes than cores that process is often not
//! running: on 2 cores and 8 workers the wake-up-to-running delay of the
//! next ticket was p50 5 µs, p90 64 µs, p99 161 µs (`perf sched`,
//! docs/concurrency.md), during which the turn is held by nobody. SQLite's
//! own lock goes to whichever process is running. And taking a ticket costs
//! about eight system calls (the header's mutex, the header, the ticket
//! byte, the walk); a free turn taken this way costs one.
//!
//! **How.** Whoever holds the turn, by ticket or out of order, write-locks
//! the *turn byte* (`layout::TURN_BYTE`) of the lock file: an
//! open-file-description lock, so the kernel drops it when its holder dies,
//! and mutual exclusion rests on it alone. A writer first tries the turn
//! byte without waiting
//! ([`Wait::Barging`](super::Wait::Barging)),
//! and keeps trying, each time a turn ends (the *turn bell*, a shared futex
//! rung at every release) and every [`super::doorbell::POLL`], for at most
//! [`super::BARGE_WINDOW`]. After that it takes a ticket, and is served in
//! ticket order like any other: when its ticket's turn comes it takes the
//! turn byte, and if a barger has it, announces itself as the *head* (a
//! word in the lock file's first page) and waits for it. While a head is
//! announced, no writer barges. Either wait, one waiter of all processes
//! at a time first watches the bell on its CPU for a short while
//! (`spin.rs`), so that a turn that ends passes to a running process.
//!
//! **The bound.** Between two turns taken by ticket, while tickets wait
//! (the header, read from the mapped page, has tickets after the last one
//! granted), at most [`super::MAX_BARGED_PER_TICKET`] (4) turns are taken
//! out of order, plus one per other writer that had already looked (a
//! barger checks, then tries the byte). Once a ticket whose turn has come
//! has announced itself as the head, it is overtaken by at most one turn
//! of each other writer that had looked before the announcement. So a
//! writer with `k` tickets ahead of it waits for at most `k + 1` turns by
//! ticket and `(k + 1) × (4 + writers − 1)` turns out of order, plus its
//! own first [`super::BARGE_WINDOW`] (6 ms) before it took its ticket.
//! Nobody is starved while others commit.
//!
//! The model in `xproc/model.rs` checks the exclusion, the absence of a
//! wedge, the one-turn-per-writer bound on a head and the count bound
//! between tickets, with bargers, deaths and timeouts in play (and fails
//! when either bound is tightened by one). `tests/it/xproc.rs` and
//! `litelane bench threads` measure the waits.
//!
//! **Crashes.** A barger that dies drops the turn byte with its description;
//! sleepers on the turn bell look again within [`super::doorbell::POLL`],
//! a head waiting for the byte too. A head that dies leaves the head word
//! set: writers then stop barging until the next turn taken by ticket (the
//! walk steps over the dead ticket) clears it, so a death costs only the
//! shortcut, never a turn.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use super::{spin, OUT_OF_ORDER};
use crate::ffi::{futex_wait, futex_wake_all, futex_wake_one, SharedPage};

/// The turn bell (a 32-bit count) and the count of its sleepers, after the
/// wanted bell of `doorbell.rs` (offsets in the lock file's first page).
const BELL_AT: usize = 1288;
const SLEEPERS_AT: usize = 1292;
/// The announced head: its ticket plus one, 0 when none.
const HEAD_AT: usize = 1296;
/// The holder of the turn byte: its ticket plus one ([`OUT_OF_ORDER`] + 1
/// for a barger), 0 when unknown (written after the byte is taken;
/// information only).
const HOLDER_AT: usize = 1304;
/// Turns taken out of order while tickets waited, since the last turn
/// taken by ticket.
const BARGED_AT: usize = 1312;
/// The spinner lease (`spin.rs`): who watches the turn bell on its CPU.
const SPINNER_AT: usize = 1316;
/// The record of the last turn taken out of order (pid, label, SQL): a
/// [`super::layout::RECORD_LEN`]-byte record, as the tickets' own.
pub const RECORD_AT: usize = 2048;

/// The shared words of bounded barging, in the lock file's first page.
pub struct Barging {
    page: Arc<SharedPage>,
    /// Whether this queue's waiters may spin (`spin.rs`): the engine's
    /// turns are short and its waiters few; lane SQLite's waiters do not
    /// (one per connection of every program, and their spin took the CPU
    /// the holder needed: docs/lane-sqlite-bench.md, "Diagnosis").
    spins: bool,
}

impl Barging {
    /// The words in `page`, the lock file's first page (shared with the
    /// doorbells and the sync counters).
    pub fn on(page: Arc<SharedPage>, spins: bool) -> Barging {
        const _: () = assert!(RECORD_AT + super::layout::RECORD_LEN <= SharedPage::MIN_LEN);
        Barging { page, spins }
    }

    fn bell(&self) -> &AtomicU32 {
        self.page.word32(BELL_AT)
    }

    fn sleepers(&self) -> &AtomicU32 {
        self.page.word32(SLEEPERS_AT)
    }

    fn head(&self) -> &AtomicU64 {
        self.page.word(HEAD_AT)
    }

    /// The turn bell's count: read it before trying the turn byte, and pass
    /// it to [`wait`](Barging::wait).
    pub fn seen(&self) -> u32 {
        self.bell().load(SeqCst)
    }

    /// Waits until a turn ends (the bell's count is no longer `seen`), for
    /// at most `timeout`; may return early. When `moving` (the last wait
    /// ended on a ring, or this is the first) and this queue's waiters
    /// spin, it first spins for at most
    /// [`spin::SPIN`] if no other writer spins (`spin.rs`), then sleeps;
    /// a turn that outlasts a sleep is a long one, not worth a CPU. Returns
    /// whether a turn ended: pass it as the next wait's `moving`.
    pub fn wait(&self, seen: u32, timeout: Duration, moving: bool) -> bool {
        let spun = moving
            && self.spins
            && spin::Lease::take(self.page.word32(SPINNER_AT))
                .is_some_and(|lease| lease.spin(self.bell(), seen, timeout.min(spin::SPIN)));
        if !spun {
            self.sleepers().fetch_add(1, SeqCst);
            futex_wait(self.bell(), seen, timeout);
            self.sleepers().fetch_sub(1, SeqCst);
        }
        self.seen() != seen
    }

    /// Rings the turn bell: call it after unlocking the turn byte. Wakes
    /// every sleeper while a head waits (it must not miss the ring), else
    /// one; makes no system call when nobody sleeps (the same ordering
    /// argument as the wanted bell's, `doorbell.rs`).
    pub fn ring(&self) {
        self.bell().fetch_add(1, SeqCst);
        if self.sleepers().load(SeqCst) > 0 {
            if self.head_waiting() {
                futex_wake_all(self.bell());
            } else {
                futex_wake_one(self.bell());
            }
        }
    }

    /// True while a ticket whose turn has come waits for the turn byte:
    /// nobody barges then.
    pub fn head_waiting(&self) -> bool {
        self.head().load(SeqCst) != 0
    }

    /// Announces `ticket` as the head (its turn has come; it is about to
    /// take the turn byte).
    pub fn announce(&self, ticket: u64) {
        self.head().store(ticket + 1, SeqCst);
    }

    /// Withdraws `ticket`'s announcement (it gave up), unless a later head
    /// has announced itself since.
    pub fn withdraw(&self, ticket: u64) {
        let _ = self.head().compare_exchange(ticket + 1, 0, SeqCst, SeqCst);
    }

    /// Clears any announcement: a ticket took the turn byte, so every
    /// ticket below it is finished and an announced head is its own or a
    /// dead one's.
    pub fn clear_head(&self) {
        self.head().store(0, SeqCst);
    }

    /// How many turns were taken out of order, while tickets waited, since
    /// the last turn taken by ticket.
    pub fn barged(&self) -> u32 {
        self.page.word32(BARGED_AT).load(SeqCst)
    }

    /// Counts a turn taken out of order while tickets waited.
    pub fn count_barged(&self) {
        self.page.word32(BARGED_AT).fetch_add(1, SeqCst);
    }

    /// A turn was taken by ticket: the count starts again.
    pub fn reset_barged(&self) {
        self.page.word32(BARGED_AT).store(0, SeqCst);
    }

    /// Notes who holds the turn byte now (`ticket`, or [`OUT_OF_ORDER`]).
    pub fn note_holder(&self, ticket: u64) {
        self.page.word(HOLDER_AT).store(ticket + 1, SeqCst);
    }

    /// True when the last holder of the turn byte to note itself took the
    /// turn out of order.
    pub fn held_out_of_order(&self) -> bool {
        self.page.word(HOLDER_AT).load(SeqCst) == OUT_OF_ORDER + 1
    }

    /// Writes the record of a turn taken out of order.
    pub fn write_record(&self, bytes: &[u8]) {
        self.page.write_bytes(RECORD_AT, bytes);
    }

    /// Reads the queue's header (the first bytes of the page, written by
    /// `pwrite` under the header's mutex: a read may be torn, which its
    /// checksum shows).
    pub fn read_header(&self, out: &mut [u8]) {
        self.page.read_bytes(0, out);
    }

    /// Reads the record of the last turn taken out of order (a read racing
    /// a write fails its checksum when decoded).
    pub fn read_record(&self, out: &mut [u8]) {
        self.page.read_bytes(RECORD_AT, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn barging() -> (tempfile::TempDir, Barging) {
        let (dir, path, _file) = super::super::scratch_lock_file();
        let file = super::super::lock_file::reopen(&path).unwrap();
        (
            dir,
            Barging::on(Arc::new(SharedPage::map(&file).unwrap()), true),
        )
    }

    /// `wait` says whether a turn ended, which decides whether the next
    /// wait may spin: false when it ran out, true on a ring, whether the
    /// ring came during a spin or a sleep; and no wait keeps the lease.
    #[test]
    fn a_wait_says_whether_a_turn_ended_and_leaves_the_lease_free() {
        let (_dir, b) = barging();
        let seen = b.seen();
        for moving in [true, false] {
            assert!(!b.wait(seen, Duration::from_millis(5), moving), "ran out");
        }
        // Rung at once (within any spin) and 20 ms in (during the sleep).
        for (moving, after) in [(true, 0), (true, 20), (false, 20)] {
            let seen = b.seen();
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(after));
                    b.ring();
                });
                let t = Instant::now();
                assert!(b.wait(seen, Duration::from_secs(10), moving));
                assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
            });
        }
        assert_eq!(
            b.page.word32(SPINNER_AT).load(SeqCst),
            0,
            "lease left taken"
        );
        assert_eq!(b.sleepers().load(SeqCst), 0, "a sleeper left counted");
    }
}
