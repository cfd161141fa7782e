//! The ABI's version and the status codes every call returns: what the
//! calls (`calls`, `errors`) and the C functions (`ffi`) both name. A leaf:
//! it names nothing else in the crate. Declared before `ffi` so that
//! cbindgen writes these first, as the header always had them.

use std::ffi::c_int;

/// The version of this ABI; `litelane_abi_version()` returns the loaded
/// library's. Raised only when a function or struct changes incompatibly
/// (appending a field to an options struct is compatible).
pub const LITELANE_ABI_VERSION: u32 = 1;

/// Success.
pub const LITELANE_OK: c_int = 0;
/// Failed: nothing was written (a write was rolled back); see
/// `litelane_errmsg()`.
pub const LITELANE_ERROR: c_int = 1;
/// The call was wrong: a NULL, closed or wrong-kind handle, a NULL
/// out-parameter, text that is not UTF-8, an unknown option.
pub const LITELANE_MISUSE: c_int = 2;
/// Another process held the write turn past the busy timeout: nothing was
/// written.
pub const LITELANE_BUSY: c_int = 3;
/// A commit may or may not have happened (the fsync or the `COMMIT`
/// failed, or the process that ran it died): read back to know. Writes to
/// the database are refused until it is reopened.
pub const LITELANE_OUTCOME_UNKNOWN: c_int = 4;
/// `litelane_import`: stopped because the progress callback returned
/// nonzero; what was committed before (`commit_every`) stays, the
/// transaction under way was rolled back.
pub const LITELANE_INTERRUPTED: c_int = 5;
/// `litelane_rows_next`: a row is ready.
pub const LITELANE_ROW: c_int = 100;
/// `litelane_rows_next`: no more rows.
pub const LITELANE_DONE: c_int = 101;
