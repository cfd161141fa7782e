//! `litelane import` bookkeeping and outcomes that need more than one run:
//! the resume point check, progress kept per source, flags that contradict
//! a resumed plan, `--resume --json`, Ctrl-C, and a read-only directory.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use crate::common;

use common::{litelane, stderr};

fn count(db: &str, sql: &str) -> i64 {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// `n` records `i,xxxxxxxxxx` after a header; record `bad` has one field.
fn write_rows(path: &Path, n: u64, bad: Option<u64>) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(w, "id,v").unwrap();
    for i in 1..=n {
        if Some(i) == bad {
            writeln!(w, "bad_record_here").unwrap();
        } else {
            writeln!(w, "{i},xxxxxxxxxx").unwrap();
        }
    }
}

/// Stops an import of `src` after record `bad` - 1 with `--max-rejects 0`,
/// committing every 1000 rows; returns the rows committed.
fn interrupted(src: &str, db: &str) -> i64 {
    let o = litelane(&[
        src,
        "--db",
        db,
        "--table",
        "t",
        "--commit-every",
        "1000",
        "--max-rejects",
        "0",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    count(db, "SELECT count(*) FROM t")
}

#[test]
fn resume_refuses_a_same_size_edit_in_the_middle() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("big.csv");
    // 4 MB: the edit below is outside the first and last MiB, which the
    // file fingerprint covers.
    write_rows(&src, 250_000, Some(200_000));
    let (src, db) = (
        src.to_str().unwrap().to_string(),
        d.path().join("t.db").to_str().unwrap().to_string(),
    );
    let committed = interrupted(&src, &db);
    assert_eq!(committed, 199_000);

    // Join records 100,000 and 100,001 into one (same size): resuming by
    // record count would now skip one record too many.
    let original = std::fs::read(&src).unwrap();
    let mut edited = original.clone();
    let at = edited
        .windows(18)
        .position(|w| w == b"\n100001,xxxxxxxxxx")
        .unwrap();
    assert!(at > 1 << 20 && at < edited.len() - (1 << 20));
    edited[at] = b' ';
    std::fs::write(&src, &edited).unwrap();
    let o = litelane(&[&src, "--db", &db, "--table", "t", "--resume", "--quiet"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("refusing to resume"), "{err}");
    assert!(err.contains("record 199000"), "{err}");
    assert_eq!(count(&db, "SELECT count(*) FROM t"), committed);

    // The file as it was: the resume continues and loses nothing.
    std::fs::write(&src, &original).unwrap();
    let o = litelane(&[&src, "--db", &db, "--table", "t", "--resume", "--quiet"]);
    assert_eq!(o.status.code(), Some(3), "one reject: {}", stderr(&o));
    assert_eq!(count(&db, "SELECT count(DISTINCT id) FROM t"), 249_999);
    assert_eq!(count(&db, "SELECT count(*) FROM t"), 249_999);
}

#[test]
fn resume_json_on_a_finished_import_prints_a_summary() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("s.csv");
    write_rows(&src, 30, None);
    let (src, db) = (
        src.to_str().unwrap().to_string(),
        d.path().join("t.db").to_str().unwrap().to_string(),
    );
    let o = litelane(&[&src, "--db", &db, "--commit-every", "7", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = litelane(&[&src, "--db", &db, "--resume", "--json", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["already_finished"], true);
    assert_eq!(s["rows_inserted"], 0);
    assert_eq!(s["total_rows_inserted"], 30);
    assert_eq!(s["table"], "s");
}

#[test]
fn resume_refuses_flags_that_contradict_the_recorded_plan() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("p.csv");
    write_rows(&src, 12_000, Some(11_500));
    let (src, db) = (
        src.to_str().unwrap().to_string(),
        d.path().join("t.db").to_str().unwrap().to_string(),
    );
    let committed = interrupted(&src, &db);
    for (flags, named) in [
        (&["--format", "tsv"][..], "--format tsv"),
        (&["--no-header"][..], "--no-header"),
        (&["--null", "NA"][..], "--null"),
        (&["--types", "text"][..], "--types text"),
        (&["--strict"][..], "--strict"),
        (&["--mode", "replace"][..], "--mode replace"),
        (&["--pk", "id"][..], "--pk id"),
    ] {
        let mut args = vec![src.as_str(), "--db", &db, "--table", "t", "--resume"];
        args.extend_from_slice(flags);
        let o = litelane(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {err}");
        assert!(
            err.contains("contradict") && err.contains(named),
            "{flags:?}: {err}"
        );
    }
    assert_eq!(count(&db, "SELECT count(*) FROM t"), committed);
    // Flags that agree with the plan are fine.
    let o = litelane(&[
        &src, "--db", &db, "--table", "t", "--resume", "--format", "csv", "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(count(&db, "SELECT count(*) FROM t"), 11_999);
}

#[test]
fn progress_is_kept_per_source_and_never_mixed_up() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.csv");
    let b = d.path().join("b.csv");
    write_rows(&a, 20, None);
    write_rows(&b, 25, None);
    let (a, b, db) = (
        a.to_str().unwrap().to_string(),
        b.to_str().unwrap().to_string(),
        d.path().join("t.db").to_str().unwrap().to_string(),
    );
    let run = |src: &str, extra: &[&str]| {
        let mut args = vec![src, "--db", &db, "--table", "t"];
        args.extend_from_slice(extra);
        litelane(&args)
    };
    assert_eq!(run(&a, &["--commit-every", "5"]).status.code(), Some(0));
    let o = run(&b, &["--commit-every", "5", "--mode", "append"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Resuming A must not report B's import as A's.
    let o = run(&a, &["--resume"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing to resume") && err.contains("a.csv"),
        "{err}"
    );
    let o = run(&b, &["--resume"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("already finished") && err.contains("b.csv"),
        "{err}"
    );
    // Keyed by table and source.
    let c = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let pk: Vec<String> = c
        .prepare("SELECT name FROM pragma_table_info('_litelane_import') WHERE pk > 0 ORDER BY pk")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(pk, ["table_name", "source"]);
    assert_eq!(count(&db, "SELECT count(*) FROM t"), 45);
}

/// Sends SIGINT to `pid`.
fn sigint(pid: u32) {
    let ok = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn ctrl_c_says_what_was_committed_and_how_to_resume() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("big.csv");
    write_rows(&src, 400_000, None);
    let (src, db) = (
        src.to_str().unwrap().to_string(),
        d.path().join("t.db").to_str().unwrap().to_string(),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args([
            "import",
            &src,
            "--db",
            &db,
            "--table",
            "t",
            "--commit-every",
            "1000",
            "--profile",
            "safe",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| {
                c.query_row(
                    "SELECT rows_inserted FROM _litelane_import WHERE table_name = 't'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            })
            .unwrap_or(0);
        if rows >= 5000 {
            break;
        }
        assert!(Instant::now() < deadline, "the import made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    sigint(child.id());
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted (Ctrl-C)"), "{err}");
    assert!(
        err.contains("rows stay committed") && err.contains("--resume"),
        "{err}"
    );
    let committed = count(&db, "SELECT count(*) FROM t");
    assert_eq!(
        committed,
        count(
            &db,
            "SELECT rows_inserted FROM _litelane_import WHERE table_name = 't'"
        ),
        "the progress row matches the rows"
    );
    assert!(
        err.contains(&format!("{committed} rows stay committed")),
        "{err}"
    );
    let o = litelane(&[&src, "--db", &db, "--table", "t", "--resume", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(count(&db, "SELECT count(DISTINCT id) FROM t"), 400_000);
    assert_eq!(count(&db, "SELECT count(*) FROM t"), 400_000);
}

/// Imports `rows` CSV rows from a pipe that stays open into a new database,
/// sends a Ctrl-C once the import is writing it (its file aside exists),
/// and closes the pipe only after the import exited:
/// its stderr. An end of input before the Ctrl-C was seen
/// would end the import; however fast it is, it cannot end before it.
/// Asserts the exit status of an interruption, 130.
fn ctrl_c_while_input_stays_open(db: &str, rows: u64) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args([
            "import", "-", "--format", "csv", "--db", db, "--table", "t", "--quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut csv = String::from("id,v\n");
    for i in 1..=rows {
        csv.push_str(&format!("{i},xxxxxxxxxx\n"));
    }
    input.write_all(csv.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    // The command catches Ctrl-C from before it opens the database, which
    // it writes aside (`DB.litelane-import-HASH.importing`) as it is new.
    let (dir, name) = {
        let p = Path::new(db);
        (
            p.parent().unwrap().to_path_buf(),
            p.file_name().unwrap().to_owned(),
        )
    };
    let aside_exists = || {
        std::fs::read_dir(&dir).unwrap().any(|e| {
            let f = e.unwrap().file_name().to_string_lossy().into_owned();
            f.starts_with(&*name.to_string_lossy()) && f.ends_with(".importing")
        })
    };
    while !aside_exists() {
        assert!(
            Instant::now() < deadline,
            "the import never opened the database"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    sigint(child.id());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the import did not stop within 60 s of a Ctrl-C while its input stayed open");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(input);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    err
}

#[test]
fn ctrl_c_while_the_first_records_are_read_stops_at_once() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db").to_str().unwrap().to_string();
    // 100 rows: too few to name and type the columns, so the import waits
    // for more input when the Ctrl-C comes.
    let err = ctrl_c_while_input_stays_open(&db, 100);
    assert!(
        err.contains("interrupted (Ctrl-C) before any row was written; nothing was committed"),
        "{err}"
    );
}

#[test]
fn ctrl_c_in_a_single_transaction_says_nothing_was_committed() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db").to_str().unwrap().to_string();
    let err = ctrl_c_while_input_stays_open(&db, 400_000);
    assert!(err.contains("interrupted (Ctrl-C)"), "{err}");
    assert!(
        err.contains("nothing was imported (the transaction was rolled back)"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "the database the import was creating is rolled back to none, and nothing is left \
         behind: {left:?}"
    );
}

#[test]
fn a_read_only_directory_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ro = d.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let src = d.path().join("a.csv");
    std::fs::write(&src, "a\n1\n").unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let db = ro.join("t.db");
    let args = [
        "import",
        src.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--quiet",
    ];
    // Root writes through permissions: run the import as `nobody` then.
    let root = tempfile::tempfile_in(&ro).is_ok();
    let o = if root {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_litelane"))
            .args(args)
            .output()
            .expect("setpriv (util-linux) runs the import as nobody")
    } else {
        Command::new(env!("CARGO_BIN_EXE_litelane"))
            .args(args)
            .output()
            .unwrap()
    };
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot create files in the directory {}",
            ro.display()
        )),
        "{err}"
    );
    assert!(err.contains("-wal") && err.contains("-journal"), "{err}");
    assert!(!db.exists());
}

#[test]
fn rejects_table_agrees_with_the_rows_across_a_resume() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("r.csv");
    let mut csv = String::from("id,v\n");
    for i in 1..=60 {
        if i % 25 == 0 {
            csv.push_str("bad\n");
        } else {
            csv.push_str(&format!("{i},x\n"));
        }
    }
    std::fs::write(&src, csv).unwrap();
    let (src, db) = (
        src.to_str().unwrap().to_string(),
        d.path().join("t.db").to_str().unwrap().to_string(),
    );
    let o = litelane(&[
        &src,
        "--db",
        &db,
        "--commit-every",
        "10",
        "--max-rejects",
        "1",
        "--rejects-table",
        "bad",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // Committed: the rows through the last commit and the one reject among
    // them, in the same transactions.
    assert_eq!(count(&db, "SELECT count(*) FROM bad"), 1);
    // --resume keeps writing to the recorded rejects table.
    let o = litelane(&[&src, "--db", &db, "--resume", "--quiet"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let c = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let lines: Vec<i64> = c
        .prepare("SELECT line FROM bad ORDER BY line")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(lines, [26, 51]);
    assert_eq!(count(&db, "SELECT count(DISTINCT id) FROM r"), 58);
    assert_eq!(
        count(&db, "SELECT rows_rejected FROM _litelane_import"),
        2,
        "the progress row counts exactly the rejects table's rows"
    );
}
