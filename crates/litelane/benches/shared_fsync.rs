//! Threads of one process sharing the WAL's fsync under `safe`.
//!
//! `cargo bench -p litelane --bench shared_fsync [-- THREADS ROWS]` runs
//! THREADS (default 16) threads × ROWS (default 2,000) single-row write
//! closures on one fresh database with the cross-process queue on (the
//! default), for two rows: `light` (an integer key: one or two pages per
//! commit) and `heavy` (a random text key with a second unique index, as
//! report 004's users table: many pages per commit). It prints, per row:
//! rows/s, SQLite commits, fsyncs run and commits another fsync covered.
//! Whole runs of two builds can be compared as processes.

use std::time::Instant;

use litelane::{Database, Options, Profile};

fn run(threads: usize, rows: usize, heavy: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("f.db"),
        Options::with_profile(Profile::Safe),
    )
    .unwrap();
    let schema = if heavy {
        "CREATE TABLE t(id TEXT PRIMARY KEY NOT NULL, at TEXT, who TEXT); \
         CREATE UNIQUE INDEX t_id ON t(id)"
    } else {
        "CREATE TABLE t(id INTEGER PRIMARY KEY, at TEXT, who TEXT)"
    };
    db.write(|tx| Ok(tx.execute_batch(schema)?)).unwrap();
    let before = db.metrics();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = &db;
            s.spawn(move || {
                for i in 0..rows {
                    // A key spread over the whole index (heavy) or the next
                    // rowid (light).
                    let mut k = ((t * rows + i) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    k ^= k >> 29;
                    db.write(|tx| {
                        let at = format!("2026-11-30T00:00:{i:05}");
                        let who = format!("user{t}-{i}");
                        if heavy {
                            tx.prepare_cached("INSERT INTO t(id, at, who) VALUES (?1, ?2, ?3)")?
                                .execute((format!("{k:016x}"), at, who))?;
                        } else {
                            tx.prepare_cached("INSERT INTO t(at, who) VALUES (?1, ?2)")?
                                .execute((at, who))?;
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let m = db.metrics();
    let n = threads * rows;
    println!(
        "{:<5} {threads} threads × {rows}: {:>7.0} rows/s, {} commits, {} fsyncs, {} covered by another's",
        if heavy { "heavy" } else { "light" },
        n as f64 / secs,
        m.commits - before.commits,
        m.wal_syncs - before.wal_syncs,
        m.syncs_shared - before.syncs_shared,
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let threads = args.first().copied().unwrap_or(16);
    let rows = args.get(1).copied().unwrap_or(2000);
    for heavy in [false, true] {
        run(threads, rows, heavy);
    }
}
