//! soak.csv: one line per profile per second, every field of [`Sample`];
//! read back by `--replot`.

use std::fmt::Write as _;
use std::path::Path;

use litelane::Profile;

use super::measure::Sample;

/// The columns, in order.
const HEADER: &str =
    "profile,second,wal_bytes,p50_ms,p99_ms,max_stall_ms,writes,bulk_rows,reads,process_writes,\
     errors,full_errors,kills,lost,checkpoints,escalated,rss_kib,disk_free_mib,disk_nearly_full,\
     wal_pages,over_limit,hold_max_ms,hold_ms\n";

/// Writes `samples` to `path`.
pub fn write(path: &Path, samples: &[Sample]) -> std::io::Result<()> {
    let mut out = String::from(HEADER);
    for s in samples {
        let _ = writeln!(
            out,
            "{},{},{},{:.3},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{:.1},{},{},{},{:.3},{:.3}",
            s.profile,
            s.second,
            s.wal_bytes,
            s.p50_ms,
            s.p99_ms,
            s.max_stall_ms,
            s.writes,
            s.bulk_rows,
            s.reads,
            s.child_acks,
            s.errors,
            s.full_errors,
            s.kills,
            s.lost,
            s.checkpoints,
            s.escalated,
            s.rss_kib,
            s.disk_free_mib,
            u8::from(s.disk_nearly_full),
            s.wal_pages,
            u8::from(s.over_limit),
            s.hold_max_ms,
            s.hold_ms
        );
    }
    std::fs::write(path, out)
}

/// Reads a CSV written by [`write`] back (for `--replot`). Latencies of
/// seconds without a finished write read as NaN (older files wrote 0).
pub fn read(path: &Path) -> Result<(Vec<Sample>, Vec<Profile>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no column {name:?}"))
    };
    let idx: Vec<usize> = [
        "profile",
        "second",
        "wal_bytes",
        "p50_ms",
        "p99_ms",
        "max_stall_ms",
        "writes",
        "bulk_rows",
        "reads",
        "process_writes",
        "errors",
        "full_errors",
        "kills",
        "lost",
        "checkpoints",
        "escalated",
        "rss_kib",
        "disk_free_mib",
        "disk_nearly_full",
    ]
    .iter()
    .map(|n| col(n))
    .collect::<Result<_, _>>()?;
    // Columns added with issue 39 (older files lack them).
    let optional: Vec<Option<usize>> = ["wal_pages", "over_limit", "hold_max_ms", "hold_ms"]
        .iter()
        .map(|n| col(n).ok())
        .collect();
    let mut samples = Vec::new();
    let mut profiles = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let bad = |what: &str| format!("line {}: bad {what}", n + 2);
        let get = |i: usize| f.get(idx[i]).copied().ok_or_else(|| bad(header[idx[i]]));
        let int = |i: usize| get(i)?.parse::<u64>().map_err(|_| bad(header[idx[i]]));
        let real = |i: usize| get(i)?.parse::<f64>().map_err(|_| bad(header[idx[i]]));
        let profile: Profile = get(0)?.parse().map_err(|_| bad("profile"))?;
        if !profiles.contains(&profile) {
            profiles.push(profile);
        }
        let opt = |i: usize| -> Result<f64, String> {
            match optional[i] {
                None => Ok(f64::NAN),
                Some(j) => f
                    .get(j)
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| bad(header[j])),
            }
        };
        let writes = int(6)?;
        let latency = |v: f64| if writes == 0 { f64::NAN } else { v };
        samples.push(Sample {
            profile,
            second: int(1)?,
            wal_bytes: int(2)?,
            p50_ms: latency(real(3)?),
            p99_ms: latency(real(4)?),
            max_stall_ms: latency(real(5)?),
            writes,
            bulk_rows: int(7)?,
            reads: int(8)?,
            child_acks: int(9)?,
            errors: int(10)?,
            full_errors: int(11)?,
            kills: int(12)?,
            lost: int(13)?,
            checkpoints: int(14)?,
            escalated: int(15)?,
            rss_kib: int(16)?,
            disk_free_mib: real(17)?,
            disk_nearly_full: get(18)? == "1",
            wal_pages: opt(0).map(|v| if v.is_nan() { 0 } else { v as u64 })?,
            over_limit: opt(1)? == 1.0,
            hold_max_ms: opt(2)?,
            hold_ms: opt(3)?,
        });
    }
    Ok((samples, profiles))
}
