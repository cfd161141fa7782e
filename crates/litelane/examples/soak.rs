//! Soak: writers, readers (some holding a snapshot for seconds), bulk
//! inserts and checkpoints at once, for a while, under each WAL profile.
//! Every second it records the WAL file size, the longest single `write`
//! in that second (the writer stall), errors and resident memory.
//!
//! ```text
//! cargo run --release -p litelane --example soak -- --seconds 120 \
//!     --csv soak.csv --svg docs/soak.svg            # 2 minutes per profile
//! cargo run --release -p litelane --example soak -- --seconds 3600 ...  # the hour
//! ```
//!
//! Options: `--seconds N` per profile (default 120), `--profile safe|balanced|all`
//! (default all), `--dir PATH` for the database (default: a temporary
//! directory), `--csv PATH` (default soak.csv), `--svg PATH` (no plot if
//! absent), `--no-explicit-checkpoints` (only the background checkpointer;
//! by default a thread also calls `Database::checkpoint(Passive)` every 5 s).
//! Exits non-zero if any operation failed or the writers got stuck.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use litelane::{CheckpointMode, Database, Options, Profile, Value};

struct Args {
    seconds: u64,
    profiles: Vec<Profile>,
    dir: Option<PathBuf>,
    csv: PathBuf,
    svg: Option<PathBuf>,
    explicit_checkpoints: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 120,
        profiles: vec![Profile::Safe, Profile::Balanced],
        dir: None,
        csv: PathBuf::from("soak.csv"),
        svg: None,
        explicit_checkpoints: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => {
                let v = value()?;
                a.seconds = v
                    .parse()
                    .map_err(|_| format!("--seconds: {v:?} is not a whole number of seconds"))?;
            }
            "--profile" => {
                let v = value()?;
                a.profiles = if v == "all" {
                    vec![Profile::Safe, Profile::Balanced]
                } else {
                    let p: Profile = v.parse().map_err(|e| format!("--profile: {e}"))?;
                    if p == Profile::Fast {
                        return Err("--profile: the soak runs WAL profiles (safe, balanced)".into());
                    }
                    vec![p]
                };
            }
            "--dir" => a.dir = Some(PathBuf::from(value()?)),
            "--csv" => a.csv = PathBuf::from(value()?),
            "--svg" => a.svg = Some(PathBuf::from(value()?)),
            "--no-explicit-checkpoints" => a.explicit_checkpoints = false,
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(a)
}

/// One second of the soak.
#[derive(Debug, Clone)]
struct Sample {
    profile: Profile,
    second: u64,
    wal_bytes: u64,
    max_stall_ms: f64,
    writes: u64,
    bulk_rows: u64,
    reads: u64,
    errors: u64,
    checkpoints: u64,
    escalated: u64,
    rss_kib: u64,
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

#[derive(Default)]
struct Counters {
    writes: AtomicU64,
    bulk_rows: AtomicU64,
    reads: AtomicU64,
    errors: AtomicU64,
    max_stall_us: AtomicU64,
    next_id: AtomicU64,
}

fn note_err(c: &Counters, what: &str, e: &litelane::Error) {
    c.errors.fetch_add(1, Ordering::Relaxed);
    eprintln!("error in {what}: {e}");
}

fn soak(
    profile: Profile,
    seconds: u64,
    dir: &std::path::Path,
    explicit_checkpoints: bool,
) -> Result<(Vec<Sample>, Option<String>), String> {
    let path = dir.join(format!("soak-{profile}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let mut opts = Options::with_profile(profile);
    opts.checkpoints.passive_after_pages = 1000;
    opts.checkpoints.limit_pages = 4000;
    let db = Database::open(&path, opts).map_err(|e| e.to_string())?;
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS ev(id INTEGER PRIMARY KEY, at INTEGER, body BLOB)",
        )?)
    })
    .map_err(|e| e.to_string())?;
    let c = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let stop_ckpt = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();

    // Writers: one small row per transaction, with a pause.
    for _ in 0..4 {
        let (db, c, stop) = (db.clone(), Arc::clone(&c), Arc::clone(&stop));
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
                c.max_stall_us
                    .fetch_max(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                match r {
                    Ok(_) => {
                        c.writes.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => note_err(&c, "write", &e),
                }
                thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    // Bulk: 5,000 rows every 2 s, committing every 1,000; then trims old
    // rows so the file stays a fixed size.
    {
        let (db, c, stop) = (db.clone(), Arc::clone(&c), Arc::clone(&stop));
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
                    Err(e) => note_err(&c, "bulk insert", &e),
                }
                let keep_from = c.next_id.load(Ordering::Relaxed) as i64 - 100_000;
                if let Err(e) =
                    db.write(|tx| Ok(tx.execute("DELETE FROM ev WHERE id < ?", [keep_from])?))
                {
                    note_err(&c, "trim", &e);
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
        let (db, c, stop) = (db.clone(), Arc::clone(&c), Arc::clone(&stop));
        workers.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = db.read(|conn| {
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
                    Err(e) => note_err(&c, "read", &e),
                }
                thread::sleep(Duration::from_millis(if long { 1000 } else { 5 }));
            }
        }));
    }
    // An explicit checkpoint every 5 s besides the background ones. Stopped
    // before the writers (see the writer bug in
    // litelane-faultvfs/tests/faults.rs: a group handed to an explicit
    // checkpoint waits for the next writer).
    let ckpt = {
        let (db, c, stop) = (db.clone(), Arc::clone(&c), Arc::clone(&stop_ckpt));
        thread::spawn(move || {
            while explicit_checkpoints && !stop.load(Ordering::Relaxed) {
                for _ in 0..50 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
                if let Err(e) = db.checkpoint(CheckpointMode::Passive) {
                    note_err(&c, "checkpoint", &e);
                }
            }
        })
    };

    let samples = Mutex::new(Vec::new());
    let start = Instant::now();
    let mut last = (0u64, 0u64, 0u64);
    for second in 1..=seconds {
        let next = start + Duration::from_secs(second);
        thread::sleep(next.saturating_duration_since(Instant::now()));
        let m = db.metrics();
        let writes = c.writes.load(Ordering::Relaxed);
        let bulk = c.bulk_rows.load(Ordering::Relaxed);
        let reads = c.reads.load(Ordering::Relaxed);
        let s = Sample {
            profile,
            second,
            wal_bytes: m.wal_file_bytes,
            max_stall_ms: c.max_stall_us.swap(0, Ordering::Relaxed) as f64 / 1000.0,
            writes: writes - last.0,
            bulk_rows: bulk - last.1,
            reads: reads - last.2,
            errors: c.errors.load(Ordering::Relaxed),
            checkpoints: m.checkpoints,
            escalated: m.checkpoints_escalated,
            rss_kib: rss_kib(),
        };
        last = (writes, bulk, reads);
        eprintln!(
            "{profile} {second:>5}s wal {:>9} B  stall {:>8.2} ms  writes {:>5}/s  bulk {:>6}/s  errors {}",
            s.wal_bytes, s.max_stall_ms, s.writes, s.bulk_rows, s.errors
        );
        samples.lock().unwrap().push(s);
    }
    stop_ckpt.store(true, Ordering::Relaxed);
    let _ = ckpt.join();
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    while workers.iter().any(|w| !w.is_finished()) {
        if Instant::now() > deadline {
            let samples = samples.into_inner().unwrap();
            let why = format!(
                "{profile}: workers still blocked 30 s after the stop (no write for the last {} s): \
                 the writer is stuck",
                samples.iter().rev().take_while(|s| s.writes == 0).count()
            );
            // The stuck threads keep their clones of the database.
            return Ok((samples, Some(why)));
        }
        thread::sleep(Duration::from_millis(50));
    }
    for w in workers {
        let _ = w.join();
    }
    drop(db);
    Ok((samples.into_inner().unwrap(), None))
}

fn write_csv(path: &std::path::Path, samples: &[Sample]) -> std::io::Result<()> {
    let mut out = String::from(
        "profile,second,wal_bytes,max_stall_ms,writes,bulk_rows,reads,errors,checkpoints,escalated,rss_kib\n",
    );
    for s in samples {
        let _ = writeln!(
            out,
            "{},{},{},{:.3},{},{},{},{},{},{},{}",
            s.profile,
            s.second,
            s.wal_bytes,
            s.max_stall_ms,
            s.writes,
            s.bulk_rows,
            s.reads,
            s.errors,
            s.checkpoints,
            s.escalated,
            s.rss_kib
        );
    }
    std::fs::write(path, out)
}

/// Two panels (WAL MiB, longest stall ms) against seconds, one line per profile.
fn write_svg(
    path: &std::path::Path,
    samples: &[Sample],
    profiles: &[Profile],
) -> std::io::Result<()> {
    let (w, h, pad) = (900.0, 260.0, 50.0);
    let colors = ["#d62728", "#1f77b4"];
    let max_t = samples.iter().map(|s| s.second).max().unwrap_or(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        2.0 * h + 30.0
    );
    type Series = fn(&Sample) -> f64;
    let panels: [(&str, Series); 2] = [
        ("WAL file size (MiB)", |s| s.wal_bytes as f64 / 1048576.0),
        ("longest write in each second (ms)", |s| s.max_stall_ms),
    ];
    for (i, (title, f)) in panels.iter().enumerate() {
        let top = i as f64 * h + 10.0;
        let max_v = samples.iter().map(f).fold(0.0f64, f64::max).max(1e-9) * 1.1;
        let x = |t: f64| pad + (w - 2.0 * pad) * t / max_t;
        let y = |v: f64| top + h - pad + -(h - 1.5 * pad) * v / max_v;
        let _ = writeln!(
            svg,
            "<text x=\"{pad}\" y=\"{}\">{title}; max {:.2}</text>\n\
             <line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
             <line x1=\"{pad}\" y1=\"{}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max_t} s</text>\n\
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
            y(max_v) + 4.0,
            max_v
        );
        for (k, p) in profiles.iter().enumerate() {
            let pts: Vec<String> = samples
                .iter()
                .filter(|s| s.profile == *p)
                .map(|s| format!("{:.1},{:.1}", x(s.second as f64), y(f(s))))
                .collect();
            let color = colors[k % colors.len()];
            let _ = writeln!(
                svg,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.2\" points=\"{}\"/>\n\
                 <text x=\"{}\" y=\"{}\" fill=\"{color}\">{p}</text>",
                pts.join(" "),
                w - pad - 80.0 + 45.0 * k as f64,
                top + 12.0
            );
        }
    }
    svg.push_str("</svg>\n");
    std::fs::write(path, svg)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    };
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
    let mut all = Vec::new();
    let mut stuck = Vec::new();
    for &p in &args.profiles {
        match soak(p, args.seconds, &dir, args.explicit_checkpoints) {
            Ok((s, problem)) => {
                all.extend(s);
                if let Some(why) = problem {
                    eprintln!("soak: {why}");
                    stuck.push(why);
                }
            }
            Err(e) => {
                eprintln!("soak: {p}: {e}");
                std::process::exit(1);
            }
        }
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
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
    println!("| profile | seconds | WAL max (MiB) | longest write (ms) | writes | bulk rows | reads | errors | RSS first → last (MiB) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &p in &args.profiles {
        let s: Vec<&Sample> = all.iter().filter(|s| s.profile == p).collect();
        let (Some(first), Some(lastv)) = (s.first(), s.last()) else {
            continue;
        };
        let wal = s.iter().map(|s| s.wal_bytes).max().unwrap_or(0) as f64 / 1048576.0;
        let stall = s.iter().map(|s| s.max_stall_ms).fold(0.0, f64::max);
        let writes: u64 = s.iter().map(|s| s.writes).sum();
        let bulk: u64 = s.iter().map(|s| s.bulk_rows).sum();
        let reads: u64 = s.iter().map(|s| s.reads).sum();
        println!(
            "| {p} | {} | {wal:.1} | {stall:.1} | {writes} | {bulk} | {reads} | {} | {:.1} → {:.1} |",
            s.len(),
            lastv.errors,
            first.rss_kib as f64 / 1024.0,
            lastv.rss_kib as f64 / 1024.0
        );
        failed |= lastv.errors > 0;
    }
    for why in &stuck {
        println!("\n**{why}**");
    }
    if failed || !stuck.is_empty() {
        std::process::exit(1);
    }
}
