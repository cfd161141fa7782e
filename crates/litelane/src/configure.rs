//! Per-connection configuration kept in force on every SQLite connection a
//! [`Database`](crate::Database) uses: user-defined functions, collations,
//! hooks — anything set on a `rusqlite::Connection` rather than in the file.
//!
//! A [`Database`](crate::Database) runs statements on several connections
//! (the writer and every reader of the pool), so what one `sqlite3` program
//! sets on "its" connection must be set on all of them, and on any opened
//! later. [`Database::configure`](crate::Database::configure) records a
//! [`Setup`] under a key and bumps a generation number; each connection
//! remembers the generation it has applied and catches up when it is next
//! free:
//!
//! * the writer before each job it runs (a write queued after `configure`
//!   returned always runs with it, also in a group begun before),
//! * a reader when it is taken from the pool (before its read begins),
//! * a connection opened later first thing, right after it is opened.
//!
//! Applying never waits for a connection to become free, so `configure` can
//! be called from anywhere, even inside a write closure; a connection busy at
//! that moment gets the setup when its current turn or read ends. The
//! checkpointer's connection is not configured: it runs only checkpoints.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::unpoisoned::lock;

/// Something to run on a connection: install a function, a collation, a
/// hook... It may run many times (once per connection, and again on each
/// connection opened later), from any thread, so it must be idempotent.
pub type Setup = Arc<dyn Fn(&mut Connection) -> rusqlite::Result<()> + Send + Sync>;

struct Entry {
    key: String,
    /// The generation at which this entry was last set.
    generation: u64,
    setup: Setup,
}

/// The recorded setups of one database, in the order they were set.
#[derive(Default)]
pub(crate) struct Registry {
    /// The generation of the newest entry (0: none ever).
    generation: AtomicU64,
    entries: Mutex<Vec<Entry>>,
}

impl Registry {
    /// Records `setup` under `key`, replacing the entry of that key (which
    /// moves to the end: setups run in the order they were last set).
    /// The setup is first tried on a private in-memory connection, so one
    /// that fails (a bad name, too many arguments) is refused before any
    /// connection of the database sees it.
    pub fn set(&self, key: &str, setup: Setup) -> Result<()> {
        let mut scratch = Connection::open_in_memory()
            .map_err(|e| Error::from_sqlite(e, "opening a scratch connection"))?;
        setup(&mut scratch)
            .map_err(|e| Error::from_sqlite(e, format!("configuring connections ({key})")))?;
        drop(scratch);
        let mut entries = lock(&self.entries);
        entries.retain(|e| e.key != key);
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        entries.push(Entry {
            key: key.to_string(),
            generation,
            setup,
        });
        self.generation.store(generation, Ordering::Release);
        Ok(())
    }

    /// True while no setup was ever recorded.
    pub fn is_empty(&self) -> bool {
        self.generation.load(Ordering::Acquire) == 0
    }

    /// The keys recorded, in the order their setups run.
    pub fn keys(&self) -> Vec<String> {
        lock(&self.entries).iter().map(|e| e.key.clone()).collect()
    }

    /// Brings `conn` up to date: runs every setup set after generation
    /// `*seen`, in order, and advances `*seen`. One atomic load when nothing
    /// changed. A setup that fails here (it passed on the scratch
    /// connection, so this is rare) is reported to `failed` and skipped.
    pub fn sync(&self, conn: &mut Connection, seen: &mut u64, failed: &dyn Fn(Error)) {
        if self.generation.load(Ordering::Acquire) == *seen {
            return;
        }
        // Setups run under the lock, so two of them never interleave and a
        // connection never applies an entry older than one it has seen.
        let entries = lock(&self.entries);
        for e in entries.iter().filter(|e| e.generation > *seen) {
            if let Err(err) = (e.setup)(conn) {
                failed(Error::from_sqlite(
                    err,
                    format!("configuring a connection ({})", e.key),
                ));
            }
        }
        // `set` stores the generation under the same lock.
        *seen = self.generation.load(Ordering::Acquire);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rusqlite::functions::FunctionFlags;

    /// A setup that defines `name()` returning `v`.
    pub(crate) fn constant(name: &'static str, v: i64) -> Setup {
        Arc::new(move |c: &mut Connection| {
            c.create_scalar_function(name, 0, FunctionFlags::SQLITE_UTF8, move |_| Ok(v))
        })
    }

    /// The one integer `sql` returns.
    pub(crate) fn call(c: &Connection, sql: &str) -> rusqlite::Result<i64> {
        c.query_row(sql, [], |r| r.get(0))
    }

    #[test]
    fn a_connection_catches_up_with_every_setup_in_order_and_once() {
        let reg = Registry::default();
        let mut c = Connection::open_in_memory().unwrap();
        let mut seen = 0;
        let no_failure = |e: Error| panic!("unexpected failure: {e}");
        reg.set("f", constant("f", 1)).unwrap();
        reg.set("g", constant("g", 2)).unwrap();
        reg.sync(&mut c, &mut seen, &no_failure);
        assert_eq!(call(&c, "SELECT f() + g()").unwrap(), 3);
        // Replacing by key: the connection sees the new one on its next sync.
        reg.set("f", constant("f", 10)).unwrap();
        assert_eq!(call(&c, "SELECT f()").unwrap(), 1, "not before its sync");
        reg.sync(&mut c, &mut seen, &no_failure);
        assert_eq!(call(&c, "SELECT f()").unwrap(), 10);
        assert_eq!(reg.keys(), vec!["g".to_string(), "f".to_string()]);
        // Removing: replace the entry with one that undoes it.
        reg.set(
            "f",
            Arc::new(|c: &mut Connection| c.remove_function("f", 0)),
        )
        .unwrap();
        reg.sync(&mut c, &mut seen, &no_failure);
        let err = call(&c, "SELECT f()").unwrap_err().to_string();
        assert!(err.contains("no such function: f"), "{err}");
        assert_eq!(call(&c, "SELECT g()").unwrap(), 2);
    }

    #[test]
    fn a_setup_that_fails_is_refused_and_never_recorded() {
        let reg = Registry::default();
        // SQLite refuses a negative argument count other than -1.
        let bad: Setup = Arc::new(|c: &mut Connection| {
            c.create_scalar_function("bad", -5, FunctionFlags::SQLITE_UTF8, |_| Ok(1))
        });
        let err = reg.set("bad", bad).unwrap_err().to_string();
        assert!(err.contains("configuring connections (bad)"), "{err}");
        assert!(reg.keys().is_empty());
        assert_eq!(reg.generation.load(Ordering::Relaxed), 0);
    }
}
