//! `litelane stats`, `doctor` and `checkpoint`, run as a child process.

use std::path::Path;
use std::process::Output;

use rusqlite::Connection;

use crate::common::run;

fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "litelane failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON object")
}

/// A database whose schema would do harm if anything in it ran: a trigger
/// that writes, a view over a function this process does not have, a table
/// with a hostile name, an unindexed foreign key, 1 KiB pages, rollback
/// journal.
fn hostile_db(path: &Path) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "PRAGMA page_size = 1024;
         CREATE TABLE parent(id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id));
         CREATE TABLE log(x);
         CREATE TABLE \"\"\"; DROP TABLE parent; --\"(x);
         INSERT INTO \"\"\"; DROP TABLE parent; --\" VALUES (1), (2), (3);
         INSERT INTO parent(name) VALUES ('a'), ('b');
         CREATE TRIGGER noisy AFTER INSERT ON parent BEGIN INSERT INTO log VALUES ('fired'); END;
         CREATE TRIGGER on_delete BEFORE DELETE ON child BEGIN INSERT INTO log VALUES ('fired'); END;",
    )
    .unwrap();
    // A view that fails (or worse, with a function that exists somewhere)
    // if anything ever evaluates it: SQLite resolves functions only then.
    c.execute_batch("CREATE VIEW v AS SELECT boom() AS b FROM parent;")
        .unwrap();
}

fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn stats_counts_real_tables_only_and_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("h.db");
    hostile_db(&db);
    let before = file_bytes(&db);
    let s = json(&run(&["stats", db.to_str().unwrap(), "--json"]));
    assert_eq!(s["journal_mode"], "delete");
    assert_eq!(s["page_size"], 1024);
    assert_eq!(s["triggers"], 2);
    let tables = s["tables"].as_array().unwrap();
    let find = |n: &str| tables.iter().find(|t| t["name"] == n).cloned().unwrap();
    assert_eq!(find("\"; DROP TABLE parent; --")["rows"], 3);
    assert_eq!(find("parent")["rows"], 2);
    assert_eq!(find("log")["rows"], 0);
    assert_eq!(find("v")["type"], "view");
    assert!(find("v")["rows"].is_null(), "a view is not counted");
    let human = run(&["stats", db.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("(view, not counted)"));
    assert_eq!(file_bytes(&db), before, "stats wrote nothing");
}

#[test]
fn doctor_reports_shortfalls_with_fixes_and_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("h.db");
    hostile_db(&db);
    let before = file_bytes(&db);
    let r = json(&run(&["doctor", db.to_str().unwrap(), "--json"]));
    let findings = r["findings"].as_array().unwrap();
    let get = |c: &str| {
        findings
            .iter()
            .find(|f| f["check"] == c)
            .unwrap_or_else(|| panic!("no {c} finding in {r}"))
            .clone()
    };
    assert_eq!(get("journal_mode")["sql"], "PRAGMA journal_mode=WAL;");
    assert!(get("page_size")["sql"]
        .as_str()
        .unwrap()
        .contains("page_size=4096"));
    let fk = get("foreign_key_index");
    assert_eq!(
        fk["sql"],
        "CREATE INDEX \"child_parent_id_idx\" ON \"child\"(\"parent_id\");"
    );
    assert!(fk["command"].as_str().unwrap().starts_with("sqlite3 '"));
    assert_eq!(file_bytes(&db), before, "doctor wrote nothing");
    let c = Connection::open(&db).unwrap();
    let fired: i64 = c
        .query_row("SELECT count(*) FROM log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fired, 0, "no trigger fired");

    // Applying the fixes clears them.
    c.execute_batch(fk["sql"].as_str().unwrap()).unwrap();
    c.execute_batch("PRAGMA page_size=4096; VACUUM; PRAGMA journal_mode=WAL;")
        .unwrap();
    drop(c);
    let r = json(&run(&["doctor", db.to_str().unwrap(), "--json"]));
    let checks: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect();
    for gone in ["journal_mode", "page_size", "foreign_key_index"] {
        assert!(!checks.contains(&gone), "{gone} still reported: {r}");
    }
}

#[test]
fn doctor_flags_a_large_freelist() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("f.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; CREATE TABLE t(x);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO t SELECT randomblob(1000) FROM n;
         DELETE FROM t WHERE rowid > 100;
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .unwrap();
    drop(c);
    let r = json(&run(&["doctor", db.to_str().unwrap(), "--json"]));
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "freelist")
        .cloned()
        .unwrap_or_else(|| panic!("no freelist finding: {r}"));
    assert_eq!(f["sql"], "VACUUM;");
}

#[test]
fn checkpoint_copies_the_wal_and_truncate_empties_it() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("w.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
         INSERT INTO t SELECT randomblob(500) FROM n;",
    )
    .unwrap();
    // Keep the WAL: this connection stays open (no checkpoint on close).
    let wal = d.path().join("w.db-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let r = json(&run(&["checkpoint", db.to_str().unwrap(), "--json"]));
    assert_eq!(r["ran"], true);
    assert_eq!(r["mode"], "passive");
    assert!(r["wal_frames"].as_u64().unwrap() > 0);
    assert_eq!(r["checkpointed_frames"], r["wal_frames"]);
    assert_eq!(r["busy"], false);
    assert!(
        r["wal_bytes_after"].as_u64().unwrap() > 0,
        "passive keeps the file"
    );
    let r = json(&run(&[
        "checkpoint",
        db.to_str().unwrap(),
        "--mode",
        "truncate",
        "--json",
    ]));
    assert_eq!(r["mode"], "truncate");
    assert_eq!(r["busy"], false);
    assert!(r["wal_bytes_before"].as_u64().unwrap() > 0);
    assert_eq!(r["wal_bytes_after"], 0);
    let n: i64 = c
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 500);

    // A rollback-journal database: nothing to do, and it stays as it is.
    let plain = d.path().join("p.db");
    Connection::open(&plain)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    let r = json(&run(&["checkpoint", plain.to_str().unwrap(), "--json"]));
    assert_eq!(r["ran"], false);
    assert_eq!(r["journal_mode"], "delete");
}

#[test]
fn missing_or_foreign_files_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.db");
    for cmd in ["stats", "doctor", "checkpoint"] {
        let o = run(&[cmd, missing.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("missing.db"));
    }
    assert!(!missing.exists(), "no command created the file");
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, vec![7u8; 4096]).unwrap();
    let o = run(&["stats", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a database"));
}

#[test]
fn doctor_reports_what_killed_runs_left_and_an_oversized_wal() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("h.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO t SELECT randomblob(1000) FROM n;",
    )
    .unwrap();
    // The connection stays open: its WAL (3 MB, the file nearly empty) stays.
    let stale = d.path().join("h.db.litelane-import-0123456789abcdef.lock");
    std::fs::write(&stale, b"").unwrap();
    let running = d.path().join("h.db.litelane-import-fedcba9876543210.lock");
    let held = std::fs::File::create(&running).unwrap();
    assert!(fs4::fs_std::FileExt::try_lock_exclusive(&held).unwrap());
    // A killed import's database aside is stale; a running import's (its
    // lock file held) is not.
    let aside = d
        .path()
        .join("h.db.litelane-import-0123456789abcdef.importing");
    std::fs::write(&aside, vec![0u8; 8192]).unwrap();
    let running_aside = d
        .path()
        .join("h.db.litelane-import-fedcba9876543210.importing");
    std::fs::write(&running_aside, b"").unwrap();
    let scratch = d.path().join(".litelane-recover-12345");
    std::fs::create_dir(&scratch).unwrap();
    std::fs::write(scratch.join("work.db"), vec![0u8; 4096]).unwrap();
    std::fs::write(scratch.join("lock"), b"").unwrap();
    // Another database's lock file is not this one's business.
    std::fs::write(d.path().join("other.db.litelane-import-00.lock"), b"").unwrap();

    let r = json(&run(&["doctor", db.to_str().unwrap(), "--json"]));
    let findings = r["findings"].as_array().unwrap();
    let of = |check: &str| -> Vec<String> {
        findings
            .iter()
            .filter(|f| f["check"] == check)
            .map(|f| f["command"].as_str().unwrap().to_string())
            .collect()
    };
    let locks = of("stale_import_lock");
    assert_eq!(locks.len(), 1, "{r}");
    assert!(locks[0].starts_with("rm -- ") && locks[0].contains("0123456789abcdef"));
    let asides = of("stale_import_aside");
    assert_eq!(asides.len(), 1, "{r}");
    assert!(asides[0].starts_with("rm -- ") && asides[0].contains("0123456789abcdef.importing"));
    let dirs = of("stale_recover_dir");
    assert_eq!(dirs.len(), 1, "{r}");
    assert!(dirs[0].starts_with("rm -r -- ") && dirs[0].contains(".litelane-recover-12345"));
    assert_eq!(of("wal_size").len(), 1, "{r}");
    let human =
        String::from_utf8_lossy(&run(&["doctor", db.to_str().unwrap()]).stdout).into_owned();
    assert!(!human.contains("no problems found"), "{human}");
    assert!(human.contains("larger than the database file"), "{human}");
    drop(held);
    drop(c);
}

#[test]
fn doctor_reports_a_failed_fsync_recorded_in_the_lock_file() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("f.db");
    let opened = litelane::Database::open(&db, Default::default()).unwrap();
    opened
        .write(|tx| Ok(tx.execute_batch("CREATE TABLE t(x)")?))
        .unwrap();
    // Kept open: the last close removes the lock file (a file with a
    // failure recorded stays, but this one has none yet).
    let lock = d.path().join("f.db-lane");
    let r = json(&run(&["doctor", db.to_str().unwrap(), "--json"]));
    let checks = |r: &serde_json::Value| -> Vec<String> {
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["check"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!checks(&r).contains(&"sync_failure".to_string()), "{r}");
    // What a failed fsync leaves (xproc/durable.rs): the commit count it
    // failed at, in the lock file's shared page at byte 80.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&lock).unwrap();
        f.write_all_at(&7u64.to_ne_bytes(), 80).unwrap();
    }
    assert_eq!(
        litelane::xproc::recorded_sync_failure(&db).map(|(_, at)| at),
        Some(7)
    );
    let r = json(&run(&["doctor", db.to_str().unwrap(), "--json"]));
    let found: Vec<_> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "sync_failure")
        .collect();
    assert_eq!(found.len(), 1, "{r}");
    let message = found[0]["message"].as_str().unwrap();
    assert!(message.contains("at commit 7"), "{message}");
    assert!(message.contains("f.db-lane"), "{message}");
    let command = found[0]["command"].as_str().unwrap();
    assert!(
        command.contains("rm -- ") && command.contains("f.db-lane"),
        "{command}"
    );
    // The failure mark keeps the lock file past the last close: what
    // every later process must learn stays.
    drop(opened);
    assert!(
        lock.exists(),
        "a lock file recording a failed fsync was removed"
    );
}

/// A failing command prints its error's whole chain on stderr, down to
/// SQLite's name for the code or the operating system's error (issue 17).
#[test]
fn a_failure_prints_the_chain_down_to_sqlites_code_name_and_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, b"these are notes, not a database\n".repeat(200)).unwrap();
    let out = run(&["stats", notes.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("notes.txt") && err.trim_end().ends_with(": SQLITE_NOTADB"),
        "{err}"
    );

    let db = dir.path().join("d.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        .unwrap();
    let dest = dir.path().join("no-such-dir").join("copy.db");
    let out = run(&["backup", db.to_str().unwrap(), dest.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no-such-dir") && err.contains("(os error 2)"),
        "{err}"
    );
}
