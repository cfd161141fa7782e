//! The VFS of in-memory databases: SQLite's `memdb` for the names litelane
//! gives them, the default VFS of the moment the connection opened for
//! every other file (`ATTACH`).

use std::ffi::{c_int, CStr, CString};
use std::ptr;
use std::sync::{Mutex, OnceLock};

use rusqlite::ffi;

use super::sqlite::disable_memstatus;
use super::vfs_forward::{delete_in, open_in, wrapping};
use crate::unpoisoned::lock;

/// The prefixes of the names litelane gives its in-memory databases
/// (`connection.rs`): the only files [`memory_vfs`] opens in `memdb`.
pub(crate) const MEMORY_NAME_PREFIXES: [&str; 2] = ["/litelane-mem-", "/litelane-uri-"];

/// The VFS litelane opens an in-memory database with: a routing VFS over
/// the process's default VFS at this moment, registered the first time that
/// VFS is the default (`litelane-memdb` over the first, then
/// `litelane-memdb+NAME`), or `None` when SQLite has no `memdb`.
///
/// An in-memory database opened in `memdb` (`file:/name?vfs=memdb`) makes
/// `memdb` the VFS of its connection, and SQLite opens every database the
/// connection attaches in the connection's VFS: `ATTACH 'app.db'` then gave
/// an empty in-memory database named `app.db` instead of the file (the
/// standard library's `:memory:` connections attach files). This VFS sends
/// the names litelane gives its in-memory databases
/// ([`MEMORY_NAME_PREFIXES`]) to `memdb` and every other name to the VFS
/// that was the default when the connection opened, as SQLite opens an
/// attached file in the VFS its connection opened with: a program that
/// makes its own VFS the default (an encrypting one) has its attached
/// files written through it, whenever it made it the default.
pub(crate) fn memory_vfs() -> Option<&'static str> {
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
    let _ = MEMDB.set(Vfs(memdb));
    // SAFETY: a registered VFS's name is a NUL-terminated string that lives
    // as long as the VFS; it is copied here.
    let default_name = unsafe { CStr::from_ptr((*default).zName) }.to_owned();
    static OVER: Mutex<Vec<&'static RoutingVfs>> = Mutex::new(Vec::new());
    let mut over = lock(&OVER);
    // The default may be one of these (its VFS was unregistered): it
    // routes as it is.
    if let Some(routing) = over
        .iter()
        .find(|r| ptr::eq(&r.base, default) || (r.files == default && r.files_name == default_name))
    {
        return routing.name();
    }
    let name: &'static CStr = if over.is_empty() {
        c"litelane-memdb"
    } else {
        let name = format!(
            "litelane-memdb{}+{}",
            over.len() + 1,
            default_name.to_string_lossy()
        );
        // Leaked, as the VFS object that points at it.
        Box::leak(CString::new(name).ok()?.into_boxed_c_str())
    };
    // SAFETY: both are registered VFS objects (checked non-null above).
    let (m, d) = unsafe { (&*memdb, &*default) };
    let routing = Box::new(RoutingVfs {
        // SAFETY: `memdb` is a registered VFS object.
        base: ffi::sqlite3_vfs {
            // A file object is made by memdb or the default: room for either.
            szOsFile: m.szOsFile.max(d.szOsFile),
            mxPathname: m.mxPathname.max(d.mxPathname),
            xOpen: Some(memory_vfs_open),
            xDelete: Some(memory_vfs_delete),
            xAccess: Some(memory_vfs_access),
            xFullPathname: Some(memory_vfs_full_pathname),
            // The rest (time, randomness, sleep) as memdb does them: it
            // hands them to SQLite's own default, which outlives the
            // program's VFS.
            ..unsafe { wrapping(name, 0, memdb) }
        },
        files: default,
        files_name: default_name,
    });
    // Leaked: connections keep pointers to it for as long as they live.
    let routing: &'static RoutingVfs = Box::leak(routing);
    // SAFETY: a fully initialized VFS object that lives as long as the
    // process. SQLite only reads it (the `*mut` is its API's).
    let rc = unsafe { ffi::sqlite3_vfs_register(ptr::from_ref(&routing.base).cast_mut(), 0) };
    if rc != ffi::SQLITE_OK {
        return None;
    }
    over.push(routing);
    routing.name()
}

/// One of [`memory_vfs`]'s VFSs: the VFS object SQLite calls (first, so
/// that a pointer to it is a pointer to this), and the VFS it opens files
/// in, which the program may unregister.
#[repr(C)]
struct RoutingVfs {
    base: ffi::sqlite3_vfs,
    /// The default VFS when this one was registered.
    files: *mut ffi::sqlite3_vfs,
    /// Its name, copied: `files` may be freed once unregistered.
    files_name: CString,
}

// SAFETY: the pointers are to VFS objects (this one lives for the process;
// `files` is only used while SQLite still has it registered, see
// `RoutingVfs::files`); their methods may be called from any thread.
unsafe impl Send for RoutingVfs {}
unsafe impl Sync for RoutingVfs {}

impl RoutingVfs {
    fn name(&self) -> Option<&'static str> {
        // SAFETY: `zName` is a leaked or static C string.
        unsafe { CStr::from_ptr(self.base.zName) }.to_str().ok()
    }

    /// The VFS files that are not litelane's in-memory databases open in:
    /// the default VFS of the moment this one was registered while SQLite
    /// still has it registered. A program may unregister its VFS (and free
    /// it) while this one stays registered, and this one then becomes the
    /// default VFS if it stood second in SQLite's list; files then open in
    /// SQLite's `unix` VFS when its file objects fit this VFS's, as they
    /// would have without litelane. NULL when there is no such VFS.
    fn files(&self) -> *mut ffi::sqlite3_vfs {
        // SAFETY: sqlite3_vfs_find returns a registered VFS object or NULL;
        // only its address is compared.
        unsafe {
            if ffi::sqlite3_vfs_find(self.files_name.as_ptr()) == self.files {
                return self.files;
            }
            let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
            if !unix.is_null() && (*unix).szOsFile <= self.base.szOsFile {
                unix
            } else {
                ptr::null_mut()
            }
        }
    }
}

/// A registered VFS object, which SQLite keeps for the life of the process.
#[derive(Clone, Copy)]
struct Vfs(*mut ffi::sqlite3_vfs);

// SAFETY: the pointer is to a VFS object SQLite keeps for the life of the
// process; its methods may be called from any thread.
unsafe impl Send for Vfs {}
unsafe impl Sync for Vfs {}

/// SQLite's `memdb`, for the routing VFSs' methods.
static MEMDB: OnceLock<Vfs> = OnceLock::new();

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

/// The VFS that handles `name`, or NULL when none can (see
/// [`RoutingVfs::files`]).
///
/// # Safety
/// As [`is_memory_name`]; `routing` is one of [`memory_vfs`]'s VFSs.
unsafe fn route(
    routing: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
) -> *mut ffi::sqlite3_vfs {
    if is_memory_name(name) {
        MEMDB.get().expect("found before any routing VFS").0
    } else {
        (*routing.cast::<RoutingVfs>()).files()
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
    routing: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    match route(routing, name) {
        vfs if vfs.is_null() => ffi::SQLITE_CANTOPEN,
        vfs => open_in(vfs, name, file, flags, out_flags),
    }
}

unsafe extern "C" fn memory_vfs_delete(
    routing: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    sync_dir: c_int,
) -> c_int {
    match route(routing, name) {
        vfs if vfs.is_null() => ffi::SQLITE_IOERR_DELETE,
        vfs => delete_in(vfs, name, sync_dir),
    }
}

unsafe extern "C" fn memory_vfs_access(
    routing: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    match route(routing, name) {
        vfs if vfs.is_null() => ffi::SQLITE_IOERR_ACCESS,
        vfs => ((*vfs).xAccess.expect("xAccess"))(vfs, name, flags, out),
    }
}

unsafe extern "C" fn memory_vfs_full_pathname(
    routing: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    n_out: c_int,
    out: *mut std::ffi::c_char,
) -> c_int {
    match route(routing, name) {
        vfs if vfs.is_null() => ffi::SQLITE_CANTOPEN,
        vfs => ((*vfs).xFullPathname.expect("xFullPathname"))(vfs, name, n_out, out),
    }
}
