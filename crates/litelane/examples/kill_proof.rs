//! kill -9 at scale: writers killed with SIGKILL at random moments, then the
//! file is opened again and checked. Run by `scripts/durability-proof`.
//!
//! Each round makes a fresh database, starts writers that print the id of
//! every row whose `write` returned `Ok`, waits until all of them have
//! acknowledged a row, waits a random 0–200 ms more and kills them; then it
//! opens the file with litelane and checks `PRAGMA integrity_check` and that
//! every acknowledged row is there. A SIGKILL leaves the operating system's
//! page cache intact, so under `safe` and `balanced` alike nothing
//! acknowledged may be missing.
//!
//! Shapes:
//! - `threads`: one process with 4 writer threads (group commit);
//! - `processes`: 4 single-threaded processes on the same file through the
//!   cross-process queue (the worker-processes shape). One of them, chosen at
//!   random, is killed first; every survivor must then acknowledge 5 more
//!   rows within 10 s (a killed process must not stall the others); then
//!   the rest are killed 0–50 ms later;
//! - `statements`: the same 4 processes writing with `Database::execute`,
//!   whose statements the process holding the turn commits for the others
//!   under `safe` (combined commits): a kill can land while a process runs
//!   or commits another's statement. A write told its outcome is unknown
//!   (its committer died in the commit) was not acknowledged: counted in
//!   its own column, like `SQLITE_BUSY`.
//!
//! ```text
//! cargo run --release -p litelane --example kill_proof -- --rounds 500
//! ```
//!
//! Options: `--rounds N` per profile and shape (default 500), `--profile
//! safe|balanced|all` (default all), `--shape threads|processes|all`
//! (default all), `--seed S` (default 1), `--dir PATH` for the databases
//! (default: a temporary directory). Prints a markdown table; exits 1 if any
//! round lost an acknowledged row, failed the integrity check, saw an error
//! other than `SQLITE_BUSY` or stalled. A write that failed with
//! `SQLITE_BUSY` (a writer waited longer than `busy_timeout` for another
//! process's turn) was not acknowledged: it is counted in its own column. `--self-test` runs `--rounds` rounds of `safe` / threads
//! whose writers print each id *before* its commit, and exits 1 unless the
//! checker reports rows missing (it must be able to fail).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile};

mod common;
use common::{ack_line, or_exit, print_or_exit, Flags};

/// `SQLITE_BUSY`, as the writers print it.
const SQLITE_BUSY: &str = "5";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Threads,
    Processes,
    Statements,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Threads => "threads (1 process × 4 writer threads)",
            Shape::Processes => "processes (4 single-threaded processes)",
            Shape::Statements => "statements (4 single-threaded processes, `execute`)",
        }
    }
}

struct Args {
    rounds: u64,
    profiles: Vec<Profile>,
    shapes: Vec<Shape>,
    seed: u64,
    dir: Option<std::path::PathBuf>,
    self_test: bool,
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        rounds: 500,
        profiles: vec![Profile::Safe, Profile::Balanced],
        shapes: vec![Shape::Threads, Shape::Processes, Shape::Statements],
        seed: 1,
        dir: None,
        self_test: false,
    };
    let mut flags = Flags::new(argv);
    while let Some(flag) = flags.next_flag() {
        match flag {
            "--self-test" => a.self_test = true,
            "--rounds" => a.rounds = flags.number("rounds")?,
            "--seed" => a.seed = flags.number("seed")?,
            "--dir" => a.dir = Some(flags.value()?.into()),
            "--profile" => a.profiles = flags.wal_profiles()?,
            "--shape" => {
                a.shapes = match flags.value()? {
                    "all" => vec![Shape::Threads, Shape::Processes, Shape::Statements],
                    "threads" => vec![Shape::Threads],
                    "processes" => vec![Shape::Processes],
                    "statements" => vec![Shape::Statements],
                    v => {
                        return Err(format!(
                            "--shape: {v:?} is not threads, processes, statements or all"
                        ))
                    }
                }
            }
            _ => return Err(flags.unknown()),
        }
    }
    Ok(a)
}

/// The writer process: `threads` threads writing one row per transaction,
/// ids `base + thread * 10^8 + i`, each printed once acknowledged; an error
/// is printed as `ERR <SQLite code or -1> <message>`. Runs until killed.
/// With `how` `early`, each id is printed *before* its write (the
/// self-test: the checker must then find acknowledged rows missing); with
/// `execute`, each write is `Database::execute`, and an unknown outcome is
/// printed as `UNKNOWN <message>`.
fn child(path: &str, profile: &str, threads: i64, base: i64, how: &str) -> ! {
    let early = how == "early";
    let execute = how == "execute";
    let profile: Profile = profile.parse().expect("a profile");
    let db = Database::open(path, Options::with_profile(profile)).expect("open the database");
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                let mut id = base + t * 100_000_000;
                loop {
                    if early {
                        print_or_exit(&format!("{id}\n"));
                    }
                    let sql = "INSERT INTO acked VALUES (?1, randomblob(500))";
                    let r = if execute {
                        db.execute(sql, &[litelane::Value::Integer(id)]).map(|_| ())
                    } else {
                        db.write(|tx| Ok(tx.execute(sql, [id]).map(drop)?))
                    };
                    match &r {
                        Err(e) if e.is_outcome_unknown() => {
                            print_or_exit(&format!("UNKNOWN {e}\n"))
                        }
                        _ if early && r.is_ok() => {}
                        _ => print_or_exit(&ack_line(id, &r)),
                    }
                    id += 1;
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    std::process::exit(0);
}

/// One writer process and what it printed.
struct Writer {
    child: Child,
    acks: Arc<AtomicU64>,
    /// Acknowledged ids, errors, and writes told their outcome is unknown.
    lines: thread::JoinHandle<(Vec<i64>, Vec<String>, u64)>,
}

fn spawn_writer(
    path: &Path,
    profile: Profile,
    threads: i64,
    base: i64,
    how: &str,
) -> Result<Writer, String> {
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("--child")
        .arg(path)
        .arg(profile.name())
        .arg(threads.to_string())
        .arg(base.to_string())
        .arg(how)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawning a writer: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let acks = Arc::new(AtomicU64::new(0));
    let lines = {
        let acks = Arc::clone(&acks);
        thread::spawn(move || {
            let (mut ids, mut errors, mut unknown) = (Vec::new(), Vec::new(), 0);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("UNKNOWN ") {
                    unknown += 1;
                } else if let Some(e) = line.strip_prefix("ERR ") {
                    errors.push(e.to_string());
                } else if let Ok(id) = line.parse() {
                    ids.push(id);
                    acks.fetch_add(1, Ordering::Relaxed);
                }
            }
            (ids, errors, unknown)
        })
    };
    Ok(Writer { child, acks, lines })
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

#[derive(Default)]
struct Tally {
    rounds: u64,
    kills: u64,
    acked: u64,
    lost: u64,
    corrupt: u64,
    errors: u64,
    /// Writes that failed with `SQLITE_BUSY`: a writer waited longer than
    /// `busy_timeout` (5 s) for another process's turn. Reported to the
    /// writer as failed (not acknowledged), so no promise covers them; on a
    /// loaded machine a starved process can hold its turn that long.
    busy: u64,
    /// Writes (`statements`) told their outcome is unknown: the process
    /// committing them died in its commit. Not acknowledged.
    unknown: u64,
    stalls: u64,
    /// Problems seen.
    problems: u64,
    /// Rounds with no problem.
    rounds_clean: u64,
    first_problem: Option<String>,
}

impl Tally {
    fn problem(&mut self, why: String) {
        self.problems += 1;
        eprintln!("{why}");
        self.first_problem.get_or_insert(why);
    }
}

fn round(
    dir: &Path,
    profile: Profile,
    shape: Shape,
    rng: &mut fastrand::Rng,
    t: &mut Tally,
    early: bool,
) -> Result<(), String> {
    let path = dir.join(format!("kill-{}-{}.db", profile.name(), t.rounds));
    let problems_before = t.problems;
    {
        let db =
            Database::open(&path, Options::with_profile(profile)).map_err(|e| e.to_string())?;
        db.write(
            |tx| Ok(tx.execute_batch("CREATE TABLE acked(id INTEGER PRIMARY KEY, pad BLOB)")?),
        )
        .map_err(|e| e.to_string())?;
    }
    let (processes, threads) = match shape {
        Shape::Threads => (1, 4),
        Shape::Processes | Shape::Statements => (4, 1),
    };
    let how = match (early, shape) {
        (true, _) => "early",
        (false, Shape::Statements) => "execute",
        (false, _) => "after",
    };
    let mut writers = (0..processes)
        .map(|p| spawn_writer(&path, profile, threads, p * 1_000_000_000, how))
        .collect::<Result<Vec<_>, _>>()?;
    let all_started = wait_for(|| writers.iter().all(|w| w.acks.load(Ordering::Relaxed) > 0));
    let label = format!("{profile} / {shape:?} round {}", t.rounds);
    if !all_started {
        t.stalls += 1;
        t.problem(format!("{label}: a writer acknowledged nothing in 10 s"));
    }
    thread::sleep(Duration::from_millis(rng.u64(0..200)));
    if shape != Shape::Threads {
        let first = rng.usize(0..writers.len());
        let _ = writers[first].child.kill();
        let _ = writers[first].child.wait();
        t.kills += 1;
        let before: Vec<u64> = writers
            .iter()
            .map(|w| w.acks.load(Ordering::Relaxed))
            .collect();
        let moved = wait_for(|| {
            writers
                .iter()
                .enumerate()
                .all(|(i, w)| i == first || w.acks.load(Ordering::Relaxed) >= before[i] + 5)
        });
        if !moved {
            t.stalls += 1;
            t.problem(format!(
                "{label}: the surviving writers stalled for 10 s after writer {first} was killed"
            ));
        }
        thread::sleep(Duration::from_millis(rng.u64(0..50)));
    }
    for w in &mut writers {
        if w.child.try_wait().ok().flatten().is_none() {
            let _ = w.child.kill();
            t.kills += 1;
        }
        let _ = w.child.wait();
    }
    let mut acked = Vec::new();
    for w in writers {
        let (ids, errors, unknown) = w.lines.join().map_err(|_| "a reader thread panicked")?;
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
    let db = Database::open(&path, Options::with_profile(profile))
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
    match checked {
        Err(e) => {
            t.corrupt += 1;
            t.problem(format!("{label}: reading after the kill: {e}"));
        }
        Ok((integrity, found)) => {
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
        }
    }
    for suffix in ["", "-wal", "-shm", "-lane"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    t.rounds += 1;
    if problems_before == t.problems {
        t.rounds_clean += 1;
    }
    Ok(())
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("--child") {
        let [_, path, profile, threads, base, early] = argv.as_slice() else {
            eprintln!("kill_proof: --child PATH PROFILE THREADS BASE EARLY");
            std::process::exit(2);
        };
        child(
            path,
            profile,
            threads.parse().expect("a thread count"),
            base.parse().expect("a base id"),
            early,
        );
    }
    let args = or_exit("kill_proof", parse_args(&argv));
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().expect("a temporary directory");
            tmp.path().to_path_buf()
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("kill_proof: creating {}: {e}", dir.display());
        std::process::exit(2);
    }
    if args.self_test {
        let mut rng = fastrand::Rng::with_seed(args.seed);
        let mut t = Tally::default();
        for _ in 0..args.rounds {
            if let Err(e) = round(&dir, Profile::Safe, Shape::Threads, &mut rng, &mut t, true) {
                eprintln!("kill_proof: self-test: {e}");
                std::process::exit(1);
            }
        }
        println!(
            "self-test: with ids printed before their commit, {} of {} rounds reported {} of {} \
             \"acknowledged\" rows missing",
            t.rounds - t.rounds_clean,
            t.rounds,
            t.lost,
            t.acked
        );
        if t.lost == 0 {
            println!("**the checker found nothing missing: it cannot tell a broken promise**");
            std::process::exit(1);
        }
        return;
    }
    println!(
        "| profile | shape | rounds | SIGKILLs | acknowledged commits | lost | corruptions | errors | stalls | writes failed with SQLITE_BUSY | outcomes unknown | wall time (s) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut failed = false;
    for &profile in &args.profiles {
        for &shape in &args.shapes {
            let mut rng = fastrand::Rng::with_seed(
                args.seed ^ (profile.name().len() as u64 * 1000 + shape as u64),
            );
            let mut t = Tally::default();
            let started = Instant::now();
            for _ in 0..args.rounds {
                if let Err(e) = round(&dir, profile, shape, &mut rng, &mut t, false) {
                    eprintln!("kill_proof: {profile} / {shape:?}: {e}");
                    std::process::exit(1);
                }
                if t.rounds % 50 == 0 {
                    eprintln!("{profile} / {shape:?}: {} rounds", t.rounds);
                }
            }
            println!(
                "| {profile} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |",
                shape.name(),
                t.rounds,
                t.kills,
                t.acked,
                t.lost,
                t.corrupt,
                t.errors,
                t.stalls,
                t.busy,
                t.unknown,
                started.elapsed().as_secs_f64()
            );
            if let Some(why) = &t.first_problem {
                println!("\n**{why}**\n");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
