//! Online backup: consistent under concurrent writers, never overwrites what
//! the user owns.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use litelane::{BackupOptions, BackupProgress, BackupSource, Database, Options, Profile};
use rusqlite::Connection;

use common::{exec, query_i64};

fn integrity(path: &Path) -> String {
    let c = Connection::open(path).unwrap();
    c.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// Each writer's commits are numbered 0, 1, 2... and each commit also bumps
/// a shared counter: a consistent copy has, per writer, the seqs 0..n with no
/// gap, and a counter equal to the number of log rows.
fn check_consistent(path: &Path, writers: usize) -> Vec<i64> {
    let c = Connection::open(path).unwrap();
    let rows: i64 = c
        .query_row("SELECT count(*) FROM log", [], |r| r.get(0))
        .unwrap();
    let counter: i64 = c
        .query_row("SELECT n FROM counter", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, counter, "log rows and counter from different moments");
    let mut per_writer = Vec::new();
    for w in 0..writers as i64 {
        let (n, max): (i64, Option<i64>) = c
            .query_row(
                "SELECT count(*), max(seq) FROM log WHERE writer = ?1",
                [w],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let max = max.unwrap_or(-1);
        assert_eq!(n, max + 1, "writer {w}: a gap in its commits in the copy");
        per_writer.push(n);
    }
    per_writer
}

fn setup(db: &Database) {
    exec(
        db,
        "CREATE TABLE log(id INTEGER PRIMARY KEY, writer INTEGER, seq INTEGER, pad BLOB);
         CREATE INDEX log_writer ON log(writer, seq);
         CREATE TABLE counter(n INTEGER);
         INSERT INTO counter VALUES (0);
         CREATE TABLE filler(x BLOB);",
    );
    // About 2 MB of pages, so the copy takes many steps.
    fill_blobs(db, "filler", 2000);
}

/// Inserts `rows` rows of 1,000 random bytes into the one-column `table`,
/// in one transaction.
fn fill_blobs(db: &Database, table: &str, rows: usize) {
    db.write(|tx| {
        let mut s = tx.prepare(&format!(
            "INSERT INTO \"{table}\" VALUES (randomblob(1000))"
        ))?;
        for _ in 0..rows {
            s.execute([])?;
        }
        Ok(())
    })
    .unwrap();
}

fn run_concurrent_backup(profile: Profile) {
    const WRITERS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("src.db"), Options::with_profile(profile)).unwrap();
    setup(&db);
    let stop = Arc::new(AtomicBool::new(false));
    // Per writer: seqs acknowledged so far.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            let stop = Arc::clone(&stop);
            let acked = Arc::clone(&acked);
            std::thread::spawn(move || {
                let mut seq = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    db.write(|tx| {
                        tx.execute(
                            "INSERT INTO log(writer, seq, pad) VALUES (?1, ?2, randomblob(100))",
                            [w as i64, seq],
                        )?;
                        tx.execute("UPDATE counter SET n = n + 1", [])?;
                        Ok(())
                    })
                    .unwrap();
                    seq += 1;
                    acked[w].store(seq as u64, Ordering::Release);
                }
            })
        })
        .collect();
    // Let the writers get going.
    assert!(common::eventually(Duration::from_secs(10), || {
        acked.iter().all(|a| a.load(Ordering::Acquire) >= 5)
    }));
    let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    let commits_at_first_step = Mutex::new(None::<u64>);
    let commits_at_last_step = Mutex::new(0u64);
    let mut seen: Vec<BackupProgress> = Vec::new();
    let out = dir.path().join("copy.db");
    let opts = BackupOptions {
        pages_per_step: 8,
        ..Default::default()
    };
    let report = db
        .backup_with(&out, &opts, &mut |p| {
            seen.push(p);
            let n = query_i64(&db, "SELECT count(*) FROM log") as u64;
            commits_at_first_step.lock().unwrap().get_or_insert(n);
            *commits_at_last_step.lock().unwrap() = n;
            // Slow the copy down a little so writers get turns between steps.
            std::thread::sleep(Duration::from_millis(2));
        })
        .unwrap();
    let after: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }

    assert_eq!(integrity(&out), "ok");
    let in_copy = check_consistent(&out, WRITERS);
    for w in 0..WRITERS {
        assert!(
            in_copy[w] as u64 >= before[w],
            "writer {w}: {} commits acknowledged before the backup, {} in it",
            before[w],
            in_copy[w]
        );
        assert!(
            in_copy[w] as u64 <= after[w],
            "writer {w}: copy has commits not yet acknowledged when it finished"
        );
    }
    // Progress: many steps, monotonic, ends at the total.
    assert!(seen.len() > 10, "only {} progress calls", seen.len());
    assert!(seen.windows(2).all(|w| w[0].pages_done <= w[1].pages_done));
    let last = seen.last().unwrap();
    assert_eq!(last.pages_done, last.pages_total);
    assert_eq!(report.pages, last.pages_total);
    assert_eq!(report.bytes, report.pages * report.page_size);
    assert_eq!(std::fs::metadata(&out).unwrap().len(), report.bytes);
    let during =
        *commits_at_last_step.lock().unwrap() - commits_at_first_step.lock().unwrap().unwrap();
    match profile {
        Profile::Fast => {
            assert_eq!(report.source, BackupSource::WriterTurn);
            // Writers waited for the whole copy: no commit between steps.
            assert_eq!(
                during, 0,
                "a commit ran inside the writer turn of the backup"
            );
        }
        _ => {
            assert_eq!(report.source, BackupSource::ReaderSnapshot);
            // Writers kept committing while the copy ran.
            assert!(during > 0, "no commit while {} steps ran", seen.len());
        }
    }
    // Nothing left behind but the source's files and the copy.
    let extra: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("litelane-tmp"))
        .collect();
    assert!(extra.is_empty(), "temporary files left: {extra:?}");
}

#[test]
fn backup_under_writers_is_a_consistent_prefix_balanced() {
    run_concurrent_backup(Profile::Balanced);
}

#[test]
fn backup_under_writers_is_a_consistent_prefix_safe() {
    run_concurrent_backup(Profile::Safe);
}

#[test]
fn backup_under_writers_is_a_consistent_prefix_fast() {
    run_concurrent_backup(Profile::Fast);
}

#[test]
fn in_memory_database_backs_up_to_a_file() {
    let db = Database::open_in_memory(Options::default()).unwrap();
    exec(
        &db,
        "CREATE TABLE t(x); WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 500) INSERT INTO t SELECT v FROM s;",
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mem.db");
    let r = db.backup(&out, |_| {}).unwrap();
    assert_eq!(r.source, BackupSource::WriterTurn);
    assert_eq!(integrity(&out), "ok");
    let c = Connection::open(&out).unwrap();
    let n: i64 = c
        .query_row("SELECT sum(x) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 500 * 501 / 2);
    // The database still works after its backup.
    exec(&db, "INSERT INTO t VALUES (0)");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 501);
}

/// What the destination is before the backup, and whether it must be
/// refused.
#[derive(Debug)]
enum Dest {
    Missing,
    Empty,
    NonEmpty,
    NonEmptyOverwrite,
    SourceItself,
    SourceItselfOverwrite,
    HardLinkToSource,
    SourceWal,
    Directory,
}

#[test]
fn destinations_that_would_destroy_something_are_refused() {
    let cases: &[(Dest, Option<&str>)] = &[
        (Dest::Missing, None),
        (Dest::Empty, None),
        (Dest::NonEmpty, Some("not empty")),
        (Dest::NonEmptyOverwrite, None),
        (Dest::SourceItself, Some("itself")),
        (Dest::SourceItselfOverwrite, Some("itself")),
        (Dest::HardLinkToSource, Some("itself")),
        (Dest::SourceWal, Some("-wal")),
        (Dest::Directory, Some("not a regular file")),
    ];
    for (case, refusal) in cases {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.db");
        let db = Database::open(&src, Options::default()).unwrap();
        exec(&db, "CREATE TABLE t(x); INSERT INTO t VALUES (42);");
        let mut overwrite = false;
        let dest = match case {
            Dest::Missing => dir.path().join("out.db"),
            Dest::Empty => {
                let p = dir.path().join("out.db");
                std::fs::write(&p, b"").unwrap();
                p
            }
            Dest::NonEmpty | Dest::NonEmptyOverwrite => {
                let p = dir.path().join("out.db");
                std::fs::write(&p, b"precious user data").unwrap();
                overwrite = matches!(case, Dest::NonEmptyOverwrite);
                p
            }
            Dest::SourceItself | Dest::SourceItselfOverwrite => {
                overwrite = matches!(case, Dest::SourceItselfOverwrite);
                // Another spelling of the same path.
                dir.path().join(".").join("src.db")
            }
            Dest::HardLinkToSource => {
                let p = dir.path().join("link.db");
                std::fs::hard_link(&src, &p).unwrap();
                p
            }
            Dest::SourceWal => {
                overwrite = true;
                dir.path().join("src.db-wal")
            }
            Dest::Directory => {
                let p = dir.path().join("sub");
                std::fs::create_dir(&p).unwrap();
                p
            }
        };
        let before = std::fs::read(&dest).ok();
        let src_before = std::fs::read(&src).unwrap();
        let opts = BackupOptions {
            overwrite,
            ..Default::default()
        };
        let r = db.backup_with(&dest, &opts, &mut |_| {});
        match refusal {
            Some(words) => {
                let e = r
                    .expect_err(&format!("{case:?} must be refused"))
                    .to_string();
                assert!(e.contains(words), "{case:?}: {e}");
                assert!(
                    e.contains(&dest.file_name().unwrap().to_string_lossy().to_string()),
                    "{case:?}: {e}"
                );
                assert_eq!(
                    std::fs::read(&dest).ok(),
                    before,
                    "{case:?}: destination changed"
                );
            }
            None => {
                r.unwrap_or_else(|e| panic!("{case:?}: {e}"));
                assert_eq!(integrity(&dest), "ok", "{case:?}");
                let c = Connection::open(&dest).unwrap();
                let x: i64 = c.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
                assert_eq!(x, 42, "{case:?}");
            }
        }
        // The source is never touched by a refusal (its bytes may only change
        // through its own writes, and there were none).
        assert_eq!(
            std::fs::read(&src).unwrap(),
            src_before,
            "{case:?}: source changed"
        );
        assert_eq!(query_i64(&db, "SELECT x FROM t"), 42, "{case:?}");
        let tmp: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("litelane-tmp"))
            .collect();
        assert!(tmp.is_empty(), "{case:?}: temporary file left");
    }
}

#[test]
fn zero_pages_per_step_is_a_clear_error() {
    let (dir, db) = common::temp_db(Options::default());
    let opts = BackupOptions {
        pages_per_step: 0,
        overwrite: false,
    };
    let out = dir.path().join("o.db");
    let e = db.backup_with(&out, &opts, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("pages_per_step"), "{e}");
    assert!(!out.exists());
}

#[test]
fn a_backup_into_a_missing_directory_names_the_path() {
    let (dir, db) = common::temp_db(Options::default());
    let out = dir.path().join("no/such/dir/o.db");
    let started = Instant::now();
    let err = db.backup(&out, |_| {}).unwrap_err();
    let e = err.to_string();
    assert!(e.contains("no/such/dir"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The operating system's error is the error's source, errno and all.
    let os = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no OS error under {err:?}"));
    assert_eq!(os.kind(), std::io::ErrorKind::NotFound, "{os:?}");
    assert_eq!(os.raw_os_error(), Some(2), "ENOENT");
}

/// `Database::checkpoint` takes a plain turn of its own. The first writer
/// design handed an open group to any non-priority waiter, so a manual
/// checkpoint failed and, with no writer queued behind it, the group's
/// members waited for their outcome forever. A plain turn now never receives
/// a transaction (see `queue.rs`).
#[test]
fn manual_checkpoints_under_concurrent_writers_never_fail_nor_hang() {
    let (_dir, db) = common::temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    for _ in 0..4 {
        let db = db.clone();
        let stop = Arc::clone(&stop);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
                    .unwrap();
            }
            done.fetch_add(1, Ordering::Relaxed);
        });
    }
    let mut failures = Vec::new();
    for _ in 0..300 {
        if let Err(e) = db.checkpoint(litelane::CheckpointMode::Passive) {
            failures.push(e.to_string());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let all_done = common::eventually(Duration::from_secs(10), || {
        done.load(Ordering::Relaxed) == 4
    });
    assert!(
        all_done,
        "writers still waiting 10 s after the last checkpoint ({} checkpoints failed)",
        failures.len()
    );
    assert!(failures.is_empty(), "a checkpoint failed: {}", failures[0]);
}

/// Figures for docs/durability.md: one-row commits from 2 threads before
/// and during a backup of a ~64 MB database, per profile. Run with
/// `cargo test --release -p litelane --test it backup::backup_figures -- --ignored --nocapture`.
#[test]
#[ignore = "measurement, prints figures"]
fn backup_figures() {
    fn pct(v: &mut [Duration], p: f64) -> Duration {
        v.sort_unstable();
        v[((v.len() as f64 - 1.0) * p) as usize]
    }
    for profile in [Profile::Balanced, Profile::Safe, Profile::Fast] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("f.db"), Options::with_profile(profile)).unwrap();
        exec(&db, "CREATE TABLE big(x BLOB); CREATE TABLE w(x);");
        fill_blobs(&db, "big", 64_000);
        db.checkpoint(litelane::CheckpointMode::Truncate).ok();
        let stop = Arc::new(AtomicBool::new(false));
        let during = Arc::new(AtomicBool::new(false));
        let lat: Arc<Mutex<(Vec<Duration>, Vec<Duration>)>> = Arc::default();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (db, stop, during, lat) = (
                    db.clone(),
                    Arc::clone(&stop),
                    Arc::clone(&during),
                    Arc::clone(&lat),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        db.write(|tx| Ok(tx.execute("INSERT INTO w VALUES (1)", [])?))
                            .unwrap();
                        let d = t.elapsed();
                        let mut l = lat.lock().unwrap();
                        if during.load(Ordering::Relaxed) {
                            l.1.push(d);
                        } else {
                            l.0.push(d);
                        }
                        drop(l);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(2));
        during.store(true, Ordering::Relaxed);
        let r = db.backup(dir.path().join("copy.db"), |_| {}).unwrap();
        during.store(false, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        let l = lat.lock().unwrap();
        let (before, dur) = (&mut l.0.clone(), &mut l.1.clone());
        println!(
            "{profile:?}: backup {} pages ({:.1} MB) in {:.2} s ({:?}); commits before: {} p50 {:?} p99 {:?} max {:?}; during: {} p50 {:?} p99 {:?} max {:?}",
            r.pages,
            r.bytes as f64 / 1e6,
            r.elapsed.as_secs_f64(),
            r.source,
            before.len(),
            pct(before, 0.5),
            pct(before, 0.99),
            pct(before, 1.0),
            dur.len(),
            if dur.is_empty() { Duration::ZERO } else { pct(dur, 0.5) },
            if dur.is_empty() { Duration::ZERO } else { pct(dur, 0.99) },
            if dur.is_empty() { Duration::ZERO } else { pct(dur, 1.0) },
        );
    }
}

/// Another process's backup of a rollback-journal database must not block
/// that database's writers: each step holds the shared lock only for
/// itself. (Holding one snapshot for the whole copy would make every commit
/// wait, and fail after its busy timeout.)
#[test]
fn backup_connection_of_a_rollback_database_never_blocks_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = DELETE; CREATE TABLE t(x); CREATE TABLE w(n);
             INSERT INTO w VALUES (0);",
        )
        .unwrap();
        let mut s = c
            .prepare("INSERT INTO t VALUES (randomblob(1000))")
            .unwrap();
        for _ in 0..300 {
            s.execute([]).unwrap();
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let c = Connection::open(&path).unwrap();
            c.busy_timeout(Duration::from_millis(100)).unwrap();
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                match c.execute("UPDATE w SET n = n + 1", []) {
                    Ok(_) => ok += 1,
                    Err(e) => failed.push(e.to_string()),
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (ok, failed)
        })
    };
    let src = Connection::open(&path).unwrap();
    let opts = BackupOptions {
        pages_per_step: 1,
        overwrite: false,
    };
    let started = Instant::now();
    let r = litelane::backup_connection(&src, &dir.path().join("busy.db"), &opts, &mut |_| {
        std::thread::sleep(Duration::from_millis(5))
    });
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (ok, failed) = writer.join().unwrap();
    assert!(failed.is_empty(), "the writer failed: {failed:?}");
    assert!(ok >= 10, "only {ok} commits in {took:?}");
    match r {
        Ok(rep) => {
            assert_eq!(rep.source, BackupSource::StepLocks);
            assert_eq!(integrity(&dir.path().join("busy.db")), "ok");
        }
        Err(e) => assert!(e.to_string().contains("changed under the copy"), "{e}"),
    }
    // Quiet: the copy completes and is the database.
    let out = dir.path().join("quiet.db");
    let rep = litelane::backup_connection(&src, &out, &opts, &mut |_| {}).unwrap();
    assert_eq!(rep.source, BackupSource::StepLocks);
    assert_eq!(integrity(&out), "ok");
    let n = |p: &Path| {
        Connection::open(p)
            .unwrap()
            .query_row("SELECT n FROM w", [], |r| r.get::<_, i64>(0))
            .unwrap()
    };
    assert_eq!(n(&out), n(&path));
}

#[test]
fn restore_replaces_the_content_while_readers_and_writers_go_on() {
    let dir = tempfile::tempdir().unwrap();
    for profile in [Profile::Safe, Profile::Balanced, Profile::Fast] {
        let (src_path, dst_path) = (
            dir.path().join(format!("src-{profile}.db")),
            dir.path().join(format!("dst-{profile}.db")),
        );
        let src = Database::open(&src_path, Options::with_profile(profile)).unwrap();
        exec(&src, "CREATE TABLE t(a); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO t SELECT i FROM n;");
        let copy = dir.path().join(format!("copy-{profile}.db"));
        src.backup(&copy, |_| {}).unwrap();
        let dst = Database::open(&dst_path, Options::with_profile(profile)).unwrap();
        exec(&dst, "CREATE TABLE old(z); INSERT INTO old VALUES (1);");
        // every reader has the old schema cached
        for _ in 0..8 {
            assert_eq!(query_i64(&dst, "SELECT count(*) FROM old"), 1);
        }
        let before = std::fs::read(&copy).unwrap();
        let mut calls = Vec::new();
        let pages = dst.restore_from(&copy, 2, &mut |p| calls.push(p)).unwrap();
        assert!(
            pages > 2 && calls.len() as u64 >= pages / 2,
            "{pages} pages, {calls:?}"
        );
        assert_eq!(calls.last().unwrap().pages_done, pages);
        for _ in 0..8 {
            assert_eq!(query_i64(&dst, "SELECT count(*) FROM t"), 500, "{profile}");
        }
        assert!(dst
            .read(|c| Ok(c.query_row("SELECT count(*) FROM old", [], |_| Ok(()))))
            .unwrap()
            .is_err());
        exec(&dst, "INSERT INTO t VALUES (501);");
        assert_eq!(query_i64(&dst, "SELECT max(a) FROM t"), 501);
        assert_eq!(
            std::fs::read(&copy).unwrap(),
            before,
            "the source file changed"
        );
        drop(dst);
        assert_eq!(integrity(&dst_path), "ok");
    }
    let db = Database::open(dir.path().join("x.db"), Options::default()).unwrap();
    let err = db
        .restore_from(dir.path().join("missing.db"), 8, &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("missing.db"), "{err}");
}
