//! The `litelane._litelane` extension module: the Rust half of the Python
//! package `litelane` (see `python/litelane/` for the Python half and
//! `docs/python.md` for the user's guide).
//!
//! Everything a Python caller reaches goes through `engine::Engine` (one
//! shared litelane `Database` per file in the process) and `txn::Txn` (a
//! write transaction held across Python calls). SQLite always runs with the
//! GIL released.

#![deny(unsafe_code)]

mod bulk;
mod codes;
mod convert;
mod dbapi;
mod engine;
mod errors;
mod exec;
mod functions;
mod import;
mod metrics;
mod options;
mod registry;
mod results;
mod rows;
mod sync;
mod txn;
mod workers;

use pyo3::prelude::*;

/// The version of the SQLite library the extension runs on, e.g. `"3.50.2"`.
#[pyfunction]
fn sqlite_version() -> &'static str {
    litelane::sqlite_version()
}

/// Every `SQLITE_*` constant the standard library's `sqlite3` exports, by
/// name, with the bundled SQLite's values.
#[pyfunction]
fn constants() -> Vec<(&'static str, i32)> {
    litelane::SqliteCode::all()
        .iter()
        .map(|c| (c.name(), c.extended_code()))
        .chain(codes::OTHER.iter().copied())
        .collect()
}

/// SQLite's name for a result code (`2067` → `"SQLITE_CONSTRAINT_UNIQUE"`).
#[pyfunction]
fn error_name(code: i32) -> &'static str {
    litelane::SqliteCode::name_of(code)
}

/// `sqlite3_complete`: true when `sql` ends with a complete statement.
#[pyfunction]
fn complete_statement(sql: &str) -> bool {
    litelane::complete_statement(sql)
}

/// A script's statements, split where SQLite ends them (see
/// `litelane::split_statements`).
#[pyfunction]
fn split_script(script: &str) -> Vec<&str> {
    litelane::split_statements(script)
}

/// Runs the `litelane` command with `args` (the program's name first), the
/// GIL released, and returns its exit status.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<String>) -> i32 {
    py.detach(|| litelane_cli::run(args))
}

/// Removes the files of the process's shared in-memory databases still open
/// (`litelane::remove_shared_memory_files`): called from `atexit`.
#[pyfunction]
fn remove_shared_memory_files() {
    litelane::remove_shared_memory_files();
}

#[pymodule]
fn _litelane(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(engine::open, m)?)?;
    m.add_function(wrap_pyfunction!(registry::after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(registry::py_checkpoint_for_immutable, m)?)?;
    m.add_function(wrap_pyfunction!(remove_shared_memory_files, m)?)?;
    m.add_function(wrap_pyfunction!(sqlite_version, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(constants, m)?)?;
    m.add_function(wrap_pyfunction!(error_name, m)?)?;
    m.add_function(wrap_pyfunction!(complete_statement, m)?)?;
    m.add_function(wrap_pyfunction!(split_script, m)?)?;
    m.add_function(wrap_pyfunction!(convert::set_base_types_adapted, m)?)?;
    m.add_function(wrap_pyfunction!(functions::enable_callback_tracebacks, m)?)?;
    m.add_function(wrap_pyfunction!(dbapi::register_dbapi, m)?)?;
    m.add_class::<dbapi::ConnectionBase>()?;
    m.add_class::<dbapi::CursorBase>()?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<rows::RowIter>()?;
    m.add_class::<txn::Txn>()?;
    m.add_class::<results::PyOutcome>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
