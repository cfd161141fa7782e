//! Group commit of the WAL's fsync across processes.
//!
//! Under `safe`, SQLite syncs the WAL inside every `COMMIT`
//! (`synchronous=FULL`), while the committing process holds the write lock:
//! processes queued behind it wait for its fsync, and every commit pays one.
//! With the cross-process queue, litelane's writer commits with
//! `synchronous=NORMAL` instead (the frames are written, the commit is
//! visible) and makes it durable *after* its turn, through this module, the
//! way database servers group their log flushes:
//!
//! 1. Right after its `COMMIT`, the process *counts* its commit: `seq =
//!    ++counted` in the lock file's sync record (under the short mutex on
//!    byte [`SYNC_MUTEX_BYTE`]).
//! 2. It hands its turn on (the next process commits while this one syncs),
//!    then takes the *syncer* lock (byte [`SYNCER_BYTE`], sleeping in the
//!    kernel while another process syncs).
//! 3. Holding it, it reads the record: if `synced >= seq`, a sync that began
//!    after its commit was counted has succeeded — its commit is durable, no
//!    fsync of its own. Otherwise it reads `target = counted`, runs
//!    `fdatasync` on the WAL file, and records `synced = target`: every
//!    commit counted so far (its own and those made during the previous
//!    sync) is durable after that one system call.
//!
//! An `fdatasync` flushes the file, not a descriptor: the frames every
//! process wrote before it began. A commit is counted only after its
//! `COMMIT` returned, so "counted before the sync began" implies "written
//! before the sync began". A process that dies while syncing drops the
//! syncer lock with its descriptors (the next one syncs again); one that
//! dies between its commit and its sync was never told `Ok`.
//!
//! **A failed fsync** may have dropped the dirty pages and cleared the error
//! (the kernel does not report it twice), and WAL recovery keeps only a
//! chain of valid frames: every commit at or after the failed one is then of
//! unknown durability. The failure is recorded (`failed`) and every commit
//! counted up to it, or after it, is told so instead of `Ok`; see
//! docs/durability.md. The mark stays until the lock file is removed while
//! no process has the database open.
//!
//! When the lock file cannot be used, the process syncs the WAL itself:
//! slower, never less durable.

use std::fs::File;
use std::io;

use super::imp;

/// Byte 1 of the lock file: the short mutex around the sync record.
pub const SYNC_MUTEX_BYTE: u64 = 1;
/// Byte 2 of the lock file: held by the process running an fsync for all.
pub const SYNCER_BYTE: u64 = 2;
/// Offset of the sync record (inside the header page, after the header).
const RECORD_AT: u64 = 64;
const RECORD_LEN: usize = 28;

/// The lock file's sync record: commit counts, not times.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct SyncRecord {
    /// Commits counted since the record was made.
    counted: u64,
    /// Every commit up to this one is durable.
    synced: u64,
    /// An fsync that covered the commits up to this one failed (0: none).
    failed: u64,
}

impl SyncRecord {
    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.counted.to_le_bytes());
        b[8..16].copy_from_slice(&self.synced.to_le_bytes());
        b[16..24].copy_from_slice(&self.failed.to_le_bytes());
        let crc = crc32fast::hash(&b[..24]);
        b[24..28].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// A record that is missing or torn reads as new (see the module docs:
    /// counting then restarts, which never lets a commit be confirmed by a
    /// sync that began before it).
    fn decode(b: &[u8]) -> SyncRecord {
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if b.len() < RECORD_LEN
            || crc32fast::hash(&b[..24]).to_le_bytes() != b[24..28]
            || word(8) > word(0)
        {
            return SyncRecord::default();
        }
        SyncRecord {
            counted: word(0),
            synced: word(8),
            failed: word(16),
        }
    }
}

/// Why a commit could not be confirmed durable.
#[derive(Debug)]
pub enum NotDurable {
    /// An `fdatasync` of the WAL that covered this commit failed (in this
    /// process or another): the commit is visible now, and may or may not
    /// survive a power loss.
    SyncFailed {
        /// The failure, when it was this process's own fsync.
        error: Option<io::Error>,
        /// The commit count at which an fsync failed.
        failed_at: u64,
    },
}

/// Reads and updates the sync record under its mutex.
fn with_record<T>(file: &File, f: impl FnOnce(&mut SyncRecord) -> T) -> io::Result<T> {
    imp::lock_wait(file, imp::WRITE, SYNC_MUTEX_BYTE)?;
    let out = (|| {
        let mut b = [0u8; RECORD_LEN];
        let n = imp::read_at_most(file, &mut b, RECORD_AT)?;
        let mut r = SyncRecord::decode(&b[..n]);
        let before = r;
        let out = f(&mut r);
        if r != before {
            std::os::unix::fs::FileExt::write_all_at(file, &r.encode(), RECORD_AT)?;
        }
        Ok(out)
    })();
    let _ = imp::unlock(file, SYNC_MUTEX_BYTE, 1);
    out
}

/// Step 1: counts a commit whose `COMMIT` has returned; its sequence number.
pub fn count(file: &File) -> io::Result<u64> {
    with_record(file, |r| {
        r.counted += 1;
        r.counted
    })
}

/// Steps 2 and 3: returns once commit `seq` is durable (`Ok(Ok(ran))`,
/// `ran` true when this call ran the fsync), or known not to be confirmable
/// (`Ok(Err(_))`). `Err` is an I/O error of the lock file: the caller syncs
/// by itself.
pub fn wait_durable(
    file: &File,
    seq: u64,
    sync: impl FnOnce() -> io::Result<()>,
) -> io::Result<Result<bool, NotDurable>> {
    imp::lock_wait(file, imp::WRITE, SYNCER_BYTE)?;
    let out = (|| {
        let r = with_record(file, |r| *r)?;
        if r.failed != 0 {
            return Ok(Err(NotDurable::SyncFailed {
                error: None,
                failed_at: r.failed,
            }));
        }
        if r.synced >= seq {
            return Ok(Ok(false));
        }
        // Every commit counted by now was written before the sync begins.
        // (After a reset of the record, `seq` may be above the count: the
        // caller is still covered, by its own sync.)
        let target = r.counted;
        match sync() {
            Ok(()) => {
                with_record(file, |r| r.synced = r.synced.max(target))?;
                Ok(Ok(true))
            }
            Err(e) => {
                let target = target.max(seq).max(1);
                with_record(file, |r| r.failed = target)?;
                Ok(Err(NotDurable::SyncFailed {
                    error: Some(e),
                    failed_at: target,
                }))
            }
        }
    })();
    let _ = imp::unlock(file, SYNCER_BYTE, 1);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn lock_file() -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db-lane");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        (dir, f)
    }

    #[test]
    fn one_sync_covers_every_commit_counted_before_it() {
        let (_d, f) = lock_file();
        let syncs = AtomicUsize::new(0);
        let sync = || {
            syncs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let a = count(&f).unwrap();
        let b = count(&f).unwrap();
        let c = count(&f).unwrap();
        assert_eq!((a, b, c), (1, 2, 3));
        assert!(wait_durable(&f, b, sync).unwrap().unwrap(), "ran the fsync");
        assert_eq!(syncs.load(Ordering::SeqCst), 1);
        // a and c were counted before that sync began: covered, no fsync.
        for seq in [a, c] {
            let ran = wait_durable(&f, seq, || panic!("no fsync needed")).unwrap();
            assert!(!ran.unwrap(), "covered by the earlier fsync");
        }
        // A commit counted after it needs a sync of its own.
        let d = count(&f).unwrap();
        assert!(wait_durable(&f, d, sync).unwrap().is_ok());
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failed_sync_is_never_confirmed_later() {
        let (_d, f) = lock_file();
        let a = count(&f).unwrap();
        let b = count(&f).unwrap();
        let out = wait_durable(&f, a, || Err(io::Error::from_raw_os_error(5))).unwrap();
        assert!(matches!(
            out,
            Err(NotDurable::SyncFailed {
                error: Some(_),
                failed_at: 2
            })
        ));
        // b was covered by the failed sync; a retry that succeeds (the
        // kernel cleared the error) must not confirm it, nor later commits,
        // whose frames chain on the lost ones.
        for seq in [b, count(&f).unwrap()] {
            let out = wait_durable(&f, seq, || Ok(())).unwrap();
            assert!(matches!(
                out,
                Err(NotDurable::SyncFailed { error: None, .. })
            ));
        }
    }

    #[test]
    fn a_torn_record_restarts_counting_and_still_syncs_the_caller() {
        let (_d, f) = lock_file();
        for _ in 0..5 {
            count(&f).unwrap();
        }
        std::os::unix::fs::FileExt::write_all_at(&f, b"torn", RECORD_AT + 3).unwrap();
        // The caller's seq (5) is above the restarted count: it syncs itself.
        let synced = AtomicUsize::new(0);
        let out = wait_durable(&f, 5, || {
            synced.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert!(out.is_ok());
        assert_eq!(synced.load(Ordering::SeqCst), 1);
        assert_eq!(count(&f).unwrap(), 1, "counting restarted");
    }

    #[test]
    fn records_round_trip_and_reject_damage() {
        let r = SyncRecord {
            counted: 9,
            synced: 7,
            failed: 3,
        };
        assert_eq!(SyncRecord::decode(&r.encode()), r);
        let mut b = r.encode();
        b[1] ^= 1;
        assert_eq!(SyncRecord::decode(&b), SyncRecord::default());
        assert_eq!(SyncRecord::decode(&b[..10]), SyncRecord::default());
    }
}
