//! Every `unsafe` call of litelane lives in this module.
//!
//! Three things need SQLite's C API directly because rusqlite does not wrap
//! them: turning off the global memory-statistics mutex
//! (`sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`), keeping the WAL file on
//! close (`SQLITE_FCNTL_PERSIST_WAL`), and [`RawConnection`], the plain
//! prepare/bind/step loop that the benchmarks use as their floor.

use std::ffi::{c_int, c_void, CStr, CString};
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use crate::error::{Error, Result};

static MEMSTATUS: OnceLock<bool> = OnceLock::new();

/// Turns off SQLite's memory statistics (one global mutex taken on every
/// allocation) before SQLite initializes. Returns whether it took effect: it
/// cannot once SQLite has already been initialized by other code in the
/// process (`SQLITE_MISUSE`); then the compile-time default applies.
pub(crate) fn disable_memstatus() -> bool {
    *MEMSTATUS.get_or_init(|| {
        // SAFETY: sqlite3_config is called before any connection of ours is
        // opened; if SQLite is already initialized it returns SQLITE_MISUSE
        // and changes nothing. The variadic argument is the int it expects.
        let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
        rc == ffi::SQLITE_OK
    })
}

/// Sets `SQLITE_FCNTL_PERSIST_WAL` on the main database of `conn`.
pub(crate) fn set_persistent_wal(conn: &rusqlite::Connection, on: bool) -> Result<()> {
    let mut flag: c_int = on.into();
    // SAFETY: the handle is valid for the life of `conn`; the file-control
    // argument is a pointer to an int, as SQLITE_FCNTL_PERSIST_WAL expects.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_PERSIST_WAL,
            (&raw mut flag).cast::<c_void>(),
        )
    };
    if rc == ffi::SQLITE_OK || rc == ffi::SQLITE_NOTFOUND {
        // NOTFOUND: the VFS (e.g. in-memory) has no such control; nothing to keep.
        Ok(())
    } else {
        Err(code_error(rc, "setting SQLITE_FCNTL_PERSIST_WAL"))
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

fn code_error(rc: c_int, context: &str) -> Error {
    // SAFETY: sqlite3_errstr returns a static string for any code.
    let message = unsafe { CStr::from_ptr(ffi::sqlite3_errstr(rc)) }
        .to_string_lossy()
        .into_owned();
    Error::Sqlite {
        code: rc & 0xff,
        extended_code: rc,
        message,
        context: context.to_string(),
    }
}

/// A bare SQLite connection driven through the C API: what a careful C
/// programmer writes by hand. The benchmarks use it as the floor that
/// litelane's own paths are measured against; it is not meant for
/// applications.
pub struct RawConnection {
    db: *mut ffi::sqlite3,
}

// SAFETY: the connection is opened with SQLITE_OPEN_NOMUTEX and used by one
// thread at a time (it is not Sync); moving it between threads is allowed in
// SQLite's multi-thread mode.
unsafe impl Send for RawConnection {}

impl RawConnection {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        disable_memstatus();
        let c_path = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| Error::invalid("database path contains a NUL byte"))?;
        let mut db = ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE | ffi::SQLITE_OPEN_NOMUTEX;
        // SAFETY: valid C string, out-pointer to a handle; on failure the
        // handle (if any) is still closed below.
        let rc = unsafe { ffi::sqlite3_open_v2(c_path.as_ptr(), &mut db, flags, ptr::null()) };
        let conn = RawConnection { db };
        if rc != ffi::SQLITE_OK {
            return Err(conn.error(rc, &format!("opening {}", path.display())));
        }
        Ok(conn)
    }

    fn error(&self, rc: c_int, context: &str) -> Error {
        if self.db.is_null() {
            return code_error(rc, context);
        }
        // SAFETY: the handle is open; errmsg/extended_errcode read its state.
        let (message, extended) = unsafe {
            (
                CStr::from_ptr(ffi::sqlite3_errmsg(self.db))
                    .to_string_lossy()
                    .into_owned(),
                ffi::sqlite3_extended_errcode(self.db),
            )
        };
        Error::Sqlite {
            code: rc & 0xff,
            extended_code: extended,
            message,
            context: context.to_string(),
        }
    }

    /// Runs one or more statements that return no rows.
    pub fn exec(&self, sql: &str) -> Result<()> {
        let c_sql = CString::new(sql).map_err(|_| Error::invalid("SQL contains a NUL byte"))?;
        // SAFETY: valid handle and C string; no callback.
        let rc = unsafe {
            ffi::sqlite3_exec(
                self.db,
                c_sql.as_ptr(),
                None,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(self.error(rc, sql));
        }
        Ok(())
    }

    /// Compiles one statement.
    pub fn prepare(&self, sql: &str) -> Result<RawStatement<'_>> {
        let mut stmt = ptr::null_mut();
        // SAFETY: pointer and byte length describe `sql`; out-pointer valid.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db,
                sql.as_ptr().cast(),
                sql.len() as c_int,
                &mut stmt,
                ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(self.error(rc, sql));
        }
        Ok(RawStatement { conn: self, stmt })
    }
}

impl Drop for RawConnection {
    fn drop(&mut self) {
        // SAFETY: statements borrow the connection, so all are finalized.
        unsafe {
            ffi::sqlite3_close(self.db);
        }
    }
}

/// A prepared statement of a [`RawConnection`]. Parameter indexes start at 1.
pub struct RawStatement<'c> {
    conn: &'c RawConnection,
    stmt: *mut ffi::sqlite3_stmt,
}

impl RawStatement<'_> {
    fn check(&self, rc: c_int) -> Result<()> {
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(self.conn.error(rc, "binding a parameter"))
        }
    }

    /// Binds a 64-bit integer.
    pub fn bind_int(&mut self, index: i32, value: i64) -> Result<()> {
        // SAFETY: live statement.
        self.check(unsafe { ffi::sqlite3_bind_int64(self.stmt, index, value) })
    }

    /// Binds text; SQLite copies it.
    pub fn bind_text(&mut self, index: i32, value: &str) -> Result<()> {
        // SAFETY: pointer/length describe `value`; SQLITE_TRANSIENT makes
        // SQLite copy it before returning.
        self.check(unsafe {
            ffi::sqlite3_bind_text(
                self.stmt,
                index,
                value.as_ptr().cast(),
                value.len() as c_int,
                ffi::SQLITE_TRANSIENT(),
            )
        })
    }

    /// Runs the statement to completion (it must return no rows) and resets it.
    pub fn execute(&mut self) -> Result<()> {
        // SAFETY: live statement.
        let rc = unsafe { ffi::sqlite3_step(self.stmt) };
        // SAFETY: live statement.
        unsafe { ffi::sqlite3_reset(self.stmt) };
        if rc != ffi::SQLITE_DONE {
            return Err(self.conn.error(rc, "stepping a statement"));
        }
        Ok(())
    }
}

impl Drop for RawStatement<'_> {
    fn drop(&mut self) {
        // SAFETY: finalizing our own live statement once.
        unsafe {
            ffi::sqlite3_finalize(self.stmt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_connection_inserts_and_reports_errors_with_codes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raw.db");
        let conn = RawConnection::open(&path).unwrap();
        conn.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT)")
            .unwrap();
        let mut st = conn.prepare("INSERT INTO t VALUES (?, ?)").unwrap();
        st.bind_int(1, 7).unwrap();
        st.bind_text(2, "seven").unwrap();
        st.execute().unwrap();
        st.bind_int(1, 7).unwrap();
        let err = st.execute().unwrap_err();
        assert_eq!(err.sqlite_code(), Some(19), "{err}");
        drop(st);
        let check = rusqlite::Connection::open(&path).unwrap();
        let s: String = check
            .query_row("SELECT s FROM t WHERE id = 7", [], |r| r.get(0))
            .unwrap();
        assert_eq!(s, "seven");
    }
}
