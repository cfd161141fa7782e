//! litelane's two VFSs over SQLite's `unix` VFS: the checkpointer's, with
//! the database file's write-back paced, and the writer's, with the WAL's
//! appends gathered into one write. A connection opens in one of them only
//! while `unix` is the process's default VFS: a VFS a program made the
//! default gets every write, as SQLite makes it.
//!
//! **Paced (the checkpointer's).** A checkpoint copies the WAL's pages into
//! the database file (into the page cache: no disk write yet) and then
//! syncs the file, which writes them all at once. A commit's sync that runs
//! meanwhile on the same disk waits behind that burst: a cache flush
//! completes only after every write before it. So this VFS syncs the
//! database file (data only) after every [`PACE_BYTES`] a connection writes
//! into it: a checkpoint's final sync, and every commit's sync beside it,
//! then wait for at most that much. Syncing more often than SQLite asks
//! never loses anything; it costs the checkpoint a few more syncs, on the
//! checkpointer's own thread. Only the main database file is paced.
//!
//! **Gathering (the writer's).** SQLite writes each WAL frame with two
//! system calls (its 24-byte header, then its page). The writer's VFS
//! keeps the frames a transaction appends in a buffer of its WAL file (up
//! to [`GATHER_BYTES`]) and writes them with one call when the
//! transaction's commit frame is complete, before SQLite's `COMMIT` goes on
//! to publish the frames in the WAL index: so every frame a reader (of any
//! connection or process) can see is in the file, and a failed write fails
//! the commit, as SQLite's own would. Every other call on the WAL file
//! (a read, a sync, its size, a truncation, a file control, a lock, its
//! close) and every write that is not an append (SQLite rewriting a frame
//! of the transaction, a new WAL's header) first writes what is gathered,
//! so the file reads as if each write had been made at once. What a crash
//! loses from the buffer belongs to a transaction that had not committed.
//!
//! Every other file, and every other method, passes through untouched.

use std::ffi::{c_char, c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rusqlite::ffi;

use super::sqlite::disable_memstatus;
use super::vfs_forward::{inner_of, open_in, wrapping};
use crate::unpoisoned::lock;

/// The paced VFS's registered name.
const NAME: &std::ffi::CStr = c"litelane-paced";

/// The gathering VFS's registered name.
const GATHER_NAME: &std::ffi::CStr = c"litelane-gather";

/// The most a WAL file gathers before it writes (bytes): 120 KiB, 29
/// frames of 4 KiB pages in one system call. The unix VFS takes at most
/// 128 KiB - 1 in one write (it keeps 17 bits of the size: `seekAndWriteFd`
/// in sqlite3.c). A single write at least this large is written through.
pub(crate) const GATHER_BYTES: usize = 120 << 10;

/// A WAL frame's header (bytes): its bytes 4..8 hold the database's size
/// in pages after the commit on a commit frame, 0 on the others.
const FRAME_HEADER: usize = 24;

/// Bytes written into a database file between two syncs of it: 1 MiB
/// (256 pages of 4 KiB), a few more syncs for a checkpoint of tens of MiB.
/// Not tuned: the soaks in docs/durability.md ("Pacing the checkpoint's
/// write-back") ran this value only.
const PACE_BYTES: i64 = 1 << 20;

/// The VFS whose connections' database files are synced every
/// [`PACE_BYTES`] written, registered once over SQLite's `unix` VFS: its
/// name, or `None` when `unix` is not the default VFS right now (see
/// [`over_the_default`]) or registering failed.
pub(crate) fn paced_vfs() -> Option<&'static str> {
    static REGISTERED: OnceLock<Option<&'static str>> = OnceLock::new();
    over_the_default(*REGISTERED.get_or_init(|| register(Mode::Paced)))
}

/// The VFS whose connections' WAL files gather their appends (see the
/// module documentation), registered once over SQLite's `unix` VFS: its
/// name, or `None` when `unix` is not the default VFS right now (see
/// [`over_the_default`]) or registering failed.
pub(crate) fn gathering_vfs() -> Option<&'static str> {
    over_the_default(gathering_vfs_registered())
}

/// The gathering VFS over `unix`, registered once: its name.
fn gathering_vfs_registered() -> Option<&'static str> {
    static REGISTERED: OnceLock<Option<&'static str>> = OnceLock::new();
    *REGISTERED.get_or_init(|| register(Mode::Gather))
}

/// The gathering VFS over the registered VFS named `name` (see the module
/// documentation), registered the first time it is asked for: its name
/// (`litelane-gather+NAME`), or `None` when no VFS is named `name` or
/// registering failed. A gathering VFS is its own: gathering over one
/// would hand it writes of many frames, whose commit frames it could not
/// find.
pub(crate) fn gathering_vfs_over(name: &str) -> Option<&'static str> {
    static OVER: Mutex<Vec<(String, &'static str)>> = Mutex::new(Vec::new());
    let mut over = lock(&OVER);
    if let Some((_, gathering)) = over
        .iter()
        .find(|(inner, gathering)| inner == name || *gathering == name)
    {
        return Some(gathering);
    }
    if GATHER_NAME.to_str() == Ok(name) {
        return gathering_vfs_registered();
    }
    let inner_name = std::ffi::CString::new(name).ok()?;
    disable_memstatus();
    // SAFETY: as in `register`.
    let inner = unsafe { ffi::sqlite3_vfs_find(inner_name.as_ptr()) };
    if inner.is_null() {
        return None;
    }
    // Leaked, as the VFS object that points at it.
    let gathering: &'static std::ffi::CStr = Box::leak(
        std::ffi::CString::new(format!("litelane-gather+{name}"))
            .ok()?
            .into_boxed_c_str(),
    );
    if !register_over::<true>(inner, gathering) {
        return None;
    }
    let gathering = gathering.to_str().ok()?;
    over.push((name.to_string(), gathering));
    Some(gathering)
}

/// `registered`, one of this module's VFSs, if the VFS it wraps is the
/// process's default VFS at this moment: a program may make its own VFS
/// the default (an encrypting one, or SQLite's cksumvfs, which checksums
/// every write it takes for a page), before or after litelane registered
/// its VFSs, and every connection must then go through that one, handed
/// SQLite's own writes. `None` then: the connection opens in the default.
fn over_the_default(registered: Option<&'static str>) -> Option<&'static str> {
    let inner = INNER.get()?.0;
    // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, a registered
    // VFS object, or NULL; only its address is compared.
    let default = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    registered.filter(|_| default == inner)
}

/// What a VFS of this module does besides passing calls on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Syncs the main database file every [`PACE_BYTES`] written.
    Paced,
    /// Gathers the WAL file's appends.
    Gather,
}

/// Writes of gathered WAL appends (each one system call), in the process.
static GATHERED_WRITES: AtomicU64 = AtomicU64::new(0);

/// WAL writes of the gathering VFS that were not appends (written in
/// place, after what was gathered), in the process.
static WRITTEN_IN_PLACE: AtomicU64 = AtomicU64::new(0);

/// How many writes of gathered appends the WAL files of the gathering VFS
/// have made in this process.
#[cfg(test)]
pub(crate) fn gathered_writes() -> u64 {
    GATHERED_WRITES.load(Ordering::Relaxed)
}

/// Syncs this VFS made on its own (not asked for by SQLite), in the process.
static PACED_SYNCS: AtomicU64 = AtomicU64::new(0);

/// How many syncs the paced VFS has made on its own in this process.
#[cfg(test)]
pub(crate) fn paced_syncs() -> u64 {
    PACED_SYNCS.load(Ordering::Relaxed)
}

/// The VFS this module's VFSs wrap: SQLite's `unix` VFS.
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
    /// The main database file of a paced VFS: the only file paced.
    main_db: bool,
    /// Bytes written since the last sync.
    unsynced: i64,
    /// The gathering VFS's main database file and its WAL file share the
    /// WAL's appends not yet written.
    gathered: Option<Arc<Mutex<Gathered>>>,
    /// This file is the WAL whose appends are gathered.
    wal: bool,
}

/// A WAL file's appends not yet written: `buf` goes at `start`. Made when
/// the gathering VFS opens a main database file; the WAL file of the same
/// connection finds it ([`OPEN_DBS`]) when it opens. Both files flush it
/// before any call that must see the WAL as written: the WAL's own calls,
/// and the database file's locks and WAL-index calls (SQLite ends a write
/// transaction, committed or rolled back, by unlocking the WAL's write
/// lock there; another writer may then append where a rolled-back
/// transaction's gathered frames would go).
struct Gathered {
    /// The WAL's wrapped file, NULL while the WAL is not open.
    real: *mut ffi::sqlite3_file,
    buf: Vec<u8>,
    /// The file offset of `buf[0]`.
    start: i64,
    /// Where the frames written since the WAL's header end (bytes): a write
    /// at or past it, or right after `buf`, is an append.
    end: i64,
    /// The last write was a commit frame's header: the next one, its page,
    /// completes the transaction.
    commit_header: bool,
}

// SAFETY: `real` is used only under the mutex, by the connection that owns
// both files (SQLite calls a connection's files from one thread at a time).
unsafe impl Send for Gathered {}

/// The gathering VFS's open main database files, by the address of the name
/// SQLite opened them with: a WAL's name is in the same allocation, and
/// `sqlite3_filename_database` gives that address back.
static OPEN_DBS: Mutex<Vec<(usize, Arc<Mutex<Gathered>>)>> = Mutex::new(Vec::new());

/// Where the wrapped file starts in a [`PacedFile`]'s allocation.
const REAL_OFFSET: usize = size_of::<PacedFile>().next_multiple_of(align_of::<u64>());

fn register(mode: Mode) -> Option<&'static str> {
    disable_memstatus();
    // SAFETY: sqlite3_vfs_find initializes SQLite if needed and returns a
    // registered VFS (which lives as long as the process) or NULL.
    let unix = unsafe { ffi::sqlite3_vfs_find(c"unix".as_ptr()) };
    if unix.is_null() {
        return None;
    }
    INNER.get_or_init(|| Inner(unix));
    match mode {
        Mode::Paced => register_over::<false>(unix, NAME).then_some("litelane-paced"),
        Mode::Gather => register_over::<true>(unix, GATHER_NAME).then_some("litelane-gather"),
    }
}

/// Registers a VFS named `name` over `inner` (`unix` in [`register`], a
/// VFS named in [`Options::vfs`](crate::Options::vfs) in
/// [`gathering_vfs_over`], a faulty one in the tests), paced or (`GATHER`)
/// gathering: whether SQLite took it.
fn register_over<const GATHER: bool>(
    inner: *mut ffi::sqlite3_vfs,
    name: &'static std::ffi::CStr,
) -> bool {
    let Ok(header) = c_int::try_from(REAL_OFFSET) else {
        return false;
    };
    // SAFETY: `inner` is a registered VFS object, valid for the life of
    // the process (every caller found it with sqlite3_vfs_find).
    let paced = unsafe {
        Box::new(ffi::sqlite3_vfs {
            xOpen: Some(paced_open::<GATHER>),
            ..wrapping(name, header + (*inner).szOsFile, inner)
        })
    };
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

unsafe extern "C" fn paced_open<const GATHER: bool>(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let paced = file as *mut PacedFile;
    let real = (file as *mut u8).add(REAL_OFFSET) as *mut ffi::sqlite3_file;
    (*paced).base.pMethods = ptr::null();
    let rc = open_in(inner_of(vfs), name, real, flags, out_flags);
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
            main_db: !GATHER && flags & ffi::SQLITE_OPEN_MAIN_DB != 0,
            unsynced: 0,
            gathered: None,
            wal: false,
        },
    );
    if GATHER && !name.is_null() {
        link_gathered(&mut *paced, name, flags);
    }
    ffi::SQLITE_OK
}

/// Gives the gathering VFS's file `paced`, just opened as `name`, its share
/// of the WAL's gathered appends: a new one for a main database file, its
/// database's for a WAL file (none when that database was not opened
/// here: its appends are then written as they come).
unsafe fn link_gathered(paced: &mut PacedFile, name: *const c_char, flags: c_int) {
    let mut dbs = lock(&OPEN_DBS);
    if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
        let g = Arc::new(Mutex::new(Gathered {
            real: ptr::null_mut(),
            buf: Vec::new(),
            start: 0,
            end: 0,
            commit_header: false,
        }));
        dbs.push((name as usize, Arc::clone(&g)));
        paced.gathered = Some(g);
    } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
        let db = ffi::sqlite3_filename_database(name) as usize;
        if let Some((_, g)) = dbs.iter().find(|(at, _)| *at == db) {
            let mut state = lock(g);
            debug_assert!(state.buf.is_empty() && state.real.is_null());
            state.real = paced.real;
            state.end = 0;
            state.commit_header = false;
            drop(state);
            paced.gathered = Some(Arc::clone(g));
            paced.wal = true;
        }
    }
}

unsafe extern "C" fn paced_close(file: *mut ffi::sqlite3_file) -> c_int {
    let written = write_gathered(file);
    let rc = (real_methods(file).xClose.expect("xClose"))(real(file));
    let paced = &mut *(file as *mut PacedFile);
    // The header's owned parts: dropped once, as the file is closed once.
    if let Some(g) = paced.gathered.take() {
        if paced.wal {
            lock(&g).real = ptr::null_mut();
        } else {
            lock(&OPEN_DBS).retain(|(_, open)| !Arc::ptr_eq(open, &g));
        }
    }
    (*file).pMethods = ptr::null();
    if written != ffi::SQLITE_OK {
        return written;
    }
    rc
}

/// Writes what the WAL of `file` (the WAL itself or its database file)
/// has gathered, if anything (one call of the wrapped WAL file's
/// `xWrite`), and empties the buffer whatever the outcome: the write's
/// result code.
unsafe fn write_gathered(file: *mut ffi::sqlite3_file) -> c_int {
    match &(*(file as *mut PacedFile)).gathered {
        Some(g) => flush(&mut lock(g)),
        None => ffi::SQLITE_OK,
    }
}

/// Writes `g`'s buffer (see [`write_gathered`]).
unsafe fn flush(g: &mut Gathered) -> c_int {
    if g.buf.is_empty() {
        return ffi::SQLITE_OK;
    }
    let Ok(amount) = c_int::try_from(g.buf.len()) else {
        unreachable!("at most GATHER_BYTES are gathered");
    };
    debug_assert!(
        !g.real.is_null(),
        "appends are gathered only while the WAL is open"
    );
    GATHERED_WRITES.fetch_add(1, Ordering::Relaxed);
    let rc = write_wal(g, g.buf.as_ptr().cast(), amount, g.start);
    g.buf.clear();
    rc
}

/// The wrapped WAL file's own write.
unsafe fn write_wal(g: &Gathered, buf: *const c_void, amount: c_int, offset: i64) -> c_int {
    ((*(*g.real).pMethods).xWrite.expect("xWrite"))(g.real, buf, amount, offset)
}

/// Writes what `file`'s WAL has gathered, then runs `then` (the call that
/// needs the WAL as written); a failed write is the call's result.
unsafe fn after_gathered(file: *mut ffi::sqlite3_file, then: impl FnOnce() -> c_int) -> c_int {
    match write_gathered(file) {
        ffi::SQLITE_OK => then(),
        rc => rc,
    }
}

unsafe extern "C" fn paced_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    after_gathered(file, || {
        (real_methods(file).xRead.expect("xRead"))(real(file), buf, amount, offset)
    })
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
    let paced = &*(file as *mut PacedFile);
    if let (true, Some(g)) = (paced.wal, &paced.gathered) {
        return gather_write(&mut lock(g), buf, amount, offset);
    }
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

/// The gathering VFS's write to a WAL file whose appends gather in `g`
/// (see the module documentation).
unsafe fn gather_write(
    g: &mut Gathered,
    buf: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    let len = usize::try_from(amount).unwrap_or(0);
    let append = if g.buf.is_empty() {
        offset >= g.end
    } else {
        offset == g.start + g.buf.len() as i64
    };
    if offset == 0 || !append || len == 0 || len >= GATHER_BYTES {
        // A new WAL's header (what follows it are appends), a rewrite of a
        // frame already written or gathered, or a large write: after what
        // is gathered, in place.
        WRITTEN_IN_PLACE.fetch_add(1, Ordering::Relaxed);
        g.commit_header = false;
        let mut rc = flush(g);
        if rc == ffi::SQLITE_OK {
            rc = write_wal(g, buf, amount, offset);
        }
        if rc == ffi::SQLITE_OK {
            let written = offset + i64::from(amount);
            g.end = if offset == 0 {
                written
            } else {
                g.end.max(written)
            };
        }
        return rc;
    }
    if g.buf.len() + len > GATHER_BYTES {
        let rc = flush(g);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    if g.buf.is_empty() {
        g.buf.reserve(GATHER_BYTES);
        g.start = offset;
    }
    let data = std::slice::from_raw_parts(buf.cast::<u8>(), len);
    g.buf.extend_from_slice(data);
    g.end = g.end.max(offset + i64::from(amount));
    let completes_commit = g.commit_header;
    g.commit_header = len == FRAME_HEADER && data[4..8] != [0; 4];
    if completes_commit {
        // The commit frame's page: the transaction's frames go to the file
        // now, before SQLite publishes them, and its outcome is this write's.
        return flush(g);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn paced_truncate(
    file: *mut ffi::sqlite3_file,
    size: ffi::sqlite3_int64,
) -> c_int {
    after_gathered(file, || {
        let paced = &*(file as *mut PacedFile);
        if let (true, Some(g)) = (paced.wal, &paced.gathered) {
            let mut g = lock(g);
            g.end = g.end.min(size);
        }
        (real_methods(file).xTruncate.expect("xTruncate"))(real(file), size)
    })
}

unsafe extern "C" fn paced_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    after_gathered(file, || {
        (*(file as *mut PacedFile)).unsynced = 0;
        (real_methods(file).xSync.expect("xSync"))(real(file), flags)
    })
}

unsafe extern "C" fn paced_file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    after_gathered(file, || {
        (real_methods(file).xFileSize.expect("xFileSize"))(real(file), size)
    })
}

unsafe extern "C" fn paced_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    after_gathered(file, || {
        (real_methods(file).xLock.expect("xLock"))(real(file), level)
    })
}

unsafe extern "C" fn paced_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    after_gathered(file, || {
        (real_methods(file).xUnlock.expect("xUnlock"))(real(file), level)
    })
}

unsafe extern "C" fn paced_check_reserved_lock(
    file: *mut ffi::sqlite3_file,
    out: *mut c_int,
) -> c_int {
    after_gathered(file, || {
        (real_methods(file)
            .xCheckReservedLock
            .expect("xCheckReservedLock"))(real(file), out)
    })
}

unsafe extern "C" fn paced_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    after_gathered(file, || {
        (real_methods(file).xFileControl.expect("xFileControl"))(real(file), op, arg)
    })
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
    after_gathered(file, || {
        (real_methods(file).xShmLock.expect("xShmLock"))(real(file), offset, n, flags)
    })
}

unsafe extern "C" fn paced_shm_barrier(file: *mut ffi::sqlite3_file) {
    // SQLite's barrier has no result, so a failed write cannot fail it.
    // None is gathered here: a commit's frames are written with its commit
    // frame, before it publishes them behind this barrier.
    let _ = write_gathered(file);
    (real_methods(file).xShmBarrier.expect("xShmBarrier"))(real(file))
}

unsafe extern "C" fn paced_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    after_gathered(file, || {
        (real_methods(file).xShmUnmap.expect("xShmUnmap"))(real(file), delete)
    })
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

    /// When the faulty VFS's main database files' syncs fail (or, for
    /// [`WAL_FAULT`], its WAL files' writes of more than one frame).
    struct Fault {
        /// Faultable calls (syncs of a main database file, or WAL writes)
        /// since [`Fault::arm`].
        calls: AtomicU64,
        /// Which of them fails (only that one), counted from 1; 0: none.
        fail_at: AtomicU64,
    }

    /// The faulty VFS's fault: none until a test arms it (one test does).
    static FAULT: Fault = Fault {
        calls: AtomicU64::new(0),
        fail_at: AtomicU64::new(0),
    };

    /// The faulty VFS's fault of WAL writes longer than one frame (the
    /// gathering VFS's): none until a test arms it (one test does).
    static WAL_FAULT: Fault = Fault {
        calls: AtomicU64::new(0),
        fail_at: AtomicU64::new(0),
    };

    impl Fault {
        /// Makes the `nth` faultable call from now fail, only that one.
        fn arm(&self, nth: u64) {
            self.calls.store(0, Ordering::SeqCst);
            self.fail_at.store(nth, Ordering::SeqCst);
        }

        /// Clears the fault: how many faultable calls were made
        /// since [`Fault::arm`], the failed one included.
        fn disarm(&self) -> u64 {
            self.fail_at.store(0, Ordering::SeqCst);
            self.calls.load(Ordering::SeqCst)
        }
    }

    /// A paced VFS over a faulty one, registered once: its name. The faulty
    /// VFS is the default VFS, whose main database files' syncs fail as
    /// [`FAULT`] says.
    fn paced_faulty_vfs() -> &'static str {
        static REGISTERED: OnceLock<()> = OnceLock::new();
        REGISTERED.get_or_init(|| {
            // Registers `unix` as `INNER`, which the faulty one wraps.
            paced_vfs().expect("registered");
            let unix = INNER.get().expect("registered").0;
            // SAFETY: `unix` is a registered VFS object.
            let faulty = Box::into_raw(Box::new(unsafe {
                ffi::sqlite3_vfs {
                    xOpen: Some(faulty_open),
                    ..wrapping(c"litelane-faulty", (*unix).szOsFile, unix)
                }
            }));
            // SAFETY: a fully initialized VFS object, leaked.
            let rc = unsafe { ffi::sqlite3_vfs_register(faulty, 0) };
            assert_eq!(rc, ffi::SQLITE_OK);
            assert!(register_over::<false>(faulty, c"litelane-paced-faulty"));
            assert!(register_over::<true>(faulty, c"litelane-gather-faulty"));
        });
        "litelane-paced-faulty"
    }

    /// A gathering VFS over the faulty one (see [`paced_faulty_vfs`]), whose
    /// WAL writes of more than one frame fail as [`WAL_FAULT`] says.
    fn gather_faulty_vfs() -> &'static str {
        paced_faulty_vfs();
        "litelane-gather-faulty"
    }

    /// A main database file's methods in the faulty VFS: the default VFS's
    /// file methods with `xSync` replaced, and the replaced one.
    #[repr(C)]
    struct FaultyMethods {
        /// First, so that a file's `pMethods` points to the whole.
        methods: ffi::sqlite3_io_methods,
        /// The default VFS's `xSync`, which [`faulty_sync`] calls.
        real_sync: unsafe extern "C" fn(*mut ffi::sqlite3_file, c_int) -> c_int,
        /// The default VFS's `xWrite`, which [`faulty_write`] calls.
        real_write: unsafe extern "C" fn(
            *mut ffi::sqlite3_file,
            *const c_void,
            c_int,
            ffi::sqlite3_int64,
        ) -> c_int,
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
        vfs: *mut ffi::sqlite3_vfs,
        name: *const c_char,
        file: *mut ffi::sqlite3_file,
        flags: c_int,
        out_flags: *mut c_int,
    ) -> c_int {
        let rc = open_in(inner_of(vfs), name, file, flags, out_flags);
        let main_db = flags & ffi::SQLITE_OPEN_MAIN_DB != 0;
        let wal = flags & ffi::SQLITE_OPEN_WAL != 0;
        if rc == ffi::SQLITE_OK && (main_db || wal) {
            let real = &*(*file).pMethods;
            let faulty = Box::leak(Box::new(FaultyMethods {
                methods: ffi::sqlite3_io_methods {
                    xSync: if main_db {
                        Some(faulty_sync)
                    } else {
                        real.xSync
                    },
                    xWrite: if wal { Some(faulty_write) } else { real.xWrite },
                    ..*real
                },
                real_sync: real.xSync.expect("xSync"),
                real_write: real.xWrite.expect("xWrite"),
            }));
            (*file).pMethods = &faulty.methods;
        }
        rc
    }

    /// A WAL file's write in the faulty VFS: `SQLITE_IOERR_WRITE`, nothing
    /// written, when it is longer than one frame of 4 KiB and
    /// [`WAL_FAULT`] says this one fails; else the default VFS's write.
    ///
    /// # Safety
    /// `file` was opened by [`faulty_open`] as a WAL file.
    unsafe extern "C" fn faulty_write(
        file: *mut ffi::sqlite3_file,
        buf: *const c_void,
        amount: c_int,
        offset: ffi::sqlite3_int64,
    ) -> c_int {
        if amount > 4096 + FRAME_HEADER as c_int {
            let nth = WAL_FAULT.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if nth == WAL_FAULT.fail_at.load(Ordering::SeqCst) {
                return ffi::SQLITE_IOERR_WRITE;
            }
        }
        let methods = &*((*file).pMethods as *const FaultyMethods);
        (methods.real_write)(file, buf, amount, offset)
    }

    /// A main database file's sync in the faulty VFS: `SQLITE_IOERR_FSYNC`
    /// when [`FAULT`] says this one fails, else the default VFS's sync.
    ///
    /// # Safety
    /// `file` was opened by [`faulty_open`] as a main database file.
    unsafe extern "C" fn faulty_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
        let nth = FAULT.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if nth == FAULT.fail_at.load(Ordering::SeqCst) {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        let methods = &*((*file).pMethods as *const FaultyMethods);
        (methods.real_sync)(file, flags)
    }

    /// A deterministic blob for row `id`, version `v`, of `len` bytes.
    fn blob(id: i64, v: i64, len: usize) -> Vec<u8> {
        let mut x = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (v as u64);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Runs step `step` of the script on `conn` (see
    /// [`gathered_wal_reads_as_written_in_every_kind_of_transaction`]):
    /// whether it committed.
    fn script_step(conn: &Connection, step: u64) -> bool {
        let n = |k: u64| ((step.wrapping_mul(2_654_435_761) >> 7) % k) as i64;
        let insert = |from: i64, rows: i64, v: i64| {
            let mut st = conn
                .prepare_cached("INSERT OR REPLACE INTO t(id, b) VALUES (?1, ?2)")
                .unwrap();
            for id in from..from + rows {
                st.execute(rusqlite::params![
                    id,
                    blob(id, v, 200 + (id as usize * 37) % 3000)
                ])
                .unwrap();
            }
        };
        let v = step as i64;
        match step % 6 {
            // A few rows: a transaction of a few frames.
            0 => insert(n(400), 1 + n(5), v),
            // Many rows, in a cache of 8 pages: the transaction spills
            // frames before its commit, and writes some pages again (SQLite
            // then rewrites their frames in place).
            1 => {
                conn.execute_batch("BEGIN").unwrap();
                insert(n(400), 150 + n(100), v);
                insert(n(400), 150 + n(100), v + 1);
                conn.execute_batch("COMMIT").unwrap();
            }
            // A spilled transaction rolled back: its frames are never part
            // of the database.
            2 => {
                conn.execute_batch("BEGIN").unwrap();
                insert(n(400), 300, v);
                conn.execute_batch("ROLLBACK").unwrap();
                return false;
            }
            // A savepoint rolled back inside a committed transaction.
            3 => {
                conn.execute_batch("BEGIN; SAVEPOINT s").unwrap();
                insert(n(400), 120, v);
                conn.execute_batch("ROLLBACK TO s; RELEASE s").unwrap();
                insert(n(400), 3, v + 2);
                conn.execute_batch("COMMIT").unwrap();
            }
            // Deletes.
            4 => {
                conn.execute("DELETE FROM t WHERE id % 7 = ?1", [n(7)])
                    .unwrap();
            }
            // A checkpoint that lets the next writer start the WAL over.
            _ => {
                let mode = ["PASSIVE", "RESTART", "TRUNCATE"][n(3) as usize];
                conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()))
                    .unwrap();
            }
        }
        true
    }

    /// The gathering VFS's promise: the WAL it writes reads as the one the
    /// default VFS writes. One script of transactions (a few frames; many,
    /// spilled and rewritten in place; rolled back after spilling; with a
    /// savepoint rolled back; deletes; checkpoints of every mode, after
    /// which the WAL starts over) runs on a connection of the gathering VFS
    /// and on one of the default VFS. After every commit a reader of the
    /// default VFS sees exactly what the writer sees, and so does a copy of
    /// the files recovered from its WAL (as after a crash); at the end both files
    /// hold the same rows and pass their integrity check, and the script
    /// went through both the gathered writes and the writes in place.
    #[test]
    fn gathered_wal_reads_as_written_in_every_kind_of_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let gathered_path = dir.path().join("gathered.db");
        let plain_path = dir.path().join("plain.db");
        let gathered = open_wal(&gathered_path, gathering_vfs().expect("registered"));
        let plain = open_wal(&plain_path, "unix");
        for conn in [&gathered, &plain] {
            conn.execute_batch("PRAGMA cache_size = 8").unwrap();
        }
        let reader = Connection::open(&gathered_path).unwrap();
        let (writes, in_place) = (gathered_writes(), WRITTEN_IN_PLACE.load(Ordering::Relaxed));
        for step in 0..60 {
            let committed = script_step(&gathered, step);
            script_step(&plain, step);
            if committed {
                // The files as a crash right after the commit would leave
                // them (the process gone, the page cache kept), copied
                // before the writer reads anything: without the WAL index,
                // which SQLite rebuilds from the WAL, checking every frame.
                let copy = dir.path().join(format!("crash-{step}.db"));
                std::fs::copy(&gathered_path, &copy).unwrap();
                let wal = dir.path().join("gathered.db-wal");
                if wal.exists() {
                    std::fs::copy(&wal, dir.path().join(format!("crash-{step}.db-wal"))).unwrap();
                }
                let now = rows(&gathered);
                assert!(
                    rows(&reader) == now,
                    "step {step}: the reader sees the commit"
                );
                assert_holds(&copy, &now, &format!("step {step}, recovered"));
            }
        }
        let expected = rows(&plain);
        assert!(!expected.is_empty());
        assert!(
            rows(&gathered) == expected,
            "the same rows as through the default VFS"
        );
        drop((gathered, reader));
        assert_holds(&gathered_path, &expected, "gathered, reopened");
        assert!(gathered_writes() > writes, "appends were gathered");
        assert!(
            WRITTEN_IN_PLACE.load(Ordering::Relaxed) > in_place,
            "frames were rewritten in place"
        );
    }

    /// Frames a rolled-back transaction gathered never land on frames
    /// another writer appended after it: connection A (gathering, a cache
    /// of 8 pages) spills a transaction and rolls it back; B (another
    /// connection, the default VFS) then commits where those frames would
    /// have gone; A reads and commits again. B's rows stay, read live and
    /// from a copy of the files recovered from the WAL (as after a crash).
    #[test]
    fn a_rolled_back_transaction_leaves_nothing_gathered_for_another_writer() {
        // Rolled-back transactions of a few pages more than the cache: the
        // frames they spill are all still gathered when they roll back.
        for spilled in [12, 20, 30, 45] {
            let case = format!("{spilled} rows rolled back");
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("two-writers.db");
            let a = open_wal(&path, gathering_vfs().expect("registered"));
            a.execute_batch("PRAGMA cache_size = 8").unwrap();
            insert_blobs(&a, 5);
            // An empty WAL: the rollback then reads nothing from it (a read
            // would write what is gathered), and B's frames go where A's
            // gathered ones would.
            a.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .unwrap();
            let b = Connection::open(&path).unwrap();
            b.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            a.execute_batch("BEGIN").unwrap();
            insert_blobs(&a, spilled);
            a.execute_batch("ROLLBACK").unwrap();
            for id in 100..110 {
                b.execute(
                    "INSERT INTO t(id, b) VALUES (?1, ?2)",
                    rusqlite::params![id, blob(id, 1, 1500)],
                )
                .unwrap();
            }
            let after_b = rows(&b);
            assert_eq!(after_b.len(), 15, "{case}");
            assert!(rows(&a) == after_b, "{case}: A reads B's commits");
            let copy = dir.path().join("copy.db");
            std::fs::copy(&path, &copy).unwrap();
            std::fs::copy(
                dir.path().join("two-writers.db-wal"),
                dir.path().join("copy.db-wal"),
            )
            .unwrap();
            assert_holds(
                &copy,
                &after_b,
                &format!("{case}: recovered after B's commits"),
            );
            insert_blobs(&a, 3);
            let all = rows(&b);
            assert_eq!(all.len(), 18, "{case}");
            drop((a, b));
            assert_holds(&path, &all, &format!("{case}: after A's next commit"));
        }
    }

    /// A gathered write that fails fails the commit whose frames it holds,
    /// with the write's error: nothing of that transaction is in the
    /// database (read back through the default VFS, as after a crash), and
    /// the next transaction commits.
    #[test]
    fn a_failed_gathered_write_fails_its_commit_and_loses_nothing_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gather-faulty.db");
        let conn = open_wal(&path, gather_faulty_vfs());
        insert_blobs(&conn, 50);
        let committed = rows(&conn);
        WAL_FAULT.arm(1);
        let err = conn
            .execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
                 INSERT INTO t(b) SELECT randomblob(1000) FROM n",
                [],
            )
            .unwrap_err();
        let tried = WAL_FAULT.disarm();
        assert_eq!(
            tried, 1,
            "the first gathered write failed, and no other was tried"
        );
        assert_eq!(
            err.sqlite_error().map(|e| e.extended_code),
            Some(ffi::SQLITE_IOERR_WRITE),
            "{err}"
        );
        assert!(conn.is_autocommit(), "the transaction was rolled back");
        assert!(rows(&conn) == committed, "nothing of the failed commit");
        assert_holds(&path, &committed, "after the failed commit");
        insert_blobs(&conn, 10);
        let after = rows(&conn);
        assert_eq!(after.len(), committed.len() + 10);
        drop(conn);
        assert_holds(&path, &after, "after the next commit");
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
