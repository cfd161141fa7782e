//! Soak: writers, readers (some holding a snapshot for seconds), bulk
//! inserts and checkpoints at once, for a while, under each WAL profile (the
//! profiles run side by side, each on its own database file). Beside each
//! profile's in-process workload a writer *process* shares the file through
//! the cross-process queue; it is killed with SIGKILL every few minutes and
//! restarted, and every row it acknowledged before the kill must be in the
//! file. Optionally the filesystem is filled to nearly full for a while.
//!
//! Every second it records, per profile: the WAL file size, commit latency
//! (p50, p99 and the longest `write` of the single-row writers in that
//! second), writes, reads, errors, kills, rows lost, resident memory and the
//! free space of the filesystem.
//!
//! ```text
//! scripts/soak                        # the hour, on a tmpfs it mounts
//! cargo run --release -p litelane --example soak -- --seconds 120 \
//!     --csv soak.csv --svg soak.svg   # 2 minutes, no disk-full phase
//! ```
//!
//! `soak --replot CSV --svg SVG` draws the plot again from a CSV it wrote.
//!
//! Options:
//! - `--seconds N`: length of the run, both profiles at once (default 120);
//! - `--profile safe|balanced|all` (default all);
//! - `--dir PATH` for the databases (default: a temporary directory);
//! - `--csv PATH` (default soak.csv), `--svg PATH` (no plot if absent);
//! - `--no-explicit-checkpoints`: only the background checkpointer (by
//!   default a thread also calls `Database::checkpoint(Passive)` every 5 s);
//! - `--kill-every S`: seconds between SIGKILLs of the writer process
//!   (default 180; 0: no writer process);
//! - `--full-for S`: seconds the filesystem of `--dir` is kept nearly full
//!   (default 0: never), starting at `--full-at S` (default: half-way),
//!   leaving `--full-leave MIB` free (default 128). It refuses filesystems
//!   larger than 8 GiB, so it cannot fill a shared disk: `scripts/soak`
//!   mounts a 1 GiB tmpfs for it;
//! - `--max-checkpoint-hold-ms N`: the longest any write may wait on a
//!   checkpoint, in milliseconds (default 50): the longest a checkpoint of
//!   the soak process or of a writer process held their writers back
//!   (`Metrics::checkpoint_hold_max`, which the writer process prints);
//! - `--hold-writers`: bound the WAL by holding writers back
//!   (`OverLimit::HoldWriters`, litelane's behaviour before issue 39)
//!   instead of the default `OverLimit::Grow`, to compare.
//!
//! `SQLITE_FULL` while the filesystem is nearly full is counted apart (a
//! full disk may refuse a write); any other error, an acknowledged row of the
//! killed process missing, writers stuck for 30 s after the end, or a
//! checkpoint that held writers back longer than `--max-checkpoint-hold-ms`
//! make it exit non-zero.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use litelane::{CheckpointMode, Database, Options, OverLimit, OverLimitReason, Profile, Value};

mod common;
use common::{ack_line, or_exit, print_or_exit, Flags};

/// `SQLITE_FULL`: the disk (or the file's size limit) is full.
const SQLITE_FULL: i32 = 13;
/// The largest filesystem `--full-for` agrees to fill.
const MAX_FILL_FS_BYTES: u64 = 8 << 30;
/// The soak's WAL limit, in pages (`Checkpoints::limit_pages`).
const LIMIT_PAGES: u32 = 4000;
/// Bytes per page (SQLite's default page size, which the soak keeps).
const PAGE_BYTES: u64 = 4096;
/// A write slower than this, in milliseconds, counts in the summary's
/// "seconds with a write over 50 ms" (outside the kill and disk-full
/// moments).
const SLOW_WRITE_MS: f64 = 50.0;

struct Args {
    seconds: u64,
    profiles: Vec<Profile>,
    dir: Option<PathBuf>,
    csv: PathBuf,
    svg: Option<PathBuf>,
    explicit_checkpoints: bool,
    kill_every: u64,
    full_at: Option<u64>,
    full_for: u64,
    full_leave_mib: u64,
    max_hold_ms: u64,
    over_limit: OverLimit,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        seconds: 120,
        profiles: vec![Profile::Safe, Profile::Balanced],
        dir: None,
        csv: PathBuf::from("soak.csv"),
        svg: None,
        explicit_checkpoints: true,
        kill_every: 180,
        full_at: None,
        full_for: 0,
        full_leave_mib: 128,
        max_hold_ms: 50,
        // The library's default (`Grow`), unless `--hold-writers`.
        over_limit: litelane::Checkpoints::default().over_limit,
    };
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.next_flag() {
        match flag {
            "--seconds" => a.seconds = flags.number("seconds")?,
            "--kill-every" => a.kill_every = flags.number("seconds")?,
            "--full-at" => a.full_at = Some(flags.number("seconds")?),
            "--full-for" => a.full_for = flags.number("seconds")?,
            "--full-leave" => a.full_leave_mib = flags.number("MiB")?,
            "--profile" => a.profiles = flags.wal_profiles()?,
            "--dir" => a.dir = Some(PathBuf::from(flags.value()?)),
            "--csv" => a.csv = PathBuf::from(flags.value()?),
            "--svg" => a.svg = Some(PathBuf::from(flags.value()?)),
            "--no-explicit-checkpoints" => a.explicit_checkpoints = false,
            "--max-checkpoint-hold-ms" => a.max_hold_ms = flags.number("milliseconds")?,
            "--hold-writers" => a.over_limit = OverLimit::HoldWriters,
            _ => return Err(flags.unknown()),
        }
    }
    Ok(a)
}

/// One second of one profile's soak.
#[derive(Debug, Clone)]
struct Sample {
    profile: Profile,
    second: u64,
    wal_bytes: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_stall_ms: f64,
    writes: u64,
    bulk_rows: u64,
    reads: u64,
    child_acks: u64,
    /// Cumulative from here on.
    errors: u64,
    full_errors: u64,
    kills: u64,
    lost: u64,
    checkpoints: u64,
    escalated: u64,
    /// WAL pages in use after the last commit.
    wal_pages: u64,
    /// The WAL was over its limit at the end of this second.
    over_limit: bool,
    /// Longest time a checkpoint held writers back so far (this process's
    /// and the writer process's), ms; cumulative.
    hold_max_ms: f64,
    /// Time checkpoints of this process held writers back in this second, ms.
    hold_ms: f64,
    rss_kib: u64,
    disk_free_mib: f64,
    /// The filesystem was being held nearly full during this second.
    disk_nearly_full: bool,
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}

/// (total, available to us) bytes of the filesystem holding `dir`.
#[cfg(target_os = "linux")]
fn disk_space(dir: &Path) -> Option<(u64, u64)> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    let frsize = s.fragment_size() as u64;
    Some((
        s.blocks() as u64 * frsize,
        s.blocks_available() as u64 * frsize,
    ))
}

#[cfg(not(target_os = "linux"))]
fn disk_space(_dir: &Path) -> Option<(u64, u64)> {
    None
}

/// State shared by the whole run.
struct Shared {
    /// The filesystem is being held nearly full (and for 2 s after).
    disk_nearly_full: AtomicBool,
}

#[derive(Default)]
struct Counters {
    writes: AtomicU64,
    bulk_rows: AtomicU64,
    reads: AtomicU64,
    errors: AtomicU64,
    full_errors: AtomicU64,
    max_stall_us: AtomicU64,
    next_id: AtomicU64,
    child_acks: AtomicU64,
    kills: AtomicU64,
    lost: AtomicU64,
    /// The longest checkpoint hold a writer process printed, in µs.
    child_hold_max_us: AtomicU64,
}

/// Counts an error: `SQLITE_FULL` while the disk is held nearly full apart.
fn note_err(c: &Counters, shared: &Shared, what: &str, e: &litelane::Error) {
    note_err_code(c, shared, what, e.sqlite_code(), &e.to_string());
}

fn note_err_code(c: &Counters, shared: &Shared, what: &str, code: Option<i32>, msg: &str) {
    if code == Some(SQLITE_FULL) && shared.disk_nearly_full.load(Ordering::Relaxed) {
        c.full_errors.fetch_add(1, Ordering::Relaxed);
    } else {
        c.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("error in {what}: {msg}");
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

fn db_options(profile: Profile, over_limit: OverLimit) -> Options {
    let mut opts = Options::with_profile(profile);
    opts.checkpoints.passive_after_pages = 1000;
    opts.checkpoints.limit_pages = LIMIT_PAGES;
    opts.checkpoints.over_limit = over_limit;
    opts
}

/// The writer process: one row per transaction into `child`, ids from
/// `generation * 10^9` up, each printed once `write` returned `Ok`; an
/// error is printed as `ERR <code> <message>`; every 100 writes, the
/// longest time a checkpoint held its writer back, as `HOLD <µs>`. Runs
/// until killed.
fn child_writer(path: &str, profile: &str, generation: i64, hold_writers: bool) -> ! {
    let profile: Profile = profile.parse().expect("a profile");
    let over_limit = match hold_writers {
        true => OverLimit::HoldWriters,
        false => OverLimit::Grow,
    };
    let db = Database::open(path, db_options(profile, over_limit)).expect("open the soak database");
    let mut id = generation * 1_000_000_000;
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
struct ChildPlan {
    path: PathBuf,
    profile: Profile,
    /// Seconds from its start to its SIGKILL.
    kill_every: u64,
    over_limit: OverLimit,
}

/// Runs one generation of the writer process for `kill_every` seconds (or
/// until `stop`), kills it with SIGKILL and checks its acknowledged rows.
fn child_generation(
    db: &Database,
    plan: &ChildPlan,
    generation: i64,
    stop: &AtomicBool,
    c: &Arc<Counters>,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let (path, profile, kill_every) = (&plan.path, plan.profile, plan.kill_every);
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("--child-writer")
        .arg(path)
        .arg(profile.name())
        .arg(generation.to_string())
        .arg(match plan.over_limit {
            OverLimit::HoldWriters => "hold-writers",
            _ => "grow",
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawning the writer process: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let reader = {
        let (c, shared) = (Arc::clone(c), Arc::clone(shared));
        thread::spawn(move || {
            let mut acked = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("ERR ") {
                    let (code, msg) = rest.split_once(' ').unwrap_or((rest, ""));
                    note_err_code(&c, &shared, "writer process", code.parse().ok(), msg);
                } else if let Some(us) = line.strip_prefix("HOLD ") {
                    let us = us.parse().unwrap_or(u64::MAX);
                    c.child_hold_max_us.fetch_max(us, Ordering::Relaxed);
                } else if let Ok(id) = line.parse::<i64>() {
                    acked.push(id);
                    c.child_acks.fetch_add(1, Ordering::Relaxed);
                }
            }
            acked
        })
    };
    let until = Instant::now() + Duration::from_secs(kill_every);
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(100));
    }
    child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let _ = child.wait();
    c.kills.fetch_add(1, Ordering::Relaxed);
    // Ids printed before the kill and not read yet count too.
    let acked = reader.join().map_err(|_| "the reader panicked")?;
    let lo = generation * 1_000_000_000;
    let hi = lo + 999_999_999;
    let found: HashSet<i64> = db
        .read(|conn| {
            let mut st = conn.prepare("SELECT id FROM child WHERE id BETWEEN ? AND ?")?;
            let ids = st
                .query_map([lo, hi], |r| r.get::<_, i64>(0))?
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
    if let Err(e) =
        db.write(|tx| Ok(tx.execute("DELETE FROM child WHERE id BETWEEN ? AND ?", [lo, hi])?))
    {
        note_err(c, shared, "trimming the writer process's rows", &e);
    }
    Ok(())
}

struct Run {
    samples: Vec<Sample>,
    latency: Histogram<u64>,
    problem: Option<String>,
}

fn soak(profile: Profile, args: &Args, dir: &Path, shared: &Arc<Shared>) -> Result<Run, String> {
    let path = dir.join(format!("soak-{profile}.db"));
    for suffix in ["", "-wal", "-shm", "-lane"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let db =
        Database::open(&path, db_options(profile, args.over_limit)).map_err(|e| e.to_string())?;
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS ev(id INTEGER PRIMARY KEY, at INTEGER, body BLOB);
             CREATE TABLE IF NOT EXISTS child(id INTEGER PRIMARY KEY, body BLOB);",
        )?)
    })
    .map_err(|e| e.to_string())?;
    let c = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let stop_ckpt = Arc::new(AtomicBool::new(false));
    let latency = Arc::new(Mutex::new(new_histogram()));
    let mut workers = Vec::new();
    // What a worker thread takes along: the database, the counters, the
    // stop flag it obeys and the shared state.
    let handles = |stop: &Arc<AtomicBool>| {
        (
            db.clone(),
            Arc::clone(&c),
            Arc::clone(stop),
            Arc::clone(shared),
        )
    };

    // Writers: one small row per transaction, with a pause.
    for _ in 0..4 {
        let (db, c, stop, latency, shared) = (
            db.clone(),
            Arc::clone(&c),
            Arc::clone(&stop),
            Arc::clone(&latency),
            Arc::clone(shared),
        );
        workers.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let id = c.next_id.fetch_add(1, Ordering::Relaxed) as i64;
                let t = Instant::now();
                let r = db.write(|tx| {
                    Ok(tx.execute(
                        "INSERT INTO ev VALUES (?, unixepoch(), randomblob(200))",
                        [id],
                    )?)
                });
                let us = t.elapsed().as_micros() as u64;
                c.max_stall_us.fetch_max(us, Ordering::Relaxed);
                match r {
                    Ok(_) => {
                        latency.lock().unwrap().saturating_record(us.max(1));
                        c.writes.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => note_err(&c, &shared, "write", &e),
                }
                thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    // Bulk: 5,000 rows every 2 s, committing every 1,000; then trims old
    // rows so the file stays a fixed size.
    {
        let (db, c, stop, shared) = handles(&stop);
        workers.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let first = c.next_id.fetch_add(5000, Ordering::Relaxed) as i64;
                let rows = (first..first + 5000).map(|i| {
                    vec![
                        Value::Integer(i),
                        Value::Integer(0),
                        Value::Blob(vec![3; 100]),
                    ]
                });
                match db
                    .inserter("ev", &["id", "at", "body"])
                    .map(|i| i.commit_every(1000))
                    .and_then(|i| i.insert(rows))
                {
                    Ok(r) => {
                        c.bulk_rows.fetch_add(r.rows, Ordering::Relaxed);
                    }
                    Err(e) => note_err(&c, &shared, "bulk insert", &e),
                }
                let keep_from = c.next_id.load(Ordering::Relaxed) as i64 - 100_000;
                if let Err(e) =
                    db.write(|tx| Ok(tx.execute("DELETE FROM ev WHERE id < ?", [keep_from])?))
                {
                    note_err(&c, &shared, "trim", &e);
                }
                for _ in 0..20 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }));
    }
    // Readers: short queries, and one that holds its snapshot for 3 s.
    for long in [false, false, true] {
        let (db, c, stop, shared) = handles(&stop);
        workers.push(thread::spawn(move || {
            let label = if long { "soak: 3-s read" } else { "" };
            while !stop.load(Ordering::Relaxed) {
                let r = db.read_labeled(label, |conn| {
                    let n: i64 = conn.query_row(
                        "SELECT count(*) FROM ev WHERE id > (SELECT max(id) FROM ev) - 1000",
                        [],
                        |r| r.get(0),
                    )?;
                    if long {
                        thread::sleep(Duration::from_secs(3));
                    }
                    Ok(n)
                });
                match r {
                    Ok(_) => {
                        c.reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => note_err(&c, &shared, "read", &e),
                }
                thread::sleep(Duration::from_millis(if long { 1000 } else { 5 }));
            }
        }));
    }
    // The writer process, killed every `kill_every` seconds and restarted.
    let child_failed: Arc<Mutex<Option<String>>> = Arc::default();
    if args.kill_every > 0 {
        let (db, c, stop, shared, failed) = (
            db.clone(),
            Arc::clone(&c),
            Arc::clone(&stop),
            Arc::clone(shared),
            Arc::clone(&child_failed),
        );
        let plan = ChildPlan {
            path: path.clone(),
            profile,
            kill_every: args.kill_every,
            over_limit: args.over_limit,
        };
        workers.push(thread::spawn(move || {
            let mut generation = 1;
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = child_generation(&db, &plan, generation, &stop, &c, &shared) {
                    eprintln!("{profile}: {e}");
                    *failed.lock().unwrap() = Some(e);
                    return;
                }
                generation += 1;
            }
        }));
    }
    // An explicit checkpoint every 5 s besides the background ones.
    let ckpt = {
        let (db, c, stop, shared) = handles(&stop_ckpt);
        let explicit = args.explicit_checkpoints;
        thread::spawn(move || {
            while explicit && !stop.load(Ordering::Relaxed) {
                for _ in 0..50 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
                if let Err(e) = db.checkpoint(CheckpointMode::Passive) {
                    note_err(&c, &shared, "checkpoint", &e);
                }
            }
        })
    };

    let mut samples = Vec::new();
    let mut whole = new_histogram();
    let start = Instant::now();
    let mut last = (0u64, 0u64, 0u64, 0u64);
    let mut last_hold = Duration::ZERO;
    for second in 1..=args.seconds {
        let next = start + Duration::from_secs(second);
        thread::sleep(next.saturating_duration_since(Instant::now()));
        let m = db.metrics();
        let h = std::mem::replace(&mut *latency.lock().unwrap(), new_histogram());
        let _ = whole.add(&h);
        let writes = c.writes.load(Ordering::Relaxed);
        let bulk = c.bulk_rows.load(Ordering::Relaxed);
        let reads = c.reads.load(Ordering::Relaxed);
        let child_acks = c.child_acks.load(Ordering::Relaxed);
        // A second in which no write finished has no latency (NaN: a gap in
        // the plot); its stall shows in the second the write finishes.
        let ms = |q: f64| {
            if h.is_empty() {
                f64::NAN
            } else {
                h.value_at_quantile(q) as f64 / 1000.0
            }
        };
        let child_hold_ms = c.child_hold_max_us.load(Ordering::Relaxed) as f64 / 1000.0;
        let s = Sample {
            profile,
            second,
            wal_bytes: m.wal_file_bytes,
            wal_pages: m.wal_pages,
            over_limit: m.wal_over_limit.is_some(),
            hold_max_ms: (m.checkpoint_hold_max.as_secs_f64() * 1000.0).max(child_hold_ms),
            hold_ms: m
                .checkpoint_hold_time
                .saturating_sub(last_hold)
                .as_secs_f64()
                * 1000.0,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            max_stall_ms: match c.max_stall_us.swap(0, Ordering::Relaxed) {
                0 => f64::NAN,
                us => us as f64 / 1000.0,
            },
            writes: writes - last.0,
            bulk_rows: bulk - last.1,
            reads: reads - last.2,
            child_acks: child_acks - last.3,
            errors: c.errors.load(Ordering::Relaxed),
            full_errors: c.full_errors.load(Ordering::Relaxed),
            kills: c.kills.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            checkpoints: m.checkpoints,
            escalated: m.checkpoints_escalated,
            rss_kib: rss_kib(),
            disk_free_mib: disk_space(dir).map_or(f64::NAN, |(_, free)| free as f64 / 1048576.0),
            disk_nearly_full: shared.disk_nearly_full.load(Ordering::Relaxed),
        };
        last = (writes, bulk, reads, child_acks);
        last_hold = m.checkpoint_hold_time;
        // Over its limit: for how long, and who pins it.
        let over = match &m.wal_over_limit {
            None => String::new(),
            Some(o) => format!(
                "  OVER LIMIT {:.1} s: {}",
                o.duration.as_secs_f64(),
                match &o.reason {
                    OverLimitReason::PinnedByRead(r) =>
                        format!("pinned by {:?} ({:.1} s old)", r.label, r.age.as_secs_f64()),
                    OverLimitReason::PinnedElsewhere => "pinned by another process".into(),
                    OverLimitReason::CatchingUp => "catching up".into(),
                    OverLimitReason::CheckpointFailed(e) => format!("checkpoint failed: {e}"),
                    other => format!("{other:?}"),
                }
            ),
        };
        eprintln!(
            "{profile:>8} {second:>5}s wal {:>9} B {:>6} pages  p50 {:>6.2} p99 {:>7.2} max {:>8.2} ms  \
             writes {:>5}/s  process {:>4}/s  kills {} lost {}  errors {} (+{} full)  \
             held {:.1} ms (longest {:.1})  rss {} KiB  free {:.0} MiB{over}",
            s.wal_bytes,
            s.wal_pages,
            s.p50_ms,
            s.p99_ms,
            s.max_stall_ms,
            s.writes,
            s.child_acks,
            s.kills,
            s.lost,
            s.errors,
            s.full_errors,
            s.hold_ms,
            s.hold_max_ms,
            s.rss_kib,
            s.disk_free_mib
        );
        samples.push(s);
    }
    stop_ckpt.store(true, Ordering::Relaxed);
    let _ = ckpt.join();
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    while workers.iter().any(|w| !w.is_finished()) {
        if Instant::now() > deadline {
            let why = format!(
                "{profile}: workers still blocked 30 s after the stop (no write for the last {} s): \
                 the writer is stuck",
                samples.iter().rev().take_while(|s| s.writes == 0).count()
            );
            // The stuck threads keep their clones of the database.
            return Ok(Run {
                samples,
                latency: whole,
                problem: Some(why),
            });
        }
        thread::sleep(Duration::from_millis(50));
    }
    for w in workers {
        let _ = w.join();
    }
    // The last generation of the writer process was killed and checked at
    // the stop: its figures count too.
    if let Some(s) = samples.last_mut() {
        s.kills = c.kills.load(Ordering::Relaxed);
        s.lost = c.lost.load(Ordering::Relaxed);
        s.errors = c.errors.load(Ordering::Relaxed);
        s.full_errors = c.full_errors.load(Ordering::Relaxed);
        let child_hold_ms = c.child_hold_max_us.load(Ordering::Relaxed) as f64 / 1000.0;
        let hold_ms = db.metrics().checkpoint_hold_max.as_secs_f64() * 1000.0;
        s.hold_max_ms = hold_ms.max(child_hold_ms);
    }
    let problem = child_failed.lock().unwrap().take();
    let integrity: Result<String, _> =
        db.read(|conn| Ok(conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?));
    drop(db);
    let problem = match (problem, integrity) {
        (Some(p), _) => Some(p),
        (None, Ok(ok)) if ok == "ok" => None,
        (None, Ok(bad)) => Some(format!("{profile}: integrity_check at the end: {bad}")),
        (None, Err(e)) => Some(format!("{profile}: integrity_check at the end failed: {e}")),
    };
    Ok(Run {
        samples,
        latency: whole,
        problem,
    })
}

/// Holds the filesystem of `dir` nearly full from `at` for `hold` seconds:
/// a filler file takes all but `leave_mib` MiB of the free space. Returns
/// what it did, for the summary.
fn fill_disk(
    dir: &Path,
    at: u64,
    hold: u64,
    leave_mib: u64,
    shared: &Shared,
    stop: &AtomicBool,
) -> String {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(at) {
        if stop.load(Ordering::Relaxed) {
            return "disk-full phase: not reached".into();
        }
        thread::sleep(Duration::from_millis(100));
    }
    let Some((total, free)) = disk_space(dir) else {
        return "disk-full phase: skipped (no statvfs on this system)".into();
    };
    if total > MAX_FILL_FS_BYTES {
        return format!(
            "disk-full phase: skipped: {} is on a {:.1} GiB filesystem and the soak fills only one \
             of at most {} GiB (scripts/soak mounts a 1 GiB tmpfs for it)",
            dir.display(),
            total as f64 / (1u64 << 30) as f64,
            MAX_FILL_FS_BYTES >> 30
        );
    }
    let leave = leave_mib << 20;
    let filler = dir.join("soak-filler");
    shared.disk_nearly_full.store(true, Ordering::Relaxed);
    let mut written = 0u64;
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&filler)?;
        let chunk = vec![0x5au8; 1 << 20];
        let target = free.saturating_sub(leave);
        while written < target {
            f.write_all(&chunk)?;
            written += chunk.len() as u64;
        }
        f.sync_all()
    })();
    let free_during = disk_space(dir).map_or(0, |(_, f)| f);
    let filled = Instant::now();
    while filled.elapsed() < Duration::from_secs(hold) && !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(&filler);
    thread::sleep(Duration::from_secs(2));
    shared.disk_nearly_full.store(false, Ordering::Relaxed);
    format!(
        "disk-full phase: from {at} s for {hold} s a filler of {} MiB left {} MiB free of {} MiB{}",
        written >> 20,
        free_during >> 20,
        total >> 20,
        match result {
            Ok(()) => String::new(),
            Err(e) => format!(" (the filler stopped early: {e})"),
        }
    )
}

fn write_csv(path: &Path, samples: &[Sample]) -> std::io::Result<()> {
    let mut out = String::from(
        "profile,second,wal_bytes,p50_ms,p99_ms,max_stall_ms,writes,bulk_rows,reads,process_writes,\
         errors,full_errors,kills,lost,checkpoints,escalated,rss_kib,disk_free_mib,disk_nearly_full,\
         wal_pages,over_limit,hold_max_ms,hold_ms\n",
    );
    for s in samples {
        let _ = writeln!(
            out,
            "{},{},{},{:.3},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{:.1},{},{},{},{:.3},{:.3}",
            s.profile,
            s.second,
            s.wal_bytes,
            s.p50_ms,
            s.p99_ms,
            s.max_stall_ms,
            s.writes,
            s.bulk_rows,
            s.reads,
            s.child_acks,
            s.errors,
            s.full_errors,
            s.kills,
            s.lost,
            s.checkpoints,
            s.escalated,
            s.rss_kib,
            s.disk_free_mib,
            u8::from(s.disk_nearly_full),
            s.wal_pages,
            u8::from(s.over_limit),
            s.hold_max_ms,
            s.hold_ms
        );
    }
    std::fs::write(path, out)
}

/// How the seconds of one plotted point are summarised.
#[derive(Clone, Copy)]
enum Agg {
    Max,
    Min,
    Median,
}

impl Agg {
    fn name(self) -> &'static str {
        match self {
            Agg::Max => "highest",
            Agg::Min => "lowest",
            Agg::Median => "median",
        }
    }

    /// `None` for no values.
    fn of(self, v: &mut [f64]) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(match self {
            Agg::Max => v[v.len() - 1],
            Agg::Min => v[0],
            Agg::Median => v[v.len() / 2],
        })
    }
}

/// Reads a CSV written by [`write_csv`] back (for `--replot`). Latencies of
/// seconds without a finished write read as NaN (older files wrote 0).
fn read_csv(path: &Path) -> Result<(Vec<Sample>, Vec<Profile>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no column {name:?}"))
    };
    let idx: Vec<usize> = [
        "profile",
        "second",
        "wal_bytes",
        "p50_ms",
        "p99_ms",
        "max_stall_ms",
        "writes",
        "bulk_rows",
        "reads",
        "process_writes",
        "errors",
        "full_errors",
        "kills",
        "lost",
        "checkpoints",
        "escalated",
        "rss_kib",
        "disk_free_mib",
        "disk_nearly_full",
    ]
    .iter()
    .map(|n| col(n))
    .collect::<Result<_, _>>()?;
    // Columns added with issue 39 (older files lack them).
    let optional: Vec<Option<usize>> = ["wal_pages", "over_limit", "hold_max_ms", "hold_ms"]
        .iter()
        .map(|n| col(n).ok())
        .collect();
    let mut samples = Vec::new();
    let mut profiles = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let bad = |what: &str| format!("line {}: bad {what}", n + 2);
        let get = |i: usize| f.get(idx[i]).copied().ok_or_else(|| bad(header[idx[i]]));
        let int = |i: usize| get(i)?.parse::<u64>().map_err(|_| bad(header[idx[i]]));
        let real = |i: usize| get(i)?.parse::<f64>().map_err(|_| bad(header[idx[i]]));
        let profile: Profile = get(0)?.parse().map_err(|_| bad("profile"))?;
        if !profiles.contains(&profile) {
            profiles.push(profile);
        }
        let opt = |i: usize| -> Result<f64, String> {
            match optional[i] {
                None => Ok(f64::NAN),
                Some(j) => f
                    .get(j)
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| bad(header[j])),
            }
        };
        let writes = int(6)?;
        let latency = |v: f64| if writes == 0 { f64::NAN } else { v };
        samples.push(Sample {
            profile,
            second: int(1)?,
            wal_bytes: int(2)?,
            p50_ms: latency(real(3)?),
            p99_ms: latency(real(4)?),
            max_stall_ms: latency(real(5)?),
            writes,
            bulk_rows: int(7)?,
            reads: int(8)?,
            child_acks: int(9)?,
            errors: int(10)?,
            full_errors: int(11)?,
            kills: int(12)?,
            lost: int(13)?,
            checkpoints: int(14)?,
            escalated: int(15)?,
            rss_kib: int(16)?,
            disk_free_mib: real(17)?,
            disk_nearly_full: get(18)? == "1",
            wal_pages: opt(0).map(|v| if v.is_nan() { 0 } else { v as u64 })?,
            over_limit: opt(1)? == 1.0,
            hold_max_ms: opt(2)?,
            hold_ms: opt(3)?,
        });
    }
    Ok((samples, profiles))
}

/// One panel per series against time, one line per profile; grey lines mark
/// the kills of the writer process, an orange band the disk-full phase.
fn write_svg(path: &Path, samples: &[Sample], profiles: &[Profile]) -> std::io::Result<()> {
    type Series = fn(&Sample) -> f64;
    // The WAL's bounds, in MiB: the file is kept allocated up to
    // `journal_size_limit` (64 MiB by default); the pages in use are over
    // the limit past `limit_pages`.
    const FILE_BOUND_MIB: f64 = 64.0;
    let limit_mib = f64::from(LIMIT_PAGES) * PAGE_BYTES as f64 / 1048576.0;
    // (title, series, logarithmic y axis, how a long run's seconds are
    // summarised per point, a bound drawn as a dashed line)
    let panels: [(&str, Series, bool, Agg, Option<f64>); 8] = [
        (
            "WAL file size (MiB); dashed: journal_size_limit",
            |s| s.wal_bytes as f64 / 1048576.0,
            false,
            Agg::Max,
            Some(FILE_BOUND_MIB),
        ),
        (
            "WAL in use (MiB, pages x 4 KiB); dashed: limit_pages",
            // Older CSVs have no WAL pages (and no hold): no line.
            |s| {
                if s.hold_max_ms.is_nan() {
                    f64::NAN
                } else {
                    s.wal_pages as f64 * PAGE_BYTES as f64 / 1048576.0
                }
            },
            false,
            Agg::Max,
            Some(limit_mib),
        ),
        (
            "commit latency p50 per second (ms, log scale)",
            |s| s.p50_ms,
            true,
            Agg::Median,
            None,
        ),
        (
            "commit latency p99 per second (ms, log scale)",
            |s| s.p99_ms,
            true,
            Agg::Median,
            None,
        ),
        (
            "longest write in each second (ms, log scale); dashed: 50 ms",
            |s| s.max_stall_ms,
            true,
            Agg::Max,
            Some(SLOW_WRITE_MS),
        ),
        (
            "writers held by checkpoints in each second (ms, total)",
            |s| s.hold_ms,
            false,
            Agg::Max,
            None,
        ),
        (
            "resident memory of the soak process (MiB)",
            |s| s.rss_kib as f64 / 1024.0,
            false,
            Agg::Max,
            None,
        ),
        (
            "free space on the database's filesystem (MiB)",
            |s| {
                if s.disk_free_mib.is_nan() {
                    0.0
                } else {
                    s.disk_free_mib
                }
            },
            false,
            Agg::Min,
            None,
        ),
    ];
    // The log panels start at 10 µs.
    const LOG_FLOOR_MS: f64 = 0.01;
    let (w, h, pad) = (900.0, 200.0, 50.0);
    let colors = ["#d62728", "#1f77b4"];
    let max_t = samples.iter().map(|s| s.second).max().unwrap_or(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        panels.len() as f64 * h + 30.0
    );
    let x = |t: f64| pad + (w - 2.0 * pad) * t / max_t;
    // Kill times and the disk-full band, from the first profile.
    let first: Vec<&Sample> = samples
        .iter()
        .filter(|s| Some(&s.profile) == profiles.first())
        .collect();
    let kills: Vec<f64> = first
        .windows(2)
        .filter(|p| p[1].kills > p[0].kills)
        .map(|p| p[1].second as f64)
        .collect();
    let full: Vec<f64> = first
        .iter()
        .filter(|s| s.disk_nearly_full)
        .map(|s| s.second as f64)
        .collect();
    // Long runs: one point per `bucket` seconds (about 300 per line).
    let bucket = ((max_t / 300.0).ceil() as u64).max(1);
    for (i, (title, f, log, agg, bound)) in panels.iter().enumerate() {
        let top = i as f64 * h + 10.0;
        let title = if bucket > 1 {
            format!("{title}; {} of each {bucket} s", agg.name())
        } else {
            title.to_string()
        };
        let max_v = samples
            .iter()
            .map(f)
            .filter(|v| v.is_finite())
            .fold(bound.unwrap_or(0.0), f64::max)
            .max(1e-9)
            * 1.1;
        let log = *log && max_v > LOG_FLOOR_MS * 10.0;
        let frac = |v: f64| {
            if log {
                (v.max(LOG_FLOOR_MS) / LOG_FLOOR_MS).log10() / (max_v / LOG_FLOOR_MS).log10()
            } else {
                v / max_v
            }
        };
        let y = |v: f64| top + h - pad + -(h - 1.5 * pad) * frac(v);
        if log {
            let mut decade = LOG_FLOOR_MS * 10.0;
            while decade < max_v / 3.0 {
                let _ = writeln!(
                    svg,
                    "<line x1=\"{pad}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#e4e4e4\"/>\n\
                     <text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\" fill=\"#777777\">{decade}</text>",
                    y(decade),
                    w - pad,
                    pad - 4.0,
                    y(decade) + 4.0
                );
                decade *= 10.0;
            }
        }
        if let (Some(a), Some(b)) = (full.first(), full.last()) {
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#ffd8a8\"/>",
                x(a - 1.0),
                y(max_v),
                (x(*b) - x(a - 1.0)).max(1.0),
                y(0.0) - y(max_v)
            );
        }
        if let Some(b) = bound {
            let _ = writeln!(
                svg,
                "<line x1=\"{pad}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#2ca02c\" stroke-dasharray=\"6,3\"/>",
                y(*b),
                w - pad
            );
        }
        for k in &kills {
            let _ = writeln!(
                svg,
                "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"#bbbbbb\" stroke-dasharray=\"3,3\"/>",
                x(*k),
                y(0.0),
                y(max_v)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{pad}\" y=\"{}\">{title}; max {:.2}</text>\n\
             <line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
             <line x1=\"{pad}\" y1=\"{}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max_t} s</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1}</text>",
            top + 12.0,
            max_v / 1.1,
            y(0.0),
            w - pad,
            y(0.0),
            y(0.0),
            y(max_v),
            w - pad,
            y(0.0) + 15.0,
            pad - 4.0,
            y(0.0) + 4.0,
            if log { "0.01" } else { "0" },
            pad - 4.0,
            y(max_v) + 4.0,
            max_v
        );
        for (k, p) in profiles.iter().enumerate() {
            let mine: Vec<&Sample> = samples.iter().filter(|s| s.profile == *p).collect();
            let pts: Vec<String> = mine
                .chunks(bucket as usize)
                .filter_map(|chunk| {
                    let mut v: Vec<f64> = chunk
                        .iter()
                        .map(|s| f(s))
                        .filter(|v| v.is_finite())
                        .collect();
                    let t = chunk.last()?.second as f64;
                    agg.of(&mut v).map(|v| format!("{:.1},{:.1}", x(t), y(v)))
                })
                .collect();
            let color = colors[k % colors.len()];
            let _ = writeln!(
                svg,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1\" points=\"{}\"/>\n\
                 <text x=\"{}\" y=\"{}\" fill=\"{color}\">{p}</text>",
                pts.join(" "),
                w - pad - 110.0 + 60.0 * k as f64,
                top + 12.0
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{pad}\" y=\"{}\" fill=\"#777777\">dashed grey: the writer process killed (SIGKILL); orange: the disk-full phase (filling, held nearly full, 2 s after)</text>",
        panels.len() as f64 * h + 20.0
    );
    svg.push_str("</svg>\n");
    std::fs::write(path, svg)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("--child-writer") {
        let [_, path, profile, generation, over_limit] = argv.as_slice() else {
            eprintln!("soak: --child-writer PATH PROFILE GENERATION grow|hold-writers");
            std::process::exit(2);
        };
        child_writer(
            path,
            profile,
            generation.parse().expect("a generation number"),
            over_limit == "hold-writers",
        );
    }
    if argv.first().map(String::as_str) == Some("--replot") {
        let [_, csv, flag, svg] = argv.as_slice() else {
            eprintln!("soak: --replot CSV --svg SVG");
            std::process::exit(2);
        };
        if flag != "--svg" {
            eprintln!("soak: --replot CSV --svg SVG");
            std::process::exit(2);
        }
        match read_csv(Path::new(csv)) {
            Ok((samples, profiles)) => {
                if let Err(e) = write_svg(Path::new(svg), &samples, &profiles) {
                    eprintln!("soak: writing {svg}: {e}");
                    std::process::exit(2);
                }
                return;
            }
            Err(e) => {
                eprintln!("soak: {csv}: {e}");
                std::process::exit(2);
            }
        }
    }
    let args = or_exit("soak", parse_args(&argv));
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("litelane-soak-{}", std::process::id()));
            tmp.clone()
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("soak: creating {}: {e}", dir.display());
        std::process::exit(2);
    }
    let shared = Arc::new(Shared {
        disk_nearly_full: AtomicBool::new(false),
    });
    let done = AtomicBool::new(false);
    let mut runs = Vec::new();
    let mut disk_note = None;
    thread::scope(|scope| {
        let filler = (args.full_for > 0).then(|| {
            let at = args.full_at.unwrap_or(args.seconds / 2);
            let (dir, shared, done) = (&dir, &shared, &done);
            let (hold, leave) = (args.full_for, args.full_leave_mib);
            scope.spawn(move || fill_disk(dir, at, hold, leave, shared, done))
        });
        let handles: Vec<_> = args
            .profiles
            .iter()
            .map(|&p| {
                let (args, dir, shared) = (&args, &dir, &shared);
                (p, scope.spawn(move || soak(p, args, dir, shared)))
            })
            .collect();
        for (p, h) in handles {
            match h.join() {
                Ok(Ok(run)) => runs.push((p, run)),
                Ok(Err(e)) => {
                    eprintln!("soak: {p}: {e}");
                    std::process::exit(1);
                }
                Err(_) => {
                    eprintln!("soak: {p}: the soak thread panicked");
                    std::process::exit(1);
                }
            }
        }
        done.store(true, Ordering::Relaxed);
        if let Some(f) = filler {
            disk_note = f.join().ok();
        }
    });
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let all: Vec<Sample> = runs.iter().flat_map(|(_, r)| r.samples.clone()).collect();
    if let Err(e) = write_csv(&args.csv, &all) {
        eprintln!("soak: writing {}: {e}", args.csv.display());
        std::process::exit(2);
    }
    if let Some(svg) = &args.svg {
        if let Err(e) = write_svg(svg, &all, &args.profiles) {
            eprintln!("soak: writing {}: {e}", svg.display());
            std::process::exit(2);
        }
    }
    let mut failed = false;
    let mut held_too_long = Vec::new();
    println!(
        "| profile | seconds | WAL max (MiB) | commit p50 / p99 / max (ms) | writes | bulk rows | reads \
         | process kills | process rows acknowledged | lost | errors | SQLITE_FULL while nearly full | RSS at 10% → max → last (MiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut checkpoint_rows = Vec::new();
    for (p, run) in &runs {
        let s = &run.samples;
        let Some(lastv) = s.last() else {
            continue;
        };
        let wal = s.iter().map(|s| s.wal_bytes).max().unwrap_or(0) as f64 / 1048576.0;
        let stall = s.iter().map(|s| s.max_stall_ms).fold(0.0, f64::max);
        let writes: u64 = s.iter().map(|s| s.writes).sum();
        let bulk: u64 = s.iter().map(|s| s.bulk_rows).sum();
        let reads: u64 = s.iter().map(|s| s.reads).sum();
        let acks: u64 = s.iter().map(|s| s.child_acks).sum();
        let mib = |k: u64| k as f64 / 1024.0;
        let rss_early = s[s.len() / 10].rss_kib;
        let rss_max = s.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let q = |x: f64| run.latency.value_at_quantile(x) as f64 / 1000.0;
        println!(
            "| {p} | {} | {wal:.1} | {:.2} / {:.2} / {stall:.0} | {writes} | {bulk} | {reads} | {} | {acks} | {} | {} | {} | {:.1} → {:.1} → {:.1} |",
            s.len(),
            q(0.5),
            q(0.99),
            lastv.kills,
            lastv.lost,
            lastv.errors,
            lastv.full_errors,
            mib(rss_early),
            mib(rss_max),
            mib(lastv.rss_kib)
        );
        failed |= lastv.errors > 0 || lastv.lost > 0;
        let hold = lastv.hold_max_ms;
        if hold > args.max_hold_ms as f64 {
            held_too_long.push(format!(
                "{p}: a checkpoint held writers back {hold:.1} ms, over the bound of {} ms \
                 (--max-checkpoint-hold-ms)",
                args.max_hold_ms
            ));
        }
        checkpoint_rows.push(checkpoint_summary(*p, s, hold));
    }
    println!(
        "\n| profile | longest checkpoint hold (ms) | seconds with a write over {SLOW_WRITE_MS} ms (outside kills, disk full) | longest write there (ms) \
         | seconds over the WAL limit | stretches over it | longest stretch (s) | over it at the end | WAL in use max (MiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|---:|");
    for row in &checkpoint_rows {
        println!("{row}");
    }
    if let Some(note) = &disk_note {
        println!("\n{note}");
    }
    let mut stuck = false;
    for (_, run) in &runs {
        if let Some(why) = &run.problem {
            println!("\n**{why}**");
            stuck = true;
        }
    }
    for why in &held_too_long {
        println!("\n**{why}**");
        eprintln!("soak: {why}");
    }
    if failed || stuck || !held_too_long.is_empty() {
        std::process::exit(1);
    }
}

/// One profile's row of the summary's second table: checkpoints' holds,
/// slow seconds outside the kill and disk-full moments, and the WAL's
/// stretches over its limit.
fn checkpoint_summary(p: Profile, s: &[Sample], hold_ms: f64) -> String {
    // A second within 2 s of a kill of the writer process, or in the
    // disk-full phase (which includes 2 s after it).
    let kills: Vec<u64> = s
        .windows(2)
        .filter(|w| w[1].kills > w[0].kills)
        .map(|w| w[1].second)
        .collect();
    let quiet = |x: &Sample| {
        !x.disk_nearly_full
            && !kills
                .iter()
                .any(|&k| x.second + 2 >= k && x.second <= k + 2)
    };
    let slow: Vec<f64> = s
        .iter()
        .filter(|x| quiet(x) && x.max_stall_ms > SLOW_WRITE_MS)
        .map(|x| x.max_stall_ms)
        .collect();
    let longest_slow = slow.iter().copied().fold(0.0, f64::max);
    let over = s.iter().filter(|x| x.over_limit).count();
    let mut stretches = Vec::new();
    let mut run = 0u64;
    for x in s {
        if x.over_limit {
            run += 1;
        } else if run > 0 {
            stretches.push(run);
            run = 0;
        }
    }
    let at_end = run > 0;
    if at_end {
        stretches.push(run);
    }
    let in_use = s.iter().map(|x| x.wal_pages).max().unwrap_or(0) * PAGE_BYTES;
    format!(
        "| {p} | {hold_ms:.1} | {} | {longest_slow:.0} | {over} | {} | {} | {} | {:.1} |",
        slow.len(),
        stretches.len(),
        stretches.iter().max().unwrap_or(&0),
        if at_end { "yes" } else { "no" },
        in_use as f64 / 1048576.0
    )
}
