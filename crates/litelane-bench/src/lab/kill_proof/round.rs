//! One round of the kill proof: a fresh database, writers started, killed
//! with SIGKILL at a random moment, then the file opened again and checked;
//! [`Tally`] adds up the rounds of one profile and shape.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile};

use super::writer::{How, Printed, Writer};
use super::Shape;

/// `SQLITE_BUSY`, as the writers print it.
const SQLITE_BUSY: &str = "5";

/// What the rounds of one profile and shape saw.
#[derive(Default)]
pub struct Tally {
    pub rounds: u64,
    pub kills: u64,
    pub acked: u64,
    pub lost: u64,
    pub corrupt: u64,
    pub errors: u64,
    /// Writes that failed with `SQLITE_BUSY`: a writer waited longer than
    /// `busy_timeout` (5 s) for another process's turn. Reported to the
    /// writer as failed (not acknowledged), so no promise covers them; on a
    /// loaded machine a starved process can hold its turn that long.
    pub busy: u64,
    /// Writes (`statements`) told their outcome is unknown: the process
    /// committing them died in its commit. Not acknowledged.
    pub unknown: u64,
    pub stalls: u64,
    /// Problems seen.
    pub problems: u64,
    /// Rounds with no problem.
    pub rounds_clean: u64,
    pub first_problem: Option<String>,
}

impl Tally {
    fn problem(&mut self, why: String) {
        self.problems += 1;
        eprintln!("{why}");
        self.first_problem.get_or_insert(why);
    }
}

/// One round under `profile` and `shape` in `dir`, its figures added to
/// `t`; `early`: the self-test's writers. `Err` when the round could not
/// be run at all.
pub fn round(
    dir: &Path,
    profile: Profile,
    shape: Shape,
    rng: &mut fastrand::Rng,
    t: &mut Tally,
    early: bool,
) -> Result<(), String> {
    let path = dir.join(format!("kill-{}-{}.db", profile.name(), t.rounds));
    let problems_before = t.problems;
    let label = format!("{profile} / {shape:?} round {}", t.rounds);
    create(&path, profile)?;
    let mut writers = start_writers(&path, profile, shape, early)?;
    if !wait_for(|| writers.iter().all(|w| w.acked() > 0)) {
        t.stalls += 1;
        t.problem(format!("{label}: a writer acknowledged nothing in 10 s"));
    }
    thread::sleep(Duration::from_millis(rng.u64(0..200)));
    if shape != Shape::Threads {
        kill_one_then_watch_the_others(&mut writers, rng, t, &label);
    }
    for w in &mut writers {
        if w.kill() {
            t.kills += 1;
        }
    }
    let acked = collect_acks(writers, t, &label)?;
    check(&path, profile, &acked, t, &label)?;
    remove(&path);
    t.rounds += 1;
    if problems_before == t.problems {
        t.rounds_clean += 1;
    }
    Ok(())
}

/// A fresh database at `path` with the table the writers fill.
fn create(path: &Path, profile: Profile) -> Result<(), String> {
    let db = Database::open(path, Options::with_profile(profile)).map_err(|e| e.to_string())?;
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE acked(id INTEGER PRIMARY KEY, pad BLOB)")?))
        .map_err(|e| e.to_string())
}

/// The writers of `shape`: one process of 4 threads, or 4 processes of
/// one thread each.
fn start_writers(
    path: &Path,
    profile: Profile,
    shape: Shape,
    early: bool,
) -> Result<Vec<Writer>, String> {
    let (processes, threads) = match shape {
        Shape::Threads => (1, 4),
        Shape::Processes | Shape::Statements => (4, 1),
    };
    let how = match (early, shape) {
        (true, _) => How::Early,
        (false, Shape::Statements) => How::Execute,
        (false, _) => How::After,
    };
    (0..processes)
        .map(|p| Writer::spawn(path, profile, threads, p * 1_000_000_000, how))
        .collect()
}

/// Kills one writer process chosen at random; every survivor must then
/// acknowledge 5 more rows within 10 s (a killed process must not stall
/// the others); then waits 0–50 ms.
fn kill_one_then_watch_the_others(
    writers: &mut [Writer],
    rng: &mut fastrand::Rng,
    t: &mut Tally,
    label: &str,
) {
    let first = rng.usize(0..writers.len());
    writers[first].kill();
    t.kills += 1;
    let before: Vec<u64> = writers.iter().map(Writer::acked).collect();
    let moved = wait_for(|| {
        writers
            .iter()
            .enumerate()
            .all(|(i, w)| i == first || w.acked() >= before[i] + 5)
    });
    if !moved {
        t.stalls += 1;
        t.problem(format!(
            "{label}: the surviving writers stalled for 10 s after writer {first} was killed"
        ));
    }
    thread::sleep(Duration::from_millis(rng.u64(0..50)));
}

/// Every id the (killed) writers acknowledged; their errors and unknown
/// outcomes counted.
fn collect_acks(writers: Vec<Writer>, t: &mut Tally, label: &str) -> Result<Vec<i64>, String> {
    let mut acked = Vec::new();
    for w in writers {
        let Printed {
            ids,
            errors,
            unknown,
        } = w.printed()?;
        acked.extend(ids);
        t.unknown += unknown;
        for e in errors {
            let (code, msg) = e.split_once(' ').unwrap_or((&e, ""));
            if code == SQLITE_BUSY {
                // Not acknowledged, so nothing is promised about it; counted
                // and shown, not a failure (see `busy` in `Tally`).
                t.busy += 1;
                eprintln!("{label}: a writer's write failed with SQLITE_BUSY: {msg}");
            } else {
                t.errors += 1;
                t.problem(format!("{label}: a writer's error: {msg}"));
            }
        }
    }
    t.acked += acked.len() as u64;
    Ok(acked)
}

/// Opens the file again: `PRAGMA integrity_check` must say ok and every
/// acknowledged row must be there.
fn check(
    path: &Path,
    profile: Profile,
    acked: &[i64],
    t: &mut Tally,
    label: &str,
) -> Result<(), String> {
    let db = Database::open(path, Options::with_profile(profile))
        .map_err(|e| format!("{label}: reopening after the kill: {e}"))?;
    let checked = db.read(|c| {
        let integrity: Vec<String> = c
            .prepare("PRAGMA integrity_check")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let found: HashSet<i64> = c
            .prepare("SELECT id FROM acked")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok((integrity, found))
    });
    drop(db);
    let (integrity, found) = match checked {
        Ok(c) => c,
        Err(e) => {
            t.corrupt += 1;
            t.problem(format!("{label}: reading after the kill: {e}"));
            return Ok(());
        }
    };
    if integrity != ["ok"] {
        t.corrupt += 1;
        t.problem(format!(
            "{label}: integrity_check: {}",
            integrity.join("; ")
        ));
    }
    let lost = acked.iter().filter(|id| !found.contains(id)).count() as u64;
    if lost > 0 {
        t.lost += lost;
        t.problem(format!(
            "{label}: {lost} of {} acknowledged rows missing",
            acked.len()
        ));
    }
    Ok(())
}

/// Removes the database at `path` and its companion files.
fn remove(path: &Path) {
    for suffix in litelane::DATABASE_FILE_SUFFIXES {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// Waits until `ok` holds, up to 10 s.
fn wait_for(ok: impl Fn() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while !ok() {
        if Instant::now() > until {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}
