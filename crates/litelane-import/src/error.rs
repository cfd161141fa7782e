//! The one error type of the import.
//!
//! Every error says what went wrong and where (file, line, table). The
//! cause is kept, not flattened into the message: [`std::error::Error::source`]
//! leads to the engine's error (which carries SQLite's result codes) or to
//! the operating system's [`std::io::Error`], and [`Error::kind`],
//! [`Error::file`], [`Error::line`] and [`Error::sqlite_code`] let code
//! match on it without parsing text.

use std::fmt;

/// What kind of thing went wrong, for matching (see [`Error::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The database (SQLite, or the engine) failed; the source is a
    /// [`litelane::Error`].
    Engine,
    /// Reading or writing a file failed; the source is a
    /// [`std::io::Error`].
    Io,
    /// The input, the options or the target table are not usable.
    Input,
}

/// Everything an import can fail with.
///
/// `Display` gives the whole message on one line, causes included (the
/// form `litelane import` prints); `source()` gives the cause as a value.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An error from the engine (carries SQLite's codes and context).
    Engine(litelane::Error),
    /// Reading or writing a file failed.
    Io {
        /// What was being done, with the path (and line, when reading
        /// records).
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The input, the options or the table are not usable; the message
    /// says what and where.
    Input(String),
    /// A record of the input is not usable.
    Record {
        /// The input's name as the messages give it (its path, or
        /// `<stdin>`).
        file: String,
        /// The line (1-based) where the record starts.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// An error with what it ended and what became of the work: one file
    /// of several (which, and the files before and after it), or the rows
    /// of an import (rolled back, or committed up to a line). `message`
    /// holds the cause's text too; `source` is the cause itself.
    Context {
        /// The whole message, the cause's text included.
        message: String,
        /// The error that ended the work.
        source: Box<Error>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Engine(e) => write!(f, "{e}"),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Input(m) => f.write_str(m),
            Error::Record {
                file,
                line,
                message,
            } => write!(f, "{file}:{line}: {message}"),
            Error::Context { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Engine(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            Error::Context { source, .. } => Some(source.as_ref()),
            Error::Input(_) | Error::Record { .. } => None,
        }
    }
}

impl From<litelane::Error> for Error {
    fn from(e: litelane::Error) -> Self {
        Error::Engine(e)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Engine(e.into())
    }
}

impl Error {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// A record of `file`, at `line`, that is not usable.
    pub fn at(file: impl Into<String>, line: u64, message: impl Into<String>) -> Self {
        Error::Record {
            file: file.into(),
            line,
            message: message.into(),
        }
    }

    /// What kind of error this is (for one file of several: its cause's).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Engine(_) => ErrorKind::Engine,
            Error::Io { .. } => ErrorKind::Io,
            Error::Input(_) | Error::Record { .. } => ErrorKind::Input,
            Error::Context { source, .. } => source.kind(),
        }
    }

    /// The input file the error is in, when known (a record's).
    pub fn file(&self) -> Option<&str> {
        match self {
            Error::Record { file, .. } => Some(file),
            Error::Context { source, .. } => source.file(),
            _ => None,
        }
    }

    /// The line (1-based) of the input the error is at, when known.
    pub fn line(&self) -> Option<u64> {
        match self {
            Error::Record { line, .. } => Some(*line),
            Error::Context { source, .. } => source.line(),
            _ => None,
        }
    }

    /// SQLite's primary result code, when the database failed.
    pub fn sqlite_code(&self) -> Option<i32> {
        self.engine().and_then(litelane::Error::sqlite_code)
    }

    /// SQLite's extended result code, when the database failed.
    pub fn sqlite_extended_code(&self) -> Option<i32> {
        self.engine()
            .and_then(litelane::Error::sqlite_extended_code)
    }

    /// The engine's error, when the database failed.
    pub fn engine(&self) -> Option<&litelane::Error> {
        match self {
            Error::Engine(e) => Some(e),
            Error::Context { source, .. } => source.engine(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_cause_is_kept_and_matched_by_kind() {
        let os = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = Error::io("reading x.csv", os);
        assert_eq!(e.kind(), ErrorKind::Io);
        let cause = e.source().expect("an I/O error has its OS error as source");
        let io = cause.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);

        let sqlite = rusqlite::Connection::open_in_memory()
            .unwrap()
            .execute("INSERT INTO missing VALUES (1)", [])
            .unwrap_err();
        let e = Error::Context {
            message: "file 2 of 3 (b.csv): ...".into(),
            source: Box::new(Error::from(sqlite)),
        };
        assert_eq!(e.kind(), ErrorKind::Engine);
        assert_eq!(e.sqlite_code(), Some(1));
        let inner = e.source().unwrap().downcast_ref::<Error>().unwrap();
        assert!(inner
            .source()
            .unwrap()
            .downcast_ref::<litelane::Error>()
            .is_some());
    }

    #[test]
    fn a_record_error_names_its_file_and_line() {
        let e = Error::at("in.csv", 7, "a quoted field is never closed");
        assert_eq!(e.to_string(), "in.csv:7: a quoted field is never closed");
        assert_eq!((e.file(), e.line()), (Some("in.csv"), Some(7)));
        assert_eq!(e.kind(), ErrorKind::Input);
        assert!(e.source().is_none());
    }
}
