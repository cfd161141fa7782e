//! The library's entry points from outside the crate: the summary, and
//! errors matched by kind with their causes.

use std::error::Error as _;
use std::path::Path;

use litelane_import::{
    ErrorKind, ImportOptions, Note, Progress, Rejected, Silent, Summary, EXIT_INTERRUPTED, EXIT_OK,
    EXIT_REJECTS,
};

fn args(source: &Path, db: &Path) -> ImportOptions {
    ImportOptions::new(source.to_str().unwrap(), db)
}

fn run(a: ImportOptions) -> Result<litelane_import::Outcome, litelane_import::Error> {
    litelane_import::run(a, &mut Silent)
}

/// The summary as the command's `--json` prints it.
fn json(out: &litelane_import::Outcome) -> serde_json::Value {
    serde_json::to_value(out.summary.as_ref().unwrap()).unwrap()
}

#[test]
fn the_summary_counts_rows_rejects_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a,b\n1,x\n2,y\n3\n").unwrap();
    let mut a = args(&csv, &dir.path().join("t.db"));
    a.table = Some("items".into());
    let out = run(a).unwrap();
    assert_eq!(out.status, EXIT_REJECTS);
    let Some(Summary::File(s)) = &out.summary else {
        panic!("{:?}", out.summary)
    };
    assert_eq!(
        (s.table.as_str(), s.rows_inserted, s.rows_rejected),
        ("items", 2, 1)
    );
    assert_eq!(s.columns[0].ty, "INTEGER");
    let j = json(&out);
    assert_eq!(j["table"], "items");
    assert_eq!(j["rows_inserted"], 2);
    assert_eq!(j["rows_rejected"], 1);
    assert_eq!(j["columns"][0]["type"], "INTEGER");
}

#[test]
fn run_into_uses_the_callers_engine_and_names_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a\n1\n2\n").unwrap();
    let path = dir.path().join("t.db");
    let opts = litelane::Options::with_profile(litelane::Profile::Safe);
    let db = litelane::Database::open(&path, opts).unwrap();
    let out = litelane_import::run_into(&db, args(&csv, &path), &mut Silent).unwrap();
    assert_eq!(out.status, EXIT_OK);
    assert_eq!(json(&out)["profile"], "safe");
    let n: i64 = db
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn a_missing_file_is_an_io_error_with_the_os_error_as_source() {
    let dir = tempfile::tempdir().unwrap();
    let e = run(args(&dir.path().join("none.csv"), &dir.path().join("t.db"))).unwrap_err();
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
    let e = run(args(&csv, &dir.path().join("t.db"))).unwrap_err();
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
    let e = run(a).unwrap_err();
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

/// A caller that keeps what it is told, and stops after `stop_after` rows.
#[derive(Default)]
struct Recorder {
    started: Vec<Option<u64>>,
    rows: Vec<(u64, u64)>,
    rejected: Vec<(u64, u64, String, bool)>,
    notes: Vec<String>,
    finished: usize,
    stop_after: Option<u64>,
}

impl Progress for Recorder {
    fn start(&mut self, total_bytes: Option<u64>) {
        self.started.push(total_bytes);
    }
    fn rows(&mut self, rows: u64, bytes_read: u64) {
        self.rows.push((rows, bytes_read));
    }
    fn finish(&mut self) {
        self.finished += 1;
    }
    fn rejected(&mut self, r: &Rejected<'_>) {
        self.rejected
            .push((r.line, r.nth, r.reason.to_string(), r.in_file));
    }
    fn note(&mut self, note: &Note<'_>) {
        self.notes.push(note.text.to_string());
    }
    fn should_stop(&self) -> bool {
        match (self.stop_after, self.rows.last()) {
            (Some(n), Some(&(rows, _))) => rows >= n,
            _ => false,
        }
    }
}

#[test]
fn the_caller_is_told_of_rows_rejects_and_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    let text = "a,b\n1,x\n2,y\n3\n";
    std::fs::write(&csv, text).unwrap();
    let mut r = Recorder::default();
    let out = litelane_import::run(args(&csv, &dir.path().join("t.db")), &mut r).unwrap();
    assert_eq!(out.status, EXIT_REJECTS);
    assert_eq!(r.started, [Some(text.len() as u64)]);
    assert_eq!(r.finished, 1);
    assert_eq!(r.rows.last(), Some(&(2, text.len() as u64)));
    assert_eq!(r.rejected.len(), 1);
    let (line, nth, reason, in_file) = &r.rejected[0];
    assert_eq!((*line, *nth, *in_file), (4, 1, false), "{reason}");
    assert!(
        r.notes
            .last()
            .unwrap()
            .starts_with("imported 2 rows into \"t\" from "),
        "{:?}",
        r.notes
    );
}

#[test]
fn should_stop_stops_the_import_keeping_what_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    let mut text = String::from("a\n");
    for i in 0..200_000 {
        text.push_str(&format!("{i}\n"));
    }
    std::fs::write(&csv, text).unwrap();
    let mut a = args(&csv, &dir.path().join("t.db"));
    a.commit_every = Some(1000);
    let mut r = Recorder {
        stop_after: Some(1),
        ..Recorder::default()
    };
    let out = litelane_import::run(a, &mut r).unwrap();
    assert_eq!(out.status, EXIT_INTERRUPTED);
    assert!(out.summary.is_none());
    let c = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert!(n < 200_000 && n % 1000 == 0, "{n}");
}

#[test]
fn options_that_cannot_go_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a\n1\n").unwrap();
    let mut a = args(&csv, &dir.path().join("t.db"));
    a.header = true;
    a.no_header = true;
    let e = run(a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    let mut a = args(&csv, &dir.path().join("t.db"));
    a.no_default_nulls = true;
    assert!(run(a).unwrap_err().to_string().contains("nulls"));
}
