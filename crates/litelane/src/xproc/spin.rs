//! Spinning for the turn: one waiting writer of all processes watches the
//! turn bell on its CPU for a short while before it sleeps.
//!
//! **Why.** A turn that ends while every waiter sleeps passes to a process
//! that must first be woken and scheduled. On 2 cores and 16 single-threaded
//! `safe` writers the turn sat idle through those wake-ups, about a third
//! of the machine idle while 16 processes queued (docs/concurrency.md,
//! "Spinning for the turn"). A waiter that is already running when the bell
//! rings takes the turn byte within a microsecond or so.
//!
//! **How much.** At most one writer spins at a time, among every process on
//! the file: it holds the *spinner lease*, a 32-bit word in the lock file's
//! first page. More spinners would only take CPU from the holder and the
//! syncer. A spin lasts at most [`SPIN`]; then the writer sleeps on the bell
//! as before. It spins only while turns are moving: on its first wait, or
//! after a wait that a ring ended; a wait that ran out its sleep (the 5 ms
//! poll) met a long turn, and the next one sleeps at once. Nobody spins on
//! a machine with one CPU: the holder could not run meanwhile.
//!
//! **Crashes.** The lease holds the time it was taken (milliseconds of the
//! wall clock, truncated to 32 bits, never 0). A writer that finds a lease
//! older than [`STALE`] takes it over: a spinner that died costs at most
//! that long without a spinner, never a turn. A jump of the clock, forward or
//! back (a lease then reads as from the future), only ends a lease early:
//! two spinners for a moment. The lease decides only who burns CPU: exclusion
//! rests on the turn byte alone, and a spin, like a sleep on the bell, only
//! says "look again".

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest a writer spins for the turn before it sleeps: 50 µs, about
/// one turn of a one-row `safe` transaction among 8–16 processes on 2 cores
/// (55–65 µs). Measured there: 50 and 100 µs the same; 25 µs 2–6% fewer
/// commits at 16 processes; 400 µs fewer (docs/concurrency.md, "Spinning
/// for the turn"). Half of 100 µs is half the CPU a spin can cost a machine
/// whose cores are busy with other work.
pub const SPIN: Duration = Duration::from_micros(50);

/// A lease older than this was left by a spinner that died (or whose clock
/// jumped): 50 ms, a thousand spins.
pub const STALE: Duration = Duration::from_millis(50);

/// The right to spin, held by at most one writer of all processes: released
/// when dropped (unless a writer took it over as stale meanwhile).
pub struct Lease<'a> {
    word: &'a AtomicU32,
    stamp: u32,
}

impl<'a> Lease<'a> {
    /// Takes the lease in `word` when it is free or stale; `None` when
    /// another writer spins now, or on a machine with one CPU.
    pub fn take(word: &'a AtomicU32) -> Option<Lease<'a>> {
        several_cpus()
            .then(|| Lease::take_at(word, stamp_now()))
            .flatten()
    }

    /// Takes the lease in `word` for a spin begun at `stamp`, when it is
    /// free or stale.
    fn take_at(word: &'a AtomicU32, stamp: u32) -> Option<Lease<'a>> {
        let held = word.load(SeqCst);
        let free = held == 0 || stamp.wrapping_sub(held) > STALE.as_millis() as u32;
        (free && word.compare_exchange(held, stamp, SeqCst, SeqCst).is_ok())
            .then_some(Lease { word, stamp })
    }

    /// Spins until `bell` no longer reads `seen`, for at most `limit`;
    /// true when it changed.
    pub fn spin(&self, bell: &AtomicU32, seen: u32, limit: Duration) -> bool {
        let start = Instant::now();
        loop {
            for _ in 0..16 {
                if bell.load(SeqCst) != seen {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= limit {
                return bell.load(SeqCst) != seen;
            }
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let _ = self.word.compare_exchange(self.stamp, 0, SeqCst, SeqCst);
    }
}

/// Now, as a lease's stamp: wall-clock milliseconds truncated to 32 bits,
/// never 0 (0 is a free lease). Every process on the machine reads the
/// same clock.
fn stamp_now() -> u32 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u32);
    ms.max(1)
}

/// True when this machine has more than one CPU to run on.
fn several_cpus() -> bool {
    static SEVERAL: OnceLock<bool> = OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_spins_at_a_time_and_the_lease_frees_on_drop() {
        let word = AtomicU32::new(0);
        if !several_cpus() {
            assert!(Lease::take(&word).is_none(), "a spin on one CPU");
            return;
        }
        let lease = Lease::take(&word).expect("a free lease is taken");
        assert_ne!(word.load(SeqCst), 0);
        assert!(Lease::take(&word).is_none(), "a second spinner");
        drop(lease);
        assert_eq!(word.load(SeqCst), 0, "released on drop");
        assert!(Lease::take(&word).is_some(), "free again");
    }

    #[test]
    fn a_dead_spinners_lease_is_taken_over_once_stale() {
        let now = stamp_now();
        let stale = STALE.as_millis() as u32;
        // A lease just under STALE old is still held; one over it is not.
        let word = AtomicU32::new(now.wrapping_sub(stale - 5).max(1));
        assert!(Lease::take_at(&word, now).is_none(), "a live lease");
        let word = AtomicU32::new(now.wrapping_sub(stale + 5).max(1));
        let lease = Lease::take_at(&word, now).expect("a stale lease is taken over");
        // The dead spinner's drop (had it run) would not free the new lease.
        let old = Lease {
            word: &word,
            stamp: now.wrapping_sub(stale + 5).max(1),
        };
        drop(old);
        assert_eq!(
            word.load(SeqCst),
            now,
            "the new lease survives the old one's drop"
        );
        drop(lease);
        assert_eq!(word.load(SeqCst), 0);
        // A lease stamped ahead of now (the clock went back since) is taken
        // over too: a backward jump never keeps a dead spinner's lease.
        let word = AtomicU32::new(now.wrapping_add(1000).max(1));
        assert!(
            Lease::take_at(&word, now).is_some(),
            "a lease from the future"
        );
    }

    #[test]
    fn a_spin_ends_when_the_bell_rings_or_at_its_limit() {
        let (word, bell) = (AtomicU32::new(0), AtomicU32::new(7));
        let lease = Lease::take_at(&word, stamp_now()).unwrap();
        // Not rung: ends at the limit, false.
        let t = Instant::now();
        assert!(!lease.spin(&bell, 7, Duration::from_millis(5)));
        assert!(t.elapsed() >= Duration::from_millis(5));
        // Rung by another thread 20 ms into a 10 s spin: true, long before
        // the limit.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                bell.fetch_add(1, SeqCst);
            });
            let t = Instant::now();
            assert!(lease.spin(&bell, 7, Duration::from_secs(10)));
            assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        });
        // Already rung: true at once.
        assert!(lease.spin(&bell, 7, Duration::ZERO));
    }
}
