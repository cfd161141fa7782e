//! Every `unsafe` line of the crate: the C glue between SQLite's VFS
//! interface (<https://sqlite.org/c3ref/vfs.html>,
//! <https://sqlite.org/c3ref/io_methods.html>) and the safe model in
//! `model.rs`.
//!
//! A shim file is one allocation of `szOsFile` bytes made by SQLite: our
//! header ([`ShimFile`]) followed by the real VFS's file object, which the
//! header points at. Every method checks with the model, then calls the real
//! method on the real file.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::size_of;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::ffi::{self as sq, sqlite3_file, sqlite3_int64, sqlite3_io_methods, sqlite3_vfs};

use crate::model::Shared;

/// What `pAppData` of our `sqlite3_vfs` points at. Leaked: connections keep
/// pointers to the VFS for as long as they live.
struct VfsData {
    real: *mut sqlite3_vfs,
    shared: Arc<Shared>,
}

#[repr(C)]
struct ShimFile {
    base: sqlite3_file,
    real: *mut sqlite3_file,
    shared: *const Shared,
    handle: u64,
}

/// Where the real file object starts inside the allocation (8-aligned).
const REAL_OFFSET: usize = size_of::<ShimFile>().div_ceil(8) * 8;

static IO_METHODS: sqlite3_io_methods = sqlite3_io_methods {
    // Version 2: shared memory (WAL) yes, xFetch/xUnfetch (mmap) no.
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Makes the registered VFS `name` the process's default VFS (SQLite moves
/// a VFS registered again to the head of its list).
pub(crate) fn make_default(name: &str) -> Result<(), String> {
    let cname = CString::new(name).map_err(|_| format!("a VFS name with a NUL: {name:?}"))?;
    // SAFETY: sqlite3_vfs_find returns a registered VFS object (alive for
    // the life of the process) or NULL; registering a registered VFS again
    // only moves it in SQLite's list.
    let rc = unsafe {
        let vfs = sq::sqlite3_vfs_find(cname.as_ptr());
        if vfs.is_null() {
            return Err(format!("no VFS named {name} is registered"));
        }
        sq::sqlite3_vfs_register(vfs, 1)
    };
    match rc {
        sq::SQLITE_OK => Ok(()),
        rc => Err(format!(
            "sqlite3_vfs_register of {name} as the default failed with code {rc}"
        )),
    }
}

/// Registers a new shim over the default VFS; returns its name.
pub(crate) fn register(shared: Arc<Shared>) -> Result<String, String> {
    // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS (initializing
    // SQLite if needed) or NULL; the VFS objects SQLite returns live for the
    // life of the process.
    let real = unsafe { sq::sqlite3_vfs_find(ptr::null()) };
    if real.is_null() {
        return Err("SQLite has no default VFS to wrap".into());
    }
    let name = format!("litelane-faultvfs-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let cname = CString::new(name.clone()).expect("no NUL in the name");
    // SAFETY: `real` is a valid VFS (checked non-null above).
    let real_ref = unsafe { &*real };
    let data = Box::into_raw(Box::new(VfsData { real, shared }));
    let vfs = Box::new(sqlite3_vfs {
        iVersion: 2,
        szOsFile: (REAL_OFFSET as c_int) + real_ref.szOsFile,
        mxPathname: real_ref.mxPathname,
        pNext: ptr::null_mut(),
        zName: cname.into_raw(),
        pAppData: data.cast(),
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        // The remaining methods are the real VFS's, called with the real
        // VFS (which may be a wrapper that reads its own `pAppData`).
        xDlOpen: real_ref.xDlOpen.and(Some(x_dl_open)),
        xDlError: real_ref.xDlError.and(Some(x_dl_error)),
        xDlSym: real_ref.xDlSym.and(Some(x_dl_sym)),
        xDlClose: real_ref.xDlClose.and(Some(x_dl_close)),
        xRandomness: real_ref.xRandomness.and(Some(x_randomness)),
        xSleep: real_ref.xSleep.and(Some(x_sleep)),
        xCurrentTime: real_ref.xCurrentTime.and(Some(x_current_time)),
        xGetLastError: real_ref.xGetLastError.and(Some(x_get_last_error)),
        xCurrentTimeInt64: if real_ref.iVersion >= 2 {
            real_ref.xCurrentTimeInt64.and(Some(x_current_time_int64))
        } else {
            None
        },
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    });
    let vfs = Box::into_raw(vfs);
    // SAFETY: `vfs` is a fully initialized sqlite3_vfs that is never freed.
    let rc = unsafe { sq::sqlite3_vfs_register(vfs, 0) };
    if rc != sq::SQLITE_OK {
        return Err(format!("sqlite3_vfs_register failed with code {rc}"));
    }
    Ok(name)
}

/// Takes the shim off SQLite's list (its memory stays: open connections may
/// still point at it).
pub(crate) fn unregister(name: &str) {
    let Ok(cname) = CString::new(name) else {
        return;
    };
    // SAFETY: find returns a registered VFS or NULL; unregister accepts it.
    unsafe {
        let vfs = sq::sqlite3_vfs_find(cname.as_ptr());
        if !vfs.is_null() {
            sq::sqlite3_vfs_unregister(vfs);
        }
    }
}

/// The VFS data of `vfs`.
///
/// # Safety
/// `vfs` must be a shim registered by [`register`].
unsafe fn data<'a>(vfs: *mut sqlite3_vfs) -> &'a VfsData {
    &*((*vfs).pAppData as *const VfsData)
}

/// The shim file, its real file and the model.
///
/// # Safety
/// `f` must be a file opened by [`x_open`] and not yet closed.
unsafe fn parts<'a>(f: *mut sqlite3_file) -> (*mut sqlite3_file, &'a Shared, u64) {
    let s = &*(f as *const ShimFile);
    (s.real, &*s.shared, s.handle)
}

/// The real file's methods.
///
/// # Safety
/// `real` must be an open file of the real VFS.
unsafe fn methods<'a>(real: *mut sqlite3_file) -> &'a sqlite3_io_methods {
    &*(*real).pMethods
}

/// `zName` as a path, if there is one.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn path_of<'a>(name: *const c_char) -> Option<&'a Path> {
    if name.is_null() {
        return None;
    }
    CStr::from_ptr(name).to_str().ok().map(Path::new)
}

unsafe extern "C" fn x_open(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    file: *mut sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let d = data(vfs);
    let shim = file as *mut ShimFile;
    let real = (file as *mut u8).add(REAL_OFFSET) as *mut sqlite3_file;
    (*shim).base.pMethods = ptr::null();
    (*real).pMethods = ptr::null();
    if d.shared.refuse_open() {
        return sq::SQLITE_CANTOPEN;
    }
    let path = path_of(name);
    let prep = d.shared.prepare_open(path);
    let open = (*d.real).xOpen.expect("the default VFS has xOpen");
    let rc = open(d.real, name, real, flags, out_flags);
    if rc != sq::SQLITE_OK {
        // A real file that set its methods must be closed even on failure.
        if !(*real).pMethods.is_null() {
            if let Some(close) = methods(real).xClose {
                close(real);
            }
        }
        return rc;
    }
    let handle = d.shared.opened(path, flags, prep);
    ptr::write(
        shim,
        ShimFile {
            base: sqlite3_file {
                pMethods: &IO_METHODS,
            },
            real,
            shared: Arc::as_ptr(&d.shared),
            handle,
        },
    );
    sq::SQLITE_OK
}

unsafe extern "C" fn x_delete(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    let d = data(vfs);
    let del = (*d.real).xDelete.expect("the default VFS has xDelete");
    match path_of(name) {
        Some(p) => d
            .shared
            .delete(p, sync_dir & 1 != 0, || del(d.real, name, sync_dir)),
        None => del(d.real, name, sync_dir),
    }
}

unsafe extern "C" fn x_access(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let d = data(vfs);
    let f = (*d.real).xAccess.expect("the default VFS has xAccess");
    f(d.real, name, flags, out)
}

// The real VFS's methods that take no file, each present only when the real
// one has it (see `register`), called with the real VFS.
// SAFETY (all of them): `vfs` is our VFS; the arguments are as SQLite passes
// them, handed on unchanged.

unsafe extern "C" fn x_dl_open(vfs: *mut sqlite3_vfs, name: *const c_char) -> *mut c_void {
    let real = data(vfs).real;
    ((*real).xDlOpen.expect("checked at registration"))(real, name)
}

unsafe extern "C" fn x_dl_error(vfs: *mut sqlite3_vfs, n: c_int, out: *mut c_char) {
    let real = data(vfs).real;
    ((*real).xDlError.expect("checked at registration"))(real, n, out)
}

unsafe extern "C" fn x_dl_sym(
    vfs: *mut sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<unsafe extern "C" fn(*mut sqlite3_vfs, *mut c_void, *const c_char)> {
    let real = data(vfs).real;
    ((*real).xDlSym.expect("checked at registration"))(real, handle, symbol)
}

unsafe extern "C" fn x_dl_close(vfs: *mut sqlite3_vfs, handle: *mut c_void) {
    let real = data(vfs).real;
    ((*real).xDlClose.expect("checked at registration"))(real, handle)
}

unsafe extern "C" fn x_randomness(vfs: *mut sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    let real = data(vfs).real;
    ((*real).xRandomness.expect("checked at registration"))(real, n, out)
}

unsafe extern "C" fn x_sleep(vfs: *mut sqlite3_vfs, micros: c_int) -> c_int {
    let real = data(vfs).real;
    ((*real).xSleep.expect("checked at registration"))(real, micros)
}

unsafe extern "C" fn x_current_time(vfs: *mut sqlite3_vfs, out: *mut f64) -> c_int {
    let real = data(vfs).real;
    ((*real).xCurrentTime.expect("checked at registration"))(real, out)
}

unsafe extern "C" fn x_get_last_error(vfs: *mut sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    let real = data(vfs).real;
    ((*real).xGetLastError.expect("checked at registration"))(real, n, out)
}

unsafe extern "C" fn x_current_time_int64(vfs: *mut sqlite3_vfs, out: *mut sqlite3_int64) -> c_int {
    let real = data(vfs).real;
    ((*real).xCurrentTimeInt64.expect("checked at registration"))(real, out)
}

unsafe extern "C" fn x_full_pathname(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let d = data(vfs);
    let f = (*d.real)
        .xFullPathname
        .expect("the default VFS has xFullPathname");
    f(d.real, name, n, out)
}

unsafe extern "C" fn x_close(f: *mut sqlite3_file) -> c_int {
    let (real, shared, handle) = parts(f);
    shared.closed(handle);
    let mut rc = sq::SQLITE_OK;
    if !(*real).pMethods.is_null() {
        if let Some(close) = methods(real).xClose {
            rc = close(real);
        }
    }
    (*f).pMethods = ptr::null();
    rc
}

unsafe extern "C" fn x_read(
    f: *mut sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    ofst: sqlite3_int64,
) -> c_int {
    let (real, shared, handle) = parts(f);
    let slice = std::slice::from_raw_parts_mut(buf as *mut u8, amt.max(0) as usize);
    let read = methods(real).xRead.expect("xRead");
    shared.read(handle, slice, |b| {
        read(real, b.as_mut_ptr().cast(), b.len() as c_int, ofst)
    })
}

unsafe extern "C" fn x_write(
    f: *mut sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    ofst: sqlite3_int64,
) -> c_int {
    let (real, shared, handle) = parts(f);
    let slice = std::slice::from_raw_parts(buf as *const u8, amt.max(0) as usize);
    let write = methods(real).xWrite.expect("xWrite");
    shared.write(handle, ofst.max(0) as u64, slice, |d| {
        write(real, d.as_ptr().cast(), d.len() as c_int, ofst)
    })
}

unsafe extern "C" fn x_truncate(f: *mut sqlite3_file, size: sqlite3_int64) -> c_int {
    let (real, shared, handle) = parts(f);
    let trunc = methods(real).xTruncate.expect("xTruncate");
    shared.truncate(handle, size.max(0) as u64, || trunc(real, size))
}

unsafe extern "C" fn x_sync(f: *mut sqlite3_file, flags: c_int) -> c_int {
    let (real, shared, handle) = parts(f);
    let sync = methods(real).xSync.expect("xSync");
    shared.sync(handle, || sync(real, flags))
}

unsafe extern "C" fn x_file_size(f: *mut sqlite3_file, out: *mut sqlite3_int64) -> c_int {
    let (real, shared, _) = parts(f);
    if let Some(rc) = shared.gate(sq::SQLITE_IOERR_FSTAT) {
        return rc;
    }
    methods(real).xFileSize.expect("xFileSize")(real, out)
}

unsafe extern "C" fn x_lock(f: *mut sqlite3_file, level: c_int) -> c_int {
    let (real, shared, _) = parts(f);
    if let Some(rc) = shared.gate(sq::SQLITE_IOERR_LOCK) {
        return rc;
    }
    methods(real).xLock.expect("xLock")(real, level)
}

unsafe extern "C" fn x_unlock(f: *mut sqlite3_file, level: c_int) -> c_int {
    let (real, _, _) = parts(f);
    methods(real).xUnlock.expect("xUnlock")(real, level)
}

unsafe extern "C" fn x_check_reserved_lock(f: *mut sqlite3_file, out: *mut c_int) -> c_int {
    let (real, shared, _) = parts(f);
    if let Some(rc) = shared.gate(sq::SQLITE_IOERR_CHECKRESERVEDLOCK) {
        return rc;
    }
    methods(real)
        .xCheckReservedLock
        .expect("xCheckReservedLock")(real, out)
}

unsafe extern "C" fn x_file_control(f: *mut sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    let (real, shared, _) = parts(f);
    if op == sq::SQLITE_FCNTL_VFSNAME {
        // Leave the name as is: the real VFS would write its own.
        return sq::SQLITE_NOTFOUND;
    }
    if let Some(rc) = shared.gate(sq::SQLITE_IOERR) {
        return rc;
    }
    match methods(real).xFileControl {
        Some(fc) => fc(real, op, arg),
        None => sq::SQLITE_NOTFOUND,
    }
}

unsafe extern "C" fn x_sector_size(f: *mut sqlite3_file) -> c_int {
    let (real, _, _) = parts(f);
    methods(real).xSectorSize.map_or(512, |g| g(real))
}

unsafe extern "C" fn x_device_characteristics(f: *mut sqlite3_file) -> c_int {
    let (real, _, _) = parts(f);
    methods(real).xDeviceCharacteristics.map_or(0, |g| g(real))
}

unsafe extern "C" fn x_shm_map(
    f: *mut sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let (real, shared, _) = parts(f);
    if let Some(rc) = shared.gate(sq::SQLITE_IOERR_SHMMAP) {
        return rc;
    }
    match methods(real).xShmMap {
        Some(m) => m(real, page, size, extend, out),
        None => sq::SQLITE_IOERR_SHMMAP,
    }
}

unsafe extern "C" fn x_shm_lock(
    f: *mut sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    let (real, shared, _) = parts(f);
    if flags & sq::SQLITE_SHM_UNLOCK == 0 {
        if let Some(rc) = shared.gate(sq::SQLITE_IOERR_SHMLOCK) {
            return rc;
        }
    }
    match methods(real).xShmLock {
        Some(l) => l(real, offset, n, flags),
        None => sq::SQLITE_IOERR_SHMLOCK,
    }
}

unsafe extern "C" fn x_shm_barrier(f: *mut sqlite3_file) {
    let (real, _, _) = parts(f);
    if let Some(b) = methods(real).xShmBarrier {
        b(real);
    }
}

unsafe extern "C" fn x_shm_unmap(f: *mut sqlite3_file, delete: c_int) -> c_int {
    let (real, _, _) = parts(f);
    match methods(real).xShmUnmap {
        Some(u) => u(real, delete),
        None => sq::SQLITE_OK,
    }
}
