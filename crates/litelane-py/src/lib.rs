//! The `litelane._litelane` extension module: the Rust half of the Python
//! package `litelane` (see `python/litelane/` for the Python half and
//! `docs/python.md` for the user's guide).
//!
//! Everything a Python caller reaches goes through [`engine::Engine`] (one
//! shared litelane `Database` per file in the process) and [`txn::Txn`] (a
//! write transaction held across Python calls). SQLite always runs with the
//! GIL released.

#![deny(unsafe_code)]

mod bulk;
mod convert;
mod engine;
mod errors;
mod exec;
mod functions;
mod txn;
mod workers;

use pyo3::prelude::*;

/// The version of the SQLite library the extension runs on, e.g. `"3.50.2"`.
#[pyfunction]
fn sqlite_version() -> &'static str {
    litelane::sqlite_version()
}

#[pymodule]
fn _litelane(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(engine::open, m)?)?;
    m.add_function(wrap_pyfunction!(sqlite_version, m)?)?;
    m.add_function(wrap_pyfunction!(functions::enable_callback_tracebacks, m)?)?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<engine::RowIter>()?;
    m.add_class::<txn::Txn>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
