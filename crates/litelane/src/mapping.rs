//! The writer's memory map of the database, kept only while its process is
//! alone on the file.
//!
//! SQLite drops a connection's whole memory map (`munmap`) at the start of
//! every read transaction that finds the database changed by another
//! connection, and maps it again page by page (a page fault each); an
//! `munmap` also interrupts every other core that ran a thread of the
//! process (a TLB shoot-down). A writer that takes turns with other
//! processes finds the database changed at nearly every transaction. In a
//! whole-system profile of 8 single-threaded `safe` Python workers,
//! `munmap` from `sqlite3PagerSharedLock` was 3.1% of all CPU time and page
//! faults 2.8%; without the map the workers ran 3–21% faster (median of
//! four alternating pairs: 14%). Alone on the file, a writer never finds the
//! database changed by anyone else, and the map saves copying pages (about
//! 2% faster for one worker).
//!
//! So under `safe` with the cross-process queue, where a process hands the
//! turn on after each transaction while others are present, the writer
//! maps the database (`Options::mmap_size`) only while no other process has
//! it open, and looks when it takes the cross-process turn from the queue:
//! a turn it kept since its last write means nobody else wrote meanwhile.
//! Under `balanced` a process keeps the turn for several transactions (turn
//! cohorting), only the first of which finds the database changed, and the
//! writer keeps its map: without it, 4 balanced workers measured slower in
//! four of five alternating pairs (median 0.92×; 8 workers: 1.06×). Readers
//! of the pool keep their map.

use rusqlite::Connection;

/// What the writer's connection maps, and what it may.
pub(crate) struct Mapping {
    /// `PRAGMA mmap_size` as configured (bytes; 0: never map).
    configured: i64,
    /// Whether the connection maps `configured` bytes now (else 0).
    on: bool,
}

impl Mapping {
    /// The mapping `conn` has now, as configured.
    pub fn of(conn: &Connection) -> Mapping {
        let configured = conn
            .query_row("PRAGMA mmap_size", [], |r| r.get::<_, i64>(0))
            .unwrap_or(0);
        Mapping {
            configured,
            on: configured > 0,
        }
    }

    /// Maps the database while `others_present()` is false, and not while
    /// it is true; asks only when mapping is configured at all. A failed
    /// `PRAGMA` leaves the mapping as it was (it only costs speed).
    pub fn fit(&mut self, conn: &Connection, others_present: impl FnOnce() -> bool) {
        if self.configured <= 0 {
            return;
        }
        let want = !others_present();
        if want == self.on {
            return;
        }
        let size = if want { self.configured } else { 0 };
        if conn
            .execute_batch(&format!("PRAGMA mmap_size = {size}"))
            .is_ok()
        {
            self.on = want;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap_size(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA mmap_size", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn maps_only_while_alone_and_never_when_not_configured() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("m.db")).unwrap();
        conn.execute_batch("PRAGMA mmap_size = 1048576").unwrap();
        let mut m = Mapping::of(&conn);
        m.fit(&conn, || false);
        assert_eq!(mmap_size(&conn), 1_048_576, "alone: mapped");
        m.fit(&conn, || true);
        assert_eq!(mmap_size(&conn), 0, "others present: not mapped");
        m.fit(&conn, || true);
        assert_eq!(mmap_size(&conn), 0);
        m.fit(&conn, || false);
        assert_eq!(mmap_size(&conn), 1_048_576, "alone again: mapped again");

        conn.execute_batch("PRAGMA mmap_size = 0").unwrap();
        let mut never = Mapping::of(&conn);
        never.fit(&conn, || panic!("not asked when mapping is off"));
        assert_eq!(mmap_size(&conn), 0);
    }
}
