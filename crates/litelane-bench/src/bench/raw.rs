//! A bare SQLite connection driven through the C API: what a careful C
//! programmer writes by hand. The insert benchmark uses it as the floor that
//! litelane's own paths are measured against. All of the binary's `unsafe`
//! is in this module.

use std::ffi::{c_int, CStr, CString};
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

use litelane::{Error, Result};
use rusqlite::ffi;

/// Turns off SQLite's memory statistics before SQLite initializes, as
/// litelane does for its own connections, so the floor runs under the same
/// conditions whichever is opened first.
fn disable_memstatus() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: called once, from the benchmark's thread before it opens a
        // connection; if SQLite is already initialized it returns
        // SQLITE_MISUSE and changes nothing. The variadic argument is the int
        // SQLITE_CONFIG_MEMSTATUS expects.
        unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
    });
}

fn code_error(rc: c_int, context: &str) -> Error {
    // SAFETY: sqlite3_errstr returns a static string for any code.
    let message = unsafe { CStr::from_ptr(ffi::sqlite3_errstr(rc)) }
        .to_string_lossy()
        .into_owned();
    Error::Sqlite {
        code: rc & 0xff,
        os: None,
        extended_code: rc,
        message,
        context: context.to_string(),
    }
}

fn too_long(what: &str) -> Error {
    Error::InvalidInput {
        message: format!("{what} is longer than SQLite accepts"),
    }
}

/// A bare SQLite connection (see the module documentation).
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
            .map_err(|_| too_long("a database path with a NUL byte"))?;
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
            os: None,
            extended_code: extended,
            message,
            context: context.to_string(),
        }
    }

    /// Runs one or more statements that return no rows.
    pub fn exec(&self, sql: &str) -> Result<()> {
        let c_sql = CString::new(sql).map_err(|_| too_long("SQL with a NUL byte"))?;
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
        let len = c_int::try_from(sql.len()).map_err(|_| too_long("the SQL text"))?;
        // SAFETY: pointer and byte length describe `sql`; out-pointer valid.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db,
                sql.as_ptr().cast(),
                len,
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
        // SAFETY: pointer/length describe `value` (a 64-bit length: no
        // truncation); SQLITE_TRANSIENT makes SQLite copy it before
        // returning; UTF-8 is what a &str holds.
        self.check(unsafe {
            ffi::sqlite3_bind_text64(
                self.stmt,
                index,
                value.as_ptr().cast(),
                value.len() as u64,
                ffi::SQLITE_TRANSIENT(),
                ffi::SQLITE_UTF8 as u8,
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
