//! Readers see the writer's schema changes on their next read.
//!
//! A SQLite connection checks its parsed schema against the file's schema
//! cookie only when a statement starts a transaction on a table it found.
//! `PRAGMA index_list(t)` and its kin look the table up when the statement
//! is prepared, in the schema the connection parsed last: a reader whose
//! last read came before the writer created `t` (or an index on it) finds
//! no such table, compiles a statement that reads nothing, checks nothing
//! and returns no rows — and its statement cache keeps that statement. One
//! `sqlite3` connection never sees this for its own changes; a
//! [`Database`](crate::Database) runs one program's statements on several
//! connections, so it must not either.
//!
//! The writer reads `PRAGMA schema_version` inside each transaction it
//! commits and after each turn outside a transaction; when it moved, the
//! epoch moves. A reader taken from the pool at an older epoch first drops
//! its cached statements and has SQLite check its schema (re-parsing it if
//! the cookie moved). Changes made by another process are seen as SQLite
//! sees them between two connections.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use rusqlite::Connection;

/// The schema generation of one [`Database`](crate::Database)'s writer.
#[derive(Default)]
pub(crate) struct SchemaEpoch {
    /// Moves each time the writer is seen to have changed the schema.
    epoch: AtomicU64,
    /// The writer's `schema_version` when last read (0: not read yet).
    version: AtomicI64,
}

/// The writer's `schema_version`, read on its connection (inside its write
/// transaction when one is open). `None` if it could not be read.
pub(crate) fn schema_version(conn: &Connection) -> Option<i64> {
    conn.prepare_cached("PRAGMA schema_version")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .ok()
}

impl SchemaEpoch {
    /// The writer's schema is at `version` (`None`: unknown, so assumed to
    /// have moved): moves the epoch if it changed.
    pub fn writer_at(&self, version: Option<i64>) {
        let moved = match version {
            Some(v) => self.version.swap(v, Ordering::AcqRel) != v,
            None => true,
        };
        if moved {
            self.epoch.fetch_add(1, Ordering::Release);
        }
    }

    /// Brings a reader's connection (outside any read) up to the writer's
    /// schema, if the epoch moved since `*seen`: one atomic load otherwise.
    pub fn catch_up(&self, conn: &Connection, seen: &mut u64) -> rusqlite::Result<()> {
        let now = self.epoch.load(Ordering::Acquire);
        if now == *seen {
            return Ok(());
        }
        conn.flush_prepared_statement_cache();
        // A statement on a table makes SQLite compare the cookie and parse
        // the schema again if it moved.
        conn.prepare("SELECT 1 FROM main.sqlite_schema LIMIT 0")?
            .query([])?
            .next()?;
        *seen = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_list(c: &Connection, table: &str) -> Vec<String> {
        c.prepare_cached(&format!("PRAGMA index_list(\"{table}\")"))
            .unwrap()
            .query_map([], |r| r.get(1))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn a_reader_sees_an_index_the_writer_made_after_its_last_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        let epoch = SchemaEpoch::default();
        epoch.writer_at(schema_version(&writer));
        let mut seen = 0;
        epoch.catch_up(&reader, &mut seen).unwrap();
        assert!(index_list(&reader, "u").is_empty());

        writer
            .execute_batch("CREATE TABLE u(x); CREATE INDEX ui ON u(x)")
            .unwrap();
        // What SQLite does without the epoch: the cached statement answers.
        assert!(
            index_list(&reader, "u").is_empty(),
            "SQLite's behaviour changed"
        );
        epoch.writer_at(schema_version(&writer));
        epoch.catch_up(&reader, &mut seen).unwrap();
        assert_eq!(index_list(&reader, "u"), ["ui"]);
    }

    #[test]
    fn the_epoch_moves_only_when_the_version_does() {
        let epoch = SchemaEpoch::default();
        epoch.writer_at(Some(3));
        let first = epoch.epoch.load(Ordering::Relaxed);
        epoch.writer_at(Some(3));
        assert_eq!(epoch.epoch.load(Ordering::Relaxed), first);
        epoch.writer_at(Some(4));
        assert_eq!(epoch.epoch.load(Ordering::Relaxed), first + 1);
        epoch.writer_at(None);
        assert_eq!(epoch.epoch.load(Ordering::Relaxed), first + 2);
    }
}
