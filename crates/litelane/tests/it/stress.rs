//! A randomized stress test of the whole writer: many threads, every way a
//! write can end, nested savepoints, `write_local`, manual checkpoints and a
//! WAL gate that keeps closing, under every profile. At the end, the set of
//! rows stored must be exactly the set of writes that were told `Ok`.
//!
//! Short by default (a couple of seconds per profile). The long form:
//! `LITELANE_STRESS_SECS=300 cargo test --release -p litelane --test it stress::`.

use crate::common;

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::temp_db;
use litelane::{CheckpointMode, Checkpoints, Error, Options, OverLimit, Profile, Tx};

/// A small deterministic generator (xorshift64*), one per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn seconds() -> u64 {
    std::env::var("LITELANE_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

/// One write: inserts row `id`, maybe more work in a nested savepoint, then
/// ends in one of many ways. Returns whether it should be stored if told Ok.
fn job(tx: &Tx<'_>, id: u64, how: u64) -> litelane::Result<()> {
    tx.execute("INSERT INTO s(id) VALUES (?)", [id as i64])?;
    match how {
        0..=59 => Ok(()),
        60..=64 => Err(Error::user("no")),
        65..=67 => panic!("stress panic"),
        68..=71 => {
            tx.execute("INSERT OR ROLLBACK INTO u VALUES (1)", [])?;
            Ok(())
        }
        72..=73 => {
            let _ = tx.execute("INSERT OR ROLLBACK INTO u VALUES (1)", []);
            Ok(())
        }
        74..=79 => {
            // A nested write that fails alone: the outer one still commits.
            let inner: litelane::Result<()> = tx.write(|tx| {
                tx.execute("INSERT INTO s(id) VALUES (?)", [-(id as i64)])?;
                Err(Error::user("inner"))
            });
            assert!(inner.is_err());
            Ok(())
        }
        80..=83 => {
            tx.execute("INSERT INTO child VALUES (?)", [1_000_000 + id as i64])?;
            Ok(())
        }
        84..=85 => {
            tx.execute("INSERT INTO boom VALUES (1)", [])?;
            Ok(())
        }
        _ => {
            // A bigger write, so the WAL grows and the gate closes.
            tx.execute(
                "INSERT INTO pad(b) SELECT zeroblob(512) FROM generate_series(1, 8)",
                [],
            )
            .or_else(|_| {
                for _ in 0..8 {
                    tx.execute("INSERT INTO pad(b) VALUES (zeroblob(512))", [])?;
                }
                Ok::<_, rusqlite::Error>(0)
            })?;
            Ok(())
        }
    }
}

/// Keeps the planned panics of the jobs out of the test output.
fn quiet_planned_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"stress panic") {
            default(info);
        }
    }));
}

fn run(profile: Profile, secs: u64) {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(quiet_planned_panics);
    let mut opts = Options::with_profile(profile);
    opts.checkpoints = Checkpoints {
        passive_after_pages: 16,
        limit_pages: 64,
        // Both ways past the limit: escalations under `safe`, the default
        // (writers never held) under `balanced`.
        over_limit: match profile {
            Profile::Safe => OverLimit::HoldWriters,
            _ => OverLimit::Grow,
        },
        ..Checkpoints::default()
    };
    opts.busy_timeout = Duration::from_secs(5);
    let (_dir, db) = temp_db(opts);
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE s(id INTEGER PRIMARY KEY);
             CREATE TABLE u(k UNIQUE); INSERT INTO u VALUES (1);
             CREATE TABLE parent(id INTEGER PRIMARY KEY);
             CREATE TABLE child(pid REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TABLE boom(x);
             CREATE TRIGGER boom_t BEFORE INSERT ON boom BEGIN SELECT RAISE(ROLLBACK, 'boom'); END;
             CREATE TABLE pad(b BLOB);",
        )?)
    })
    .unwrap();
    let next = Arc::new(AtomicU64::new(1));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (db, next) = (db.clone(), Arc::clone(&next));
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t + 1) * 0x1234_5678));
                let mut told_ok = Vec::new();
                while Instant::now() < deadline {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    let how = rng.below(100);
                    let local = rng.below(10) == 0;
                    if t == 0 && rng.below(50) == 0 {
                        let mode = [CheckpointMode::Passive, CheckpointMode::Truncate]
                            [rng.below(2) as usize];
                        let _ = db.checkpoint(mode);
                    }
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        if local {
                            db.write_local("local", |tx| job(tx, id, how))
                        } else {
                            db.write_labeled("stress", move |tx| job(tx, id, how))
                        }
                    }));
                    if let Ok(Ok(())) = r {
                        told_ok.push(id);
                    }
                }
                told_ok
            })
        })
        .collect();
    let told: BTreeSet<u64> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let stored: BTreeSet<u64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT id FROM s WHERE id > 0")?;
            let ids = st
                .query_map([], |r| r.get::<_, i64>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(ids.into_iter().map(|i| i as u64).collect())
        })
        .unwrap();
    let nested: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM s WHERE id < 0", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(nested, 0, "{profile}: a failed nested write was committed");
    let told_not_stored: Vec<_> = told.difference(&stored).take(5).collect();
    let stored_not_told: Vec<_> = stored.difference(&told).take(5).collect();
    assert!(
        told_not_stored.is_empty() && stored_not_told.is_empty(),
        "{profile}: told Ok but not stored {told_not_stored:?}; stored but not told Ok {stored_not_told:?}"
    );
    let total = next.load(Ordering::Relaxed) - 1;
    assert!(
        told.len() as u64 > total / 3,
        "{profile}: too few writes succeeded: {} of {total}",
        told.len()
    );
    let ok: String = db
        .read(|c| Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(ok, "ok");
    let m = db.metrics();
    eprintln!(
        "{profile}: {total} writes, {} told Ok, mean group {:.2}, {} escalated checkpoints",
        told.len(),
        m.mean_group_size(),
        m.checkpoints_escalated
    );
}

#[test]
fn stress_safe() {
    run(Profile::Safe, seconds());
}

#[test]
fn stress_balanced() {
    run(Profile::Balanced, seconds());
}

#[test]
fn stress_fast() {
    run(Profile::Fast, seconds());
}
