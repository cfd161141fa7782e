//! Every `unsafe` of the engine lives in this private module
//! (`#![deny(unsafe_code)]` holds everywhere else).
//!
//! - SQLite's C API where rusqlite does not wrap it: turning off the global
//!   memory-statistics mutex (`sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`)
//!   and reading `SQLITE_DBSTATUS_DEFERRED_FKS`.
//! - [`JobRef`]: a queued write closure borrowed across threads for group
//!   commit by flat combining.

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
    ptr: ptr::NonNull<dyn crate::writer::Job + Send>,
}

// SAFETY: the job it points to is `Send`, and it is used by one thread at a
// time (the owner sleeps while the turn holder runs it).
unsafe impl Send for JobRef {}

impl JobRef {
    /// The job, for the turn holder that claimed it.
    pub(crate) fn get(&mut self) -> &mut (dyn crate::writer::Job + Send) {
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
    job: &'j mut (dyn crate::writer::Job + Send + 'j),
) -> crate::queue::Entered<'q, JobRef> {
    let short: ptr::NonNull<dyn crate::writer::Job + Send + 'j> = ptr::NonNull::from(job);
    // SAFETY: only the trait object's lifetime bound changes (same layout);
    // the pointer is never used after this call returns (see `JobRef`).
    let ptr: ptr::NonNull<dyn crate::writer::Job + Send + 'static> =
        unsafe { std::mem::transmute(short) };
    queue.enter(crate::queue::Kind::Job, Some(JobRef { ptr }))
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
