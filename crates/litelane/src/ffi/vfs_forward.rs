//! A VFS object for a VFS that wraps another: its `pAppData` is the
//! wrapped VFS, and every method hands the call to it, passing the wrapped
//! VFS object (its methods may read their own `pAppData`). The wrapping VFS
//! then replaces the methods it does itself (at least `xOpen`).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use rusqlite::ffi;

/// A VFS object named `name` whose methods are those of `inner` (a
/// registered VFS object, alive for the life of the process), with file
/// objects of `os_file` bytes. Its `xOpen` is the wrapped one's only in
/// name: SQLite hands it this VFS's file objects, so the caller must set
/// its own.
///
/// # Safety
/// `inner` is a registered VFS object.
pub(super) unsafe fn wrapping(
    name: &'static CStr,
    os_file: c_int,
    inner: *mut ffi::sqlite3_vfs,
) -> ffi::sqlite3_vfs {
    ffi::sqlite3_vfs {
        iVersion: 2,
        szOsFile: os_file,
        mxPathname: (*inner).mxPathname,
        pNext: ptr::null_mut(),
        zName: name.as_ptr(),
        pAppData: inner.cast(),
        xOpen: None,
        xDelete: Some(delete),
        xAccess: Some(access),
        xFullPathname: Some(full_pathname),
        xDlOpen: Some(dl_open),
        xDlError: Some(dl_error),
        xDlSym: Some(dl_sym),
        xDlClose: Some(dl_close),
        xRandomness: Some(randomness),
        xSleep: Some(sleep),
        xCurrentTime: Some(current_time),
        xGetLastError: Some(get_last_error),
        xCurrentTimeInt64: Some(current_time_int64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }
}

/// The VFS `wrapper` (made by [`wrapping`]) wraps.
///
/// # Safety
/// `wrapper` is a VFS object made by [`wrapping`].
pub(super) unsafe fn inner_of(wrapper: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    (*wrapper).pAppData.cast()
}

// SAFETY (all of them): SQLite calls them with the arguments its VFS
// interface documents, which are passed on unchanged, with the wrapped VFS
// in place of the wrapping one; a method the wrapped VFS lacks is answered
// as SQLite's own wrappers answer for a missing one (the unix VFS and
// memdb fill every one that `expect`s).

unsafe extern "C" fn delete(
    wrapper: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    delete_in(inner_of(wrapper), name, sync_dir)
}

/// `vfs`'s `xOpen` of `name` into `file` (a file object of `vfs`'s size):
/// how each of litelane's VFSs opens a file in the VFS under it.
///
/// # Safety
/// `vfs` is a registered VFS object; the other arguments are as SQLite
/// passes them to `xOpen`, `file` sized for `vfs`.
pub(super) unsafe fn open_in(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    ((*vfs).xOpen.expect("xOpen"))(vfs, name, file, flags, out_flags)
}

/// `vfs`'s `xDelete` of `name`; a VFS without one has nothing on disk to
/// delete (memdb). Shared with the in-memory databases' routing VFS.
///
/// # Safety
/// `vfs` is a registered VFS object; `name` and `sync_dir` are as SQLite
/// passes them to `xDelete`.
pub(super) unsafe fn delete_in(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    match (*vfs).xDelete {
        Some(delete) => delete(vfs, name, sync_dir),
        None => ffi::SQLITE_OK, // memdb: nothing on disk
    }
}

unsafe extern "C" fn access(
    wrapper: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let vfs = inner_of(wrapper);
    ((*vfs).xAccess.expect("xAccess"))(vfs, name, flags, out)
}

unsafe extern "C" fn full_pathname(
    wrapper: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    let vfs = inner_of(wrapper);
    ((*vfs).xFullPathname.expect("xFullPathname"))(vfs, name, n_out, out)
}

unsafe extern "C" fn dl_open(wrapper: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    let vfs = inner_of(wrapper);
    match (*vfs).xDlOpen {
        Some(f) => f(vfs, name),
        None => ptr::null_mut(),
    }
}

unsafe extern "C" fn dl_error(wrapper: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    let vfs = inner_of(wrapper);
    if let Some(f) = (*vfs).xDlError {
        f(vfs, n, out);
    }
}

unsafe extern "C" fn dl_sym(
    wrapper: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)> {
    let vfs = inner_of(wrapper);
    (*vfs).xDlSym.and_then(|f| f(vfs, handle, symbol))
}

unsafe extern "C" fn dl_close(wrapper: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    let vfs = inner_of(wrapper);
    if let Some(f) = (*vfs).xDlClose {
        f(vfs, handle);
    }
}

unsafe extern "C" fn randomness(
    wrapper: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let vfs = inner_of(wrapper);
    ((*vfs).xRandomness.expect("xRandomness"))(vfs, n, out)
}

unsafe extern "C" fn sleep(wrapper: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    let vfs = inner_of(wrapper);
    ((*vfs).xSleep.expect("xSleep"))(vfs, micros)
}

unsafe extern "C" fn current_time(wrapper: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    let vfs = inner_of(wrapper);
    ((*vfs).xCurrentTime.expect("xCurrentTime"))(vfs, out)
}

unsafe extern "C" fn get_last_error(
    wrapper: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let vfs = inner_of(wrapper);
    match (*vfs).xGetLastError {
        Some(f) => f(vfs, n, out),
        None => 0,
    }
}

unsafe extern "C" fn current_time_int64(
    wrapper: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    let vfs = inner_of(wrapper);
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
