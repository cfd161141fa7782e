//! Engine errors as the PEP 249 exception classes of `litelane._errors`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The PEP 249 exception classes of `litelane/_errors.py` (and its two
/// subclasses of `OperationalError`) that the extension raises: a class
/// is named here once, so a misspelt one does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    InterfaceError,
    DatabaseError,
    DataError,
    OperationalError,
    IntegrityError,
    InternalError,
    ProgrammingError,
    NotSupportedError,
    OutcomeUnknown,
    WritesStopped,
}

impl Class {
    const ALL: [Class; 10] = [
        Class::InterfaceError,
        Class::DatabaseError,
        Class::DataError,
        Class::OperationalError,
        Class::IntegrityError,
        Class::InternalError,
        Class::ProgrammingError,
        Class::NotSupportedError,
        Class::OutcomeUnknown,
        Class::WritesStopped,
    ];

    /// Its name in `litelane/_errors.py`.
    pub fn name(self) -> &'static str {
        match self {
            Class::InterfaceError => "InterfaceError",
            Class::DatabaseError => "DatabaseError",
            Class::DataError => "DataError",
            Class::OperationalError => "OperationalError",
            Class::IntegrityError => "IntegrityError",
            Class::InternalError => "InternalError",
            Class::ProgrammingError => "ProgrammingError",
            Class::NotSupportedError => "NotSupportedError",
            Class::OutcomeUnknown => "OutcomeUnknown",
            Class::WritesStopped => "WritesStopped",
        }
    }

    /// The Python class, looked up once (all of them) in `litelane._errors`.
    fn get<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let classes = CLASSES.get_or_try_init(py, || {
            let module = py.import("litelane._errors")?;
            Class::ALL
                .iter()
                .map(|c| module.getattr(c.name()).map(Bound::unbind))
                .collect::<PyResult<Vec<_>>>()
        })?;
        Ok(classes[self as usize].bind(py).clone())
    }
}

// `Class::get` finds a class at its own index: checked when compiling.
const _: () = {
    let mut i = 0;
    while i < Class::ALL.len() {
        assert!(Class::ALL[i] as usize == i);
        i += 1;
    }
};

/// The classes of [`Class::ALL`], in its order.
static CLASSES: PyOnceLock<Vec<Py<PyAny>>> = PyOnceLock::new();

/// An exception of class `class`.
pub fn exc(py: Python<'_>, class: Class, message: impl Into<String>) -> PyErr {
    build(py, class, message.into(), None).unwrap_or_else(|e| e)
}

fn build(
    py: Python<'_>,
    class: Class,
    message: String,
    extended_code: Option<i32>,
) -> PyResult<PyErr> {
    let value = class.get(py)?.call1((message,))?;
    if let Some(extended) = extended_code {
        value.setattr("sqlite_errorcode", extended)?;
        value.setattr("sqlite_errorname", litelane::SqliteCode::name_of(extended))?;
    }
    Ok(PyErr::from_value(value))
}

/// The PEP 249 class for an SQLite primary result code, as `sqlite3` maps them.
fn class_for(code: i32) -> Class {
    match code {
        2 | 12 => Class::InternalError,                  // INTERNAL, NOTFOUND
        1 | 3..=10 | 13..=17 => Class::OperationalError, // ERROR, PERM, ABORT, BUSY, LOCKED, NOMEM, READONLY, INTERRUPT, IOERR, FULL, CANTOPEN, PROTOCOL, EMPTY, SCHEMA
        18 => Class::DataError,                          // TOOBIG
        19 | 20 => Class::IntegrityError,                // CONSTRAINT, MISMATCH
        21 | 25 => Class::InterfaceError,                // MISUSE, RANGE
        _ => Class::DatabaseError,                       // CORRUPT, NOTADB, ...
    }
}

/// Converts an engine error. SQLite errors keep SQLite's own message (the
/// text `sqlite3` shows, which programs sometimes match on) plus, in
/// `sqlite_errorcode` / `sqlite_errorname`, the extended result code.
pub fn engine(py: Python<'_>, e: litelane::Error) -> PyErr {
    let out = match e {
        // As `sqlite3`: out of memory (e.g. a user function that raised
        // MemoryError) is a MemoryError.
        litelane::Error::Sqlite {
            code: litelane::rusqlite::ffi::SQLITE_NOMEM,
            ..
        } => Ok(pyo3::exceptions::PyMemoryError::new_err(())),
        litelane::Error::Sqlite {
            code,
            extended_code,
            message,
            ..
        } => {
            // SQL longer than SQLITE_LIMIT_SQL_LENGTH: sqlite3 checks the
            // length itself and says so in its own words.
            let message = if code == 18 && message == "statement too long" {
                "query string is too large".to_string()
            } else {
                message
            };
            build(py, class_for(code), message, Some(extended_code))
        }
        litelane::Error::OutcomeUnknown { .. } | litelane::Error::WritesStopped { .. } => {
            let (class, code) = commit_state_class(&e).expect("a commit-state error");
            build(py, class, e.to_string(), code)
        }
        litelane::Error::InvalidInput { message } => {
            build(py, Class::ProgrammingError, message, None)
        }
        // SQLite's own code for it, so that callers (the drop-in's read-only
        // fallback at connect) can tell it apart by code, not by text.
        e @ litelane::Error::ReadOnly { .. } => build(
            py,
            Class::OperationalError,
            e.to_string(),
            Some(litelane::rusqlite::ffi::SQLITE_READONLY),
        ),
        other => build(py, Class::OperationalError, other.to_string(), None),
    };
    out.unwrap_or_else(|e| e)
}

/// The class (in `litelane/_errors.py`, both subclasses of
/// `OperationalError`) and extended code of the errors about a commit's
/// state: a failed fsync at COMMIT is neither failed nor committed
/// (`OutcomeUnknown`, with SQLite's codes, 1034 for an fsync); the handle
/// then refuses writes (`WritesStopped`). `None` for other errors.
fn commit_state_class(e: &litelane::Error) -> Option<(Class, Option<i32>)> {
    match e {
        litelane::Error::OutcomeUnknown { extended_code, .. } => {
            Some((Class::OutcomeUnknown, Some(*extended_code)))
        }
        litelane::Error::WritesStopped { .. } => Some((Class::WritesStopped, None)),
        _ => None,
    }
}

/// `map_err` helper for engine results.
pub trait IntoPy<T> {
    /// Converts the engine error, if any, into a Python exception.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for litelane::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| engine(py, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_outcome_gets_its_own_class_with_sqlites_code() {
        let e = litelane::Error::OutcomeUnknown {
            path: "d.db".into(),
            file: "d.db-wal".into(),
            code: 10,
            extended_code: 1034,
            cause: "Input/output error".into(),
            context: "COMMIT".into(),
            os: Some(std::io::Error::from_raw_os_error(5).into()),
        };
        assert_eq!(
            commit_state_class(&e),
            Some((Class::OutcomeUnknown, Some(1034)))
        );
        assert_eq!(litelane::SqliteCode::name_of(1034), "SQLITE_IOERR_FSYNC");
        let stopped = litelane::Error::WritesStopped {
            path: "d.db".into(),
            reason: "an earlier commit's outcome is unknown".into(),
        };
        assert_eq!(
            commit_state_class(&stopped),
            Some((Class::WritesStopped, None))
        );
        let plain = litelane::Error::Sqlite {
            code: 10,
            os: None,
            extended_code: 1034,
            message: "disk I/O error".into(),
            context: String::new(),
        };
        assert_eq!(commit_state_class(&plain), None);
    }
}
