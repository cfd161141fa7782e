//! `Database::execute`: one statement that writes, as a transaction of its
//! own. What it accepts and refuses, what it reports, and that its
//! statements join group commit in one process and are combined across
//! handles (as across processes) under `safe` only where both connections
//! are plain.

use std::thread;

use litelane::{Database, Error, Options, Profile, Value};

fn open(dir: &std::path::Path, profile: Profile) -> Database {
    let db = Database::open(dir.join("e.db"), Options::with_profile(profile)).unwrap();
    db.write(|tx| {
        Ok(tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)",
        )?)
    })
    .unwrap();
    db
}

/// Runs `f(k, handle)` for each handle `k` on a thread of its own; their
/// results, in handle order.
fn on_each_handle<T: Send + 'static>(
    handles: &[Database],
    f: impl Fn(usize, Database) -> T + Send + Clone + 'static,
) -> Vec<T> {
    let threads: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(k, db)| {
            let (db, f) = (db.clone(), f.clone());
            thread::spawn(move || f(k, db))
        })
        .collect();
    threads.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn statements_are_run_or_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Profile::Balanced);
    let text = |s: &str| Value::Text(s.into());
    let done = db
        .execute(
            "INSERT INTO t(v) VALUES (?1), (?2)",
            &[text("a"), text("b")],
        )
        .unwrap();
    assert_eq!((done.changes, done.last_insert_rowid), (2, 2));
    let done = db
        .execute(
            "UPDATE t SET v = v || '!' WHERE id > ?1",
            &[Value::Integer(0)],
        )
        .unwrap();
    assert_eq!(done.changes, 2);
    // (statement, params, what the error must say)
    let refused: &[(&str, Vec<Value>, &str)] = &[
        ("SELECT 1", vec![], "returns no rows"),
        (
            "INSERT INTO t(v) VALUES ('c') RETURNING id",
            vec![],
            "returns no rows",
        ),
        (
            "INSERT INTO t(v) VALUES (?1)",
            vec![],
            "1 parameters and 0 were given",
        ),
        (
            "INSERT INTO t(v) VALUES (?1)",
            vec![text("x"), text("y")],
            "column index out of range",
        ),
        (
            "INSERT INTO t(v) VALUES ('a!')",
            vec![],
            "UNIQUE constraint failed: t.v",
        ),
        (
            "INSERT INTO nowhere VALUES (1)",
            vec![],
            "no such table: nowhere",
        ),
        (
            "INSERT INTO t(v) VALUES ('d'); INSERT INTO t(v) VALUES ('e')",
            vec![],
            "Multiple statements",
        ),
    ];
    for (sql, params, says) in refused {
        let e = db.execute(sql, params).unwrap_err();
        assert!(e.to_string().contains(says), "{sql}: {e}");
        assert!(!matches!(e, Error::OutcomeUnknown { .. }), "{sql}: {e}");
    }
    let rows: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(rows, 2, "a refused statement changed nothing");
}

#[test]
fn statements_from_many_threads_are_all_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Profile::Safe);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                for i in 0..100 {
                    let v = Value::Text(format!("{t}-{i}"));
                    db.execute("INSERT INTO t(v) VALUES (?1)", &[v]).unwrap();
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    let rows: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(DISTINCT v) FROM t", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(rows, 800);
}

/// Handles of one file under `safe` each have their own cross-process queue
/// (as processes do): their statements are combined, unless a handle has
/// something of its own that could change a statement's meaning.
#[test]
fn statements_are_combined_only_between_plain_connections() {
    for setup in ["none", "temp table", "configured"] {
        let dir = tempfile::tempdir().unwrap();
        let handles: Vec<Database> = (0..4).map(|_| open(dir.path(), Profile::Safe)).collect();
        if setup == "temp table" {
            for db in &handles {
                db.write(|tx| {
                    Ok(tx.execute_batch("CREATE TEMP TABLE t(id INTEGER PRIMARY KEY, v TEXT)")?)
                })
                .unwrap();
            }
        }
        if setup == "configured" {
            for db in &handles {
                db.configure(
                    "case",
                    std::sync::Arc::new(|c| c.execute_batch("PRAGMA case_sensitive_like = ON")),
                )
                .unwrap();
            }
        }
        on_each_handle(&handles, |k, db| {
            for i in 0..300 {
                let v = Value::Text(format!("{k}-{i}"));
                // With a temporary `t` on every handle, this writes each
                // handle's own temporary table.
                db.execute("INSERT INTO t VALUES (NULL, ?1)", &[v]).unwrap();
            }
        });
        let combined: u64 = handles.iter().map(|d| d.metrics().combined_here).sum();
        let elsewhere: u64 = handles.iter().map(|d| d.metrics().combined_elsewhere).sum();
        assert_eq!(combined, elsewhere, "{setup}");
        match setup {
            "none" => assert!(combined > 0, "nothing was combined"),
            _ => assert_eq!(combined, 0, "{setup}: combined anyway"),
        }
        let main_rows: i64 = handles[0]
            .read(|c| Ok(c.query_row("SELECT count(*) FROM main.t", [], |r| r.get(0))?))
            .unwrap();
        let want = if setup == "temp table" { 0 } else { 1200 };
        assert_eq!(main_rows, want, "{setup}");
    }
}

/// A statement committed by another handle reports the last rowid its own
/// handle would have: the rowid it inserted, or, when it inserted nothing
/// (an `UPDATE`, an `INSERT OR IGNORE` that ignored, an upsert that
/// updated), the rowid of the handle's own last insert, never the one of
/// the connection that happened to run it.
#[test]
fn a_combined_statement_reports_the_last_rowid_of_its_own_handle() {
    const UPSERT: &str =
        "INSERT INTO t VALUES (NULL, ?1) ON CONFLICT(v) DO UPDATE SET v = excluded.v";
    let dir = tempfile::tempdir().unwrap();
    let handles: Vec<Database> = (0..4).map(|_| open(dir.path(), Profile::Safe)).collect();
    let wrong: Vec<String> = on_each_handle(&handles, |k, db| {
        let mut wrong = Vec::new();
        for i in 0..150 {
            let v = format!("{k}-{i}");
            let text = Value::Text(v.clone());
            let ins = db
                .execute(
                    "INSERT INTO t VALUES (NULL, ?1)",
                    std::slice::from_ref(&text),
                )
                .unwrap();
            let lookup = |c: &litelane::rusqlite::Connection| {
                Ok(c.query_row("SELECT id FROM t WHERE v = ?1", [&v], |r| r.get(0))?)
            };
            let id: i64 = db.read(lookup).unwrap();
            if ins.last_insert_rowid != id {
                wrong.push(format!("insert {v}: {} for {id}", ins.last_insert_rowid));
            }
            let none = [
                ("UPDATE t SET v = v WHERE id = ?1", Value::Integer(id)),
                ("INSERT OR IGNORE INTO t VALUES (NULL, ?1)", text.clone()),
                (UPSERT, text),
            ];
            for (sql, p) in none {
                let r = db.execute(sql, &[p]).unwrap();
                if r.last_insert_rowid != id {
                    wrong.push(format!("{sql} after {v}: {} for {id}", r.last_insert_rowid));
                }
            }
        }
        wrong
    })
    .concat();
    let combined: u64 = handles.iter().map(|d| d.metrics().combined_here).sum();
    assert!(combined > 0, "nothing was combined");
    assert!(
        wrong.is_empty(),
        "{} wrong, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}
