//! Group commit settings under the `safe` profile.
//!
//! `cargo bench -p litelane --bench group_commit` runs 16 threads × 300
//! single-row transactions (the users table of the Rust report) for several
//! group-commit settings, each on a fresh database, and prints the median of
//! 3 runs: rows/s, mean jobs per commit, and the p99 and max wait for the
//! writer. The defaults in `GroupCommit::default()` come from this table.

use std::thread;
use std::time::{Duration, Instant};

use litelane::{Database, GroupCommit, Options, Profile};

const THREADS: usize = 16;
const ROWS: usize = 300;

struct Run {
    rows_per_sec: f64,
    mean_group: f64,
    p99: Duration,
    max: Duration,
}

fn run(group: &GroupCommit) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        group_commit: group.clone(),
        ..Options::with_profile(Profile::Safe)
    };
    let db = Database::open(dir.path().join("g.db"), opts).unwrap();
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE users(id TEXT PRIMARY KEY NOT NULL, created_at TEXT NOT NULL, username TEXT NOT NULL)",
        )?)
    })
    .unwrap();
    let start = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                for i in 0..ROWS {
                    let id = format!("{t:08x}-{i:04x}-4000-8000-{:012x}", t * ROWS + i);
                    db.write(|tx| {
                        tx.prepare_cached(
                            "INSERT INTO users VALUES (?, '2026-11-21T10:00:00Z', 'Someone')",
                        )?
                        .execute([&id])?;
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let m = db.metrics();
    Run {
        rows_per_sec: (THREADS * ROWS) as f64 / secs,
        mean_group: m.mean_group_size(),
        p99: m.queue_wait_p99,
        max: m.queue_wait_max,
    }
}

fn main() {
    let settings: Vec<(&str, GroupCommit)> = vec![
        (
            "off",
            GroupCommit {
                enabled: false,
                ..GroupCommit::default()
            },
        ),
        (
            "max 4 jobs, 5 ms",
            GroupCommit {
                max_jobs: 4,
                ..GroupCommit::default()
            },
        ),
        (
            "max 16 jobs, 5 ms",
            GroupCommit {
                max_jobs: 16,
                ..GroupCommit::default()
            },
        ),
        (
            "max 64 jobs, 0.5 ms",
            GroupCommit {
                max_wait: Duration::from_micros(500),
                ..GroupCommit::default()
            },
        ),
        ("max 64 jobs, 5 ms (default)", GroupCommit::default()),
        (
            "max 64 jobs, 50 ms",
            GroupCommit {
                max_wait: Duration::from_millis(50),
                ..GroupCommit::default()
            },
        ),
    ];
    println!("{THREADS} threads x {ROWS} single-row transactions, profile safe, median of 3");
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "group commit", "rows/s", "jobs/commit", "p99 wait", "max wait", "vs off"
    );
    let mut off = 0.0;
    for (name, g) in settings {
        let mut runs: Vec<Run> = (0..3).map(|_| run(&g)).collect();
        runs.sort_by(|a, b| a.rows_per_sec.partial_cmp(&b.rows_per_sec).unwrap());
        let r = &runs[1];
        if !g.enabled {
            off = r.rows_per_sec;
        }
        println!(
            "{name:<30} {:>10.0} {:>10.1} {:>8.1}ms {:>8.1}ms {:>7.1}x",
            r.rows_per_sec,
            r.mean_group,
            r.p99.as_secs_f64() * 1e3,
            r.max.as_secs_f64() * 1e3,
            r.rows_per_sec / off
        );
    }
}
