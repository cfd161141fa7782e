//! `Inserter::insert_from`: a `RowSource`'s hooks run inside the inserter's
//! transactions, refused rows come back one by one, an abort rolls back only
//! the transaction in progress, and conflict handling counts what it skips.

use crate::common;

use common::{exec, query_i64, temp_db};
use litelane::{Error, InsertReport, OnConflict, Options, RowSource, Tx, Value};

/// What the source was told, in order.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Begin,
    Refused { number: u64, id: i64, code: i32 },
    BeforeCommit { rows: u64, refused: u64, end: bool },
    AfterCommit { rows: u64 },
}

/// Rows `(id, v)` from a list; records events; writes a progress row in
/// `progress` before each commit; can fail at a given point.
struct Script {
    rows: std::vec::IntoIter<(i64, Value)>,
    events: Vec<Event>,
    take_back: bool,
    abort_at_row: Option<u64>,
    fail_before_commit: Option<usize>,
    pulled: u64,
}

impl Script {
    fn new(rows: Vec<(i64, Value)>) -> Self {
        Script {
            rows: rows.into_iter(),
            events: Vec::new(),
            take_back: true,
            abort_at_row: None,
            fail_before_commit: None,
            pulled: 0,
        }
    }
    fn commits_seen(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::BeforeCommit { .. }))
            .count()
    }
}

impl RowSource for Script {
    type Row = Vec<Value>;

    fn next_row(&mut self, _tx: &Tx<'_>) -> litelane::Result<Option<Vec<Value>>> {
        if self.abort_at_row == Some(self.pulled + 1) {
            return Err(Error::user("source aborted"));
        }
        Ok(self.rows.next().map(|(id, v)| {
            self.pulled += 1;
            vec![Value::Integer(id), v]
        }))
    }

    fn begin(&mut self, tx: &Tx<'_>) -> litelane::Result<()> {
        self.events.push(Event::Begin);
        tx.execute("CREATE TABLE IF NOT EXISTS progress(rows INTEGER)", [])?;
        Ok(())
    }

    fn refused(
        &mut self,
        _tx: &Tx<'_>,
        row: &Vec<Value>,
        number: u64,
        error: Error,
    ) -> litelane::Result<()> {
        let Value::Integer(id) = row[0] else {
            panic!("id")
        };
        let code = match &error {
            Error::Sqlite { extended_code, .. } => *extended_code,
            _ => -1,
        };
        self.events.push(Event::Refused { number, id, code });
        if self.take_back {
            Ok(())
        } else {
            Err(error)
        }
    }

    fn before_commit(
        &mut self,
        tx: &Tx<'_>,
        batch: &InsertReport,
        end: bool,
    ) -> litelane::Result<()> {
        if self.fail_before_commit == Some(self.commits_seen()) {
            return Err(Error::user("progress refused"));
        }
        self.events.push(Event::BeforeCommit {
            rows: batch.rows,
            refused: batch.refused,
            end,
        });
        tx.execute(
            "INSERT INTO progress(rows) VALUES ((SELECT count(*) FROM t))",
            [],
        )?;
        Ok(())
    }

    fn after_commit(&mut self, batch: &InsertReport) {
        self.events.push(Event::AfterCommit { rows: batch.rows });
    }
}

fn ints(ids: impl IntoIterator<Item = i64>) -> Vec<(i64, Value)> {
    ids.into_iter()
        .map(|i| (i, Value::Text(format!("v{i}"))))
        .collect()
}

fn setup(db: &litelane::Database) {
    exec(
        db,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL CHECK (v <> 'bad'))",
    );
}

/// The events of one transaction of `rows` rows with none refused; `end`
/// when it is the last.
fn transaction(rows: u64, end: bool) -> [Event; 3] {
    [
        Event::Begin,
        Event::BeforeCommit {
            rows,
            refused: 0,
            end,
        },
        Event::AfterCommit { rows },
    ]
}

/// A new database with the table `t` of [`setup`] (the directory lives as
/// long as the first value).
fn db_with_t() -> (tempfile::TempDir, litelane::Database) {
    let (dir, db) = temp_db(Options::default());
    setup(&db);
    (dir, db)
}

/// Feeds `src` to an inserter into `t(id, v)` committing every `every` rows
/// (`None`: the inserter's default, once at the end).
fn insert_script(
    db: &litelane::Database,
    src: &mut Script,
    every: Option<u64>,
) -> litelane::Result<InsertReport> {
    let ins = db.inserter("t", &["id", "v"]).unwrap();
    match every {
        Some(n) => ins.commit_every(n),
        None => ins,
    }
    .insert_from(src)
}

#[test]
fn refused_rows_come_back_one_by_one_and_the_rest_is_stored() {
    let (_dir, db) = db_with_t();
    exec(&db, "INSERT INTO t VALUES (5, 'old')");
    // 200 rows: a duplicate key (5), a NULL and a CHECK failure, spread over
    // several multi-row statements.
    let mut rows = ints(1..=200);
    rows[4].1 = Value::Text("v5".into()); // id 5: already stored
    rows[70].1 = Value::Null; // id 71: NOT NULL
    rows[150].1 = Value::Text("bad".into()); // id 151: CHECK
    let mut src = Script::new(rows);
    let report = insert_script(&db, &mut src, None).unwrap();
    let refused: Vec<(u64, i64, i32)> = src
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Refused { number, id, code } => Some((*number, *id, *code)),
            _ => None,
        })
        .collect();
    use litelane::rusqlite::ffi;
    assert_eq!(
        refused,
        vec![
            (5, 5, ffi::SQLITE_CONSTRAINT_PRIMARYKEY),
            (71, 71, ffi::SQLITE_CONSTRAINT_NOTNULL),
            (151, 151, ffi::SQLITE_CONSTRAINT_CHECK),
        ]
    );
    assert_eq!((report.rows, report.refused, report.skipped), (197, 3, 0));
    assert_eq!(report.commits, 1);
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 198);
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t WHERE id IN (71, 151)"),
        0
    );
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t WHERE id = 5 AND v = 'old'"),
        1
    );
    // Every row other than the refused ones is stored exactly once.
    assert_eq!(
        query_i64(&db, "SELECT sum(id) FROM t"),
        (1..=200).sum::<i64>() - 71 - 151
    );
}

#[test]
fn a_refused_row_the_source_does_not_take_back_rolls_everything_back() {
    let (_dir, db) = db_with_t();
    let mut rows = ints(1..=100);
    rows[40].1 = Value::Text("bad".into());
    let mut src = Script::new(rows);
    src.take_back = false;
    let err = insert_script(&db, &mut src, None).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("inserting row 41 into \"t\""), "{msg}");
    assert!(msg.contains("CHECK constraint failed"), "{msg}");
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
    // The plain iterator form says which row too.
    let mut rows = ints(1..=100);
    rows[60].1 = Value::Null;
    let err = db
        .inserter("t", &["id", "v"])
        .unwrap()
        .insert(rows.into_iter().map(|(i, v)| vec![Value::Integer(i), v]))
        .unwrap_err();
    assert!(
        err.to_string().contains("inserting row 61 into \"t\""),
        "{err}"
    );
    assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 0);
}

#[test]
fn hooks_run_in_each_transaction_and_commit_with_its_rows() {
    let (_dir, db) = db_with_t();
    let mut src = Script::new(ints(1..=25));
    let report = insert_script(&db, &mut src, Some(10)).unwrap();
    assert_eq!((report.rows, report.commits), (25, 3));
    assert_eq!(
        src.events,
        [
            transaction(10, false),
            transaction(10, false),
            transaction(5, true)
        ]
        .concat()
    );
    // Each progress row saw exactly the rows of its own transaction.
    let seen: Vec<i64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT rows FROM progress ORDER BY rowid")?;
            let v = st
                .query_map([], |r| r.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(v)
        })
        .unwrap();
    assert_eq!(seen, vec![10, 20, 25]);
}

#[test]
fn a_source_that_cannot_tell_its_end_gets_one_last_empty_transaction() {
    let (_dir, db) = db_with_t();
    let mut src = Script::new(ints(1..=20));
    let report = insert_script(&db, &mut src, Some(10)).unwrap();
    assert_eq!((report.rows, report.commits), (20, 3));
    assert_eq!(
        src.events.iter().rev().nth(1),
        Some(&Event::BeforeCommit {
            rows: 0,
            refused: 0,
            end: true
        })
    );
    // An iterator can tell: no empty transaction, and none at all for no rows.
    let rows = (21..=40).map(|i| vec![Value::Integer(i), Value::Text("x".into())]);
    let r = db.inserter("t", &["id", "v"]).unwrap().commit_every(10);
    assert_eq!(r.insert(rows).unwrap().commits, 2);
    let none = std::iter::empty::<Vec<Value>>();
    let r = db.inserter("t", &["id", "v"]).unwrap();
    assert_eq!(r.insert(none).unwrap().commits, 0);
}

#[test]
fn an_abort_rolls_back_only_the_transaction_in_progress() {
    for (abort_at_row, fail_before_commit, stored, progress_rows) in [
        (Some(15), None, 10, 1), // second transaction aborted by next_row
        (Some(1), None, 0, 0),   // before any row
        (None, Some(0), 0, 0),   // the first progress row refused
        (None, Some(2), 20, 2),  // the third progress row refused
    ] {
        let (_dir, db) = db_with_t();
        let mut src = Script::new(ints(1..=25));
        src.abort_at_row = abort_at_row;
        src.fail_before_commit = fail_before_commit;
        let err = insert_script(&db, &mut src, Some(10)).unwrap_err();
        assert!(matches!(err, Error::User { .. }), "{err:?}");
        let case = format!("{abort_at_row:?} {fail_before_commit:?}");
        assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), stored, "{case}");
        let progress = db
            .read(|c| {
                Ok(c.query_row(
                    "SELECT count(*) FROM sqlite_schema WHERE name = 'progress'",
                    [],
                    |r| r.get::<_, i64>(0),
                )?)
            })
            .unwrap();
        if progress == 1 {
            assert_eq!(
                query_i64(&db, "SELECT count(*) FROM progress"),
                progress_rows,
                "{case}"
            );
        } else {
            assert_eq!(progress_rows, 0, "{case}");
        }
        let after = src
            .events
            .iter()
            .filter(|e| matches!(e, Event::AfterCommit { .. }))
            .count();
        assert_eq!(
            after as i64, progress_rows,
            "{case}: after_commit per commit"
        );
        // The writer is free again.
        exec(&db, "INSERT INTO t VALUES (1000, 'after')");
    }
}

#[test]
fn conflict_modes_store_skip_or_update_and_count_it() {
    for (on, rows, skipped, v5) in [
        (OnConflict::Ignore(vec!["id".into()]), 9, 1, "old"),
        (OnConflict::Ignore(vec![]), 9, 1, "old"),
        (OnConflict::Update(vec!["id".into()]), 10, 0, "v5"),
        (OnConflict::Replace, 10, 0, "v5"),
    ] {
        let (_dir, db) = db_with_t();
        exec(&db, "INSERT INTO t VALUES (5, 'old')");
        let report = db
            .inserter("t", &["id", "v"])
            .unwrap()
            .on_conflict(on.clone())
            .unwrap()
            .insert(
                ints(1..=10)
                    .into_iter()
                    .map(|(i, v)| vec![Value::Integer(i), v]),
            )
            .unwrap();
        assert_eq!((report.rows, report.skipped), (rows, skipped), "{on:?}");
        assert_eq!(query_i64(&db, "SELECT count(*) FROM t"), 10, "{on:?}");
        let got: String = db
            .read(|c| Ok(c.query_row("SELECT v FROM t WHERE id = 5", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(got, v5, "{on:?}");
    }
    let (_dir, db) = db_with_t();
    let err = db
        .inserter("t", &["id", "v"])
        .unwrap()
        .on_conflict(OnConflict::Update(vec![]))
        .err()
        .expect("an update needs a key");
    assert!(err.to_string().contains("needs the key"), "{err}");
}

#[test]
fn rows_taken_by_an_instead_of_trigger_are_counted_as_stored() {
    // SQLite does not count them in sqlite3_changes(): the report must not
    // call them skipped.
    let (_dir, db) = db_with_t();
    exec(&db, "CREATE VIEW vt AS SELECT id, v FROM t");
    exec(
        &db,
        "CREATE TRIGGER vt_ins INSTEAD OF INSERT ON vt BEGIN \
         INSERT INTO t VALUES (NEW.id, NEW.v || '!'); END",
    );
    let report = db
        .inserter("vt", &["id", "v"])
        .unwrap()
        .insert(
            ints(1..=100)
                .into_iter()
                .map(|(i, v)| vec![Value::Integer(i), v]),
        )
        .unwrap();
    assert_eq!((report.rows, report.skipped), (100, 0));
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM t WHERE v LIKE '%!'"),
        100
    );
}
