//! The error of the last failing call, per thread (`litelane_errmsg()` and
//! its siblings), and how an engine error maps to a status.

use crate::codes::{LITELANE_BUSY, LITELANE_ERROR, LITELANE_OUTCOME_UNKNOWN};
use std::cell::RefCell;
use std::ffi::{c_int, CString};

/// What a failing call left for `litelane_errmsg()` and its siblings.
pub(crate) struct Failure {
    pub status: c_int,
    pub sqlite: c_int,
    pub extended: c_int,
    pub errno: c_int,
    pub message: CString,
}

thread_local! {
    static LAST: RefCell<Failure> = RefCell::new(Failure {
        status: 0,
        sqlite: 0,
        extended: 0,
        errno: 0,
        message: CString::default(),
    });
}

/// Records a failure of this thread and returns its status.
pub(crate) fn record(
    status: c_int,
    message: &str,
    sqlite: c_int,
    extended: c_int,
    errno: c_int,
) -> c_int {
    // A message with a NUL byte is cut there (C reads it up to the NUL).
    let message = CString::new(message.split('\0').next().unwrap_or_default()).unwrap_or_default();
    LAST.with(|l| {
        *l.borrow_mut() = Failure {
            status,
            sqlite,
            extended,
            errno,
            message,
        }
    });
    status
}

/// Records a failure that is not SQLite's and returns `status`.
pub(crate) fn fail(status: c_int, message: impl AsRef<str>) -> c_int {
    record(status, message.as_ref(), 0, 0, 0)
}

/// Records an engine error and returns its status: `LITELANE_OUTCOME_UNKNOWN`
/// when a commit may or may not have happened, `LITELANE_BUSY` when another
/// process held the write turn past the busy timeout, else `LITELANE_ERROR`.
pub(crate) fn engine(e: &litelane::Error, context: &str) -> c_int {
    let status = if e.is_outcome_unknown() {
        LITELANE_OUTCOME_UNKNOWN
    } else if e.is_busy() {
        LITELANE_BUSY
    } else {
        LITELANE_ERROR
    };
    let errno = os_errno(e).unwrap_or(0);
    let message = if context.is_empty() {
        e.to_string()
    } else {
        format!("{context}: {e}")
    };
    record(
        status,
        &message,
        e.sqlite_code().unwrap_or(0),
        e.sqlite_extended_code().unwrap_or(0),
        errno,
    )
}

fn os_errno(e: &litelane::Error) -> Option<c_int> {
    match e {
        litelane::Error::Sqlite { os: Some(os), .. }
        | litelane::Error::Io { os: Some(os), .. }
        | litelane::Error::OutcomeUnknown { os: Some(os), .. } => os.io().raw_os_error(),
        litelane::Error::RolledBack { cause, .. } => os_errno(cause),
        _ => None,
    }
}

/// Reads the last failure of this thread.
pub(crate) fn with_last<T>(f: impl FnOnce(&Failure) -> T) -> T {
    LAST.with(|l| f(&l.borrow()))
}

/// Records an import's error and returns its status (as [`engine`] for
/// the engine's errors, else `LITELANE_ERROR`), with the OS errno when a
/// file operation failed.
pub(crate) fn import(e: &litelane_import::Error, source: &str) -> c_int {
    if let Some(inner) = e.engine() {
        if inner.is_outcome_unknown() || inner.is_busy() {
            return engine(inner, &format!("litelane_import of {source}"));
        }
    }
    let mut errno = e.engine().and_then(os_errno).unwrap_or(0);
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            errno = io.raw_os_error().unwrap_or(errno);
            break;
        }
        cause = c.source();
    }
    record(
        LITELANE_ERROR,
        &format!("litelane_import of {source}: {e}"),
        e.sqlite_code().unwrap_or(0),
        e.sqlite_extended_code().unwrap_or(0),
        errno,
    )
}
