//! Commit, rollback on error and on panic, savepoints, and profiles.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{exec, query_i64, temp_db};
use litelane::{Database, Error, Options, Profile};

#[test]
fn an_error_in_the_closure_rolls_back_everything_it_wrote() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let r: litelane::Result<()> = db.write(|tx| {
        tx.execute("INSERT INTO t VALUES (1)", [])?;
        tx.execute("INSERT INTO t VALUES (2)", [])?;
        Err(Error::user("nope"))
    });
    assert_eq!(r.unwrap_err(), Error::user("nope"));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
    assert_eq!(db.metrics().rollbacks, 1);
}

#[test]
fn a_panic_in_the_closure_rolls_back_and_the_writer_stays_usable() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let caught = catch_unwind(AssertUnwindSafe(|| {
        db.write(|tx| -> litelane::Result<()> {
            tx.execute("INSERT INTO t VALUES (1)", [])?;
            panic!("boom");
        })
    }));
    assert!(caught.is_err(), "the panic reaches the caller");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
    db.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (3)", [])?))
        .unwrap();
    assert_eq!(query_i64(&db, "SELECT sum(x) FROM t"), 3);
}

#[test]
fn a_failing_statement_reports_sqlite_codes_and_keeps_earlier_commits() {
    let (_dir, db) = temp_db(Options::default());
    exec(
        &db,
        "CREATE TABLE t(id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);",
    );
    let err = db
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
        .unwrap_err();
    assert_eq!(err.sqlite_code(), Some(19));
    assert_eq!(err.sqlite_extended_code(), Some(1555));
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1);
}

#[test]
fn nested_writes_are_savepoints_that_roll_back_alone() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    db.write(|tx| {
        tx.execute("INSERT INTO t VALUES (1)", [])?;
        tx.write(|tx| {
            tx.execute("INSERT INTO t VALUES (2)", [])?;
            let inner: litelane::Result<()> = tx.write(|tx| {
                tx.execute("INSERT INTO t VALUES (100)", [])?;
                Err(Error::user("undo only me"))
            });
            assert!(inner.is_err());
            Ok(())
        })?;
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            tx.write(|tx| -> litelane::Result<()> {
                tx.execute("INSERT INTO t VALUES (1000)", [])?;
                panic!("inner panic");
            })
        }));
        assert!(panicked.is_err());
        Ok(())
    })
    .unwrap();
    assert_eq!(query_i64(&db, "SELECT sum(x) FROM t"), 3);
}

#[test]
fn an_outer_rollback_undoes_released_savepoints_too() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let r: litelane::Result<()> = db.write(|tx| {
        tx.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))?;
        Err(Error::user("outer fails"))
    });
    assert!(r.is_err());
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
}

#[test]
fn calling_write_inside_write_on_the_same_thread_is_an_error_not_a_deadlock() {
    let (_dir, db) = temp_db(Options::default());
    let inner_err = db.write(|_| Ok(db.write(|_| Ok(())).unwrap_err())).unwrap();
    assert!(
        matches!(inner_err, Error::InvalidInput { .. }),
        "{inner_err}"
    );
    assert!(inner_err.to_string().contains("tx.write"));
}

fn pragma(db: &Database, name: &str, on_writer: bool) -> String {
    let sql = format!("PRAGMA {name}");
    let get = |c: &litelane::rusqlite::Connection| -> litelane::Result<String> {
        Ok(c.query_row(&sql, [], |r| r.get::<_, litelane::Value>(0))
            .map(|v| match v {
                litelane::Value::Integer(i) => i.to_string(),
                litelane::Value::Text(s) => s,
                other => format!("{other:?}"),
            })?)
    };
    if on_writer {
        db.write(|tx| get(tx)).unwrap()
    } else {
        db.read(|c| get(c)).unwrap()
    }
}

#[test]
fn each_profile_sets_the_journal_mode_and_synchronous_it_claims() {
    for (profile, journal, sync) in [
        (Profile::Safe, "wal", "2"),
        (Profile::Balanced, "wal", "1"),
        (Profile::Fast, "memory", "0"),
    ] {
        let (_dir, db) = temp_db(Options::with_profile(profile));
        for on_writer in [true, false] {
            assert_eq!(
                pragma(&db, "journal_mode", on_writer),
                journal,
                "{profile} journal_mode"
            );
            // Under safe the writer commits with NORMAL and then syncs the
            // WAL itself, after its turn, sharing that fsync with other
            // processes (xproc/durable.rs; the power-cut campaigns in
            // litelane-faultvfs prove every acknowledged commit survives).
            let expected = match (profile, on_writer) {
                (Profile::Safe, true) => "1",
                _ => sync,
            };
            assert_eq!(
                pragma(&db, "synchronous", on_writer),
                expected,
                "{profile} synchronous"
            );
            assert_eq!(pragma(&db, "foreign_keys", on_writer), "1");
            assert_eq!(pragma(&db, "trusted_schema", on_writer), "0");
        }
        assert_eq!(
            pragma(&db, "query_only", false),
            "1",
            "readers are query_only"
        );
        assert_eq!(pragma(&db, "query_only", true), "0");
        if journal == "wal" {
            assert_eq!(
                pragma(&db, "wal_autocheckpoint", true),
                "0",
                "commits never checkpoint"
            );
            assert_eq!(
                pragma(&db, "journal_size_limit", true),
                (64 * 1024 * 1024).to_string()
            );
        }
    }
}

#[test]
fn double_quoted_strings_are_identifiers_only() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let err = db
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES (\"not a string\")", [])?))
        .unwrap_err();
    assert!(err.to_string().contains("no such column"), "{err}");
}

#[test]
fn readers_cannot_write() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let err = db
        .read(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?))
        .unwrap_err();
    assert_eq!(err.sqlite_code(), Some(8), "SQLITE_READONLY: {err}");
}

#[test]
fn in_memory_readers_see_what_the_writer_committed() {
    let db = Database::open_in_memory(Options::default()).unwrap();
    exec(&db, "CREATE TABLE t(x); INSERT INTO t VALUES (7);");
    assert_eq!(query_i64(&db, "SELECT x FROM t"), 7);
    let other = Database::open_in_memory(Options::default()).unwrap();
    let err = other
        .read(|c| Ok(c.query_row("SELECT x FROM t", [], |r| r.get::<_, i64>(0))?))
        .unwrap_err();
    assert!(
        err.to_string().contains("no such table"),
        "two in-memory databases are separate: {err}"
    );
}

#[test]
fn statements_outside_a_transaction_commit_on_their_own_durably_as_the_profile_says() {
    for profile in [Profile::Safe, Profile::Balanced, Profile::Fast] {
        let (dir, db) = temp_db(Options::with_profile(profile));
        exec(&db, "CREATE TABLE t(x)");
        let before = db.metrics();
        db.write_outside_transaction("pragma and insert", |c| {
            c.execute_batch("PRAGMA user_version = 3")?;
            c.execute("INSERT INTO t VALUES (1)", [])?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{profile:?}: {e}"));
        assert_eq!(query_i64(&db, "PRAGMA user_version"), 3, "{profile:?}");
        assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1, "{profile:?}");
        let after = db.metrics();
        if profile == Profile::Safe && after.process_queue_off.is_none() {
            assert!(
                after.wal_syncs + after.syncs_shared > before.wal_syncs + before.syncs_shared,
                "safe: the commits outside a transaction were not made durable"
            );
        }
        // A transaction left open is rolled back; the writer goes on.
        db.write_outside_transaction("left open", |c| {
            Ok(c.execute_batch("BEGIN; INSERT INTO t VALUES (2)")?)
        })
        .unwrap();
        assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1, "{profile:?}");
        exec(&db, "INSERT INTO t VALUES (3)");
        let path = dir.path().join("test.db");
        drop(db);
        let again = Database::open(&path, Options::with_profile(profile)).unwrap();
        assert_eq!(query_i64(&again, "PRAGMA user_version"), 3, "{profile:?}");
        assert_eq!(query_i64(&again, "SELECT sum(x) FROM t"), 4, "{profile:?}");
        drop((again, dir));
    }
}

#[test]
fn a_connection_pragma_outside_a_transaction_does_not_wait_for_another_handles_transaction() {
    let (dir, a) = temp_db(Options::with_profile(Profile::Safe));
    exec(&a, "CREATE TABLE t(x)");
    let mut opts = Options::with_profile(Profile::Safe);
    opts.busy_timeout = std::time::Duration::from_millis(500);
    let b = Database::open(dir.path().join("test.db"), opts).unwrap();
    // `a` holds the writer, and with it the turn among processes.
    let mut held = a.hold_writer("held").unwrap();
    held.run(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", [])?))
        .unwrap();
    // What Django's backend runs on every new connection.
    b.write_outside_transaction("connect", |c| {
        Ok(c.execute_batch("PRAGMA foreign_keys = ON")?)
    })
    .expect("a pragma that commits nothing waited for the other handle's transaction");
    held.commit().unwrap();
    assert_eq!(query_i64(&b, "SELECT count(*) FROM t"), 1);
}
