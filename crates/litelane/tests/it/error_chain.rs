//! An error's `source()` chain ends in what SQLite or the operating system
//! said, as values code can match on (issue 17).

use crate::common;

use common::{exec, temp_db};
use litelane::{Database, Error, Options, SqliteCode};

/// What one link of a chain is.
#[derive(Debug, PartialEq)]
enum Link {
    /// An engine error, by variant.
    Engine(&'static str),
    /// SQLite's result code, by name.
    Code(&'static str),
    /// An operating-system error.
    Os,
}

fn links(e: &Error) -> Vec<Link> {
    let mut out = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        out.push(if let Some(e) = err.downcast_ref::<Error>() {
            Link::Engine(match e {
                Error::Sqlite { .. } => "Sqlite",
                Error::RolledBack { .. } => "RolledBack",
                Error::Io { .. } => "Io",
                Error::OutcomeUnknown { .. } => "OutcomeUnknown",
                _ => "other",
            })
        } else if let Some(c) = err.downcast_ref::<SqliteCode>() {
            Link::Code(c.name())
        } else if err.downcast_ref::<std::io::Error>().is_some() {
            Link::Os
        } else {
            panic!("an unexpected link {err:?} in the chain of {e:?}");
        });
        next = err.source();
    }
    out
}

/// The SQLite code at the end of `e`'s chain.
fn last_code(e: &Error) -> SqliteCode {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut code = None;
    while let Some(err) = next {
        code = err.downcast_ref::<SqliteCode>().copied().or(code);
        next = err.source();
    }
    code.unwrap_or_else(|| panic!("no SQLite code in the chain of {e:?}"))
}

#[test]
fn a_constraint_violation_chains_to_its_extended_code() {
    let (_dir, db) = temp_db(Options::default());
    exec(
        &db,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)",
    );
    exec(&db, "INSERT INTO t VALUES (1, 'a')");
    let err = db
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1, 'b')", [])?))
        .unwrap_err();
    assert_eq!(
        links(&err),
        [
            Link::Engine("Sqlite"),
            Link::Code("SQLITE_CONSTRAINT_PRIMARYKEY")
        ]
    );
    let code = last_code(&err);
    assert_eq!((code.code(), code.extended_code()), (19, 1555));
    assert_eq!(err.sqlite_extended_code(), Some(code.extended_code()));
    let err = db
        .write(|tx| Ok(tx.execute("INSERT INTO t VALUES (2, NULL)", [])?))
        .unwrap_err();
    assert_eq!(last_code(&err).name(), "SQLITE_CONSTRAINT_NOTNULL");
}

/// A failed system call behind an SQLite error (here `open`, which SQLite's
/// Unix VFS logs) is its source: the `errno` as a value, the call and the
/// file named in the message; the code stays in the error's fields.
#[test]
fn a_missing_file_opened_read_only_chains_to_the_failed_open() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        dir.path().join("absent.db"),
        dir.path().join("no-such-dir").join("absent.db"),
    ] {
        let uri = format!("file:{}?mode=ro", path.display());
        let err = match Database::open(&uri, Options::default()) {
            Ok(_) => panic!("opened {uri}, which does not exist"),
            Err(e) => e,
        };
        assert_eq!(links(&err), [Link::Engine("Sqlite"), Link::Os], "{err}");
        let os = std::error::Error::source(&err)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the OS error");
        assert_eq!(os.raw_os_error(), Some(2), "ENOENT: {err}");
        assert_eq!(os.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(err.sqlite_code(), Some(14), "SQLITE_CANTOPEN: {err}");
        assert!(
            err.to_string()
                .contains(&format!("open({})", path.display())),
            "the call and the file are named: {err}"
        );
        assert!(!path.exists(), "a read-only open created {path:?}");
    }
}

#[test]
fn a_write_rolled_back_by_another_chains_through_the_cause_to_its_code() {
    let err = Error::RolledBack {
        by: "other".into(),
        cause: Box::new(Error::from(
            rusqlite::Connection::open_in_memory()
                .unwrap()
                .execute("INSERT INTO nowhere VALUES (1)", [])
                .unwrap_err(),
        )),
        retryable: true,
    };
    assert_eq!(
        links(&err),
        [
            Link::Engine("RolledBack"),
            Link::Engine("Sqlite"),
            Link::Code("SQLITE_ERROR")
        ]
    );
}

#[test]
fn an_os_error_chains_to_the_os_error_and_an_unknown_outcome_without_one_to_its_code() {
    let (dir, db) = temp_db(Options::default());
    exec(&db, "CREATE TABLE t(x)");
    let dest = dir.path().join("no-such-dir").join("copy.db");
    let err = db.backup(&dest, |_| {}).unwrap_err();
    assert_eq!(links(&err), [Link::Engine("Io"), Link::Os], "{err}");
    let os = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap();
    assert_eq!(os.kind(), std::io::ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    let unknown = Error::OutcomeUnknown {
        path: "d.db".into(),
        file: "d.db-wal".into(),
        code: 10,
        extended_code: 1034,
        cause: "disk I/O error".into(),
        context: "COMMIT".into(),
        os: None,
    };
    assert_eq!(
        links(&unknown),
        [
            Link::Engine("OutcomeUnknown"),
            Link::Code("SQLITE_IOERR_FSYNC")
        ]
    );
}
