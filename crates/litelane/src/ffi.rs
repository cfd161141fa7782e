//! Every `unsafe` of the engine lives in this private module
//! (`#![deny(unsafe_code)]` holds everywhere else).
//!
//! - SQLite's C API where rusqlite does not wrap it: turning off the global
//!   memory-statistics mutex (`sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`)
//!   and reading `SQLITE_DBSTATUS_DEFERRED_FKS`.
//! - [`JobRef`]: a queued write closure borrowed across threads for group
//!   commit by flat combining.
//! - [`BulkStatement`]: the bulk inserter's statement, bound straight from
//!   the rows' borrowed values (`SQLITE_STATIC`: no copy per value) and
//!   stepped in the same call, so the values outlive every read SQLite makes
//!   of them.
//! - [`memory_vfs`]: the VFS of in-memory databases, SQLite's `memdb` for
//!   their own names and the default VFS for every other file (`ATTACH`).

use std::ffi::c_int;
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use crate::error::{Error, Result};

static MEMSTATUS: OnceLock<bool> = OnceLock::new();

/// Turns off SQLite's memory statistics (one global mutex taken on every
/// allocation) before SQLite initializes. Returns whether it took effect: it
/// cannot once SQLite has already been initialized by other code in the
/// process (`SQLITE_MISUSE`); then the compile-time default applies.
///
/// Thread safety: `sqlite3_config` "is not threadsafe: the application must
/// ensure that no other SQLite interfaces are invoked by other threads while
/// sqlite3_config() is running" (<https://sqlite.org/c3ref/config.html>).
/// litelane calls it once per process (a `OnceLock`), before its first
/// connection opens. A program that uses SQLite through another library on
/// other threads at the same moment should open its first litelane database
/// before starting them (or build SQLite with `SQLITE_DEFAULT_MEMSTATUS=0`,
/// as this workspace does, which makes the call unnecessary).
pub(crate) fn disable_memstatus() -> bool {
    *MEMSTATUS.get_or_init(|| {
        // SAFETY: sqlite3_config is called before any connection of ours is
        // opened; if SQLite is already initialized it returns SQLITE_MISUSE
        // and changes nothing. The variadic argument is the int it expects.
        let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
        rc == ffi::SQLITE_OK
    })
}

static ERROR_LOG: OnceLock<bool> = OnceLock::new();

/// An operating-system error that SQLite's Unix VFS reported through its
/// error log (`SQLITE_CONFIG_LOG`): `os_unix.c:LINE: (ERRNO) FUNC(PATH) -
/// TEXT`, with the result code it returned.
#[derive(Debug, Clone)]
pub(crate) struct LoggedOsError {
    /// The SQLite result code the VFS returned (e.g. `SQLITE_IOERR_FSYNC`).
    pub code: c_int,
    pub errno: i32,
    /// The system call that failed (`open`, `full_fsync`, `ftruncate`...).
    pub call: String,
    /// The file it failed on.
    pub path: String,
}

thread_local! {
    /// The last OS error SQLite logged on this thread, until an error of
    /// the same extended code takes it ([`take_logged_os_error`]).
    static LOGGED: std::cell::RefCell<Option<LoggedOsError>> =
        const { std::cell::RefCell::new(None) };
}

/// Installs SQLite's error log callback, once per process and before SQLite
/// initializes (see [`disable_memstatus`] for the same constraint), so that
/// an SQLite error caused by a failed system call can name the call, the
/// file and the `errno` ([`take_logged_os_error`]). Returns whether it took
/// effect. The log is process-wide: a program that set its own
/// `SQLITE_CONFIG_LOG` first keeps it (then this returns false).
pub(crate) fn capture_os_errors() -> bool {
    *ERROR_LOG.get_or_init(|| {
        // SAFETY: as in `disable_memstatus`: before any connection of ours;
        // SQLITE_MISUSE and no change once SQLite is initialized. The
        // callback is a plain `fn` that only touches a thread-local.
        unsafe { rusqlite::trace::config_log(Some(remember_os_error)).is_ok() }
    })
}

/// The log callback: keeps what the Unix VFS says about a failed system
/// call; ignores every other message.
fn remember_os_error(code: c_int, msg: &str) {
    if let Some(e) = parse_os_error(code, msg) {
        LOGGED.with(|l| *l.borrow_mut() = Some(e));
    }
}

/// Reads `os_unix.c:LINE: (ERRNO) FUNC(PATH) - TEXT`.
fn parse_os_error(code: c_int, msg: &str) -> Option<LoggedOsError> {
    let rest = msg.strip_prefix("os_unix.c:")?;
    let rest = &rest[rest.find(": (")? + 3..];
    let (errno, rest) = rest.split_once(") ")?;
    let (call, rest) = rest.split_once('(')?;
    let path = &rest[..rest.rfind(") - ").unwrap_or(rest.len())];
    Some(LoggedOsError {
        code,
        errno: errno.parse().ok()?,
        call: call.to_string(),
        path: path.to_string(),
    })
}

/// The OS error SQLite logged on this thread for an error of extended
/// result code `code`, if the last one logged was of exactly that code (and
/// forgets it): a stale entry of another kind of failure is never taken.
pub(crate) fn take_logged_os_error(code: c_int) -> Option<LoggedOsError> {
    LOGGED.with(|l| {
        let mut l = l.borrow_mut();
        match l.as_ref() {
            Some(e) if e.code == code => l.take(),
            _ => None,
        }
    })
}

/// `sqlite3_complete`: true when `sql` ends a complete SQL statement (a
/// semicolon outside quotes, comments and a `CREATE TRIGGER` body). Text
/// with a NUL byte is cut there, as SQLite reads it.
pub(crate) fn is_complete(sql: &str) -> bool {
    // sqlite3_complete initializes SQLite: the log must be set first.
    capture_os_errors();
    let head = sql.split('\0').next().unwrap_or("");
    let Ok(text) = std::ffi::CString::new(head) else {
        return false;
    };
    // SAFETY: `text` is a NUL-terminated string that outlives the call;
    // sqlite3_complete only reads it (and initializes SQLite if needed).
    unsafe { ffi::sqlite3_complete(text.as_ptr()) != 0 }
}

/// Sets `SQLITE_FCNTL_PERSIST_WAL` on the main database of `conn` (through
/// rusqlite's safe `file_control`).
pub(crate) fn set_persistent_wal(conn: &rusqlite::Connection, on: bool) -> Result<()> {
    let mut flag: c_int = on.into();
    match conn.file_control(
        Some(rusqlite::MAIN_DB),
        rusqlite::FileControl::PersistWal(&mut flag),
    ) {
        Ok(()) => Ok(()),
        // The VFS (e.g. in-memory) has no such control: nothing to keep.
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotFound) => Ok(()),
        Err(e) => Err(Error::from_sqlite(e, "setting SQLITE_FCNTL_PERSIST_WAL")),
    }
}

/// Syncs the WAL (or rollback journal) of `conn`'s main database through
/// the connection's own VFS: `xSync(SQLITE_SYNC_NORMAL)` on the file that
/// `SQLITE_FCNTL_JOURNAL_POINTER` returns, the call SQLite's `COMMIT` makes
/// under `synchronous=FULL`. The writer uses it to make a commit durable
/// after its turn (see `xproc/durable.rs`); going through the VFS keeps
/// whatever that VFS does on a sync (a fault-injecting shim in the tests,
/// a replicating or encrypting VFS in production). Fails when no journal
/// file is open.
pub(crate) fn sync_journal(conn: &rusqlite::Connection) -> std::io::Result<()> {
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: valid handle, NUL-terminated schema name, and the out-pointer
    // type SQLITE_FCNTL_JOURNAL_POINTER documents (`sqlite3_file**`). The
    // caller holds the writer's connection (no other thread uses it), so the
    // file object stays open for the duration of the call below.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast(),
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(std::io::Error::other(format!(
            "SQLITE_FCNTL_JOURNAL_POINTER failed (SQLite code {rc})"
        )));
    }
    // SAFETY: `file` is null or a live `sqlite3_file` of this connection;
    // its `pMethods` is null when the file is not open.
    let sync = unsafe {
        file.as_ref()
            .and_then(|f| f.pMethods.as_ref())
            .and_then(|m| m.xSync)
    };
    let Some(sync) = sync else {
        return Err(std::io::Error::other("the database has no WAL file open"));
    };
    // SAFETY: xSync of the file's own methods, on that file, with a flag it
    // accepts.
    let rc = unsafe { sync(file, ffi::SQLITE_SYNC_NORMAL) };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "the VFS's sync of the WAL failed (SQLite code {rc})"
        )))
    }
}

/// The first [`SharedPage::LEN`] bytes of a file mapped `MAP_SHARED`: words
/// that every process mapping the file reads and writes with atomic
/// instructions (the cross-process queue's sync counters, doorbells and job
/// slots, `xproc/`), and the job slots' bytes, copied in and out.
#[cfg(target_os = "linux")]
pub(crate) struct SharedPage {
    ptr: std::ptr::NonNull<std::ffi::c_void>,
    /// Bytes mapped: [`SharedPage::LEN`], or [`SharedPage::MIN_LEN`] for a
    /// lock file that could not grow (no job slots then).
    len: usize,
}

#[cfg(target_os = "linux")]
impl SharedPage {
    /// Bytes mapped when the file has them: 320 KiB (the lock file's first
    /// page, its ticket records, and the job slots from 64 KiB,
    /// `xproc/jobs.rs`).
    pub(crate) const LEN: usize = 320 << 10;
    /// The least a lock file is mapped with: its first page (the sync
    /// counters and the doorbells).
    pub(crate) const MIN_LEN: usize = 4096;

    /// Maps the first [`LEN`](Self::LEN) bytes of `file`, or only the first
    /// [`MIN_LEN`](Self::MIN_LEN) when the file is shorter than `LEN`;
    /// fails when it is shorter than `MIN_LEN`. The caller makes sure the
    /// bytes are written (not a hole, which a write through the map would
    /// have to allocate, and a full disk would turn into `SIGBUS`), and that
    /// nobody truncates the file below them.
    pub(crate) fn map(file: &std::fs::File) -> std::io::Result<SharedPage> {
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        let size = file.metadata()?.len();
        let len = if size >= Self::LEN as u64 {
            Self::LEN
        } else if size >= Self::MIN_LEN as u64 {
            Self::MIN_LEN
        } else {
            return Err(std::io::Error::other(format!(
                "the lock file holds {size} bytes, fewer than its first page"
            )));
        };
        let nonzero = std::num::NonZeroUsize::new(len).expect("non-zero");
        // SAFETY: a fresh shared mapping of a file we hold open, at an
        // address the kernel picks, no longer than the file; nothing else
        // in this process aliases it as Rust memory. Only the accessors
        // below hand out references into it, bounds-checked against `len`.
        let ptr = unsafe {
            mmap(
                None,
                nonzero,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                file,
                0,
            )
        }?;
        Ok(SharedPage { ptr, len })
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The 4-byte word at `offset` (a multiple of 4 inside the page), for
    /// [`futex_wait`] and [`futex_wake_all`].
    pub(crate) fn word32(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        self.atomic_at(offset)
    }

    /// The 8-byte word at `offset` (a multiple of 8 inside the page).
    pub(crate) fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU64 {
        self.atomic_at(offset)
    }

    /// The address of the `len` bytes at `offset`, asserted inside the
    /// mapping.
    fn byte_at(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "{len} bytes at {offset}"
        );
        // SAFETY: `offset` is inside the mapping (asserted just above).
        unsafe { self.ptr.as_ptr().cast::<u8>().add(offset) }
    }

    /// Copies `bytes` into the mapping at `offset`. Other processes may
    /// read those bytes at any time: publish them through an atomic word
    /// (release) and read them only after it (acquire).
    pub(crate) fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        let at = self.byte_at(offset, bytes.len());
        // SAFETY: in bounds (`byte_at`); the mapping lives as long as
        // `self`; bytes have no alignment or validity requirement. A
        // concurrent writer in another process can only make the bytes
        // garbage, which their readers check (lengths, tags, UTF-8).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len()) }
    }

    /// Copies `out.len()` bytes of the mapping at `offset` into `out`.
    pub(crate) fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        let at = self.byte_at(offset, out.len());
        // SAFETY: as in `write_bytes`; `out` is ours and does not overlap
        // the mapping.
        unsafe { std::ptr::copy_nonoverlapping(at, out.as_mut_ptr(), out.len()) }
    }

    /// The atomic `A` (`AtomicU32` or `AtomicU64`: only those) at `offset`,
    /// a multiple of its size inside the page.
    fn atomic_at<A>(&self, offset: usize) -> &A {
        let size = std::mem::size_of::<A>();
        assert!(
            offset % size == 0 && offset + size <= self.len,
            "word of {size} bytes at {offset}"
        );
        // SAFETY: in bounds and aligned to its size (the mapping is
        // page-aligned), which is the alignment of the atomics it is used
        // for; valid for as long as `self` (unmapped in Drop). Those types
        // have the layout of their integer and mutate through
        // `UnsafeCell`; every other process touches these words with atomic
        // instructions too.
        unsafe { &*self.ptr.as_ptr().cast::<u8>().add(offset).cast::<A>() }
    }
}

#[cfg(target_os = "linux")]
impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of that length; no reference
        // from `word` outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr, self.len) };
    }
}

/// Sleeps while `word` still holds `seen`, for at most `timeout`, or until
/// a [`futex_wake_all`] on the same word, in any process mapping it
/// (a shared futex: `FUTEX_WAIT` without `FUTEX_PRIVATE_FLAG`). Returns at
/// once when the word already changed; may also return early (a signal, a
/// spurious wake-up): the caller looks again.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    seen: u32,
    timeout: std::time::Duration,
) {
    let ts = nix::libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as nix::libc::time_t,
        tv_nsec: timeout.subsec_nanos() as nix::libc::c_long,
    };
    // Every result (woken, EAGAIN for a changed word, ETIMEDOUT, EINTR)
    // means "look again".
    futex(word, nix::libc::FUTEX_WAIT, seen, &ts);
}

/// Wakes every thread, in any process, sleeping in [`futex_wait`] on
/// `word`. Change the word first. A failure wakes nobody, and sleepers
/// poll anyway.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    futex(word, nix::libc::FUTEX_WAKE, i32::MAX as u32, ptr::null());
}

/// Wakes at most one thread, in any process, sleeping in [`futex_wait`] on
/// `word`, as [`futex_wake_all`] otherwise.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wake_one(word: &std::sync::atomic::AtomicU32) {
    futex(word, nix::libc::FUTEX_WAKE, 1, ptr::null());
}

/// Wakes one thread sleeping in [`futex_wait`] on `from` and moves every
/// other sleeper there to `to`, where a later [`futex_wake_all`] on `to`
/// wakes them; provided `from` still holds `expected` (the caller changed
/// it just before). Otherwise wakes every sleeper on `from`.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wake_one_move_rest(
    from: &std::sync::atomic::AtomicU32,
    expected: u32,
    to: &std::sync::atomic::AtomicU32,
) {
    // SAFETY: both words are live, 4-aligned u32s for the whole call;
    // FUTEX_CMP_REQUEUE reads `from` and touches no other memory; the
    // fourth argument is the count of waiters to move, passed in the
    // timeout's place as the call defines.
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_futex,
            from.as_ptr(),
            nix::libc::FUTEX_CMP_REQUEUE,
            1u32,
            i32::MAX as usize,
            to.as_ptr(),
            expected,
        )
    };
    if r < 0 {
        futex_wake_all(from);
    }
}

/// The `futex` system call on a shared (not process-private) word; its
/// result is ignored by both callers.
#[cfg(target_os = "linux")]
fn futex(
    word: &std::sync::atomic::AtomicU32,
    op: nix::libc::c_int,
    val: u32,
    timeout: *const nix::libc::timespec,
) {
    // SAFETY: `word` is a live, 4-aligned u32 (shared mapping or not) for
    // the whole call; FUTEX_WAIT only reads it and FUTEX_WAKE touches no
    // memory; `timeout` is null or points to a timespec the caller keeps
    // alive across the call.
    unsafe {
        nix::libc::syscall(
            nix::libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            timeout,
            ptr::null::<u32>(),
            0u32,
        );
    }
}

// SAFETY: the page is only accessed through atomics (`word`); the pointer
// itself is never written after `map`.
#[cfg(target_os = "linux")]
unsafe impl Send for SharedPage {}
#[cfg(target_os = "linux")]
unsafe impl Sync for SharedPage {}

/// Sets what `sqlite3_last_insert_rowid` reports on `conn` next
/// (`sqlite3_set_last_insert_rowid`).
pub(crate) fn set_last_insert_rowid(conn: &rusqlite::Connection, rowid: i64) {
    // SAFETY: valid handle; only sets the connection's last-rowid field.
    unsafe { ffi::sqlite3_set_last_insert_rowid(conn.handle(), rowid) }
}

/// True when `conn`'s open transaction has deferred foreign-key violations
/// that would make its `COMMIT` fail (`SQLITE_DBSTATUS_DEFERRED_FKS`).
pub(crate) fn has_deferred_fk_violations(conn: &rusqlite::Connection) -> bool {
    let (mut current, mut high) = (0 as c_int, 0 as c_int);
    // SAFETY: valid handle and out-pointers; a read-only status query.
    let rc = unsafe {
        ffi::sqlite3_db_status(
            conn.handle(),
            ffi::SQLITE_DBSTATUS_DEFERRED_FKS,
            &mut current,
            &mut high,
            0,
        )
    };
    rc == ffi::SQLITE_OK && current > 0
}

/// A queued write job, borrowed from a thread that sleeps until it is done.
///
/// Group commit runs by flat combining: the thread holding the writer's turn
/// runs the closures of the writers queued behind it, back to back, in one
/// transaction. Each closure lives on its owner's stack and may borrow from
/// it, so the reference that travels through the queue has its lifetime
/// erased. That is sound because of how [`enter_with_job`] and the queue
/// work, not because of any caller's care:
/// - a `JobRef` is created only by [`enter_with_job`], and only a turn
///   holder's [`Claimed`](crate::queue::Claimed) can dereference it;
/// - the owner stays inside [`Queue::enter`](crate::queue::Queue::enter)
///   until its waiter is either granted the turn (the queue drops the
///   `JobRef` first) or marked done (by dropping the `Claimed` that holds the
///   `JobRef`, after which it can no longer be reached);
/// - the owner's wait loop cannot unwind (lock poisoning is ignored).
pub(crate) struct JobRef {
    ptr: ptr::NonNull<dyn crate::tx::Job + Send>,
}

// SAFETY: the job it points to is `Send`, and it is used by one thread at a
// time (the owner sleeps while the turn holder runs it).
unsafe impl Send for JobRef {}

impl JobRef {
    /// The job, for the turn holder that claimed it.
    pub(crate) fn get(&mut self) -> &mut (dyn crate::tx::Job + Send) {
        // SAFETY: see the type's documentation: the owner is asleep in
        // `enter_with_job` for as long as the claim that holds this exists,
        // and `&mut self` makes the access exclusive.
        unsafe { self.ptr.as_mut() }
    }
}

/// Queues `job` on the writer's queue: returns with the turn (the caller
/// then runs `job` itself) or once the turn holder has run it.
pub(crate) fn enter_with_job<'q, 'j>(
    queue: &'q crate::queue::Queue<JobRef>,
    job: &'j mut (dyn crate::tx::Job + Send + 'j),
) -> crate::queue::Entered<'q, JobRef> {
    let short: ptr::NonNull<dyn crate::tx::Job + Send + 'j> = ptr::NonNull::from(job);
    // SAFETY: only the trait object's lifetime bound changes (same layout);
    // the pointer is never used after this call returns (see `JobRef`).
    let ptr: ptr::NonNull<dyn crate::tx::Job + Send + 'static> =
        unsafe { std::mem::transmute(short) };
    queue.enter(crate::queue::Kind::Job, Some(JobRef { ptr }))
}

#[cfg(test)]
mod log_tests {
    use super::*;

    #[test]
    fn the_vfs_log_line_is_read_into_call_path_and_errno() {
        let e = parse_os_error(
            1034,
            "os_unix.c:38712: (5) full_fsync(/tmp/a b(1).db-wal) - Input/output error",
        )
        .expect("parsed");
        assert_eq!((e.code, e.errno), (1034, 5));
        assert_eq!(e.call, "full_fsync");
        assert_eq!(e.path, "/tmp/a b(1).db-wal");
        for other in [
            "statement aborts at 12: [INSERT INTO t VALUES(1)] UNIQUE constraint failed",
            "os_unix.c:1: no errno here",
            "",
        ] {
            assert!(parse_os_error(19, other).is_none(), "{other}");
        }
    }

    #[test]
    fn a_logged_error_is_taken_once_and_only_by_its_code() {
        remember_os_error(14, "os_unix.c:1: (2) open(/nowhere/x.db) - No such file");
        assert!(take_logged_os_error(10).is_none(), "another code");
        assert!(
            take_logged_os_error(14 | 1 << 8).is_none(),
            "another extended code"
        );
        let e = take_logged_os_error(14).expect("its code");
        assert_eq!((e.errno, e.path.as_str()), (2, "/nowhere/x.db"));
        assert!(take_logged_os_error(14).is_none(), "taken once");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_fk_violations_are_seen_before_commit() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE p(id INTEGER PRIMARY KEY);
             CREATE TABLE c(pid REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);
             BEGIN; INSERT INTO c VALUES (1);",
        )
        .unwrap();
        assert!(has_deferred_fk_violations(&conn));
        conn.execute_batch("INSERT INTO p VALUES (1)").unwrap();
        assert!(!has_deferred_fk_violations(&conn));
        conn.execute_batch("COMMIT").unwrap();
    }
}

/// A prepared `INSERT` for the bulk inserter (see the module documentation).
/// It borrows its connection, so it is finalized before the connection
/// closes.
pub(crate) struct BulkStatement<'c> {
    conn: &'c rusqlite::Connection,
    stmt: ptr::NonNull<ffi::sqlite3_stmt>,
    params: usize,
}

impl<'c> BulkStatement<'c> {
    /// Compiles `sql` (one statement) on `conn`, as a long-lived statement.
    pub(crate) fn prepare(conn: &'c rusqlite::Connection, sql: &str) -> rusqlite::Result<Self> {
        let len = c_int::try_from(sql.len()).map_err(|_| {
            rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_TOOBIG), None)
        })?;
        let mut stmt = ptr::null_mut();
        // SAFETY: the handle is the open connection `conn` borrows for 'c, on
        // this thread; pointer and length describe `sql`; the out-pointer is
        // valid. The statement is finalized in Drop, within 'c.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                conn.handle(),
                sql.as_ptr().cast(),
                len,
                ffi::SQLITE_PREPARE_PERSISTENT,
                &mut stmt,
                ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(last_error(conn, rc));
        }
        let stmt = ptr::NonNull::new(stmt).ok_or_else(|| {
            // Only comments or white space: nothing to run.
            rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_MISUSE),
                Some("empty SQL".into()),
            )
        })?;
        // SAFETY: a live statement.
        let params = unsafe { ffi::sqlite3_bind_parameter_count(stmt.as_ptr()) };
        Ok(BulkStatement {
            conn,
            stmt,
            params: usize::try_from(params).unwrap_or(0),
        })
    }

    /// Binds `values` to parameters 1, 2, ... and runs the statement once;
    /// returns the rows it changed (`sqlite3_changes64`). `values` must fill
    /// every parameter, or nothing runs. Values are bound without a copy and
    /// are not read after this returns: the statement is reset, and only this
    /// method ever steps it, after binding every parameter again.
    pub(crate) fn execute<'v>(
        &mut self,
        values: impl IntoIterator<Item = rusqlite::types::ValueRef<'v>>,
    ) -> rusqlite::Result<usize> {
        use rusqlite::types::ValueRef;
        let stmt = self.stmt.as_ptr();
        let mut bound = 0usize;
        let mut rc = ffi::SQLITE_OK;
        for v in values {
            bound += 1;
            if bound > self.params {
                rc = ffi::SQLITE_RANGE;
                break;
            }
            let i = bound as c_int;
            // SAFETY: a live statement and an index within its parameters.
            // Text and blobs are bound SQLITE_STATIC: `values` borrows them
            // for 'v, which outlives this call, and SQLite reads them only
            // during the sqlite3_step below (see the reset at the end).
            rc = unsafe {
                match v {
                    ValueRef::Null => ffi::sqlite3_bind_null(stmt, i),
                    ValueRef::Integer(n) => ffi::sqlite3_bind_int64(stmt, i, n),
                    ValueRef::Real(f) => ffi::sqlite3_bind_double(stmt, i, f),
                    ValueRef::Text(t) => ffi::sqlite3_bind_text64(
                        stmt,
                        i,
                        t.as_ptr().cast(),
                        t.len() as u64,
                        ffi::SQLITE_STATIC(),
                        ffi::SQLITE_UTF8 as u8,
                    ),
                    ValueRef::Blob(b) => ffi::sqlite3_bind_blob64(
                        stmt,
                        i,
                        b.as_ptr().cast(),
                        b.len() as u64,
                        ffi::SQLITE_STATIC(),
                    ),
                }
            };
            if rc != ffi::SQLITE_OK {
                break;
            }
        }
        if rc == ffi::SQLITE_OK && bound != self.params {
            rc = ffi::SQLITE_RANGE;
        }
        let result = if rc != ffi::SQLITE_OK {
            Err(if rc == ffi::SQLITE_RANGE {
                rusqlite::Error::InvalidParameterCount(bound, self.params)
            } else {
                last_error(self.conn, rc)
            })
        } else {
            // SAFETY: a live statement with every parameter bound.
            match unsafe { ffi::sqlite3_step(stmt) } {
                ffi::SQLITE_DONE => {
                    // SAFETY: the open connection of this thread.
                    let n = unsafe { ffi::sqlite3_changes64(self.conn.handle()) };
                    Ok(usize::try_from(n).unwrap_or(0))
                }
                ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
                rc => Err(last_error(self.conn, rc)),
            }
        };
        // SAFETY: a live statement. Reset ends the step (its error code is the
        // step's, already taken). The bound pointers are left in place: they
        // are never read again, because this statement is private and only
        // this method steps it, after binding every parameter anew (a call
        // that fails to bind them all never steps). Clearing them after each
        // step would cost a second release of every value (measured: ~2% of
        // an import's writer instructions).
        unsafe { ffi::sqlite3_reset(stmt) };
        result
    }
}

impl Drop for BulkStatement<'_> {
    fn drop(&mut self) {
        // SAFETY: our own live statement, finalized once, while the
        // connection it belongs to is still open ('c).
        unsafe { ffi::sqlite3_finalize(self.stmt.as_ptr()) };
    }
}

/// The connection's last error after `rc`, as rusqlite reports errors
/// (extended code and message), so callers classify it the same way.
fn last_error(conn: &rusqlite::Connection, rc: c_int) -> rusqlite::Error {
    // SAFETY: the open connection of this thread; errmsg returns a string
    // owned by SQLite, copied before any other call on the connection.
    let (code, msg) = unsafe {
        let db = conn.handle();
        let code = ffi::sqlite3_extended_errcode(db);
        let msg = std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(db))
            .to_string_lossy()
            .into_owned();
        (code, msg)
    };
    // errcode can lag behind rc when the error came from the step itself.
    let code = if code & 0xff == rc & 0xff { code } else { rc };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(msg))
}

#[cfg(test)]
mod bulk_statement_tests {
    use super::BulkStatement;
    use rusqlite::types::{Value, ValueRef};
    use rusqlite::Connection;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t(a UNIQUE, b)").unwrap();
        c
    }

    #[test]
    fn values_are_stored_exactly_and_the_statement_survives_every_error() {
        let c = conn();
        let mut st =
            BulkStatement::prepare(&c, "INSERT INTO t(a, b) VALUES (?, ?), (?, ?)").unwrap();
        let nul_text: &[u8] = b"x\0y";
        let bad_utf8: &[u8] = &[0xff, 0xfe];
        let row = [
            ValueRef::Integer(i64::MIN),
            ValueRef::Real(-0.0),
            ValueRef::Text(nul_text),
            ValueRef::Blob(bad_utf8),
        ];
        assert_eq!(st.execute(row).unwrap(), 2);
        // Too few and too many values: refused, nothing stored, still usable.
        for n in [0, 3, 5] {
            let many = vec![ValueRef::Integer(9); n];
            let e = st.execute(many).unwrap_err();
            assert!(
                matches!(e, rusqlite::Error::InvalidParameterCount(_, 4)),
                "{n}: {e:?}"
            );
        }
        // A constraint error: SQLite's extended code and message.
        let dup = [
            ValueRef::Integer(1),
            ValueRef::Null,
            ValueRef::Integer(1),
            ValueRef::Null,
        ];
        let e = st.execute(dup).unwrap_err();
        assert_eq!(
            e.sqlite_error().map(|f| f.extended_code),
            Some(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
        );
        assert!(
            e.to_string().contains("UNIQUE constraint failed: t.a"),
            "{e}"
        );
        // Values from a buffer that is dropped right after the call.
        {
            let owned = [
                Value::Text("e".repeat(10_000)),
                Value::Null,
                Value::Text(String::new()),
                Value::Blob(Vec::new()),
            ];
            assert_eq!(st.execute(owned.iter().map(ValueRef::from)).unwrap(), 2);
        }
        // With those values gone, a call that binds too few never steps (the
        // old pointers stay unread) and the next full call stores its own.
        assert!(st.execute([ValueRef::Integer(7)]).is_err());
        let got: Vec<(Value, Value)> = c
            .prepare("SELECT a, b FROM t ORDER BY rowid")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            got,
            vec![
                (Value::Integer(i64::MIN), Value::Real(-0.0)),
                (Value::Text("x\0y".into()), Value::Blob(vec![0xff, 0xfe])),
                (Value::Text("e".repeat(10_000)), Value::Null),
                (Value::Text(String::new()), Value::Blob(Vec::new())),
            ]
        );
    }

    #[test]
    fn a_statement_that_returns_rows_or_does_not_compile_is_an_error() {
        let c = conn();
        assert!(BulkStatement::prepare(&c, "INSERT INTO nope VALUES (?)").is_err());
        assert!(BulkStatement::prepare(&c, "-- nothing").is_err());
        let mut st = BulkStatement::prepare(&c, "SELECT ?").unwrap();
        assert!(matches!(
            st.execute([ValueRef::Integer(1)]),
            Err(rusqlite::Error::ExecuteReturnedResults)
        ));
    }
}

/// The prefixes of the names litelane gives its in-memory databases
/// (`connection.rs`): the only files [`memory_vfs`] opens in `memdb`.
pub(crate) const MEMORY_NAME_PREFIXES: [&str; 2] = ["/litelane-mem-", "/litelane-uri-"];

/// The VFS litelane opens its in-memory databases with, registered once:
/// named `litelane-memdb`, or `None` when SQLite has no `memdb`.
///
/// An in-memory database opened in `memdb` (`file:/name?vfs=memdb`) makes
/// `memdb` the VFS of its connection, and SQLite opens every database the
/// connection attaches in the connection's VFS: `ATTACH 'app.db'` then gave
/// an empty in-memory database named `app.db` instead of the file (the
/// standard library's `:memory:` connections attach files). This VFS sends
/// the names litelane gives its in-memory databases
/// ([`MEMORY_NAME_PREFIXES`]) to `memdb` and every other name to the
/// default VFS, so that attached files are files.
pub(crate) fn memory_vfs() -> Option<&'static str> {
    static NAME: OnceLock<Option<&'static str>> = OnceLock::new();
    *NAME.get_or_init(register_memory_vfs)
}

/// `memdb` and the default VFS, for the routing VFS's methods.
struct MemoryVfs {
    memdb: *mut ffi::sqlite3_vfs,
    default: *mut ffi::sqlite3_vfs,
}

// SAFETY: the two pointers are to VFS objects SQLite keeps for the life of
// the process; their methods may be called from any thread.
unsafe impl Send for MemoryVfs {}
unsafe impl Sync for MemoryVfs {}

static MEMORY_VFS: OnceLock<MemoryVfs> = OnceLock::new();

fn register_memory_vfs() -> Option<&'static str> {
    const NAME: &std::ffi::CStr = c"litelane-memdb";
    // The memory statistics are set before SQLite initializes (below).
    disable_memstatus();
    // SAFETY: sqlite3_vfs_find initializes SQLite if needed and returns a
    // registered VFS (which lives as long as the process) or NULL.
    let (memdb, default) = unsafe {
        (
            ffi::sqlite3_vfs_find(c"memdb".as_ptr()),
            ffi::sqlite3_vfs_find(ptr::null()),
        )
    };
    if memdb.is_null() || default.is_null() {
        return None;
    }
    let vfs = MEMORY_VFS.get_or_init(|| MemoryVfs { memdb, default });
    // SAFETY: both are valid VFS objects (checked non-null above).
    let (m, d) = unsafe { (&*vfs.memdb, &*vfs.default) };
    let routing = Box::new(ffi::sqlite3_vfs {
        iVersion: 2,
        // A file object is made by one of the two: room for either.
        szOsFile: m.szOsFile.max(d.szOsFile),
        mxPathname: m.mxPathname.max(d.mxPathname),
        pNext: ptr::null_mut(),
        zName: NAME.as_ptr(),
        pAppData: ptr::null_mut(),
        xOpen: Some(memory_vfs_open),
        xDelete: Some(memory_vfs_delete),
        xAccess: Some(memory_vfs_access),
        xFullPathname: Some(memory_vfs_full_pathname),
        // The rest as the default VFS does them (memdb hands them to it).
        xDlOpen: Some(memory_vfs_dl_open),
        xDlError: Some(memory_vfs_dl_error),
        xDlSym: Some(memory_vfs_dl_sym),
        xDlClose: Some(memory_vfs_dl_close),
        xRandomness: Some(memory_vfs_randomness),
        xSleep: Some(memory_vfs_sleep),
        xCurrentTime: Some(memory_vfs_current_time),
        xGetLastError: Some(memory_vfs_get_last_error),
        xCurrentTimeInt64: Some(memory_vfs_current_time_int64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    });
    // SAFETY: a fully initialized VFS object, leaked: connections keep
    // pointers to it for as long as they live.
    let rc = unsafe { ffi::sqlite3_vfs_register(Box::into_raw(routing), 0) };
    (rc == ffi::SQLITE_OK).then_some("litelane-memdb")
}

/// True for a name litelane gave one of its in-memory databases.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn is_memory_name(name: *const std::ffi::c_char) -> bool {
    if name.is_null() {
        return false;
    }
    let bytes = std::ffi::CStr::from_ptr(name).to_bytes();
    MEMORY_NAME_PREFIXES
        .iter()
        .any(|p| bytes.starts_with(p.as_bytes()))
}

/// The VFS that handles `name`.
///
/// # Safety
/// As [`is_memory_name`]; the routing VFS is registered.
unsafe fn route(name: *const std::ffi::c_char) -> *mut ffi::sqlite3_vfs {
    let vfs = MEMORY_VFS.get().expect("registered before use");
    if is_memory_name(name) {
        vfs.memdb
    } else {
        vfs.default
    }
}

/// The default VFS, for the methods that do not depend on a file's name.
fn default_vfs() -> *mut ffi::sqlite3_vfs {
    MEMORY_VFS.get().expect("registered before use").default
}

// The routing VFS's methods: each calls the same method of the VFS that
// handles the name (or of the default VFS), passing that VFS itself (memdb's
// methods find the default VFS through their own `pAppData`).
// SAFETY (all of them): SQLite calls them with the arguments its VFS
// interface documents, which are passed on unchanged; every method of a
// registered VFS it calls is present (memdb and the unix VFS fill each one
// used here).

unsafe extern "C" fn memory_vfs_open(
    _: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let vfs = route(name);
    ((*vfs).xOpen.expect("xOpen"))(vfs, name, file, flags, out_flags)
}

unsafe extern "C" fn memory_vfs_delete(
    _: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    sync_dir: c_int,
) -> c_int {
    let vfs = route(name);
    match (*vfs).xDelete {
        Some(delete) => delete(vfs, name, sync_dir),
        None => ffi::SQLITE_OK, // memdb: nothing on disk
    }
}

unsafe extern "C" fn memory_vfs_access(
    _: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let vfs = route(name);
    ((*vfs).xAccess.expect("xAccess"))(vfs, name, flags, out)
}

unsafe extern "C" fn memory_vfs_full_pathname(
    _: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    n_out: c_int,
    out: *mut std::ffi::c_char,
) -> c_int {
    let vfs = route(name);
    ((*vfs).xFullPathname.expect("xFullPathname"))(vfs, name, n_out, out)
}

unsafe extern "C" fn memory_vfs_dl_open(
    _: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
) -> *mut std::ffi::c_void {
    let vfs = default_vfs();
    match (*vfs).xDlOpen {
        Some(f) => f(vfs, name),
        None => ptr::null_mut(),
    }
}

unsafe extern "C" fn memory_vfs_dl_error(
    _: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut std::ffi::c_char,
) {
    let vfs = default_vfs();
    if let Some(f) = (*vfs).xDlError {
        f(vfs, n, out);
    }
}

unsafe extern "C" fn memory_vfs_dl_sym(
    _: *mut ffi::sqlite3_vfs,
    handle: *mut std::ffi::c_void,
    symbol: *const std::ffi::c_char,
) -> Option<
    unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut std::ffi::c_void, *const std::ffi::c_char),
> {
    let vfs = default_vfs();
    match (*vfs).xDlSym {
        Some(f) => f(vfs, handle, symbol),
        None => None,
    }
}

unsafe extern "C" fn memory_vfs_dl_close(_: *mut ffi::sqlite3_vfs, handle: *mut std::ffi::c_void) {
    let vfs = default_vfs();
    if let Some(f) = (*vfs).xDlClose {
        f(vfs, handle);
    }
}

unsafe extern "C" fn memory_vfs_randomness(
    _: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut std::ffi::c_char,
) -> c_int {
    let vfs = default_vfs();
    ((*vfs).xRandomness.expect("xRandomness"))(vfs, n, out)
}

unsafe extern "C" fn memory_vfs_sleep(_: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    let vfs = default_vfs();
    ((*vfs).xSleep.expect("xSleep"))(vfs, micros)
}

unsafe extern "C" fn memory_vfs_current_time(_: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    let vfs = default_vfs();
    ((*vfs).xCurrentTime.expect("xCurrentTime"))(vfs, out)
}

unsafe extern "C" fn memory_vfs_get_last_error(
    _: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut std::ffi::c_char,
) -> c_int {
    let vfs = default_vfs();
    match (*vfs).xGetLastError {
        Some(f) => f(vfs, n, out),
        None => 0,
    }
}

unsafe extern "C" fn memory_vfs_current_time_int64(
    _: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    let vfs = default_vfs();
    match (*vfs).xCurrentTimeInt64 {
        Some(f) => f(vfs, out),
        None => {
            let mut days = 0.0;
            let rc = ((*vfs).xCurrentTime.expect("xCurrentTime"))(vfs, &mut days);
            *out = (days * 86_400_000.0) as ffi::sqlite3_int64;
            rc
        }
    }
}
