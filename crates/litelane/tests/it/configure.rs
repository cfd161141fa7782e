//! `Database::configure`: a setup (here: user-defined functions) in force on
//! the writer, on every reader of the pool, and on connections opened later.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use common::{exec, query_i64, temp_db};
use litelane::rusqlite::functions::FunctionFlags;
use litelane::rusqlite::Connection;
use litelane::{Database, Options, Setup};

/// `name(x)` = `x * k`, deterministic and innocuous (so the schema may use
/// it with `trusted_schema=OFF`); counts the connections it was set on.
fn times(name: &'static str, k: i64, installs: Arc<AtomicUsize>) -> Setup {
    Arc::new(move |c: &mut Connection| {
        installs.fetch_add(1, Ordering::SeqCst);
        c.create_scalar_function(
            name,
            1,
            FunctionFlags::SQLITE_UTF8
                | FunctionFlags::SQLITE_DETERMINISTIC
                | FunctionFlags::SQLITE_INNOCUOUS,
            move |ctx| Ok(ctx.get::<i64>(0)? * k),
        )
    })
}

/// Runs `sql` on all `n` readers at once: each read waits inside its
/// snapshot until all `n` are inside theirs, so no two share a reader.
fn on_every_reader(db: &Database, n: usize, sql: &str) -> Vec<Result<i64, String>> {
    let barrier = Arc::new(Barrier::new(n));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    db.read(|c| {
                        barrier.wait();
                        Ok(c.query_row(sql, [], |r| r.get::<_, i64>(0))?)
                    })
                    .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_function_works_on_the_writer_and_on_every_reader() {
    let readers = 4;
    let (_dir, db) = temp_db(Options {
        readers,
        ..Options::default()
    });
    // Before: no reader and not the writer knows it.
    for r in on_every_reader(&db, readers, "SELECT triple(2)") {
        assert!(r.unwrap_err().contains("no such function: triple"));
    }
    let installs = Arc::new(AtomicUsize::new(0));
    db.configure("triple", times("triple", 3, Arc::clone(&installs)))
        .unwrap();
    assert_eq!(
        on_every_reader(&db, readers, "SELECT triple(2)"),
        vec![Ok(6); readers]
    );
    let on_writer: i64 = db
        .write(|tx| Ok(tx.query_row("SELECT triple(5)", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(on_writer, 15);
    // Once on the scratch connection, once on the writer, once per reader.
    assert_eq!(installs.load(Ordering::SeqCst), 1 + 1 + readers);
    // Reads again: each connection is configured once, not per use.
    for _ in 0..3 {
        on_every_reader(&db, readers, "SELECT triple(1)");
    }
    assert_eq!(installs.load(Ordering::SeqCst), 1 + 1 + readers);
    assert_eq!(db.configured(), vec!["triple".to_string()]);
}

#[test]
fn replacing_and_removing_by_key_reaches_every_connection() {
    let readers = 3;
    let (_dir, db) = temp_db(Options {
        readers,
        ..Options::default()
    });
    let n = Arc::new(AtomicUsize::new(0));
    db.configure("f", times("f", 2, Arc::clone(&n))).unwrap();
    assert_eq!(
        on_every_reader(&db, readers, "SELECT f(10)"),
        vec![Ok(20); readers]
    );
    db.configure("f", times("f", 7, Arc::clone(&n))).unwrap();
    assert_eq!(
        on_every_reader(&db, readers, "SELECT f(10)"),
        vec![Ok(70); readers]
    );
    assert_eq!(query_i64_on_writer(&db, "SELECT f(10)"), 70);
    db.configure(
        "f",
        Arc::new(|c: &mut Connection| c.remove_function("f", 1)),
    )
    .unwrap();
    for r in on_every_reader(&db, readers, "SELECT f(10)") {
        assert!(r.unwrap_err().contains("no such function: f"));
    }
    let gone = db.write(|tx| Ok(tx.query_row("SELECT f(1)", [], |r| r.get::<_, i64>(0))?));
    assert!(gone
        .unwrap_err()
        .to_string()
        .contains("no such function: f"));
}

fn query_i64_on_writer(db: &Database, sql: &str) -> i64 {
    db.write(|tx| Ok(tx.query_row(sql, [], |r| r.get(0))?))
        .unwrap()
}

#[test]
fn configure_never_waits_for_a_busy_connection() {
    let (_dir, db) = temp_db(Options {
        readers: 1,
        ..Options::default()
    });
    let n = Arc::new(AtomicUsize::new(0));
    // Inside a write closure (the writer is busy: its turn is ours) and
    // inside a read (the only reader is busy): both return at once, and
    // the busy connections get it when they are free again.
    db.write(|tx| {
        db.configure("g", times("g", 5, Arc::clone(&n)))?;
        let err = tx.query_row("SELECT g(1)", [], |r| r.get::<_, i64>(0));
        assert!(
            err.is_err(),
            "the writer is configured between writes, not inside one"
        );
        Ok(())
    })
    .unwrap();
    assert_eq!(query_i64_on_writer(&db, "SELECT g(2)"), 10);
    db.read(|c| {
        db.configure("h", times("h", 11, Arc::clone(&n)))?;
        assert!(c
            .query_row("SELECT h(1)", [], |r| r.get::<_, i64>(0))
            .is_err());
        Ok(())
    })
    .unwrap();
    assert_eq!(query_i64(&db, "SELECT h(2) + g(1)"), 27);
}

#[test]
fn a_setup_that_fails_is_refused_with_its_key() {
    let (_dir, db) = temp_db(Options::default());
    let bad: Setup = Arc::new(|c: &mut Connection| {
        // An argument count below -1 is refused.
        c.create_scalar_function("bad", -5, FunctionFlags::SQLITE_UTF8, |_| Ok(0))
    });
    let err = db.configure("bad one", bad).unwrap_err().to_string();
    assert!(err.contains("bad one"), "{err}");
    assert!(db.configured().is_empty());
}

#[test]
fn a_deterministic_function_in_an_index_and_a_generated_column() {
    let (dir, db) = temp_db(Options {
        readers: 2,
        ..Options::default()
    });
    let n = Arc::new(AtomicUsize::new(0));
    db.configure("twice", times("twice", 2, Arc::clone(&n)))
        .unwrap();
    exec(
        &db,
        "CREATE TABLE t(x INTEGER, y INTEGER GENERATED ALWAYS AS (twice(x)) VIRTUAL);
         CREATE INDEX t_twice ON t(twice(x));
         INSERT INTO t(x) VALUES (1), (2), (3);",
    );
    // The index is used (and its expression evaluated) on the readers.
    let plan: String = db
        .read(|c| {
            Ok(c.query_row(
                "EXPLAIN QUERY PLAN SELECT x FROM t WHERE twice(x) = 4",
                [],
                |r| r.get(3),
            )?)
        })
        .unwrap();
    assert!(plan.contains("t_twice"), "{plan}");
    assert_eq!(
        on_every_reader(&db, 2, "SELECT x FROM t WHERE twice(x) = 4"),
        vec![Ok(2); 2]
    );
    assert_eq!(query_i64(&db, "SELECT sum(y) FROM t"), 12);
    let path = dir.path().join("test.db");
    drop(db);

    // A database opened later on the same file parses the schema with the
    // function in force (configured before its first statement that uses it).
    let later = Database::open(&path, Options::default()).unwrap();
    later
        .configure("twice", times("twice", 2, Arc::clone(&n)))
        .unwrap();
    exec(&later, "INSERT INTO t(x) VALUES (10)");
    assert_eq!(query_i64(&later, "SELECT y FROM t WHERE twice(x) = 20"), 20);
    assert_eq!(
        query_i64(&later, "SELECT count(*) FROM t WHERE twice(x) > 2"),
        3
    );
    let check: String = later
        .read(|c| Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn a_write_queued_after_configure_has_it_even_in_a_group_begun_before() {
    let (_dir, db) = temp_db(Options {
        group_commit: litelane::GroupCommit {
            max_wait: std::time::Duration::from_secs(60),
            ..Default::default()
        },
        ..Options::default()
    });
    let n = Arc::new(AtomicUsize::new(0));
    let joined = std::thread::scope(|s| {
        db.write(|_tx| {
            // This turn (and its transaction) began before `configure`.
            db.configure("k", times("k", 3, Arc::clone(&n)))?;
            let joiner = s.spawn(|| {
                db.write(|tx| Ok(tx.query_row("SELECT k(4)", [], |r| r.get::<_, i64>(0))?))
            });
            // Queued behind this write: the leader runs it in its group.
            common::wait_for_queue_depth(&db, 1);
            Ok(joiner)
        })
        .unwrap()
        .join()
        .unwrap()
    });
    assert_eq!(joined.unwrap(), 12);
    assert_eq!(
        db.metrics().group_sizes.iter().sum::<u64>(),
        1,
        "one commit, of a group of two"
    );
}
