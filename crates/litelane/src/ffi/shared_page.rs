//! A page of a file mapped shared between processes, and futex waits and
//! wakes on its words (the lock file's counters and bells).

use std::ptr;

/// The first [`SharedPage::LEN`] bytes of a file mapped `MAP_SHARED`: words
/// that every process mapping the file reads and writes with atomic
/// instructions (the cross-process queue's sync counters, doorbells and job
/// slots, `xproc/`), and the job slots' bytes, copied in and out.
#[cfg(target_os = "linux")]
pub(crate) struct SharedPage {
    ptr: std::ptr::NonNull<std::ffi::c_void>,
    /// Bytes mapped: [`SharedPage::LEN`], or [`SharedPage::MIN_LEN`] for a
    /// lock file that could not grow (no job slots then).
    len: usize,
}

#[cfg(target_os = "linux")]
impl SharedPage {
    /// Bytes mapped when the file has them: 320 KiB (the lock file's first
    /// page, its ticket records, and the job slots from 64 KiB,
    /// `xproc/jobs.rs`).
    pub(crate) const LEN: usize = 320 << 10;
    /// The least a lock file is mapped with: its first page (the sync
    /// counters and the doorbells).
    pub(crate) const MIN_LEN: usize = 4096;

    /// Maps the first [`LEN`](Self::LEN) bytes of `file`, or only the first
    /// [`MIN_LEN`](Self::MIN_LEN) when the file is shorter than `LEN`;
    /// fails when it is shorter than `MIN_LEN`. The caller makes sure the
    /// bytes are written (not a hole, which a write through the map would
    /// have to allocate, and a full disk would turn into `SIGBUS`), and that
    /// nobody truncates the file below them.
    pub(crate) fn map(file: &std::fs::File) -> std::io::Result<SharedPage> {
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        let size = file.metadata()?.len();
        let len = if size >= Self::LEN as u64 {
            Self::LEN
        } else if size >= Self::MIN_LEN as u64 {
            Self::MIN_LEN
        } else {
            return Err(std::io::Error::other(format!(
                "the lock file holds {size} bytes, fewer than its first page"
            )));
        };
        let nonzero = std::num::NonZeroUsize::new(len).expect("non-zero");
        // SAFETY: a fresh shared mapping of a file we hold open, at an
        // address the kernel picks, no longer than the file; nothing else
        // in this process aliases it as Rust memory. Only the accessors
        // below hand out references into it, bounds-checked against `len`.
        let ptr = unsafe {
            mmap(
                None,
                nonzero,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                file,
                0,
            )
        }?;
        Ok(SharedPage { ptr, len })
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The 4-byte word at `offset` (a multiple of 4 inside the page), for
    /// [`futex_wait`] and [`futex_wake_all`].
    pub(crate) fn word32(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        self.atomic_at(offset)
    }

    /// The 8-byte word at `offset` (a multiple of 8 inside the page).
    pub(crate) fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU64 {
        self.atomic_at(offset)
    }

    /// The address of the `len` bytes at `offset`, asserted inside the
    /// mapping.
    fn byte_at(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "{len} bytes at {offset}"
        );
        // SAFETY: `offset` is inside the mapping (asserted just above).
        unsafe { self.ptr.as_ptr().cast::<u8>().add(offset) }
    }

    /// Copies `bytes` into the mapping at `offset`. Other processes may
    /// read those bytes at any time: publish them through an atomic word
    /// (release) and read them only after it (acquire).
    pub(crate) fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        let at = self.byte_at(offset, bytes.len());
        // SAFETY: in bounds (`byte_at`); the mapping lives as long as
        // `self`; bytes have no alignment or validity requirement. A
        // concurrent writer in another process can only make the bytes
        // garbage, which their readers check (lengths, tags, UTF-8).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len()) }
    }

    /// Copies `out.len()` bytes of the mapping at `offset` into `out`.
    pub(crate) fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        let at = self.byte_at(offset, out.len());
        // SAFETY: as in `write_bytes`; `out` is ours and does not overlap
        // the mapping.
        unsafe { std::ptr::copy_nonoverlapping(at, out.as_mut_ptr(), out.len()) }
    }

    /// The atomic `A` (`AtomicU32` or `AtomicU64`: only those) at `offset`,
    /// a multiple of its size inside the page.
    fn atomic_at<A>(&self, offset: usize) -> &A {
        let size = std::mem::size_of::<A>();
        assert!(
            offset % size == 0 && offset + size <= self.len,
            "word of {size} bytes at {offset}"
        );
        // SAFETY: in bounds and aligned to its size (the mapping is
        // page-aligned), which is the alignment of the atomics it is used
        // for; valid for as long as `self` (unmapped in Drop). Those types
        // have the layout of their integer and mutate through
        // `UnsafeCell`; every other process touches these words with atomic
        // instructions too.
        unsafe { &*self.ptr.as_ptr().cast::<u8>().add(offset).cast::<A>() }
    }
}

#[cfg(target_os = "linux")]
impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of that length; no reference
        // from `word` outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr, self.len) };
    }
}

/// Sleeps while `word` still holds `seen`, for at most `timeout`, or until
/// a [`futex_wake_all`] on the same word, in any process mapping it
/// (a shared futex: `FUTEX_WAIT` without `FUTEX_PRIVATE_FLAG`). Returns at
/// once when the word already changed; may also return early (a signal, a
/// spurious wake-up): the caller looks again.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    seen: u32,
    timeout: std::time::Duration,
) {
    let ts = nix::libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as nix::libc::time_t,
        tv_nsec: timeout.subsec_nanos() as nix::libc::c_long,
    };
    // Every result (woken, EAGAIN for a changed word, ETIMEDOUT, EINTR)
    // means "look again".
    futex(word, nix::libc::FUTEX_WAIT, seen, &ts);
}

/// Wakes every thread, in any process, sleeping in [`futex_wait`] on
/// `word`. Change the word first. A failure wakes nobody, and sleepers
/// poll anyway.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    futex(word, nix::libc::FUTEX_WAKE, i32::MAX as u32, ptr::null());
}

/// Wakes at most one thread, in any process, sleeping in [`futex_wait`] on
/// `word`, as [`futex_wake_all`] otherwise.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wake_one(word: &std::sync::atomic::AtomicU32) {
    futex(word, nix::libc::FUTEX_WAKE, 1, ptr::null());
}

/// Wakes one thread sleeping in [`futex_wait`] on `from` and moves every
/// other sleeper there to `to`, where a later [`futex_wake_all`] on `to`
/// wakes them; provided `from` still holds `expected` (the caller changed
/// it just before). Otherwise wakes every sleeper on `from`.
#[cfg(target_os = "linux")]
pub(crate) fn futex_wake_one_move_rest(
    from: &std::sync::atomic::AtomicU32,
    expected: u32,
    to: &std::sync::atomic::AtomicU32,
) {
    // SAFETY: both words are live, 4-aligned u32s for the whole call;
    // FUTEX_CMP_REQUEUE reads `from` and touches no other memory; the
    // fourth argument is the count of waiters to move, passed in the
    // timeout's place as the call defines.
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_futex,
            from.as_ptr(),
            nix::libc::FUTEX_CMP_REQUEUE,
            1u32,
            i32::MAX as usize,
            to.as_ptr(),
            expected,
        )
    };
    if r < 0 {
        futex_wake_all(from);
    }
}

/// The `futex` system call on a shared (not process-private) word; its
/// result is ignored by both callers.
#[cfg(target_os = "linux")]
fn futex(
    word: &std::sync::atomic::AtomicU32,
    op: nix::libc::c_int,
    val: u32,
    timeout: *const nix::libc::timespec,
) {
    // SAFETY: `word` is a live, 4-aligned u32 (shared mapping or not) for
    // the whole call; FUTEX_WAIT only reads it and FUTEX_WAKE touches no
    // memory; `timeout` is null or points to a timespec the caller keeps
    // alive across the call.
    unsafe {
        nix::libc::syscall(
            nix::libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            timeout,
            ptr::null::<u32>(),
            0u32,
        );
    }
}

// SAFETY: the page is only accessed through atomics (`word`); the pointer
// itself is never written after `map`.
#[cfg(target_os = "linux")]
unsafe impl Send for SharedPage {}
#[cfg(target_os = "linux")]
unsafe impl Sync for SharedPage {}
