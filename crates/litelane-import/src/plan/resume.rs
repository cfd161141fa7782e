//! Progress of a resumable import (`--commit-every`), kept in the database
//! itself, in the table `_litelane_import`: one row per target table and
//! source file, updated in the same transaction as each batch of rows, so
//! what it says is always exactly what is committed. Each commit also
//! records where the last committed record ends and a hash of it, which
//! `--resume` checks before continuing.

use litelane::rusqlite::{self, params};
use litelane::Database;

use crate::error::Error;
use crate::plan::columns::Plan;

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
    /// Byte offset (in the decoded input) just after the last record
    /// committed; `None` before the first commit or for a record written
    /// by an older litelane.
    pub resume_end: Option<u64>,
    /// [`Batch::entry_hash`](crate::convert::batch::Batch::entry_hash) of that record.
    pub resume_hash: Option<u64>,
}

const COLUMNS: &str = "table_name, source, fingerprint, plan, records_read, rows_inserted, \
     rows_rejected, last_line, rejects_file, rejects_bytes, state, updated_at";

/// SQL that brings a progress table made by an older litelane (keyed by
/// table only, without the resume point) to the current layout; empty when
/// there is nothing to do.
pub fn migrate_sql(db: &Database) -> Result<Vec<String>, Error> {
    let (exists, current): (bool, bool) = db.read(|c| {
        let exists: bool = c.query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [TABLE],
            |r| r.get(0),
        )?;
        let current: bool = c.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = 'resume_hash'",
            [TABLE],
            |r| r.get(0),
        )?;
        Ok((exists, current))
    })?;
    if !exists || current {
        return Ok(Vec::new());
    }
    let t = litelane::quote_ident(TABLE);
    let old = litelane::quote_ident(&format!("{TABLE}_old"));
    Ok(vec![
        format!("ALTER TABLE {t} RENAME TO {old}"),
        create_sql(),
        format!("INSERT INTO {t} ({COLUMNS}) SELECT {COLUMNS} FROM {old}"),
        format!("DROP TABLE {old}"),
    ])
}

/// SQL that creates the progress table if needed.
pub fn create_sql() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
           table_name TEXT NOT NULL COLLATE NOCASE, \
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
           updated_at TEXT NOT NULL, \
           resume_end INTEGER, \
           resume_hash TEXT, \
           PRIMARY KEY (table_name, source))",
        litelane::quote_ident(TABLE)
    )
}

/// Writes `p` (inside the caller's transaction).
pub fn save(conn: &rusqlite::Connection, p: &Progress) -> rusqlite::Result<()> {
    let plan = serde_json::to_string(&p.plan).expect("a plan serializes");
    let sql = format!(
        "INSERT OR REPLACE INTO {} (table_name, source, fingerprint, plan, records_read, \
         rows_inserted, rows_rejected, last_line, rejects_file, rejects_bytes, state, updated_at, \
         resume_end, resume_hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, datetime('now'), ?12, ?13)",
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
        p.resume_end.map(|v| v as i64),
        p.resume_hash.map(|h| format!("{h:016x}")),
    ])?;
    Ok(())
}

/// The progress recorded for `table` (every source), oldest first.
pub fn load(db: &Database, table: &str) -> Result<Vec<Progress>, Error> {
    let rows = db.read(|c| {
        let exists: bool = c.query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [TABLE],
            |r| r.get(0),
        )?;
        if !exists {
            return Ok(Vec::new());
        }
        let has_point: bool = c.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = 'resume_hash'",
            [TABLE],
            |r| r.get(0),
        )?;
        let point = if has_point {
            "resume_end, resume_hash"
        } else {
            "NULL, NULL"
        };
        let sql = format!(
            "SELECT table_name, source, fingerprint, plan, records_read, rows_inserted, \
             rows_rejected, last_line, rejects_file, rejects_bytes, state, {point} FROM {} \
             WHERE table_name = ?1 ORDER BY updated_at, rowid",
            litelane::quote_ident(TABLE)
        );
        let mut stmt = c.prepare(&sql)?;
        let rows = stmt
            .query_map([table], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                    [r.get::<_, i64>(4)?, r.get(5)?, r.get(6)?, r.get(7)?],
                    r.get::<_, Option<String>>(8)?,
                    r.get::<_, i64>(9)?,
                    r.get::<_, String>(10)?,
                    r.get::<_, Option<i64>>(11)?,
                    r.get::<_, Option<String>>(12)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    })?;
    let mut out = Vec::with_capacity(rows.len());
    for (table, source, fingerprint, plan, n, rejects_file, rejects_bytes, state, end, hash) in rows
    {
        let plan: Plan = serde_json::from_str(&plan).map_err(|e| {
            Error::Input(format!(
                "the progress recorded in {TABLE} for table {} is unreadable: {e}",
                litelane::quote_ident(&table)
            ))
        })?;
        out.push(Progress {
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
            resume_end: end.map(|v| v as u64),
            resume_hash: hash.and_then(|h| u64::from_str_radix(&h, 16).ok()),
        });
    }
    Ok(out)
}
/// The last record an interrupted import committed, to check that the file
/// still has it at the same place before `--resume` continues after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePoint {
    /// Its number among the data records (1-based).
    pub record: u64,
    /// The byte offset just after it in the decoded input.
    pub end: u64,
    /// The entry hash of it (`Batch::entry_hash` of the convert layer).
    pub hash: u64,
}
