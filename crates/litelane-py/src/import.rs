//! `Database.import_file`: the `litelane-import` library called in this
//! process, on the engine the `Database` holds, with the GIL released;
//! Ctrl-C stops it as it stops the command.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

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
    match run_interruptible(py, &sh.db, args)? {
        Ok(o) => Ok(o.summary.to_string()),
        Err(e) => Err(import_error(py, &path, e)),
    }
}

/// How often the caller's thread looks for a signal (Ctrl-C) while an
/// import runs: 50 ms.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Runs the import on a thread of its own while the caller's thread, GIL
/// released, looks every [`SIGNAL_CHECK`] for a signal Python must handle.
/// When one raises (`KeyboardInterrupt`), the import is told to stop (as
/// the command's Ctrl-C does: what is committed stays, the batch under way
/// rolls back), it is waited for, and the exception is raised.
fn run_interruptible(
    py: Python<'_>,
    db: &litelane::Database,
    mut args: litelane_import::ImportArgs,
) -> PyResult<Result<litelane_import::Outcome, litelane_import::Error>> {
    let stop = Arc::new(AtomicBool::new(false));
    args.interrupt = Some(Arc::clone(&stop));
    let (done, mut outcome) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ = done.send(litelane_import::run_into(db, args));
        });
        loop {
            // The receiver goes into the GIL-free closure and back.
            let got;
            (outcome, got) = py.detach(move || {
                let got = outcome.recv_timeout(SIGNAL_CHECK);
                (outcome, got)
            });
            match got {
                Ok(o) => return Ok(o),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        stop.store(true, Ordering::SeqCst);
                        py.detach(move || drop(outcome.recv()));
                        return Err(signal);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(exc(py, "OperationalError", "the import thread panicked"))
                }
            }
        }
    })
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
