//! The pool of read-only reader connections.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};

use rusqlite::Connection;

use crate::error::{Context, Result};
use crate::metrics::Recorder;

pub(crate) struct Pool {
    idle: Mutex<Vec<Connection>>,
    available: Condvar,
    recorder: Arc<Recorder>,
}

/// Puts the connection back however the read ends.
struct Lease<'p> {
    pool: &'p Pool,
    conn: Option<Connection>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
            self.pool.available.notify_one();
        }
    }
}

impl Pool {
    pub fn new(conns: Vec<Connection>, recorder: Arc<Recorder>) -> Pool {
        Pool {
            idle: Mutex::new(conns),
            available: Condvar::new(),
            recorder,
        }
    }

    /// Runs `f` on a reader inside one read transaction: every statement of
    /// the call sees the same snapshot. Waits only if every reader is busy.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(c) = idle.pop() {
                    break c;
                }
                idle = self.available.wait(idle).unwrap_or_else(|e| e.into_inner());
            }
        };
        let lease = Lease {
            pool: self,
            conn: Some(conn),
        };
        let conn = lease.conn.as_ref().expect("leased connection");
        conn.execute_batch("BEGIN")
            .context(|| "BEGIN (read)".to_string())?;
        let out = catch_unwind(AssertUnwindSafe(|| f(conn)));
        let end = conn.execute_batch("COMMIT");
        match out {
            Err(panic) => {
                drop(lease);
                resume_unwind(panic)
            }
            Ok(Err(e)) => {
                self.recorder.note_error(&e);
                Err(e)
            }
            Ok(Ok(v)) => {
                end.context(|| "COMMIT (read)".to_string())?;
                Ok(v)
            }
        }
    }
}
