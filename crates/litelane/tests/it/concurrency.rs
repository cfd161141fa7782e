//! Many writers and readers at once: every row lands, order is kept, the
//! queue is FIFO, nobody sees SQLITE_BUSY, readers see only committed data.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use common::{exec, query_i64, temp_db, wait_for_queue_depth};
use litelane::{Database, Options, Profile};

const WRITERS: i64 = 8;
const TXNS_PER_WRITER: i64 = 150;

fn run_writers_and_readers(profile: Profile, group_commit: bool) {
    let mut opts = Options::with_profile(profile);
    opts.group_commit.enabled = group_commit;
    opts.readers = 4;
    let (_dir, db) = temp_db(opts);
    exec(
        &db,
        "CREATE TABLE ledger(id INTEGER PRIMARY KEY, writer INTEGER, seq INTEGER, amount INTEGER)",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut last_count = 0;
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (count, sum): (i64, i64) = db
                        .read(|c| {
                            Ok(c.query_row(
                                "SELECT count(*), coalesce(sum(amount), 0) FROM ledger",
                                [],
                                |r| Ok((r.get(0)?, r.get(1)?)),
                            )?)
                        })
                        .expect("read");
                    // Each transaction writes +1 and -1: a committed snapshot
                    // always has an even count and a zero sum.
                    assert_eq!(count % 2, 0, "reader saw half a transaction");
                    assert_eq!(sum, 0, "reader saw half a transaction");
                    assert!(count >= last_count, "snapshot went back in time");
                    last_count = count;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            thread::spawn(move || {
                for seq in 0..TXNS_PER_WRITER {
                    db.write(|tx| {
                        let mut st = tx.prepare_cached(
                            "INSERT INTO ledger(writer, seq, amount) VALUES (?, ?, ?)",
                        )?;
                        st.execute((w, seq, 1))?;
                        st.execute((w, seq, -1))?;
                        Ok(())
                    })
                    .expect("write");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread");
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader thread") > 0);
    }
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM ledger"),
        WRITERS * TXNS_PER_WRITER * 2
    );
    // Within each writer, rows were stored in the order it wrote them.
    let out_of_order = query_i64(
        &db,
        "SELECT count(*) FROM ledger a JOIN ledger b ON a.writer = b.writer AND a.id < b.id AND a.seq > b.seq",
    );
    assert_eq!(out_of_order, 0);
    let m = db.metrics();
    assert_eq!(m.busy_errors, 0);
    assert_eq!(m.transactions as i64, WRITERS * TXNS_PER_WRITER + 1);
    assert_eq!(m.rollbacks, 0);
    if !group_commit {
        assert_eq!(m.commits, m.transactions);
    }
}

#[test]
fn concurrent_writers_and_readers_lose_nothing_and_never_see_busy_balanced() {
    run_writers_and_readers(Profile::Balanced, true);
}

#[test]
fn concurrent_writers_and_readers_lose_nothing_and_never_see_busy_safe() {
    run_writers_and_readers(Profile::Safe, true);
}

#[test]
fn concurrent_writers_without_group_commit_commit_once_per_write() {
    run_writers_and_readers(Profile::Balanced, false);
}

#[test]
fn concurrent_writers_and_readers_work_under_the_fast_profile() {
    run_writers_and_readers(Profile::Fast, true);
}

#[test]
fn writers_get_their_turn_in_arrival_order() {
    let (_dir, db) = temp_db(Options::default());
    exec(
        &db,
        "CREATE TABLE arrivals(id INTEGER PRIMARY KEY, who INTEGER)",
    );
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let holder = {
        let db = db.clone();
        thread::spawn(move || {
            db.write(move |_| {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                Ok(())
            })
            .unwrap()
        })
    };
    started_rx.recv().unwrap();
    let mut waiters = Vec::new();
    for who in 0..6i64 {
        let db2 = db.clone();
        waiters.push(thread::spawn(move || {
            db2.write(|tx| Ok(tx.execute("INSERT INTO arrivals(who) VALUES (?)", [who])?))
                .unwrap()
        }));
        // The next thread starts only once this one is queued.
        wait_for_queue_depth(&db, who as usize + 1);
    }
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    let order: Vec<i64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT who FROM arrivals ORDER BY id")?;
            let rows = st.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .unwrap();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5]);
    let m = db.metrics();
    assert!(m.queue_wait_max > std::time::Duration::ZERO);
}

#[test]
fn a_long_wait_names_the_transaction_that_held_the_writer() {
    let opts = Options {
        long_wait: std::time::Duration::from_millis(20),
        ..Options::default()
    };
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(x)");
    let (started_tx, started_rx) = mpsc::channel();
    let holder = {
        let db = db.clone();
        thread::spawn(move || {
            db.write_labeled("slow nightly job", |tx| {
                tx.execute("INSERT INTO t VALUES (42)", [])?;
                started_tx.send(()).unwrap();
                thread::sleep(std::time::Duration::from_millis(100));
                Ok(())
            })
            .unwrap()
        })
    };
    started_rx.recv().unwrap();
    db.write_labeled("impatient", |tx| {
        Ok(tx.execute("INSERT INTO t VALUES (1)", [])?)
    })
    .unwrap();
    holder.join().unwrap();
    let waits = db.metrics().long_waits;
    let w = waits.last().expect("a long wait was recorded");
    assert_eq!(w.holder_label, "slow nightly job");
    assert_eq!(w.waiter_label, "impatient");
    assert!(w.holder_sql.contains("INSERT INTO t VALUES (42)"), "{w:?}");
    assert!(w.waited >= std::time::Duration::from_millis(20));
}

#[test]
fn another_process_waits_through_busy_timeout_then_gets_a_clear_busy_error() {
    // Two Database values on one file compete like two processes would: each
    // has its own in-process queue, and they meet in the cross-process queue
    // (the `<db>-lane` lock file), which honours busy_timeout like SQLite.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let first = litelane::Database::open(&path, Options::default()).unwrap();
    exec(&first, "CREATE TABLE t(who TEXT)");
    let patient = litelane::Database::open(&path, Options::default()).unwrap();
    let impatient = litelane::Database::open(
        &path,
        Options {
            busy_timeout: std::time::Duration::from_millis(50),
            ..Options::default()
        },
    )
    .unwrap();
    let (held_tx, held_rx) = mpsc::channel();
    let holder = {
        let first = first.clone();
        thread::spawn(move || {
            first
                .write(|tx| {
                    tx.execute("INSERT INTO t VALUES ('first')", [])?;
                    held_tx.send(()).unwrap();
                    thread::sleep(std::time::Duration::from_millis(400));
                    Ok(())
                })
                .unwrap()
        })
    };
    held_rx.recv().unwrap();
    let err = impatient
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES ('impatient')", [])?))
        .unwrap_err();
    assert!(err.is_busy(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("another process held the write turn"),
        "{text}"
    );
    assert!(
        text.contains(&format!("process {}", std::process::id())),
        "names the holder: {text}"
    );
    assert_eq!(impatient.metrics().busy_errors, 1);
    // busy_timeout of 5 s outlasts the 400 ms hold: the write waits, then lands.
    patient
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES ('patient')", [])?))
        .unwrap();
    holder.join().unwrap();
    assert_eq!(
        query_i64(
            &first,
            "SELECT count(*) FROM t WHERE who IN ('first', 'patient')"
        ),
        2
    );
    assert_eq!(
        query_i64(&first, "SELECT count(*) FROM t WHERE who = 'impatient'"),
        0
    );
    let m = patient.metrics();
    assert_eq!(m.busy_errors, 0);
    // The wait behind the other "process" is attributed to it.
    let wait = m.long_waits.last().expect("a long wait recorded");
    assert!(wait.holder_label.starts_with("process "), "{wait:?}");
    assert!(
        wait.waited >= std::time::Duration::from_millis(100),
        "{wait:?}"
    );
}

/// More reading threads than readers: the ones that find every reader busy
/// wait and are woken when one goes back (a reader going back wakes someone
/// only when someone waits); `read_single` and `read` both see every row
/// committed before them.
#[test]
fn readers_fewer_than_reading_threads_all_finish() {
    let mut opts = Options::with_profile(Profile::Balanced);
    opts.readers = 2;
    let (_dir, db) = temp_db(opts);
    exec(&db, "CREATE TABLE t(x INTEGER)");
    exec(&db, "INSERT INTO t VALUES (1), (2), (3)");
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let db = db.clone();
            thread::spawn(move || {
                let mut sum = 0;
                for _ in 0..300 {
                    let q = |c: &litelane::rusqlite::Connection| {
                        Ok(c.query_row("SELECT sum(x) FROM t", [], |r| r.get::<_, i64>(0))?)
                    };
                    sum += if i % 2 == 0 {
                        db.read_single(q)
                    } else {
                        db.read(q)
                    }
                    .unwrap();
                }
                sum
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 300 * 6);
    }
}

/// A read on the writer's connection (`read_on_writer`) that was queued
/// behind a write gets the writer's turn from that write's leader, who left
/// the cross-process turn to the next writer of its process. When the read
/// ends with nobody else queued, that turn must be kept or given back as
/// after a write: another process (here a second `Database` on the file)
/// gets it within its timeout although the first never writes again.
#[test]
fn a_read_on_the_writer_after_a_write_does_not_keep_the_turn_from_other_processes() {
    for profile in [Profile::Balanced, Profile::Safe] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.db");
        let first = litelane::Database::open(&path, Options::with_profile(profile)).unwrap();
        exec(&first, "CREATE TABLE t(who TEXT)");
        let other = litelane::Database::open(
            &path,
            Options {
                busy_timeout: std::time::Duration::from_secs(2),
                ..Options::with_profile(profile)
            },
        )
        .unwrap();
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let writer = {
            let first = first.clone();
            thread::spawn(move || {
                first
                    .write(move |tx| {
                        tx.execute("INSERT INTO t VALUES ('first')", [])?;
                        held_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                        Ok(())
                    })
                    .unwrap()
            })
        };
        held_rx.recv().unwrap();
        let reader = {
            let first = first.clone();
            thread::spawn(move || {
                first
                    .read_on_writer(|c| {
                        Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?)
                    })
                    .unwrap()
            })
        };
        wait_for_queue_depth(&first, 1);
        go_tx.send(()).unwrap();
        writer.join().unwrap();
        assert_eq!(reader.join().unwrap(), 1);
        let start = std::time::Instant::now();
        let r = other.write(|tx| Ok(tx.execute("INSERT INTO t VALUES ('other')", [])?));
        assert!(
            r.is_ok(),
            "{profile:?}: the other process never got the turn: {r:?} after {:?}",
            start.elapsed()
        );
        assert_eq!(query_i64(&other, "SELECT count(*) FROM t"), 2);
    }
}

/// Engines that open one new database at the same moment all open it:
/// each sets WAL mode, which needs the file to itself for an instant, and
/// SQLite answers a connection that finds another one switching with
/// "database is locked" at once, without its busy handler. Each open waits
/// for its turn within its busy timeout instead.
#[test]
fn engines_opening_one_new_database_at_once_all_open_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = 6;
    for round in 0..40 {
        let path = dir.path().join(format!("new-{round}.db"));
        let barrier = std::sync::Barrier::new(n);
        let opened: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        Database::open(&path, Options::default())
                            .map(drop)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in opened {
            assert_eq!(r, Ok(()), "round {round}");
        }
    }
}
