//! The hostile-input table of `litelane import` (issue 12, section 1): each
//! row is an input (bytes and flags) and the outcome it must have: the exit
//! status (0 every record stored, 3 finished with rejects, 1 failed), the
//! rows stored exactly, the rejects with their line and reason, or an error
//! naming what and where. Files the user owns must come out untouched.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::types::Value;

use crate::common::{i, r, t};
use rusqlite::{Connection, OpenFlags};

/// Runs `litelane import ARGS...` in `cwd`.
fn litelane(cwd: &Path, args: &[String]) -> Output {
    litelane_env(cwd, args, &[])
}

/// Runs `litelane import ARGS...` in `cwd` with environment variables set.
fn litelane_env(cwd: &Path, args: &[String], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_litelane"))
        .current_dir(cwd)
        .envs(env.iter().copied())
        .arg("import")
        .args(args)
        .output()
        .expect("run litelane")
}

fn query(db: &Path, sql: &str) -> rusqlite::Result<Vec<Vec<Value>>> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut stmt = c.prepare(sql)?;
    let n = stmt.column_count();
    let rows = stmt
        .query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 1).unwrap()
}

fn utf16(s: &str, big_endian: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if bom {
        out.extend_from_slice(if big_endian {
            &[0xfe, 0xff]
        } else {
            &[0xff, 0xfe]
        });
    }
    for u in s.encode_utf16() {
        out.extend_from_slice(&if big_endian {
            u.to_be_bytes()
        } else {
            u.to_le_bytes()
        });
    }
    out
}

/// `header` and then integers 1..=10_000 (the inference sample: the column
/// is INTEGER), then `tail` lines.
fn after_sample(header: &str, first: &str, tail: &[&str]) -> Vec<u8> {
    let mut s = format!("{header}\n");
    for n in 1..=10_000 {
        s.push_str(&first.replace("{n}", &n.to_string()));
        s.push('\n');
    }
    for l in tail {
        s.push_str(l);
        s.push('\n');
    }
    s.into_bytes()
}

/// What the database and the user's files must look like beforehand.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Setup {
    /// Nothing: a new database.
    None,
    /// `t.db` holds table `keep` (one row, 42), in WAL mode, with its -wal
    /// and -shm files present.
    WalDb,
    /// Like `WalDb`, but closed again (no other connection open).
    WalDbClosed,
    /// `t.db` holds `keep` in rollback (DELETE) journal mode.
    RollbackDb,
    /// `t.db` has `t(n INTEGER)`, `num(n NUMERIC)`, `any(n)` (no type).
    Typed,
    /// An old-layout progress table (keyed by table only) with a done row.
    OldProgress,
    /// `rej.ndjson` exists with content that must survive a failed start.
    OldRejects,
    /// The lock of table `t` is held by another process (this test).
    Locked,
    /// A lock file of table `t` is left over by a killed import.
    StaleLock,
    /// `t.db` has `t(a INTEGER, g INTEGER GENERATED ALWAYS AS (a * 2))`.
    Generated,
}

/// One row of the table.
struct Case {
    name: &'static str,
    /// The input file's name in the test directory.
    file: &'static str,
    input: Vec<u8>,
    /// Flags; `{db}`, `{src}`, `{rej}` and `{dir}` are replaced. `--db {db}
    /// --table t --quiet --json` are added unless given.
    args: &'static [&'static str],
    setup: Setup,
    /// Expected exit status.
    code: i32,
    /// `(sql, rows)`: what the database must hold afterwards.
    stored: Option<(&'static str, Vec<Vec<Value>>)>,
    /// The database, which the import would have created, must not exist
    /// afterwards (a failed import leaves it as it was).
    absent: bool,
    /// `(line, reason fragment)` of each reject, in order (`--rejects` is
    /// added when this is not empty).
    rejects: &'static [(u64, &'static str)],
    /// Fragments stderr must contain.
    stderr: &'static [&'static str],
    /// Files that must be byte-identical afterwards (names in the dir).
    untouched: &'static [&'static str],
    /// The JSON summary's `kept_as_text` (values that did not fit their
    /// column's type, stored as written), when checked.
    kept: Option<&'static str>,
    /// The JSON summary's `blank_lines`, when checked.
    blank_lines: Option<u64>,
    /// The JSON summary's `null_tokens` (per column, the null tokens met
    /// and how many fields each made NULL), when checked.
    null_tokens: Option<&'static str>,
    /// Environment variables of the run (test hooks).
    env: &'static [(&'static str, &'static str)],
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            file: "in.csv",
            input: Vec::new(),
            args: &[],
            setup: Setup::None,
            code: 0,
            stored: None,
            absent: false,
            rejects: &[],
            stderr: &[],
            untouched: &[],
            kept: None,
            blank_lines: None,
            null_tokens: None,
            env: &[],
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The lock file of `table` in `db` (see `docs/import.md`).
fn lock_path(db: &Path, table: &str) -> PathBuf {
    let dir = std::fs::canonicalize(db.parent().unwrap()).unwrap();
    let mut name = dir.join(db.file_name().unwrap()).into_os_string();
    name.push(format!(
        ".litelane-import-{:016x}.lock",
        fnv1a(table.to_ascii_lowercase().as_bytes())
    ));
    PathBuf::from(name)
}

fn setup(dir: &Path, s: Setup) -> Option<std::fs::File> {
    let db = dir.join("t.db");
    match s {
        Setup::None => None,
        Setup::WalDb | Setup::WalDbClosed | Setup::RollbackDb => {
            let c = Connection::open(&db).unwrap();
            let mode = if s == Setup::RollbackDb {
                "delete"
            } else {
                "wal"
            };
            let got: String = c
                .query_row(&format!("PRAGMA journal_mode={mode}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(got, mode);
            c.execute_batch("CREATE TABLE keep(x); INSERT INTO keep VALUES (42);")
                .unwrap();
            if s == Setup::WalDb {
                // Keep the connection (and so -wal/-shm) open: leak it.
                std::mem::forget(c);
            }
            None
        }
        Setup::Generated => {
            let c = Connection::open(&db).unwrap();
            c.execute_batch("CREATE TABLE t(a INTEGER, g INTEGER GENERATED ALWAYS AS (a * 2));")
                .unwrap();
            None
        }
        Setup::Typed => {
            let c = Connection::open(&db).unwrap();
            c.execute_batch(
                "CREATE TABLE t(n INTEGER); CREATE TABLE num(n NUMERIC); CREATE TABLE any(n);",
            )
            .unwrap();
            None
        }
        Setup::OldProgress => {
            let c = Connection::open(&db).unwrap();
            c.execute_batch(
                "CREATE TABLE _litelane_import (table_name TEXT PRIMARY KEY COLLATE NOCASE, \
                 source TEXT NOT NULL, fingerprint TEXT, plan TEXT NOT NULL, records_read \
                 INTEGER NOT NULL, rows_inserted INTEGER NOT NULL, rows_rejected INTEGER NOT \
                 NULL, last_line INTEGER NOT NULL, rejects_file TEXT, rejects_bytes INTEGER NOT \
                 NULL, state TEXT NOT NULL, updated_at TEXT NOT NULL); \
                 INSERT INTO _litelane_import VALUES ('other', 'x.csv', NULL, '{}', 1, 1, 0, 2, \
                 NULL, 0, 'done', '2020-01-01');",
            )
            .unwrap();
            None
        }
        Setup::OldRejects => {
            std::fs::write(dir.join("rej.ndjson"), b"precious\n").unwrap();
            let c = Connection::open(&db).unwrap();
            c.execute_batch("CREATE TABLE t(a, b);").unwrap();
            None
        }
        Setup::Locked => {
            let f = std::fs::File::create(lock_path(&db, "t")).unwrap();
            assert!(fs4::fs_std::FileExt::try_lock_exclusive(&f).unwrap());
            Some(f)
        }
        Setup::StaleLock => {
            std::fs::write(lock_path(&db, "t"), b"").unwrap();
            None
        }
    }
}

fn run_case(c: &Case) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let src = dir.join(c.file);
    if !c.file.is_empty() {
        std::fs::write(&src, &c.input).unwrap();
    }
    let _held = setup(dir, c.setup);
    // Symbolic and hard links some cases write through.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&src, dir.join("link-to-src")).unwrap();
        std::os::unix::fs::symlink(dir.join("t.db"), dir.join("link-to-db")).unwrap();
        std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
        if src.exists() {
            std::fs::hard_link(&src, dir.join("hard-src")).unwrap();
        }
    }
    let before: Vec<(String, Option<Vec<u8>>)> = c
        .untouched
        .iter()
        .map(|n| (n.to_string(), std::fs::read(dir.join(n)).ok()))
        .collect();
    let fill = |a: &str| {
        a.replace("{db}", dir.join("t.db").to_str().unwrap())
            .replace("{src}", src.to_str().unwrap())
            .replace("{rej}", dir.join("rej.ndjson").to_str().unwrap())
            .replace("{dir}", dir.to_str().unwrap())
    };
    let mut args: Vec<String> = Vec::new();
    args.push(src.to_str().unwrap().to_string());
    args.extend(c.args.iter().map(|a| fill(a)));
    let has = |f: &str| c.args.contains(&f);
    if !has("--db") {
        args.extend(["--db".into(), fill("{db}")]);
    }
    if !has("--table") {
        args.extend(["--table".into(), "t".into()]);
    }
    if !has("--rejects") && !c.rejects.is_empty() {
        args.extend(["--rejects".into(), fill("{rej}")]);
    }
    args.push("--quiet".into());
    if !has("--json") {
        args.push("--json".into());
    }
    let o = litelane_env(dir, &args, c.env);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let mut problems = Vec::new();
    if o.status.code() != Some(c.code) {
        problems.push(format!(
            "exit {:?}, expected {} (stderr: {err})",
            o.status.code(),
            c.code
        ));
    }
    for frag in c.stderr {
        if !err.contains(frag) {
            problems.push(format!("stderr lacks {frag:?}: {err}"));
        }
    }
    if c.code == 0 || c.code == 3 {
        let out = String::from_utf8_lossy(&o.stdout);
        match serde_json::from_str::<serde_json::Value>(out.trim()) {
            Ok(s) => {
                if let Some(n) = c.blank_lines {
                    if s["blank_lines"].as_u64() != Some(n) {
                        problems.push(format!("blank_lines is {}, expected {n}", s["blank_lines"]));
                    }
                }
                if let Some(k) = c.null_tokens {
                    let want: serde_json::Value = serde_json::from_str(k).unwrap();
                    if s["null_tokens"] != want {
                        problems.push(format!(
                            "null_tokens is {}, expected {want}",
                            s["null_tokens"]
                        ));
                    }
                }
                if let Some(k) = c.kept {
                    let want: serde_json::Value = serde_json::from_str(k).unwrap();
                    if s["kept_as_text"] != want {
                        problems.push(format!(
                            "kept_as_text is {}, expected {want}",
                            s["kept_as_text"]
                        ));
                    }
                }
                if s["rows_rejected"].as_u64() != Some(c.rejects.len() as u64) {
                    problems.push(format!(
                        "summary says {} rejected, expected {}",
                        s["rows_rejected"],
                        c.rejects.len()
                    ));
                }
            }
            Err(e) => problems.push(format!("no JSON summary ({e}): {out}")),
        }
    }
    if c.absent && dir.join("t.db").exists() {
        problems.push("the database the import would have created exists".to_string());
    }
    if let Some((sql, rows)) = &c.stored {
        let got = query(&dir.join("t.db"), sql);
        if got.as_ref() != Ok(rows) {
            problems.push(format!("{sql} gave {got:?}, expected {rows:?}"));
        }
    }
    if !c.rejects.is_empty() {
        let text = std::fs::read_to_string(dir.join("rej.ndjson")).unwrap_or_default();
        let got: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if got.len() != c.rejects.len() {
            problems.push(format!("rejects file: {text}"));
        } else {
            for (g, (line, why)) in got.iter().zip(c.rejects) {
                if g["line"].as_u64() != Some(*line)
                    || !g["reason"].as_str().unwrap_or("").contains(why)
                {
                    problems.push(format!("reject {g}, expected line {line} and {why:?}"));
                }
            }
        }
    }
    // The import's lock file is gone once it ends, however it ended (the
    // one a case holds itself stays).
    if c.setup != Setup::Locked {
        for e in std::fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.contains(".litelane-import-") {
                problems.push(format!("left behind: {name}"));
            }
        }
    }
    for (name, old) in &before {
        let now = std::fs::read(dir.join(name)).ok();
        if &now != old {
            problems.push(format!("{name} was changed"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n    "))
    }
}

const T_ROWS: &str = "SELECT * FROM t ORDER BY rowid";

fn cases() -> Vec<Case> {
    vec![
        // ---- 1. Destroying files --------------------------------------
        Case {
            name: "rejects naming the input is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{src}"],
            code: 1,
            stderr: &["refusing --rejects", "it is the input"],
            untouched: &["in.csv"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the input by another spelling is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{dir}/./in.csv"],
            code: 1,
            stderr: &["it is the input"],
            untouched: &["in.csv"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the input relative to the working directory",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "in.csv"],
            code: 1,
            stderr: &["it is the input"],
            untouched: &["in.csv"],
            ..Case::default()
        },
        Case {
            name: "rejects through a symbolic link to the input is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{dir}/link-to-src"],
            code: 1,
            stderr: &["it is the input"],
            untouched: &["in.csv"],
            ..Case::default()
        },
        Case {
            name: "rejects through a hard link to the input is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{dir}/hard-src"],
            code: 1,
            stderr: &["it is the input"],
            untouched: &["in.csv"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the database is refused and its tables survive",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{db}"],
            setup: Setup::WalDb,
            code: 1,
            stderr: &["it is the database"],
            stored: Some(("SELECT x FROM keep", vec![vec![i(42)]])),
            untouched: &["t.db"],
            ..Case::default()
        },
        Case {
            name: "rejects through a symbolic link to the database is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{dir}/link-to-db"],
            setup: Setup::RollbackDb,
            code: 1,
            stderr: &["it is the database"],
            stored: Some(("SELECT x FROM keep", vec![vec![i(42)]])),
            untouched: &["t.db"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the database's -wal file is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{db}-wal"],
            setup: Setup::WalDb,
            code: 1,
            stderr: &["-wal file"],
            untouched: &["t.db-wal"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the database's -shm file is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{db}-shm"],
            setup: Setup::WalDb,
            code: 1,
            stderr: &["-shm file"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the -journal that does not exist yet is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{db}-journal"],
            setup: Setup::RollbackDb,
            code: 1,
            stderr: &["-journal file"],
            ..Case::default()
        },
        Case {
            name: "rejects naming a database that does not exist yet is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{db}"],
            code: 1,
            stderr: &["it is the database"],
            ..Case::default()
        },
        Case {
            name: "rejects naming the file a dangling database link will create is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--db", "{dir}/dangling", "--rejects", "{dir}/nowhere"],
            code: 1,
            stderr: &["it is the database"],
            ..Case::default()
        },
        Case {
            name: "rejects through a dangling symbolic link is refused",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{dir}/dangling"],
            code: 1,
            stderr: &["symbolic link to a file that does not exist"],
            ..Case::default()
        },
        Case {
            name: "the database as the input is refused",
            file: "t.db",
            args: &["--format", "csv"],
            setup: Setup::RollbackDb,
            code: 1,
            stderr: &["refusing to import", "it is the database"],
            stored: Some(("SELECT x FROM keep", vec![vec![i(42)]])),
            ..Case::default()
        },
        Case {
            name: "an existing rejects file is untouched when the import cannot start",
            input: b"a,b\n1,2\n".to_vec(),
            args: &["--rejects", "{rej}"],
            setup: Setup::OldRejects,
            code: 1,
            stderr: &["already exists"],
            untouched: &["rej.ndjson"],
            ..Case::default()
        },
        // ---- 2. Records swallowed -------------------------------------
        Case {
            name: "a quote open at the end of the input names its line",
            input: b"a,b\n1,\"x\n2,y\n3,z\n".to_vec(),
            code: 1,
            stderr: &["in.csv:2: a quoted field opened on line 2 is never closed"],
            ..Case::default()
        },
        Case {
            name: "a quote open in the header names line 1",
            input: b"a,\"b\n1,2\n".to_vec(),
            code: 1,
            stderr: &["opened on line 1 is never closed"],
            ..Case::default()
        },
        Case {
            name: "an open quote after a multi-line record names the right line",
            input: b"a,b\n1,\"p\nq\"\n2,\"open\n3,x\n".to_vec(),
            code: 1,
            stderr: &["opened on line 4 is never closed"],
            ..Case::default()
        },
        Case {
            name: "an open quote in the first field of a later record",
            input: b"a,b\r\n1,2\r\n\"x,3\r\n".to_vec(),
            code: 1,
            stderr: &["opened on line 3"],
            ..Case::default()
        },
        Case {
            name: "an open quote with --commit-every keeps earlier commits and says so",
            input: after_sample("a,b", "{n},x", &["3,\"z", "4,w"]),
            args: &["--commit-every", "1000"],
            code: 1,
            stderr: &[
                "opened on line 10002",
                "10000 rows stay committed",
                "--resume",
            ],
            stored: Some((
                "SELECT count(*), max(a) FROM t",
                vec![vec![i(10_000), i(10_000)]],
            )),
            ..Case::default()
        },
        Case {
            name: "lone-CR line endings are lines",
            input: b"a,b\r1,x\r2,y\r".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")], vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "lone-CR files report the right reject line",
            input: b"a,b\r1,x\r2\r3,z\r".to_vec(),
            code: 3,
            rejects: &[(3, "expected 2 fields, found 1")],
            stored: Some((T_ROWS, vec![vec![i(1), t("x")], vec![i(3), t("z")]])),
            ..Case::default()
        },
        Case {
            name: "a CR inside a quoted last field is data",
            input: b"a,b\n1,\"x\r\"\n2,y\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x\r")], vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "a record whose only field is a quoted CR is kept",
            input: b"a\n\"\r\"\nz\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![t("\r")], vec![t("z")]])),
            ..Case::default()
        },
        Case {
            name: "CRLF inside quotes is kept as written",
            input: b"a,b\r\n1,\"x\r\ny\"\r\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x\r\ny")]])),
            ..Case::default()
        },
        Case {
            name: "mixed LF, CRLF and CR endings: every record and its line",
            input: b"a,b\n1,x\r\n2\r3,z\n4\r\n5,w".to_vec(),
            code: 3,
            rejects: &[(3, "found 1"), (5, "found 1")],
            stored: Some((
                "SELECT a FROM t ORDER BY rowid",
                vec![vec![i(1)], vec![i(3)], vec![i(5)]],
            )),
            ..Case::default()
        },
        Case {
            name: "reject lines are right after blank lines",
            input: b"a,b\n\n\n1\n2,y\n\n3\n".to_vec(),
            code: 3,
            rejects: &[(4, "found 1"), (7, "found 1")],
            stored: Some((T_ROWS, vec![vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "reject lines are right after a multi-line record",
            input: b"a,b\n1,\"x\ny\nz\"\n2\n3,\"p\r\nq\"\n4\n".to_vec(),
            code: 3,
            rejects: &[(5, "found 1"), (8, "found 1")],
            ..Case::default()
        },
        Case {
            name: "blank CRLF lines are skipped and counted, not records",
            input: b"a,b\r\n\r\n1,x\r\n\r\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")]])),
            ..Case::default()
        },
        Case {
            name: "a one-column file keeps a quoted empty field as a row",
            input: b"a\nx\n\"\"\ny\n".to_vec(),
            args: &["--null", "NULL", "--no-default-nulls"],
            stored: Some((T_ROWS, vec![vec![t("x")], vec![t("")], vec![t("y")]])),
            ..Case::default()
        },
        Case {
            name: "a last record without a line ending is stored",
            input: b"a,b\n1,x\n2,y".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")], vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "a quote inside an unquoted field is an ordinary character",
            input: b"a,b\n1,ab\"c\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("ab\"c")]])),
            ..Case::default()
        },
        Case {
            name: "a NUL byte inside a data field is kept",
            input: b"a,b\n1,x\x00y\n".to_vec(),
            stored: Some((
                "SELECT length(CAST(b AS BLOB)), hex(b) FROM t",
                vec![vec![i(3), t("780079")]],
            )),
            ..Case::default()
        },
        Case {
            name: "blank lines at the end of a file are counted",
            input: b"a,b\n1,x\n\n\r\n\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")]])),
            blank_lines: Some(3),
            ..Case::default()
        },
        Case {
            name: "blank lines at the end of a lone-CR file are counted",
            input: b"a,b\r\r1,x\r\r".to_vec(),
            blank_lines: Some(2),
            ..Case::default()
        },
        Case {
            name: "no blank line at the end of an unterminated last line",
            input: b"a,b\n1,x".to_vec(),
            blank_lines: Some(0),
            ..Case::default()
        },
        Case {
            name: "blank lines at the end of an NDJSON file are counted",
            file: "in.ndjson",
            input: b"{\"a\":1}\n\n\n".to_vec(),
            blank_lines: Some(2),
            ..Case::default()
        },
        Case {
            name: "a header of 20,190 columns fails with the column limit, not SQLite's words",
            input: format!(
                "{}\n{}\n",
                (0..20_190).map(|n| format!("c{n}")).collect::<Vec<_>>().join(","),
                (0..20_190).map(|n| n.to_string()).collect::<Vec<_>>().join(",")
            )
            .into_bytes(),
            code: 1,
            stderr: &["20190 columns", "SQLite allows at most 2000 in a table"],
            absent: true,
            ..Case::default()
        },
        Case {
            name: "2000 columns are allowed; --source-column making 2001 is refused first",
            input: format!(
                "{}\n{}\n",
                (0..2000).map(|n| format!("c{n}")).collect::<Vec<_>>().join(","),
                (0..2000).map(|n| n.to_string()).collect::<Vec<_>>().join(",")
            )
            .into_bytes(),
            args: &["--source-column", "src"],
            code: 1,
            stderr: &["2001 columns"],
            ..Case::default()
        },
        Case {
            name: "a header and no records makes an empty table",
            input: b"a,b\n".to_vec(),
            stored: Some(("SELECT count(*) FROM t", vec![vec![i(0)]])),
            ..Case::default()
        },
        Case {
            name: "a TSV with a lone quote keeps it as text",
            file: "in.tsv",
            input: b"a\tb\n1\t\"x\n2\ty\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("\"x")], vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "lone-CR NDJSON is read as lines",
            file: "in.ndjson",
            input: b"{\"a\":1}\r{\"a\":2}\r\r{\"a\":\"x\"}\r".to_vec(),
            stored: Some((
                "SELECT a, typeof(a) FROM t ORDER BY rowid",
                vec![
                    vec![t("1"), t("text")],
                    vec![t("2"), t("text")],
                    vec![t("x"), t("text")],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "invalid UTF-16 after the header fails naming the line",
            input: [utf16("a\n1\n", false, true), vec![0x00, 0xdc, b'\n', 0]].concat(),
            code: 1,
            stderr: &["in.csv:3: reading", "low surrogate without its high half"],
            ..Case::default()
        },
        // ---- 3. Garbage headers ---------------------------------------
        Case {
            name: "UTF-16LE with a byte-order mark is decoded",
            input: utf16("név,x\r\nÁrvíztűrő,1\r\n😀,2\r\n", false, true),
            stored: Some((
                T_ROWS,
                vec![vec![t("Árvíztűrő"), i(1)], vec![t("😀"), i(2)]],
            )),
            ..Case::default()
        },
        Case {
            name: "UTF-16BE with a byte-order mark is decoded",
            input: utf16("a,b\n1,é\n", true, true),
            stored: Some((
                "SELECT name FROM pragma_table_info('t')",
                vec![vec![t("a")], vec![t("b")]],
            )),
            ..Case::default()
        },
        Case {
            name: "gzipped UTF-16 is decoded",
            file: "in.csv.gz",
            input: gzip(&utf16("a,b\n1,x\n", false, true)),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")]])),
            ..Case::default()
        },
        Case {
            name: "UTF-16 without a byte-order mark is refused at the header",
            input: utf16("a,b\n1,2\n", false, false),
            code: 1,
            stderr: &["the header is not text", "NUL byte", "UTF-16"],
            ..Case::default()
        },
        Case {
            name: "UTF-16 with an unpaired surrogate fails naming the byte",
            input: [utf16("a\n", false, true), vec![0x00, 0xd8, b'x', 0]].concat(),
            code: 1,
            stderr: &[
                "invalid UTF-16LE",
                "high surrogate without its low half",
                "byte",
            ],
            ..Case::default()
        },
        Case {
            name: "UTF-32 is refused by name",
            input: vec![0xff, 0xfe, 0, 0, b'a', 0, 0, 0],
            code: 1,
            stderr: &["UTF-32"],
            ..Case::default()
        },
        Case {
            name: "gzip inside gzip is refused, not read as a binary header",
            file: "in.csv.gz",
            input: gzip(&gzip(b"a,b\n1,2\n")),
            code: 1,
            stderr: &["still gzip-compressed inside its gzip layer"],
            ..Case::default()
        },
        Case {
            name: "a broken zstd stream fails naming the file",
            input: vec![0x28, 0xb5, 0x2f, 0xfd, 0, 0, 1, 2],
            code: 1,
            stderr: &["in.csv"],
            ..Case::default()
        },
        Case {
            name: "zstd input is read, whatever its name",
            input: zstd(b"a,b\n1,x\n2,y\n"),
            code: 0,
            stored: Some(("SELECT a, b FROM t", vec![vec![i(1), t("x")], vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "zstd inside zstd is refused, not read as a binary header",
            file: "in.csv.zst",
            input: zstd(&zstd(b"a,b\n1,2\n")),
            code: 1,
            stderr: &["still zstd-compressed inside its zstd layer"],
            ..Case::default()
        },
        Case {
            name: "gzip inside zstd is refused",
            input: zstd(&gzip(b"a,b\n1,2\n")),
            code: 1,
            stderr: &["still gzip-compressed inside its zstd layer"],
            ..Case::default()
        },
        Case {
            name: "bzip2 data is refused by name",
            input: b"BZh91AY&SY\x00\x01".to_vec(),
            code: 1,
            stderr: &["bzip2-compressed"],
            ..Case::default()
        },
        Case {
            name: "xz data is refused by name",
            input: vec![0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4],
            code: 1,
            stderr: &["xz-compressed"],
            ..Case::default()
        },
        Case {
            name: "a zip archive is refused by name",
            input: b"PK\x03\x04\x14\x00\x00\x00".to_vec(),
            code: 1,
            stderr: &["zip archive"],
            ..Case::default()
        },
        Case {
            name: "invalid UTF-8 in the header names the column and byte",
            input: b"a,b\xffc\n1,2\n".to_vec(),
            code: 1,
            stderr: &[
                "in.csv:1: the header is not valid UTF-8",
                "column 2",
                "byte 1",
            ],
            ..Case::default()
        },
        Case {
            name: "the same invalid byte in data is a reject (consistent)",
            input: b"a,b\n1,b\xffc\n2,ok\n".to_vec(),
            code: 3,
            rejects: &[(2, "invalid UTF-8 at byte 1")],
            stored: Some((T_ROWS, vec![vec![i(2), t("ok")]])),
            ..Case::default()
        },
        Case {
            name: "a word that merely starts like bzip2 is data",
            input: b"BZhx,b\n1,2\n".to_vec(),
            stored: Some((
                "SELECT name FROM pragma_table_info('t')",
                vec![vec![t("BZhx")], vec![t("b")]],
            )),
            ..Case::default()
        },
        // ---- 4. Silent value changes ----------------------------------
        Case {
            name: "i64 max + 1 in the sample makes the column TEXT, every digit kept",
            input: b"n\n1\n9223372036854775808\n".to_vec(),
            stored: Some((
                "SELECT n, typeof(n) FROM t ORDER BY rowid",
                vec![
                    vec![t("1"), t("text")],
                    vec![t("9223372036854775808"), t("text")],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "a 25-digit account number keeps every digit",
            input: b"acct\n1234567890123456789012345\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![t("1234567890123456789012345")]])),
            ..Case::default()
        },
        Case {
            name: "i64 min and max stay integers",
            input: b"n\n-9223372036854775808\n9223372036854775807\n".to_vec(),
            stored: Some((
                "SELECT typeof(n), n FROM t ORDER BY rowid",
                vec![
                    vec![t("integer"), i(i64::MIN)],
                    vec![t("integer"), i(i64::MAX)],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "00123 after the sample is rejected, not rewritten to 123",
            input: after_sample("n", "{n}", &["00123", "5"]),
            code: 3,
            rejects: &[(10_002, "would store it as a number")],
            stored: Some((
                "SELECT count(*), max(n) FROM t",
                vec![vec![i(10_001), i(10_000)]],
            )),
            ..Case::default()
        },
        Case {
            name: "+5 after the sample is rejected",
            input: after_sample("n", "{n}", &["+5"]),
            code: 3,
            rejects: &[(10_002, "\"+5\"")],
            ..Case::default()
        },
        Case {
            name: "1e3 after the sample is rejected",
            input: after_sample("n", "{n}", &["1e3"]),
            code: 3,
            rejects: &[(10_002, "INTEGER type would store it")],
            ..Case::default()
        },
        Case {
            name: "a space-padded integer after the sample is rejected",
            input: after_sample("n", "{n}", &[" 7", "7 "]),
            code: 3,
            rejects: &[(10_002, "\" 7\""), (10_003, "\"7 \"")],
            ..Case::default()
        },
        Case {
            name: "a number followed by a NUL byte after the sample is rejected (SQLite reads to the NUL)",
            input: after_sample("n", "{n}", &["7\u{0}abc"]),
            code: 3,
            rejects: &[(10_002, "INTEGER type would store it")],
            ..Case::default()
        },
        Case {
            name: "an integer beyond 64 bits after the sample is rejected, not made REAL",
            input: after_sample("n", "{n}", &["99999999999999999999"]),
            code: 3,
            rejects: &[(10_002, "beyond 64 bits")],
            ..Case::default()
        },
        Case {
            name: "1e309 after the sample in a REAL column is rejected, not Inf",
            input: after_sample("x", "{n}.5", &["1e309", "-1e309"]),
            code: 3,
            rejects: &[(10_002, "infinite"), (10_003, "infinite")],
            stored: Some((
                "SELECT count(*) FROM t WHERE abs(x) > 1e308",
                vec![vec![i(0)]],
            )),
            ..Case::default()
        },
        Case {
            name: "a column where everything fits reports nothing kept as text",
            input: b"n,s\n1,x\n2,y\n".to_vec(),
            kept: Some("{}"),
            ..Case::default()
        },
        Case {
            name: "1e-400 after the sample in a REAL column is rejected, not made 0.0",
            input: after_sample("x", "{n}.5", &["1e-400", "-1E-400", "0e-400", "4.9e-324"]),
            code: 3,
            rejects: &[
                (10_002, "below a double's range"),
                (10_003, "below a double's range"),
            ],
            stored: Some((
                "SELECT x FROM t WHERE rowid > 10000 ORDER BY rowid",
                vec![vec![r(0.0)], vec![r(4.9e-324)]],
            )),
            ..Case::default()
        },
        Case {
            name: "1e-400 after the sample in an INTEGER column is rejected naming the zero",
            input: after_sample("n", "{n}", &["1e-400"]),
            code: 3,
            rejects: &[(10_002, "0.0: the number is below a double's range")],
            ..Case::default()
        },
        Case {
            name: "1e-400 in the sample keeps the column TEXT, as written (as 1e309 does)",
            input: b"x\n1.5\n1e-400\n".to_vec(),
            stored: Some((
                "SELECT x, typeof(x) FROM t ORDER BY rowid",
                vec![vec![t("1.5"), t("text")], vec![t("1e-400"), t("text")]],
            )),
            ..Case::default()
        },
        Case {
            name: "+5, 1., 1e3 and .5 after the sample in a REAL column are those numbers",
            input: after_sample("x", "{n}.5", &["+5", "1.", "1e3", ".5", "-2.50"]),
            stored: Some((
                "SELECT x, typeof(x) FROM t WHERE rowid > 10000 ORDER BY rowid",
                vec![
                    vec![r(5.0), t("real")],
                    vec![r(1.0), t("real")],
                    vec![r(1000.0), t("real")],
                    vec![r(0.5), t("real")],
                    vec![r(-2.5), t("real")],
                ],
            )),
            kept: Some("{}"),
            ..Case::default()
        },
        Case {
            name: "a DATE column rejects a late 20240105 (it would be a Julian day), keeps a word",
            input: after_sample("d", "2024-01-05", &["20240105", "2024-01-06", "soon", "1.5"]),
            code: 3,
            rejects: &[(10_002, "Julian day"), (10_005, "Julian day")],
            stored: Some((
                "SELECT d, typeof(d) FROM t WHERE rowid > 10000 ORDER BY rowid",
                vec![vec![t("2024-01-06"), t("text")], vec![t("soon"), t("text")]],
            )),
            kept: Some(r#"{"d": 1}"#),
            ..Case::default()
        },
        Case {
            name: "a TIMESTAMP column given by --type rejects a number",
            input: b"ts\n2024-01-05 10:00\n1704448800\n".to_vec(),
            args: &["--type", "ts=TIMESTAMP"],
            code: 3,
            rejects: &[(3, "Julian day")],
            ..Case::default()
        },
        Case {
            name: "NDJSON numbers below a double's range are rejected like 1e309, not made 0.0",
            file: "in.ndjson",
            input: b"{\"x\":1.5}\n{\"x\":1e-400}\n{\"x\":-2E-0400}\n{\"x\":0e-999}\n"
                .to_vec(),
            code: 3,
            rejects: &[
                (2, "1e-400 is below a double's range"),
                (3, "below a double's range"),
            ],
            stored: Some((T_ROWS, vec![vec![r(1.5)], vec![r(0.0)]])),
            ..Case::default()
        },
        Case {
            name: "an NDJSON number below range in a TEXT column is rejected, not the text 0.0",
            file: "in.ndjson",
            input: b"{\"s\":\"a\"}\n{\"s\":1e-400}\n".to_vec(),
            code: 3,
            rejects: &[(2, "below a double's range")],
            stored: Some((T_ROWS, vec![vec![t("a")]])),
            ..Case::default()
        },
        Case {
            name: "an NDJSON number below range written without exponent is rejected",
            file: "in.ndjson",
            input: format!("{{\"x\":2.5}}\n{{\"x\":0.{}1}}\n", "0".repeat(400)).into_bytes(),
            code: 3,
            rejects: &[(2, "below a double's range")],
            stored: Some((T_ROWS, vec![vec![r(2.5)]])),
            ..Case::default()
        },
        Case {
            name: "an NDJSON nested value keeps a tiny number as written",
            file: "in.ndjson",
            input: b"{\"j\":[1e-400, 2]}\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![t("[1e-400, 2]")]])),
            ..Case::default()
        },
        Case {
            name: "NDJSON numbers in a DATE column are rejected (Julian days)",
            file: "in.ndjson",
            input: b"{\"d\":\"2024-01-05\"}\n{\"d\":20240105}\n".to_vec(),
            args: &["--type", "d=DATE"],
            code: 3,
            rejects: &[(2, "Julian day")],
            stored: Some((T_ROWS, vec![vec![t("2024-01-05")]])),
            ..Case::default()
        },
        Case {
            name: "007 after the sample in a REAL column is rejected",
            input: after_sample("x", "{n}.5", &["007"]),
            code: 3,
            rejects: &[(10_002, "REAL type would store it")],
            ..Case::default()
        },
        Case {
            name: "a word after the sample is kept as written (SQLite keeps text), and counted",
            input: after_sample("n", "{n}", &["oops", "0x10", "1-2-3", "2024-01-05"]),
            kept: Some(r#"{"n": 4}"#),
            stored: Some((
                "SELECT n, typeof(n) FROM t WHERE rowid > 10000 ORDER BY rowid",
                vec![
                    vec![t("oops"), t("text")],
                    vec![t("0x10"), t("text")],
                    vec![t("1-2-3"), t("text")],
                    vec![t("2024-01-05"), t("text")],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "leading zeros in the sample keep the column TEXT",
            input: b"zip\n02134\n10001\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![t("02134")], vec![t("10001")]])),
            ..Case::default()
        },
        Case {
            name: "reals are stored to the last bit",
            input: b"x\n0.1\n2.2250738585072014e-308\n1.7976931348623157e308\n-0.5\n".to_vec(),
            stored: Some((
                T_ROWS,
                vec![
                    vec![r(0.1)],
                    vec![r(2.2250738585072014e-308)],
                    vec![r(1.7976931348623157e308)],
                    vec![r(-0.5)],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "--types text keeps 00123 and +5 as written",
            input: b"n\n00123\n+5\n1e3\n".to_vec(),
            args: &["--types", "text"],
            stored: Some((
                T_ROWS,
                vec![vec![t("00123")], vec![t("+5")], vec![t("1e3")]],
            )),
            ..Case::default()
        },
        Case {
            name: "appending 00123 into an INTEGER column is rejected",
            input: b"n\n12\n00123\n".to_vec(),
            args: &["--mode", "append"],
            setup: Setup::Typed,
            code: 3,
            rejects: &[(3, "INTEGER type would store it")],
            stored: Some(("SELECT n FROM t", vec![vec![i(12)]])),
            ..Case::default()
        },
        Case {
            name: "appending 00123 into a NUMERIC column is rejected",
            input: b"n\n12\n00123\n1.5\n".to_vec(),
            args: &["--mode", "append", "--table", "num"],
            setup: Setup::Typed,
            code: 3,
            rejects: &[(3, "NUMERIC type would store it")],
            stored: Some((
                "SELECT n FROM num ORDER BY rowid",
                vec![vec![i(12)], vec![r(1.5)]],
            )),
            ..Case::default()
        },
        Case {
            name: "a NUMERIC column stores +5, 1e3 and 1. by value, as a REAL one does",
            input: b"n\n+5\n1e3\n1.\n2.5\n".to_vec(),
            args: &["--mode", "append", "--table", "num"],
            setup: Setup::Typed,
            stored: Some((
                "SELECT n, typeof(n) FROM num ORDER BY rowid",
                vec![
                    vec![i(5), t("integer")],
                    vec![i(1000), t("integer")],
                    vec![i(1), t("integer")],
                    vec![r(2.5), t("real")],
                ],
            )),
            kept: Some("{}"),
            ..Case::default()
        },
        Case {
            name: "appending 00123 into an untyped column keeps it as written",
            input: b"n\n00123\n99999999999999999999\n".to_vec(),
            args: &["--mode", "append", "--table", "any"],
            setup: Setup::Typed,
            stored: Some((
                "SELECT n, typeof(n) FROM \"any\" ORDER BY rowid",
                vec![
                    vec![t("00123"), t("text")],
                    vec![t("99999999999999999999"), t("text")],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "NDJSON integers beyond 64 bits keep every digit",
            file: "in.ndjson",
            input: b"{\"n\":12345678901234567890123}\n{\"n\":1}\n".to_vec(),
            stored: Some((
                "SELECT n, typeof(n) FROM t ORDER BY rowid",
                vec![
                    vec![t("12345678901234567890123"), t("text")],
                    vec![t("1"), t("text")],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "NDJSON: u64 beyond i64, and long numbers inside nested values, keep their digits",
            file: "in.ndjson",
            input: b"{\"n\":18446744073709551615,\"j\":[12345678901234567890123, 1.50]}\n".to_vec(),
            stored: Some((
                "SELECT n, typeof(n), j FROM t",
                vec![vec![
                    t("18446744073709551615"),
                    t("text"),
                    t("[12345678901234567890123, 1.50]"),
                ]],
            )),
            ..Case::default()
        },
        Case {
            name: "NDJSON strings SQLite would rewrite are rejected in INTEGER columns",
            file: "in.ndjson",
            input: b"{\"n\":\"00123\"}\n{\"n\":5}\n{\"n\":\"five\"}\n".to_vec(),
            args: &["--mode", "append"],
            setup: Setup::Typed,
            code: 3,
            rejects: &[(1, "INTEGER type would store it")],
            stored: Some((
                "SELECT n, typeof(n) FROM t ORDER BY rowid",
                vec![vec![i(5), t("integer")], vec![t("five"), t("text")]],
            )),
            ..Case::default()
        },
        Case {
            name: "NDJSON numbers out of a double's range are rejected",
            file: "in.ndjson",
            input: b"{\"n\":1.5}\n{\"n\":1e309}\n".to_vec(),
            code: 3,
            rejects: &[(2, "number out of range")],
            stored: Some((T_ROWS, vec![vec![r(1.5)]])),
            ..Case::default()
        },
        Case {
            name: "an NDJSON record giving one key twice is rejected, not halved",
            file: "in.ndjson",
            input: b"{\"id\":1,\"v\":\"a\"}\n{\"id\":2,\"id\":3}\n{\"id\":4,\"ID\":5}\n"
                .to_vec(),
            code: 3,
            // A new table gets a column per spelling: nothing collides.
            stored: Some((
                "SELECT id, v, \"ID_2\" FROM t ORDER BY rowid",
                vec![vec![i(1), t("a"), Value::Null], vec![i(4), Value::Null, i(5)]],
            )),
            rejects: &[(2, "column \"id\" is given twice, by keys \"id\" and \"id\"")],
            ..Case::default()
        },
        Case {
            name: "an NDJSON nested object giving one key twice is rejected like a top-level one",
            file: "in.ndjson",
            input: concat!(
                "{\"o\":{\"a\":1}}\n",
                "{\"o\":{\"a\":1,\"a\":2}}\n",
                "{\"o\":[{\"b\":1,\"b\":2}]}\n",
                "{\"o\":{\"x\":{\"y\":1,\"y\":1}}}\n",
                "{\"o\":{\"a\":1,\"A\":2}}\n",
                "{\"o\":{\"a\":12345678901234567890123,\"a\":2}}\n",
            )
            .as_bytes()
            .to_vec(),
            code: 3,
            rejects: &[
                (2, "key \"a\" is given twice inside the value of key \"o\""),
                (3, "key \"b\" is given twice inside the value of key \"o\""),
                (4, "key \"y\" is given twice"),
                (6, "key \"a\" is given twice"),
            ],
            stored: Some((
                T_ROWS,
                vec![vec![t("{\"a\":1}")], vec![t("{\"a\":1,\"A\":2}")]],
            )),
            ..Case::default()
        },
        Case {
            name: "an NDJSON record naming one existing column twice by case is rejected",
            file: "in.ndjson",
            input: b"{\"n\":1}\n{\"n\":2,\"N\":3}\n{\"N\":4}\n".to_vec(),
            args: &["--mode", "append"],
            setup: Setup::Typed,
            code: 3,
            stored: Some(("SELECT n FROM t ORDER BY rowid", vec![vec![i(1)], vec![i(4)]])),
            rejects: &[(2, "column \"n\" is given twice, by keys \"n\" and \"N\"")],
            ..Case::default()
        },
        Case {
            name: "an integer a REAL column cannot hold exactly is rejected, not rounded",
            input: b"x\n1.5\n9007199254740993\n9007199254740992\n".to_vec(),
            code: 3,
            stored: Some((
                "SELECT x FROM t ORDER BY rowid",
                vec![vec![Value::Real(1.5)], vec![Value::Real(9007199254740992.0)]],
            )),
            rejects: &[(3, "9007199254740993 has no exact REAL value")],
            ..Case::default()
        },
        // ---- 5. Bookkeeping -------------------------------------------
        Case {
            name: "the progress table's name is refused as a target",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "_litelane_import"],
            code: 1,
            stderr: &["reserved"],
            ..Case::default()
        },
        Case {
            name: "reserved names are compared ignoring case",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "_LiteLane_Import"],
            code: 1,
            stderr: &["reserved"],
            ..Case::default()
        },
        Case {
            name: "sqlite_ names are refused",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "sqlite_stat1"],
            code: 1,
            stderr: &["reserved"],
            ..Case::default()
        },
        Case {
            name: "a table with an import running is refused",
            input: b"a\n1\n".to_vec(),
            args: &["--commit-every", "10"],
            setup: Setup::Locked,
            code: 1,
            stderr: &["another litelane import into table \"t\"", "is running"],
            ..Case::default()
        },
        Case {
            name: "a table with an import running is refused through a link to the database",
            input: b"a\n1\n".to_vec(),
            args: &["--db", "{dir}/link-to-db"],
            setup: Setup::Locked,
            code: 1,
            stderr: &["is running"],
            ..Case::default()
        },
        Case {
            name: "a lock file left by a killed import does not block",
            input: b"a\n1\n".to_vec(),
            args: &["--commit-every", "10"],
            setup: Setup::StaleLock,
            stored: Some((T_ROWS, vec![vec![i(1)]])),
            ..Case::default()
        },
        Case {
            name: "an old-layout progress table is migrated, keyed by table and source",
            input: b"a\n1\n2\n".to_vec(),
            args: &["--commit-every", "1"],
            setup: Setup::OldProgress,
            stored: Some((
                "SELECT table_name, state FROM _litelane_import ORDER BY table_name",
                vec![vec![t("other"), t("done")], vec![t("t"), t("done")]],
            )),
            ..Case::default()
        },
        // ---- 6. Unclear outcomes --------------------------------------
        Case {
            name: "--profile fast leaves a WAL database in WAL mode",
            input: b"a\n1\n".to_vec(),
            args: &["--profile", "fast"],
            setup: Setup::WalDbClosed,
            stored: Some(("PRAGMA journal_mode", vec![vec![t("wal")]])),
            ..Case::default()
        },
        Case {
            name: "--profile fast on a WAL database another connection has open fails clearly",
            input: b"a\n1\n".to_vec(),
            args: &["--profile", "fast"],
            setup: Setup::WalDb,
            code: 1,
            stderr: &["database is locked", "journal_mode"],
            stored: Some(("PRAGMA journal_mode", vec![vec![t("wal")]])),
            ..Case::default()
        },
        Case {
            name: "--profile fast leaves a rollback database in its mode",
            input: b"a\n1\n".to_vec(),
            args: &["--profile", "fast"],
            setup: Setup::RollbackDb,
            stored: Some(("PRAGMA journal_mode", vec![vec![t("delete")]])),
            ..Case::default()
        },
        Case {
            name: "a missing database directory is named",
            input: b"a\n1\n".to_vec(),
            args: &["--db", "{dir}/no/such/dir/t.db"],
            code: 1,
            stderr: &["no/such/dir", "does not exist"],
            ..Case::default()
        },
        Case {
            name: "--rejects-table holds the rejects beside the rows, raw as read",
            input: b"a,b\n1,x\n2\n3,y\n4,\xff\n".to_vec(),
            args: &["--rejects-table", "bad"],
            code: 3,
            rejects: &[(3, "found 1"), (5, "invalid UTF-8")],
            stored: Some((
                "SELECT target_table, line, record, typeof(raw), hex(raw) FROM bad ORDER BY line",
                vec![
                    vec![t("t"), i(3), i(2), t("text"), t("32")],
                    vec![t("t"), i(5), i(4), t("blob"), t("342CFF")],
                ],
            )),
            ..Case::default()
        },
        Case {
            name: "--rejects-table rolls back with the rows",
            input: b"a,b\n1,x\n2\n3,y\n".to_vec(),
            args: &["--rejects-table", "bad", "--max-rejects", "0"],
            code: 1,
            stderr: &["--max-rejects 0", "nothing was imported"],
            absent: true,
            ..Case::default()
        },
        Case {
            name: "--rejects-table naming the target table is refused",
            input: b"a\n1\n".to_vec(),
            args: &["--rejects-table", "T"],
            code: 1,
            stderr: &["is the table being imported into"],
            ..Case::default()
        },
        Case {
            name: "--rejects-table with a reserved name is refused",
            input: b"a\n1\n".to_vec(),
            args: &["--rejects-table", "_litelane_import"],
            code: 1,
            stderr: &["reserved"],
            ..Case::default()
        },
        // ---- 7. Exit status -------------------------------------------
        Case {
            name: "every record stored exits 0",
            input: b"a,b\n1,x\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")]])),
            ..Case::default()
        },
        Case {
            name: "short and long rows are rejected (exit 3), never padded or cut",
            input: b"a,b\n1\n2,y,z\n3,w\n".to_vec(),
            code: 3,
            rejects: &[(2, "found 1"), (3, "found 3")],
            stored: Some((T_ROWS, vec![vec![i(3), t("w")]])),
            ..Case::default()
        },
        Case {
            name: "an empty file fails (exit 1) naming it",
            input: Vec::new(),
            code: 1,
            stderr: &["in.csv is empty"],
            ..Case::default()
        },
        Case {
            name: "--strict rejects what does not fit (exit 3)",
            input: b"n\n1\nx\n".to_vec(),
            args: &["--strict", "--mode", "append"],
            setup: Setup::Typed,
            code: 3,
            rejects: &[(3, "\"x\" is not an INTEGER (strict)")],
            stored: Some(("SELECT n FROM t", vec![vec![i(1)]])),
            ..Case::default()
        },
        // --null adds to the default null token (the empty field).
        Case {
            name: "--null NA adds to the empty field: blanks stay NULL, the column INTEGER",
            input: b"n,s\n1,a\n,b\nNA,\n".to_vec(),
            args: &["--null", "NA"],
            stored: Some((
                "SELECT n, typeof(n), s FROM t ORDER BY rowid",
                vec![
                    vec![i(1), t("integer"), t("a")],
                    vec![Value::Null, t("null"), t("b")],
                    vec![Value::Null, t("null"), Value::Null],
                ],
            )),
            null_tokens: Some(r#"{"n":{"":1,"NA":1},"s":{"":1}}"#),
            ..Case::default()
        },
        Case {
            name: "--null NA --no-default-nulls: the empty field is text, NA is NULL",
            input: b"n,s\n1,\n2,NA\n".to_vec(),
            args: &["--null", "NA", "--no-default-nulls"],
            stored: Some((T_ROWS, vec![vec![i(1), t("")], vec![i(2), Value::Null]])),
            null_tokens: Some(r#"{"s":{"NA":1}}"#),
            ..Case::default()
        },
        Case {
            name: "--no-default-nulls without --null is a usage error",
            input: b"n\n1\n".to_vec(),
            args: &["--no-default-nulls"],
            code: 2,
            stderr: &["--null"],
            ..Case::default()
        },
        Case {
            name: "the summary names null tokens in TEXT columns and sniffed ones in typed columns",
            input: b"n,s\n1,x\nNA,\n3,y\n,z\n".to_vec(),
            stored: Some((
                "SELECT count(*) FROM t WHERE n IS NULL OR s IS NULL",
                vec![vec![i(2)]],
            )),
            null_tokens: Some(r#"{"n":{"NA":1,"":1},"s":{"":1}}"#),
            ..Case::default()
        },
        Case {
            name: "null tokens of a rejected record are not counted",
            input: b"n,s\n1,x\n,y,extra\n2,\n".to_vec(),
            code: 3,
            rejects: &[(3, "expected 2 fields")],
            null_tokens: Some(r#"{"s":{"":1}}"#),
            ..Case::default()
        },
        // Schema-qualified and quoted --table names.
        Case {
            name: "--table main.base imports into table base of the database",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "main.base"],
            stored: Some(("SELECT a FROM main.base", vec![vec![i(1)]])),
            ..Case::default()
        },
        Case {
            name: "a double-quoted --table keeps its dot (and a doubled quote) as part of the name",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "\"my.ta\"\"ble\""],
            stored: Some(("SELECT a FROM \"my.ta\"\"ble\"", vec![vec![i(1)]])),
            ..Case::default()
        },
        Case {
            name: "--table MAIN.\"x y\" and [a.b] are read as SQL names",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "MAIN.\"x y\""],
            stored: Some(("SELECT a FROM \"x y\"", vec![vec![i(1)]])),
            ..Case::default()
        },
        Case {
            name: "--table temp.t is refused: the table would vanish",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "temp.t"],
            code: 1,
            stderr: &["a temp table would vanish"],
            ..Case::default()
        },
        Case {
            name: "--table aux.t is refused: no schema aux is attached, nothing named aux.t made",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "aux.t"],
            setup: Setup::WalDbClosed,
            code: 1,
            stderr: &["schema \"aux\" is not attached"],
            stored: Some(("SELECT name FROM sqlite_master", vec![vec![t("keep")]])),
            ..Case::default()
        },
        Case {
            name: "--table with an unclosed quote is refused",
            input: b"a\n1\n".to_vec(),
            args: &["--table", "\"t"],
            code: 1,
            stderr: &["is never closed"],
            ..Case::default()
        },
        // A generated column of an existing table.
        Case {
            name: "an input column that is a generated column is named as such",
            input: b"a,g\n1,5\n".to_vec(),
            args: &["--mode", "append"],
            setup: Setup::Generated,
            code: 1,
            stderr: &["input column \"g\" is a generated column of table \"t\""],
            stored: Some(("SELECT count(*) FROM t", vec![vec![i(0)]])),
            ..Case::default()
        },
        Case {
            name: "a generated column with --alter is named as such, not added",
            input: b"a,G\n1,5\n".to_vec(),
            args: &["--mode", "append", "--alter"],
            setup: Setup::Generated,
            code: 1,
            stderr: &["input column \"G\" is a generated column"],
            ..Case::default()
        },
        Case {
            name: "an NDJSON key that is a generated column is named as such",
            file: "in.ndjson",
            input: b"{\"a\":1,\"g\":5}\n".to_vec(),
            args: &["--mode", "append"],
            setup: Setup::Generated,
            code: 1,
            stderr: &["is a generated column"],
            ..Case::default()
        },
        Case {
            name: "appending without the generated column computes it",
            input: b"a\n3\n".to_vec(),
            args: &["--mode", "append"],
            setup: Setup::Generated,
            stored: Some(("SELECT a, g FROM t", vec![vec![i(3), i(6)]])),
            ..Case::default()
        },
        // A value or row longer than SQLite's length limit (lowered to 4000
        // bytes by the test hook) rejects its record; the import goes on.
        Case {
            name: "a CSV field longer than SQLite's limit rejects its record, not the import",
            input: format!("id,s\n1,a\n2,{}\n3,c\n", "x".repeat(5000)).into_bytes(),
            env: &[("LITELANE_TEST_MAX_LENGTH", "4000")],
            code: 3,
            rejects: &[(3, "column \"s\": a value of 5000 bytes, more than SQLite's limit of 4000")],
            stored: Some(("SELECT id FROM t ORDER BY rowid", vec![vec![i(1)], vec![i(3)]])),
            ..Case::default()
        },
        Case {
            name: "an NDJSON string longer than SQLite's limit rejects its line",
            file: "in.ndjson",
            input: format!(
                "{{\"id\":1}}\n{{\"id\":2,\"s\":\"{}\"}}\n{{\"id\":3}}\n",
                "y".repeat(5000)
            )
            .into_bytes(),
            env: &[("LITELANE_TEST_MAX_LENGTH", "4000")],
            code: 3,
            rejects: &[(2, "a value of 5000 bytes, more than SQLite's limit")],
            stored: Some(("SELECT id FROM t ORDER BY rowid", vec![vec![i(1)], vec![i(3)]])),
            ..Case::default()
        },
        Case {
            name: "a JSON array element whose values together pass the limit is rejected",
            file: "in.json",
            input: format!(
                "[{{\"a\":\"p\",\"b\":\"q\"}},\n{{\"a\":\"{0}\",\"b\":\"{0}\"}}]",
                "z".repeat(3000)
            )
            .into_bytes(),
            env: &[("LITELANE_TEST_MAX_LENGTH", "4000")],
            code: 3,
            rejects: &[(2, "the row's values total 6000 bytes")],
            stored: Some((T_ROWS, vec![vec![t("p"), t("q")]])),
            ..Case::default()
        },
        // JSON files holding one array of objects.
        Case {
            name: "a JSON array of objects is read like NDJSON, one row per element",
            file: "in.json",
            input: br#"[{"a":1,"b":"x"},{"a":2,"b":"y"}]"#.to_vec(),
            stored: Some((T_ROWS, vec![vec![i(1), t("x")], vec![i(2), t("y")]])),
            ..Case::default()
        },
        Case {
            name: "a pretty-printed JSON array with CRLF line ends",
            file: "in.json",
            input: b"[\r\n  {\r\n    \"a\": 1\r\n  },\r\n  {\"a\": 2.5}\r\n]\r\n".to_vec(),
            stored: Some((T_ROWS, vec![vec![r(1.0)], vec![r(2.5)]])),
            ..Case::default()
        },
        Case {
            name: "bad JSON array elements are rejected with their line, the rest stored",
            file: "in.json",
            input: b"[\n{\"a\":1},\n{\"a\":\"x\",},\n 5, {\"a\":1,\"a\":2},\n{\"o\":{\"k\":1,\"k\":2}},\n{\"a\":3}\n]\n"
                .to_vec(),
            code: 3,
            rejects: &[
                (3, "trailing comma"),
                (4, "not a JSON object"),
                (4, "given twice"),
                (5, "twice"),
            ],
            stored: Some(("SELECT a FROM t ORDER BY rowid", vec![vec![i(1)], vec![i(3)]])),
            ..Case::default()
        },
        Case {
            name: "brackets, braces and escaped quotes inside JSON strings do not end an element",
            file: "in.json",
            input: br#"[{"s":"]\"}{[,"},{"s":"b"}]"#.to_vec(),
            stored: Some((T_ROWS, vec![vec![t("]\"}{[,")], vec![t("b")]])),
            ..Case::default()
        },
        Case {
            name: "a gzipped JSON array with no known extension is recognised by its content",
            file: "in.data",
            input: gzip(b"  \n[{\"a\":7}]"),
            stored: Some((T_ROWS, vec![vec![i(7)]])),
            ..Case::default()
        },
        Case {
            name: "a JSON array cut short fails naming where it opened, nothing stored",
            file: "in.json",
            input: b"\n[{\"a\":1},\n{\"a\":2}".to_vec(),
            code: 1,
            stderr: &["in.json:3: the JSON array opened on line 2 is never closed"],
            ..Case::default()
        },
        Case {
            name: "a JSON array element cut short fails naming its line",
            file: "in.json",
            input: b"[{\"a\":1},\n{\"a\":\"x}]".to_vec(),
            code: 1,
            stderr: &["element 2 of the JSON array, begun on line 2, is never closed"],
            ..Case::default()
        },
        Case {
            name: "text after a JSON array's closing bracket fails",
            file: "in.json",
            input: b"[{\"a\":1}]\n{\"a\":2}\n".to_vec(),
            code: 1,
            stderr: &["in.json:2: text after the closing bracket of the JSON array"],
            ..Case::default()
        },
        Case {
            name: "a missing comma between JSON array elements fails",
            file: "in.json",
            input: b"[{\"a\":1} {\"a\":2}]".to_vec(),
            code: 1,
            stderr: &["expected a comma or ']' after element 1"],
            ..Case::default()
        },
        Case {
            name: "two commas in a JSON array fail",
            file: "in.json",
            input: b"[{\"a\":1},,{\"a\":2}]".to_vec(),
            code: 1,
            stderr: &["an empty element"],
            ..Case::default()
        },
    ]
}

#[test]
fn hostile_inputs_have_their_expected_outcomes() {
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut failed = Vec::new();
    for c in &cases {
        if let Err(why) = run_case(c) {
            failed.push(format!("{}:\n    {why}", c.name));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

#[test]
fn help_states_the_exit_statuses_and_that_fast_can_corrupt_existing_tables() {
    let o = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args(["import", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("can corrupt the whole database, including tables that existed before"),
        "{help}"
    );
    assert!(help.contains("3 finished with rejected records"), "{help}");
    assert!(help.contains("130 interrupted"), "{help}");
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/import.md"))
        .unwrap();
    assert!(doc.contains("including tables that existed before the import"));
}

#[test]
fn values_kept_as_text_in_typed_columns_are_named_in_the_summary_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in.csv");
    std::fs::write(
        &src,
        after_sample("n,b", "{n},true", &["unknown,true", "7,yes", "n/a,maybe"]),
    )
    .unwrap();
    let args: Vec<String> = vec![
        src.to_str().unwrap().into(),
        "--db".into(),
        dir.path().join("t.db").to_str().unwrap().into(),
    ];
    let o = litelane(dir.path(), &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "4 values did not fit their column's type and were stored as written (text): \
             \"n\" INTEGER 2, \"b\" BOOLEAN 2"
        ),
        "{err}"
    );
    assert_eq!(
        query(
            &dir.path().join("t.db"),
            "SELECT n, b FROM \"in\" WHERE typeof(n) = 'text' OR typeof(b) = 'text'"
        )
        .unwrap(),
        vec![
            vec![t("unknown"), i(1)],
            vec![i(7), t("yes")],
            vec![t("n/a"), t("maybe")]
        ]
    );
}

#[test]
fn rejects_naming_the_plan_file_is_refused_and_the_plan_survives() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in.csv");
    std::fs::write(&src, "a,b\n1,x\n2\n").unwrap();
    let plan = dir.path().join("plan.json");
    let o = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args(["sniff", src.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(o.status.success());
    std::fs::write(&plan, &o.stdout).unwrap();
    let plan_bytes = o.stdout.clone();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let db = dir.path().join("t.db");
    let other = dir.path().join("b.csv");
    std::fs::write(&other, "a,b\n3,y\n").unwrap();
    for files in [vec![s(&src)], vec![s(&src), s(&other)]] {
        let mut args = files.clone();
        args.extend(["--db".into(), s(&db), "--table".into(), "t".into()]);
        args.extend(["--plan".into(), s(&plan), "--rejects".into(), s(&plan)]);
        let o = litelane(dir.path(), &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{files:?}: {err}");
        assert!(err.contains("it is the --plan file"), "{files:?}: {err}");
        assert_eq!(
            std::fs::read(&plan).unwrap(),
            plan_bytes,
            "{files:?}: the plan changed"
        );
        assert!(!db.exists(), "{files:?}: the database was created");
    }
}

#[test]
fn the_wal_is_truncated_after_an_import_unless_a_reader_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut csv = String::from("a,b\n");
    for i in 0..2_000 {
        csv.push_str(&format!("{i},{}\n", "x".repeat(40)));
    }
    std::fs::write(dir.join("in.csv"), &csv).unwrap();
    let db = dir.join("t.db");
    let wal = dir.join("t.db-wal");
    let c = Connection::open(&db).unwrap();
    c.execute_batch("PRAGMA journal_mode=wal; CREATE TABLE keep(x); INSERT INTO keep VALUES (1);")
        .unwrap();
    // A reader in the middle of a read transaction holds the WAL.
    c.execute_batch("BEGIN; SELECT * FROM keep;").unwrap();
    let run = |table: &str| {
        let args: Vec<String> = ["in.csv", "--db", "t.db", "--table", table, "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        litelane(dir, &args)
    };
    let o = run("held");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["wal_truncated"], false, "{s}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("was not truncated"), "{err}");
    assert!(std::fs::metadata(&wal).unwrap().len() > 100_000);
    c.execute_batch("COMMIT").unwrap();
    drop(c);
    let o = run("free");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["wal_truncated"], true, "{s}");
    assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0);
    let rows = query(
        &db,
        "SELECT count(*) FROM held UNION ALL SELECT count(*) FROM free",
    );
    assert_eq!(rows.unwrap(), vec![vec![i(2_000)], vec![i(2_000)]]);
}

#[test]
fn quiet_has_a_short_form_and_types_help_names_every_type() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("in.csv"), b"a\n1\n").unwrap();
    let args: Vec<String> = ["in.csv", "--db", "t.db", "-q"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let o = litelane(dir, &args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert_eq!(
        query(&dir.join("t.db"), "SELECT a FROM \"in\"").unwrap(),
        vec![vec![i(1)]]
    );
    let help = Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args(["import", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    // From `--types` to the next option (`--type COL=TYPE` comes before).
    let types = &help[help.find("--types <").expect("--types in the help")..];
    let end = types[1..]
        .find("\n      --")
        .or_else(|| types[1..].find("\n  -"));
    let types = &types[..end.map_or(types.len(), |e| e + 1)];
    for ty in [
        "BOOLEAN",
        "INTEGER",
        "REAL",
        "DATE",
        "TIMESTAMP",
        "TEXT",
        "NUMERIC",
    ] {
        assert!(types.contains(ty), "--types help lacks {ty}: {types}");
    }
    assert!(help.contains("-q, --quiet"), "{help}");
}
