//! Engine errors as the PEP 249 exception classes of `litelane._errors`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An exception of class `class` (a name defined in `litelane/_errors.py`).
pub fn exc(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    build(py, class, message.into(), None).unwrap_or_else(|e| e)
}

fn build(
    py: Python<'_>,
    class: &str,
    message: String,
    codes: Option<(i32, i32)>,
) -> PyResult<PyErr> {
    let module = ERRORS.get_or_try_init(py, || py.import("litelane._errors").map(Bound::unbind))?;
    let value = module.bind(py).getattr(class)?.call1((message,))?;
    if let Some((code, extended)) = codes {
        value.setattr("sqlite_errorcode", extended)?;
        value.setattr("sqlite_errorname", error_name(extended, code))?;
    }
    Ok(PyErr::from_value(value))
}

/// The PEP 249 class for an SQLite primary result code, as `sqlite3` maps them.
fn class_for(code: i32) -> &'static str {
    match code {
        2 | 12 => "InternalError",                  // INTERNAL, NOTFOUND
        1 | 3..=10 | 13..=17 => "OperationalError", // ERROR, PERM, ABORT, BUSY, LOCKED, NOMEM, READONLY, INTERRUPT, IOERR, FULL, CANTOPEN, PROTOCOL, EMPTY, SCHEMA
        18 => "DataError",                          // TOOBIG
        19 | 20 => "IntegrityError",                // CONSTRAINT, MISMATCH
        21 | 25 => "InterfaceError",                // MISUSE, RANGE
        _ => "DatabaseError",                       // CORRUPT, NOTADB, ...
    }
}

/// SQLite's name for a result code (`SQLITE_CONSTRAINT_UNIQUE`...), as
/// `sqlite3.Error.sqlite_errorname` gives it.
fn error_name(extended: i32, code: i32) -> String {
    let ext = match extended {
        275 => Some("SQLITE_CONSTRAINT_CHECK"),
        531 => Some("SQLITE_CONSTRAINT_COMMITHOOK"),
        787 => Some("SQLITE_CONSTRAINT_FOREIGNKEY"),
        1043 => Some("SQLITE_CONSTRAINT_FUNCTION"),
        1299 => Some("SQLITE_CONSTRAINT_NOTNULL"),
        1555 => Some("SQLITE_CONSTRAINT_PRIMARYKEY"),
        1811 => Some("SQLITE_CONSTRAINT_TRIGGER"),
        2067 => Some("SQLITE_CONSTRAINT_UNIQUE"),
        2323 => Some("SQLITE_CONSTRAINT_VTAB"),
        2579 => Some("SQLITE_CONSTRAINT_ROWID"),
        3091 => Some("SQLITE_CONSTRAINT_DATATYPE"),
        517 => Some("SQLITE_BUSY_SNAPSHOT"),
        261 => Some("SQLITE_BUSY_RECOVERY"),
        1032 => Some("SQLITE_READONLY_DBMOVED"),
        _ => None,
    };
    if let Some(name) = ext {
        return name.to_string();
    }
    let primary = match code {
        1 => "SQLITE_ERROR",
        2 => "SQLITE_INTERNAL",
        3 => "SQLITE_PERM",
        4 => "SQLITE_ABORT",
        5 => "SQLITE_BUSY",
        6 => "SQLITE_LOCKED",
        7 => "SQLITE_NOMEM",
        8 => "SQLITE_READONLY",
        9 => "SQLITE_INTERRUPT",
        10 => "SQLITE_IOERR",
        11 => "SQLITE_CORRUPT",
        12 => "SQLITE_NOTFOUND",
        13 => "SQLITE_FULL",
        14 => "SQLITE_CANTOPEN",
        15 => "SQLITE_PROTOCOL",
        16 => "SQLITE_EMPTY",
        17 => "SQLITE_SCHEMA",
        18 => "SQLITE_TOOBIG",
        19 => "SQLITE_CONSTRAINT",
        20 => "SQLITE_MISMATCH",
        21 => "SQLITE_MISUSE",
        22 => "SQLITE_NOLFS",
        23 => "SQLITE_AUTH",
        24 => "SQLITE_FORMAT",
        25 => "SQLITE_RANGE",
        26 => "SQLITE_NOTADB",
        _ => "SQLITE_UNKNOWN",
    };
    primary.to_string()
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
            context: _,
        } => build(py, class_for(code), message, Some((code, extended_code))),
        litelane::Error::InvalidInput { message } => build(py, "ProgrammingError", message, None),
        other => build(py, "OperationalError", other.to_string(), None),
    };
    out.unwrap_or_else(|e| e)
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
