//! The VFS of in-memory databases: SQLite's `memdb` for the names litelane
//! gives them, the default VFS for every other file (`ATTACH`).

use std::ffi::c_int;
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use super::sqlite::disable_memstatus;
use super::vfs_forward::{delete_in, open_in, wrapping};

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
    // SAFETY: `vfs.default` is a registered VFS object.
    let routing = Box::new(ffi::sqlite3_vfs {
        // A file object is made by one of the two: room for either.
        szOsFile: m.szOsFile.max(d.szOsFile),
        mxPathname: m.mxPathname.max(d.mxPathname),
        xOpen: Some(memory_vfs_open),
        xDelete: Some(memory_vfs_delete),
        xAccess: Some(memory_vfs_access),
        xFullPathname: Some(memory_vfs_full_pathname),
        // The rest as the default VFS does them (memdb hands them to it).
        ..unsafe { wrapping(NAME, 0, vfs.default) }
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

// The routing VFS's methods that depend on a file's name: each calls the
// same method of the VFS that handles the name, passing that VFS itself
// (memdb's methods find the default VFS through their own `pAppData`).
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
    open_in(route(name), name, file, flags, out_flags)
}

unsafe extern "C" fn memory_vfs_delete(
    _: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    sync_dir: c_int,
) -> c_int {
    delete_in(route(name), name, sync_dir)
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
