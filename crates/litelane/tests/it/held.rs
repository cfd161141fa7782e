//! `HeldWrite`: a transaction its caller holds across calls on its own
//! thread, taken only when the writer is free.

use crate::common;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{exec, query_i64, temp_db, wait_for_queue_depth};
use litelane::{Database, Error, HeldWrite, Options, Profile};

fn hold(db: &Database) -> HeldWrite {
    db.try_hold_writer("test")
        .unwrap()
        .expect("the writer is free")
}

#[test]
fn a_held_write_is_send_so_a_binding_may_keep_it() {
    fn send<T: Send>() {}
    send::<HeldWrite>();
}

#[test]
fn commit_rollback_and_drop_each_end_it_as_they_say() {
    for profile in [Profile::Safe, Profile::Balanced, Profile::Fast] {
        let (_dir, db) = temp_db(Options::with_profile(profile));
        exec(&db, "CREATE TABLE t(x)");
        let mut tx = hold(&db);
        tx.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
            .unwrap();
        let seen = tx
            .run(|tx| Ok(tx.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?))
            .unwrap();
        assert_eq!(seen, 1, "reads its own writes");
        assert_eq!(
            query_i64(&db, "SELECT count(*) FROM t"),
            0,
            "readers see nothing yet"
        );
        tx.commit().unwrap();
        assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1);

        let mut tx = hold(&db);
        tx.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (2)", [])?))
            .unwrap();
        tx.rollback().unwrap();
        let mut tx = hold(&db);
        tx.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (3)", [])?))
            .unwrap();
        drop(tx);
        assert_eq!(query_i64(&db, "SELECT sum(x) FROM t"), 1, "{profile}");
        // and the writer is free again for everyone
        exec(&db, "INSERT INTO t VALUES (4)");
        assert_eq!(query_i64(&db, "SELECT sum(x) FROM t"), 5);
    }
}

#[test]
fn no_hold_while_another_write_holds_the_turn_and_writers_queue_behind_a_hold() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    // Another thread holds the turn: no hold, nothing done.
    let (inside, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let other = {
        let (db, inside, release) = (db.clone(), Arc::clone(&inside), Arc::clone(&release));
        thread::spawn(move || {
            db.write(|tx| {
                tx.execute("INSERT INTO t VALUES (10)", [])?;
                inside.wait();
                release.wait();
                Ok(())
            })
            .unwrap()
        })
    };
    inside.wait();
    assert!(db.try_hold_writer("test").unwrap().is_none());
    release.wait();
    other.join().unwrap();

    // A hold makes later writers wait, each then told its own outcome.
    let mut tx = hold(&db);
    tx.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
        .unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let writers: Vec<_> = (0..3)
        .map(|i| {
            let (db, done_tx) = (db.clone(), done_tx.clone());
            thread::spawn(move || {
                let r = db.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (?1)", [100 + i])?));
                done_tx.send(r.is_ok()).unwrap();
            })
        })
        .collect();
    wait_for_queue_depth(&db, 3);
    assert!(
        done_rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "they wait"
    );
    tx.commit().unwrap();
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(done_rx.iter().take(3).filter(|ok| *ok).count(), 3);
    assert_eq!(
        query_i64(&db, "SELECT sum(x) FROM t"),
        10 + 1 + 100 + 101 + 102
    );
}

#[test]
fn a_statement_that_ends_the_transaction_ends_the_hold_with_its_error() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x UNIQUE ON CONFLICT ROLLBACK)");
    let mut tx = hold(&db);
    tx.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
        .unwrap();
    let err = tx
        .run(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
        .unwrap_err();
    assert_eq!(
        err.sqlite_code(),
        Some(19),
        "the constraint's own error: {err}"
    );
    assert!(tx.has_ended());
    assert!(matches!(
        tx.run(|_| Ok(())).unwrap_err(),
        Error::RolledBack {
            retryable: false,
            ..
        }
    ));
    assert!(matches!(tx.commit().unwrap_err(), Error::RolledBack { .. }));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
    exec(&db, "INSERT INTO t VALUES (2)");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1);
}

#[test]
fn a_write_of_the_holding_thread_inside_a_statement_is_refused_not_a_deadlock() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let mut tx = hold(&db);
    let inner = tx.run(|_| db.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?)));
    assert!(
        matches!(inner, Err(Error::InvalidInput { .. })),
        "{inner:?}"
    );
    tx.commit().unwrap();
}

#[test]
fn a_deferred_foreign_key_violation_fails_the_commit_and_rolls_back() {
    let (_dir, db) = temp_db(Options::default());
    exec(
        &db,
        "CREATE TABLE p(id INTEGER PRIMARY KEY); \
         CREATE TABLE c(p REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);",
    );
    let mut tx = hold(&db);
    tx.run(|tx| Ok(tx.execute("INSERT INTO c VALUES (7)", [])?))
        .unwrap();
    let err = tx.commit().unwrap_err();
    assert_eq!(err.sqlite_code(), Some(19), "{err}");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM c"), 0);
    let m = db.metrics();
    assert!(m.rollbacks >= 1, "{m:?}");
}

#[test]
fn a_read_on_the_writer_runs_only_when_the_writer_is_free_and_sees_what_was_committed() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let count = |db: &Database| {
        db.try_read_on_writer(|c| {
            Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?)
        })
    };
    assert_eq!(count(&db).transpose().unwrap(), Some(1));
    // While a write holds the writer: nothing runs, the caller reads elsewhere.
    let mut tx = hold(&db);
    tx.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (2)", [])?))
        .unwrap();
    assert!(count(&db).is_none());
    tx.commit().unwrap();
    assert_eq!(count(&db).transpose().unwrap(), Some(2));
    // A read that tries to write is rolled back and the writer stays usable.
    let wrote = db.try_read_on_writer(|c| Ok(c.execute("INSERT INTO t VALUES (3)", [])?));
    assert!(wrote.is_some());
    exec(&db, "INSERT INTO t VALUES (4)");
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t WHERE x IN (2, 4)"),
        2
    );
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t WHERE x = 3"),
        0,
        "a read never commits"
    );
    // An error in the read is its own; the writer stays usable.
    let err = db.try_read_on_writer(|c| Ok(c.execute_batch("SELECT * FROM missing")?));
    assert!(err.unwrap().is_err());
    exec(&db, "INSERT INTO t VALUES (5)");
}

#[test]
fn threads_of_one_process_share_fsyncs_under_safe() {
    // Under `safe` with the queue on, a held write commits, hands the
    // writer's turn on, and only then syncs: the commits other threads make
    // during that fsync are covered by the next one. Every commit is still
    // acknowledged only once durable, so every row is there.
    let (dir, db) = temp_db(Options::with_profile(Profile::Safe));
    exec(&db, "CREATE TABLE t(th INTEGER, i INTEGER)");
    let (threads, each) = (8, 40);
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|th| {
            let (db, start) = (db.clone(), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for i in 0..each {
                    // A transaction held across calls, never grouped with
                    // another thread's: without the shared fsync each would
                    // sync alone.
                    let mut tx = loop {
                        match db.try_hold_writer("t").unwrap() {
                            Some(tx) => break tx,
                            None => thread::yield_now(),
                        }
                    };
                    tx.run(|tx| {
                        Ok(tx.execute("INSERT INTO t VALUES (?1, ?2)", (th as i64, i as i64))?)
                    })
                    .unwrap();
                    tx.commit().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let m = db.metrics();
    assert_eq!(
        m.wal_syncs + m.syncs_shared,
        (threads * each) as u64 + 1,
        "one durable commit per transaction (and the CREATE): {m:?}"
    );
    // Sharing needs an fsync that lasts long enough for another thread to
    // commit meanwhile; on a file system where it costs nothing (tmpfs)
    // there is nothing to share.
    let probe = dir.path().join("probe");
    let f = std::fs::File::create(&probe).unwrap();
    let started = std::time::Instant::now();
    for i in 0..5u8 {
        std::io::Write::write_all(&mut &f, &[i]).unwrap();
        f.sync_data().unwrap();
    }
    let fsync = started.elapsed() / 5;
    if fsync >= Duration::from_micros(20) {
        assert!(
            m.syncs_shared > 0,
            "no commit was covered by another thread's fsync ({fsync:?} each): {m:?}"
        );
    } else {
        eprintln!("an fsync here takes {fsync:?}: nothing to share, not checked");
    }
    drop(db);
    let c = rusqlite::Connection::open(dir.path().join("test.db")).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, (threads * each) as i64);
}
