//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use litelane::{Database, Options};

/// A database in a fresh temporary directory (kept alive by the returned guard).
pub fn temp_db(opts: Options) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = Database::open(dir.path().join("test.db"), opts).expect("open");
    (dir, db)
}

/// Runs one `SELECT` returning an integer on a reader.
pub fn query_i64(db: &Database, sql: &str) -> i64 {
    db.read(|c| Ok(c.query_row(sql, [], |r| r.get(0))?))
        .expect(sql)
}

/// Runs statements in one write transaction.
pub fn exec(db: &Database, sql: &str) {
    db.write(|tx| Ok(tx.execute_batch(sql)?)).expect(sql);
}

/// Polls `cond` every 10 ms until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// Waits until `n` writers are queued behind the current holder.
pub fn wait_for_queue_depth(db: &Database, n: usize) {
    assert!(
        eventually(Duration::from_secs(10), || db.metrics().queue_depth >= n),
        "queue never reached depth {n}"
    );
}
