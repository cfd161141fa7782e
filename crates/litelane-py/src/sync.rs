//! Small helpers every room uses: a lock that ignores poisoning, and the
//! GIL-released wait for another process's turn that Python signals end.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::IntoPy;

/// Locks `m`, taking the value of a lock poisoned by a panic as it is (the
/// one way this crate locks a mutex).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `keep_waiting` for the engine's cross-process waits
/// (`litelane::with_process_wait`) that runs Python's signal handlers
/// (taking the GIL for it): a handler that raises (Ctrl-C's
/// `KeyboardInterrupt`) ends the wait, its exception kept in `raised`.
fn signal_check(raised: Arc<Mutex<Option<PyErr>>>) -> litelane::KeepWaiting {
    Arc::new(move || {
        Python::attach(|py| match py.check_signals() {
            Ok(()) => true,
            Err(e) => {
                *lock(&raised) = Some(e);
                false
            }
        })
    })
}

/// Runs `f` with the GIL released, its waits for another process's turn
/// bounded by `timeout` (`None`: the engine's `busy_timeout`) and ended by
/// a Python signal handler that raises, whose exception is then returned
/// instead of the engine's error.
pub(crate) fn detach_waiting<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    f: impl FnOnce() -> litelane::Result<T> + Send,
) -> PyResult<T> {
    let raised = Arc::new(Mutex::new(None));
    let check = signal_check(Arc::clone(&raised));
    let out = py.detach(|| litelane::with_process_wait(timeout, Some(check), f));
    if let Some(e) = lock(&raised).take() {
        return Err(e);
    }
    out.py_err(py)
}
