//! One profile's soak: a fresh database, the workload on it, a sample
//! every second for `--seconds`, then the stop and the checks at the end.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use litelane::{Database, OverLimit, Profile};

use super::args::Args;
use super::counters::Shared;
use super::db_options;
use super::measure::{Sample, Sampler};
use super::workload::{Stopped, Workload};

/// What one profile's soak saw.
pub struct Run {
    pub samples: Vec<Sample>,
    /// Commit latencies of the single-row writers, whole run (µs).
    pub latency: Histogram<u64>,
    /// Why the run failed at its end (stuck writers, the writer process's
    /// thread giving up, the integrity check), if it did.
    pub problem: Option<String>,
}

/// Soaks `profile` on a database of its own in `dir`; `Err` when it could
/// not start.
pub fn profile(
    profile: Profile,
    args: &Args,
    dir: &Path,
    shared: &Arc<Shared>,
) -> Result<Run, String> {
    let path = dir.join(format!("soak-{profile}.db"));
    let db = create(&path, profile, args.over_limit)?;
    let work = Workload::start(db, profile, &path, args, shared);
    let mut sampler = Sampler::new(profile, dir);
    let samples = sample_every_second(&work, &mut sampler, args.seconds, shared);
    let latency = sampler.whole;
    let Some(stopped) = work.stop() else {
        let why = format!(
            "{profile}: workers still blocked 30 s after the stop (no write for the last {} s): \
             the writer is stuck",
            samples.iter().rev().take_while(|s| s.writes == 0).count()
        );
        return Ok(Run {
            samples,
            latency,
            problem: Some(why),
        });
    };
    let (samples, problem) = finish(profile, samples, stopped);
    Ok(Run {
        samples,
        latency,
        problem,
    })
}

/// A fresh database at `path` (what an earlier run left is removed) with
/// the soak's tables.
fn create(path: &Path, profile: Profile, over_limit: OverLimit) -> Result<Database, String> {
    for suffix in litelane::DATABASE_FILE_SUFFIXES {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let db = Database::open(path, db_options(profile, over_limit)).map_err(|e| e.to_string())?;
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS ev(id INTEGER PRIMARY KEY, at INTEGER, body BLOB);
             CREATE TABLE IF NOT EXISTS child(id INTEGER PRIMARY KEY, body BLOB);",
        )?)
    })
    .map_err(|e| e.to_string())?;
    Ok(db)
}

/// A sample at each whole second from the start, for `seconds` seconds,
/// each logged on stderr.
fn sample_every_second(
    work: &Workload,
    sampler: &mut Sampler,
    seconds: u64,
    shared: &Shared,
) -> Vec<Sample> {
    let start = Instant::now();
    let mut samples = Vec::new();
    for second in 1..=seconds {
        let next = start + Duration::from_secs(second);
        thread::sleep(next.saturating_duration_since(Instant::now()));
        let m = work.db.metrics();
        let s = sampler.take(second, &m, work, shared);
        eprintln!("{}", s.log_line(&m));
        samples.push(s);
    }
    samples
}

/// After the stop: the last sample takes the final counts (the last
/// generation of the writer process was killed and checked at the stop),
/// and the file must pass `PRAGMA integrity_check`. Returns the samples and
/// the run's problem, if any.
fn finish(
    profile: Profile,
    mut samples: Vec<Sample>,
    stopped: Stopped,
) -> (Vec<Sample>, Option<String>) {
    let Stopped {
        db,
        counters,
        child_failed,
    } = stopped;
    if let Some(s) = samples.last_mut() {
        s.update_totals(&counters, &db.metrics());
    }
    let integrity: Result<String, _> =
        db.read(|conn| Ok(conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?));
    drop(db);
    let problem = match (child_failed, integrity) {
        (Some(p), _) => Some(p),
        (None, Ok(ok)) if ok == "ok" => None,
        (None, Ok(bad)) => Some(format!("{profile}: integrity_check at the end: {bad}")),
        (None, Err(e)) => Some(format!("{profile}: integrity_check at the end failed: {e}")),
    };
    (samples, problem)
}
