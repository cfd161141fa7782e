//! The C ABI the lane VFS (`c/lane_vfs.c`) calls: the one module of this
//! crate with `unsafe` (raw pointers from C). Every function catches
//! panics: nothing unwinds into SQLite.

#![allow(unsafe_code)]

pub(crate) mod fd;

use crate::{Acquired, Lane, Turn};
use fd::close_inherited;
use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// `*turn` holds the turn: release it with `litelane_lane_release`.
const LANE_TURN: c_int = 0;
/// The timeout passed first; `msg` says who held the turn.
const LANE_TIMED_OUT: c_int = 1;
/// No queue for this database: lock as stock SQLite does. `msg` says why
/// (the first time only; empty after).
const LANE_OFF: c_int = 2;

/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives the call.
unsafe fn path<'a>(p: *const c_char) -> Option<&'a Path> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    Some(Path::new(OsStr::from_bytes(bytes)))
}

/// Copies `s` into `buf` (`len` bytes, NUL-terminated, cut if longer).
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
unsafe fn put(s: &str, buf: *mut c_char, len: usize) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = s.len().min(len - 1);
    // SAFETY: `buf` has `len` > `n` bytes; `s` and `buf` do not overlap
    // (`s` is Rust-owned).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

/// Waits at most `timeout_ms` (negative: without limit; 0: only if free
/// now) for the write turn of the database at `db_path` (SQLite's full
/// path of the main database file). Returns `LANE_TURN` (0) with the turn
/// in `*turn`, `LANE_TIMED_OUT` (1) or `LANE_OFF` (2) with a message in
/// `msg` (`msg_len` bytes, NUL-terminated). `*lane` caches the database's
/// lane between calls: NULL the first time; give it to
/// `litelane_lane_forget` when the file is closed.
///
/// # Safety
/// `db_path` is NULL or NUL-terminated; `lane` is NULL or points to NULL or
/// to a lane this function stored there; `turn` is writable; `msg` is NULL
/// or points to `msg_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn litelane_lane_acquire(
    db_path: *const c_char,
    lane: *mut *mut c_void,
    timeout_ms: c_int,
    turn: *mut *mut c_void,
    msg: *mut c_char,
    msg_len: usize,
) -> c_int {
    // SAFETY: the caller's contract, for each pointer.
    unsafe {
        put("", msg, msg_len);
        if turn.is_null() || lane.is_null() {
            put("lane: no place for the turn", msg, msg_len);
            return LANE_OFF;
        }
        *turn = std::ptr::null_mut();
        let Some(db) = path(db_path) else {
            return LANE_OFF;
        };
        let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(i32::MAX as u64));
        let got = catch_unwind(AssertUnwindSafe(|| {
            // A lane cached before a fork is the parent's: find the
            // child's (the parent's stays referenced, never dropped here).
            let cached = (*lane).cast::<Arc<Lane>>();
            if cached.is_null() || !(*cached).of_this_process() {
                match crate::lane_for_file(db) {
                    Ok(found) => *lane = Box::into_raw(Box::new(found)).cast(),
                    Err(first) => {
                        *lane = std::ptr::null_mut();
                        return Acquired::Off(first);
                    }
                }
            }
            crate::acquire_on(&*(*lane).cast::<Arc<Lane>>(), db, timeout)
        }));
        match got {
            Ok(Acquired::Turn(t)) => {
                *turn = Box::into_raw(Box::new(t)).cast();
                LANE_TURN
            }
            Ok(Acquired::TimedOut(m)) => {
                put(&m, msg, msg_len);
                LANE_TIMED_OUT
            }
            Ok(Acquired::Off(m)) => {
                put(m.as_deref().unwrap_or(""), msg, msg_len);
                LANE_OFF
            }
            Err(_) => {
                put(
                    "lane: the queue failed (a panic); locking as stock SQLite",
                    msg,
                    msg_len,
                );
                LANE_OFF
            }
        }
    }
}

/// Lets go of a lane `litelane_lane_acquire` cached (NULL: nothing to do).
///
/// # Safety
/// `lane` is NULL or a lane `litelane_lane_acquire` stored, given here once.
#[no_mangle]
pub unsafe extern "C" fn litelane_lane_forget(lane: *mut c_void) {
    if lane.is_null() {
        return;
    }
    // SAFETY: `lane` came from `Box::into_raw` in `litelane_lane_acquire`
    // and is given here once (the caller's contract).
    let lane = *unsafe { Box::from_raw(lane.cast::<Arc<Lane>>()) };
    // The last file of this process on the lane retires it (`lib.rs`).
    let _ = catch_unwind(AssertUnwindSafe(|| crate::forget(lane)));
}

/// Ends a turn `litelane_lane_acquire` gave (NULL: nothing to do). Call
/// it after SQLite's own lock is released.
///
/// # Safety
/// `turn` is NULL or a turn from `litelane_lane_acquire`, released once.
#[no_mangle]
pub unsafe extern "C" fn litelane_lane_release(turn: *mut c_void) {
    if turn.is_null() {
        return;
    }
    // SAFETY: `turn` came from `Box::into_raw` in `litelane_lane_acquire`
    // and is released once (the caller's contract).
    let turn = unsafe { Box::from_raw(turn.cast::<Turn>()) };
    // Dropping ends the turn; a panic in it must not unwind into C.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(turn)));
}

/// Writes one line on the queue of `db_path` into `buf` (`len` bytes,
/// NUL-terminated): `on: <lock file>` (and who holds the turn) or
/// `off: <why>`. For `PRAGMA lane`.
///
/// # Safety
/// `db_path` is NULL or NUL-terminated; `buf` is NULL or points to `len`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn litelane_lane_status(
    db_path: *const c_char,
    buf: *mut c_char,
    len: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let line = match path(db_path) {
            Some(db) => catch_unwind(AssertUnwindSafe(|| crate::status(db)))
                .unwrap_or_else(|_| "off: the queue failed (a panic)".into()),
            None => "off: no database path".into(),
        };
        put(&line, buf, len);
    }
}

/// Tells the queue this process was forked (the lane VFS registers it with
/// `pthread_atfork` as the child's handler): the child then opens its own
/// queues instead of using the parent's open file descriptions.
#[no_mangle]
pub extern "C" fn litelane_lane_after_fork() {
    crate::after_fork();
    for fd in crate::lane::KEPT_FDS.take_all() {
        close_inherited(fd);
    }
}
