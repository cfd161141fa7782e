//! `litelane-bench kill-proof`: kill -9 at scale. Writers killed with
//! SIGKILL at random moments, then the file is opened again and checked.
//! Run by `scripts/durability-proof`.
//!
//! Each round ([`mod@round`]) makes a fresh database, starts writers
//! ([`writer`]) that print the id of every row whose `write` returned `Ok`,
//! waits until all of them have acknowledged a row, waits a random 0–200 ms
//! more and kills them; then it opens the file with litelane and checks
//! `PRAGMA integrity_check` and that every acknowledged row is there. A
//! SIGKILL leaves the operating system's page cache intact, so under `safe`
//! and `balanced` alike nothing acknowledged may be missing.
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
//! cargo run --release -p litelane-bench -- kill-proof --rounds 500
//! ```
//!
//! Options: `--rounds N` per profile and shape (default 500), `--profile
//! safe|balanced|all` (default all), `--shape
//! threads|processes|statements|all` (default all), `--seed S` (default
//! 1), `--dir PATH` for the databases (default: a temporary directory).
//! Prints a markdown table; exits 1 if any round lost an acknowledged row,
//! failed the integrity check, saw an error other than `SQLITE_BUSY` or
//! stalled. A write that failed with `SQLITE_BUSY` (a writer waited longer
//! than `busy_timeout` for another process's turn) was not acknowledged:
//! it is counted in its own column. `--self-test` runs `--rounds` rounds
//! of `safe` / threads whose writers print each id *before* its commit,
//! and exits 1 unless the checker reports rows missing (it must be able to
//! fail). A bad command line exits 2.

mod round;
mod writer;

use std::path::{Path, PathBuf};
use std::time::Instant;

use litelane::Profile;

use crate::lab::flags::Flags;
use round::{round, Tally};

/// Who writes, and how they are killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Threads,
    Processes,
    Statements,
}

impl Shape {
    const ALL: [Shape; 3] = [Shape::Threads, Shape::Processes, Shape::Statements];

    fn name(self) -> &'static str {
        match self {
            Shape::Threads => "threads (1 process × 4 writer threads)",
            Shape::Processes => "processes (4 single-threaded processes)",
            Shape::Statements => "statements (4 single-threaded processes, `execute`)",
        }
    }
}

/// What the command line asks for.
struct Args {
    rounds: u64,
    profiles: Vec<Profile>,
    shapes: Vec<Shape>,
    seed: u64,
    dir: Option<PathBuf>,
    self_test: bool,
}

/// `argv` (the options only), or what is wrong with it.
fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        rounds: 500,
        profiles: vec![Profile::Safe, Profile::Balanced],
        shapes: Shape::ALL.to_vec(),
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
                    "all" => Shape::ALL.to_vec(),
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

/// `litelane-bench kill-proof ARGS` (`argv` without those two words);
/// returns the exit status.
pub fn main(argv: &[String]) -> i32 {
    let parsed = match argv.first().map(String::as_str) {
        Some("--child") => Err(writer::child_main(&argv[1..])),
        _ => parse_args(argv),
    };
    let args = match parsed {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kill-proof: {e}");
            return 2;
        }
    };
    // `_tmp` is kept until the end: a temporary directory goes when dropped.
    let (dir, _tmp) = match database_dir(&args) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("kill-proof: {e}");
            return 2;
        }
    };
    let outcome = if args.self_test {
        self_test(&args, &dir)
    } else {
        proof(&args, &dir)
    };
    match outcome {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("kill-proof: {e}");
            1
        }
    }
}

/// `--dir` (created), or a temporary directory (removed when the second
/// value is dropped).
fn database_dir(args: &Args) -> Result<(PathBuf, Option<tempfile::TempDir>), String> {
    let Some(dir) = &args.dir else {
        let tmp = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
        return Ok((tmp.path().to_path_buf(), Some(tmp)));
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok((dir.clone(), None))
}

/// `--self-test`: rounds of `safe` / threads whose writers print each id
/// before its commit; passes only when the checker finds rows missing.
fn self_test(args: &Args, dir: &Path) -> Result<bool, String> {
    let mut rng = fastrand::Rng::with_seed(args.seed);
    let mut t = Tally::default();
    for _ in 0..args.rounds {
        round(dir, Profile::Safe, Shape::Threads, &mut rng, &mut t, true)
            .map_err(|e| format!("self-test: {e}"))?;
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
    }
    Ok(t.lost > 0)
}

/// The proof: `--rounds` rounds of every profile and shape, a table row
/// each; passes when no round saw a problem.
fn proof(args: &Args, dir: &Path) -> Result<bool, String> {
    println!(
        "| profile | shape | rounds | SIGKILLs | acknowledged commits | lost | corruptions | errors | stalls | writes failed with SQLITE_BUSY | outcomes unknown | wall time (s) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut passed = true;
    for &profile in &args.profiles {
        for &shape in &args.shapes {
            let started = Instant::now();
            let t = rounds(args, dir, profile, shape)?;
            println!("{}", table_row(profile, shape, &t, started));
            if let Some(why) = &t.first_problem {
                println!("\n**{why}**\n");
                passed = false;
            }
        }
    }
    Ok(passed)
}

/// `--rounds` rounds of `profile` and `shape`, progress on stderr every 50.
fn rounds(args: &Args, dir: &Path, profile: Profile, shape: Shape) -> Result<Tally, String> {
    let mut rng =
        fastrand::Rng::with_seed(args.seed ^ (profile.name().len() as u64 * 1000 + shape as u64));
    let mut t = Tally::default();
    for _ in 0..args.rounds {
        round(dir, profile, shape, &mut rng, &mut t, false)
            .map_err(|e| format!("{profile} / {shape:?}: {e}"))?;
        if t.rounds % 50 == 0 {
            eprintln!("{profile} / {shape:?}: {} rounds", t.rounds);
        }
    }
    Ok(t)
}

/// The table's row of one profile and shape.
fn table_row(profile: Profile, shape: Shape, t: &Tally, started: Instant) -> String {
    format!(
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
    )
}
