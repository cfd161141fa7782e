//! `litelane import`, run as a child process on files made by each test.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use crate::common;

use common::{litelane, query, stderr, Dir};

/// A finished import: exit 0 when every record was stored, 3 when some were
/// rejected (from the JSON summary, or the stderr summary without one).
fn ok(o: &Output) -> serde_json::Value {
    let out = String::from_utf8_lossy(&o.stdout);
    let s: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::Null);
    let rejected = match s["rows_rejected"].as_u64() {
        Some(n) => n > 0,
        None => stderr(o).contains("rejected"),
    };
    let want = if rejected { 3 } else { 0 };
    assert_eq!(o.status.code(), Some(want), "litelane: {}", stderr(o));
    s
}

fn failed(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "expected exit 1: {}", stderr(o));
    stderr(o)
}

fn one(db: &str, sql: &str) -> Value {
    query(db, sql).remove(0).remove(0)
}

fn int(v: i64) -> Value {
    Value::Integer(v)
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

#[test]
fn csv_quoting_crlf_bom_types_and_nulls() {
    let d = Dir::new();
    let src = d.write(
        "people.csv",
        b"\xef\xbb\xbfid,name,score,zip,note\r\n\
          1,\"Smith, Ann\",1.5,007,\"said \"\"hi\"\"\"\r\n\
          2,\"multi\nline\",,01234,NA\r\n\
          3,plain,2,5,\r\n",
    );
    let s = ok(&litelane(&[
        &src,
        "--db",
        &d.db(),
        "--json",
        "--quiet",
        "--null",
        "",
        "--null",
        "NA",
    ]));
    assert_eq!(s["table"], "people");
    assert_eq!(s["rows_inserted"], 3);
    assert_eq!(s["rows_rejected"], 0);
    assert_eq!(s["profile"], "balanced");
    let types: Vec<(String, String)> = s["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("id", "INTEGER"),
            ("name", "TEXT"),
            ("score", "REAL"),
            ("zip", "TEXT"),
            ("note", "TEXT")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let rows = query(
        &d.db(),
        "SELECT id, typeof(id), name, score, zip, note FROM people ORDER BY id",
    );
    assert_eq!(
        rows[0],
        vec![
            int(1),
            text("integer"),
            text("Smith, Ann"),
            Value::Real(1.5),
            text("007"),
            text("said \"hi\"")
        ]
    );
    assert_eq!(rows[1][2], text("multi\nline"));
    assert_eq!(rows[1][3], Value::Null);
    assert_eq!(rows[1][5], Value::Null, "NA is a null token");
    assert_eq!(rows[2][3], Value::Real(2.0));
    assert_eq!(rows[2][5], Value::Null, "the empty field is a null token");
}

#[test]
fn values_that_do_not_fit_are_kept_as_they_are_unless_strict() {
    // Types come from the first 10,000 records; record 10,005 does not fit.
    let d = Dir::new();
    let mut csv = String::from("n,x\n");
    for i in 1..=10_010 {
        if i == 10_005 {
            csv.push_str("oops,not a number\n");
        } else {
            csv.push_str(&format!("{i},{i}.5\n"));
        }
    }
    let src = d.write("t.csv", csv.as_bytes());
    let s = ok(&litelane(&[&src, "--db", &d.db(), "--json", "--quiet"]));
    assert_eq!(s["rows_inserted"], 10_010);
    assert_eq!(s["columns"][0]["type"], "INTEGER");
    assert_eq!(s["columns"][1]["type"], "REAL");
    assert_eq!(
        query(&d.db(), "SELECT n, typeof(n), x FROM t WHERE rowid = 10005")[0],
        vec![text("oops"), text("text"), text("not a number")]
    );
    assert_eq!(
        one(&d.db(), "SELECT typeof(x) FROM t WHERE rowid = 10006"),
        text("real")
    );

    let db2 = d.path("strict.db");
    let rej = d.path("rej.ndjson");
    let o = litelane(&[
        &src,
        "--db",
        db2.to_str().unwrap(),
        "--strict",
        "--json",
        "--quiet",
        "--rejects",
        rej.to_str().unwrap(),
    ]);
    let s = ok(&o);
    assert_eq!(s["rows_inserted"], 10_009);
    assert_eq!(s["rows_rejected"], 1);
    let sql: String = match one(
        db2.to_str().unwrap(),
        "SELECT sql FROM sqlite_schema WHERE name = 't'",
    ) {
        Value::Text(t) => t,
        v => panic!("{v:?}"),
    };
    assert!(sql.ends_with("STRICT"), "{sql}");
    let r: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&rej)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r["line"], 10_006);
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("\"oops\" is not an INTEGER"),
        "{r}"
    );
    assert_eq!(r["raw"], "oops,not a number");
}

#[test]
fn tsv_ndjson_gzip_and_stdin() {
    let d = Dir::new();
    let tsv = d.write("a.tsv", b"k\tv\n\"q\t1\nx\t2\n");
    let s = ok(&litelane(&[&tsv, "--db", &d.db(), "--json", "--quiet"]));
    assert_eq!(s["rows_inserted"], 2);
    assert_eq!(one(&d.db(), "SELECT k FROM a WHERE v = 1"), text("\"q"));

    let nd = d.write(
        "events.ndjson",
        br#"{"id": 1, "tags": ["a", "b"], "ok": true, "w": 1.5}
{"id": 2, "meta": {"x": null}, "w": 2}

[1, 2]
{"id": 3}
"#,
    );
    let s = ok(&litelane(&[&nd, "--db", &d.db(), "--json", "--quiet"]));
    assert_eq!(s["rows_inserted"], 3);
    assert_eq!(s["rows_rejected"], 1);
    let rows = query(
        &d.db(),
        "SELECT id, tags, ok, w, meta FROM events ORDER BY id",
    );
    assert_eq!(
        rows[0],
        vec![
            int(1),
            text(r#"["a","b"]"#),
            int(1),
            Value::Real(1.5),
            Value::Null
        ]
    );
    assert_eq!(rows[1][4], text(r#"{"x":null}"#));
    assert_eq!(rows[1][3], Value::Real(2.0));
    assert_eq!(
        rows[2],
        vec![int(3), Value::Null, Value::Null, Value::Null, Value::Null]
    );

    let gz = d.path("z.csv.gz");
    let mut enc =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    enc.write_all(b"a,b\n1,x\n2,y\n").unwrap();
    enc.finish().unwrap();
    let s = ok(&litelane(&[
        gz.to_str().unwrap(),
        "--db",
        &d.db(),
        "--json",
        "--quiet",
    ]));
    assert_eq!(s["table"], "z");
    assert_eq!(
        one(&d.db(), "SELECT group_concat(b, '') FROM z"),
        text("xy")
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args([
            "import",
            "-",
            "--db",
            &d.db(),
            "--table",
            "piped",
            "--format",
            "ndjson",
            "--quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"a\":1}\n{\"a\":2}\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    ok(&o);
    assert_eq!(one(&d.db(), "SELECT sum(a) FROM piped"), int(3));
    let o = litelane(&["-", "--db", &d.db()]);
    assert!(failed(&o).contains("--table is required"));
}

#[test]
fn append_matches_columns_by_name_and_replace_starts_over() {
    let d = Dir::new();
    let a = d.write("a.csv", b"id,name\n1,a\n2,b\n");
    let b = d.write("b.csv", b"NAME,id\nc,3\n");
    ok(&litelane(&[&a, "--db", &d.db(), "--table", "t", "--quiet"]));
    let o = litelane(&[&b, "--db", &d.db(), "--table", "t", "--quiet"]);
    assert!(
        failed(&o).contains("already exists"),
        "create refuses an existing table"
    );
    ok(&litelane(&[
        &b,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--mode",
        "append",
        "--quiet",
    ]));
    assert_eq!(
        query(&d.db(), "SELECT id, name FROM t ORDER BY id"),
        vec![
            vec![int(1), text("a")],
            vec![int(2), text("b")],
            vec![int(3), text("c")]
        ]
    );
    let bad = d.write("bad.csv", b"id,nope\n4,x\n");
    let o = litelane(&[
        &bad,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--mode",
        "append",
        "--quiet",
    ]);
    let e = failed(&o);
    assert!(
        e.contains("input column \"nope\" is not in table") && e.contains("--alter"),
        "{e}"
    );
    ok(&litelane(&[
        &b,
        "--db",
        &d.db(),
        "--table",
        "t",
        "--mode",
        "replace",
        "--quiet",
    ]));
    assert_eq!(
        query(&d.db(), "SELECT id, name FROM t"),
        vec![vec![int(3), text("c")]]
    );
}

#[test]
fn every_record_is_stored_or_rejected_with_its_line() {
    let d = Dir::new();
    let src = d.write(
        "r.csv",
        b"id,v\n1,a\n2\n3,\"c\"\n4,d,extra\n5,\xff\xfe\n6,\"multi\nline\"\n7,g,h\n8,h\n",
    );
    let rej = d.path("rej.ndjson");
    let s = ok(&litelane(&[
        &src,
        "--db",
        &d.db(),
        "--json",
        "--quiet",
        "--rejects",
        rej.to_str().unwrap(),
    ]));
    let rejects: Vec<serde_json::Value> = std::fs::read_to_string(&rej)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(s["rows_inserted"], 4);
    assert_eq!(s["rows_rejected"], 4);
    assert_eq!(
        s["rows_inserted"].as_u64().unwrap() + s["rows_rejected"].as_u64().unwrap(),
        8
    );
    let lines: Vec<u64> = rejects
        .iter()
        .map(|r| r["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![3, 5, 6, 9]);
    assert!(rejects[0]["reason"]
        .as_str()
        .unwrap()
        .contains("expected 2 fields, found 1"));
    assert!(rejects[2]["reason"]
        .as_str()
        .unwrap()
        .contains("invalid UTF-8"));
    assert!(rejects[2]["raw_base64"].is_string());
    assert_eq!(
        one(
            &d.db(),
            "SELECT group_concat(id, ',') FROM (SELECT id FROM r ORDER BY id)"
        ),
        text("1,3,6,8")
    );

    // Without --rejects, the rejected records are listed on stderr.
    let o = litelane(&[&src, "--db", &d.db(), "--table", "again", "--quiet"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "finished with rejects: {err}");
    assert!(
        err.contains(":3: record 2 rejected: expected 2 fields"),
        "{err}"
    );
    assert!(err.contains(":9: record 7 rejected"), "{err}");
}

#[test]
fn max_rejects_stops_and_commits_nothing_past_the_last_good_batch() {
    let d = Dir::new();
    let mut csv = String::from("id,v\n");
    for i in 1..=100 {
        if i % 30 == 0 {
            csv.push_str("bad\n");
        } else {
            csv.push_str(&format!("{i},x\n"));
        }
    }
    let src = d.write("m.csv", csv.as_bytes());
    let o = litelane(&[&src, "--db", &d.db(), "--max-rejects", "2", "--quiet"]);
    let err = failed(&o);
    assert!(err.contains("--max-rejects 2"), "{err}");
    assert!(err.contains("nothing was imported"), "{err}");
    assert!(
        !Path::new(&d.db()).exists(),
        "the atomic import left no database where there was none"
    );

    let o = litelane(&[
        &src,
        "--db",
        &d.db(),
        "--max-rejects",
        "2",
        "--commit-every",
        "20",
        "--quiet",
    ]);
    let err = failed(&o);
    assert!(err.contains("80 rows stay committed"), "{err}");
    // Rows 1..=81 less the two rejects (30, 60) went in 4 commits of 20; the
    // third reject (line 91) stopped the fifth batch.
    assert_eq!(one(&d.db(), "SELECT count(*) FROM m"), int(80));
    assert_eq!(one(&d.db(), "SELECT max(id) FROM m"), int(82));
}

#[test]
fn primary_key_conflicts_are_rejected_with_their_line() {
    let d = Dir::new();
    let src = d.write("p.csv", b"id,v\n1,a\n2,b\n1,dup\n3,c\n");
    let rej = d.path("rej.ndjson");
    let s = ok(&litelane(&[
        &src,
        "--db",
        &d.db(),
        "--pk",
        "id",
        "--json",
        "--quiet",
        "--rejects",
        rej.to_str().unwrap(),
    ]));
    assert_eq!(s["rows_inserted"], 3);
    assert_eq!(s["rows_rejected"], 1);
    let r: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&rej).unwrap().trim()).unwrap();
    assert_eq!(r["line"], 4);
    assert!(r["reason"].as_str().unwrap().contains("UNIQUE"), "{r}");
    assert_eq!(one(&d.db(), "SELECT v FROM p WHERE id = 1"), text("a"));
    let o = litelane(&[&src, "--db", &d.db(), "--table", "q", "--pk", "nope"]);
    assert!(failed(&o).contains("--pk \"nope\": no such column"));
}

#[test]
fn hostile_header_names_are_only_ever_names() {
    let d = Dir::new();
    let src = d.write(
        "h.csv",
        b"\"\"\"; DROP TABLE x; --\",,id,ID,\"a\"\"b\"\n1,2,3,4,5\n",
    );
    ok(&litelane(&[
        &src,
        "--db",
        &d.db(),
        "--table",
        "x; DROP TABLE y",
        "--quiet",
    ]));
    let cols: Vec<Value> = query(
        &d.db(),
        "SELECT name FROM pragma_table_info('x; DROP TABLE y')",
    )
    .into_iter()
    .map(|mut r| r.remove(0))
    .collect();
    assert_eq!(
        cols,
        vec![
            text("\"; DROP TABLE x; --"),
            text("c2"),
            text("id"),
            text("ID_2"),
            text("a\"b")
        ]
    );
    assert_eq!(
        one(&d.db(), "SELECT \"ID_2\" FROM \"x; DROP TABLE y\""),
        int(4)
    );

    // 2000 columns (SQLite's limit) work; 2001 is a clear error.
    for (n, good) in [(2000usize, true), (2001, false)] {
        let header: Vec<String> = (0..n).map(|i| format!("col{i}")).collect();
        let row: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let data = format!(
            "{}\n{}\n{}\n",
            header.join(","),
            row.join(","),
            row.join(",")
        );
        let src = d.write(&format!("wide{n}.csv"), data.as_bytes());
        let o = litelane(&[&src, "--db", &d.db(), "--quiet"]);
        if good {
            ok(&o);
            assert_eq!(one(&d.db(), "SELECT sum(col1999) FROM wide2000"), int(3998));
        } else {
            let e = failed(&o);
            assert!(
                e.contains("2001 columns") && e.contains("SQLite allows at most 2000"),
                "{e}"
            );
        }
    }
}

#[test]
fn no_header_and_text_types() {
    let d = Dir::new();
    let src = d.write("n.csv", b"1,007\n2,x\n");
    let s = ok(&litelane(&[
        &src,
        "--db",
        &d.db(),
        "--no-header",
        "--types",
        "text",
        "--json",
        "--quiet",
    ]));
    assert_eq!(s["columns"][0]["name"], "c1");
    assert_eq!(s["columns"][0]["type"], "TEXT");
    assert_eq!(
        query(&d.db(), "SELECT c1, typeof(c1), c2 FROM n LIMIT 1")[0],
        vec![text("1"), text("text"), text("007")]
    );
}

#[test]
fn clear_errors_for_bad_invocations() {
    let d = Dir::new();
    let o = litelane(&[d.path("missing.csv").to_str().unwrap(), "--db", &d.db()]);
    assert!(failed(&o).contains("missing.csv"));
    let empty = d.write("empty.csv", b"");
    let o = litelane(&[&empty, "--db", &d.db()]);
    assert!(failed(&o).contains("is empty"));
    let src = d.write("ok.csv", b"a\n1\n");
    let o = litelane(&[&src, "--db", &d.db(), "--resume"]);
    assert!(failed(&o).contains("nothing to resume"));
    let notdb = d.write("not.db", [b'x'; 8192]);
    let o = litelane(&[&src, "--db", &notdb]);
    assert!(failed(&o).contains("not a database"), "{}", stderr(&o));
}

/// Writes `n` rows `id,name,value` to `path`.
fn write_numbers(path: &Path, n: u64) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(w, "id,name,value").unwrap();
    for i in 1..=n {
        writeln!(w, "{i},name {i},{}.25", i % 1000).unwrap();
    }
}

fn progress_row(db: &str) -> Option<(i64, String)> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    c.query_row(
        "SELECT rows_inserted, state FROM _litelane_import WHERE table_name = 'big'",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

#[test]
fn resume_after_kill_9_stores_every_row_exactly_once() {
    const N: u64 = 300_000;
    let d = Dir::new();
    let src = d.path("big.csv");
    write_numbers(&src, N);
    let src = src.to_str().unwrap().to_string();
    let db = d.db();
    let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args([
            "import",
            &src,
            "--db",
            &db,
            "--commit-every",
            "1000",
            "--profile",
            "safe",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((rows, _)) = progress_row(&db) {
            if rows >= 5000 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the import made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the import ended before the kill"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let (committed, state) = progress_row(&db).unwrap();
    assert_eq!(state, "running");
    assert!(committed < N as i64, "killed mid-import");
    assert_eq!(committed % 1000, 0, "progress moves by whole batches");
    assert_eq!(
        one(&db, "SELECT count(*) FROM big"),
        int(committed),
        "progress matches the rows"
    );
    assert_eq!(one(&db, "PRAGMA integrity_check"), text("ok"));

    // A new import into the same table is refused while one is unfinished.
    let o = litelane(&[&src, "--db", &db, "--mode", "append", "--quiet"]);
    assert!(failed(&o).contains("--resume"));
    // Resuming from a different file is refused.
    let other = d.path("big2.csv");
    write_numbers(&other, N - 1);
    let o = litelane(&[
        other.to_str().unwrap(),
        "--db",
        &db,
        "--table",
        "big",
        "--resume",
    ]);
    assert!(failed(&o).contains("refusing to resume"), "{}", stderr(&o));

    let s = ok(&litelane(&[
        &src, "--db", &db, "--resume", "--json", "--quiet",
    ]));
    assert_eq!(s["rows_inserted"].as_i64().unwrap(), N as i64 - committed);
    let r = &query(
        &db,
        "SELECT count(*), count(DISTINCT id), min(id), max(id), sum(id) FROM big",
    )[0];
    let n = N as i64;
    assert_eq!(
        r,
        &vec![int(n), int(n), int(1), int(n), int(n * (n + 1) / 2)]
    );
    assert_eq!(progress_row(&db).unwrap(), (n, "done".to_string()));
    let o = litelane(&[&src, "--db", &db, "--resume"]);
    assert!(stderr(&o).contains("already finished"));
}

#[test]
fn resume_continues_the_rejects_file_without_duplicates() {
    let d = Dir::new();
    let mut csv = String::from("id,v\n");
    for i in 1..=60 {
        if i % 25 == 0 {
            csv.push_str("bad\n");
        } else {
            csv.push_str(&format!("{i},x\n"));
        }
    }
    let src = d.write("res.csv", csv.as_bytes());
    let rej = d.path("rej.ndjson");
    let r = rej.to_str().unwrap();
    let o = litelane(&[
        &src,
        "--db",
        &d.db(),
        "--commit-every",
        "10",
        "--max-rejects",
        "1",
        "--rejects",
        r,
        "--quiet",
    ]);
    failed(&o);
    let s = ok(&litelane(&[
        &src,
        "--db",
        &d.db(),
        "--resume",
        "--json",
        "--quiet",
    ]));
    assert_eq!(s["rows_rejected"], 1);
    assert_eq!(one(&d.db(), "SELECT count(*) FROM res"), int(58));
    assert_eq!(one(&d.db(), "SELECT count(DISTINCT id) FROM res"), int(58));
    let lines: Vec<u64> = std::fs::read_to_string(&rej)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["line"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(lines, vec![26, 51]);
}
