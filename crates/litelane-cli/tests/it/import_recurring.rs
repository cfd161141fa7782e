//! Recurring loads (issue 12, section 3): `--pk` with `--on-conflict`,
//! `--alter`, several files (globs, union by name, `--source-column`) and
//! `--resume` across them. `litelane import` runs as a child process; every
//! case asserts the exact rows stored and the counts reported.

use std::process::Output;

use rusqlite::types::Value;

use crate::common::{i, r, t};

use crate::common;

use common::{litelane, query, stderr, Dir};

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim()).unwrap_or_default()
}

fn status(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

const N: Value = Value::Null;

/// The counts of a JSON summary: inserted, skipped, rejected.
fn counts(s: &serde_json::Value) -> (u64, u64, u64) {
    (
        s["rows_inserted"].as_u64().unwrap(),
        s["rows_skipped"].as_u64().unwrap(),
        s["rows_rejected"].as_u64().unwrap(),
    )
}

#[test]
fn each_on_conflict_mode_stores_exactly_these_rows() {
    // The stored table: ids 1 and 2, a column the input lacks (note), a
    // child row per id (ON DELETE CASCADE) and a delete trigger. The update
    // repeats id 2, brings id 3, and repeats id 3 within itself.
    let update = "id,name,qty\n2,B,21\n3,c,30\n3,c2,31\n";
    type Rows = Vec<Vec<Value>>;
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, i32, (u64, u64, u64), Rows, i64, Vec<&str>)> = vec![
        (
            "fail",
            3,
            (1, 0, 2),
            vec![
                vec![i(1), t("a"), i(10), t("keep")],
                vec![i(2), t("b"), i(20), t("keep")],
                vec![i(3), t("c"), i(30), N],
            ],
            2,
            vec![
                "2|key already present: \"id\"=2",
                "4|key already present: \"id\"=3",
            ],
        ),
        (
            "upsert",
            0,
            (3, 0, 0),
            vec![
                vec![i(1), t("a"), i(10), t("keep")],
                vec![i(2), t("B"), i(21), t("keep")],
                vec![i(3), t("c2"), i(31), N],
            ],
            2,
            vec![],
        ),
        (
            "ignore",
            0,
            (1, 2, 0),
            vec![
                vec![i(1), t("a"), i(10), t("keep")],
                vec![i(2), t("b"), i(20), t("keep")],
                vec![i(3), t("c"), i(30), N],
            ],
            2,
            vec![],
        ),
        (
            // Deleted and re-inserted: note goes back to its default, the
            // child of id 2 is deleted by the cascade.
            "replace",
            0,
            (3, 0, 0),
            vec![
                vec![i(1), t("a"), i(10), t("keep")],
                vec![i(2), t("B"), i(21), N],
                vec![i(3), t("c2"), i(31), N],
            ],
            1,
            vec![],
        ),
    ];
    for (mode, want_status, want_counts, want_rows, children, rejects) in cases {
        let d = Dir::new();
        let base = d.write("base.csv", "id,name,qty\n1,a,10\n2,b,20\n");
        let o = litelane(&[&base, "--db", &d.db(), "--table", "t", "--pk", "id"]);
        assert_eq!(status(&o), 0, "{}", stderr(&o));
        d.exec(
            "ALTER TABLE t ADD COLUMN note TEXT; UPDATE t SET note = 'keep';
             CREATE TABLE child (tid INTEGER REFERENCES t(id) ON DELETE CASCADE);
             INSERT INTO child VALUES (1), (2);
             CREATE TABLE log (id); 
             CREATE TRIGGER d AFTER DELETE ON t BEGIN INSERT INTO log VALUES (old.id); END;",
        );
        let up = d.write("update.csv", update);
        let rj = d.path("rejects.ndjson");
        let o = litelane(&[
            &up,
            "--db",
            &d.db(),
            "--table",
            "t",
            "--mode",
            "append",
            "--pk",
            "id",
            "--on-conflict",
            mode,
            "--rejects",
            rj.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(status(&o), want_status, "{mode}: {}", stderr(&o));
        let s = json(&o);
        assert_eq!(counts(&s), want_counts, "{mode}");
        // Every record is stored, skipped or rejected.
        let (a, b, c) = counts(&s);
        assert_eq!(a + b + c, 3, "{mode}");
        assert_eq!(
            query(&d.db(), "SELECT id, name, qty, note FROM t ORDER BY id"),
            want_rows,
            "{mode}"
        );
        assert_eq!(
            query(&d.db(), "SELECT count(*) FROM child"),
            vec![vec![i(children)]],
            "{mode}"
        );
        // SQLite fires delete triggers on REPLACE only with
        // recursive_triggers on, which litelane does not set.
        assert_eq!(
            query(&d.db(), "SELECT count(*) FROM log"),
            vec![vec![i(0)]],
            "{mode}"
        );
        let got: Vec<String> = std::fs::read_to_string(&rj)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!("{}|{}", v["line"], v["reason"].as_str().unwrap())
            })
            .collect();
        assert_eq!(got.len(), rejects.len(), "{mode}: {got:?}");
        for (g, w) in got.iter().zip(&rejects) {
            assert!(g.starts_with(w), "{mode}: {g} does not start with {w}");
        }
        if mode == "ignore" {
            assert!(
                stderr(&o).contains("2 rows skipped: key already present"),
                "{}",
                stderr(&o)
            );
        }
    }
}

#[test]
fn composite_and_hostile_keys_and_clear_errors() {
    let d = Dir::new();
    // Key columns with a quote and a space; a new table keyed on both.
    let a = d.write("a.csv", "d\"ay,id x,v\n2024-01-01,1,a\n2024-01-01,2,b\n");
    let o = litelane(&[
        &a,
        "--db",
        &d.db(),
        "--table",
        "t\"; DROP TABLE x; --",
        "--pk",
        "d\"ay,id x",
        "--on-conflict",
        "upsert",
        "--json",
    ]);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    let b = d.write("b.csv", "id x,d\"ay,v\n2,2024-01-01,B\n1,2024-01-02,c\n");
    let o = litelane(&[
        &b,
        "--db",
        &d.db(),
        "--table",
        "t\"; DROP TABLE x; --",
        "--mode",
        "append",
        "--pk",
        "d\"ay,id x",
        "--on-conflict",
        "upsert",
        "--json",
    ]);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    assert_eq!(counts(&json(&o)), (2, 0, 0));
    assert_eq!(
        query(
            &d.db(),
            "SELECT \"d\"\"ay\", \"id x\", v FROM \"t\"\"; DROP TABLE x; --\" ORDER BY 1, 2"
        ),
        vec![
            vec![t("2024-01-01"), i(1), t("a")],
            vec![t("2024-01-01"), i(2), t("B")],
            vec![t("2024-01-02"), i(1), t("c")],
        ]
    );
    // A NULL in a composite key is refused (NOT NULL), not stored.
    let c = d.write("c.csv", "d\"ay,id x,v\n,3,z\n");
    let o = litelane(&[
        &c,
        "--db",
        &d.db(),
        "--table",
        "t\"; DROP TABLE x; --",
        "--mode",
        "append",
        "--pk",
        "d\"ay,id x",
        "--on-conflict",
        "upsert",
        "--json",
    ]);
    assert_eq!(status(&o), 3, "{}", stderr(&o));
    assert_eq!(counts(&json(&o)), (0, 0, 1));

    // Bad invocations: exit 1, nothing changed, a message naming the cause.
    d.exec("CREATE TABLE plain (id INTEGER, v TEXT); INSERT INTO plain VALUES (1, 'x');");
    let p = d.write("p.csv", "id,v\n1,y\n");
    let nov = d.write("nov.csv", "v\nq\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![&p, "--table", "new1", "--on-conflict", "upsert"],
            "--on-conflict upsert needs --pk",
        ),
        (
            vec![&p, "--table", "new2", "--pk", "nope"],
            "--pk \"nope\": no such column",
        ),
        (
            vec![&p, "--table", "new3", "--pk", "id,"],
            "empty column name",
        ),
        (
            vec![&p, "--table", "plain", "--mode", "append", "--pk", "nope"],
            "table \"plain\" has no such column",
        ),
        (
            vec![
                &p,
                "--table",
                "plain",
                "--mode",
                "append",
                "--pk",
                "id",
                "--on-conflict",
                "ignore",
            ],
            "needs a PRIMARY KEY or UNIQUE index on (\"id\") of table \"plain\"",
        ),
        (
            vec![
                &p,
                "--table",
                "plain",
                "--mode",
                "append",
                "--pk",
                "nope",
                "--on-conflict",
                "upsert",
            ],
            "table \"plain\" has no such column",
        ),
    ];
    let db = d.db();
    for (args, want) in cases {
        let mut all = args.clone();
        all.extend(["--db", db.as_str()]);
        let o = litelane(&all);
        assert_eq!(status(&o), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(
        query(&d.db(), "SELECT id, v FROM plain"),
        vec![vec![i(1), t("x")]]
    );
    // With a UNIQUE index the same upsert works; an input without the key
    // column cannot be matched.
    d.exec("CREATE UNIQUE INDEX plain_id ON plain (id);");
    let o = litelane(&[
        &p,
        "--db",
        &d.db(),
        "--table",
        "plain",
        "--mode",
        "append",
        "--pk",
        "id",
        "--on-conflict",
        "upsert",
    ]);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    assert_eq!(
        query(&d.db(), "SELECT id, v FROM plain"),
        vec![vec![i(1), t("y")]]
    );
    let o = litelane(&[
        &nov,
        "--db",
        &d.db(),
        "--table",
        "plain",
        "--mode",
        "append",
        "--pk",
        "id",
        "--on-conflict",
        "upsert",
    ]);
    assert_eq!(status(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the input has no such column"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn alter_adds_missing_columns_typed_or_the_error_names_them() {
    for format in ["csv", "ndjson"] {
        let d = Dir::new();
        d.exec(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO t VALUES (1, 'a');",
        );
        let f = if format == "csv" {
            d.write(
                "new.csv",
                "id,name,n,r,zip,\"we\"\"ird\"\n2,b,7,1.5,02134,x\n3,c,,2.5,10001,y\n",
            )
        } else {
            d.write(
                "new.ndjson",
                "{\"id\":2,\"name\":\"b\",\"n\":7,\"r\":1.5,\"zip\":\"02134\",\"we\\\"ird\":\"x\"}\n\
                 {\"id\":3,\"name\":\"c\",\"n\":null,\"r\":2.5,\"zip\":\"10001\",\"we\\\"ird\":\"y\"}\n",
            )
        };
        let base = [
            f.as_str(),
            "--db",
            &d.db(),
            "--table",
            "t",
            "--mode",
            "append",
        ];
        if format == "csv" {
            // Without --alter: refused, naming every missing column.
            let o = litelane(&base);
            assert_eq!(status(&o), 1, "{}", stderr(&o));
            let e = stderr(&o);
            assert!(
                e.contains(
                    "input columns \"n\", \"r\", \"zip\", \"we\"\"ird\" are not in table \"t\""
                ) && e.contains("--alter"),
                "{e}"
            );
            assert_eq!(
                query(&d.db(), "SELECT count(*) FROM pragma_table_info('t')"),
                vec![vec![i(2)]]
            );
        }
        let mut args = base.to_vec();
        args.extend(["--alter", "--json"]);
        let o = litelane(&args);
        assert_eq!(status(&o), 0, "{format}: {}", stderr(&o));
        assert_eq!(
            query(&d.db(), "SELECT name, type FROM pragma_table_info('t')"),
            vec![
                vec![t("id"), t("INTEGER")],
                vec![t("name"), t("TEXT")],
                vec![t("n"), t("INTEGER")],
                vec![t("r"), t("REAL")],
                vec![t("zip"), t("TEXT")],
                vec![t("we\"ird"), t("TEXT")],
            ],
            "{format}"
        );
        assert_eq!(
            query(&d.db(), "SELECT * FROM t ORDER BY id"),
            vec![
                vec![i(1), t("a"), N, N, N, N],
                vec![i(2), t("b"), i(7), r(1.5), t("02134"), t("x")],
                vec![i(3), t("c"), N, r(2.5), t("10001"), t("y")],
            ],
            "{format}"
        );
    }
}

#[test]
fn several_files_union_by_name_with_their_source() {
    let d = Dir::new();
    let a = d.write("in/2024-01-01.csv", "id,v\n1,a\n2,b\n");
    let b = d.write("in/2024-01-02.csv", "w,id,v\n9.5,3,c\n,4,d\n");
    let c = d.write("more.csv", "id,v\n5,e\nx,bad\n");
    let pattern = d.path("in/*.csv").to_str().unwrap().to_string();
    // The pattern (expanded by litelane, sorted), then a path, then a file
    // the pattern already named: imported once.
    let o = litelane(&[
        &pattern,
        &c,
        &a,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--pk",
        "id",
        "--source-column",
        "src",
        "--json",
    ]);
    assert_eq!(status(&o), 3, "{}", stderr(&o));
    let s = json(&o);
    let per_file: Vec<(String, u64, u64)> = s["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["source"].as_str().unwrap().to_string(),
                f["rows_inserted"].as_u64().unwrap(),
                f["rows_rejected"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        per_file,
        vec![(a.clone(), 2, 0), (b.clone(), 2, 0), (c.clone(), 1, 1)]
    );
    assert_eq!(counts(&s), (5, 0, 1));
    assert_eq!(
        query(&d.db(), "SELECT id, v, w, src FROM t ORDER BY id"),
        vec![
            vec![i(1), t("a"), N, t(&a)],
            vec![i(2), t("b"), N, t(&a)],
            vec![i(3), t("c"), r(9.5), t(&b)],
            vec![i(4), t("d"), N, t(&b)],
            vec![i(5), t("e"), N, t(&c)],
        ]
    );
    let e = stderr(&o);
    assert!(
        e.contains("3 files into \"t\": 5 rows imported, 0 skipped, 1 rejected"),
        "{e}"
    );

    // The same load again, as a recurring load: upsert changes nothing.
    let o = litelane(&[
        &pattern,
        &c,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--mode",
        "append",
        "--pk",
        "id",
        "--on-conflict",
        "ignore",
        "--source-column",
        "src",
        "--json",
    ]);
    assert_eq!(status(&o), 3, "{}", stderr(&o));
    assert_eq!(counts(&json(&o)), (0, 5, 1));
    assert_eq!(query(&d.db(), "SELECT count(*) FROM t"), vec![vec![i(5)]]);

    // Errors: no match, no --table, stdin among several, a source column
    // that is an input column.
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                d.path("none/*.csv").to_str().unwrap().into(),
                "--table".into(),
                "u".into(),
            ],
            "no file matches",
        ),
        (
            vec![a.clone(), b.clone()],
            "--table is required to import several files",
        ),
        (
            vec![a.clone(), "-".into(), "--table".into(), "u".into()],
            "stdin (-) cannot be one of several files",
        ),
        (
            vec![
                a.clone(),
                "--table".into(),
                "u".into(),
                "--source-column".into(),
                "V".into(),
            ],
            "the input has a column of that name",
        ),
    ];
    let db = d.db();
    for (args, want) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--db", db.as_str()]);
        let o = litelane(&all);
        assert_eq!(status(&o), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(
        query(
            &d.db(),
            "SELECT count(*) FROM sqlite_schema WHERE name = 'u'"
        ),
        vec![vec![i(0)]]
    );
}

#[test]
fn resume_continues_across_files_storing_each_row_once() {
    let d = Dir::new();
    let a = d.write("a.csv", "id,v\n1,a\n2,b\n");
    // The bad record stops the first run (--max-rejects 0) in the middle
    // of the second file, after two commits there.
    let b = d.write("b.csv", "id,v\n3,c\n4,d\nx,bad\n5,e\n");
    let c = d.write("c.csv", "id,v,extra\n6,f,z\n");
    let common = [
        a.as_str(),
        b.as_str(),
        c.as_str(),
        "--db",
        &d.db(),
        "--table",
        "t",
        "--pk",
        "id",
        "--commit-every",
        "1",
        "--source-column",
        "src",
    ];
    let mut first = common.to_vec();
    first.extend(["--max-rejects", "0"]);
    let o = litelane(&first);
    assert_eq!(status(&o), 1, "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("file 2 of 3")
            && e.contains("the files before it stay imported")
            && e.contains("1 file(s) after it were not read"),
        "{e}"
    );
    assert_eq!(
        query(&d.db(), "SELECT id FROM t ORDER BY id"),
        vec![vec![i(1)], vec![i(2)], vec![i(3)], vec![i(4)]]
    );
    let mut again = common.to_vec();
    again.extend(["--resume", "--json"]);
    let o = litelane(&again);
    assert_eq!(status(&o), 3, "{}", stderr(&o));
    let s = json(&o);
    // This run: a.csv already finished, b.csv continued (the bad record
    // rejected, 5 stored), c.csv imported (its new column added).
    assert_eq!(counts(&s), (2, 0, 1), "{s}");
    assert_eq!(s["files"][0]["already_finished"], true, "{s}");
    assert_eq!(
        query(&d.db(), "SELECT id, v, extra, src FROM t ORDER BY id"),
        vec![
            vec![i(1), t("a"), N, t(&a)],
            vec![i(2), t("b"), N, t(&a)],
            vec![i(3), t("c"), N, t(&b)],
            vec![i(4), t("d"), N, t(&b)],
            vec![i(5), t("e"), N, t(&b)],
            vec![i(6), t("f"), t("z"), t(&c)],
        ]
    );
    // Once more: every file already finished, nothing stored twice.
    let o = litelane(&again);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    assert_eq!(counts(&json(&o)), (0, 0, 0));
    assert_eq!(query(&d.db(), "SELECT count(*) FROM t"), vec![vec![i(6)]]);
}

#[test]
fn several_files_share_one_rejects_file_each_reject_naming_its_file() {
    let d = Dir::new();
    let a = d.write("a.csv", "id,v\n1,a\n3,too,many\n");
    let b = d.write("b.csv", "id,v\n4\n2,b\n");
    let rj = d.path("rejects.ndjson");
    // An old rejects file: replaced by this run's (as with one file).
    std::fs::write(&rj, "old\n").unwrap();
    let o = litelane(&[
        &a,
        &b,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--pk",
        "id",
        "--rejects",
        rj.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(status(&o), 3, "{}", stderr(&o));
    assert_eq!(counts(&json(&o)), (2, 0, 2));
    let got: Vec<(String, u64, String)> = std::fs::read_to_string(&rj)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["source"].as_str().unwrap_or("?").to_string(),
                v["line"].as_u64().unwrap(),
                v["raw"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (a.clone(), 3, "3,too,many".to_string()),
            (b.clone(), 2, "4".to_string())
        ]
    );
    assert_eq!(
        query(&d.db(), "SELECT id, v FROM t ORDER BY id"),
        vec![vec![i(1), t("a")], vec![i(2), t("b")]]
    );
}

#[test]
fn replace_is_sqlites_insert_or_replace_and_other_conflicts_are_rejects() {
    // A second UNIQUE column and a NOT NULL column with a default: the
    // input's row has key 3 (new), code A (already row 1's) and v NULL.
    type Case<'a> = (&'a str, i32, (u64, u64, u64), Vec<Vec<Value>>, &'a str);
    let cases: Vec<Case> = vec![
        (
            // REPLACE deletes row 1 (its code conflicts, not its key) and
            // puts the column's default in place of the NULL.
            "replace",
            0,
            (1, 0, 0),
            vec![vec![i(2), t("B"), t("y")], vec![i(3), t("A"), t("dflt")]],
            "",
        ),
        (
            "upsert",
            3,
            (0, 0, 1),
            vec![vec![i(1), t("A"), t("x")], vec![i(2), t("B"), t("y")]],
            "constraint failed",
        ),
        (
            "ignore",
            3,
            (0, 0, 1),
            vec![vec![i(1), t("A"), t("x")], vec![i(2), t("B"), t("y")]],
            "constraint failed",
        ),
        (
            // Not the key: the reason is SQLite's, not "key already present".
            "fail",
            3,
            (0, 0, 1),
            vec![vec![i(1), t("A"), t("x")], vec![i(2), t("B"), t("y")]],
            "constraint failed",
        ),
    ];
    for (mode, want_status, want_counts, want_rows, reason) in cases {
        let d = Dir::new();
        d.exec(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, code TEXT UNIQUE, \
             v TEXT NOT NULL DEFAULT 'dflt');
             INSERT INTO t VALUES (1, 'A', 'x'), (2, 'B', 'y');",
        );
        let f = d.write("in.csv", "id,code,v\n3,A,\n");
        let rj = d.path("r.ndjson");
        let o = litelane(&[
            &f,
            "--db",
            &d.db(),
            "--table",
            "t",
            "--mode",
            "append",
            "--pk",
            "id",
            "--on-conflict",
            mode,
            "--rejects",
            rj.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(status(&o), want_status, "{mode}: {}", stderr(&o));
        assert_eq!(counts(&json(&o)), want_counts, "{mode}");
        assert_eq!(
            query(&d.db(), "SELECT id, code, v FROM t ORDER BY id"),
            want_rows,
            "{mode}"
        );
        let rejects = std::fs::read_to_string(&rj).unwrap_or_default();
        if reason.is_empty() {
            assert_eq!(rejects, "", "{mode}");
        } else {
            assert!(
                rejects.contains(reason) && !rejects.contains("key already present"),
                "{mode}: {rejects}"
            );
        }
    }
}

#[test]
fn several_files_share_one_database_open_and_fast_restores_the_journal_mode_once() {
    // The files go through one open database; with `fast` the WAL database
    // is back in WAL mode after the last file, and a failing later file
    // leaves the earlier ones committed and the mode restored too.
    let d = Dir::new();
    d.exec("PRAGMA journal_mode = WAL; CREATE TABLE keep(x); INSERT INTO keep VALUES (42);");
    let a = d.write("a.csv", "id,v\n1,a\n2,b\n");
    let b = d.write("b.csv", "id,v,w\n3,c,9.5\n");
    let o = litelane(&[
        &a,
        &b,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--profile",
        "fast",
        "--json",
    ]);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    let mode = || query(&d.db(), "PRAGMA journal_mode")[0][0].clone();
    assert_eq!(mode(), t("wal"));
    assert_eq!(
        query(&d.db(), "SELECT id, v, w FROM t ORDER BY id"),
        vec![
            vec![i(1), t("a"), N],
            vec![i(2), t("b"), N],
            vec![i(3), t("c"), r(9.5)]
        ]
    );
    let bad = d.write("bad.csv", "id,v\n4,\"open\n");
    let o = litelane(&[
        &a,
        &bad,
        "--db",
        &d.db(),
        "--table",
        "u",
        "--profile",
        "fast",
    ]);
    assert_eq!(status(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("file 2 of 2"), "{}", stderr(&o));
    assert_eq!(mode(), t("wal"));
    assert_eq!(query(&d.db(), "SELECT count(*) FROM u"), vec![vec![i(2)]]);
    assert_eq!(query(&d.db(), "SELECT x FROM keep"), vec![vec![i(42)]]);
}

#[test]
fn several_files_refuse_outputs_and_inputs_that_are_each_other_before_importing() {
    // (name, files to list (`{d}` is the directory), --rejects or "", a
    // database set up first, stderr fragment). Every case must fail before
    // anything is imported, leaving each file as it was.
    type Row = (
        &'static str,
        &'static [&'static str],
        &'static str,
        bool,
        &'static str,
    );
    let cases: &[Row] = &[
        (
            "--rejects naming the second file of the list",
            &["{d}/a.csv", "{d}/b.csv"],
            "{d}/b.csv",
            false,
            "it is input file 2 of 2",
        ),
        (
            "--rejects naming a later match of the glob",
            &["{d}/*.csv"],
            "{d}/b.csv",
            false,
            "it is input file 2 of 2",
        ),
        (
            "--rejects naming a later file through ./",
            &["{d}/a.csv", "{d}/b.csv"],
            "{d}/./b.csv",
            false,
            "it is input file 2 of 2",
        ),
        (
            "--rejects naming the database's -journal (not there yet)",
            &["{d}/a.csv", "{d}/b.csv"],
            "{d}/t.db-journal",
            false,
            "-journal file",
        ),
        (
            "a glob that matches the database",
            &["{d}/*"],
            "",
            true,
            "it is the database",
        ),
        (
            "the database's -wal among the files",
            &["{d}/a.csv", "{d}/t.db-wal"],
            "",
            true,
            "it is the database's -wal file",
        ),
    ];
    for (name, files, rejects, with_db, want) in cases {
        let d = Dir::new();
        d.write("a.csv", "id,v\n1,a\n");
        d.write("b.csv", "id,v\n2,\"b\"\"\n");
        let dir = d
            .path("")
            .to_str()
            .unwrap()
            .trim_end_matches('/')
            .to_string();
        let fill = |s: &str| s.replace("{d}", &dir);
        // An open WAL connection keeps -wal and -shm beside the database.
        let _open = with_db.then(|| {
            let c = rusqlite::Connection::open(d.db()).unwrap();
            c.execute_batch(
                "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER, v TEXT); \
                 INSERT INTO t VALUES (9, 'kept');",
            )
            .unwrap();
            c
        });
        let before: Vec<Vec<u8>> = ["a.csv", "b.csv"]
            .iter()
            .map(|f| std::fs::read(d.path(f)).unwrap())
            .collect();
        let mut args: Vec<String> = files.iter().map(|f| fill(f)).collect();
        args.extend(["--db".into(), d.db(), "--table".into(), "t".into()]);
        args.extend(["--mode".into(), "append".into()]);
        if !rejects.is_empty() {
            args.extend(["--rejects".into(), fill(rejects)]);
        }
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = litelane(&refs);
        let err = stderr(&o);
        assert_eq!(status(&o), 1, "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        for (f, b) in ["a.csv", "b.csv"].iter().zip(&before) {
            assert_eq!(&std::fs::read(d.path(f)).unwrap(), b, "{name}: {f} changed");
        }
        if *with_db {
            assert_eq!(
                query(&d.db(), "SELECT id, v FROM t"),
                vec![vec![i(9), t("kept")]],
                "{name}"
            );
        } else {
            assert!(!d.path("t.db").exists(), "{name}: the database was created");
        }
    }
}

#[test]
fn resume_refuses_a_recorded_rejects_file_that_is_now_one_of_the_files() {
    let d = Dir::new();
    let a = d.write("a.csv", "id,v\n1,a\nx,bad,row\n2,b\n");
    let b = d.write("b.csv", "id,v\n3,c\n");
    let later = d.path("later.csv");
    let later_s = later.to_str().unwrap().to_string();
    let common = [
        a.as_str(),
        b.as_str(),
        "--db",
        &d.db(),
        "--table",
        "t",
        "--commit-every",
        "1",
    ];
    // The first run records later.csv as its rejects file and stops at
    // the first reject (--max-rejects 0).
    let mut first = common.to_vec();
    first.extend(["--rejects", &later_s, "--max-rejects", "0"]);
    let o = litelane(&first);
    assert_eq!(status(&o), 1, "{}", stderr(&o));
    // Then later.csv becomes an input of its own, named in the resumed run.
    std::fs::write(&later, "id,v\n9,z\n").unwrap();
    let mut again = vec![a.as_str(), b.as_str(), later_s.as_str()];
    again.extend_from_slice(&common[2..]);
    again.push("--resume");
    let o = litelane(&again);
    let e = stderr(&o);
    assert_eq!(status(&o), 1, "{e}");
    assert!(e.contains("refusing the recorded rejects file"), "{e}");
    assert_eq!(std::fs::read(&later).unwrap(), b"id,v\n9,z\n");
}
