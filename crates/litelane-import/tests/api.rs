//! The library's entry points from outside the crate: the summary, and
//! errors matched by kind with their causes.

use std::error::Error as _;
use std::path::Path;

use litelane_import::{ErrorKind, ImportArgs, EXIT_OK, EXIT_REJECTS};

fn args(source: &Path, db: &Path) -> ImportArgs {
    let mut a = ImportArgs::new(source.to_str().unwrap(), db);
    a.quiet = true;
    a
}

#[test]
fn the_summary_counts_rows_rejects_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a,b\n1,x\n2,y\n3\n").unwrap();
    let mut a = args(&csv, &dir.path().join("t.db"));
    a.table = Some("items".into());
    let out = litelane_import::run(a).unwrap();
    assert_eq!(out.status, EXIT_REJECTS);
    assert_eq!(out.summary["table"], "items");
    assert_eq!(out.summary["rows_inserted"], 2);
    assert_eq!(out.summary["rows_rejected"], 1);
    assert_eq!(out.summary["columns"][0]["type"], "INTEGER");
}

#[test]
fn run_into_uses_the_callers_engine_and_names_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a\n1\n2\n").unwrap();
    let path = dir.path().join("t.db");
    let opts = litelane::Options::with_profile(litelane::Profile::Safe);
    let db = litelane::Database::open(&path, opts).unwrap();
    let out = litelane_import::run_into(&db, args(&csv, &path)).unwrap();
    assert_eq!(out.status, EXIT_OK);
    assert_eq!(out.summary["profile"], "safe");
    let n: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn a_missing_file_is_an_io_error_with_the_os_error_as_source() {
    let dir = tempfile::tempdir().unwrap();
    let e = litelane_import::run(args(&dir.path().join("none.csv"), &dir.path().join("t.db")))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("none.csv"), "{e}");
    let os = e
        .source()
        .unwrap()
        .downcast_ref::<std::io::Error>()
        .unwrap();
    assert_eq!(os.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_broken_record_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a,b\n1,x\n2,\"open\n3,z\n").unwrap();
    let e = litelane_import::run(args(&csv, &dir.path().join("t.db"))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.file().unwrap().ends_with("t.csv"), "{e}");
}

#[test]
fn an_sqlite_failure_keeps_its_code_under_what_became_of_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE t(a INTEGER);
         CREATE TRIGGER tr BEFORE INSERT ON t BEGIN SELECT no_such_function(); END;",
    )
    .unwrap();
    drop(c);
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a\n1\n").unwrap();
    let mut a = args(&csv, &path);
    a.mode = Some(litelane_import::Mode::Append);
    let e = litelane_import::run(a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Engine, "{e}");
    assert_eq!(e.sqlite_code(), Some(1), "{e}");
    assert!(e.to_string().contains("nothing was imported"), "{e}");
    let engine = e.source().unwrap().downcast_ref::<litelane_import::Error>();
    let engine = engine.unwrap().source().unwrap();
    assert!(engine.downcast_ref::<litelane::Error>().is_some(), "{e}");
    let code = engine
        .source()
        .unwrap()
        .downcast_ref::<litelane::SqliteCode>();
    assert_eq!(code.map(|c| c.name()), Some("SQLITE_ERROR"), "{e}");
}
