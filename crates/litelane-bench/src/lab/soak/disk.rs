//! The disk-full phase: the filesystem of the databases held nearly full
//! for a while, on a filesystem small enough to fill (`scripts/soak`
//! mounts one of 1 GiB).

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::counters::Shared;
use super::measure::disk_space;

/// The largest filesystem `--full-for` agrees to fill.
const MAX_FILL_FS_BYTES: u64 = 8 << 30;

/// Holds the filesystem of `dir` nearly full from `at` for `hold` seconds:
/// a filler file takes all but `leave_mib` MiB of the free space. Returns
/// what it did, for the summary.
pub fn fill(
    dir: &Path,
    at: u64,
    hold: u64,
    leave_mib: u64,
    shared: &Shared,
    stop: &AtomicBool,
) -> String {
    if !wait(Duration::from_secs(at), stop) {
        return "disk-full phase: not reached".into();
    }
    let Some((total, free)) = disk_space(dir) else {
        return "disk-full phase: skipped (no statvfs on this system)".into();
    };
    if total > MAX_FILL_FS_BYTES {
        return format!(
            "disk-full phase: skipped: {} is on a {:.1} GiB filesystem and the soak fills only one \
             of at most {} GiB (scripts/soak mounts a 1 GiB filesystem for it)",
            dir.display(),
            total as f64 / (1u64 << 30) as f64,
            MAX_FILL_FS_BYTES >> 30
        );
    }
    let filler = dir.join("soak-filler");
    shared.disk_nearly_full.store(true, Ordering::Relaxed);
    let (written, result) = write_filler(&filler, free.saturating_sub(leave_mib << 20));
    let free_during = disk_space(dir).map_or(0, |(_, f)| f);
    wait(Duration::from_secs(hold), stop);
    let _ = std::fs::remove_file(&filler);
    thread::sleep(Duration::from_secs(2));
    shared.disk_nearly_full.store(false, Ordering::Relaxed);
    format!(
        "disk-full phase: from {at} s for {hold} s a filler of {} MiB left {} MiB free of {} MiB{}",
        written >> 20,
        free_during >> 20,
        total >> 20,
        match result {
            Ok(()) => String::new(),
            Err(e) => format!(" (the filler stopped early: {e})"),
        }
    )
}

/// Sleeps `d`, or less when `stop`; false when stopped first.
fn wait(d: Duration, stop: &AtomicBool) -> bool {
    let start = Instant::now();
    while start.elapsed() < d {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        thread::sleep(Duration::from_millis(100));
    }
    true
}

/// Writes about `bytes` bytes to a new file at `path` (1 MiB at a time)
/// and syncs it; returns the bytes written and how it ended.
fn write_filler(path: &Path, bytes: u64) -> (u64, std::io::Result<()>) {
    let mut written = 0u64;
    let result = (|| {
        let mut f = std::fs::File::create(path)?;
        let chunk = vec![0x5au8; 1 << 20];
        while written < bytes {
            f.write_all(&chunk)?;
            written += chunk.len() as u64;
        }
        f.sync_all()
    })();
    (written, result)
}
