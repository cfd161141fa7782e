//! `Database.import_file`: the `litelane-import` library called in this
//! process, on the engine the `Database` holds, with the GIL released.

use std::sync::Arc;

use clap::Parser;
use pyo3::prelude::*;

use crate::engine::Shared;
use crate::errors::{engine, exc};

/// `litelane import`'s flags, parsed the way the command parses them, so
/// that `import_file`'s keyword options mean what the flags mean.
#[derive(Parser)]
#[command(name = "import_file", no_binary_name = true)]
struct Flags {
    #[command(flatten)]
    args: litelane_import::ImportArgs,
}

/// Imports `path` into `table` of the database `sh` holds open; `flags`
/// are `litelane import` flags (`--delimiter`, `;`, ...). Returns the
/// `--json` summary as JSON text. The GIL is released while the import
/// runs.
pub fn import_file(
    py: Python<'_>,
    sh: Arc<Shared>,
    path: String,
    table: String,
    flags: Vec<String>,
) -> PyResult<String> {
    let db_path = sh
        .db
        .path()
        .ok_or_else(|| {
            exc(
                py,
                "NotSupportedError",
                "import_file needs a database file, not an in-memory database",
            )
        })?
        .to_path_buf();
    let argv = [
        path.clone(),
        "--db".into(),
        db_path.display().to_string(),
        "--table".into(),
        table,
        "--quiet".into(),
    ]
    .into_iter()
    .chain(flags);
    let args = Flags::try_parse_from(argv)
        .map_err(|e| {
            exc(
                py,
                "ProgrammingError",
                format!("import_file: {}", e.render()),
            )
        })?
        .args;
    sh.check_no_open_txn().map_err(|e| engine(py, e))?;
    let outcome = py.detach(|| litelane_import::run_into(&sh.db, args));
    match outcome {
        Ok(o) => Ok(o.summary.to_string()),
        Err(e) => Err(import_error(py, &path, e)),
    }
}

/// An import error as a Python exception: an engine error as the engine's
/// class with `sqlite_errorcode`/`sqlite_errorname`, anything else an
/// `OperationalError`; the message names the file and the whole cause.
fn import_error(py: Python<'_>, path: &str, e: litelane_import::Error) -> PyErr {
    let message = format!("litelane import of {path} failed: {e}");
    match e.engine() {
        Some(inner) => {
            let err = engine(py, inner.clone());
            let value = err.value(py);
            let _ = value.setattr("args", (message,));
            err
        }
        None => exc(py, "OperationalError", message),
    }
}
