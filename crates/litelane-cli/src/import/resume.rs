//! Progress of a resumable import (`--commit-every`), kept in the database
//! itself, in the table `_litelane_import`: one row per target table,
//! updated in the same transaction as each batch of rows, so what it says is
//! always exactly what is committed.

use litelane::rusqlite::{self, params, OptionalExtension};
use litelane::Database;

use super::convert::Plan;
use crate::error::CliError;

/// The progress table.
pub const TABLE: &str = "_litelane_import";

/// `state` of an import still going (or killed).
pub const RUNNING: &str = "running";
/// `state` of an import that finished.
pub const DONE: &str = "done";

/// One import's progress as of its last commit.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The target table.
    pub table: String,
    /// The input as given on the command line.
    pub source: String,
    /// The input's fingerprint (`None` for stdin: cannot be resumed).
    pub fingerprint: Option<String>,
    /// How records become rows.
    pub plan: Plan,
    /// Input records consumed (stored or rejected).
    pub records_read: u64,
    /// Rows stored.
    pub rows_inserted: u64,
    /// Records rejected.
    pub rows_rejected: u64,
    /// Input line of the last record consumed.
    pub last_line: u64,
    /// The rejects file, if any.
    pub rejects_file: Option<String>,
    /// Its length at the last commit.
    pub rejects_bytes: u64,
    /// [`RUNNING`] or [`DONE`].
    pub state: String,
}

/// SQL that creates the progress table if needed.
pub fn create_sql() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
           table_name TEXT PRIMARY KEY COLLATE NOCASE, \
           source TEXT NOT NULL, \
           fingerprint TEXT, \
           plan TEXT NOT NULL, \
           records_read INTEGER NOT NULL, \
           rows_inserted INTEGER NOT NULL, \
           rows_rejected INTEGER NOT NULL, \
           last_line INTEGER NOT NULL, \
           rejects_file TEXT, \
           rejects_bytes INTEGER NOT NULL, \
           state TEXT NOT NULL, \
           updated_at TEXT NOT NULL)",
        litelane::quote_ident(TABLE)
    )
}

/// Writes `p` (inside the caller's transaction).
pub fn save(conn: &rusqlite::Connection, p: &Progress) -> rusqlite::Result<()> {
    let plan = serde_json::to_string(&p.plan).expect("a plan serializes");
    let sql = format!(
        "INSERT OR REPLACE INTO {} (table_name, source, fingerprint, plan, records_read, \
         rows_inserted, rows_rejected, last_line, rejects_file, rejects_bytes, state, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, datetime('now'))",
        litelane::quote_ident(TABLE)
    );
    conn.prepare_cached(&sql)?.execute(params![
        p.table,
        p.source,
        p.fingerprint,
        plan,
        p.records_read as i64,
        p.rows_inserted as i64,
        p.rows_rejected as i64,
        p.last_line as i64,
        p.rejects_file,
        p.rejects_bytes as i64,
        p.state,
    ])?;
    Ok(())
}

/// The progress recorded for `table`, if any.
pub fn load(db: &Database, table: &str) -> Result<Option<Progress>, CliError> {
    let found = db.read(|c| {
        let exists: bool = c.query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [TABLE],
            |r| r.get(0),
        )?;
        if !exists {
            return Ok(None);
        }
        let sql = format!(
            "SELECT table_name, source, fingerprint, plan, records_read, rows_inserted, \
             rows_rejected, last_line, rejects_file, rejects_bytes, state FROM {} \
             WHERE table_name = ?1",
            litelane::quote_ident(TABLE)
        );
        Ok(c.query_row(&sql, [table], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                [r.get::<_, i64>(4)?, r.get(5)?, r.get(6)?, r.get(7)?],
                r.get::<_, Option<String>>(8)?,
                r.get::<_, i64>(9)?,
                r.get::<_, String>(10)?,
            ))
        })
        .optional()?)
    })?;
    let Some((table, source, fingerprint, plan, n, rejects_file, rejects_bytes, state)) = found
    else {
        return Ok(None);
    };
    let plan: Plan = serde_json::from_str(&plan).map_err(|e| {
        CliError::Input(format!(
            "the progress recorded in {TABLE} for table {} is unreadable: {e}",
            litelane::quote_ident(&table)
        ))
    })?;
    Ok(Some(Progress {
        table,
        source,
        fingerprint,
        plan,
        records_read: n[0] as u64,
        rows_inserted: n[1] as u64,
        rows_rejected: n[2] as u64,
        last_line: n[3] as u64,
        rejects_file,
        rejects_bytes: rejects_bytes as u64,
        state,
    }))
}
