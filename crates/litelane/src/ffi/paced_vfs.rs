//! The checkpointer's VFS: the default VFS, with the database file's
//! write-back paced.
//!
//! A checkpoint copies the WAL's pages into the database file (into the
//! page cache: no disk write yet) and then syncs the file, which writes them
//! all at once. A commit's sync that runs meanwhile on the same disk waits
//! behind that burst: a cache flush completes only after every write before
//! it. So this VFS syncs the database file (data only) after every
//! [`PACE_BYTES`] a connection writes into it: a checkpoint's final sync,
//! and every commit's sync beside it, then wait for at most that much.
//! Syncing more often than SQLite asks never loses anything; it costs the
//! checkpoint a few more syncs, on the checkpointer's own thread.
//!
//! Only the main database file is paced; the WAL, the WAL index and
//! temporary files pass through untouched, as does every method but
//! `xWrite` and `xSync`.

use std::ffi::{c_char, c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rusqlite::ffi;

use super::sqlite::disable_memstatus;
use super::vfs_forward::{open_in, wrapping, Wraps};

/// The VFS's registered name.
const NAME: &std::ffi::CStr = c"litelane-paced";

/// Bytes written into a database file between two syncs of it: 1 MiB
/// (256 pages of 4 KiB), a few more syncs for a checkpoint of tens of MiB.
/// Not tuned: the soaks in docs/durability.md ("Pacing the checkpoint's
/// write-back") ran this value only.
const PACE_BYTES: i64 = 1 << 20;

/// The VFS whose connections' database files are synced every
/// [`PACE_BYTES`] written, registered once over the default VFS: its name,
/// or `None` when there is no default VFS or registering failed.
pub(crate) fn paced_vfs() -> Option<&'static str> {
    static REGISTERED: OnceLock<Option<&'static str>> = OnceLock::new();
    *REGISTERED.get_or_init(register)
}

/// Syncs this VFS made on its own (not asked for by SQLite), in the process.
static PACED_SYNCS: AtomicU64 = AtomicU64::new(0);

/// How many syncs the paced VFS has made on its own in this process.
#[cfg(test)]
pub(crate) fn paced_syncs() -> u64 {
    PACED_SYNCS.load(Ordering::Relaxed)
}

/// The VFS the paced one wraps (the default VFS when it was registered).
struct Inner(*mut ffi::sqlite3_vfs);

// SAFETY: a VFS object SQLite keeps for the life of the process; its
// methods may be called from any thread.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

static INNER: OnceLock<Inner> = OnceLock::new();

/// One open file of the paced VFS: its own header, then the wrapped VFS's
/// file object in the same allocation (SQLite allocates `szOsFile` bytes).
#[repr(C)]
struct PacedFile {
    /// `pMethods`: this VFS's methods, or NULL when the open failed.
    base: ffi::sqlite3_file,
    /// The wrapped VFS's file, right after this header.
    real: *mut ffi::sqlite3_file,
    /// The main database file: the only one paced.
    main_db: bool,
    /// Bytes written since the last sync.
    unsynced: i64,
}

/// Where the wrapped file starts in a [`PacedFile`]'s allocation.
const REAL_OFFSET: usize = size_of::<PacedFile>().next_multiple_of(align_of::<u64>());

impl Wraps for Inner {
    fn inner() -> *mut ffi::sqlite3_vfs {
        INNER.get().expect("registered before use").0
    }
}

fn register() -> Option<&'static str> {
    disable_memstatus();
    // SAFETY: sqlite3_vfs_find initializes SQLite if needed and returns a
    // registered VFS (which lives as long as the process) or NULL.
    let default = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    if default.is_null() {
        return None;
    }
    INNER.get_or_init(|| Inner(default));
    register_over::<Inner>(NAME).then_some("litelane-paced")
}

/// Registers a paced VFS named `name` over `W`'s VFS (the default VFS in
/// [`register`], a faulty one in the tests): whether SQLite took it.
fn register_over<W: Wraps>(name: &'static std::ffi::CStr) -> bool {
    let Ok(header) = c_int::try_from(REAL_OFFSET) else {
        return false;
    };
    // SAFETY: `W::inner` is a registered VFS object, valid for the life of
    // the process.
    let os_file = header + unsafe { (*W::inner()).szOsFile };
    let paced = Box::new(ffi::sqlite3_vfs {
        xOpen: Some(paced_open::<W>),
        ..wrapping::<W>(name, os_file)
    });
    // SAFETY: a fully initialized VFS object, leaked: connections keep
    // pointers to it for as long as they live.
    let rc = unsafe { ffi::sqlite3_vfs_register(Box::into_raw(paced), 0) };
    rc == ffi::SQLITE_OK
}

/// The methods of a paced file whose wrapped file has methods of
/// `version`: SQLite calls the shared-memory and memory-map methods only
/// of files whose methods' version has them.
const fn methods(version: c_int) -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: version,
        xClose: Some(paced_close),
        xRead: Some(paced_read),
        xWrite: Some(paced_write),
        xTruncate: Some(paced_truncate),
        xSync: Some(paced_sync),
        xFileSize: Some(paced_file_size),
        xLock: Some(paced_lock),
        xUnlock: Some(paced_unlock),
        xCheckReservedLock: Some(paced_check_reserved_lock),
        xFileControl: Some(paced_file_control),
        xSectorSize: Some(paced_sector_size),
        xDeviceCharacteristics: Some(paced_device_characteristics),
        xShmMap: Some(paced_shm_map),
        xShmLock: Some(paced_shm_lock),
        xShmBarrier: Some(paced_shm_barrier),
        xShmUnmap: Some(paced_shm_unmap),
        xFetch: Some(paced_fetch),
        xUnfetch: Some(paced_unfetch),
    }
}

static METHODS: [ffi::sqlite3_io_methods; 3] = [methods(1), methods(2), methods(3)];

// SAFETY (every method below): SQLite calls them with a file object this
// VFS's `xOpen` opened (its `pMethods` set only on success, so `real` is
// an open file of the wrapped VFS) and the arguments its VFS interface
// documents, which are passed on unchanged. A method is called only when
// the methods' version has it, which is the wrapped file's version, so the
// wrapped method is present.

/// The wrapped file of `file`.
unsafe fn real(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    (*(file as *mut PacedFile)).real
}

/// The wrapped file's methods.
unsafe fn real_methods(file: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    &*(*real(file)).pMethods
}

unsafe extern "C" fn paced_open<W: Wraps>(
    _: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let paced = file as *mut PacedFile;
    let real = (file as *mut u8).add(REAL_OFFSET) as *mut ffi::sqlite3_file;
    (*paced).base.pMethods = ptr::null();
    let rc = open_in(W::inner(), name, real, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        // "If xOpen sets pMethods, xClose is invoked even if xOpen failed":
        // ours stays NULL, so close the wrapped file here.
        if !(*real).pMethods.is_null() {
            if let Some(close) = (*(*real).pMethods).xClose {
                close(real);
            }
        }
        return rc;
    }
    let version = (*(*real).pMethods).iVersion.clamp(1, 3);
    ptr::write(
        paced,
        PacedFile {
            base: ffi::sqlite3_file {
                pMethods: &METHODS[version as usize - 1],
            },
            real,
            main_db: flags & ffi::SQLITE_OPEN_MAIN_DB != 0,
            unsynced: 0,
        },
    );
    ffi::SQLITE_OK
}

unsafe extern "C" fn paced_close(file: *mut ffi::sqlite3_file) -> c_int {
    let rc = (real_methods(file).xClose.expect("xClose"))(real(file));
    (*file).pMethods = ptr::null();
    rc
}

unsafe extern "C" fn paced_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    (real_methods(file).xRead.expect("xRead"))(real(file), buf, amount, offset)
}

/// The write, then, on the main database file, a sync of its data once
/// [`PACE_BYTES`] were written since the last one. A failed sync fails the
/// write (a checkpoint stops there, as it would at its own sync).
unsafe extern "C" fn paced_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    let rc = (real_methods(file).xWrite.expect("xWrite"))(real(file), buf, amount, offset);
    let paced = &mut *(file as *mut PacedFile);
    if rc != ffi::SQLITE_OK || !paced.main_db {
        return rc;
    }
    paced.unsynced += i64::from(amount);
    if paced.unsynced < PACE_BYTES {
        return rc;
    }
    paced.unsynced = 0;
    PACED_SYNCS.fetch_add(1, Ordering::Relaxed);
    let sync = real_methods(file).xSync.expect("xSync");
    sync(
        real(file),
        ffi::SQLITE_SYNC_NORMAL | ffi::SQLITE_SYNC_DATAONLY,
    )
}

unsafe extern "C" fn paced_truncate(
    file: *mut ffi::sqlite3_file,
    size: ffi::sqlite3_int64,
) -> c_int {
    (real_methods(file).xTruncate.expect("xTruncate"))(real(file), size)
}

unsafe extern "C" fn paced_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    (*(file as *mut PacedFile)).unsynced = 0;
    (real_methods(file).xSync.expect("xSync"))(real(file), flags)
}

unsafe extern "C" fn paced_file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    (real_methods(file).xFileSize.expect("xFileSize"))(real(file), size)
}

unsafe extern "C" fn paced_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    (real_methods(file).xLock.expect("xLock"))(real(file), level)
}

unsafe extern "C" fn paced_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    (real_methods(file).xUnlock.expect("xUnlock"))(real(file), level)
}

unsafe extern "C" fn paced_check_reserved_lock(
    file: *mut ffi::sqlite3_file,
    out: *mut c_int,
) -> c_int {
    (real_methods(file)
        .xCheckReservedLock
        .expect("xCheckReservedLock"))(real(file), out)
}

unsafe extern "C" fn paced_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    (real_methods(file).xFileControl.expect("xFileControl"))(real(file), op, arg)
}

unsafe extern "C" fn paced_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    (real_methods(file).xSectorSize.expect("xSectorSize"))(real(file))
}

unsafe extern "C" fn paced_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    (real_methods(file)
        .xDeviceCharacteristics
        .expect("xDeviceCharacteristics"))(real(file))
}

unsafe extern "C" fn paced_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    (real_methods(file).xShmMap.expect("xShmMap"))(real(file), region, size, extend, out)
}

unsafe extern "C" fn paced_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    (real_methods(file).xShmLock.expect("xShmLock"))(real(file), offset, n, flags)
}

unsafe extern "C" fn paced_shm_barrier(file: *mut ffi::sqlite3_file) {
    (real_methods(file).xShmBarrier.expect("xShmBarrier"))(real(file))
}

unsafe extern "C" fn paced_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    (real_methods(file).xShmUnmap.expect("xShmUnmap"))(real(file), delete)
}

unsafe extern "C" fn paced_fetch(
    file: *mut ffi::sqlite3_file,
    offset: ffi::sqlite3_int64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    (real_methods(file).xFetch.expect("xFetch"))(real(file), offset, amount, out)
}

unsafe extern "C" fn paced_unfetch(
    file: *mut ffi::sqlite3_file,
    offset: ffi::sqlite3_int64,
    page: *mut c_void,
) -> c_int {
    (real_methods(file).xUnfetch.expect("xUnfetch"))(real(file), offset, page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{Connection, OpenFlags};

    /// A checkpoint through the paced VFS syncs the database file once per
    /// [`PACE_BYTES`] it copies, and the file it leaves is the database the
    /// commits made, read back through the default VFS.
    #[test]
    fn a_checkpoint_syncs_every_pace_and_leaves_the_same_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paced.db");
        let conn = open_wal(&path, paced_vfs().expect("registered"));
        insert_blobs(&conn, 3 * PACE_BYTES / 1000);
        let sum: i64 = conn
            .query_row("SELECT sum(length(b)) + sum(id) FROM t", [], |r| r.get(0))
            .unwrap();
        let before = paced_syncs();
        let (busy, log, copied): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        let synced = paced_syncs() - before;
        assert_eq!((busy, log, copied), (0, 0, 0), "a complete checkpoint");
        // At least 3 MiB copied: at least two syncs of its own (other
        // tests' paced connections may add theirs).
        assert!(synced >= 2, "{synced} paced syncs for 3 MiB");
        drop(conn);
        let plain = Connection::open(&path).unwrap();
        let again: i64 = plain
            .query_row("SELECT sum(length(b)) + sum(id) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(again, sum);
        let check: String = plain
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let wal = std::fs::metadata(dir.path().join("paced.db-wal")).map(|m| m.len());
        assert!(
            wal.is_err() || wal.unwrap() == 0,
            "the WAL was copied back and truncated"
        );
    }

    /// The paced VFS's promise that a failed paced sync fails the write: a
    /// checkpoint whose paced sync fails stops there with the sync's error
    /// (no later sync is tried), and nothing committed is lost, neither in
    /// the files the failure leaves (read back as after a crash there) nor
    /// once the fault is cleared and the checkpoint run again. The failing
    /// sync is the first of the checkpoint's paced syncs or a later one.
    #[test]
    fn a_failed_paced_sync_fails_the_checkpoint_and_loses_nothing() {
        // (case, which of the checkpoint's paced syncs fails, from 1)
        let cases: [(&str, u64); 2] = [("the first pace", 1), ("a later pace", 3)];
        let pace = PACE_BYTES as u64;
        let vfs = paced_faulty_vfs();
        for (case, fail_at) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("faulty.db");
            let conn = open_wal(&path, vfs);
            // Four commits of a MiB of rows each.
            for _ in 0..4 {
                insert_blobs(&conn, PACE_BYTES / 1000);
            }
            let committed = rows(&conn);
            // Every page is in the WAL: the checkpoint copies them all.
            let bytes: i64 = conn
                .query_row(
                    "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            let bytes = u64::try_from(bytes).unwrap();
            assert!(
                bytes > (fail_at + 1) * pace,
                "{case}: more to copy than {fail_at} paces ({bytes} bytes)"
            );

            FAULT.arm(fail_at);
            let failed = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            });
            let syncs = FAULT.disarm();
            let err = match failed {
                Ok(busy) => panic!("{case}: the checkpoint went past a failed sync (busy {busy})"),
                Err(err) => err,
            };
            assert_eq!(
                err.sqlite_error().map(|e| e.extended_code),
                Some(ffi::SQLITE_IOERR_FSYNC),
                "{case}: the checkpoint fails with the sync's error: {err}"
            );
            assert_eq!(
                syncs, fail_at,
                "{case}: the checkpoint stopped at the failed sync"
            );

            // The files as a crash right after the failure would leave them:
            // the database file partly copied into, the WAL whole.
            let crashed = dir.path().join("crashed");
            std::fs::create_dir(&crashed).unwrap();
            for file in ["faulty.db", "faulty.db-wal"] {
                std::fs::copy(dir.path().join(file), crashed.join(file)).unwrap();
            }
            let written = std::fs::metadata(crashed.join("faulty.db")).unwrap().len();
            assert!(
                written >= fail_at * pace,
                "{case}: {fail_at} paces copied before the failure ({written} bytes)"
            );
            assert_holds(&crashed.join("faulty.db"), &committed, case);

            // The fault cleared, the same connection's checkpoint completes.
            let (busy, log, copied): (i64, i64, i64) = conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .unwrap();
            assert_eq!(
                (busy, log, copied),
                (0, 0, 0),
                "{case}: a complete checkpoint"
            );
            drop(conn);
            assert_holds(&path, &committed, case);
        }
    }

    /// A new database at `path` opened through `vfs`, in WAL mode with no
    /// automatic checkpoint, with an empty table `t(id, b)`.
    fn open_wal(path: &std::path::Path, vfs: &str) -> Connection {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn = Connection::open_with_flags_and_vfs(path, flags, vfs).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB);",
        )
        .unwrap();
        conn
    }

    /// Commits `rows` rows of 1,000 random bytes into `t`.
    fn insert_blobs(conn: &Connection, rows: i64) {
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO t(b) SELECT randomblob(1000) FROM n",
            [rows],
        )
        .unwrap();
    }

    /// Every row of `t`, in `id` order.
    fn rows(conn: &Connection) -> Vec<(i64, Vec<u8>)> {
        let mut stmt = conn.prepare("SELECT id, b FROM t ORDER BY id").unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }

    /// The database at `path`, opened through the default VFS, holds
    /// exactly the `committed` rows and passes its integrity check.
    fn assert_holds(path: &std::path::Path, committed: &[(i64, Vec<u8>)], case: &str) {
        let plain = Connection::open(path).unwrap();
        let found = rows(&plain);
        assert_eq!(found.len(), committed.len(), "{case}: every committed row");
        assert!(found == committed, "{case}: the committed rows, unchanged");
        let check: String = plain
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok", "{case}");
    }

    /// When the faulty VFS's main database files' syncs fail.
    struct Fault {
        /// Syncs of a main database file since [`Fault::arm`].
        syncs: AtomicU64,
        /// Which of them fails (only that one), counted from 1; 0: none.
        fail_at: AtomicU64,
    }

    /// The faulty VFS's fault: none until a test arms it (one test does).
    static FAULT: Fault = Fault {
        syncs: AtomicU64::new(0),
        fail_at: AtomicU64::new(0),
    };

    impl Fault {
        /// Makes the `nth` main-database sync from now fail, only that one.
        fn arm(&self, nth: u64) {
            self.syncs.store(0, Ordering::SeqCst);
            self.fail_at.store(nth, Ordering::SeqCst);
        }

        /// Clears the fault: how many main-database syncs were asked for
        /// since [`Fault::arm`], the failed one included.
        fn disarm(&self) -> u64 {
            self.fail_at.store(0, Ordering::SeqCst);
            self.syncs.load(Ordering::SeqCst)
        }
    }

    /// The faulty VFS, for [`register_over`]: the paced VFS wraps it.
    struct Faulty;

    /// The faulty VFS object, registered by [`paced_faulty_vfs`].
    static FAULTY_VFS: OnceLock<Inner> = OnceLock::new();

    impl Wraps for Faulty {
        fn inner() -> *mut ffi::sqlite3_vfs {
            FAULTY_VFS.get().expect("registered before use").0
        }
    }

    /// A paced VFS over a faulty one, registered once: its name. The faulty
    /// VFS is the default VFS, whose main database files' syncs fail as
    /// [`FAULT`] says.
    fn paced_faulty_vfs() -> &'static str {
        static REGISTERED: OnceLock<()> = OnceLock::new();
        REGISTERED.get_or_init(|| {
            // Registers the default VFS as `Inner`, which the faulty one wraps.
            paced_vfs().expect("registered");
            // SAFETY: `Inner` is a registered VFS object.
            let os_file = unsafe { (*Inner::inner()).szOsFile };
            let faulty = Box::into_raw(Box::new(ffi::sqlite3_vfs {
                xOpen: Some(faulty_open),
                ..wrapping::<Inner>(c"litelane-faulty", os_file)
            }));
            // SAFETY: a fully initialized VFS object, leaked.
            let rc = unsafe { ffi::sqlite3_vfs_register(faulty, 0) };
            assert_eq!(rc, ffi::SQLITE_OK);
            FAULTY_VFS.get_or_init(|| Inner(faulty));
            assert!(register_over::<Faulty>(c"litelane-paced-faulty"));
        });
        "litelane-paced-faulty"
    }

    /// A main database file's methods in the faulty VFS: the default VFS's
    /// file methods with `xSync` replaced, and the replaced one.
    #[repr(C)]
    struct FaultyMethods {
        /// First, so that a file's `pMethods` points to the whole.
        methods: ffi::sqlite3_io_methods,
        /// The default VFS's `xSync`, which [`faulty_sync`] calls.
        real_sync: unsafe extern "C" fn(*mut ffi::sqlite3_file, c_int) -> c_int,
    }

    /// The default VFS's open, then, for a main database file, its methods
    /// replaced by a copy whose `xSync` is [`faulty_sync`] (leaked: one per
    /// open, a few in the tests). The file object is the default VFS's own,
    /// so its other methods work on it unchanged (the unix VFS compares a
    /// file's methods with its own only in the macOS locking styles).
    ///
    /// # Safety
    /// As the default VFS's `xOpen`, with a file object of its size.
    unsafe extern "C" fn faulty_open(
        _: *mut ffi::sqlite3_vfs,
        name: *const c_char,
        file: *mut ffi::sqlite3_file,
        flags: c_int,
        out_flags: *mut c_int,
    ) -> c_int {
        let rc = open_in(Inner::inner(), name, file, flags, out_flags);
        if rc == ffi::SQLITE_OK && flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            let real = &*(*file).pMethods;
            let faulty = Box::leak(Box::new(FaultyMethods {
                methods: ffi::sqlite3_io_methods {
                    xSync: Some(faulty_sync),
                    ..*real
                },
                real_sync: real.xSync.expect("xSync"),
            }));
            (*file).pMethods = &faulty.methods;
        }
        rc
    }

    /// A main database file's sync in the faulty VFS: `SQLITE_IOERR_FSYNC`
    /// when [`FAULT`] says this one fails, else the default VFS's sync.
    ///
    /// # Safety
    /// `file` was opened by [`faulty_open`] as a main database file.
    unsafe extern "C" fn faulty_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
        let nth = FAULT.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        if nth == FAULT.fail_at.load(Ordering::SeqCst) {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        let methods = &*((*file).pMethods as *const FaultyMethods);
        (methods.real_sync)(file, flags)
    }

    /// A file the wrapped VFS cannot open fails to open, with its error,
    /// and nothing is left half-open (SQLite would call `xClose` on it).
    #[test]
    fn a_failed_open_is_the_wrapped_vfs_error() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = paced_vfs().expect("registered");
        let missing = dir.path().join("no-such-dir").join("x.db");
        let err = Connection::open_with_flags_and_vfs(
            &missing,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            vfs,
        )
        .unwrap_err();
        assert_eq!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::CannotOpen)
        );
    }
}
