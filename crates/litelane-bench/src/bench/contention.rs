//! `bench contention`: report 001 (WeChat iOS). Eight threads doing short
//! reads and writes of a chat app (70% "last 20 messages of a chat", 30%
//! "insert a message") through:
//!
//! * `shared-handle-mutex`: one connection shared by every thread behind a
//!   mutex (WeChat's old design: every thread waits for every other);
//! * `busy-retry`: a connection per thread in WAL mode, SQLite's sleeping
//!   busy handler (5 s timeout), and a `SQLITE_BUSY` that gets through counted
//!   and retried;
//! * `litelane`: `db.read` / `db.write` (a reader pool, and a FIFO writer queue
//!   where waiters sleep until woken in order).
//!
//! Each operation's latency (waiting included) is recorded: p50/p99/max, and
//! the number of stalls over 16 ms (one frame at 60 Hz, the UI-jank budget).

use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use litelane::{Database, Options, Profile};
use rusqlite::{Connection, ErrorCode};

use super::data::SplitMix64;
use super::report::{round, Latency, Outcome, Row, Unit};
use super::{mean_group_size, median_of, release_and_join, Ctx};
use crate::error::BenchError;

const SCHEMA: &str = "CREATE TABLE message(id INTEGER PRIMARY KEY, chat INTEGER NOT NULL, \
     sender TEXT NOT NULL, body TEXT NOT NULL, ts INTEGER NOT NULL); \
     CREATE INDEX message_by_chat ON message(chat, id);";
const INSERT: &str = "INSERT INTO message(chat, sender, body, ts) VALUES (?, ?, ?, ?)";
const RECENT: &str =
    "SELECT id, sender, body, ts FROM message WHERE chat = ? ORDER BY id DESC LIMIT 20";
const CHATS: u64 = 200;
const PRELOAD: u64 = 20_000;
/// A stall: an operation slower than one 60 Hz frame.
const STALL: Duration = Duration::from_millis(16);
/// Share of operations that write.
const WRITE_SHARE: f64 = 0.3;

/// One operation of the mix.
#[derive(Debug, Clone)]
enum Op {
    Read { chat: i64 },
    Write { chat: i64, body: String, ts: i64 },
}

/// The operations of thread `t`, decided by the seed.
fn ops_for(seed: u64, t: usize, n: u64) -> Vec<Op> {
    let mut rng = SplitMix64::stream(seed, 500 + t as u64);
    (0..n)
        .map(|i| {
            let chat = rng.below(CHATS) as i64;
            if rng.chance(WRITE_SHARE) {
                Op::Write {
                    chat,
                    body: format!("message {i} from thread {t}: {:016x}", rng.next_u64()),
                    ts: 1_700_000_000 + i as i64,
                }
            } else {
                Op::Read { chat }
            }
        })
        .collect()
}

fn preload(conn: &Connection, seed: u64) -> rusqlite::Result<()> {
    let mut rng = SplitMix64::new(seed);
    let mut st = conn.prepare(INSERT)?;
    for i in 0..PRELOAD {
        st.execute((
            rng.below(CHATS) as i64,
            format!("user{}", i % 97),
            format!("old message {i}"),
            1_600_000_000 + i as i64,
        ))?;
    }
    Ok(())
}

/// Runs one op on a plain connection.
fn run_op(conn: &Connection, op: &Op, thread: usize) -> rusqlite::Result<usize> {
    match op {
        Op::Read { chat } => {
            let mut st = conn.prepare_cached(RECENT)?;
            let rows = st.query_map([chat], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })?;
            let mut n = 0;
            for r in rows {
                r?;
                n += 1;
            }
            Ok(n)
        }
        Op::Write { chat, body, ts } => {
            conn.prepare_cached(INSERT)?
                .execute((chat, format!("thread{thread}"), body, ts))
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Latencies of one thread, split by kind.
#[derive(Default)]
struct Tally {
    reads: Vec<Duration>,
    writes: Vec<Duration>,
    busy: u64,
    failed: u64,
    first_error: Option<String>,
}

impl Tally {
    fn record(&mut self, op: &Op, d: Duration) {
        match op {
            Op::Read { .. } => self.reads.push(d),
            Op::Write { .. } => self.writes.push(d),
        }
    }
}

/// Runs the scenario.
pub fn run(ctx: &Ctx) -> Result<Outcome, BenchError> {
    let threads = ctx.pick(ctx.args.threads, 8, 8).max(1);
    let ops = ctx.pick(ctx.args.ops, 20_000, 20_000).max(threads as u64);
    let per_thread = ops / threads as u64;
    let profile = ctx.profile(Profile::Safe)?;
    let mut o = Outcome::new(
        "contention",
        "report 001 (WeChat iOS: one shared handle behind a lock, busy-retry, a queue; >90% fewer stalls)",
        format!(
            "{threads} threads × {per_thread} ops (70% read last 20 messages of a chat, 30% insert a message), profile {profile}"
        ),
    );
    o.param("threads", threads);
    o.param("ops", per_thread * threads as u64);
    o.param("write_share", WRITE_SHARE);
    o.param("profile", profile.name());
    o.series[0].label = "ops/s";
    o.column("stalls >16ms", "stalls_over_16ms", 0);
    o.column("write p99 ms", "write_p99_ms", 3);
    o.column("read p99 ms", "read_p99_ms", 3);
    let seed = ctx.args.seed;
    let work: Vec<Vec<Op>> = (0..threads).map(|t| ops_for(seed, t, per_thread)).collect();

    let runs = ctx.runs(1);
    o.param("runs", runs);
    o.rows = median_of(runs, |_| {
        ctx.progress("contention: shared-handle-mutex");
        let mut out = vec![shared_handle(ctx, profile, &work, seed)?];
        ctx.progress("contention: busy-retry");
        out.push(busy_retry(ctx, profile, &work, seed)?);
        ctx.progress("contention: litelane");
        out.push(litelane_variant(ctx, profile, &work, seed)?);
        Ok(out)
    })?;
    o.notes.push(
        "latency = from asking to done, waiting for the lock/handle/writer included".to_string(),
    );
    Ok(o)
}

/// Builds the row from every thread's tally.
fn finish(name: &str, elapsed: Duration, tallies: Vec<Tally>) -> Row {
    let busy: u64 = tallies.iter().map(|t| t.busy).sum();
    let failed: u64 = tallies.iter().map(|t| t.failed).sum();
    let first_error = tallies.iter().find_map(|t| t.first_error.clone());
    let mut reads: Vec<Duration> = Vec::new();
    let mut writes: Vec<Duration> = Vec::new();
    for t in tallies {
        reads.extend(t.reads);
        writes.extend(t.writes);
    }
    let stalls = reads.iter().chain(&writes).filter(|d| **d > STALL).count();
    let mut all: Vec<Duration> = reads.iter().chain(&writes).copied().collect();
    let (nr, nw) = (reads.len(), writes.len());
    let rl = Latency::from_samples(&mut reads);
    let wl = Latency::from_samples(&mut writes);
    let mut row = Row::new(name, Unit::Ops, (nr + nw) as u64, elapsed)
        .errors(busy + failed)
        .latency(Latency::from_samples(&mut all))
        .with("reads", nr)
        .with("writes", nw)
        .with("stalls_over_16ms", stalls)
        .with("busy_errors", busy)
        .with("failed_ops", failed)
        .with("read_p99_ms", rl.map_or(0.0, |l| round(l.p99_ms, 4)))
        .with(
            "write_p50_ms",
            wl.as_ref().map_or(0.0, |l| round(l.p50_ms, 4)),
        )
        .with(
            "write_p99_ms",
            wl.as_ref().map_or(0.0, |l| round(l.p99_ms, 4)),
        )
        .with(
            "write_max_ms",
            wl.as_ref().map_or(0.0, |l| round(l.max_ms, 4)),
        );
    if let Some(e) = first_error {
        row.set("first_error", e);
    }
    row
}

/// Runs `work` on one thread per entry; `op` does one operation and returns
/// how many `SQLITE_BUSY` it met on the way.
fn drive(
    work: &[Vec<Op>],
    op: impl Fn(usize, &Op) -> Result<u64, String> + Sync,
) -> (Duration, Vec<Tally>) {
    let barrier = Barrier::new(work.len() + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = work
            .iter()
            .enumerate()
            .map(|(t, ops)| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    let mut tally = Tally::default();
                    barrier.wait();
                    for o in ops {
                        let t0 = Instant::now();
                        match op(t, o) {
                            Ok(busy) => tally.busy += busy,
                            Err(e) => {
                                tally.failed += 1;
                                tally.first_error.get_or_insert(e);
                            }
                        }
                        tally.record(o, t0.elapsed());
                    }
                    tally
                })
            })
            .collect();
        release_and_join(&barrier, handles)
    })
}

fn plain_connection(path: &std::path::Path, profile: Profile) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    c.busy_timeout(Duration::from_secs(5))?;
    c.query_row(
        &format!("PRAGMA journal_mode = {}", profile.journal_mode()),
        [],
        |_| Ok(()),
    )?;
    c.execute_batch(&format!("PRAGMA synchronous = {}", profile.synchronous()))?;
    Ok(c)
}

/// A [`plain_connection`] to a new database at `path` with the schema and
/// the preloaded rows of `seed`, committed in one transaction.
fn preloaded_connection(
    path: &std::path::Path,
    profile: Profile,
    seed: u64,
) -> rusqlite::Result<Connection> {
    let conn = plain_connection(path, profile)?;
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch("BEGIN")?;
    preload(&conn, seed)?;
    conn.execute_batch("COMMIT")?;
    Ok(conn)
}

fn shared_handle(
    ctx: &Ctx,
    profile: Profile,
    work: &[Vec<Op>],
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("contention.db");
    let shared = Mutex::new(preloaded_connection(&path, profile, seed)?);
    let (elapsed, tallies) = drive(work, |t, op| {
        let conn = shared.lock().unwrap_or_else(|e| e.into_inner());
        run_op(&conn, op, t).map(|_| 0).map_err(|e| e.to_string())
    });
    Ok(finish("shared-handle-mutex", elapsed, tallies))
}

fn busy_retry(ctx: &Ctx, profile: Profile, work: &[Vec<Op>], seed: u64) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("contention.db");
    drop(preloaded_connection(&path, profile, seed)?);
    let conns: Vec<Mutex<Connection>> = (0..work.len())
        .map(|_| plain_connection(&path, profile).map(Mutex::new))
        .collect::<rusqlite::Result<_>>()?;
    let (elapsed, tallies) = drive(work, |t, op| {
        // Each thread only ever locks its own connection: no waiting here.
        let conn = conns[t].lock().unwrap_or_else(|e| e.into_inner());
        let mut busy = 0;
        loop {
            match run_op(&conn, op, t) {
                Ok(_) => return Ok(busy),
                Err(e) if is_busy(&e) => busy += 1,
                Err(e) => return Err(e.to_string()),
            }
        }
    });
    Ok(finish("busy-retry", elapsed, tallies))
}

fn litelane_variant(
    ctx: &Ctx,
    profile: Profile,
    work: &[Vec<Op>],
    seed: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.fresh_dir()?;
    let path = dir.path().join("contention.db");
    let db = Database::open(&path, Options::with_profile(profile))?;
    db.write(|tx| {
        tx.execute_batch(SCHEMA)?;
        preload(tx, seed)?;
        Ok(())
    })?;
    let before = db.metrics();
    let (elapsed, tallies) = drive(work, |t, op| {
        let r = match op {
            Op::Read { .. } => db.read(|c| Ok(run_op(c, op, t)?)),
            Op::Write { .. } => db.write(|tx| Ok(run_op(tx, op, t)?)),
        };
        r.map(|_| 0).map_err(|e| e.to_string())
    });
    let m = db.metrics();
    Ok(finish("litelane", elapsed, tallies)
        .with("mean_group_size", mean_group_size(&before, &m))
        .with(
            "queue_wait_p99_ms",
            round(m.queue_wait_p99.as_secs_f64() * 1e3, 4),
        )
        .with(
            "queue_wait_max_ms",
            round(m.queue_wait_max.as_secs_f64() * 1e3, 4),
        ))
}
