//! Helpers shared by the import tests: `litelane import` as a child process.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

/// An INTEGER value, as a row's cell.
pub fn i(v: i64) -> Value {
    Value::Integer(v)
}

/// A REAL value, as a row's cell.
pub fn r(v: f64) -> Value {
    Value::Real(v)
}

/// A TEXT value, as a row's cell.
pub fn t(s: &str) -> Value {
    Value::Text(s.into())
}

/// Runs `litelane ARGS...` (any subcommand) and waits for it.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_litelane"))
        .args(args)
        .output()
        .expect("run litelane")
}

/// Runs `litelane import ARGS...` and waits for it.
pub fn litelane(args: &[&str]) -> Output {
    run(&[&["import"], args].concat())
}

/// The child's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A temporary directory holding a test's input files and its `t.db`.
pub struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    /// A new, empty directory (removed when dropped).
    pub fn new() -> Dir {
        Dir {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The path of `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `data` to `name` (making its parent directories); its path.
    pub fn write(&self, name: &str, data: impl AsRef<[u8]>) -> String {
        let p = self.path(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// The path of the test's database, `t.db`.
    pub fn db(&self) -> String {
        self.path("t.db").to_str().unwrap().to_string()
    }

    /// Runs `sql` on `t.db`.
    pub fn exec(&self, sql: &str) {
        let c = Connection::open(self.db()).unwrap();
        c.execute_batch(sql).unwrap();
    }
}

/// Every row `sql` returns from the database at `db`, opened read-only.
pub fn query(db: &str, sql: &str) -> Vec<Vec<Value>> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = c.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}
