//! Bad input is a clear error, never a panic, and leaves the database as it was.

use crate::common;

use common::{exec, query_i64, temp_db};
use litelane::{Database, Error, Options, Profile, Value};

#[test]
fn a_file_that_is_not_a_database_is_a_clear_error_and_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let content = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &content).unwrap();
    let err = match Database::open(&path, Options::default()) {
        Ok(_) => panic!("opened a text file as a database"),
        Err(e) => e,
    };
    assert_eq!(err.sqlite_code(), Some(26), "SQLITE_NOTADB: {err}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), content);
}

#[test]
fn a_database_opened_read_only_by_uri_reads_and_refuses_writes_with_sqlites_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.db");
    {
        let db = Database::open(&path, Options::default()).unwrap();
        exec(&db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
        db.checkpoint(litelane::CheckpointMode::Truncate).unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let uri = format!("file:{}?mode=ro", path.display());
    let db = Database::open(&uri, Options::default()).unwrap();
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1);
    let err = db
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES (2)", [])?))
        .unwrap_err();
    assert_eq!(err.sqlite_code(), Some(8), "SQLITE_READONLY: {err}");
    drop(db);
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file changed");
    let db = Database::open(&path, Options::default()).unwrap();
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 1);
}

#[test]
fn a_wal_file_opened_read_only_reads_under_every_profile() {
    // `fast` keeps its rollback journal in memory: on a file it may not
    // write, it leaves the file's WAL mode as it is (changing it would
    // take a write lock: "database is locked").
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let db = Database::open(&path, Options::default()).unwrap();
    exec(&db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let uri = format!("file:{}?mode=ro", path.display());
    for profile in [Profile::Safe, Profile::Balanced, Profile::Fast] {
        let ro = Database::open(&uri, Options::with_profile(profile))
            .unwrap_or_else(|e| panic!("{profile:?}: {e}"));
        assert_eq!(query_i64(&ro, "SELECT count(*) FROM t"), 1, "{profile:?}");
        let mode: String = ro
            .read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(mode, "wal", "{profile:?}");
    }
}

#[test]
fn bulk_insert_into_a_missing_table_names_the_table() {
    let (_dir, db) = temp_db(Options::default());
    let err = db
        .inserter("nowhere", &["a"])
        .unwrap()
        .insert([[Value::Integer(1)]])
        .unwrap_err();
    assert_eq!(err.sqlite_code(), Some(1));
    assert!(err.to_string().contains("nowhere"), "{err}");
}

#[test]
fn bulk_insert_of_an_unknown_column_names_the_column() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(a)");
    let err = db
        .inserter("t", &["a", "missing_col"])
        .unwrap()
        .insert([[Value::Integer(1), Value::Integer(2)]])
        .unwrap_err();
    assert!(err.to_string().contains("missing_col"), "{err}");
}

#[test]
fn a_row_with_the_wrong_number_of_values_names_the_row_and_rolls_back() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(a, b)");
    let mut rows: Vec<Vec<Value>> = (0..1000)
        .map(|i| vec![Value::Integer(i), Value::Null])
        .collect();
    rows[700] = vec![Value::Integer(1)];
    let err = db
        .inserter("t", &["a", "b"])
        .unwrap()
        .insert(rows)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    assert!(err.to_string().contains("row 701"), "{err}");
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t"),
        0,
        "nothing half-inserted"
    );
}

#[test]
fn with_commit_every_the_batches_before_a_bad_row_stay_committed() {
    let (_dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(a, b)");
    let mut rows: Vec<Vec<Value>> = (0..1000)
        .map(|i| vec![Value::Integer(i), Value::Null])
        .collect();
    rows[701] = vec![Value::Integer(1)];
    let err = db
        .inserter("t", &["a", "b"])
        .unwrap()
        .commit_every(300)
        .insert(rows)
        .unwrap_err();
    assert!(err.to_string().contains("row 702"), "{err}");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 600);
}

#[test]
fn an_empty_column_list_is_refused() {
    let (_dir, db) = temp_db(Options::default());
    assert!(matches!(
        db.inserter("t", &[]),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn writes_into_a_deleted_or_replaced_file_are_refused_not_acknowledged() {
    for replace in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Database::open(&path, Options::with_profile(Profile::Safe)).unwrap();
        db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1)")?))
            .unwrap();
        if replace {
            let other = dir.path().join("other");
            rusqlite::Connection::open(&other)
                .unwrap()
                .execute_batch("CREATE TABLE t(x)")
                .unwrap();
            std::fs::rename(&other, &path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        // Past the writer's 1 ms recheck of the file's identity
        // (docs/durability.md, "Faults").
        std::thread::sleep(std::time::Duration::from_millis(5));
        let err = db
            .write(|tx| Ok(tx.execute("INSERT INTO t VALUES (2)", [])?))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("moved, deleted or replaced"),
            "replace={replace}: {text}"
        );
        assert!(
            text.contains(&path.display().to_string()),
            "replace={replace}: the message names the file: {text}"
        );
    }
}
