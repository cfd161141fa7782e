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
//!   (`litelane`), and the same with group commit off
//!   (`litelane-no-group-commit`).
//!
//! `--profile` sets the journal and `synchronous` of the N-thread variants
//! (safe: WAL + FULL, balanced: WAL + NORMAL, fast: MEMORY + OFF).

use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile, GROUP_BUCKETS};
use rusqlite::{Connection, ErrorCode};

use super::data::{Accounts, ACCOUNT_INSERT, ACCOUNT_SCHEMA};
use super::report::{group_digits, round, Latency, Outcome, Row, Unit};
use super::{mean_group_size, median_of, release_and_join, Ctx};
use crate::error::CliError;

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
pub fn run(ctx: &Ctx) -> Result<Outcome, CliError> {
    let threads = ctx.pick(ctx.args.threads, 4, 4).max(1);
    let per_thread = ctx.pick(ctx.args.rows_per_thread, 10_000, 5_000);
    let single = ctx.pick(ctx.args.single_rows, 1_000, 1_000);
    let profile = ctx.profile(Profile::Balanced)?;
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
    o.column("stored", "rows_stored", 0);
    o.column("mean group", "mean_group_size", 2);
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
        for group in [true, false] {
            let name = if group {
                "litelane"
            } else {
                "litelane-no-group-commit"
            };
            ctx.progress(format!("threads: {name}"));
            out.push(litelane_threads(
                ctx, name, profile, group, threads, per_thread, seed,
            )?);
        }
        Ok(out)
    })?;
    let base = o
        .rows
        .iter()
        .find(|r| r.name == "connection-per-thread")
        .map_or(0.0, Row::rate);
    for r in &mut o.rows {
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

/// One thread, one connection, one autocommit `conn.execute` per row (the
/// report's code: the statement is compiled each time).
fn single_thread(
    ctx: &Ctx,
    name: &str,
    journal: Option<&str>,
    synchronous: i64,
    rows: u64,
    seed: u64,
) -> Result<Row, CliError> {
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
) -> Result<Row, CliError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("threads.db");
    {
        let conn = Connection::open(&path)?;
        apply_profile(&conn, profile)?;
        conn.execute_batch(ACCOUNT_SCHEMA)?;
    }
    let barrier = Barrier::new(threads + 1);
    let (work, elapsed) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (path, barrier) = (&path, &barrier);
                s.spawn(move || {
                    let mut w = Work::default();
                    let conn = match Connection::open(path).and_then(|c| {
                        apply_profile(&c, profile)?;
                        if let Some(b) = busy_timeout {
                            c.busy_timeout(b)?;
                        }
                        Ok(c)
                    }) {
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
                        let t0 = Instant::now();
                        loop {
                            let r = conn
                                .prepare_cached(ACCOUNT_INSERT)
                                .and_then(|mut st| st.execute((&a.id, &a.created_at, &a.username)));
                            match r {
                                Ok(_) => {
                                    w.latencies.push(t0.elapsed());
                                    break;
                                }
                                Err(e) if is_busy(&e) => {
                                    w.busy += 1;
                                    std::thread::yield_now();
                                }
                                Err(e) => {
                                    w.failed += 1;
                                    w.first_error.get_or_insert(e.to_string());
                                    break;
                                }
                            }
                        }
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
fn litelane_threads(
    ctx: &Ctx,
    name: &str,
    profile: Profile,
    group_commit: bool,
    threads: usize,
    per_thread: u64,
    seed: u64,
) -> Result<Row, CliError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("threads.db");
    let mut opts = Options::with_profile(profile);
    opts.group_commit.enabled = group_commit;
    let db = Database::open(&path, opts)?;
    db.write(|tx| Ok(tx.execute_batch(ACCOUNT_SCHEMA)?))?;
    let before = db.metrics();
    let barrier = Barrier::new(threads + 1);
    let (work, elapsed) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    let mut w = Work::default();
                    let accounts: Vec<_> = Accounts::new(seed, t as u64)
                        .take(per_thread as usize)
                        .collect();
                    barrier.wait();
                    for a in accounts {
                        let t0 = Instant::now();
                        let r = db.write(|tx| {
                            tx.prepare_cached(ACCOUNT_INSERT)?.execute((
                                &a.id,
                                &a.created_at,
                                &a.username,
                            ))?;
                            Ok(())
                        });
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
