//! Group commit of the WAL's fsync across processes.
//!
//! Under `safe`, SQLite syncs the WAL inside every `COMMIT`
//! (`synchronous=FULL`), while the committing process holds the write lock:
//! processes queued behind it wait for its fsync, and every commit pays one.
//! With the cross-process queue on, litelane's writer commits with
//! `synchronous=NORMAL` instead (the frames are written, the commit is
//! visible) and makes the commit durable *after* its turn, through this
//! module, the way database servers group their log flushes. Three counters
//! live in the first page of the lock file, mapped shared by every process
//! ([`SharedPage`]) and changed only with atomic instructions:
//!
//! 1. Right after its `COMMIT`, the process *counts* its commit:
//!    `seq = ++counted`.
//! 2. It hands its turn on (the next process commits while this one syncs).
//!    If `synced >= seq` already, it is done. Otherwise it tries the
//!    *syncer* lock (a mutex of the process, then an open-file-description
//!    lock on byte [`SYNCER_BYTE`]) without waiting for it, and looks again
//!    once it holds it. A process that found itself alone on the file takes
//!    only the mutex: two `fcntl` calls fewer per commit. While another
//!    thread or process holds the lock, it sleeps on one of
//!    two *bells* (futex words beside the counters): the *done* bell when
//!    the running sync's target (published in the page) covers its commit,
//!    the *next* bell when it does not. A syncer, once it raised `synced`
//!    and let go of the lock, rings the done bell (wakes every sleeper
//!    there: their commits are durable) and then wakes one sleeper of the
//!    next bell, to run the next sync, and moves the others to the done
//!    bell (`FUTEX_CMP_REQUEUE`): that sync covers them, and they wake once,
//!    at its end. (Sleeping in the kernel's lock wait instead woke every
//!    waiter at each release, and each covered waiter that then took the
//!    byte and let it go woke the rest again: 2.1 context switches per
//!    transaction of 8 `safe` workers, measured in docs/concurrency.md.)
//!    The bells only say "look again": a waiter looks at the counters and
//!    tries the lock at every wake-up and at least every [`SYNC_POLL`] (a
//!    syncer that dies rings nothing; the kernel drops its lock).
//! 3. Still not covered: it reads `target = counted`, runs the WAL's sync
//!    (`fdatasync`), and raises `synced` to `target`: every commit counted so
//!    far, its own and those made during the previous sync, is durable after
//!    that one system call.
//!
//! An `fdatasync` flushes the file, not a descriptor: the frames every
//! process wrote before it began. A commit is counted only after its
//! `COMMIT` returned, so "counted before the sync began" implies "written
//! before the sync began". A process that dies while syncing drops the
//! syncer lock with its descriptors (the next one syncs again); one that
//! dies between its commit and its sync was never told `Ok`.
//!
//! The syncer lock only spares fsyncs: two processes syncing at once (one
//! that thought itself alone, one that had just opened the file) each raise
//! `synced` to what was counted before their own sync began, which is
//! durable either way, and each learns of a failed write-back through its
//! own descriptor of the WAL.
//!
//! **A failed fsync** may have dropped the dirty pages and cleared the error
//! (the kernel does not report it twice), and WAL recovery keeps only a
//! chain of valid frames: every commit at or after the failed one is then of
//! unknown durability. The failure is recorded (`failed`) and every commit
//! not confirmed before it is told so instead of `Ok`; see
//! docs/durability.md. The mark is synced to the lock file (so a power cut
//! does not drop it) and stays until the lock file is removed while no
//! process has the database open.

use std::fs::File;
use std::io;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};

use super::{lock_file, NotDurable};
use crate::ffi::{futex_wait, futex_wake_all, futex_wake_one_move_rest, SharedPage};
use crate::unpoisoned::try_lock;

/// Byte 2 of the lock file: held by the process running an fsync for all.
pub const SYNCER_BYTE: u64 = 2;
/// Offsets of the counters in the lock file's first page (after the
/// 32-byte header): commits counted, synced up to, failed at (0: never).
const COUNTED: usize = 64;
const SYNCED: usize = 72;
pub(super) const FAILED: usize = 80;
/// Offsets of the done bell and the next bell (32 bits each), rung after
/// each sync among processes, and of the target of the sync running now
/// (the last one begun).
const DONE_BELL: usize = 88;
const NEXT_BELL: usize = 92;
const SYNCING: usize = 96;
/// How often a waiter for another process's sync tries the syncer byte by
/// itself (a syncer that died rang nothing): 1 ms.
pub const SYNC_POLL: std::time::Duration = std::time::Duration::from_millis(1);
/// How often a thread waiting while another thread of its process holds
/// the syncer lock looks by itself: 50 ms. That thread rings when it lets
/// go, so this only bounds a ring that never came (a panic in the sync).
/// Polling at [`SYNC_POLL`] there would wake every waiting thread a
/// thousand times a second during a long fsync.
const LOCAL_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The counters of one lock file.
pub struct Counters {
    page: Arc<SharedPage>,
    /// The syncer lock among this process's threads.
    local: Mutex<()>,
}

/// The syncer lock, held: this process's mutex and, among processes, the
/// [`SYNCER_BYTE`] lock of a description of the lock file. Letting go (in
/// `Drop`: the byte, then the mutex) rings the bells, so that the threads
/// of this process sleeping on them while it was held look again at once.
struct Syncer<'a> {
    counters: &'a Counters,
    local: Option<std::sync::MutexGuard<'a, ()>>,
    byte: Option<&'a File>,
}

impl Drop for Syncer<'_> {
    fn drop(&mut self) {
        if let Some(file) = self.byte {
            let _ = lock_file::unlock(file, SYNCER_BYTE, 1);
        }
        drop(self.local.take());
        self.counters.ring();
    }
}

impl Counters {
    /// The counters in `page`, the first page of a lock file whose first
    /// page is written (see [`lock_file::initialize`]), mapped with
    /// [`SharedPage::map`]. Take no lock through the mapped file's open
    /// file description afterwards: the mapping keeps it alive, and its
    /// locks with it, after the file is closed.
    pub fn on(page: Arc<SharedPage>) -> Counters {
        Counters {
            page,
            local: Mutex::new(()),
        }
    }

    /// Step 1: counts a commit whose `COMMIT` has returned; its number.
    pub fn count(&self) -> u64 {
        self.page.word(COUNTED).fetch_add(1, SeqCst) + 1
    }

    /// Steps 2 and 3: returns once commit `seq` is durable (`Ok(Ok(ran))`,
    /// `ran` true when this call ran the fsync), or known not to be
    /// confirmable (`Ok(Err(_))`). `file` is an open description of the lock
    /// file, for the syncer lock among processes, which `alone` (this
    /// process found itself alone on the file) skips; see the module's
    /// notes. `Err` is an I/O error of the lock: the caller syncs by itself.
    pub fn wait_durable(
        &self,
        file: &File,
        alone: bool,
        seq: u64,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<Result<bool, NotDurable>> {
        loop {
            // Read before the looks: a ring after them wakes the sleep.
            let seen = self.bells_seen();
            if let Some(done) = self.settled(seq) {
                return Ok(done.map(|()| false));
            }
            let Some(local) = try_lock(&self.local) else {
                // Another thread of this process holds the syncer lock; it
                // rings the bells when it lets go.
                self.sleep(seq, seen, LOCAL_POLL);
                continue;
            };
            let mut syncer = Syncer {
                counters: self,
                local: Some(local),
                byte: None,
            };
            if !alone {
                // One thread per process waits for another process's sync
                // (the others sleep on the bells), polling the byte.
                loop {
                    let seen = self.bells_seen();
                    if let Some(done) = self.settled(seq) {
                        return Ok(done.map(|()| false));
                    }
                    if lock_file::lock_byte_now(file, SYNCER_BYTE)? {
                        syncer.byte = Some(file);
                        break;
                    }
                    self.sleep(seq, seen, SYNC_POLL);
                }
            }
            return Ok(self.sync_for(syncer, file, seq, sync));
        }
    }

    /// The two bells' counts, read before a look at the counters: a ring
    /// after the look then ends the sleep at once.
    fn bells_seen(&self) -> (u32, u32) {
        (self.done().load(SeqCst), self.next().load(SeqCst))
    }

    /// Sleeps on the done bell when the running sync covers `seq`, on the
    /// next bell when it does not, for at most `poll`.
    fn sleep(&self, seq: u64, (done_seen, next_seen): (u32, u32), poll: std::time::Duration) {
        if self.page.word(SYNCING).load(SeqCst) >= seq {
            futex_wait(self.done(), done_seen, poll);
        } else {
            futex_wait(self.next(), next_seen, poll);
        }
    }

    /// Step 3 under the syncer lock, which it lets go of (ringing the
    /// bells) before returning.
    fn sync_for(
        &self,
        syncer: Syncer<'_>,
        file: &File,
        seq: u64,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> Result<bool, NotDurable> {
        if let Some(done) = self.settled(seq) {
            return done.map(|()| false);
        }
        // Every commit counted by now was written before the sync.
        let target = self.page.word(COUNTED).load(SeqCst);
        self.page.word(SYNCING).fetch_max(target, SeqCst);
        // The outcome is published before the lock is let go: a syncer
        // after a failed sync must find the failure mark, or its own sync
        // could confirm commits whose frames the failure dropped.
        let out = match sync() {
            Ok(()) => {
                self.page.word(SYNCED).fetch_max(target, SeqCst);
                Ok(true)
            }
            Err(e) => {
                let at = target.max(seq);
                self.page.word(FAILED).fetch_max(at, SeqCst);
                persist_mark(file);
                Err(NotDurable::SyncFailed {
                    error: Some(e),
                    failed_at: at,
                })
            }
        };
        drop(syncer);
        out
    }

    /// After a sync among processes: wakes the waiters it covered, and one
    /// waiter it did not, to run the next; moves the others to wait for
    /// that one (see the module's notes).
    fn ring(&self) {
        self.done().fetch_add(1, SeqCst);
        futex_wake_all(self.done());
        let next = self.next().fetch_add(1, SeqCst).wrapping_add(1);
        futex_wake_one_move_rest(self.next(), next, self.done());
    }

    fn done(&self) -> &AtomicU32 {
        self.page.word32(DONE_BELL)
    }

    fn next(&self) -> &AtomicU32 {
        self.page.word32(NEXT_BELL)
    }

    /// The commit count at which an fsync failed (`None`: never).
    pub fn failed_at(&self) -> Option<u64> {
        match self.page.word(FAILED).load(SeqCst) {
            0 => None,
            at => Some(at),
        }
    }

    /// `Some` when commit `seq` needs no fsync of its caller: durable
    /// already, or never confirmable after a failure.
    fn settled(&self, seq: u64) -> Option<Result<(), NotDurable>> {
        let failed = self.page.word(FAILED).load(SeqCst);
        if failed != 0 {
            return Some(Err(NotDurable::SyncFailed {
                error: None,
                failed_at: failed,
            }));
        }
        (self.page.word(SYNCED).load(SeqCst) >= seq).then_some(Ok(()))
    }
}

/// Makes the failure mark just set in the mapped page durable: without it
/// a power cut could drop the mark with the page, and writes would resume
/// after the restart on commits of unknown durability. Best effort: if the
/// lock file cannot be synced either, the mark still holds for as long as
/// the machine runs.
fn persist_mark(file: &File) {
    #[cfg(test)]
    MARKS_PERSISTED.fetch_add(1, SeqCst);
    let _ = file.sync_data();
}

/// Calls of [`persist_mark`], for the tests.
#[cfg(test)]
static MARKS_PERSISTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The counters of the lock file at `path`, through a mapping of its own.
    fn mapped(path: &std::path::Path) -> Counters {
        let file = lock_file::reopen(path).unwrap();
        Counters::on(Arc::new(SharedPage::map(&file).unwrap()))
    }

    fn lock_file() -> (tempfile::TempDir, File, Counters) {
        let (dir, path, f) = super::super::scratch_lock_file();
        (dir, f, mapped(&path))
    }

    /// Another process in the middle of a sync: a description of the lock
    /// file in `dir` holding the syncer byte. Returns the lock file's path
    /// and that description.
    fn another_process_syncing(dir: &tempfile::TempDir) -> (std::path::PathBuf, File) {
        let lane = dir.path().join("t.db-lane");
        let syncer = lock_file::reopen(&lane).unwrap();
        assert!(lock_file::lock_byte_now(&syncer, SYNCER_BYTE).unwrap());
        (lane, syncer)
    }

    /// True when none of `waiters` has returned 20 ms from now.
    fn still_waiting<T>(waiters: &[&std::thread::ScopedJoinHandle<'_, T>]) -> bool {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waiters.iter().all(|w| !w.is_finished())
    }

    #[test]
    fn one_sync_covers_every_commit_counted_before_it() {
        let (_d, f, c) = lock_file();
        let syncs = AtomicUsize::new(0);
        let sync = || {
            syncs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let (a, b, cc) = (c.count(), c.count(), c.count());
        assert_eq!((a, b, cc), (1, 2, 3));
        assert!(
            c.wait_durable(&f, false, b, sync).unwrap().unwrap(),
            "ran the fsync"
        );
        assert_eq!(syncs.load(Ordering::SeqCst), 1);
        // a and c were counted before that sync began: covered, no fsync.
        for seq in [a, cc] {
            let ran = c.wait_durable(&f, false, seq, || panic!("no fsync needed"));
            assert!(!ran.unwrap().unwrap(), "covered by the earlier fsync");
        }
        // A commit counted after it needs a sync of its own.
        let d = c.count();
        assert!(c.wait_durable(&f, false, d, sync).unwrap().unwrap());
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn every_mapping_of_the_file_shares_the_counters() {
        let (d, f, c) = lock_file();
        let other = mapped(&d.path().join("t.db-lane"));
        assert_eq!(c.count(), 1);
        assert_eq!(other.count(), 2);
        assert!(c.wait_durable(&f, false, 2, || Ok(())).unwrap().unwrap());
        let covered = other.wait_durable(&f, false, 1, || panic!("covered"));
        assert!(!covered.unwrap().unwrap());
    }

    /// A process alone skips the lock byte, not the sharing among its
    /// threads: a commit counted before another thread's sync began waits
    /// for that sync and needs none of its own; meanwhile another
    /// description can take the syncer byte (no `fcntl` lock was taken).
    #[test]
    fn alone_the_threads_of_a_process_share_one_sync_without_the_lock_byte() {
        let (d, f, c) = lock_file();
        let (f, c) = (&f, &c);
        let path = d.path().join("t.db-lane");
        let (a, b) = (c.count(), c.count());
        let (started_tx, started) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let syncing = s.spawn(move || {
                c.wait_durable(f, true, a, || {
                    started_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    Ok(())
                })
            });
            started.recv().unwrap();
            let probe = lock_file::reopen(&path).unwrap();
            assert!(
                lock_file::lock_byte_now(&probe, SYNCER_BYTE).unwrap(),
                "alone, the sync runs without the lock byte"
            );
            lock_file::unlock_byte(&probe, SYNCER_BYTE).unwrap();
            let other = lock_file::reopen(&path).unwrap();
            let covered = s.spawn(move || c.wait_durable(&other, true, b, || panic!("covered")));
            assert!(still_waiting(&[&covered]), "waits for the running sync");
            go.send(()).unwrap();
            assert!(syncing.join().unwrap().unwrap().unwrap(), "ran the sync");
            assert!(!covered.join().unwrap().unwrap().unwrap(), "covered by it");
        });
    }

    /// A commit that another process's sync covers is settled when that
    /// sync's bell rings: its waiter neither waits for the syncer byte nor
    /// takes it. (Waiting in the kernel for the byte instead kept it asleep
    /// until the syncer let go, and then had it take the byte and let go in
    /// turn, waking the other waiters again.)
    #[test]
    fn a_commit_covered_by_another_processs_sync_is_settled_without_the_byte() {
        use std::time::{Duration, Instant};
        let (d, f, c) = lock_file();
        let (lane, syncer) = another_process_syncing(&d);
        let seq = c.count();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| c.wait_durable(&f, false, seq, || panic!("covered")));
            assert!(still_waiting(&[&waiter]), "waits while the other sync runs");
            // The other process's sync ends: `synced` raised and the bell
            // rung, the byte still held (it has not let go yet).
            c.page.word(SYNCED).fetch_max(seq, SeqCst);
            c.ring();
            let rung = Instant::now();
            while !waiter.is_finished() && rung.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let settled = waiter.is_finished();
            let still_held =
                !lock_file::lock_byte_now(&lock_file::reopen(&lane).unwrap(), SYNCER_BYTE).unwrap();
            lock_file::unlock_byte(&syncer, SYNCER_BYTE).unwrap(); // lets a stuck waiter end
            assert!(
                settled,
                "a covered waiter does not wait for the syncer byte"
            );
            assert!(still_held, "the other process held the byte throughout");
            assert!(!waiter.join().unwrap().unwrap().unwrap(), "ran no fsync");
        });
    }

    /// Two commits counted while another process's sync runs (its target
    /// below them) wait on the next bell; when that sync ends, one of them
    /// runs the next sync, which covers both: one fsync, both told `Ok`.
    #[test]
    fn commits_the_running_sync_does_not_cover_share_the_next_one() {
        let (d, _f, c) = lock_file();
        let (lane, syncer) = another_process_syncing(&d);
        let first = c.count();
        c.page.word(SYNCING).fetch_max(first, SeqCst); // the other's target
        let later = [c.count(), c.count()];
        let syncs = AtomicUsize::new(0);
        std::thread::scope(|s| {
            // Each waiter with a mapping and a description of its own, as
            // another process would have.
            let waiters = later.map(|seq| {
                let (file, mine, syncs) =
                    (lock_file::reopen(&lane).unwrap(), mapped(&lane), &syncs);
                s.spawn(move || {
                    mine.wait_durable(&file, false, seq, || {
                        syncs.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                })
            });
            assert!(
                still_waiting(&waiters.iter().collect::<Vec<_>>()),
                "both wait"
            );
            // The other process's sync ends.
            c.page.word(SYNCED).fetch_max(first, SeqCst);
            lock_file::unlock_byte(&syncer, SYNCER_BYTE).unwrap();
            c.ring();
            let ran: Vec<bool> = waiters
                .map(|w| w.join().unwrap().unwrap().unwrap())
                .to_vec();
            assert_eq!(ran.iter().filter(|r| **r).count(), 1, "one of them synced");
        });
        assert_eq!(syncs.load(Ordering::SeqCst), 1, "one fsync for both");
        assert!(c.page.word(SYNCED).load(SeqCst) >= later[1]);
    }

    /// Alone, threads of a process that wait for a sync sleep on the bells
    /// too: when a sync ends, the commits it covered are told at once, even
    /// while a waiter it did not cover runs the next sync (waiting for the
    /// syncer's mutex instead kept them behind that next sync whenever its
    /// runner got the mutex first), and that runner needed no wake-up
    /// from them.
    #[test]
    fn alone_a_covered_waiter_does_not_wait_for_the_next_sync() {
        let (_d, f, c) = lock_file();
        let (f, c) = (&f, &c);
        let first = c.count();
        let (started_tx, started) = std::sync::mpsc::channel();
        let (go_first, go_first_rx) = std::sync::mpsc::channel::<()>();
        let (go_next, go_next_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let syncing = s.spawn(move || {
                c.wait_durable(f, true, first, || {
                    started_tx.send(()).unwrap();
                    go_first_rx.recv().unwrap();
                    Ok(())
                })
            });
            started.recv().unwrap();
            // Counted after the running sync began: not covered by it.
            let later = c.count();
            let next = s.spawn(move || {
                c.wait_durable(f, true, later, || {
                    go_next_rx.recv().unwrap();
                    Ok(())
                })
            });
            let covered: Vec<_> = (0..3)
                .map(|_| s.spawn(move || c.wait_durable(f, true, first, || panic!("covered"))))
                .collect();
            assert!(still_waiting(
                &covered.iter().chain([&next]).collect::<Vec<_>>()
            ));
            go_first.send(()).unwrap();
            assert!(syncing.join().unwrap().unwrap().unwrap());
            let start = std::time::Instant::now();
            while !covered.iter().all(|w| w.is_finished())
                && start.elapsed() < std::time::Duration::from_secs(2)
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let told = covered.iter().filter(|w| w.is_finished()).count();
            let next_running = !next.is_finished();
            go_next.send(()).unwrap();
            assert_eq!(told, 3, "covered commits told while the next sync runs");
            assert!(
                next_running,
                "the uncovered commit's sync was still running"
            );
            for w in covered {
                assert!(!w.join().unwrap().unwrap().unwrap(), "ran no fsync");
            }
            assert!(next.join().unwrap().unwrap().unwrap(), "ran the next sync");
        });
    }

    /// A commit waiting on a bell for another process's sync, which then
    /// fails, is told that its durability is unknown (never `Ok`), without
    /// running an fsync of its own: the failure mark settles it.
    #[test]
    fn a_waiter_is_told_when_the_other_processs_sync_fails() {
        let (d, f, c) = lock_file();
        let (_lane, syncer) = another_process_syncing(&d);
        let seq = c.count();
        c.page.word(SYNCING).fetch_max(seq, SeqCst); // it covers `seq`
        std::thread::scope(|s| {
            let waiter = s.spawn(|| c.wait_durable(&f, false, seq, || panic!("no fsync")));
            assert!(still_waiting(&[&waiter]), "waits while the other sync runs");
            // The other process's fsync fails: it marks the failure, lets
            // go of the byte and rings.
            c.page.word(FAILED).fetch_max(seq, SeqCst);
            lock_file::unlock_byte(&syncer, SYNCER_BYTE).unwrap();
            c.ring();
            assert!(matches!(
                waiter.join().unwrap().unwrap(),
                Err(NotDurable::SyncFailed {
                    error: None,
                    failed_at
                }) if failed_at == seq
            ));
        });
    }

    #[test]
    fn a_failed_sync_is_never_confirmed_later() {
        let (_d, f, c) = lock_file();
        let a = c.count();
        let b = c.count();
        let persisted = MARKS_PERSISTED.load(Ordering::SeqCst);
        let out = c.wait_durable(&f, false, a, || Err(io::Error::from_raw_os_error(5)));
        assert!(
            MARKS_PERSISTED.load(Ordering::SeqCst) > persisted,
            "the failure mark is synced to the lock file"
        );
        assert!(matches!(
            out.unwrap(),
            Err(NotDurable::SyncFailed {
                error: Some(_),
                failed_at: 2
            })
        ));
        // b was covered by the failed sync; a retry that succeeds (the
        // kernel cleared the error) must not confirm it, nor later commits,
        // whose frames chain on the lost ones.
        for seq in [b, c.count()] {
            let out = c.wait_durable(&f, false, seq, || Ok(())).unwrap();
            assert!(matches!(
                out,
                Err(NotDurable::SyncFailed { error: None, .. })
            ));
        }
    }
}
