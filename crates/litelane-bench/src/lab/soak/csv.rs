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

/// The columns every CSV of the soak has.
const REQUIRED: [&str; 19] = [
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
];

/// Reads a CSV written by [`write()`] back (for `--replot`): the samples and
/// the profiles in the order they first appear. Latencies of seconds
/// without a finished write read as NaN (older files wrote 0); the columns
/// added with issue 39 (`wal_pages`, `over_limit`, `hold_max_ms`,
/// `hold_ms`) may be missing.
pub fn read(path: &Path) -> Result<(Vec<Sample>, Vec<Profile>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    if let Some(missing) = REQUIRED.iter().find(|c| !header.contains(c)) {
        return Err(format!("no column {missing:?}"));
    }
    let mut samples = Vec::new();
    let mut profiles = Vec::new();
    for (n, text) in lines.enumerate() {
        let line = Line {
            number: n + 2,
            header: &header,
            fields: text.split(',').collect(),
        };
        let s = line.sample()?;
        if !profiles.contains(&s.profile) {
            profiles.push(s.profile);
        }
        samples.push(s);
    }
    Ok((samples, profiles))
}

/// One line of the CSV, its fields found by their column's name.
struct Line<'a> {
    /// Its line number in the file.
    number: usize,
    header: &'a [&'a str],
    fields: Vec<&'a str>,
}

impl Line<'_> {
    /// The line's sample.
    fn sample(&self) -> Result<Sample, String> {
        let writes = self.int("writes")?;
        let latency = |v: f64| if writes == 0 { f64::NAN } else { v };
        Ok(Sample {
            profile: self
                .text("profile")?
                .parse()
                .map_err(|_| self.bad("profile"))?,
            second: self.int("second")?,
            wal_bytes: self.int("wal_bytes")?,
            p50_ms: latency(self.real("p50_ms")?),
            p99_ms: latency(self.real("p99_ms")?),
            max_stall_ms: latency(self.real("max_stall_ms")?),
            writes,
            bulk_rows: self.int("bulk_rows")?,
            reads: self.int("reads")?,
            child_acks: self.int("process_writes")?,
            errors: self.int("errors")?,
            full_errors: self.int("full_errors")?,
            kills: self.int("kills")?,
            lost: self.int("lost")?,
            checkpoints: self.int("checkpoints")?,
            escalated: self.int("escalated")?,
            rss_kib: self.int("rss_kib")?,
            disk_free_mib: self.real("disk_free_mib")?,
            disk_nearly_full: self.text("disk_nearly_full")? == "1",
            wal_pages: self
                .newer("wal_pages")
                .map(|v| if v.is_nan() { 0 } else { v as u64 })?,
            over_limit: self.newer("over_limit")? == 1.0,
            hold_max_ms: self.newer("hold_max_ms")?,
            hold_ms: self.newer("hold_ms")?,
        })
    }

    fn bad(&self, column: &str) -> String {
        format!("line {}: bad {column}", self.number)
    }

    /// The field of `column`; `None` when the file has no such column.
    fn field(&self, column: &str) -> Result<Option<&str>, String> {
        match self.header.iter().position(|h| *h == column) {
            None => Ok(None),
            Some(i) => self
                .fields
                .get(i)
                .copied()
                .map(Some)
                .ok_or_else(|| self.bad(column)),
        }
    }

    fn text(&self, column: &str) -> Result<&str, String> {
        self.field(column)?.ok_or_else(|| self.bad(column))
    }

    fn int(&self, column: &str) -> Result<u64, String> {
        self.text(column)?.parse().map_err(|_| self.bad(column))
    }

    fn real(&self, column: &str) -> Result<f64, String> {
        self.text(column)?.parse().map_err(|_| self.bad(column))
    }

    /// A column added with issue 39: NaN in an older file without it.
    fn newer(&self, column: &str) -> Result<f64, String> {
        match self.field(column)? {
            None => Ok(f64::NAN),
            Some(v) => v.parse().map_err(|_| self.bad(column)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_older_files_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("soak.csv");
        let line =
            "safe,1,4096,0.250,2.500,7.000,10,5000,40,9,0,0,0,0,3,0,20000,900.0,0,12,1,1.500,0.250";
        let older = "balanced,1,4096,0.000,0.000,0.000,0,0,40,9,0,0,0,0,3,0,20000,900.0,1";
        std::fs::write(&path, format!("{HEADER}{line}\n")).unwrap();
        let (samples, profiles) = read(&path).unwrap();
        assert_eq!(profiles, [Profile::Safe]);
        write(&path, &samples).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{HEADER}{line}\n")
        );
        let old_header = HEADER.split(",wal_pages").next().unwrap();
        std::fs::write(&path, format!("{old_header}\n{older}\n")).unwrap();
        let (samples, profiles) = read(&path).unwrap();
        assert_eq!(profiles, [Profile::Balanced]);
        let s = &samples[0];
        assert!(s.p50_ms.is_nan() && s.hold_ms.is_nan() && s.disk_nearly_full);
        assert_eq!((s.wal_pages, s.over_limit), (0, false));
        std::fs::write(&path, "profile,second\nsafe,1\n").unwrap();
        assert_eq!(read(&path).unwrap_err(), "no column \"wal_bytes\"");
    }
}
