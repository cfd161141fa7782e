//! The one error type of the engine.

use std::fmt;

use crate::SqliteCode;

/// Everything that can go wrong in litelane.
///
/// Errors that come from SQLite keep SQLite's primary and extended result codes
/// (see <https://sqlite.org/rescode.html>) together with what litelane was doing
/// at the time (`context`: which statement, which table, which file).
///
/// `Error` is `Clone` because one failed group commit is reported to every
/// caller whose work was in the group.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// SQLite returned an error. Its [`source`](std::error::Error::source)
    /// is the operating system's error when a failed system call caused it
    /// (`os`), else the [`SqliteCode`] of `extended_code` (SQLite's name for
    /// it, e.g. `SQLITE_CONSTRAINT_PRIMARYKEY`; the primary code's where
    /// SQLite names no such extended code).
    Sqlite {
        /// Primary result code (`SQLITE_BUSY` = 5, `SQLITE_CONSTRAINT` = 19, ...).
        code: i32,
        /// Extended result code (`SQLITE_CONSTRAINT_PRIMARYKEY` = 1555, ...).
        extended_code: i32,
        /// SQLite's own message.
        message: String,
        /// What litelane was doing: the statement, table or file involved.
        context: String,
        /// The failed system call behind the error, when SQLite's Unix VFS
        /// reported one (opening, syncing, truncating a file...: the call,
        /// the file and the `errno`, from SQLite's error log; read and write
        /// errors are not logged by SQLite and have none).
        os: Option<OsError>,
    },
    /// The caller passed something litelane cannot use (an unknown column,
    /// a row with the wrong number of values, an empty column list...).
    InvalidInput {
        /// What was wrong, and where.
        message: String,
    },
    /// The database was opened without a writer (the file is read-only), or
    /// the writer is gone.
    ReadOnly {
        /// The database path.
        path: String,
    },
    /// An operating-system error outside SQLite (creating a directory, a
    /// thread...).
    Io {
        /// What litelane was doing.
        context: String,
        /// The OS error's message.
        message: String,
        /// The operating system's error itself, when there was one: the
        /// error's [`source`](std::error::Error::source), with its `errno`
        /// (`raw_os_error`) and kind.
        os: Option<OsError>,
    },
    /// The write's changes were undone, not committed, because the
    /// transaction it shared with other writes (group commit) ended before
    /// the commit: a statement of another write in the group (`by`), or
    /// SQLite itself after an I/O error, a full disk or an interrupt, rolled
    /// the whole transaction back. When `retryable` is true the write did
    /// nothing wrong and can simply run again; it is false for the write
    /// whose own statement ended the transaction.
    ///
    /// See `docs/concurrency.md`, "What each caller is told".
    RolledBack {
        /// The label of the write during which the transaction ended (`""`
        /// for an unlabeled write).
        by: String,
        /// What ended the transaction.
        cause: Box<Error>,
        /// True when this write was not the one that ended the transaction.
        retryable: bool,
    },
    /// A commit whose fsync failed, or that another process was making for
    /// this write ([`Database::execute`](crate::Database::execute)) when it
    /// died (then `file` is empty): it may or may not be durable. The
    /// kernel may have dropped the pages it could not write and cleared the
    /// error (PostgreSQL's 2018 "fsyncgate"), while the commit's frames may
    /// also already be on the disk: after a crash the change may be there or
    /// not. It is not a failure (retrying blindly could apply the change
    /// twice) and not a success (the change may be lost in a power cut).
    ///
    /// What to do: reopen the database (after a failed fsync this handle
    /// takes no more writes, see [`Error::WritesStopped`]), check whether the change is there
    /// before retrying it, and check the disk (kernel log, SMART). Told to
    /// every caller whose work was in the commit (each member of a group).
    /// See `docs/durability.md`, "What a caller should do on OutcomeUnknown".
    OutcomeUnknown {
        /// The database file.
        path: String,
        /// The file whose fsync failed (the WAL, `<path>-wal`, in WAL mode);
        /// empty when no fsync failed: another process that was committing
        /// the write ([`Database::execute`](crate::Database::execute)) died
        /// in its commit.
        file: String,
        /// SQLite's primary result code (`SQLITE_IOERR` = 10).
        code: i32,
        /// SQLite's extended result code (`SQLITE_IOERR_FSYNC` = 1034 for a
        /// failed fsync).
        extended_code: i32,
        /// What failed: the operating system's or SQLite's message.
        cause: String,
        /// What litelane was doing (which commit).
        context: String,
        /// The failed fsync's operating-system error, when litelane ran
        /// the fsync itself: the error's [`source`](std::error::Error::source)
        /// (without one, the source is the [`SqliteCode`] of
        /// `extended_code`).
        os: Option<OsError>,
    },
    /// This database handle takes no more writes: an earlier commit's
    /// outcome was unknown ([`Error::OutcomeUnknown`]), here or, with the
    /// cross-process queue, in another process using the same file. Nothing
    /// of this write was done. Reads go on. Reopen the database to write
    /// again (see `reason` for what else to do).
    WritesStopped {
        /// The database file.
        path: String,
        /// Why, and what to do.
        reason: String,
    },
    /// An error raised by user code inside a `write` or `read` closure and
    /// carried through litelane unchanged.
    User {
        /// The message of the user's error.
        message: String,
    },
}

/// `Result` with litelane's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// SQLite's primary result code for "database is locked".
pub const SQLITE_BUSY: i32 = rusqlite::ffi::SQLITE_BUSY;

impl Error {
    /// Builds an [`Error::User`] from anything printable: the way for a
    /// closure to fail a transaction with its own reason.
    pub fn user(message: impl fmt::Display) -> Self {
        Error::User {
            message: message.to_string(),
        }
    }

    /// An [`Error::Io`] for the operating system's error `e` while doing
    /// `context`; `e` is kept as the error's source.
    pub(crate) fn os(context: impl Into<String>, e: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            message: e.to_string(),
            os: Some(e.into()),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidInput {
            message: message.into(),
        }
    }

    /// Converts a rusqlite error, recording what litelane was doing.
    pub fn from_sqlite(err: rusqlite::Error, context: impl Into<String>) -> Self {
        let context = context.into();
        match err {
            rusqlite::Error::SqliteFailure(e, msg) => {
                // The failed system call behind it, if SQLite logged one:
                // named in the context, its errno kept as the source.
                let logged = crate::ffi::take_logged_os_error(e.extended_code);
                let context = match &logged {
                    Some(l) if context.is_empty() => format!("{}({})", l.call, l.path),
                    Some(l) => format!("{context}: {}({})", l.call, l.path),
                    None => context,
                };
                Error::Sqlite {
                    code: e.extended_code & 0xff,
                    extended_code: e.extended_code,
                    message: msg.unwrap_or_else(|| e.to_string()),
                    context,
                    os: logged.map(|l| std::io::Error::from_raw_os_error(l.errno).into()),
                }
            }
            rusqlite::Error::SqlInputError {
                error, msg, sql, ..
            } => Error::Sqlite {
                code: error.extended_code & 0xff,
                extended_code: error.extended_code,
                message: msg,
                context: if context.is_empty() { sql } else { context },
                os: None,
            },
            other => match other.sqlite_extended_error_code() {
                Some(ext) => Error::Sqlite {
                    code: ext & 0xff,
                    extended_code: ext,
                    message: other.to_string(),
                    context,
                    os: None,
                },
                None => Error::InvalidInput {
                    message: if context.is_empty() {
                        other.to_string()
                    } else {
                        format!("{context}: {other}")
                    },
                },
            },
        }
    }

    /// The SQLite primary result code, if this error came from SQLite
    /// (including [`Error::OutcomeUnknown`], which keeps the code of the
    /// failed fsync).
    pub fn sqlite_code(&self) -> Option<i32> {
        match self {
            Error::Sqlite { code, .. } | Error::OutcomeUnknown { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The SQLite extended result code, if this error came from SQLite
    /// (1034, `SQLITE_IOERR_FSYNC`, for an [`Error::OutcomeUnknown`] of a
    /// failed fsync).
    pub fn sqlite_extended_code(&self) -> Option<i32> {
        match self {
            Error::Sqlite { extended_code, .. } | Error::OutcomeUnknown { extended_code, .. } => {
                Some(*extended_code)
            }
            _ => None,
        }
    }

    /// True for [`Error::OutcomeUnknown`]: the commit may or may not be
    /// durable; reopen, then check whether the change is there before
    /// retrying.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }

    /// True when an SQLite error of a `COMMIT` means its outcome is unknown:
    /// a failed fsync (`SQLITE_IOERR_FSYNC`, `SQLITE_IOERR_DIR_FSYNC`). The
    /// transaction's frames or pages may be on the disk already.
    pub(crate) fn is_sync_failure(&self) -> bool {
        matches!(
            self.sqlite_extended_code(),
            Some(rusqlite::ffi::SQLITE_IOERR_FSYNC | rusqlite::ffi::SQLITE_IOERR_DIR_FSYNC)
        )
    }

    /// True for `SQLITE_BUSY` ("database is locked").
    pub fn is_busy(&self) -> bool {
        self.sqlite_code() == Some(SQLITE_BUSY)
    }

    /// True when the write failed through no fault of its own and can run
    /// again as it is: [`Error::RolledBack`] with `retryable`, or
    /// `SQLITE_BUSY` from another process.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::RolledBack { retryable, .. } => *retryable,
            _ => self.is_busy(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sqlite {
                code,
                extended_code,
                message,
                context,
                os,
            } => {
                write!(
                    f,
                    "{message} (SQLite code {code}, extended {extended_code})"
                )?;
                write_while(f, context)?;
                if let Some(os) = os {
                    write!(f, " [{}]", os.io())?;
                }
                Ok(())
            }
            Error::InvalidInput { message } => write!(f, "invalid input: {message}"),
            Error::ReadOnly { path } => write!(f, "database {path} is read-only: no writes"),
            Error::Io {
                context, message, ..
            } => write!(f, "{context}: {message}"),
            Error::RolledBack {
                by,
                cause,
                retryable,
            } => write_rolled_back(f, by, cause, *retryable),
            Error::OutcomeUnknown {
                path,
                file,
                code,
                extended_code,
                cause,
                context,
                ..
            } => {
                write_commit_in_doubt(f, file, *code, *extended_code, cause)?;
                write_while(f, context)?;
                write!(
                    f,
                    ". Do not retry blindly: reopen the database {path}, check whether the \
                     change is there, and retry only if it is not; check the disk"
                )
            }
            Error::WritesStopped { path, reason } => write!(
                f,
                "database {path}: this handle takes no more writes, nothing of this write \
                 was done: {reason}. Reads go on; reopen the database to write again"
            ),
            Error::User { message } => f.write_str(message),
        }
    }
}

/// ` while {context}`, when there is a context.
fn write_while(f: &mut fmt::Formatter<'_>, context: &str) -> fmt::Result {
    if context.is_empty() {
        return Ok(());
    }
    write!(f, " while {context}")
}

/// [`Error::RolledBack`]: whose write, what ended the transaction, and
/// whether a retry is safe.
fn write_rolled_back(
    f: &mut fmt::Formatter<'_>,
    by: &str,
    cause: &Error,
    retryable: bool,
) -> fmt::Result {
    let whose = if by.is_empty() {
        "an unlabeled write".to_string()
    } else {
        format!("write {by:?}")
    };
    if retryable {
        write!(
            f,
            "rolled back, not committed: the shared transaction ended during {whose} ({cause}); safe to retry"
        )
    } else {
        write!(
            f,
            "rolled back, not committed: a statement of this write ({whose}) ended the transaction ({cause})"
        )
    }
}

/// [`Error::OutcomeUnknown`]'s first words: what is in doubt, the commit
/// itself or its durability (a failed fsync of `file`).
fn write_commit_in_doubt(
    f: &mut fmt::Formatter<'_>,
    file: &str,
    code: i32,
    extended_code: i32,
    cause: &str,
) -> fmt::Result {
    if file.is_empty() {
        write!(
            f,
            "outcome unknown: the commit may or may not have happened: {cause}"
        )
    } else {
        write!(
            f,
            "outcome unknown: the commit may or may not be durable: the fsync of \
             {file} failed ({cause}; SQLite code {code}, extended {extended_code})"
        )
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::RolledBack { cause, .. } => Some(cause.as_ref()),
            Error::Io { os: Some(os), .. }
            | Error::OutcomeUnknown { os: Some(os), .. }
            | Error::Sqlite { os: Some(os), .. } => Some(os.io()),
            Error::Sqlite { extended_code, .. } | Error::OutcomeUnknown { extended_code, .. } => {
                SqliteCode::of(*extended_code).map(|c| c as &(dyn std::error::Error + 'static))
            }
            _ => None,
        }
    }
}

/// An operating-system error kept as the cause of an [`Error`]: shared,
/// because one error is given to every member of a group commit. Two are
/// equal when their kind and `errno` are.
#[derive(Debug, Clone)]
pub struct OsError(std::sync::Arc<std::io::Error>);

impl OsError {
    /// The error as the operating system reported it.
    pub fn io(&self) -> &std::io::Error {
        &self.0
    }
}

impl From<std::io::Error> for OsError {
    fn from(e: std::io::Error) -> Self {
        OsError(std::sync::Arc::new(e))
    }
}

impl PartialEq for OsError {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind() && self.0.raw_os_error() == other.0.raw_os_error()
    }
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Error::from_sqlite(err, String::new())
    }
}

/// Adds context to a rusqlite result.
pub(crate) trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for rusqlite::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::from_sqlite(e, what()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_errors_keep_primary_and_extended_codes_and_context() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY)")
            .unwrap();
        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let err = conn.execute("INSERT INTO t VALUES (1)", []).unwrap_err();
        let err = Error::from_sqlite(err, "inserting into t");
        assert_eq!(err.sqlite_code(), Some(rusqlite::ffi::SQLITE_CONSTRAINT));
        assert_eq!(err.sqlite_extended_code(), Some(1555));
        let text = err.to_string();
        assert!(text.contains("inserting into t"), "{text}");
        assert!(text.contains("UNIQUE"), "{text}");
    }

    #[test]
    fn an_unknown_outcome_keeps_the_codes_and_says_what_to_do() {
        let e = Error::OutcomeUnknown {
            path: "/data/d.db".into(),
            file: "/data/d.db-wal".into(),
            code: 10,
            extended_code: rusqlite::ffi::SQLITE_IOERR_FSYNC,
            cause: "Input/output error (os error 5)".into(),
            context: "COMMIT of \"a\"".into(),
            os: Some(std::io::Error::from_raw_os_error(5).into()),
        };
        assert!(e.is_outcome_unknown());
        let os = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the failed fsync's OS error is the source");
        assert_eq!(os.raw_os_error(), Some(5));
        assert!(!e.is_retryable(), "never retried blindly");
        assert_eq!(e.sqlite_code(), Some(10));
        assert_eq!(e.sqlite_extended_code(), Some(1034));
        let text = e.to_string();
        for words in [
            "may or may not be durable",
            "/data/d.db-wal",
            "os error 5",
            "reopen the database /data/d.db",
            "check whether the change is there",
            "check the disk",
        ] {
            assert!(text.contains(words), "{text:?} lacks {words:?}");
        }
        let plain = Error::from(
            rusqlite::Connection::open_in_memory()
                .unwrap()
                .prepare("SELEC 1")
                .unwrap_err(),
        );
        assert!(!plain.is_outcome_unknown());
        let stopped = Error::WritesStopped {
            path: "/data/d.db".into(),
            reason: "an earlier commit's outcome is unknown".into(),
        };
        assert!(!stopped.is_outcome_unknown());
        assert_eq!(stopped.sqlite_code(), None);
        let text = stopped.to_string();
        assert!(
            text.contains("/data/d.db") && text.contains("reopen"),
            "{text}"
        );
    }

    #[test]
    fn syntax_errors_name_the_statement() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let err = Error::from(conn.prepare("SELEC 1").unwrap_err());
        assert_eq!(err.sqlite_code(), Some(1));
        assert!(err.to_string().contains("SELEC"), "{err}");
    }
}
