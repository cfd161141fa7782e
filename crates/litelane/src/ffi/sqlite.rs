//! SQLite's C API where rusqlite does not wrap it: the memory-statistics
//! switch, `sqlite3_complete`, persistent WAL, the journal's fsync, the
//! last rowid, deferred foreign-key violations.

use std::ffi::c_int;
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use super::log::capture_os_errors;
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

/// The data version of `conn`'s main database (`SQLITE_FCNTL_DATA_VERSION`,
/// through rusqlite's safe `file_control`): it changes with every change to
/// the file, this connection's own included, even those no commit hook
/// sees (`VACUUM`). `None` when the VFS cannot tell.
pub(crate) fn data_version(conn: &rusqlite::Connection) -> Option<u32> {
    let mut v: std::ffi::c_uint = 0;
    conn.file_control(
        Some(rusqlite::MAIN_DB),
        rusqlite::FileControl::DataVersion(&mut v),
    )
    .ok()
    .map(|()| v)
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
