//! An import that creates its database writes it aside and links it into
//! place once complete (`load/aside.rs`, docs/import.md "A new database is
//! written once"): the same database as one written through the WAL, never
//! visible half-made, never in the way of another program's database.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rusqlite::types::Value;

use crate::common::{i, query, stderr, t, Dir};

/// `litelane import ARGS...` with the environment `env`.
fn import_with(env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_litelane"))
        .arg("import")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run litelane")
}

/// `litelane import SRC --db DB --table t`, with "another program"
/// creating a table named `theirs` in `DB` just before the import puts a
/// database written aside in place (a test hook; it runs at no other time).
fn import_while_they_create(theirs: &str, src: &str, db: &str) -> Output {
    import_with(
        &[("LITELANE_TEST_CREATE_BEFORE_PUBLISH", theirs)],
        &[src, "--db", db, "--table", "t", "--quiet"],
    )
}

/// The names in `d`'s directory, sorted.
fn names(d: &Dir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(d.path("."))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The files aside (`DB.litelane-import-HASH.importing`) in `d`.
fn asides(d: &Dir) -> Vec<String> {
    names(d)
        .into_iter()
        .filter(|n| n.ends_with(".importing"))
        .collect()
}

/// Asserts that no file aside is left in `d`.
fn assert_no_aside(d: &Dir, when: &str) {
    assert_eq!(
        asides(d),
        Vec::<String>::new(),
        "{when}: a file aside was left behind"
    );
}

#[test]
fn a_new_database_written_aside_is_the_one_the_wal_would_have_made() {
    // (what, file name, input, extra arguments)
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "typed CSV with a reject into a rejects table",
            "a.csv",
            "id,name,score\n1,ann,2.5\n2,bob\n3,cy,4\n",
            &["--rejects-table", "bad"],
        ),
        (
            "a primary key with upserts",
            "b.csv",
            "id,v\n1,a\n2,b\n1,c\n",
            &["--pk", "id", "--on-conflict", "upsert"],
        ),
        (
            "NDJSON with nested values",
            "c.ndjson",
            "{\"id\":1,\"tags\":[\"x\"]}\n{\"id\":2,\"o\":{\"k\":1}}\n",
            &[],
        ),
        (
            "--mode replace and a source column",
            "d.tsv",
            "k\tv\nx\t1\ny\t2\n",
            &["--mode", "replace", "--source-column", "src"],
        ),
    ];
    let d = Dir::new();
    for (what, file, input, extra) in cases {
        let src = d.write(file, input);
        let mut dbs = Vec::new();
        for (name, env) in [
            ("aside", &[][..]),
            ("wal", &[("LITELANE_IMPORT_NO_ASIDE", "1")][..]),
        ] {
            let db = d.path(&format!("{file}-{name}.db"));
            let db = db.to_str().unwrap();
            let mut args = vec![src.as_str(), "--db", db, "--table", "t", "--quiet"];
            args.extend_from_slice(extra);
            let o = import_with(env, &args);
            assert!(
                matches!(o.status.code(), Some(0 | 3)),
                "{what}, {name}: {}",
                stderr(&o)
            );
            dbs.push(std::fs::read(db).unwrap());
            assert_eq!(
                query(db, "PRAGMA journal_mode"),
                vec![vec![t("wal")]],
                "{what}, {name}"
            );
        }
        assert!(
            dbs[0] == dbs[1],
            "{what}: the database written aside differs from the one written through the WAL"
        );
    }
    assert_no_aside(&d, "after the table of cases");
}

#[test]
fn a_database_created_meanwhile_by_another_program_gets_the_import_beside_its_tables() {
    let d = Dir::new();
    let src = d.write("in.csv", "id,v\n1,a\n2,b\n");
    let db = d.db();
    let o = import_while_they_create("theirs", &src, &db);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        query(&db, "SELECT name FROM sqlite_schema ORDER BY name"),
        vec![vec![t("t")], vec![t("theirs")]]
    );
    assert_eq!(
        query(&db, "SELECT id, v FROM t ORDER BY id"),
        vec![vec![i(1), t("a")], vec![i(2), t("b")]]
    );
    assert_no_aside(&d, "copied beside their table");

    // Their database has a table of the import's name: nothing is
    // imported, and theirs is left as it is.
    let db2 = d.path("two.db");
    let db2 = db2.to_str().unwrap();
    let o = import_while_they_create("t", &src, db2);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("was created by another program while the import ran")
            && err.contains("nothing was imported"),
        "{err}"
    );
    assert_eq!(
        query(db2, "SELECT sql FROM sqlite_schema"),
        vec![vec![t("CREATE TABLE \"t\"(x)")]]
    );
    assert_eq!(
        query(db2, "SELECT count(*) FROM t"),
        vec![vec![Value::Integer(0)]]
    );
    assert_no_aside(&d, "refused beside their table of its name");
}

#[test]
fn an_existing_database_is_written_in_place() {
    let d = Dir::new();
    d.exec("PRAGMA user_version = 7");
    let src = d.write("in.csv", "id\n1\n");
    let db = d.db();
    // The hook runs only when a database written aside is put in place.
    let o = import_while_they_create("theirs", &src, &db);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        query(&db, "SELECT name FROM sqlite_schema"),
        vec![vec![t("t")]]
    );
    assert_eq!(
        query(&db, "PRAGMA user_version"),
        vec![vec![Value::Integer(7)]]
    );
}

#[test]
fn an_in_memory_database_is_no_file() {
    // `--db :memory:` imports into a database that ends with the process (a
    // dry run): nothing may appear in the working directory.
    let d = Dir::new();
    let src = d.write("in.csv", "id\n1\n");
    let o = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args([
            "import", &src, "--db", ":memory:", "--table", "t", "--quiet",
        ])
        .current_dir(d.path("."))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(names(&d), vec!["in.csv".to_string()]);
}

#[test]
fn a_killed_import_leaves_no_database_and_the_next_import_removes_its_file_aside() {
    let d = Dir::new();
    let db = d.db();
    let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args([
            "import", "-", "--format", "csv", "--db", &db, "--table", "t", "--quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut csv = String::from("id,v\n");
    for n in 1..=50_000 {
        csv.push_str(&format!("{n},xxxxxxxxxx\n"));
    }
    input.write_all(csv.as_bytes()).unwrap();
    // The input stays open: the import is still writing when it is killed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while asides(&d).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the import never wrote its database aside"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    drop(input);
    assert!(!Path::new(&db).exists(), "a half-made database is visible");
    let orphan = asides(&d);
    assert_eq!(orphan.len(), 1);
    // What a killed import that had written pages leaves there, which the
    // next import must not open as its own.
    std::fs::write(
        d.path(&orphan[0]),
        b"pages of a killed import, not a database",
    )
    .unwrap();

    let src = d.write("in.csv", "id,v\n1,a\n");
    let o = import_with(&[], &[&src, "--db", &db, "--table", "t", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        query(&db, "SELECT count(*) FROM t"),
        vec![vec![Value::Integer(1)]]
    );
    assert_no_aside(&d, "after the import that followed the killed one");
}

#[test]
fn imports_of_two_tables_into_one_new_database_at_once_both_land() {
    // However the two interleave, one links its database into place and
    // the other finds the name taken and copies its table in, or each
    // finds the database there when it starts: both tables end up whole.
    let d = Dir::new();
    let db = d.db();
    let mut inputs = Vec::new();
    for (name, rows) in [("a", 20_000), ("b", 30_000)] {
        let mut csv = String::from("id,v\n");
        for n in 1..=rows {
            csv.push_str(&format!("{n},{name}{n}\n"));
        }
        inputs.push((name, rows, d.write(&format!("{name}.csv"), csv)));
    }
    for round in 0..3 {
        let _ = std::fs::remove_file(&db);
        let children: Vec<_> = inputs
            .iter()
            .map(|(name, _, src)| {
                Command::new(env!("CARGO_BIN_EXE_litelane"))
                    .args(["import", src, "--db", &db, "--table", name, "--quiet"])
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "round {round}: {}", stderr(&o));
        }
        for (name, rows, _) in &inputs {
            assert_eq!(
                query(
                    &db,
                    &format!("SELECT count(*), count(DISTINCT v) FROM {name}")
                ),
                vec![vec![Value::Integer(*rows), Value::Integer(*rows)]],
                "round {round}"
            );
        }
        assert_no_aside(&d, &format!("round {round}"));
    }
}
