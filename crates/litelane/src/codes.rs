//! SQLite's result codes by name: the cause at the end of an
//! [`Error::Sqlite`](crate::Error::Sqlite)'s chain, and the one table of
//! their names (the Python binding exports them as `sqlite3` does).

use std::fmt;

use rusqlite::ffi;

/// One of SQLite's result codes with SQLite's name for it, e.g.
/// `SQLITE_CONSTRAINT_PRIMARYKEY` (extended code 1555, primary code 19).
///
/// It is the [`source`](std::error::Error::source) of an
/// [`Error::Sqlite`](crate::Error::Sqlite) (and of an
/// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) that has no OS
/// error), so code walking an error's chain finds what SQLite said as a
/// value. The values are the bundled SQLite's own (from its header through
/// `libsqlite3-sys`), so a name the header lacks fails the build instead of
/// carrying a wrong number. See <https://sqlite.org/rescode.html>.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqliteCode {
    name: &'static str,
    extended: i32,
}

macro_rules! table {
    ($($name:ident,)*) => {
        &[$(SqliteCode { name: stringify!($name), extended: ffi::$name as i32 }),*]
    };
}

/// Every result code SQLite names, sorted by name.
static RESULT_CODES: &[SqliteCode] = table![
    SQLITE_ABORT,
    SQLITE_ABORT_ROLLBACK,
    SQLITE_AUTH,
    SQLITE_AUTH_USER,
    SQLITE_BUSY,
    SQLITE_BUSY_RECOVERY,
    SQLITE_BUSY_SNAPSHOT,
    SQLITE_BUSY_TIMEOUT,
    SQLITE_CANTOPEN,
    SQLITE_CANTOPEN_CONVPATH,
    SQLITE_CANTOPEN_DIRTYWAL,
    SQLITE_CANTOPEN_FULLPATH,
    SQLITE_CANTOPEN_ISDIR,
    SQLITE_CANTOPEN_NOTEMPDIR,
    SQLITE_CANTOPEN_SYMLINK,
    SQLITE_CONSTRAINT,
    SQLITE_CONSTRAINT_CHECK,
    SQLITE_CONSTRAINT_COMMITHOOK,
    SQLITE_CONSTRAINT_FOREIGNKEY,
    SQLITE_CONSTRAINT_FUNCTION,
    SQLITE_CONSTRAINT_NOTNULL,
    SQLITE_CONSTRAINT_PINNED,
    SQLITE_CONSTRAINT_PRIMARYKEY,
    SQLITE_CONSTRAINT_ROWID,
    SQLITE_CONSTRAINT_TRIGGER,
    SQLITE_CONSTRAINT_UNIQUE,
    SQLITE_CONSTRAINT_VTAB,
    SQLITE_CORRUPT,
    SQLITE_CORRUPT_INDEX,
    SQLITE_CORRUPT_SEQUENCE,
    SQLITE_CORRUPT_VTAB,
    SQLITE_DONE,
    SQLITE_EMPTY,
    SQLITE_ERROR,
    SQLITE_ERROR_MISSING_COLLSEQ,
    SQLITE_ERROR_RETRY,
    SQLITE_ERROR_SNAPSHOT,
    SQLITE_FORMAT,
    SQLITE_FULL,
    SQLITE_INTERNAL,
    SQLITE_INTERRUPT,
    SQLITE_IOERR,
    SQLITE_IOERR_ACCESS,
    SQLITE_IOERR_AUTH,
    SQLITE_IOERR_BEGIN_ATOMIC,
    SQLITE_IOERR_BLOCKED,
    SQLITE_IOERR_CHECKRESERVEDLOCK,
    SQLITE_IOERR_CLOSE,
    SQLITE_IOERR_COMMIT_ATOMIC,
    SQLITE_IOERR_CONVPATH,
    SQLITE_IOERR_CORRUPTFS,
    SQLITE_IOERR_DATA,
    SQLITE_IOERR_DELETE,
    SQLITE_IOERR_DELETE_NOENT,
    SQLITE_IOERR_DIR_CLOSE,
    SQLITE_IOERR_DIR_FSYNC,
    SQLITE_IOERR_FSTAT,
    SQLITE_IOERR_FSYNC,
    SQLITE_IOERR_GETTEMPPATH,
    SQLITE_IOERR_LOCK,
    SQLITE_IOERR_MMAP,
    SQLITE_IOERR_NOMEM,
    SQLITE_IOERR_RDLOCK,
    SQLITE_IOERR_READ,
    SQLITE_IOERR_ROLLBACK_ATOMIC,
    SQLITE_IOERR_SEEK,
    SQLITE_IOERR_SHMLOCK,
    SQLITE_IOERR_SHMMAP,
    SQLITE_IOERR_SHMOPEN,
    SQLITE_IOERR_SHMSIZE,
    SQLITE_IOERR_SHORT_READ,
    SQLITE_IOERR_TRUNCATE,
    SQLITE_IOERR_UNLOCK,
    SQLITE_IOERR_VNODE,
    SQLITE_IOERR_WRITE,
    SQLITE_LOCKED,
    SQLITE_LOCKED_SHAREDCACHE,
    SQLITE_LOCKED_VTAB,
    SQLITE_MISMATCH,
    SQLITE_MISUSE,
    SQLITE_NOLFS,
    SQLITE_NOMEM,
    SQLITE_NOTADB,
    SQLITE_NOTFOUND,
    SQLITE_NOTICE,
    SQLITE_NOTICE_RECOVER_ROLLBACK,
    SQLITE_NOTICE_RECOVER_WAL,
    SQLITE_OK,
    SQLITE_OK_LOAD_PERMANENTLY,
    SQLITE_OK_SYMLINK,
    SQLITE_PERM,
    SQLITE_PROTOCOL,
    SQLITE_RANGE,
    SQLITE_READONLY,
    SQLITE_READONLY_CANTINIT,
    SQLITE_READONLY_CANTLOCK,
    SQLITE_READONLY_DBMOVED,
    SQLITE_READONLY_DIRECTORY,
    SQLITE_READONLY_RECOVERY,
    SQLITE_READONLY_ROLLBACK,
    SQLITE_ROW,
    SQLITE_SCHEMA,
    SQLITE_TOOBIG,
    SQLITE_WARNING,
    SQLITE_WARNING_AUTOINDEX,
];

impl SqliteCode {
    /// The code SQLite names for the extended result code `extended`: that
    /// code itself where SQLite names it, else its primary code (the low
    /// 8 bits; an extended code newer than the bundled SQLite's header
    /// falls back so); `None` when SQLite names neither.
    pub fn of(extended: i32) -> Option<&'static SqliteCode> {
        let find = |code: i32| RESULT_CODES.iter().find(|c| c.extended == code);
        find(extended).or_else(|| find(extended & 0xff))
    }

    /// Every result code SQLite names, primary and extended (`SQLITE_OK`
    /// ... `SQLITE_WARNING_AUTOINDEX`), sorted by name.
    pub fn all() -> &'static [SqliteCode] {
        RESULT_CODES
    }

    /// SQLite's name for the result code `extended`, as Python's
    /// `sqlite3.Error.sqlite_errorname` gives it: the extended code's name
    /// where SQLite defines one, else the primary code's
    /// (`"SQLITE_CONSTRAINT_UNIQUE"`, `"SQLITE_BUSY"`), else
    /// `"SQLITE_UNKNOWN"`.
    pub fn name_of(extended: i32) -> &'static str {
        SqliteCode::of(extended).map_or("SQLITE_UNKNOWN", SqliteCode::name)
    }

    /// SQLite's name for the code, e.g. `"SQLITE_CONSTRAINT_PRIMARYKEY"`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The primary result code (the low 8 bits), e.g. 19
    /// (`SQLITE_CONSTRAINT`).
    pub fn code(&self) -> i32 {
        self.extended & 0xff
    }

    /// The extended result code, e.g. 1555 (`SQLITE_CONSTRAINT_PRIMARYKEY`);
    /// equal to [`code`](SqliteCode::code) for a primary code.
    pub fn extended_code(&self) -> i32 {
        self.extended
    }

    /// SQLite's English description of the code (`sqlite3_errstr`), e.g.
    /// `"constraint failed"`.
    pub fn description(&self) -> &'static str {
        ffi::code_to_str(self.extended)
    }
}

/// SQLite's name for the code: the error's own message already gives the
/// numbers, so a printed chain ends `...: SQLITE_CONSTRAINT_PRIMARYKEY`.
impl fmt::Display for SqliteCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl std::error::Error for SqliteCode {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_primary_and_extended_codes() {
        for (code, name) in [
            (19, "SQLITE_CONSTRAINT"),
            (2067, "SQLITE_CONSTRAINT_UNIQUE"),
            (5, "SQLITE_BUSY"),
            (517, "SQLITE_BUSY_SNAPSHOT"),
            (0, "SQLITE_OK"),
        ] {
            assert_eq!(SqliteCode::name_of(code), name);
        }
        // An extended code SQLite does not name falls back to its primary code.
        let odd = SqliteCode::of(19 | (99 << 8)).unwrap();
        assert_eq!((odd.name(), odd.extended_code()), ("SQLITE_CONSTRAINT", 19));
        assert_eq!(SqliteCode::name_of(255), "SQLITE_UNKNOWN");
        assert!(SqliteCode::of(255).is_none());
        let pk = SqliteCode::of(1555).unwrap();
        assert_eq!((pk.code(), pk.extended_code()), (19, 1555));
        assert_eq!(pk.description(), "constraint failed");
        assert_eq!(pk.to_string(), "SQLITE_CONSTRAINT_PRIMARYKEY");
    }

    #[test]
    fn result_code_names_are_unique_per_value() {
        for (i, a) in RESULT_CODES.iter().enumerate() {
            for b in &RESULT_CODES[i + 1..] {
                assert!(a.extended != b.extended, "{a} and {b} share a value");
            }
        }
    }
}
