//! What a profile's threads and its writer process count as they go, and
//! the state the whole run shares (the disk-full phase).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hdrhistogram::Histogram;

/// `SQLITE_FULL`: the disk (or the file's size limit) is full.
const SQLITE_FULL: i32 = 13;

/// State shared by the whole run.
#[derive(Default)]
pub struct Shared {
    /// The filesystem is being held nearly full (and for 2 s after).
    pub disk_nearly_full: AtomicBool,
}

/// One profile's counts; the sampler reads them every second.
#[derive(Default)]
pub struct Counters {
    pub writes: AtomicU64,
    pub bulk_rows: AtomicU64,
    pub reads: AtomicU64,
    pub errors: AtomicU64,
    pub full_errors: AtomicU64,
    /// The longest single-row write since the last sample, in µs.
    pub max_stall_us: AtomicU64,
    /// The next row id of the in-process writers.
    pub next_id: AtomicU64,
    pub child_acks: AtomicU64,
    pub kills: AtomicU64,
    pub lost: AtomicU64,
    /// The longest checkpoint hold a writer process printed, in µs.
    pub child_hold_max_us: AtomicU64,
}

impl Counters {
    /// Counts an engine error of `what`.
    pub fn error(&self, shared: &Shared, what: &str, e: &litelane::Error) {
        self.error_code(shared, what, e.sqlite_code(), &e.to_string());
    }

    /// Counts an error: `SQLITE_FULL` while the disk is held nearly full
    /// apart (a full disk may refuse a write), any other printed on stderr.
    pub fn error_code(&self, shared: &Shared, what: &str, code: Option<i32>, msg: &str) {
        if code == Some(SQLITE_FULL) && shared.disk_nearly_full.load(Ordering::Relaxed) {
            self.full_errors.fetch_add(1, Ordering::Relaxed);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("error in {what}: {msg}");
        }
    }
}

/// A histogram of commit latencies in µs, up to 10 minutes.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}
