//! The C ABI: every `extern "C"` function, the C types, and every `unsafe`
//! line of the crate (reading what C's pointers point to). Each function
//! checks its pointers, converts its arguments, calls `calls`, writes its
//! out-parameters, and catches panics: nothing unwinds into C.

#![allow(unsafe_code)]
// The C names are the ABI.
#![allow(non_camel_case_types)]

use crate::calls::{
    self, Done, ImportArgs, ImportEnd, ImportEvent, OpenOptions, Statement, Status,
};
use crate::codes::*;
use crate::errors::{fail, with_last};
use crate::handles::{self, Cell};
use litelane::Value;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::{offset_of, size_of};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// `litelane_value.kind`: SQL NULL.
pub const LITELANE_NULL: i32 = 0;
/// `litelane_value.kind`: a 64-bit integer, in `integer`.
pub const LITELANE_INTEGER: i32 = 1;
/// `litelane_value.kind`: a double, in `real`.
pub const LITELANE_REAL: i32 = 2;
/// `litelane_value.kind`: UTF-8 text, `len` bytes at `data` (not counting
/// the NUL that follows text litelane returns; text passed in needs none).
pub const LITELANE_TEXT: i32 = 3;
/// `litelane_value.kind`: bytes, `len` of them at `data`.
pub const LITELANE_BLOB: i32 = 4;

/// `litelane_checkpoint` modes, as SQLite's `sqlite3_wal_checkpoint_v2`.
pub const LITELANE_CHECKPOINT_PASSIVE: c_int = 0;
/// Waits for the writer, copies everything, syncs the database.
pub const LITELANE_CHECKPOINT_FULL: c_int = 1;
/// Like FULL, then waits for readers so the next writer restarts the WAL.
pub const LITELANE_CHECKPOINT_RESTART: c_int = 2;
/// Like RESTART, then truncates the WAL file to zero bytes.
pub const LITELANE_CHECKPOINT_TRUNCATE: c_int = 3;

/// An open database (opaque).
pub struct litelane_db {
    _private: [u8; 0],
}

/// A write transaction held across calls (opaque).
pub struct litelane_tx {
    _private: [u8; 0],
}

/// The rows of a read, stepped with `litelane_rows_next` (opaque).
pub struct litelane_rows {
    _private: [u8; 0],
}

/// A read prepared once by `litelane_prepare`, run by
/// `litelane_stmt_query` (opaque).
pub struct litelane_stmt {
    _private: [u8; 0],
}

/// How to open a database. Zero every field you do not set.
#[repr(C)]
pub struct litelane_options {
    /// `sizeof(litelane_options)`: fields past it are taken as unset.
    pub size: usize,
    /// `"safe"`, `"balanced"` (NULL: the default) or `"fast"`
    /// (docs/durability.md).
    pub profile: *const c_char,
    /// How long a write waits for another process's turn, in
    /// milliseconds; 0: the default (5,000 ms).
    pub busy_timeout_ms: u32,
    /// Reader connections; 0: the default (the number of cores, at
    /// least 2).
    pub readers: u32,
}

/// A value: a parameter passed in, or a column read out.
#[repr(C)]
pub struct litelane_value {
    /// `LITELANE_NULL`, `_INTEGER`, `_REAL`, `_TEXT` or `_BLOB`.
    pub kind: i32,
    /// The value of an INTEGER.
    pub integer: i64,
    /// The value of a REAL.
    pub real: f64,
    /// The bytes of a TEXT or BLOB (NULL allowed when `len` is 0).
    pub data: *const c_void,
    /// How many bytes `data` holds.
    pub len: usize,
}

/// One statement and its parameters (`?` or `?NNN` bound in order).
#[repr(C)]
pub struct litelane_statement {
    /// One SQL statement, UTF-8, NUL-terminated.
    pub sql: *const c_char,
    /// `n_params` values (NULL when `n_params` is 0).
    pub params: *const litelane_value,
    /// How many parameters.
    pub n_params: usize,
}

/// What a statement that writes did.
#[repr(C)]
#[derive(Default)]
pub struct litelane_executed {
    /// Rows the statement changed (`sqlite3_changes`).
    pub changes: u64,
    /// The rowid of the last row inserted on the writer connection, right
    /// after the statement (`sqlite3_last_insert_rowid`).
    pub last_insert_rowid: i64,
}

/// What `litelane_checkpoint` did.
#[repr(C)]
pub struct litelane_checkpoint_report {
    /// Frames in the WAL when it ran.
    pub wal_frames: u64,
    /// Frames copied into the database.
    pub checkpointed_frames: u64,
    /// 1 when it could not finish (readers or another checkpoint in the
    /// way), else 0.
    pub busy: c_int,
    /// How long it took, in microseconds.
    pub elapsed_us: u64,
}

/// Runs `f`, turning a panic into `LITELANE_ERROR` with a message.
fn guard(what: &str, f: impl FnOnce() -> Result<c_int, Status>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(s)) => s,
        Ok(Err(s)) => s,
        Err(_) => calls::panicked(what),
    }
}

fn misuse(message: String) -> Status {
    fail(LITELANE_MISUSE, message)
}

fn id<T>(p: *const T) -> u64 {
    p as usize as u64
}

fn handle<T>(id: u64) -> *mut T {
    id as usize as *mut T
}

/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Status> {
    if p.is_null() {
        return Err(misuse(format!("{what} is NULL")));
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(bytes)
        .map_err(|e| misuse(format!("{what} is not UTF-8 (byte {})", e.valid_up_to())))
}

/// # Safety
/// `v` points to a `litelane_value` whose `data` holds `len` bytes.
unsafe fn value(v: &litelane_value, what: &dyn Fn() -> String) -> Result<Value, Status> {
    let bytes = || -> Result<&[u8], Status> {
        if v.len == 0 {
            return Ok(&[]);
        }
        if v.data.is_null() {
            return Err(misuse(format!(
                "{}: data is NULL with len {}",
                what(),
                v.len
            )));
        }
        // SAFETY: `data` holds `len` bytes (the caller's contract).
        Ok(unsafe { std::slice::from_raw_parts(v.data.cast::<u8>(), v.len) })
    };
    Ok(match v.kind {
        LITELANE_NULL => Value::Null,
        LITELANE_INTEGER => Value::Integer(v.integer),
        LITELANE_REAL => Value::Real(v.real),
        LITELANE_TEXT => match std::str::from_utf8(bytes()?) {
            Ok(s) => Value::Text(s.to_string()),
            Err(e) => {
                return Err(misuse(format!(
                    "{}: text is not UTF-8 (byte {})",
                    what(),
                    e.valid_up_to()
                )))
            }
        },
        LITELANE_BLOB => Value::Blob(bytes()?.to_vec()),
        k => return Err(misuse(format!("{}: unknown kind {k}", what()))),
    })
}

/// # Safety
/// `sql` is NULL or NUL-terminated; `params` is NULL or holds `n` values.
unsafe fn statement(
    what: &str,
    sql: *const c_char,
    params: *const litelane_value,
    n: usize,
) -> Result<Statement, Status> {
    // SAFETY: the caller's contract.
    let sql = unsafe { text(sql, &format!("{what}: the SQL")) }?.to_string();
    // SAFETY: the caller's contract.
    let params = unsafe { values(what, params, n) }?;
    Ok(Statement { sql, params })
}

/// The `n` parameter values at `params`, converted.
///
/// # Safety
/// `params` holds `n` values (or is NULL with `n` 0).
unsafe fn values(
    what: &str,
    params: *const litelane_value,
    n: usize,
) -> Result<Vec<Value>, Status> {
    if n > 0 && params.is_null() {
        return Err(misuse(format!(
            "{what}: params is NULL with {n} parameters"
        )));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `params` holds `n` values.
        let v = unsafe { &*params.add(i) };
        // SAFETY: the value's own contract.
        out.push(unsafe { value(v, &|| format!("{what}: parameter {}", i + 1)) }?);
    }
    Ok(out)
}

/// # Safety
/// `out` is NULL or writable.
unsafe fn put<T>(out: *mut T, v: T) {
    if !out.is_null() {
        // SAFETY: the caller's contract.
        unsafe { out.write(v) };
    }
}

fn executed(d: Done) -> litelane_executed {
    litelane_executed {
        changes: d.changes,
        last_insert_rowid: d.last_insert_rowid,
    }
}

/// The ABI version of the library loaded (`LITELANE_ABI_VERSION` of its
/// header). Thread-safe.
#[no_mangle]
pub extern "C" fn litelane_abi_version() -> u32 {
    LITELANE_ABI_VERSION
}

/// litelane's version, e.g. `"0.1.0"` (static storage). Thread-safe.
#[no_mangle]
pub extern "C" fn litelane_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The status of the calling thread's last failing call (`LITELANE_OK`
/// if none yet).
#[no_mangle]
pub extern "C" fn litelane_errcode() -> c_int {
    with_last(|f| f.status)
}

/// The SQLite primary result code of the calling thread's last failure
/// (0 when SQLite was not where it failed).
#[no_mangle]
pub extern "C" fn litelane_sqlite_errcode() -> c_int {
    with_last(|f| f.sqlite)
}

/// The SQLite extended result code of the calling thread's last failure
/// (0 when SQLite was not where it failed).
#[no_mangle]
pub extern "C" fn litelane_sqlite_extended_errcode() -> c_int {
    with_last(|f| f.extended)
}

/// The OS `errno` of the calling thread's last failure, when an OS call
/// failed (else 0).
#[no_mangle]
pub extern "C" fn litelane_os_errno() -> c_int {
    with_last(|f| f.errno)
}

/// The message of the calling thread's last failure, UTF-8 (`""` if
/// none): what failed and where. Valid until the thread's next failing
/// call.
#[no_mangle]
pub extern "C" fn litelane_errmsg() -> *const c_char {
    with_last(|f| f.message.as_ptr())
}

/// Opens (creating if needed) the database at `path` (`":memory:"`: a
/// private in-memory database) with `opts` (NULL: the defaults), and
/// writes its handle to `*out`. Close it with `litelane_close`.
///
/// # Safety
/// `path` is NUL-terminated; `opts` is NULL or points to `opts->size`
/// readable bytes; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_open(
    path: *const c_char,
    opts: *const litelane_options,
    out: *mut *mut litelane_db,
) -> c_int {
    guard("litelane_open", || {
        if out.is_null() {
            return Err(misuse("litelane_open: out is NULL".into()));
        }
        // SAFETY: `out` is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's contract.
        let path = unsafe { text(path, "litelane_open: the path") }?;
        let mut o = OpenOptions {
            profile: None,
            busy_timeout: None,
            readers: None,
        };
        if !opts.is_null() {
            // SAFETY: `opts` holds at least its `size` field.
            let size = unsafe { std::ptr::addr_of!((*opts).size).read() };
            let has = |offset: usize, len: usize| size >= offset + len;
            if has(
                offset_of!(litelane_options, profile),
                size_of::<*const c_char>(),
            ) {
                // SAFETY: within `size` bytes.
                let p = unsafe { std::ptr::addr_of!((*opts).profile).read() };
                if !p.is_null() {
                    // SAFETY: the caller's contract.
                    o.profile = Some(unsafe { text(p, "litelane_open: the profile") }?.to_string());
                }
            }
            if has(
                offset_of!(litelane_options, busy_timeout_ms),
                size_of::<u32>(),
            ) {
                // SAFETY: within `size` bytes.
                let ms = unsafe { std::ptr::addr_of!((*opts).busy_timeout_ms).read() };
                o.busy_timeout = (ms > 0).then(|| Duration::from_millis(ms.into()));
            }
            if has(offset_of!(litelane_options, readers), size_of::<u32>()) {
                // SAFETY: within `size` bytes.
                let n = unsafe { std::ptr::addr_of!((*opts).readers).read() };
                o.readers = (n > 0).then_some(n as usize);
            }
        }
        let db = calls::open(path, o)?;
        // SAFETY: `out` is writable.
        unsafe { out.write(handle(db)) };
        Ok(LITELANE_OK)
    })
}

/// Closes `*db` (waiting for the writes in flight) and sets `*db` to NULL.
/// Closing NULL or a closed handle is `LITELANE_MISUSE`. Thread-safe; the
/// other threads' calls on it fail with `LITELANE_MISUSE` from then on.
///
/// # Safety
/// `db` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_close(db: *mut *mut litelane_db) -> c_int {
    guard("litelane_close", || {
        if db.is_null() {
            return Err(misuse("litelane_close: db is NULL".into()));
        }
        // SAFETY: `db` is readable and writable.
        let h = unsafe { db.read() };
        calls::close(id(h))?;
        // SAFETY: as above.
        unsafe { db.write(std::ptr::null_mut()) };
        Ok(LITELANE_OK)
    })
}

/// Runs `n` statements in one write transaction, queued fairly with every
/// other writer (of this process and others) and group committed: all are
/// committed (`LITELANE_OK`), or none (`LITELANE_ERROR`, the message says
/// which statement and why; `LITELANE_BUSY`), or `LITELANE_OUTCOME_UNKNOWN`.
/// Each statement must write and return no rows. `results` (NULL, or room
/// for `n`) gets what each did. Thread-safe.
///
/// # Safety
/// `stmts` holds `n` statements (each as `litelane_statement` says);
/// `results` is NULL or has room for `n`.
#[no_mangle]
pub unsafe extern "C" fn litelane_write(
    db: *mut litelane_db,
    stmts: *const litelane_statement,
    n: usize,
    results: *mut litelane_executed,
) -> c_int {
    guard("litelane_write", || {
        if n > 0 && stmts.is_null() {
            return Err(misuse(format!(
                "litelane_write: stmts is NULL with n = {n}"
            )));
        }
        let mut list = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `stmts` holds `n` statements.
            let s = unsafe { &*stmts.add(i) };
            let what = format!("litelane_write: statement {} of {n}", i + 1);
            // SAFETY: the statement's own contract.
            list.push(unsafe { statement(&what, s.sql, s.params, s.n_params) }?);
        }
        let done = calls::write(id(db), list)?;
        if !results.is_null() {
            for (i, d) in done.into_iter().enumerate() {
                // SAFETY: `results` has room for `n`.
                unsafe { results.add(i).write(executed(d)) };
            }
        }
        Ok(LITELANE_OK)
    })
}

/// Begins a write transaction held across calls: waits for the writer in
/// arrival order (and for another process's turn up to the busy timeout),
/// then `BEGIN IMMEDIATE`. Other writers wait until `litelane_commit` or
/// `litelane_rollback`; keep it short. `label` (NULL allowed) names it in
/// metrics and in other processes' busy messages.
///
/// # Safety
/// `label` is NULL or NUL-terminated; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_begin(
    db: *mut litelane_db,
    label: *const c_char,
    out: *mut *mut litelane_tx,
) -> c_int {
    guard("litelane_begin", || {
        if out.is_null() {
            return Err(misuse("litelane_begin: out is NULL".into()));
        }
        // SAFETY: `out` is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        let label = if label.is_null() {
            "C transaction"
        } else {
            // SAFETY: the caller's contract.
            unsafe { text(label, "litelane_begin: the label") }?
        };
        let tx = calls::begin(id(db), label)?;
        // SAFETY: `out` is writable.
        unsafe { out.write(handle(tx)) };
        Ok(LITELANE_OK)
    })
}

/// Runs one statement that writes, inside `tx`; `out` (NULL allowed) gets
/// what it did. A failed statement leaves the transaction open.
///
/// # Safety
/// `sql` is NUL-terminated; `params` holds `n` values; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_tx_execute(
    tx: *mut litelane_tx,
    sql: *const c_char,
    params: *const litelane_value,
    n: usize,
    out: *mut litelane_executed,
) -> c_int {
    guard("litelane_tx_execute", || {
        // SAFETY: the caller's contract.
        let s = unsafe { statement("litelane_tx_execute", sql, params, n) }?;
        let d = calls::tx_execute(id(tx), &s)?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, executed(d)) };
        Ok(LITELANE_OK)
    })
}

/// Runs a query inside `tx` (it sees the transaction's own writes) and
/// writes a result handle to `*out`; free it with `litelane_rows_free`.
///
/// # Safety
/// `sql` is NUL-terminated; `params` holds `n` values; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_tx_query(
    tx: *mut litelane_tx,
    sql: *const c_char,
    params: *const litelane_value,
    n: usize,
    out: *mut *mut litelane_rows,
) -> c_int {
    guard("litelane_tx_query", || {
        if out.is_null() {
            return Err(misuse("litelane_tx_query: out is NULL".into()));
        }
        // SAFETY: `out` is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's contract.
        let s = unsafe { statement("litelane_tx_query", sql, params, n) }?;
        let rows = calls::tx_query(id(tx), &s)?;
        // SAFETY: `out` is writable.
        unsafe { out.write(handle(rows)) };
        Ok(LITELANE_OK)
    })
}

/// Commits `*tx` (durable as the profile promises when it returns
/// `LITELANE_OK`), frees it and sets `*tx` to NULL. On `LITELANE_ERROR` it
/// was rolled back; on `LITELANE_OUTCOME_UNKNOWN`, read back.
///
/// # Safety
/// `tx` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_commit(tx: *mut *mut litelane_tx) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { end(tx, true) }
}

/// Rolls back `*tx`, frees it and sets `*tx` to NULL.
///
/// # Safety
/// `tx` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_rollback(tx: *mut *mut litelane_tx) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { end(tx, false) }
}

/// # Safety
/// `tx` is NULL or writable.
unsafe fn end(tx: *mut *mut litelane_tx, commit: bool) -> c_int {
    let what = if commit {
        "litelane_commit"
    } else {
        "litelane_rollback"
    };
    guard(what, || {
        if tx.is_null() {
            return Err(misuse(format!("{what}: tx is NULL")));
        }
        // SAFETY: `tx` is readable and writable.
        let h = unsafe { tx.read() };
        let live = handles::tx(id(h)).is_ok();
        let out = calls::end(id(h), commit);
        // A transaction is freed whatever the outcome; what was none is
        // left as it was.
        if live {
            // SAFETY: as above.
            unsafe { tx.write(std::ptr::null_mut()) };
        }
        out.map(|()| LITELANE_OK)
    })
}

/// Runs a query on a reader (never waits for the writer) and writes a
/// result handle to `*out`: the rows are read whole before it returns;
/// step them with `litelane_rows_next` and free them with
/// `litelane_rows_free`. Thread-safe.
///
/// # Safety
/// `sql` is NUL-terminated; `params` holds `n` values; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_query(
    db: *mut litelane_db,
    sql: *const c_char,
    params: *const litelane_value,
    n: usize,
    out: *mut *mut litelane_rows,
) -> c_int {
    guard("litelane_query", || {
        if out.is_null() {
            return Err(misuse("litelane_query: out is NULL".into()));
        }
        // SAFETY: `out` is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's contract.
        let s = unsafe { statement("litelane_query", sql, params, n) }?;
        let rows = calls::query(id(db), &s)?;
        // SAFETY: `out` is writable.
        unsafe { out.write(handle(rows)) };
        Ok(LITELANE_OK)
    })
}

/// Prepares `sql`, one statement that reads, for `db` and writes a
/// statement handle to `*out`: the statement is checked once (its syntax,
/// that it reads, its number of parameters) and then run by
/// `litelane_stmt_query` as often as wanted, each time on a reader, through
/// the readers' statement caches. A statement that writes is refused
/// (`LITELANE_MISUSE`). Free it with `litelane_stmt_free` (before or after
/// `litelane_close` of its database). Thread-safe; a statement may be run
/// by several threads at once.
///
/// # Safety
/// `sql` is NUL-terminated; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_prepare(
    db: *mut litelane_db,
    sql: *const c_char,
    out: *mut *mut litelane_stmt,
) -> c_int {
    guard("litelane_prepare", || {
        if out.is_null() {
            return Err(misuse("litelane_prepare: out is NULL".into()));
        }
        // SAFETY: `out` is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's contract.
        let sql = unsafe { text(sql, "litelane_prepare: the SQL") }?;
        let stmt = calls::prepare(id(db), sql)?;
        // SAFETY: `out` is writable.
        unsafe { out.write(handle(stmt)) };
        Ok(LITELANE_OK)
    })
}

/// Runs the prepared statement `stmt` with the `n` values of `params` (as
/// many as the statement has parameters, else `LITELANE_MISUSE`) on a
/// reader, and writes a result handle to `*out`, as `litelane_query` does.
/// `LITELANE_MISUSE` when the statement's database is closed. Thread-safe.
///
/// # Safety
/// `params` holds `n` values; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_stmt_query(
    stmt: *mut litelane_stmt,
    params: *const litelane_value,
    n: usize,
    out: *mut *mut litelane_rows,
) -> c_int {
    guard("litelane_stmt_query", || {
        if out.is_null() {
            return Err(misuse("litelane_stmt_query: out is NULL".into()));
        }
        // SAFETY: `out` is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's contract.
        let params = unsafe { values("litelane_stmt_query", params, n) }?;
        let rows = calls::stmt_query(id(stmt), params)?;
        // SAFETY: `out` is writable.
        unsafe { out.write(handle(rows)) };
        Ok(LITELANE_OK)
    })
}

/// Frees `*stmt` and sets it to NULL.
///
/// # Safety
/// `stmt` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_stmt_free(stmt: *mut *mut litelane_stmt) -> c_int {
    guard("litelane_stmt_free", || {
        if stmt.is_null() {
            return Err(misuse("litelane_stmt_free: stmt is NULL".into()));
        }
        // SAFETY: `stmt` is readable and writable.
        let h = unsafe { stmt.read() };
        calls::stmt_free(id(h))?;
        // SAFETY: as above.
        unsafe { stmt.write(std::ptr::null_mut()) };
        Ok(LITELANE_OK)
    })
}

/// Moves to the next row: `LITELANE_ROW` (read it with
/// `litelane_rows_value`) or `LITELANE_DONE`.
#[no_mangle]
pub extern "C" fn litelane_rows_next(rows: *mut litelane_rows) -> c_int {
    guard("litelane_rows_next", || {
        let r = handles::rows(id(rows)).map_err(|m| misuse(format!("litelane_rows_next: {m}")))?;
        let mut r = r.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if r.stepped < r.rows.len() {
            r.at = Some(r.stepped);
            r.stepped += 1;
            Ok(LITELANE_ROW)
        } else {
            r.at = None;
            Ok(LITELANE_DONE)
        }
    })
}

/// Writes the number of columns to `*out`.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_rows_column_count(
    rows: *mut litelane_rows,
    out: *mut usize,
) -> c_int {
    guard("litelane_rows_column_count", || {
        if out.is_null() {
            return Err(misuse("litelane_rows_column_count: out is NULL".into()));
        }
        let r = handles::rows(id(rows))
            .map_err(|m| misuse(format!("litelane_rows_column_count: {m}")))?;
        let n = r
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .names
            .len();
        // SAFETY: `out` is writable.
        unsafe { out.write(n) };
        Ok(LITELANE_OK)
    })
}

/// Writes the name of column `col` (from 0) to `*out`: UTF-8,
/// NUL-terminated, valid until `litelane_rows_free`.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_rows_column_name(
    rows: *mut litelane_rows,
    col: usize,
    out: *mut *const c_char,
) -> c_int {
    guard("litelane_rows_column_name", || {
        if out.is_null() {
            return Err(misuse("litelane_rows_column_name: out is NULL".into()));
        }
        let r = handles::rows(id(rows))
            .map_err(|m| misuse(format!("litelane_rows_column_name: {m}")))?;
        let r = r.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(name) = r.names.get(col) else {
            return Err(misuse(format!(
                "litelane_rows_column_name: column {col} of {}",
                r.names.len()
            )));
        };
        // SAFETY: `out` is writable; the name lives as long as the rows
        // (the registry keeps them until litelane_rows_free).
        unsafe { out.write(name.as_ptr()) };
        Ok(LITELANE_OK)
    })
}

/// Writes column `col` (from 0) of the current row to `*out`, typed as
/// SQLite stored it. TEXT and BLOB point into the result (no copy), valid
/// until `litelane_rows_free`; TEXT is followed by a NUL.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_rows_value(
    rows: *mut litelane_rows,
    col: usize,
    out: *mut litelane_value,
) -> c_int {
    guard("litelane_rows_value", || {
        if out.is_null() {
            return Err(misuse("litelane_rows_value: out is NULL".into()));
        }
        let r = handles::rows(id(rows)).map_err(|m| misuse(format!("litelane_rows_value: {m}")))?;
        let r = r.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(at) = r.at else {
            return Err(misuse(
                "litelane_rows_value: no current row (call litelane_rows_next first; after \
                 LITELANE_DONE there is none)"
                    .into(),
            ));
        };
        let Some(cell) = r.rows[at].get(col) else {
            return Err(misuse(format!(
                "litelane_rows_value: column {col} of {}",
                r.names.len()
            )));
        };
        let mut v = litelane_value {
            kind: LITELANE_NULL,
            integer: 0,
            real: 0.0,
            data: std::ptr::null(),
            len: 0,
        };
        match cell {
            Cell::Null => {}
            Cell::Integer(i) => (v.kind, v.integer) = (LITELANE_INTEGER, *i),
            Cell::Real(f) => (v.kind, v.real) = (LITELANE_REAL, *f),
            Cell::Text(t) => {
                (v.kind, v.data, v.len) = (LITELANE_TEXT, t.as_ptr().cast(), t.len() - 1)
            }
            Cell::Blob(b) => (v.kind, v.data, v.len) = (LITELANE_BLOB, b.as_ptr().cast(), b.len()),
        }
        // SAFETY: `out` is writable; the data lives as long as the rows.
        unsafe { out.write(v) };
        Ok(LITELANE_OK)
    })
}

/// Frees `*rows` and sets it to NULL.
///
/// # Safety
/// `rows` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_rows_free(rows: *mut *mut litelane_rows) -> c_int {
    guard("litelane_rows_free", || {
        if rows.is_null() {
            return Err(misuse("litelane_rows_free: rows is NULL".into()));
        }
        // SAFETY: `rows` is readable and writable.
        let h = unsafe { rows.read() };
        calls::rows_free(id(h))?;
        // SAFETY: as above.
        unsafe { rows.write(std::ptr::null_mut()) };
        Ok(LITELANE_OK)
    })
}

/// Runs a checkpoint (`LITELANE_CHECKPOINT_*`) now; `out` (NULL allowed)
/// gets what it did. Thread-safe.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_checkpoint(
    db: *mut litelane_db,
    mode: c_int,
    out: *mut litelane_checkpoint_report,
) -> c_int {
    guard("litelane_checkpoint", || {
        let r = calls::checkpoint(id(db), mode)?;
        let report = litelane_checkpoint_report {
            wal_frames: r.wal_frames,
            checkpointed_frames: r.checkpointed_frames,
            busy: c_int::from(r.busy),
            elapsed_us: u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX),
        };
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, report) };
        Ok(LITELANE_OK)
    })
}

/// What `litelane_metrics` reports: the engine's counters since the
/// database was opened (docs/api.md, `Metrics`). Set `size` to
/// `sizeof(litelane_metrics_report)` before the call; fields past it are not
/// written.
#[repr(C)]
pub struct litelane_metrics_report {
    /// `sizeof(litelane_metrics_report)`, set by the caller.
    pub size: usize,
    /// Time writes waited for the writer: median, 95th and 99th
    /// percentiles and the longest, in microseconds.
    pub queue_wait_p50_us: u64,
    /// See `queue_wait_p50_us`.
    pub queue_wait_p95_us: u64,
    /// See `queue_wait_p50_us`.
    pub queue_wait_p99_us: u64,
    /// See `queue_wait_p50_us`.
    pub queue_wait_max_us: u64,
    /// Writes waiting for the writer right now.
    pub queue_depth: u64,
    /// Write transactions run (each caller's own, inside group commits).
    pub transactions: u64,
    /// Of those, rolled back.
    pub rollbacks: u64,
    /// Commits whose outcome was unknown.
    pub outcomes_unknown: u64,
    /// Rows written (`sqlite3_changes` summed).
    pub rows_written: u64,
    /// SQLite commits (a group commit is one).
    pub commits: u64,
    /// `SQLITE_BUSY` errors met (another process past the busy timeout).
    pub busy_errors: u64,
    /// Checkpoints run, and of those escalated (writers paused).
    pub checkpoints: u64,
    /// See `checkpoints`.
    pub checkpoints_escalated: u64,
    /// Pages the checkpoints copied.
    pub checkpoint_pages: u64,
    /// Pages in the WAL now, and the WAL file's size in bytes.
    pub wal_pages: u64,
    /// See `wal_pages`.
    pub wal_file_bytes: u64,
    /// Why the WAL is over its limit (`Checkpoints::limit_pages`) now: a
    /// `LITELANE_WAL_*` value, `LITELANE_WAL_WITHIN_LIMIT` (0) while it is
    /// not. The fields from here on were appended to the first version: a
    /// caller built with the shorter struct (a smaller `size`) gets none of them.
    pub wal_over_limit_reason: c_int,
    /// While over its limit: for how long, in microseconds (else 0).
    pub wal_over_limit_us: u64,
    /// Times the WAL went over its limit, and the time it spent there in
    /// all, in microseconds.
    pub wal_over_limit_count: u64,
    /// See `wal_over_limit_count`.
    pub wal_over_limit_time_us: u64,
    /// The age, in microseconds, of the oldest read of this process that
    /// pinned the WAL at the last checkpoint that could not finish (0:
    /// none); its label and SQL are in `Metrics::wal_pinned_by`.
    pub wal_pinned_age_us: u64,
    /// Checkpoints that held the writers (`OverLimit::HoldWriters`, or
    /// `litelane_checkpoint`), and the longest and total hold, in
    /// microseconds.
    pub checkpoint_holds: u64,
    /// See `checkpoint_holds`.
    pub checkpoint_hold_max_us: u64,
    /// See `checkpoint_holds`.
    pub checkpoint_hold_time_us: u64,
}

/// `wal_over_limit_reason`: the WAL is within its limit.
pub const LITELANE_WAL_WITHIN_LIMIT: c_int = 0;
/// `wal_over_limit_reason`: a read of this process pins the WAL.
pub const LITELANE_WAL_PINNED_BY_READ: c_int = 1;
/// `wal_over_limit_reason`: something in another process pins the WAL.
pub const LITELANE_WAL_PINNED_ELSEWHERE: c_int = 2;
/// `wal_over_limit_reason`: every frame was copied; the WAL starts over at
/// the next write that finds no reader on it.
pub const LITELANE_WAL_CATCHING_UP: c_int = 3;
/// `wal_over_limit_reason`: the last checkpoint failed (`litelane_errmsg`
/// does not say why: see the engine's log).
pub const LITELANE_WAL_CHECKPOINT_FAILED: c_int = 4;

/// `litelane_metrics_report::wal_over_limit_reason` of `over`.
fn over_limit_reason(over: Option<&litelane::WalOverLimit>) -> c_int {
    use litelane::OverLimitReason as R;
    match over.map(|o| &o.reason) {
        None => LITELANE_WAL_WITHIN_LIMIT,
        Some(R::PinnedByRead(_)) => LITELANE_WAL_PINNED_BY_READ,
        Some(R::PinnedElsewhere) => LITELANE_WAL_PINNED_ELSEWHERE,
        Some(R::CatchingUp) => LITELANE_WAL_CATCHING_UP,
        Some(_) => LITELANE_WAL_CHECKPOINT_FAILED,
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Fills `*out` with the engine's counters (set `out->size` first).
/// Thread-safe.
///
/// # Safety
/// `out` points to `out->size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn litelane_metrics(
    db: *mut litelane_db,
    out: *mut litelane_metrics_report,
) -> c_int {
    guard("litelane_metrics", || {
        if out.is_null() {
            return Err(misuse("litelane_metrics: out is NULL".into()));
        }
        // SAFETY: `out` holds at least its `size` field.
        let size = unsafe { std::ptr::addr_of!((*out).size).read() };
        if size < size_of::<usize>() {
            return Err(misuse(format!("litelane_metrics: out->size is {size}")));
        }
        let m = calls::metrics(id(db))?;
        let all = litelane_metrics_report {
            size: size.min(size_of::<litelane_metrics_report>()),
            queue_wait_p50_us: micros(m.queue_wait_p50),
            queue_wait_p95_us: micros(m.queue_wait_p95),
            queue_wait_p99_us: micros(m.queue_wait_p99),
            queue_wait_max_us: micros(m.queue_wait_max),
            queue_depth: m.queue_depth as u64,
            transactions: m.transactions,
            rollbacks: m.rollbacks,
            outcomes_unknown: m.outcomes_unknown,
            rows_written: m.rows_written,
            commits: m.commits,
            busy_errors: m.busy_errors,
            checkpoints: m.checkpoints,
            checkpoints_escalated: m.checkpoints_escalated,
            checkpoint_pages: m.checkpoint_pages,
            wal_pages: m.wal_pages,
            wal_file_bytes: m.wal_file_bytes,
            wal_over_limit_reason: over_limit_reason(m.wal_over_limit.as_ref()),
            wal_over_limit_us: m.wal_over_limit.as_ref().map_or(0, |o| micros(o.duration)),
            wal_over_limit_count: m.wal_over_limit_count,
            wal_over_limit_time_us: micros(m.wal_over_limit_time),
            wal_pinned_age_us: m.wal_pinned_by.as_ref().map_or(0, |r| micros(r.age)),
            checkpoint_holds: m.checkpoint_holds,
            checkpoint_hold_max_us: micros(m.checkpoint_hold_max),
            checkpoint_hold_time_us: micros(m.checkpoint_hold_time),
        };
        // SAFETY: `out` has `size` writable bytes; at most that many are
        // copied (a caller's older, shorter struct gets its own fields).
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(&all).cast::<u8>(),
                out.cast::<u8>(),
                all.size,
            )
        };
        Ok(LITELANE_OK)
    })
}

/// Called by `litelane_backup` after each step: pages copied so far and
/// pages in all. It must return normally (no `longjmp`).
pub type litelane_progress = Option<unsafe extern "C" fn(ctx: *mut c_void, done: u64, total: u64)>;

/// Copies the database, consistent as of one moment, to a new file at
/// `dest` while it stays in use (writers never wait for it in WAL
/// profiles); `dest` is written only when complete and synced, and an
/// existing non-empty `dest` is refused. `progress` (NULL allowed) is
/// called with `ctx` after each step; `pages` (NULL allowed) gets the
/// pages copied. Thread-safe.
///
/// # Safety
/// `dest` is NUL-terminated; `progress` is NULL or safe to call with
/// `ctx`; `pages` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_backup(
    db: *mut litelane_db,
    dest: *const c_char,
    progress: litelane_progress,
    ctx: *mut c_void,
    pages: *mut u64,
) -> c_int {
    guard("litelane_backup", || {
        // SAFETY: the caller's contract.
        let dest = unsafe { text(dest, "litelane_backup: dest") }?;
        let mut step = |done: u64, total: u64| {
            if let Some(f) = progress {
                // SAFETY: the caller's contract.
                unsafe { f(ctx, done, total) };
            }
        };
        let report = calls::backup(id(db), dest, &mut step)?;
        // SAFETY: `pages` is NULL or writable.
        unsafe { put(pages, report.pages) };
        Ok(LITELANE_OK)
    })
}

/// Inserts `n_rows` rows into `table(columns[0..n_columns])` with the
/// engine's bulk inserter: multi-row statements in one transaction, all
/// rows or none. `values` is column-major: the value of row `r` in column
/// `c` is `values[c * n_rows + r]`. Names are quoted for you. `inserted`
/// (NULL allowed) gets the rows stored. Thread-safe.
///
/// # Safety
/// `table` and the `n_columns` names are NUL-terminated; `values` holds
/// `n_columns * n_rows` values; `inserted` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn litelane_insert(
    db: *mut litelane_db,
    table: *const c_char,
    columns: *const *const c_char,
    n_columns: usize,
    values: *const litelane_value,
    n_rows: usize,
    inserted: *mut u64,
) -> c_int {
    guard("litelane_insert", || {
        // SAFETY: the caller's contract.
        let table = unsafe { text(table, "litelane_insert: table") }?;
        if n_columns == 0 || columns.is_null() {
            return Err(misuse("litelane_insert: no columns".into()));
        }
        let Some(cells) = n_columns.checked_mul(n_rows) else {
            return Err(misuse(format!(
                "litelane_insert: {n_columns} × {n_rows} values overflow"
            )));
        };
        if cells > 0 && values.is_null() {
            return Err(misuse(format!(
                "litelane_insert: values is NULL with {cells} values"
            )));
        }
        let mut names = Vec::with_capacity(n_columns);
        for c in 0..n_columns {
            // SAFETY: `columns` holds `n_columns` names.
            let p = unsafe { *columns.add(c) };
            // SAFETY: each name is NUL-terminated.
            names.push(unsafe { text(p, &format!("litelane_insert: column {}", c + 1)) }?);
        }
        let mut rows = Vec::with_capacity(n_rows);
        for r in 0..n_rows {
            let mut row = Vec::with_capacity(n_columns);
            for (c, name) in names.iter().enumerate() {
                // SAFETY: `values` holds `n_columns * n_rows` values.
                let v = unsafe { &*values.add(c * n_rows + r) };
                // SAFETY: the value's own contract.
                row.push(unsafe {
                    value(v, &|| {
                        format!("litelane_insert: row {}, column {name}", r + 1)
                    })
                }?);
            }
            rows.push(row);
        }
        let report = calls::insert(id(db), table, &names, rows)?;
        // SAFETY: `inserted` is NULL or writable.
        unsafe { put(inserted, report.rows) };
        Ok(LITELANE_OK)
    })
}

/// `litelane_import_options.header`: sniffed from the file (the default).
pub const LITELANE_IMPORT_HEADER_SNIFF: c_int = 0;
/// `litelane_import_options.header`: the first record is a header.
pub const LITELANE_IMPORT_HEADER: c_int = 1;
/// `litelane_import_options.header`: the first record is data; the columns
/// are named c1, c2, ...
pub const LITELANE_IMPORT_NO_HEADER: c_int = 2;

/// `litelane_import_progress.kind`: rows are flowing (`rows`,
/// `bytes_read`, `total_bytes` are set).
pub const LITELANE_IMPORT_ROWS: c_int = 0;
/// `litelane_import_progress.kind`: a record was rejected (`line`,
/// `record` and `reason` are set too).
pub const LITELANE_IMPORT_REJECTED: c_int = 1;

/// `litelane_import_summary.outcome`: every record stored.
pub const LITELANE_IMPORT_DONE: c_int = 0;
/// `litelane_import_summary.outcome`: finished, some records rejected.
pub const LITELANE_IMPORT_REJECTS: c_int = 1;
/// `litelane_import_summary.outcome`: stopped by the progress callback.
pub const LITELANE_IMPORT_STOPPED: c_int = 2;

/// What to import and how (docs/import.md describes each option as
/// `litelane import`'s flag of the same name). Zero every field you do not
/// set: zero or NULL is the default.
#[repr(C)]
pub struct litelane_import_options {
    /// `sizeof(litelane_import_options)`: fields past it are taken as
    /// unset; it must cover `source`.
    pub size: usize,
    /// The file to import (`.csv`, `.tsv`, `.ndjson`/`.jsonl`, maybe
    /// `.gz`/`.zst`; a glob pattern imports the files it names into one
    /// table). UTF-8. Required.
    pub source: *const c_char,
    /// The table; NULL: the file name without its extensions.
    pub table: *const c_char,
    /// `"csv"`, `"tsv"` or `"ndjson"`; NULL: from the extension, else
    /// sniffed.
    pub format: *const c_char,
    /// `"create"` (fail if the table exists), `"append"` (created if
    /// missing) or `"replace"`; NULL: `"create"`.
    pub mode: *const c_char,
    /// `LITELANE_IMPORT_HEADER_SNIFF` (0, the default), `_HEADER` or
    /// `_NO_HEADER`.
    pub header: c_int,
    /// The CSV field delimiter, a Unicode code point (e.g. `';'`); 0:
    /// sniffed among `,` `;` `|` and tab.
    pub delimiter: u32,
    /// Nonzero: create a STRICT table; a value that does not fit its
    /// column's type is rejected instead of stored as written. 0: off.
    pub strict: c_int,
    /// `n_types_for` column types, each `"COL=TYPE"` (TEXT, INTEGER, REAL,
    /// BOOLEAN, DATE, TIMESTAMP, NUMERIC) instead of inferred; NULL when
    /// `n_types_for` is 0.
    pub types_for: *const *const c_char,
    /// How many `types_for`.
    pub n_types_for: usize,
    /// Commit every this many rows (what is committed stays if the import
    /// is stopped or fails later); 0: one transaction for everything.
    pub commit_every: u64,
    /// Nonzero: continue an import with `commit_every` that was stopped or
    /// failed, from its last commit (same file, same table; without it,
    /// importing that file into that table again is refused). 0: off.
    pub resume: c_int,
}

/// What `litelane_import` tells its progress callback. Valid only during
/// the call.
#[repr(C)]
pub struct litelane_import_progress {
    /// `LITELANE_IMPORT_ROWS` or `LITELANE_IMPORT_REJECTED`.
    pub kind: c_int,
    /// Rows handed to SQLite so far in this file (committed or not).
    pub rows: u64,
    /// Bytes of the file read so far (compressed bytes for `.gz`/`.zst`).
    pub bytes_read: u64,
    /// The file's size in bytes, or -1 when unknown.
    pub total_bytes: i64,
    /// `LITELANE_IMPORT_REJECTED`: the line (1-based) the record starts
    /// on; else 0.
    pub line: u64,
    /// `LITELANE_IMPORT_REJECTED`: the record's number (1-based, the
    /// header counted); else 0.
    pub record: u64,
    /// `LITELANE_IMPORT_REJECTED`: why, UTF-8, NUL-terminated; else NULL.
    pub reason: *const c_char,
}

/// The progress callback of `litelane_import`, called on the calling
/// thread with `ctx`: once per batch of rows the parser delivers (a few
/// thousand rows; `rows` and `bytes_read` never decrease within a file),
/// once more with the final count, and once per rejected record. Return 0
/// to go on, nonzero to stop the import at the next record. It must
/// return normally (no `longjmp`) and must not call `litelane_import`.
pub type litelane_import_progress_fn = Option<
    unsafe extern "C" fn(ctx: *mut c_void, progress: *const litelane_import_progress) -> c_int,
>;

/// What `litelane_import` did. Set `size` to
/// `sizeof(litelane_import_summary)` before the call; fields past it are
/// not written.
#[repr(C)]
pub struct litelane_import_summary {
    /// `sizeof(litelane_import_summary)`, set by the caller.
    pub size: usize,
    /// `LITELANE_IMPORT_DONE`, `_REJECTS` or `_STOPPED`.
    pub outcome: c_int,
    /// Rows inserted by this import (0 when stopped: the rows committed
    /// before the stop stay, but are not counted here).
    pub rows_inserted: u64,
    /// Records rejected (each told to the progress callback; 0 when
    /// stopped).
    pub rows_rejected: u64,
    /// The table imported into, UTF-8, NUL-terminated (`""` when stopped
    /// before it was known). Owned by the library: valid until the calling
    /// thread's next `litelane_import`.
    pub table: *const c_char,
    /// How long the import took, in microseconds.
    pub elapsed_us: u64,
}

thread_local! {
    /// The table name the calling thread's last `litelane_import` reported.
    static IMPORT_TABLE: RefCell<CString> = RefCell::new(CString::default());
}

/// Field `$field` (of type `$fty`) of the caller's struct `*$p` (a `$ty`)
/// when it lies within the struct's `$size` bytes, else `None`.
macro_rules! field {
    ($p:expr, $size:expr, $ty:ty, $field:ident: $fty:ty) => {{
        if $size >= offset_of!($ty, $field) + size_of::<$fty>() {
            // SAFETY: within the `size` readable bytes of the caller's struct.
            let v: $fty = unsafe { std::ptr::addr_of!((*$p).$field).read() };
            Some(v)
        } else {
            None
        }
    }};
}

/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn optional_text(p: *const c_char, what: &str) -> Result<Option<String>, Status> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    Ok(Some(unsafe { text(p, what) }?.to_string()))
}

/// # Safety
/// `opts` points to `opts->size` readable bytes whose pointers are as
/// `litelane_import_options` says.
unsafe fn import_args(opts: *const litelane_import_options) -> Result<ImportArgs, Status> {
    type O = litelane_import_options;
    // SAFETY: `opts` holds at least its `size` field.
    let size = unsafe { std::ptr::addr_of!((*opts).size).read() };
    let Some(source) = field!(opts, size, O, source: *const c_char) else {
        return Err(misuse(format!(
            "litelane_import: opts->size is {size}, too small to hold source (set it to \
             sizeof(litelane_import_options), {})",
            size_of::<O>()
        )));
    };
    // SAFETY: the caller's contract, for this and each text below.
    let source = unsafe { text(source, "litelane_import: opts->source") }?.to_string();
    let table = match field!(opts, size, O, table: *const c_char) {
        Some(p) => unsafe { optional_text(p, "litelane_import: opts->table") }?,
        None => None,
    };
    let format = match field!(opts, size, O, format: *const c_char) {
        Some(p) => unsafe { optional_text(p, "litelane_import: opts->format") }?,
        None => None,
    };
    let mode = match field!(opts, size, O, mode: *const c_char) {
        Some(p) => unsafe { optional_text(p, "litelane_import: opts->mode") }?,
        None => None,
    };
    let header = field!(opts, size, O, header: c_int).unwrap_or(LITELANE_IMPORT_HEADER_SNIFF);
    let delimiter = field!(opts, size, O, delimiter: u32).unwrap_or(0);
    let strict = field!(opts, size, O, strict: c_int).unwrap_or(0) != 0;
    let mut types_for = Vec::new();
    let list = field!(opts, size, O, types_for: *const *const c_char).unwrap_or(std::ptr::null());
    let n = field!(opts, size, O, n_types_for: usize).unwrap_or(0);
    if n > 0 && list.is_null() {
        return Err(misuse(format!(
            "litelane_import: opts->types_for is NULL with n_types_for = {n}"
        )));
    }
    for i in 0..n {
        // SAFETY: `types_for` holds `n_types_for` pointers.
        let p = unsafe { *list.add(i) };
        // SAFETY: each is NUL-terminated.
        let t = unsafe { text(p, &format!("litelane_import: opts->types_for[{i}]")) }?;
        types_for.push(t.to_string());
    }
    let commit_every = field!(opts, size, O, commit_every: u64).unwrap_or(0);
    let resume = field!(opts, size, O, resume: c_int).unwrap_or(0) != 0;
    Ok(ImportArgs {
        source,
        table,
        format,
        mode,
        header,
        delimiter,
        strict,
        types_for,
        commit_every,
        resume,
    })
}

/// Imports a CSV, TSV or NDJSON file into a table of `db` through the
/// engine `db` holds (its queue and profile), as `litelane import` does
/// (docs/import.md): `opts` says what and how. `progress` (NULL allowed)
/// is called with `ctx` as `litelane_import_progress_fn` says, and stops
/// the import by returning nonzero. `out` (NULL allowed; set `out->size`)
/// gets what it did.
///
/// Returns `LITELANE_OK` when the import finished (`out->outcome` says
/// whether records were rejected), `LITELANE_INTERRUPTED` when the
/// callback stopped it (the rows of earlier `commit_every` commits stay;
/// `out` is written too), `LITELANE_ERROR` when it failed (nothing past
/// the last commit is kept; the message names the file, the line where
/// known, and the OS errno is set for a file that cannot be read),
/// `LITELANE_MISUSE` for a wrong call (an in-memory database too: an
/// import needs a file). Thread-safe (imports into one table are
/// serialized by a lock file).
///
/// # Safety
/// `opts` points to `opts->size` readable bytes, its texts NUL-terminated
/// and `types_for` holding `n_types_for` of them; `progress` is NULL or
/// safe to call with `ctx`; `out` is NULL or points to `out->size`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn litelane_import(
    db: *mut litelane_db,
    opts: *const litelane_import_options,
    progress: litelane_import_progress_fn,
    ctx: *mut c_void,
    out: *mut litelane_import_summary,
) -> c_int {
    guard("litelane_import", || {
        if opts.is_null() {
            return Err(misuse("litelane_import: opts is NULL".into()));
        }
        let out_size = if out.is_null() {
            0
        } else {
            // SAFETY: `out` holds at least its `size` field.
            let size = unsafe { std::ptr::addr_of!((*out).size).read() };
            if size < size_of::<usize>() {
                return Err(misuse(format!("litelane_import: out->size is {size}")));
            }
            size.min(size_of::<litelane_import_summary>())
        };
        // SAFETY: the caller's contract.
        let args = unsafe { import_args(opts) }?;
        let mut reason = CString::default();
        let mut tell = |e: &ImportEvent<'_>| {
            let Some(f) = progress else { return false };
            let mut p = litelane_import_progress {
                kind: LITELANE_IMPORT_ROWS,
                rows: e.rows,
                bytes_read: e.bytes_read,
                total_bytes: e
                    .total_bytes
                    .and_then(|t| i64::try_from(t).ok())
                    .unwrap_or(-1),
                line: 0,
                record: 0,
                reason: std::ptr::null(),
            };
            if let Some((line, record, why)) = e.rejected {
                reason =
                    CString::new(why.split('\0').next().unwrap_or_default()).unwrap_or_default();
                (p.kind, p.line, p.record, p.reason) =
                    (LITELANE_IMPORT_REJECTED, line, record, reason.as_ptr());
            }
            // SAFETY: the caller's contract; `p` and `reason` outlive the call.
            unsafe { f(ctx, &p) != 0 }
        };
        let done = calls::import(id(db), args, &mut tell)?;
        let table =
            CString::new(done.table.split('\0').next().unwrap_or_default()).unwrap_or_default();
        let table = IMPORT_TABLE.with(|t| {
            *t.borrow_mut() = table;
            t.borrow().as_ptr()
        });
        if out_size > 0 {
            let all = litelane_import_summary {
                size: out_size,
                outcome: match done.end {
                    ImportEnd::Done => LITELANE_IMPORT_DONE,
                    ImportEnd::Rejects => LITELANE_IMPORT_REJECTS,
                    ImportEnd::Interrupted => LITELANE_IMPORT_STOPPED,
                },
                rows_inserted: done.rows_inserted,
                rows_rejected: done.rows_rejected,
                table,
                elapsed_us: micros(done.elapsed),
            };
            // SAFETY: `out` has `out_size` writable bytes; at most that
            // many are copied (an older, shorter struct gets its own fields).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    std::ptr::from_ref(&all).cast::<u8>(),
                    out.cast::<u8>(),
                    out_size,
                )
            };
        }
        Ok(if done.end == ImportEnd::Interrupted {
            LITELANE_INTERRUPTED
        } else {
            LITELANE_OK
        })
    })
}
