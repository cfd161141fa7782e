//! A reader of the pool answers as one `sqlite3` connection would for the
//! writer's schema changes, also for the PRAGMAs that look a table up when
//! they are prepared (see `schema_epoch.rs`), whichever way the writer
//! changed the schema.

use crate::common;

use common::{exec, temp_db};
use litelane::{Database, Options};

/// `PRAGMA index_list(u)` on a reader of the pool (through its statement
/// cache): the names of u's indexes.
fn indexes_of_u(db: &Database) -> Vec<String> {
    db.read(|c| {
        let mut s = c.prepare_cached("PRAGMA index_list(u)")?;
        let names = s.query_map([], |r| r.get(1))?;
        Ok(names.collect::<Result<Vec<String>, _>>()?)
    })
    .unwrap()
}

/// Each way the writer changes the schema, and the indexes of u after it.
type Change = fn(&Database);

const CHANGES: &[(&str, Change, &[&str])] = &[
    (
        "a write",
        |db| exec(db, "CREATE TABLE u(a); CREATE INDEX ui ON u(a)"),
        &["ui"],
    ),
    (
        "a held write",
        |db| {
            let mut tx = db.hold_writer("ddl").unwrap();
            tx.run(|t| Ok(t.execute_batch("CREATE TABLE u(a); CREATE INDEX ui ON u(a)")?))
                .unwrap();
            tx.commit().unwrap();
        },
        &["ui"],
    ),
    (
        "a restore",
        |db| {
            let dir = tempfile::tempdir().unwrap();
            let src = dir.path().join("src.db");
            let c = litelane::rusqlite::Connection::open(&src).unwrap();
            c.execute_batch("CREATE TABLE u(a); CREATE INDEX ui ON u(a)")
                .unwrap();
            drop(c);
            db.restore_from(&src, 100, &mut |_| {}).unwrap();
        },
        &["ui"],
    ),
];

#[test]
fn a_reader_sees_every_schema_change_of_the_writer() {
    for (how, change, after) in CHANGES {
        let (_dir, db) = temp_db(Options::default());
        exec(&db, "CREATE TABLE t(x)");
        assert!(indexes_of_u(&db).is_empty(), "{how}: before");
        change(&db);
        assert_eq!(indexes_of_u(&db), *after, "{how}: after");
        // And a change back: the index dropped.
        exec(&db, "DROP INDEX ui");
        assert!(indexes_of_u(&db).is_empty(), "{how}: after the drop");
    }
}
