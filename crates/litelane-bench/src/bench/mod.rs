//! `litelane-bench SCENARIO`: each scenario reproduces one field report's
//! experiment on this machine, beside litelane, on fresh databases in a
//! temporary directory that is removed afterwards.
//!
//! | scenario | module | reproduces |
//! |---|---|---|
//! | `insert` | [`insert`] | the "one billion rows" schema: bulk insert vs a raw FFI loop |
//! | `threads` | [`threads`] | report 004: single-row inserts, 1 and N threads |
//! | `wal` | [`wal`] | report 002: 12 writers × 2000 inserts, 40 readers × 1000 reads |
//! | `contention` | [`contention`] | report 001: shared handle vs busy-retry vs a queue |
//! | `import` | [`import`] | report 003: a 128,982-row CSV, then reading it back |
//! | `ladder` | [`ladder`] | report 000: the 100k-row optimisation ladder |
//! | `all` | | every scenario, sized to finish in about two minutes |
//!
//! Output: a plain table on stdout, or with `--json` one JSON object; with
//! `--report DIR`, `DIR/report.md` and one SVG chart per scenario.

mod contention;
mod data;
mod import;
mod insert;
mod ladder;
#[allow(unsafe_code)]
mod raw;
pub(crate) mod report;
mod threads;
mod wal;

use std::path::PathBuf;
use std::time::Instant;

use litelane::Profile;
use serde_json::Value;

use crate::error::BenchError;
use report::{Machine, Outcome, Row};
pub use threads::{worker_main, WorkerArgs};

/// The scenarios `bench` knows, in the order `all` runs them.
pub const SCENARIOS: [&str; 6] = ["insert", "threads", "wal", "contention", "import", "ladder"];

/// Arguments of `litelane-bench`. Options a scenario does not use are
/// ignored by it.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The scenario: insert, threads, wal, contention, import, ladder, or all.
    #[arg(value_parser = ["insert", "threads", "wal", "contention", "import", "ladder", "all"])]
    pub scenario: String,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write DIR/report.md and one SVG chart per scenario.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Repeat each measurement N times and report the median run
    /// (default: 3 for insert, 1 for the others).
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,
    /// Seed of the data generator (same seed, same data).
    #[arg(long, default_value_t = 0x5EED_2024)]
    pub seed: u64,
    /// Directory in which the temporary databases are created (default: the
    /// system temp dir). Put it on the disk you care about: fsync cost decides
    /// most of these figures.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Durability profile: safe, balanced or fast (insert also takes all).
    #[arg(long)]
    pub profile: Option<String>,
    /// insert: rows each variant inserts per run (default 1,000,000; 4
    /// variants × 3 runs). ladder: rows (default 100,000).
    #[arg(long, value_name = "N")]
    pub rows: Option<u64>,
    /// threads: writer threads (default 4). contention: threads (default 8).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// threads: also run P processes × `--threads` threads on one file, a
    /// connection per thread with SQLite's busy timeout beside one litelane
    /// database per process (default: off; 2 in `all`).
    #[arg(long, value_name = "P")]
    pub processes: Option<usize>,
    /// threads: single-row inserts per thread (default 10,000).
    #[arg(long, value_name = "N")]
    pub rows_per_thread: Option<u64>,
    /// threads: inserts of the single-thread variants (default 1,000; each is
    /// one fsync-bound transaction).
    #[arg(long, value_name = "N")]
    pub single_rows: Option<u64>,
    /// wal: writer threads (default 12).
    #[arg(long, value_name = "N")]
    pub writers: Option<usize>,
    /// wal: reader threads (default 40).
    #[arg(long, value_name = "N")]
    pub readers: Option<usize>,
    /// wal: inserts per writer (default 2,000, as in the report).
    #[arg(long, value_name = "N")]
    pub writes: Option<u64>,
    /// wal: point reads per reader (default 1000).
    #[arg(long, value_name = "N")]
    pub reads: Option<u64>,
    /// contention: operations in total (default 20,000).
    #[arg(long, value_name = "N")]
    pub ops: Option<u64>,
    /// import: rows of the generated CSV (default 128,982).
    #[arg(long, value_name = "N")]
    pub csv_rows: Option<u64>,
    /// ladder: rows the autocommit rung really inserts before scaling
    /// (default 2,000).
    #[arg(long, value_name = "N")]
    pub sample: Option<u64>,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// What every scenario gets: the arguments, where to put databases, and
/// whether it runs as part of `all` (smaller defaults).
pub struct Ctx {
    /// The command line.
    pub args: BenchArgs,
    /// Parent directory of the per-variant temporary directories.
    pub base: PathBuf,
    /// True inside `bench all`.
    pub in_all: bool,
}

impl Ctx {
    /// A fresh, empty directory for one variant, removed when dropped.
    pub fn fresh_dir(&self) -> Result<tempfile::TempDir, BenchError> {
        tempfile::Builder::new()
            .prefix("litelane-bench-")
            .tempdir_in(&self.base)
            .map_err(|e| {
                BenchError::io(format!("creating a temp dir in {}", self.base.display()), e)
            })
    }

    /// Prints a progress line on stderr (unless `--quiet`).
    pub fn progress(&self, msg: impl AsRef<str>) {
        if !self.args.quiet {
            eprintln!("  .. {}", msg.as_ref());
        }
    }

    /// `--runs`, or `default`.
    pub fn runs(&self, default: usize) -> usize {
        self.args.runs.unwrap_or(default).max(1)
    }

    /// `option`, or `standalone` / `in_all` by mode.
    pub fn pick<T: Copy>(&self, option: Option<T>, standalone: T, in_all: T) -> T {
        option.unwrap_or(if self.in_all { in_all } else { standalone })
    }

    /// The profile given by `--profile`, or `default`.
    pub fn profile(&self, default: Profile) -> Result<Profile, BenchError> {
        match self.args.profile.as_deref() {
            None => Ok(default),
            Some(p) => p.parse().map_err(BenchError::from),
        }
    }
}

/// Lets every thread waiting on `barrier` go, then joins `handles` in order.
/// Returns the time from release to the last join and each thread's result
/// (a thread that panicked yields its `Default`, so its rows show as missing).
pub fn release_and_join<T: Default>(
    barrier: &std::sync::Barrier,
    handles: Vec<std::thread::ScopedJoinHandle<'_, T>>,
) -> (std::time::Duration, Vec<T>) {
    barrier.wait();
    let start = std::time::Instant::now();
    let results = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect();
    (start.elapsed(), results)
}

/// Mean writes per commit between two metrics snapshots of one database
/// (0 when nothing committed).
pub fn mean_group_size(before: &litelane::Metrics, after: &litelane::Metrics) -> f64 {
    let commits = after.commits - before.commits;
    let jobs = after.transactions - before.transactions;
    if commits == 0 {
        0.0
    } else {
        report::round(jobs as f64 / commits as f64, 3)
    }
}

/// Runs `once(run_index)` `runs` times; for each variant (rows are matched by
/// position and name) keeps the run with the median seconds, and records every
/// run's seconds in `seconds_runs`.
pub fn median_of(
    runs: usize,
    mut once: impl FnMut(usize) -> Result<Vec<Row>, BenchError>,
) -> Result<Vec<Row>, BenchError> {
    let mut all: Vec<Vec<Row>> = Vec::with_capacity(runs);
    for i in 0..runs {
        all.push(once(i)?);
    }
    let Some(first) = all.first() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(first.len());
    for (i, row) in first.iter().enumerate() {
        let mut same: Vec<&Row> = all
            .iter()
            .filter_map(|r| r.get(i))
            .filter(|r| r.name == row.name)
            .collect();
        let seconds: Vec<Value> = same
            .iter()
            .map(|r| report::round(r.seconds, 6).into())
            .collect();
        same.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let mut median = same[(same.len() - 1) / 2].clone();
        if runs > 1 {
            median.set("runs", same.len());
            median.set("seconds_runs", seconds);
        }
        out.push(median);
    }
    Ok(out)
}

/// Runs one scenario, timing it.
fn run_one(name: &str, ctx: &Ctx) -> Result<Outcome, BenchError> {
    if !ctx.args.quiet {
        eprintln!("litelane-bench {name}");
    }
    let start = Instant::now();
    let mut o = match name {
        "insert" => insert::run(ctx)?,
        "threads" => threads::run(ctx)?,
        "wal" => wal::run(ctx)?,
        "contention" => contention::run(ctx)?,
        "import" => import::run(ctx)?,
        "ladder" => ladder::run(ctx)?,
        other => return Err(BenchError::Input(format!("unknown scenario {other:?}"))),
    };
    o.wall_seconds = start.elapsed().as_secs_f64();
    o.param("seed", ctx.args.seed);
    Ok(o)
}

/// Entry point of `litelane-bench`.
pub fn run(args: BenchArgs) -> Result<(), BenchError> {
    let base = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| BenchError::io(format!("creating {}", d.display()), e))?;
            d.clone()
        }
        None => std::env::temp_dir(),
    };
    let machine = Machine::detect(&base);
    let scenario = args.scenario.clone();
    let in_all = scenario == "all";
    let ctx = Ctx { args, base, in_all };
    let start = Instant::now();
    let mut outcomes = Vec::new();
    let names: Vec<&str> = if in_all {
        SCENARIOS.to_vec()
    } else {
        vec![scenario.as_str()]
    };
    for name in names {
        let o = run_one(name, &ctx)?;
        if !ctx.args.json {
            println!("{}", report::text_table(&o));
        }
        outcomes.push(o);
    }
    let seconds = start.elapsed().as_secs_f64();
    if ctx.args.json {
        let v = if in_all {
            report::all_json(&outcomes, &machine, seconds)
        } else {
            report::scenario_json(&outcomes[0], &machine)
        };
        let text = serde_json::to_string_pretty(&v)
            .map_err(|e| BenchError::Input(format!("encoding the JSON: {e}")))?;
        println!("{text}");
    } else if in_all {
        println!("bench all: {seconds:.1} s");
    }
    if let Some(dir) = &ctx.args.report {
        report::write_report(dir, &outcomes, &machine, seconds)?;
        if !ctx.args.quiet {
            eprintln!("report written to {}", dir.join("report.md").display());
        }
    }
    Ok(())
}
