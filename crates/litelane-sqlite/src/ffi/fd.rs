//! The descriptors a child of `fork()` inherits from its parent's kept
//! turns. A leaf of the FFI module (whose `allow(unsafe_code)` it shares):
//! `lane.rs` closes one when a turn taken before the fork is dropped in
//! the child, and `litelane_lane_after_fork` (in `ffi.rs`) closes those of
//! the parent's kept turns, so both lean on this file and it on nothing.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Closes `fd`, a descriptor of a turn's lock file that this process
/// inherited through `fork()` and will never use (its owner is forgotten):
/// the parent's open file description, and its locks, stay. `close` is
/// async-signal-safe.
pub(crate) fn close_inherited(fd: RawFd) {
    // SAFETY: `fd` is a descriptor this process owns (inherited) whose
    // Rust owner is forgotten and never closes it: it is closed once, here.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
}
