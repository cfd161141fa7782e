//! `litelane-bench soak`: writers, readers (some holding a snapshot for
//! seconds), bulk inserts and checkpoints at once, for a while, under each
//! WAL profile (the profiles run side by side, each on its own database
//! file). Beside each profile's in-process workload a writer *process*
//! shares the file through the cross-process queue; it is killed with
//! SIGKILL every few minutes and restarted, and every row it acknowledged
//! before the kill must be in the file. Optionally the filesystem is filled
//! to nearly full for a while.
//!
//! Every second it records, per profile: the WAL file size, commit latency
//! (p50, p99 and the longest `write` of the single-row writers in that
//! second), writes, reads, errors, kills, rows lost, resident memory and the
//! free space of the filesystem.
//!
//! ```text
//! scripts/soak                        # the hour, on a filesystem it mounts
//! cargo run --release -p litelane-bench -- soak --seconds 120 \
//!     --csv soak.csv --svg soak.svg   # 2 minutes, no disk-full phase
//! ```
//!
//! `litelane-bench soak --replot CSV --svg SVG` draws the chart again from
//! a CSV it wrote. The options are in [`args`].
//!
//! `SQLITE_FULL` while the filesystem is nearly full is counted apart (a
//! full disk may refuse a write); any other error, an acknowledged row of the
//! killed process missing, writers stuck for 30 s after the end, or a
//! checkpoint that held writers back longer than `--max-checkpoint-hold-ms`
//! make it exit 1; a bad command line or an output it cannot write, 2.
//!
//! The rooms: [`args`] (the command line), [`run`] (one profile's soak,
//! second by second) over [`workload`] (the threads), [`process`] (the
//! writer process and its kills), [`disk`] (the disk-full phase) and
//! [`measure`] (a second's sample), all counting into [`counters`]; then
//! [`csv`], [`chart`] and [`summary`] (the tables and the verdict).

mod args;
mod chart;
mod counters;
mod csv;
mod disk;
mod measure;
mod process;
mod run;
mod summary;
mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use litelane::{Options, OverLimit, Profile};

use args::Args;
use counters::Shared;
use measure::Sample;
use run::Run;

/// The soak's WAL limit, in pages (`Checkpoints::limit_pages`).
const LIMIT_PAGES: u32 = 4000;
/// Bytes per page (SQLite's default page size, which the soak keeps).
const PAGE_BYTES: u64 = 4096;
/// A write slower than this, in milliseconds, counts in the summary's
/// "seconds with a write over 50 ms" (outside the kill and disk-full
/// moments), and is marked on the chart.
const SLOW_WRITE_MS: f64 = 50.0;

/// The options of every soak database, the writer process's too: the
/// background checkpointer's thresholds and `over_limit`.
fn db_options(profile: Profile, over_limit: OverLimit) -> Options {
    let mut opts = Options::with_profile(profile);
    opts.checkpoints.passive_after_pages = 1000;
    opts.checkpoints.limit_pages = LIMIT_PAGES;
    opts.checkpoints.over_limit = over_limit;
    opts
}

/// `litelane-bench soak ARGS` (`argv` without those two words); returns the
/// exit status. An `Err` of the steps below is a bad command line or an
/// output that could not be written: status 2.
pub fn main(argv: &[String]) -> i32 {
    let outcome = match argv.first().map(String::as_str) {
        Some("--child-writer") => Err(process::child_writer_main(&argv[1..])),
        Some("--replot") => replot(&argv[1..]),
        _ => args::parse(argv).and_then(soak),
    };
    match outcome {
        Ok(status) => status,
        Err(e) => {
            eprintln!("soak: {e}");
            2
        }
    }
}

/// `--replot CSV --svg SVG`: the chart again from a CSV the soak wrote.
fn replot(argv: &[String]) -> Result<i32, String> {
    let [csv, flag, svg] = argv else {
        return Err("--replot CSV --svg SVG".into());
    };
    if flag != "--svg" {
        return Err("--replot CSV --svg SVG".into());
    }
    let (samples, profiles) = csv::read(Path::new(csv)).map_err(|e| format!("{csv}: {e}"))?;
    chart::write(Path::new(svg), &samples, &profiles).map_err(|e| format!("writing {svg}: {e}"))?;
    Ok(0)
}

/// The soak: every profile side by side (and the disk-full phase), then
/// the CSV, the chart and the summary; 1 when a check failed.
fn soak(args: Args) -> Result<i32, String> {
    let (dir, temporary) = database_dir(&args)?;
    let (runs, disk_note) = run_profiles(&args, &dir);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let all: Vec<Sample> = runs.iter().flat_map(|(_, r)| r.samples.clone()).collect();
    csv::write(&args.csv, &all).map_err(|e| format!("writing {}: {e}", args.csv.display()))?;
    if let Some(svg) = &args.svg {
        chart::write(svg, &all, &args.profiles)
            .map_err(|e| format!("writing {}: {e}", svg.display()))?;
    }
    let passed = summary::print(&runs, disk_note.as_deref(), args.max_hold_ms);
    Ok(if passed { 0 } else { 1 })
}

/// `--dir`, or a fresh directory under the system's temporary one (true:
/// removed at the end); created.
fn database_dir(args: &Args) -> Result<(PathBuf, bool), String> {
    let (dir, temporary) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("litelane-soak-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok((dir, temporary))
}

/// Runs every profile's soak on a thread of its own, with the disk-full
/// phase beside them when asked; returns the runs and what the phase did.
/// A profile that cannot start ends the process at once with status 1 (the
/// other profiles' threads would otherwise run to their end first).
fn run_profiles(args: &Args, dir: &Path) -> (Vec<(Profile, Run)>, Option<String>) {
    let shared = Arc::new(Shared::default());
    let done = AtomicBool::new(false);
    thread::scope(|scope| {
        let filler = (args.full_for > 0).then(|| {
            let at = args.full_at.unwrap_or(args.seconds / 2);
            let (shared, done) = (&shared, &done);
            let (hold, leave) = (args.full_for, args.full_leave_mib);
            scope.spawn(move || disk::fill(dir, at, hold, leave, shared, done))
        });
        let handles: Vec<_> = args
            .profiles
            .iter()
            .map(|&p| {
                let shared = &shared;
                (p, scope.spawn(move || run::profile(p, args, dir, shared)))
            })
            .collect();
        let mut runs = Vec::new();
        for (p, h) in handles {
            let why = match h.join() {
                Ok(Ok(run)) => {
                    runs.push((p, run));
                    continue;
                }
                Ok(Err(e)) => e,
                Err(_) => "the soak thread panicked".to_string(),
            };
            eprintln!("soak: {p}: {why}");
            std::process::exit(1);
        }
        done.store(true, Ordering::Relaxed);
        let note = filler.and_then(|f| f.join().ok());
        (runs, note)
    })
}
