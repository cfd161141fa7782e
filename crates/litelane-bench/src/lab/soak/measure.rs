//! A second of one profile's soak: what [`Sampler::take`] reads from the
//! database's metrics, the workload's counters, the process and the
//! filesystem, and the line it makes of it for the log.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use hdrhistogram::Histogram;
use litelane::{Metrics, OverLimitReason, Profile};

use super::counters::{new_histogram, Counters, Shared};
use super::workload::Workload;

/// One second of one profile's soak.
#[derive(Debug, Clone)]
pub struct Sample {
    pub profile: Profile,
    pub second: u64,
    pub wal_bytes: u64,
    /// Commit latency of the single-row writers in this second, ms (NaN:
    /// no write finished in it).
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The longest single-row write that finished in this second, ms.
    pub max_stall_ms: f64,
    pub writes: u64,
    pub bulk_rows: u64,
    pub reads: u64,
    pub child_acks: u64,
    /// Cumulative from here on.
    pub errors: u64,
    pub full_errors: u64,
    pub kills: u64,
    pub lost: u64,
    pub checkpoints: u64,
    pub escalated: u64,
    /// WAL pages in use after the last commit.
    pub wal_pages: u64,
    /// The WAL was over its limit at the end of this second.
    pub over_limit: bool,
    /// Longest time a checkpoint held writers back so far (this process's
    /// and the writer process's), ms; cumulative.
    pub hold_max_ms: f64,
    /// Time checkpoints of this process held writers back in this second, ms.
    pub hold_ms: f64,
    pub rss_kib: u64,
    pub disk_free_mib: f64,
    /// The filesystem was being held nearly full during this second.
    pub disk_nearly_full: bool,
}

/// Takes one profile's samples, second after second: remembers the
/// counters of the last one (the sample holds differences) and gathers
/// every second's latencies.
pub struct Sampler {
    profile: Profile,
    /// The directory of the databases (for the free space).
    dir: PathBuf,
    /// writes, bulk rows, reads, the writer process's acknowledgements.
    last: (u64, u64, u64, u64),
    last_hold: Duration,
    /// Every latency so far (µs).
    pub whole: Histogram<u64>,
}

impl Sampler {
    pub fn new(profile: Profile, dir: &Path) -> Sampler {
        Sampler {
            profile,
            dir: dir.to_path_buf(),
            last: (0, 0, 0, 0),
            last_hold: Duration::ZERO,
            whole: new_histogram(),
        }
    }

    /// Second `second`'s sample: `m` the database's metrics now; empties
    /// the workload's latency histogram and its longest write.
    pub fn take(&mut self, second: u64, m: &Metrics, w: &Workload, shared: &Shared) -> Sample {
        let c = &w.counters;
        let h = std::mem::replace(&mut *w.latency.lock().unwrap(), new_histogram());
        let _ = self.whole.add(&h);
        let writes = c.writes.load(Ordering::Relaxed);
        let bulk = c.bulk_rows.load(Ordering::Relaxed);
        let reads = c.reads.load(Ordering::Relaxed);
        let child_acks = c.child_acks.load(Ordering::Relaxed);
        // A second in which no write finished has no latency (NaN: a gap in
        // the chart); its stall shows in the second the write finishes.
        let ms = |q: f64| {
            if h.is_empty() {
                f64::NAN
            } else {
                h.value_at_quantile(q) as f64 / 1000.0
            }
        };
        let mut s = Sample {
            profile: self.profile,
            second,
            wal_bytes: m.wal_file_bytes,
            wal_pages: m.wal_pages,
            over_limit: m.wal_over_limit.is_some(),
            hold_max_ms: 0.0,
            hold_ms: m
                .checkpoint_hold_time
                .saturating_sub(self.last_hold)
                .as_secs_f64()
                * 1000.0,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            max_stall_ms: match c.max_stall_us.swap(0, Ordering::Relaxed) {
                0 => f64::NAN,
                us => us as f64 / 1000.0,
            },
            writes: writes - self.last.0,
            bulk_rows: bulk - self.last.1,
            reads: reads - self.last.2,
            child_acks: child_acks - self.last.3,
            errors: 0,
            full_errors: 0,
            kills: 0,
            lost: 0,
            checkpoints: m.checkpoints,
            escalated: m.checkpoints_escalated,
            rss_kib: rss_kib(),
            disk_free_mib: disk_space(&self.dir)
                .map_or(f64::NAN, |(_, free)| free as f64 / 1048576.0),
            disk_nearly_full: shared.disk_nearly_full.load(Ordering::Relaxed),
        };
        s.update_totals(c, m);
        self.last = (writes, bulk, reads, child_acks);
        self.last_hold = m.checkpoint_hold_time;
        s
    }
}

impl Sample {
    /// Sets the cumulative figures (errors, kills, rows lost, the longest
    /// checkpoint hold) from the counters and the metrics `m`.
    pub fn update_totals(&mut self, c: &Counters, m: &Metrics) {
        self.errors = c.errors.load(Ordering::Relaxed);
        self.full_errors = c.full_errors.load(Ordering::Relaxed);
        self.kills = c.kills.load(Ordering::Relaxed);
        self.lost = c.lost.load(Ordering::Relaxed);
        let child_hold_ms = c.child_hold_max_us.load(Ordering::Relaxed) as f64 / 1000.0;
        self.hold_max_ms = (m.checkpoint_hold_max.as_secs_f64() * 1000.0).max(child_hold_ms);
    }

    /// The sample's line in the log (soak.log); `m` says who pins a WAL
    /// over its limit.
    pub fn log_line(&self, m: &Metrics) -> String {
        let s = self;
        format!(
            "{:>8} {:>5}s wal {:>9} B {:>6} pages  p50 {:>6.2} p99 {:>7.2} max {:>8.2} ms  \
             writes {:>5}/s  process {:>4}/s  kills {} lost {}  errors {} (+{} full)  \
             held {:.1} ms (longest {:.1})  rss {} KiB  free {:.0} MiB{}",
            s.profile,
            s.second,
            s.wal_bytes,
            s.wal_pages,
            s.p50_ms,
            s.p99_ms,
            s.max_stall_ms,
            s.writes,
            s.child_acks,
            s.kills,
            s.lost,
            s.errors,
            s.full_errors,
            s.hold_ms,
            s.hold_max_ms,
            s.rss_kib,
            s.disk_free_mib,
            over_limit_note(m)
        )
    }
}

/// Over its limit: for how long, and who pins it (empty when within it).
fn over_limit_note(m: &Metrics) -> String {
    let Some(o) = &m.wal_over_limit else {
        return String::new();
    };
    let why = match &o.reason {
        OverLimitReason::PinnedByRead(r) => {
            format!("pinned by {:?} ({:.1} s old)", r.label, r.age.as_secs_f64())
        }
        OverLimitReason::PinnedElsewhere => "pinned by another process".into(),
        OverLimitReason::CatchingUp => "catching up".into(),
        OverLimitReason::CheckpointFailed(e) => format!("checkpoint failed: {e}"),
        other => format!("{other:?}"),
    };
    format!("  OVER LIMIT {:.1} s: {why}", o.duration.as_secs_f64())
}

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}

/// (total, available to us) bytes of the filesystem holding `dir`.
#[cfg(target_os = "linux")]
pub fn disk_space(dir: &Path) -> Option<(u64, u64)> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    let frsize = s.fragment_size() as u64;
    Some((
        s.blocks() as u64 * frsize,
        s.blocks_available() as u64 * frsize,
    ))
}

#[cfg(not(target_os = "linux"))]
pub fn disk_space(_dir: &Path) -> Option<(u64, u64)> {
    None
}
