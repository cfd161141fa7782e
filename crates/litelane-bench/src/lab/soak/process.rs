//! The writer process beside each profile's workload: the same binary run
//! as `litelane-bench soak --child-writer ...`, writing through the
//! cross-process queue, killed with SIGKILL every `--kill-every` seconds
//! and restarted; after each kill every row it acknowledged must be in the
//! file.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use litelane::{Database, OverLimit, Profile};

use super::counters::{Counters, Shared};
use super::db_options;
use crate::lab::ack::{ack_line, print_or_exit};

/// The ids of one generation of the writer process: from `generation *
/// 10^9` up.
const GENERATION_IDS: i64 = 1_000_000_000;

/// `--child-writer PATH PROFILE GENERATION grow|hold-writers`: runs the
/// writer process until it is killed; returns only on a bad command line,
/// with what is wrong.
pub fn child_writer_main(argv: &[String]) -> String {
    let usage = "--child-writer PATH PROFILE GENERATION grow|hold-writers".to_string();
    let [path, profile, generation, over_limit] = argv else {
        return usage;
    };
    let (Ok(profile), Ok(generation)) = (profile.parse(), generation.parse()) else {
        return usage;
    };
    let over_limit = match over_limit.as_str() {
        "hold-writers" => OverLimit::HoldWriters,
        _ => OverLimit::Grow,
    };
    child_writer(path, profile, generation, over_limit)
}

/// The writer process: one row per transaction into `child`, ids from
/// `generation * 10^9` up, each printed once `write` returned `Ok`; an
/// error is printed as `ERR <code> <message>`; every 100 writes, the
/// longest time a checkpoint held its writer back, as `HOLD <µs>`. Runs
/// until killed.
fn child_writer(path: &str, profile: Profile, generation: i64, over_limit: OverLimit) -> ! {
    let db = Database::open(path, db_options(profile, over_limit)).expect("open the soak database");
    let mut id = generation * GENERATION_IDS;
    loop {
        let r =
            db.write(|tx| Ok(tx.execute("INSERT INTO child VALUES (?, randomblob(200))", [id])?));
        print_or_exit(&ack_line(id, &r));
        if id % 100 == 0 {
            let us = db.metrics().checkpoint_hold_max.as_micros();
            print_or_exit(&format!("HOLD {us}\n"));
        }
        id += 1;
        thread::sleep(Duration::from_millis(1));
    }
}

/// Where and how the writer process runs.
pub struct ChildPlan {
    pub path: PathBuf,
    pub profile: Profile,
    /// Seconds from its start to its SIGKILL.
    pub kill_every: u64,
    pub over_limit: OverLimit,
}

/// Runs generations of the writer process one after the other until
/// `stop`; `Err` when one could not be run or checked.
pub fn run_generations(
    db: &Database,
    plan: &ChildPlan,
    stop: &AtomicBool,
    c: &Arc<Counters>,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let mut generation = 1;
    while !stop.load(Ordering::Relaxed) {
        run_generation(db, plan, generation, stop, c, shared)?;
        generation += 1;
    }
    Ok(())
}

/// Runs one generation of the writer process for `kill_every` seconds (or
/// until `stop`), kills it with SIGKILL and checks its acknowledged rows.
fn run_generation(
    db: &Database,
    plan: &ChildPlan,
    generation: i64,
    stop: &AtomicBool,
    c: &Arc<Counters>,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let mut child = spawn(plan, generation)?;
    let stdout = child.stdout.take().expect("piped");
    let reader = {
        let (c, shared) = (Arc::clone(c), Arc::clone(shared));
        thread::spawn(move || read_acks(stdout, &c, &shared))
    };
    let until = Instant::now() + Duration::from_secs(plan.kill_every);
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(100));
    }
    child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let _ = child.wait();
    c.kills.fetch_add(1, Ordering::Relaxed);
    // Ids printed before the kill and not read yet count too.
    let acked = reader.join().map_err(|_| "the reader panicked")?;
    check_acked(db, plan.profile, generation, &acked, c)?;
    let lo = generation * GENERATION_IDS;
    if let Err(e) = db.write(|tx| {
        Ok(tx.execute(
            "DELETE FROM child WHERE id BETWEEN ? AND ?",
            [lo, lo + GENERATION_IDS - 1],
        )?)
    }) {
        c.error(shared, "trimming the writer process's rows", &e);
    }
    Ok(())
}

/// Starts generation `generation` of the writer process, its stdout piped.
fn spawn(plan: &ChildPlan, generation: i64) -> Result<Child, String> {
    Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .args(["soak", "--child-writer"])
        .arg(&plan.path)
        .arg(plan.profile.name())
        .arg(generation.to_string())
        .arg(match plan.over_limit {
            OverLimit::HoldWriters => "hold-writers",
            _ => "grow",
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawning the writer process: {e}"))
}

/// Reads the writer process's lines until it is gone: counts its
/// acknowledgements, errors and checkpoint holds; returns the ids it
/// acknowledged.
fn read_acks(stdout: impl std::io::Read, c: &Counters, shared: &Shared) -> Vec<i64> {
    let mut acked = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("ERR ") {
            let (code, msg) = rest.split_once(' ').unwrap_or((rest, ""));
            c.error_code(shared, "writer process", code.parse().ok(), msg);
        } else if let Some(us) = line.strip_prefix("HOLD ") {
            let us = us.parse().unwrap_or(u64::MAX);
            c.child_hold_max_us.fetch_max(us, Ordering::Relaxed);
        } else if let Ok(id) = line.parse::<i64>() {
            acked.push(id);
            c.child_acks.fetch_add(1, Ordering::Relaxed);
        }
    }
    acked
}

/// Counts the rows of `acked` missing from the file as lost (and says so).
fn check_acked(
    db: &Database,
    profile: Profile,
    generation: i64,
    acked: &[i64],
    c: &Counters,
) -> Result<(), String> {
    let lo = generation * GENERATION_IDS;
    let found: HashSet<i64> = db
        .read(|conn| {
            let mut st = conn.prepare("SELECT id FROM child WHERE id BETWEEN ? AND ?")?;
            let ids = st
                .query_map([lo, lo + GENERATION_IDS - 1], |r| r.get::<_, i64>(0))?
                .collect::<Result<HashSet<_>, _>>()?;
            Ok(ids)
        })
        .map_err(|e| format!("reading the writer process's rows: {e}"))?;
    let lost = acked.iter().filter(|id| !found.contains(id)).count() as u64;
    if lost > 0 {
        eprintln!(
            "{profile}: writer process {generation}: {lost} of {} acknowledged rows missing after SIGKILL",
            acked.len()
        );
    }
    c.lost.fetch_add(lost, Ordering::Relaxed);
    Ok(())
}
