//! `litelane sniff` and the sniffer inside `litelane import`, run as child
//! processes: what each kind of file becomes, the plan printed, `--plan`
//! read back (the same table as a plain import), `--type` overrides, zstd.

use std::path::PathBuf;
use std::process::{Command, Output};

use rusqlite::types::Value;

use crate::common::{i, r, run, t};
use rusqlite::Connection;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    fn write(&self, name: &str, data: &[u8]) -> String {
        let p = self.path(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    }
    fn s(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }
}

/// `(name, declared type)` of each column, then every row with each value's
/// SQLite type, in rowid order.
type Table = (Vec<(String, String)>, Vec<Vec<(String, Value)>>);

fn table(db: &str, t: &str) -> Table {
    let c = Connection::open(db).unwrap();
    let q = format!("\"{}\"", t.replace('"', "\"\""));
    let mut st = c.prepare(&format!("PRAGMA table_info({q})")).unwrap();
    let cols: Vec<(String, String)> = st
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut st = c
        .prepare(&format!("SELECT * FROM {q} ORDER BY rowid"))
        .unwrap();
    let n = cols.len();
    let rows = st
        .query_map([], |r| {
            (0..n)
                .map(|i| {
                    let v: Value = r.get(i)?;
                    let ty = match &v {
                        Value::Null => "null",
                        Value::Integer(_) => "integer",
                        Value::Real(_) => "real",
                        Value::Text(_) => "text",
                        Value::Blob(_) => "blob",
                    };
                    Ok((ty.to_string(), v))
                })
                .collect()
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (cols, rows)
}

const N: Value = Value::Null;

/// One file, imported with no flags: the columns and values it must give.
struct Case {
    name: &'static str,
    file: &'static str,
    input: Vec<u8>,
    /// `name TYPE` of each column.
    columns: &'static [&'static str],
    rows: Vec<Vec<Value>>,
    /// Fragments of the stderr summary.
    stderr: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "semicolons",
            file: "semi.csv",
            input: b"a;b\n1;x,y\n2;z\n".to_vec(),
            columns: &["a INTEGER", "b TEXT"],
            rows: vec![vec![i(1), t("x,y")], vec![i(2), t("z")]],
            stderr: &["fields split on ';'"],
        },
        Case {
            name: "header-less numbers: no column named 0.00",
            file: "nohead.csv",
            input: b"0.00,-0.55\n1.5,2\n".to_vec(),
            columns: &["c1 REAL", "c2 REAL"],
            rows: vec![vec![r(0.0), r(-0.55)], vec![r(1.5), r(2.0)]],
            stderr: &["no header line"],
        },
        Case {
            name: "preamble lines are skipped and counted",
            file: "pre.csv",
            input: b"Population by region\nSource: agency\nregion,pop\nnorth,10\nsouth,20\n".to_vec(),
            columns: &["region TEXT", "pop INTEGER"],
            rows: vec![vec![t("north"), i(10)], vec![t("south"), i(20)]],
            stderr: &["2 record(s) before the header skipped"],
        },
        Case {
            name: "R row names",
            file: "rnames.csv",
            input: b"\"x\",\"y\"\n\"a\",1,0.5\n\"b\",2,NA\n".to_vec(),
            columns: &["row_names TEXT", "x INTEGER", "y REAL"],
            rows: vec![vec![t("a"), i(1), r(0.5)], vec![t("b"), i(2), N]],
            stderr: &["\"row_names\""],
        },
        Case {
            name: "NA is NULL in numeric columns, a country code elsewhere",
            file: "na.csv",
            input: b"country,pop,gdp\nNA,2.5,NA\nFR,67,2.9\n".to_vec(),
            columns: &["country TEXT", "pop REAL", "gdp REAL"],
            rows: vec![
                vec![t("NA"), r(2.5), N],
                vec![t("FR"), r(67.0), r(2.9)],
            ],
            stderr: &["null tokens such as NA applied in 1 numeric column(s)"],
        },
        Case {
            name: "dates, timestamps and booleans",
            file: "typed.csv",
            input: b"d,ts,ok\n2024-01-05,2024-01-05 10:30:00,true\n2024-02-29,2024-02-29T00:00Z,FALSE\n"
                .to_vec(),
            columns: &["d DATE", "ts TIMESTAMP", "ok BOOLEAN"],
            rows: vec![
                vec![t("2024-01-05"), t("2024-01-05 10:30:00"), i(1)],
                vec![t("2024-02-29"), t("2024-02-29T00:00Z"), i(0)],
            ],
            stderr: &[],
        },
        Case {
            name: "leading zeros stay text",
            file: "zip.csv",
            input: b"zip,n\n02134,1\n10001,2\n".to_vec(),
            columns: &["zip TEXT", "n INTEGER"],
            rows: vec![vec![t("02134"), i(1)], vec![t("10001"), i(2)]],
            stderr: &[],
        },
        Case {
            name: "space-padded numbers",
            file: "pad.csv",
            input: b"a,b\n .01138,x\n 2.5,y\n".to_vec(),
            columns: &["a REAL", "b TEXT"],
            rows: vec![vec![r(0.01138), t("x")], vec![r(2.5), t("y")]],
            stderr: &["spaces around numbers dropped in 1 column(s)"],
        },
        // Headers as real files write them (issue 22): people and pandas
        // read a header in each of these.
        Case {
            name: "R write.csv: an empty first name, text columns",
            file: "titanic.csv",
            input: b"\"\",\"class\",\"age\",\"sex\",\"survived\"\n\"1\",\"1st class\",\"adult\",\"man\",\"yes\"\n\"2\",\"3rd class\",\"child\",\"woman\",\"no\"\n"
                .to_vec(),
            columns: &["c1 INTEGER", "class TEXT", "age TEXT", "sex TEXT", "survived TEXT"],
            rows: vec![
                vec![i(1), t("1st class"), t("adult"), t("man"), t("yes")],
                vec![i(2), t("3rd class"), t("child"), t("woman"), t("no")],
            ],
            stderr: &["header line: the first record's first field is empty above a column"],
        },
        Case {
            name: "a cross-table whose column names are years",
            file: "cross.csv",
            input: b"\"\",\"1940\",\"1945\"\n\"Agriculture\",12,15\n\"Industry\",30,28\n".to_vec(),
            columns: &["c1 TEXT", "1940 INTEGER", "1945 INTEGER"],
            rows: vec![
                vec![t("Agriculture"), i(12), i(15)],
                vec![t("Industry"), i(30), i(28)],
            ],
            stderr: &["header line: the first record's first field is empty"],
        },
        Case {
            name: "a header ending with a delimiter after notes",
            file: "trail.csv",
            input: b"Notes: survey 2024\nSource: agency\nname,age,city,\nalice,30,paris\nbob,25,rome\n"
                .to_vec(),
            columns: &["name TEXT", "age INTEGER", "city TEXT"],
            rows: vec![
                vec![t("alice"), i(30), t("paris")],
                vec![t("bob"), i(25), t("rome")],
            ],
            stderr: &[
                "2 record(s) before the header skipped",
                "header line: the first record ends with a delimiter the rest lack",
            ],
        },
        Case {
            name: "records ending with a delimiter the header lacks: no value shifted",
            file: "dtrail.csv",
            input: b"a,b\n1,2,\n3,4,\n".to_vec(),
            columns: &["a INTEGER", "b INTEGER", "c3 TEXT"],
            rows: vec![vec![i(1), i(2), N], vec![i(3), i(4), N]],
            stderr: &["a delimiter at the end of each line"],
        },
        Case {
            name: "a file of one numeric line is one row",
            file: "one.csv",
            input: b"1,2.5,3\n".to_vec(),
            columns: &["c1 INTEGER", "c2 REAL", "c3 INTEGER"],
            rows: vec![vec![i(1), r(2.5), i(3)]],
            stderr: &["no header line (columns c1, c2, ...): the only record holds numbers"],
        },
        Case {
            name: "zstd input",
            file: "z.csv.zst",
            input: zstd::encode_all(&b"a|b\n1|x\n2|y\n"[..], 3).unwrap(),
            columns: &["a INTEGER", "b TEXT"],
            rows: vec![vec![i(1), t("x")], vec![i(2), t("y")]],
            stderr: &["fields split on '|'"],
        },
    ]
}

fn check(name: &str, got: &Table, columns: &[&str], rows: &[Vec<Value>]) {
    let cols: Vec<String> = got.0.iter().map(|(n, ty)| format!("{n} {ty}")).collect();
    assert_eq!(cols, columns, "{name}: columns");
    let vals: Vec<Vec<Value>> = got
        .1
        .iter()
        .map(|r| r.iter().map(|(_, v)| v.clone()).collect())
        .collect();
    assert_eq!(vals, rows, "{name}: rows");
}

#[test]
fn each_kind_of_file_becomes_the_table_a_data_person_expects() {
    for c in cases() {
        let d = Dir::new();
        let src = d.write(c.file, &c.input);
        let db = d.s("t.db");
        let o = run(&["import", &src, "--db", &db, "--table", "t"]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", c.name, stderr(&o));
        check(c.name, &table(&db, "t"), c.columns, &c.rows);
        for f in c.stderr {
            assert!(
                stderr(&o).contains(f),
                "{}: stderr lacks {f:?}: {}",
                c.name,
                stderr(&o)
            );
        }
    }
}

#[test]
fn sniff_json_read_back_by_import_plan_gives_the_same_table() {
    for c in cases() {
        let d = Dir::new();
        let src = d.write(c.file, &c.input);
        let o = run(&["sniff", &src, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", c.name, stderr(&o));
        let plan = d.write("plan.json", &o.stdout);
        let plain = d.s("plain.db");
        let planned = d.s("planned.db");
        let o = run(&["import", &src, "--db", &plain, "--table", "t", "--quiet"]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", c.name, stderr(&o));
        let o = run(&[
            "import", &src, "--db", &planned, "--table", "t", "--quiet", "--plan", &plan,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", c.name, stderr(&o));
        let (a, b) = (table(&plain, "t"), table(&planned, "t"));
        assert_eq!(a, b, "{}: plain import and --plan differ", c.name);
        assert_eq!(a.1.len(), c.rows.len(), "{}", c.name);
    }
}

#[test]
fn sniff_prints_the_plan_in_words() {
    let d = Dir::new();
    let src = d.write(
        "x.csv",
        b"Report 2024\nx;y;when\nr1;1;2024-01-05\nr2;NA;2024-01-06\n",
    );
    let o = run(&["sniff", &src]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for f in [
        "delimiter ';'",
        "header:      yes",
        "skip rows:   1",
        "x     TEXT",
        "y     INTEGER",
        "nulls [\"\", \"NA\"]",
        "when  DATE",
    ] {
        assert!(out.contains(f), "sniff output lacks {f:?}:\n{out}");
    }
}

#[test]
fn an_edited_plan_and_type_overrides_are_followed() {
    let d = Dir::new();
    let src = d.write("e.csv", b"id,zip,n\n1,02134,7\n2,10001,8\n");
    let o = run(&["sniff", &src, "--json"]);
    let mut plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    plan["columns"][0]["name"] = "ident".into();
    let p = d.write("plan.json", plan.to_string().as_bytes());
    let db = d.s("t.db");
    let o = run(&[
        "import", &src, "--db", &db, "--table", "t", "--quiet", "--plan", &p, "--type", "n=TEXT",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check(
        "edited plan",
        &table(&db, "t"),
        &["ident INTEGER", "zip TEXT", "n TEXT"],
        &[
            vec![i(1), t("02134"), t("7")],
            vec![i(2), t("10001"), t("8")],
        ],
    );
    // An unknown column in --type, a bad type, a broken plan: exit 1 naming it.
    let db2 = d.s("u.db");
    let o = run(&["import", &src, "--db", &db2, "--type", "nope=TEXT"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("nope") && stderr(&o).contains("no such column"));
    let o = run(&["import", &src, "--db", &db2, "--type", "n=UUID"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown type"));
    let bad = d.write("bad.json", b"{\"format\":\"csv\"}");
    let o = run(&["import", &src, "--db", &db2, "--plan", &bad]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad.json"), "{}", stderr(&o));
    // A plan whose column count does not match the file's header.
    plan["columns"].as_array_mut().unwrap().pop();
    let p = d.write("short.json", plan.to_string().as_bytes());
    let o = run(&["import", &src, "--db", &db2, "--plan", &p]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("the plan expects 2"), "{}", stderr(&o));
}

#[test]
fn flags_override_the_sniffer() {
    let d = Dir::new();
    // Numeric header names look like data: --header says otherwise.
    let src = d.write("y.csv", b"2019,2020\n5,6\n7,8\n");
    let db = d.s("t.db");
    let o = run(&[
        "import", &src, "--db", &db, "--table", "t", "--quiet", "--header",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check(
        "--header",
        &table(&db, "t"),
        &["2019 INTEGER", "2020 INTEGER"],
        &[vec![i(5), i(6)], vec![i(7), i(8)]],
    );
    // --null given: exactly those tokens, NA stays text where it is text.
    let src = d.write("n.csv", b"a,b\nNA,1\nx,NA\n");
    let o = run(&[
        "import", &src, "--db", &db, "--table", "n", "--quiet", "--null", "NA",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check(
        "--null",
        &table(&db, "n"),
        &["a TEXT", "b INTEGER"],
        &[vec![N, i(1)], vec![t("x"), N]],
    );
    // --types text: every column TEXT and NA kept as written.
    let src = d.write("tt.csv", b"a,b\n1,NA\n2,3\n");
    let o = run(&[
        "import", &src, "--db", &db, "--table", "tt", "--quiet", "--types", "text",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check(
        "--types text",
        &table(&db, "tt"),
        &["a TEXT", "b TEXT"],
        &[vec![t("1"), t("NA")], vec![t("2"), t("3")]],
    );
}

#[test]
fn a_sniffed_import_resumes_with_its_recorded_dialect() {
    // A title line, semicolons and NA: the plan the first run sniffed must
    // be the one --resume follows. Record 56 has one field too many, and
    // --max-rejects 0 stops the first run there after 50 committed rows.
    let d = Dir::new();
    let mut body = String::from("Title line\nid;v\n");
    for k in 0..100 {
        if k == 55 {
            body.push_str("55;1;extra\n");
        } else if k % 2 == 0 {
            body.push_str(&format!("{k};NA\n"));
        } else {
            body.push_str(&format!("{k};{k}.5\n"));
        }
    }
    let src = d.write("r.csv", body.as_bytes());
    let db = d.s("t.db");
    let first = run(&[
        "import",
        &src,
        "--db",
        &db,
        "--table",
        "t",
        "--quiet",
        "--commit-every",
        "10",
        "--max-rejects",
        "0",
    ]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    assert_eq!(table(&db, "t").1.len(), 50, "{}", stderr(&first));
    // A contradicting --delimiter is refused by name.
    let o = run(&[
        "import",
        &src,
        "--db",
        &db,
        "--table",
        "t",
        "--resume",
        "--delimiter",
        ",",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--delimiter"), "{}", stderr(&o));
    let o = run(&[
        "import", &src, "--db", &db, "--table", "t", "--resume", "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let got = table(&db, "t");
    assert_eq!(
        got.0,
        vec![("id".into(), "INTEGER".into()), ("v".into(), "REAL".into())]
    );
    let ids: Vec<Value> = got.1.iter().map(|r| r[0].1.clone()).collect();
    let want: Vec<Value> = (0..100).filter(|k| *k != 55).map(i).collect();
    assert_eq!(ids, want, "every record once, in order");
    assert_eq!(got.1[0][1].1, N, "NA is NULL after the resume too");
    // Past the resume point: index 97 is id 98 (NA), 98 is id 99.
    assert_eq!(got.1[97][1].1, N);
    assert_eq!(got.1[98][1].1, r(99.5));
}

#[test]
fn sniff_reads_stdin_and_refuses_ndjson_and_empty_input() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args(["sniff", "-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a|b\n1|2\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["delimiter"], "|");
    assert_eq!(plan["sampled"]["places"], serde_json::json!(["start"]));
    let d = Dir::new();
    let nd = d.write("x.ndjson", b"{\"a\":1}\n");
    // JSON is described (its keys name its columns), not given a CSV plan.
    let o = run(&["sniff", &nd]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("NDJSON"));
    let o = run(&["sniff", &nd, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("NDJSON"), "{}", stderr(&o));
    for (name, data) in [
        ("arr.json", &b"[{\"a\":1}]"[..]),
        ("arr.txt", b" \n [\n{\"a\":1}]"),
    ] {
        let arr = d.write(name, data);
        let o = run(&["sniff", &arr]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("a JSON array of objects"), "{name}: {out}");
    }
    let empty = d.write("e.csv", b"");
    let o = run(&["sniff", &empty]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("e.csv is empty"), "{}", stderr(&o));
}

#[test]
fn strict_dates_and_booleans_reject_what_does_not_fit() {
    let d = Dir::new();
    let src = d.write(
        "s.csv",
        b"d,ok\n2024-01-05,true\n2024-13-01,false\n2024-01-07,yes\n2024-01-08,0\n",
    );
    let db = d.s("t.db");
    let rej = d.s("rej.ndjson");
    let o = run(&[
        "import",
        &src,
        "--db",
        &db,
        "--table",
        "t",
        "--quiet",
        "--strict",
        "--type",
        "d=DATE",
        "--type",
        "ok=BOOLEAN",
        "--rejects",
        &rej,
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // STRICT allows only INTEGER, REAL, TEXT, BLOB, ANY.
    check(
        "strict",
        &table(&db, "t"),
        &["d TEXT", "ok INTEGER"],
        &[vec![t("2024-01-05"), i(1)], vec![t("2024-01-08"), i(0)]],
    );
    let rejects = std::fs::read_to_string(&rej).unwrap();
    let lines: Vec<serde_json::Value> = rejects
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["line"], 3);
    assert!(lines[0]["reason"].as_str().unwrap().contains("DATE"));
    assert_eq!(lines[1]["line"], 4);
    assert!(lines[1]["reason"].as_str().unwrap().contains("BOOLEAN"));
    let c = Connection::open(&db).unwrap();
    let sql: String = c
        .query_row("SELECT sql FROM sqlite_master WHERE name = 't'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(sql.ends_with("STRICT"), "{sql}");
}
