//! Checkpoints run off the write path, the WAL stays bounded, and its file
//! stays allocated.

use crate::common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{eventually, exec, query_i64, temp_db};
use litelane::{CheckpointMode, Options, OverLimit, OverLimitReason};

/// One ~4 KiB row: about one WAL page per transaction.
fn write_page(db: &litelane::Database, i: i64) {
    db.write(|tx| Ok(tx.execute("INSERT INTO t(i, pad) VALUES (?, randomblob(3000))", [i])?))
        .unwrap();
}

fn with_checkpoints(passive: u32, limit: u32, idle: Duration) -> Options {
    let mut o = Options::default();
    o.checkpoints.passive_after_pages = passive;
    o.checkpoints.limit_pages = limit;
    o.checkpoints.idle_after = idle;
    o.checkpoints.escalation_wait = Duration::from_secs(5);
    o
}

/// [`with_checkpoints`] bounding the WAL by holding writers back
/// (`OverLimit::HoldWriters`, the escalated RESTART checkpoint).
fn holding_writers(passive: u32, limit: u32, idle: Duration) -> Options {
    let mut o = with_checkpoints(passive, limit, idle);
    o.checkpoints.over_limit = OverLimit::HoldWriters;
    o
}

/// A read labeled `label` on a thread of its own that has taken its
/// snapshot of `t` when this returns, and holds it until the sender is
/// sent to (or dropped); join the handle after.
fn pin_snapshot(
    db: &litelane::Database,
    label: &'static str,
) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (snap_tx, snap_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let db = db.clone();
    let reader = thread::spawn(move || {
        db.read_labeled(label, |c| {
            c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
            snap_tx.send(()).unwrap();
            let _ = end_rx.recv();
            Ok(())
        })
        .unwrap()
    });
    snap_rx.recv().unwrap();
    (end_tx, reader)
}

#[test]
fn commits_never_run_a_checkpoint_themselves() {
    // Background triggers set out of reach: if any commit checkpointed (as
    // SQLite's automatic checkpoint does at 1000 pages) the WAL would reset.
    let (_dir, db) = temp_db(with_checkpoints(
        1_000_000,
        1_000_000,
        Duration::from_secs(3600),
    ));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    let mut last = 0;
    for i in 0..1500 {
        write_page(&db, i);
        let pages = db.metrics().wal_pages;
        assert!(
            pages > last,
            "the WAL shrank after commit {i}: a commit checkpointed"
        );
        last = pages;
    }
    assert!(last > 1000);
    assert_eq!(db.metrics().checkpoints, 0);
    let rep = db.checkpoint(CheckpointMode::Truncate).unwrap();
    assert!(!rep.busy);
    assert_eq!(rep.wal_frames, 0, "TRUNCATE leaves an empty WAL");
}

#[test]
fn the_background_checkpointer_runs_after_enough_pages() {
    let (_dir, db) = temp_db(with_checkpoints(100, 100_000, Duration::from_secs(3600)));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    for i in 0..300 {
        write_page(&db, i);
    }
    assert!(eventually(Duration::from_secs(10), || db
        .metrics()
        .checkpoints
        > 0));
    let m = db.metrics();
    assert!(m.checkpoint_pages > 0);
    assert_eq!(m.checkpoints_escalated, 0);
}

/// `checkpoint_pages` counts each frame once: SQLite's count of
/// checkpointed frames includes those an earlier checkpoint of the same WAL
/// copied, and summing it counted them again (24,059 "pages" for 8,000
/// frames written, seen from Python).
#[test]
fn checkpoint_pages_counts_each_copied_frame_once() {
    let (_dir, db) = temp_db(with_checkpoints(50, 100_000, Duration::from_secs(3600)));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    // Readers one after another, each holding a snapshot for a moment: the
    // WAL is rarely free to restart, so checkpoints copy the new frames of
    // one growing WAL, again and again.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                db.read(|c| {
                    c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
                    thread::sleep(Duration::from_millis(2));
                    Ok(())
                })
                .unwrap();
            }
        })
    };
    // The frames already in the WAL (the table's creation) may be copied
    // and counted too.
    let mut frames = db.metrics().wal_pages;
    let mut write = |i: i64| {
        let before = db.metrics().wal_pages;
        write_page(&db, i);
        let after = db.metrics().wal_pages;
        // A commit that restarted the WAL wrote all of it.
        frames += if after >= before {
            after - before
        } else {
            after
        };
    };
    for i in 0..600 {
        write(i);
    }
    assert!(eventually(Duration::from_secs(10), || db
        .metrics()
        .checkpoints
        >= 5));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    // With the readers gone, checkpoints copy what they pinned (on a loaded
    // machine they may have pinned all of it so far).
    let mut i = 600;
    while db.metrics().checkpoint_pages == 0 && i < 5_000 {
        write(i);
        i += 1;
        thread::sleep(Duration::from_millis(1));
    }
    let m = db.metrics();
    assert!(
        m.checkpoint_pages > 0 && m.checkpoint_pages <= frames,
        "{} checkpointed frames counted for {frames} written, over {} checkpoints",
        m.checkpoint_pages,
        m.checkpoints
    );
}

#[test]
fn the_checkpointer_catches_up_when_the_writer_goes_idle() {
    let (_dir, db) = temp_db(with_checkpoints(
        1_000_000,
        1_000_000,
        Duration::from_millis(100),
    ));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    for i in 0..20 {
        write_page(&db, i);
    }
    assert!(eventually(Duration::from_secs(10), || db
        .metrics()
        .checkpoints
        > 0));
}

#[test]
fn holding_writers_keeps_the_wal_under_its_limit_while_a_long_reader_holds_a_snapshot() {
    const LIMIT: u64 = 300;
    let (_dir, db) = temp_db(holding_writers(50, LIMIT as u32, Duration::from_secs(3600)));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    for i in 0..100 {
        write_page(&db, i);
    }
    // A reader takes a snapshot and keeps it for 1.5 s while writes go on.
    let (snap_tx, snap_rx) = mpsc::channel();
    let reader = {
        let db = db.clone();
        thread::spawn(move || {
            db.read(|c| {
                let n: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                snap_tx.send(()).unwrap();
                thread::sleep(Duration::from_millis(1500));
                let again: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                assert_eq!(n, again, "the snapshot held still");
                Ok(n)
            })
            .unwrap()
        })
    };
    snap_rx.recv().unwrap();
    let mut max_pages = 0;
    for i in 100..1300 {
        write_page(&db, i);
        max_pages = max_pages.max(db.metrics().wal_pages);
    }
    assert_eq!(reader.join().unwrap(), 100);
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t"),
        1300,
        "every write landed"
    );
    let m = db.metrics();
    assert!(m.checkpoints_escalated > 0, "{m:?}");
    // A commit or two can land between crossing the limit and the
    // checkpointer taking the writer's turn.
    assert!(
        max_pages <= LIMIT + 10,
        "WAL reached {max_pages} pages, limit {LIMIT}"
    );
    assert_eq!(m.busy_errors, 0);
    // The WAL file stays allocated after the restart (journal_size_limit).
    assert!(m.wal_file_bytes > 0);
}

#[test]
fn the_wal_file_is_kept_on_close_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    for persistent_wal in [true, false] {
        let path = dir.path().join(format!("keep-{persistent_wal}.db"));
        let opts = Options {
            persistent_wal,
            ..Options::default()
        };
        {
            let db = litelane::Database::open(&path, opts.clone()).unwrap();
            exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
            for i in 0..10 {
                write_page(&db, i);
            }
        }
        let wal = dir.path().join(format!("keep-{persistent_wal}.db-wal"));
        assert_eq!(wal.exists(), persistent_wal, "the -wal file after close");
        let db = litelane::Database::open(&path, opts).unwrap();
        assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 10);
    }
}

/// The everyday way to restore a backup: with every handle closed, move
/// the copy over the database file. Nothing of the old file may come back.
/// With a WAL kept across close (`persistent_wal`, once the default), the
/// old WAL's frames, still valid, were applied to the restored file on the
/// next open: it read back the old rows.
#[test]
fn a_database_file_replaced_while_closed_reads_as_the_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let backup = dir.path().join("backup.db");
    {
        let b = rusqlite::Connection::open(&backup).unwrap();
        b.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES ('from the backup');")
            .unwrap();
    }
    {
        let db = litelane::Database::open(&path, Options::default()).unwrap();
        exec(&db, "CREATE TABLE t(x)");
        for i in 0..50 {
            db.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (?1)", [format!("old {i}")])?))
                .unwrap();
        }
    }
    std::fs::rename(&backup, &path).unwrap();
    let db = litelane::Database::open(&path, Options::default()).unwrap();
    let rows: Vec<String> = db
        .read(|c| {
            let mut st = c.prepare("SELECT x FROM t")?;
            let rows = st.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .unwrap();
    assert_eq!(rows, ["from the backup"]);
}

#[test]
fn checkpoint_modes_parse_and_report() {
    let (_dir, db) = temp_db(with_checkpoints(
        1_000_000,
        1_000_000,
        Duration::from_secs(3600),
    ));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    for i in 0..10 {
        write_page(&db, i);
    }
    for name in ["passive", "full", "restart", "truncate"] {
        let mode: CheckpointMode = name.parse().unwrap();
        let rep = db.checkpoint(mode).unwrap();
        assert_eq!(rep.mode.name(), name);
        assert!(!rep.busy);
        assert_eq!(rep.wal_frames, rep.checkpointed_frames);
    }
    assert!("sometimes".parse::<CheckpointMode>().is_err());
}

#[test]
fn a_steady_stream_of_commits_gets_one_checkpoint_per_threshold_not_one_per_commit() {
    const THRESHOLD: u64 = 100;
    const COMMITS: i64 = 2000;
    let (_dir, db) = temp_db(with_checkpoints(
        THRESHOLD as u32,
        1_000_000,
        Duration::from_secs(3600),
    ));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    for i in 0..COMMITS {
        write_page(&db, i);
    }
    let m = db.metrics();
    // Each commit adds 2-3 WAL frames (the new leaf and the pages above it),
    // so one checkpoint per THRESHOLD new frames is one per 30-50 commits;
    // one per commit (the bug this pins) would be ~2,000.
    let bound = COMMITS as u64 / 10;
    assert!(m.checkpoints > 0);
    assert!(
        m.checkpoints <= bound,
        "{} checkpoints for {COMMITS} commits (bound {bound})",
        m.checkpoints
    );
}

#[test]
fn escalated_checkpoints_between_grouped_writers_never_deadlock() {
    // Four writers form groups while a tiny WAL limit makes the checkpointer
    // take priority turns again and again. A group must never be handed to
    // the checkpoint's turn (it would find a transaction open on the writer).
    let mut opts = holding_writers(10, 40, Duration::from_secs(3600));
    // A reader that outlasts the escalation's wait makes escalations fail, so
    // later ones run while writers are free to group (the gate stays open).
    opts.checkpoints.escalation_wait = Duration::from_millis(50);
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    let (snap_tx, snap_rx) = mpsc::channel();
    let reader = {
        let db = db.clone();
        thread::spawn(move || {
            db.read(|c| {
                c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
                snap_tx.send(()).unwrap();
                thread::sleep(Duration::from_millis(800));
                Ok(())
            })
            .unwrap()
        })
    };
    snap_rx.recv().unwrap();
    // The writers run while the reader holds its snapshot and go on for 300
    // writes each after it ends, whatever the machine's speed, so that
    // escalations also happen with the reader gone.
    let reader_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();
    for w in 0..4i64 {
        let db = db.clone();
        let done_tx = done_tx.clone();
        let reader_done = reader_done.clone();
        thread::spawn(move || {
            let mut i = 0;
            let mut after = 0;
            while after < 300 {
                if reader_done.load(std::sync::atomic::Ordering::SeqCst) {
                    after += 1;
                }
                write_page(&db, w * 1_000_000 + i);
                i += 1;
            }
            done_tx.send(i).unwrap();
        });
    }
    reader.join().unwrap();
    reader_done.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut written = 0;
    for _ in 0..4 {
        written += done_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("writers stuck: deadlock between group commit and an escalated checkpoint");
    }
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), written);
    let m = db.metrics();
    assert!(m.checkpoints_escalated > 0, "{m:?}");
    assert!(m.mean_group_size() > 1.0, "groups formed: {m:?}");
    assert_eq!(m.busy_errors, 0);
}

#[test]
fn holding_writers_a_pinned_wal_stalls_writers_once_names_the_reader_and_clears() {
    // A read holds its snapshot far longer than the escalation may wait. The
    // WAL cannot restart until it ends: writers are held back for one
    // escalation, not one per `limit_pages` of growth, and the metrics name
    // the read.
    let mut opts = holding_writers(10, 50, Duration::from_secs(3600));
    opts.checkpoints.escalation_wait = Duration::from_millis(300);
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    let (end_tx, reader) = pin_snapshot(&db, "slow report");
    // ~20 limits' worth of WAL while the read holds its snapshot.
    for i in 0..1000 {
        write_page(&db, i);
    }
    let pinned = db
        .metrics()
        .wal_pinned_by
        .expect("the pinning read is named");
    assert_eq!(pinned.label, "slow report");
    assert!(pinned.sql.contains("count(*)"), "{pinned:?}");
    assert!(pinned.age > Duration::from_millis(300), "{pinned:?}");
    let m = db.metrics();
    eprintln!(
        "pinned WAL: {} escalations, longest writer wait {:?}, WAL {} pages",
        m.checkpoints_escalated, m.queue_wait_max, m.wal_pages
    );
    assert!(
        m.checkpoints_escalated <= 2,
        "escalations repeated while the same read pinned the WAL: {}",
        m.checkpoints_escalated
    );
    // Generous bound (a loaded machine); without the rule above the writers
    // wait once per escalation, ~20 × 300 ms in all.
    assert!(
        m.queue_wait_max < Duration::from_millis(300) * 4,
        "longest writer stall {:?}",
        m.queue_wait_max
    );
    // The escalation waited out its 300 ms for the read with the writers
    // held: the metric the soak asserts on sees it.
    assert!(
        m.checkpoint_hold_max >= Duration::from_millis(300),
        "longest checkpoint hold {:?}",
        m.checkpoint_hold_max
    );
    let over = m
        .wal_over_limit
        .as_ref()
        .expect("the WAL is over its limit");
    assert!(
        matches!(&over.reason, OverLimitReason::PinnedByRead(r) if r.label == "slow report"),
        "{over:?}"
    );
    end_tx.send(()).unwrap();
    reader.join().unwrap();
    // Once the read is gone, the next checkpoint copies everything and the
    // WAL restarts: nobody pins it any more.
    assert!(eventually(Duration::from_secs(20), || {
        let _ = db.checkpoint(CheckpointMode::Restart);
        write_page(&db, 5000);
        db.metrics().wal_pinned_by.is_none() && db.metrics().wal_pages < 50
    }));
}

#[test]
fn reads_older_than_max_read_age_are_interrupted_with_a_clear_error() {
    let mut opts = with_checkpoints(10, 50, Duration::from_secs(3600));
    opts.checkpoints.escalation_wait = Duration::from_millis(100);
    opts.checkpoints.max_read_age = Some(Duration::from_millis(200));
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    write_page(&db, 0);
    let (started_tx, started_rx) = mpsc::channel();
    let reader = {
        let db = db.clone();
        thread::spawn(move || {
            db.read_labeled("runaway", |c| {
                c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
                started_tx.send(()).unwrap();
                // A statement that would run for minutes.
                Ok(c.query_row(
                    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) \
                     SELECT count(*) FROM n",
                    [],
                    |r| r.get::<_, i64>(0),
                )?)
            })
        })
    };
    started_rx.recv().unwrap();
    thread::sleep(Duration::from_millis(250));
    for i in 1..200 {
        write_page(&db, i);
    }
    let err = reader
        .join()
        .unwrap()
        .expect_err("the runaway read is interrupted");
    assert_eq!(err.sqlite_code(), Some(9), "{err}");
    assert!(err.to_string().contains("max_read_age"), "{err}");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 200);
}

#[test]
fn external_mode_leaves_every_checkpoint_to_another_process() {
    let opts = Options {
        checkpoints: litelane::Checkpoints::external(),
        ..Options::default()
    };
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    // Past SQLite's own automatic threshold (1000 pages) and litelane's
    // default limit: nobody checkpoints, so the WAL only grows.
    let mut last = 0;
    for i in 0..1200 {
        write_page(&db, i);
        let pages = db.metrics().wal_pages;
        assert!(
            pages >= last,
            "a checkpoint ran at write {i}: {last} -> {pages}"
        );
        last = pages;
    }
    let m = db.metrics();
    assert!(
        m.wal_pages >= 1200,
        "the WAL kept every page: {}",
        m.wal_pages
    );
    assert_eq!(m.checkpoints, 0);
    assert_eq!(m.checkpoints_escalated, 0);
    // The other process (here, a plain connection) can checkpoint it all.
    let path = db.path().unwrap().to_path_buf();
    let other = rusqlite::Connection::open(&path).unwrap();
    let (busy, log, done): (i64, i64, i64) = other
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!((busy, log, done), (0, 0, 0), "truncated WAL");
}

#[test]
fn holding_writers_a_stream_of_long_reads_stalls_writers_only_now_and_then() {
    // Back-to-back reads of 600 ms each, each outlasting the escalation's
    // 150 ms wait, while writers fill the WAL past its limit again and again.
    // The checkpointer does not escalate while a read is old, and after
    // escalations that reads outlast it waits 2, 4, 8... × 150 ms: in 4 s of
    // writing, a few escalations (4 here), not one per read (7).
    let mut opts = holding_writers(10, 40, Duration::from_secs(3600));
    opts.checkpoints.escalation_wait = Duration::from_millis(150);
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), std::sync::Arc::clone(&stop));
        thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                db.read_labeled("long report", |c| {
                    c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
                    thread::sleep(Duration::from_millis(600));
                    Ok(())
                })
                .unwrap();
                reads += 1;
            }
            reads
        })
    };
    let start = std::time::Instant::now();
    let mut i = 0;
    while start.elapsed() < Duration::from_secs(4) {
        write_page(&db, i);
        i += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().unwrap();
    let m = db.metrics();
    eprintln!(
        "{reads} long reads, {i} writes: {} escalations, longest writer wait {:?}",
        m.checkpoints_escalated, m.queue_wait_max
    );
    assert!(reads >= 5, "{reads}");
    assert!(
        m.checkpoints_escalated <= 5,
        "{} escalations for {reads} long reads",
        m.checkpoints_escalated
    );
}

#[test]
fn a_steady_stream_of_commits_restarts_the_wal_instead_of_growing_it() {
    // SQLite starts the WAL over only in a write transaction that begins
    // with every frame copied back. The background checkpointer runs beside
    // the writer, so without its catch-up (a short FULL checkpoint in a turn
    // of its own) that moment never comes and the WAL grows to its limit.
    const COMMITS: i64 = 5000;
    let (_dir, db) = temp_db(with_checkpoints(100, 1_000_000, Duration::from_secs(3600)));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    // A restart shows as a commit after which the WAL holds fewer frames
    // than after the one before.
    let (mut restarts, mut last) = (0, 0);
    for i in 0..COMMITS {
        write_page(&db, i);
        let pages = db.metrics().wal_pages;
        restarts += usize::from(pages < last);
        last = pages;
    }
    let m = db.metrics();
    // Each commit adds 2-3 frames of 4 KiB: without the catch-up the WAL
    // never restarted (3,000 commits left 38.9 MB). With it, about every
    // few hundred commits; on a loaded machine (a debug build beside the
    // other tests) the checkpointer falls behind for stretches, so the
    // count asked for is small, and the size bound loose.
    assert!(
        restarts >= 3 && m.wal_file_bytes < 48 << 20,
        "{restarts} restarts, the WAL file at {} bytes over {COMMITS} commits: {m:?}",
        m.wal_file_bytes
    );
    assert_eq!(m.checkpoints_escalated, 0, "{m:?}");
}

/// The longest a write may take in the tests below while a read pins the
/// WAL: generous for a debug build on a loaded machine, far below the
/// seconds a write waited behind an escalated checkpoint.
const WRITE_BOUND: Duration = Duration::from_millis(250);
/// The longest a checkpoint may hold the writers in them (its catch-up).
const HOLD_BOUND: Duration = Duration::from_millis(100);

/// The default (`OverLimit::Grow`): a read holds its snapshot for 1.5 s
/// while four threads write; no write waits on a checkpoint, the WAL grows
/// past its limit meanwhile and the metrics name the read, and once the
/// read ends the WAL is copied back and starts over under its limit.
#[test]
fn a_read_pinning_the_wal_never_stalls_writers_and_the_wal_comes_back_when_it_ends() {
    const LIMIT: u64 = 100;
    let opts = with_checkpoints(20, LIMIT as u32, Duration::from_secs(3600));
    assert_eq!(opts.checkpoints.over_limit, OverLimit::Grow, "the default");
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    let (end_tx, reader) = pin_snapshot(&db, "nightly report");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4i64)
        .map(|w| {
            let (db, stop) = (db.clone(), std::sync::Arc::clone(&stop));
            thread::spawn(move || {
                let (mut i, mut longest) = (0, Duration::ZERO);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = std::time::Instant::now();
                    write_page(&db, w * 1_000_000 + i);
                    longest = longest.max(t.elapsed());
                    i += 1;
                    thread::sleep(Duration::from_millis(1));
                }
                (i, longest)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));
    let pinned = db.metrics();
    let over = pinned
        .wal_over_limit
        .clone()
        .unwrap_or_else(|| panic!("the WAL is over its limit while pinned: {pinned:?}"));
    assert!(
        over.wal_pages > LIMIT && over.limit_pages == LIMIT,
        "{over:?}"
    );
    assert!(over.duration > Duration::ZERO, "{over:?}");
    match &over.reason {
        OverLimitReason::PinnedByRead(r) => {
            assert_eq!(r.label, "nightly report");
            assert!(r.sql.contains("count(*)"), "{r:?}");
            assert!(r.age >= Duration::from_millis(1000), "{r:?}");
        }
        other => panic!("the read is named as the cause: {other:?}"),
    }
    end_tx.send(()).unwrap();
    reader.join().unwrap();
    let ended = std::time::Instant::now();
    // The writers go on: the WAL must come back under its limit by itself.
    let back = eventually(Duration::from_secs(20), || {
        let m = db.metrics();
        m.wal_over_limit.is_none() && m.wal_pages < LIMIT
    });
    let took = ended.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = 0;
    let mut longest = Duration::ZERO;
    for w in writers {
        let (n, l) = w.join().unwrap();
        written += n;
        longest = longest.max(l);
    }
    let m = db.metrics();
    eprintln!(
        "pinned 1.5 s: WAL {} pages (limit {LIMIT}), back under it {took:?} after the read ended; \
         {written} writes, longest {longest:?}; longest checkpoint hold {:?} ({} holds)",
        over.wal_pages, m.checkpoint_hold_max, m.checkpoint_holds
    );
    assert!(
        back,
        "the WAL stayed over its limit after the read ended: {m:?}"
    );
    assert!(longest < WRITE_BOUND, "a write took {longest:?}");
    assert!(
        m.checkpoint_hold_max < HOLD_BOUND,
        "a checkpoint held the writers {:?}",
        m.checkpoint_hold_max
    );
    assert_eq!(m.checkpoints_escalated, 0);
    assert!(m.wal_over_limit_count >= 1 && m.wal_over_limit_time >= Duration::from_millis(500));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), written);
}

/// A reader of another process (here a plain connection) pins the WAL:
/// writers go on, and the metrics say the cause is elsewhere.
#[test]
fn a_read_of_another_process_pinning_the_wal_is_reported_as_elsewhere() {
    const LIMIT: u64 = 50;
    let (_dir, db) = temp_db(with_checkpoints(
        10,
        LIMIT as u32,
        Duration::from_secs(3600),
    ));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    write_page(&db, 0);
    let other = rusqlite::Connection::open(db.path().unwrap()).unwrap();
    other.execute_batch("BEGIN").unwrap();
    let n: i64 = other
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    let mut longest = Duration::ZERO;
    for i in 1..400 {
        let t = std::time::Instant::now();
        write_page(&db, i);
        longest = longest.max(t.elapsed());
    }
    // The checkpointer retries every 10 ms: wait until it has seen the WAL
    // pinned (until then the reason is `CatchingUp`; on a loaded machine its
    // thread may not run for a while).
    let pinned = |m: &litelane::Metrics| {
        m.wal_over_limit
            .as_ref()
            .is_some_and(|o| o.reason == OverLimitReason::PinnedElsewhere)
    };
    assert!(
        eventually(Duration::from_secs(10), || pinned(&db.metrics())),
        "{:?}",
        db.metrics()
    );
    let m = db.metrics();
    assert!(pinned(&m), "{m:?}");
    assert!(m.wal_pages > LIMIT * 4, "{m:?}");
    assert!(longest < WRITE_BOUND, "a write took {longest:?}");
    other.execute_batch("COMMIT").unwrap();
    let mut i = 400;
    assert!(eventually(Duration::from_secs(20), || {
        write_page(&db, i);
        i += 1;
        db.metrics().wal_over_limit.is_none()
    }));
    assert!(db.metrics().wal_pages < LIMIT);
}

/// An explicit PASSIVE checkpoint runs beside the writers: it returns while
/// a write holds the writer's turn, and the writer never waits for it.
#[test]
fn an_explicit_passive_checkpoint_does_not_wait_for_the_writer() {
    let (_dir, db) = temp_db(with_checkpoints(
        1_000_000,
        1_000_000,
        Duration::from_secs(3600),
    ));
    exec(&db, "CREATE TABLE t(i INTEGER, pad BLOB)");
    for i in 0..20 {
        write_page(&db, i);
    }
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let holder = {
        let db = db.clone();
        thread::spawn(move || {
            db.write(move |tx| {
                tx.execute("INSERT INTO t(i) VALUES (-1)", [])?;
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                Ok(())
            })
        })
    };
    held_rx.recv().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    {
        let db = db.clone();
        thread::spawn(move || {
            done_tx
                .send(db.checkpoint(CheckpointMode::Passive))
                .unwrap()
        });
    }
    let report = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the PASSIVE checkpoint returned while the write held the writer")
        .unwrap();
    assert!(!report.busy, "{report:?}");
    assert_eq!(report.wal_frames, report.checkpointed_frames);
    go_tx.send(()).unwrap();
    holder.join().unwrap().unwrap();
    assert_eq!(db.metrics().checkpoint_holds, 0, "no writer waited for it");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 21);
}
