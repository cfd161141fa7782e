//! # litelane-faultvfs: power cuts and I/O faults, simulated
//!
//! A SQLite VFS shim for tests. It wraps the default VFS (on Linux, `unix`)
//! and is registered under its own name; open a database through it with
//! `litelane::Options { vfs: Some(vfs.name().into()), .. }` (or rusqlite's
//! `Connection::open_with_flags_and_vfs`).
//!
//! **Power cuts.** The shim records, per file, every write and truncate since
//! the file's last `xSync`, and the bytes that sync made durable. A cut
//! ([`FaultVfs::cut_after`], [`FaultVfs::cut_now`]) writes into a fresh
//! directory the files a real cut could leave: the durable bytes plus a
//! random (seeded) subset of the unsynced writes, the last one kept torn at a
//! 512-byte sector boundary half the time, and a file created or deleted since its
//! directory was last synced with or without its directory entry. From the
//! cut on, every read, write, sync, lock and open through the shim fails, so
//! the old connections can be dropped without touching anything. Open the
//! fresh directory with the ordinary VFS to see what survived.
//!
//! The model follows SQLite's unix VFS (`os_unix.c`): a directory is synced
//! only on the first `xSync` of a journal or WAL opened with
//! `SQLITE_OPEN_CREATE` and on `xDelete(.., syncDir=1)`; files found on disk
//! when first opened are taken as durable. The shim's file methods are
//! version 2 (no `xFetch`), so memory-mapped I/O is off for files opened
//! through it: every read goes through `xRead`. Shared memory (`-shm`) is
//! passed through and is not part of the cut image (SQLite rebuilds it).
//!
//! **Faults.** [`FaultVfs::arm`] a [`Fault`]: the Nth read, write, sync or
//! truncate (optionally of one kind of file, from one thread) fails with
//! `SQLITE_IOERR_*`, writes only half and reports `SQLITE_FULL` (a short
//! write), reads half (`SQLITE_IOERR_SHORT_READ`) or returns garbage (a
//! corrupt page). [`FaultVfs::set_disk_space`] makes files fail with
//! `SQLITE_FULL` once they would grow by more than a given number of bytes.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ffi;
mod model;

use std::ffi::c_int;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::ThreadId;

use rusqlite::ffi as sq;

/// The sector size the shim tears writes at, in bytes (512).
pub const SECTOR: u64 = 512;

/// Which I/O call a [`Fault`] hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `xRead`.
    Read,
    /// `xWrite`.
    Write,
    /// `xSync` (fsync).
    Sync,
    /// `xTruncate`.
    Truncate,
}

/// What kind of file SQLite opened, from its open flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// The database file (`SQLITE_OPEN_MAIN_DB`).
    MainDb,
    /// The write-ahead log (`SQLITE_OPEN_WAL`).
    Wal,
    /// A rollback or super journal (`SQLITE_OPEN_MAIN_JOURNAL`,
    /// `SQLITE_OPEN_SUPER_JOURNAL`).
    Journal,
    /// Anything else (temporary files, sub-journals); not part of a cut.
    Other,
}

impl FileKind {
    fn from_flags(flags: c_int) -> FileKind {
        if flags & sq::SQLITE_OPEN_MAIN_DB != 0 {
            FileKind::MainDb
        } else if flags & sq::SQLITE_OPEN_WAL != 0 {
            FileKind::Wal
        } else if flags & (sq::SQLITE_OPEN_MAIN_JOURNAL | sq::SQLITE_OPEN_SUPER_JOURNAL) != 0 {
            FileKind::Journal
        } else {
            FileKind::Other
        }
    }
}

/// What an armed fault does to the call it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The call does nothing and fails: `SQLITE_IOERR_READ`, `_WRITE`,
    /// `_FSYNC` or `_TRUNCATE` by [`Op`].
    IoError,
    /// (`Op::Write` only) the first half of the buffer, rounded down to a
    /// sector, is written; the call returns `SQLITE_FULL`, as the unix VFS
    /// reports a write that wrote less than asked.
    ShortWrite,
    /// (`Op::Read` only) the second half of the buffer is zeroed and the call
    /// returns `SQLITE_IOERR_SHORT_READ`, as for a read past the end.
    ShortRead,
    /// (`Op::Read` only) the call succeeds but every byte read is `0xA5`: a
    /// page that went bad on the medium.
    CorruptRead,
}

/// One armed fault. Build with [`Fault::new`] and the chained setters.
///
/// ```
/// use litelane_faultvfs::{Effect, Fault, FileKind, Op};
/// // The third sync of the WAL fails with SQLITE_IOERR_FSYNC, once.
/// let f = Fault::new(Op::Sync, Effect::IoError).file(FileKind::Wal).after(2);
/// assert_eq!(f.times, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The call it hits.
    pub op: Op,
    /// What it does.
    pub effect: Effect,
    /// Only calls on this kind of file. Default: any file.
    pub file: Option<FileKind>,
    /// Matching calls let through before the first hit. Default 0.
    pub after: u64,
    /// Hits before the fault goes quiet. Default 1; `u64::MAX`: until
    /// [`FaultVfs::clear_faults`].
    pub times: u64,
    /// Only calls of at least this many bytes (e.g. a page size, to hit page
    /// reads and not header reads). Default 0.
    pub min_len: usize,
    /// Only calls made on this thread. Default: any thread.
    pub thread: Option<ThreadId>,
}

impl Fault {
    /// A fault hitting the first matching `op`, once.
    pub fn new(op: Op, effect: Effect) -> Fault {
        Fault {
            op,
            effect,
            file: None,
            after: 0,
            times: 1,
            min_len: 0,
            thread: None,
        }
    }
    /// Only calls on files of `kind`.
    pub fn file(mut self, kind: FileKind) -> Fault {
        self.file = Some(kind);
        self
    }
    /// Lets `n` matching calls through first (so `after(n)` hits the
    /// `n+1`-th).
    pub fn after(mut self, n: u64) -> Fault {
        self.after = n;
        self
    }
    /// Hits `n` matching calls (`u64::MAX`: until cleared).
    pub fn times(mut self, n: u64) -> Fault {
        self.times = n;
        self
    }
    /// Hits every matching call until [`FaultVfs::clear_faults`].
    pub fn persistent(self) -> Fault {
        self.times(u64::MAX)
    }
    /// Only calls of at least `bytes` bytes.
    pub fn min_len(mut self, bytes: usize) -> Fault {
        self.min_len = bytes;
        self
    }
    /// Only calls made on the current thread.
    pub fn this_thread(mut self) -> Fault {
        self.thread = Some(std::thread::current().id());
        self
    }
}

/// A fault or plan the shim cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// What a power cut left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutReport {
    /// The seed the subset of kept writes was drawn with.
    pub seed: u64,
    /// The number of the write/sync/truncate the power failed at (counted
    /// since the shim was registered).
    pub at_op: u64,
    /// Files written to the output directory: name and size in bytes.
    pub files: Vec<(PathBuf, u64)>,
    /// Files that existed but whose directory entry did not survive.
    pub files_lost: Vec<PathBuf>,
    /// Directory entries that had changed since their directory was synced.
    pub entries_in_doubt: u64,
    /// Unsynced writes and truncates at the time of the cut.
    pub pending_ops: u64,
    /// How many of them reached the disk (the last of each file perhaps torn).
    pub kept_ops: u64,
    /// Writes kept only in part (torn at a sector boundary).
    pub torn_writes: u64,
    /// Set if the output directory could not be written.
    pub error: Option<String>,
}

/// A registered fault-injecting, power-cut-simulating VFS.
///
/// Each `FaultVfs` registers its own VFS (named `litelane-faultvfs-N`), so
/// tests running in parallel do not share faults. The VFS stays registered
/// until the `FaultVfs` is dropped; its memory is never freed (a few hundred
/// bytes), because connections opened through it may outlive it.
pub struct FaultVfs {
    name: String,
    shared: Arc<model::Shared>,
}

impl fmt::Debug for FaultVfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultVfs")
            .field("name", &self.name)
            .finish()
    }
}

/// Makes the registered VFS `name` (a shim's [`FaultVfs::name`], or
/// SQLite's `"unix"`) the process's default VFS: every connection opened
/// after this without naming a VFS goes through it (for a test binary of
/// its own: the default is the whole process's).
pub fn make_default(name: &str) -> Result<(), Error> {
    ffi::make_default(name).map_err(Error)
}

impl FaultVfs {
    /// Registers a new shim over the default VFS (not as the default).
    pub fn register() -> Result<FaultVfs, Error> {
        let shared = Arc::new(model::Shared::default());
        let name = ffi::register(Arc::clone(&shared)).map_err(Error)?;
        Ok(FaultVfs { name, shared })
    }

    /// The name to open databases with (`Options::vfs`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The largest write asked of a file of `kind` so far (bytes, before
    /// any short write), the writes of a cut or refused call included.
    pub fn largest_write(&self, kind: FileKind) -> u64 {
        self.shared.largest_write(kind)
    }

    /// Arms `fault`. Fails if its effect does not fit its op (a short write
    /// on a read, a corrupt read on a sync...).
    pub fn arm(&self, fault: Fault) -> Result<(), Error> {
        let fits = match fault.effect {
            Effect::IoError => true,
            Effect::ShortWrite => fault.op == Op::Write,
            Effect::ShortRead | Effect::CorruptRead => fault.op == Op::Read,
        };
        if !fits {
            return Err(Error(format!(
                "fault effect {:?} cannot apply to {:?} calls",
                fault.effect, fault.op
            )));
        }
        if fault.times == 0 {
            return Err(Error("fault armed with times = 0 would never fire".into()));
        }
        self.shared.arm(fault);
        Ok(())
    }

    /// Disarms every fault and lifts the disk-space limit.
    pub fn clear_faults(&self) {
        self.shared.clear_faults();
    }

    /// Lets files grow by at most `bytes` more bytes in total from now on:
    /// a write that would grow a file past that fails with `SQLITE_FULL` and
    /// writes nothing (overwrites inside a file still succeed, as on a full
    /// disk). `None` lifts the limit.
    pub fn set_disk_space(&self, bytes: Option<u64>) {
        self.shared.set_space(bytes);
    }

    /// How many times an armed fault has hit, in total.
    pub fn faults_fired(&self) -> u64 {
        self.shared.fired()
    }

    /// Writes, syncs and truncates of database, WAL and journal files so far.
    pub fn io_ops(&self) -> u64 {
        self.shared.ops()
    }

    /// Successful `xSync` calls on files of `kind` so far (a sync that
    /// returned `Ok` made every earlier write of that file durable).
    pub fn syncs(&self, kind: FileKind) -> u64 {
        self.shared.syncs(kind)
    }

    /// Turns the disk into one that lies (`true`): every `xSync` reports
    /// success without making anything durable or syncing a directory. For
    /// proving that the power-cut harness can fail. Default `false`.
    pub fn set_lying_syncs(&self, on: bool) {
        self.shared.set_lying(on);
    }

    /// Unsynced writes and truncates right now, over all files.
    pub fn unsynced_ops(&self) -> u64 {
        self.shared.unsynced_ops()
    }

    /// Plans a power cut at the `ops`-th write/sync/truncate from now (at
    /// least 1): that call fails and the disk image is written to `out_dir`
    /// (created if needed), drawn with `seed`.
    pub fn cut_after(&self, ops: u64, seed: u64, out_dir: impl AsRef<Path>) {
        self.shared
            .plan_cut(ops, seed, out_dir.as_ref().to_path_buf());
    }

    /// Cuts the power now (or returns the report of the cut that already
    /// happened).
    pub fn cut_now(&self, seed: u64, out_dir: impl AsRef<Path>) -> CutReport {
        self.shared.cut_now(seed, out_dir.as_ref())
    }

    /// Whether the power is off.
    pub fn is_cut(&self) -> bool {
        self.shared.is_cut()
    }

    /// Unregisters the shim, as a program may unregister its VFS while
    /// other code's VFSs wrap it: connections already open keep using it,
    /// and its counters stay readable. Dropping it unregisters it too.
    pub fn unregister(&self) {
        ffi::unregister(&self.name);
    }

    /// The report of the cut, once it happened.
    pub fn cut_report(&self) -> Option<CutReport> {
        self.shared.report()
    }
}

impl Drop for FaultVfs {
    fn drop(&mut self) {
        ffi::unregister(&self.name);
    }
}
