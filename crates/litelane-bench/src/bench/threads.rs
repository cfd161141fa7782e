//! `bench threads`: report 004 (Rust, rusqlite). Single-row inserts into
//! `users(id, created_at, username)`, each its own transaction:
//!
//! * one thread under SQLite's defaults (rollback journal, `synchronous=FULL`),
//!   under WAL, and under WAL + `synchronous=NORMAL` (the report's ~750,
//!   ~2,500 and ~25,000 inserts/s);
//! * N threads with a rusqlite connection each (`connection-per-thread`):
//!   rusqlite's default 5 s busy timeout, and a `database is locked` that
//!   still gets through is counted and the insert retried; and the same with
//!   no busy timeout at all, the report's naive loop
//!   (`connection-per-thread-no-busy-timeout`);
//! * N threads calling `db.write(|tx| one insert)` on one litelane database
//!   (`litelane`), the same without the cross-process queue
//!   (`litelane-no-process-queue`: what that queue costs a single process)
//!   and with group commit off (`litelane-no-group-commit`).
//!
//! `--profile` sets the journal and `synchronous` of the N-thread variants
//! (safe: WAL + FULL, balanced: WAL + NORMAL, fast: MEMORY + OFF).

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile, GROUP_BUCKETS};
use rusqlite::{Connection, ErrorCode};

use super::data::{Accounts, ACCOUNT_INSERT, ACCOUNT_SCHEMA};
use super::report::{group_digits, round, Latency, Outcome, Row, Unit};
use super::{mean_group_size, median_of, release_and_join, Ctx};
use crate::error::BenchError;

/// What one worker thread did.
#[derive(Default)]
struct Work {
    latencies: Vec<Duration>,
    busy: u64,
    failed: u64,
    first_error: Option<String>,
}

impl Work {
    fn merge(mut self, other: Work) -> Work {
        self.latencies.extend(other.latencies);
        self.busy += other.busy;
        self.failed += other.failed;
        self.first_error = self.first_error.or(other.first_error);
        self
    }
}

/// Runs the scenario.
pub fn run(ctx: &Ctx) -> Result<Outcome, BenchError> {
    let threads = ctx.pick(ctx.args.threads, 4, 4).max(1);
    let per_thread = ctx.pick(ctx.args.rows_per_thread, 10_000, 5_000);
    let single = ctx.pick(ctx.args.single_rows, 1_000, 1_000);
    let profile = ctx.profile(Profile::Balanced)?;
    let procs = ctx.pick(ctx.args.processes, 0, 2);
    let mut o = Outcome::new(
        "threads",
        "report 004 (Rust, rusqlite: ~750 / ~2,500 / ~25,000 inserts/s; 4 threads hit \"database is locked\")",
        format!(
            "single-row inserts, each its own transaction: 1 thread × {single}; {threads} threads × {} under profile {profile}",
            group_digits(per_thread as f64, 0)
        ),
    );
    o.param("threads", threads);
    o.param("rows_per_thread", per_thread);
    o.param("single_rows", single);
    o.param("profile", profile.name());
    o.param("processes", procs);
    o.column("stored", "rows_stored", 0);
    o.column("mean group", "mean_group_size", 2);
    o.column("cpu µs/row", "cpu_us_per_row", 1);
    o.column("switches/row", "switches_per_row", 2);
    o.column("× conn/thread", "ratio_vs_connection_per_thread", 2);
    let seed = ctx.args.seed;

    let runs = ctx.runs(1);
    o.param("runs", runs);
    o.rows = median_of(runs, |_| {
        let mut out = Vec::new();
        for (name, journal, sync) in [
            ("1-thread-defaults", None, 2),
            ("1-thread-wal", Some("wal"), 2),
            ("1-thread-wal-normal", Some("wal"), 1),
        ] {
            ctx.progress(format!("threads: {name}"));
            out.push(single_thread(ctx, name, journal, sync, single, seed)?);
        }
        ctx.progress("threads: connection-per-thread");
        out.push(per_thread_connections(
            ctx,
            "connection-per-thread",
            profile,
            threads,
            per_thread,
            None,
            seed,
        )?);
        ctx.progress("threads: connection-per-thread-no-busy-timeout");
        out.push(per_thread_connections(
            ctx,
            "connection-per-thread-no-busy-timeout",
            profile,
            threads,
            per_thread,
            Some(Duration::ZERO),
            seed,
        )?);
        if procs > 0 {
            for (name, mode) in [
                ("processes-connection-per-thread", "connection"),
                ("processes-connection-per-thread-queued", "queued"),
                ("processes-litelane", "litelane"),
                ("processes-litelane-execute", "litelane-execute"),
            ] {
                // Inside `bench all`, keep the process variants short.
                let rows = if ctx.in_all {
                    per_thread.min(1000)
                } else {
                    per_thread
                };
                ctx.progress(format!("threads: {name} ({procs} processes)"));
                out.push(processes(
                    ctx, name, mode, profile, procs, threads, rows, seed,
                )?);
            }
        }
        for (name, group, process_queue) in [
            ("litelane", true, true),
            ("litelane-no-process-queue", true, false),
            ("litelane-no-group-commit", false, true),
        ] {
            ctx.progress(format!("threads: {name}"));
            out.push(litelane_threads(
                ctx,
                name,
                profile,
                group,
                process_queue,
                threads,
                per_thread,
                seed,
            )?);
        }
        Ok(out)
    })?;
    let base = o
        .rows
        .iter()
        .find(|r| r.name == "connection-per-thread")
        .map_or(0.0, Row::rate);
    let process_base = o
        .rows
        .iter()
        .find(|r| r.name == "processes-connection-per-thread")
        .map_or(0.0, Row::rate);
    for r in &mut o.rows {
        if r.name.starts_with("processes-") {
            if process_base > 0.0 {
                r.set(
                    "ratio_vs_connection_per_thread",
                    round(r.rate() / process_base, 3),
                );
            }
            continue;
        }
        if base > 0.0 && !r.name.starts_with("1-thread") {
            r.set("ratio_vs_connection_per_thread", round(r.rate() / base, 3));
        }
    }
    if single < 10_000 {
        o.notes.push(format!(
            "the single-thread variants insert {single} rows (the report: 10,000); rows/s is what compares"
        ));
    }
    if let Some(r) = o.rows.iter().find(|r| r.name == "litelane") {
        o.notes.push(format!(
            "litelane: {} errors, {} of {} rows stored, mean group size {:.2}, {:.1}× connection-per-thread",
            r.errors,
            r.num("rows_stored").unwrap_or(0.0),
            r.count,
            r.num("mean_group_size").unwrap_or(0.0),
            r.rate() / base.max(f64::MIN_POSITIVE)
        ));
    }
    Ok(o)
}

fn count_rows(path: &Path) -> u64 {
    Connection::open(path)
        .and_then(|c| c.query_row("SELECT count(*) FROM users", [], |r| r.get::<_, i64>(0)))
        .map_or(0, |n| n as u64)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Applies a profile's journal mode and `synchronous` to a plain connection.
fn apply_profile(conn: &Connection, profile: Profile) -> rusqlite::Result<()> {
    conn.query_row(
        &format!("PRAGMA journal_mode = {}", profile.journal_mode()),
        [],
        |_| Ok(()),
    )?;
    conn.execute_batch(&format!("PRAGMA synchronous = {}", profile.synchronous()))
}

/// A plain connection to `path` under `profile` ([`apply_profile`]), with
/// `busy_timeout` when given (else rusqlite's default, 5 s).
fn open_with_profile(
    path: &Path,
    profile: Profile,
    busy_timeout: Option<Duration>,
) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    apply_profile(&c, profile)?;
    if let Some(b) = busy_timeout {
        c.busy_timeout(b)?;
    }
    Ok(c)
}

/// Creates the accounts table in a new database at `path` under `profile`.
fn create_accounts(path: &Path, profile: Profile) -> rusqlite::Result<()> {
    open_with_profile(path, profile, None)?.execute_batch(ACCOUNT_SCHEMA)
}

/// One thread, one connection, one autocommit `conn.execute` per row (the
/// report's code: the statement is compiled each time).
fn single_thread(
    ctx: &Ctx,
    name: &str,
    journal: Option<&str>,
    synchronous: i64,
    rows: u64,
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("threads.db");
    let conn = Connection::open(&path)?;
    if let Some(j) = journal {
        conn.query_row(&format!("PRAGMA journal_mode = {j}"), [], |_| Ok(()))?;
    }
    // Explicit even where it is SQLite's default: this workspace builds SQLite
    // with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1, which would quietly turn the
    // report's "WAL" (FULL) into WAL + NORMAL.
    conn.execute_batch(&format!("PRAGMA synchronous = {synchronous}"))?;
    conn.execute_batch(ACCOUNT_SCHEMA)?;
    let mut lat = Vec::with_capacity(rows as usize);
    let start = Instant::now();
    for a in Accounts::new(seed, 0).take(rows as usize) {
        let t0 = Instant::now();
        conn.execute(ACCOUNT_INSERT, (&a.id, &a.created_at, &a.username))?;
        lat.push(t0.elapsed());
    }
    let elapsed = start.elapsed();
    drop(conn);
    let stored = count_rows(&path);
    Ok(Row::new(name, Unit::Rows, rows, elapsed)
        .errors(rows.abs_diff(stored))
        .latency(Latency::from_samples(&mut lat))
        .with("threads", 1)
        .with("journal_mode", journal.unwrap_or("delete"))
        .with("synchronous", synchronous)
        .with("rows_stored", stored))
}

/// N threads with a connection each, every insert its own transaction.
/// `busy_timeout = None` keeps rusqlite's default (5 s).
fn per_thread_connections(
    ctx: &Ctx,
    name: &str,
    profile: Profile,
    threads: usize,
    per_thread: u64,
    busy_timeout: Option<Duration>,
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("threads.db");
    create_accounts(&path, profile)?;
    let barrier = Barrier::new(threads + 1);
    let (work, elapsed) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (path, barrier) = (&path, &barrier);
                s.spawn(move || {
                    let mut w = Work::default();
                    let conn = match open_with_profile(path, profile, busy_timeout) {
                        Ok(c) => c,
                        Err(e) => {
                            w.failed = per_thread;
                            w.first_error = Some(e.to_string());
                            barrier.wait();
                            return w;
                        }
                    };
                    barrier.wait();
                    for a in Accounts::new(seed, t as u64).take(per_thread as usize) {
                        insert_retrying_busy(&conn, &a, Instant::now(), &mut w);
                    }
                    w
                })
            })
            .collect();
        let (elapsed, works) = release_and_join(&barrier, handles);
        (
            works.into_iter().fold(Work::default(), Work::merge),
            elapsed,
        )
    });
    let stored = count_rows(&path);
    let mut lat = work.latencies;
    let mut row = Row::new(name, Unit::Rows, threads as u64 * per_thread, elapsed)
        .errors(work.busy + work.failed)
        .latency(Latency::from_samples(&mut lat))
        .with("threads", threads)
        .with("busy_errors", work.busy)
        .with("failed_inserts", work.failed)
        .with(
            "busy_timeout_ms",
            busy_timeout.map_or(5000, |d| d.as_millis() as u64),
        )
        .with("rows_stored", stored);
    if let Some(e) = work.first_error {
        row.set("first_error", e);
    }
    Ok(row)
}

/// N threads, one litelane database, `db.write(|tx| one insert)` each.
#[allow(clippy::too_many_arguments)]
fn litelane_threads(
    ctx: &Ctx,
    name: &str,
    profile: Profile,
    group_commit: bool,
    process_queue: bool,
    threads: usize,
    per_thread: u64,
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("threads.db");
    let mut opts = Options::with_profile(profile);
    opts.group_commit.enabled = group_commit;
    opts.process_queue = process_queue;
    let db = Database::open(&path, opts)?;
    db.write(|tx| Ok(tx.execute_batch(ACCOUNT_SCHEMA)?))?;
    let before = db.metrics();
    let barrier = Barrier::new(threads + 1);
    let (work, elapsed) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    let accounts: Vec<_> = Accounts::new(seed, t as u64)
                        .take(per_thread as usize)
                        .collect();
                    barrier.wait();
                    litelane_inserts(db, accounts, false)
                })
            })
            .collect();
        let (elapsed, works) = release_and_join(&barrier, handles);
        (
            works.into_iter().fold(Work::default(), Work::merge),
            elapsed,
        )
    });
    let after = db.metrics();
    drop(db);
    let stored = count_rows(&path);
    let total = threads as u64 * per_thread;
    let commits = after.commits - before.commits;
    let groups: Vec<u64> = (0..GROUP_BUCKETS.len())
        .map(|i| after.group_sizes[i] - before.group_sizes[i])
        .collect();
    let mut lat = work.latencies;
    let mut row = Row::new(name, Unit::Rows, total, elapsed)
        .errors(work.busy + work.failed + total.abs_diff(stored))
        .latency(Latency::from_samples(&mut lat))
        .with("threads", threads)
        .with("group_commit", group_commit)
        .with("rows_stored", stored)
        .with("mean_group_size", mean_group_size(&before, &after))
        .with("commits", commits)
        .with("group_sizes_1_2_4_8_16_32_64_more", groups)
        .with(
            "busy_errors",
            work.busy + (after.busy_errors - before.busy_errors),
        )
        .with(
            "queue_wait_p99_ms",
            round(after.queue_wait_p99.as_secs_f64() * 1e3, 3),
        );
    if let Some(e) = work.first_error {
        row.set("first_error", e);
    }
    Ok(row)
}

/// Arguments of the hidden `litelane-bench bench-worker` command: one process of
/// `bench threads --processes P`. It opens the database, prints `READY`,
/// waits for a line on stdin, runs `threads` threads × `rows` single-row
/// inserts, and prints one JSON line with what it did.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// The database file (created, with its table, by the parent).
    #[arg(long)]
    pub db: PathBuf,
    /// `connection` (a rusqlite connection per thread, 5 s busy timeout,
    /// busy errors retried), `queued` (the same, each insert inside a turn of
    /// the cross-process queue, `litelane::xproc`), `litelane` (one
    /// `Database` per process, each insert a `write` closure) or
    /// `litelane-execute` (the same, each insert `Database::execute`, which
    /// another process may commit in its transaction).
    #[arg(long, value_parser = ["connection", "queued", "litelane", "litelane-execute"])]
    pub mode: String,
    /// Writer threads in this process.
    #[arg(long)]
    pub threads: usize,
    /// Single-row inserts per thread.
    #[arg(long)]
    pub rows: u64,
    /// Durability profile: safe, balanced or fast.
    #[arg(long)]
    pub profile: String,
    /// Seed of the data generator.
    #[arg(long)]
    pub seed: u64,
    /// This process's index (keeps its rows' ids apart from the others').
    #[arg(long)]
    pub index: u64,
}

/// What one worker process reports to the parent.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct WorkerReport {
    ok: u64,
    busy: u64,
    failed: u64,
    first_error: Option<String>,
    /// Latency of each acknowledged insert, in microseconds.
    latencies_us: Vec<u64>,
    /// litelane only: `Metrics::busy_errors` at the end.
    engine_busy_errors: u64,
    mean_group_size: f64,
    /// litelane only: fsyncs of the WAL this process ran after its turns
    /// (`Metrics::wal_syncs`; 0 unless `safe` shares them across processes).
    wal_syncs: u64,
    /// litelane only: inserts of this process that another process
    /// committed (`Metrics::combined_elsewhere`).
    combined_elsewhere: u64,
}

/// Entry point of `litelane-bench bench-worker`.
pub fn worker_main(args: WorkerArgs) -> Result<(), BenchError> {
    use std::io::{BufRead, Write};
    let profile: Profile = args.profile.parse()?;
    let threads = args.threads.max(1);
    let statements = args.mode == "litelane-execute";
    let db = if args.mode.starts_with("litelane") {
        Some(Database::open(&args.db, Options::with_profile(profile))?)
    } else {
        None
    };
    let conns = if db.is_none() {
        (0..threads)
            .map(|_| open_with_profile(&args.db, profile, Some(Duration::from_secs(5))))
            .collect::<rusqlite::Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    let queue = if args.mode == "queued" {
        Some(litelane::xproc::ProcessQueue::open(&args.db).map_err(|e| {
            BenchError::Input(format!(
                "the queued variant needs the cross-process queue: {e}"
            ))
        })?)
    } else {
        None
    };
    let before = db.as_ref().map(|d| d.metrics());
    println!("READY");
    std::io::stdout().flush().ok();
    let mut go = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut go)
        .map_err(|e| BenchError::io("waiting for the start signal", e))?;
    let mut conns = conns.into_iter();
    let works: Vec<Work> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stream = args.index * threads as u64 + t as u64;
                let accounts: Vec<_> = Accounts::new(args.seed, stream)
                    .take(args.rows as usize)
                    .collect();
                let (db, conn, queue) = (db.as_ref(), conns.next(), queue.as_ref());
                s.spawn(move || match (db, conn) {
                    (Some(db), _) => litelane_inserts(db, accounts, statements),
                    (None, Some(conn)) => connection_inserts(&conn, queue, accounts),
                    (None, None) => Work::default(),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let work = works.into_iter().fold(Work::default(), Work::merge);
    let mut report = WorkerReport {
        ok: work.latencies.len() as u64,
        busy: work.busy,
        failed: work.failed,
        first_error: work.first_error,
        latencies_us: work
            .latencies
            .iter()
            .map(|d| d.as_micros() as u64)
            .collect(),
        ..WorkerReport::default()
    };
    if let (Some(db), Some(before)) = (&db, &before) {
        let after = db.metrics();
        report.engine_busy_errors = after.busy_errors - before.busy_errors;
        report.mean_group_size = mean_group_size(before, &after);
        report.wal_syncs = after.wal_syncs - before.wal_syncs;
        report.combined_elsewhere = after.combined_elsewhere - before.combined_elsewhere;
    }
    let line = serde_json::to_string(&report)
        .map_err(|e| BenchError::Input(format!("encoding the worker report: {e}")))?;
    println!("{line}");
    Ok(())
}

/// One thread's inserts through `db`: `write` closures, or with
/// `statements` `Database::execute`.
fn litelane_inserts(db: &Database, accounts: Vec<super::data::Account>, statements: bool) -> Work {
    use litelane::Value;
    let mut w = Work::default();
    for a in accounts {
        let t0 = Instant::now();
        let r = if statements {
            let params = [
                Value::Text(a.id.clone()),
                Value::Text(a.created_at.clone()),
                Value::Text(a.username.clone()),
            ];
            db.execute(ACCOUNT_INSERT, &params).map(drop)
        } else {
            db.write(|tx| {
                tx.prepare_cached(ACCOUNT_INSERT)?
                    .execute((&a.id, &a.created_at, &a.username))?;
                Ok(())
            })
        };
        match r {
            Ok(()) => w.latencies.push(t0.elapsed()),
            Err(e) => {
                if e.is_busy() {
                    w.busy += 1;
                } else {
                    w.failed += 1;
                }
                w.first_error.get_or_insert(e.to_string());
            }
        }
    }
    w
}

fn connection_inserts(
    conn: &Connection,
    queue: Option<&litelane::xproc::ProcessQueue>,
    accounts: Vec<super::data::Account>,
) -> Work {
    let mut w = Work::default();
    for a in accounts {
        let t0 = Instant::now();
        let turn = match queue
            .map(|q| q.acquire("bench", litelane::xproc::Wait::Forever))
            .transpose()
        {
            Ok(t) => t,
            Err(e) => {
                w.failed += 1;
                w.first_error.get_or_insert(e.to_string());
                continue;
            }
        };
        insert_retrying_busy(conn, &a, t0, &mut w);
        drop(turn);
    }
    w
}

/// P processes × T threads, every insert its own transaction: a
/// connection per thread with SQLite's busy timeout (`mode` `connection`),
/// or one litelane `Database` per process (`litelane`). Whatever litelane
/// does between processes is measured: today SQLite's busy timeout; with the
/// cross-process queue once the engine uses it.
#[allow(clippy::too_many_arguments)]
fn processes(
    ctx: &Ctx,
    name: &str,
    mode: &str,
    profile: Profile,
    procs: usize,
    threads: usize,
    per_thread: u64,
    seed: u64,
) -> Result<Row, BenchError> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("processes.db");
    create_accounts(&path, profile)?;
    let usage_before = children_usage();
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::io("finding the litelane-bench executable", e))?;
    let mut children = Vec::with_capacity(procs);
    for i in 0..procs {
        let mut child = Command::new(&exe)
            .arg("bench-worker")
            .arg("--db")
            .arg(&path)
            .args(["--mode", mode, "--profile", profile.name()])
            .args(["--threads", &threads.to_string()])
            .args(["--rows", &per_thread.to_string()])
            .args(["--seed", &seed.to_string(), "--index", &i.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| BenchError::io("starting a bench-worker process", e))?;
        let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        out.read_line(&mut line)
            .map_err(|e| BenchError::io("reading a bench-worker", e))?;
        if line.trim() != "READY" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::Input(format!(
                "bench-worker {i} did not start: {:?}",
                line.trim()
            )));
        }
        children.push((child, out));
    }
    let start = Instant::now();
    for (child, _) in &mut children {
        if let Some(stdin) = child.stdin.as_mut() {
            let _ = stdin.write_all(b"GO\n");
        }
    }
    let mut reports = Vec::with_capacity(procs);
    for (i, (mut child, mut out)) in children.into_iter().enumerate() {
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let status = child
            .wait()
            .map_err(|e| BenchError::io("waiting for a bench-worker", e))?;
        let report =
            serde_json::from_str::<WorkerReport>(line.trim()).unwrap_or_else(|_| WorkerReport {
                failed: threads as u64 * per_thread,
                first_error: Some(format!("bench-worker {i} ended with {status}")),
                ..WorkerReport::default()
            });
        reports.push(report);
    }
    let elapsed = start.elapsed();
    let stored = count_rows(&path);
    let total = (procs * threads) as u64 * per_thread;
    let usage = children_usage()
        .zip(usage_before)
        .map(|(after, before)| ChildrenUsage {
            cpu_us: after.cpu_us - before.cpu_us,
            switches: after.switches - before.switches,
        });
    let busy: u64 = reports.iter().map(|r| r.busy + r.engine_busy_errors).sum();
    let failed: u64 = reports.iter().map(|r| r.failed).sum();
    let mut lat: Vec<Duration> = reports
        .iter()
        .flat_map(|r| r.latencies_us.iter().map(|&us| Duration::from_micros(us)))
        .collect();
    let first_error = reports.iter().find_map(|r| r.first_error.clone());
    let mut row = Row::new(name, Unit::Rows, total, elapsed)
        .errors(busy + failed + total.abs_diff(stored))
        .latency(Latency::from_samples(&mut lat))
        .with("processes", procs)
        .with("threads", threads)
        .with("busy_errors", busy)
        .with("failed_inserts", failed)
        .with("rows_stored", stored);
    if let Some(u) = usage {
        let rows = stored.max(1) as f64;
        row.set("cpu_us_per_row", round(u.cpu_us / rows, 1));
        row.set("switches_per_row", round(u.switches / rows, 2));
    }
    if mode.starts_with("litelane") {
        let combined: u64 = reports.iter().map(|r| r.combined_elsewhere).sum();
        if mode == "litelane-execute" {
            // Inserts committed by another process than their own.
            row.set(
                "combined_share",
                round(combined as f64 / stored.max(1) as f64, 3),
            );
        }
        let groups: Vec<f64> = reports.iter().map(|r| r.mean_group_size).collect();
        row.set(
            "mean_group_size",
            round(groups.iter().sum::<f64>() / groups.len().max(1) as f64, 3),
        );
        let syncs: u64 = reports.iter().map(|r| r.wal_syncs).sum();
        if syncs > 0 {
            // Commits made durable per fsync run, over every process.
            row.set(
                "commits_per_wal_sync",
                round(stored as f64 / syncs as f64, 2),
            );
        }
    } else {
        row.set("busy_timeout_ms", 5000);
    }
    if let Some(e) = first_error {
        row.set("first_error", e);
    }
    Ok(row)
}

/// CPU time and voluntary context switches of the child processes waited
/// for so far (`getrusage(RUSAGE_CHILDREN)`).
#[derive(Clone, Copy)]
struct ChildrenUsage {
    /// User and system time, in microseconds.
    cpu_us: f64,
    switches: f64,
}

#[cfg(unix)]
fn children_usage() -> Option<ChildrenUsage> {
    use nix::sys::resource::{getrusage, UsageWho};
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .ok()
        .map(|u| ChildrenUsage {
            cpu_us: us(u.user_time()) + us(u.system_time()),
            switches: u.voluntary_context_switches() as f64,
        })
}

#[cfg(not(unix))]
fn children_usage() -> Option<ChildrenUsage> {
    None
}

/// Inserts one account on a plain connection, retrying (and counting) every
/// `SQLITE_BUSY` that gets through the busy timeout; records the latency
/// from `t0` or the first error.
fn insert_retrying_busy(
    conn: &rusqlite::Connection,
    a: &super::data::Account,
    t0: Instant,
    w: &mut Work,
) {
    loop {
        let r = conn
            .prepare_cached(ACCOUNT_INSERT)
            .and_then(|mut st| st.execute((&a.id, &a.created_at, &a.username)));
        match r {
            Ok(_) => {
                w.latencies.push(t0.elapsed());
                return;
            }
            Err(e) if is_busy(&e) => {
                w.busy += 1;
                std::thread::yield_now();
            }
            Err(e) => {
                w.failed += 1;
                w.first_error.get_or_insert(e.to_string());
                return;
            }
        }
    }
}
