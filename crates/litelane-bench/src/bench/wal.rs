//! `bench wal`: report 002 (WAL explained, Python): 12 writer threads × 2000
//! inserts and 40 reader threads × 1000 point reads, all at once, on
//! `test_table(id INTEGER PRIMARY KEY, value TEXT)`.
//!
//! Variants: `rollback-journal` and `wal` run the report's way — a plain
//! connection per thread (rusqlite), every insert its own transaction, a 5 s
//! busy timeout (Python's default), `synchronous=FULL` (SQLite's default;
//! set explicitly because this workspace builds SQLite with
//! `SQLITE_DEFAULT_WAL_SYNCHRONOUS=1`) — and `litelane` runs the same work
//! through one database: `db.write` per insert, `db.read` per point read.
//! Writes/s and reads/s are both counted over the whole run's wall time, as
//! in the report.
//!
//! Unlike the report, the table starts with 10,000 rows so that the point
//! reads (ids 1..=10,000) find something.

use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile};
use rusqlite::{Connection, ErrorCode, OptionalExtension};

use super::data::SplitMix64;
use super::report::{round, Latency, Outcome, Row, Series, Unit};
use super::{median_of, release_and_join, Ctx};
use crate::error::BenchError;

const SCHEMA: &str = "CREATE TABLE test_table(id INTEGER PRIMARY KEY, value TEXT)";
const INSERT: &str = "INSERT INTO test_table(value) VALUES (?)";
const SELECT: &str = "SELECT id, value FROM test_table WHERE id = ?";
/// Rows present before the run; reads pick ids in `1..=PRELOAD`.
const PRELOAD: i64 = 10_000;

/// The work of the scenario.
#[derive(Debug, Clone, Copy)]
struct Shape {
    writers: usize,
    readers: usize,
    writes: u64,
    reads: u64,
}

/// What one thread did.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: u64,
    found: u64,
    first_error: Option<String>,
}

impl Tally {
    /// A thread that could not open its connection: every one of its `ops`
    /// operations counts as an error, and the open's error is the first one.
    fn open_failed(ops: u64, e: rusqlite::Error) -> Self {
        Tally {
            errors: ops,
            first_error: Some(e.to_string()),
            ..Tally::default()
        }
    }

    /// Runs `op` again while SQLite answers busy or locked (each such answer
    /// counts as an error); any other error is counted, kept as the first
    /// error if there is none yet, and ends the tries. Then records the time
    /// since `t0` as one latency. `None` when `op` failed for good.
    fn until_not_busy<T>(
        &mut self,
        t0: Instant,
        mut op: impl FnMut() -> rusqlite::Result<T>,
    ) -> Option<T> {
        let out = loop {
            match op() {
                Ok(v) => break Some(v),
                Err(e) if is_busy(&e) => self.errors += 1,
                Err(e) => {
                    self.errors += 1;
                    self.first_error.get_or_insert(e.to_string());
                    break None;
                }
            }
        };
        self.latencies.push(t0.elapsed());
        out
    }
}

/// Runs the scenario.
pub fn run(ctx: &Ctx) -> Result<Outcome, BenchError> {
    let shape = Shape {
        writers: ctx.pick(ctx.args.writers, 12, 12).max(1),
        readers: ctx.pick(ctx.args.readers, 40, 40),
        writes: ctx.pick(ctx.args.writes, 2_000, 500),
        reads: ctx.pick(ctx.args.reads, 1_000, 1_000),
    };
    let profile = ctx.profile(Profile::Safe)?;
    let mut o = Outcome::new(
        "wal",
        "report 002 (Python: rollback journal 8,408 writes/s + 14,014 reads/s; WAL 9,768 + 16,281)",
        format!(
            "{} writers × {} inserts with {} readers × {} point reads at once; litelane under profile {profile}",
            shape.writers, shape.writes, shape.readers, shape.reads
        ),
    );
    o.param("writers", shape.writers);
    o.param("readers", shape.readers);
    o.param("writes_per_writer", shape.writes);
    o.param("reads_per_reader", shape.reads);
    o.param("profile", profile.name());
    o.series = Series::writes_and_reads();
    o.column("writes/s", "writes_per_sec", 0);
    o.column("reads/s", "reads_per_sec", 0);
    o.column("read p99 ms", "read_p99_ms", 3);
    let seed = ctx.args.seed;
    let runs = ctx.runs(1);
    o.param("runs", runs);
    o.rows = median_of(runs, |_| {
        let mut out = Vec::new();
        for (name, journal) in [("rollback-journal", "delete"), ("wal", "wal")] {
            ctx.progress(format!("wal: {name}"));
            out.push(plain(ctx, name, journal, shape, seed)?);
        }
        ctx.progress("wal: litelane");
        out.push(litelane_variant(ctx, profile, shape, seed)?);
        Ok(out)
    })?;
    o.notes.push(
        "p50/p99/max are per insert (wait included); the report's Python writers ran \
         their 2000 inserts in one implicit transaction each, here every insert commits on its own"
            .to_string(),
    );
    if shape.writes != 2000 || shape.reads != 1000 || shape.writers != 12 || shape.readers != 40 {
        o.notes.push(format!(
            "scaled from the report's 12 × 2000 writes and 40 × 1000 reads to {} × {} and {} × {}",
            shape.writers, shape.writes, shape.readers, shape.reads
        ));
    }
    Ok(o)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Inserts the `PRELOAD` rows (inside the caller's transaction).
fn preload(conn: &Connection) -> rusqlite::Result<()> {
    let mut st = conn.prepare(INSERT)?;
    for i in 0..PRELOAD {
        st.execute([format!("Value {i}")])?;
    }
    Ok(())
}

fn count_rows(path: &Path) -> u64 {
    Connection::open(path)
        .and_then(|c| {
            c.query_row("SELECT count(*) FROM test_table", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map_or(0, |n| n as u64)
}

/// Builds the row from the threads' tallies.
fn finish(
    name: &str,
    shape: Shape,
    elapsed: Duration,
    writes: Vec<Tally>,
    reads: Vec<Tally>,
    stored: u64,
) -> Row {
    let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    let total_writes = shape.writers as u64 * shape.writes;
    let total_reads = shape.readers as u64 * shape.reads;
    let werr: u64 = writes.iter().map(|t| t.errors).sum();
    let rerr: u64 = reads.iter().map(|t| t.errors).sum();
    let found: u64 = reads.iter().map(|t| t.found).sum();
    let first_error = writes
        .iter()
        .chain(&reads)
        .find_map(|t| t.first_error.clone());
    let mut wl: Vec<Duration> = writes.into_iter().flat_map(|t| t.latencies).collect();
    let mut rl: Vec<Duration> = reads.into_iter().flat_map(|t| t.latencies).collect();
    let read_lat = Latency::from_samples(&mut rl);
    let missing = (total_writes + PRELOAD as u64).saturating_sub(stored);
    let mut row = Row::new(name, Unit::Ops, total_writes + total_reads, elapsed)
        .errors(werr + rerr + missing)
        .latency(Latency::from_samples(&mut wl))
        .with("writes", total_writes)
        .with("reads", total_reads)
        .with("writes_per_sec", round(total_writes as f64 / secs, 1))
        .with("reads_per_sec", round(total_reads as f64 / secs, 1))
        .with("write_errors", werr)
        .with("read_errors", rerr)
        .with("reads_found", found)
        .with("rows_missing", missing)
        .with(
            "read_p50_ms",
            read_lat.as_ref().map_or(0.0, |l| round(l.p50_ms, 4)),
        )
        .with(
            "read_p99_ms",
            read_lat.as_ref().map_or(0.0, |l| round(l.p99_ms, 4)),
        )
        .with(
            "read_max_ms",
            read_lat.as_ref().map_or(0.0, |l| round(l.max_ms, 4)),
        );
    if let Some(e) = first_error {
        row.set("first_error", e);
    }
    row
}

/// A plain connection per thread, the report's way.
fn plain(ctx: &Ctx, name: &str, journal: &str, shape: Shape, seed: u64) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("wal.db");
    let open = |path: &Path| -> rusqlite::Result<Connection> {
        let c = Connection::open(path)?;
        c.busy_timeout(Duration::from_secs(5))?;
        c.query_row(&format!("PRAGMA journal_mode = {journal}"), [], |_| Ok(()))?;
        c.execute_batch("PRAGMA synchronous = FULL")?;
        Ok(c)
    };
    {
        let c = open(&path)?;
        c.execute_batch(SCHEMA)?;
        c.execute_batch("BEGIN")?;
        preload(&c)?;
        c.execute_batch("COMMIT")?;
    }
    let barrier = Barrier::new(shape.writers + shape.readers + 1);
    // Each thread opens its connection, then waits for the start; one that
    // could not open gives back its tally of `ops` failed operations.
    let connect = |ops: u64| -> Result<Connection, Tally> {
        let conn = open(&path);
        barrier.wait();
        conn.map_err(|e| Tally::open_failed(ops, e))
    };
    let (elapsed, writes, reads) = std::thread::scope(|s| {
        let w: Vec<_> = (0..shape.writers)
            .map(|_| {
                let connect = &connect;
                s.spawn(move || {
                    let conn = match connect(shape.writes) {
                        Ok(c) => c,
                        Err(t) => return t,
                    };
                    let mut t = Tally::default();
                    for i in 0..shape.writes {
                        let t0 = Instant::now();
                        let value = format!("Value {i}");
                        t.until_not_busy(t0, || conn.execute(INSERT, [&value]));
                    }
                    t
                })
            })
            .collect();
        let r: Vec<_> = (0..shape.readers)
            .map(|i| {
                let connect = &connect;
                s.spawn(move || {
                    let mut rng = SplitMix64::stream(seed, 1000 + i as u64);
                    let conn = match connect(shape.reads) {
                        Ok(c) => c,
                        Err(t) => return t,
                    };
                    let mut t = Tally::default();
                    for _ in 0..shape.reads {
                        let id = 1 + rng.below(PRELOAD as u64) as i64;
                        let t0 = Instant::now();
                        let v = t.until_not_busy(t0, || {
                            conn.query_row(SELECT, [id], |r| r.get::<_, String>(1))
                                .optional()
                        });
                        t.found += u64::from(matches!(v, Some(Some(_))));
                    }
                    t
                })
            })
            .collect();
        // Writers and readers share one barrier; joining all of them in one
        // list times the run until the last of either finished.
        let writers = w.len();
        let (elapsed, mut all) = release_and_join(&barrier, w.into_iter().chain(r).collect());
        let reads = all.split_off(writers);
        (elapsed, all, reads)
    });
    let stored = count_rows(&path);
    Ok(finish(name, shape, elapsed, writes, reads, stored)
        .with("journal_mode", journal)
        .with("synchronous", "full"))
}

/// The same work through one litelane database.
fn litelane_variant(
    ctx: &Ctx,
    profile: Profile,
    shape: Shape,
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("wal.db");
    let db = Database::open(&path, Options::with_profile(profile))?;
    db.write(|tx| {
        tx.execute_batch(SCHEMA)?;
        preload(tx)?;
        Ok(())
    })?;
    let barrier = Barrier::new(shape.writers + shape.readers + 1);
    let (elapsed, writes, reads) = std::thread::scope(|s| {
        let w: Vec<_> = (0..shape.writers)
            .map(|_| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    let mut t = Tally::default();
                    barrier.wait();
                    for i in 0..shape.writes {
                        let t0 = Instant::now();
                        let value = format!("Value {i}");
                        let r = db.write(|tx| {
                            tx.prepare_cached(INSERT)?.execute([&value])?;
                            Ok(())
                        });
                        if let Err(e) = r {
                            t.errors += 1;
                            t.first_error.get_or_insert(e.to_string());
                        }
                        t.latencies.push(t0.elapsed());
                    }
                    t
                })
            })
            .collect();
        let r: Vec<_> = (0..shape.readers)
            .map(|i| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    let mut t = Tally::default();
                    let mut rng = SplitMix64::stream(seed, 1000 + i as u64);
                    barrier.wait();
                    for _ in 0..shape.reads {
                        let id = 1 + rng.below(PRELOAD as u64) as i64;
                        let t0 = Instant::now();
                        let r = db.read(|c| {
                            Ok(c.prepare_cached(SELECT)?
                                .query_row([id], |r| r.get::<_, String>(1))
                                .optional()?)
                        });
                        match r {
                            Ok(v) => t.found += u64::from(v.is_some()),
                            Err(e) => {
                                t.errors += 1;
                                t.first_error.get_or_insert(e.to_string());
                            }
                        }
                        t.latencies.push(t0.elapsed());
                    }
                    t
                })
            })
            .collect();
        // Writers and readers share one barrier; joining all of them in one
        // list times the run until the last of either finished.
        let writers = w.len();
        let (elapsed, mut all) = release_and_join(&barrier, w.into_iter().chain(r).collect());
        let reads = all.split_off(writers);
        (elapsed, all, reads)
    });
    let m = db.metrics();
    drop(db);
    let stored = count_rows(&path);
    Ok(finish("litelane", shape, elapsed, writes, reads, stored)
        .with("profile", profile.name())
        .with("mean_group_size", round(m.mean_group_size(), 3))
        .with("busy_errors", m.busy_errors))
}
